"""Byte images: bit-exact round trips, bf16 rounding, errors."""

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simtc.errors import ShapeError, SmemError
from simtc.numerics.formats import decode_bits, encode_bits
from simtc.smem import (
    CanonicalLayout,
    canonical_combinations,
    read_tile,
    read_tile_bits,
    write_tile,
    write_tile_bits,
)

COMBOS = canonical_combinations()


@st.composite
def tile_and_bits(draw):
    d, m, s = draw(st.sampled_from(COMBOS))
    am, ak = CanonicalLayout(d, m, s, 1024, 1024).atom_shape
    t = CanonicalLayout(d, m, s, am * draw(st.integers(1, 3)), ak * draw(st.integers(1, 3)))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2 ** (8 * t.elem_bytes), size=(t.rows, t.cols), dtype=np.uint64)
    return t, bits.astype(t.dtype.container)


@settings(max_examples=60)
@given(tile_and_bits(), st.integers(0, 5))
def test_bits_round_trip_exactly(tb, slot):
    t, bits = tb
    base = slot * 1024 * ((t.nbytes + 1023) // 1024)
    img = np.zeros(base + t.nbytes + 64, dtype=np.uint8)
    write_tile_bits(img, t, bits, base)
    assert np.array_equal(read_tile_bits(img, t, base), bits)
    # every tile byte was written, nothing outside it
    written = np.zeros_like(img, dtype=bool)
    written[base + t.offsets()[..., None] + np.arange(t.elem_bytes)] = True
    assert written[base:base + t.nbytes].all() and not written[:base].any()


def _bf16_reference(x: float) -> int:
    (u,) = struct.unpack("<I", struct.pack("<f", x))
    lsb = (u >> 16) & 1
    return ((u + 0x7FFF + lsb) >> 16) & 0xFFFF


@given(st.floats(width=32, allow_nan=False))
def test_bf16_rounds_to_nearest_even(x):
    assert int(encode_bits(np.float32(x), "bf16")) == _bf16_reference(x)


@given(st.floats(width=32, allow_nan=False, allow_infinity=False), st.sampled_from(["bf16", "fp16", "e4m3"]))
def test_float_round_trip_is_idempotent(x, d):
    once = decode_bits(encode_bits(np.float32(x), d), d)
    assert decode_bits(encode_bits(once, d), d) == once  # representable values survive exactly


def test_float_tile_round_trip_bf16():
    t = CanonicalLayout("bf16", "K", "SW128", 128, 64)
    rng = np.random.default_rng(0)
    x = decode_bits(encode_bits(rng.standard_normal((128, 64)).astype(np.float32), "bf16"), "bf16")
    img = np.zeros(t.nbytes, dtype=np.uint8)
    write_tile(img, t, x)
    assert np.array_equal(read_tile(img, t).view(np.uint32), x.view(np.uint32))
    # element (1, 0) sits at element offset 72 (the SW128 row-1 pattern), little-endian bf16
    assert int(img[144]) | (int(img[145]) << 8) == int(encode_bits(x[1, 0], "bf16"))


def test_image_errors():
    t = CanonicalLayout("bf16", "K", "SW128", 8, 64)
    with pytest.raises(SmemError, match="does not fit"):
        write_tile(np.zeros(512, np.uint8), t, np.zeros((8, 64)))
    with pytest.raises(SmemError, match="pattern would not start"):
        write_tile(np.zeros(4096, np.uint8), t, np.zeros((8, 64)), base=512)
    with pytest.raises(ShapeError, match="matrix shape"):
        write_tile(np.zeros(4096, np.uint8), t, np.zeros((8, 32)))
    with pytest.raises(SmemError, match="1-D uint8"):
        write_tile(np.zeros(4096, np.float32), t, np.zeros((8, 64)))
