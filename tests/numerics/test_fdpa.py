"""Tensor-core numerics: the vectorized model equals a literal scalar reading of the recipe."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simtc.errors import DtypeError, ShapeError, SimtcError
from simtc.numerics import decode_bits, encode_bits
from simtc.numerics.cases import DISTRIBUTIONS, mma_operands
from simtc.numerics.fdpa import ARCH_PARAMS, E_ZERO, fused_dot_add, tensor_core_mma

MIN_EXP = {"bf16": -126, "fp16": -14, "fp32": -126}


def _decompose(x: float, fmt: str):
    """(significand as Fraction, exponent) with 1 <= |s| < 2, subnormals at the minimum exponent."""
    if x == 0:
        return Fraction(0), E_ZERO  # only used as is for c; a zero product gets E_ZERO below
    m, e = math.frexp(x)
    s, e = Fraction(m) * 2, e - 1
    if e < MIN_EXP[fmt]:
        s, e = s * Fraction(2) ** (e - MIN_EXP[fmt]), MIN_EXP[fmt]
    return s, e


def scalar_fdpa(a, b, c: float, fmt: str, f: int = 25) -> float:
    """The fused dot-product-add of simtc.numerics.fdpa (MMA-Sim, arXiv 2511.10909; Khattak & Mikaitis, arXiv
    2512.07004), one output element, with exact rationals; returns the fp32 value (as float)."""
    if any(math.isnan(v) for v in (*a, *b, c)) or any(
            (math.isinf(x) and y == 0) or (math.isinf(y) and x == 0) for x, y in zip(a, b, strict=True)):
        return float("nan")
    infs = [math.copysign(1, x) * math.copysign(1, y) for x, y in zip(a, b, strict=True)
            if math.isinf(x) or math.isinf(y)]
    if math.isinf(c):
        infs.append(math.copysign(1, c))
    if infs:
        return float("nan") if len(set(infs)) > 1 else math.copysign(float("inf"), infs[0])
    terms = [_decompose(c, "fp32")]
    for x, y in zip(a, b, strict=True):
        (sx, ex), (sy, ey) = _decompose(x, fmt), _decompose(y, fmt)
        terms.append((Fraction(0), E_ZERO) if x == 0 or y == 0 else (sx * sy, ex + ey))
    big_e = max(e for _, e in terms)
    total = sum(math.trunc(s * Fraction(2) ** (f + e - big_e)) for s, e in terms)
    if total == 0:
        return 0.0
    v = Fraction(total) * Fraction(2) ** (big_e - f)
    sign = -1 if v < 0 else 1
    v = abs(v)
    e = max(math.floor(math.log2(v)) if v >= Fraction(2) ** -126 else -126, -126)
    while Fraction(2) ** (e + 1) <= v:
        e += 1
    while e > -126 and Fraction(2) ** e > v:
        e -= 1
    q = math.trunc(v / Fraction(2) ** (e - 23))  # 23 fraction bits, toward zero
    out = sign * float(q * Fraction(2) ** (e - 23)) if e < 128 else sign * float("inf")
    return 0.0 if out == 0 else float(np.float32(out)) if abs(out) < 2.0**128 else sign * float("inf")


def _bits(x):
    return np.asarray(x, dtype=np.float32).view(np.uint32)


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize("fmt", ["bf16", "fp16"])
def test_vectorized_equals_scalar_reference(dist, fmt):
    for seed in range(3):
        a, b, c = mma_operands(dist, 4, 5, 16, dtype=fmt, seed=seed)
        d = tensor_core_mma(a, b, c, dtype=fmt)
        for i in range(4):
            for j in range(5):
                want = scalar_fdpa([float(x) for x in a[i]], [float(x) for x in b[j]], float(c[i, j]), fmt)
                got = float(d[i, j])
                if math.isnan(want):
                    assert _bits(got) == 0x7FFFFFFF, (dist, seed, i, j)
                else:
                    assert _bits(got) == _bits(want), (dist, seed, i, j, got, want)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 0xFFFF), min_size=33, max_size=33), st.integers(0, 0xFFFFFFFF),
       st.sampled_from(["bf16", "fp16"]))
def test_raw_bit_patterns_match_scalar_reference(raw, cbits, fmt):
    x = decode_bits(np.array(raw[:32], dtype=np.uint16), fmt)
    a, b = x[:16].reshape(1, 16), x[16:].reshape(1, 16)
    c = np.array([[cbits]], dtype=np.uint32).view(np.float32)
    got = tensor_core_mma(a, b, c, dtype=fmt)[0, 0]
    want = scalar_fdpa([float(v) for v in a[0]], [float(v) for v in b[0]], float(c[0, 0]), fmt)
    if math.isnan(want):
        assert _bits(got) == 0x7FFFFFFF
    else:
        assert _bits(got) == _bits(want)


def test_a_zero_product_has_the_zero_exponent():
    # MMA-Sim 2.1.1: e = e_zero where s_a * s_b == 0. A zero row times B = 2**127 must not lift the
    # alignment to 2**-6 and wipe out c = -2**-149 (found against MMA-Sim's edge cases).
    a = np.zeros((1, 16), np.float32)
    b = np.full((1, 16), 2.0**127, np.float32)
    c = np.array([[0x80000001]], np.uint32).view(np.float32)
    assert tensor_core_mma(a, b, c)[0, 0].view(np.uint32) == 0x80000001


def test_documented_behaviours():
    one = np.ones((1, 16), np.float32)
    z = np.zeros((1, 16), np.float32)
    # exact cancellation and -0 inputs give +0
    assert _bits(tensor_core_mma(one, one, np.full((1, 1), -16.0, np.float32))[0, 0]) == 0
    assert _bits(tensor_core_mma(-z, z, np.full((1, 1), -0.0, np.float32))[0, 0]) == 0
    # the product significand is not renormalized: 1.5*1.5 = 2.25 keeps exponent 0
    a = np.full((1, 16), 1.5, np.float32)
    c = np.full((1, 1), 2.0**-24, np.float32)  # c's bits beyond 2**-25 relative to E=0 are truncated
    assert float(tensor_core_mma(a, a, c)[0, 0]) == 36.0
    # a subnormal fp32 result is produced (and truncated toward zero)
    t = np.zeros((1, 16), np.float32)
    t[0, 0] = 2.0**-70
    d = tensor_core_mma(t, t, None)[0, 0]
    assert d == np.float32(2.0**-140) and d != 0
    # NaN is canonical, inf propagates, inf - inf is NaN
    nan_in = one.copy()
    nan_in[0, 3] = np.nan
    assert _bits(tensor_core_mma(nan_in, one)[0, 0]) == 0x7FFFFFFF
    inf_in = one.copy()
    inf_in[0, 0] = np.inf
    assert tensor_core_mma(inf_in, one)[0, 0] == np.inf
    both = inf_in.copy()
    both[0, 1] = -np.inf
    assert _bits(tensor_core_mma(both, one)[0, 0]) == 0x7FFFFFFF


def test_chaining_order_is_per_instruction():
    a, b, c = mma_operands("wide", 8, 8, 64, seed=5)
    d16 = tensor_core_mma(a, b, c, instr_k=16)
    d = c
    for k in range(0, 64, 16):
        d = tensor_core_mma(a[:, k:k + 16], b[:, k:k + 16], d)
    assert np.array_equal(d16.view(np.uint32), d.view(np.uint32))
    d32 = c  # a different (hypothetical) blocking of 32 is a different result somewhere
    for k in range(0, 64, 32):
        d32 = fused_dot_add(a[:, k:k + 32], b[:, k:k + 32], d32)
    assert not np.array_equal(d16.view(np.uint32), d32.view(np.uint32))


def test_accuracy_against_float64():
    a, b, c = mma_operands("normal", 64, 128, 64, seed=2)
    d = tensor_core_mma(a, b, c).astype(np.float64)
    exact = a.astype(np.float64) @ b.T.astype(np.float64) + c
    assert np.max(np.abs(d - exact)) < 2e-5 * np.max(np.abs(exact))
    plain = (a @ b.T + c).view(np.uint32)
    agree = np.mean(plain == d.astype(np.float32).view(np.uint32))
    assert 0.2 < agree < 0.95  # plain fp32 matmul is not the tensor core


def test_errors():
    a = np.ones((2, 16), np.float32)
    with pytest.raises(DtypeError, match="'bf16' or 'fp16'"):
        tensor_core_mma(a, a, dtype="e4m3")
    with pytest.raises(DtypeError, match="not exactly representable in bf16"):
        tensor_core_mma(a + np.float32(2.0**-12), a)
    with pytest.raises(DtypeError, match="float32"):
        tensor_core_mma(a.astype(np.float64), a)
    with pytest.raises(ShapeError, match="whole number of instructions"):
        tensor_core_mma(np.ones((2, 24), np.float32), np.ones((2, 24), np.float32))
    with pytest.raises(ShapeError, match="same K"):
        tensor_core_mma(a, np.ones((2, 32), np.float32))
    with pytest.raises(ShapeError, match="C must be"):
        tensor_core_mma(a, a, np.zeros((3, 2), np.float32))
    with pytest.raises(SimtcError, match="unknown architecture"):
        tensor_core_mma(a, a, arch="sm80")
    assert encode_bits(np.float32(1.0), "bf16") == 0x3F80


# ------------------------------------------------------------------------------------------------------------
# the paths of fused_dot_add: exact sum where no term is cut, float32 terms, the float64 arithmetic
# ------------------------------------------------------------------------------------------------------------

def _few_bits(rng, shape, lo: int, hi: int, zeros: float = 0.1) -> np.ndarray:
    """Values with at most 4 significant bits (odd 1..15 times 2**[lo, hi)), some zero: exact in bf16 and fp16."""
    v = rng.choice(np.arange(-15, 16, 2), size=shape) * 2.0 ** rng.integers(lo, hi, size=shape)
    v[rng.random(shape) < zeros] = 0.0
    return v.astype(np.float32)


def _paths(a, b, c, fmt, out="fp32"):
    from simtc.numerics import fdpa

    e_zero = E_ZERO if out == "fp32" else ARCH_PARAMS["sm90"].e_zero_f16
    bits = np.concatenate((a, b)).view(np.int32) & 0x7FFFFFFF
    finite = (bits >> 23).max() < 255 and np.isfinite(c).all()
    whole = fdpa._untruncated(bits, bits >> 23, a.shape[0], c, fmt, 25, e_zero, out) if finite else None
    general = fdpa._fdpa_general(a, b, c, fmt, 25, e_zero, out)
    return whole, general


@pytest.mark.parametrize("fmt", ["bf16", "fp16"])
def test_untruncated_outputs_equal_scalar_reference(fmt):
    """Few-bit operands keep every term whole: fused_dot_add takes the exact sum there, and it is the recipe's."""
    rng = np.random.default_rng(7)
    a, b = _few_bits(rng, (6, 16), -4, 2), _few_bits(rng, (7, 16), -4, 2)
    c = _few_bits(rng, (6, 7), -6, 4)
    whole, general = _paths(a, b, c, fmt)
    assert whole.all()  # the shortcut is what this test exercises
    d = fused_dot_add(a, b, c, fmt=fmt)
    assert np.array_equal(_bits(d), _bits(general))
    for i in range(6):
        for j in range(7):
            want = scalar_fdpa([float(x) for x in a[i]], [float(x) for x in b[j]], float(c[i, j]), fmt)
            assert _bits(d[i, j]) == _bits(want), (i, j)


@pytest.mark.parametrize("fmt", ["bf16", "fp16"])
@pytest.mark.parametrize("drop", [25, 26])
def test_a_term_at_the_window_edge(fmt, drop):
    """1 + 2**-drop * (1 + 2**-3): at drop = 25 - 3 the term's last bit is the window's last (kept); one further
    and it is cut. The check must see the difference (and the scalar reading agrees)."""
    e = -(drop - 3)  # the small term's exponent: its lowest bit at 2**(e - 3)
    a = np.zeros((1, 16), np.float32)
    b = np.zeros((1, 16), np.float32)
    a[0, 0], b[0, 0] = 1.0, 1.0
    a[0, 1], b[0, 1] = 2.0 ** (e // 2) * 1.125, 2.0 ** (e - e // 2)
    c = np.zeros((1, 1), np.float32)
    whole, _ = _paths(a, b, c, fmt)
    d = fused_dot_add(a, b, c, fmt=fmt)
    want = scalar_fdpa([float(x) for x in a[0]], [float(x) for x in b[0]], 0.0, fmt)
    assert _bits(d[0, 0]) == _bits(want)
    # E = 0 (the product 1 * 1); the window ends at 2**-25; the term's lowest bit is 2**(e - 3)
    assert bool(whole[0, 0]) == (e - 3 >= -25)


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize(("fmt", "out"), [("bf16", "fp32"), ("fp16", "fp32"), ("fp16", "fp16")])
def test_fast_paths_equal_the_float64_arithmetic(dist, fmt, out):
    """fused_dot_add (exact sum / float32 terms / float64) equals the term-by-term float64 arithmetic, bit for bit,
    on every operand distribution, with rows of few-bit operands mixed in (some rows exact sums, some not)."""
    rng = np.random.default_rng(DISTRIBUTIONS.index(dist))
    for seed in range(3):
        a, b, c = mma_operands(dist, 24, 40, 16, dtype=fmt, seed=seed)
        if out == "fp16":
            with np.errstate(over="ignore"):
                c = c.astype(np.float16).astype(np.float32)
        if seed == 1:  # half the rows few-bit, the accumulator too
            a[::2] = _few_bits(rng, a[::2].shape, -3, 2)
            b[:] = _few_bits(rng, b.shape, -3, 2)
            c[::2] = _few_bits(rng, c[::2].shape, -3, 3)
        _, general = _paths(a, b, c, fmt, out)
        d = fused_dot_add(a, b, c, fmt=fmt, out=out, params=ARCH_PARAMS["sm90"])
        assert np.array_equal(_bits(d), _bits(general)), (dist, seed)
