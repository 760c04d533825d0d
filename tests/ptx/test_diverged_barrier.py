"""A non-``.aligned`` ``barrier.sync`` reached by a warp's lanes on different paths (PTX ISA 9.0 §9.7.13.1: it
"causes the executing thread to wait for all non-exited threads from its warp"): the first path waits aside until
the rest of the warp arrives, then the warp counts once at the barrier. FlashMLA's head64 kernel does this
(``NamedBarrier::arrive_and_wait_unaligned``). And sm_100's packed ``.f32x2`` arithmetic, each half an ``.f32``."""

from __future__ import annotations

import numpy as np
import pytest

import simtc.cuda as xp

SRC = r"""
__device__ __forceinline__ void bar_unaligned(int id, int n) {
    asm volatile("barrier.sync %0, %1;" :: "r"(id), "r"(n) : "memory");
}
// lane 0 of every warp writes, arrives on its own path; lanes 1-31 arrive on another; then everybody reads.
extern "C" __global__ void diverged(int* out) {
    __shared__ int s[8];
    int w = threadIdx.x / 32, l = threadIdx.x % 32;
    if (l == 0) {
        s[w] = 10 + w;
        bar_unaligned(3, blockDim.x);
    } else {
        bar_unaligned(3, blockDim.x);
    }
    int acc = 0;
    for (int i = 0; i < blockDim.x / 32; ++i) acc += s[i];
    out[threadIdx.x] = acc;
}
"""

F32X2 = r"""
extern "C" __global__ void f32x2(const unsigned long long* a, const unsigned long long* b,
                                 const unsigned long long* c, unsigned long long* d) {
    int t = threadIdx.x;
    unsigned long long x = a[t], y = b[t], z = c[t], r0, r1, r2;
    asm("add.rn.f32x2 %0, %1, %2;" : "=l"(r0) : "l"(x), "l"(y));
    asm("mul.rz.f32x2 %0, %1, %2;" : "=l"(r1) : "l"(x), "l"(y));
    asm("fma.rn.f32x2 %0, %1, %2, %3;" : "=l"(r2) : "l"(x), "l"(y), "l"(z));
    d[3 * t] = r0; d[3 * t + 1] = r1; d[3 * t + 2] = r2;
}
"""


def _rn32(x):
    """x rounded to the nearest float32, ties to even, exactly (no double rounding through float64)."""
    from fractions import Fraction

    f = np.float32(float(x))
    cands = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
    err = [abs(Fraction(float(v)) - x) for v in cands]
    best = min(err)
    ties = [v for v, e in zip(cands, err, strict=True) if e == best]
    return next((v for v in ties if not (v.view(np.uint32) & 1)), ties[0])


@pytest.mark.parametrize("warps", [1, 3])
def test_diverged_paths_meet_at_a_non_aligned_barrier(warps):
    mod = xp.RawModule(code=SRC, options=("-arch=sm_90a",))
    out = xp.zeros(32 * warps, dtype=xp.int32)
    mod.get_function("diverged")((1,), (32 * warps,), (out,))
    assert (out.get() == sum(10 + w for w in range(warps))).all()


def test_f32x2_is_two_f32_operations():
    from fractions import Fraction

    mod = xp.RawModule(code=F32X2, options=("-arch=sm_100a",))
    rng = np.random.default_rng(5)
    a, b, c = (rng.standard_normal(64).astype(np.float32) for _ in range(3))
    d = xp.zeros(96, dtype=xp.uint64)
    mod.get_function("f32x2")((1,), (32,), (xp.asarray(a.view(np.uint64)), xp.asarray(b.view(np.uint64)),
                                            xp.asarray(c.view(np.uint64)), d))
    got = d.get().view(np.float32).reshape(32, 3, 2)
    lanes = np.arange(64).reshape(32, 2)
    np.testing.assert_array_equal(got[:, 0], (a + b)[lanes])
    # round toward zero of the exact product; fused multiply-add rounded once
    for t in range(32):
        for h in range(2):
            i = 2 * t + h
            exact = Fraction(float(a[i])) * Fraction(float(b[i]))
            rz = np.float32(float(exact))
            if abs(Fraction(float(rz))) > abs(exact):
                rz = np.nextafter(rz, np.float32(0))
            assert got[t, 1, h] == rz
            assert got[t, 2, h] == _rn32(exact + Fraction(float(c[i])))
