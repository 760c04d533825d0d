"""Canonical operand tiles: golden offsets, bijections, inverse, errors, and pycute as an oracle."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simtc.errors import DtypeError, LayoutError, SimtcError, SwizzleError
from simtc.smem import CanonicalLayout, Major, canonical_combinations

COMBOS = [(d, m.value, s) for d, m, s in canonical_combinations()]


def test_golden_bf16_k_sw128_row1():
    t = CanonicalLayout("bf16", "K", "SW128", 64, 64)
    assert [t.offset(1, c) // 2 for c in range(0, 64, 8)] == [72, 64, 88, 80, 104, 96, 120, 112]
    assert t.offset(2, 0) == 288  # element 144: Swizzle<3,4,3> on bytes (CUTLASS include/cute/swizzle.hpp)


@st.composite
def tiles(draw):
    d, m, s = draw(st.sampled_from(COMBOS))
    am, ak = CanonicalLayout(d, m, s, 256, 256).atom_shape
    return CanonicalLayout(d, m, s, am * draw(st.integers(1, 4)), ak * draw(st.integers(1, 4)))


@given(tiles())
def test_offsets_are_a_bijection_onto_the_tile_bytes(t):
    off = t.offsets()
    assert off.shape == (t.rows, t.cols)
    assert np.all(off % t.elem_bytes == 0)
    assert np.array_equal(np.sort(off.ravel()), np.arange(0, t.nbytes, t.elem_bytes))


@given(tiles(), st.data())
def test_coords_inverts_offset(t, data):
    mn = data.draw(st.integers(0, t.rows - 1))
    k = data.draw(st.integers(0, t.cols - 1))
    b = t.offset(mn, k)
    assert t.coords(b) == (mn, k)
    assert t.coords(b + t.elem_bytes - 1) == (mn, k)  # any byte of the element


@pytest.mark.parametrize("d,m,s", COMBOS, ids=lambda x: getattr(x, "name", x))
def test_atom_shapes_match_cutlass(d, m, s):
    # CUTLASS Layout_{K,MN}_*_Atom: K-major (8, W/eb), MN-major (W/eb, 8); SW128_32B MN (128/eb, 4)
    t = CanonicalLayout(d, m, s, 512, 512)
    eb = t.elem_bytes
    want = (s.atom_rows, s.width // eb) if m == "K" else (s.width // eb, s.atom_rows)
    assert t.atom_shape == want


def test_tiles_repeat_along_mn_first():
    t = CanonicalLayout("bf16", "K", "SW128", 128, 128)  # 16 x 2 atoms of 8 x 64
    assert t.linear_offset(8, 0) == 1024  # next MN atom
    assert t.linear_offset(0, 64) == 16 * 1024  # next K atom after all 16 MN atoms
    t = CanonicalLayout("bf16", "MN", "SW64", 64, 32)  # atoms 32 (MN) x 8 (K)
    assert t.linear_offset(32, 0) == 512 and t.linear_offset(0, 8) == 1024


def test_pycute_oracle_agrees():
    """NVIDIA's pycute algebra: atom ⊗ column-major repetition, scaled to bytes, byte swizzle."""
    pycute = pytest.importorskip("pycute", reason="pycute ships in the nvidia-cutlass wheel (dev setup)")
    for d, m, s in COMBOS:
        for nm, nk in [(1, 1), (2, 3), (4, 1)]:
            t0 = CanonicalLayout(d, m, s, 1024, 1024)
            am, ak = t0.atom_shape
            t = CanonicalLayout(d, m, s, am * nm, ak * nk)
            eb = t.elem_bytes
            per_row = s.width // eb
            atom = (pycute.Layout((am, ak), (per_row, 1)) if m == "K" else
                    pycute.Layout((am, ak), (1, per_row)))
            prod = pycute.logical_product(atom, pycute.Layout((nm, nk)))  # (atom, reps) with reps col-major
            b, mm, ss = s.cute
            swz = pycute.Swizzle(b, mm, ss)
            got = np.array([[swz(eb * prod((i % am, j % ak), (i // am, j // ak))) for j in range(t.cols)]
                            for i in range(t.rows)])
            assert np.array_equal(got, t.offsets()), (d, m, s, nm, nk)


def test_illegal_tiles_raise_with_rule():
    with pytest.raises(LayoutError, match="whole number of 8x64"):
        CanonicalLayout("bf16", "K", "SW128", 12, 64)
    with pytest.raises(LayoutError, match="whole number"):
        CanonicalLayout("bf16", "MN", "SW128", 64, 4)
    with pytest.raises(LayoutError, match="MN-major only"):
        CanonicalLayout("bf16", "K", "SW128_32B", 64, 64)
    with pytest.raises(DtypeError, match="unknown element type"):
        CanonicalLayout("fp64", "K", "SW128", 64, 64)
    with pytest.raises(SwizzleError):
        CanonicalLayout("bf16", "K", "SW256", 64, 64)
    with pytest.raises(LayoutError, match="major"):
        CanonicalLayout("bf16", "X", "SW128", 64, 64)
    with pytest.raises(LayoutError, match="positive integer"):
        CanonicalLayout("bf16", "K", "SW128", 0, 64)
    t = CanonicalLayout("bf16", "K", "SW128", 8, 64)
    with pytest.raises(LayoutError, match="outside"):
        t.offset(8, 0)
    with pytest.raises(LayoutError, match="outside"):
        t.coords(1024)
    with pytest.raises(SimtcError, match="aligned"):
        t.descriptor(start=512)


def test_major_parsing():
    assert CanonicalLayout("bf16", "n", "SW32", 16, 16).major is Major.MN
