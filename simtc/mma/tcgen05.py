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

import numpy as np

from simtc.errors import DescriptorError, ShapeError, SimtcError, TmemAccessError
from simtc.mma.idesc import InstrDescriptor
from simtc.mma.operands import read_operand
from simtc.numerics.fdpa import tensor_core_mma
from simtc.numerics.formats import decode_bits, encode_bits
from simtc.smem.desc import SmemDescriptor
from simtc.smem.memory import SharedMemory
from simtc.tmem.address import as_address
from simtc.tmem.layouts import DataPathLayout, datapath_layout
from simtc.tmem.memory import TensorMemory

__all__ = ["INSTR_K", "Tcgen05MmaResult", "tcgen05_mma", "ts_a_operand"]

INSTR_K = 16
_REF = "PTX ISA 9.0 §9.7.16.10.9"


class Tcgen05MmaResult:
    """What one instruction did: its layout, and the D cells it wrote (lanes, columns)."""

    def __init__(self, layout: DataPathLayout, lanes: np.ndarray, columns: np.ndarray, label: str):
        self.layout, self.lanes, self.columns, self.label = layout, lanes, columns, label

    def __repr__(self) -> str:
        return f"<{self.label}: {self.layout}, {self.lanes.size} cells>"


def _idesc(idesc) -> InstrDescriptor:
    d = idesc if isinstance(idesc, InstrDescriptor) else InstrDescriptor.from_u32(int(idesc), "f16")
    if d.kind != "f16":
        raise SimtcError(f"tcgen05.mma kind::{d.kind} is not modelled (kind::f16 is)",
                         rule="modelled kinds", ref=_REF)
    if d.sparse:
        raise SimtcError("sparse tcgen05.mma is not modelled", rule="modelled variants", ref=_REF)
    return d


def ts_a_operand(tm: TensorMemory, a_taddr, layout: DataPathLayout, dtype: str) -> np.ndarray:
    """A as each lane group reads it from TMEM: shape (split, rows, 16) of float32 values."""
    addr = as_address(a_taddr)
    rows = layout.rows
    lanes = layout.a_lanes(np.arange(rows))  # (rows, split); Layout F's lane alignment is included
    col_off, half = DataPathLayout.a_cell(np.arange(INSTR_K))
    cols = addr.column + col_off  # (16,)
    lanes_b = np.broadcast_to(lanes.T[:, :, None], (layout.split, rows, INSTR_K))
    cols_b = np.broadcast_to(cols[None, None, :], lanes_b.shape)
    tm.check_cells(lanes_b, cols_b, "tcgen05.mma A operand (TMEM)")
    cells = tm.cells[lanes_b, cols_b]
    bits = np.where(half[None, None, :] == 0, cells & 0xFFFF, cells >> 16).astype(np.uint16)
    return decode_bits(bits, dtype)


def tcgen05_mma(tm: TensorMemory, smem: SharedMemory, *, d_taddr, b_desc: SmemDescriptor | int,
                idesc: InstrDescriptor | int, a_desc: SmemDescriptor | int | None = None, a_taddr=None,
                enable_input_d: bool = True, ws: bool = False, disable_output_lane: int = 0,
                zero_column_mask: int = 0, label: str | None = None) -> Tcgen05MmaResult:
    """Execute one ``tcgen05.mma[.ws].cta_group::1.kind::f16``; returns what it wrote.

    Exactly one of ``a_desc`` (SS: A in shared memory) and ``a_taddr`` (TS: A in TMEM) is given.
    ``disable_output_lane`` is a 128-bit lane mask (non-``.ws`` only; bit i set: lane i of D is
    not written). ``zero_column_mask`` (``.ws`` only) is accepted as 0; other values are not
    modelled.
    """
    d = _idesc(idesc)
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
    dt = d.a_format
    daddr = as_address(d_taddr)
    lane_align = 0
    if not ws and d.m == 64:  # Layout F: D (and A) at lane offset 0 or 16
        if daddr.lane not in (0, 16):
            raise TmemAccessError(f"M=64 without .ws (Layout F) needs D at lane 0 or 16, got lane {daddr.lane}",
                                  rule="Layout F lane alignment is 0 or 16", ref="PTX ISA 9.0 §9.7.16.10.5")
        lane_align = daddr.lane
        if a_taddr is not None and as_address(a_taddr).lane != daddr.lane:
            raise TmemAccessError(f"Layout F: A at lane {as_address(a_taddr).lane} but D at lane {daddr.lane}; "
                                  "A, D (and metadata) must use the same lane alignment",
                                  rule="Layout F: same lane alignment for A and D", ref="PTX ISA 9.0 §9.7.16.10.5")
    elif daddr.lane != 0:
        raise TmemAccessError(f"D must start at lane 0 for this shape, got lane {daddr.lane}",
                              rule="D lane alignment 0", ref="PTX ISA 9.0 §9.7.16.10.5")
    try:
        layout = datapath_layout(d.m, d.n, ws=ws, lane_align=lane_align)
    except ShapeError as e:
        raise ShapeError(f"tcgen05.mma{'.ws' if ws else ''} M={d.m} N={d.n}: {e.message}", rule=e.rule,
                         ref=e.ref or "PTX ISA 9.0 §9.7.16.2.1 Table 39") from None
    if a_taddr is not None and as_address(a_taddr).lane not in (0, lane_align):
        raise TmemAccessError(f"A in TMEM must start at lane {lane_align}, got {as_address(a_taddr).lane}",
                              rule="A lane alignment", ref="PTX ISA 9.0 §9.7.16.10.5")

    rows, n, split = layout.rows, d.n, layout.split
    b = read_operand(smem, b_desc, major=d.b_major, dtype=dt, rows=n, k=INSTR_K)
    if a_desc is not None:
        a = read_operand(smem, a_desc, major=d.a_major, dtype=dt, rows=rows, k=INSTR_K)
        a_parts = np.broadcast_to(a, (split, rows, INSTR_K))
    else:
        a_parts = ts_a_operand(tm, a_taddr, layout, dt)
    if d.negate_a:
        a_parts = -a_parts
    if d.negate_b:
        b = -b

    lane, col = layout.full_map()  # (rows, n)
    col = col + daddr.column
    tm.check_cells(lane, col, f"tcgen05.mma D at {daddr}")
    out = np.empty((rows, n), dtype=np.float32)
    per = n // split
    f16_d = d.d_format == "fp16"
    for g in range(split):
        sl = slice(g * per, (g + 1) * per)
        if not enable_input_d:
            c = np.zeros((rows, per), np.float32)
        elif f16_d:  # an f16 D is not packed: one value in the low 16 bits of each cell (§9.7.16.10.4.1)
            c = decode_bits((tm.cells[lane[:, sl], col[:, sl]] & 0xFFFF).astype(np.uint16), "fp16")
        else:
            c = tm.cells[lane[:, sl], col[:, sl]].view(np.float32)
        out[:, sl] = tensor_core_mma(np.ascontiguousarray(a_parts[g]), np.ascontiguousarray(b[sl]), c,
                                     dtype=dt, arch="sm100", d_dtype=d.d_format)
    write = np.ones(lane.shape, dtype=bool)
    if disable_output_lane:
        write = ((int(disable_output_lane) >> lane.astype(object)) & 1 == 0).astype(bool)
    name = label or (f"tcgen05.mma{'.ws' if ws else ''}.cta_group::1.kind::f16 "
                     f"({'TS' if a_taddr is not None else 'SS'}, M={d.m}, N={n})")
    # an f16 D goes to the low 16 bits; the high 16 bits are written as zero [inferred: PTX does not say]
    cells = encode_bits(out[write], "fp16").astype(np.uint32) if f16_d else out[write].view(np.uint32)
    tm.write_cells(lane[write], col[write], cells, tm.instruction(name))
    return Tcgen05MmaResult(layout, lane[write], col[write], name)
