"""Compiling CUDA C++ to cubin/PTX without a GPU (NVRTC through cuda-bindings, or nvcc), and SASS.

Routes: ``cuda.bindings.nvrtc`` gives exact cubin bytes offline; when
it is not installed, a local ``nvcc -cubin`` is used. ``SIMTC_COMPILER=nvcc`` (or ``nvrtc``)
forces a route, e.g. to build with the toolkit that matches a machine's driver; on a GPU,
``SIMTC_COMPILER=cupy`` lets CuPy compile and load the source itself (its NVRTC). Compiled modules
are cached by the hash of (source, arch, options, compiler) under ``$SIMTC_CACHE`` (default ``~/.cache/simtc``).
Disassembly uses ``nvdisasm`` (the ``nvidia-cuda-nvdisasm`` wheel, found with
``cuda.pathfinder``, or one on PATH).
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from simtc.errors import HardwareUnavailable, SimtcError

__all__ = ["CompileError", "cache_dir", "compile_cuda", "compile_cuda_names", "disassemble", "load_kernel",
           "sass_histogram"]


class CompileError(SimtcError, RuntimeError):
    """The CUDA compiler rejected a kernel; ``log`` holds its messages."""

    def __init__(self, message: str, log: str):
        super().__init__(message, rule="the kernel must compile for its target")
        self.log = log


def cache_dir() -> Path:
    """simtc's build cache (``$SIMTC_CACHE``, default ``~/.cache/simtc``), created on first use."""
    d = Path(os.environ.get("SIMTC_CACHE", Path.home() / ".cache" / "simtc"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def _nvrtc_compile(source: str, name: str, options: list[str], output: str,
                   name_expressions: tuple[str, ...] = ()) -> tuple[bytes, dict[str, str]]:
    from cuda.bindings import nvrtc

    def check(res):
        err = res[0] if isinstance(res, tuple) else res
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise SimtcError(f"NVRTC call failed: {err}", rule="NVRTC")
        return res[1:] if isinstance(res, tuple) and len(res) > 1 else None

    (prog,) = check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []))
    try:
        for expr in name_expressions:  # NVRTC guide, "Accessing Lowered Names"
            check(nvrtc.nvrtcAddNameExpression(prog, expr.encode()))
        opts = [o.encode() for o in options]
        res = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        err = res[0] if isinstance(res, tuple) else res
        (size,) = check(nvrtc.nvrtcGetProgramLogSize(prog))
        # NVRTC writes into the buffer it is given: a fresh bytearray, never a bytes object (``b" " * 1`` is
        # CPython's shared one-byte ``b" "``, and writing the log's NUL into it turns every b" " into b"\x00").
        log = bytearray(size)
        check(nvrtc.nvrtcGetProgramLog(prog, log))
        log_text = bytes(log).decode(errors="replace").rstrip("\x00 \n")
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise CompileError(f"NVRTC could not compile {name} ({err.name}):\n{log_text}", log_text)
        if output == "cubin":
            (size,) = check(nvrtc.nvrtcGetCUBINSize(prog))
            buf = bytearray(size)
            check(nvrtc.nvrtcGetCUBIN(prog, buf))
        else:
            (size,) = check(nvrtc.nvrtcGetPTXSize(prog))
            buf = bytearray(size)
            check(nvrtc.nvrtcGetPTX(prog, buf))
            buf = buf.rstrip(b"\x00")
        lowered = {}
        for expr in name_expressions:
            (low,) = check(nvrtc.nvrtcGetLoweredName(prog, expr.encode()))
            lowered[expr] = low.decode() if isinstance(low, bytes) else str(low)
        return bytes(buf), lowered
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _nvcc_compile(source: str, name: str, arch: str, options: list[str], output: str) -> bytes:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise HardwareUnavailable("no CUDA compiler: install cuda-bindings and nvidia-cuda-nvrtc (the dev extra) "
                                  "or put nvcc on PATH", rule="a CUDA compiler is needed to build kernels")
    with tempfile.TemporaryDirectory() as tmp:
        # the source goes into the temporary folder under its base name only: a name given as a path (a user's
        # FILE.cu) must never be written to; its folder stays on the include path for its "..." includes
        src = Path(tmp) / (Path(name).name or "kernel.cu")
        src.write_text(source)
        out = Path(tmp) / ("k.cubin" if output == "cubin" else "k.ptx")
        code = arch.replace("sm_", "")
        where = [f"-I{Path(name).parent}"] if Path(name).parent != Path(".") else []
        cmd = [nvcc, f"-gencode=arch=compute_{code},code={arch}", f"-{output}", "-o", str(out), str(src), *where,
               *[o for o in options if not o.startswith("-arch")]]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            raise CompileError(f"nvcc could not compile {name}:\n{proc.stderr}", proc.stderr)
        return out.read_bytes()


def compile_cuda(source: str, *, arch: str = "sm_90a", name: str = "kernel.cu", output: str = "cubin",
                 options: tuple[str, ...] = (), compiler: str | None = None) -> bytes:
    """Compile header-free CUDA C++ ``source`` for ``arch`` (e.g. ``sm_90a``, ``sm_100a``); cached.

    ``-std=c++17`` is added unless ``options`` name a standard. ``compiler`` picks the route (``"nvrtc"`` or
    ``"nvcc"``); ``None`` takes ``SIMTC_COMPILER`` (default: NVRTC when cuda-bindings is installed, else nvcc).
    """
    return compile_cuda_names(source, arch=arch, name=name, output=output, options=options, compiler=compiler)[0]


def compile_cuda_names(source: str, *, arch: str = "sm_90a", name: str = "kernel.cu", output: str = "cubin",
                       options: tuple[str, ...] = (), compiler: str | None = None,
                       name_expressions: tuple[str, ...] = ()) -> tuple[bytes, dict[str, str]]:
    """:func:`compile_cuda`, also returning the lowered (mangled) name of each C++ ``name_expressions`` entry
    (``"scale<float>"`` -> ``"_Z5scaleIfEvPT_"``), as NVRTC's ``nvrtcGetLoweredName`` gives them (NVRTC only)."""
    if output not in ("cubin", "ptx"):
        raise SimtcError(f"output must be cubin or ptx, got {output!r}", rule="compile outputs")
    has_std = any(o.startswith(("-std", "--std")) for o in options)
    opts = [f"-arch={arch}", *([] if has_std else ["-std=c++17"]), *options]
    route = compiler or os.environ.get("SIMTC_COMPILER", "auto")
    if route not in ("auto", "nvrtc", "nvcc", "cupy"):
        raise SimtcError(f"compiler {route!r}: use nvrtc, nvcc, cupy or auto (SIMTC_COMPILER or compiler=)",
                         rule="compiler routes")
    if route in ("auto", "cupy"):  # "cupy" only changes how load_kernel builds; cubins come from NVRTC
        try:
            import cuda.bindings.nvrtc  # noqa: F401

            route = "nvrtc"
        except ImportError:
            route = "nvcc"
    if name_expressions and route != "nvrtc":
        raise SimtcError("C++ name expressions need NVRTC (nvrtcGetLoweredName); nvcc cannot report lowered names",
                         rule="name expressions are resolved by NVRTC")
    key_parts = [route, arch, output, *opts, source, *name_expressions]
    if name != "kernel.cu":  # the name is in the output (.file of -lineinfo's .loc lines; debug sections)
        key_parts.append(name)
    key = hashlib.sha256("\x00".join(key_parts).encode()).hexdigest()
    path = cache_dir() / f"{key[:24]}.{output}"
    names_path = path.with_suffix(f".{output}.names.json")
    if path.exists() and (not name_expressions or names_path.exists()):
        names = json.loads(names_path.read_text()) if name_expressions else {}
        return path.read_bytes(), names
    if route == "nvrtc":
        data, names = _nvrtc_compile(source, name, opts, output, tuple(name_expressions))
    else:
        data, names = _nvcc_compile(source, name, arch, list(options), output), {}
    if name_expressions:
        tmp = names_path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(names))
        tmp.replace(names_path)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    return data, names


def _nvdisasm() -> str:
    try:
        import cuda.pathfinder as pf

        found = pf.find_nvidia_binary_utility("nvdisasm")
        if found:
            return str(found)
    except ImportError:
        pass
    found = shutil.which("nvdisasm")
    if found:
        return found
    raise HardwareUnavailable("nvdisasm not found: install nvidia-cuda-nvdisasm (the dev extra)",
                              rule="SASS checks need nvdisasm")


def disassemble(cubin: bytes) -> str:
    """SASS text of a cubin (``nvdisasm -c``)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        proc = subprocess.run([_nvdisasm(), "-c", f.name], capture_output=True, text=True)
    if proc.returncode:
        raise SimtcError(f"nvdisasm failed: {proc.stderr.strip()}", rule="SASS disassembly")
    return proc.stdout


_OPCODE = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)", re.MULTILINE)


def sass_histogram(sass: str, *, full: bool = False) -> collections.Counter:
    """Count opcodes in SASS text: the mnemonic before its first '.' (or the full dotted one)."""
    names = _OPCODE.findall(sass)
    return collections.Counter(n if full else n.split(".")[0] for n in names)


_KERNELS: dict[str, object] = {}


def load_kernel(source: str, name: str, *, arch: str):
    """A CuPy ``RawKernel`` for ``name`` in ``source`` (cupy imported here; needs a GPU).

    By default the cubin comes from :func:`compile_cuda` (the route CI checks) and CuPy loads it;
    with ``SIMTC_COMPILER=cupy`` CuPy compiles the source with its own NVRTC.
    """
    import cupy

    route = os.environ.get("SIMTC_COMPILER", "auto")
    key = hashlib.sha256("\x00".join([route, arch, name, source]).encode()).hexdigest()
    if key not in _KERNELS:
        if route == "cupy":
            module = cupy.RawModule(code=source, options=("-std=c++17", f"-arch={arch}"), backend="nvrtc")
        else:
            cubin = compile_cuda(source, arch=arch, name=f"{name}.cu")
            path = cache_dir() / f"{hashlib.sha256(cubin).hexdigest()[:24]}.load.cubin"
            if not path.exists():
                path.write_bytes(cubin)
            module = cupy.RawModule(path=str(path))
        _KERNELS[key] = module.get_function(name)
    return _KERNELS[key]
