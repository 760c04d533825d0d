"""The program registry: name -> (one-line description, builder of a :class:`simtc.isa.Program`).

>>> sorted(PROGRAMS)
['flashmla-qk']
>>> build("flashmla-qk").counts()["tcgen05.mma.ws"]
18
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from simtc.errors import SimtcError

__all__ = ["PROGRAMS", "build", "describe"]

PROGRAMS: dict[str, tuple[str, str]] = {
    "flashmla-qk": ("FlashMLA head64 QK step: 18 tcgen05.cp of Q, 18 tcgen05.mma.ws (dual GEMM), commit, ld of P",
                    "simtc.kernels.flashmla.programs:qk_program"),
}
"""name -> (description, ``"module:function"`` of the builder; imported when the program is built)."""


def _builder(name: str) -> Callable:
    if name not in PROGRAMS:
        raise SimtcError(f"unknown program {name!r}; known: {', '.join(sorted(PROGRAMS))}",
                         rule="program names come from the registry (simtc program --list)")
    mod, fn = PROGRAMS[name][1].split(":")
    return getattr(importlib.import_module(mod), fn)


def describe(name: str) -> str:
    """The one-line description of a registered program."""
    _builder(name)
    return PROGRAMS[name][0]


def build(name: str):
    """Build the registered program ``name``."""
    return _builder(name)()
