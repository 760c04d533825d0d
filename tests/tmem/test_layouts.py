"""Data-path layouts A-G (PTX ISA 9.0 §9.7.16.10.5; CUTLASS tmem_frg atoms)."""

import numpy as np
import pytest

from simtc.errors import SimtcError, TmemShapeError
from simtc.tmem import DataPathLayout, datapath_layout

CASES = [
    dict(m=128, n=n) for n in (8, 64, 256)
] + [dict(m=64, n=n, lane_align=a) for n in (8, 128, 256) for a in (0, 16)] + [
    dict(m=m, n=n, ws=True) for m in (32, 64, 128) for n in (64, 128, 256)
] + [dict(m=256, n=n, cta_group=2) for n in (16, 256)] + [dict(m=128, n=n, cta_group=2) for n in (16, 128, 256)] + [
    dict(m=128, n=64, cta_group=2, sparse=True, lane_align=16)
]


def _id(c):
    return "-".join(f"{k}{v}" for k, v in c.items())


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_map_is_a_bijection_onto_the_footprint(case):
    lay = datapath_layout(**case)
    lane, col = lay.full_map()
    flat = lane.ravel() * lay.columns + col.ravel()
    assert len(np.unique(flat)) == lay.rows * lay.n                  # injective
    fp = lay.footprint()
    assert fp.sum() == lay.rows * lay.n                               # onto the footprint
    assert col.min() == 0 and col.max() == lay.columns - 1
    # inverse: every footprint cell gives back its element, every other cell gives -1
    L, C = np.meshgrid(np.arange(128), np.arange(lay.columns), indexing="ij")
    m, n = lay.inverse(L, C)
    assert ((m >= 0) == fp).all() and ((n >= 0) == fp).all()
    m2, n2 = np.meshgrid(np.arange(lay.rows), np.arange(lay.n), indexing="ij")
    assert (m[lane, col] == m2).all() and (n[lane, col] == n2).all()


@pytest.mark.parametrize("case,letter", [
    (dict(m=128, n=64), "D"), (dict(m=128, n=64, ws=True), "D"), (dict(m=64, n=64), "F"),
    (dict(m=64, n=64, ws=True), "E"), (dict(m=32, n=64, ws=True), "G"), (dict(m=256, n=64, cta_group=2), "A"),
    (dict(m=128, n=64, cta_group=2), "B"), (dict(m=128, n=64, cta_group=2, sparse=True), "C"),
])
def test_letters(case, letter):
    assert datapath_layout(**case).letter == letter


def test_layout_f_lane_alignment_16_lands_in_the_upper_half_quadrants():
    lay = datapath_layout(64, 128, lane_align=16)
    want = np.r_[16:32, 48:64, 80:96, 112:128]
    assert lay.lanes().tolist() == want.tolist()
    assert datapath_layout(64, 128).lanes().tolist() == (want - 16).tolist()
    # rows 16w..16w+15 sit in quadrant w, so warp w reads its 16 rows with one 16-lane load at 32w + 16
    lane, _ = lay.full_map()
    assert (lane[:, 0] // 32 == np.arange(64) // 16).all()
    # the two alignments interleave without overlap: two M=64 accumulators share columns
    assert not (lay.footprint() & datapath_layout(64, 128).footprint()).any()


@pytest.mark.parametrize("n", [64, 128, 256])
def test_layout_e_folds_n_halves_into_lane_halves(n):
    lay = datapath_layout(64, n, ws=True)
    assert lay.letter == "E" and lay.columns == n // 2
    lane, col = lay.full_map()
    assert lane[:, : n // 2].min() == 0 and lane[:, : n // 2].max() == 63
    assert lane[:, n // 2:].min() == 64 and lane[:, n // 2:].max() == 127
    assert (col[:, : n // 2] == col[:, n // 2:]).all()                  # same column offsets n mod N/2
    assert (lane[:, n // 2:] - lane[:, : n // 2] == 64).all()


def test_layout_g_quarters_and_layout_b_per_cta():
    g = datapath_layout(32, 256, ws=True)
    lane, _ = g.full_map()
    assert g.columns == 64 and [int(lane[:, 64 * q:64 * q + 64].min()) for q in range(4)] == [0, 32, 64, 96]
    b = datapath_layout(128, 128, cta_group=2)
    assert (b.rows, b.columns) == (64, 64)
    assert b.map(63, 127) == (127, 63)
    a = datapath_layout(256, 64, cta_group=2)
    assert (a.rows, a.columns, a.map(127, 63)) == (128, 64, (127, 63))


def test_flashmla_qk_and_pv_placement():
    """FlashMLA config.h lines 71-80 and 196-202 (9241ae3): P at column 400 (N=128), O two N=256 n-blocks at
    columns 0 and 128."""
    p = datapath_layout(64, 128, ws=True)
    assert p.map(5, 70) == (69, 6)                      # token 70 of head 5 -> lane 69, column 400 + 6
    o = datapath_layout(64, 256, ws=True)
    # n-block 0 at C0 = 0: lanes 0-63 hold V dims 0-127, lanes 64-127 dims 128-255
    lane, col = o.full_map()
    assert lane[:, :128].max() == 63 and lane[:, 128:].min() == 64 and col.max() == 127


def test_a_operand_lanes_and_packing():
    assert datapath_layout(64, 128, ws=True).a_lanes(np.arange(3)).tolist() == [[0, 64], [1, 65], [2, 66]]
    assert datapath_layout(32, 64, ws=True).a_lanes(1).tolist() == [1, 33, 65, 97]
    assert datapath_layout(128, 128, cta_group=2).a_lanes(10).tolist() == [10, 74]
    assert datapath_layout(64, 64, lane_align=16).a_lanes(16).tolist() == [48]
    assert datapath_layout(128, 64).a_lanes(100).tolist() == [100]
    col, slot = DataPathLayout.a_cell(np.arange(16))
    assert col.tolist() == [k // 2 for k in range(16)] and slot.tolist() == [k % 2 for k in range(16)]
    assert DataPathLayout.a_cell(5, bits=8) == (1, 1)


def test_documented_vs_inferred_labels():
    assert "[inferred]" in datapath_layout(64, 128, ws=True).a_duplication[1]
    assert "[inferred]" in datapath_layout(32, 128, ws=True).a_duplication[1]
    assert "[cutlass]" in datapath_layout(128, 128, cta_group=2).a_duplication[1]
    assert "[inferred]" not in datapath_layout(128, 128, cta_group=2).a_duplication[1]
    assert datapath_layout(64, 64).status.startswith("[doc]")
    assert datapath_layout(64, 64, ws=True).status.startswith("[cutlass]")
    assert datapath_layout(128, 64, cta_group=2, sparse=True).status.startswith("[open]")
    text = "\n".join(datapath_layout(64, 128, ws=True).describe())
    assert "D[:, 0:64] -> lanes 0-63" in text and "D[:, 64:128] -> lanes 64-127" in text and "[inferred]" in text


@pytest.mark.parametrize("case", [
    dict(m=64, n=12), dict(m=64, n=264), dict(m=32, n=64), dict(m=96, n=64), dict(m=64, n=32, ws=True),
    dict(m=64, n=256, ws=True, sparse=True), dict(m=256, n=64, ws=True), dict(m=128, n=24, cta_group=2),
    dict(m=64, n=64, cta_group=2), dict(m=128, n=64, lane_align=16), dict(m=64, n=64, lane_align=8),
    dict(m=64, n=64, cta_group=3),
])
def test_illegal_shapes_raise(case):
    with pytest.raises(TmemShapeError) as e:
        datapath_layout(**case)
    assert isinstance(e.value, SimtcError) and e.value.rule


def test_out_of_tile_coordinates_raise():
    with pytest.raises(TmemShapeError):
        datapath_layout(64, 64, ws=True).map(64, 0)


def _cute(shape, stride, x):
    """Evaluate one mode of a CuTe layout (colexicographic, hierarchical) on integers x."""
    flat_shape = shape if isinstance(shape, tuple) else (shape,)
    flat_stride = stride if isinstance(stride, tuple) else (stride,)
    out = np.zeros_like(x)
    for s, d in zip(flat_shape, flat_stride, strict=True):
        out += (x % s) * d
        x = x // s
    return out


# CUTLASS cute/atom/mma_traits_sm100.hpp, UMMA::tmem_frg / tmem_frg_ws atoms, in "virtual" TMEM
# addresses (lane stride 1, column stride 128): (M, N) -> lane + 128 * column.
CUTE_ATOMS = {
    "D": lambda n: ((128, 1), (n, 128)),                       # (128,N):(1,128)
    "A": lambda n: ((128, 1), (n, 128)),
    "F": lambda n: (((16, 4), (1, 32)), (n, 128)),             # ((16,4),N):((1,32),128)
    "E": lambda n: ((64, 1), ((n // 2, 2), (128, 64))),        # (64,(N/2,2)):(1,(128,64))
    "B": lambda n: ((64, 1), ((n // 2, 2), (128, 64))),
    "G": lambda n: ((32, 1), ((n // 4, 4), (128, 32))),        # (32,(N/4,4)):(1,(128,32))
}


@pytest.mark.parametrize("case", [c for c in CASES if not c.get("sparse")], ids=_id)
def test_maps_match_the_cute_atoms(case):
    lay = datapath_layout(**case)
    (s0, d0), (s1, d1) = CUTE_ATOMS[lay.letter](lay.n)
    m, n = np.meshgrid(np.arange(lay.rows), np.arange(lay.n), indexing="ij")
    virt = _cute(s0, d0, m) + _cute(s1, d1, n)
    lane, col = lay.full_map()
    # Layout F's second interleaved atom (TmemAllocMode::Interleaved) sits 16 lanes further
    assert (lane == virt % 128 + lay.lane_align).all() and (col == virt // 128).all()
