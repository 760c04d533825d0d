"""On a GPU with CuPy: the same script (examples/cuda_kernels.py) gives the same bits with ``xp = cupy`` and with
``xp = simtc.cuda``, and simtc.cuda applies CuPy's and CUDA's launch rules as the GPU does (skipped, with the reason,
elsewhere). ``test_cupy_launch_rules`` prints the lines recorded in tests/data/h200_cupy_raw_kernel.txt."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from simtc.hw.device import probe

INFO = probe()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not INFO.available, reason=f"needs a CUDA GPU and CuPy: "
                                                                             f"{INFO.reason}")]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

SRC = r'''
extern "C" __global__ void stat(float* out) { __shared__ float t[1024]; extern __shared__ float d[];
  t[threadIdx.x] = 1; d[0] = 2; __syncthreads(); out[threadIdx.x] = t[threadIdx.x] + d[0]; }
extern "C" __global__ void dyn(float* out) { extern __shared__ float d[]; d[threadIdx.x] = 3; __syncthreads(); out[threadIdx.x] = d[threadIdx.x]; }
extern "C" __global__ void sc(float* out, float f, int i) { out[0] = f; out[1] = (float)i; }
'''  # noqa: E501 - the kernels as recorded


def _example():
    spec = importlib.util.spec_from_file_location("_simtc_example_cuda_kernels_gpu", EXAMPLES / "cuda_kernels.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_same_script_same_bits():
    import cupy

    import simtc.cuda

    ex = _example()
    on_gpu = ex.vector_add(cupy, 1000)
    here = ex.vector_add(simtc.cuda, 1000)
    for g, s in zip(on_gpu, here, strict=True):
        assert g.tobytes() == s.tobytes()
    on_gpu = ex.block_sum(cupy, 4, 128)
    here = ex.block_sum(simtc.cuda, 4, 128)
    for g, s in zip(on_gpu, here, strict=True):
        assert g.tobytes() == s.tobytes()


def test_cupy_launch_rules():
    import cupy as cp

    import simtc.cuda as sx
    from simtc.ptx.errors import LaunchError

    lines: list[str] = []

    def say(*parts) -> None:  # the lines of tests/data/h200_cupy_raw_kernel.txt
        lines.append(" ".join(str(x) for x in parts))
        print(lines[-1])

    m = cp.RawModule(code=SRC)
    mine = sx.RawModule(code=SRC)
    for name in ("stat", "dyn"):
        k = m.get_function(name)
        s = mine.get_function(name)
        say(name, k.attributes)
        assert s.shared_size_bytes == k.shared_size_bytes
        assert s.max_dynamic_shared_size_bytes == k.max_dynamic_shared_size_bytes
        out = cp.zeros(32, cp.float32)
        sout = sx.zeros(32, sx.float32)
        for smem in (49152 - k.shared_size_bytes, 49152 - k.shared_size_bytes + 4, 65536):
            try:
                k((1,), (32,), (out,), shared_mem=smem)
                cp.cuda.Device().synchronize()
                say(" launch", smem, "ok")
                s((1,), (32,), (sout,), shared_mem=smem)
            except cp.cuda.driver.CUDADriverError as e:
                say(" launch", smem, type(e).__name__, e)
                with pytest.raises(LaunchError, match="max_dynamic_shared_size_bytes"):
                    s((1,), (32,), (sout,), shared_mem=smem)
        for v in (232448 - k.shared_size_bytes, 232448 - k.shared_size_bytes + 4):
            try:
                k.max_dynamic_shared_size_bytes = v
                say(" set", v, "ok ->", k.max_dynamic_shared_size_bytes)
                s.max_dynamic_shared_size_bytes = v
            except cp.cuda.driver.CUDADriverError as e:
                say(" set", v, type(e).__name__, e)
                with pytest.raises(LaunchError, match="opt-in limit"):
                    s.max_dynamic_shared_size_bytes = v
        k((1,), (32,), (out,), shared_mem=65536)
        cp.cuda.Device().synchronize()
        say(" launch 65536 after opt-in ok")
        s((1,), (32,), (sout,), shared_mem=65536)
        assert out.get().tobytes() == sout.get().tobytes()
    k = m.get_function("sc")
    out = cp.zeros(2, cp.float32)
    k((1,), (1,), (out, 1.5, 7))
    say("python float/int:", out.get())
    with pytest.raises(LaunchError, match=r"pass numpy.float32\(x\)"):  # simtc refuses what arrives as garbage
        mine.get_function("sc")((1,), (1,), (sx.zeros(2, sx.float32), 1.5, 7))
    k((1,), (1,), (out, np.float32(1.5), 2**32 + 5))
    say("np.float32, 2**32+5:", out.get())
    for g in (4, [4], (0,), (1, 1, 1, 1)):
        try:
            k(g, (1,), (out, np.float32(1), np.int32(1)))
            cp.cuda.Device().synchronize()
            say("grid", g, "ok")
        except TypeError as e:
            say("grid", g, type(e).__name__, e)
        with pytest.raises(LaunchError):  # simtc refuses all four (CuPy clamps (0,) to 1 and drops a 4th size)
            mine.get_function("sc")(g, (1,), (sx.zeros(2, sx.float32), np.float32(1), np.int32(1)))
    say(cp.__version__, cp.cuda.Device().compute_capability)
    recorded = (Path(__file__).resolve().parents[1] / "data" / "h200_cupy_raw_kernel.txt").read_text()
    if cp.__version__ == "14.2.0" and cp.cuda.Device().compute_capability == "90":
        assert [x for x in lines if "num_regs" not in x] == \
            [x for x in recorded.splitlines() if "num_regs" not in x]
