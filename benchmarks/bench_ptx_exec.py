"""Thread-instructions per second of simtc's PTX executor on NVRTC-compiled kernels (fresh process).

Run: ``.venv/bin/python benchmarks/bench_ptx_exec.py``. The target (issue 26) is >= 2 M thread-instructions/s on
the project's 2-core machine. Kernels: a 64x64x64 tiled SGEMM (16x16 tiles in shared memory, 16 CTAs of 256
threads), a shared-memory block reduction (each checked against numpy before it is timed), and a loop of
directed-rounding f32, f16x2 and f64 fma (the ALU's exactly rounded paths; its outputs only checked finite here).

Launches are timed in the process's CPU time (a shared machine's other processes add wall time; under heavy load
CPU time still grows somewhat). Measured 2026-12-01 on the project's 2-core machine, wall time, three fresh runs:
SGEMM 3.3-3.7 M thread-instructions/s (about 105-115 k warp instructions/s; the f32 ``fma`` of simtc.ptx.alu is
the largest share), reduction 6.6-7.7 M thread-instructions/s. Under load from other processes the SGEMM figure
dropped to about 1.9 M. 2026-12-03, CPU time, the machine at load average 8 on its 2 cores: SGEMM 1.0-1.3 M,
reduction 2.3-2.6 M, the fma loop 1.1-1.2 M (0.38-0.40 M before the ALU's rounding was vectorised).
"""

from __future__ import annotations

import time

import numpy as np

from simtc.hw.compile import compile_cuda
from simtc.ptx.executor import launch
from simtc.ptx.memory import Device
from simtc.ptx.parser import parse

SGEMM = r'''
extern "C" __global__ void sgemm(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float As[16][16], Bs[16][17];
  int tx = threadIdx.x, ty = threadIdx.y, row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += 16) {
    As[ty][tx] = A[row * K + k0 + tx];
    Bs[ty][tx] = B[(k0 + ty) * N + col];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 16; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
    __syncthreads();
  }
  C[row * N + col] = acc;
}'''

REDUCE = r'''
extern "C" __global__ void reduce(const float* x, float* out, int n) {
  __shared__ float s[256];
  float v = 0.f;
  for (int i = blockIdx.x * 256 + threadIdx.x; i < n; i += gridDim.x * 256) v += x[i];
  s[threadIdx.x] = v;
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) { if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k]; __syncthreads(); }
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}'''


MIXED = r'''
#include <cuda_fp16.h>
extern "C" __global__ void mixed(const float* x, __half2* h, double* d, float* y, int iters) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float a = x[i], r = 0.f;
  __half2 hv = h[i], hk = __floats2half2_rn(0.5f, 0.25f);
  double dv = (double)a, dk = 1.0000001;
  for (int k = 0; k < iters; ++k) {
    r = __fmaf_rz(a, r, 0.75f);             // fma.rz.f32: directed rounding
    r = __fadd_rd(r, 1e-3f);                // add.rm.f32
    hv = __hfma2(hv, hk, hk);               // fma.rn.f16x2
    dv = __fma_rn(dv, dk, -1e-9);           // fma.rn.f64
  }
  y[i] = r + __low2float(hv) + __high2float(hv) + (float)dv;
}'''


def _module(src: str):
    return parse(compile_cuda(src, arch="sm_90a", output="ptx", options=("-lineinfo",)).decode())


def _buf(dev: Device, a: np.ndarray) -> int:
    p = dev.memory.alloc(a.nbytes)
    dev.memory.view(p, a.nbytes)[:] = a.reshape(-1).view(np.uint8)
    return p


def bench_sgemm(n: int = 64) -> tuple[float, int]:
    dev = Device()
    m = _module(SGEMM)
    rng = np.random.default_rng(0)
    a = rng.integers(-4, 4, (n, n)).astype(np.float32)
    b = rng.integers(-4, 4, (n, n)).astype(np.float32)
    pa, pb, pc = _buf(dev, a), _buf(dev, b), _buf(dev, np.zeros((n, n), np.float32))
    t0 = time.process_time()
    r = launch(m, "sgemm", grid=(n // 16, n // 16, 1), block=(16, 16, 1),
               args=[pa, pb, pc, np.int32(n), np.int32(n), np.int32(n)], device=dev)
    dt = time.process_time() - t0
    c = dev.memory.view(pc, 4 * n * n).view(np.float32).reshape(n, n)
    if not np.array_equal(c, a @ b):  # small integers: exact in fp32
        raise SystemExit("sgemm result differs from numpy")
    return dt, r.total_thread_instructions


def bench_reduce(n: int = 1 << 16) -> tuple[float, int]:
    dev = Device()
    m = _module(REDUCE)
    x = np.ones(n, np.float32)
    px, po = _buf(dev, x), _buf(dev, np.zeros(8, np.float32))
    t0 = time.process_time()
    r = launch(m, "reduce", grid=(8, 1, 1), block=(256, 1, 1), args=[px, po, np.int32(n)], device=dev)
    dt = time.process_time() - t0
    if dev.memory.view(po, 32).view(np.float32).sum() != n:
        raise SystemExit("reduce result differs from numpy")
    return dt, r.total_thread_instructions


def bench_mixed(n: int = 1024, iters: int = 32) -> tuple[float, int]:
    """Directed-rounding f32, f16x2 and f64 fma in one loop (the ALU's exactly rounded paths, checked bit for bit
    by tests/ptx/test_alu_exact.py and the H200 recording); here only timed, the outputs checked to be finite."""
    dev = Device()
    m = _module_inc(MIXED)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(n).astype(np.float32)
    h = rng.standard_normal(2 * n).astype(np.float16)
    px, ph = _buf(dev, x), _buf(dev, h)
    pd, py = _buf(dev, np.zeros(n, np.float64)), _buf(dev, np.zeros(n, np.float32))
    t0 = time.process_time()
    r = launch(m, "mixed", grid=(n // 256, 1, 1), block=(256, 1, 1), args=[px, ph, pd, py, np.int32(iters)],
               device=dev)
    dt = time.process_time() - t0
    y = dev.memory.view(py, 4 * n).view(np.float32)
    if not np.isfinite(y).all():
        raise SystemExit("mixed kernel result is not finite")
    return dt, r.total_thread_instructions


def _module_inc(src: str):
    return parse(compile_cuda(src, arch="sm_90a", output="ptx",
                              options=("-lineinfo", "-I/usr/local/cuda/include")).decode())


if __name__ == "__main__":
    for name, fn in (("sgemm 64x64x64", bench_sgemm), ("reduce 65536", bench_reduce),
                     ("mixed fp 1024x32", bench_mixed)):
        fn()  # compile and warm up (the module's code is cached per device; a fresh device recompiles)
        dt, n = fn()
        print(f"{name:16s} {n:>10,d} thread-instructions in {dt:6.3f} s: {n / dt / 1e6:5.2f} M thread-instr/s "
              f"({n / 32 / dt / 1e3:6.1f} k warp-instr/s if all lanes active)")
