"""Hazard reports grouped by root cause: the missing synchronisation that lets each conflicting pair race.

One dropped wait in a kernel lets dozens of access pairs race (four epilogue warps, two loads each, 32 MMAs
overwriting what they read: 256 reports). The checker (:mod:`simtc.engine.checker`) reports every pair; this
module says why they race and puts together the pairs that race for the same reason.

The reason comes from the run's own happens-before channels, the ones the checker carries knowledge along:
:class:`SyncLog` is an engine observer (beside the checker) that keeps every arrival (which record's signal landed
on which phase of which mbarrier, which warps a named barrier released) and every passed wait (which phase it
observed). For a hazard ``first -> second`` (records ``F`` of warp ``X`` and ``S`` of warp ``Y``),
:func:`reach` follows those channels from the signals that carry ``F``'s completion -- a TMA load's own
complete_tx, the commits after an MMA (PTX ISA 9.0 §9.7.16.12.1), the signals after a ``tcgen05.wait::ld``
(§9.7.16.6.4.5), any later signal of a synchronous record -- through every wait that observed one of their
phases and on through that warp's later signals (knowledge is transitive, §8 causality order), and finds
where ``Y`` first learns of ``F``:

* ``Y`` learns of ``F`` by a wait before ``S``: the order exists, what is missing is the fence the rule names
  (``tcgen05.fence::after_thread_sync`` after that wait, §9.7.16.6.4; ``fence::before_thread_sync`` before the
  arrive; ``fence.proxy.async``, §9.7.16.6.5);
* ``Y`` never learns of ``F`` (or only after ``S``), and ``X`` never learns of ``S`` before ``F`` either: the pair
  races. The missing synchronisation is a wait in the role that ran ahead on a barrier that carries the other
  record's completion; barriers whose phase no warp waits on are named (a dropped wait leaves one).

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
from simtc.engine.ops import (
    K_ARRIVE,
    K_ARRIVE_TX,
    K_BAR_ARRIVE,
    K_BAR_SYNC,
    K_BULK_WAIT,
    K_COMMIT,
    K_CP,
    K_LD,
    K_MMA,
    K_ST,
    K_TMA_LOAD,
    K_TMA_STORE,
    K_WAIT_LD,
    K_WAIT_ST,
    K_WGMMA,
    K_WGMMA_WAIT,
)

__all__ = ["HazardGroup", "Missing", "SyncLog", "group_hazards", "reach"]

_FENCE_RULES = {
    "missing-after-thread-sync-fence": "tcgen05.fence::after_thread_sync",
    "missing-before-thread-sync-fence": "tcgen05.fence::before_thread_sync",
    "missing-proxy-fence": "fence.proxy.async",
}
_SIGNALS = frozenset((K_ARRIVE, K_ARRIVE_TX, K_COMMIT, K_TMA_LOAD, K_BAR_SYNC, K_BAR_ARRIVE))


class SyncLog:
    """An engine observer keeping the run's synchronisation channels (``Engine(..., observers=[log])``).

    ``landed[(warp, record)]`` -> ``[(barrier, phase)]``: where a record's arrivals landed (an mbarrier and the
    phase they counted towards; a named barrier as ``"bar N"`` and its release number); ``waits`` -> ``[(warp,
    record, barrier, phase)]``: a passed wait and the last phase it observed (named barriers: the release).
    """

    def __init__(self):
        self.landed: dict[tuple[int, int], list[tuple[str, int]]] = {}
        self.waits: list[tuple[int, int, str, int]] = []
        self._token: dict[int, tuple[int, int]] = {}
        self._phase: dict[str, int] = {}
        self._named: dict[int, list[tuple[int, int]]] = {}
        self._releases: dict[int, int] = {}

    def on_issue(self, cycle: int, w, i: int, op, token: int | None = None) -> None:
        if token is not None:
            self._token[token] = (w.idx, i)
        if op.kind in (K_BAR_SYNC, K_BAR_ARRIVE):
            self._named.setdefault(op.arg[0], []).append((w.idx, i))

    def on_arrival(self, cycle: int, bar: str, token: int) -> None:
        who = self._token.pop(token, None)
        if who is not None:
            self.landed.setdefault(who, []).append((bar, self._phase.get(bar, 0)))

    def on_phase(self, cycle: int, bar: str) -> None:
        self._phase[bar] = self._phase.get(bar, 0) + 1

    def on_wait(self, cycle: int, w, i: int, bar: str, observed: int) -> None:
        if observed >= 0:
            self.waits.append((w.idx, i, bar, observed))

    def on_release(self, cycle: int, bar_id: int, waiters) -> None:
        n = self._releases.get(bar_id, 0)
        self._releases[bar_id] = n + 1
        name = f"bar {bar_id}"
        arrived = self._named.pop(bar_id, [])
        for who in arrived:
            self.landed.setdefault(who, []).append((name, n))
        for w in waiters:
            mine = [i for idx, i in arrived if idx == w.idx]
            if mine:
                self.waits.append((w.idx, mine[-1], name, n))

    def __getattr__(self, name: str):  # on_start, on_end, on_violation, ...: nothing to keep
        if not name.startswith("on_"):
            raise AttributeError(name)
        return lambda *args: None


def _carriers(warps, x: int, i: int) -> list[int]:
    """The records of warp ``x`` whose signals carry the completion of its record ``i`` (see the module text)."""
    ops = warps[x].ops
    kind = ops[i].kind
    if kind == K_TMA_LOAD:
        return [i]
    after = range(i + 1, len(ops))
    if kind in (K_MMA, K_CP):
        return [j for j in after if ops[j].kind == K_COMMIT]
    gate = {K_LD: K_WAIT_LD, K_ST: K_WAIT_ST, K_WGMMA: K_WGMMA_WAIT, K_TMA_STORE: K_BULK_WAIT}.get(kind)
    if gate is not None:
        waited = next((j for j in after if ops[j].kind == gate), None)
        if waited is None:
            return []
        after = range(waited + 1, len(ops))
    return [j for j in after if ops[j].kind in _SIGNALS]


class _Channels:
    """The run's channels indexed for :func:`reach` (built once per report)."""

    def __init__(self, warps, log: SyncLog):
        self.warps, self.log = warps, log
        self.waits_on: dict[str, list[tuple[int, int, int]]] = {}
        self.waited: dict[str, int] = {}  # barrier -> the last phase any warp observed
        for w, r, bar, phase in log.waits:
            self.waits_on.setdefault(bar, []).append((phase, w, r))
            self.waited[bar] = max(self.waited.get(bar, -1), phase)
        self._reach: dict[tuple[int, int], dict[int, tuple[int, str]]] = {}

    def reach(self, x: int, i: int) -> dict[int, tuple[int, str]]:
        got = self._reach.get((x, i))
        if got is None:
            got = self._reach[(x, i)] = self._walk(x, i)
        return got

    def _walk(self, x: int, i: int) -> dict[int, tuple[int, str]]:
        warps, landed = self.warps, self.log.landed
        learned: dict[int, tuple[int, str]] = {}
        todo = [(x, j) for j in _carriers(warps, x, i)]
        seen: set[tuple[int, int]] = set()
        while todo:
            sig = todo.pop()
            if sig in seen:
                continue
            seen.add(sig)
            for bar, phase in landed.get(sig, ()):
                for observed, w, r in self.waits_on.get(bar, ()):
                    if observed < phase or (w in learned and learned[w][0] <= r):
                        continue
                    learned[w] = (r, bar)
                    ops = warps[w].ops
                    todo += [(w, k) for k in range(r + 1, len(ops)) if ops[k].kind in _SIGNALS]
        return learned


def reach(warps, log: SyncLog, x: int, i: int) -> dict[int, tuple[int, str]]:
    """Where each warp first learns that record ``i`` of warp ``x`` completed: warp -> (the record of the wait
    that taught it, the barrier), following the run's channels (``log``) transitively."""
    return _Channels(warps, log).reach(x, i)


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


def _cause(h: Hazard, ch: _Channels | None, where: dict) -> Missing:
    if h.first is None or h.second is None or h.first == h.second or ch is None:
        return Missing("rule", h.second[0] if h.second else (h.first[0] if h.first else "-"))
    x, y = where.get(h.first[:2]), where.get(h.second[:2])
    if x is None or y is None:
        return Missing("rule", h.second[0])
    warps = ch.warps
    i, j = h.first[2], h.second[2]
    fwd = ch.reach(x, i).get(y)
    fence = _FENCE_RULES.get(h.rule)
    if fence is not None:
        if h.rule == "missing-before-thread-sync-fence":
            return Missing(fence, h.first[0], h.second[0], before=_next_signal(warps, x, i), of=i, after=i,
                           via=warps[x].ops[i].name)
        if fwd is not None and fwd[0] < j:
            return Missing(fence, h.second[0], h.first[0], before=j, after=fwd[0], of=i,
                           via=f"{warps[y].ops[fwd[0]].name} {fwd[1]}")
        return Missing(fence, h.second[0], h.first[0], before=j, of=i)
    if fwd is not None and fwd[0] < j:  # ordered, yet flagged: a part of the order the channels do not show
        return Missing("order", h.second[0], h.first[0], before=j, after=fwd[0], of=i,
                       via=f"{warps[y].ops[fwd[0]].name} {fwd[1]}")
    rev = ch.reach(y, j).get(x)
    if fwd is not None and rev is None:  # the later learning says the pair was meant the other way round
        return _wait(ch, y, j, x, i, h.second[0], h.first[0])
    return _wait(ch, x, i, y, j, h.first[0], h.second[0])


def _next_signal(warps, x: int, i: int) -> int | None:
    ops = warps[x].ops
    return next((j for j in range(i + 1, len(ops)) if ops[j].kind in _SIGNALS), None)


def _wait(ch: _Channels, x: int, i: int, y: int, j: int, xrole: str, yrole: str) -> Missing:
    """``y``'s record ``j`` should wait for the completion of ``x``'s record ``i``."""
    bars: list[str] = []
    unwaited: list[str] = []
    for c in _carriers(ch.warps, x, i):
        for bar, phase in ch.log.landed.get((x, c), ()):
            if bar not in bars:
                bars.append(bar)
            name = f"{bar} phase {phase}"
            if ch.waited.get(bar, -1) < phase and name not in unwaited:
                unwaited.append(name)
    return Missing("wait", yrole, xrole, before=j, of=i, barriers=tuple(bars), unwaited=tuple(unwaited),
                   ops=(ch.warps[y].ops[j].name, ch.warps[x].ops[i].name))


def group_hazards(hazards, warps=None, log: SyncLog | None = None) -> list[HazardGroup]:
    """The hazards grouped by root cause, in the order of each group's first hazard.

    ``warps``: the engine's warps (``Engine.warps``), ``log``: the :class:`SyncLog` that observed the run. Without
    them (a report read back from JSON) the hazards group by rule and roles only.
    """
    where = {} if warps is None else {(w.role, w.warp): w.idx for w in warps}
    ch = None if warps is None or log is None else _Channels(warps, log)
    groups: dict[tuple, list] = {}
    for n, h in enumerate(hazards):
        missing = _cause(h, ch, where)
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
