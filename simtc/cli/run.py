"""``simtc run``: execute a CUDA C++ or PTX kernel on ``.npy`` inputs and write every array argument back.

``simtc run FILE.cu|FILE.ptx --kernel NAME --grid X[,Y,Z] --block X[,Y,Z] [--smem N] --arg NAME=FILE.npy|SCALAR
... --out DIR [--json]``; ``simtc run flashmla-sm90 --flashmla DIR --inputs FILE.npz [--save-outputs OUT.npz]
[--json]`` compiles FlashMLA's own SM90 sparse decode from a checkout and executes it, and ``simtc run
flashmla-head64 --flashmla DIR [--inputs FILE.npz | --model M --blocks N]`` its SM100 head64 kernel
(:mod:`simtc.cli.run_flashmla`).
A ``.cu`` file is compiled to PTX as :mod:`simtc.cuda` compiles it (NVRTC, or
``--backend nvcc``; ``--arch``; ``-O/--option OPT`` for compiler options, written ``-O=-DN=4`` when the option
starts with ``-``); a ``.ptx`` file is executed as it is. The launch goes through :class:`simtc.cuda.RawKernel`,
so the command line and a script check the same things.

Arguments: one ``--arg NAME=VALUE`` per kernel parameter. ``NAME`` is the parameter's index (``0``), its PTX name
(``vector_add_param_0``) or, for a ``.cu`` file, its CUDA name (``a``), read from the kernel's declaration in the
source (when the declaration cannot be read, the index and the PTX name still work). ``VALUE`` is a ``.npy`` file
(an array, copied to the device; its pointer is the argument; for a by-value struct parameter ``.b8 p[N]`` a file
of N bytes passes by value) or a number, converted to the parameter's PTX type (``.u32``/``.s32``: an integer
that fits 32 bits either way, ``.f32``: a finite float that fits; hex ``0x..`` for integers). After the run every
array argument is written to ``DIR/NAME.npy`` (NAME as given). ``--smem N`` above 48 KiB raises the kernel's
``max_dynamic_shared_size_bytes`` first, as a host program must.

Time and tools: ``--timing`` records one CTA (the first, or ``--cta X,Y,Z``) as a :class:`simtc.isa.Program`
(:mod:`simtc.ptx.recording`: each warp's records in issue order, CUDA-core work as blocks with PTX-derived costs)
and runs it on simtc's engine: its cycles and the hazard checker's report are printed. ``--step [N]`` /
``--step-to N [--json]`` step through that run as ``simtc simulate`` does (each event names its PTX line and CUDA
line), ``--trace F.json`` writes it as a Chrome/Perfetto trace, ``--schedules N [--schedule-seed S]`` runs the
checker under N schedules; each implies ``--timing``. With ``--timing`` the exit status is 1 when the checker
reports a hazard or a deadlock.

Exit status: 0 when the kernel ran; 1 on a fault while it ran (one line naming the thread, the PTX line and the
CUDA source line); 2 on bad usage or input (one ``simtc: error: ... [rule: ...]`` line). ``--json`` prints
``{"kernel", "grid", "block", "shared_mem", "result", "outputs"}``: ``result`` is the executor's launch result
(instruction counts, ``printf`` lines, notes) and ``outputs`` maps each array argument to the file written; with
``--timing`` also ``timing`` (program, arch, cycles, hazards, deadlock, roles, counts, per role, units).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from attrs import frozen

from simtc.cli._common import UsageError, int_in, int_list, schedules_summary

__all__ = ["LaunchInput", "cuda_param_names", "launch_inputs", "load_kernel", "out_dir", "register", "run",
           "simtc_arguments"]

_DIMS = "a grid or block is 1 to 3 comma-separated sizes >= 1, X[,Y,Z]"
_ARG_RULE = "--arg NAME=FILE.npy|NUMBER gives one kernel parameter, NAME its index, PTX name or CUDA name"


def register(sub) -> None:
    p = sub.add_parser("run", help="execute a CUDA C++ or PTX kernel on .npy inputs (simtc's PTX executor)",
                       description="Compile a CUDA C++ kernel to PTX (or take a .ptx file), execute it warp by warp "
                                   "in simtc's executor on .npy inputs, and write every array argument back to "
                                   "DIR/NAME.npy; or, as flashmla-sm90 / flashmla-head64, compile FlashMLA's own SM90 "
                                   "sparse decode / SM100 head64 kernel from a checkout and execute it on a FlashMLA "
                                   "inputs file. Exit 0 when it ran, 1 "
                                   "on a kernel fault, 2 on bad usage.")
    p.add_argument("file", metavar="FILE.cu|FILE.ptx|flashmla-sm90|flashmla-head64",
                   help="CUDA C++ source (.cu), a PTX module (.ptx), or flashmla-sm90 / flashmla-head64: FlashMLA's "
                        "SM90 sparse decode / SM100 head64 kernel compiled from --flashmla DIR")
    p.add_argument("--kernel", metavar="NAME", default=None,
                   help="the kernel: its PTX .entry name, or its C++ name when that is unique (default: the "
                        "module's only kernel)")
    p.add_argument("--grid", default=None, metavar="X[,Y,Z]", type=int_list(1, 2**31 - 1, _DIMS, max_items=3),
                   help="CTAs in x, y, z (required for a FILE; default: none)")
    p.add_argument("--block", default=None, metavar="X[,Y,Z]", type=int_list(1, 1024, _DIMS, max_items=3),
                   help="threads per CTA in x, y, z (required for a FILE; default: none)")
    p.add_argument("--smem", type=int_in(0, None, "dynamic shared memory is a byte count >= 0"), default=0,
                   metavar="N", help="dynamic shared memory per CTA in bytes")
    p.add_argument("--arg", action="append", default=[], metavar="NAME=FILE.npy|NUMBER",
                   help="one kernel argument; repeat for each parameter (NAME: index, PTX name or CUDA name) "
                        "(default: none)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="directory the array arguments are written to after the run (made if missing; required for "
                        "a FILE; default: none)")
    p.add_argument("--arch", default=None, metavar="sm_XX",
                   help="target of a .cu file's compilation, e.g. sm_100a (default: sm_90a)")
    p.add_argument("-O", "--option", action="append", default=[], metavar="OPT",
                   help="a compiler option for a .cu file, e.g. -O=-DN=4 or --option=-use_fast_math (repeat; "
                        "default: none)")
    p.add_argument("--backend", choices=("nvrtc", "nvcc"), default="nvrtc", help="compiler for a .cu file")
    p.add_argument("--json", action="store_true", help="print the launch result and the outputs as JSON")
    from simtc.cli._common import output_path
    from simtc.cli._step import add_arguments as add_step_arguments

    eng = p.add_argument_group("time on simtc's engine (one CTA recorded as a Program: simtc.ptx.recording)")
    eng.add_argument("--timing", action="store_true",
                     help="record one CTA and run it on the engine: its cycles and the hazard checker's report "
                          "(implied by --step, --step-to, --trace and --schedules)")
    eng.add_argument("--cta", type=int_list(0, 2**31 - 2, "a block index is X[,Y,Z] with each >= 0", max_items=3),
                     default=None, metavar="X[,Y,Z]", help="the CTA to record (default: 0,0,0)")
    add_step_arguments(eng)
    eng.add_argument("--trace", type=output_path, default=None, metavar="F.json",
                     help="write the recorded CTA's engine run as a Chrome/Perfetto trace (default: none)")
    eng.add_argument("--schedules", type=int_in(1, 1024, "schedules is 1 ... 1024"), default=None, metavar="N",
                     help="run the recorded CTA's Program under N schedules, the hazard checker on each "
                          "(default: one run)")
    eng.add_argument("--schedule-seed", type=int_in(0, 2**32 - 1, "a seed is 0 ... 4294967295"), default=0,
                     metavar="S", help="schedule k > 0 uses seed S + k (default: 0)")
    from simtc.cli.run_flashmla import add_arguments as add_flashmla_arguments

    add_flashmla_arguments(p)
    p.set_defaults(handler=run)


# ---- CUDA parameter names from the source ----------------------------------------------------------------

_KERNEL_DECL = re.compile(r"__global__\b")


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return parts


def _balanced(text: str, start: int) -> int | None:
    """Index just past the parenthesis that closes the one at ``text[start]``."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def cuda_param_names(source: str, cxx_name: str, count: int) -> tuple[str | None, ...] | None:
    """The CUDA names of the parameters of kernel ``cxx_name`` (``count`` of them), read from its ``__global__``
    declaration in ``source``; ``None`` when no declaration with that many parameters is found or two disagree.

    >>> cuda_param_names("extern \\"C\\" __global__ void add(const float* __restrict__ a, float *b, int n) {}",
    ...                  "add", 3)
    ('a', 'b', 'n')
    >>> cuda_param_names("template <class T, int N> __global__ void __launch_bounds__(128) f(T* x, "
    ...                  "Pair<T, N> p, int) {}", "f", 3)
    ('x', 'p', None)
    """
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", source, flags=re.S)
    found: set[tuple[str | None, ...]] = set()
    for m in _KERNEL_DECL.finditer(text):
        head_end = min((i for i in (text.find("{", m.end()), text.find(";", m.end())) if i >= 0), default=len(text))
        head = text[m.end():head_end]
        for nm in re.finditer(rf"\b{re.escape(cxx_name)}\s*\(", head):
            close = _balanced(head, nm.end() - 1)
            if close is None:
                continue
            params = _split_top(head[nm.end():close - 1])
            if params == [] and count == 0:
                found.add(())
            if len(params) != count:
                continue
            names: list[str | None] = []
            for prm in params:
                prm = prm.split("=", 1)[0].strip()
                last = re.search(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*$", prm)
                words = re.findall(r"[A-Za-z_]\w*", re.sub(r"<.*>", " ", prm))
                named = last is not None and len(words) >= 2 and last.group(1) not in (
                    "int", "unsigned", "float", "double", "char", "short", "long", "bool", "__restrict__", "const")
                names.append(last.group(1) if named else None)
            found.add(tuple(names))
    return found.pop() if len(found) == 1 else None


# ---- the command ------------------------------------------------------------------------------------------

def _engine_wanted(args) -> bool:
    """Whether the launch records a CTA for the engine; the flag combinations that make no sense are refused."""
    from simtc.cli._step import check_arguments

    check_arguments(args)
    stepping = args.step is not None or args.step_to is not None
    if args.trace is not None and (stepping or args.schedules is not None):
        raise UsageError("--trace writes the trace of one run", rule="--trace does not combine with --schedules, "
                         "--step or --step-to")
    if args.schedules is not None and stepping:
        raise UsageError("--schedules runs each schedule to its end; --step and --step-to show one run",
                         rule="--schedules does not combine with --step or --step-to")
    wanted = args.timing or stepping or args.trace is not None or args.schedules is not None
    if args.cta is not None and not wanted:
        raise UsageError("--cta picks the CTA the engine times: give --timing (or --step, --trace, --schedules)",
                         rule="--cta goes with --timing")
    if args.cta is not None:
        cta = (*args.cta, 0, 0)[:3]
        grid = (*args.grid, 1, 1)[:3]
        if any(c >= g for c, g in zip(cta, grid, strict=True)):
            raise UsageError(f"--cta {','.join(map(str, cta))} is outside the grid {','.join(map(str, grid))}",
                             rule="--cta names a block of the grid")
    return wanted


def load_kernel(file: str, kernel: str | None, options: tuple[str, ...] = (), arch: str | None = None,
                backend: str = "nvrtc"):
    """``(RawKernel, CUDA parameter names or None)`` for ``simtc run``'s FILE, ``--kernel``, ``-O``, ``--arch`` and
    ``--backend`` (also what ``simtc crosscheck FILE.cu`` launches); a bad choice is a :class:`UsageError`."""
    from simtc.cuda import RawModule
    from simtc.cuda._kernel import cxx_base_name, find_kernel

    path = Path(file)
    if not path.is_file():
        raise UsageError(f"{file!r}: no such file", rule="FILE is an existing .cu or .ptx file")
    suffix = path.suffix.lower()
    source = None
    if suffix in (".cu", ".cuh", ".cpp", ".cc", ".cxx"):
        source = path.read_text(encoding="utf-8", errors="replace")
        options = tuple(options) + ((f"-arch={arch}",) if arch else ())
        mod = RawModule(code=source, options=options, backend=backend)
        mod._compile_name = str(path)  # the .loc lines then name the file itself
    elif suffix == ".ptx" or suffix in (".cubin", ".fatbin"):
        if arch or options:
            raise UsageError("--arch and -O/--option apply to a CUDA source; a PTX file names its own target "
                             "(.target)", rule="compiler options need a .cu file")
        mod = RawModule(path=str(path))
    else:
        raise UsageError(f"{file!r}: a .cu (CUDA C++) or .ptx file is needed, not {suffix or 'no suffix'!r}",
                         rule="FILE is an existing .cu or .ptx file")
    module = mod.module
    kernels = module.kernels()
    name = kernel
    if name is None:
        if len(kernels) != 1:
            listed = ", ".join(kernels) or "none"
            raise UsageError(f"the module has {len(kernels)} kernels ({listed}): name one with --kernel",
                             rule="--kernel names the kernel to run")
        name = kernels[0]
    elif name not in module.functions:
        matches = [k for k in kernels if cxx_base_name(k) == name]
        if len(matches) == 1:
            name = matches[0]
    find_kernel(module, name, shown=kernel)
    raw = mod.get_function(name)
    cuda_names = None
    if source is not None:
        cuda_names = cuda_param_names(source, cxx_base_name(name) or name, len(raw.function.params))
    return raw, cuda_names


def _resolve(kernel, cuda_names, text: str) -> int:
    params = kernel.function.params

    def listing() -> str:
        rows = []
        for i, p in enumerate(params):
            cname = cuda_names[i] if cuda_names and cuda_names[i] else None
            rows.append(f"{i}" + (f"/{cname}" if cname else "") + f"/{p.name} (.{p.type})")
        return ", ".join(rows) or "none"

    if re.fullmatch(r"\d+", text):
        i = int(text)
        if i < len(params):
            return i
        raise UsageError(f"--arg {text}: the kernel has {len(params)} parameters ({listing()})", rule=_ARG_RULE)
    for i, p in enumerate(params):
        if p.name == text:
            return i
    if cuda_names and text in cuda_names:
        return cuda_names.index(text)
    raise UsageError(f"--arg {text}: no such parameter; the kernel's parameters are {listing()}", rule=_ARG_RULE)


def _scalar(p, text: str, name: str):
    """The number ``text`` as the bytes of PTX parameter ``p``."""
    import numpy as np

    from simtc.cli._common import parse_int

    rule = "a scalar argument is a number that fits its parameter's PTX type"
    if p.shape:
        raise UsageError(f"--arg {name}: parameter {p.name} is a by-value struct of {p.size} bytes: give a .npy file "
                         "holding them", rule=rule)
    t = p.type
    if t.startswith("f"):
        try:
            value = float(text)
        except ValueError:
            raise UsageError(f"--arg {name}={text}: not a number for .{t} parameter {p.name}", rule=rule) from None
        dt = {"f16": np.float16, "f32": np.float32, "f64": np.float64}.get(t)
        if dt is None:
            raise UsageError(f"--arg {name}: .{t} parameter {p.name} takes a .npy file", rule=rule)
        with np.errstate(over="ignore"):
            conv = dt(value)
        if np.isinf(conv) and not np.isinf(value):
            raise UsageError(f"--arg {name}={text}: out of range for .{t}", rule=rule)
        return conv.tobytes()
    try:
        value = parse_int(text)
    except ValueError:
        raise UsageError(f"--arg {name}={text}: not an integer for .{t} parameter {p.name}"
                         + (" (a .npy file is an array: give its path ending in .npy)" if "." in text else ""),
                         rule=rule) from None
    bits = 8 * p.size
    if not -(1 << (bits - 1)) <= value < (1 << bits):
        raise UsageError(f"--arg {name}={text}: does not fit .{t} ({bits} bits: {-(1 << (bits - 1))} .. "
                         f"{(1 << bits) - 1})", rule=rule)
    return (value & ((1 << bits) - 1)).to_bytes(p.size, "little")


def _load_npy(path: str, name: str):
    import numpy as np

    rule = "an array argument is a readable .npy file (numpy.save)"
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"--arg {name}={path}: no such file", rule=rule)
    try:
        arr = np.load(p, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise UsageError(f"--arg {name}={path}: not a readable .npy file ({' '.join(str(e).split())})",
                         rule=rule) from None
    if not isinstance(arr, np.ndarray):
        raise UsageError(f"--arg {name}={path}: holds several arrays (.npz); give one .npy", rule=rule)
    return arr


def out_dir(text: str) -> Path:
    """``--out DIR``: the directory, made when its parent exists; else a :class:`UsageError`."""
    rule = "--out DIR is a directory that exists or can be made"
    d = Path(text)
    if d.exists() and not d.is_dir():
        raise UsageError(f"--out {text}: exists and is not a directory", rule=rule)
    if not d.exists():
        if not d.parent.is_dir():
            raise UsageError(f"--out {text}: its parent directory {str(d.parent)!r} does not exist", rule=rule)
        try:
            d.mkdir()
        except OSError as e:
            raise UsageError(f"--out {text}: cannot make it ({e.strerror or e})", rule=rule) from None
    import os

    if not os.access(d, os.W_OK | os.X_OK):
        raise UsageError(f"--out {text}: not writable", rule=rule)
    return d


@frozen
class LaunchInput:
    """One kernel parameter as ``--arg NAME=VALUE`` gave it: ``array`` (a ``.npy`` array for a pointer
    parameter: copied to the device, its pointer passed) or ``raw`` (the bytes of a scalar or a by-value struct)."""

    name: str
    param: object
    array: object = None
    raw: bytes | None = None


def launch_inputs(kernel, cuda_names, items) -> list[LaunchInput]:
    """Each parameter of ``kernel`` from the ``--arg NAME=FILE.npy|NUMBER`` ``items``, in parameter order: every
    parameter given once, each value converted to its PTX type (``.npy`` files loaded; a usage error names what is
    wrong). ``simtc run`` and ``simtc crosscheck FILE.cu`` both launch from this list."""
    import numpy as np

    function = kernel.function
    params = function.params
    given: dict[int, tuple[str, str]] = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"--arg {item!r}: write NAME=FILE.npy or NAME=NUMBER", rule=_ARG_RULE)
        name, value = item.split("=", 1)
        name = name.strip()
        i = _resolve(kernel, cuda_names, name)
        if i in given:
            raise UsageError(f"--arg {name}: parameter {i} ({params[i].name}) is already given as --arg "
                             f"{given[i][0]}", rule=_ARG_RULE)
        if value.lower().endswith(".npy") and not re.fullmatch(r"[A-Za-z0-9_.+-]+", name):
            raise UsageError(f"--arg {name}: an array argument's NAME names its output file DIR/NAME.npy; use letters,"
                             " digits, '_', '.', '-'", rule=_ARG_RULE)
        if not value.lower().endswith(".npy"):
            _not_a_file(name, value.strip())
        given[i] = (name, value)
    missing = [i for i in range(len(params)) if i not in given]
    if missing:
        what = ", ".join(f"{i}" + (f"/{cuda_names[i]}" if cuda_names and cuda_names[i] else "") + f"/{params[i].name}"
                         f" (.{params[i].type})" for i in missing)
        raise UsageError(f"kernel {function.name} needs an --arg for every parameter; missing: {what}",
                         rule=_ARG_RULE)
    inputs: list[LaunchInput] = []
    for i, p in enumerate(params):
        name, value = given[i]
        if value.lower().endswith(".npy"):
            host = _load_npy(value, name)
            if p.shape:  # a by-value struct
                if host.nbytes != p.size:
                    raise UsageError(f"--arg {name}={value}: {host.nbytes} bytes for the {p.size}-byte struct "
                                     f"parameter {p.name}", rule=_ARG_RULE)
                inputs.append(LaunchInput(name, p, raw=host.tobytes()))
                continue
            if p.size != 8 or p.type.startswith("f"):
                raise UsageError(f"--arg {name}={value}: parameter {p.name} is a .{p.type} scalar, not a pointer; "
                                 "give a number", rule=_ARG_RULE)
            inputs.append(LaunchInput(name, p, array=np.ascontiguousarray(host)))
        else:
            inputs.append(LaunchInput(name, p, raw=_scalar(p, value.strip(), name)))
    return inputs


_VALUE_RULE = "--arg NAME=VALUE: VALUE is a .npy array file (numpy.save; its name ends in .npy) or a scalar number"


def _not_a_file(name: str, value: str) -> None:
    """A VALUE that is not a number but names a file (or looks like a path) is refused by the rule: arrays come as
    ``.npy`` files, everything else is a scalar number."""
    from simtc.cli._common import parse_int

    try:
        parse_int(value)
        return
    except ValueError:
        pass
    try:
        float(value)
        return
    except ValueError:
        pass
    p = Path(value)
    if p.is_file() or p.is_dir() or "/" in value or re.search(r"\.[A-Za-z][A-Za-z0-9]*$", value):
        what = "a directory" if p.is_dir() else "a file that is not .npy" if p.is_file() else "not a number"
        raise UsageError(f"--arg {name}={value}: {what}; an array argument is a .npy file (convert it with "
                         "numpy.save), any other argument a number", rule=_VALUE_RULE)


def simtc_arguments(inputs: list[LaunchInput]) -> tuple[list, dict]:
    """``(launch args, {NAME: simtc.cuda.ndarray})`` for :class:`simtc.cuda.RawKernel`: each array in a fresh
    allocation named after its argument (so fault reports name it), scalars and structs as their bytes."""
    import simtc.cuda as xp
    from simtc.cuda._memory import Memory, MemoryPointer

    launch_args: list = []
    arrays: dict[str, object] = {}
    for item in inputs:
        if item.array is None:
            launch_args.append(item.raw)
            continue
        host = item.array
        dev = xp.ndarray(host.shape, host.dtype, MemoryPointer(Memory(host.nbytes, name=item.name)))
        dev.set(host)
        arrays[item.name] = dev
        launch_args.append(dev)
    return launch_args, arrays


_FILE_RULE = "simtc run FILE.cu|FILE.ptx takes --grid, --block and --out"


def run(args) -> int:
    from simtc.cli import run_flashmla

    if args.file in run_flashmla.KERNELS:
        return run_flashmla.run(args)
    run_flashmla.refuse_flashmla_options(args)
    missing = [f"--{k}" for k in ("grid", "block", "out") if getattr(args, k) is None]
    if missing:
        raise UsageError(f"simtc run {args.file}: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
                         "required", rule=_FILE_RULE)
    timed = _engine_wanted(args)
    kernel, cuda_names = load_kernel(args.file, args.kernel, tuple(args.option), args.arch, args.backend)
    if timed:
        kernel.timing = tuple((*args.cta, 0, 0)[:3]) if args.cta is not None else True

    import numpy as np

    inputs = launch_inputs(kernel, cuda_names, args.arg)
    directory = out_dir(args.out)
    launch_args, arrays = simtc_arguments(inputs)
    smem = args.smem
    if smem > kernel.max_dynamic_shared_size_bytes:
        kernel.max_dynamic_shared_size_bytes = smem  # the opt-in a host program makes (cudaFuncSetAttribute)
    grid = tuple(args.grid)
    block = tuple(args.block)
    kernel(grid, block, tuple(launch_args), shared_mem=smem)
    result = kernel.last_result
    outputs = {}
    for name, dev in arrays.items():
        path = directory / f"{name}.npy"
        np.save(path, dev.get())
        outputs[name] = str(path)
    timing = result.timing
    if timing is not None and (args.step is not None or args.step_to is not None):
        from simtc.cli._step import run_stepper

        _write_outputs_note(outputs, arrays)
        return run_stepper(timing.stepper(), args)
    if timing is not None and args.schedules is not None:
        return _schedules(args, timing, outputs, arrays)
    if timing is not None and args.trace is not None:
        from simtc.render.perfetto import write_chrome_trace

        write_chrome_trace(timing.engine, args.trace, announce=True)
    _report(args, kernel, grid, block, smem, result, outputs, arrays)
    return 0 if timing is None or timing.clean else 1


def _write_outputs_note(outputs, arrays) -> None:
    for name, path in outputs.items():
        a = arrays[name]
        print(f"wrote {path} ({a.dtype}, shape {a.shape})", file=sys.stderr)


def _schedules(args, timing, outputs, arrays) -> int:
    """``--schedules N``: the recorded Program under N schedules; exit 1 when one shows a hazard or a deadlock."""
    import textwrap

    from simtc.cli._common import emit_json

    report = timing.schedules(args.schedules, args.schedule_seed)
    name = timing.program.name
    _write_outputs_note(outputs, arrays)
    if args.json:
        emit_json(dict(report.to_json(), program=name, schedule_seed=args.schedule_seed, outputs=outputs))
    else:
        print("\n".join(textwrap.wrap(schedules_summary(name, report), 100, subsequent_indent="    ")))
    return 0 if report.first_failing is None else 1


def _result_json(result) -> dict:
    """The launch result as plain JSON values (attrs records and numpy values made plain)."""
    import attrs
    import numpy as np

    def plain(v):
        if attrs.has(type(v)):
            return {k: plain(x) for k, x in attrs.asdict(v, recurse=False).items()}
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, np.generic):
            return v.item()
        if isinstance(v, np.ndarray):
            return v.tolist()
        return v if isinstance(v, (str, int, float, bool)) or v is None else str(v)

    out = plain(attrs.evolve(result, program=None, timing=None))
    del out["program"], out["timing"]
    return out


def _timing_json(timing) -> dict:
    """The recorded CTA's engine run: cycles, hazards, deadlock, roles (their warps), counts, units."""
    s = timing.summary()
    return {k: s[k] for k in ("program", "arch", "cycles", "events", "hazards", "deadlock", "roles", "counts",
                              "per_role", "units")}


def _report(args, kernel, grid, block, smem, result, outputs, arrays) -> None:
    data = {"kernel": kernel.function.name, "grid": list(result.grid), "block": list(result.block),
            "shared_mem": smem, "result": _result_json(result), "outputs": outputs}
    if result.timing is not None:
        data["timing"] = _timing_json(result.timing)
    if args.json:
        from simtc.cli._common import emit_json

        emit_json(data)
        return
    sys.stdout.write(result.output)  # what the kernel printed, as the GPU's stdout shows it
    print(f"ran {kernel.function.name} on grid {result.grid}, block {result.block}: "
          f"{result.total_thread_instructions} thread-instructions ({result.total_warp_instructions} "
          f"warp-instructions), {smem} bytes of dynamic shared memory")
    for note in result.notes:
        print(f"note: {note}")
    t = result.timing
    if t is not None:
        cta = dict(t.program.meta).get("cta", "0,0,0")
        roles = ", ".join(f"{r.name} ({len(r.records)} records)" for r in t.program.roles)
        print(f"engine ({t.recorded.arch}): block ({cta}) takes {t.cycles} cycles; roles {roles}")
        for h in t.hazards:
            print(f"hazard: {h}")
        if t.engine.deadlock:
            print("deadlock: " + "; ".join(f"{w['role']}[w{w['warp']}]#{w['index']} waits on {w['waits_on']}"
                                           for w in t.engine.deadlock["waiting"]))
        if t.clean:
            print("hazard checker: clean")
    for name, path in outputs.items():
        a = arrays[name]
        print(f"wrote {path} ({a.dtype}, shape {a.shape})", file=sys.stderr)
