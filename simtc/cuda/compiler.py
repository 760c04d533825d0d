"""CUDA C++ to PTX for :mod:`simtc.cuda`, with the compiler options CuPy uses (one compiler: :mod:`simtc.hw.compile`).

:class:`~simtc.cuda.RawModule` and :class:`~simtc.cuda.RawKernel` compile through
:func:`simtc.hw.compile.compile_cuda_names` (NVRTC from the ``cuda-bindings`` and ``nvidia-cuda-nvrtc`` wheels, no
GPU needed, or a local ``nvcc``; cached by source, options and route). The options are assembled as CuPy assembles
them for a raw kernel, so the PTX simtc executes is the PTX CuPy's compile would give on a GPU:

* ``--std=c++17`` unless the options name a standard (CuPy ``cupy/_core/core.pyx``,
  ``assemble_cupy_compiler_options``, at cupy/cupy 6b6d956);
* ``-ftz=true`` (CuPy ``cupy/cuda/compiler.py``, ``_compile_with_cache_cuda``, same commit): denormal floats are
  flushed to zero, so the PTX carries ``.ftz`` forms (CuPy appends it after the user's options; simtc adds it only
  when the options say nothing about ``-ftz``);
* NVRTC only: ``--device-as-default-execution-space`` (CuPy ``_compile_using_nvrtc_no_warning``) and the CCCL and
  CUDA runtime header directories found by ``cuda.pathfinder`` (CuPy puts CCCL first), so ``#include
  <cuda_fp16.h>`` works;
* simtc's own addition: ``-lineinfo`` (``.loc`` directives, so every fault names the CUDA source line; it does
  not change the generated code) unless the options already ask for line information or ``-G``.

The target is ``sm_90a`` unless the options name one (``-arch=sm_100a``, ``--gpu-architecture=sm_100a``,
``-arch sm_100a``; ``compute_XX`` is taken as ``sm_XX``). CuPy itself compiles for the current device's compute
capability; on a GPU, name the target in the options to get the same PTX on both sides.

>>> assemble_options(("-arch=sm_100a", "-DN=4"), "nvrtc")[0]
'sm_100a'
>>> [o for o in assemble_options(("-DN=4",), "nvcc")[1]]
['-DN=4', '-ftz=true', '-lineinfo']
"""

from __future__ import annotations

import functools
import hashlib
import re

from simtc.errors import SimtcError
from simtc.hw.compile import CompileError

__all__ = ["DEFAULT_ARCH", "CompileException", "assemble_options", "compile_to_ptx", "parse_ptx"]

DEFAULT_ARCH = "sm_90a"
"""The target when the options name none (simtc executes whatever PTX target it is given)."""

CompileException = CompileError
"""CuPy's name for a compile failure (``cupy.cuda.compiler.CompileException``); here simtc's
:class:`simtc.hw.compile.CompileError`, whose ``log`` holds the compiler's messages."""

_ARCH_RULE = "one target architecture, written -arch=sm_XX[a|f] (or --gpu-architecture=...)"
_ARCH = re.compile(r"^(?:sm|compute)_(\d{2,3}[af]?)$")


class OptionError(SimtcError, ValueError):
    """Compiler options simtc cannot take (not a tuple of strings, two targets, an unknown backend)."""


def _arch_value(text: str) -> str:
    m = _ARCH.match(text.strip())
    if not m:
        raise OptionError(f"target {text!r} is not an architecture such as sm_90a or sm_100a", rule=_ARCH_RULE)
    return f"sm_{m.group(1)}"


def assemble_options(options: tuple[str, ...], backend: str) -> tuple[str, tuple[str, ...]]:
    """``(arch, options)`` for :func:`simtc.hw.compile.compile_cuda_names`: the target taken out of ``options``
    and the remaining options with CuPy's defaults added (see the module text)."""
    if backend not in ("nvrtc", "nvcc"):
        raise OptionError(f"backend {backend!r}: use 'nvrtc' or 'nvcc' (as CuPy)", rule="compiler backends")
    if not isinstance(options, tuple) or not all(isinstance(o, str) for o in options):
        raise OptionError(f"options must be a tuple of str (CuPy types it so), got {options!r}",
                          rule="compiler options are a tuple of strings")
    arch: str | None = None
    rest: list[str] = []
    it = iter(options)
    for opt in it:
        value = None
        for flag in ("-arch", "--gpu-architecture", "-gencode", "--generate-code"):
            if opt == flag:
                value = next(it, None)
                if value is None:
                    raise OptionError(f"{flag} without a value", rule=_ARCH_RULE)
            elif opt.startswith(flag + "="):
                value = opt[len(flag) + 1:]
            if value is not None:
                if flag in ("-gencode", "--generate-code"):
                    raise OptionError(f"{opt}: simtc compiles one PTX module; name the target with -arch=sm_XX",
                                      rule=_ARCH_RULE)
                break
        if value is None:
            rest.append(opt)
            continue
        new = _arch_value(value)
        if arch is not None and arch != new:
            raise OptionError(f"two targets in the options: {arch} and {new}", rule=_ARCH_RULE)
        arch = new
    if not any(o.startswith(("-ftz", "--ftz")) for o in rest):
        rest.append("-ftz=true")
    if backend == "nvrtc":
        if not any(o in ("--device-as-default-execution-space", "-default-device") for o in rest):
            rest.append("--device-as-default-execution-space")
        rest.extend(f"-I{d}" for d in _header_dirs() if f"-I{d}" not in rest)
    if not any(o in ("-lineinfo", "--generate-line-info", "-G", "--device-debug") for o in rest):
        rest.append("-lineinfo")
    return arch or DEFAULT_ARCH, tuple(rest)


@functools.cache
def _header_dirs() -> tuple[str, ...]:
    """CCCL's and the CUDA runtime's header directories (``cuda.pathfinder``), CCCL first as CuPy puts them."""
    try:
        import cuda.pathfinder as pf
    except ImportError:
        return ()
    found = []
    for lib in ("cccl", "cudart"):
        try:
            d = pf.find_nvidia_header_directory(lib)
        except Exception:  # a wheel that is not installed, or a pathfinder without this library
            d = None
        if d:
            found.append(str(d))
    return tuple(found)


def compile_to_ptx(code: str, *, options: tuple[str, ...] = (), backend: str = "nvrtc",
                   name_expressions: tuple[str, ...] = (), name: str = "kernel.cu") -> tuple[str, dict[str, str]]:
    """PTX text of CUDA C++ ``code`` and the lowered name of each C++ name expression (cached).

    A compiler error raises :class:`simtc.hw.compile.CompileError` carrying the compiler's log."""
    from simtc.hw.compile import compile_cuda_names

    arch, opts = assemble_options(options, backend)
    data, names = compile_cuda_names(code, arch=arch, name=name, output="ptx", options=opts, compiler=backend,
                                     name_expressions=tuple(name_expressions))
    return data.decode(), names


_MODULES: dict[str, object] = {}


def parse_ptx(text: str, *, name: str = "<ptx>"):
    """The parsed :class:`simtc.ptx.ir.Module` of PTX ``text`` (parsed once per text in a process)."""
    from simtc.ptx.parser import parse

    key = hashlib.sha256((name + "\x00" + text).encode()).hexdigest()
    if key not in _MODULES:
        _MODULES[key] = parse(text, name=name)
    return _MODULES[key]
