"""The PTX executor on real kernels: CUDA C++ compiled here by NVRTC (sm_90a, -lineinfo), run by
:func:`simtc.ptx.executor.launch`, results checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from simtc.errors import HardwareUnavailable
from simtc.ptx.errors import KernelFault, LaunchError, PtxUnsupported
from simtc.ptx.executor import LaunchOptions, launch
from simtc.ptx.memory import Device

compile_mod = pytest.importorskip("simtc.hw.compile")
parser = pytest.importorskip("simtc.ptx.parser")


def _module(src: str):
    try:
        ptx = compile_mod.compile_cuda(src, arch="sm_90a", output="ptx", options=("-lineinfo",))
    except HardwareUnavailable as err:  # no NVRTC and no nvcc here
        pytest.skip(str(err))
    return parser.parse(ptx.decode(), name="kernel.ptx")


class Gpu:
    """A device with numpy-in/numpy-out buffers, for the tests."""

    def __init__(self):
        self.dev = Device()
        self.bufs: dict[int, np.ndarray] = {}

    def put(self, a: np.ndarray, name: str | None = None) -> int:
        a = np.ascontiguousarray(a)
        p = self.dev.memory.alloc(a.nbytes, name=name)
        self.dev.memory.view(p, a.nbytes)[:] = a.reshape(-1).view(np.uint8)
        self.bufs[p] = a
        return p

    def get(self, p: int) -> np.ndarray:
        a = self.bufs[p]
        return self.dev.memory.view(p, a.nbytes).view(a.dtype).reshape(a.shape).copy()

    def run(self, module, kernel, grid, block, args, **kw):
        return launch(module, kernel, grid=grid, block=block, args=args, device=self.dev, **kw)


def test_vector_add_with_a_partial_last_block():
    m = _module(r'''
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}''')
    g = Gpu()
    rng = np.random.default_rng(0)
    n = 300
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    pa, pb, pc = g.put(a), g.put(b), g.put(np.zeros(n, np.float32))
    r = g.run(m, "vadd", (3, 1, 1), (128, 1, 1), [pa, pb, pc, np.int32(n)])
    assert np.array_equal(g.get(pc), a + b)
    assert r.warp_instructions["st"] == 10  # 300 threads: 10 warps store (the last two warps' 12 lanes skip)
    assert r.thread_instructions["st"] == n
    assert r.total_thread_instructions > r.total_warp_instructions


def test_block_reduction_with_shared_memory_and_syncthreads():
    m = _module(r'''
extern "C" __global__ void reduce(const int* x, int* out) {
  __shared__ int s[256];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * 256 + t];
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) {
    if (t < k) s[t] += s[t + k];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}''')
    g = Gpu()
    x = np.arange(4 * 256, dtype=np.int32) * 3 - 700
    px, po = g.put(x), g.put(np.zeros(4, np.int32))
    r = g.run(m, "reduce", (4, 1, 1), (256, 1, 1), [px, po])
    assert g.get(po).tolist() == x.reshape(4, 256).sum(axis=1).tolist()
    assert r.shared_static == 1024
    assert r.warp_instructions["bar"] == 4 * 8 * 9


def test_warp_shuffles_votes_and_match():
    m = _module(r'''
extern "C" __global__ void warpops(const int* x, int* out) {
  int lane = threadIdx.x & 31;
  int v = x[threadIdx.x];
  int s = v;
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffff, s, o);
  int b = v;
  for (int o = 1; o < 32; o <<= 1) b = max(b, __shfl_xor_sync(0xffffffff, b, o));
  int scan = v;
  for (int o = 1; o < 32; o <<= 1) { int y = __shfl_up_sync(0xffffffff, scan, o); if (lane >= o) scan += y; }
  int seg = __shfl_sync(0xffffffff, v, 3, 8);          // lane 3 of each group of 8
  unsigned ballot = __ballot_sync(0xffffffff, v & 1);
  int any = __any_sync(0xffffffff, v > 90), all = __all_sync(0xffffffff, v >= 0);
  unsigned same = __match_any_sync(0xffffffff, v % 3);
  int red = __reduce_add_sync(0xffffffff, v);
  int* o = out + threadIdx.x * 9;
  o[0] = s; o[1] = b; o[2] = scan; o[3] = seg; o[4] = ballot; o[5] = any; o[6] = all; o[7] = same; o[8] = red;
}''')
    g = Gpu()
    x = np.random.default_rng(1).integers(0, 100, 64).astype(np.int32)
    px, po = g.put(x), g.put(np.zeros((64, 9), np.int32))
    g.run(m, "warpops", (1, 1, 1), (64, 1, 1), [px, po])
    o = g.get(po)
    for w in range(2):
        v = x[32 * w:32 * w + 32]
        ow = o[32 * w:32 * w + 32]
        assert ow[0, 0] == v.sum()  # lane 0 of a shfl.down tree sums the warp
        assert (ow[:, 1] == v.max()).all()
        assert ow[:, 2].tolist() == np.cumsum(v).tolist()
        assert ow[:, 3].tolist() == np.repeat(v[3::8], 8).tolist()
        assert np.uint32(ow[0, 4]) == sum(1 << i for i in range(32) if v[i] & 1)
        assert (ow[:, 5] == int((v > 90).any())).all() and (ow[:, 6] == 1).all()
        expect_same = [sum(1 << j for j in range(32) if v[j] % 3 == v[i] % 3) for i in range(32)]
        assert ow[:, 7].view(np.uint32).tolist() == expect_same
        assert (ow[:, 8] == v.sum()).all()


def test_divergent_loop_with_early_exits():
    m = _module(r'''
extern "C" __global__ void collatz(const unsigned* x, int* steps, int* flag) {
  int i = threadIdx.x;
  unsigned v = x[i];
  if (v == 0) return;                 // early exit of some lanes
  int n = 0;
  while (v != 1) {
    if (n > 60) { steps[i] = -1; return; }   // exit from inside the loop
    v = (v & 1) ? 3 * v + 1 : v / 2;
    ++n;
  }
  steps[i] = n;
  if (__all_sync(__activemask(), 1)) atomicAdd(flag, 1);   // the lanes left reconverge here
}''')
    g = Gpu()
    x = np.array([0, 1, 2, 3, 6, 7, 9, 27, 97, 0, 5, 8, *range(20, 40)], np.uint32)

    def ref(v):
        n = 0
        while v != 1:
            if n > 60:
                return -1
            v = 3 * v + 1 if v & 1 else v // 2
            n += 1
        return n
    px, ps, pf = g.put(x), g.put(np.full(32, -7, np.int32)), g.put(np.zeros(1, np.int32))
    g.run(m, "collatz", (1, 1, 1), (32, 1, 1), [px, ps, pf])
    expect = [-7 if v == 0 else ref(int(v)) for v in x]
    assert g.get(ps).tolist() == expect
    assert g.get(pf)[0] == sum(1 for e in expect if e >= 0)


def test_histogram_with_shared_and_global_atomics():
    m = _module(r'''
extern "C" __global__ void hist(const unsigned char* x, int n, unsigned* h, float* fsum, int* mx, int* cas) {
  __shared__ unsigned sh[16];
  if (threadIdx.x < 16) sh[threadIdx.x] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    atomicAdd(&sh[x[i] & 15], 1u);
    atomicAdd(fsum, 0.5f);
    atomicMax(mx, (int)x[i]);
  }
  __syncthreads();
  if (threadIdx.x < 16) atomicAdd(&h[threadIdx.x], sh[threadIdx.x]);
  if (threadIdx.x == 0) { int old = atomicCAS(cas, 0, 100 + blockIdx.x); if (old != 0) atomicExch(cas + 1, old); }
}''')
    g = Gpu()
    x = np.random.default_rng(2).integers(0, 256, 1000).astype(np.uint8)
    px = g.put(x)
    ph, pf, pm, pc = (g.put(np.zeros(16, np.uint32)), g.put(np.zeros(1, np.float32)), g.put(np.zeros(1, np.int32)),
                      g.put(np.zeros(2, np.int32)))
    g.run(m, "hist", (3, 1, 1), (96, 1, 1), [px, np.int32(1000), ph, pf, pm, pc])
    assert g.get(ph).tolist() == np.bincount(x & 15, minlength=16).tolist()
    assert g.get(pf)[0] == 500.0 and g.get(pm)[0] == x.max()
    assert g.get(pc).tolist() == [100, 100]  # block 0 won the CAS (CTAs run in order); the others saw 100


SGEMM = r'''
typedef unsigned short half_bits;   // fp16 bits (no cuda_fp16.h: header-free NVRTC)
template <typename T> __device__ float tof(T v);
template <> __device__ float tof<float>(float v) { return v; }
template <> __device__ float tof<half_bits>(half_bits v) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v)); return f;
}
template <typename T>
__device__ void gemm(const T* A, const T* B, float* C, int M, int N, int K) {
  constexpr int TS = 16;
  __shared__ float As[TS][TS], Bs[TS][TS + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TS + ty, col = blockIdx.x * TS + tx;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += TS) {
    As[ty][tx] = (row < M && k0 + tx < K) ? tof(A[row * K + k0 + tx]) : 0.f;
    Bs[ty][tx] = (col < N && k0 + ty < K) ? tof(B[(k0 + ty) * N + col]) : 0.f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TS; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
extern "C" __global__ void sgemm(const float* A, const float* B, float* C, int M, int N, int K) {
  gemm<float>(A, B, C, M, N, K);
}
extern "C" __global__ void hgemm(const half_bits* A, const half_bits* B, float* C, int M, int N, int K) {
  gemm<half_bits>(A, B, C, M, N, K);
}
'''


def _gemm_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fp32 fma chain in k order, as the kernel computes it (bit-exact reference)."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.float64)
    out = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1]):
        acc = (out.astype(np.float64) + a[:, k:k + 1].astype(np.float64) * b[k:k + 1, :].astype(np.float64))
        out = acc.astype(np.float32)  # an fp32 fma: the exact product-sum rounded once (float64 holds it exactly)
    return out


@pytest.mark.parametrize("kernel", ["sgemm", "hgemm"])
def test_tiled_gemm_with_shared_memory(kernel):
    m = _module(SGEMM)
    g = Gpu()
    rng = np.random.default_rng(3)
    M, N, K = 20, 24, 40
    dt = np.float32 if kernel == "sgemm" else np.float16
    a = (rng.integers(-8, 8, (M, K)) / 4).astype(dt)
    b = (rng.integers(-8, 8, (K, N)) / 8).astype(dt)
    pa, pb, pc = g.put(a), g.put(b), g.put(np.zeros((M, N), np.float32))
    g.run(m, kernel, (2, 2, 1), (16, 16, 1), [pa, pb, pc, np.int32(M), np.int32(N), np.int32(K)])
    assert np.array_equal(g.get(pc), _gemm_ref(a.astype(np.float32), b.astype(np.float32)))


def test_printf_in_thread_order_per_warp():
    m = _module(r'''
extern "C" __global__ void hello(int k) {
  if (threadIdx.x % 16 == 1)
    printf("block %d thread %2u: %x %5.2f %s %c %lld|%-4d|\n", blockIdx.x, threadIdx.x, 255 + k, 1.5f * threadIdx.x,
           "ok", 'A' + threadIdx.x / 16, -1234567890123LL, k);
}''')
    g = Gpu()
    r = g.run(m, "hello", (2, 1, 1), (48, 1, 1), [np.int32(7)])
    want = [f"block {b} thread {t:2d}: {255 + 7:x} {1.5 * t:5.2f} ok {chr(65 + t // 16)} -1234567890123|7   |\n"
            for b in range(2) for t in (1, 17, 33)]
    assert list(r.printf) == want
    assert r.output == "".join(want)


def test_noinline_device_function_recursion_local_arrays_and_struct_param():
    m = _module(r'''
struct P { int a; float b; double c; int arr[3]; };
__device__ __noinline__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
__device__ __noinline__ float axpb(float x, P p) { return p.b * x + p.a + (float)p.c; }
extern "C" __global__ void k(int* out, float* fout, P p, int sel) {
  int t = threadIdx.x;
  int loc[16];
  for (int j = 0; j < 16; ++j) loc[j] = j * j + t;
  out[t] = fib(t % 8) + loc[(t * 7 + sel) & 15] + p.arr[t % 3];
  fout[t] = axpb((float)t, p);
}''')
    g = Gpu()
    po, pf = g.put(np.zeros(40, np.int32)), g.put(np.zeros(40, np.float32))
    struct = (np.array([5], np.int32).tobytes() + np.array([0.25], np.float32).tobytes()
              + np.array([2.0], np.float64).tobytes() + np.array([10, 20, 30, 0], np.int32).tobytes())
    r = g.run(m, "k", (1, 1, 1), (40, 1, 1), [po, pf, struct, np.int32(3)])
    t = np.arange(40)
    fib = [0, 1, 1, 2, 3, 5, 8, 13]
    sel = (t * 7 + 3) & 15
    assert g.get(po).tolist() == [fib[i % 8] + int(sel[i] ** 2 + i) + [10, 20, 30][i % 3] for i in range(40)]
    assert np.array_equal(g.get(pf), (np.float32(0.25) * t.astype(np.float32) + np.float32(5) + np.float32(2)))
    assert r.warp_instructions["call"] > 2 * 8  # the recursion runs as real calls, lanes to different depths


def test_generic_pointers_into_shared_and_local_memory():
    m = _module(r'''
__device__ __noinline__ void bump(int* p, int v) { *p += v; }    // generic: shared, local or global
extern "C" __global__ void k(int* out) {
  __shared__ int s[64];
  int l[4] = {1, 2, 3, 4};
  s[threadIdx.x] = threadIdx.x;
  __syncthreads();
  bump(&s[threadIdx.x ^ 1], 100);
  bump(&l[threadIdx.x & 3], 10);
  bump(&out[threadIdx.x], l[threadIdx.x & 3]);
  __syncthreads();
  out[64 + threadIdx.x] = s[threadIdx.x];
  out[128 + threadIdx.x] = __isShared(&s[0]) + 2 * __isLocal(&l[0]) + 4 * __isGlobal(out);
}''')
    g = Gpu()
    po = g.put(np.zeros(192, np.int32))
    g.run(m, "k", (1, 1, 1), (64, 1, 1), [po])
    o = g.get(po)
    t = np.arange(64)
    assert o[:64].tolist() == ((t & 3) + 1 + 10).tolist()
    assert o[64:128].tolist() == (t + 100).tolist()
    assert (o[128:] == 7).all()


def test_named_barriers_with_thread_counts_and_dynamic_shared_memory():
    m = _module(r'''
extern "C" __global__ void pc(int* out) {
  extern __shared__ int buf[];            // dynamic: 2 groups x 64 ints
  int w = threadIdx.x / 32, t = threadIdx.x % 64, grp = threadIdx.x / 64;
  int* b = buf + grp * 64;
  if (w % 2 == 0) {                        // producer warp of each group
    b[t] = 1000 * grp + t; b[t + 32] = 1000 * grp + t + 32;
    asm volatile("bar.arrive %0, 64;" :: "r"(1 + grp) : "memory");
  } else {                                 // consumer warp of each group
    asm volatile("bar.sync %0, 64;" :: "r"(1 + grp) : "memory");
    out[grp * 64 + t - 32] = b[t - 32] + b[t];
  }
  int n = __syncthreads_count(threadIdx.x % 3 == 0);
  if (threadIdx.x == 0) out[128] = n;
  int o = __syncthreads_or(threadIdx.x == 77), a = __syncthreads_and(threadIdx.x < 1000);
  if (threadIdx.x == 0) out[129] = o + 2 * a;
}''')
    g = Gpu()
    po = g.put(np.zeros(130, np.int32))
    r = g.run(m, "pc", (1, 1, 1), (128, 1, 1), [po], shared_mem=2 * 64 * 4)
    o = g.get(po)
    for grp in range(2):
        t = np.arange(32, 64)
        assert o[grp * 64:grp * 64 + 32].tolist() == ((1000 * grp + t - 32) + (1000 * grp + t)).tolist()
    assert o[128] == len(range(0, 128, 3)) and o[129] == 3
    assert r.shared_dynamic == 512


def test_deadlock_names_each_waiting_warp():
    m = _module(r'''
extern "C" __global__ void dl(int* out) {
  if (threadIdx.x < 64) asm volatile("bar.sync 1, 128;");    // only 2 of the 4 warps come
  out[threadIdx.x] = 1;
}''')
    g = Gpu()
    po = g.put(np.zeros(128, np.int32))
    with pytest.raises(KernelFault) as ei:
        g.run(m, "dl", (1, 1, 1), (128, 1, 1), [po])
    msg = str(ei.value)
    assert "deadlock" in msg and "warp 0" in msg and "warp 1" in msg and "warp 2" not in msg.split("exited")[0]
    assert "barrier 1 (128 threads; 64 arrived so far)" in msg and "bar.sync 1, 128;" in msg
    assert "warps [2, 3] have exited" in msg


def test_out_of_bounds_store_names_thread_address_and_allocation():
    m = _module(r'''
extern "C" __global__ void oob(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= n) y[i] = 1.0f;      // off by one
}''')
    g = Gpu()
    py = g.put(np.zeros(100, np.float32), name="y")
    with pytest.raises(KernelFault) as ei:
        g.run(m, "oob", (1, 1, 1), (128, 1, 1), [py, np.int32(100)])
    e = ei.value
    assert e.thread == ((0, 0, 0), (100, 0, 0)) and e.address == py + 400 and e.size == 4
    assert e.allocation == f"'y' at {py:#x} of size 400 bytes"
    assert "invalid global write of size 4 bytes by thread (100,0,0) in block (0,0,0)" in str(e)
    assert "0 bytes after the nearest allocation 'y'" in str(e) and "st.global" in str(e)
    assert e.loc is not None and e.loc.endswith(":4") and e.line > 0


def test_misaligned_load_is_a_fault():
    m = _module(r'''
extern "C" __global__ void mis(const char* p, int* out) {
  out[threadIdx.x] = *(const int*)(p + threadIdx.x * 4 + (threadIdx.x == 5 ? 2 : 0));
}''')
    g = Gpu()
    pp, po = g.put(np.zeros(256, np.uint8)), g.put(np.zeros(32, np.int32))
    with pytest.raises(KernelFault, match=r"misaligned .*thread \(5,0,0\)|thread \(5,0,0\).*misaligned") as ei:
        g.run(m, "mis", (1, 1, 1), (32, 1, 1), [pp, po])
    assert ei.value.address == pp + 22 and ei.value.rule == "natural alignment of accesses"


def test_shared_out_of_bounds_and_trap():
    m = _module(r'''
extern "C" __global__ void sh(int* out, int k) {
  __shared__ int s[32];
  s[threadIdx.x] = 1;
  __syncthreads();
  if (k == 1) out[0] = s[threadIdx.x + 40];
  if (k == 2 && threadIdx.x == 3) __trap();
}''')
    g = Gpu()
    po = g.put(np.zeros(4, np.int32))
    with pytest.raises(KernelFault, match=r"invalid shared read of size 4 bytes by thread \(0,0,0\).*out of bounds"):
        g.run(m, "sh", (1, 1, 1), (32, 1, 1), [po, np.int32(1)])
    with pytest.raises(KernelFault, match=r"trap.*thread \(3,0,0\)"):
        g.run(m, "sh", (1, 1, 1), (32, 1, 1), [po, np.int32(2)])


def test_launch_argument_and_limit_checks():
    m = _module(r'''
extern "C" __global__ void k(float* y, int n, double d) {
  __shared__ float s[1024]; s[threadIdx.x] = n + d; y[0] = s[0];
}
''')
    g = Gpu()
    py = g.put(np.zeros(1, np.float32))
    with pytest.raises(LaunchError, match="takes 3 arguments"):
        g.run(m, "k", 1, 32, [py, 1])
    with pytest.raises(LaunchError, match=r"argument k_param_1 has 8 bytes; the parameter .* has 4"):
        g.run(m, "k", 1, 32, [py, np.int64(1), 2.0])
    with pytest.raises(LaunchError, match="cannot take the float"):
        g.run(m, "k", 1, 32, [py, 1.5, 2.0])
    with pytest.raises(LaunchError, match=r"1025 threads"):
        g.run(m, "k", 1, (1025, 1, 1), [py, 1, 2.0])
    with pytest.raises(LaunchError, match=r"4096 bytes of static and 230000 of dynamic .* at most 232448"):
        g.run(m, "k", 1, 32, [py, 1, 2.0], shared_mem=230000)
    with pytest.raises(LaunchError, match="no kernel 'nope'"):
        g.run(m, "nope", 1, 32, [])
    r = g.run(m, "k", 1, 32, [py, 1, 2.0])
    assert g.get(py)[0] == 3.0 and r.grid == (1, 1, 1) and r.block == (32, 1, 1)


def test_special_registers_and_clock_note():
    m = _module(r'''
extern "C" __global__ void sr(unsigned* out) {
  unsigned lane, warp, lt, dyn;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  asm("mov.u32 %0, %%warpid;" : "=r"(warp));
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(lt));
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
  long long c0 = clock64();
  unsigned* o = out + 8 * (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * blockIdx.x));
  o[0] = lane; o[1] = warp; o[2] = lt; o[3] = dyn; o[4] = threadIdx.y; o[5] = blockDim.y; o[6] = gridDim.x;
  o[7] = clock64() > c0;
}''')
    g = Gpu()
    po = g.put(np.zeros((2, 2, 40, 8), np.uint32))
    r = g.run(m, "sr", (2, 1, 1), (40, 2, 1), [po], shared_mem=64)
    o = g.get(po).reshape(-1, 8)
    lin = np.arange(160) % 80
    assert o[:, 0].tolist() == (lin % 32).tolist() and o[:, 1].tolist() == (lin // 32).tolist()
    assert o[:, 2].tolist() == [(1 << (i % 32)) - 1 for i in lin]
    assert (o[:, 3] == 64).all() and o[:, 4].tolist() == (lin // 40).tolist() and (o[:, 5] == 2).all()
    assert (o[:, 6] == 2).all() and (o[:, 7] == 1).all()
    assert any("%clock64" in n for n in r.notes)


def test_refused_opcode_is_named_and_trace_is_kept():
    m = parser.parse(r'''
.version 9.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 p)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<3>;
    .shared .align 8 .b64 bar0;
    mov.u32 %r1, %tid.x;
    setp.eq.s32 %p1, %r1, 0;
    @%p1 bra $L_skip;
    mapa.shared::cluster.u32 %r2, %r1, 0;
$L_skip:
    ret;
}
''')
    g = Gpu()
    r = g.run(m, "k", 1, 1, [0], options=LaunchOptions(trace=True))
    assert [pc for _, _, pc, _ in r.traces[0][1]] == [0, 1, 2, 4]
    with pytest.raises(PtxUnsupported, match=r"mapa.shared::cluster.u32 \(PTX line 14\): mapa.* later step"):
        g.run(m, "k", 1, 64, [0])


def test_early_return_before_syncthreads_exits_those_threads():
    m = _module(r'''
extern "C" __global__ void k(int* out, int n) {
  __shared__ int s[128];
  int t = threadIdx.x;
  if (t >= n) return;          // a branch to the kernel's ret: those threads exit, the barrier waits for the rest
  s[t] = t;
  __syncthreads();
  out[t] = s[(t + 1) % n];
}''')
    g = Gpu()
    po = g.put(np.full(128, -1, np.int32))
    g.run(m, "k", (1, 1, 1), (128, 1, 1), [po, np.int32(70)])
    assert g.get(po).tolist() == [(t + 1) % 70 for t in range(70)] + [-1] * 58


def test_ldmatrix_and_stmatrix_move_8x8_b16_fragments():
    m = _module(r'''
extern "C" __global__ void lm(const unsigned short* x, unsigned* frag, unsigned short* back) {
  __shared__ __align__(16) unsigned short s[4 * 64], t[4 * 64];
  for (int i = threadIdx.x; i < 256; i += 32) s[i] = x[i];
  __syncthreads();
  unsigned a = (unsigned)__cvta_generic_to_shared(&s[threadIdx.x * 8]);     // lane l: row l%8 of matrix l/8
  unsigned r0, r1, r2, r3, q0, q1;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(a));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];" : "=r"(q0), "=r"(q1) : "r"(a));
  unsigned* o = frag + threadIdx.x * 6;
  o[0] = r0; o[1] = r1; o[2] = r2; o[3] = r3; o[4] = q0; o[5] = q1;
  unsigned b = (unsigned)__cvta_generic_to_shared(&t[threadIdx.x * 8]);
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};"
               :: "r"(b), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
  __syncthreads();
  for (int i = threadIdx.x; i < 256; i += 32) back[i] = t[i];
}''')
    g = Gpu()
    x = np.arange(256, dtype=np.uint16) * 7 + 1
    px, pf, pb = g.put(x), g.put(np.zeros((32, 6), np.uint32)), g.put(np.zeros(256, np.uint16))
    g.run(m, "lm", (1, 1, 1), (32, 1, 1), [px, pf, pb])
    fr = g.get(pf)
    mats = x.reshape(4, 8, 8)
    lane = np.arange(32)
    for i in range(4):
        lo, hi = mats[i][lane // 4, 2 * (lane % 4)], mats[i][lane // 4, 2 * (lane % 4) + 1]
        assert fr[:, i].tolist() == (lo.astype(np.uint32) | hi.astype(np.uint32) << 16).tolist()
    for i in range(2):
        mt = mats[i].T
        lo, hi = mt[lane // 4, 2 * (lane % 4)], mt[lane // 4, 2 * (lane % 4) + 1]
        assert fr[:, 4 + i].tolist() == (lo.astype(np.uint32) | hi.astype(np.uint32) << 16).tolist()
    assert g.get(pb).reshape(4, 8, 8).tolist() == mats.transpose(0, 2, 1).tolist()  # stored transposed


def test_constant_and_device_variables_and_a_spin_wait_between_warps():
    m = _module(r'''
__constant__ float coef[4] = {0.5f, 1.5f, 2.5f, 3.5f};
__device__ int counter = 10;
extern "C" __global__ void k(float* out, int spin_forever) {
  __shared__ volatile int flag;
  if (threadIdx.x == 0) flag = 0;
  __syncthreads();
  if (threadIdx.x < 32) { while (flag == 0) {} }          // warp 0 spins until warp 1 stores the flag
  else if (threadIdx.x == 32) flag = 1;
  if (spin_forever) { while (flag != 2) {} }
  out[threadIdx.x] = coef[threadIdx.x & 3] + atomicAdd(&counter, 1);
}''')
    g = Gpu()
    po = g.put(np.zeros(64, np.float32))
    g.run(m, "k", (1, 1, 1), (64, 1, 1), [po, np.int32(0)])
    o = g.get(po)
    coef = np.array([0.5, 1.5, 2.5, 3.5], np.float32)
    assert sorted((o - coef[np.arange(64) & 3]).tolist()) == list(range(10, 74))
    with pytest.raises(KernelFault, match="more than 20000 warp instructions"):
        g.run(m, "k", (1, 1, 1), (64, 1, 1), [po, np.int32(1)], options=LaunchOptions(max_instructions=20000))
