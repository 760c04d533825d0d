"""The program registry: name -> (one-line description, builder of a :class:`simtc.isa.Program`).

Built-in programs are listed here with their builder as ``"module:function"`` (imported when the
program is built, so listing stays cheap); catalogue modules (:mod:`simtc.kernels.hazards`) add
theirs through :func:`register` when the registry is first read.

Whole kernels take parameters (:data:`PARAMETERS`): ``flashmla-head64`` (``model``, ``blocks``) is FlashMLA's
SM100 head64 kernel for one request, as the replay builds it
(:func:`simtc.kernels.flashmla.head64.head64_program`); ``flashmla-head64-v32`` / ``-model1`` (the Program's own
name, the one a timeline shows) fix the model. ``flashmla-sm90`` and ``flashmla-sm90-v32`` / ``-model1`` are the
SM90 kernel's (:func:`simtc.kernels.flashmla.sm90.sm90_program`).

>>> "flashmla-qk" in programs()
True
>>> build("flashmla-qk").counts()["tcgen05.mma.ws"]
18
>>> build("flashmla-head64", model="model1", blocks=2).name
'flashmla-head64-model1'
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable

from simtc.errors import SimtcError

__all__ = ["MAX_BLOCKS", "MODELS", "PARAMETERS", "PROGRAMS", "build", "builder", "describe", "parameters", "programs",
           "register"]

MODELS = ("v32", "model1")
"""The FlashMLA KV-cache models a whole-kernel Program is built for."""
MAX_BLOCKS = 4096
"""Most top-k blocks a whole-kernel Program is built for (``simtc replay --blocks`` takes as many)."""


def head64(model: str = "v32", blocks: int = 4):
    """FlashMLA SM100 sparse decode head64, whole (six roles, 384 threads): one request of ``blocks`` top-k blocks;
    no block takes the lazy O rescale (the replay derives those from its data)."""
    from simtc.kernels.flashmla.head64 import head64_program

    return head64_program(model, blocks)


def sm90(model: str = "v32", blocks: int = 2):
    """FlashMLA SM90 sparse FP8 decode h64, whole: one CTA serving one split of ``blocks`` top-k blocks."""
    from simtc.kernels.flashmla.sm90 import sm90_program

    return sm90_program(model, blocks)


def _fixed(fn: Callable, model: str, blocks: int) -> Callable:
    def build_it(blocks: int = blocks):
        return fn(model, blocks)

    build_it.__doc__ = fn.__doc__
    return build_it


PROGRAMS: dict[str, tuple[str, Callable | str]] = {
    "flashmla-qk": ("FlashMLA head64 QK step: 18 tcgen05.cp of Q, 18 tcgen05.mma.ws (dual GEMM), commit, ld of P",
                    "simtc.kernels.flashmla.programs:qk_program"),
    "flashmla-head64": ("FlashMLA SM100 head64 sparse decode, whole kernel (6 roles, 384 threads); --model v32|model1 "
                        "(default v32), --blocks N (default 4)", head64),
    "flashmla-head64-v32": ("flashmla-head64 with --model v32 (the name a replay's timeline shows); --blocks N "
                            "(default 4)", _fixed(head64, "v32", 4)),
    "flashmla-head64-model1": ("flashmla-head64 with --model model1; --blocks N (default 4)",
                               _fixed(head64, "model1", 4)),
    "flashmla-sm90": ("FlashMLA SM90 sparse FP8 decode h64, one CTA's split (WG0 QK + softmax + PV, WG1 PV, WG2 "
                      "gather + dequant); --model v32|model1, --blocks N (default 2); simulate with --arch sm90 "
                      "--timing-only", sm90),
    "flashmla-sm90-v32": ("flashmla-sm90 with --model v32; --blocks N (default 2)", _fixed(sm90, "v32", 2)),
    "flashmla-sm90-model1": ("flashmla-sm90 with --model model1; --blocks N (default 2)", _fixed(sm90, "model1", 2)),
}
"""name -> (description, builder): a zero-argument callable, or ``"module:function"`` imported on use."""

PARAMETERS: dict[str, tuple[str, ...]] = {
    "flashmla-head64": ("model", "blocks"), "flashmla-head64-v32": ("blocks",), "flashmla-head64-model1": ("blocks",),
    "flashmla-sm90": ("model", "blocks"), "flashmla-sm90-v32": ("blocks",), "flashmla-sm90-model1": ("blocks",),
}
"""The parameters (keyword arguments of the builder) each parametrised program takes; the others take none."""

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
    """The builder of program ``name``; an unknown name is refused with the closest known names."""
    _load_catalogues()
    if name not in PROGRAMS:
        close = difflib.get_close_matches(str(name), sorted(PROGRAMS), n=3, cutoff=0.6)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise SimtcError(f"unknown program {name!r}; {hint}'simtc program --list' lists all {len(PROGRAMS)}",
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


def parameters(name: str) -> tuple[str, ...]:
    """The parameters program ``name`` takes (``()`` for most)."""
    builder(name)
    return PARAMETERS.get(name, ())


def build(name: str, **params):
    """Build the registered program ``name``; ``params`` (``model``, ``blocks``) only where :data:`PARAMETERS`
    lists them, each checked (``model`` one of :data:`MODELS`, ``blocks`` 1 ... :data:`MAX_BLOCKS`)."""
    fn = builder(name)
    given = {k: v for k, v in params.items() if v is not None}
    takes = PARAMETERS.get(name, ())
    extra = [k for k in given if k not in takes]
    if extra:
        what = f"takes only {', '.join(takes)}" if takes else "takes no parameters"
        raise SimtcError(f"program {name!r} {what}, got {', '.join(extra)}",
                         rule="only whole-kernel programs (flashmla-head64, flashmla-sm90 ...) take a model or "
                              "blocks")
    if "model" in given and given["model"] not in MODELS:
        raise SimtcError(f"model {given['model']!r}; known: {', '.join(MODELS)}", rule="FlashMLA models")
    if "blocks" in given:
        b = given["blocks"]
        if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= MAX_BLOCKS:
            raise SimtcError(f"blocks = {b!r}: an integer 1 ... {MAX_BLOCKS}",
                             rule=f"a whole-kernel program covers 1 ... {MAX_BLOCKS} top-k blocks")
    return fn(**given)
