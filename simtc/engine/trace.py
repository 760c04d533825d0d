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

from typing import NamedTuple

__all__ = ["EVENT_KINDS", "Event"]

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
