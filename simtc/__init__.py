"""simtc: an educational, cycle-level, bit-exact simulator of NVIDIA Blackwell tcgen05 tensor-core data flow.

The data flow and the arithmetic are exact, bit for bit: where every byte and element lives, what
every instruction reads and writes, and the exact fp32 results. Time comes from an event engine
(SimPy) whose timing model is calibrated on published B200 and our own H200 measurements; every
timing parameter is labelled measured, derived or assumed (:mod:`simtc.engine.timing`).

Subpackages load lazily (``import simtc`` is cheap, no numpy): every subpackage below is an
attribute of :mod:`simtc` that is imported on first use.

* ``simtc.errors`` -- the error hierarchy (every error names the rule it breaks);
* ``simtc.isa`` -- instruction records (``tcgen05``, mbarrier, TMA, ``wgmma``, ...) and Programs: pure data;
* ``simtc.numerics`` -- number formats and tensor-core arithmetic bit for bit;
* ``simtc.smem`` -- shared-memory layouts, swizzles, descriptors, byte images, bank conflicts;
* ``simtc.tmem`` -- Tensor Memory: addresses, allocation, data-path layouts, ``tcgen05.ld/st/cp``;
* ``simtc.mma`` -- tensor-core arithmetic over the memories: ``tcgen05.mma``, ``wgmma``;
* ``simtc.semantics`` -- what each instruction record does to a CTA's state (one access API);
* ``simtc.engine`` -- the cycle-level event engine: warps, asynchronous units, barriers, the labelled
  timing model, the hazard and deadlock checker;
* ``simtc.kernels`` -- kernels as Programs built from data (FlashMLA's SM100 head64 decode, the hazard catalogue);
* ``simtc.ptx`` -- real PTX: the parser, per-lane ALU semantics and the SIMT executor (warps, memories, barriers);
* ``simtc.render`` -- terminal, Jupyter and SVG views (rich);
* ``simtc.hw`` -- the hardware path: CUDA executors and cross-checks against real GPUs;
* ``simtc.cuda`` -- CuPy's raw-kernel API over simtc's PTX executor (``import simtc.cuda as xp``: the same
  script as with ``import cupy as xp``), and the compilation of CUDA C++ to PTX;
* ``simtc.cli`` -- the ``simtc`` command.

>>> import simtc
>>> simtc.tmem.COLUMNS
512
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING

from simtc.errors import SimtcError

__version__ = "0.1.0"

_HERE = os.path.dirname(__file__)


def _subpackages() -> frozenset[str]:
    """Every importable child of this package: sub-directories holding Python files, and ``.py`` modules."""
    names = set()
    for entry in os.scandir(_HERE):
        if entry.is_dir() and any(f.endswith(".py") for f in os.listdir(entry.path)):
            names.add(entry.name)
        elif entry.is_file() and entry.name.endswith(".py"):
            names.add(entry.name[:-3])
    return frozenset(n for n in names if n.isidentifier() and not n.startswith("_"))


_SUBMODULES = _subpackages()

__all__ = ["SimtcError", "__version__", *sorted(_SUBMODULES)]

if TYPE_CHECKING:  # pragma: no cover (for type checkers; at run time __getattr__ imports on first use)
    from simtc import cli as cli
    from simtc import cuda as cuda
    from simtc import engine as engine
    from simtc import errors as errors
    from simtc import hw as hw
    from simtc import isa as isa
    from simtc import kernels as kernels
    from simtc import mma as mma
    from simtc import numerics as numerics
    from simtc import ptx as ptx
    from simtc import render as render
    from simtc import semantics as semantics
    from simtc import smem as smem
    from simtc import tmem as tmem


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"simtc.{name}")
    raise AttributeError(f"module 'simtc' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _SUBMODULES)
