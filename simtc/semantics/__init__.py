"""The one semantics layer: what each :mod:`simtc.isa` record does to a CTA's state.

* :class:`Cta` -- shared memory, Tensor Memory, global tensors, mbarriers, named barriers,
  per-warp registers; :meth:`Cta.observe` sees every shared-memory / TMEM access.
* :func:`execute` -- apply one record (one free function per record type).
* :func:`run_program` -- run a whole :class:`simtc.isa.Program` untimed (roles interleaved at
  their waits).
* :func:`register_effect` -- the numpy effects :class:`simtc.isa.cuda_core.CudaCoreBlock` names.
"""

from simtc.semantics.cta import (
    Cta,
    MbarrierState,
    NamedBarrierState,
    SemanticsError,
    SmemRegion,
    TmemRegion,
    WouldBlock,
)
from simtc.semantics.execute import EFFECTS, execute, register_effect
from simtc.semantics.run import run_program

__all__ = [
    "EFFECTS",
    "Cta",
    "MbarrierState",
    "NamedBarrierState",
    "SemanticsError",
    "SmemRegion",
    "TmemRegion",
    "WouldBlock",
    "execute",
    "register_effect",
    "run_program",
]
