"""Module-variable initialisers as nvcc writes them: a float ``__device__`` variable's initialiser is a ``0f``/``0d``
literal (its exact bits), kept by the parser as an Imm and written by the executor bit for bit."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("cuda") is None,
                                reason="cuda-bindings (dev extra) not installed: no NVRTC")


def test_float_and_double_device_variables_keep_their_values():
    import simtc.cuda as xp

    src = r'''
__device__ float g = 1.5f;
__device__ double h = -2.25;
__device__ float t[3] = {0.1f, -0.0f, 3.0e38f};
extern "C" __global__ void k(float* out, double* o2, float* o3) {
  out[threadIdx.x] = g * threadIdx.x; o2[threadIdx.x] = h; if (threadIdx.x < 3) o3[threadIdx.x] = t[threadIdx.x];
}'''
    k = xp.RawKernel(src, "k")
    a, b, c = xp.zeros(4, dtype=np.float32), xp.zeros(4, dtype=np.float64), xp.zeros(3, dtype=np.float32)
    k((1,), (4,), (a, b, c))
    assert a.get().tolist() == [0.0, 1.5, 3.0, 4.5]
    assert b.get().tolist() == [-2.25] * 4
    want = np.array([0.1, -0.0, 3.0e38], np.float32)
    assert c.get().view(np.uint32).tolist() == want.view(np.uint32).tolist()
