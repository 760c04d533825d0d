"""``tcgen05.mma.cta_group::1.kind::f16`` (and ``.ws``) over SharedMemory and TensorMemory.

One call is one instruction, issued by one thread (PTX ISA 9.0 §9.7.16.10.9):

* B is read from shared memory through its descriptor; A from shared memory (SS form, through
  its descriptor) or from Tensor Memory (TS form). Both descriptor reads use
  :func:`simtc.mma.operands.read_operand` — the same reading as ``wgmma`` and ``tcgen05.cp``.
* D is read (``enable_input_d``) and written through the data-path layout of the instruction's
  shape (:func:`simtc.tmem.datapath_layout`: D, E, F, G). An f16 D (fp16 inputs only) is not
  packed: one value in the low 16 bits of each cell [doc §9.7.16.10.4.1]; simtc writes the high
  16 bits as zero [inferred].
* The arithmetic is :func:`simtc.numerics.tensor_core_mma` (sm100 parameters): bit-exact to the
  tensor core as far as MMA-Sim and the H200 ``wgmma`` checks go; that ``tcgen05`` (``.ws``, TS)
  uses the same arithmetic is assumed, not measured [inferred].

A from TMEM (TS) is K-major, 16-bit values packed two per 32-bit cell, even k in the low half
[cutlass]; one K=16 instruction reads 8 columns. For the split layouts (E: M=64 ``.ws``, G: M=32
``.ws``) **each lane group reads A from its own lanes** — rows 0-63 of the D columns
[N/2, N) come from lanes 64-127 for Layout E. This per-half read is simtc's inference (CUTLASS's
``.ws`` metadata fragment, ``tcgen05.cp .64x128b.warpx2`` and FlashMLA's correctness all fit it;
no document states it). When the halves hold *different* A data, one instruction is two
independent GEMMs: FlashMLA's dual GEMM.
"""

from __future__ import annotations

import functools

import numpy as np
from attrs import frozen

from simtc.errors import DescriptorError, ShapeError, SimtcError, TmemAccessError
from simtc.mma.idesc import InstrDescriptor
from simtc.mma.operands import read_operand
from simtc.numerics.fdpa import tensor_core_mma
from simtc.numerics.formats import decode_bits, encode_bits
from simtc.smem.desc import SmemDescriptor
from simtc.smem.memory import SharedMemory
from simtc.tmem.address import TmemAddress, as_address
from simtc.tmem.layouts import DataPathLayout, datapath_layout
from simtc.tmem.memory import TensorMemory

__all__ = ["INSTR_K", "MmaPlan", "Tcgen05MmaResult", "mma_arithmetic", "mma_read_accumulator", "mma_read_operands",
           "mma_write_back", "plan_mma", "tcgen05_mma", "ts_a_operand"]

INSTR_K = 16
_REF = "PTX ISA 9.0 §9.7.16.10.9"
_REF_LAYOUT = "PTX ISA 9.0 §9.7.16.10.5"


class Tcgen05MmaResult:
    """What one instruction did: its layout, and the D cells it wrote (lanes, columns)."""

    def __init__(self, layout: DataPathLayout, lanes: np.ndarray, columns: np.ndarray, label: str):
        self.layout, self.lanes, self.columns, self.label = layout, lanes, columns, label

    def __repr__(self) -> str:
        return f"<{self.label}: {self.layout}, {self.lanes.size} cells>"


@frozen
class MmaPlan:
    """A validated ``tcgen05.mma``: its decoded descriptor, data-path layout and operand addresses.

    Everything here follows from the operands alone (no memory contents): the D cells
    (:meth:`d_cells`), which lanes hold A (``layout.a_lanes``) and the shapes read through the
    descriptors.
    """

    idesc: InstrDescriptor
    layout: DataPathLayout
    d: TmemAddress
    b_desc: SmemDescriptor | int
    a_desc: SmemDescriptor | int | None
    a_taddr: TmemAddress | None
    enable_input_d: bool
    ws: bool
    disable_output_lane: int

    @property
    def form(self) -> str:
        return "TS" if self.a_taddr is not None else "SS"

    @property
    def dtype(self) -> str:
        return self.idesc.a_format

    def name(self) -> str:
        """Default writer name: ``tcgen05.mma[.ws].cta_group::1.kind::f16 (TS, M=64, N=128)``."""
        return (f"tcgen05.mma{'.ws' if self.ws else ''}.cta_group::1.kind::f16 "
                f"({self.form}, M={self.idesc.m}, N={self.idesc.n})")

    def d_cells(self) -> tuple[np.ndarray, np.ndarray]:
        """(lane, column) of every D element, both (rows, N): the layout's map from the D column (read-only)."""
        return _d_cells(self.layout, self.d.column)

    def written(self) -> np.ndarray:
        """Boolean (rows, N): the D elements actually written (``disable_output_lane`` clears lanes; read-only)."""
        return _written(self.layout, int(self.disable_output_lane))


def _read_only(*arrays: np.ndarray) -> None:
    for a in arrays:
        a.setflags(write=False)


@functools.lru_cache(maxsize=256)
def _d_cells(layout: DataPathLayout, column: int) -> tuple[np.ndarray, np.ndarray]:
    lane, col = layout.full_map()
    col = col + column
    _read_only(col)
    return lane, col


@functools.lru_cache(maxsize=256)
def _written(layout: DataPathLayout, disable_output_lane: int) -> np.ndarray:
    lane, _ = layout.full_map()
    if not disable_output_lane:
        out = np.ones(lane.shape, dtype=bool)
    else:
        out = ((disable_output_lane >> lane.astype(object)) & 1 == 0).astype(bool)
    _read_only(out)
    return out


@functools.lru_cache(maxsize=256)
def _written_cells(layout: DataPathLayout, column: int, disable_output_lane: int):
    """(all written?, lanes, columns) of the D cells written, read-only: what every write-back of the plan needs."""
    lane, col = _d_cells(layout, column)
    write = _written(layout, disable_output_lane)
    lw, cw = lane[write], col[write]
    _read_only(lw, cw)
    return bool(write.all()), lw, cw


def _idesc(idesc) -> InstrDescriptor:
    d = idesc if isinstance(idesc, InstrDescriptor) else InstrDescriptor.from_u32(int(idesc), "f16")
    if d.kind != "f16":
        raise SimtcError(f"tcgen05.mma kind::{d.kind} is not modelled (kind::f16 is)",
                         rule="modelled kinds", ref=_REF)
    if d.sparse:
        raise SimtcError("sparse tcgen05.mma is not modelled", rule="modelled variants", ref=_REF)
    return d


def _check_operand_list(d: InstrDescriptor, *, a_desc, a_taddr, ws: bool, disable_output_lane: int,
                        zero_column_mask: int) -> None:
    if (a_desc is None) == (a_taddr is None):
        raise SimtcError("give exactly one A operand: a_desc (SS, shared memory) or a_taddr (TS, TMEM)",
                         rule="A comes from shared memory or TMEM", ref=_REF)
    if ws and disable_output_lane:
        raise SimtcError("disable-output-lane is not an operand of tcgen05.mma.ws", rule=".ws operand list",
                         ref="PTX ISA 9.0 §9.7.16.10.9.1")
    if zero_column_mask:
        raise SimtcError("a non-zero .ws zero-column mask is not modelled", rule="modelled .ws operands",
                         ref="PTX ISA 9.0 §9.7.16.4.3")
    if a_taddr is not None and d.a_major != "K":
        raise DescriptorError("A from TMEM must be K-major: the instruction descriptor's transpose-A bit is set",
                              rule="TS form needs a K-major A", ref="PTX ISA 9.0 §9.7.16.10.9 Table 51; CUTLASS "
                              "mma_sm100_umma.hpp static assertion")


def _lane_alignment(d: InstrDescriptor, daddr: TmemAddress, a_addr: TmemAddress | None, ws: bool) -> int:
    """The D lane alignment (0, or 0/16 for Layout F), after checking D's and A's lanes."""
    if not ws and d.m == 64:  # Layout F: D (and A) at lane offset 0 or 16
        if daddr.lane not in (0, 16):
            raise TmemAccessError(f"M=64 without .ws (Layout F) needs D at lane 0 or 16, got lane {daddr.lane}",
                                  rule="Layout F lane alignment is 0 or 16", ref=_REF_LAYOUT)
        if a_addr is not None and a_addr.lane != daddr.lane:
            raise TmemAccessError(f"Layout F: A at lane {a_addr.lane} but D at lane {daddr.lane}; "
                                  "A, D (and metadata) must use the same lane alignment",
                                  rule="Layout F: same lane alignment for A and D", ref=_REF_LAYOUT)
        return daddr.lane
    if daddr.lane != 0:
        raise TmemAccessError(f"D must start at lane 0 for this shape, got lane {daddr.lane}",
                              rule="D lane alignment 0", ref=_REF_LAYOUT)
    return 0


def _layout(d: InstrDescriptor, ws: bool, lane_align: int) -> DataPathLayout:
    try:
        return datapath_layout(d.m, d.n, ws=ws, lane_align=lane_align)
    except ShapeError as e:
        raise ShapeError(f"tcgen05.mma{'.ws' if ws else ''} M={d.m} N={d.n}: {e.message}", rule=e.rule,
                         ref=e.ref or "PTX ISA 9.0 §9.7.16.2.1 Table 39") from None


def plan_mma(*, d_taddr, b_desc: SmemDescriptor | int, idesc: InstrDescriptor | int,
             a_desc: SmemDescriptor | int | None = None, a_taddr=None, enable_input_d: bool = True,
             ws: bool = False, disable_output_lane: int = 0, zero_column_mask: int = 0) -> MmaPlan:
    """Validation and layout: check the operand list and lane alignments, pick the data-path layout.

    Raises the :class:`~simtc.errors.SimtcError` naming the broken rule; reads no memory. A plan depends on
    the operands alone, so it is computed once per operand list (a refused one is refused every time).
    """
    args = (d_taddr, b_desc, idesc, a_desc, a_taddr, enable_input_d, ws, disable_output_lane, zero_column_mask)
    try:
        hash(args)
    except TypeError:  # e.g. a numpy array as an operand: plan it without the cache
        return _plan_mma(*args)
    return _plan_mma_cached(*args)


def _plan_mma(d_taddr, b_desc, idesc, a_desc, a_taddr, enable_input_d, ws, disable_output_lane,
              zero_column_mask) -> MmaPlan:
    d = _idesc(idesc)
    _check_operand_list(d, a_desc=a_desc, a_taddr=a_taddr, ws=ws, disable_output_lane=disable_output_lane,
                        zero_column_mask=zero_column_mask)
    daddr = as_address(d_taddr)
    a_addr = as_address(a_taddr) if a_taddr is not None else None
    lane_align = _lane_alignment(d, daddr, a_addr, ws)
    layout = _layout(d, ws, lane_align)
    if a_addr is not None and a_addr.lane not in (0, lane_align):
        raise TmemAccessError(f"A in TMEM must start at lane {lane_align}, got {a_addr.lane}",
                              rule="A lane alignment", ref=_REF_LAYOUT)
    return MmaPlan(d, layout, daddr, b_desc, a_desc, a_addr, bool(enable_input_d), bool(ws),
                   int(disable_output_lane))


_plan_mma_cached = functools.lru_cache(maxsize=1024)(_plan_mma)


def clear_caches() -> None:
    """Forget the cached plans and cell maps (benchmarks time a cold run with this)."""
    for f in (_plan_mma_cached, _d_cells, _written, _written_cells, _ts_a_cells):
        f.cache_clear()


@functools.lru_cache(maxsize=256)
def _ts_a_cells(layout: DataPathLayout, column: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lanes, columns, low-half?) of the A cells each lane group reads, shape (split, rows, 16), read-only."""
    rows = layout.rows
    lanes = layout.a_lanes(np.arange(rows))  # (rows, split); Layout F's lane alignment is included
    col_off, half = DataPathLayout.a_cell(np.arange(INSTR_K))
    cols = column + col_off  # (16,)
    lanes_b = np.ascontiguousarray(np.broadcast_to(lanes.T[:, :, None], (layout.split, rows, INSTR_K)))
    cols_b = np.ascontiguousarray(np.broadcast_to(cols[None, None, :], lanes_b.shape))
    low = np.broadcast_to(half[None, None, :] == 0, lanes_b.shape)
    _read_only(lanes_b, cols_b)
    return lanes_b, cols_b, low


def ts_a_operand(tm: TensorMemory, a_taddr, layout: DataPathLayout, dtype: str) -> np.ndarray:
    """A as each lane group reads it from TMEM: shape (split, rows, 16) of float32 values."""
    lanes_b, cols_b, low = _ts_a_cells(layout, as_address(a_taddr).column)
    cells = tm.read_cells(lanes_b, cols_b, "tcgen05.mma A operand (TMEM)")
    bits = np.where(low, cells & 0xFFFF, cells >> 16).astype(np.uint16)
    return decode_bits(bits, dtype)


def mma_read_operands(tm: TensorMemory, smem: SharedMemory, plan: MmaPlan) -> tuple[np.ndarray, np.ndarray]:
    """Operand reading: (A per lane group (split, rows, 16), B (N, 16)), float32, negations applied.

    B and an SS A come through :func:`simtc.mma.operands.read_operand` (the descriptor reading
    every instruction shares); a TS A through :func:`ts_a_operand`.
    """
    d, layout = plan.idesc, plan.layout
    b = read_operand(smem, plan.b_desc, major=d.b_major, dtype=plan.dtype, rows=d.n, k=INSTR_K)
    if plan.a_desc is not None:
        a = read_operand(smem, plan.a_desc, major=d.a_major, dtype=plan.dtype, rows=layout.rows, k=INSTR_K)
        a_parts = np.broadcast_to(a, (layout.split, layout.rows, INSTR_K))
    else:
        a_parts = ts_a_operand(tm, plan.a_taddr, layout, plan.dtype)
    return (-a_parts if d.negate_a else a_parts), (-b if d.negate_b else b)


def mma_read_accumulator(tm: TensorMemory, plan: MmaPlan) -> np.ndarray | None:
    """The accumulator C (rows, N) float32 read from D's cells, or None when ``enable_input_d`` is false.

    An f16 D is not packed: one value in the low 16 bits of each cell (PTX ISA 9.0 §9.7.16.10.4.1).
    Checks that every D cell is allocated either way.
    """
    lane, col = plan.d_cells()
    what = f"tcgen05.mma D at {plan.d}"
    if not plan.enable_input_d:
        tm.check_cells(lane, col, what)
        return None
    cells = tm.read_cells(lane, col, what)
    if plan.idesc.d_format == "fp16":
        return decode_bits((cells & 0xFFFF).astype(np.uint16), "fp16")
    return cells.view(np.float32)


def mma_arithmetic(plan: MmaPlan, a_parts: np.ndarray, b: np.ndarray, c: np.ndarray | None) -> np.ndarray:
    """D (rows, N) float32: lane group g multiplies its A by B's rows [g*N/split, (g+1)*N/split).

    The arithmetic is :func:`simtc.numerics.tensor_core_mma` with the sm100 parameters.
    """
    rows, n, split = plan.layout.rows, plan.idesc.n, plan.layout.split
    out = np.empty((rows, n), dtype=np.float32)
    per = n // split
    for g in range(split):
        sl = slice(g * per, (g + 1) * per)
        cg = np.zeros((rows, per), np.float32) if c is None else c[:, sl]
        out[:, sl] = tensor_core_mma(np.ascontiguousarray(a_parts[g]), np.ascontiguousarray(b[sl]), cg,
                                     dtype=plan.dtype, arch="sm100", d_dtype=plan.idesc.d_format)
    return out


def mma_write_back(tm: TensorMemory, plan: MmaPlan, out: np.ndarray, writer) -> tuple[np.ndarray, np.ndarray]:
    """Write D (rows, N) to its cells (skipping disabled lanes); ``writer`` is recorded as the last writer.

    Returns the (lanes, columns) written. An f16 D goes to the low 16 bits; the high 16 bits are
    written as zero [inferred: PTX does not say].
    """
    every, lanes, cols = _written_cells(plan.layout, plan.d.column, plan.disable_output_lane)
    vals = np.ascontiguousarray(out).reshape(-1) if every else out[plan.written()]  # C order either way
    cells = encode_bits(vals, "fp16").astype(np.uint32) if plan.idesc.d_format == "fp16" else vals.view(np.uint32)
    tm.write_cells(lanes, cols, cells, tm.instruction(writer))
    return lanes, cols


def tcgen05_mma(tm: TensorMemory, smem: SharedMemory, *, d_taddr, b_desc: SmemDescriptor | int,
                idesc: InstrDescriptor | int, a_desc: SmemDescriptor | int | None = None, a_taddr=None,
                enable_input_d: bool = True, ws: bool = False, disable_output_lane: int = 0,
                zero_column_mask: int = 0, label: str | None = None, writer=None) -> Tcgen05MmaResult:
    """Execute one ``tcgen05.mma[.ws].cta_group::1.kind::f16``; returns what it wrote.

    Exactly one of ``a_desc`` (SS: A in shared memory) and ``a_taddr`` (TS: A in TMEM) is given.
    ``disable_output_lane`` is a 128-bit lane mask (non-``.ws`` only; bit i set: lane i of D is
    not written). ``zero_column_mask`` (``.ws`` only) is accepted as 0; other values are not
    modelled. ``writer`` (e.g. the :mod:`simtc.isa` record) is what the written cells remember
    as their last writer; default ``label`` or a generated name.

    The steps are public: :func:`plan_mma` (validation and layout), :func:`mma_read_operands`,
    :func:`mma_read_accumulator`, :func:`mma_arithmetic`, :func:`mma_write_back`.
    """
    plan = plan_mma(d_taddr=d_taddr, b_desc=b_desc, idesc=idesc, a_desc=a_desc, a_taddr=a_taddr,
                    enable_input_d=enable_input_d, ws=ws, disable_output_lane=disable_output_lane,
                    zero_column_mask=zero_column_mask)
    a_parts, b = mma_read_operands(tm, smem, plan)
    c = mma_read_accumulator(tm, plan)
    out = mma_arithmetic(plan, a_parts, b, c)
    name = label or plan.name()
    lanes, cols = mma_write_back(tm, plan, out, writer if writer is not None else name)
    return Tcgen05MmaResult(plan.layout, lanes, cols, name)
