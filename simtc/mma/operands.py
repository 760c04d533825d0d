"""Reading MMA operands out of shared memory through descriptors (the one shared path).

``tcgen05.mma`` and ``wgmma`` read A and B the same way: the descriptor reading of
:func:`simtc.smem.descriptor_addresses` gives the byte address of every (row, k) element, and
the bytes there are the operand's bit patterns. Both instruction models and the hardware
cross-check use this module, so a wrong descriptor reads exactly what the hardware would.

>>> from simtc.smem import CanonicalLayout, SharedMemory
>>> sm = SharedMemory(); t = CanonicalLayout("bf16", "K", "SW128", 64, 64)
>>> sm.write_tile(t, np.eye(64, dtype=np.float32), 0)
>>> a = read_operand(sm, t.descriptor(k_slice=1), major="K", dtype="bf16", rows=64, k=16)
>>> a.shape, float(a[16, 0]), float(a[16, 1])
((64, 16), 1.0, 0.0)
"""

from __future__ import annotations

import numpy as np

from simtc.numerics.formats import decode_bits, dtype_info
from simtc.smem.desc import SmemDescriptor
from simtc.smem.memory import SharedMemory
from simtc.smem.read import read_bits

__all__ = ["read_operand", "read_operand_bits"]


def read_operand_bits(smem: SharedMemory, desc: SmemDescriptor | int, *, major: str, dtype: str, rows: int,
                      k: int, base_offset_hypothesis: str | None = None) -> np.ndarray:
    """Bit patterns (rows x k) the hardware reads through ``desc`` (an int is decoded for ``smem.arch``)."""
    return read_bits(smem, desc, major=major, elem_bytes=dtype_info(dtype).bytes, rows=rows, k=k,
                     base_offset_hypothesis=base_offset_hypothesis).astype(dtype_info(dtype).container)


def read_operand(smem: SharedMemory, desc: SmemDescriptor | int, *, major: str, dtype: str, rows: int,
                 k: int, base_offset_hypothesis: str | None = None) -> np.ndarray:
    """Operand values (rows x k, float32) the hardware reads through ``desc``."""
    bits = read_operand_bits(smem, desc, major=major, dtype=dtype, rows=rows, k=k,
                             base_offset_hypothesis=base_offset_hypothesis)
    return decode_bits(bits, dtype)
