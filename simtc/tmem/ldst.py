"""``tcgen05.ld`` / ``tcgen05.st``: which Tensor Memory cell each thread's register holds.

Both are warp-collective (``.sync.aligned``): all 32 threads pass the same ``taddr`` (the
collective base). Thread ``t`` (lane id 0-31 in the warp), register ``i`` maps to a
(lane offset, column offset) from ``taddr`` [PTX ISA 9.0 §9.7.16.8.3-5; formulas from
CUTLASS ``cute/atom/copy_traits_sm100.hpp`` ``SM100_TMEM_LOAD_*`` traits]:

=============  ===============================  ======================================
shape          lane offset                      column offset
=============  ===============================  ======================================
``32x32b``     ``t``                            ``i``
``16x64b``     ``t//4 + 8*(t%2)``               ``2*i + (t//2)%2``
``16x128b``    ``t//4 + 8*(i%2)``               ``4*(i//2) + t%4``
``16x256b``    ``t//4 + 8*((i//2)%2)``          ``8*(i//4) + 2*(t%4) + i%2``
``16x32bx2``   ``t%16``                         ``i`` (t < 16), ``imm + i`` (t >= 16)
=============  ===============================  ======================================

Registers per thread: ``num`` for ``32x32b``, ``16x64b``, ``16x32bx2``; ``2*num`` for
``16x128b``; ``4*num`` for ``16x256b``; ``.num`` is a power of two from ``.x1`` to ``.x128`` and
a thread never gets more than 128 registers (PTX ISA 9.0 §9.7.16.8.3 Tables 47/48).

``.pack::16b`` (ld) / ``.unpack::16b`` (st): logical column ``c`` becomes the physical column
pair ``2c, 2c+1``; the register's low 16 bits are the low 16 bits of column ``2c``, its high
16 bits the low 16 bits of column ``2c+1`` [CUTLASS ``*_16b`` traits]. For ``16x32bx2`` the
immediate ``immHalfSplitoff`` is a physical column offset; CUTLASS passes ``num`` unpacked and
``2*num`` packed, which is simtc's default.

A store is the exact inverse of the load with the same shape (CUTLASS defines every
``SM100_TMEM_STORE_*`` trait as the load's with source and destination swapped).

>>> op = LdStOp("16x256b", 1)
>>> op.nregs, op.lane_offsets()[5].tolist(), op.column_offsets()[5].tolist()
(4, [1, 1, 9, 9], [2, 3, 2, 3])
>>> LdStOp("16x256b", 1, pack=True).columns()[5, 0].tolist()   # register 0's two halves
[4, 5]
"""

from __future__ import annotations

import functools

import numpy as np
from attrs import Converter, field, frozen

from simtc.errors import TmemShapeError

__all__ = ["NUMS", "SHAPES", "LdStOp", "LdStShape", "all_ops", "ld_st_shape"]

_REF = "PTX ISA 9.0 §9.7.16.8.3 Tables 47/48"
_REF_MAP = "CUTLASS cute/atom/copy_traits_sm100.hpp (SM100_TMEM_LOAD_* traits)"

NUMS = (1, 2, 4, 8, 16, 32, 64, 128)
"""Legal ``.num`` repetition counts ``.x1`` ... ``.x128`` (PTX ISA 9.0 §9.7.16.8.3)."""

MAX_REGS = 128
"""Registers one thread may receive from one ``tcgen05.ld`` (PTX ISA 9.0 §9.7.16.8.3)."""


@frozen
class LdStShape:
    """A ``tcgen05.ld/st`` shape: lanes touched, bits per lane per repetition, registers per ``.num``."""

    name: str
    lanes: int
    """Lanes touched (32 or 16)."""
    columns_per_num: int
    """32-bit columns per repetition (per half for ``16x32bx2``), unpacked."""
    regs_per_num: int
    cutlass: str
    """CUTLASS op family name (``SM100_TMEM_LOAD_<cutlass><num>x``)."""

    @property
    def max_num(self) -> int:
        return MAX_REGS // self.regs_per_num


SHAPES: dict[str, LdStShape] = {
    s.name: s
    for s in (
        LdStShape("32x32b", 32, 1, 1, "32dp32b"),
        LdStShape("16x64b", 16, 2, 1, "16dp64b"),
        LdStShape("16x128b", 16, 4, 2, "16dp128b"),
        LdStShape("16x256b", 16, 8, 4, "16dp256b"),
        LdStShape("16x32bx2", 16, 1, 1, "16dp32b"),
    )
}


def ld_st_shape(name: str | LdStShape) -> LdStShape:
    """Look up a shape by its PTX name (``"16x256b"``; a leading dot is ignored).

    >>> ld_st_shape(".16x128b").regs_per_num
    2
    """
    if isinstance(name, LdStShape):
        return name
    key = str(name).strip().lstrip(".").lower()
    try:
        return SHAPES[key]
    except KeyError:
        raise TmemShapeError(f"unknown tcgen05.ld/st shape {name!r}; legal: {', '.join(SHAPES)}",
                             rule="tcgen05.ld/st shapes", ref="PTX ISA 9.0 §9.7.16.8.3") from None


def _check_num(shape: LdStShape, num) -> int:
    if not isinstance(num, (int, np.integer)) or isinstance(num, bool) or int(num) not in NUMS:
        raise TmemShapeError(f".num must be one of .x{', .x'.join(map(str, NUMS))}; got {num!r}",
                             rule=".num is a power of two from x1 to x128", ref=_REF)
    num = int(num)
    if num > shape.max_num:
        raise TmemShapeError(
            f".{shape.name}.x{num} would give each thread {num * shape.regs_per_num} registers; "
            f".{shape.name} allows .x1 to .x{shape.max_num} ({shape.regs_per_num} register(s) per repetition, "
            f"at most {MAX_REGS})",
            rule=f"register-count limit: .{shape.name} allows at most .x{shape.max_num}", ref=_REF,
        )
    return num


def _check_imm(op: LdStOp, imm) -> int | None:
    """``immHalfSplitoff``: only for ``16x32bx2``, default the half span (``num``, or ``2*num`` packed)."""
    if op.shape.name != "16x32bx2":
        if imm is not None:
            raise TmemShapeError(f"only .16x32bx2 takes an immHalfSplitoff immediate, not .{op.shape.name}",
                                 rule="immHalfSplitoff only with .16x32bx2", ref="PTX ISA 9.0 §9.7.16.8.3")
        return None
    if imm is None:
        return op.half_span
    if not isinstance(imm, (int, np.integer)) or isinstance(imm, bool) or imm < 0:
        raise TmemShapeError(f"immHalfSplitoff must be a non-negative integer, got {imm!r}",
                             rule="16x32bx2 immediate", ref="PTX ISA 9.0 §9.7.16.8.3")
    return int(imm)


@frozen
class LdStOp:
    """One ``tcgen05.ld`` / ``tcgen05.st`` form: shape, ``.num``, ``.pack::16b`` and the ``16x32bx2`` immediate.

    ``imm`` (``immHalfSplitoff``) is only for ``16x32bx2``: the physical column offset of the
    second half (threads 16-31); default ``num`` (unpacked) or ``2*num`` (packed), as CUTLASS.

    >>> LdStOp("32x32b", 32).ptx("ld")
    'tcgen05.ld.sync.aligned.32x32b.x32.b32'
    >>> op = LdStOp("16x32bx2", 2, pack=True)
    >>> op.ptx("st"), op.imm
    ('tcgen05.st.sync.aligned.16x32bx2.x2.unpack::16b.b32', 4)
    """

    shape: LdStShape = field(converter=ld_st_shape)
    num: int = field(default=1, converter=Converter(lambda num, self: _check_num(self.shape, num), takes_self=True))
    pack: bool = field(default=False, converter=bool)
    imm: int | None = field(default=None, converter=Converter(lambda imm, self: _check_imm(self, imm),
                                                              takes_self=True))

    # ---- sizes ---------------------------------------------------------------------------------
    @property
    def nregs(self) -> int:
        """32-bit registers per thread."""
        return self.num * self.shape.regs_per_num

    @property
    def halves(self) -> int:
        """Physical cells per register: 2 with ``.pack::16b`` / ``.unpack::16b``, else 1."""
        return 2 if self.pack else 1

    @property
    def half_span(self) -> int:
        """Physical columns of one half (``16x32bx2``) or of the whole access (other shapes)."""
        return self.num * self.shape.columns_per_num * self.halves

    @property
    def lanes(self) -> int:
        return self.shape.lanes

    @property
    def span(self) -> int:
        """Physical columns from ``taddr`` to the last column touched, plus one."""
        if self.shape.name == "16x32bx2":
            return max(self.half_span, self.imm + self.half_span)
        return self.half_span

    def ptx(self, kind: str = "ld") -> str:
        """The PTX instruction name (``kind`` = ``"ld"`` or ``"st"``); ``16x32bx2`` also takes :attr:`imm`."""
        if kind not in ("ld", "st"):
            raise TmemShapeError(f"kind must be 'ld' or 'st', got {kind!r}", rule="tcgen05.ld / tcgen05.st")
        q = (".pack::16b" if kind == "ld" else ".unpack::16b") if self.pack else ""
        return f"tcgen05.{kind}.sync.aligned.{self.shape.name}.x{self.num}{q}.b32"

    @property
    def cutlass(self) -> str:
        """CUTLASS op name, e.g. ``SM100_TMEM_LOAD_16dp256b1x_16b``."""
        return f"SM100_TMEM_LOAD_{self.shape.cutlass}{self.num}x{'_16b' if self.pack else ''}"

    # ---- the map -------------------------------------------------------------------------------
    def _logical(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lane offset, logical column, second-half flag) of each (thread, register), shape (32, nregs)."""
        t = np.arange(32, dtype=np.int64)[:, None]
        i = np.arange(self.nregs, dtype=np.int64)[None, :]
        zero = np.zeros((32, self.nregs), dtype=np.int64)
        name = self.shape.name
        if name == "32x32b":
            lane, col = t + zero, i + zero
        elif name == "16x64b":
            lane, col = t // 4 + 8 * (t % 2) + zero, 2 * i + (t // 2) % 2
        elif name == "16x128b":
            lane, col = t // 4 + 8 * (i % 2), 4 * (i // 2) + t % 4
        elif name == "16x256b":
            lane, col = t // 4 + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * (t % 4) + i % 2
        else:  # 16x32bx2
            lane, col = t % 16 + zero, i + zero
        second = np.broadcast_to((t >= 16) & (name == "16x32bx2"), zero.shape)
        return lane, col, second

    def lane_offsets(self) -> np.ndarray:
        """Lane offset from ``taddr``'s lane of each (thread, register): int64 (32, nregs)."""
        return self._logical()[0]

    def columns(self) -> np.ndarray:
        """Physical column offsets of each (thread, register, half): int64 (32, nregs, halves).

        Unpacked: one cell per register (``halves`` = 1). Packed: ``[..., 0]`` is the cell
        whose low 16 bits form the register's low half, ``[..., 1]`` the high half.
        """
        _, col, second = self._logical()
        phys = col[..., None] * self.halves + np.arange(self.halves, dtype=np.int64)
        if self.shape.name == "16x32bx2":
            phys = phys + (second * self.imm)[..., None]
        return phys

    def column_offsets(self) -> np.ndarray:
        """Column offset of each (thread, register): int64 (32, nregs); for packed forms the low half's column."""
        return self.columns()[..., 0]

    def cells(self) -> tuple[np.ndarray, np.ndarray]:
        """(lane offsets, column offsets), both (32, nregs, halves): every cell the op touches (read-only, cached)."""
        return _op_cells(self)

    def thread_of(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Inverse map on the footprint: (thread, register, half) per cell, arrays (lanes, span); -1 = not touched.

        >>> t, r, h = LdStOp("16x256b", 1).thread_of()
        >>> int(t[9, 3]), int(r[9, 3])      # lane 9, column 3
        (5, 3)
        """
        lane, col = self.cells()
        shape = (self.lanes, self.span)
        thr, reg, half = (np.full(shape, -1, dtype=np.int64) for _ in range(3))
        idx = np.indices(lane.shape)
        thr[lane, col], reg[lane, col], half[lane, col] = idx[0], idx[1], idx[2]
        return thr, reg, half

    def __str__(self) -> str:
        return self.ptx("ld")


def all_ops() -> list[LdStOp]:
    """Every legal (shape, ``.num``, pack) combination: 37 shapes x nums, each packed and unpacked (74).

    >>> len(all_ops())
    74
    """
    return [LdStOp(s, n, pack=p) for s in SHAPES.values() for n in NUMS if n <= s.max_num for p in (False, True)]


@functools.lru_cache(maxsize=512)
def _op_cells(op: LdStOp) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`LdStOp.cells`, computed once per op (ops are frozen values); the arrays are read-only."""
    lane = np.broadcast_to(op.lane_offsets()[..., None], (32, op.nregs, op.halves))
    col = op.columns()
    col.setflags(write=False)
    return lane, col
