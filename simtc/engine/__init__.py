"""The cycle-level engine: warps as processes, asynchronous units, barriers, a labelled timing model.

Submodules load lazily (PEP 562, Scientific-Python SPEC 1), so ``import simtc.engine`` costs
next to nothing and pulls in neither SimPy, rich nor numpy:

* :mod:`simtc.engine.timing` -- the timing model: one labelled parameter table per architecture
  (``PARAMETERS["sm100"]``, ``PARAMETERS["sm90"]``) and the mechanistic MMA model
  (:func:`~simtc.engine.timing.predict_mma` and the component functions the tensor-pipe unit uses).
* :mod:`simtc.engine.core` -- :class:`~simtc.engine.core.Engine` (alias ``Simulation``): a Program's
  warps as SimPy processes beside the tensor pipe, TMA, TMEM path and shared-memory port; trace,
  step-through, snapshots, per-role and per-unit busy cycles, critical path, hazard checker.
* :mod:`simtc.engine.barriers` -- mbarrier and named-barrier state machines.
* :mod:`simtc.engine.hazards` -- the checked rules (``RULES``) and the :class:`~simtc.engine.hazards.Hazard` report.
* :mod:`simtc.engine.costs` -- record costs read from the timing tables.
* :mod:`simtc.engine.microbench` -- MMA latency / II microbenchmark Programs run on the engine.
* :mod:`simtc.engine.trace` -- the trace :class:`~simtc.engine.trace.Event`.

``Engine`` and ``Simulation`` are also importable from here (lazily).

>>> import simtc.engine
>>> simtc.engine.timing.predict_mma("sm100", 128, 128, operands="TS").latency_cycles
168
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["Engine", "Simulation", "barriers", "core", "costs", "hazards", "microbench", "timing", "trace"]

_SUBMODULES = frozenset(("barriers", "core", "costs", "hazards", "microbench", "timing", "trace"))
_FROM_CORE = frozenset(("Engine", "Simulation"))

if TYPE_CHECKING:  # pragma: no cover - for type checkers only
    from simtc.engine import barriers, core, costs, hazards, microbench, timing, trace
    from simtc.engine.core import Engine, Simulation


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"simtc.engine.{name}")
    if name in _FROM_CORE:
        return getattr(importlib.import_module("simtc.engine.core"), name)
    raise AttributeError(f"module 'simtc.engine' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _SUBMODULES | _FROM_CORE)
