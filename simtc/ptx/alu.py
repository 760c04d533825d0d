"""What each per-lane PTX opcode computes, bit for bit, over a warp's 32 lanes as numpy arrays.

:func:`compile` turns one :class:`~simtc.ptx.ir.Instruction` into an :class:`AluOp` once; the executor
calls its ``fn`` on every execution with the source operands' raw bits (unsigned numpy arrays of the
source types' widths, ``bool`` for ``.pred``) and writes the returned raw bits to the destinations.

Families and their PTX ISA 9.0 sections:

* integer arithmetic (§9.7.1): add sub mul mad mul24 mad24 sad div rem abs neg min max popc clz bfind fns
  brev bfe bfi dp4a dp2a; extended precision (§9.7.2): ``.cc``, addc, subc, madc;
* floating point (§9.7.3): testp copysign add sub mul fma mad div abs neg min max rcp sqrt rsqrt sin cos lg2
  ex2 tanh, f32 and f64, with ``.rn .rz .rm .rp``, ``.ftz`` and ``.sat``;
* half precision (§9.7.4): add sub mul fma neg abs min max ex2 tanh on f16, f16x2, bf16, bf16x2;
* comparison and selection (§9.7.6; half precision §9.7.7): set setp selp slct (``set`` also into f16/bf16
  and 16-bit destinations and on packed f16x2/bf16x2 halves);
* logic and shift (§9.7.8): and or xor not cnot lop3 shf shl shr;
* data movement and conversion (§9.7.9): mov between registers and immediates, prmt, cvt (§9.7.9.21),
  cvt.pack (§9.7.9.22).

How directed rounding is exact: every f32/f16/bf16 operation is done in float64 with an error-free
transformation (TwoSum for sums, the exact float64 product of two 24-bit significands, a Dekker/Veltkamp
remainder for quotients and square roots), which gives the float64 result and the sign of what it left
out; that pair is rounded once into the target in any IEEE direction: numpy's correctly rounded float64 ->
float32/float16 cast gives one neighbour, the tail's sign picks the other where the direction (or a tie)
needs it (:func:`_round_native`), and bf16 goes through a round-to-odd f32 (:func:`_round_bf16_bits`).
f64 operations use the same transformations and step one ulp toward the mode; ``fma.f64`` is Boldo and
Melquiond's emulated FMA with rounding to odd (:func:`_fma64`), in every direction; lanes where a transformation could
overflow or underflow fall back to Python's exact :class:`fractions.Fraction`. tests/ptx/test_alu_exact.py
checks all of these against exact rational arithmetic.

**Approximations.** The MUFU opcodes (``rcp.approx``, ``sqrt.approx``, ``rsqrt.approx``, ``sin``, ``cos``,
``lg2``, ``ex2``, ``tanh``, ``div.approx``/``div.full``) are modelled by the correctly rounded value of the
exact function. That is within PTX's stated maximum error, but **the bits are not the hardware's**: an
:class:`AluOp` for them has ``approx=True``, and tests/ptx/test_alu.py measures the difference from an H200.

Hardware facts not fixed by the PTX text (a NaN result's bits, integer division by zero, ...) are the H200's,
as recorded in tests/data/h200_ptx_alu.npz (tests/data/README_h200.md) and checked by tests/ptx/test_alu.py.

>>> from simtc.ptx.ir import Instruction, Reg
>>> op = compile(Instruction("add.s32", (Reg("%r1"), Reg("%r2"), Reg("%r3"))))
>>> op.dst_types, op.src_types
(('s32',), ('s32', 's32'))
>>> op.fn(np.array([0x7FFFFFFF], np.uint32), np.array([1], np.uint32))[0]  # wraps
array([2147483648], dtype=uint32)
>>> op = compile(Instruction("add.rz.f32", (Reg("%f1"), Reg("%f2"), Reg("%f3"))))
>>> bits = np.array([1.0, -1.0], np.float32).view(np.uint32)
>>> op.fn(bits, np.array([2.0**-30, -(2.0**-30)], np.float32).view(np.uint32))[0].view(np.float32)
array([ 1., -1.], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np
from attrs import evolve, field, frozen

from simtc.numerics import formats as _fmt
from simtc.ptx.errors import PtxUnsupported

__all__ = ["OPCODES", "AluOp", "compile", "type_width"]


@frozen
class AluOp:
    """One compiled per-lane instruction.

    ``fn(*srcs) -> tuple`` takes one raw-bit array per source (in :attr:`src_types`) and returns one per
    destination (in :attr:`dst_types`). Extended-precision arithmetic (PTX ISA 9.0 §9.7.2) reads and writes
    the carry flag ``CC.CF``, a per-thread register outside the operand list: where ``cc_in`` is set,
    ``fn`` takes the warp's CC.CF as one more, last, ``bool`` argument; where ``cc_out`` is set it returns
    the new CC.CF as one more, last, ``bool`` element. ``approx`` marks a MUFU approximation (see the module
    text).
    """

    name: str
    dst_types: tuple[str, ...]
    src_types: tuple[str, ...]
    fn: Callable[..., tuple[np.ndarray, ...]] = field(eq=False, repr=False)
    cc_in: bool = False
    cc_out: bool = False
    approx: bool = False


_U = {1: np.bool_, 8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_S = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
_PACKED = {"f16x2": 32, "bf16x2": 32, "u16x2": 32, "s16x2": 32, "e4m3x2": 16, "e5m2x2": 16, "ue8m0x2": 16,
           "e2m1x2": 8, "tf32": 32}
_FLOATS = ("f16", "bf16", "f32", "f64")
_INTS = tuple(f"{k}{w}" for k in "usb" for w in (8, 16, 32, 64))
_REF = "PTX ISA 9.0 §9.7"
_SECTION = {"int": "§9.7.1", "ext": "§9.7.2", "float": "§9.7.3", "half": "§9.7.4", "cmp": "§9.7.6",
            "logic": "§9.7.8", "mov": "§9.7.9", "cvt": "§9.7.9.21"}


def type_width(t: str) -> int:
    """Bits of a PTX type's register (1 for ``pred``).

    >>> type_width("f16x2"), type_width("s8"), type_width("pred"), type_width("e4m3x2")
    (32, 8, 1, 16)
    """
    if t == "pred":
        return 1
    if t in _PACKED:
        return _PACKED[t]
    return int(t.lstrip("bfsu"))


def _unsupported(name: str, why: str, family: str = "int") -> PtxUnsupported:
    return PtxUnsupported(f"{name}: {why}", rule="per-lane opcodes simtc's ALU models",
                          ref=f"PTX ISA 9.0 {_SECTION[family]}")


# ---------------------------------------------------------------------------------------------------------
# float helpers
# ---------------------------------------------------------------------------------------------------------

_FMT = {"f16": "fp16", "bf16": "bf16", "f32": "fp32", "f64": "fp64"}
_SIGN = {"f16": 0x8000, "bf16": 0x8000, "f32": 0x80000000, "f64": 0x8000000000000000}
_EXP = {"f16": 0x7C00, "bf16": 0x7F80, "f32": 0x7F800000, "f64": 0x7FF0000000000000}
_NAN = {"f16": 0x7FFF, "bf16": 0x7FFF, "f32": 0x7FFFFFFF, "f64": 0xFFF8000000000000}
"""The NaN a format's arithmetic returns, measured on the H200 (tests/data/h200_ptx_alu.npz): f32, f16 and bf16
always give this canonical NaN; f64 gives it only for an invalid operation (0 * Inf, Inf - Inf, 0 / 0, sqrt of a
negative) and otherwise passes the first NaN operand on, quieted (:func:`_propagate64`)."""
_QUIET64 = np.uint64(0x0008000000000000)


def _propagate64(out: np.ndarray, srcs, *, last: bool = True) -> np.ndarray:
    """f64 NaN results: a NaN source operand with its quiet bit set, else the default NaN. Which operand, when
    several are NaN: the last for add, sub, mul, fma, min and max (the DADD/DMUL/DFMA/DMNMX instructions),
    the first for div (a software sequence) -- as the H200 does (tests/data/h200_ptx_alu.npz)."""
    nan = (out & np.uint64(0x7FFFFFFFFFFFFFFF)) > np.uint64(0x7FF0000000000000)
    if not np.count_nonzero(nan):
        return out
    pick = np.full(out.shape, np.uint64(_NAN["f64"]))
    for b in (srcs if last else list(reversed(srcs))):
        bn = (b & np.uint64(0x7FFFFFFFFFFFFFFF)) > np.uint64(0x7FF0000000000000)
        pick = np.where(bn, b | _QUIET64, pick)
    return np.where(nan, pick, out)


def _to64(bits: np.ndarray, t: str) -> np.ndarray:
    """Bits of type ``t`` as float64 values (exact)."""
    if t == "f32":
        return bits.view(np.float32).astype(np.float64)
    if t == "f64":
        return bits.view(np.float64)
    if t == "f16":
        return bits.view(np.float16).astype(np.float64)
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)


def _bits(v: np.ndarray, t: str) -> np.ndarray:
    """float64 values representable in ``t`` (or ±Inf/NaN) as the bits of ``t``, NaN canonical."""
    if t == "f32":
        out = v.astype(np.float32).view(np.uint32)
    elif t == "f64":
        out = v.view(np.uint64).copy()
    elif t == "f16":
        out = v.astype(np.float16).view(np.uint16)
    else:
        out = (v.astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    return np.where(np.isnan(v), out.dtype.type(_NAN[t]), out)


def _flush(bits: np.ndarray, t: str) -> np.ndarray:
    """``.ftz``: subnormal values to sign-preserving zero."""
    dt = bits.dtype.type
    return np.where((bits & dt(_EXP[t])) == 0, bits & dt(_SIGN[t]), bits)


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, np.where(np.isfinite(s), e, 0.0)


_SPLIT = 134217729.0  # 2**27 + 1 (Veltkamp)


def _two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dekker's exact product a*b = p + e (valid while |a|, |b| < 2**995 and |p| > 2**-968 or p == 0)."""
    p = a * b
    ca = _SPLIT * a
    ah = ca - (ca - a)
    al = a - ah
    cb = _SPLIT * b
    bh = cb - (cb - b)
    bl = b - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, np.where(np.isfinite(p) & np.isfinite(e), e, 0.0)


def _dekker_safe(*xs: np.ndarray) -> np.ndarray:
    ok = np.ones(xs[0].shape, bool)
    for x in xs:
        ax = np.abs(x)
        ok &= (ax < 2.0**995) & ((ax > 2.0**-480) | (ax == 0))
    return ok


_NPF = {"f32": np.float32, "f16": np.float16}
_VIRT = {"f32": 2.0**128, "f16": 2.0**16}  # where the format's next binade would start: its Inf's place
_MIDMASK = {"f32": (0x1FFFFFFF, 0x10000000, 2.0**-126), "f16": ((1 << 42) - 1, 1 << 41, 2.0**-14)}
_TINY = 5e-324  # the smallest float64 subnormal


def _side(s: np.ndarray, r64: np.ndarray, sticky) -> np.ndarray:
    """A float64 with the sign of ``r - x``, x = ``s`` + tail (``sticky`` = sign of the tail, None = 0).

    ``r - s`` is non-zero only where ``r`` differs from ``s`` by far more than the smallest float64 subnormal
    (a float32/float16 value and a result of f32/f16/bf16 operands), so subtracting ``sign(tail)`` times that
    subnormal keeps its sign and decides only where ``r == s``. NaN where ``s`` is not finite."""
    d = r64 - s
    return d if sticky is None else d - np.sign(sticky) * _TINY


def _round_native(s: np.ndarray, sticky, t: str, rnd: str) -> np.ndarray:
    """x = ``s`` + tail rounded into f32 or f16, as a numpy float32/float16 array.

    numpy's float64 -> float32/float16 casts round correctly to nearest even (with gradual underflow and
    overflow to Inf), so r = RN(s) is one of the two neighbours of x in the format, and which one the
    direction wants follows from the sign of r - x (:func:`_side`); the other is ``nextafter(r)``. The
    exact value sits on a midpoint only where ``s`` itself does (x is within half a float64 ulp of ``s``
    and every midpoint of a narrower format is a float64), so nearest-even needs the tail only there."""
    ft = _NPF[t]
    r = s.astype(ft)
    if rnd == "rn":
        if sticky is None:
            return r
        mask, mid, low = _MIDMASK[t]
        hard = (np.asarray(sticky) != 0) & (((s.view(np.uint64) & np.uint64(mask)) == np.uint64(mid))
                                            | (np.abs(s) < low))
        if not np.count_nonzero(hard):
            return r
        i = np.flatnonzero(hard)
        si, ri, ti = s[i], r[i], np.sign(np.asarray(sticky)[i] if np.ndim(sticky) else sticky)
        r64 = ri.astype(np.float64)
        r64 = np.where(np.isinf(r64) & np.isfinite(si), np.copysign(_VIRT[t], si), r64)
        d = r64 - si
        n2 = np.nextafter(ri, np.where(d < 0, ft(np.inf), ft(-np.inf)))
        n64 = np.where(np.isinf(n2), np.copysign(_VIRT[t], n2.astype(np.float64)), n2.astype(np.float64))
        # s a midpoint of r and n2 and the tail pointing past it, away from r: n2
        take = (r64 + n64 == 2 * si) & (d * ti < 0)
        r = r.copy()
        r[i] = np.where(take, n2, ri)
        return r
    r64 = r.astype(np.float64)
    c = _side(s, r64, sticky)
    if rnd == "rz":  # r on the far side of x from zero: one step toward zero
        np.putmask(r, np.sign(c) * r64 > 0, np.nextafter(r, ft(0)))
    elif rnd == "rm":
        np.putmask(r, c > 0, np.nextafter(r, ft(-np.inf)))
    else:
        np.putmask(r, c < 0, np.nextafter(r, ft(np.inf)))
    return r


def _round_bf16_bits(s: np.ndarray, sticky, rnd: str) -> np.ndarray:
    """x = ``s`` + tail rounded into bf16 (its bits, uint16; NaN not canonicalised).

    x is first rounded to odd into f32 (round toward zero, the last bit set where inexact): f32 has 16 more
    bits than bf16 at every exponent (normal and subnormal alike), so rounding that value into bf16 in any
    direction gives the rounding of x itself (rounding to odd with k >= 2 extra bits, then to nearest, is
    innocuous: Boldo and Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using
    rounding to odd", IEEE Trans. Computers 57(4), 2008; a directed rounding needs only that the odd value stays
    strictly between the same two bf16 neighbours). The final rounding is integer arithmetic on the f32
    magnitude's bits. tests/ptx/test_alu_exact.py checks it against exact rationals."""
    r = s.astype(np.float32)
    r64 = r.astype(np.float64)
    c = _side(s, r64, sticky)
    # round toward zero (as _round_native); inexact wherever r != x (NaN and Inf give c NaN: exact)
    np.putmask(r, np.sign(c) * r64 > 0, np.nextafter(r, np.float32(0)))
    b = r.view(np.uint32) | (np.abs(c) > 0).view(np.uint8)
    sign = b & np.uint32(0x80000000)
    mag = b & np.uint32(0x7FFFFFFF)
    if rnd == "rn":
        mag = mag + np.uint32(0x7FFF) + ((mag >> np.uint32(16)) & np.uint32(1))
    elif rnd != "rz":  # away from zero on the side the direction points to
        away = (sign == 0) if rnd == "rp" else (sign != 0)
        mag = mag + away.view(np.uint8) * np.uint32(0xFFFF)
    return ((mag | sign) >> np.uint32(16)).astype(np.uint16)


def _round_to(s: np.ndarray, sticky, t: str, rnd: str) -> np.ndarray:
    """The exact value ``s + tail`` (``sticky`` = sign of the tail) rounded into ``t``, as float64 values."""
    if t in _NPF:
        return np.where(np.isnan(s), s, _round_native(s, sticky, t, rnd).astype(np.float64))
    if t == "bf16":
        v = (_round_bf16_bits(s, sticky, rnd).astype(np.uint32) << np.uint32(16)).view(np.float32)
        return np.where(np.isnan(s), s, v.astype(np.float64))
    if t != "f64":
        return _fmt.round_value(s, _FMT[t], rnd, sticky)
    if rnd == "rn" or sticky is None:
        return s
    st = np.sign(sticky)
    if rnd == "rp":
        return np.where(st > 0, np.nextafter(s, np.inf), s)
    if rnd == "rm":
        return np.where(st < 0, np.nextafter(s, -np.inf), s)
    return np.where((st != 0) & (np.signbit(s) != (st < 0)), np.nextafter(s, 0.0), s)


def _exact_fallback(out: np.ndarray, sticky: np.ndarray, lanes: np.ndarray, exact: Callable[[int], Fraction]):
    """Fill ``out``/``sticky`` on ``lanes`` from an exact rational per lane (float() rounds to nearest)."""
    for i in np.flatnonzero(lanes):
        x = exact(int(i))
        try:
            f = float(x)
        except OverflowError:
            out[i] = float("inf") if x > 0 else float("-inf")
            sticky[i] = 0.0  # overflow: _f64_overflow picks Inf or the largest finite value by direction
            continue
        out[i] = f
        if f == 0.0 and x < 0:
            out[i] = -0.0
        d = x - Fraction(f)
        sticky[i] = (d > 0) - (d < 0)


def _f64_overflow(s: np.ndarray, finite_in: np.ndarray, rnd: str) -> np.ndarray:
    """An f64 result that overflowed in float64 from finite operands, under a directed rounding."""
    ovf = np.isinf(s) & finite_in
    if rnd == "rn" or not ovf.any():
        return s
    big = np.finfo(np.float64).max
    toward0 = np.ones(s.shape, bool) if rnd == "rz" else (s > 0) if rnd == "rm" else (s < 0)
    return np.where(ovf & toward0, np.copysign(big, s), s)


def _arith(kind: str, t: str, rnd: str, srcs: list[np.ndarray]) -> np.ndarray:
    """add/sub/mul/fma/div/sqrt/rcp of float64 operands (values of ``t``), exactly rounded into ``t``."""
    x = srcs
    sticky = None
    if kind in ("add", "sub"):
        b = -x[1] if kind == "sub" else x[1]
        s, e = _two_sum(x[0], b)
        sticky = e
        s = _zero_sign(s, e, x[0], b, rnd)
        if t == "f64":
            s = _f64_overflow(s, np.isfinite(x[0]) & np.isfinite(b), rnd)
    elif kind == "mul":
        if t == "f64":
            s, e = _two_prod(x[0], x[1])
            bad = ~_dekker_safe(x[0], x[1], s) & np.isfinite(x[0]) & np.isfinite(x[1]) & (x[0] != 0) & (x[1] != 0)
            if rnd != "rn" and bad.any():
                s = s.copy()
                e = e.copy()
                _exact_fallback(s, e, bad, lambda i: Fraction(float(x[0][i])) * Fraction(float(x[1][i])))
            sticky = e
        else:
            s = x[0] * x[1]  # 2 x 24 significand bits: exact in float64
    elif kind == "fma":
        if t == "f64":
            p, pe = _two_prod(x[0], x[1])
            s0, se = _two_sum(p, x[2])
            tt, te = _two_sum(se, pe)
            s, e2 = _two_sum(s0, tt)
            # exact = s + e2 + te, |te| tiny: s is the nearest and sign(e2 or te) the tail's sign unless te could
            # matter (s on a midpoint, or tt not small against s0): those lanes are done with exact rationals
            gap = np.abs(np.nextafter(s, s + e2) - s)
            mid = (e2 != 0) & (2 * np.abs(e2) == gap)
            e = np.where(e2 != 0, e2, te)
            fin = np.isfinite(x[0]) & np.isfinite(x[1]) & np.isfinite(x[2])
            bad = fin & (((te != 0) & (mid | (np.abs(tt) >= np.abs(s0)))) | ~np.isfinite(p)
                         | ~_dekker_safe(x[0], x[1], p))
            bad &= (x[0] != 0) & (x[1] != 0)
            if bad.any():
                s = s.copy()
                e = e.copy()
                _exact_fallback(s, e, bad, lambda i: Fraction(float(x[0][i])) * Fraction(float(x[1][i]))
                                + Fraction(float(x[2][i])))
            zero_prod = (x[0] == 0) | (x[1] == 0)
            s = np.where(zero_prod & fin, x[0] * x[1] + x[2], s)
            e = np.where(zero_prod, 0.0, e)
            s = _zero_sign(s, e, x[0] * x[1], x[2], rnd)
            s = _f64_overflow(s, fin, rnd)
        else:
            p = x[0] * x[1]
            s, e = _two_sum(p, x[2])
            s = _zero_sign(s, e, p, x[2], rnd)
        sticky = e
    elif kind in ("div", "rcp"):
        a, b = (np.ones_like(x[0]), x[0]) if kind == "rcp" else (x[0], x[1])
        s = a / b
        if rnd != "rn" or t != "f64":
            ph, pl = _two_prod(s, b)
            r = (a - ph) - pl
            sticky = np.where(np.isfinite(s) & (s != 0), np.sign(r) * np.sign(b), 0.0)
            under = (s == 0) & (a != 0) & np.isfinite(a) & np.isfinite(b)  # a quotient below the subnormals
            sticky = np.where(under, np.where(np.signbit(a) != np.signbit(b), -1.0, 1.0), sticky)
            if t == "f64":
                bad = np.isfinite(s) & (s != 0) & ~_dekker_safe(a, b, s, ph)
                if bad.any():
                    s = s.copy()
                    _exact_fallback(s, sticky, bad, lambda i: Fraction(float(a[i])) / Fraction(float(b[i])))
    elif kind == "sqrt":
        s = np.sqrt(x[0])
        if rnd != "rn" or t != "f64":
            ph, pl = _two_prod(s, s)
            r = (x[0] - ph) - pl
            sticky = np.where(np.isfinite(s) & (s != 0), np.sign(r), 0.0)
            if t == "f64":
                bad = np.isfinite(s) & (s != 0) & ~_dekker_safe(s, ph)
                for i in np.flatnonzero(bad):
                    d = Fraction(float(x[0][i])) - Fraction(float(s[i])) ** 2
                    sticky[i] = (d > 0) - (d < 0)
    else:  # pragma: no cover - guarded by the builders
        raise AssertionError(kind)
    if t == "f64" and kind in ("mul", "div", "rcp"):
        s = _f64_overflow(s, np.isfinite(x[0]) & np.isfinite(x[-1]) & (x[-1] != 0), rnd)
    return _round_to(s, sticky, t, rnd)


def _zero_sign(s: np.ndarray, e: np.ndarray, x: np.ndarray, y: np.ndarray, rnd: str) -> np.ndarray:
    """IEEE 754-2019 section 6.3: an exact zero sum of opposite-signed operands is +0 (-0 rounding toward -Inf)."""
    if rnd != "rm":
        return s
    both_pos_zero = (x == 0) & (y == 0) & ~np.signbit(x) & ~np.signbit(y)
    return np.where((s == 0) & (e == 0) & ~both_pos_zero, -0.0, s)


def _finish(v: np.ndarray, t: str, *, ftz: bool = False, sat: bool = False, relu: bool = False) -> np.ndarray:
    """float64 results to bits of ``t`` with ``.sat`` (clamp to [0, 1], NaN to +0), ``.relu`` (negative to +0,
    NaN canonical) and ``.ftz`` (subnormal results to sign-preserving zero)."""
    if sat:
        v = np.where(np.isnan(v) | (v <= 0), 0.0, np.minimum(v, 1.0))
    if relu:  # negative values and -0 to +0 (the H200 gives +0 for -0), NaN stays NaN
        v = np.where(np.signbit(v) & ~np.isnan(v), 0.0, v)
    out = _bits(v, t)
    return _flush(out, t) if ftz else out


# ---------------------------------------------------------------------------------------------------------
# compile
# ---------------------------------------------------------------------------------------------------------


@frozen
class _Ctx:
    instr: object
    name: str
    opcode: str
    mods: tuple[str, ...]
    ndst: int
    nsrc: int


def compile(instr) -> AluOp:
    """The :class:`AluOp` of one instruction (call once per instruction and keep it).

    Raises :class:`~simtc.ptx.errors.PtxUnsupported` naming the opcode and modifiers it does not model.

    >>> from simtc.ptx.ir import Instruction, Reg
    >>> op = compile(Instruction("setp.lt.f32", ((Reg("%p1"), Reg("%p2")), Reg("%f1"), Reg("%f2"))))
    >>> op.dst_types, op.src_types
    (('pred', 'pred'), ('f32', 'f32'))
    >>> compile(Instruction("add.rz.s32", (Reg("%r1"), Reg("%r2"), Reg("%r3"))))
    Traceback (most recent call last):
    ...
    simtc.ptx.errors.PtxUnsupported: add.rz.s32: modifiers ('rz',) ...
    """
    ops = tuple(instr.operands)
    ndst = 0
    nsrc = len(ops)
    if ops:
        ndst = 2 if isinstance(ops[0], tuple) else 1
        nsrc = len(ops) - 1
    opc = instr.opcode
    builder = _BUILDERS.get(opc)
    if builder is None:
        raise _unsupported(instr.name, "not a per-lane ALU opcode (the executor's, or not modelled)")
    ctx = _Ctx(instr, instr.name, opc, tuple(instr.modifiers), ndst, nsrc)
    return builder(ctx)


def _op(ctx: _Ctx, dst, src, fn, **kw) -> AluOp:
    return AluOp(ctx.name, tuple(dst), tuple(src), fn, **kw)


def _split_mods(ctx: _Ctx, allowed: set[str], family: str, ntypes: int = 1) -> tuple[list[str], tuple[str, ...]]:
    """(modifiers other than the types, the last ``ntypes`` type modifiers), refusing unknown modifiers."""
    if len(ctx.mods) < ntypes:
        raise _unsupported(ctx.name, "missing its type", family)
    types = ctx.mods[-ntypes:] if ntypes else ()
    rest = list(ctx.mods[:-ntypes] if ntypes else ctx.mods)
    bad = [m for m in rest if m not in allowed]
    if bad:
        raise _unsupported(ctx.name, f"modifiers {tuple(bad)} are not modelled for {ctx.opcode}", family)
    return rest, types


def _rounding(rest: list[str], default: str = "rn") -> str:
    r = [m for m in rest if m in ("rn", "rz", "rm", "rp")]
    return r[0] if r else default


def _int_info(t: str, ctx: _Ctx, family: str = "int") -> tuple[int, bool]:
    if t not in _INTS:
        raise _unsupported(ctx.name, f"type .{t} is not an integer type here", family)
    return int(t[1:]), t[0] == "s"


def _check_arity(ctx: _Ctx, nsrc: int | tuple[int, ...], family: str, ndst: int | tuple[int, ...] = 1) -> None:
    ns = (nsrc,) if isinstance(nsrc, int) else nsrc
    nd = (ndst,) if isinstance(ndst, int) else ndst
    if ctx.nsrc not in ns or ctx.ndst not in nd:
        raise _unsupported(ctx.name, f"takes {ns[0]} source operand(s), got {ctx.nsrc}", family)


# ---------------------------------------------------------------------------------------------------------
# integer arithmetic, PTX ISA 9.0 §9.7.1 and §9.7.2
# ---------------------------------------------------------------------------------------------------------


def _sx(a: np.ndarray, w: int) -> np.ndarray:
    """Signed view of ``w``-bit raw bits."""
    return a.view(_S[w])


def _sat32(v: np.ndarray) -> np.ndarray:
    return np.clip(v, -(2**31), 2**31 - 1).astype(np.int32).view(np.uint32)


def _build_add_sub(ctx: _Ctx) -> AluOp:
    t = ctx.mods[-1] if ctx.mods else ""
    if t in _FLOATS or t in ("f16x2", "bf16x2", "f32x2"):
        return _build_float_arith(ctx)
    op = ctx.opcode
    base = "add" if op in ("add", "addc") else "sub"
    carry_in = op in ("addc", "subc")
    rest, (t,) = _split_mods(ctx, {"sat", "cc"}, "ext" if carry_in or "cc" in ctx.mods else "int")
    w, _signed = _int_info(t, ctx)
    _check_arity(ctx, 2, "int")
    sat = "sat" in rest
    cc = "cc" in rest
    if sat and (t != "s32" or cc or carry_in):
        raise _unsupported(ctx.name, ".sat applies to add/sub.s32 only", "int")
    if (cc or carry_in) and w not in (32, 64):
        raise _unsupported(ctx.name, "extended-precision add/sub take 32- or 64-bit types", "ext")
    dt = _U[w]

    if sat:
        def fn(a, b):
            x = a.view(np.int32).astype(np.int64)
            y = b.view(np.int32).astype(np.int64)
            return (_sat32(x + y if base == "add" else x - y),)
        return _op(ctx, (t,), (t, t), fn)

    if not (cc or carry_in):
        if base == "add":
            return _op(ctx, (t,), (t, t), lambda a, b: (a + b,))
        return _op(ctx, (t,), (t, t), lambda a, b: (a - b,))

    def fn_cc(a, b, cf=None):
        c = np.zeros(a.shape, bool) if cf is None else cf
        if base == "add":
            d = a + b + c.astype(dt)
            carry = (d < a) | ((d == a) & c)
        else:
            # The H200 keeps CC.CF as the carry of a + ~b + 1 (sub.cc) and a + ~b + CF (subc): CF is NOT the
            # borrow, so a sub.cc/subc chain computes PTX's a - (b + borrow) (PTX ISA 9.0 §9.7.2), and a CF set
            # by sub.cc reads as 1 in a following addc when nothing was borrowed (tests/data/h200_ptx_alu.npz).
            cin = np.ones(a.shape, bool) if cf is None else c
            nb = ~b
            d = a + nb + cin.astype(dt)
            carry = (d < a) | ((d == a) & cin)
        return (d, carry) if cc else (d,)

    if carry_in:
        return _op(ctx, (t,), (t, t), fn_cc, cc_in=True, cc_out=cc)
    return _op(ctx, (t,), (t, t), lambda a, b: fn_cc(a, b), cc_out=True)


def _mul_parts(a: np.ndarray, b: np.ndarray, w: int, signed: bool) -> tuple[np.ndarray, np.ndarray]:
    """(low w bits, high w bits) of the 2w-bit product, as uint arrays of width w."""
    dt = _U[w]
    if w <= 32:
        if signed:
            p = _sx(a, w).astype(np.int64) * _sx(b, w).astype(np.int64)
        else:
            p = a.astype(np.int64) * b.astype(np.int64)
        pu = p.view(np.uint64)
        return pu.astype(dt), (pu >> np.uint64(w)).astype(dt)
    m32 = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    al, ah, bl, bh = a & m32, a >> s32, b & m32, b >> s32
    ll = al * bl
    lh = al * bh
    hl = ah * bl
    hh = ah * bh
    mid = (ll >> s32) + (lh & m32) + (hl & m32)
    lo = (ll & m32) | (mid << s32)
    hi = hh + (lh >> s32) + (hl >> s32) + (mid >> s32)
    if signed:
        hi = hi - np.where(_sx(a, 64) < 0, b, np.uint64(0)) - np.where(_sx(b, 64) < 0, a, np.uint64(0))
    return lo, hi


def _wide(lo: np.ndarray, hi: np.ndarray, w: int) -> np.ndarray:
    return lo.astype(_U[2 * w]) | (hi.astype(_U[2 * w]) << _U[2 * w](w))


def _build_mul(ctx: _Ctx) -> AluOp:
    t = ctx.mods[-1] if ctx.mods else ""
    if t in _FLOATS or t in ("f16x2", "bf16x2", "f32x2"):
        return _build_float_arith(ctx)
    rest, (t,) = _split_mods(ctx, {"lo", "hi", "wide"}, "int")
    w, signed = _int_info(t, ctx)
    _check_arity(ctx, 2, "int")
    mode = rest[0] if rest else "lo"
    if mode == "wide":
        if w > 32:
            raise _unsupported(ctx.name, "mul.wide takes 16- or 32-bit types", "int")
        dtw = ("s" if signed else "u") + str(2 * w)
        return _op(ctx, (dtw,), (t, t), lambda a, b: (_wide(*_mul_parts(a, b, w, signed), w),))
    k = 0 if mode == "lo" else 1
    return _op(ctx, (t,), (t, t), lambda a, b: (_mul_parts(a, b, w, signed)[k],))


def _build_mad(ctx: _Ctx) -> AluOp:
    t = ctx.mods[-1] if ctx.mods else ""
    if t in _FLOATS or t in ("f16x2", "bf16x2", "f32x2"):
        return _build_float_arith(ctx)
    carry_in = ctx.opcode == "madc"
    rest, (t,) = _split_mods(ctx, {"lo", "hi", "wide", "sat", "cc"}, "ext" if carry_in else "int")
    w, signed = _int_info(t, ctx)
    _check_arity(ctx, 3, "int")
    mode = next((m for m in rest if m in ("lo", "hi", "wide")), "lo")
    sat = "sat" in rest
    cc = "cc" in rest
    if sat and not (t == "s32" and mode == "hi"):
        raise _unsupported(ctx.name, ".sat applies to mad.hi.s32 only", "int")
    if mode == "wide":
        if w > 32 or cc or carry_in:
            raise _unsupported(ctx.name, "mad.wide takes 16- or 32-bit types, without carry", "int")
        tw = ("s" if signed else "u") + str(2 * w)
        return _op(ctx, (tw,), (t, t, tw), lambda a, b, c: (_wide(*_mul_parts(a, b, w, signed), w) + c,))
    k = 0 if mode == "lo" else 1
    dt = _U[w]
    if sat:
        def fn_sat(a, b, c):
            hi = _mul_parts(a, b, 32, True)[1]
            return (_sat32(hi.view(np.int32).astype(np.int64) + c.view(np.int32).astype(np.int64)),)
        return _op(ctx, (t,), (t, t, t), fn_sat)
    if not (cc or carry_in):
        return _op(ctx, (t,), (t, t, t), lambda a, b, c: (_mul_parts(a, b, w, signed)[k] + c,))
    if w not in (32, 64):
        raise _unsupported(ctx.name, "extended-precision mad takes 32- or 64-bit types", "ext")

    def fn_cc(a, b, c, cf=None):
        p = _mul_parts(a, b, w, signed)[k]
        ci = np.zeros(a.shape, bool) if cf is None else cf
        d = p + c + ci.astype(dt)
        carry = (d < p) | ((d == p) & ci)
        return (d, carry) if cc else (d,)

    if carry_in:
        return _op(ctx, (t,), (t, t, t), fn_cc, cc_in=True, cc_out=cc)
    return _op(ctx, (t,), (t, t, t), lambda a, b, c: fn_cc(a, b, c), cc_out=True)


def _build_24(ctx: _Ctx) -> AluOp:
    rest, (t,) = _split_mods(ctx, {"lo", "hi", "sat"}, "int")
    if t not in ("u32", "s32"):
        raise _unsupported(ctx.name, "mul24/mad24 take .u32 or .s32", "int")
    signed = t == "s32"
    mad = ctx.opcode == "mad24"
    _check_arity(ctx, 3 if mad else 2, "int")
    hi = "hi" in rest
    sat = "sat" in rest
    if sat and not (mad and hi and signed):
        raise _unsupported(ctx.name, ".sat applies to mad24.hi.s32 only", "int")

    def prod(a, b):
        if signed:
            x = (a.astype(np.int64) << 40) >> 40
            y = (b.astype(np.int64) << 40) >> 40
        else:
            x = (a & np.uint32(0xFFFFFF)).astype(np.int64)
            y = (b & np.uint32(0xFFFFFF)).astype(np.int64)
        p = (x * y).view(np.uint64)
        return ((p >> np.uint64(16)) if hi else p).astype(np.uint32)

    if not mad:
        return _op(ctx, (t,), (t, t), lambda a, b: (prod(a, b),))
    if sat:
        return _op(ctx, (t,), (t, t, t), lambda a, b, c: (
            _sat32(prod(a, b).view(np.int32).astype(np.int64) + c.view(np.int32).astype(np.int64)),))
    return _op(ctx, (t,), (t, t, t), lambda a, b, c: (prod(a, b) + c,))


def _absdiff(a: np.ndarray, b: np.ndarray, w: int, signed: bool) -> np.ndarray:
    gt = (_sx(a, w) > _sx(b, w)) if signed else (a > b)
    return np.where(gt, a - b, b - a)


def _build_sad(ctx: _Ctx) -> AluOp:
    _, (t,) = _split_mods(ctx, set(), "int")
    w, signed = _int_info(t, ctx)
    _check_arity(ctx, 3, "int")
    return _op(ctx, (t,), (t, t, t), lambda a, b, c: (c + _absdiff(a, b, w, signed),))


def _build_div_rem(ctx: _Ctx) -> AluOp:
    t = ctx.mods[-1] if ctx.mods else ""
    if t in _FLOATS and ctx.opcode == "div":
        return _build_float_arith(ctx)
    _, (t,) = _split_mods(ctx, set(), "int")
    w, signed = _int_info(t, ctx)
    _check_arity(ctx, 2, "int")
    dt = _U[w]
    rem = ctx.opcode == "rem"

    def fn(a, b):
        zero = b == 0
        bb = np.where(zero, dt(1), b)
        if signed:
            na = _sx(a, w) < 0
            nb = _sx(bb, w) < 0
            ma = np.where(na, dt(0) - a, a)
            mb = np.where(nb, dt(0) - bb, bb)
            q = ma // mb
            r = ma - q * mb
            q = np.where(na != nb, dt(0) - q, q)
            r = np.where(na, dt(0) - r, r)
        else:
            q = a // bb
            r = a - q * bb
        if rem:
            return (np.where(zero, _DIV0_REM(a, w, signed), r),)
        return (np.where(zero, _DIV0_QUOT(a, w, signed), q),)

    return _op(ctx, (t,), (t, t), fn)


def _DIV0_QUOT(a: np.ndarray, w: int, signed: bool) -> np.ndarray:
    """Integer division by zero: PTX ISA 9.0 §9.7.1.8 leaves the value machine-specific; the H200 gives
    all ones (tests/data/h200_ptx_alu.npz)."""
    return np.full(a.shape, (1 << w) - 1, _U[w])


def _DIV0_REM(a: np.ndarray, w: int, signed: bool) -> np.ndarray:
    """Remainder by zero (machine-specific, PTX ISA 9.0 §9.7.1.9): the H200 gives all ones too."""
    return np.full(a.shape, (1 << w) - 1, _U[w])


def _build_abs_neg(ctx: _Ctx) -> AluOp:
    t = ctx.mods[-1] if ctx.mods else ""
    if t in _FLOATS or t in ("f16x2", "bf16x2"):
        return _build_float_unary(ctx)
    _, (t,) = _split_mods(ctx, set(), "int")
    w, _signed = _int_info(t, ctx)
    _check_arity(ctx, 1, "int")
    dt = _U[w]
    if ctx.opcode == "neg":
        return _op(ctx, (t,), (t,), lambda a: (dt(0) - a,))
    return _op(ctx, (t,), (t,), lambda a: (np.where(_sx(a, w) < 0, dt(0) - a, a),))


def _build_min_max(ctx: _Ctx) -> AluOp:
    t = ctx.mods[-1] if ctx.mods else ""
    if t in _FLOATS or t in ("f16x2", "bf16x2"):
        return _build_float_minmax(ctx)
    rest, (t,) = _split_mods(ctx, {"relu"}, "int")
    is_max = ctx.opcode == "max"
    relu = "relu" in rest
    _check_arity(ctx, (2, 3), "int")
    if t in ("u16x2", "s16x2"):
        if relu and t != "s16x2":
            raise _unsupported(ctx.name, ".relu applies to .s32 and .s16x2", "int")
        hdt = np.int16 if t == "s16x2" else np.uint16

        def fn2(*srcs):
            lanes = [s.view(hdt).reshape(-1, 2) for s in srcs]
            r = lanes[0]
            for x in lanes[1:]:
                r = np.maximum(r, x) if is_max else np.minimum(r, x)
            if relu:
                r = np.maximum(r, hdt(0))
            return (np.ascontiguousarray(r).reshape(-1).view(np.uint32),)
        return _op(ctx, (t,), (t,) * ctx.nsrc, fn2)
    w, signed = _int_info(t, ctx)
    if relu and t != "s32":
        raise _unsupported(ctx.name, ".relu applies to .s32 and .s16x2", "int")

    def fn(*srcs):
        xs = [_sx(s, w) if signed else s for s in srcs]
        r = xs[0]
        for x in xs[1:]:
            r = np.maximum(r, x) if is_max else np.minimum(r, x)
        if relu:
            r = np.maximum(r, np.int32(0))
        return (r.view(_U[w]),)
    return _op(ctx, (t,), (t,) * ctx.nsrc, fn)


def _bitcount(a: np.ndarray) -> np.ndarray:
    return np.bitwise_count(a).astype(np.uint32)


def _smear(a: np.ndarray, w: int) -> np.ndarray:
    x = a.copy()
    s = 1
    while s < w:
        x |= x >> a.dtype.type(s)
        s *= 2
    return x


def _build_bitscan(ctx: _Ctx) -> AluOp:
    opc = ctx.opcode
    rest, (t,) = _split_mods(ctx, {"shiftamt"} if opc == "bfind" else set(), "int")
    _check_arity(ctx, 1, "int")
    w, signed = _int_info(t, ctx)
    if w not in (32, 64) or (opc in ("popc", "clz", "brev") and t[0] != "b") or (opc == "bfind" and t[0] == "b"):
        raise _unsupported(ctx.name, f"{opc} does not take .{t}", "int")
    if opc == "popc":
        return _op(ctx, ("u32",), (t,), lambda a: (_bitcount(a),))
    if opc == "clz":
        return _op(ctx, ("u32",), (t,), lambda a: (np.uint32(w) - _bitcount(_smear(a, w)),))
    if opc == "brev":
        return _op(ctx, (t,), (t,), lambda a: (_brev(a, w),))
    shiftamt = "shiftamt" in rest

    def fn(a):
        x = np.where(_sx(a, w) < 0, ~a, a) if signed else a
        pos = _bitcount(_smear(x, w)).astype(np.int64) - 1
        found = pos >= 0
        r = np.where(found, (w - 1 - pos) if shiftamt else pos, 0xFFFFFFFF)
        return (r.astype(np.uint32),)
    return _op(ctx, ("u32",), (t,), fn)


_REV8 = np.array([int(f"{i:08b}"[::-1], 2) for i in range(256)], np.uint8)


def _brev(a: np.ndarray, w: int) -> np.ndarray:
    by = a.reshape(-1, 1).view(np.uint8)[:, ::-1]
    return np.ascontiguousarray(_REV8[by]).view(_U[w]).reshape(a.shape)


def _build_fns(ctx: _Ctx) -> AluOp:
    _, (t,) = _split_mods(ctx, set(), "int")
    if t != "b32":
        raise _unsupported(ctx.name, "fns takes .b32", "int")
    _check_arity(ctx, 3, "int")
    bitpos = np.arange(32, dtype=np.int64)

    def fn(mask, base, offset):
        off = offset.view(np.int32).astype(np.int64)[:, None]
        b = base.astype(np.int64)[:, None]
        bits = ((mask[:, None] >> bitpos.astype(np.uint32)) & np.uint32(1)).astype(bool)
        fwd = off > 0
        cand = np.where(fwd, bitpos >= b, bitpos <= b) & bits
        cnt = np.where(fwd, np.cumsum(cand, axis=1), np.cumsum(cand[:, ::-1], axis=1)[:, ::-1])
        k = np.abs(off)
        hit = cand & (cnt == k)
        anyhit = hit.any(axis=1)
        pos = np.where(fwd[:, 0], np.argmax(hit, axis=1), 31 - np.argmax(hit[:, ::-1], axis=1))
        r = np.where(anyhit, pos, 0xFFFFFFFF)
        zero = off[:, 0] == 0
        at_base = (b[:, 0] < 32) & ((mask >> np.minimum(b[:, 0], 31).astype(np.uint32)) & np.uint32(1)).astype(bool)
        r = np.where(zero, np.where(at_base, b[:, 0], 0xFFFFFFFF), r)
        return (r.astype(np.uint32),)
    return _op(ctx, ("b32",), ("b32", "u32", "s32"), fn)


def _build_bfe(ctx: _Ctx) -> AluOp:
    _, (t,) = _split_mods(ctx, set(), "int")
    w, signed = _int_info(t, ctx)
    if w not in (32, 64) or t[0] == "b":
        raise _unsupported(ctx.name, "bfe takes .u32 .s32 .u64 .s64", "int")
    _check_arity(ctx, 3, "int")
    dt = _U[w]

    # PTX ISA 9.0 §9.7.1.19 takes pos and len from bits 7..0 of b and c; the H200 does so for 32-bit types, but
    # its 64-bit sequence uses the whole 32-bit values (tests/data/h200_ptx_alu.npz): simtc follows the H200
    field = np.uint32(0xFF) if w == 32 else np.uint32(0xFFFFFFFF)

    def fn(a, b, c):
        pos = (b & field).astype(np.int64)
        ln = (c & field).astype(np.int64)
        top = np.minimum(pos + ln - 1, w - 1)
        field_len = np.clip(np.minimum(ln, w - pos), 0, w)
        sh = np.minimum(pos, w - 1).astype(dt)
        x = a >> sh
        x = np.where(pos >= w, dt(0), x)
        mask = np.where(field_len >= w, dt(~0 & ((1 << w) - 1)),
                        (dt(1) << np.minimum(field_len, w - 1).astype(dt)) - dt(1))
        r = x & mask
        if signed:
            sbit = ((a >> np.maximum(top, 0).astype(dt)) & dt(1)).astype(bool)
            r = np.where(sbit, r | ~mask, r)
        return (np.where(ln == 0, dt(0), r),)
    return _op(ctx, (t,), (t, "u32", "u32"), fn)


def _build_bfi(ctx: _Ctx) -> AluOp:
    _, (t,) = _split_mods(ctx, set(), "int")
    if t not in ("b32", "b64"):
        raise _unsupported(ctx.name, "bfi takes .b32 or .b64", "int")
    w = int(t[1:])
    _check_arity(ctx, 4, "int")
    dt = _U[w]

    field = np.uint32(0xFF) if w == 32 else np.uint32(0xFFFFFFFF)  # as for bfe (the H200's 64-bit sequence)

    def fn(f, b, c, d):
        pos = (c & field).astype(np.int64)
        ln = np.clip(np.minimum((d & field).astype(np.int64), w - pos), 0, w)
        ones = np.where(ln >= w, dt((1 << w) - 1), (dt(1) << np.minimum(ln, w - 1).astype(dt)) - dt(1))
        sh = np.minimum(pos, w - 1).astype(dt)
        m = np.where(pos >= w, dt(0), ones << sh)
        return ((b & ~m) | ((f << sh) & m),)
    return _op(ctx, (t,), (t, t, "u32", "u32"), fn)


def _build_dp(ctx: _Ctx) -> AluOp:
    dp2 = ctx.opcode == "dp2a"
    rest, (ta, tb) = _split_mods(ctx, {"lo", "hi"} if dp2 else set(), "int", ntypes=2)
    if ta not in ("u32", "s32") or tb not in ("u32", "s32"):
        raise _unsupported(ctx.name, "dp4a/dp2a take .u32/.s32 types", "int")
    _check_arity(ctx, 3, "int")
    tc = "s32" if "s32" in (ta, tb) else "u32"
    hi = "hi" in rest

    def parts(x, n, signed):
        v = x.reshape(-1, 1).view(np.int8 if n == 8 and signed else np.uint8 if n == 8 else
                                  np.int16 if signed else np.uint16)
        return v.astype(np.int64)

    def fn(a, b, c):
        if dp2:
            pa = parts(a, 16, ta == "s32")
            pb = parts(b, 8, tb == "s32")[:, 2:4] if hi else parts(b, 8, tb == "s32")[:, 0:2]
        else:
            pa = parts(a, 8, ta == "s32")
            pb = parts(b, 8, tb == "s32")
        s = (pa * pb).sum(axis=1)
        return ((s.astype(np.uint64).astype(np.uint32) + c),)
    return _op(ctx, (tc,), (ta, tb, tc), fn)


# ---------------------------------------------------------------------------------------------------------
# logic and shift, PTX ISA 9.0 §9.7.8
# ---------------------------------------------------------------------------------------------------------


def _build_logic(ctx: _Ctx) -> AluOp:
    _, (t,) = _split_mods(ctx, set(), "logic")
    if t not in ("pred", "b16", "b32", "b64"):
        raise _unsupported(ctx.name, f"{ctx.opcode} takes .pred .b16 .b32 .b64", "logic")
    opc = ctx.opcode
    if opc in ("not", "cnot"):
        _check_arity(ctx, 1, "logic")
        if opc == "not":
            return _op(ctx, (t,), (t,), lambda a: (~a,))
        if t == "pred":
            raise _unsupported(ctx.name, "cnot takes .b16 .b32 .b64", "logic")
        return _op(ctx, (t,), (t,), lambda a: ((a == 0).astype(a.dtype),))
    _check_arity(ctx, 2, "logic")
    f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[opc]
    return _op(ctx, (t,), (t, t), lambda a, b: (f(a, b),))


def _lop3_table(a, b, c, lut: int):
    r = np.zeros_like(a)
    na, nb, nc = ~a, ~b, ~c
    for i in range(8):
        if lut >> i & 1:
            r |= (a if i & 4 else na) & (b if i & 2 else nb) & (c if i & 1 else nc)
    return r


def _imm_operand(ctx: _Ctx, index: int, what: str, family: str) -> int:
    from simtc.ptx.ir import Imm

    op = ctx.instr.operands[index] if len(ctx.instr.operands) > index else None
    if not isinstance(op, Imm) or not isinstance(op.value, int):
        raise _unsupported(ctx.name, f"{what} must be an integer immediate", family)
    return int(op.value)


def _build_lop3(ctx: _Ctx) -> AluOp:
    rest, (t,) = _split_mods(ctx, {"and", "or"}, "logic")
    if t != "b32":
        raise _unsupported(ctx.name, "lop3 takes .b32", "logic")
    if rest:  # lop3.BoolOp.b32 d|p, a, b, c, immLut, q
        _check_arity(ctx, 5, "logic", ndst=2)
        lut = _imm_operand(ctx, 4, "immLut", "logic") & 0xFF
        comb = np.logical_and if rest[0] == "and" else np.logical_or
        return _op(ctx, ("b32", "pred"), ("b32", "b32", "b32", "b32", "pred"),
                   lambda a, b, c, _lut, q: ((d := _lop3_table(a, b, c, lut)), comb(d != 0, q)))
    _check_arity(ctx, 4, "logic")
    lut = _imm_operand(ctx, 4, "immLut", "logic") & 0xFF
    return _op(ctx, ("b32",), ("b32", "b32", "b32", "b32"), lambda a, b, c, _lut: (_lop3_table(a, b, c, lut),))


def _build_shift(ctx: _Ctx) -> AluOp:
    _, (t,) = _split_mods(ctx, set(), "logic")
    if t not in ("b16", "b32", "b64", "u16", "u32", "u64", "s16", "s32", "s64") or (
            ctx.opcode == "shl" and t[0] != "b"):
        raise _unsupported(ctx.name, f"{ctx.opcode} does not take .{t}", "logic")
    _check_arity(ctx, 2, "logic")
    w = int(t[1:])
    dt = _U[w]
    if ctx.opcode == "shl":
        return _op(ctx, (t,), (t, "u32"), lambda a, b: (np.where(b >= w, dt(0), a << np.minimum(b, w - 1).astype(dt)),))
    if t[0] == "s":
        st = _S[w]
        return _op(ctx, (t,), (t, "u32"), lambda a, b: (
            (_sx(a, w) >> np.minimum(b, w - 1).astype(st)).view(dt),))
    return _op(ctx, (t,), (t, "u32"), lambda a, b: (np.where(b >= w, dt(0), a >> np.minimum(b, w - 1).astype(dt)),))


def _build_shf(ctx: _Ctx) -> AluOp:
    rest, (t,) = _split_mods(ctx, {"l", "r", "clamp", "wrap"}, "logic")
    if t != "b32" or len({"l", "r"} & set(rest)) != 1 or len({"clamp", "wrap"} & set(rest)) != 1:
        raise _unsupported(ctx.name, "shf.{l,r}.{clamp,wrap}.b32", "logic")
    _check_arity(ctx, 3, "logic")
    left = "l" in rest
    clamp = "clamp" in rest

    def fn(a, b, c):
        n = np.minimum(c, np.uint32(32)) if clamp else (c & np.uint32(31))
        x = (b.astype(np.uint64) << np.uint64(32)) | a.astype(np.uint64)
        n64 = n.astype(np.uint64)
        if left:
            r = ((x << n64) >> np.uint64(32)).astype(np.uint32)
            return (np.where(n == 32, a, r),)
        r = (x >> n64).astype(np.uint32)
        return (np.where(n == 32, b, r),)
    return _op(ctx, ("b32",), ("b32", "b32", "u32"), fn)


# ---------------------------------------------------------------------------------------------------------
# data movement: mov, prmt (PTX ISA 9.0 §9.7.9)
# ---------------------------------------------------------------------------------------------------------


def _build_mov(ctx: _Ctx) -> AluOp:
    from simtc.ptx.ir import Imm, Reg

    _, (t,) = _split_mods(ctx, set(), "mov")
    ops = ctx.instr.operands
    if len(ops) != 2 or not isinstance(ops[1], Reg | Imm):
        raise _unsupported(ctx.name, "mov of a symbol, vector or address is the executor's", "mov")
    if t not in _INTS + _FLOATS + ("pred", "b128"):
        raise _unsupported(ctx.name, f"mov.{t}", "mov")
    return _op(ctx, (t,), (t,), lambda a: (a.copy(),))


_PRMT_MODES = {
    # d.b0, d.b1, d.b2, d.b3 for c[1:0] = 0..3 (PTX ISA 9.0 §9.7.9.7 prmt, the mode table)
    "f4e": ((0, 1, 2, 3), (1, 2, 3, 4), (2, 3, 4, 5), (3, 4, 5, 6)),
    "b4e": ((0, 7, 6, 5), (1, 0, 7, 6), (2, 1, 0, 7), (3, 2, 1, 0)),
    "rc8": ((0, 0, 0, 0), (1, 1, 1, 1), (2, 2, 2, 2), (3, 3, 3, 3)),
    "ecl": ((0, 1, 2, 3), (1, 1, 2, 3), (2, 2, 2, 3), (3, 3, 3, 3)),
    "ecr": ((0, 0, 0, 0), (0, 1, 1, 1), (0, 1, 2, 2), (0, 1, 2, 3)),
    "rc16": ((0, 1, 0, 1), (2, 3, 2, 3), (0, 1, 0, 1), (2, 3, 2, 3)),
}


def _build_prmt(ctx: _Ctx) -> AluOp:
    # prmt.b32{.mode}: the mode follows the type
    if not ctx.mods or ctx.mods[0] != "b32" or len(ctx.mods) > 2 or (len(ctx.mods) == 2 and ctx.mods[1] not in
                                                                      _PRMT_MODES):
        raise _unsupported(ctx.name, "prmt.b32{.f4e,.b4e,.rc8,.ecl,.ecr,.rc16}", "mov")
    rest = list(ctx.mods[1:])
    _check_arity(ctx, 3, "mov")
    mode = rest[0] if rest else None

    nib = np.array([0, 4, 8, 12], np.uint32)
    table = np.array(_PRMT_MODES[mode], np.intp) if mode is not None else None

    rows: dict[int, np.ndarray] = {}

    def fn(a, b, c):
        # the eight bytes {b, a} (a's bytes 0-3, b's 4-7: little-endian), 8 per lane in one flat array
        n = a.shape[0]
        w = np.empty((n, 2), np.uint32)
        w[:, 0] = a
        w[:, 1] = b
        flat = w.view(np.uint8).reshape(-1)
        base = rows.get(n)
        if base is None:
            base = rows[n] = (np.arange(n, dtype=np.intp) * 8)[:, None]
        if table is None:
            sel = (c.astype(np.uint32, copy=False)[:, None] >> nib) & np.uint32(0xF)
            picked = flat[base + (sel & np.uint32(7))]
            # selector bit 3: the byte's sign bit replicated instead of the byte
            rep = (sel >> np.uint32(3)).astype(np.uint8)
            sign = (picked.view(np.int8) >> 7).view(np.uint8)
            picked = picked * (np.uint8(1) - rep) + sign * rep
        else:
            picked = flat[base + table[(c & np.uint32(3)).astype(np.intp)]]
        return (np.ascontiguousarray(picked).view(np.uint32).reshape(-1),)
    return _op(ctx, ("b32",), ("b32", "b32", "b32"), fn)


# ---------------------------------------------------------------------------------------------------------
# floating point, PTX ISA 9.0 §9.7.3 (f32, f64) and §9.7.4 (f16, bf16 and their x2 pairs)
# ---------------------------------------------------------------------------------------------------------

_HALF = {"f16x2": "f16", "bf16x2": "bf16"}


def _lanes2(fn1: Callable, packed: bool, t1: str) -> Callable:
    """Apply a scalar-half function to both halves of packed x2 operands (low half = element 0)."""
    if not packed:
        return fn1

    def fn(*srcs):
        halves = [s.reshape(-1, 1).view(np.uint16).reshape(-1) for s in srcs]
        outs = fn1(*halves)
        return tuple(np.ascontiguousarray(o.reshape(-1, 2)).view(np.uint32).reshape(-1) for o in outs)
    return fn


def _ftypes(ctx: _Ctx, t: str, family: str) -> tuple[str, bool]:
    if t in _HALF:
        return _HALF[t], True
    if t not in _FLOATS:
        raise _unsupported(ctx.name, f"type .{t} is not a float type here", family)
    return t, False


def _build_float_arith(ctx: _Ctx) -> AluOp:
    opc = ctx.opcode
    t = ctx.mods[-1]
    if t == "f32x2":  # sm_100's packed pair of f32 (PTX ISA 9.0 add/sub/mul/fma .f32x2): each half as .f32
        one = _build_float_arith(evolve(ctx, mods=(*ctx.mods[:-1], "f32")))

        def fn2(*srcs):
            halves = [np.ascontiguousarray(s).view(np.uint32).reshape(-1, 2) for s in srcs]
            lo = one.fn(*(h[:, 0].copy() for h in halves))[0]
            hi = one.fn(*(h[:, 1].copy() for h in halves))[0]
            return (np.ascontiguousarray(np.stack([lo, hi], axis=1)).view(np.uint64).reshape(-1),)
        return _op(ctx, ("b64",), ("b64",) * len(one.src_types), fn2)
    family = "half" if t in ("f16", "bf16", "f16x2", "bf16x2") else "float"
    allowed = {"rn", "rz", "rm", "rp", "ftz", "sat", "relu", "approx", "full"}
    rest, (t,) = _split_mods(ctx, allowed, family)
    et, packed = _ftypes(ctx, t, family)
    kind = {"mad": "fma"}.get(opc, opc)
    nsrc = {"add": 2, "sub": 2, "mul": 2, "fma": 3, "div": 2}[kind]
    _check_arity(ctx, nsrc, family)
    ftz = "ftz" in rest
    sat = "sat" in rest
    relu = "relu" in rest
    rnd = _rounding(rest)
    if ftz and et == "f64":
        raise _unsupported(ctx.name, ".ftz applies to f32/f16 only", family)
    if kind == "div" and ("approx" in rest or "full" in rest):
        if et != "f32":
            raise _unsupported(ctx.name, "div.approx/div.full take .f32", family)
        return _op(ctx, (t,), (t, t), _mufu_div(ftz, "approx" in rest), approx=True)
    if "approx" in rest or "full" in rest:
        raise _unsupported(ctx.name, ".approx/.full apply to div", family)

    def fn1(*srcs):
        with np.errstate(all="ignore"):
            xs = [_to64(_flush(s, et) if ftz else s, et) for s in srcs]
            v = _arith(kind, et, rnd, xs)
            out = _finish(v, et, ftz=ftz, sat=sat, relu=relu)
            return (_propagate64(out, srcs, last=kind != "div") if et == "f64" else out,)

    if et == "f64" and kind == "fma":
        return _op(ctx, (t,), (t,) * nsrc, _fma64_rn if rnd == "rn" else _fma64_directed(rnd))
    if et in ("f16", "bf16") and rnd == "rn" and kind in ("add", "sub", "mul") and not (ftz or sat or relu):
        return _op(ctx, (t,), (t,) * nsrc, _half_rn(kind, et))
    if et != "f64" and kind != "div" and not (sat or relu) and not (et == "f32" and rnd == "rn"):
        return _op(ctx, (t,), (t,) * nsrc, _lanes2(_small_arith(kind, et, rnd, ftz), packed, et))
    if et == "f32" and rnd == "rn" and kind == "fma":
        def fast_fma(a, b, c):
            with np.errstate(all="ignore"):
                if ftz:
                    a, b, c = _flush(a, et), _flush(b, et), _flush(c, et)
                x, y, z = (v.view(np.float32).astype(np.float64) for v in (a, b, c))
                p = x * y  # exact
                sm, e = _two_sum(p, z)
                # one rounding into f32 is right unless sm sits exactly on an f32 midpoint (or in the f32
                # subnormal range) with a non-zero tail: then round exactly
                hard = (e != 0) & (((sm.view(np.uint64) & np.uint64(0x1FFFFFFF)) == np.uint64(0x10000000))
                                   | (np.abs(sm) < 2.0**-126))
                v = _round_to(sm, e, et, rnd) if np.count_nonzero(hard) else sm.astype(np.float32).astype(np.float64)
                return (_finish(v, et, ftz=ftz, sat=sat, relu=relu),)
        return _op(ctx, (t,), (t,) * nsrc, fast_fma)
    if et == "f64" and rnd == "rn" and kind in ("add", "sub", "mul", "div"):
        npf64 = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[kind]

        def fast64(a, b):  # numpy's float64 arithmetic rounds to nearest even; NaNs as the H200 gives them
            with np.errstate(all="ignore"):
                r = npf64(a.view(np.float64), b.view(np.float64)).view(np.uint64)
            return (_propagate64(r, [a, b], last=kind != "div"),)
        return _op(ctx, (t,), (t, t), fast64)
    if et == "f32" and rnd == "rn" and kind in ("add", "sub", "mul", "div") and not (ftz or sat or relu):
        npf = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[kind]

        def fast(a, b):
            with np.errstate(all="ignore"):
                r = npf(a.view(np.float32), b.view(np.float32))
            return (np.where(r != r, np.uint32(_NAN["f32"]), r.view(np.uint32)),)
        return _op(ctx, (t,), (t,) * nsrc, fast)
    return _op(ctx, (t,), (t,) * nsrc, _lanes2(fn1, packed, et))


_TO64_FAST = {"f32": np.float32, "f16": np.float16}


def _small_arith(kind: str, et: str, rnd: str, ftz: bool) -> Callable:
    """add/sub/mul/fma of f32 (directed roundings), f16 or bf16 operands, exactly rounded, as raw bits.

    The operation is done in float64: a product of two such values is exact there (2 x 24 significand bits at
    most), so is an f16 sum (its exponents span 40 bits); other sums take TwoSum's error term. That float64
    value and the sign of what it left out are rounded once into the format (:func:`_round_native`,
    :func:`_round_bf16_bits`), so there is no double rounding."""
    exact_sum = et == "f16" and kind in ("add", "sub")
    nan = _U[type_width(et)](_NAN[et])
    neg = kind == "sub"

    def to64(b):
        if et == "bf16":
            return (b.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
        return b.view(_TO64_FAST[et]).astype(np.float64)

    def fn(*srcs):
        with np.errstate(all="ignore"):
            xs = [to64(_flush(b, et) if ftz else b) for b in srcs]
            e = None
            if kind == "mul":
                v = xs[0] * xs[1]
            else:
                p, q = (xs[0] * xs[1], xs[2]) if kind == "fma" else (xs[0], -xs[1] if neg else xs[1])
                v = p + q
                if not exact_sum:
                    bb = v - p
                    e = (p - (v - bb)) + (q - bb)  # NaN where v is not finite: _side's sign is then NaN too
                if rnd == "rm":
                    v = _zero_sign(v, e if e is not None else 0.0, p, q, rnd)
            out = _round_bf16_bits(v, e, rnd) if et == "bf16" else _round_native(v, e, et, rnd).view(nan.dtype)
            np.putmask(out, v != v, nan)
            return (_flush(out, et) if ftz else out,)
    return fn


_F32_OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply}


def _half_rn(kind: str, et: str) -> Callable:
    """add/sub/mul.rn of f16/bf16 (scalar or packed pairs) in float32, then one rounding into the format.

    float32 rounds the sum, difference or product to nearest first, which is innocuous: double rounding
    through a format of q >= 2p + 2 bits gives the correctly rounded p-bit result of +, -, x and / (Figueroa, "When
    is double rounding innocuous?", ACM SIGNUM Newsletter 30(3), 1995); f16 has p = 11, bf16 p = 8, float32
    q = 24. Below the narrow format's normal range the float32 value is exact (f16's subnormals are float32
    normals; two bf16 values sum or multiply to at most 16 significant bits above float32's own subnormal
    quantum), so one rounding happens there. numpy's float16 arithmetic does exactly this (a float32 operation
    and numpy's correctly rounded float32 -> float16 cast); bf16 is rounded to nearest even on the float32
    bits. tests/ptx/test_alu_exact.py checks both against exact rationals."""
    op = _F32_OPS[kind]
    if et == "f16":
        def fnh(a, b):
            with np.errstate(all="ignore"):
                r = op(a.view(np.float16), b.view(np.float16))
            out = r.view(np.uint16)
            np.putmask(out, r != r, np.uint16(_NAN["f16"]))
            return (out.view(a.dtype),)
        return fnh
    hi_mask = np.uint32(0xFFFF0000)

    def round_bits(u):  # float32 bits -> bf16 in the high half, to nearest even (NaN lanes are replaced later)
        return (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) & hi_mask

    def fnb(a, b):
        with np.errstate(all="ignore"):
            if a.dtype == np.uint16:
                x = (a.astype(np.uint32) << np.uint32(16)).view(np.float32)
                y = (b.astype(np.uint32) << np.uint32(16)).view(np.float32)
                r = op(x, y)
                out = (round_bits(r.view(np.uint32)) >> np.uint32(16)).astype(np.uint16)
                np.putmask(out, r != r, np.uint16(_NAN["bf16"]))
                return (out,)
            lo = op((a << np.uint32(16)).view(np.float32), (b << np.uint32(16)).view(np.float32))
            hi = op((a & hi_mask).view(np.float32), (b & hi_mask).view(np.float32))
        out = (round_bits(lo.view(np.uint32)) >> np.uint32(16)) | round_bits(hi.view(np.uint32))
        nl, nh = lo != lo, hi != hi
        if np.count_nonzero(nl) or np.count_nonzero(nh):
            np.putmask(out, nl, (out & hi_mask) | np.uint32(_NAN["bf16"]))
            np.putmask(out, nh, (out & np.uint32(0xFFFF)) | np.uint32(_NAN["bf16"] << 16))
        return (out,)
    return fnb


def _fma64_directed(rnd: str) -> Callable:
    """fma.rz/rm/rp.f64: :func:`_fma64_rn`'s th + v, v = tl + ul rounded to odd, in the direction ``rnd``. Every
    point where that rounding changes (an f64 value f, i.e. v = f - th) is a multiple of th's half ulp with a
    significand of at most two bits (|tl + ul| is about an ulp of th at most, and where c and a*b cancel, tl is 0
    and v = ul exactly), so never an odd f64: th + v and th + tl + ul lie on the same side of each of them and
    round alike. The tail of th + v (TwoSum) gives the step."""
    def fn(a, b, c):
        return _fma64(a, b, c, rnd)
    return fn


def _fma64_rn(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray]:
    return _fma64(a, b, c, "rn")


def _fma64(a: np.ndarray, b: np.ndarray, c: np.ndarray, rnd: str) -> tuple[np.ndarray]:
    """fma.rn.f64 exactly, vectorised: Boldo and Melquiond's emulated FMA ("Emulation of FMA and correctly
    rounded sums: proved algorithms using rounding to odd", IEEE Trans. Computers 57(4), 2008):
    (uh, ul) = a*b exactly (Dekker's TwoProduct with Veltkamp's split), (th, tl) = c + uh exactly (TwoSum),
    v = tl + ul rounded to odd (TwoSum, then the odd neighbour where inexact), result = RN(th + v).
    The theorem needs no overflow and no underflow: lanes with a product below 2**-968, a result beyond
    2**1020 or a non-finite value take the exact path of :func:`_arith` (zero products, Infs, NaNs,
    huge or tiny operands)."""
    with np.errstate(all="ignore"):
        x, y, z = a.view(np.float64), b.view(np.float64), c.view(np.float64)
        uh = x * y
        cx = _SPLIT * x
        xh = cx - (cx - x)
        xl = x - xh
        cy = _SPLIT * y
        yh = cy - (cy - y)
        yl = y - yh
        ul = ((xh * yh - uh) + xh * yl + xl * yh) + xl * yl
        th = z + uh
        bb = th - z
        tl = (z - (th - bb)) + (uh - bb)
        v = tl + ul
        vb = v - tl
        ve = (tl - (v - vb)) + (ul - vb)
        even = (ve != 0) & ((v.view(np.uint64) & np.uint64(1)) == 0)
        if np.count_nonzero(even):
            np.putmask(v, even, np.nextafter(v, np.copysign(np.inf, ve)))
        r = th + v
        if rnd != "rn":
            rb = r - th
            re = (th - (r - rb)) + (v - rb)
            r = _round_to(r, re, "f64", rnd)
            # an exact zero of a non-zero product and c is -0 rounding toward -Inf (IEEE 754-2019, section 6.3)
            if rnd == "rm":
                np.putmask(r, (r == 0) & (re == 0), -0.0)
        bad = ~((np.abs(uh) > 2.0**-968) & (np.abs(r) < 2.0**1020))
        if np.count_nonzero(bad):
            i = np.flatnonzero(bad)
            r = r.copy()
            r[i] = _arith("fma", "f64", rnd, [x[i], y[i], z[i]])
        return (_propagate64(r.view(np.uint64), [a, b, c]),)


def _mufu_div(ftz: bool, approx: bool) -> Callable:
    """div.approx.f32 is a * rcp.approx(b); div.full.f32 a full-range approximation (2 ulp, PTX ISA 9.0
    §9.7.3.8): both modelled by correctly rounded values (an approximation, see the module text)."""
    def fn(a, b):
        with np.errstate(all="ignore"):
            if ftz:
                a, b = _flush(a, "f32"), _flush(b, "f32")
            x = a.view(np.float32)
            y = b.view(np.float32)
            r = x / y
            if approx:  # PTX ISA 9.0 §9.7.3.8: for 2**126 < |b| < 2**128 the result is 0 (NaN for an infinite a)
                big = (np.abs(y) > np.float32(2.0**126)) & np.isfinite(y)
                r = np.where(big, np.where(np.isinf(x), np.float32(np.nan), np.float32(0) * np.sign(x) * np.sign(y)), r)
            r = np.where(r != r, np.float32(np.nan), r)
            out = _bits(r.astype(np.float64), "f32")
            return (_flush(out, "f32") if ftz else out,)
    return fn


def _build_float_unary(ctx: _Ctx) -> AluOp:
    t = ctx.mods[-1]
    family = "half" if t in ("f16", "bf16", "f16x2", "bf16x2") else "float"
    rest, (t,) = _split_mods(ctx, {"ftz"}, family)
    et, packed = _ftypes(ctx, t, family)
    _check_arity(ctx, 1, family)
    ftz = "ftz" in rest
    sign = _U[type_width(et)](_SIGN[et])
    neg = ctx.opcode == "neg"

    expm = _U[type_width(et)](_EXP[et])
    mant = ~(sign | expm)

    def fn1(a):
        # the H200 computes these as arithmetic: a NaN gives the canonical NaN (f32, f16, bf16), or for f64
        # passes through quieted with its sign unchanged
        x = _flush(a, et) if ftz else a
        r = (x ^ sign) if neg else (x & ~sign)
        nan = ((x & expm) == expm) & ((x & mant) != 0)
        if et == "f64":
            return (np.where(nan, x | _QUIET64, r),)
        return (np.where(nan, expm.dtype.type(_NAN[et]), r),)
    return _op(ctx, (t,), (t,), _lanes2(fn1, packed, et))


def _build_float_minmax(ctx: _Ctx) -> AluOp:
    t = ctx.mods[-1]
    family = "half" if t in ("f16", "bf16", "f16x2", "bf16x2") else "float"
    rest, (t,) = _split_mods(ctx, {"ftz", "NaN", "xorsign", "abs", "relu"}, family)
    et, packed = _ftypes(ctx, t, family)
    _check_arity(ctx, (2, 3), family)
    ftz = "ftz" in rest
    if ftz and et == "f64":
        raise _unsupported(ctx.name, ".ftz applies to f32/f16 only", family)
    nanprop = "NaN" in rest
    xorsign = "xorsign" in rest
    relu = "relu" in rest
    is_max = ctx.opcode == "max"
    w = type_width(et)
    dt = _U[w]

    def pick(x, y, xb, yb):
        # -0 < +0: compare (value, sign) so that min(-0, +0) = -0 and max = +0
        xneg = np.signbit(x)
        take_x = ((x > y) | ((x == y) & ~xneg)) if is_max else ((x < y) | ((x == y) & xneg))
        r = np.where(take_x, xb, yb)
        xn = np.isnan(x)
        yn = np.isnan(y)
        if nanprop:
            r = np.where(xn | yn, dt(_NAN[et]), r)
        else:
            both = dt(_NAN[et]) if et != "f64" else yb | _QUIET64
            r = np.where(xn & ~yn, yb, np.where(yn & ~xn, xb, np.where(xn & yn, both, r)))
        return r

    def fn1(*srcs):
        with np.errstate(all="ignore"):
            return fn1_(*srcs)

    def fn1_(*srcs):
        bs = [_flush(s, et) if ftz else s for s in srcs]
        sgn = None
        if xorsign:
            sgn = (bs[0] ^ bs[1]) & dt(_SIGN[et])
            bs = [b & ~dt(_SIGN[et]) for b in bs]
        r = bs[0]
        for b in bs[1:]:
            r = pick(_to64(r, et), _to64(b, et), r, b)
        if sgn is not None:
            r = np.where(np.isnan(_to64(r, et)), r, r | sgn)
        if relu:
            r = np.where((r & dt(_SIGN[et])) != 0, np.where(np.isnan(_to64(r, et)), r, dt(0)), r)
        return (r,)
    return _op(ctx, (t,), (t,) * ctx.nsrc, _lanes2(fn1, packed, et))


def _build_rcp_sqrt(ctx: _Ctx) -> AluOp:
    opc = ctx.opcode
    rest, (t,) = _split_mods(ctx, {"rn", "rz", "rm", "rp", "ftz", "approx"}, "float")
    if t not in ("f32", "f64"):
        raise _unsupported(ctx.name, f"{opc} takes .f32 or .f64", "float")
    _check_arity(ctx, 1, "float")
    ftz = "ftz" in rest
    if "approx" in rest:
        return _build_mufu(ctx)
    if opc == "rsqrt":
        raise _unsupported(ctx.name, "rsqrt exists only as .approx", "float")
    if not any(m in rest for m in ("rn", "rz", "rm", "rp")):
        raise _unsupported(ctx.name, f"{opc} needs .approx or a rounding modifier", "float")
    if ftz and t == "f64":
        raise _unsupported(ctx.name, ".ftz applies to .f32", "float")
    rnd = _rounding(rest)
    if t == "f32" and rnd == "rn" and not ftz:  # numpy's float32 1/x and sqrt are IEEE round-to-nearest
        def fast(a):
            with np.errstate(all="ignore"):
                x = a.view(np.float32)
                r = (np.float32(1) / x) if opc == "rcp" else np.sqrt(x)
                return (np.where(r != r, np.uint32(_NAN["f32"]), r.view(np.uint32)),)
        return _op(ctx, (t,), (t,), fast)

    def fn(a):
        with np.errstate(all="ignore"):
            x = _to64(_flush(a, t) if ftz else a, t)
            v = _arith(opc, t, rnd, [x])
            out = _finish(v, t, ftz=ftz)
            return (_propagate64(out, [a]) if t == "f64" else out,)
    return _op(ctx, (t,), (t,), fn)


def _mufu_value(opc: str, x: np.ndarray) -> np.ndarray:
    """The exact function (float64) a MUFU opcode approximates, with PTX's special values."""
    if opc == "rcp":
        return 1.0 / x
    if opc == "sqrt":
        return np.sqrt(x)
    if opc == "rsqrt":
        return 1.0 / np.sqrt(x)
    if opc == "sin":
        return np.sin(x)
    if opc == "cos":
        return np.cos(x)
    if opc == "lg2":
        return np.log2(x)
    if opc == "ex2":
        return np.exp2(x)
    return np.tanh(x)


def _build_mufu(ctx: _Ctx) -> AluOp:
    """rcp/sqrt/rsqrt/sin/cos/lg2/ex2/tanh ``.approx`` (PTX ISA 9.0 §9.7.3, §9.7.4 for f16/bf16): the
    correctly rounded value of the exact function, an approximation of the hardware's MUFU result."""
    t = ctx.mods[-1] if ctx.mods else ""
    family = "half" if t in ("f16", "bf16", "f16x2", "bf16x2") else "float"
    rest, (t,) = _split_mods(ctx, {"approx", "ftz"}, family)
    if "approx" not in rest:
        raise _unsupported(ctx.name, f"{ctx.opcode} exists only as .approx", family)
    et, packed = _ftypes(ctx, t, family)
    if et in ("f16", "bf16") and ctx.opcode not in ("ex2", "tanh"):
        raise _unsupported(ctx.name, "half-precision MUFU: ex2 and tanh only", family)
    if et == "f64" and ctx.opcode not in ("rcp", "rsqrt"):
        raise _unsupported(ctx.name, "f64 .approx: rcp and rsqrt only", family)
    _check_arity(ctx, 1, family)
    # sin and cos flush subnormal inputs also without .ftz (the H200's MUFU.SIN/COS); the .ftz f64 forms
    # (MUFU.RCP64H/RSQ64H) read and deliver only the high 32 bits (the low words are ignored and zero)
    ftz = "ftz" in rest or ctx.opcode in ("sin", "cos")
    opc = ctx.opcode
    hi_only = et == "f64" and "ftz" in rest

    def fn1(a):
        with np.errstate(all="ignore"):
            if hi_only:  # MUFU.RCP64H/RSQ64H read the high word only
                a = a & np.uint64(0xFFFFFFFF00000000)
            x = _to64(_flush(a, et) if ftz else a, et)
            v = _mufu_value(opc, x)
            if et == "f32":
                v = v.astype(np.float32).astype(np.float64)  # nearest (an approximation model anyway)
            elif et != "f64":
                v = _round_to(v, None, et, "rn")
            out = _finish(v, et, ftz=ftz)
            if hi_only:
                out = np.where(np.isnan(v), out, out & np.uint64(0xFFFFFFFF00000000))
            return (out,)
    return _op(ctx, (t,), (t,), _lanes2(fn1, packed, et), approx=True)


def _build_testp(ctx: _Ctx) -> AluOp:
    rest, (t,) = _split_mods(ctx, {"finite", "infinite", "number", "notanumber", "normal", "subnormal"}, "float")
    if t not in ("f32", "f64") or len(rest) != 1:
        raise _unsupported(ctx.name, "testp.op.{f32,f64}", "float")
    _check_arity(ctx, 1, "float")
    op = rest[0]
    expm = _U[type_width(t)](_EXP[t])
    sgn = _U[type_width(t)](_SIGN[t])

    def fn(a):
        e = a & expm
        mag = a & ~sgn
        r = {"finite": e != expm, "infinite": mag == expm, "number": mag <= expm, "notanumber": mag > expm,
             "normal": (e != expm) & ~((e == 0) & (mag != 0)), "subnormal": (e == 0) & (mag != 0)}[op]
        return (r,)
    return _op(ctx, ("pred",), (t,), fn)


def _build_copysign(ctx: _Ctx) -> AluOp:
    _, (t,) = _split_mods(ctx, set(), "float")
    if t not in ("f32", "f64"):
        raise _unsupported(ctx.name, "copysign takes .f32 or .f64", "float")
    _check_arity(ctx, 2, "float")
    sgn = _U[type_width(t)](_SIGN[t])
    return _op(ctx, (t,), (t, t), lambda a, b: ((b & ~sgn) | (a & sgn),))


# ---------------------------------------------------------------------------------------------------------
# comparison and selection, PTX ISA 9.0 §9.7.6 (§9.7.7 for f16/bf16)
# ---------------------------------------------------------------------------------------------------------

_CMPS = ("eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "equ", "neu", "ltu", "leu", "gtu", "geu",
         "num", "nan")
_BOOLOPS = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


def _compare(cmp: str, t: str, ftz: bool) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    if t in _FLOATS:
        def f(a, b):
            with np.errstate(all="ignore"):
                return f_(a, b)

        def f_(a, b):
            if ftz:
                a, b = _flush(a, t), _flush(b, t)
            x, y = _to64(a, t), _to64(b, t)
            un = np.isnan(x) | np.isnan(y)
            if cmp == "num":
                return ~un
            if cmp == "nan":
                return un
            base = cmp[:2]
            r = {"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y}[base]
            if base == "ne" and len(cmp) == 2:
                r = r & ~un  # ordered: NaN gives False
            return (r | un) if cmp.endswith("u") else r
        return f
    w = int(t[1:])
    signed = t[0] == "s"
    ops = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
           "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal, "hi": np.greater, "hs": np.greater_equal}
    op = ops[cmp]
    if signed and cmp not in ("lo", "ls", "hi", "hs"):
        return lambda a, b: op(_sx(a, w), _sx(b, w))
    return lambda a, b: op(a, b)


def _cmp_mods(ctx: _Ctx, family: str, ntypes: int) -> tuple[str, str | None, bool, tuple[str, ...]]:
    rest, types = _split_mods(ctx, set(_CMPS) | set(_BOOLOPS) | {"ftz"}, family, ntypes)
    cmps = [m for m in rest if m in _CMPS]
    bops = [m for m in rest if m in _BOOLOPS]
    if len(cmps) != 1 or len(bops) > 1:
        raise _unsupported(ctx.name, "one comparison and at most one boolean operator", family)
    st = types[-1]
    if st not in (*_INTS, *_FLOATS, "f16x2", "bf16x2"):
        raise _unsupported(ctx.name, f"comparison of .{st}", family)
    cmp = cmps[0]
    if st in _INTS and cmp not in ("eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"):
        raise _unsupported(ctx.name, f".{cmp} compares floats only", family)
    if st in (*_FLOATS, "f16x2", "bf16x2") and cmp in ("lo", "ls", "hi", "hs"):
        raise _unsupported(ctx.name, f".{cmp} compares unsigned integers only", family)
    if st in _INTS and st[0] == "b" and cmp not in ("eq", "ne"):
        raise _unsupported(ctx.name, "bit-size types compare with eq/ne only", family)
    return cmp, (bops[0] if bops else None), "ftz" in rest, types


def _build_setp(ctx: _Ctx) -> AluOp:
    cmp, bop, ftz, (t,) = _cmp_mods(ctx, "cmp", 1)
    nsrc = 3 if bop else 2
    _check_arity(ctx, nsrc, "cmp", ndst=(1, 2))
    if t in _HALF:
        et = _HALF[t]
        f = _compare(cmp, et, ftz)

        def fnh(a, b, c=None):
            ha = a.reshape(-1, 1).view(np.uint16)
            hb = b.reshape(-1, 1).view(np.uint16)
            lo = f(ha[:, 0], hb[:, 0])
            hi = f(ha[:, 1], hb[:, 1])
            if bop:
                lo, hi = _BOOLOPS[bop](lo, c), _BOOLOPS[bop](hi, c)
            return (lo, hi)[: ctx.ndst]
        return _op(ctx, ("pred",) * ctx.ndst, (t, t) + (("pred",) if bop else ()), fnh)
    f = _compare(cmp, t, ftz)

    def fn(a, b, c=None):
        r = f(a, b)
        if bop:
            p = _BOOLOPS[bop](r, c)
            q = _BOOLOPS[bop](~r, c)
        else:
            p, q = r, ~r
        return (p, q)[: ctx.ndst]
    return _op(ctx, ("pred",) * ctx.ndst, (t, t) + (("pred",) if bop else ()), fn)


_SET_TRUE = {"u32": 0xFFFFFFFF, "s32": 0xFFFFFFFF, "f32": 0x3F800000, "u16": 0xFFFF, "s16": 0xFFFF,
             "f16": 0x3C00, "bf16": 0x3F80}
"""What ``set`` writes for True (False is 0): all ones for integer destinations, 1.0 for float ones (PTX ISA 9.0
§9.7.6.1; §9.7.7.1 for the f16/bf16 destinations and the packed sources, whose halves each get the 16-bit value:
0xFFFF for a .u32/.s32 destination, 1.0 for .f16x2/.bf16x2)."""


def _build_set(ctx: _Ctx) -> AluOp:
    cmp, bop, ftz, (dt_, st) = _cmp_mods(ctx, "cmp", 2)
    _check_arity(ctx, 3 if bop else 2, "cmp")
    et = _HALF.get(st, st)
    f = _compare(cmp, et, ftz)
    if st in _HALF:  # packed sources: each half compared, the 16-bit results packed (low half = element 0)
        true16 = {"u32": 0xFFFF, "s32": 0xFFFF, "f16x2": 0x3C00, "bf16x2": 0x3F80}.get(dt_)
        if true16 is None or (dt_ in _HALF and dt_ != st):
            raise _unsupported(ctx.name, f"set.{dt_}.{st}: the destination is .{st}, .u32 or .s32", "cmp")
        t16 = np.uint32(true16)

        def fnx2(a, b, c=None):
            ha = a.reshape(-1, 1).view(np.uint16)
            hb = b.reshape(-1, 1).view(np.uint16)
            lo, hi = f(ha[:, 0], hb[:, 0]), f(ha[:, 1], hb[:, 1])
            if bop:
                lo, hi = _BOOLOPS[bop](lo, c), _BOOLOPS[bop](hi, c)
            return (np.where(lo, t16, np.uint32(0)) | np.where(hi, t16 << np.uint32(16), np.uint32(0)),)
        return _op(ctx, (dt_,), (st, st) + (("pred",) if bop else ()), fnx2)
    if dt_ not in _SET_TRUE or (dt_ in ("u16", "s16") and et not in ("f16", "bf16")):
        raise _unsupported(ctx.name, f"set.{dt_}.{st}: destinations .u32 .s32 .f32 .f16 .bf16, or .u16/.s16 from "
                           ".f16/.bf16 sources", "cmp")
    dt = _U[type_width(dt_)]
    true = dt(_SET_TRUE[dt_])

    def fn(a, b, c=None):
        r = f(a, b)
        if bop:
            r = _BOOLOPS[bop](r, c)
        return (np.where(r, true, dt(0)),)
    return _op(ctx, (dt_,), (st, st) + (("pred",) if bop else ()), fn)


def _build_selp(ctx: _Ctx) -> AluOp:
    _, (t,) = _split_mods(ctx, set(), "cmp")
    if t not in _INTS + _FLOATS:
        raise _unsupported(ctx.name, f"selp.{t}", "cmp")
    _check_arity(ctx, 3, "cmp")
    return _op(ctx, (t,), (t, t, "pred"), lambda a, b, c: (np.where(c, a, b),))


def _build_slct(ctx: _Ctx) -> AluOp:
    rest, (t, ct) = _split_mods(ctx, {"ftz"}, "cmp", ntypes=2)
    if ct not in ("s32", "f32") or t not in _INTS + _FLOATS or type_width(t) not in (16, 32, 64):
        raise _unsupported(ctx.name, "slct.dtype.{s32,f32}", "cmp")
    _check_arity(ctx, 3, "cmp")
    ftz = "ftz" in rest
    if ct == "s32":
        return _op(ctx, (t,), (t, t, ct), lambda a, b, c: (np.where(c.view(np.int32) >= 0, a, b),))

    def fn(a, b, c):
        cc = _flush(c, "f32") if ftz else c
        return (np.where(cc.view(np.float32) >= 0, a, b),)
    return _op(ctx, (t,), (t, t, ct), fn)


# ---------------------------------------------------------------------------------------------------------
# cvt, PTX ISA 9.0 §9.7.9.21
# ---------------------------------------------------------------------------------------------------------

_IRND = ("rni", "rzi", "rmi", "rpi")


def _int_value_pair(a: np.ndarray, t: str) -> tuple[np.ndarray, np.ndarray]:
    """An integer of type ``t`` as a float64 pair (value, sticky sign), exact."""
    w, signed = int(t[1:]), t[0] == "s"
    if w <= 32:
        v = (_sx(a, w) if signed else a).astype(np.float64)
        return v, np.zeros(a.shape)
    hi = ((_sx(a, 64) >> np.int64(32)) if signed else (a >> np.uint64(32))).astype(np.float64) * 2.0**32
    lo = (a & np.uint64(0xFFFFFFFF)).astype(np.float64)
    return _two_sum(hi, lo)


def _float_to_int(v: np.ndarray, t: str, irnd: str, nan_bits: int = 0) -> np.ndarray:
    """Round to an integer and saturate to the destination's range; NaN gives ``nan_bits``."""
    w, signed = int(t[1:]), t[0] == "s"
    r = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[irnd](v)
    lo, hi = (-(2.0 ** (w - 1)), 2.0 ** (w - 1)) if signed else (0.0, 2.0**w)
    nan = np.isnan(r)
    safe = np.where(nan, 0.0, np.clip(r, lo, hi))
    top = hi >= 2.0**63
    big = safe >= hi
    if signed:
        out = np.where(big, 0.0, safe).astype(np.int64)
        out = np.where(big, np.int64(2 ** (w - 1) - 1), out).view(np.uint64)
    elif top:
        out = np.where(big, 0.0, safe).astype(np.uint64)
        out = np.where(big, np.uint64(2**64 - 1), out)
    else:
        out = np.where(big, 2.0**w - 1, safe).astype(np.uint64)
    out = out.astype(_U[w])
    return np.where(nan, _U[w](nan_bits), out) if nan_bits else out


def _int_convert(a: np.ndarray, st: str, dt: str, sat: bool) -> np.ndarray:
    sw, ss = int(st[1:]), st[0] == "s"
    dw, ds = int(dt[1:]), dt[0] == "s"
    if not sat:
        v = _sx(a, sw).astype(np.int64).view(np.uint64) if ss else a.astype(np.uint64)
        return v.astype(_U[dw])
    if sw == 64 and not ss:
        v = a
        lo, hi = (0, 2 ** (dw - 1) - 1) if ds else (0, 2**dw - 1)
        return np.minimum(v, np.uint64(hi)).astype(_U[dw])
    v = _sx(a, sw).astype(np.int64) if ss else a.astype(np.int64)
    lo, hi = (-(2 ** (dw - 1)), 2 ** (dw - 1) - 1) if ds else (0, 2**dw - 1)
    if dw == 64 and not ds:
        return np.where(v < 0, 0, v).view(np.uint64)
    return np.clip(v, lo, hi).view(np.uint64).astype(_U[dw])


_FP8 = {"e4m3x2": "e4m3", "e5m2x2": "e5m2"}


def _to_f32_bits_from_float(v: np.ndarray, t: str, rnd: str, *, relu: bool, satfinite: bool) -> np.ndarray:
    """float64 values rounded into f16/bf16/f32/f64 bits with cvt's modifiers."""
    if relu:
        v = np.where(np.signbit(v) & ~np.isnan(v), 0.0, v)
    if t in ("f16", "bf16") and rnd in ("rn", "rz") and not satfinite:
        out = _fmt.encode_bits(v.astype(np.float32), _FMT[t], rnd)  # exact: v holds f32 values here
        return np.where(np.isnan(v), np.uint16(_NAN[t]), out)
    r = _round_to(v, None, t, rnd) if t != "f64" else v
    if satfinite:
        top = {"f16": 65504.0, "bf16": float((2 - 2.0**-7) * 2.0**127),
               "f32": float(np.finfo(np.float32).max)}[t]
        r = np.where(np.isnan(r), r, np.clip(r, -top, top))
    return _bits(r, t)


_PACK_BITS = {"u16": 16, "s16": 16, "u8": 8, "s8": 8, "u4": 4, "s4": 4, "u2": 2, "s2": 2}


def _build_cvt_pack(ctx: _Ctx) -> AluOp:
    """``cvt.pack.sat.{u16,s16}.s32 d, a, b`` and ``cvt.pack.sat.{u8,s8,u4,s4,u2,s2}.s32.b32 d, a, b, c``
    (PTX ISA 9.0 §9.7.9.22): a and b saturated to the n-bit type, b in bits n-1..0 and a in bits 2n-1..n of d;
    d's bits above 2n are c's low bits (the 16-bit form has none left)."""
    mods = ctx.mods
    ct = mods[-1] if len(mods) == 5 else None
    body = mods[:4] if ct else mods
    if len(body) != 4 or body[:2] != ("pack", "sat") or body[2] not in _PACK_BITS or body[3] != "s32":
        raise _unsupported(ctx.name, "cvt.pack.sat.{u16,s16}.s32 or cvt.pack.sat.{u8,s8,u4,s4,u2,s2}.s32.b32",
                           "cvt")
    kt = body[2]
    n = _PACK_BITS[kt]
    if (n == 16) != (ct is None) or ct not in (None, "b32"):
        raise _unsupported(ctx.name, "the 16-bit forms take two sources, the narrower ones a third .b32", "cvt")
    _check_arity(ctx, 2 if n == 16 else 3, "cvt")
    lo, hi = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if kt[0] == "s" else (0, (1 << n) - 1)
    mask = np.int64((1 << n) - 1)

    def sat(x):
        return np.clip(x.view(np.int32).astype(np.int64), lo, hi) & mask

    def fn(a, b, c=None):
        td = sat(b) | (sat(a) << np.int64(n))
        if c is not None:
            td = td | (c.astype(np.int64) << np.int64(2 * n))
        return ((td & np.int64(0xFFFFFFFF)).astype(np.uint32),)
    return _op(ctx, ("b32",), ("s32", "s32") + (("b32",) if ct else ()), fn)


def _build_cvt(ctx: _Ctx) -> AluOp:
    mods = ctx.mods
    if "pack" in mods:
        return _build_cvt_pack(ctx)
    rest, (dt_, st) = _split_mods(ctx, {"rn", "rz", "rm", "rp", "rna", "ftz", "sat", "relu", "satfinite"}
                                  | set(_IRND), "cvt", ntypes=2)
    rnd = _rounding(rest, default="")
    irnd = next((m for m in rest if m in _IRND), "")
    ftz = "ftz" in rest
    sat = "sat" in rest
    relu = "relu" in rest
    satfinite = "satfinite" in rest

    def need(n):
        _check_arity(ctx, n, "cvt")

    # packed narrow conversions from two f32 values (a goes to the upper half)
    if st == "f32" and dt_ in ("f16x2", "bf16x2", "e4m3x2", "e5m2x2", "e2m1x2", "ue8m0x2"):
        need(2)
        return _cvt_pack_from_f32(ctx, dt_, rnd or "rn", relu, satfinite)
    if dt_ in ("f16x2", "bf16x2") and st in ("e4m3x2", "e5m2x2", "e2m1x2", "ue8m0x2"):
        need(1)
        return _cvt_unpack_fp8(ctx, dt_, st, relu)
    if dt_ == "tf32" and st == "f32":
        need(1)
        return _cvt_tf32(ctx, rnd or ("rna" if "rna" in rest else "rn"), relu, satfinite)
    need(1)
    dst_int = dt_ in _INTS
    src_int = st in _INTS
    if dst_int and src_int:
        if rest and rest != ["sat"]:
            raise _unsupported(ctx.name, "integer-to-integer cvt takes only .sat", "cvt")
        return _op(ctx, (dt_,), (st,), lambda a: (_int_convert(a, st, dt_, sat),))
    if dt_ not in _INTS + _FLOATS or st not in _INTS + _FLOATS:
        raise _unsupported(ctx.name, f"cvt from .{st} to .{dt_}", "cvt")
    if src_int:  # int -> float
        r = rnd or "rn"

        if r == "rn" and dt_ in ("f32", "f64") and not (ftz or sat):
            npt = np.float32 if dt_ == "f32" else np.float64
            sdt = _S[type_width(st)] if st[0] == "s" else _U[type_width(st)]
            # numpy's integer-to-float casts round to nearest even (one rounding)
            return _op(ctx, (dt_,), (st,), lambda a: (a.view(sdt).astype(npt).view(_U[type_width(dt_)]),))

        def fn_if(a):
            with np.errstate(all="ignore"):
                s, e = _int_value_pair(a, st)
                v = _round_to(s, e, dt_, r)
                return (_finish(v, dt_, ftz=ftz, sat=sat),)
        return _op(ctx, (dt_,), (st,), fn_if)
    if dst_int:  # float -> int: saturating, NaN -> 0
        ir = irnd or "rzi"
        # PTX ISA 9.0 §9.7.9.21: NaN converts to 0. The H200 gives 0 from f16/bf16/f32 into 8- to 32-bit
        # integers, but 1 << (width - 1) from f64 or into 64-bit integers (its F2I.F64 and .S64/.U64 forms)
        nan_bits = (1 << (type_width(dt_) - 1)) if (st == "f64" or type_width(dt_) == 64) else 0

        def fn_fi(a):
            with np.errstate(all="ignore"):
                x = _to64(_flush(a, st) if ftz else a, st)
                return (_float_to_int(x, dt_, ir, nan_bits),)
        return _op(ctx, (dt_,), (st,), fn_fi)
    # float -> float
    wide = type_width(dt_) > type_width(st) or (dt_, st) in (("f32", "bf16"),)

    def fn_ff(a):
        with np.errstate(all="ignore"):
            x = _to64(_flush(a, st) if ftz and st == "f32" else a, st)
            if irnd:
                x = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[irnd](x)
                v = x
            elif wide or dt_ == st:
                v = x
            else:
                v = _round_to(x, None, dt_, rnd or "rn") if dt_ != "f64" else x
            if relu:
                v = np.where(np.signbit(v) & ~np.isnan(v), 0.0, v)
            if satfinite:
                top = {"f16": 65504.0, "bf16": float((2 - 2.0**-7) * 2.0**127),
                       "f32": float(np.finfo(np.float32).max), "f64": float(np.finfo(np.float64).max)}[dt_]
                v = np.where(np.isnan(v), v, np.clip(v, -top, top))
            out = _finish(v, dt_, ftz=ftz and dt_ == "f32", sat=sat)
            return (_cvt_nan(out, a, st, dt_, bool(irnd)),)
    return _op(ctx, (dt_,), (st,), fn_ff)


def _cvt_nan(out: np.ndarray, a: np.ndarray, st: str, dt_: str, rounded: bool) -> np.ndarray:
    """The NaN a float-to-float cvt gives, as the H200 does (tests/data/h200_ptx_alu.npz): where f64 is the
    source or the destination the payload is kept (quieted; cvt.f64.f64 without rounding copies the bits);
    bf16 to f32 is a plain shift (a signalling NaN stays signalling); other conversions give the canonical NaN."""
    if "f64" not in (st, dt_) and (st, dt_) != ("bf16", "f32"):
        return out
    ua = a.astype(np.uint64)
    if st == "f64":
        nan = (ua & np.uint64(0x7FFFFFFFFFFFFFFF)) > np.uint64(0x7FF0000000000000)
        sign = ua >> np.uint64(63)
        if dt_ == "f64":
            val = ua if not rounded else ua | _QUIET64
        else:
            keep = {"f32": 22, "f16": 9, "bf16": 6}[dt_]
            pay = (ua >> np.uint64(52 - 1 - keep)) & np.uint64((1 << keep) - 1)
            e = {"f32": (8, 23), "f16": (5, 10), "bf16": (8, 7)}[dt_]
            val = (sign << np.uint64(e[0] + e[1])) | np.uint64(((1 << e[0]) - 1) << e[1]) | np.uint64(
                1 << (e[1] - 1)) | pay
        return np.where(nan, val.astype(out.dtype), out)
    w = type_width(st)
    expm, sgn = _EXP[st], _SIGN[st]
    nan = ((ua & np.uint64(expm)) == np.uint64(expm)) & ((ua & np.uint64(~(expm | sgn) & ((1 << w) - 1))) != 0)
    if dt_ == "f32":  # bf16 -> f32
        return np.where(nan, (ua << np.uint64(16)).astype(np.uint32), out)
    mbits = {"f32": 23, "f16": 10, "bf16": 7}[st]
    val = ((ua >> np.uint64(w - 1)) << np.uint64(63)) | np.uint64(0x7FF8000000000000) | (
        (ua & np.uint64((1 << mbits) - 1)) << np.uint64(52 - mbits))
    return np.where(nan, val, out)


def _cvt_pack_from_f32(ctx: _Ctx, dt_: str, rnd: str, relu: bool, satfinite: bool) -> AluOp:
    out_t = {"f16x2": "b32", "bf16x2": "b32", "e4m3x2": "b16", "e5m2x2": "b16", "ue8m0x2": "b16",
             "e2m1x2": "b8"}[dt_]

    def enc(x: np.ndarray) -> np.ndarray:
        v = x.view(np.float32).astype(np.float64)
        if relu:  # negative values and -0 to +0 (measured on the H200)
            v = np.where(np.signbit(v) & ~np.isnan(v), 0.0, v)
        if dt_ in ("f16x2", "bf16x2"):
            return _to_f32_bits_from_float(v, _HALF[dt_], rnd, relu=False, satfinite=satfinite).astype(np.uint32)
        f32 = v.astype(np.float32)
        if dt_ in _FP8:  # the H200 gives 0x7F for every NaN, e5m2 too (CUDA's host reference keeps payload bits)
            return np.where(np.isnan(f32), np.uint32(0x7F), _fmt.encode_bits(f32, _FP8[dt_], rnd).astype(np.uint32))
        if dt_ == "e2m1x2":
            return _fmt.encode_e2m1(f32, rnd).astype(np.uint32)
        if dt_ == "ue8m0x2":
            return _fmt.encode_bits(f32, "ue8m0", rnd).astype(np.uint32)
        return _fmt.encode_bits(f32, _FP8[dt_], rnd).astype(np.uint32)

    sh = np.uint32({"b32": 16, "b16": 8, "b8": 4}[out_t])
    odt = _U[type_width(out_t)]

    def fn(a, b):
        with np.errstate(all="ignore"):
            return (((enc(a) << sh) | enc(b)).astype(odt),)
    return _op(ctx, (out_t,), ("f32", "f32"), fn)


def _cvt_unpack_fp8(ctx: _Ctx, dt_: str, st: str, relu: bool) -> AluOp:
    in_t = "b8" if st == "e2m1x2" else "b16"
    half = _HALF[dt_]

    def dec(codes: np.ndarray) -> np.ndarray:
        if st == "e2m1x2":
            v = _fmt.decode_e2m1(codes)
        else:
            v = _fmt.decode_bits(codes.astype(np.uint8), {"e4m3x2": "e4m3", "e5m2x2": "e5m2", "ue8m0x2": "ue8m0"}[st])
        v = v.astype(np.float64)
        if relu:
            v = np.where(np.signbit(v) & ~np.isnan(v), 0.0, v)
        return _bits(_round_to(v, None, half, "rn"), half).astype(np.uint32)

    nb = np.uint32(4 if st == "e2m1x2" else 8)
    m = np.uint32(0xF if st == "e2m1x2" else 0xFF)

    def fn(a):
        with np.errstate(all="ignore"):
            x = a.astype(np.uint32)
            return ((dec(x & m) | (dec((x >> nb) & m) << np.uint32(16))),)
    return _op(ctx, ("b32",), (in_t,), fn)


def _cvt_tf32(ctx: _Ctx, rnd: str, relu: bool, satfinite: bool) -> AluOp:
    def fn(a):
        with np.errstate(all="ignore"):
            mag = a & np.uint32(0x7FFFFFFF)
            nan = mag > np.uint32(0x7F800000)
            x = a
            if relu:
                x = np.where((a >> np.uint32(31)).astype(bool) & ~nan, np.uint32(0), x)
            if rnd == "rna":
                # ties away on the bit pattern; a NaN is truncated, as the H200 does (so the signalling NaN
                # 0x7F800001 becomes Inf, and other NaNs keep their top mantissa bits)
                r = np.where(nan, x, x + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
            else:
                v = _fmt.round_value(x.view(np.float32).astype(np.float64), "tf32", rnd)
                r = np.where(nan, np.uint32(0x7FFFE000), v.astype(np.float32).view(np.uint32))
            if satfinite:  # the H200 steps a result with an all-ones exponent down one tf32 ulp (Inf -> max)
                allones = (r & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
                r = np.where(allones, r - np.uint32(0x2000), r)
            return (r,)
    return _op(ctx, ("b32",), ("f32",), fn)


# ---------------------------------------------------------------------------------------------------------

_BUILDERS: dict[str, Callable[[_Ctx], AluOp]] = {
    "add": _build_add_sub, "sub": _build_add_sub, "addc": _build_add_sub, "subc": _build_add_sub,
    "mul": _build_mul, "mad": _build_mad, "madc": _build_mad, "fma": _build_float_arith,
    "mul24": _build_24, "mad24": _build_24, "sad": _build_sad,
    "div": _build_div_rem, "rem": _build_div_rem, "abs": _build_abs_neg, "neg": _build_abs_neg,
    "min": _build_min_max, "max": _build_min_max,
    "popc": _build_bitscan, "clz": _build_bitscan, "bfind": _build_bitscan, "brev": _build_bitscan,
    "fns": _build_fns, "bfe": _build_bfe, "bfi": _build_bfi, "dp4a": _build_dp, "dp2a": _build_dp,
    "and": _build_logic, "or": _build_logic, "xor": _build_logic, "not": _build_logic, "cnot": _build_logic,
    "lop3": _build_lop3, "shf": _build_shf, "shl": _build_shift, "shr": _build_shift,
    "prmt": _build_prmt, "mov": _build_mov,
    "testp": _build_testp, "copysign": _build_copysign,
    "rcp": _build_rcp_sqrt, "sqrt": _build_rcp_sqrt, "rsqrt": _build_rcp_sqrt,
    "sin": _build_mufu, "cos": _build_mufu, "lg2": _build_mufu, "ex2": _build_mufu, "tanh": _build_mufu,
    "setp": _build_setp, "set": _build_set, "selp": _build_selp, "slct": _build_slct,
    "cvt": _build_cvt,
}

OPCODES: frozenset[str] = frozenset(_BUILDERS)
"""Every opcode (first dotted part) :func:`compile` handles; the executor sends exactly these here."""
