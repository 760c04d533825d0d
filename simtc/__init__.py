"""simtc: a cycle-level, bit-exact simulator of NVIDIA Blackwell tcgen05 tensor-core data flow.

Submodules load lazily (``import simtc`` is cheap): ``simtc.smem`` (shared-memory layouts,
swizzles, descriptors), ``simtc.numerics`` (number formats), ``simtc.render`` (rich views),
``simtc.cli`` (the ``simtc`` command).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from simtc.errors import SimtcError

__version__ = "0.1.0"
__all__ = ["SimtcError", "__version__", "numerics", "render", "smem", "tmem"]

_SUBMODULES = {"smem", "numerics", "render", "cli", "tmem", "errors"}

if TYPE_CHECKING:  # pragma: no cover
    from simtc import numerics, render, smem, tmem


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"simtc.{name}")
    raise AttributeError(f"module 'simtc' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _SUBMODULES)
