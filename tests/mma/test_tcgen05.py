"""tcgen05.mma semantics: operands through descriptors / TMEM, D through the data-path layout."""

import numpy as np
import pytest

from simtc.errors import DescriptorError, ShapeError, SimtcError, TmemAccessError
from simtc.mma import InstrDescriptor
from simtc.mma.tcgen05 import (
    mma_arithmetic,
    mma_read_accumulator,
    mma_read_operands,
    mma_write_back,
    plan_mma,
    tcgen05_mma,
)
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


def test_the_steps_compose_to_the_instruction():
    """plan -> operands -> accumulator -> arithmetic -> write-back is tcgen05_mma, bit for bit."""
    a, b, _ = mma_operands("normal", 128, 128, 16, seed=11)
    sm, tm = setup(a, b)
    _a_into_tmem(tm, sm, a, 256)
    sm2, tm2 = setup(a, b)
    _a_into_tmem(tm2, sm2, a, 256)
    kw = dict(d_taddr=0, a_taddr=256, b_desc=TB.descriptor(start=16384), idesc=idesc(64, 128), ws=True)
    for step in range(2):
        tcgen05_mma(tm, sm, enable_input_d=step > 0, **kw)
        plan = plan_mma(enable_input_d=step > 0, **kw)
        a_parts, bb = mma_read_operands(tm2, sm2, plan)
        c = mma_read_accumulator(tm2, plan)
        assert (c is None) == (step == 0) and a_parts.shape == (2, 64, 16) and bb.shape == (128, 16)
        mma_write_back(tm2, plan, mma_arithmetic(plan, a_parts, bb, c), "by steps")
    assert np.array_equal(tm.cells, tm2.cells)
    assert tm2.instructions[-1] == "by steps"


def test_plan_reads_no_memory_and_names_the_d_cells():
    plan = plan_mma(d_taddr=400, a_taddr=384, b_desc=TB.descriptor(), idesc=idesc(64, 128), ws=True)
    lane, col = plan.d_cells()
    assert plan.form == "TS" and plan.layout.letter == "E" and lane.shape == (64, 128)
    assert int(lane[5, 70]) == 69 and int(col[5, 70]) == 406  # D[5][70] of Layout E, from column 400
    assert plan.written().all()
    with pytest.raises(SimtcError, match="exactly one A"):
        plan_mma(d_taddr=0, b_desc=TB.descriptor(), idesc=idesc(64, 128))
