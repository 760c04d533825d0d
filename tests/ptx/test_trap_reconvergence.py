"""A branch around an assert (``trap`` on one of its paths) reconverges where its other paths meet: ``trap`` aborts
the kernel, so it leads nowhere, not to the function's exit. FlashMLA's SM90 scheduler kernel has this shape (its
``FLASH_DEVICE_ASSERT`` inside a lane-0 region, then ``__syncwarp``)."""

from __future__ import annotations

import numpy as np
import pytest

import simtc.cuda as xp
from simtc.ptx.cfg import successors
from simtc.ptx.errors import KernelFault
from simtc.ptx.parser import parse

SRC = r"""
extern "C" __global__ void k(const int* in, int* out) {
    int v = in[threadIdx.x];
    if (threadIdx.x % 32 == 0) {
        if (v < 0) __trap();
        v += 100;
    }
    __syncwarp();
    v += __shfl_sync(0xffffffff, v, 0);
    out[threadIdx.x] = v;
}
"""


def test_a_lane0_region_with_an_assert_reconverges_before_syncwarp():
    mod = xp.RawModule(code=SRC, options=("-arch=sm_90a",))
    x = np.arange(64, dtype=np.int32)
    out = xp.zeros(64, dtype=xp.int32)
    mod.get_function("k")((1,), (64,), (xp.asarray(x), out))
    first = np.where(np.arange(64) % 32 == 0, x + 100, x)
    np.testing.assert_array_equal(out.get(), first + first[(np.arange(64) // 32) * 32])


def test_the_trap_still_aborts():
    mod = xp.RawModule(code=SRC, options=("-arch=sm_90a",))
    with pytest.raises(KernelFault, match="trap"):
        mod.get_function("k")((1,), (32,), (xp.asarray(np.full(32, -1, np.int32)), xp.zeros(32, dtype=xp.int32)))


def test_trap_has_no_successor():
    m = parse(".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k(){\n.reg .pred %p<2>;\n"
              "@%p1 trap;\ntrap;\nret;\n}\n")
    fn = m.functions["k"]
    ins, labels = fn.body, dict(fn.labels)
    guarded = next(n for n, i in enumerate(ins) if i.opcode == "trap" and i.guard is not None)
    plain = next(n for n, i in enumerate(ins) if i.opcode == "trap" and i.guard is None)
    assert successors(ins, labels, guarded) == (guarded + 1,)
    assert successors(ins, labels, plain) == ()
