"""simtc.ptx.alu's floating-point arithmetic against exact rational arithmetic.

The reference here is independent of simtc: each result is computed with :class:`fractions.Fraction` and rounded
into the format by integer arithmetic (:func:`ref_round`), in the four IEEE directions, with gradual underflow,
overflow and the IEEE 754-2019 sign rules for zero sums (section 6.3). The operands are drawn to hit the hard
cases: results on and next to the format's midpoints (the double-rounding cases), in the subnormal range, at
the overflow threshold, and sums that cancel.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from simtc.ptx import alu
from simtc.ptx.ir import Instruction, Reg

# (precision p, smallest normal exponent, largest finite value's exponent) of each format
FORMATS = {"f16": (11, -14, 15), "bf16": (8, -126, 127), "f32": (24, -126, 127), "f64": (53, -1022, 1023)}


def ref_round(x: Fraction, fmt: str, rnd: str) -> float:
    """``x`` (non-zero) rounded into ``fmt`` in direction ``rnd``, as a float (its value; +-Inf on overflow)."""
    p, emin, emax = FORMATS[fmt]
    neg = x < 0
    a = -x if neg else x
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    q = max(e, emin) - (p - 1)  # the quantum's exponent (fixed below the normal range)
    scaled = a / Fraction(2) ** q
    n, rem = divmod(scaled.numerator, scaled.denominator)
    frac = Fraction(rem, scaled.denominator)
    away = {"rn": frac > Fraction(1, 2) or (frac == Fraction(1, 2) and n % 2 == 1),
            "rz": False, "rp": frac > 0 and not neg, "rm": frac > 0 and neg}[rnd]
    n += away
    v = Fraction(n) * Fraction(2) ** q
    top = (2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax
    if v > top:
        to_inf = rnd == "rn" or (rnd == "rp" and not neg) or (rnd == "rm" and neg)
        v = None if to_inf else top
    f = float("inf") if v is None else float(v)
    return -f if neg else f


def exact_result(vals: list[float], kind: str, fmt: str, rnd: str) -> float:
    """The correctly rounded result of add/sub/mul/fma on finite operands (a float carrying the format's value)."""
    fr = [Fraction(v) for v in vals]
    if kind == "mul":
        x = fr[0] * fr[1]
        if x == 0:
            return -0.0 if (np.signbit(vals[0]) != np.signbit(vals[1])) else 0.0
        return ref_round(x, fmt, rnd)
    if kind == "fma":
        pz = fr[0] * fr[1]
        p_neg = np.signbit(vals[0]) != np.signbit(vals[1])
        q, q_neg = fr[2], bool(np.signbit(vals[2]))
    else:
        pz, p_neg = fr[0], bool(np.signbit(vals[0]))
        q = -fr[1] if kind == "sub" else fr[1]
        q_neg = bool(np.signbit(vals[1])) != (kind == "sub")
    x = pz + q
    if x != 0:
        return ref_round(x, fmt, rnd)
    if pz == 0 and q == 0 and p_neg == q_neg:
        return -0.0 if p_neg else 0.0
    return -0.0 if rnd == "rm" else 0.0


def _np(fmt):
    return {"f16": np.float16, "f32": np.float32, "f64": np.float64}.get(fmt)


def to_bits(vals: np.ndarray, fmt: str) -> np.ndarray:
    """float64 values representable in ``fmt`` as its bits (others truncated, or Inf past the range)."""
    with np.errstate(over="ignore"):
        return _to_bits(vals, fmt)


def _to_bits(vals: np.ndarray, fmt: str) -> np.ndarray:
    if fmt == "bf16":
        return (vals.astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    return vals.astype(_np(fmt)).view({"f16": np.uint16, "f32": np.uint32, "f64": np.uint64}[fmt])


def from_bits(bits: np.ndarray, fmt: str) -> np.ndarray:
    if fmt == "bf16":
        return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    return bits.view(_np(fmt)).astype(np.float64)


def operands(fmt: str, kind: str, n: int, seed: int) -> list[np.ndarray]:
    """Random finite operands of ``fmt`` (as float64 values) built to land on the hard cases."""
    rng = np.random.default_rng(seed)
    p, emin, emax = FORMATS[fmt]

    def draw(lo, hi, m):
        e = rng.integers(lo, hi, m)
        mant = rng.integers(2 ** (p - 1), 2**p, m).astype(np.float64)
        v = np.ldexp(mant, e - (p - 1)) * rng.choice([-1.0, 1.0], m)
        sub = rng.random(m) < 0.05  # subnormal operands
        v = np.where(sub, np.ldexp(rng.integers(0, 2 ** (p - 1), m).astype(np.float64), emin - (p - 1)), v)
        return v

    span = min(emax, 40) if fmt != "f16" else emax
    a = draw(-span, span, n)
    b = draw(-span, span, n)
    if kind in ("add", "sub"):
        # b close to -a or a few binades below a: cancellation and tails that land next to midpoints
        shift = rng.integers(0, p + 3, n)
        near = -a * (1 + np.ldexp(rng.integers(-4, 5, n).astype(np.float64), -p))
        b = np.where(rng.random(n) < 0.3, np.ldexp(a, -shift) * rng.choice([-1.0, 1.0], n), b)
        b = np.where(rng.random(n) < 0.2, near, b)
        return [from_bits(to_bits(v, fmt), fmt) for v in (a, b)]
    if kind == "mul":
        # products near the top and bottom of the range
        big = rng.random(n) < 0.1
        a = np.where(big, np.ldexp(np.abs(a), emax // 2 + 1 - np.floor(np.log2(np.abs(a) + 1e-300)).astype(int)), a)
        tiny = rng.random(n) < 0.1
        b = np.where(tiny, np.ldexp(b, emin - 2), b)
        return [from_bits(to_bits(v, fmt), fmt) for v in (a, b)]
    c = draw(-span, span, n)
    prod = a * b
    # c cancelling most of the product: the result's tail is the product's low bits
    c = np.where(rng.random(n) < 0.4, -prod * (1 + np.ldexp(rng.integers(-3, 4, n).astype(np.float64), -p)), c)
    # sums that fall on a midpoint of the format in float64 with a tail below float64's precision: a*b =
    # 1 - 2**-2u (a = 1 + 2**-u, b = 1 - 2**-u), c = an even or odd multiple of the format's ulp at 2**p
    u = rng.integers(p // 2 + 1, p, n)
    i = rng.integers(-8, 8, n)
    j = rng.integers(-8, 8, n)
    sg = rng.choice([-1.0, 1.0], n)
    ha = np.ldexp(1 + np.ldexp(1.0, -u), i) * sg
    hb = np.ldexp(1 - np.ldexp(1.0, -u), j)
    hc = np.ldexp(2.0 ** p + 2 * rng.integers(0, 3, n), i + j) * sg
    tie = rng.random(n) < 0.25
    a, b, c = np.where(tie, ha, a), np.where(tie, hb, b), np.where(tie, hc, c)
    ops = [from_bits(to_bits(v, fmt), fmt) for v in (a, b, c)]
    return ops


CASES = [(fmt, kind, rnd) for fmt in ("f16", "bf16", "f32") for kind in ("add", "sub", "mul", "fma")
         for rnd in ("rn", "rz", "rm", "rp")]


@pytest.mark.parametrize(("fmt", "kind", "rnd"), CASES, ids=[f"{k}.{r}.{f}" for f, k, r in CASES])
def test_small_float_arith_is_correctly_rounded(fmt, kind, rnd):
    n = 600
    ops = operands(fmt, kind, n, seed=hash((fmt, kind, rnd)) & 0xFFFF)
    finite = np.all([np.isfinite(o) for o in ops], axis=0)
    ops = [o[finite] for o in ops]
    name = f"{kind}.{rnd}.{fmt}"
    nsrc = len(ops)
    op = alu.compile(Instruction(name, (Reg("%d"), *(Reg(f"%s{i}") for i in range(nsrc)))))
    (got,) = op.fn(*(to_bits(o, fmt) for o in ops))
    want = np.array([exact_result([float(o[i]) for o in ops], kind, fmt, rnd) for i in range(ops[0].size)])
    want_bits = to_bits(want, fmt)
    bad = np.flatnonzero(got != want_bits)
    assert bad.size == 0, [(tuple(float(o[i]) for o in ops), hex(int(got[i])), hex(int(want_bits[i])))
                           for i in bad[:5]]


@pytest.mark.parametrize("kind", ["add", "sub", "mul", "fma"])
@pytest.mark.parametrize("fmt", ["f16", "bf16"])
def test_packed_halves_round_each_element(fmt, kind):
    """add/sub/mul/fma.rn.f16x2/bf16x2: each half as the scalar operation (low half = element 0), NaNs included."""
    n = 256
    ops = operands(fmt, kind, 2 * n, seed=7)
    bits = [to_bits(o, fmt) for o in ops]
    nan = {"f16": 0x7E00, "bf16": 0x7FC0}[fmt]
    bits[0][:6] = [nan, 0, nan, 0x8000 | nan, 1, 0]
    packed = [b[0::2].astype(np.uint32) | (b[1::2].astype(np.uint32) << np.uint32(16)) for b in bits]
    regs = (Reg("%d"), *(Reg(f"%s{i}") for i in range(len(ops))))
    vec = alu.compile(Instruction(f"{kind}.rn.{fmt}x2", regs))
    one = alu.compile(Instruction(f"{kind}.rn.{fmt}", regs))
    (got,) = vec.fn(*packed)
    (lo,) = one.fn(*(b[0::2] for b in bits))
    (hi,) = one.fn(*(b[1::2] for b in bits))
    assert np.array_equal(got, lo.astype(np.uint32) | (hi.astype(np.uint32) << np.uint32(16)))


def _fma64_operands(n: int, seed: int) -> list[np.ndarray]:
    with np.errstate(all="ignore"):
        return _fma64_draw(n, seed)


def _fma64_draw(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    a = np.ldexp(rng.random(n) + 1, rng.integers(-60, 60, n)) * rng.choice([-1.0, 1.0], n)
    b = np.ldexp(rng.random(n) + 1, rng.integers(-60, 60, n)) * rng.choice([-1.0, 1.0], n)
    c = np.ldexp(rng.random(n) + 1, rng.integers(-130, 130, n)) * rng.choice([-1.0, 1.0], n)
    prod = a * b
    k = rng.integers(0, 6, n)
    ulp = np.spacing(np.abs(prod))
    # c = -RN(a*b) (+ a few ulps, + half ulps): the result is the product's rounding error, or lies on or next to a
    # midpoint of the sum
    c = np.where(k == 0, -prod, c)
    c = np.where(k == 1, -prod + ulp * rng.integers(-3, 4, n), c)
    c = np.where(k == 2, np.ldexp(np.sign(prod) * ulp, -1) * rng.choice([-1.0, 1.0, 3.0], n), c)
    # operands of few bits: a*b exact to 53 bits, c a half ulp of it -> exact midpoints, tails of either sign
    a2 = np.ldexp(rng.integers(1, 2**26, n).astype(np.float64), rng.integers(-30, 30, n))
    b2 = np.ldexp(rng.integers(1, 2**27, n).astype(np.float64), rng.integers(-30, 30, n))
    p2 = a2 * b2
    c2 = np.ldexp(np.spacing(p2), -1) * rng.choice([-1.0, 1.0], n) * (1 + np.ldexp(1.0, -50) * rng.integers(-1, 2, n))
    mix = k == 3
    a, b, c = np.where(mix, a2, a), np.where(mix, b2, b), np.where(mix, c2, c)
    # the range's edges: subnormal results, products near 2**-968 and beyond 2**1000, zeros
    edge = k == 4
    sel = rng.integers(0, 5, n)
    a = np.where(edge & (sel == 0), np.ldexp(a, -480), a)
    b = np.where(edge & (sel == 0), np.ldexp(b, -500), b)
    a = np.where(edge & (sel == 1), np.ldexp(np.abs(a), 500), a)
    b = np.where(edge & (sel == 1), np.ldexp(np.abs(b), 500), b)
    c = np.where(edge & (sel == 1), -(a * b) * 0.75, c)
    a = np.where(edge & (sel == 2), 0.0 * a, a)
    c = np.where(edge & (sel == 3), 0.0, c)
    a = np.where(edge & (sel == 4), np.ldexp(a, -520), a)
    b = np.where(edge & (sel == 4), np.ldexp(b, -520), b)
    c = np.where(edge & (sel == 4), np.ldexp(c, -1040), c)
    # products just below a rounding boundary (uh = 2**k exactly, the error term just under half an ulp) added to
    # a c whose sum with uh ties: only the error term breaks the tie (the case rounding to odd exists for)
    hard = k == 5
    i = rng.integers(-40, 40, n)
    j = rng.integers(-40, 40, n)
    ha = np.ldexp(1 - np.ldexp(1.0, -53), i) * rng.choice([-1.0, 1.0], n)
    hb = np.ldexp(1 + np.ldexp(rng.integers(1, 3, n).astype(np.float64), -52), j)
    hc = np.ldexp(rng.choice([1.0, 3.0, -1.0, -3.0], n), 53 + i + j + rng.integers(0, 2, n)) \
        + np.ldexp(rng.integers(-2, 3, n).astype(np.float64), i + j)
    a, b, c = np.where(hard, ha, a), np.where(hard, hb, b), np.where(hard, hc, c)
    return [a, b, c]


def test_fma_f64_is_correctly_rounded():
    """fma.rn.f64 (and the directed ones) against the exact a*b + c."""
    a, b, c = _fma64_operands(3000, seed=11)
    ok = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
    a, b, c = a[ok], b[ok], c[ok]
    for rnd in ("rn", "rz", "rm", "rp"):
        op = alu.compile(Instruction(f"fma.{rnd}.f64", (Reg("%d"), Reg("%a"), Reg("%b"), Reg("%c"))))
        (got,) = op.fn(*(v.view(np.uint64) for v in (a, b, c)))
        want = np.array([exact_result([float(a[i]), float(b[i]), float(c[i])], "fma", "f64", rnd)
                         for i in range(a.size)])
        bad = np.flatnonzero(got != want.view(np.uint64))
        assert bad.size == 0, [(rnd, float(a[i]), float(b[i]), float(c[i]), got[i].view(np.float64), want[i])
                               for i in bad[:4]]


def test_fma_f64_special_values():
    """Infs and NaNs: IEEE's invalid operations give the default NaN, an Inf operand its Inf, a NaN operand
    passes on quieted (the H200's choice of which, as simtc.ptx.alu documents it)."""
    inf, nan = np.inf, np.nan
    a = np.array([inf, inf, 0.0, 1.0, 2.0, 1e308, -1e308, 1.0])
    b = np.array([0.0, 1.0, inf, 1.0, nan, 10.0, 10.0, 1.0])
    c = np.array([1.0, -inf, 1.0, inf, 1.0, 1.0, 1.0, -inf])
    op = alu.compile(Instruction("fma.rn.f64", (Reg("%d"), Reg("%a"), Reg("%b"), Reg("%c"))))
    (got,) = op.fn(*(v.view(np.uint64) for v in (a, b, c)))
    r = got.view(np.float64)
    assert np.isnan(r[0]) and np.isnan(r[1]) and np.isnan(r[2]) and np.isnan(r[4])
    assert got[0] == np.uint64(0xFFF8000000000000)
    assert r[3] == inf and r[5] == inf and r[6] == -inf and r[7] == -inf
