"""Swizzle modes: bijections on their period, the known chunk patterns, errors."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simtc.errors import SimtcError, SwizzleError
from simtc.smem.swizzle import SwizzleMode, swizzle, swizzle_mode, unswizzle

MODES = list(SwizzleMode)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_bijection_on_every_period(mode):
    period = max(mode.period, 16)
    for base in (0, period, 7 * period, 1 << 17):
        a = base + np.arange(period)
        out = swizzle(a, mode)
        assert sorted(out.tolist()) == a.tolist()  # a permutation of the period's bytes


@given(st.sampled_from(MODES), st.integers(0, (1 << 18) - 1))
def test_involution_and_period_preserved(mode, addr):
    s = swizzle(addr, mode)
    assert unswizzle(s, mode) == addr
    p = max(mode.period, 16)
    assert s // p == addr // p  # never leaves its period
    # only chunk bits move: the byte within a chunk stays put
    assert s % mode.chunk_bytes == addr % mode.chunk_bytes


def test_known_chunk_patterns():
    # chunk c of atom row r lands at chunk c ^ f(r) (CUTLASS include/cute/swizzle.hpp, Swizzle<B,4,3>;
    # copy_traits_sm90_tma_swizzle.hpp lines 45-66 at 7107b05 map the same B to TMA's 32B/64B/128B modes)
    for mode, f in [(SwizzleMode.SW128, lambda r: r % 8), (SwizzleMode.SW64, lambda r: (r // 2) % 4),
                    (SwizzleMode.SW32, lambda r: (r // 4) % 2)]:
        rows = np.arange(8 * 128 // mode.width)
        for r in rows:
            line = (r * mode.width) // 128  # 128-byte line of the row
            for c in range(mode.width // 16):
                a = r * mode.width + c * 16
                phys = swizzle(a, mode)
                assert phys // 128 == line
                assert (phys % mode.width) // 16 == c ^ f(r)
    assert swizzle(0x1234, "INTERLEAVE") == 0x1234


def test_sw128_32b_moves_32_byte_granules():
    a = np.arange(0, 512, 32)
    out = swizzle(a, SwizzleMode.SW128_32B)
    assert out.tolist() == [0, 32, 64, 96, 160, 128, 224, 192, 320, 352, 256, 288, 480, 448, 416, 384]


def test_mode_table_matches_ptx_codes():
    assert {m.name: m.sm100_code for m in MODES} == {
        "INTERLEAVE": 0, "SW128_32B": 1, "SW128": 2, "SW64": 4, "SW32": 6}
    assert {m.name: m.sm90_code for m in MODES} == {
        "INTERLEAVE": 0, "SW128": 1, "SW64": 2, "SW32": 3, "SW128_32B": None}
    assert [m.alignment for m in MODES] == [16, 256, 512, 1024, 512]
    assert [m.atom_bytes for m in MODES] == [128, 256, 512, 1024, 512]


def test_errors_name_the_rule():
    with pytest.raises(SwizzleError, match="unknown swizzle mode"):
        swizzle_mode("SW16")
    with pytest.raises(SimtcError, match="integers"):
        swizzle(np.array([1.5]), "SW128")
    with pytest.raises(SimtcError, match="non-negative"):
        swizzle(-16, "SW128")
