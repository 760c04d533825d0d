"""More than one schedule: the same Program under seeded perturbations of its timing.

A hazard the checker finds is a fact of the happens-before order of one simulated run; some bugs show only when
the timing falls differently (a warp that happened to arrive first, a parity wait on a phase that happened to
be complete). :func:`explore` re-runs a Program under ``n`` schedules: schedule 0 is the table's timing, schedule
``k`` scales every parameter of the table by ``2 ** u`` with ``u`` drawn uniformly from ``[-1, 1]`` by a
generator seeded with ``seed + k`` (:func:`perturbed`) -- latencies, rates and issue intervals move, so the order
in which warps issue, arrive and complete moves with them. It reports every schedule's hazard rules and deadlock
and the first schedule that shows either, with the seed that reproduces it (``simtc simulate ... --schedules N
--schedule-seed S``).

>>> from simtc.kernels.hazards import build
>>> r = explore(build("hazard/ld-before-commit-fixed"), 4)
>>> r.first_failing is None, len(r.runs)
(True, 4)
>>> bad = explore(build("hazard/ld-before-commit"), 2).first_failing
>>> bad["schedule"], "tmem-read-before-commit" in bad["rules"]
(0, True)
"""

from __future__ import annotations

import random

from attrs import frozen

from simtc.engine.parameters import Timing
from simtc.errors import SimtcError

__all__ = ["ScheduleReport", "explore", "perturbed"]


def perturbed(timing: Timing, seed: int) -> Timing:
    """``timing`` with every parameter of its table scaled by ``2 ** u``, ``u`` uniform in ``[-1, 1]`` (one seeded
    draw per parameter, in the table's order)."""
    rng = random.Random(seed)
    out = timing
    for name in timing.table:
        out = out.scaled(name, 2 ** rng.uniform(-1.0, 1.0))
    return out


@frozen
class ScheduleReport:
    """What :func:`explore` saw: one row per schedule, and the first that showed a hazard or a deadlock."""

    runs: tuple[dict, ...]
    """``{"schedule", "seed", "cycles", "rules", "deadlock"}`` per schedule (seed None: the table's timing)."""
    first_failing: dict | None

    def to_json(self) -> dict:
        return {"schedules": len(self.runs), "runs": list(self.runs), "first_failing": self.first_failing}


def explore(program, n: int, seed: int = 0, *, timing: Timing | None = None, mode: str = "timing",
            cta_factory=None, known=None, engine=None) -> ScheduleReport:
    """Run ``program`` under ``n`` schedules (see the module text). ``cta_factory()`` gives each semantics-mode run
    a fresh CTA state. ``known(hazard)``: whether a hazard is a known finding of the kernel the Program reproduces
    (listed under ``"known"``, not among the rules that fail a schedule). ``engine(timing)``: the engine each
    schedule runs on, built over ``program`` (e.g. a recorded kernel's, whose SMs share HBM as its launch's do:
    :meth:`simtc.ptx.recording.Recorded.engine`); default ``Engine(program, mode=mode, timing=timing)``."""
    from simtc.engine.core import Engine

    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise SimtcError(f"schedules = {n!r}: a positive integer", rule="simtc simulate --schedules N, N >= 1")
    base = timing or Timing()
    runs, first = [], None
    for k in range(n):
        s = None if k == 0 else seed + k
        t = base if s is None else perturbed(base, s)
        cta = cta_factory() if cta_factory is not None else None
        eng = (Engine(program, mode=mode, timing=t, cta=cta) if engine is None else engine(t)).run()
        found = [h for h in eng.hazards if h.rule != "deadlock"]
        theirs = [h for h in found if known is not None and known(h)]
        rules = sorted({h.rule for h in found if not (known is not None and known(h))})
        row = {"schedule": k, "seed": s, "cycles": eng.cycles, "rules": rules, "deadlock": eng.deadlock is not None}
        if known is not None:
            row["known"] = sorted({h.rule for h in theirs})
        runs.append(row)
        if first is None and (rules or row["deadlock"]):
            first = row
    return ScheduleReport(tuple(runs), first)
