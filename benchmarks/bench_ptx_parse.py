"""The PTX front end: how fast does simtc.ptx.parser.parse read real PTX? (python benchmarks/bench_ptx_parse.py)

Target (issue 26): FlashMLA's SM100 head64 kernel (~11,000 PTX lines without its debug string table) and CUTLASS's
CuTe Blackwell tutorial 02 (~24,000 lines) each parse in well under a second on a 2-core machine.

Inputs, compiled here and cached under ``$SIMTC_CACHE/ptx_bench`` (each row is skipped, with the reason, when its
compiler or sources are missing):

* simtc's own calibration modules ``pairs`` and ``alu`` (NVRTC, ``-lineinfo``), always available with the dev extra;
* CuTe's ``examples/cute/tutorial/blackwell/02_mma_tma_sm100.cu`` from the CUTLASS sources the ``nvidia-cutlass``
  wheel installs (``cutlass_library/source``), with a local ``nvcc -ptx`` for sm_100a, with and without
  ``-lineinfo``;
* FlashMLA's ``csrc/sm100/decode/head64/instantiations/v32.cu`` when ``SIMTC_FLASHMLA_DIR`` names a checkout
  (its CUTLASS from the submodule or ``SIMTC_FLASHMLA_CUTLASS``), with FlashMLA's nvcc flags and ``-lineinfo``,
  built by the library's builder (:func:`simtc.cuda.executed_sm100.head64.head64_ptx`, the PTX simtc executes).

Measured on the project's 2-core development machine (best of 5, nvcc 13.0; the lines include ``-lineinfo``'s
``.debug_str`` section, which the parser skips line by line; the machine is shared, so expect ±30 %):

=============================================  ======  ======  ========  ========
input                                          lines   instrs  parse     per line
=============================================  ======  ======  ========  ========
calibration module pairs (sm_90a, -lineinfo)   18,546  15,740  158 ms    8.5 µs
calibration module alu (sm_90a, -lineinfo)     90,703  74,163  764 ms    8.4 µs
CuTe tutorial 02 (sm_100a), CUTLASS 4.2 wheel  14,687   6,379  109 ms    7.4 µs
same, -lineinfo                                69,489   6,379  196 ms    2.8 µs
FlashMLA SM100 head64 v32 (-lineinfo)          68,200   5,810  204 ms    3.0 µs
=============================================  ======  ======  ========  ========

CuTe tutorial 02 built against a newer CUTLASS checkout (23,912 lines, 11,496 instructions) parses in 0.18-0.20 s.
Without pausing the cyclic garbage collector during the parse (see :func:`simtc.ptx.parser.parse`) the alu module
took 1.28 s instead of 0.73-0.87 s in the same session.
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _timing import fmt

from simtc.ptx.parser import parse

TARGET_S = 1.0
"""Each input parses in well under this (issue 26)."""


def _cached_nvcc_ptx(args: list[str], tag: str) -> str:
    from simtc.hw.compile import cache_dir

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise RuntimeError("no nvcc on PATH")
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    key = hashlib.sha256("\0".join([version, *args]).encode()).hexdigest()[:24]
    out = cache_dir() / "ptx_bench" / f"{tag}-{key}.ptx"
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        proc = subprocess.run([nvcc, *args, "-ptx", "-o", str(tmp)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"nvcc failed: {proc.stderr.strip()[-400:]}")
        tmp.replace(out)
    return out.read_text()


def calibration(module: str) -> str:
    from simtc.hw.calibrate import sources
    from simtc.hw.compile import compile_cuda

    return compile_cuda(sources.module_source(module), arch=sources.ARCH, output="ptx",
                        options=("-lineinfo",)).decode()


def cute_tutorial_02(*, lineinfo: bool) -> str:
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or spec.origin is None:
        raise RuntimeError("the nvidia-cutlass wheel (cutlass_library) is not installed")
    src = Path(spec.origin).parent / "source"
    cu = src / "examples/cute/tutorial/blackwell/02_mma_tma_sm100.cu"
    if not cu.is_file():
        raise RuntimeError(f"no {cu}")
    args = ["-arch=sm_100a", "-std=c++17", "--expt-relaxed-constexpr", "-DNDEBUG", f"-I{src / 'include'}",
            f"-I{src / 'tools/util/include'}", f"-I{cu.parent}", *(["-lineinfo"] if lineinfo else []), str(cu)]
    return _cached_nvcc_ptx(args, "cute02" + ("-lineinfo" if lineinfo else ""))


def flashmla_head64() -> str:
    """The PTX of FlashMLA's head64 V32 kernel, from the library's one builder
    (:func:`simtc.cuda.executed_sm100.head64.head64_ptx`: FlashMLA's flags, ``-lineinfo``, sm_100a)."""
    from simtc.cuda.executed_sm100.head64 import head64_ptx

    return head64_ptx(None, "v32")


def _best(text: str, repeat: int = 5) -> tuple[float, object]:
    best, m = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        m = parse(text)
        best = min(best, time.perf_counter() - t0)
    return best, m


def main() -> None:
    inputs = [
        ("calibration module pairs (sm_90a, -lineinfo)", lambda: calibration("pairs")),
        ("calibration module alu (sm_90a, -lineinfo)", lambda: calibration("alu")),
        ("CuTe tutorial 02 (sm_100a)", lambda: cute_tutorial_02(lineinfo=False)),
        ("CuTe tutorial 02 (sm_100a, -lineinfo)", lambda: cute_tutorial_02(lineinfo=True)),
        ("FlashMLA SM100 head64 v32 (-lineinfo)", flashmla_head64),
    ]
    print(f"{'input':46s} {'lines':>7s} {'instrs':>7s} {'parse':>11s} {'per line':>10s}")
    for name, get in inputs:
        try:
            text = get()
        except Exception as e:  # a missing compiler or source skips the row, naming why
            print(f"{name:46s} skipped: {e}")
            continue
        s, m = _best(text)
        lines = text.count("\n")
        instrs = sum(len(f.body) for f in m.functions.values())
        print(f"{name:46s} {lines:7,d} {instrs:7,d} {fmt(s)} {s / lines * 1e6:7.1f} µs")
        if name.startswith(("CuTe", "FlashMLA")) and s >= TARGET_S:
            print(f"  over the {TARGET_S:.0f} s target")


if __name__ == "__main__":
    main()
