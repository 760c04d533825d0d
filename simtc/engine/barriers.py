"""mbarrier and named-barrier state machines (pure state, no event loop).

**mbarrier** (PTX ISA 9.0 §9.7.13.15): an 8-byte shared-memory object holding the expected
arrival count, the pending arrival count, a transaction count (tx-count) and the current
phase. ``mbarrier.init`` sets expected = pending = count, tx = 0, phase 0. ``arrive`` decrements
the pending count; ``expect-tx`` raises the tx-count; ``complete-tx`` (done by TMA) lowers it.
The current phase completes when the pending count is zero **and** the tx-count is zero; then
the phase number advances and the pending count is reset to the expected count
(§9.7.13.15.2 contents and ranges, §9.7.13.15.6 phase completion). The tx-count may go
negative transiently within a phase (a TMA may complete
before its ``expect_tx`` arrives: the PTX range is ``-(2^20-1) .. 2^20-1``).

``mbarrier.try_wait.parity P`` succeeds when the phase of parity ``P`` has completed, i.e. when
the current phase's parity differs from ``P`` (§9.7.13.15.16). On a fresh barrier (phase 0 in
progress) parity 1 passes at once and parity 0 blocks until the first phase completes; this is
why a producer waiting for a "free" slot uses ``phase ^ 1``.

>>> b = MBarrierState("full", count=2)
>>> b.passes(1), b.passes(0)
(True, False)
>>> b.arrive(1), b.arrive(1)          # the second arrival completes phase 0
(False, True)
>>> b.phase, b.passes(0), b.passes(1)
(1, True, False)
>>> b = MBarrierState("tma", count=1)
>>> b.expect_tx(4096); b.arrive(1)     # arrival done, 4 KiB still in flight
False
>>> b.complete_tx(4096)
True

**Named barriers** (``bar.sync`` / ``bar.arrive``, PTX ISA 9.0 §9.7.13.1): 16 hardware barriers per
CTA; each use names a thread count (a multiple of 32). ``bar.sync`` arrives and waits,
``bar.arrive`` arrives only; the barrier releases its waiters when the arrived thread count
reaches the named count, then resets.

>>> n = NamedBarrierState(1)
>>> n.arrive(32, 64), n.arrive(32, 64)
(False, True)
"""

from __future__ import annotations

__all__ = ["MBARRIER_REF", "NAMED_BARRIER_REF", "MBarrier", "MBarrierState", "NamedBarrier", "NamedBarrierState"]

MBARRIER_REF = "PTX ISA 9.0 §9.7.13.15"
NAMED_BARRIER_REF = "PTX ISA 9.0 §9.7.13.1"


class MBarrierState:
    """One mbarrier's state (see the module text). ``arrive``/``complete_tx`` return True when
    they complete the current phase; over-arrival and tx-count underflow are *recorded* in
    ``errors`` (list of ``(rule, message)``) so the engine can report them as hazards."""

    __slots__ = ("arrivals", "errors", "expected", "initialized", "invalidated", "name", "pending", "phase", "tx")

    def __init__(self, name: str, count: int | None = None):
        self.name = name
        self.expected = 0
        self.pending = 0
        self.tx = 0
        self.phase = 0
        self.initialized = False
        self.invalidated = False  # mbarrier.inval ran since the last init (PTX ISA 9.0 §9.7.13.15.10)
        self.errors: list[tuple[str, str]] = []
        self.arrivals = 0  # arrivals counted in the current phase
        if count is not None:
            self.init(count)

    def init(self, count: int) -> None:
        self.expected = self.pending = int(count)
        self.tx = 0
        self.phase = 0
        self.arrivals = 0
        self.initialized = True
        self.invalidated = False

    def passes(self, parity: int) -> bool:
        """``try_wait.parity`` outcome now: the phase of that parity has completed."""
        return (self.phase & 1) != (parity & 1)

    def _maybe_complete(self) -> bool:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.expected
            self.arrivals = 0
            return True
        return False

    def arrive(self, count: int = 1) -> bool:
        if self.pending - count < 0:
            self.errors.append(("mbarrier-over-arrival",
                                f"{count} arrival(s) on {self.name} with {self.pending} pending in phase {self.phase} "
                                f"(count {self.expected})"))
            count = self.pending
        self.pending -= count
        self.arrivals += count
        return self._maybe_complete()

    def expect_tx(self, nbytes: int) -> None:
        self.tx += int(nbytes)

    def complete_tx(self, nbytes: int) -> bool:
        self.tx -= int(nbytes)
        if self.tx < 0 and self.pending == 0:
            self.errors.append(("mbarrier-tx-underflow",
                                f"complete_tx of {nbytes} B on {self.name} leaves tx-count {self.tx} with every "
                                f"arrival of phase {self.phase} in (more bytes completed than expected)"))
            self.tx = 0
        return self._maybe_complete()

    def state(self) -> dict:
        return {"name": self.name, "phase": self.phase, "parity": self.phase & 1, "expected": self.expected,
                "pending": self.pending, "tx": self.tx, "initialized": self.initialized}


class NamedBarrierState:
    """One named (CTA) barrier: threads arrived so far in the current generation."""

    __slots__ = ("arrived", "count", "generation", "id")

    def __init__(self, id: int):
        self.id = id
        self.arrived = 0
        self.count: int | None = None
        self.generation = 0

    def arrive(self, threads: int, count: int) -> bool:
        """Add ``threads`` arrivals for a barrier of ``count`` threads; True when it releases."""
        self.count = count
        self.arrived += threads
        if self.arrived >= count:
            self.arrived = 0
            self.generation += 1
            return True
        return False

    def state(self) -> dict:
        return {"id": self.id, "arrived": self.arrived, "count": self.count, "generation": self.generation}


class MBarrier:
    """An mbarrier in a run: its state machine, the warps waiting on it (``(parity, event, warp)``), the trace
    events of its last arrival and its last phase completion, and the state tokens its arrivals returned
    (``(warp index, register)`` -> the phase the arrival counted towards)."""

    __slots__ = ("decl", "last_arrive_ev", "phase_ev", "st", "tokens", "waiters")

    def __init__(self, name: str, decl=None):
        self.st = MBarrierState(name)
        self.waiters: list = []
        self.last_arrive_ev = -1
        self.phase_ev = -1
        self.decl = decl
        self.tokens: dict = {}


class NamedBarrier:
    """A named barrier in a run: its state machine, the warps waiting in ``bar.sync`` (``(event, warp)``), the
    thread counts it was used with, and when its current generation's last store-visible arrival came."""

    __slots__ = ("counts", "last_ev", "st", "visible", "waiters")

    def __init__(self, id: int):
        self.st = NamedBarrierState(id)
        self.waiters: list = []
        self.counts: set[int] = set()
        self.last_ev = -1
        self.visible = 0
