"""The L1 on a warp's global loads: its miss path paced per 128-byte line, its data pipe per wavefront.

A warp-wide ``LDG`` goes through two stages of the SM's L1, each a mechanism here (``l1``; measured on the H200 by
:mod:`simtc.hw.l1_probe`, ``tests/data/h200_l1_probe.json`` and its Nsight Compute counts
``tests/data/ncu/h200_l1_probe.csv``):

* **the miss path** -- the lines the lanes touch are looked up and, missing, requested from L2. With the L1 a CTA
  leaves when it holds 200 KiB of shared memory (FlashMLA's SM90 kernel holds 227 KiB), 32 warps issuing scattered
  loads took ``l1_line_cycles`` = 1.78 cycles per distinct 128-byte line (6.1 to 61.8 cycles an instruction for 4 to
  32 lines, -8% to +17%). The engine books that on one :class:`~simtc.engine.calendar.Calendar` per SM before the
  request reaches the memory system. Lines per row follow from where rows start: a row of ``b`` bytes at pitch
  ``p`` starts at a multiple of ``g = gcd(p, 128)`` within its line, so it touches ``ceil((offset + b) / 128)``
  lines averaged over the ``128 / g`` offsets (:func:`lines_per_row`): 1.375 for FlashMLA's V32 rows (656 B apart,
  64 B per row and instruction), 1 for MODEL1's (576 B apart).
* **the data pipe** -- the returning data is read out of the L1's 32 banks by quarter-warps (8 lanes) in
  wavefronts, the same pipe as shared memory (:mod:`simtc.engine.smem_port`, one wavefront a cycle). Rows of one
  quarter that start at the same bank conflict: FlashMLA's producer puts one 16-byte slice of 8 rows in each
  quarter, so its loads cost 32 wavefronts when rows start on a line (pitch 512), 25 on 64-byte multiples
  (MODEL1's 576), 19 on 16-byte multiples (V32's 656) -- Nsight Compute's counts. The rule
  (:func:`load_wavefronts`): per quarter-warp ``l1_wavefronts_per_row`` for each row and
  ``l1_wavefronts_per_conflict`` for each row on its most-shared bank (the expectation over random row starts,
  :func:`conflict_rows`), fitted on 11 pitches (within 1%) and checked on the probe's other lane order (1 to 32 rows
  within 2%; V32's and MODEL1's pitch 22% and 9% low). It is why MODEL1's rows, which move fewer bytes and lines,
  take longer than V32's on the H200: the engine's timing of the probe's row loop follows the hardware within 5% at
  every pitch (``tests/kernels/test_gathers.py``).

With the mechanism off, a load costs no miss-path time and one wavefront per 128 bytes.

Where a load's addresses are known (a kernel simtc's executor ran, :mod:`simtc.ptx.recording`), the L1 and L2 are
also **tag stores** (:class:`GlobalCaches`, in front of the miss path as :class:`CachedL1`): the sectors a load
finds in L1 are ready ``ldg_l1_latency`` (32 cycles) after issue, those in L2 ``ldg_l2_latency`` (324) after they
left the miss path, the rest after an HBM round trip (``dram_latency``, 691) -- the three pointer chases of
``tests/data/h200_memory_latency.json`` (rows of the engine's table, :data:`CACHE_NAMES`). The L1 holds
what the unified 256 KB data cache leaves beside the CTA's shared memory (:func:`l1_capacity`).

>>> lines_per_row(64, 656), lines_per_row(64, 576), lines_per_row(512, 0), lines_per_row(64, 0, 80)
(1.375, 1.0, 4.0, 2.0)
>>> from simtc.engine.parameters import Timing
>>> l1 = L1MissPath(Timing("sm90"))
>>> l1.book(0, 8 * 1.375), l1.book(0, 8 * 1.375)   # two loads of 8 V32 rows: the second waits for the first
(20, 40)
"""

from __future__ import annotations

import functools
import math

from simtc.engine.calendar import Calendar, OneServer
from simtc.isa.cuda_core import LANE_ORDERS

__all__ = ["CACHE_NAMES", "CACHE_PARAMETERS", "LANE_ORDERS", "LEVELS", "SHARED_CARVEOUTS_KIB", "CachedL1",
           "GlobalCaches", "L1MissPath", "conflict_rows", "inputs_fit_l2", "l1_capacity", "lines_per_row",
           "load_lines", "load_policy", "load_wavefronts"]

LINE = 128
BANK = 4
"""Bytes of one of the L1 data array's 32 banks."""
_SAMPLES = 4096


@functools.lru_cache(maxsize=256)
def lines_per_row(nbytes: int, pitch: int = 0, offset: int = 0) -> float:
    """Expected 128-byte lines a row of ``nbytes`` touches when rows start at ``offset`` plus random multiples of
    ``pitch`` (``pitch`` 0: every row starts at ``offset`` within its line)."""
    g = math.gcd(pitch, LINE) if pitch else LINE
    starts = [(offset + o) % LINE for o in range(0, LINE, g)]
    return sum(math.ceil((s + nbytes) / LINE) for s in starts) / len(starts)


def load_lines(nbytes: int, rows: int, pitch: int = 0, offset: int = 0) -> float:
    """Lines one warp-instruction of ``nbytes`` spread over ``rows`` rows touches."""
    rows = max(1, rows)
    return rows * lines_per_row(max(1, nbytes // rows), pitch, offset)


def _quarters(width: int, rows: int, lanes: str):
    """Per quarter-warp (8 lanes): ``(row, byte offset in the row)`` of each lane."""
    rows = max(1, min(32, rows))
    per_row = 32 // rows
    out = []
    for q in range(4):
        if lanes == "interleaved":
            out.append(tuple((lane % rows, (lane // rows) * width) for lane in range(8 * q, 8 * q + 8)))
        else:
            out.append(tuple((lane // per_row, (lane % per_row) * width) for lane in range(8 * q, 8 * q + 8)))
    return out


@functools.lru_cache(maxsize=256)
def conflict_rows(width: int, rows: int, pitch: int = 0, lanes: str = "grouped") -> tuple[tuple[int, float], ...]:
    """Per quarter-warp of one warp-instruction: the rows its 8 lanes read, and the expected largest number of them
    (distinct row and line) that meet on one bank of the L1 data array, the rows starting at random multiples of
    ``gcd(pitch, 128)`` within a line (``pitch`` 0: all on a line start). Averaged over 4,096 seeded draws."""
    import numpy as np

    if lanes not in LANE_ORDERS:
        raise ValueError(f"lane order {lanes!r} is not one of {LANE_ORDERS}")
    g = math.gcd(pitch, LINE) if pitch else LINE
    rng = np.random.default_rng(20261201)
    out = []
    for quarter in _quarters(width, rows, lanes):
        ids = sorted({r for r, _ in quarter})
        starts = rng.integers(0, LINE // g, size=(_SAMPLES, len(ids))) * g
        count = np.zeros((_SAMPLES, LINE // BANK), np.int32)
        seen = set()
        for r, off in quarter:
            for b in range(0, width, BANK):
                byte = starts[:, ids.index(r)] + off + b
                key = (r, off + b)
                if key in seen:
                    continue
                seen.add(key)
                count[np.arange(_SAMPLES), (byte % LINE) // BANK] += 1
        out.append((len(ids), float(count.max(axis=1).mean())))
    return tuple(out)


def load_wavefronts(width: int, rows: int, pitch: int, lanes: str, per_row: float, per_conflict: float) -> float:
    """Expected L1 data-pipe wavefronts of one warp-instruction: per quarter-warp ``per_row`` for each row it reads
    and ``per_conflict`` for each row on its most-shared bank (:func:`conflict_rows`)."""
    return sum(per_row * n + per_conflict * m for n, m in conflict_rows(width, rows, pitch, lanes))


class L1MissPath(OneServer):
    """One SM's L1 miss path (see the module text); with the ``l1`` mechanism off a load takes no time there."""

    __slots__ = ("enabled", "line_cycles", "server")

    def __init__(self, timing):
        self.enabled = timing.enabled("l1")
        self.line_cycles = timing["l1_line_cycles"]
        self.server = Calendar("l1")

    def book(self, t: int, lines: float) -> int:
        """A load touching ``lines`` lines, issued at ``t``: the cycle its last line has left for L2."""
        if not self.enabled:
            return t
        return self.server.book(t, max(1, math.ceil(lines * self.line_cycles)))

    def forget(self, before: int) -> None:
        self.server.forget(before)


# ------------------------------------------------------------------------------------------------------------
# the L1 and L2 as tag stores: which executed global loads hit where
# ------------------------------------------------------------------------------------------------------------

CACHE_NAMES = ("ldg_l1_latency", "ldg_l2_latency", "l2_bytes", "l1_unified_bytes")
"""The cache model's own figures, rows of the engine's tables (:data:`simtc.engine.parameters.PARAMETERS`), so that
a :class:`~simtc.engine.parameters.Timing`'s overrides and the band's perturbations reach them."""


def _cache_view():
    from types import MappingProxyType

    from simtc.engine.parameters import PARAMETERS

    return {arch: MappingProxyType({n: PARAMETERS[arch][n] for n in CACHE_NAMES}) for arch in PARAMETERS}


CACHE_PARAMETERS = _cache_view()
"""``CACHE_PARAMETERS[arch][name]``: the table rows of :data:`CACHE_NAMES` (a read-only view of
:data:`simtc.engine.parameters.PARAMETERS`; a run reads them through its ``Timing``)."""

SHARED_CARVEOUTS_KIB = (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)
"""Shared-memory carve-outs of the unified data cache (documented for compute capability 9.0, see
``l1_unified_bytes``; assumed the same on sm100)."""

LEVELS = ("l1", "l2", "dram")


def l1_capacity(arch: str, shared_bytes: int, timing=None) -> int:
    """Bytes of L1 left for global loads beside ``shared_bytes`` of shared memory: the unified cache
    (``l1_unified_bytes``, ``timing``'s value when given) less the smallest carve-out that holds them (assumed: the
    driver picks that one; it may pick more for occupancy).

    >>> l1_capacity("sm90", 0), l1_capacity("sm90", 40 * 1024), l1_capacity("sm90", 200 * 1024)
    (262144, 196608, 28672)
    """
    from simtc.engine.parameters import parameter

    unified = int(timing["l1_unified_bytes"] if timing is not None else parameter(arch, "l1_unified_bytes").value)
    kib = next((c for c in SHARED_CARVEOUTS_KIB if c * 1024 >= shared_bytes), SHARED_CARVEOUTS_KIB[-1])
    return max(0, unified - kib * 1024)


def inputs_fit_l2(timing, device_bytes: int) -> bool:
    """Whether a launch's device allocations fit in L2 (``l2_bytes``), so that the host's copies leave them there
    (:class:`GlobalCaches` ``inputs_in_l2``).

    >>> from simtc.engine.parameters import Timing
    >>> inputs_fit_l2(Timing("sm90"), 1 << 20), inputs_fit_l2(Timing("sm90"), 1 << 30)
    (True, False)
    """
    return int(device_bytes) <= timing["l2_bytes"]


def load_policy(modifiers) -> str:
    """Where a global load may be kept, from its cache operator and ordering (``PTX ISA 9.0 §9.7.9.1``): ``"l1"``
    (the default ``.ca``, and ``.cs``/``.lu``/``.nc``/``ldu``), ``"l1_no_allocate"`` (``.L1::no_allocate``: hits but
    does not fill) or ``"l2"`` (``.cg``, ``.cv``, ``.volatile``, and ``.relaxed``/``.acquire`` at ``.gpu``/``.sys``
    scope, which the calibration's SASS shows as ``LDG.E.*.STRONG.GPU``, performed at L2: assumed).

    >>> load_policy(("global", "u32")), load_policy(("global", "cg", "u64")), load_policy(("acquire", "gpu", "u32"))
    ('l1', 'l2', 'l2')
    """
    mods = set(modifiers)
    if mods & {"cg", "cv", "volatile"} or (mods & {"relaxed", "acquire"} and mods & {"gpu", "sys"}):
        return "l2"
    if "L1::no_allocate" in mods:
        return "l1_no_allocate"
    return "l1"


_SECTORS_SHIFT = 2
"""A sector number's line: ``sector >> 2`` (128-byte lines of four 32-byte sectors)."""


def _ints(sectors) -> list[int]:
    return sectors.tolist() if hasattr(sectors, "tolist") else [int(x) for x in sectors]


class GlobalCaches:
    """The SM's L1 and the chip's L2 as tag stores over 32-byte sectors, for the global loads and stores a recorded
    kernel executed (their addresses are known: :mod:`simtc.ptx.recording`).

    * **L1**: ``capacity`` bytes of 128-byte lines (:func:`l1_capacity`), each holding the sectors that were
      fetched into it, replaced least recently used (assumed); a sector keeps the cycle its fill arrives, so a load
      that finds a sector still on its way waits for it (a hit under a miss). A global store writes through to L2
      and drops the sectors it writes from L1 (assumed: no write-allocate in L1).
    * **L2**: every sector once fetched or written stays (assumed: one CTA's footprint is far below the 50 MB of an
      H200's L2). A sector nobody touched before is in L2 when ``inputs_in_l2`` (the host's copies leave what they
      wrote there: measured, ``tests/data/h200_exec_timing.json``), else in DRAM.

    :meth:`lookup` classifies a load's sectors; :meth:`fill` / :meth:`store` update the state.

    >>> c = GlobalCaches(1024)
    >>> import numpy as np
    >>> s = np.array([0, 1])                      # the first 64 bytes
    >>> c.lookup(0, s)                            # cold: DRAM
    (0, [], [0, 1])
    >>> c.fill(s, 700, "l1"); c.lookup(10, s)     # in flight: a hit that waits for the fill
    (700, [], [])
    >>> c.lookup(800, np.array([1, 2]))           # sector 2 of the same line was never fetched
    (800, [], [2])
    """

    __slots__ = ("inputs_in_l2", "l1", "l1_lines", "l2")

    def __init__(self, capacity: int, inputs_in_l2: bool = False):
        from collections import OrderedDict

        self.inputs_in_l2 = bool(inputs_in_l2)
        """Every sector is in L2 at launch, not in DRAM (what the host's copies leave when the device's data fits in
        L2, ``l2_bytes``; measured, see the class text)."""
        self.l1_lines = max(0, int(capacity) // LINE)
        self.l1: OrderedDict[int, dict[int, int]] = OrderedDict()
        """line -> {sector -> cycle its data is in L1}, least recently used first."""
        self.l2: dict[int, int] = {}
        """sector -> cycle its data is in L2."""

    def lookup(self, t: int, sectors, policy: str = "l1") -> tuple[int, list[int], list[int]]:
        """A load at ``t`` of ``sectors`` (sector numbers: address // 32): ``(cycle its L1 hits are ready -- ``t``
        when none wait for a fill, L2 sectors, DRAM sectors)``; the hits' lines become most recently used."""
        ready, l2, dram = int(t), [], []
        l1, in_l2, warm = self.l1, self.l2, self.inputs_in_l2
        for s in _ints(sectors):
            line = l1.get(s >> _SECTORS_SHIFT) if policy != "l2" else None
            if line is not None and s in line:
                l1.move_to_end(s >> _SECTORS_SHIFT)
                if line[s] > ready:
                    ready = line[s]
            elif warm or s in in_l2:
                l2.append(s)
            else:
                dram.append(s)
        return ready, l2, dram

    def fill(self, sectors, when: int, policy: str = "l1", l2_when: int | None = None) -> None:
        """``sectors`` arrive: in L2 at ``l2_when`` (default ``when``) and, unless the policy keeps them out of L1,
        in L1 at ``when``."""
        l1, in_l2, when = self.l1, self.l2, int(when)
        at_l2 = when if l2_when is None else int(l2_when)
        keep = policy == "l1" and self.l1_lines > 0
        for s in _ints(sectors):
            if s not in in_l2:
                in_l2[s] = at_l2
            if not keep:
                continue
            line = l1.get(s >> _SECTORS_SHIFT)
            if line is None:
                while len(l1) >= self.l1_lines:
                    l1.popitem(last=False)
                line = l1[s >> _SECTORS_SHIFT] = {}
            else:
                l1.move_to_end(s >> _SECTORS_SHIFT)
            line[s] = when

    def store(self, sectors, when: int) -> None:
        """A global store of ``sectors`` at ``when``: written through to L2, dropped from L1."""
        l1, in_l2, when = self.l1, self.l2, int(when)
        for s in _ints(sectors):
            in_l2.setdefault(s, when)
            line = l1.get(s >> _SECTORS_SHIFT)
            if line is not None:
                line.pop(s, None)
                if not line:
                    del l1[s >> _SECTORS_SHIFT]

    def level(self, sectors, policy: str = "l1") -> str:
        """The farthest level a load of ``sectors`` reaches now (``"l1"`` when every sector is in L1, or none)."""
        _, l2, dram = self.lookup(0, sectors, policy)
        return "dram" if dram else "l2" if l2 else "l1"


class CachedL1(L1MissPath):
    """The L1 in front of its miss path for loads whose sectors are known (a recorded kernel's executed loads).

    :meth:`start` gives it the loads of the CUDA-core block being issued, in the order the engine books them (its
    ``cost.loads``), each ``(sectors, policy)``; while some are left, :meth:`book` takes the next one: the sectors
    :class:`GlobalCaches` finds in L1 are ready ``ldg_l1_latency`` after issue (or when their fill arrives), the
    missing ones cross the miss path (``l1_line_cycles`` per line they fall in) and go to L2 or HBM
    (:meth:`simtc.engine.memory.MemorySystem.load_sectors`), and fill L1 and L2 when they arrive. The load's
    arrival is handed to the memory system (:attr:`~simtc.engine.memory.MemorySystem.served`), whose next LDG request
    -- the same load -- returns it. With none left a load is booked as by :class:`L1MissPath` (a miss).

    >>> from simtc.engine.parameters import Timing
    >>> from simtc.engine.memory import MemorySystem
    >>> import numpy as np
    >>> t = Timing("sm90"); mem = MemorySystem(t, active_sms=1)
    >>> l1 = CachedL1(t, GlobalCaches(l1_capacity("sm90", 0)), mem)
    >>> table = np.array([0, 1])                           # one 64-byte table, cold: 2 + 691 + 64 / 20.8
    >>> l1.start([(table, "l1")], (), 0); mem.request(l1.book(0, 1.0), 128, ldg=True)
    697
    >>> l1.start([(table, "l1")], (), 1000); mem.request(l1.book(1000, 1.0), 128, ldg=True)   # an L1 hit
    1032
    """

    __slots__ = ("block_level", "caches", "l1_latency", "levels", "loads", "memory", "stores")

    def __init__(self, timing, caches: GlobalCaches, memory):
        super().__init__(timing)
        self.caches = caches
        self.memory = memory
        self.l1_latency = int(timing["ldg_l1_latency"])
        self.loads: list = []
        """The planned loads of the block being issued not yet booked, next last."""
        self.stores: tuple = ()
        """The planned stores' sectors of that block, applied once its loads are booked."""
        self.levels = dict.fromkeys(LEVELS, 0)
        """Planned loads booked, by the farthest level each reached."""
        self.block_level = ""
        """The farthest level a load of the last planned block reached ("" when it had none)."""

    @property
    def pending(self) -> int:
        """Planned loads of the block being issued that the engine has not booked."""
        return len(self.loads)

    def start(self, loads, stores, t: int) -> None:
        """A planned block issues at ``t``: its loads come next (its stores at once when it has no loads)."""
        self.loads = list(reversed(loads))
        self.stores = tuple(stores)
        self.block_level = ""
        if not self.loads:
            self._stores(t)

    def _stores(self, t: int) -> None:
        for sectors in self.stores:
            self.caches.store(sectors, t)
        self.stores = ()

    def book(self, t: int, lines: float) -> int:
        if not self.loads:
            return super().book(t, lines)
        sectors, policy = self.loads.pop()
        hit_ready, l2, dram = self.caches.lookup(t, sectors, policy)
        hits = len(sectors) - len(l2) - len(dram)
        ready = max(t + self.l1_latency, hit_ready) if hits else t
        sent = t
        if l2 or dram:
            missing = l2 + dram
            sent = super().book(t, len({s >> _SECTORS_SHIFT for s in missing}))
            back = self.memory.load_sectors(sent, len(l2), len(dram))
            self.caches.fill(missing, back, policy)
            ready = max(ready, back)
        self.memory.served = ready
        level = "dram" if dram else "l2" if l2 else "l1"
        self.levels[level] += 1
        if LEVELS.index(level) >= LEVELS.index(self.block_level or "l1"):
            self.block_level = level
        if not self.loads:
            self._stores(t)
        return sent
