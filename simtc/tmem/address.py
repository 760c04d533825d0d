"""Tensor Memory geometry and addresses.

Tensor Memory (TMEM) holds 128 lanes x 512 columns of 32-bit cells per CTA (256 KiB;
PTX ISA 9.0 §9.7.16.1). A lane is a row ("datapath", DP in CUTLASS); a column is one 32-bit
cell. An address is 32 bits: **bits 31-16 = lane, bits 15-0 = column**, so
``taddr = lane << 16 | column``; adding ``c`` moves ``c`` columns and adding ``l << 16``
moves ``l`` lanes (PTX ISA 9.0 §9.7.16.1.1). Only 7 lane bits and 9 column bits are
meaningful (mask ``0x007F01FF``, CUTLASS ``cute/pointer.hpp``).

``tcgen05.ld`` / ``tcgen05.st`` obey the lane-quadrant rule: warp ``w`` of the CTA may touch
lanes ``32*(w % 4)`` ... ``32*(w % 4) + 31`` only (PTX ISA 9.0 §9.7.16.8.1; CUTLASS checks
``(warp_idx % 4) == (lane / 32) % 4`` in ``cute/atom/copy_traits_sm100.hpp``).

>>> a = TmemAddress(lane=64, column=256)
>>> a.hex()
'0x00400100'
>>> TmemAddress.from_taddr(0x00400100 + 8)
TmemAddress(lane=64, column=264)
>>> quadrant_lanes(6)
(64, 95)
"""

from __future__ import annotations

import numpy as np
from attrs import field, frozen

from simtc.errors import LaneQuadrantError, TmemAccessError

__all__ = [
    "COLUMNS",
    "LANES",
    "QUADRANT_LANES",
    "TADDR_MASK",
    "TmemAddress",
    "as_address",
    "pack_taddr",
    "quadrant_lanes",
    "unpack_taddr",
]

LANES = 128
"""Lanes (rows) of Tensor Memory per CTA (PTX ISA 9.0 §9.7.16.1)."""
COLUMNS = 512
"""32-bit columns of Tensor Memory per CTA (PTX ISA 9.0 §9.7.16.1)."""
QUADRANT_LANES = 32
"""Lanes per warp quadrant ("sub-partition") (PTX ISA 9.0 §9.7.16.8.1)."""
TADDR_MASK = 0x007F01FF
"""Meaningful address bits: 7 lane bits, 9 column bits (CUTLASS ``cute/pointer.hpp``)."""

_REF_ADDR = "PTX ISA 9.0 §9.7.16.1.1"
_REF_QUAD = "PTX ISA 9.0 §9.7.16.8.1"


def check_range(lane, column, what: str = "") -> None:
    """Raise :class:`TmemAccessError` unless every lane is in 0-127 and every column in 0-511."""
    if type(lane) is int and type(column) is int and 0 <= lane < LANES and 0 <= column < COLUMNS:
        return  # the common scalar case without numpy (addresses are checked on every record)
    lane = np.asarray(lane)
    column = np.asarray(column)
    prefix = f"{what}: " if what else ""
    if lane.size and (lane.min() < 0 or lane.max() >= LANES):
        raise TmemAccessError(f"{prefix}lane {int(lane.max() if lane.max() >= LANES else lane.min())} is outside "
                              f"Tensor Memory's {LANES} lanes (0-{LANES - 1})",
                              rule="TMEM has 128 lanes", ref="PTX ISA 9.0 §9.7.16.1")
    if column.size and (column.min() < 0 or column.max() >= COLUMNS):
        raise TmemAccessError(f"{prefix}column {int(column.max() if column.max() >= COLUMNS else column.min())} is "
                              f"outside Tensor Memory's {COLUMNS} columns (0-{COLUMNS - 1})",
                              rule="TMEM has 512 columns", ref="PTX ISA 9.0 §9.7.16.1")


def pack_taddr(lane, column):
    """``lane << 16 | column`` (vectorized); lanes and columns are range-checked.

    >>> hex(pack_taddr(64, 400))
    '0x400190'
    >>> pack_taddr(np.array([0, 1]), 3).tolist()
    [3, 65539]
    """
    check_range(lane, column)
    out = (np.asarray(lane, dtype=np.int64) << 16) | np.asarray(column, dtype=np.int64)
    return int(out) if np.ndim(out) == 0 else out


def unpack_taddr(taddr):
    """``(lane, column)`` of an address (vectorized); bits outside ``0x007F01FF`` raise.

    >>> unpack_taddr(0x00400190)
    (64, 400)
    """
    if type(taddr) is int and taddr >= 0 and not taddr & ~TADDR_MASK:
        return taddr >> 16, taddr & 0xFFFF  # the common scalar case without numpy
    t = np.asarray(taddr, dtype=np.int64)
    bad = (t < 0) | ((t & ~np.int64(TADDR_MASK)) != 0)
    if bad.any():
        raise TmemAccessError(
            f"TMEM address {int(t[bad].ravel()[0]):#x} has bits set outside lane bits 16-22 and column bits "
            f"0-8 (mask {TADDR_MASK:#010x}): lane or column beyond 128 x 512",
            rule="taddr = lane << 16 | column, 128 lanes x 512 columns", ref=_REF_ADDR,
        )
    lane, col = t >> 16, t & 0xFFFF
    if np.ndim(t) == 0:
        return int(lane), int(col)
    return lane, col


@frozen(order=True)
class TmemAddress:
    """A Tensor Memory address as (lane, column); ``int(address)`` is the 32-bit ``taddr``.

    >>> a = TmemAddress(0, 400)
    >>> int(a.offset(lanes=64, columns=8))
    4194712
    >>> str(a.offset(lanes=64, columns=8))
    'lane 64, column 408 (taddr 0x00400198)'
    """

    lane: int = field()
    column: int = field()

    def __attrs_post_init__(self) -> None:
        for name in ("lane", "column"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise TmemAccessError(f"{name} must be an integer, got {v!r}", rule="taddr fields are integers")
        check_range(self.lane, self.column)

    @property
    def taddr(self) -> int:
        """The 32-bit address ``lane << 16 | column``."""
        return (int(self.lane) << 16) | int(self.column)

    def __int__(self) -> int:
        return self.taddr

    __index__ = __int__

    def hex(self) -> str:
        return f"0x{self.taddr:08x}"

    @classmethod
    def from_taddr(cls, taddr: int | TmemAddress) -> TmemAddress:
        """Decode a 32-bit ``taddr`` (bits outside ``0x007F01FF`` raise)."""
        if isinstance(taddr, TmemAddress):
            return taddr
        if isinstance(taddr, bool) or not isinstance(taddr, (int, np.integer)):
            raise TmemAccessError(f"a TMEM address is a 32-bit integer (lane << 16 | column), got {taddr!r}",
                                  rule="taddr is a 32-bit integer", ref=_REF_ADDR)
        lane, col = unpack_taddr(int(taddr))
        return cls(lane, col)

    def offset(self, *, lanes: int = 0, columns: int = 0) -> TmemAddress:
        """The address ``lanes`` lanes down and ``columns`` columns right (``taddr + (l << 16) + c``)."""
        return TmemAddress(self.lane + lanes, self.column + columns)

    @property
    def quadrant(self) -> int:
        """Which warp quadrant (0-3) the lane belongs to."""
        return self.lane // QUADRANT_LANES

    def __str__(self) -> str:
        return f"lane {self.lane}, column {self.column} (taddr {self.hex()})"


def as_address(taddr: int | TmemAddress) -> TmemAddress:
    """Accept a ``TmemAddress`` or a 32-bit integer address."""
    return TmemAddress.from_taddr(taddr)


def quadrant_lanes(warp: int) -> tuple[int, int]:
    """First and last lane warp ``warp`` (CTA warp index) may access with ``tcgen05.ld/st``.

    The rule uses ``warp % 4``, so any warpgroup's four warps cover all 128 lanes
    (PTX ISA 9.0 §9.7.16.8.1).

    >>> quadrant_lanes(4)
    (0, 31)
    """
    if not isinstance(warp, (int, np.integer)) or warp < 0:
        raise LaneQuadrantError(f"warp index must be a non-negative integer, got {warp!r}",
                                rule="lane-quadrant rule uses the CTA warp index", ref=_REF_QUAD)
    q = int(warp) % 4
    return QUADRANT_LANES * q, QUADRANT_LANES * q + QUADRANT_LANES - 1
