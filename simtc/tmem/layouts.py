"""Data-path layouts A-G: where a ``tcgen05.mma`` result ``D[m][n]`` lives in Tensor Memory.

PTX ISA 9.0 §9.7.16.10.5 assigns a layout letter to each (M, ``cta_group``, sparsity,
``.ws``) case; the lane/column formulas come from CUTLASS's ``UMMA::tmem_frg*`` atoms
(``cute/atom/mma_traits_sm100.hpp``). Per-CTA view, relative to the ``[d-tmem]`` column
``C0``; ``L0`` is the lane alignment (0, or 16 for the half-datapath layouts F and C):

======  ==============================  ===============================================  ========  =======
Layout  case                            D[m][n] -> (lane, column - C0)                    columns   source
======  ==============================  ===============================================  ========  =======
D       cta_group::1, M=128             (m, n)                                           N         doc+cutlass
F       cta_group::1, M=64, not .ws     (L0 + 32*(m//16) + m%16, n)                      N         doc+cutlass
E       cta_group::1, M=64, .ws         (m + 64*(n//(N/2)), n % (N/2))                   N/2       cutlass
G       cta_group::1, M=32, .ws         (m + 32*(n//(N/4)), n % (N/4))                   N/4       cutlass
A       cta_group::2, M=256 (per CTA)   (m, n), m < 128 local                            N         cutlass
B       cta_group::2, M=128 (per CTA)   (m + 64*(n//(N/2)), n % (N/2)), m < 64 local     N/2       cutlass
C       cta_group::2, M=128 sparse      PTX: like F (CUTLASS uses B's atom: open)        N         open
======  ==============================  ===============================================  ========  =======

PTX prints Layout E's organization as "2x3"; simtc reads it as 2x2, like CUTLASS ([inferred]: the
``tmem_frg_ws`` M=64 "2x2 datapath" atom, ``include/cute/atom/mma_traits_sm100_frag.hpp`` lines 554-559 at
``7107b05``). An f16 D is not packed: one element per cell, in the low 16 bits (PTX ISA 9.0 §9.7.16.10.4.1).

A operand in TMEM (the "TS" form, PTX ISA 9.0 §9.7.16.10.9): K-major; 16-bit elements two
per cell along K, even k in the low half [CUTLASS]. Lanes of A row m: those of D row m for
D, F, A, C; Layout B needs row m in lanes m and m+64 (CUTLASS ``TmemAllocMode::Duplicated``);
Layout E reads each lane half's A from its own 64 lanes (rows in m and m+64) and Layout G
from m, m+32, m+64, m+96 -- both **[inferred]**, not documented.

>>> e = datapath_layout(64, 128, ws=True)
>>> e.letter, e.columns, e.map(5, 70)          # D[5][70] of an M=64 .ws tile
('E', 64, (69, 6))
>>> e.inverse(69, 6)
(5, 70)
>>> datapath_layout(64, 128, lane_align=16).map(17, 0)   # Layout F, second slot
(49, 0)
"""

from __future__ import annotations

import functools

import numpy as np
from attrs import field, frozen

from simtc.errors import TmemShapeError
from simtc.tmem.address import LANES

__all__ = ["LAYOUT_CASES", "DataPathLayout", "datapath_layout"]

_REF = "PTX ISA 9.0 §9.7.16.10.5"
_REF_SHAPES = "PTX ISA 9.0 §9.7.16.2.1 Table 39 (kind::f16 shapes)"
_REF_ATOMS = "CUTLASS cute/atom/mma_traits_sm100.hpp (UMMA::tmem_frg atoms)"

LAYOUT_CASES = {
    "A": "cta_group::2, M=256",
    "B": "cta_group::2, M=128, dense",
    "C": "cta_group::2, M=128, sparse",
    "D": "cta_group::1, M=128 (.ws or not)",
    "E": "cta_group::1, M=64, .ws",
    "F": "cta_group::1, M=64, not .ws",
    "G": "cta_group::1, M=32, .ws",
}
"""Which instruction case each layout letter is for (PTX ISA 9.0 §9.7.16.10.5)."""

# How sure each map is: documented by PTX, or known only from CUTLASS (and independent
# implementations), or open.
_STATUS = {
    "A": "[cutlass] CUTLASS (128,N):(1,128) atom per CTA",
    "B": "[cutlass] CUTLASS 2x2 atom (64,(N/2,2)):(1,(128,64)); also JAX, TVM, Triton",
    "C": "[open] PTX says half-datapath like F; CUTLASS's sparse 2-SM atom uses Layout B's instead",
    "D": "[doc] PTX §9.7.16.10.5 + CUTLASS (128,N):(1,128)",
    "E": "[cutlass] CUTLASS tmem_frg_ws 2x2 atom only; PTX prints '2x3', read as 2x2 [inferred]",
    "F": "[doc] PTX §9.7.16.10.5 + CUTLASS ((16,4),N):((1,32),128); lane alignment 0 or 16",
    "G": "[cutlass] CUTLASS 1x4 atom (32,(N/4,4)):(1,(128,32))",
}
_A_DUP = {
    "A": ("same lanes as D", "[cutlass]"),
    "B": ("row m in lanes m and m+64 (Duplicated: sub-partitions 0<->2, 1<->3)", "[cutlass] TmemAllocMode::Duplicated"),
    "C": ("same lanes as D, same lane alignment", "[doc] same-alignment rule; open (see Layout C)"),
    "D": ("same lanes as D", "[cutlass]"),
    "E": ("each lane half reads rows 0-63 from its own 64 lanes: row m in lanes m and m+64", "[inferred]"),
    "F": ("same lanes as D, same lane alignment", "[doc] PTX §9.7.16.10.5 same-alignment rule"),
    "G": ("row m in lanes m, m+32, m+64, m+96", "[inferred] by analogy with E"),
}


def _shape_error(msg: str, rule: str) -> TmemShapeError:
    return TmemShapeError(msg, rule=rule, ref=_REF_SHAPES)


@frozen
class DataPathLayout:
    """The TMEM placement of one MMA shape's D (per CTA); build it with :func:`datapath_layout`.

    ``m`` and ``n`` are the *instruction's* M and N; :attr:`rows` is the per-CTA row count
    (M / cta_group). Maps are vectorized: arrays in, arrays out.
    """

    letter: str
    m: int
    n: int
    cta_group: int = 1
    ws: bool = False
    sparse: bool = False
    lane_align: int = field(default=0)

    # ---- geometry --------------------------------------------------------------------------------
    @property
    def rows(self) -> int:
        """Rows of D held by one CTA."""
        return self.m // self.cta_group

    @property
    def split(self) -> int:
        """How many ways N is split across lane groups: 1 (4x1), 2 (2x2) or 4 (1x4)."""
        return {"E": 2, "B": 2, "G": 4}.get(self.letter, 1)

    @property
    def columns(self) -> int:
        """TMEM columns one D occupies (N, N/2 or N/4)."""
        return self.n // self.split

    @property
    def organization(self) -> str:
        """PTX's "R x C" organization (E is printed "2x3" in PTX, read as "2x2")."""
        return {1: "4x1", 2: "2x2", 4: "1x4"}[self.split] + (" (half datapath)" if self.letter in "FC" else "")

    @property
    def status(self) -> str:
        """Where the map comes from: ``[doc]``, ``[cutlass]``, ``[inferred]`` or ``[open]``."""
        return _STATUS[self.letter]

    @property
    def case(self) -> str:
        return LAYOUT_CASES[self.letter]

    # ---- maps ------------------------------------------------------------------------------------
    def map(self, m, n):
        """(lane, column offset from C0) of ``D[m][n]`` (per-CTA row ``m``); vectorized.

        >>> datapath_layout(32, 256, ws=True).map(3, 200)   # Layout G: quarter 3 of N
        (99, 8)
        """
        mm = np.asarray(m, dtype=np.int64)
        nn = np.asarray(n, dtype=np.int64)
        if (mm.size and (mm.min() < 0 or mm.max() >= self.rows)) or (nn.size and (nn.min() < 0 or nn.max() >= self.n)):
            raise TmemShapeError(f"D index outside the {self.rows}x{self.n} per-CTA tile of Layout {self.letter}",
                                 rule="D coordinates inside the tile")
        if self.letter in "FC":
            lane = self.lane_align + 32 * (mm // 16) + mm % 16
            col = nn + 0 * mm
        elif self.split == 1:
            lane, col = mm + 0 * nn, nn + 0 * mm
        else:
            per = self.columns
            lane = mm + self.rows * (nn // per)
            col = nn % per + 0 * mm
        if np.ndim(lane) == 0:
            return int(lane), int(col)
        return lane, col

    def inverse(self, lane, column):
        """``(m, n)`` stored at (lane, column offset); ``(-1, -1)`` where the cell is not in the footprint.

        >>> datapath_layout(64, 64).inverse(16, 0)   # Layout F, L0 = 0: lane 16 is unused
        (-1, -1)
        """
        ll = np.asarray(lane, dtype=np.int64)
        cc = np.asarray(column, dtype=np.int64)
        if self.letter in "FC":
            rel = ll - self.lane_align
            q, r = np.divmod(rel, 32)
            ok = (rel >= 0) & (r < 16)
            m = 16 * q + r
            n = cc + 0 * ll
        elif self.split == 1:
            ok = ll < self.rows
            m, n = ll + 0 * cc, cc + 0 * ll
        else:
            g, m = np.divmod(ll, self.rows)
            n = g * self.columns + cc
            ok = g < self.split
        ok = ok & (cc >= 0) & (cc < self.columns) & (ll >= 0) & (ll < LANES)
        m = np.where(ok, m, -1)
        n = np.where(ok, n, -1)
        if np.ndim(m) == 0:
            return int(m), int(n)
        return m, n

    def full_map(self) -> tuple[np.ndarray, np.ndarray]:
        """(lane, column offset) for every element: two int64 arrays of shape (rows, N), read-only
        (computed once per layout: every MMA's D cells come from here)."""
        return _full_map(self)

    def footprint(self) -> np.ndarray:
        """Boolean (128 lanes, :attr:`columns`): the cells this D occupies."""
        lane, col = self.full_map()
        out = np.zeros((LANES, self.columns), dtype=bool)
        out[lane, col] = True
        return out

    def lanes(self) -> np.ndarray:
        """Sorted lanes that hold part of D."""
        return np.flatnonzero(self.footprint().any(axis=1))

    # ---- A operand in TMEM -------------------------------------------------------------------------
    @property
    def a_duplication(self) -> tuple[str, str]:
        """(rule, source tag) for where A row m must be present when A comes from TMEM."""
        return _A_DUP[self.letter]

    def a_lanes(self, m) -> np.ndarray:
        """Lanes where A row ``m`` must be present (TS form): shape ``m.shape + (copies,)``.

        >>> datapath_layout(64, 128, ws=True).a_lanes(5).tolist()    # Layout E [inferred]
        [5, 69]
        """
        mm = np.asarray(m, dtype=np.int64)
        if mm.size and (mm.min() < 0 or mm.max() >= self.rows):
            raise TmemShapeError(f"A row outside the {self.rows} rows of Layout {self.letter}", rule="A rows")
        if self.split == 1:
            base = self.map(mm, np.zeros_like(mm))[0]
            return np.asarray(base)[..., None]
        return mm[..., None] + self.rows * np.arange(self.split, dtype=np.int64)

    @staticmethod
    def a_cell(k, *, bits: int = 16):
        """(column offset from A's column, sub-word slot) of A element ``k`` along K, K-major in TMEM.

        ``32 // bits`` elements share a cell; slot 0 is the low bits (16-bit: even k low half)
        [cutlass] 16-bit ``tmem_frg``; the order matches ``.pack::16b``. One K=16 bf16
        instruction reads 8 columns.

        >>> DataPathLayout.a_cell(np.arange(4))
        (array([0, 0, 1, 1]), array([0, 1, 0, 1]))
        """
        if bits not in (8, 16, 32):
            raise TmemShapeError(f"A elements of {bits} bits cannot be packed in 32-bit cells; use 8, 16 or 32",
                                 rule="A in TMEM: 32 // bits elements per cell")
        per = 32 // bits
        kk = np.asarray(k, dtype=np.int64)
        col, slot = np.divmod(kk, per)
        if np.ndim(col) == 0:
            return int(col), int(slot)
        return col, slot

    # ---- text ------------------------------------------------------------------------------------
    def describe(self) -> list[str]:
        """Plain sentences: the case, where D goes, and how sure that is."""
        first, last = int(self.lanes()[0]), int(self.lanes()[-1])
        out = [f"Layout {self.letter} ({self.case}; organization {self.organization}): M={self.m} N={self.n}, "
               f"{self.rows} rows per CTA, lanes {first}-{last}, {self.columns} columns. Source: {self.status}."]
        if self.split > 1:
            per = self.columns
            for g in range(self.split):
                out.append(f"D[:, {g * per}:{(g + 1) * per}] -> lanes {g * self.rows}-{(g + 1) * self.rows - 1}, "
                           f"columns C0+0..C0+{per - 1}")
        rule, tag = self.a_duplication
        out.append(f"A from TMEM: {rule} {tag}.")
        return out

    def __str__(self) -> str:
        return f"Layout {self.letter} (M={self.m}, N={self.n}, {self.case})"


def datapath_layout(m: int, n: int, *, ws: bool = False, cta_group: int = 1, sparse: bool = False,
                    lane_align: int = 0) -> DataPathLayout:
    """The data-path layout of a ``kind::f16`` MMA of shape M x N, with legality checks.

    Legal shapes (PTX ISA 9.0 §9.7.16.2.1 Table 39): ``cta_group::1`` without ``.ws``:
    M in {64, 128}, N = 8..256 step 8; ``.ws``: M in {32, 64, 128}, N in {64, 128, 256}
    (sparse: {64, 128}); ``cta_group::2``: M in {128, 256}, N = 16..256 step 16, no ``.ws``.
    ``lane_align`` (0 or 16) applies to the half-datapath layouts F and C only.

    >>> str(datapath_layout(128, 256, cta_group=2))
    'Layout B (M=128, N=256, cta_group::2, M=128, dense)'
    """
    for name, v in (("m", m), ("n", n), ("cta_group", cta_group)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            raise _shape_error(f"{name} must be an integer, got {v!r}", "integer MMA shape")
    m, n = int(m), int(n)
    if cta_group not in (1, 2):
        raise TmemShapeError(f"cta_group must be 1 or 2, got {cta_group}", rule=".cta_group::1 or ::2",
                             ref="PTX ISA 9.0 §9.7.16.10.9")
    if ws:
        if cta_group != 1:
            raise _shape_error(".ws exists only for cta_group::1", ".ws is cta_group::1 only")
        if m not in (32, 64, 128):
            raise _shape_error(f".ws M must be 32, 64 or 128, got {m}", ".ws M in {32, 64, 128}")
        legal_n = (64, 128) if sparse else (64, 128, 256)
        if n not in legal_n:
            raise _shape_error(f".ws N must be one of {legal_n}, got {n}", f".ws N in {set(legal_n)}")
        letter = {128: "D", 64: "E", 32: "G"}[m]
    elif cta_group == 1:
        if m not in (64, 128):
            raise _shape_error(f"cta_group::1 M must be 64 or 128 without .ws (M=32 needs .ws), got {m}",
                               "cta_group::1 M in {64, 128}")
        if not (8 <= n <= 256 and n % 8 == 0):
            raise _shape_error(f"cta_group::1 N must be 8..256 in steps of 8, got {n}", "N = 8..256 step 8")
        letter = "D" if m == 128 else "F"
    else:
        if m not in (128, 256):
            raise _shape_error(f"cta_group::2 M must be 128 or 256, got {m}", "cta_group::2 M in {128, 256}")
        if not (16 <= n <= 256 and n % 16 == 0):
            raise _shape_error(f"cta_group::2 N must be 16..256 in steps of 16, got {n}", "N = 16..256 step 16")
        letter = "A" if m == 256 else ("C" if sparse else "B")
    if letter in "FC":
        if lane_align not in (0, 16):
            raise TmemShapeError(f"Layout {letter} lane alignment must be 0 or 16, got {lane_align}",
                                 rule="half-datapath lane alignment 0 or 16", ref=_REF)
    elif lane_align:
        raise TmemShapeError(f"Layout {letter} has lane alignment 0 (only F and C may use 16), got {lane_align}",
                             rule="lane alignment 0 except F and C", ref=_REF)
    return DataPathLayout(letter, m, n, cta_group=cta_group, ws=bool(ws), sparse=bool(sparse),
                          lane_align=int(lane_align))


@functools.lru_cache(maxsize=256)
def _full_map(layout: DataPathLayout) -> tuple[np.ndarray, np.ndarray]:
    m, n = np.meshgrid(np.arange(layout.rows), np.arange(layout.n), indexing="ij")
    lane, col = layout.map(m, n)
    lane.flags.writeable = col.flags.writeable = False
    return lane, col
