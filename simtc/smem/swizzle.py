"""Shared-memory swizzle modes as functions on absolute byte addresses.

A swizzle is CuTe's ``Swizzle<B,M,S>``: with ``Y = (2**B - 1) << (M + S)``,
``f(a) = a ^ ((a & Y) >> S)``. The tensor core (and TMA) apply it to the **absolute**
shared-memory byte address, which is why swizzled tiles must start on the pattern's natural
boundary (PTX ISA 9.0 §9.7.16.3 Table 41, the base-offset rule; CUTLASS
``cute/swizzle.hpp``, ``cute/pointer_swizzle.hpp``).

On a byte address every mode here XORs the 16-byte-chunk bits with higher "row" bits and is
its own inverse, so :func:`unswizzle` is the same function.

>>> int(swizzle(0x80, "SW128"))  # byte 0 of 128-byte row 1 moves to chunk 1
144
>>> [int(c) for c in swizzle(128 + 16 * np.arange(8), "SW128") // 16 - 8]
[1, 0, 3, 2, 5, 4, 7, 6]
"""

from __future__ import annotations

import enum

import numpy as np

from simtc.errors import SwizzleError

__all__ = ["SwizzleMode", "swizzle", "swizzle_mode", "unswizzle"]


class SwizzleMode(enum.Enum):
    """The shared-memory layout types of the tcgen05 / wgmma matrix descriptors.

    Member values are CUTLASS's ``UMMA::LayoutType`` names. Attributes give the CuTe swizzle
    triple, the row width, the atom and the descriptor codes (PTX ISA 9.0 §9.7.16.4.1 Table 40
    for sm100, §9.7.15.5.1.2.2 for sm90).
    """

    INTERLEAVE = "SWIZZLE_NONE"
    SW32 = "SWIZZLE_32B"
    SW64 = "SWIZZLE_64B"
    SW128 = "SWIZZLE_128B"
    SW128_32B = "SWIZZLE_128B_BASE32B"

    @property
    def cute(self) -> tuple[int, int, int]:
        """CuTe ``Swizzle<B, M, S>`` triple acting on byte addresses."""
        return _INFO[self][0]

    @property
    def width(self) -> int:
        """Bytes in one swizzle-atom row along the contiguous dimension (16 for INTERLEAVE)."""
        return _INFO[self][1]

    @property
    def atom_rows(self) -> int:
        """Rows of one swizzle atom (8, or 4 for 128B with 32-byte atomicity)."""
        return _INFO[self][2]

    @property
    def atom_bytes(self) -> int:
        """Bytes in one swizzle atom (``width * atom_rows``)."""
        return self.width * self.atom_rows

    @property
    def period(self) -> int:
        """Bytes after which the address pattern repeats (16 = no pattern, for INTERLEAVE)."""
        b, m, s = self.cute
        return 1 << (b + m + s) if b else 16

    @property
    def alignment(self) -> int:
        """Alignment (bytes) a tile must have for base offset 0 (the pattern's natural boundary).

        INTERLEAVE needs 16 B; SW32 / SW64 / SW128 need 256 / 512 / 1024 B (PTX ISA 9.0
        §9.7.16.3 Table 41). For SW128_32B PTX gives no figure: 512 B is simtc's inference
        from the swizzle's period [inferred].
        """
        return self.period

    @property
    def chunk_bytes(self) -> int:
        """Granule the swizzle moves: 16 B, or 32 B for 128B with 32-byte atomicity."""
        return 1 << self.cute[1]

    @property
    def sm100_code(self) -> int:
        """3-bit layout type in bits 61-63 of an sm100 descriptor."""
        return _INFO[self][3]

    @property
    def sm90_code(self) -> int | None:
        """2-bit swizzle field in bits 62-63 of an sm90 descriptor (None: not on sm90)."""
        return _INFO[self][4]

    def __str__(self) -> str:
        b, m, s = self.cute
        return f"{self.value} (Sw<{b},{m},{s}>)"


_INFO = {
    # mode: ((B, M, S), width, atom_rows, sm100 code, sm90 code)
    SwizzleMode.INTERLEAVE: ((0, 4, 3), 16, 8, 0, 0),
    SwizzleMode.SW32: ((1, 4, 3), 32, 8, 6, 3),
    SwizzleMode.SW64: ((2, 4, 3), 64, 8, 4, 2),
    SwizzleMode.SW128: ((3, 4, 3), 128, 8, 2, 1),
    SwizzleMode.SW128_32B: ((2, 5, 2), 128, 4, 1, None),
}

_NAMES = {
    "interleave": SwizzleMode.INTERLEAVE, "none": SwizzleMode.INTERLEAVE, "swizzle_none": SwizzleMode.INTERLEAVE,
    "sw32": SwizzleMode.SW32, "32b": SwizzleMode.SW32, "swizzle_32b": SwizzleMode.SW32,
    "sw64": SwizzleMode.SW64, "64b": SwizzleMode.SW64, "swizzle_64b": SwizzleMode.SW64,
    "sw128": SwizzleMode.SW128, "128b": SwizzleMode.SW128, "swizzle_128b": SwizzleMode.SW128,
    "sw128_32b": SwizzleMode.SW128_32B, "swizzle_128b_base32b": SwizzleMode.SW128_32B,
    "128b_base32b": SwizzleMode.SW128_32B,
}


def swizzle_mode(mode: str | SwizzleMode) -> SwizzleMode:
    """Parse a swizzle mode name (``"SW128"``, ``"SWIZZLE_64B"``, ``"INTERLEAVE"``, ...).

    >>> swizzle_mode("sw64").width
    64
    """
    if isinstance(mode, SwizzleMode):
        return mode
    try:
        return _NAMES[str(mode).strip().lower()]
    except KeyError:
        raise SwizzleError(
            f"unknown swizzle mode {mode!r}; known: INTERLEAVE, SW32, SW64, SW128, SW128_32B",
            rule="descriptor layout types", ref="PTX ISA 9.0 §9.7.16.4.1 Table 40",
        ) from None


def _as_addresses(addr) -> np.ndarray:
    a = np.asarray(addr)
    if a.dtype.kind not in "iu":
        raise SwizzleError(f"shared-memory addresses must be integers, got dtype {a.dtype}",
                           rule="byte addresses are integers")
    if a.size and int(a.min()) < 0:
        raise SwizzleError("shared-memory addresses must be non-negative", rule="byte addresses are unsigned")
    return a.astype(np.int64, copy=False)


def swizzle(addr, mode: str | SwizzleMode):
    """Apply a swizzle mode to absolute shared-memory byte addresses (scalar or array).

    Returns an ``int`` for a scalar input, else an int64 array of the same shape.

    >>> int(swizzle(0x480 + 0x10, "SW64"))  # 64B: chunk bits 4-5 ^= address bits 7-8
    1152
    """
    m = swizzle_mode(mode)
    a = _as_addresses(addr)
    b, mbase, s = m.cute
    y = ((1 << b) - 1) << (mbase + s)
    out = a ^ ((a & y) >> s)
    return int(out) if np.ndim(addr) == 0 else out


def unswizzle(addr, mode: str | SwizzleMode):
    """Inverse of :func:`swizzle` (every mode is an involution on byte addresses).

    >>> int(unswizzle(swizzle(1234, "SW128"), "SW128"))
    1234
    """
    return swizzle(addr, mode)
