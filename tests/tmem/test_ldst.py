"""tcgen05.ld / tcgen05.st: shapes, .num limits, the thread/register <-> cell map, st as ld's inverse."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simtc.errors import LaneQuadrantError, SimtcError, TmemAccessError, TmemShapeError
from simtc.tmem import NUMS, SHAPES, LdStOp, TensorMemory, all_ops

OPS = all_ops()


def test_there_are_74_load_forms():
    assert len(OPS) == 74
    per_shape = {s: sorted({op.num for op in OPS if op.shape.name == s}) for s in SHAPES}
    assert per_shape["16x256b"] == [1, 2, 4, 8, 16, 32]
    assert per_shape["16x128b"] == [1, 2, 4, 8, 16, 32, 64]
    assert per_shape["32x32b"] == per_shape["16x64b"] == per_shape["16x32bx2"] == list(NUMS)


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.cutlass)
def test_footprint_is_a_bijection(op):
    """Every (thread, register, half) names a distinct cell; the cells fill lanes x span exactly."""
    lane, col = op.cells()
    assert lane.min() == 0 and lane.max() == op.lanes - 1
    flat = lane.ravel() * op.span + col.ravel()
    assert len(np.unique(flat)) == flat.size == op.lanes * op.span == 32 * op.nregs * op.halves


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.cutlass)
def test_map_matches_the_ptx_formulas(op):
    """An independent, scalar transcription of the tcgen05.ld/st shapes (PTX ISA 9.0 §9.7.16.8.3; slow on
    purpose)."""
    lane, col = op.lane_offsets(), op.columns()
    name, imm = op.shape.name, op.imm
    for t in range(32):
        for i in range(op.nregs):
            if name == "32x32b":
                want = (t, i)
            elif name == "16x64b":
                want = (t // 4 + 8 * (t % 2), 2 * i + (t // 2) % 2)
            elif name == "16x128b":
                want = (t // 4 + 8 * (i % 2), 4 * (i // 2) + t % 4)
            elif name == "16x256b":
                want = (t // 4 + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * (t % 4) + i % 2)
            else:
                want = (t % 16, i)
            wl, wc = want
            phys = [2 * wc, 2 * wc + 1] if op.pack else [wc]
            if name == "16x32bx2" and t >= 16:
                phys = [p + imm for p in phys]
            assert (lane[t, i], col[t, i].tolist()) == (wl, phys)


def test_16x256b_x1_is_the_mma_sync_c_fragment():
    op = LdStOp("16x256b", 1)
    t = np.arange(32)
    lane, col = op.lane_offsets(), op.column_offsets()
    assert (lane[:, 0] == t // 4).all() and (lane[:, 2] == t // 4 + 8).all()
    assert (col[:, 0] == 2 * (t % 4)).all() and (col[:, 1] == 2 * (t % 4) + 1).all()
    assert (col[:, 2] == col[:, 0]).all()


def test_16x32bx2_immediate_defaults_follow_cutlass():
    assert LdStOp("16x32bx2", 4).imm == 4
    assert LdStOp("16x32bx2", 4, pack=True).imm == 8
    op = LdStOp("16x32bx2", 2, imm=10)
    assert op.columns()[16, :, 0].tolist() == [10, 11] and op.span == 12


@pytest.mark.parametrize("shape,num", [("16x256b", 64), ("16x256b", 128), ("16x128b", 128), ("32x32b", 3),
                                       ("32x32b", 256), ("16x64b", 0)])
def test_illegal_num_names_the_rule(shape, num):
    with pytest.raises(TmemShapeError) as e:
        LdStOp(shape, num)
    assert isinstance(e.value, SimtcError)
    assert ".num" in e.value.rule or "register-count limit" in e.value.rule
    assert "§9.7.16.8.3" in e.value.ref


def test_unknown_shape_and_misplaced_immediate():
    with pytest.raises(TmemShapeError):
        LdStOp("16x512b", 1)
    with pytest.raises(TmemShapeError) as e:
        LdStOp("32x32b", 1, imm=1)
    assert "16x32bx2" in e.value.rule


def _tm():
    tm = TensorMemory()
    tm.alloc(512)
    return tm


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.cutlass)
def test_st_then_ld_is_identity_on_registers(op):
    tm = _tm()
    rng = np.random.default_rng(op.nregs + 7 * op.pack)
    regs = rng.integers(0, 2**32, size=(32, op.nregs), dtype=np.uint32)
    base, c0 = 3 * 32 + (16 if op.lanes == 16 else 0), min(5, 512 - op.span)
    tm.st(base << 16 | c0, regs, op, warp=7)
    assert (tm.ld(base << 16 | c0, op, warp=3) == regs).all()
    # nothing outside the footprint was touched
    lane, col = op.cells()
    touched = np.zeros((128, 512), dtype=bool)
    touched[base + lane, c0 + col] = True
    assert (tm.last_writer[~touched] == -1).all() and (tm.last_writer[touched] == 0).all()


@pytest.mark.parametrize("op", [op for op in OPS if not op.pack], ids=lambda op: op.cutlass)
def test_ld_then_st_is_identity_on_cells(op):
    tm = _tm()
    rng = np.random.default_rng(op.nregs)
    tm.cells[:] = rng.integers(0, 2**32, size=(128, 512), dtype=np.uint32)
    before = tm.cells.copy()
    c0 = min(100, 512 - op.span)
    regs = tm.ld(32 << 16 | c0, op, warp=1)
    tm.cells[32:64, c0:] = 0
    tm.st(32 << 16 | c0, regs, op, warp=1)
    lane, col = op.cells()
    assert (tm.cells[32 + lane, c0 + col] == before[32 + lane, c0 + col]).all()


def test_packed_ld_takes_low_halves_and_unpacked_st_zero_extends():
    tm = _tm()
    op = LdStOp("32x32b", 1, pack=True)
    tm.cells[0, 0], tm.cells[0, 1] = 0xAAAA1234, 0xBBBB5678
    assert hex(int(tm.ld(0, op, warp=0)[0, 0])) == "0x56781234"
    tm.st(0, np.full((32, 1), 0xCAFEF00D, dtype=np.uint32), op, warp=0)
    assert (int(tm.cells[0, 0]), int(tm.cells[0, 1])) == (0xF00D, 0xCAFE)


@settings(max_examples=60, deadline=None)
@given(op=st.sampled_from(OPS), quadrant=st.integers(0, 3), upper=st.booleans(), col=st.integers(0, 256),
       seed=st.integers(0, 2**32 - 1))
def test_property_st_ld_round_trip(op, quadrant, upper, col, seed):
    tm = _tm()
    lane = 32 * quadrant + (16 if upper and op.lanes == 16 else 0)
    if col + op.span > 512:
        col = 512 - op.span
    regs = np.random.default_rng(seed).integers(0, 2**32, size=(32, op.nregs), dtype=np.uint32)
    tm.st(lane << 16 | col, regs, op, warp=quadrant + 4)
    assert (tm.ld(lane << 16 | col, op, warp=quadrant) == regs).all()


@pytest.mark.parametrize("warp,lane", [(0, 32), (1, 0), (2, 96), (5, 64), (3, 80)])
def test_warp_touching_another_quadrant(warp, lane):
    tm = _tm()
    with pytest.raises(LaneQuadrantError) as e:
        tm.ld(lane << 16, "32x32b", 1, warp=warp)
    assert isinstance(e.value, TmemAccessError)
    assert "lane-quadrant rule" in e.value.rule and "§9.7.16.8.1" in e.value.ref
    assert f"warp {warp} may access TMEM lanes" in str(e.value)


def test_16_lane_shapes_may_start_at_plus_16_but_not_elsewhere():
    tm = _tm()
    tm.ld(48 << 16, "16x256b", warp=1)
    with pytest.raises(LaneQuadrantError):
        tm.ld(56 << 16, "16x256b", warp=1)          # would run into lanes 64-71
    with pytest.raises(LaneQuadrantError) as e:
        tm.ld(40 << 16, "16x64b", warp=1)           # inside the quadrant, but not a modelled base
    assert "multiple of 16" in e.value.rule
    with pytest.raises(LaneQuadrantError):
        tm.ld(48 << 16, "32x32b", warp=1)


def test_load_beyond_the_allocation():
    tm = TensorMemory()
    tm.alloc(64)
    tm.ld(56, "32x32b", 8, warp=0)
    with pytest.raises(TmemAccessError) as e:
        tm.ld(60, "32x32b", 8, warp=0)              # columns 60-67
    assert e.value.rule == "TMEM accesses stay inside allocated columns"
    assert "unallocated columns 64-67" in str(e.value)
    with pytest.raises(TmemAccessError):
        tm.ld(0, "32x32b", 128, warp=0)             # 128 columns from 0, only 64 allocated


def test_store_value_shape_is_checked():
    tm = _tm()
    with pytest.raises(TmemShapeError):
        tm.st(0, np.zeros((32, 3), np.uint32), "16x256b", 1, warp=0)


def test_store_halves_must_not_overlap():
    tm = _tm()
    with pytest.raises(TmemShapeError):
        tm.st(0, np.zeros((32, 4), np.uint32), "16x32bx2", 4, warp=0, imm=2)


def test_flashmla_p_readback_warps_0_to_3():
    """FlashMLA 9241ae3 kernel.cuh L168-174: warps 0,1 load P_lo (cols 400-431), warps 2,3 load P_hi via .32x32b.x32."""
    from simtc.tmem import datapath_layout

    tm = _tm()
    lay = datapath_layout(64, 128, ws=True)
    d = np.arange(64 * 128, dtype=np.uint32).reshape(64, 128)
    lane, col = lay.full_map()
    tm.cells[lane, 400 + col] = d
    for w in range(4):
        regs = tm.ld((32 * w) << 16 | 400, "32x32b", 32, warp=w)
        rows = slice(32 * (w % 2), 32 * (w % 2) + 32)
        cols = slice(0, 32) if w < 2 else slice(64, 96)
        assert (regs == d[rows, cols]).all()
