"""Instructions as data: frozen PTX records and :class:`Program` values (no machine state).

Each record is an attrs ``@frozen`` :class:`Instr` named after its PTX instruction, with PTX's
operand names; it has ``ptx()``, ``to_json()`` / ``from_json()`` (exact round trip;
:func:`record_from_json` dispatches on the ``"op"`` tag) and ``footprint(warp)``: the shared-memory
byte ranges, TMEM rectangles, registers and barriers it touches, computed from its fields alone.
Fields are validated at construction (:class:`IsaError` and the other ``SimtcError``
subclasses, naming the rule and the PTX section). The semantics layer executes records; the
engine, renderers, hardware path and CLI read them. This package loads no memory model,
semantics, renderer, hardware path, CLI, rich or cupy (``tests/isa`` checks it).

Decisions on the open points of the design (names as in the design contract):

* ``label`` is keyword-only on every record (attrs inheritance: it lives on :class:`Instr`).
* Every PTX line ends with ``;``. Operands are shown as values: TMEM addresses as
  ``0x%08x``, descriptors as hex words, mbarriers by name (``[qk_done[0]]``), registers by name;
  the predicate operands ``enable-input-d`` (tcgen05.mma) and ``scale-d`` (wgmma) as ``0``/``1``
  (a real kernel passes a predicate register set from that value).
* ``Mma.collector``: ``"discard"`` is the default (no qualifier printed; ``b0::discard`` for ``.ws``,
  ``a::discard`` otherwise); ``.ws`` also takes ``"b0::fill"`` ... ``"b3::discard"``, non-``.ws``
  ``"a::fill"`` ... ``"a::discard"`` (:data:`COLLECTORS_WS`, :data:`COLLECTORS_MMA`). Sparse
  instruction descriptors are refused (the record has no metadata operand), and neither
  ``disable-output-lane``, ``scale-input-d`` nor a zero-column mask is carried.
* ``Mma`` JSON: ``idesc`` as its hex word plus a ``"kind"`` key (the word does not encode the kind).
  Descriptors: hex words (sm100; ``WgmmaMmaAsync`` sm90). ``Mma.a``: an int (TMEM address) or a
  hex string (descriptor). ``WgmmaMmaAsync.a``: ``{"desc": hex}`` or ``{"regs": name}``.
* ``Ld`` / ``St`` take ``lane_base`` (``"warp"``: the lane field is quadrant-relative, 0 or 16;
  ``"absolute"``) and ``imm`` (``.16x32bx2``'s immHalfSplitoff, default as
  :class:`simtc.tmem.ldst.LdStOp`). ``Ld.footprint(warp)`` applies the quadrant.
* ``CpAsyncBulkTensor.coords=()`` means "not recorded": the PTX line shows ``Nd`` and ``{...}``;
  ``dst`` must be 128-byte aligned, ``nbytes`` a positive multiple of 16. ``CpAsyncBulk`` has an
  extra ``dst: str`` (the global destination's name). Opcodes of the bulk-group records:
  ``"cp.async.bulk.commit_group"``, ``"cp.async.bulk.wait_group.read"``.
* ``BarSync`` / ``BarArrive`` hold the hardware barrier id (FlashMLA's values + 8); their footprint
  names the barrier ``"named[<id>]"`` (:func:`named_barrier_key`). ``FenceProxyAsync`` has
  ``state_space`` (default ``"shared::cta"``; ``""`` = the plain form).
* ``LdShared`` / ``StShared`` have ``offsets`` (explicit per-thread offsets from ``addr``, e.g.
  pre-swizzled addresses); otherwise thread i uses ``addr + i * stride``. Their footprint is the
  whole record's (all ``threads``), independent of ``warp``.
* ``WgmmaMmaAsync(m, n, k, dtype, a, b_desc, scale_d, d, d_dtype="fp32", a_major="K", b_major="K",
  scale_a=1, scale_b=1)``.
* ``CudaCoreBlock`` declares its footprint with ``smem_reads``, ``smem_writes``, ``tmem_reads``,
  ``tmem_writes``, ``regs_read``, ``regs_written``, ``barriers`` and ``proxy``.
* ``Role.threads`` is always an int after construction (default ``32 * len(warps)``).
  ``Program.counts(per_warp=True)`` multiplies the non-elected records by the role's warp count.
  ``Program.from_json`` checks the JSON's ``"counts"`` against the records.
* Footprint helpers are cached (``functools.lru_cache``) on descriptor words / record fields.
* ``is_async`` / ``elected`` classification: async = ``tcgen05.mma/cp/ld/st``,
  ``cp.async.bulk[.tensor]``, ``wgmma.mma_async``; elected (one thread issues) = ``tcgen05.mma/cp/commit``,
  ``mbarrier.init``, ``mbarrier.arrive.expect_tx``, TMA and bulk copies and their group ops.

>>> from simtc.isa import Mma, InstrDescriptor, SmemDescriptor
>>> b = SmemDescriptor(start=73728, lbo=16, sbo=1024, layout_type="SW128")
>>> mma = Mma(400, 256, b, InstrDescriptor.from_u32(0x04200490), False, ws=True)
>>> mma.opcode, mma.form
('tcgen05.mma.ws', 'TS')
>>> mma.ptx()
'tcgen05.mma.ws.cta_group::1.kind::f16 [0x00000190], [0x00000100], 0x4000404000011200, 0x04200490, 0;'
"""

from simtc.isa.base import REGISTRY, Instr, IsaError, record_from_json, register
from simtc.isa.cuda_core import CudaCoreBlock
from simtc.isa.footprint import Footprint, SmemRange, TmemRect
from simtc.isa.idesc import InstrDescriptor
from simtc.isa.mbarrier import MbarrierArrive, MbarrierArriveExpectTx, MbarrierInit, MbarrierInval, MbarrierTryWait
from simtc.isa.program import OPCODES, Barrier, Program, Role
from simtc.isa.shared import LdShared, StShared
from simtc.isa.sync import BarArrive, BarSync, ElectSync, FenceProxyAsync, named_barrier_key
from simtc.isa.tcgen05 import (
    COLLECTORS_MMA,
    COLLECTORS_WS,
    Alloc,
    Commit,
    Cp,
    Dealloc,
    FenceAfterThreadSync,
    FenceBeforeThreadSync,
    Ld,
    Mma,
    RelinquishAllocPermit,
    Shift,
    St,
    WaitLd,
    WaitSt,
)
from simtc.isa.tma import BulkCommitGroup, BulkWaitGroupRead, CpAsyncBulk, CpAsyncBulkTensor, CpAsyncBulkTensorStore
from simtc.isa.wgmma import WgmmaCommitGroup, WgmmaFence, WgmmaMmaAsync, WgmmaWaitGroup
from simtc.smem.desc import SmemDescriptor

__all__ = [
    "COLLECTORS_MMA",
    "COLLECTORS_WS",
    "OPCODES",
    "REGISTRY",
    "Alloc",
    "BarArrive",
    "BarSync",
    "Barrier",
    "BulkCommitGroup",
    "BulkWaitGroupRead",
    "Commit",
    "Cp",
    "CpAsyncBulk",
    "CpAsyncBulkTensor",
    "CpAsyncBulkTensorStore",
    "CudaCoreBlock",
    "Dealloc",
    "ElectSync",
    "FenceAfterThreadSync",
    "FenceBeforeThreadSync",
    "FenceProxyAsync",
    "Footprint",
    "Instr",
    "InstrDescriptor",
    "IsaError",
    "Ld",
    "LdShared",
    "MbarrierArrive",
    "MbarrierArriveExpectTx",
    "MbarrierInit",
    "MbarrierInval",
    "MbarrierTryWait",
    "Mma",
    "Program",
    "RelinquishAllocPermit",
    "Role",
    "Shift",
    "SmemDescriptor",
    "SmemRange",
    "St",
    "StShared",
    "TmemRect",
    "WaitLd",
    "WaitSt",
    "WgmmaCommitGroup",
    "WgmmaFence",
    "WgmmaMmaAsync",
    "WgmmaWaitGroup",
    "named_barrier_key",
    "record_from_json",
    "register",
]
