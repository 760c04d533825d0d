"""TMEM addresses: taddr = lane << 16 | column, quadrants (PTX ISA 9.0 §9.7.16.1.1, §9.7.16.8.1)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simtc.errors import LaneQuadrantError, SimtcError, TmemAccessError
from simtc.tmem import TmemAddress, pack_taddr, quadrant_lanes, unpack_taddr


@given(st.integers(0, 127), st.integers(0, 511))
def test_pack_unpack_round_trip(lane, column):
    t = pack_taddr(lane, column)
    assert t == (lane << 16) | column
    assert unpack_taddr(t) == (lane, column)
    a = TmemAddress.from_taddr(t)
    assert (a.lane, a.column, int(a)) == (lane, column, t)


def test_vectorized_round_trip_all_cells():
    lane, col = np.meshgrid(np.arange(128), np.arange(512), indexing="ij")
    t = pack_taddr(lane, col)
    assert len(np.unique(t)) == 128 * 512
    l2, c2 = unpack_taddr(t)
    assert (l2 == lane).all() and (c2 == col).all()


def test_address_arithmetic_matches_ptx():
    a = TmemAddress(0, 400)
    assert int(a) + 8 == int(a.offset(columns=8))
    assert int(a) + (64 << 16) == int(a.offset(lanes=64))
    assert str(TmemAddress(64, 256)) == "lane 64, column 256 (taddr 0x00400100)"


@pytest.mark.parametrize("bad", [128 << 16, 512, 0x00800000, -1, 1 << 32])
def test_out_of_range_addresses_raise(bad):
    with pytest.raises(TmemAccessError) as e:
        unpack_taddr(bad)
    assert "taddr" in e.value.rule


@pytest.mark.parametrize("lane,col", [(128, 0), (0, 512), (-1, 0)])
def test_out_of_range_fields_raise(lane, col):
    with pytest.raises(SimtcError):
        TmemAddress(lane, col)


@pytest.mark.parametrize("warp,lanes", [(0, (0, 31)), (1, (32, 63)), (2, (64, 95)), (3, (96, 127)),
                                        (4, (0, 31)), (11, (96, 127))])
def test_quadrants_use_warp_mod_4(warp, lanes):
    assert quadrant_lanes(warp) == lanes


def test_negative_warp_raises():
    with pytest.raises(LaneQuadrantError):
        quadrant_lanes(-1)
