"""Number formats: exhaustive round trips, rounding modes, CUDA's reference behaviour, FlashMLA's dequant."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simtc.errors import DtypeError
from simtc.numerics.dequant import dequant_e4m3, ue8m0_to_bf16, v32_scale_to_ue8m0
from simtc.numerics.formats import decode_bits, encode_bits


@pytest.mark.parametrize("fmt,nbits", [("e4m3", 8), ("e5m2", 8), ("bf16", 16), ("fp16", 16)])
def test_every_code_round_trips(fmt, nbits):
    codes = np.arange(1 << nbits, dtype=np.uint16 if nbits == 16 else np.uint8)
    vals = decode_bits(codes, fmt)
    back = encode_bits(vals, fmt)
    finite = np.isfinite(vals)
    assert np.array_equal(back[finite], codes[finite])
    assert np.isnan(decode_bits(back[np.isnan(vals)], fmt)).all()


def _nearest_even(x: float, table: np.ndarray) -> float:
    """Reference RNE into the positive finite values of an fp8 table (satfinite)."""
    m = min(abs(x), table[-1])
    i = int(np.searchsorted(table, m))
    if i == 0 or table[min(i, len(table) - 1)] == m:
        return math.copysign(table[min(i, len(table) - 1)], x)
    lo, hi = table[i - 1], table[min(i, len(table) - 1)]
    pick = hi if (hi - m < m - lo) or (hi - m == m - lo and i % 2 == 0) else lo
    return math.copysign(pick, x)


@given(st.floats(width=32, allow_nan=False, allow_infinity=False), st.sampled_from(["e4m3", "e5m2"]))
def test_fp8_round_to_nearest_even_satfinite(x, fmt):
    pos = decode_bits(np.arange(0x7F if fmt == "e4m3" else 0x7C, dtype=np.uint8), fmt).astype(np.float64)
    got = float(decode_bits(encode_bits(np.float32(x), fmt), fmt))
    assert got == _nearest_even(float(np.float32(x)), pos)


def _fp8_by_search(x: np.ndarray, fmt: str) -> np.ndarray:
    """Reference fp8 encoding by value search (vectorized): the nearest of the format's finite values in float64
    (exact: every float32 and every fp8 value is a float64), ties to the even code, satfinite, NaN as CUDA
    (e4m3 0x7F; e5m2 0x7E | the two top mantissa bits), the sign bit kept."""
    top = 0x7E if fmt == "e4m3" else 0x7B
    table = decode_bits(np.arange(top + 1, dtype=np.uint8), fmt).astype(np.float64)
    nan = np.isnan(x)
    mag = np.minimum(np.where(nan, 0.0, np.abs(x.astype(np.float64, copy=True))), table[-1])
    hi = np.minimum(np.searchsorted(table, mag), top)
    lo = np.maximum(hi - 1, 0)
    d_hi, d_lo = table[hi] - mag, mag - table[lo]
    code = np.where((d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0)), hi, lo).astype(np.uint8)
    nan_code = 0x7F if fmt == "e4m3" else 0x7E | ((x.view(np.uint32) >> 21) & 0x3).astype(np.uint8)
    code = np.where(nan, nan_code, code).astype(np.uint8)
    return code | np.where(np.signbit(x), 0x80, 0).astype(np.uint8)


def _fp8_probe_inputs(fmt: str) -> np.ndarray:
    """Every float16 value; 2**21 random float32 bit patterns (NaN, Inf, subnormals included); every midpoint
    between neighbouring fp8 values (the ties) and the float32 values one ulp either side, both signs; the
    float32 extremes."""
    rng = np.random.default_rng(11)
    top = 0x7E if fmt == "e4m3" else 0x7B
    vals = decode_bits(np.arange(top + 1, dtype=np.uint8), fmt)
    mids = ((vals[:-1].astype(np.float64) + vals[1:]) / 2).astype(np.float32)
    mids = np.concatenate([mids, [vals[-1] * np.float32(1 + 2**-(4 if fmt == "e4m3" else 3))]]).astype(np.float32)
    near = np.concatenate([mids, np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(np.inf)), vals])
    special = np.array([0.0, np.inf, np.nan, 2.0**-149, 2.0**-126, np.finfo(np.float32).max], np.float32)
    x = np.concatenate([np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32),
                        rng.integers(0, 1 << 32, size=1 << 21, dtype=np.uint64).astype(np.uint32).view(np.float32),
                        near, special])
    return np.concatenate([x, -x])


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_fp8_bit_level_encoding_matches_value_search(fmt):
    x = _fp8_probe_inputs(fmt)
    with np.errstate(invalid="ignore"):
        want = _fp8_by_search(x, fmt)
    got = encode_bits(x, fmt)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (fmt, x[bad[:8]].tolist(), got[bad[:8]].tolist(), want[bad[:8]].tolist())
    assert encode_bits(np.float32(-0.0), fmt).shape == () and int(encode_bits(np.float32(-0.0), fmt)) == 0x80


def test_fp8_specials_follow_cuda():
    # cuda_fp8.hpp __nv_cvt_double_to_fp8 (satfinite): Inf -> max, NaN -> 0x7F (e4m3) / 0x7E (e5m2)
    assert encode_bits(np.float32([np.inf, -np.inf, np.nan]), "e4m3").tolist() == [0x7E, 0xFE, 0x7F]
    assert encode_bits(np.float32([np.inf, -np.inf, np.nan]), "e5m2").tolist() == [0x7B, 0xFB, 0x7E]
    assert decode_bits(np.uint8([0x7C, 0xFC]), "e5m2").tolist() == [np.inf, -np.inf]


def test_rz_modes():
    assert encode_bits(np.float32([1 + 2**-9, -(1 + 2**-9)]), "bf16", rounding="rz").tolist() == [0x3F80, 0xBF80]
    assert encode_bits(np.float32([1 + 2**-9]), "bf16").tolist() == [0x3F80]  # RNE ties to even here
    assert encode_bits(np.float32([1 + 3 * 2**-9]), "bf16").tolist() == [0x3F81]
    assert encode_bits(np.float32([70000.0, 1 + 2**-11]), "fp16", rounding="rz").tolist() == [0x7BFF, 0x3C00]
    with pytest.raises(DtypeError, match="no 'rz' rounding"):
        encode_bits(np.float32([1.0]), "e4m3", rounding="rz")


@given(st.floats(min_value=2.0**-126, max_value=2.0**127, width=32))
def test_ue8m0_rz_and_rp_bracket_the_value(x):
    lo = float(decode_bits(encode_bits(np.float32(x), "ue8m0", rounding="rz"), "ue8m0"))
    hi = float(decode_bits(encode_bits(np.float32(x), "ue8m0", rounding="rp"), "ue8m0"))
    assert lo <= x <= hi
    assert hi in (lo, 2 * lo)
    assert (hi == lo) == (math.frexp(x)[0] == 0.5)  # equal only for powers of two


def test_ue8m0_specials_follow_cuda():
    # cuda_fp8.hpp __nv_cvt_float_to_e8m0 (satfinite): NaN 0xFF, Inf/overflow 0xFE, below 2**-127 -> 0
    x = np.float32([np.nan, np.inf, 0.0, 2.0**-130, -4.0])
    assert encode_bits(x, "ue8m0", rounding="rz").tolist() == [0xFF, 0xFE, 0x00, 0x00, 129]
    assert ue8m0_to_bf16(np.uint8([0, 1, 127, 254, 255])).tolist() == [0x0040, 0x0080, 0x3F80, 0x7F00, 0x7FFF]
    assert decode_bits(np.uint8([0, 127, 254]), "ue8m0").tolist() == [2.0**-127, 1.0, 2.0**127]


def test_dequant_is_exact_for_every_value_and_in_range_scale():
    fp8 = np.arange(256, dtype=np.uint8)[:, None]
    scale = np.arange(100, 150, dtype=np.uint8)[None, :]  # 2**-27 .. 2**22
    got = decode_bits(dequant_e4m3(fp8, scale), "bf16").astype(np.float64)
    want = decode_bits(fp8, "e4m3").astype(np.float64) * np.ldexp(1.0, scale.astype(int) - 127)
    ok = np.isnan(want)
    assert np.array_equal(got[~ok], want[~ok]) and np.isnan(got[ok]).all()


def test_v32_scales_round_toward_zero():
    # a non-power-of-two fp32 scale loses its mantissa (PR #184's complaint): 0.75 -> 0.5
    assert decode_bits(v32_scale_to_ue8m0(np.float32([0.75, 0.5, 3.9])), "ue8m0").tolist() == [0.5, 0.5, 2.0]
