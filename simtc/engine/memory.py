"""The memory system as one SM sees it: L2 and HBM, with a bandwidth share and latency that grows with load.

A request (a TMA box, one row of a gather, a warp's global load or store) of ``nbytes`` in ``rows``
scattered rows:

* **sectors** -- memory moves whole 32-byte sectors (``sector_bytes``): each row costs
  ``ceil(row bytes / 32)`` sectors, so a gather of scattered rows moves more than a tile of the same bytes;
* **L2 hit** -- a tensor the Engine was told is resident in L2 (``l2_resident``) answers after
  ``l2_hit_latency``, crossing the SM's link at ``l2_bytes_per_cycle`` (one request alone streams at that
  rate too), and takes no HBM bandwidth;
* **HBM** -- otherwise the sectors cross the SM's link at its share of the chip's HBM bandwidth
  (``hbm_bytes_per_cycle / active SMs``; every SM of the chip by default, as when a kernel fills the GPU), and
  no faster than one SM can pull (``sm_bytes_per_cycle``). A warp's own loads and stores (LDG/STG) reach less
  of the chip's bandwidth than the copy engine's bulk requests (measured on the H200: 2,956 vs 3,823 GB/s
  gathering the same rows with all SMs busy): their share is ``ldg_hbm_bytes_per_cycle / active SMs``.
  The share is a :class:`~simtc.engine.calendar.Calendar`: requests queue behind the bytes booked before
  them, so latency grows with the bytes in flight (a deterministic queue). The last byte arrives
  ``dram_latency`` after it crossed the link, and no sooner than the request streams alone at its own
  rate (``request_bytes_per_cycle``): ``max(t + bytes / rate, link end) + dram_latency``.

A warp's load whose missing sectors are known (a recorded kernel's, :class:`simtc.engine.l1.CachedL1`) goes through
:meth:`MemorySystem.load_sectors`: the sectors L2 holds cross the link at ``l2_bytes_per_cycle`` and arrive
``ldg_l2_latency`` later (measured: an LDG pointer chase through an L2-resident pool,
``tests/data/h200_memory_latency.json``; a row of :mod:`simtc.engine.parameters`), the others take the HBM path
above.

**The L1's misses in flight** (:class:`MissWindow`): a warp's load that misses L1 leaves the SM only while the
SM's outstanding misses leave room for its sectors; each is held from the cycle it leaves until its data is back
(its L2 or HBM round trip, queueing included), in order. The room is ``l1_miss_window`` (0.56, derived from
``tests/data/h200_gather_regime.json``) of the sectors of the L1 the CTA's shared memory leaves
(:meth:`MemorySystem.use_l1`; the whole unified cache until told): with FlashMLA's 28 KiB L1, 502 sectors, which
bounds one SM's gather at about 502 sectors per HBM round trip however few SMs share HBM (Little's law); with the
L1 free (4,588 sectors) it does not bind the loops the memory parameters were measured on. The wait is in front of
the memory system; it is the ``l1`` mechanism's (off: no window). A warp's load from HBM takes ``ldg_dram_latency``
(1,000: measured, the LDG gather's HBM-minus-L2 time on 8 to 66 SMs) instead of the lone chase's ``dram_latency``
when more than one SM shares HBM.

Unloaded, a request of ``b`` bytes takes ``dram_latency + b / request_bytes_per_cycle`` cycles: on the
H200 the line through a pointer chase of dependent bulk copies of 64 to 2,048 bytes
(``tests/data/h200_memory_latency.json``). With the ``memory`` mechanism off every request takes that
unloaded time and no bandwidth is shared.

>>> from simtc.engine.parameters import Timing
>>> m = MemorySystem(Timing("sm100"))
>>> m.request(0, 2048)                       # 691 + 2048 / 16.7
814
>>> [m.request(0, 512) for _ in range(3)]     # three more queue behind it on the SM's 24.8 B/cycle share
[795, 816, 837]
"""

from __future__ import annotations

import heapq
import math

from simtc.engine.calendar import Calendar

__all__ = ["MemorySystem", "MissWindow", "miss_window_sectors"]


def miss_window_sectors(timing, l1_bytes: int) -> int:
    """Sectors an SM's L1 of ``l1_bytes`` may have in flight as misses: ``l1_miss_window`` of them (0, no limit,
    with the ``l1`` mechanism off).

    >>> from simtc.engine.parameters import Timing
    >>> miss_window_sectors(Timing("sm90"), 28 * 1024) > 0, miss_window_sectors(Timing("sm90").without("l1"), 1)
    (True, 0)
    """
    if not timing.enabled("l1"):
        return 0
    return max(1, round(timing["l1_miss_window"] * int(l1_bytes) / timing["sector_bytes"]))


class MissWindow:
    """The SM's L1 misses in flight: at most ``capacity`` sectors outstanding, each held from the cycle its request
    leaves the SM until its data is back (see the module text). :meth:`admit` is the cycle a request of ``sectors``
    may leave (in order: never before the previous one left), :meth:`hold` books it until its return.
    ``capacity`` 0: no limit.

    >>> w = MissWindow(8)
    >>> w.admit(0, 6), w.hold(6, 700), w.admit(10, 4)       # 6 + 4 > 8: the second waits for the first's return
    (0, None, 700)
    """

    __slots__ = ("capacity", "held", "last", "outstanding")

    def __init__(self, capacity: int = 0):
        self.capacity = int(capacity)
        self.held: list[tuple[int, int]] = []
        """(return cycle, sectors) of the requests in flight, a heap."""
        self.outstanding = 0
        self.last = 0
        """The cycle the last admitted request left."""

    def admit(self, t: int, sectors: int) -> int:
        if self.capacity <= 0:
            return t
        t = max(int(t), self.last)
        want = min(int(sectors), self.capacity)
        held = self.held
        while held and held[0][0] <= t:
            self.outstanding -= heapq.heappop(held)[1]
        while self.outstanding + want > self.capacity:
            back, n = heapq.heappop(held)
            self.outstanding -= n
            if back > t:
                t = back
        self.last = t
        return t

    def hold(self, sectors: int, until: int) -> None:
        if self.capacity <= 0 or sectors <= 0:
            return
        n = min(int(sectors), self.capacity)
        heapq.heappush(self.held, (math.ceil(until), n))
        self.outstanding += n


class MemorySystem:
    """L2 + HBM for one SM (see the module text)."""

    __slots__ = ("_timing", "active_sms", "dram_latency", "enabled", "hbm_bytes", "l2_bytes", "l2_latency", "l2_rate",
                 "l2_resident", "ldg_dram_latency", "ldg_l2_latency", "ldg_share", "link", "rate", "sector", "served",
                 "share",
                 "window")

    def __init__(self, timing, active_sms: int | None = None, l2_resident=()):
        self.enabled = timing.enabled("memory")
        self.active_sms = int(active_sms or timing["sm_count"])
        self.share = min(timing["hbm_bytes_per_cycle"] / self.active_sms, timing["sm_bytes_per_cycle"])
        self.ldg_share = min(timing["ldg_hbm_bytes_per_cycle"] / self.active_sms, timing["sm_bytes_per_cycle"])
        self.l2_rate = timing["l2_bytes_per_cycle"]
        self.rate = timing["request_bytes_per_cycle"]
        self.dram_latency = timing["dram_latency"]
        self.ldg_dram_latency = timing["ldg_dram_latency"] if self.active_sms > 1 else self.dram_latency
        """A warp's HBM load's round trip: ``ldg_dram_latency`` while other SMs load too, the lone chase's
        ``dram_latency`` on one SM."""
        self.l2_latency = timing["l2_hit_latency"]
        self.sector = timing["sector_bytes"]
        self.l2_resident = frozenset(l2_resident)
        self.link = Calendar("memory")
        self.hbm_bytes = 0
        """Bytes this SM moved to and from HBM (whole sectors)."""
        self.l2_bytes = 0
        """Bytes answered by L2 (tensors resident in L2, and a recorded kernel's loads of sectors already in L2)."""
        self.ldg_l2_latency = timing["ldg_l2_latency"]
        self._timing = timing
        self.window = MissWindow(miss_window_sectors(timing, timing["l1_unified_bytes"]))
        """The SM's L1 misses in flight (a warp's loads), the L1 taken whole until :meth:`use_l1` says how much the
        CTA's shared memory leaves."""
        self.served: int | None = None
        """The arrival of a warp's load that the address-aware L1 (:class:`simtc.engine.l1.CachedL1`) has already
        looked up and requested: the next LDG :meth:`request` returns it (once) instead of sending the load again."""

    def use_l1(self, l1_bytes: int) -> None:
        """The L1 the SM's CTA leaves for global loads (:func:`simtc.engine.l1.l1_capacity`): the misses it may
        have in flight are ``l1_miss_window`` of its sectors (with the ``l1`` mechanism off: no limit)."""
        self.window.capacity = miss_window_sectors(self._timing, l1_bytes)

    def sectors_bytes(self, nbytes: int, rows: int = 1) -> int:
        """Bytes moved for ``nbytes`` in ``rows`` scattered rows: whole sectors per row."""
        rows = max(1, rows)
        per_row = math.ceil(nbytes / rows / self.sector)
        return rows * per_row * self.sector

    def request(self, t: int, nbytes: int, rows: int = 1, tensor: str = "", write: bool = False,
                ldg: bool = False) -> int:
        """Issue a request at cycle ``t``; returns the cycle its last byte arrives (a write: leaves the SM).
        ``ldg``: a warp's global load or store (LDG/STG), whose bytes cross the link at the SM's share of what
        LDG traffic reaches chip-wide (``ldg_hbm_bytes_per_cycle``), not the bulk-copy share. A load the L1 has
        already answered (:attr:`served`) returns that answer."""
        if ldg and not write and self.served is not None:
            served, self.served = self.served, None
            return served
        moved = self.sectors_bytes(nbytes, rows)
        if ldg and not write:  # a warp's load misses L1: it waits for room among the SM's misses in flight
            n = moved // self.sector
            t = self.window.admit(t, n)
            if tensor in self.l2_resident:
                back = self._l2(t, nbytes, moved, self.l2_latency)
            else:
                back = self._hbm(t, nbytes, moved, False, True)
            self.window.hold(n, back)
            return back
        if tensor in self.l2_resident:  # "" (untagged requests: a warp's own loads) when the caller says so
            return self._l2(t, nbytes, moved, self.l2_latency)
        return self._hbm(t, nbytes, moved, write, ldg)

    def _l2(self, t: int, nbytes: int, moved: int, latency: float) -> int:
        """``moved`` bytes (whole sectors) of ``nbytes`` answered by L2: the link at ``l2_bytes_per_cycle``,
        then ``latency``."""
        self.l2_bytes += moved
        own = nbytes / self.l2_rate
        if not self.enabled:
            return t + math.ceil(latency + own)
        end = self.link.book(t, max(1, math.ceil(moved / self.l2_rate)))
        return math.ceil(max(t + own, end) + latency)

    def _hbm(self, t: int, nbytes: int, moved: int, write: bool, ldg: bool) -> int:
        """``moved`` bytes (whole sectors) of ``nbytes`` to or from HBM (see the module text)."""
        own = nbytes / self.rate
        self.hbm_bytes += moved
        latency = self.ldg_dram_latency if ldg and not write else self.dram_latency
        if not self.enabled:
            return t + math.ceil(latency + own)
        link_cycles = max(1, math.ceil(moved / (self.ldg_share if ldg else self.share)))
        end = self.link.book(t, link_cycles)
        if write:
            return end
        return math.ceil(max(t + own, end) + latency)

    def load_sectors(self, t: int, l2: int, dram: int) -> int:
        """A warp's load at ``t`` whose missing sectors are known: ``l2`` of them in L2 (``ldg_l2_latency``, the
        measured LDG round trip to L2) and ``dram`` not (the HBM path of a warp's load); returns the cycle the last
        arrives (``t`` when there are none).

        >>> from simtc.engine.parameters import Timing
        >>> m = MemorySystem(Timing("sm90"), active_sms=1)
        >>> m.load_sectors(0, 1, 0), m.load_sectors(0, 0, 4)     # 324 + 32 / 44.6; 691 + 128 / 20.8
        (325, 698)
        """
        if not l2 and not dram:
            return t
        t = end = self.window.admit(t, l2 + dram)
        if l2:
            end = max(end, self._l2(t, l2 * self.sector, l2 * self.sector, self.ldg_l2_latency))
        if dram:
            end = max(end, self._hbm(t, dram * self.sector, dram * self.sector, False, True))
        self.window.hold(l2 + dram, end)
        return end

    def forget(self, before: int) -> None:
        self.link.forget(before)
