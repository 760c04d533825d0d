"""``simtc crosscheck FILE.cu|FILE.ptx --kernel NAME ...``: a user's kernel on the GPU (CuPy) and in simtc, every
output diffed.

The arguments are ``simtc run``'s (:mod:`simtc.cli.run`: ``--kernel NAME --grid X[,Y,Z] --block X[,Y,Z] [--smem N]
--arg NAME=FILE.npy|NUMBER ... [-O OPT] [--backend nvrtc|nvcc]``; one parser, one conversion:
:func:`simtc.cli.run.load_kernel` and :func:`simtc.cli.run.launch_inputs`). The same inputs are launched twice:
with CuPy (``cupy.RawModule`` of the same source and options, or of the ``.ptx`` file; CuPy compiles for the
device's own target) and with :mod:`simtc.cuda`. Then every array argument is compared bit for bit
(:func:`compare`): per output the count of differing elements, the first few (index, both values in hex and as
numbers, the ULP distance for floats) and the largest absolute difference; the ``printf`` lines of both runs too
(the GPU's order of lines from different warps is not defined: the same lines in another order count as a match).

Approximations: simtc models the MUFU opcodes (``ex2.approx``, ``rcp.approx``, ``sin.approx`` ...: those
:func:`simtc.ptx.alu.compile` marks ``approx=True``) by correctly rounded values, so their bits may differ from the
hardware's. The report lists the approximate instructions the launch executed (from its per-line counts) and the
outputs the kernel wrote (their bits changed in simtc's run), the outputs such a result may have reached (no data
flow is traced). ``--tolerance ulp=N`` accepts float differences of at most N units in the last place.

Exit status: 0 when every output is bit-identical (or, with ``--tolerance``, within it) and the printf lines
match; 1 otherwise (also on a fault in either run); 2 on bad usage or where CuPy or a GPU is missing (one line
saying why: nothing was compared).
"""

from __future__ import annotations

import sys
from pathlib import Path

from attrs import field, frozen

from simtc.cli._common import UsageError
from simtc.errors import HardwareUnavailable

__all__ = ["KernelRun", "OutputDiff", "Report", "add_arguments", "approx_instructions", "compare", "in_use", "run"]

SHOWN = 5
"""How many differing elements each output lists."""

_MODE = "simtc crosscheck FILE.cu|FILE.ptx --kernel NAME --grid X[,Y,Z] --block X[,Y,Z] --arg NAME=VALUE ..."


def add_arguments(p) -> None:
    """The kernel mode's arguments on the ``crosscheck`` parser (``--json`` is the command's own)."""
    from simtc.cli._common import int_in, int_list
    from simtc.cli.run import _DIMS

    p.add_argument("file", nargs="?", default=None, metavar="FILE.cu|FILE.ptx",
                   help="a kernel of your own to run on the GPU (CuPy) and in simtc, every output diffed "
                        "(default: the built-in checks)")
    g = p.add_argument_group("your own kernel (FILE given: simtc run's arguments; replaces the checks above)")
    g.add_argument("--kernel", metavar="NAME", default=None,
                   help="the kernel: its PTX .entry name, or its C++ name when that is unique (default: the "
                        "module's only kernel)")
    g.add_argument("--grid", metavar="X[,Y,Z]", type=int_list(1, 2**31 - 1, _DIMS, max_items=3), default=None,
                   help="CTAs in x, y, z (default: none; needed with FILE)")
    g.add_argument("--block", metavar="X[,Y,Z]", type=int_list(1, 1024, _DIMS, max_items=3), default=None,
                   help="threads per CTA in x, y, z (default: none; needed with FILE)")
    g.add_argument("--smem", type=int_in(0, None, "dynamic shared memory is a byte count >= 0"), default=0,
                   metavar="N", help="dynamic shared memory per CTA in bytes (default: 0)")
    g.add_argument("--arg", action="append", default=[], metavar="NAME=FILE.npy|NUMBER",
                   help="one kernel argument, as for simtc run; repeat for each parameter (default: none)")
    g.add_argument("--out", default=None, metavar="DIR",
                   help="write both runs' array arguments to DIR/gpu/NAME.npy and DIR/simtc/NAME.npy "
                        "(default: not written)")
    g.add_argument("-O", "--option", action="append", default=[], metavar="OPT",
                   help="a compiler option for a .cu file, given to both compilations, e.g. -O=-use_fast_math "
                        "(repeat; default: none)")
    g.add_argument("--backend", choices=("nvrtc", "nvcc"), default="nvrtc",
                   help="compiler for a .cu file, on both sides (default: nvrtc)")
    g.add_argument("--tolerance", metavar="ulp=N", default=None, type=_tolerance,
                   help="accept float differences of at most N units in the last place (default: bits must match)")


def _tolerance(text: str) -> int:
    import argparse

    from simtc.cli._common import parse_int

    rule = "--tolerance ulp=N accepts float differences of at most N ULP (N >= 0)"
    key, _, value = text.partition("=")
    try:
        n = parse_int(value.strip())
    except ValueError:
        n = -1
    if key.strip().lower() != "ulp" or n < 0:
        raise argparse.ArgumentTypeError(str(UsageError(f"{text!r}: write ulp=N with N >= 0", rule=rule)))
    return n


def in_use(args) -> bool:
    """Whether the command line asks for the kernel mode (FILE, or one of its own options)."""
    return args.file is not None or any(
        (args.kernel, args.grid, args.block, args.smem, args.arg, args.out, args.option, args.tolerance is not None))


# ---- the two runs and their comparison --------------------------------------------------------------------

@frozen
class KernelRun:
    """One side's launch: every array argument after it (name -> numpy array) and the printf lines."""

    side: str
    outputs: dict = field(eq=False)
    printf: tuple[str, ...] = ()


@frozen
class Difference:
    index: tuple[int, ...]
    gpu_hex: str
    simtc_hex: str
    gpu: float | int | bool
    simtc: float | int | bool
    ulp: int | None


@frozen
class OutputDiff:
    """One array argument compared: ``differing`` elements (raw bits), the first :data:`SHOWN`, the largest
    absolute and ULP differences; ``status`` is ``identical``, ``within`` (the tolerance) or ``differs``."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    status: str
    differing: int
    first: tuple[Difference, ...] = ()
    max_abs: float | None = None
    max_ulp: int | None = None
    written: bool = True
    why: str = ""


@frozen
class Report:
    outputs: tuple[OutputDiff, ...]
    printf: str
    """``identical``, ``reordered`` (the same lines in another order) or ``differs``."""
    printf_lines: tuple[int, int]
    approx: tuple[dict, ...] = ()
    tolerance_ulp: int | None = None

    @property
    def ok(self) -> bool:
        return all(o.status != "differs" for o in self.outputs) and self.printf != "differs"

    def to_json(self) -> dict:
        import attrs

        return {"ok": self.ok, "tolerance_ulp": self.tolerance_ulp, "printf": self.printf,
                "printf_lines": {"gpu": self.printf_lines[0], "simtc": self.printf_lines[1]},
                "approx": list(self.approx),
                "outputs": [attrs.asdict(o, value_serializer=lambda _i, _a, v: list(v) if isinstance(v, tuple)
                                         else v) for o in self.outputs]}


def _ordered(bits, width: int):
    """Float bit patterns mapped to integers in the floats' order (adjacent floats one apart): the ULP scale."""
    import numpy as np

    sign = np.int64(1) << np.int64(width - 1)
    b = bits.astype(np.int64) if width < 64 else bits.view(np.int64)
    if width < 64:
        neg = (b & sign) != 0
        mag = b & (sign - 1)
        return np.where(neg, -mag, mag)
    return np.where(b < 0, -(b & np.int64(0x7FFFFFFFFFFFFFFF)), b)


def _plain(v):
    import math

    x = v.item()
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return x


def _diff_one(name: str, gpu, sim, before, tolerance: int | None) -> OutputDiff:
    import numpy as np

    if gpu.dtype != sim.dtype or gpu.shape != sim.shape:
        return OutputDiff(name, str(sim.dtype), tuple(sim.shape), "differs", int(sim.size),
                          why=f"the GPU's array is {gpu.dtype} {gpu.shape}, simtc's {sim.dtype} {sim.shape}")
    written = before is None or before.tobytes() != sim.tobytes()
    width = 8 * sim.dtype.itemsize
    if sim.dtype.kind == "b" or width not in (8, 16, 32, 64) or sim.dtype.kind in "cVSUO":
        g8, s8 = gpu.reshape(-1).view(np.uint8), sim.reshape(-1).view(np.uint8)
        n = int(np.count_nonzero(g8 != s8))
        return OutputDiff(name, str(sim.dtype), tuple(sim.shape), "identical" if n == 0 else "differs", n,
                          written=written, why="" if n == 0 else f"{n} bytes differ (compared as bytes)")
    ut = np.dtype(f"u{sim.dtype.itemsize}")
    gb, sb = gpu.reshape(-1).view(ut), sim.reshape(-1).view(ut)
    bad = np.flatnonzero(gb != sb)
    if bad.size == 0:
        return OutputDiff(name, str(sim.dtype), tuple(sim.shape), "identical", 0, written=written)
    is_float = sim.dtype.kind == "f"
    gf, sf = gpu.reshape(-1)[bad], sim.reshape(-1)[bad]
    ulps = None
    if is_float:
        ulps = np.abs(_ordered(gb[bad], width) - _ordered(sb[bad], width))
        both_nan = np.isnan(gf) & np.isnan(sf)
        ulps = np.where(both_nan, 0, ulps)
        one_nan = np.isnan(gf) ^ np.isnan(sf)
        max_ulp = None if one_nan.any() else int(ulps.max())
    else:
        max_ulp = None
    with np.errstate(all="ignore"):
        delta = np.abs(gf.astype(np.float64) - sf.astype(np.float64))
    finite = delta[np.isfinite(delta)]
    max_abs = float(finite.max()) if finite.size else None
    first = []
    for k, flat in enumerate(bad[:SHOWN]):
        idx = tuple(int(i) for i in np.unravel_index(int(flat), sim.shape)) if sim.shape else ()
        first.append(Difference(idx, f"{int(gb[flat]):#0{2 + width // 4}x}", f"{int(sb[flat]):#0{2 + width // 4}x}",
                                _plain(gf[k]), _plain(sf[k]), None if ulps is None else int(ulps[k])))
    status = "within" if tolerance is not None and max_ulp is not None and max_ulp <= tolerance else "differs"
    return OutputDiff(name, str(sim.dtype), tuple(sim.shape), status, int(bad.size), tuple(first), max_abs,
                      max_ulp, written)


def compare(gpu: KernelRun, sim: KernelRun, *, tolerance_ulp: int | None = None, inputs: dict | None = None,
            approx: tuple[dict, ...] = ()) -> Report:
    """The diff of two runs of one launch: each array argument (``inputs``: the arrays before the launch, to tell
    the outputs the kernel wrote) and the printf lines.

    >>> import numpy as np
    >>> g = KernelRun("gpu", {"c": np.array([1.0, 2.0], np.float32)}, ("hi\\n",))
    >>> s = KernelRun("simtc", {"c": np.array([1.0, np.nextafter(np.float32(2), np.float32(3))], np.float32)},
    ...               ("hi\\n",))
    >>> r = compare(g, s)
    >>> r.ok, r.outputs[0].differing, r.outputs[0].first[0].ulp, r.outputs[0].first[0].simtc_hex
    (False, 1, 1, '0x40000001')
    >>> compare(g, s, tolerance_ulp=1).ok
    True
    """
    diffs = []
    for name, s in sim.outputs.items():
        g = gpu.outputs.get(name)
        if g is None:
            diffs.append(OutputDiff(name, str(s.dtype), tuple(s.shape), "differs", int(s.size),
                                    why="no such output in the GPU's run"))
            continue
        diffs.append(_diff_one(name, g, s, None if inputs is None else inputs.get(name), tolerance_ulp))
    gl, sl = "".join(gpu.printf).splitlines(), "".join(sim.printf).splitlines()
    printf = "identical" if gl == sl else "reordered" if sorted(gl) == sorted(sl) else "differs"
    return Report(tuple(diffs), printf, (len(gl), len(sl)), approx, tolerance_ulp)


def approx_instructions(kernel, result) -> tuple[dict, ...]:
    """The approximate (MUFU) instructions the launch executed: those :func:`simtc.ptx.alu.compile` marks
    ``approx=True`` on a PTX line the launch's per-line counts show run, with their warp-instruction counts."""
    from simtc.errors import SimtcError
    from simtc.ptx import alu

    found: dict[tuple[str, int], int] = {}
    for fn in kernel.module.functions.values():
        for ins in fn.body:
            count = result.by_line.get(ins.line, 0)
            if not count:
                continue
            try:
                op = alu.compile(ins)
            except SimtcError:
                continue
            if op.approx:
                found[(ins.name, ins.line)] = count
    return tuple({"instruction": name, "ptx_line": line, "warp_instructions": n}
                 for (name, line), n in sorted(found.items(), key=lambda kv: kv[0][1]))


def _numpy_scalar(item):
    """A scalar parameter's bytes as the numpy scalar CuPy passes (its PTX type); a struct as raw bytes."""
    import numpy as np

    p = item.param
    if p.shape:
        return np.frombuffer(item.raw, np.dtype([("bytes", np.uint8, (p.size,))]))[0]
    t = p.type
    kind = "f" if t.startswith("f") else "i" if t.startswith("s") else "u"
    return np.frombuffer(item.raw, np.dtype(f"{kind}{p.size}"))[0]


def _gpu_run(kernel, inputs, grid, block, smem: int, options: tuple[str, ...], backend: str) -> KernelRun:
    """The launch with CuPy on device 0; the kernel's printf captured from the process's stdout (file 1)."""
    import os
    import tempfile

    import cupy

    raw = kernel._raw_module
    if raw.code is not None:
        mod = cupy.RawModule(code=raw.code, options=tuple(options), backend=backend)
    else:
        mod = cupy.RawModule(path=str(raw.file_path))
    fn = mod.get_function(kernel.function.name)
    if smem > 48 * 1024:
        fn.max_dynamic_shared_size_bytes = smem
    arrays = {}
    launch = []
    for item in inputs:
        if item.array is None:
            launch.append(_numpy_scalar(item))
        else:
            arrays[item.name] = cupy.asarray(item.array)
            launch.append(arrays[item.name])
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 1)
        try:
            fn(tuple(grid), tuple(block), tuple(launch), shared_mem=smem)
            cupy.cuda.Device().synchronize()  # the device printf buffer is written out at a synchronisation
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        captured.seek(0)
        text = captured.read().decode("utf-8", errors="replace")
    return KernelRun("gpu", {k: cupy.asnumpy(v) for k, v in arrays.items()},
                     tuple(line + "\n" for line in text.splitlines()))


def _device():
    """The GPU, or :class:`HardwareUnavailable` saying why there is none (the reason ``simtc.hw.device`` gives)."""
    from simtc.hw.device import probe

    info = probe()
    if not info.available:
        raise HardwareUnavailable(f"simtc crosscheck FILE needs CuPy and a CUDA GPU to compare with: {info.reason}; "
                                  "nothing was compared (simtc run FILE ... runs simtc alone)",
                                  rule="crosscheck runs the kernel on a GPU")
    return info


def _check(args) -> None:
    if args.file is None:
        if args.kernel and Path(args.kernel).suffix.lower() in (".cu", ".ptx"):
            raise UsageError(f"--kernel {args.kernel}: --kernel names the kernel; give the file first: "
                             f"simtc crosscheck {args.kernel} --kernel NAME ...", rule=_MODE)
        raise UsageError("--kernel, --grid, --block, --smem, --arg, --out, -O and --tolerance crosscheck a kernel of "
                         "your own: give its FILE.cu or FILE.ptx", rule=_MODE)
    if args.grid is None or args.block is None:
        raise UsageError("a kernel's crosscheck needs --grid and --block", rule=_MODE)
    other = [flag for flag, on in (("--arch", args.arch != "auto"), ("--seed", args.seed != 0),
                                   ("--no-timing", args.no_timing), ("--save", args.save),
                                   ("--save-timing", args.save_timing), ("--replay", args.replay),
                                   ("--flashmla", args.flashmla), ("--replay-flashmla", args.replay_flashmla),
                                   ("--timing", args.timing)) if on]
    if other:
        raise UsageError(f"{', '.join(other)}: options of the built-in checks, not of FILE's crosscheck (name a "
                         "compile target with -O=-arch=sm_XX)", rule=_MODE)


def run(args) -> int:
    _check(args)
    import numpy as np

    from simtc.cli.run import launch_inputs, load_kernel, out_dir, simtc_arguments

    kernel, cuda_names = load_kernel(args.file, args.kernel, tuple(args.option), None, args.backend)
    inputs = launch_inputs(kernel, cuda_names, args.arg)
    directory = out_dir(args.out) if args.out is not None else None
    info = _device()
    grid, block, smem = tuple(args.grid), tuple(args.block), args.smem
    gpu = _gpu_run(kernel, inputs, grid, block, smem, tuple(args.option), args.backend)
    launch_args, arrays = simtc_arguments(inputs)
    if smem > kernel.max_dynamic_shared_size_bytes:
        kernel.max_dynamic_shared_size_bytes = smem
    kernel(grid, block, tuple(launch_args), shared_mem=smem)
    result = kernel.last_result
    sim = KernelRun("simtc", {k: v.get() for k, v in arrays.items()}, tuple(result.printf))
    before = {i.name: i.array for i in inputs if i.array is not None}
    report = compare(gpu, sim, tolerance_ulp=args.tolerance, inputs=before,
                     approx=approx_instructions(kernel, result))
    if directory is not None:
        for side in (gpu, sim):
            d = directory / side.side
            d.mkdir(exist_ok=True)
            for name, a in side.outputs.items():
                np.save(d / f"{name}.npy", a)
    if args.json:
        from simtc.cli._common import emit_json

        emit_json(dict(report.to_json(), kernel=kernel.function.name, file=str(args.file), grid=list(result.grid),
                       block=list(result.block), shared_mem=smem, device=f"{info.name} ({info.arch})",
                       gpu_printf="".join(gpu.printf), simtc_printf="".join(sim.printf)))
    else:
        _print(report, kernel.function.name, info)
    return 0 if report.ok else 1


def _print(report: Report, name: str, info) -> None:
    from rich.console import Console
    from rich.table import Table

    out = Console(highlight=False, soft_wrap=True)
    t = Table(title=f"{name}: {info.name} (CuPy) vs simtc", title_justify="left")
    for col in ("output", "dtype", "shape", "verdict", "differing", "max |diff|", "max ulp"):
        t.add_column(col, justify="right" if col in ("differing", "max |diff|", "max ulp") else "left")
    for o in report.outputs:
        verdict = {"identical": "bit-identical", "within": f"within {report.tolerance_ulp} ulp",
                   "differs": "DIFFERS"}[o.status] + ("" if o.written else " (not written)")
        t.add_row(o.name, o.dtype, "x".join(map(str, o.shape)) or "scalar", verdict, str(o.differing),
                  "" if o.max_abs is None else f"{o.max_abs:.6g}", "" if o.max_ulp is None else str(o.max_ulp))
    out.print(t)
    for o in report.outputs:
        if o.why:
            out.print(f"  {o.name}: {o.why}")
        for d in o.first:
            ulp = "" if d.ulp is None else f", {d.ulp} ulp"
            out.print(f"  {o.name}[{','.join(map(str, d.index))}]: GPU {d.gpu_hex} ({d.gpu}) vs simtc "
                      f"{d.simtc_hex} ({d.simtc}){ulp}")
    g, s = report.printf_lines
    out.print(f"printf: {report.printf} (GPU {g} lines, simtc {s})")
    if report.approx:
        listed = ", ".join(f"{a['instruction']} (PTX line {a['ptx_line']}, {a['warp_instructions']} warp-instr.)"
                           for a in report.approx)
        written = ", ".join(o.name for o in report.outputs if o.written) or "none"
        out.print(f"approximate instructions executed (simtc: correctly rounded; the GPU's MUFU bits may differ): "
                  f"{listed}; their results may have reached the outputs the kernel wrote: {written}")
    out.print("all outputs bit-identical" if report.ok and report.tolerance_ulp is None else
              "all outputs within the tolerance" if report.ok else "outputs differ")
