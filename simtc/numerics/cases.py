"""Deterministic random operands for numerics tests, benchmarks and hardware cross-checks.

The same seed gives the same bits on every machine and numpy version: the stream is
SplitMix64 (Steele, Lea and Flood, OOPSLA 2014) computed in numpy ``uint64`` arithmetic, and
"normal" values are Irwin-Hall sums of 12 uniforms (no ``log``/``cos``, whose last bit can
differ between numpy builds). Values are rounded to the operand type with simtc's own
conversions, so every returned ``a``/``b`` value is exactly representable in ``dtype``.

Distributions (``DISTRIBUTIONS``):

``normal``     standard-normal-like inputs and accumulator
``wide``       normal x 2**U{-20..19} per element (products span about 2**+-40)
``tiny``       products below 2**-133 (the zero-exponent floor decides alignment), 10 % zeros,
               accumulator zero or fp32-subnormal
``zeros``      many exact zeros and negative zeros in A, B and C
``cancel``     heavy cancellation: the second half of each K=16 row cancels the first half
               up to a small perturbation, and C cancels what is left
``overflow``   magnitudes near the top of fp32 (bf16) / fp16 range, sums may overflow
``raw``        random bit patterns (NaN, Inf, subnormals included), MMA-Sim style
``mixed``      each instruction picks one of the above

>>> a, b, c = mma_operands("wide", 2, 3, 16, dtype="bf16", seed=7)
>>> a.shape, b.shape, c.shape, a.dtype
((2, 16), (3, 16), (2, 3), dtype('float32'))
>>> bool((mma_operands("normal", 2, 3, 16, seed=1)[0] == mma_operands("normal", 2, 3, 16, seed=1)[0]).all())
True
"""

from __future__ import annotations

import numpy as np

from simtc.errors import DtypeError, SimtcError
from simtc.numerics.formats import decode_bits, dtype_info, encode_bits

__all__ = ["DISTRIBUTIONS", "Stream", "mma_operands"]

DISTRIBUTIONS = ("normal", "wide", "tiny", "zeros", "cancel", "overflow", "raw", "mixed")

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


class Stream:
    """A counter-based SplitMix64 stream: ``Stream(seed).uint64(n)`` is platform independent."""

    def __init__(self, seed: int):
        self.state = np.uint64(int(seed) & 0xFFFFFFFFFFFFFFFF)
        self.counter = 0

    def uint64(self, n: int) -> np.ndarray:
        with np.errstate(over="ignore"):
            idx = np.arange(self.counter + 1, self.counter + 1 + n, dtype=np.uint64)
            z = self.state + idx * _GOLDEN
            z = (z ^ (z >> np.uint64(30))) * _M1
            z = (z ^ (z >> np.uint64(27))) * _M2
            z = z ^ (z >> np.uint64(31))
        self.counter += n
        return z

    def uniform(self, shape) -> np.ndarray:
        """float64 in [0, 1) with 53 random bits."""
        n = int(np.prod(shape))
        return ((self.uint64(n) >> np.uint64(11)).astype(np.float64) * 2.0**-53).reshape(shape)

    def normal(self, shape) -> np.ndarray:
        """Irwin-Hall(12) - 6: mean 0, variance 1, exact and reproducible."""
        u = self.uniform((12, *np.atleast_1d(shape)))
        return u.sum(axis=0) - 6.0

    def integers(self, lo: int, hi: int, shape) -> np.ndarray:
        """Integers in [lo, hi) (modulo reduction; the bias is irrelevant for tests)."""
        n = int(np.prod(shape))
        return (lo + (self.uint64(n) % np.uint64(hi - lo)).astype(np.int64)).reshape(shape)


def _round(x: np.ndarray, dtype: str) -> np.ndarray:
    return decode_bits(encode_bits(x.astype(np.float32), dtype), dtype)


def _fp32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32)


def mma_operands(dist: str, m: int, n: int, k: int, *, dtype: str = "bf16", seed: int = 0):
    """Random A (m x k), B (n x k) and C (m x n) as float32 arrays for one tensor-core instruction.

    ``a`` and ``b`` hold values exactly representable in ``dtype`` ("bf16" or "fp16");
    ``c`` is fp32. See the module docstring for the distributions.
    """
    info = dtype_info(dtype)
    if info.name not in ("bf16", "fp16"):
        raise DtypeError(f"operand cases exist for bf16 and fp16, not {dtype!r}", rule="16-bit MMA inputs")
    if dist not in DISTRIBUTIONS:
        raise SimtcError(f"unknown distribution {dist!r}; known: {', '.join(DISTRIBUTIONS)}",
                         rule="operand distributions")
    s = Stream(seed * 0x1000193 + DISTRIBUTIONS.index(dist) + (0 if info.name == "bf16" else 101))
    if dist == "mixed":
        pick = DISTRIBUTIONS[int(s.integers(0, len(DISTRIBUTIONS) - 1, 1)[0])]
        return mma_operands(pick, m, n, k, dtype=dtype, seed=int(s.uint64(1)[0] >> np.uint64(16)))
    bf16 = info.name == "bf16"
    if dist == "normal":
        a, b, c = s.normal((m, k)), s.normal((n, k)), s.normal((m, n))
    elif dist == "wide":
        lim = 20 if bf16 else 6  # fp16 keeps products inside its range
        a = s.normal((m, k)) * 2.0 ** s.integers(-lim, lim, (m, k))
        b = s.normal((n, k)) * 2.0 ** s.integers(-lim, lim, (n, k))
        c = s.normal((m, n)) * 2.0 ** s.integers(-lim, lim, (m, n))
    elif dist == "tiny":
        # bf16: |a|,|b| ~ 2**-68 -> products ~ 2**-136; fp16 subnormals reach 2**-24 only,
        # so its products (>= 2**-48) cannot go below 2**-133: use its subnormal range instead.
        scale = 2.0**-68 if bf16 else 2.0**-20
        a = s.normal((m, k)) * scale * 2.0 ** s.integers(-3, 3, (m, k))
        b = s.normal((n, k)) * scale * 2.0 ** s.integers(-3, 3, (n, k))
        a[s.uniform((m, k)) < 0.1] = 0.0
        b[s.uniform((n, k)) < 0.1] = 0.0
        c = np.where(s.uniform((m, n)) < 0.5, 0.0, s.normal((m, n)) * 2.0**-140)
    elif dist == "zeros":
        a, b, c = s.normal((m, k)), s.normal((n, k)), s.normal((m, n))
        for x in (a, b, c):
            u = s.uniform(x.shape)
            x[u < 0.4] = 0.0
            x[(u >= 0.4) & (u < 0.5)] = -0.0
    elif dist == "cancel":
        h = k // 2
        a = s.normal((m, k))
        b = s.normal((n, k))
        a[:, h:2 * h] = -a[:, :h] * (1 + 2.0**-7 * s.normal((m, h)))
        b[:, h:2 * h] = b[:, :h]
        a, b = _round(a, dtype), _round(b, dtype)
        approx = a.astype(np.float64) @ b.astype(np.float64).T
        c = -approx * (1 + 2.0**-20 * s.normal((m, n)))
    elif dist == "overflow":
        top = 60 if bf16 else 7  # bf16: products ~ 2**120..2**127; fp16: |x| up to ~2**15
        a = s.normal((m, k)) * 2.0 ** (top + s.integers(0, 4, (m, k)))
        b = s.normal((n, k)) * 2.0 ** (top + s.integers(0, 4, (n, k)))
        c = s.normal((m, n)) * (2.0**126 if bf16 else 2.0**120)
    else:  # raw bits, returned as they are (NaN payloads included)
        low16 = np.uint64(0xFFFF)
        a = decode_bits((s.uint64(m * k) & low16).astype(np.uint16).reshape(m, k), dtype)
        b = decode_bits((s.uint64(n * k) & low16).astype(np.uint16).reshape(n, k), dtype)
        c = (s.uint64(m * n) & np.uint64(0xFFFFFFFF)).astype(np.uint32).reshape(m, n).view(np.float32)
        return a, b, c
    with np.errstate(over="ignore", invalid="ignore"):
        return _round(a, dtype), _round(b, dtype), _fp32(c)
