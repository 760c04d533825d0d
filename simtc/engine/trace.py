"""What a simulation records: trace events, waits, deadlock reports and the run's summary.

An :class:`Event` is a plain named tuple (cheap to make in the hot loop). ``dep`` is the index of
the event that caused this one (the warp's previous event, the unit's previous operation, the
arrival that completed a phase ...): following ``dep`` back from the last event gives the
critical path.

>>> e = Event(12, "mma", 4, 3, "issue", "tcgen05.mma", -1)
>>> e.cycle, e.kind, e.record
(12, 'issue', ('mma', 4, 3))
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from typing import NamedTuple

__all__ = ["EVENT_KINDS", "Event", "Trace", "mean_interval"]

EVENT_KINDS = {
    "issue": "a warp issues a record (sync records finish here)",
    "complete": "an asynchronous operation completes on its unit (MMA, cp, TMA, TMEM ld/st)",
    "wait": "a warp starts to wait (mbarrier try_wait, bar.sync, wait::ld/st, wait_group, alloc)",
    "resume": "a waiting warp resumes",
    "arrive": "an arrival on an mbarrier or named barrier (by a warp, a commit or a TMA complete_tx)",
    "phase": "an mbarrier phase completes, or a named barrier releases",
    "done": "a warp has issued its last record",
}


class Event(NamedTuple):
    """One trace entry."""

    cycle: int
    role: str
    warp: int
    index: int
    """Record index in the role (-1 when the event belongs to no record)."""
    kind: str
    detail: str
    dep: int
    """Index of the causing event in the trace (-1 = none)."""

    @property
    def record(self) -> tuple[str, int, int]:
        return (self.role, self.warp, self.index)

    def to_json(self) -> dict:
        return {"cycle": self.cycle, "role": self.role, "warp": self.warp, "index": self.index, "kind": self.kind,
                "detail": self.detail}


class Trace(Sequence):
    """The engine's event list, kept in columns (a long run's millions of events in tens of bytes each):
    cycles, warps, record indices and causes in integer arrays, roles, kinds and details as indices into
    tables of the distinct strings. Reads as a sequence of :class:`Event` (``trace[i]``, slices, iteration,
    ``len``) and compares equal to another trace or list of the same events.

    >>> t = Trace()
    >>> t.add(3, "mma", 4, 0, "issue", "tcgen05.mma", -1)
    0
    >>> t[0], len(t), t == [Event(3, "mma", 4, 0, "issue", "tcgen05.mma", -1)]
    (Event(cycle=3, role='mma', warp=4, index=0, kind='issue', detail='tcgen05.mma', dep=-1), 1, True)
    """

    __slots__ = ("_cycle", "_dep", "_detail", "_ids", "_index", "_kind", "_role", "_strings", "_warp")

    def __init__(self):
        self._cycle = array("q")
        self._warp = array("i")
        self._index = array("i")
        self._dep = array("q")
        self._role = array("I")
        self._kind = array("I")
        self._detail = array("I")
        self._strings: list[str] = []
        self._ids: dict[str, int] = {}

    def _id(self, s: str) -> int:
        i = self._ids.get(s)
        if i is None:
            i = self._ids[s] = len(self._strings)
            self._strings.append(s)
        return i

    def add(self, cycle: int, role: str, warp: int, index: int, kind: str, detail: str, dep: int) -> int:
        """Append an event; returns its index."""
        ids = self._ids
        self._cycle.append(cycle)
        self._warp.append(warp)
        self._index.append(index)
        self._dep.append(dep)
        r = ids.get(role)
        self._role.append(r if r is not None else self._id(role))
        k = ids.get(kind)
        self._kind.append(k if k is not None else self._id(kind))
        d = ids.get(detail)
        self._detail.append(d if d is not None else self._id(detail))
        return len(self._cycle) - 1

    def append(self, e: Event) -> None:
        self.add(*e)

    def __len__(self) -> int:
        return len(self._cycle)

    def _event(self, i: int) -> Event:
        s = self._strings
        return Event(self._cycle[i], s[self._role[i]], self._warp[i], self._index[i], s[self._kind[i]],
                     s[self._detail[i]], self._dep[i])

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._event(j) for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("trace index out of range")
        return self._event(i)

    def __iter__(self) -> Iterator[Event]:
        s = self._strings
        for c, r, w, x, k, d, p in zip(self._cycle, self._role, self._warp, self._index, self._kind, self._detail,
                                       self._dep, strict=True):
            yield Event(c, s[r], w, x, s[k], s[d], p)

    def cycles(self) -> array:
        """The cycle of every event (an array; no Events made)."""
        return self._cycle

    def of_kind(self, kind: str) -> Iterator[int]:
        """Indices of the events of one kind (no Events made for the others)."""
        k = self._ids.get(kind)
        if k is None:
            return iter(())
        return (i for i, x in enumerate(self._kind) if x == k)

    def phase_cycles(self, barrier: str) -> list[int]:
        """The cycles at which barriers whose name starts with ``barrier`` completed a phase, in order."""
        k = self._ids.get("phase")
        if k is None:
            return []
        s = self._strings
        return [c for c, x, d in zip(self._cycle, self._kind, self._detail, strict=True)
                if x == k and s[d].startswith(barrier)]

    def __eq__(self, other) -> bool:
        if isinstance(other, (Trace, list)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None

    @property
    def nbytes(self) -> int:
        """Bytes held by the columns."""
        return sum(a.itemsize * len(a) for a in (self._cycle, self._warp, self._index, self._dep, self._role,
                                                 self._kind, self._detail))


def mean_interval(cycles: list[int], whole: float) -> float:
    """The mean interval between consecutive cycles (a kernel's steady state between one block's completion and the
    next, ramp and epilogue left out); ``whole`` when there are fewer than two.

    >>> mean_interval([100, 130, 170], 999), mean_interval([5], 999)
    (35.0, 999.0)
    """
    return (cycles[-1] - cycles[0]) / (len(cycles) - 1) if len(cycles) >= 2 else float(whole)
