"""The cycle-level engine: warps as processes beside the SM's units, a labelled timing model, a hazard checker.

Submodules load lazily (PEP 562, Scientific-Python SPEC 1), so ``import simtc.engine`` costs next to
nothing and pulls in neither SimPy, rich nor numpy. One short module per piece:

* :mod:`~simtc.engine.parameters` -- every number: labelled tables (``PARAMETERS["sm100"]``,
  ``PARAMETERS["sm90"]``) and the :class:`~simtc.engine.parameters.Timing` a run uses;
* :mod:`~simtc.engine.timing` -- the tensor pipe's closed-form MMA model (:func:`~simtc.engine.timing.predict_mma`);
* :mod:`~simtc.engine.core` -- :class:`~simtc.engine.core.Engine` (alias ``Simulation``): compile, run, step,
  results;
* :mod:`~simtc.engine.scheduler` -- the clock and event queue (SimPy, public API);
* :mod:`~simtc.engine.warp` -- a warp issuing its records; :mod:`~simtc.engine.handlers` -- one handler per
  record kind (what it costs and when it completes);
* the units: :mod:`~simtc.engine.issue` (sub-partition issue slot, pipes, scoreboard),
  :mod:`~simtc.engine.smem_port` (the one shared-memory bandwidth), :mod:`~simtc.engine.tensor_pipe`,
  :mod:`~simtc.engine.tmem_path`, :mod:`~simtc.engine.copy_engine` (TMA), :mod:`~simtc.engine.memory`
  (L2 and HBM), :mod:`~simtc.engine.barriers` (mbarriers, named barriers), on
  :mod:`~simtc.engine.calendar` (how a unit hands out its time);
* :mod:`~simtc.engine.checker` -- the hazard checker, an observer; :mod:`~simtc.engine.hazards` -- its rules;
  :mod:`~simtc.engine.hazard_groups` -- its reports grouped by root cause (the missing wait or fence);
* :mod:`~simtc.engine.sensitivity` -- which parameters an answer rests on (halve and double each);
* :mod:`~simtc.engine.microbench` -- MMA latency / II microbenchmark Programs run on the engine;
* :mod:`~simtc.engine.calibration` -- the published measurements the tensor pipe is calibrated on;
* :mod:`~simtc.engine.ops`, :mod:`~simtc.engine.trace` -- compiled records and trace events.

``Engine`` and ``Simulation`` are also importable from here (lazily).

>>> import simtc.engine
>>> simtc.engine.timing.predict_mma("sm100", 128, 128, operands="TS").latency_cycles
168
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_SUBMODULES = frozenset(("barriers", "calendar", "calibration", "checker", "copy_engine", "core", "handlers",
                         "hazard_groups", "hazards", "issue", "memory", "microbench", "ops", "parameters",
                         "scheduler", "sensitivity", "smem_port", "tensor_pipe", "timing", "tmem_path", "trace",
                         "warp"))
_FROM_CORE = frozenset(("Engine", "Simulation"))

__all__ = ["Engine", "Simulation", "barriers", "calendar", "calibration", "checker", "copy_engine", "core", "handlers",
           "hazard_groups", "hazards", "issue", "memory", "microbench", "ops", "parameters", "scheduler", "sensitivity",
           "smem_port", "tensor_pipe", "timing", "tmem_path", "trace", "warp"]

if TYPE_CHECKING:  # pragma: no cover - for type checkers only
    from simtc.engine import (
        barriers,
        calendar,
        calibration,
        checker,
        copy_engine,
        core,
        handlers,
        hazard_groups,
        hazards,
        issue,
        memory,
        microbench,
        ops,
        parameters,
        scheduler,
        sensitivity,
        smem_port,
        tensor_pipe,
        timing,
        tmem_path,
        trace,
        warp,
    )
    from simtc.engine.core import Engine, Simulation


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"simtc.engine.{name}")
    if name in _FROM_CORE:
        return getattr(importlib.import_module("simtc.engine.core"), name)
    raise AttributeError(f"module 'simtc.engine' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _SUBMODULES | _FROM_CORE)
