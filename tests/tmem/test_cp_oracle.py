"""tcgen05.cp row -> lane maps against CuTe's UTCCP traits (the oracle, ``utccp`` records).

Each oracle entry is (source row, 32-bit source chunk, TMEM lane, TMEM column) for every bit the
CuTe trait copies. For ``4x256b`` the oracle also lists CuTe's "TMEM refresh" coordinates of the
four copied rows (``src_logical_rows`` = 0, 32, 64, 96): copy row i lands in lane 32*i, which is
simtc's model [cutlass only].
"""

import numpy as np
import pytest

from simtc.tmem import CP_SHAPES


def test_every_shape_is_in_the_oracle(cute_tmem):
    assert {e["shape"] for e in cute_tmem["utccp"]} == set(CP_SHAPES)


@pytest.mark.parametrize("name", sorted(CP_SHAPES))
def test_row_to_lane_maps_match_cute(cute_tmem, name):
    cs = CP_SHAPES[name]
    e = next(x for x in cute_tmem["utccp"] if x["shape"] == name)
    assert e["op"] == cs.cutlass
    assert (e["src_rows"], e["src_chunks_per_row"]) == (cs.rows, cs.columns)
    got = {tuple(x) for x in e["entries"]}
    lanes = cs.lanes()
    want = {(r, k, int(lane), k) for r in range(cs.rows) for k in range(cs.columns) for lane in lanes[r]}
    assert got == want
    assert len(e["entries"]) == lanes.size * cs.columns
    if name == "4x256b":
        assert e["src_logical_rows"] == lanes[:, 0].tolist()


def test_multicast_copies_are_exact_duplicates(cute_tmem):
    for e in cute_tmem["utccp"]:
        per_row = {}
        for r, _ch, lane, _col in e["entries"]:
            per_row.setdefault(r, set()).add(lane)
        copies = {len(v) for v in per_row.values()}
        assert copies == {int(np.asarray(CP_SHAPES[e["shape"]].lanes()).shape[1])}
