"""What a record reads and writes, computed from its fields alone (no memory contents).

* :class:`SmemRange` -- a half-open byte range of CTA-local shared memory.
* :class:`TmemRect` -- a lanes x columns rectangle of Tensor Memory cells.
* :class:`Footprint` -- shared-memory ranges, TMEM rectangles, registers, barriers and the
  memory proxy (``"generic"``: ordinary loads/stores; ``"async"``: the tensor core, TMA, ``tcgen05.cp``)
  that performs the shared-memory accesses (PTX ISA 9.0 §8.6 memory proxies; §9.7.16.6.5).

Descriptor reads are exact: the byte addresses come from
:func:`simtc.smem.read.descriptor_addresses` (the one reading the MMA and ``tcgen05.cp`` models
use) and are coalesced into ranges. The helpers are cached on the descriptor word, because an
engine asks for the same footprints again and again.

>>> d = SmemDescriptor(start=0, lbo=16, sbo=128, layout_type="INTERLEAVE")
>>> descriptor_ranges(d.encode(), "sm100", "K", 2, 8, 8)      # 8 rows x 16 B: one core matrix
(SmemRange(start=0, stop=128),)
"""

from __future__ import annotations

import functools

import numpy as np
from attrs import field, frozen

from simtc.errors import SimtcError
from simtc.smem.desc import SmemDescriptor
from simtc.smem.read import descriptor_addresses

__all__ = ["PROXIES", "Footprint", "SmemRange", "TmemRect", "coalesce", "descriptor_ranges", "element_ranges",
           "lane_runs", "merge_ranges"]

PROXIES = ("generic", "async")
"""Memory proxies (PTX ISA 9.0 §8.6): ordinary ld/st vs the async proxy (tcgen05, TMA, wgmma operand reads)."""


def _nonneg_int(inst, attribute, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise SimtcError(f"{attribute.name} must be a non-negative integer, got {value!r}",
                         rule="footprint coordinates are non-negative integers")


@frozen(order=True)
class SmemRange:
    """Bytes ``[start, stop)`` of CTA-local shared memory."""

    start: int = field(validator=_nonneg_int)
    stop: int = field(validator=_nonneg_int)

    def __attrs_post_init__(self) -> None:
        if self.stop <= self.start:
            raise SimtcError(f"empty or reversed shared-memory range [{self.start}, {self.stop})",
                             rule="a range has start < stop")

    @property
    def nbytes(self) -> int:
        return self.stop - self.start

    def overlaps(self, other: SmemRange) -> bool:
        return self.start < other.stop and other.start < self.stop

    def __str__(self) -> str:
        return f"[{self.start}, {self.stop})"


@frozen(order=True)
class TmemRect:
    """Tensor Memory lanes ``lane0 ... lane0+lanes-1`` x columns ``col0 ... col0+cols-1``."""

    lane0: int = field(validator=_nonneg_int)
    lanes: int = field(validator=_nonneg_int)
    col0: int = field(validator=_nonneg_int)
    cols: int = field(validator=_nonneg_int)

    def __attrs_post_init__(self) -> None:
        if self.lanes == 0 or self.cols == 0:
            raise SimtcError("a TMEM rectangle has at least one lane and one column", rule="non-empty rectangle")

    @property
    def cells(self) -> int:
        return self.lanes * self.cols

    def overlaps(self, other: TmemRect) -> bool:
        return (self.lane0 < other.lane0 + other.lanes and other.lane0 < self.lane0 + self.lanes
                and self.col0 < other.col0 + other.cols and other.col0 < self.col0 + self.cols)

    def __str__(self) -> str:
        return (f"lanes {self.lane0}-{self.lane0 + self.lanes - 1} x "
                f"cols {self.col0}-{self.col0 + self.cols - 1}")


def _check_proxy(inst, attribute, value) -> None:
    if value not in PROXIES:
        raise SimtcError(f"proxy must be one of {PROXIES}, got {value!r}", rule="memory proxies",
                         ref="PTX ISA 9.0 §8.6")


@frozen
class Footprint:
    """Everything one record touches. Empty tuples mean "nothing of that kind"."""

    smem_reads: tuple[SmemRange, ...] = field(default=(), converter=tuple)
    smem_writes: tuple[SmemRange, ...] = field(default=(), converter=tuple)
    tmem_reads: tuple[TmemRect, ...] = field(default=(), converter=tuple)
    tmem_writes: tuple[TmemRect, ...] = field(default=(), converter=tuple)
    regs_read: tuple[str, ...] = field(default=(), converter=tuple)
    regs_written: tuple[str, ...] = field(default=(), converter=tuple)
    barriers: tuple[str, ...] = field(default=(), converter=tuple)
    proxy: str = field(default="generic", validator=_check_proxy)

    @property
    def smem_bytes_read(self) -> int:
        return sum(r.nbytes for r in self.smem_reads)

    @property
    def smem_bytes_written(self) -> int:
        return sum(r.nbytes for r in self.smem_writes)


def coalesce(byte_addresses: np.ndarray) -> tuple[SmemRange, ...]:
    """Sorted, merged half-open ranges covering the given byte addresses (any shape).

    >>> coalesce(np.array([5, 0, 1, 2, 7, 6]))
    (SmemRange(start=0, stop=3), SmemRange(start=5, stop=8))
    """
    a = np.unique(np.asarray(byte_addresses, dtype=np.int64).ravel())
    if a.size == 0:
        return ()
    breaks = np.flatnonzero(np.diff(a) != 1)
    starts = np.concatenate(([a[0]], a[breaks + 1]))
    stops = np.concatenate((a[breaks], [a[-1]])) + 1
    return tuple(SmemRange(int(s), int(e)) for s, e in zip(starts, stops, strict=True))


def merge_ranges(*groups: tuple[SmemRange, ...]) -> tuple[SmemRange, ...]:
    """Sorted union of range tuples, overlapping or adjacent ranges merged.

    >>> merge_ranges((SmemRange(0, 4),), (SmemRange(4, 8), SmemRange(16, 20)))
    (SmemRange(start=0, stop=8), SmemRange(start=16, stop=20))
    """
    out: list[SmemRange] = []
    for r in sorted(r for g in groups for r in g):
        if out and r.start <= out[-1].stop:
            if r.stop > out[-1].stop:
                out[-1] = SmemRange(out[-1].start, r.stop)
        else:
            out.append(r)
    return tuple(out)


def element_ranges(addresses: np.ndarray, elem_bytes: int) -> tuple[SmemRange, ...]:
    """Ranges covering ``elem_bytes`` bytes at each element address."""
    a = np.asarray(addresses, dtype=np.int64).ravel()
    return coalesce(a[:, None] + np.arange(int(elem_bytes), dtype=np.int64))


def lane_runs(lanes: np.ndarray) -> tuple[tuple[int, int], ...]:
    """Maximal runs ``(first lane, count)`` of a set of lanes.

    >>> lane_runs(np.array([0, 1, 2, 32, 33]))
    ((0, 3), (32, 2))
    """
    return tuple((r.start, r.nbytes) for r in coalesce(lanes))


@functools.lru_cache(maxsize=4096)
def descriptor_ranges(word: int, arch: str, major: str, elem_bytes: int, rows: int, k: int,
                      row_limit: int | None = None) -> tuple[SmemRange, ...]:
    """Shared-memory byte ranges read through descriptor ``word`` (cached on the word).

    ``rows`` x ``k`` elements of ``elem_bytes`` bytes are read as in
    :func:`simtc.smem.read.descriptor_addresses`; ``row_limit`` keeps only the first rows
    (``tcgen05.cp .4x256b`` reads the top 4 rows of an 8-row group).
    """
    desc = SmemDescriptor.from_u64(word, arch)
    addr = descriptor_addresses(desc, major=major, elem_bytes=elem_bytes, rows=rows, k=k)
    if row_limit is not None:
        addr = addr[:row_limit]
    return element_ranges(addr, elem_bytes)
