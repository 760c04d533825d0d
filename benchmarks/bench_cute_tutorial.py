"""Thread-instructions per second and wall time of CUTLASS's CuTe tutorial GEMMs, unmodified, in simtc (fresh process).

Run: ``SIMTC_CUTLASS_DIR=<a CUTLASS checkout> .venv/bin/python benchmarks/bench_cute_tutorial.py`` (nvcc on PATH).
The tutorial's device code is compiled to PTX by nvcc against the checkout's headers and launched through
:mod:`simtc.cuda` as tests/cuda/test_cute_tutorials.py launches it; D is checked against numpy before the numbers
are printed. The issue-26 goal is >= 2 M thread-instructions/s on the project's 2-core machine.

Which tutorial: ``hopper/wgmma_sm90.cu`` uses fp16 accumulators (``SM90_64x64x16_F16F16F16_SS``), which simtc's
wgmma semantics refuse for now, so this times ``blackwell/01_mma_sm100.cu`` (tcgen05.mma cta_group::1, f32 TMEM
accumulators, a one-CTA cluster) on the 512x256x1024 problem (M x N x K; 4 CTAs of 128 threads, the tutorial's
128x256x64 MMA tile, 16 k-tiles).

Measured 2026-12-01 on the project's 2-core machine, two fresh runs (CUTLASS 7107b055): 13,377,332
thread-instructions in 3.2-3.5 s, 3.9-4.2 M thread-instructions/s; the whole GEMM (PTX parse and load + launch)
3.9-4.3 s, plus 12-13 s of nvcc -ptx.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> int:
    cutlass = os.environ.get("SIMTC_CUTLASS_DIR")
    nvcc = shutil.which("nvcc")
    if not cutlass or not nvcc:
        print("bench_cute_tutorial: needs SIMTC_CUTLASS_DIR (a CUTLASS checkout) and nvcc on PATH", file=sys.stderr)
        return 2
    import simtc.cuda as xp
    from simtc.isa.idesc import InstrDescriptor

    src = Path(cutlass) / "examples/cute/tutorial/blackwell/01_mma_sm100.cu"
    out = Path(tempfile.mkdtemp(prefix="simtc_cute_bench_")) / "t.ptx"
    t0 = time.perf_counter()
    subprocess.run([nvcc, "-ptx", "-arch=sm_100a", "-std=c++17", "--expt-relaxed-constexpr",
                    f"-I{Path(cutlass) / 'include'}", f"-I{Path(cutlass) / 'tools/util/include'}",
                    f"-I{src.parent}", str(src), "-o", str(out)], check=True)
    t_compile = time.perf_counter() - t0
    ptx = out.read_text()
    name = next(n for n in re.findall(r"^\.(?:visible )?\.?entry (\S+)\(", ptx, re.M) if "EmptyKernel" not in n)

    m, n, k = 512, 256, 1024
    rng = np.random.default_rng(0)
    a = rng.choice(np.array([-1.0, 1.0]), size=(m, k)).astype(np.float16)
    b = rng.choice(np.array([-1.0, 1.0]), size=(n, k)).astype(np.float16)
    c = rng.choice(np.array([-1.0, 1.0]), size=(m, n)).astype(np.float32)
    da, db, dc, dd = xp.asarray(a), xp.asarray(b), xp.asarray(c), xp.zeros((m, n), np.float32)

    def tensor(arr, s0, s1, stride):
        raw = np.array([s0, s1, stride, 0], np.int32).tobytes() + np.uint64(arr.data.ptr).tobytes()
        return np.frombuffer(raw, np.dtype((np.void, 24)))[0]

    idesc = InstrDescriptor(kind="f16", m=128, n=256, a_format="fp16", b_format="fp16", d_format="fp32").encode()
    mma = np.array([idesc, 1], np.uint32).view(np.dtype((np.void, 8)))[0]
    empty = np.zeros(1, np.uint8)
    t0 = time.perf_counter()
    f = xp.RawModule(path=str(out)).get_function(name)
    f.max_dynamic_shared_size_bytes = 65536
    t_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    f((m // 128, n // 256, 1), (128, 1, 1),
      (tensor(da, m, k, k), tensor(db, n, k, k), tensor(dc, m, n, n), tensor(dd, m, n, n), empty, mma, empty,
       np.float32(1.0), np.float32(-1.0)), shared_mem=65536)
    t_run = time.perf_counter() - t0
    ref = a.astype(np.float32) @ b.astype(np.float32).T - c
    if not np.array_equal(dd.get(), ref):
        print("bench_cute_tutorial: D differs from numpy", file=sys.stderr)
        return 1
    ti = f.last_result.total_thread_instructions
    print(f"01_mma_sm100 {m}x{n}x{k}: nvcc -ptx {t_compile:.1f} s, parse+load {t_load:.2f} s, launch {t_run:.2f} s; "
          f"{ti} thread-instructions, {ti / t_run / 1e6:.2f} M thread-instructions/s; "
          f"whole GEMM (load + launch) {t_load + t_run:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
