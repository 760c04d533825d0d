"""Hazard reports grouped by root cause: the missing synchronisation that lets each conflicting pair race.

One dropped wait in a kernel lets dozens of access pairs race (four epilogue warps, two loads each, 32 MMAs
overwriting what they read: 256 reports). The checker (:mod:`simtc.engine.checker`) reports every pair; this
module says why they race and puts together the pairs that race for the same reason.

The reason comes from the happens-before knowledge the checker computed for the run, kept for queries (the
checker's module text: each record's completion entry, the vector clock each signal carried, what each passed wait
taught); this module has no ordering rules of its own. For a hazard ``first -> second`` (records ``F`` of warp
``X`` and ``S`` of warp ``Y``), :meth:`~simtc.engine.checker.HazardChecker.learned` says where ``Y`` first learned
that ``F`` completed:

* ``Y`` learns of ``F`` by a wait before ``S``: the order exists, what is missing is the fence the rule names
  (``tcgen05.fence::after_thread_sync`` after that wait, §9.7.16.6.4; ``fence::before_thread_sync`` before the
  arrive; ``fence.proxy.async``, §9.7.16.6.5);
* ``Y`` never learns of ``F`` (or only after ``S``), and ``X`` never learns of ``S`` before ``F`` either: the pair
  races. The missing synchronisation is a wait in the role that ran ahead on a barrier that carries the other
  record's completion (:meth:`~simtc.engine.checker.HazardChecker.carried`: that warp's signals whose vector
  clock holds it); barrier phases no warp waits on are named (a dropped wait leaves one).

:func:`group_hazards` groups by (rule, the two roles, the missing synchronisation: its kind, the role that lacks
it, the role whose signal it should observe); :class:`HazardGroup` prints the first hazard, its cause and "N more
caused by the same". Hazards without a pair (over-arrival, a deadlock, an allocation) group by rule and role.

>>> from simtc.engine.hazards import Hazard
>>> hs = [Hazard("deadlock", 9, None, ("mma", 4, 2), "every live warp waits"),
...       Hazard("deadlock", 9, None, ("mma", 4, 2), "every live warp waits")]
>>> [g.count for g in group_hazards(hs)]
[2]
"""

from __future__ import annotations

from attrs import evolve, field, frozen

from simtc.engine.hazards import RULES, Hazard

__all__ = ["HazardGroup", "Missing", "group_hazards"]

_FENCE_RULES = {
    "missing-after-thread-sync-fence": "tcgen05.fence::after_thread_sync",
    "missing-before-thread-sync-fence": "tcgen05.fence::before_thread_sync",
    "missing-proxy-fence": "fence.proxy.async",
}


class _Run:
    """The checker's knowledge of one run, with the queries :func:`_cause` asks (each record's answer kept)."""

    def __init__(self, checker):
        self.checker, self.warps = checker, checker.warps
        self.waited: dict[str, int] = {}  # barrier -> the last phase any warp observed
        for lesson in checker.lessons:
            self.waited[lesson.barrier] = max(self.waited.get(lesson.barrier, -1), lesson.phase)
        self._learned: dict[tuple[int, int], dict] = {}

    def learned(self, x: int, i: int) -> dict:
        got = self._learned.get((x, i))
        if got is None:
            got = self._learned[(x, i)] = self.checker.learned(x, i)
        return got

    def next_signal(self, x: int, i: int) -> int | None:
        """The first signal of warp ``x`` after its record ``i`` (where a publishing fence goes before)."""
        return min((s.record for s in self.checker.signals if s.warp == x and s.record > i), default=None)


@frozen
class Missing:
    """The synchronisation whose absence lets a pair race.

    ``kind``: ``"wait"`` (``role`` should wait, before its record ``before``, on a barrier that carries the
    completion of ``of_role``'s record ``of``), a fence name (``role`` should issue it after its record ``after``,
    the wait that taught it, and before ``before``), or ``"rule"`` (no pair: the rule itself says what is wrong).
    ``barriers``: the barriers that carry the completion; ``unwaited``: those of them whose phase no warp waited on.
    """

    kind: str
    role: str
    of_role: str = ""
    before: int | None = None
    after: int | None = None
    of: int | None = None
    barriers: tuple[str, ...] = ()
    unwaited: tuple[str, ...] = ()
    via: str = ""
    ops: tuple[str, str] = ("", "")
    """The PTX names of the records ``before`` and ``of``."""

    def key(self) -> tuple:
        """What two hazards share when they have this cause (not the records: each pair has its own)."""
        return (self.kind, self.role, self.of_role, self.via if self.kind in _FENCE_RULES.values() else "")

    def text(self) -> str:
        if self.kind == "rule":
            return f"no pair: {self.role} breaks the rule by itself"
        if self.kind == "wait":
            carried = ", ".join(self.barriers) or "no signal (nothing after it carries its completion)"
            text = (f"no wait orders {self.role} #{self.before} ({self.ops[0]}) after {self.of_role} #{self.of} "
                    f"({self.ops[1]}): its completion is carried by {carried}, and {self.role} waits on none of "
                    f"them (directly or through another warp) before #{self.before}")
            if self.unwaited:
                text += f"; no warp waits on {', '.join(self.unwaited)}"
            return text
        where = f"{self.role} between #{self.after} ({self.via}) and #{self.before}" if self.after is not None \
            else f"{self.role} before #{self.before}"
        return f"{self.kind} in {where}"

    def to_json(self) -> dict:
        return {"kind": self.kind, "role": self.role, "of_role": self.of_role, "before": self.before,
                "after": self.after, "of": self.of, "barriers": list(self.barriers), "unwaited": list(self.unwaited),
                "via": self.via, "text": self.text()}


@frozen
class HazardGroup:
    """Hazards with one root cause: ``hazards[0]`` is the first reported, ``missing`` the cause."""

    rule: str
    roles: tuple[str, str]
    missing: Missing
    hazards: tuple[Hazard, ...] = field(converter=tuple)
    indices: tuple[int, ...] = field(converter=tuple)
    """The hazards' positions in the full list."""

    @property
    def count(self) -> int:
        return len(self.hazards)

    def lines(self) -> list[str]:
        """``hazard: <the first>``, ``  missing synchronisation: ...``, ``  N more caused by the same``."""
        out = [f"hazard: {self.hazards[0]}"]
        if self.missing.kind != "rule":
            out.append(f"  missing synchronisation: {self.missing.text()}")
        if self.count > 1:
            out.append(f"  {self.count - 1} more caused by the same ({self.rule}, {self.roles[0]} -> "
                       f"{self.roles[1]}: {_records(self.hazards)})")
        return out

    def to_json(self) -> dict:
        return {"rule": self.rule, "ref": RULES[self.rule].ref if self.rule in RULES else "",
                "roles": list(self.roles), "count": self.count, "first": self.hazards[0].to_json(),
                "missing": self.missing.to_json(), "hazards": list(self.indices)}


def _records(hazards) -> str:
    def span(ix: set[int]) -> str:
        lo, hi = min(ix), max(ix)
        return f"#{lo}" if lo == hi else f"#{lo}-#{hi}"

    first = {h.first[2] for h in hazards if h.first is not None}
    second = {h.second[2] for h in hazards if h.second is not None}
    return (f"{span(first)} -> " if first else "") + (span(second) if second else "")


def _cause(h: Hazard, run: _Run | None, where: dict) -> Missing:
    if h.first is None or h.second is None or h.first == h.second or run is None:
        return Missing("rule", h.second[0] if h.second else (h.first[0] if h.first else "-"))
    x, y = where.get(h.first[:2]), where.get(h.second[:2])
    if x is None or y is None:
        return Missing("rule", h.second[0])
    warps = run.warps
    i, j = h.first[2], h.second[2]
    fwd = run.learned(x, i).get(y)
    fence = _FENCE_RULES.get(h.rule)
    if fence is not None:
        if h.rule == "missing-before-thread-sync-fence":
            return Missing(fence, h.first[0], h.second[0], before=run.next_signal(x, i), of=i, after=i,
                           via=warps[x].ops[i].name)
        if fwd is not None and fwd.record < j:
            return Missing(fence, h.second[0], h.first[0], before=j, after=fwd.record, of=i,
                           via=f"{warps[y].ops[fwd.record].name} {fwd.barrier}")
        return Missing(fence, h.second[0], h.first[0], before=j, of=i)
    if fwd is not None and fwd.record < j:  # ordered, yet flagged: a part of the order the waits do not show
        return Missing("order", h.second[0], h.first[0], before=j, after=fwd.record, of=i,
                       via=f"{warps[y].ops[fwd.record].name} {fwd.barrier}")
    rev = run.learned(y, j).get(x)
    if fwd is not None and rev is None:  # the later learning says the pair was meant the other way round
        return _wait(run, y, j, x, i, h.second[0], h.first[0])
    return _wait(run, x, i, y, j, h.first[0], h.second[0])


def _wait(run: _Run, x: int, i: int, y: int, j: int, xrole: str, yrole: str) -> Missing:
    """``y``'s record ``j`` should wait for the completion of ``x``'s record ``i``."""
    bars: list[str] = []
    unwaited: list[str] = []
    for sig in run.checker.carried(x, i):
        if sig.barrier not in bars:
            bars.append(sig.barrier)
        name = f"{sig.barrier} phase {sig.phase}"
        if run.waited.get(sig.barrier, -1) < sig.phase and name not in unwaited:
            unwaited.append(name)
    return Missing("wait", yrole, xrole, before=j, of=i, barriers=tuple(bars), unwaited=tuple(unwaited),
                   ops=(run.warps[y].ops[j].name, run.warps[x].ops[i].name))


def group_hazards(hazards, checker=None) -> list[HazardGroup]:
    """The hazards grouped by root cause, in the order of each group's first hazard.

    ``checker``: the :class:`~simtc.engine.checker.HazardChecker` that checked the run (``Engine.checker``), whose
    knowledge gives each cause. Without it (a report read back from JSON, a run with the checker off) the hazards
    group by rule and roles only.
    """
    where = {} if checker is None else {(w.role, w.warp): w.idx for w in checker.warps}
    run = None if checker is None else _Run(checker)
    groups: dict[tuple, list] = {}
    for n, h in enumerate(hazards):
        missing = _cause(h, run, where)
        roles = (h.first[0] if h.first else "-", h.second[0] if h.second else "-")
        key = (h.rule, roles, missing.key())
        g = groups.get(key)
        if g is None:
            groups[key] = [[missing], [h], [n]]
        else:
            g[0].append(missing)
            g[1].append(h)
            g[2].append(n)
    out = []
    for (rule, roles, _), (causes, hs, ix) in groups.items():
        missing = causes[0]
        if missing.kind == "wait":  # name the unwaited barriers every pair of the group shares
            common = tuple(b for b in missing.unwaited if all(b in c.unwaited for c in causes))
            missing = evolve(missing, unwaited=common or missing.unwaited)
        out.append(HazardGroup(rule, roles, missing, hs, ix))
    return out
