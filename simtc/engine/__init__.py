"""The cycle-level engine: warps as processes, asynchronous units, barriers, a labelled timing model.

Submodules load lazily (PEP 562, Scientific-Python SPEC 1), so ``import simtc.engine`` costs
next to nothing and pulls in neither SimPy, rich nor numpy:

* :mod:`simtc.engine.timing` -- the timing model: one labelled parameter table per architecture
  (``PARAMETERS["sm100"]``, ``PARAMETERS["sm90"]``) and the mechanistic MMA model
  (:func:`~simtc.engine.timing.predict_mma` and the component functions the tensor-pipe unit uses).

>>> import simtc.engine
>>> simtc.engine.timing.predict_mma("sm100", 128, 128, operands="TS").latency_cycles
168
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["timing"]

_SUBMODULES = frozenset(__all__)

if TYPE_CHECKING:  # pragma: no cover - for type checkers only
    from simtc.engine import timing


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"simtc.engine.{name}")
    raise AttributeError(f"module 'simtc.engine' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _SUBMODULES)
