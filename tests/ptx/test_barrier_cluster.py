"""``barrier.cluster.arrive`` / ``.wait`` (PTX ISA 9.0 §9.7.13.3) in a launch without cluster dimensions: a cluster
of one CTA, so the split barrier spans the CTA's non-exited threads (exited threads do not hold it up, §9.7.12.7).
CuTe's Hopper kernels call ``cute::cluster_sync()`` even when launched with a 1x1x1 cluster."""

from __future__ import annotations

import numpy as np
import pytest

import simtc.cuda as xp
from simtc.ptx.errors import KernelFault

ARCH = ("-arch=sm_90a",)

SRC = r"""
__device__ __forceinline__ void arrive() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void wait_() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }

// Each warp writes its slot, arrives, does independent work, waits, then reads every slot: the wait must see all.
extern "C" __global__ void exchange(int* out, int rounds) {
    __shared__ int slot[32];
    int w = threadIdx.x / 32, nw = blockDim.x / 32;
    int acc = 0;
    for (int r = 0; r < rounds; ++r) {
        if (threadIdx.x % 32 == 0) slot[w] = (r + 1) * 100 + w;
        arrive();
        acc += w;                      // work between the arrive and the wait
        wait_();
        for (int i = 0; i < nw; ++i) acc += slot[(w + i) % nw];
        arrive(); wait_();             // nobody overwrites a slot another warp still reads
    }
    out[threadIdx.x] = acc;
}

// Warps >= keep exit before the barrier: the rest must not wait for them.
extern "C" __global__ void early_exit(int* out, int keep) {
    if (threadIdx.x / 32 >= keep) return;
    arrive(); wait_();
    out[threadIdx.x] = 1;
}

extern "C" __global__ void wait_without_arrive(int* out) {
    wait_();
    out[threadIdx.x] = 1;
}

extern "C" __global__ void arrive_twice(int* out) {
    arrive(); arrive(); wait_();
    out[threadIdx.x] = 1;
}
"""


@pytest.fixture(scope="module")
def mod():
    return xp.RawModule(code=SRC, options=ARCH)


def _expected_exchange(nw: int, rounds: int) -> np.ndarray:
    out = np.zeros(32 * nw, np.int64)
    for t in range(32 * nw):
        w = t // 32
        acc = 0
        for r in range(rounds):
            acc += w
            acc += sum((r + 1) * 100 + (w + i) % nw for i in range(nw))
        out[t] = acc
    return out


@pytest.mark.parametrize("warps,rounds", [(1, 1), (4, 3), (7, 2)])
def test_split_cluster_barrier_orders_the_cta(mod, warps, rounds):
    out = xp.zeros(32 * warps, dtype=xp.int32)
    mod.get_function("exchange")((1,), (32 * warps,), (out, np.int32(rounds)))
    np.testing.assert_array_equal(out.get(), _expected_exchange(warps, rounds))


def test_exited_warps_do_not_hold_the_barrier(mod):
    out = xp.zeros(32 * 6, dtype=xp.int32)
    mod.get_function("early_exit")((2,), (32 * 6,), (out, np.int32(2)))
    np.testing.assert_array_equal(out.get(), np.r_[np.ones(64), np.zeros(128)])


def test_wait_without_arrive_is_a_fault(mod):
    with pytest.raises(KernelFault, match=r"without having arrived.*barrier.cluster.wait follows"):
        mod.get_function("wait_without_arrive")((1,), (64,), (xp.zeros(64, dtype=xp.int32),))


def test_second_arrive_before_wait_is_a_fault(mod):
    with pytest.raises(KernelFault, match=r"again before its barrier.cluster.wait.*alternate"):
        mod.get_function("arrive_twice")((1,), (64,), (xp.zeros(64, dtype=xp.int32),))
