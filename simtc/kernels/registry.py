"""The program registry: name -> (one-line description, builder of a :class:`simtc.isa.Program`).

Built-in programs are listed here with their builder as ``"module:function"`` (imported when the
program is built, so listing stays cheap); catalogue modules (:mod:`simtc.kernels.hazards`) add
theirs through :func:`register` when the registry is first read.

>>> "flashmla-qk" in programs()
True
>>> build("flashmla-qk").counts()["tcgen05.mma.ws"]
18
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from simtc.errors import SimtcError

__all__ = ["PROGRAMS", "build", "builder", "describe", "programs", "register"]

PROGRAMS: dict[str, tuple[str, Callable | str]] = {
    "flashmla-qk": ("FlashMLA head64 QK step: 18 tcgen05.cp of Q, 18 tcgen05.mma.ws (dual GEMM), commit, ld of P",
                    "simtc.kernels.flashmla.programs:qk_program"),
    "flashmla-sm90-v32": ("FlashMLA SM90 sparse FP8 decode h64, V32: one CTA, a split of 2 blocks (WG0 QK + softmax + "
                          "PV, WG1 PV, WG2 gather + dequant); simulate with --arch sm90 --timing-only",
                          "simtc.kernels.flashmla.sm90:program_v32"),
    "flashmla-sm90-model1": ("FlashMLA SM90 sparse FP8 decode h64, MODEL1: one CTA, a split of 2 blocks; simulate "
                             "with --arch sm90 --timing-only", "simtc.kernels.flashmla.sm90:program_model1"),
}
"""name -> (description, builder): a zero-argument callable, or ``"module:function"`` imported on use."""

_CATALOGUES = ("simtc.kernels.hazards",)
"""Modules whose ``register_all(register)`` adds their programs."""
_loaded = False


def register(name: str, builder: Callable | str, description: str | None = None) -> None:
    """Add a program; the description defaults to the first line of the builder's docstring."""
    if not isinstance(name, str) or not name or any(c.isspace() for c in name):
        raise SimtcError(f"program name {name!r}: a non-empty name without spaces", rule="program names")
    if description is None:
        doc = getattr(builder, "__doc__", None) or ""
        description = doc.strip().splitlines()[0] if doc.strip() else ""
    old = PROGRAMS.get(name)
    if old is not None and old[1] is not builder and old[1] != builder:
        raise SimtcError(f"program {name!r} is registered already", rule="program names are unique")
    PROGRAMS[name] = (description, builder)


def _load_catalogues() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for mod in _CATALOGUES:
            try:
                m = importlib.import_module(mod)
            except ModuleNotFoundError as e:  # a catalogue not written yet
                if e.name == mod:
                    continue
                raise
            m.register_all(register)


def programs() -> dict[str, str]:
    """Every registered program: name -> one-line description, sorted by name."""
    _load_catalogues()
    return {name: PROGRAMS[name][0] for name in sorted(PROGRAMS)}


def builder(name: str) -> Callable:
    """The builder of program ``name``."""
    _load_catalogues()
    if name not in PROGRAMS:
        raise SimtcError(f"unknown program {name!r}; known: {', '.join(sorted(PROGRAMS))}",
                         rule="program names come from the registry (simtc program --list)")
    fn = PROGRAMS[name][1]
    if isinstance(fn, str):
        mod, attr = fn.split(":")
        fn = getattr(importlib.import_module(mod), attr)
    return fn


def describe(name: str) -> str:
    """The one-line description of a registered program."""
    builder(name)
    return PROGRAMS[name][0]


def build(name: str):
    """Build the registered program ``name``."""
    return builder(name)()
