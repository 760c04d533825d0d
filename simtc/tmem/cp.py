"""``tcgen05.cp``: copy a shared-memory matrix (read through a descriptor) into Tensor Memory.

The source is the usual 64-bit shared-memory matrix descriptor, read as a K-major canonical
layout: source rows (the strided, 8-row-group dimension) become TMEM lanes, the contiguous
bytes become columns, 4 columns per 16 bytes (PTX ISA 9.0 §9.7.16.9.2; JAX Mosaic GPU does
the same). simtc reads the source through :func:`simtc.smem.read.descriptor_addresses` --
the same function ``tcgen05.mma`` uses -- with 4-byte elements, so every swizzle mode and
LBO/SBO combination means exactly what it means for an MMA operand.

Row -> lane maps, lanes relative to ``taddr``'s lane (CUTLASS UTCCP traits in
``cute/atom/copy_traits_sm100.hpp``; PTX ISA 9.0 §9.7.16.9.2 for the multicast wording):

=============================  ====  =======  =========================================================
shape                          rows  columns  source row r goes to lanes
=============================  ====  =======  =========================================================
``128x256b``                   128   8        r
``128x128b``                   128   4        r
``64x128b.warpx2::02_13``      64    4        r and r + 64 (warp pairs {0,2}, {1,3})
``64x128b.warpx2::01_23``      64    4        64*(r//32) + r%32 and that + 32 (warp pairs {0,1}, {2,3})
``32x128b.warpx4``             32    4        r, r+32, r+64, r+96 (all four warps)
``4x256b``                     4     8        32*r: one lane per quadrant [cutlass only]
=============================  ====  =======  =========================================================

``4x256b`` is what CUTLASS calls a "TMEM refresh" used with ``tcgen05.shift``; PTX's text
does not spell out its lanes, so this map is CUTLASS's (``SM100_UTCCP_4dp256bit_1cta``:
copy row i -> lane 32*i) and labelled **[cutlass only]**. Only ``.cta_group::1`` is modelled
(``::2`` copies the same way into both CTAs of a pair). Decompression qualifiers are not
modelled.

>>> from simtc.smem import SharedMemory, SmemDescriptor
>>> from simtc.tmem import TensorMemory
>>> sm = SharedMemory(); tm = TensorMemory(); _ = tm.alloc(32)
>>> sm.write(0, np.arange(32 * 128 // 4, dtype="<u4"))     # 32 rows x 16 B, no swizzle
>>> d = SmemDescriptor(start=0, lbo=16, sbo=128, layout_type="INTERLEAVE")
>>> tm.cp(0, sm, d, "32x128b", "warpx4")
>>> tm.cells[[1, 33, 65, 97], 0].tolist()     # row 1 landed in all four quadrants
[4, 4, 4, 4]
"""

from __future__ import annotations

import numpy as np
from attrs import frozen

from simtc.errors import TmemShapeError
from simtc.smem.desc import SmemDescriptor
from simtc.smem.read import read_bits
from simtc.tmem.address import as_address

__all__ = ["CP_SHAPES", "CpShape", "cp_shape", "tcgen05_cp"]

_REF = "PTX ISA 9.0 §9.7.16.9.2"
_REF_CUTLASS = "CUTLASS cute/atom/copy_traits_sm100.hpp (SM100_UTCCP_* traits)"


@frozen
class CpShape:
    """One ``tcgen05.cp`` shape with its multicast qualifier."""

    shape: str
    multicast: str | None
    rows: int
    """Source rows read through the descriptor."""
    columns: int
    """32-bit TMEM columns written per lane (256b -> 8, 128b -> 4)."""
    status: str
    cutlass: str

    @property
    def name(self) -> str:
        return self.shape + (f".{self.multicast}" if self.multicast else "")

    def ptx(self) -> str:
        return f"tcgen05.cp.cta_group::1.{self.name}"

    def lanes(self) -> np.ndarray:
        """Lane offsets each source row goes to: int64 (rows, copies).

        >>> cp_shape("64x128b", "warpx2::01_23").lanes()[[0, 31, 32, 63]].tolist()
        [[0, 32], [31, 63], [64, 96], [95, 127]]
        """
        r = np.arange(self.rows, dtype=np.int64)[:, None]
        if self.shape in ("128x256b", "128x128b"):
            return r
        if self.shape == "4x256b":
            return 32 * r
        if self.multicast == "warpx2::02_13":
            return r + np.array([0, 64])
        if self.multicast == "warpx2::01_23":
            return 64 * (r // 32) + r % 32 + np.array([0, 32])
        return r + np.array([0, 32, 64, 96])  # 32x128b.warpx4


CP_SHAPES: dict[str, CpShape] = {
    s.name: s
    for s in (
        CpShape("128x256b", None, 128, 8, "[doc] + [cutlass]", "SM100_UTCCP_128dp256bit_1cta"),
        CpShape("128x128b", None, 128, 4, "[doc] + [cutlass]", "SM100_UTCCP_128dp128bit_1cta"),
        CpShape("64x128b", "warpx2::02_13", 64, 4, "[doc] + [cutlass]", "SM100_UTCCP_2x64dp128bitlw0213_1cta"),
        CpShape("64x128b", "warpx2::01_23", 64, 4, "[doc] + [cutlass]", "SM100_UTCCP_2x64dp128bitlw0123_1cta"),
        CpShape("32x128b", "warpx4", 32, 4, "[doc] + [cutlass]", "SM100_UTCCP_4x32dp128bit_1cta"),
        CpShape("4x256b", None, 4, 8, "[cutlass only]: lanes 0/32/64/96, 'TMEM refresh' for tcgen05.shift",
                "SM100_UTCCP_4dp256bit_1cta"),
    )
}


def cp_shape(shape: str | CpShape, multicast: str | None = None) -> CpShape:
    """Look up a ``tcgen05.cp`` shape; ``shape`` may carry the multicast (``"64x128b.warpx2::02_13"``).

    >>> cp_shape("32x128b.warpx4").rows
    32
    >>> cp_shape("64x128b")
    Traceback (most recent call last):
    ...
    simtc.errors.TmemShapeError: tcgen05.cp.64x128b needs a multicast qualifier: .warpx2::02_13 or
    .warpx2::01_23 [rule: ...; PTX ISA 9.0 §9.7.16.9.2]
    """
    if isinstance(shape, CpShape):
        return shape
    s = str(shape).strip().lstrip(".").lower()
    if "." in s:
        s, mc = s.split(".", 1)
        if multicast is not None and multicast.lstrip(".") != mc:
            raise TmemShapeError(f"two multicast qualifiers: {mc!r} and {multicast!r}", rule="one multicast qualifier")
        multicast = mc
    mc = multicast.strip().lstrip(".").lower() if multicast else None
    key = s + (f".{mc}" if mc else "")
    if key in CP_SHAPES:
        return CP_SHAPES[key]
    shapes = {c.shape for c in CP_SHAPES.values()}
    if s not in shapes:
        raise TmemShapeError(f"unknown tcgen05.cp shape {shape!r}; legal: {', '.join(sorted(shapes))}",
                             rule="tcgen05.cp shapes", ref=_REF)
    need = [c.multicast for c in CP_SHAPES.values() if c.shape == s]
    want = " or ".join(f".{m}" for m in need if m) or "none"
    what = f"does not take .{mc}" if mc else "needs a multicast qualifier"
    raise TmemShapeError(
        f"tcgen05.cp.{s} {what}: {want}",
        rule=".64x128b needs .warpx2::02_13 or ::01_23, .32x128b needs .warpx4, other shapes take none", ref=_REF,
    )


def source_words(smem, desc: SmemDescriptor | int, shape: CpShape) -> np.ndarray:
    """The 32-bit words ``tcgen05.cp`` reads: uint32 (rows, columns), via :func:`simtc.smem.read.read_bits`
    (that is, :func:`~simtc.smem.read.descriptor_addresses`, the reading MMAs use too)."""
    rows = max(shape.rows, 8)  # a 4-row source is the top of an 8-row group (no-swizzle core matrices are 8 rows)
    return read_bits(smem, desc, major="K", elem_bytes=4, rows=rows, k=shape.columns)[: shape.rows]


def tcgen05_cp(tm, taddr, smem, desc: SmemDescriptor | int, shape: str | CpShape = "128x256b",
               multicast: str | None = None, *, label: str | None = None) -> None:
    """Run ``tcgen05.cp.cta_group::1.<shape>[.<multicast>] [taddr], desc`` on ``tm`` (a TensorMemory).

    Issued by one thread, so no lane-quadrant rule; the whole footprint (all copies) must lie
    inside TMEM and inside allocated columns.
    """
    cs = cp_shape(shape, multicast)
    addr = as_address(taddr)
    words = source_words(smem, desc, cs)                                  # (rows, cols)
    lane = addr.lane + cs.lanes()                                         # (rows, copies)
    col = addr.column + np.arange(cs.columns, dtype=np.int64)             # (cols,)
    lanes = np.broadcast_to(lane[:, :, None], (*lane.shape, cs.columns))
    cols = np.broadcast_to(col, lanes.shape)
    tm.check_cells(lanes, cols, f"{cs.ptx()} at {addr}")
    vals = np.broadcast_to(words[:, None, :], lanes.shape)
    tm.write_cells(lanes, cols, vals, tm.instruction(label or cs.ptx()))
