"""``tcgen05`` records: alloc/dealloc/relinquish, cp, mma, commit, ld, st, wait, fence (PTX ISA 9.0 §9.7.16).

Only ``.cta_group::1`` is modelled. PTX ISA 9.0 sections: §9.7.16.1.2 and §9.7.16.7.1 (allocation),
§9.7.16.8.1 (lane quadrants), §9.7.16.10.5, §9.7.16.2.1 and §9.7.16.10.9.1 (layouts, shapes, collectors),
§9.7.16.8.3-§9.7.16.8.4 (ld/st), §9.7.16.9.2 (cp), §9.7.16.12.1 (commit), §9.7.16.11.1 and §9.7.16.6
(waits, fences, ordering).

>>> from simtc.smem.desc import SmemDescriptor
>>> q = SmemDescriptor(start=0, lbo=16, sbo=1024, layout_type="SW128")
>>> Cp(taddr=256, desc=q).ptx()
'tcgen05.cp.cta_group::1.128x256b [0x00000100], 0x4000404000010000;'
>>> Ld(taddr=400, shape="32x32b", num=32, dst="p").footprint(warp=2).tmem_reads
(TmemRect(lane0=64, lanes=32, col0=400, cols=32),)
"""

from __future__ import annotations

import functools
from typing import ClassVar

import numpy as np
from attrs import field, frozen

from simtc.errors import LaneQuadrantError, ShapeError, TmemAccessError, TmemAllocError, TmemShapeError
from simtc.isa.base import (
    Instr,
    IsaError,
    as_bool,
    as_int,
    as_opt_int,
    desc_field,
    fail,
    name_str,
    nonneg,
    register,
)
from simtc.isa.footprint import (
    Footprint,
    SmemRange,
    TmemRect,
    coalesce,
    descriptor_ranges,
    lane_runs,
    merge_ranges,
)
from simtc.isa.idesc import InstrDescriptor
from simtc.numerics.formats import DTYPES
from simtc.smem.desc import SmemDescriptor
from simtc.smem.layout import INSTR_K_BYTES
from simtc.tmem.address import COLUMNS, LANES, QUADRANT_LANES, unpack_taddr
from simtc.tmem.cp import cp_shape
from simtc.tmem.layouts import DataPathLayout, datapath_layout
from simtc.tmem.ldst import LdStOp

__all__ = [
    "ALLOC_NCOLS",
    "COLLECTORS_MMA",
    "COLLECTORS_WS",
    "Alloc",
    "Commit",
    "Cp",
    "Dealloc",
    "FenceAfterThreadSync",
    "FenceBeforeThreadSync",
    "Ld",
    "Mma",
    "RelinquishAllocPermit",
    "Shift",
    "St",
    "WaitLd",
    "WaitSt",
]

ALLOC_NCOLS = tuple(32 << i for i in range(5))
"""``tcgen05.alloc`` column counts: a power of two, 32 ... 512 (PTX ISA 9.0 §9.7.16.1.2, §9.7.16.7.1)."""
_REF_ALLOC = "PTX ISA 9.0 §9.7.16.7.1"
_REF_MMA = "PTX ISA 9.0 §9.7.16.10.9"
_REF_LDST = "PTX ISA 9.0 §9.7.16.8.3 (tcgen05.ld) / §9.7.16.8.4 (tcgen05.st)"
_REF_QUAD = "PTX ISA 9.0 §9.7.16.8.1"
_REF_CP = "PTX ISA 9.0 §9.7.16.9.2"
_OPS = ("fill", "use", "lastuse", "discard")
COLLECTORS_WS = ("discard", *(f"b{i}::{o}" for i in range(4) for o in _OPS))
"""``.ws`` collector usages: ``"discard"`` = the default (``b0::discard``, no qualifier printed), or
``b0``-``b3`` with fill/use/lastuse/discard (PTX ISA 9.0 §9.7.16.10.9.1 ``.collector_usage``)."""
COLLECTORS_MMA = ("discard", *(f"a::{o}" for o in _OPS))
"""Non-``.ws`` collector usages: ``"discard"`` = the default, or ``a::fill/use/lastuse/discard``."""


def _taddr(value) -> int:
    v = as_int(value)
    unpack_taddr(v)  # bits outside the 128 x 512 address space raise TmemAccessError
    return v


def _taddr_field(**kw):
    return field(converter=_taddr, **kw)


def _in_tmem(lane0: int, lanes: int, col0: int, cols: int, what: str) -> None:
    if lane0 + lanes > LANES or col0 + cols > COLUMNS:
        raise TmemAccessError(f"{what}: lanes {lane0}-{lane0 + lanes - 1} x columns {col0}-{col0 + cols - 1} "
                              f"leave Tensor Memory ({LANES} lanes x {COLUMNS} columns)",
                              rule="TMEM has 128 lanes x 512 columns", ref="PTX ISA 9.0 §9.7.16.1")


def _rects(lanes: np.ndarray, col0: int, cols: int) -> tuple[TmemRect, ...]:
    return tuple(TmemRect(l0, n, col0, cols) for l0, n in lane_runs(lanes))


# ---- allocation ----------------------------------------------------------------------------------------
def _ncols(inst, attribute, value) -> None:
    if value not in ALLOC_NCOLS:
        fail(f"{type(inst).__name__}: ncols = {value} is not a power of two from 32 to 512",
             rule="tcgen05.alloc ncols is a power of 2, >= 32 and <= 512", ref=_REF_ALLOC, error=TmemAllocError)


@register
@frozen
class Alloc(Instr):
    """``tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [dst], ncols;`` (one whole warp).

    Writes the allocated TMEM address (a 32-bit word) to shared memory at ``dst``.
    """

    op: ClassVar[str] = "tcgen05.alloc"
    opcode: ClassVar[str] = "tcgen05.alloc"
    ncols: int = field(converter=as_int, validator=_ncols)
    dst: int = field(converter=as_int, validator=nonneg)

    def __attrs_post_init__(self) -> None:
        if self.dst % 4:
            fail(f"tcgen05.alloc dst {self.dst} is not 4-byte aligned (it receives a .b32 address)",
                 rule="tcgen05.alloc dst is a 4-byte aligned shared-memory word", ref=_REF_ALLOC)

    def ptx(self) -> str:
        return f"tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [{self.dst:#x}], {self.ncols};"

    def footprint(self, warp: int = 0) -> Footprint:
        # the address is written to shared memory; which proxy does it is not documented [assumed generic]
        return Footprint(smem_writes=(SmemRange(self.dst, self.dst + 4),))


@register
@frozen
class Dealloc(Instr):
    """``tcgen05.dealloc.cta_group::1.sync.aligned.b32 taddr, ncols;`` (one whole warp)."""

    op: ClassVar[str] = "tcgen05.dealloc"
    opcode: ClassVar[str] = "tcgen05.dealloc"
    taddr: int = _taddr_field()
    ncols: int = field(converter=as_int, validator=_ncols)

    def __attrs_post_init__(self) -> None:
        lane, col = unpack_taddr(self.taddr)
        if lane:
            fail(f"tcgen05.dealloc taddr {self.taddr:#010x} has lane {lane}; an allocation starts at lane 0",
                 rule="allocated addresses have lane field 0", ref="PTX ISA 9.0 §9.7.16.7.1", error=TmemAllocError)
        _in_tmem(0, LANES, col, self.ncols, "tcgen05.dealloc")

    def ptx(self) -> str:
        return f"tcgen05.dealloc.cta_group::1.sync.aligned.b32 {self.taddr:#010x}, {self.ncols};"


@register
@frozen
class RelinquishAllocPermit(Instr):
    """``tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;``: no further alloc by this CTA."""

    op: ClassVar[str] = "tcgen05.relinquish_alloc_permit"
    opcode: ClassVar[str] = "tcgen05.relinquish_alloc_permit"
    ptx_line: ClassVar[str] = "tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;"


# ---- cp ------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1024)
def _cp_footprint(taddr: int, word: int, shape: str, multicast: str | None) -> Footprint:
    cs = cp_shape(shape, multicast)
    lane, col = unpack_taddr(taddr)
    # as simtc.tmem.cp.source_words: 4-byte elements, K-major, a 4-row source is the top of an 8-row group
    reads = descriptor_ranges(word, "sm100", "K", 4, max(cs.rows, 8), cs.columns, cs.rows)
    writes = _rects(lane + cs.lanes().ravel(), col, cs.columns)
    return Footprint(smem_reads=reads, tmem_writes=writes, proxy="async")


@register
@frozen
class Cp(Instr):
    """``tcgen05.cp.cta_group::1.<shape>[.<multicast>] [taddr], s-desc;`` (one thread, asynchronous).

    ``shape`` and ``multicast`` as in :data:`simtc.tmem.cp.CP_SHAPES` (``"128x256b"``,
    ``"64x128b"`` + ``"warpx2::02_13"``, ...). ``desc`` is the sm100 source descriptor.
    """

    op: ClassVar[str] = "tcgen05.cp"
    opcode: ClassVar[str] = "tcgen05.cp"
    is_async: ClassVar[bool] = True
    elected: ClassVar[bool] = True
    taddr: int = _taddr_field()
    desc: SmemDescriptor = desc_field()  # noqa: RUF009
    shape: str = field(default="128x256b")
    multicast: str | None = field(default=None)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.shape, str) or "." in self.shape:
            fail(f"tcgen05.cp shape {self.shape!r}: give the shape alone and the multicast in 'multicast'",
                 rule="tcgen05.cp shape and multicast are separate fields", ref=_REF_CP, error=TmemShapeError)
        cs = cp_shape(self.shape, self.multicast)  # raises TmemShapeError naming the rule
        if cs.shape != self.shape or cs.multicast != self.multicast:
            fail(f"tcgen05.cp shape/multicast must be written as in the table: {cs.shape!r}, {cs.multicast!r}",
                 rule="canonical tcgen05.cp shape names", ref=_REF_CP, error=TmemShapeError)
        lane, col = unpack_taddr(self.taddr)
        lanes = lane + cs.lanes()
        _in_tmem(int(lanes.min()), int(lanes.max()) - int(lanes.min()) + 1, col, cs.columns, cs.ptx())

    @property
    def nbytes(self) -> int:
        """Source bytes copied (rows x columns x 4)."""
        cs = cp_shape(self.shape, self.multicast)
        return cs.rows * cs.columns * 4

    def ptx(self) -> str:
        return f"{cp_shape(self.shape, self.multicast).ptx()} [{self.taddr:#010x}], {self.desc.hex()};"

    def footprint(self, warp: int = 0) -> Footprint:
        return _cp_footprint(self.taddr, self.desc.encode(), self.shape, self.multicast)


# ---- shift ---------------------------------------------------------------------------------------------
SHIFT_COLUMNS = 8
"""Columns one ``tcgen05.shift`` moves per lane: a 32-byte element (8 x 32-bit cells), PTX ISA 9.0 §9.7.16.9.3."""


@functools.lru_cache(maxsize=256)
def _shift_footprint(taddr: int) -> Footprint:
    lane, col = unpack_taddr(taddr)
    rect = (TmemRect(lane, LANES - lane, col, SHIFT_COLUMNS),)
    return Footprint(tmem_reads=rect, tmem_writes=rect, proxy="async")


@register
@frozen
class Shift(Instr):
    """``tcgen05.shift.cta_group::1.down [taddr];`` (one thread, asynchronous): each lane's 32-byte element at
    ``taddr`` moves one lane down (PTX ISA 9.0 §9.7.16.9.3). Its footprint reads and writes the element's 8 columns
    in every lane from ``taddr``'s lane to 127 [assumed: PTX names the direction and the element size, not which
    lanes take part, so the whole column strip below ``taddr`` is taken]; it is tracked by ``tcgen05.commit`` like
    an MMA or a ``cp`` (§9.7.16.12.1). The semantics layer does not move data for it (timing and checking only)."""

    op: ClassVar[str] = "tcgen05.shift"
    opcode: ClassVar[str] = "tcgen05.shift"
    is_async: ClassVar[bool] = True
    elected: ClassVar[bool] = True
    taddr: int = _taddr_field()

    def __attrs_post_init__(self) -> None:
        lane, col = unpack_taddr(self.taddr)
        if lane % QUADRANT_LANES:
            raise TmemAccessError(f"tcgen05.shift at lane {lane}: the matrix starts at a lane quadrant (0, 32, 64, 96)",
                                  rule="tcgen05.shift starts at a quadrant [assumed]", ref="PTX ISA 9.0 §9.7.16.9.3")
        _in_tmem(lane, LANES - lane, col, SHIFT_COLUMNS, "tcgen05.shift")

    @property
    def nbytes(self) -> int:
        """Bytes moved: 32 per lane."""
        return 32 * (LANES - unpack_taddr(self.taddr)[0])

    def ptx(self) -> str:
        return f"tcgen05.shift.cta_group::1.down [{self.taddr:#010x}];"

    def footprint(self, warp: int = 0) -> Footprint:
        return _shift_footprint(self.taddr)


# ---- mma -----------------------------------------------------------------------------------------------
def _elem_bytes(fmt: str) -> int:
    if fmt in ("u8", "s8"):
        return 1
    if fmt not in DTYPES:
        raise IsaError(f"shared-memory footprints of {fmt} operands are not modelled",
                       rule="modelled operand formats", ref=_REF_MMA)
    return DTYPES[fmt].bytes


def _mma_layout(d: InstrDescriptor, ws: bool, lane_align: int) -> DataPathLayout:
    try:
        return datapath_layout(d.m, d.n, ws=ws, lane_align=lane_align)
    except ShapeError as e:
        raise ShapeError(f"tcgen05.mma{'.ws' if ws else ''} M={d.m} N={d.n}: {e.message}", rule=e.rule,
                         ref=e.ref or "PTX ISA 9.0 §9.7.16.2.1 Table 39") from None


@functools.lru_cache(maxsize=4096)
def _mma_footprint(d_taddr: int, a: int | None, a_word: int | None, b_word: int, idesc: InstrDescriptor, ws: bool,
                   enable_input_d: bool) -> Footprint:
    d_lane, d_col = unpack_taddr(d_taddr)
    layout = _mma_layout(idesc, ws, d_lane if (not ws and idesc.m == 64) else 0)
    eb_a, eb_b = _elem_bytes(idesc.a_format), _elem_bytes(idesc.b_format)
    reads = descriptor_ranges(b_word, "sm100", idesc.b_major, eb_b, idesc.n, INSTR_K_BYTES // eb_b)
    tmem_reads: list[TmemRect] = []
    if a_word is not None:
        reads = merge_ranges(reads, descriptor_ranges(a_word, "sm100", idesc.a_major, eb_a, layout.rows,
                                                      INSTR_K_BYTES // eb_a))
    else:
        a_col = unpack_taddr(a)[1]
        lanes = layout.a_lanes(np.arange(layout.rows))  # Layout F's lane alignment (= a_lane) is included
        tmem_reads += _rects(lanes.ravel(), a_col, INSTR_K_BYTES // 4)  # one K step = 32 bytes = 8 columns
    d_lanes = layout.lanes()
    d_rects = _rects(d_lanes, d_col, layout.columns)
    if enable_input_d:
        tmem_reads += d_rects
    return Footprint(smem_reads=reads, tmem_reads=tuple(tmem_reads), tmem_writes=d_rects, proxy="async")


def _collector(inst, attribute, value) -> None:
    legal = COLLECTORS_WS if inst.ws else COLLECTORS_MMA
    if value not in legal:
        fail(f"tcgen05.mma{'.ws' if inst.ws else ''} collector usage {value!r} is not legal; use one of "
             f"{', '.join(legal)}",
             rule=".ws: .collector::b0-b3::{fill,use,lastuse,discard}; otherwise .collector::a::{...}",
             ref="PTX ISA 9.0 §9.7.16.10.9.1 (.collector_usage)")


def _mma_a(value):
    if isinstance(value, SmemDescriptor):
        return value
    return _taddr(value)


def _idesc(value) -> InstrDescriptor:
    if isinstance(value, InstrDescriptor):
        return value
    return InstrDescriptor.from_u32(value)


@register
@frozen
class Mma(Instr):
    """``tcgen05.mma[.ws].cta_group::1.kind::<kind>[.collector::...] [d-tmem], a, b-desc, idesc, enable-input-d;``

    ``a`` is a TMEM address (int: the TS form) or an sm100 descriptor (the SS form). The kind
    comes from ``idesc``. Validated at construction: the shape (Layout D/E/F/G), D's lane
    alignment (0; Layout F: 0 or 16, with A at the same lane), TS needs a K-major A, the
    collector usage, and that D and A lie inside TMEM. Not carried (so not allowed): sparsity
    (needs a metadata operand), ``disable-output-lane``, ``scale-input-d``, a zero-column mask.
    """

    op: ClassVar[str] = "tcgen05.mma"
    is_async: ClassVar[bool] = True
    elected: ClassVar[bool] = True
    d_taddr: int = _taddr_field()
    a: int | SmemDescriptor = field(converter=_mma_a, metadata={"codec": "desc_or_taddr"})
    b_desc: SmemDescriptor = desc_field()  # noqa: RUF009
    idesc: InstrDescriptor = field(converter=_idesc, metadata={"codec": "idesc"})
    enable_input_d: bool = field(converter=as_bool)
    ws: bool = field(default=False, converter=as_bool)
    collector: str = field(default="discard", validator=_collector)

    def __attrs_post_init__(self) -> None:
        d = self.idesc
        if d.sparse:
            fail("sparse tcgen05.mma needs a sparsity-metadata operand, which this record does not carry",
                 rule="modelled tcgen05.mma variants are dense", ref=_REF_MMA)
        if isinstance(self.a, SmemDescriptor) and self.a.arch != "sm100":
            fail("tcgen05.mma A descriptor must be an sm100 descriptor", rule="tcgen05 descriptors",
                 ref="PTX ISA 9.0 §9.7.16.4.1")
        d_lane, d_col = unpack_taddr(self.d_taddr)
        lane_align = 0
        if not self.ws and d.m == 64:
            if d_lane not in (0, 16):
                raise TmemAccessError(f"M=64 without .ws (Layout F) needs D at lane 0 or 16, got lane {d_lane}",
                                      rule="Layout F lane alignment is 0 or 16", ref="PTX ISA 9.0 §9.7.16.10.5")
            lane_align = d_lane
        elif d_lane:
            raise TmemAccessError(f"D must start at lane 0 for this shape, got lane {d_lane}",
                                  rule="D lane alignment 0", ref="PTX ISA 9.0 §9.7.16.10.5")
        layout = _mma_layout(d, self.ws, lane_align)
        _in_tmem(0, LANES, d_col, layout.columns, "tcgen05.mma D")
        if self.form == "TS":
            if d.a_major != "K":
                fail("A from TMEM must be K-major: the instruction descriptor's transpose-A bit is set",
                     rule="TS form needs a K-major A", ref="PTX ISA 9.0 §9.7.16.10.2 Table 51; CUTLASS "
                     "mma_sm100_umma.hpp static assertion")
            a_lane, a_col = unpack_taddr(self.a)
            if a_lane != lane_align:
                raise TmemAccessError(f"A in TMEM must start at lane {lane_align} (D's alignment), got {a_lane}",
                                      rule="A and D use the same lane alignment", ref="PTX ISA 9.0 §9.7.16.10.5")
            _in_tmem(0, LANES, a_col, INSTR_K_BYTES // 4, "tcgen05.mma A (TMEM)")

    @property
    def opcode(self) -> str:  # type: ignore[override]
        return "tcgen05.mma.ws" if self.ws else "tcgen05.mma"

    @property
    def form(self) -> str:
        """``"SS"`` (A in shared memory) or ``"TS"`` (A in Tensor Memory)."""
        return "SS" if isinstance(self.a, SmemDescriptor) else "TS"

    @property
    def kind(self) -> str:
        return self.idesc.kind

    @property
    def layout(self) -> DataPathLayout:
        """The data-path layout of D (and of A in the TS form)."""
        lane = unpack_taddr(self.d_taddr)[0]
        return _mma_layout(self.idesc, self.ws, lane if (not self.ws and self.idesc.m == 64) else 0)

    def ptx(self) -> str:
        a = self.a.hex() if isinstance(self.a, SmemDescriptor) else f"[{self.a:#010x}]"
        coll = "" if self.collector == "discard" else f".collector::{self.collector}"
        return (f"tcgen05.mma{'.ws' if self.ws else ''}.cta_group::1.kind::{self.kind}{coll} [{self.d_taddr:#010x}], "
                f"{a}, {self.b_desc.hex()}, {self.idesc.hex()}, {int(self.enable_input_d)};")

    def footprint(self, warp: int = 0) -> Footprint:
        ss = isinstance(self.a, SmemDescriptor)
        return _mma_footprint(self.d_taddr, None if ss else self.a, self.a.encode() if ss else None,
                              self.b_desc.encode(), self.idesc, self.ws, self.enable_input_d)

    def to_json(self) -> dict:
        out = super().to_json()
        out["kind"] = self.idesc.kind
        return out

    _json_extra: ClassVar[tuple[str, ...]] = ("kind",)

    @classmethod
    def _from_kwargs(cls, d: dict, kwargs: dict) -> Mma:
        kwargs["idesc"] = InstrDescriptor.from_u32(kwargs["idesc"], d.get("kind"))
        return cls(**kwargs)


# ---- commit --------------------------------------------------------------------------------------------
def _mask(inst, attribute, value) -> None:
    if value is not None and not 0 < value < 1 << 16:
        fail(f"tcgen05.commit multicast ctaMask {value!r} must be a non-zero 16-bit mask",
             rule="ctaMask is 16 bits (bit i = cluster CTA rank i)", ref="PTX ISA 9.0 §9.7.16.12.1 (tcgen05.commit)")


@register
@frozen
class Commit(Instr):
    """``tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster[.multicast::cluster].b64 [bar][, ctaMask];``

    Makes mbarrier ``bar`` track the completion of all prior async tcgen05 operations (mma,
    cp) of the issuing thread; one arrive-on when they complete (PTX ISA 9.0 §9.7.16.12.1).
    """

    op: ClassVar[str] = "tcgen05.commit"
    opcode: ClassVar[str] = "tcgen05.commit"
    elected: ClassVar[bool] = True
    bar: str = field(validator=name_str)
    multicast: int | None = field(default=None, converter=as_opt_int, validator=_mask)

    def ptx(self) -> str:
        if self.multicast is None:
            return f"tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [{self.bar}];"
        return (f"tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 "
                f"[{self.bar}], {self.multicast:#06x};")

    def footprint(self, warp: int = 0) -> Footprint:
        return Footprint(barriers=(self.bar,))


# ---- ld / st -------------------------------------------------------------------------------------------
_LANE_BASES = ("warp", "absolute")


def _lane_base(inst, attribute, value) -> None:
    if value not in _LANE_BASES:
        fail(f"lane_base must be 'warp' or 'absolute', got {value!r}", rule="tcgen05.ld/st lane base")


class _LdSt(Instr):
    """Shared logic of :class:`Ld` and :class:`St` (a mixin, not a record)."""

    __slots__ = ()
    is_async: ClassVar[bool] = True
    _kind: ClassVar[str] = "ld"

    def _op(self) -> LdStOp:
        return LdStOp(self.shape, self.num, pack=self._packed, imm=self.imm)

    def _check(self) -> None:
        op = self._op()  # shape / num / register-limit / immediate rules (TmemShapeError)
        lane, col = unpack_taddr(self.taddr)
        step = 16 if op.lanes == 16 else 32
        if self.lane_base == "warp":
            if lane not in (0, 16) or lane + op.lanes > QUADRANT_LANES:
                raise LaneQuadrantError(
                    f"tcgen05.{self._kind}.{op.shape.name}: with lane_base 'warp' the taddr lane is relative to the "
                    f"warp's quadrant and must be 0{' or 16' if step == 16 else ''}, got {lane}",
                    rule="a warp accesses its own 32-lane quadrant", ref=_REF_QUAD)
        elif lane % step:
            raise LaneQuadrantError(f"tcgen05.{self._kind}.{op.shape.name} at lane {lane}: must start at lane 32w"
                                    f"{' or 32w+16' if step == 16 else ''}",
                                    rule="32-lane shapes start at lane 32w, 16-lane shapes at 32w or 32w+16",
                                    ref=_REF_QUAD)
        _in_tmem(0, 1, col, op.span, op.ptx(self._kind))

    @property
    def _packed(self) -> bool:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def nregs(self) -> int:
        """32-bit registers per thread."""
        return self._op().nregs

    def lane0(self, warp: int) -> int:
        """First TMEM lane the executing warp ``warp`` (CTA warp index) accesses."""
        lane = unpack_taddr(self.taddr)[0]
        if self.lane_base == "warp":
            return QUADRANT_LANES * (as_int(warp) % 4) + lane
        if lane // QUADRANT_LANES != as_int(warp) % 4:
            raise LaneQuadrantError(f"warp {warp} may access lanes {32 * (warp % 4)}-{32 * (warp % 4) + 31}, "
                                    f"but {type(self).__name__} addresses lane {lane}",
                                    rule="warp w accesses lanes 32*(w%4) ... +31", ref=_REF_QUAD)
        return lane

    def rects(self, warp: int = 0) -> tuple[TmemRect, ...]:
        """The TMEM cells the warp touches, as rectangles."""
        return _ldst_rects(self.lane0(warp), unpack_taddr(self.taddr)[1], self._op())

    def _args(self) -> str:
        imm = f", {self.imm if self.imm is not None else self._op().imm}" if self.shape == "16x32bx2" else ""
        return imm


@functools.lru_cache(maxsize=1024)
def _ldst_rects(lane0: int, col0: int, op: LdStOp) -> tuple[TmemRect, ...]:
    if op.shape.name == "16x32bx2":
        cols = np.concatenate([np.arange(op.half_span), op.imm + np.arange(op.half_span)])
        return tuple(TmemRect(lane0, op.lanes, col0 + r.start, r.nbytes) for r in coalesce(cols))
    return (TmemRect(lane0, op.lanes, col0, op.span),)


@register
@frozen
class Ld(_LdSt):
    """``tcgen05.ld.sync.aligned.<shape>.x<num>[.pack::16b].b32 dst, [taddr];`` (one warp).

    ``lane_base="warp"`` (default): ``taddr``'s lane is relative to the executing warp's quadrant
    (the warp adds ``32*(w % 4)``, CUTLASS/FlashMLA's ``taddr + ((w % 4) * 32 << 16)``), so one record
    serves a whole warpgroup; ``"absolute"``: ``taddr`` as given (it must be in the warp's quadrant).
    ``imm`` is ``.16x32bx2``'s immHalfSplitoff (default as :class:`simtc.tmem.ldst.LdStOp`).
    """

    op: ClassVar[str] = "tcgen05.ld"
    opcode: ClassVar[str] = "tcgen05.ld"
    _kind: ClassVar[str] = "ld"
    taddr: int = _taddr_field()
    shape: str = field()
    num: int = field(converter=as_int)
    dst: str = field(validator=name_str)
    pack: bool = field(default=False, converter=as_bool)
    lane_base: str = field(default="warp", validator=_lane_base)
    imm: int | None = field(default=None, converter=as_opt_int)

    def __attrs_post_init__(self) -> None:
        self._check()

    @property
    def _packed(self) -> bool:
        return self.pack

    def ptx(self) -> str:
        return f"{self._op().ptx('ld')} {self.dst}, [{self.taddr:#010x}]{self._args()};"

    def footprint(self, warp: int = 0) -> Footprint:
        return Footprint(tmem_reads=self.rects(warp), regs_written=(self.dst,))


@register
@frozen
class St(_LdSt):
    """``tcgen05.st.sync.aligned.<shape>.x<num>[.unpack::16b].b32 [taddr], src;`` (one warp; lanes as :class:`Ld`)."""

    op: ClassVar[str] = "tcgen05.st"
    opcode: ClassVar[str] = "tcgen05.st"
    _kind: ClassVar[str] = "st"
    taddr: int = _taddr_field()
    shape: str = field()
    num: int = field(converter=as_int)
    src: str = field(validator=name_str)
    unpack: bool = field(default=False, converter=as_bool)
    lane_base: str = field(default="warp", validator=_lane_base)
    imm: int | None = field(default=None, converter=as_opt_int)

    def __attrs_post_init__(self) -> None:
        self._check()

    @property
    def _packed(self) -> bool:
        return self.unpack

    def ptx(self) -> str:
        return f"{self._op().ptx('st')} [{self.taddr:#010x}]{self._args()}, {self.src};"

    def footprint(self, warp: int = 0) -> Footprint:
        return Footprint(tmem_writes=self.rects(warp), regs_read=(self.src,))


# ---- waits and fences ----------------------------------------------------------------------------------
@register
@frozen
class WaitLd(Instr):
    """``tcgen05.wait::ld.sync.aligned;``: wait for all prior ``tcgen05.ld`` of the executing thread."""

    op: ClassVar[str] = "tcgen05.wait::ld"
    opcode: ClassVar[str] = "tcgen05.wait"
    ptx_line: ClassVar[str] = "tcgen05.wait::ld.sync.aligned;"


@register
@frozen
class WaitSt(Instr):
    """``tcgen05.wait::st.sync.aligned;``: wait for all prior ``tcgen05.st`` of the executing thread."""

    op: ClassVar[str] = "tcgen05.wait::st"
    opcode: ClassVar[str] = "tcgen05.wait"
    ptx_line: ClassVar[str] = "tcgen05.wait::st.sync.aligned;"


@register
@frozen
class FenceBeforeThreadSync(Instr):
    """``tcgen05.fence::before_thread_sync;`` (PTX ISA 9.0 §9.7.16.11.1; ordering rules §9.7.16.6)."""

    op: ClassVar[str] = "tcgen05.fence::before_thread_sync"
    opcode: ClassVar[str] = "tcgen05.fence"
    ptx_line: ClassVar[str] = "tcgen05.fence::before_thread_sync;"


@register
@frozen
class FenceAfterThreadSync(Instr):
    """``tcgen05.fence::after_thread_sync;`` (PTX ISA 9.0 §9.7.16.11.1; ordering rules §9.7.16.6)."""

    op: ClassVar[str] = "tcgen05.fence::after_thread_sync"
    opcode: ClassVar[str] = "tcgen05.fence"
    ptx_line: ClassVar[str] = "tcgen05.fence::after_thread_sync;"
