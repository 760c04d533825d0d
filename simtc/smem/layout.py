"""Canonical tensor-core operand layouts in shared memory (K-major and MN-major).

A tile holds an operand ``X[mn][k]``: ``mn`` is the M (for A) or N (for B) index and ``k``
the reduction index. simtc builds tiles exactly as CUTLASS does: the swizzle *atom* is
CuTe's ``UMMA::Layout_{K,MN}_{INTER,SW32,SW64,SW128}_Atom<T>`` (and
``Layout_MN_SW128_32B_Atom<T>``) from ``cute/atom/mma_traits_sm90_gmma.hpp`` /
``mma_traits_sm100.hpp``, and the tile is ``tile_to_shape(atom, (MN, K))``: atoms repeat
along MN first, then along K. The swizzle then acts on the absolute byte address
(:mod:`simtc.smem.swizzle`); tiles are assumed to start on the swizzle's natural boundary.

Atoms (rows x bytes of the contiguous dimension):

* K-major: 8 rows of MN, ``width`` bytes of K each (16 / 32 / 64 / 128 B);
* MN-major: 8 rows of K (4 for SW128_32B), ``width`` bytes of MN each.

>>> t = CanonicalLayout("bf16", "K", "SW128", 64, 64)
>>> [int(t.offset(1, c)) // 2 for c in range(0, 64, 8)]  # element offsets of row 1
[72, 64, 88, 80, 104, 96, 120, 112]
>>> t.lbo, t.sbo
(16, 1024)
"""

from __future__ import annotations

import enum

import numpy as np
from attrs import field, frozen

from simtc.errors import LayoutError
from simtc.numerics.formats import DtypeInfo, dtype_info
from simtc.smem.swizzle import SwizzleMode, swizzle, swizzle_mode

__all__ = ["INSTR_K_BYTES", "LAYOUT_DTYPES", "CanonicalLayout", "Major", "canonical_combinations", "major"]

INSTR_K_BYTES = 32
"""Bytes of K one tensor-core instruction consumes (bf16 K=16, tf32 K=8, e4m3 K=32)."""


LAYOUT_DTYPES = ("e4m3", "bf16", "fp16", "tf32")
"""Element types with canonical tensor-core operand layouts (1, 2 and 4 bytes)."""


class Major(enum.Enum):
    """Which dimension is contiguous: ``K`` (transpose bit 0) or ``MN`` (transpose bit 1)."""

    K = "K"
    MN = "MN"

    def __str__(self) -> str:
        return f"{self.value}-major"


def major(value: str | Major) -> Major:
    """Parse ``"K"`` / ``"MN"`` (also ``"M"``, ``"N"``) into a :class:`Major`.

    >>> major("mn")
    <Major.MN: 'MN'>
    """
    if isinstance(value, Major):
        return value
    v = str(value).strip().upper()
    if v == "K":
        return Major.K
    if v in ("MN", "M", "N"):
        return Major.MN
    raise LayoutError(f"unknown major mode {value!r}; use K or MN", rule="operand major modes",
                      ref="PTX ISA 9.0 §9.7.16.10.6")


def canonical_combinations() -> list[tuple[str, Major, SwizzleMode]]:
    """Every (dtype, major, swizzle) with a canonical layout (SW128_32B is MN-major only).

    >>> len(canonical_combinations())
    36
    """
    return [(d, m, s) for d in LAYOUT_DTYPES for m in Major for s in SwizzleMode
            if not (m is Major.K and s is SwizzleMode.SW128_32B)]


def _to_info(d) -> DtypeInfo:
    return dtype_info(d)


@frozen
class CanonicalLayout:
    """A canonical operand tile: ``rows`` = MN extent, ``cols`` = K extent, in elements.

    Calling the layout (or :meth:`offset`) maps element coordinates to byte offsets from the
    tile base *after* swizzling; :meth:`coords` is the inverse. ``rows`` and ``cols`` must be
    multiples of the atom shape (:attr:`atom_shape`).

    >>> t = CanonicalLayout("bf16", "MN", "SW128", 128, 16)
    >>> t.atom_shape, t.lbo, t.sbo
    ((64, 8), 1024, 2048)
    >>> CanonicalLayout("bf16", "MN", "SW128", 64, 16).lbo   # one MN atom: CuTe writes 0
    0
    """

    dtype: DtypeInfo = field(converter=_to_info)
    major: Major = field(converter=major)
    swizzle: SwizzleMode = field(converter=swizzle_mode)
    rows: int = field()
    cols: int = field()

    def __attrs_post_init__(self) -> None:
        if self.swizzle is SwizzleMode.SW128_32B and self.major is Major.K:
            raise LayoutError(
                "SWIZZLE_128B_BASE32B (128B swizzle with 32-byte atomicity) has no K-major form",
                rule="128B/32B-atomicity swizzle is MN-major only",
                ref="PTX ISA 9.0 §9.7.16.10.6 Table 53; CUTLASS mma_traits_sm100.hpp make_umma_desc",
            )
        for name in ("rows", "cols"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v <= 0:
                raise LayoutError(f"{name} must be a positive integer, got {v!r}", rule="tile extents")
        am, ak = self.atom_shape
        if self.rows % am or self.cols % ak:
            raise LayoutError(
                f"a {self.major} {self.swizzle.name} {self.dtype.name} tile must be a whole number of "
                f"{am}x{ak} (MN x K) atoms; got {self.rows}x{self.cols}",
                rule="tile = whole swizzle atoms (tile_to_shape)",
                ref="CUTLASS cute/atom/mma_traits_sm90_gmma.hpp Layout_*_Atom",
            )

    # ---- atom geometry -------------------------------------------------------------------
    @property
    def elem_bytes(self) -> int:
        return self.dtype.bytes

    @property
    def atom_shape(self) -> tuple[int, int]:
        """(MN, K) extent of one swizzle atom, in elements."""
        per_row = self.swizzle.width // self.elem_bytes
        if self.major is Major.K:
            return (self.swizzle.atom_rows, per_row)
        return (per_row, self.swizzle.atom_rows)

    @property
    def atoms(self) -> tuple[int, int]:
        """Number of atoms along (MN, K)."""
        am, ak = self.atom_shape
        return (self.rows // am, self.cols // ak)

    @property
    def nbytes(self) -> int:
        """Bytes the tile occupies."""
        return self.rows * self.cols * self.elem_bytes

    # ---- offsets ---------------------------------------------------------------------------
    def linear_offset(self, mn, k):
        """Byte offset of element (mn, k) *before* swizzling (vectorized)."""
        mn = np.asarray(mn, dtype=np.int64)
        k = np.asarray(k, dtype=np.int64)
        if (mn.size and (mn.min() < 0 or mn.max() >= self.rows)) or (k.size and (k.min() < 0 or k.max() >= self.cols)):
            raise LayoutError(f"coordinates outside the {self.rows}x{self.cols} tile", rule="tile bounds")
        am, ak = self.atom_shape
        eb, width = self.elem_bytes, self.swizzle.width
        inner = (mn % am) * width + (k % ak) * eb if self.major is Major.K else (k % ak) * width + (mn % am) * eb
        atom = (mn // am) + (k // ak) * self.atoms[0]
        return atom * self.swizzle.atom_bytes + inner

    def offset(self, mn, k):
        """Byte offset of element (mn, k) from the tile base, after swizzling (vectorized).

        >>> int(CanonicalLayout("bf16", "K", "SW128", 64, 64).offset(2, 0))
        288
        """
        out = swizzle(self.linear_offset(mn, k), self.swizzle)
        return int(out) if np.ndim(out) == 0 else out

    __call__ = offset

    def offsets(self) -> np.ndarray:
        """All byte offsets as an int64 array of shape (rows, cols)."""
        mn, k = np.meshgrid(np.arange(self.rows), np.arange(self.cols), indexing="ij")
        return self.offset(mn, k)

    def coords(self, byte_offset):
        """Inverse of :meth:`offset`: the (mn, k) element holding each byte offset.

        Offsets that are not the first byte of an element map to the element containing
        them. Raises :class:`LayoutError` for offsets outside the tile.

        >>> t = CanonicalLayout("bf16", "K", "SW128", 64, 64)
        >>> tuple(int(v) for v in t.coords(t.offset(5, 37)))
        (5, 37)
        """
        b = np.asarray(byte_offset, dtype=np.int64)
        if b.size and (b.min() < 0 or b.max() >= self.nbytes):
            raise LayoutError(f"byte offsets outside the {self.nbytes}-byte tile", rule="tile bounds")
        lin = swizzle(b, self.swizzle)  # involution
        am, ak = self.atom_shape
        eb, width = self.elem_bytes, self.swizzle.width
        atom, inner = np.divmod(lin, self.swizzle.atom_bytes)
        a_mn, a_k = np.divmod(atom, self.atoms[0])[::-1]
        row, col = np.divmod(inner, width)
        e = col // eb
        if self.major is Major.K:
            mn, k = a_mn * am + row, a_k * ak + e
        else:
            mn, k = a_mn * am + e, a_k * ak + row
        if np.ndim(byte_offset) == 0:
            return int(mn), int(k)
        return mn, k

    # ---- descriptor view -----------------------------------------------------------------
    @property
    def k_slice_elems(self) -> int:
        """K elements in one instruction-K slice (32 bytes of K)."""
        return INSTR_K_BYTES // self.elem_bytes

    def _atom_stride(self, axis: int) -> int:
        """Byte stride between adjacent atoms along MN (axis 0) or K (axis 1)."""
        return self.swizzle.atom_bytes * (1 if axis == 0 else self.atoms[0])

    @property
    def lbo(self) -> int:
        """Leading-dimension byte offset CUTLASS's ``make_umma_desc`` puts in the descriptor.

        K-major swizzled: unused, encoded as 16 B. K-major INTERLEAVE: distance between the two
        K-adjacent core matrices. MN-major swizzled: distance between MN-adjacent atoms.
        MN-major INTERLEAVE: distance between K-adjacent 8-row groups.
        (CUTLASS ``cute/atom/mma_traits_sm100.hpp`` make_umma_desc; PTX ISA 9.0 §9.7.16.3.3.)
        """
        if self.major is Major.K:
            return 16 if self.swizzle is not SwizzleMode.INTERLEAVE else self._stride_if_repeated(1)
        if self.swizzle is SwizzleMode.INTERLEAVE:
            return self._stride_if_repeated(1)
        return self._stride_if_repeated(0)

    @property
    def sbo(self) -> int:
        """Stride-dimension byte offset CUTLASS's ``make_umma_desc`` puts in the descriptor.

        K-major: distance between MN-adjacent 8-row groups. MN-major swizzled: distance between
        K-adjacent 8-row (4 for SW128_32B) groups. MN-major INTERLEAVE: distance between
        MN-adjacent core matrices.
        """
        if self.major is Major.K:
            return self._stride_if_repeated(0)
        if self.swizzle is SwizzleMode.INTERLEAVE:
            return self._stride_if_repeated(0)
        return self._stride_if_repeated(1)

    def _stride_if_repeated(self, axis: int) -> int:
        """Stride between the atoms one instruction slice spans along ``axis`` (0 MN, 1 K), as CuTe sets it.

        ``make_umma_desc`` reads the stride of a mode of the slice's canonical layout; when that
        mode has size 1 (a single atom along MN, or a K slice inside one 8-row group, e.g. tf32
        MN-major) CuTe's stride is 0, and so is the field [cutlass, checked against the CuTe
        oracle]. The tensor core never multiplies it by a non-zero index then.
        """
        count = self.atoms[0] if axis == 0 else self.k_slice_elems // self.atom_shape[1]
        return self._atom_stride(axis) if count > 1 else 0

    def slice_start(self, k_slice: int) -> int:
        """Byte offset (unswizzled) where instruction-K slice ``k_slice`` starts.

        This is how CUTLASS steps K: the descriptor's start address advances to the slice's
        first element (``DescriptorIterator``), e.g. +32 B inside a K-major SW128 atom.

        >>> [CanonicalLayout("bf16", "K", "SW128", 64, 128).slice_start(s) for s in range(6)]
        [0, 32, 64, 96, 8192, 8224]
        """
        k_bytes = self.cols * self.elem_bytes
        n = k_bytes // INSTR_K_BYTES
        rule = f"an instruction's K slice is {INSTR_K_BYTES} bytes; the tile holds at least one, and whole ones"
        if n == 0 or k_bytes % INSTR_K_BYTES:
            raise LayoutError(
                f"the tile's K extent is {self.cols} x {self.elem_bytes} B = {k_bytes} B, not a whole number of "
                f"{INSTR_K_BYTES}-byte instruction-K slices, so no descriptor can be built for it", rule=rule)
        if not 0 <= k_slice < n:
            raise LayoutError(f"k_slice {k_slice} outside the tile's {n} instruction-K slices (0..{n - 1})", rule=rule)
        return int(self.linear_offset(0, k_slice * self.k_slice_elems))

    def descriptor(self, *, arch: str = "sm100", start: int = 0, k_slice: int = 0):
        """The shared-memory descriptor CUTLASS builds for instruction-K slice ``k_slice``.

        ``start`` is the tile's absolute shared-memory address (must be on the swizzle's
        natural boundary so that base offset 0 is right).

        >>> hex(CanonicalLayout("bf16", "K", "SW128", 64, 64).descriptor().encode())
        '0x4000404000010000'
        """
        from simtc.smem.desc import SmemDescriptor

        if start % self.swizzle.alignment:
            raise LayoutError(
                f"tile start {start} is not aligned to {self.swizzle.alignment} B, the natural boundary of "
                f"{self.swizzle.value}; base offset 0 would be wrong",
                rule="swizzled tiles start on the pattern boundary (base offset 0)",
                ref="PTX ISA 9.0 §9.7.16.3 Table 41",
            )
        return SmemDescriptor(
            start=start + self.slice_start(k_slice), lbo=self.lbo, sbo=self.sbo, base_offset=0,
            layout_type=self.swizzle, arch=arch,
        )

    # ---- notation ----------------------------------------------------------------------------
    def cute_str(self) -> str:
        """The tile in CuTe notation, strides in elements, e.g. ``Sw<3,4,3> o (64,(64,1)):(64,(1,4096))``."""
        b, m, s = self.swizzle.cute
        am, ak = self.atom_shape
        nm, nk = self.atoms
        per_row = self.swizzle.width // self.elem_bytes
        atom_el = self.swizzle.atom_bytes // self.elem_bytes
        if self.major is Major.K:
            shape = f"(({am},{nm}),({ak},{nk}))"
            stride = f"(({per_row},{atom_el}),(1,{atom_el * nm}))"
        else:
            shape = f"(({am},{nm}),({ak},{nk}))"
            stride = f"((1,{atom_el}),({per_row},{atom_el * nm}))"
        return f"Sw<{b},{m},{s}> o {shape}:{stride}"

    def __str__(self) -> str:
        return (f"{self.rows}x{self.cols} {self.dtype.name} {self.major} {self.swizzle.name} tile "
                f"({self.nbytes} B): {self.cute_str()}")
