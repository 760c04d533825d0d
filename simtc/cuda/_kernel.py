"""``RawModule`` and ``RawKernel``: CuPy's raw-kernel API over simtc's PTX executor.

A module is CUDA C++ compiled to PTX (:mod:`simtc.cuda.compiler`) or a ``.ptx`` file, parsed once
(:func:`simtc.ptx.parser.parse`); a launch ``kernel(grid, block, args, shared_mem=N)`` packs the arguments against
the kernel's PTX parameters (:func:`pack_args`) and runs the whole grid through
:func:`simtc.ptx.executor.launch` before it returns, so the arrays hold the results at once. The
:class:`~simtc.ptx.executor.LaunchResult` (instruction counts, ``printf`` lines, notes) is ``kernel.last_result``
and :func:`last_launch`.

Arguments are checked where a GPU would take them silently (CuPy passes each argument's own bytes, whatever the
parameter: ``cupy/cuda/function.pyx`` ``_pointer`` and ``cupy/_core/_scalar.pyx`` ``CScalar`` at cupy/cupy 6b6d956):

* an ``ndarray`` (or ``None``, a null pointer) goes to an 8-byte integer parameter (``.u64``/``.s64``/``.b64``: a
  pointer);
* a numpy scalar must have the parameter's size and kind (an integer for ``.u32``, a float for ``.f32``); a by-value
  struct parameter (``.b8 name[N]``) takes a numpy scalar or a size-1 numpy array of N bytes;
* a Python ``int`` goes to an integer parameter when it fits its width (CuPy passes it as int64: the parameter reads
  its low bytes); a Python ``float`` only to an ``.f64`` parameter (CuPy passes a float64, so a ``float`` parameter
  would read half of it: pass ``numpy.float32(x)``); a Python ``bool`` only to a 1-byte parameter.

Anything else raises :class:`simtc.ptx.errors.LaunchError` naming the parameter. A by-value CuTe object (a tensor,
a ``TiledMMA``, a TMA atom holding a tensor map) is built with :class:`simtc.cuda.cute_params.StructArg`.

A kernel that needs a cluster of several CTAs (``.reqnctapercluster`` > 1, ``.explicitcluster``, ``.cta_group::2``
or ``.multicast::cluster`` instructions) is refused when launched, before any CTA runs: a launch here has no cluster
dimension, as CuPy's has none (:func:`cluster_refusal`).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simtc.cuda._array import ndarray
from simtc.cuda._memory import MemoryPointer, UnownedMemory, default_device
from simtc.ptx.errors import LaunchError

__all__ = ["DEFAULT_MAX_DYNAMIC_SHARED", "RawKernel", "RawModule", "last_launch", "pack_args", "parse_dims"]

DEFAULT_MAX_DYNAMIC_SHARED = 48 * 1024
"""Dynamic shared memory a kernel may take without opting in: 48 KiB less its static shared memory. More needs
``kernel.max_dynamic_shared_size_bytes`` raised first (CUDA C++ Programming Guide, "Shared Memory" for compute
capability 9.0/10.0: allocations over 48 KB per block need dynamic shared memory and an explicit opt-in with
``cudaFuncSetAttribute``; CUDA Runtime API, ``cudaFuncAttributes::maxDynamicSharedSizeBytes``: a launch must not
exceed it)."""

_LAST: list[Any] = []


def last_launch():
    """The :class:`~simtc.ptx.executor.LaunchResult` of the last launch made through :mod:`simtc.cuda` (``None``
    before the first)."""
    return _LAST[0] if _LAST else None


# ---- grid and block -----------------------------------------------------------------------------------

_DIMS_RULE = "grid and block are tuples of 1 to 3 positive integers, as CuPy takes them"
_DIMS_REF = "cupy/cuda/function.pyx Function.__call__ at cupy/cupy 6b6d956"


def parse_dims(value, what: str) -> tuple[int, int, int]:
    """``(x, y, z)`` of a launch's ``grid`` or ``block``: a tuple of 1-3 integers >= 1, padded with 1s.

    CuPy types both arguments ``tuple`` (an ``int`` is a ``TypeError`` there, so it is here too, with the fix), pads
    them with 1s and raises a 0 or a negative size to 1; simtc refuses those sizes, as CUDA does."""
    if not isinstance(value, tuple):
        raise LaunchError(f"{what} must be a tuple such as ({value!r},), got {type(value).__name__} {value!r} "
                          f"(CuPy refuses it too)", rule=_DIMS_RULE, ref=_DIMS_REF)
    if not 1 <= len(value) <= 3:
        raise LaunchError(f"{what} {value!r} has {len(value)} dimensions", rule=_DIMS_RULE, ref=_DIMS_REF)
    dims = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise LaunchError(f"{what} {value!r}: {v!r} is not an integer", rule=_DIMS_RULE, ref=_DIMS_REF)
        if v < 1:
            raise LaunchError(f"{what} {value!r}: every size must be at least 1 (CuPy would launch 1 there, CUDA "
                              "refuses it)", rule=_DIMS_RULE, ref=_DIMS_REF)
        dims.append(int(v))
    return (*dims, 1, 1)[:3]  # type: ignore[return-value]


# ---- arguments -------------------------------------------------------------------------------------------

_ARG_RULE = "each argument matches its kernel parameter's PTX type and size"
_ARG_REF = "PTX ISA 9.0 §5.1.6 (kernel parameters)"


def _type_kind(t: str) -> str:
    return "f" if t.startswith("f") else "pred" if t == "pred" else "i"


def _describe(p, i: int) -> str:
    shape = "".join(f"[{d}]" for d in p.shape)
    return f"parameter {i} ({p.name}: .{p.type}{shape}, {p.size} bytes)"


def _pack_one(p, i: int, a) -> bytes:
    where = _describe(p, i)
    aggregate = bool(p.shape)
    size = p.size
    if isinstance(a, (ndarray, MemoryPointer)) or a is None:
        what = "None (a null pointer)" if a is None else f"a device {'array' if isinstance(a, ndarray) else 'pointer'}"
        if aggregate or size != 8 or _type_kind(p.type) != "i":
            raise LaunchError(f"{what} for {where}: a pointer is an 8-byte integer parameter", rule=_ARG_RULE,
                              ref=_ARG_REF)
        return struct.pack("<Q", 0 if a is None else a.data.ptr if isinstance(a, ndarray) else a.ptr)
    if isinstance(a, np.ndarray):
        if a.size != 1:
            raise LaunchError(f"a numpy.ndarray of shape {a.shape} for {where}: only numpy arrays of size one pass "
                              "by value (as in CuPy); move it to the device with simtc.cuda.asarray to pass a pointer",
                              rule=_ARG_RULE, ref=_ARG_REF)
        if a.nbytes != size:
            raise LaunchError(f"a numpy array of {a.nbytes} bytes ({a.dtype}) for {where}", rule=_ARG_RULE,
                              ref=_ARG_REF)
        return a.tobytes()
    if isinstance(a, np.generic):
        if a.dtype.itemsize != size:
            raise LaunchError(f"numpy.{a.dtype.name} ({a.dtype.itemsize} bytes) for {where}", rule=_ARG_RULE,
                              ref=_ARG_REF)
        if not aggregate:
            kind = "f" if a.dtype.kind in "fc" else "i" if a.dtype.kind in "iub" else "?"
            if kind != _type_kind(p.type):
                want = "a float" if _type_kind(p.type) == "f" else "an integer"
                raise LaunchError(f"numpy.{a.dtype.name} for {where}: the kernel would read its bits as .{p.type}; "
                                  f"pass {want} of {size} bytes", rule=_ARG_RULE, ref=_ARG_REF)
        return a.tobytes()
    if isinstance(a, bool):
        if aggregate or size != 1:
            raise LaunchError(f"a Python bool for {where}: CuPy passes it as 1 byte", rule=_ARG_RULE, ref=_ARG_REF)
        return bytes([int(a)])
    if isinstance(a, int):
        if aggregate or _type_kind(p.type) != "i":
            raise LaunchError(f"a Python int for {where}: CuPy passes it as an int64; pass numpy."
                              f"{'float32' if size == 4 else 'float64' if size == 8 else 'float16'}({a})",
                              rule=_ARG_RULE, ref=_ARG_REF)
        bits = 8 * size
        if not -(1 << (bits - 1)) <= a < (1 << bits):
            raise LaunchError(f"{a} does not fit {where}", rule=_ARG_RULE, ref=_ARG_REF)
        return (a & ((1 << bits) - 1)).to_bytes(size, "little")
    if isinstance(a, float):
        if aggregate or _type_kind(p.type) != "f" or size != 8:
            fix = "numpy.float32(x)" if size == 4 and _type_kind(p.type) == "f" else "a value of the parameter's type"
            raise LaunchError(f"a Python float for {where}: CuPy passes it as a float64 (8 bytes); pass {fix}",
                              rule=_ARG_RULE, ref=_ARG_REF)
        return struct.pack("<d", a)
    if isinstance(a, (bytes, bytearray, memoryview)):
        if len(a) != size:
            raise LaunchError(f"{len(a)} bytes for {where}", rule=_ARG_RULE, ref=_ARG_REF)
        return bytes(a)
    raise LaunchError(f"{type(a).__name__} {a!r} for {where}: pass a simtc.cuda.ndarray, a numpy scalar or a Python "
                      "int/float", rule=_ARG_RULE, ref=_ARG_REF)


def pack_args(function, args: Sequence) -> list[bytes]:
    """The bytes of each argument of a launch of ``function`` (a :class:`simtc.ptx.ir.Function`), in parameter order,
    checked against the PTX parameters (see the module text); :class:`LaunchError` naming the parameter otherwise."""
    if not isinstance(args, (tuple, list)):
        raise LaunchError(f"args must be a tuple of the kernel's arguments, got {type(args).__name__}",
                          rule=_ARG_RULE, ref=_ARG_REF)
    params = function.params
    if len(args) != len(params):
        listed = ", ".join(f"{p.name} (.{p.type})" for p in params) or "none"
        raise LaunchError(f"kernel {function.name} takes {len(params)} argument(s), {len(args)} given; its "
                          f"parameters: {listed}", rule=_ARG_RULE, ref=_ARG_REF)
    return [_pack_one(p, i, a) for i, (p, a) in enumerate(zip(params, args, strict=True))]


# ---- the executor's compiled kernel (its shared-memory layout) -------------------------------------------

def kernel_code(module, name: str):
    """The executor's compiled form of kernel ``name`` on the default device (its static shared-memory layout:
    ``static_shared``), compiled once and kept where :func:`simtc.ptx.executor.launch` keeps it."""
    from simtc.ptx.executor import compile_kernel

    dev = default_device()
    img = dev.load(module)
    if img.program is None:
        img.program = {}
    kc = img.program.get(name)
    if kc is None:
        kc = img.program[name] = compile_kernel(module, name, dev, img)
    return kc


# ---- kernels written for a cluster launch -------------------------------------------------------------------

_CLUSTER_RULE = "simtc.cuda launches clusters of one CTA (no cluster dimension, as CuPy's RawKernel)"
_CLUSTER_REF = "PTX ISA 9.0 §11.7 (cluster directives), §9.7.16.5 Table 46 (.cta_group), §9.7.9.25.5.2 (multicast)"


def _cluster_features(ins) -> list[str]:
    """What a cluster of one CTA cannot give instruction ``ins``: ``.cta_group::2`` (a CTA pair) and/or
    ``.multicast::cluster`` (other CTAs of the cluster)."""
    mods = ins.modifiers
    out = []
    if "cta_group::2" in mods:
        out.append("2-CTA MMA (.cta_group::2, a CTA pair)")
    if any(m.startswith("multicast::cluster") for m in mods):
        out.append("TMA multicast (.multicast::cluster)" if ins.opcode == "cp" else
                   f"{ins.opcode} multicast (.multicast::cluster)")
    return out


def _source_position(ins) -> str:
    """``", FILE:LINE"`` of the CUDA source line an instruction was compiled from (``-lineinfo``), the outermost
    one when it was inlined (the kernel's own line rather than a header's); ``""`` without line information."""
    loc = ins.loc
    if loc is None:
        return ""
    while loc.inlined_at is not None:
        loc = loc.inlined_at
    return f", {Path(loc.file).name}:{loc.line}"


def cluster_refusal(module, function):
    """The :class:`~simtc.ptx.errors.PtxUnsupported` for a kernel that only runs as a cluster of several CTAs, or
    ``None``.

    A launch through :mod:`simtc.cuda` has no cluster dimension (CuPy's ``RawKernel.__call__`` takes none; the
    host code of such a kernel launches it with ``cudaLaunchKernelEx`` and a cluster attribute, e.g. CUTLASS's
    ``cutlass::launch_kernel_on_cluster``), so each CTA is a cluster of one. A kernel needs more when it declares
    ``.reqnctapercluster`` of more than one CTA or ``.explicitcluster`` (PTX ISA 9.0 §11.7; ``.maxclusterrank``
    is only a bound, which one CTA meets), or when the functions it reaches hold ``.cta_group::2`` (tcgen05 MMA,
    allocation, commit and TMA on a CTA pair: Table 46 of §9.7.16.5) or ``.multicast::cluster`` (TMA loads and
    commits delivered to several CTAs; with a mask of one CTA it would be legal, but simtc's async units refuse it
    by name, :mod:`simtc.ptx.async_tma`, :mod:`simtc.ptx.async_ops`). The refusal names each such feature with its
    first PTX line and count, before any CTA runs: no ``printf``, no store, no partial result."""
    from simtc.ptx.errors import PtxUnsupported

    d = function.directives
    found: list[str] = []
    if "reqnctapercluster" in d and int(np.prod(d["reqnctapercluster"])) > 1:
        found.append(f"a cluster launch (.reqnctapercluster {','.join(map(str, d['reqnctapercluster']))} on the "
                     f".entry at PTX line {function.line})")
    if "explicitcluster" in d:
        found.append(f"a cluster launch (.explicitcluster on the .entry at PTX line {function.line})")
    first: dict[str, list] = {}
    for fc in kernel_code(module, function.name).functions.values():  # the kernel and what it calls
        for ins in fc.fn.body:
            for feature in _cluster_features(ins):
                seen = first.setdefault(feature, [ins, 0])
                seen[1] += 1
                if ins.line < seen[0].line:
                    seen[0] = ins
    for feature, (ins, count) in sorted(first.items(), key=lambda kv: kv[1][0].line):
        more = f" and {count - 1} more" if count > 1 else ""
        found.append(f"{feature} at PTX line {ins.line} ({ins.name}{_source_position(ins)}){more}")
    if not found:
        return None
    name = cxx_base_name(function.name) or function.name
    how = ("its cluster shape is part of the kernel" if "reqnctapercluster" in d or "explicitcluster" in d else
           "on a GPU its host code launches it with a cluster dimension")
    return PtxUnsupported(f"kernel {name} needs a cluster of several CTAs, which simtc does not execute: "
                          + "; ".join(found) + f" ({how}; simtc.cuda launches clusters of one CTA)",
                          rule=_CLUSTER_RULE, ref=_CLUSTER_REF)


# ---- kernels and modules ---------------------------------------------------------------------------------

def cxx_base_name(mangled: str) -> str | None:
    """The unqualified C++ name of an Itanium-mangled kernel name (``_Z6vecaddPKfS0_Pfi`` -> ``vecadd``,
    ``_Z5scaleIfEvPT_S0_ybd`` -> ``scale``), or ``None`` for a name that is not mangled (``extern "C"``).

    >>> cxx_base_name("_Z6vecaddPKfS0_Pfi"), cxx_base_name("_ZN2ns4axpyEPfi"), cxx_base_name("vector_add")
    ('vecadd', 'axpy', None)
    """
    if not mangled.startswith("_Z"):
        return None
    s = mangled[2:]
    nested = s.startswith("N")
    if nested:
        s = s[1:]
    name = None
    while s and s[0].isdigit():
        m = re.match(r"\d+", s)
        n = int(m.group(0))
        s = s[m.end():]
        name, s = s[:n], s[n:]
        if not nested:
            break
    return name


class RawModule:
    """CuPy's ``RawModule``: CUDA C++ (``code=``) or a PTX file (``path=``), with kernels by name.

    ``options``, ``backend`` and ``name_expressions`` as in CuPy (:mod:`simtc.cuda.compiler`); a ``.cubin`` or
    other ELF file is refused (simtc executes PTX: compile to PTX, ``nvcc -ptx``). ``translate_cucomplex``,
    ``enable_cooperative_groups`` and ``jitify`` are refused when true (not modelled)."""

    def __init__(self, *, code: str | None = None, path: str | None = None, options: tuple = (),
                 backend: str = "nvrtc", translate_cucomplex: bool = False, enable_cooperative_groups: bool = False,
                 name_expressions=None, jitify: bool = False):
        if (code is None) == (path is None):
            raise TypeError("Exactly one of `code` and `path` keyword arguments must be given.")
        for flag, value in (("translate_cucomplex", translate_cucomplex),
                            ("enable_cooperative_groups", enable_cooperative_groups), ("jitify", jitify)):
            if value:
                raise LaunchError(f"{flag}=True is not supported by simtc.cuda", rule=f"simtc.cuda has no {flag}")
        if name_expressions is not None:
            if code is None:
                raise ValueError("need CUDA C++ code for the requested kernels")
            if backend != "nvrtc":
                raise ValueError("only nvrtc supports retrieving the mangled names for the given name expressions")
            name_expressions = tuple(name_expressions)
        self.code = code
        self.file_path = path
        self.options = tuple(options) if path is None else ()
        self.backend = backend if path is None else "nvcc"
        self.name_expressions = name_expressions
        self._module = None
        self._mapping: dict[str, str] = {}
        self._source_name = "<ptx>"
        self._compile_name = "kernel.cu"  # the source's name for the compiler (the .file of its .loc lines)
        self._kernels: dict[str, RawKernel] = {}

    @property
    def module(self):
        """The parsed :class:`simtc.ptx.ir.Module` (compiled and parsed on first use, as CuPy compiles lazily)."""
        if self._module is None:
            from simtc.cuda.compiler import compile_to_ptx, parse_ptx

            if self.code is not None:
                if not isinstance(self.options, tuple):
                    raise TypeError("options must be a tuple")
                ptx, self._mapping = compile_to_ptx(self.code, options=self.options, backend=self.backend,
                                                    name_expressions=self.name_expressions or (),
                                                    name=self._compile_name)
                self._source_name = self._compile_name
            else:
                ptx = _read_ptx(self.file_path)
                self._source_name = str(self.file_path)
            self._module = parse_ptx(ptx, name=self._source_name)
        return self._module

    def compile(self, log_stream=None) -> None:
        """Compile (and parse) now rather than at the first use."""
        _ = self.module

    def get_function(self, name: str) -> RawKernel:
        """The kernel ``name``: its PTX entry name, or one of the ``name_expressions`` (a C++ template instance)."""
        module = self.module
        entry = self._mapping.get(name, name)
        if entry not in self._kernels:
            find_kernel(module, entry, shown=name)
            k = RawKernel.__new__(RawKernel)
            k._init(None, entry, self.options, self.backend, module=self)
            self._kernels[entry] = k
        return self._kernels[entry]

    def get_global(self, name: str) -> MemoryPointer:
        """A pointer to a module-scope ``__device__`` or ``__constant__`` variable (``cupy.RawModule.get_global``)."""
        module = self.module
        var = next((v for v in module.variables if v.name == name and v.space in ("global", "const")), None)
        if var is None:
            known = ", ".join(v.name for v in module.variables if v.space in ("global", "const")) or "none"
            raise LaunchError(f"no __device__ or __constant__ variable {name!r} in the module; it has: {known}",
                              rule="get_global names a module-scope global or constant variable")
        dev = default_device()
        img = dev.load(module)
        addr = dev.address_of(img, name)
        if var.space == "global":
            data = dev.memory.view(addr, var.size)
        else:
            offset = img.const_vars[name]
            data = img.const_bank[offset:offset + var.size]
        return MemoryPointer(UnownedMemory(addr, var.size, dev, data))


def _read_ptx(path) -> str:
    p = Path(path)
    data = p.read_bytes()
    if data[:4] == b"\x7fELF" or p.suffix.lower() in (".cubin", ".fatbin", ".o"):
        raise LaunchError(f"{p}: a cubin or fatbin is machine code; simtc executes PTX (compile with nvcc -ptx, or "
                          "give the CUDA source)", rule="simtc executes PTX modules")
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise LaunchError(f"{p}: not PTX text (not UTF-8)", rule="simtc executes PTX modules") from None


def find_kernel(module, name: str, *, shown: str | None = None):
    """The ``.entry`` ``name`` of ``module``; a :class:`LaunchError` listing the kernels (with their C++ names)
    otherwise."""
    f = module.functions.get(name)
    if f is not None and f.entry:
        return f
    kernels = module.kernels()
    listed = ", ".join(k + (f" (C++ {b})" if (b := cxx_base_name(k)) else "") for k in kernels) or "none"
    hint = ""
    matches = [k for k in kernels if cxx_base_name(k) == name]
    if matches:
        hint = (f"; {name} is a C++ kernel, whose PTX name is mangled: use {matches[0]!r}, declare it extern \"C\", "
                "or give name_expressions (as with CuPy)")
    raise LaunchError(f"no kernel {shown or name!r} in the module; it has: {listed}{hint}",
                      rule="a kernel is named as its .entry in the PTX")


class RawKernel:
    """CuPy's ``RawKernel(code, name, options=(), backend='nvrtc')``: one kernel, compiled on first use, launched
    with ``kernel(grid, block, args, shared_mem=0)``."""

    def __init__(self, code: str, name: str, options: tuple = (), backend: str = "nvrtc", *,
                 translate_cucomplex: bool = False, enable_cooperative_groups: bool = False, jitify: bool = False):
        if not isinstance(code, str) or not isinstance(name, str):
            raise TypeError("RawKernel(code: str, name: str, ...)")
        module = RawModule(code=code, options=options, backend=backend, translate_cucomplex=translate_cucomplex,
                           enable_cooperative_groups=enable_cooperative_groups, jitify=jitify)
        self._init(code, name, options, backend, module=module)

    def _init(self, code, name, options, backend, *, module: RawModule) -> None:
        self.code = code
        self.name = name
        self.__name__ = name
        self.options = options
        self.backend = backend
        self._raw_module = module
        self._max_dynamic: int | None = None
        self._cluster: tuple | None = None  # (cluster_refusal(...),) once computed
        self.last_result = None
        self.timing: bool | tuple | list = False
        """simtc's own switch (CuPy has none): True, or a block index ``(x, y, z)``, records that CTA of each launch
        (the first when True) and runs it on simtc's engine; ``last_result.program`` is then its
        :class:`simtc.isa.Program` and ``last_result.timing`` the :class:`simtc.ptx.recording.EngineRun` (cycles,
        hazards, stepper). A list of block indices records each of those CTAs and runs them as CTAs sharing one SM
        (:class:`simtc.ptx.recording.Recorders`, :func:`simtc.ptx.recording.co_resident`: its sub-partitions, L1,
        port, TMEM, copy engine and HBM share; the hazard checker off, the CTAs' shared-memory addresses
        overlapping)."""

    # ---- the parsed kernel -----------------------------------------------------------------------
    @property
    def module(self):
        """The parsed :class:`simtc.ptx.ir.Module` this kernel lives in."""
        return self._raw_module.module

    @property
    def function(self):
        """The kernel's :class:`simtc.ptx.ir.Function` (its parameters, body, directives)."""
        return find_kernel(self.module, self.name)

    def compile(self, log_stream=None) -> None:
        _ = self.function

    # ---- attributes (CuPy's names; the meaningful ones) -------------------------------------------
    @property
    def shared_size_bytes(self) -> int:
        """Static shared memory of the kernel: the ``.shared`` variables it and the functions it calls use, each at
        its alignment (the executor's layout, :func:`kernel_code`)."""
        return kernel_code(self.module, self.function.name).static_shared

    @property
    def max_threads_per_block(self) -> int:
        """1024, or fewer when the kernel says ``.maxntid``/``.reqntid`` (PTX ISA 9.0 §11.4)."""
        d = self.function.directives
        for key in ("reqntid", "maxntid"):
            if key in d:
                return int(np.prod(d[key]))
        return 1024

    @property
    def local_size_bytes(self) -> int:
        """Bytes of ``.local`` variables (the ``__local_depot``) of the kernel."""
        return sum(v.size for v in self.function.variables if v.space == "local")

    @property
    def const_size_bytes(self) -> int:
        """Bytes of the module's ``.const`` variables."""
        return sum(v.size for v in self.module.variables if v.space == "const")

    @property
    def ptx_version(self) -> int:
        """The module's ``.version`` as 10 * major + minor."""
        major, _, minor = self.module.version.partition(".")
        return 10 * int(major) + int(minor or 0)

    @property
    def max_dynamic_shared_size_bytes(self) -> int:
        """The most dynamic shared memory a launch may ask for: 48 KiB less the static shared memory until it is
        raised (:data:`DEFAULT_MAX_DYNAMIC_SHARED`). Settable, up to the opt-in limit less the static shared memory
        (CUDA Runtime API, ``cudaFuncSetAttribute``: the sum may not exceed ``cudaDevAttrMaxSharedMemoryPerBlockOptin``,
        227 KiB on sm_90/sm_100, :data:`simtc.smem.memory.SMEM_CAPACITY`)."""
        if self._max_dynamic is None:
            return max(0, DEFAULT_MAX_DYNAMIC_SHARED - self.shared_size_bytes)
        return self._max_dynamic

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, nbytes: int) -> None:
        limit = self._optin_limit()
        static = self.shared_size_bytes
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or nbytes < 0 \
                or nbytes + static > limit:
            target = self.module.target[0] if self.module.target else "sm_100a"
            raise LaunchError(f"max_dynamic_shared_size_bytes = {nbytes!r}: with {static} bytes of static shared "
                              f"memory at most {limit - static} bytes ({limit // 1024} KiB per block on {target}; "
                              "CUDA_ERROR_INVALID_VALUE on a GPU)",
                              rule="dynamic + static shared memory <= the opt-in limit per block",
                              ref="CUDA Runtime API, cudaFuncSetAttribute "
                                  "(cudaFuncAttributeMaxDynamicSharedMemorySize); CUDA C++ Programming Guide, "
                                  "technical specifications per compute capability: 227 KB of shared memory per "
                                  "thread block on 9.0 and 10.0")
        self._max_dynamic = int(nbytes)

    def _optin_limit(self) -> int:
        from simtc.ptx.executor import _smem_capacity

        return _smem_capacity(self.module)

    @property
    def attributes(self) -> dict[str, int]:
        """The attributes simtc can state (CuPy's ``attributes`` keys that mean something for a PTX kernel)."""
        return {"max_threads_per_block": self.max_threads_per_block, "shared_size_bytes": self.shared_size_bytes,
                "const_size_bytes": self.const_size_bytes, "local_size_bytes": self.local_size_bytes,
                "ptx_version": self.ptx_version, "max_dynamic_shared_size_bytes": self.max_dynamic_shared_size_bytes}

    # ---- the launch ------------------------------------------------------------------------------
    def __call__(self, grid, block, args, *, shared_mem: int = 0, stream=None, enable_cooperative_groups=False):
        """Run the whole grid now (as ``cupy.RawKernel.__call__``, which then returns at once); the arrays hold the
        results when it returns. Returns ``None`` as CuPy does; the result is :attr:`last_result`."""
        from simtc.ptx.executor import launch

        function = self.function
        g = parse_dims(grid, "grid")
        b = parse_dims(block, "block")
        if isinstance(shared_mem, bool) or not isinstance(shared_mem, (int, np.integer)) or shared_mem < 0:
            raise LaunchError(f"shared_mem={shared_mem!r}: a number of bytes >= 0",
                              rule="dynamic shared memory is a byte count")
        limit = self.max_dynamic_shared_size_bytes
        if shared_mem > limit:
            raise LaunchError(f"shared_mem={shared_mem} bytes of dynamic shared memory, more than the kernel's "
                              f"max_dynamic_shared_size_bytes ({limit}); raise it first (kernel."
                              f"max_dynamic_shared_size_bytes = {shared_mem}), as on the GPU, where the launch fails "
                              "with CUDA_ERROR_INVALID_VALUE",
                              rule="a launch takes at most max_dynamic_shared_size_bytes",
                              ref="CUDA Runtime API, cudaFuncAttributes::maxDynamicSharedSizeBytes")
        packed = pack_args(function, args)
        if self._cluster is None:
            self._cluster = (cluster_refusal(self.module, function),)
        if self._cluster[0] is not None:
            raise self._cluster[0]
        if self.timing is not False and self.timing is not None:
            result = _timed_launch(self, function, g, b, packed, int(shared_mem))
        else:
            result = launch(self.module, function.name, grid=g, block=b, args=packed, shared_mem=int(shared_mem),
                            device=default_device())
        self.last_result = result
        _LAST[:] = [result]
        return None

    def __repr__(self) -> str:
        return f"<simtc.cuda.RawKernel {self.name}>"


def _timed_launch(kernel, function, grid, block, packed, shared_mem: int):
    """A launch with one CTA recorded (:class:`simtc.ptx.recording.Recorder`), or a list of CTAs sharing one SM
    (:class:`simtc.ptx.recording.Recorders`), run on simtc's engine."""
    import attrs

    from simtc.ptx.executor import LaunchOptions, launch
    from simtc.ptx.recording import Recorder, Recorders, arch_of, run_engine

    arch = arch_of(kernel.module)
    if isinstance(kernel.timing, list):
        ctas = [tuple(c) if isinstance(c, tuple | list) else (c,) for c in kernel.timing]
        rec = Recorders(ctas, arch=arch, kernel=function.name)
    else:
        rec = Recorder((0, 0, 0) if kernel.timing is True else tuple(kernel.timing), arch=arch, kernel=function.name)
    with rec:
        result = launch(kernel.module, function.name, grid=grid, block=block, args=packed, shared_mem=shared_mem,
                        device=default_device(), options=LaunchOptions(recorder=rec))
    recorded = rec.program()
    return attrs.evolve(result, program=recorded.program, timing=run_engine(recorded))
