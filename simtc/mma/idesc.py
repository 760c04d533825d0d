"""The ``tcgen05.mma`` instruction descriptor: moved to :mod:`simtc.isa.idesc` (re-exported here).

>>> from simtc.mma.idesc import InstrDescriptor
>>> InstrDescriptor.from_u32(0x04200490).n
128
"""

from simtc.isa.idesc import FORMAT_CODES, KINDS, InstrDescriptor

__all__ = ["FORMAT_CODES", "KINDS", "InstrDescriptor"]
