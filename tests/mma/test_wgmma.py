"""wgmma (sm90): fragment map vs CUTLASS's CLayout_64xN, and execution through descriptors."""

import numpy as np
import pytest

from simtc.errors import ShapeError, SimtcError
from simtc.mma.wgmma import fragment_to_matrix, matrix_to_fragment, wgmma_fragment, wgmma_mma_async
from simtc.numerics.cases import mma_operands
from simtc.numerics.fdpa import tensor_core_mma
from simtc.smem import CanonicalLayout, SharedMemory, SwizzleMode


@pytest.mark.parametrize("n", [8, 16, 64, 256])
def test_fragment_matches_cutlass_clayout(n):
    # CLayout_64xN = ((4,8,4),(2,2,N/8)) : ((128,1,16),(64,8,512)) -> column-major index m + 64 n
    t = np.arange(128)[:, None]
    v = np.arange(n // 2)[None, :]
    idx = 128 * (t % 4) + (t // 4) % 8 + 16 * (t // 32) + 64 * (v % 2) + 8 * ((v // 2) % 2) + 512 * (v // 4)
    rows, cols = wgmma_fragment(n)
    assert np.array_equal(rows, idx % 64) and np.array_equal(cols, idx // 64)
    d = np.arange(64 * n).reshape(64, n)
    assert np.array_equal(fragment_to_matrix(matrix_to_fragment(d)), d)  # a bijection


MODES = [(m, s) for m in ("K", "MN") for s in ("INTERLEAVE", "SW32", "SW64", "SW128")]


@pytest.mark.parametrize("major,sw", MODES)
@pytest.mark.parametrize("n", [64, 128, 256])
def test_chain_of_four_matches_tensor_core_mma(major, sw, n):
    a, b, _ = mma_operands("wide", 64, n, 64, seed=n)
    sm = SharedMemory(arch="sm90")
    ta = CanonicalLayout("bf16", major, sw, 64, 64)
    tb = CanonicalLayout("bf16", major, sw, n, 64)
    sm.alloc("A", ta.nbytes, align=1024)
    sm.alloc("B", tb.nbytes, align=1024)
    sm.write_tile(ta, a, "A")
    sm.write_tile(tb, b, "B")
    acc = None
    for k in range(4):
        acc = wgmma_mma_async(sm, sm.descriptor(ta, "A", k_slice=k), sm.descriptor(tb, "B", k_slice=k), n=n,
                              a_major=major, b_major=major, acc=acc, scale_d=k > 0)
    want = tensor_core_mma(a, b, arch="sm90")
    assert np.array_equal(fragment_to_matrix(acc).view(np.uint32), want.view(np.uint32))


def test_descriptor_words_work_too():
    a, b, c = mma_operands("normal", 64, 64, 16, seed=3)
    sm = SharedMemory(arch="sm90")
    t = CanonicalLayout("bf16", "K", SwizzleMode.SW128, 64, 16 * 4)
    sm.write_tile(t, np.pad(a, ((0, 0), (0, 48))), 0)
    sm.write_tile(t, np.pad(b, ((0, 0), (0, 48))), 8192)
    acc = wgmma_mma_async(sm, 0x4000004000010000, 0x4000004000010000 | (8192 >> 4), n=64,
                          acc=matrix_to_fragment(c))
    assert np.array_equal(fragment_to_matrix(acc), tensor_core_mma(a, b, c, arch="sm90"))


def test_errors():
    sm = SharedMemory(arch="sm90")
    with pytest.raises(ShapeError, match="multiple of 8"):
        wgmma_fragment(12)
    with pytest.raises(SimtcError, match="sm_90a only"):
        wgmma_mma_async(SharedMemory(), 0, 0, n=64)
    with pytest.raises(SimtcError, match="not modelled"):
        wgmma_mma_async(sm, 0, 0, n=64, dtype="e4m3")
    with pytest.raises(ShapeError, match=r"\(128, N/2\)"):
        fragment_to_matrix(np.zeros((64, 4)))
