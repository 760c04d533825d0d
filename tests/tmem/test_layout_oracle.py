"""Data-path layouts and the A-in-TMEM placement against CuTe's UMMA TMEM fragments (the oracle).

The oracle (tests/data/cute_tmem.json.gz, ``mma_frg``) evaluates the fragment types CUTLASS's
MMA traits declare (``tmem_frg_1sm`` / ``tmem_frg_2sm`` / ``tmem_frg_ws_1sm``) and lists, for
every element of the tile, its TMEM (lane, column) -- plus the CTA for ``cta_group::2`` and the
16-bit half for an A operand.
"""

import numpy as np
import pytest

from simtc.tmem import DataPathLayout, datapath_layout


def _records(cute_tmem, kind):
    return [e for e in cute_tmem["mma_frg"] if e["kind"] == kind]


def _id(e):
    ws = "-ws" if e["ws"] else ""
    return f"{e['layout']}-M{e['m']}-N{e['n']}-rows{e['rows']}-{e['alloc_mode']}-cg{e['cta_group']}{ws}"


def test_oracle_has_every_layout_letter(cute_tmem):
    assert {e["layout"] for e in _records(cute_tmem, "acc")} >= {"A", "B", "D", "E", "F", "G"}


@pytest.fixture
def acc_records(cute_tmem):
    return _records(cute_tmem, "acc")


def _check_acc(e):
    lay = datapath_layout(e["m"], e["n"], ws=e["ws"], cta_group=e["cta_group"])
    assert lay.letter == e["layout"], _id(e)
    got = np.array(e["map"], dtype=np.int64)                       # (rows, n, 2) or (rows, n, 3)
    rows = e["rows"]
    m, n = np.meshgrid(np.arange(rows), np.arange(e["n"]), indexing="ij")
    if e["cta_group"] == 2:
        cta, m_local = np.divmod(m, lay.rows)
        lane, col = lay.map(m_local, n)
        assert (got[..., 0] == cta).all(), _id(e)
        assert (got[..., 1] == lane).all() and (got[..., 2] == col).all(), _id(e)
        return
    # A tile of several M-atoms (rows > M): CUTLASS tiles in lanes first ("Interleaved": the second
    # M=64 atom at lane alignment 16), then in columns; "NonInterleaved" skips the +16 slot.
    block, m_local = np.divmod(m, e["m"])
    if lay.letter == "F" and e["alloc_mode"] == "Interleaved":
        l0, c0 = 16 * (block % 2), e["n"] * (block // 2)
    else:
        l0, c0 = 0, lay.columns * block
    lane, col = lay.map(m_local, n)
    lane = lane + l0
    assert (got[..., 0] == lane).all() and (got[..., 1] == col + c0).all(), _id(e)


def test_accumulator_fragments_match_cute(acc_records):
    assert len(acc_records) >= 20
    for e in acc_records:
        _check_acc(e)


def test_layout_f_second_atom_is_lane_alignment_16(acc_records):
    e = next(r for r in acc_records if r["layout"] == "F" and r["rows"] == 256 and r["alloc_mode"] == "Interleaved")
    got = np.array(e["map"])[64:128, :, 0]
    assert np.unique(got).tolist() == datapath_layout(64, e["n"], lane_align=16).lanes().tolist()


def test_layout_e_halves_match_cute(acc_records):
    for e in (r for r in acc_records if r["layout"] == "E"):
        got = np.array(e["map"])
        half = e["n"] // 2
        assert got[:, :half, 0].max() == 63 and got[:, half:, 0].min() == 64
        assert (got[:, :half, 1] == got[:, half:, 1]).all()


def test_a_operand_placement_matches_cute(cute_tmem):
    recs = _records(cute_tmem, "a_operand")
    assert recs
    for e in recs:
        got = np.array(e["map"], dtype=np.int64)                   # (rows, tile_k, 3): lane, col, half
        lay = datapath_layout(e["m"], e["n"]) if e["cta_group"] == 1 else None
        assert lay is not None
        m, k = np.meshgrid(np.arange(e["rows"]), np.arange(e["cols"]), indexing="ij")
        lanes = lay.a_lanes(m)[..., 0]                               # one copy for D / F (NonInterleaved)
        col, half = DataPathLayout.a_cell(k)                         # 16-bit: two per cell, even k low
        assert (got[..., 0] == lanes).all() and (got[..., 1] == col).all() and (got[..., 2] == half).all(), _id(e)
