"""tcgen05.mma semantics: operands through descriptors / TMEM, D through the data-path layout."""

import numpy as np
import pytest

from simtc.errors import DescriptorError, ShapeError, SimtcError, TmemAccessError
from simtc.kernels.flashmla import P_COLUMN, read_p, replay_qk
from simtc.mma import InstrDescriptor
from simtc.mma.tcgen05 import tcgen05_mma
from simtc.numerics import tensor_core_mma
from simtc.numerics.cases import mma_operands
from simtc.smem import CanonicalLayout, SharedMemory
from simtc.tmem import TensorMemory, datapath_layout

T = CanonicalLayout("bf16", "K", "SW128", 128, 64)  # A at 0 (and a scratch A at 64 KiB); K slice 0 used
TB = CanonicalLayout("bf16", "K", "SW128", 256, 64)  # B at 16 KiB


def setup(a, b):
    sm = SharedMemory()
    sm.write_tile(T, np.pad(a, ((0, 128 - a.shape[0]), (0, 48))), 0)
    sm.write_tile(TB, np.pad(b, ((0, 256 - b.shape[0]), (0, 48))), 16384)
    tm = TensorMemory()
    tm.alloc(512)
    return sm, tm


def idesc(m, n, **kw):
    return InstrDescriptor(kind="f16", m=m, n=n, a_format="bf16", b_format="bf16", **kw)


def d_matrix(tm, layout, col0=0):
    lane, col = layout.full_map()
    return tm.cells[lane, col + col0].view(np.float32)


@pytest.mark.parametrize("m,n,ws,lane", [(128, 256, False, 0), (128, 8, False, 0), (64, 64, False, 0),
                                         (64, 128, False, 16), (64, 256, True, 0), (32, 128, True, 0),
                                         (128, 64, True, 0)])
def test_ss_equals_the_numerics_model(m, n, ws, lane):
    a, b, _ = mma_operands("wide", m, n, 16, seed=m + n)
    sm, tm = setup(a, b)
    layout = datapath_layout(m, n, ws=ws, lane_align=lane if m == 64 and not ws else 0)
    tcgen05_mma(tm, sm, d_taddr=lane << 16, a_desc=T.descriptor(), b_desc=TB.descriptor(start=16384),
                idesc=idesc(m, n), enable_input_d=False, ws=ws)
    assert np.array_equal(d_matrix(tm, layout), tensor_core_mma(a, b))
    # accumulate: D = A*B + D
    d0 = d_matrix(tm, layout).copy()
    tcgen05_mma(tm, sm, d_taddr=lane << 16, a_desc=T.descriptor(), b_desc=TB.descriptor(start=16384),
                idesc=idesc(m, n), enable_input_d=True, ws=ws)
    assert np.array_equal(d_matrix(tm, layout), tensor_core_mma(a, b, d0))


def _a_into_tmem(tm, sm, a, col, lanes128=None):
    """Put a 128-row A K-slice into TMEM columns col..col+7 with tcgen05.cp.128x256b (even k low)."""
    rows = a if lanes128 is None else lanes128
    sm.write_tile(T, np.pad(rows, ((0, 0), (0, 48))), 65536)
    tm.cp(col, sm, T.descriptor(start=65536), "128x256b")


def test_ts_layout_d_and_duplicated_e_match_ss():
    a, b, _ = mma_operands("normal", 128, 128, 16, seed=4)
    sm, tm = setup(a, b)
    _a_into_tmem(tm, sm, a, 256)
    tcgen05_mma(tm, sm, d_taddr=0, a_taddr=256, b_desc=TB.descriptor(start=16384), idesc=idesc(128, 128),
                enable_input_d=False)
    assert np.array_equal(d_matrix(tm, datapath_layout(128, 128)), tensor_core_mma(a, b))
    # Layout E with A duplicated in both lane halves (CUTLASS's intended use) = the SS result
    dup = np.concatenate([a[:64], a[:64]])
    _a_into_tmem(tm, sm, a, 264, lanes128=dup)
    tcgen05_mma(tm, sm, d_taddr=0, a_taddr=264, b_desc=TB.descriptor(start=16384), idesc=idesc(64, 128),
                enable_input_d=False, ws=True)
    assert np.array_equal(d_matrix(tm, datapath_layout(64, 128, ws=True)), tensor_core_mma(a[:64], b))


def test_ts_layout_e_with_different_halves_is_two_gemms():
    a, b, _ = mma_operands("normal", 128, 128, 16, seed=5)
    sm, tm = setup(a, b)
    _a_into_tmem(tm, sm, a, 256)  # lanes 0-63 hold A_lo = a[:64], lanes 64-127 hold A_hi = a[64:]
    tcgen05_mma(tm, sm, d_taddr=0, a_taddr=256, b_desc=TB.descriptor(start=16384), idesc=idesc(64, 128),
                enable_input_d=False, ws=True)
    d = d_matrix(tm, datapath_layout(64, 128, ws=True))
    assert np.array_equal(d[:, :64], tensor_core_mma(a[:64], b[:64]))  # lanes 0-63: D columns 0-63
    assert np.array_equal(d[:, 64:], tensor_core_mma(a[64:], b[64:]))  # lanes 64-127: D columns 64-127


def test_ts_layout_f_at_lane_16():
    a, b, _ = mma_operands("normal", 128, 64, 16, seed=6)
    sm, tm = setup(a, b)
    lanes = np.zeros((128, 16), np.float32)
    layout = datapath_layout(64, 64, lane_align=16)
    lanes[layout.a_lanes(np.arange(64))[:, 0]] = a[:64]
    _a_into_tmem(tm, sm, a, 256, lanes128=lanes)
    tcgen05_mma(tm, sm, d_taddr=16 << 16, a_taddr=16 << 16 | 256, b_desc=TB.descriptor(start=16384),
                idesc=idesc(64, 64), enable_input_d=False)
    assert np.array_equal(d_matrix(tm, layout), tensor_core_mma(a[:64], b))
    assert set(np.flatnonzero(tm.last_writer[:, 0] >= 0)) == set(range(16, 32)) | set(range(48, 64)) | set(
        range(80, 96)) | set(range(112, 128))


def test_disable_output_lane_and_negate():
    a, b, _ = mma_operands("normal", 128, 64, 16, seed=7)
    sm, tm = setup(a, b)
    tm.cells[:, :64] = np.float32(7.0).view(np.uint32)
    mask = (1 << 128) - 1 ^ ((1 << 64) - 1)  # lanes 64-127 disabled
    tcgen05_mma(tm, sm, d_taddr=0, a_desc=T.descriptor(), b_desc=TB.descriptor(start=16384),
                idesc=idesc(128, 64, negate_a=True), enable_input_d=False, disable_output_lane=mask)
    d = d_matrix(tm, datapath_layout(128, 64))
    assert np.array_equal(d[:64], tensor_core_mma(-a[:64], b))
    assert (d[64:] == 7.0).all()


def test_fp16_accumulator_in_the_low_half_of_each_cell():
    a, b, _ = mma_operands("normal", 128, 64, 16, dtype="fp16", seed=9)
    sm, tm = setup(a, b)
    sm.write_tile(CanonicalLayout("fp16", "K", "SW128", 128, 64), np.pad(a, ((0, 0), (0, 48))), 0)
    sm.write_tile(CanonicalLayout("fp16", "K", "SW128", 256, 64), np.pad(b, ((0, 192), (0, 48))), 16384)
    f16 = InstrDescriptor(kind="f16", m=128, n=64, a_format="fp16", b_format="fp16", d_format="fp16")
    for step in range(2):
        tcgen05_mma(tm, sm, d_taddr=0, a_desc=T.descriptor(), b_desc=TB.descriptor(start=16384), idesc=f16,
                    enable_input_d=step > 0)
    cells = tm.cells[:128, :64]
    assert not (cells >> 16).any()
    got = (cells & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float32)
    once = tensor_core_mma(a, b, dtype="fp16", d_dtype="fp16")
    assert np.array_equal(got, tensor_core_mma(a, b, once, dtype="fp16", d_dtype="fp16"))


def test_flashmla_dual_gemm_end_to_end():
    """Issue #4 must-show: 18 cp + 18 TS .ws M=64 N=128; P_lo, P_hi via tcgen05.ld.32x32b."""
    q = mma_operands("normal", 64, 64, 576, seed=1)[0]
    k = mma_operands("normal", 64, 64, 576, seed=2)[0]
    tm, _ = replay_qk(q, k)
    p_lo, p_hi = read_p(tm)
    exact = q.astype(np.float64) @ k.T.astype(np.float64)
    p = p_lo + p_hi  # the softmax warps' fp32 add (round to nearest)
    assert np.abs(p - exact).max() <= 1e-6 * np.abs(q).max() * np.abs(k).max() * 576
    for half, got in ((0, p_lo), (1, p_hi)):
        dims = np.concatenate([np.arange(512 + 32 * half, 544 + 32 * half)] +
                              [np.arange(128 * t + 64 * half, 128 * t + 64 * half + 64) for t in range(4)])
        want = tensor_core_mma(q[:, dims], k[:, dims])  # the same K chunks, in the kernel's order
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    assert tm.instructions[tm.last_writer[0, P_COLUMN]] == "QK NoPE k=15"


def test_illegal_combinations_name_the_rule():
    a, b, _ = mma_operands("normal", 128, 128, 16, seed=8)
    sm, tm = setup(a, b)
    bd = TB.descriptor(start=16384)
    with pytest.raises(DescriptorError, match="K-major"):
        tcgen05_mma(tm, sm, d_taddr=0, a_taddr=256, b_desc=bd, idesc=idesc(128, 128, a_major="MN"))
    with pytest.raises(DescriptorError, match="F32 accumulator"):
        tcgen05_mma(tm, sm, d_taddr=0, a_desc=T.descriptor(), b_desc=bd, idesc=0x04200480)
    with pytest.raises(ShapeError, match=r"\.ws N"):
        tcgen05_mma(tm, sm, d_taddr=0, a_desc=T.descriptor(), b_desc=bd, idesc=idesc(64, 96), ws=True)
    with pytest.raises(ShapeError, match=r"M=32 needs \.ws"):
        tcgen05_mma(tm, sm, d_taddr=0, a_desc=T.descriptor(), b_desc=bd, idesc=idesc(32, 64))
    with pytest.raises(TmemAccessError, match="lane 0 or 16"):
        tcgen05_mma(tm, sm, d_taddr=8 << 16, a_desc=T.descriptor(), b_desc=bd, idesc=idesc(64, 64))
    with pytest.raises(TmemAccessError, match="same lane alignment"):
        tcgen05_mma(tm, sm, d_taddr=16 << 16, a_taddr=256, b_desc=bd, idesc=idesc(64, 64))
    small = TensorMemory()
    small.alloc(32)
    with pytest.raises(TmemAccessError, match="unallocated columns"):
        tcgen05_mma(small, sm, d_taddr=0, a_desc=T.descriptor(), b_desc=bd, idesc=idesc(128, 64))
    with pytest.raises(SimtcError, match="exactly one A"):
        tcgen05_mma(tm, sm, d_taddr=0, b_desc=bd, idesc=idesc(128, 64))
    with pytest.raises(SimtcError, match=r"not an operand of tcgen05\.mma\.ws"):
        tcgen05_mma(tm, sm, d_taddr=0, a_desc=T.descriptor(), b_desc=bd, idesc=idesc(64, 64), ws=True,
                    disable_output_lane=1)
