"""Tensor-core arithmetic, bit for bit: the fused dot-product-add of Hopper and Blackwell.

One tensor-core instruction with 16-bit inputs (bf16 or fp16), K = 16 and an fp32 accumulator
computes every output element as a single fused sum (MMA-Sim, arXiv 2511.10909, ``microsoft/MMA-Sim``
``mmasim/simulator/nv_ptx.py``; Khattak & Mikaitis, arXiv 2512.07004; verified bit-exactly on an H200 for
``wgmma`` bf16, ``tests/data/h200_crosscheck_seed0.npz``):

1. each input is ``s * 2**e`` with ``1 <= |s| < 2``; subnormals keep a small ``s`` at the
   format's minimum exponent;
2. products keep ``e = e_a + e_b`` and an exact, *not renormalized* significand in [1, 4); a
   zero product (either factor zero) has ``s = 0`` and exponent ``E_ZERO = -133``;
3. the accumulator ``c`` is decomposed as an fp32 value the same way (zero: ``E_ZERO``);
4. ``E`` = the largest exponent of the 17 terms (zeros included);
5. every term is truncated to ``F = 25`` fraction bits relative to ``2**E`` (no guard or
   sticky bits) and the integers are summed exactly;
6. the sum is rounded toward zero to fp32 (subnormals produced); an exact zero sum is +0;
7. NaN inputs and Inf - Inf give the canonical NaN ``0x7FFFFFFF``; otherwise an Inf input
   propagates. A finite sum beyond fp32 range becomes Inf (taken from MMA-Sim; the hardware's
   overflow behaviour has not been characterised).

The zero exponent belongs to the zero *product* (MMA-Sim 2.1.1 sets ``e = e_zero`` wherever
``s_a * s_b == 0``), not to each zero input; the H200 data cannot tell the two readings apart
(it would take a zero times a large factor next to tiny terms), so simtc follows the reference.

Implementation, three exact paths giving the same bits: (a) where no term of an output has a bit below the
alignment window (operands of few significant bits, as integer-valued test data), step 5 cuts nothing and D is
the exact ``a @ b.T + c`` (one float64 matmul, exact there) rounded by step 6; a cheap bound on E and on each
term's lowest set bit decides where (``_untruncated``). (b) Otherwise, for finite float32 operands and K <= 16,
the terms are formed in float32 (a 16-bit x 16-bit product and a power-of-two scaling are exact there while
normal), truncated by the cast to int32 and summed exactly in int32. (c) Anything else (Inf/NaN, float32
subnormal factors, extreme scales, float64 operands): the same steps in float64, ``trunc(product * 2**(F - E))``
with an exact integer sum (< 2**33). ``tests/numerics/test_fdpa.py`` holds the paths against each other and
against a scalar reading of the recipe.

What is verified on hardware (``tests/data/README_h200.md`` describes each file) and what is taken from a
reference: bf16 ``wgmma`` on sm_90a with normal, wide-exponent and tiny (fp32-subnormal, exact-zero) inputs
(``h200_crosscheck_seed0.npz``); bf16 and fp16 inputs with an fp32 D and fp16 inputs with an **fp16 D** (rounded
to nearest after every k16 instruction), A from registers, imm-scale -1, cancelling and overflowing chains (60 RS
chains, ``h200_wgmma_rs.npz``); fp16 accumulation over K = 512 in CUTLASS's Hopper tutorials
(``h200_cute_tutorials.json``, SHA-256 of C). ``tcgen05.mma`` (sm100, including ``.ws`` and A from TMEM) using
the same arithmetic and NaN handling are taken from MMA-Sim and Khattak & Mikaitis, not measured here.

>>> import numpy as np
>>> a = np.ones((1, 16), np.float32); b = np.full((1, 16), 2.0**-26, np.float32)
>>> c = np.ones((1, 1), np.float32)
>>> float(tensor_core_mma(a, b, c)[0, 0])  # each 2**-26 product falls below the 25-bit window
1.0
>>> float(a[0].astype(np.float64) @ b[0].astype(np.float64) + 1.0)  # the exact sum, 1 + 2**-22
1.000000238418579
"""

from __future__ import annotations

import numpy as np
from attrs import frozen

from simtc.errors import DtypeError, ShapeError, SimtcError
from simtc.numerics.formats import decode_bits, encode_bits

__all__ = ["ARCH_PARAMS", "E_ZERO", "FdpaParams", "fused_dot_add", "tensor_core_mma"]

E_ZERO = -133
"""Exponent of a zero product or zero accumulator (fp32 output): MMA-Sim; the H200 confirms -133 for
the cases it can see (the tiny and zeros sets of ``tests/data/h200_crosscheck_seed0.npz``)."""


@frozen
class FdpaParams:
    """Parameters of one architecture's fused dot-product-add for 16-bit inputs."""

    frac_bits: int
    """F: fraction bits kept when terms are aligned to the largest exponent."""
    e_zero: int
    """Exponent given to a zero input (and a zero accumulator)."""
    instr_k: int
    """K of one instruction (terms fused in one step, plus the accumulator)."""
    source: str
    e_zero_f16: int = -21
    """Exponent of a zero term when D is fp16 (MMA-Sim 2.1.1 ``e_zero = -21``) [impl]."""


ARCH_PARAMS: dict[str, FdpaParams] = {
    "sm100": FdpaParams(25, E_ZERO, 16, "MMA-Sim TCGen05MMASim; Khattak & Mikaitis B200 model [impl][paper]"),
    "sm90": FdpaParams(25, E_ZERO, 16,
                       "MMA-Sim WGMMASim; H200 measurement (tests/data/h200_crosscheck_seed0.npz) [impl][hw]"),
}

_MIN_EXP = {"bf16": -126, "fp16": -14, "fp32": -126}  # also the fp16 / fp32 accumulator
_CANONICAL_NAN = np.uint32(0x7FFFFFFF).view(np.float32)
_CANONICAL_NAN_F16 = np.float16(np.uint16(0x7FFF).view(np.float16)).astype(np.float32)


_NO_EXP = -16000
"""Exponent given to a zero *input*: any product with it stays far below every real exponent."""


def _decompose_exponent(x: np.ndarray, fmt: str, e_zero: int) -> np.ndarray:
    """Exponent e (int16) with x = s * 2**e, 1 <= |s| < 2 (subnormals: the minimum exponent; zero: e_zero)."""
    _, e = np.frexp(x)
    e = np.maximum(e.astype(np.int16) - 1, _MIN_EXP[fmt])
    return np.where(x == 0, np.int16(e_zero), e).astype(np.int16)


def _fits_float32(at: np.ndarray, bt: np.ndarray, shift: np.ndarray) -> bool:
    """True when every product and every alignment scale is a normal float32 (the fast path is exact)."""
    if shift.size == 0 or shift.min() < -126 or shift.max() > 127:
        return False
    amax, bmax = np.abs(at).max(initial=0.0), np.abs(bt).max(initial=0.0)
    nz_a, nz_b = np.abs(at[at != 0]), np.abs(bt[bt != 0])
    if nz_a.size == 0 or nz_b.size == 0:
        return amax * bmax < 2.0**127
    return amax * bmax < 2.0**127 and nz_a.min() * nz_b.min() >= 2.0**-126


def _round_toward_zero_fp32(v: np.ndarray) -> np.ndarray:
    """Round exact float64 values toward zero to fp32 (subnormals included; beyond range -> Inf)."""
    bits = v.view(np.uint64) & ~np.uint64((1 << 29) - 1)  # keep 23 of 52 fraction bits
    normal = bits.view(np.float64)
    tiny = np.abs(v) < 2.0**-126
    if tiny.any():
        normal = np.where(tiny, np.trunc(v * 2.0**149) * 2.0**-149, normal)
    with np.errstate(over="ignore"):
        out = normal.astype(np.float32)
    out[out == 0] = 0.0  # an exact or truncated-away zero is +0
    return out


def fused_dot_add(a: np.ndarray, b: np.ndarray, c: np.ndarray, *, fmt: str = "bf16",
                  params: FdpaParams = ARCH_PARAMS["sm100"], out: str = "fp32") -> np.ndarray:
    """One fused step: D[m, n] = sum_k a[m, k] * b[n, k] + c[m, n] with tensor-core arithmetic.

    ``a`` (M x K) and ``b`` (N x K) hold values of ``fmt`` as float32 (or float64), ``c`` is
    the accumulator (M x N) in the output type; all K terms are fused (call it once per
    instruction). ``out`` is ``"fp32"`` (round toward zero) or ``"fp16"`` (the same fused sum,
    zero terms at exponent -21, then round to nearest even to fp16 [impl: MMA-Sim]). Returns
    float32 (holding fp16 values when ``out`` is fp16).
    """
    if out not in ("fp32", "fp16"):
        raise DtypeError(f"accumulator type {out!r}: fp32 or fp16", rule="kind::f16 D types",
                         ref="PTX ISA 9.0 §9.7.16.2.1 Table 39")
    if fmt not in _INPUT_FORMATS:
        raise DtypeError(f"fused_dot_add takes fmt 'bf16' or 'fp16', not {fmt!r}", rule=_RULE_INPUTS,
                         ref="PTX ISA 9.0 §9.7.16.2.1 Table 39")
    e_zero = params.e_zero if out == "fp32" else params.e_zero_f16
    a, b, c = (_numeric(x, name) for x, name in ((a, "a"), (b, "b"), (c, "c")))
    _check_shapes(a, b, c)
    f = params.frac_bits
    if not (a.dtype == b.dtype == c.dtype == np.float32 and a.shape[1] <= _MAX_K_FAST):
        return _fdpa_general(a, b, c, fmt, f, e_zero, out)
    m = a.shape[0]
    bits = np.concatenate((a, b)).view(np.int32) & 0x7FFFFFFF  # A's and B's rows: magnitude bits (IEEE 754 binary32)
    field = bits >> 23
    if field.max() == 255 or not np.isfinite(c).all():  # Inf or NaN somewhere
        return _fdpa_general(a, b, c, fmt, f, e_zero, out)
    whole = _untruncated(bits, field, m, c, fmt, f, e_zero, out)
    rows = whole.all(axis=1)
    if rows.all():
        return _round(_exact_sum(a, b, c), out)
    res = _fdpa_terms(a, b, c, bits, field, fmt, f, e_zero, out)  # terms may be cut
    if rows.any():
        res[rows] = _round(_exact_sum(a[rows], b, c[rows]), out)
    return res


_MAX_K_FAST = 16
"""Largest K of the float32 paths: 16 aligned terms (each below 2**(F + 2)) sum exactly in int32."""

_BIG = 1 << 20


def _pow2(e: np.ndarray, dtype) -> np.ndarray:
    """``2.0**e`` for integer ``e`` inside the normal range of ``dtype`` (float32 or float64), from the bits."""
    if dtype == np.float32:
        return ((e.astype(np.int32) + 127) << 23).view(np.float32)
    return ((e.astype(np.int64) + 1023) << 52).view(np.float64)


def _untruncated(bits, field, m: int, c, fmt: str, f: int, e_zero: int, out: str) -> np.ndarray:
    """Where (M, N) no term of the output is cut by step 5, so that D is the exact ``a @ b.T + c``, rounded.

    ``bits`` and ``field`` are the magnitude bits and exponent fields of A's rows then B's (finite float32 values).
    A term is cut only when it has a bit below ``2**(E - F)``. ``E`` is at most
    ``Eup = max(max_k e_a + max_k e_b, e_c, e_zero)`` (a zero input counted at the format's minimum exponent, which
    only raises the bound). A product's lowest set bit is the sum of its factors' (odd times odd is odd), so no
    product of output (m, n) is cut where ``Eup - F <= min_k low_a + min_k low_b`` (``low``: the exponent of a
    value's lowest set bit; zeros left out), and the accumulator's term is not cut where ``c * 2**(F - Eup)`` is an
    integer. Where both hold step 5 keeps every term whole and D is the exact sum ``a @ b.T + c`` rounded as step 6
    rounds. That sum is exact in float64 in any order (:func:`_exact_sum`): every partial sum is a multiple of
    ``2**(Eup - F)`` below ``(K + 1) * 2**(Eup + 2)``, fewer than ``17 * 2**27`` units.
    """
    top = np.maximum(field.max(axis=1) - 127, _MIN_EXP[fmt])
    sig = (bits & 0x7FFFFF) + (np.minimum(field, 1) << 23)
    lowest = (sig & -sig).astype(np.float32).view(np.int32) >> 23  # the lowest set bit's exponent + 127
    low = np.where(bits != 0, np.maximum(field, 1) + lowest, _BIG).min(axis=1) - 277
    e_up = top[:m, None] + top[None, m:]
    ec = np.maximum(((c.view(np.int32) >> 23) & 0xFF) - 127, max(_MIN_EXP[out], e_zero))  # zero c: raises the bound
    np.maximum(e_up, ec, out=e_up)
    scaled = c * _pow2(f - e_up, np.float64)
    return (e_up - f <= low[:m, None] + low[None, m:]) & (np.trunc(scaled) == scaled)


def _exact_sum(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a @ b.T + c`` in float64, exact where :func:`_untruncated` holds."""
    total = a.astype(np.float64) @ b.astype(np.float64).T
    total += c
    return total


def _fdpa_terms(a, b, c, bits, field, fmt: str, f: int, e_zero: int, out: str) -> np.ndarray:
    """Steps 1-6 term by term for finite float32 operands, K <= 16 (the general path where float32 is not enough).

    ``bits`` and ``field`` as for :func:`_untruncated`. Every product of two 16-bit values (<= 22 significant bits)
    is exact in float32 when it is a normal number, and so is its scaling by ``2**(F - E)``; the scaled term lies
    below ``2**(F + 2)``, so the cast to int32 is step 5's truncation toward zero and 16 of them sum exactly in int32.
    """
    m = a.shape[0]
    nonzero = bits != 0
    e = np.where(nonzero, np.maximum(field - 127, _MIN_EXP[fmt]), _NO_EXP)
    et = np.ascontiguousarray(e.T, dtype=np.int16)  # K-first: contiguous (M, N) slabs below
    # step 4: E = max over the accumulator and every product exponent (a zero input's _NO_EXP stays far below)
    e_max = (et[:, :m, None] + et[:, None, m:]).max(axis=0).astype(np.int32)
    ec = np.maximum(((c.view(np.int32) >> 23) & 0xFF) - 127, _MIN_EXP[out])
    np.maximum(e_max, np.where(c != 0, ec, e_zero), out=e_max)
    # a zero product has exponent e_zero: any_k(a == 0 or b == 0) = any_k(a == 0) or any_k(b == 0)
    has_zero = ~nonzero.all(axis=1)
    e_max = np.where(has_zero[:m, None] | has_zero[None, m:], np.maximum(e_max, e_zero), e_max)
    shift = f - e_max
    # exact in float32: products normal (no float32 subnormal factor) and below 2**127, the scale a normal float32
    e_a, e_b = e[:m][nonzero[:m]], e[m:][nonzero[m:]]
    lo = (e_a.min() if e_a.size else 0) + (e_b.min() if e_b.size else 0)
    hi = (e_a.max() if e_a.size else 0) + (e_b.max() if e_b.size else 0)
    tiny = (nonzero & (field == 0)).any()
    if tiny or lo < -126 or hi > 125 or shift.min() < -126 or shift.max() > 127:
        return _fdpa_general(a, b, c, fmt, f, e_zero, out)
    at, bt = np.ascontiguousarray(a.T), np.ascontiguousarray(b.T)
    prod = at[:, :, None] * bt[:, None, :]
    prod *= _pow2(shift, np.float32)[None]
    terms = prod.astype(np.int32)  # step 5: toward zero
    total = np.add.reduce(terms, axis=0, dtype=np.int32).astype(np.int64)
    scale = _pow2(shift, np.float64)
    total += np.trunc(c * scale).astype(np.int64)  # the accumulator's term (< 2**(F + 1))
    return _round(total * _pow2(e_max - f, np.float64), out)  # step 6: the exact integer sum, scaled back


def _round(exact: np.ndarray, out: str) -> np.ndarray:
    """Step 6 (fp32: toward zero) or the fp16 accumulator's round to nearest even; a zero result is +0."""
    if out == "fp32":
        return _round_toward_zero_fp32(exact)
    with np.errstate(over="ignore"):
        res = exact.astype(np.float16).astype(np.float32)  # round to nearest even, overflow -> Inf
    res[res == 0] = 0.0
    return res


def _fdpa_general(a: np.ndarray, b: np.ndarray, c: np.ndarray, fmt: str, f: int, e_zero: int,
                  out: str) -> np.ndarray:
    """Steps 1-7 term by term (every input, any value)."""
    with np.errstate(invalid="ignore"):  # signalling-NaN payloads warn when widened
        a64 = a.astype(np.float64)
        b64 = b.astype(np.float64)
        c64 = c.astype(np.float32).astype(np.float64)
    finite = bool(np.isfinite(a64).all() and np.isfinite(b64).all() and np.isfinite(c64).all())
    if not finite:
        a64, b64, c64, special = _special_values(a64, b64, c64)
    # K-first layout: every step below is an elementwise pass over contiguous (M, N) slabs
    at, bt = np.ascontiguousarray(a64.T), np.ascontiguousarray(b64.T)
    ea = _decompose_exponent(at, fmt, _NO_EXP)
    eb = _decompose_exponent(bt, fmt, _NO_EXP)
    # step 4: E = max over the accumulator and every product exponent (int16 keeps this pass cheap)
    e_max = (ea[:, :, None] + eb[:, None, :]).max(axis=0).astype(np.int32)
    np.maximum(e_max, _decompose_exponent(c64, out, e_zero), out=e_max)
    # a zero product has exponent e_zero: any_k(a == 0 or b == 0) = any_k(a == 0) or any_k(b == 0)
    zero_prod = (at == 0).any(axis=0)[:, None] | (bt == 0).any(axis=0)[None, :]
    e_max = np.where(zero_prod, np.maximum(e_max, e_zero), e_max)
    shift = f - e_max
    if _fits_float32(at, bt, shift):
        # every product, scale and aligned term is exact in float32 (<= 22 significant bits)
        scale32 = np.ldexp(np.float32(1), shift).astype(np.float32)
        prod = at.astype(np.float32)[:, :, None] * bt.astype(np.float32)[:, None, :]
        prod *= scale32[None]
        np.trunc(prod, out=prod)
        total = prod.sum(axis=0, dtype=np.float64)
        scale = scale32.astype(np.float64)
    else:
        scale = np.ldexp(1.0, shift)
        prod = at[:, :, None] * bt[:, None, :]  # exact: 8 (11) bit x 8 (11) bit significands
        prod *= scale[None]  # exact power-of-two scaling
        np.trunc(prod, out=prod)  # step 5: truncate each aligned term toward zero
        total = prod.sum(axis=0)
    total += np.trunc(c64 * scale)  # step 6: exact integer sum (< 2**33)
    res = _round(np.ldexp(total, e_max - f), out)
    nan = _CANONICAL_NAN if out == "fp32" else _CANONICAL_NAN_F16
    if not finite:
        res = np.where(np.isnan(special), nan, np.where(np.isinf(special), special, res)).astype(np.float32)
    return res


def _special_values(a64, b64, c64):
    """Outputs that are NaN/Inf by the float64 sum rule; inputs with non-finite values zeroed."""
    with np.errstate(invalid="ignore", over="ignore"):
        special = (a64[:, None, :] * b64[None, :, :]).sum(axis=-1) + c64
    special = np.where(np.isfinite(special), 0.0, special)
    clean = [np.where(np.isfinite(x), x, 0.0) for x in (a64, b64, c64)]
    return clean[0], clean[1], clean[2], special


_INPUT_FORMATS = ("bf16", "fp16")
_RULE_INPUTS = "kind::f16 inputs are f16 or bf16"
_REF_SHAPES = "PTX ISA 9.0 §9.7.16.2.1 Table 39 (kind::f16: K = 16 per instruction)"


def _numeric(x, name: str) -> np.ndarray:
    """``x`` as a numpy array of real numbers, or a DtypeError naming the rule."""
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError) as e:  # ragged nested sequences
        raise DtypeError(f"{name} is not a rectangular array of numbers ({e})", rule="operands are numeric arrays") \
            from None
    if arr.dtype.kind not in "uif":
        raise DtypeError(f"{name} must hold real numbers, got an array of {arr.dtype}",
                         rule="operands are numeric arrays")
    return arr


def _check_shapes(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """A (M, K), B (N, K), C (M, N) with M, N, K >= 1, or a ShapeError naming the rule."""
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ShapeError(f"A must be (M, K) and B (N, K) with the same K; got {a.shape} and {b.shape}",
                         rule="D = A @ B.T: A is (M, K), B is (N, K)", ref=_REF_SHAPES)
    (m, k), n = a.shape, b.shape[0]
    if min(m, n, k) < 1:
        raise ShapeError(f"M = {m}, N = {n}, K = {k}: a tensor-core product has at least one row, column and "
                         "K element", rule="M, N, K >= 1", ref=_REF_SHAPES)
    if c.shape != (m, n):
        raise ShapeError(f"C must be (M, N) = {(m, n)}, got {c.shape}", rule="D = A @ B.T + C: C is (M, N)",
                         ref=_REF_SHAPES)


def _check_representable(x: np.ndarray, dtype: str, name: str) -> None:
    x32 = np.asarray(x, dtype=np.float32)
    if dtype == "bf16":  # bf16 values are float32 values whose low 16 bits are zero
        if not (x32.view(np.uint32) & 0xFFFF).any():
            return
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            if np.array_equal(x32.astype(np.float16).astype(np.float32), x32, equal_nan=True):
                return
    back = decode_bits(encode_bits(x32, dtype), dtype)
    ok = (back.view(np.uint32) == x32.view(np.uint32)) | np.isnan(x32)
    if not ok.all():
        i = tuple(int(v) for v in np.argwhere(~ok)[0])
        raise DtypeError(
            f"{name}{list(i)} = {float(x32[i])!r} is not exactly representable in {dtype}; round the operand "
            f"first (simtc.numerics.encode_bits / decode_bits)", rule="MMA operands are values of the input type",
            ref="PTX ISA 9.0 §9.7.16.2.1 Table 39",
        )


def tensor_core_mma(a, b, c=None, *, dtype: str = "bf16", instr_k: int = 16, arch: str = "sm100",
                    d_dtype: str = "fp32") -> np.ndarray:
    """D = A @ B.T + C exactly as a chain of tensor-core instructions computes it.

    Parameters
    ----------
    a:
        float32 array (M, K) whose values are exactly representable in ``dtype``.
    b:
        float32 array (N, K), same rule (B is given N x K, i.e. K-major).
    c:
        float32 array (M, N), or None for zeros (the first instruction then adds +0).
    dtype:
        ``"bf16"`` or ``"fp16"``; anything else raises :class:`~simtc.errors.DtypeError`.
    instr_k:
        K one instruction consumes: for kind::f16 (bf16 or fp16 inputs) that is 16 (32 bytes of
        K per instruction, ``ARCH_PARAMS[arch].instr_k``), the only value accepted; K must be a
        positive multiple of it. Chunks are processed in order, each one's result feeding the next
        as C. (To study another blocking, chain :func:`fused_dot_add` over chunks of your choice.)
    arch:
        ``"sm100"`` (tcgen05) or ``"sm90"`` (wgmma).
    d_dtype:
        Accumulator type, ``"fp32"`` (default) or ``"fp16"`` (fp16 inputs only; ``c`` must then
        hold fp16 values, and D is rounded to nearest even to fp16 after every instruction).

    Returns float32 D of shape (M, N).

    >>> tensor_core_mma(np.ones((1, 16), np.float32), np.ones((1, 16), np.float32), instr_k=7)
    Traceback (most recent call last):
    ...
    simtc.errors.ShapeError: instr_k = 7: a kind::f16 instruction (bf16 inputs) consumes K = 16
    [rule: instr_k is the K one instruction of the kind consumes (kind::f16: 16); PTX ISA 9.0 §9.7.16.2.1
    Table 39 (kind::f16: K = 16 per instruction)]
    """
    if dtype not in _INPUT_FORMATS:
        raise DtypeError(f"tensor_core_mma takes dtype 'bf16' or 'fp16', not {dtype!r}",
                         rule="kind::f16 inputs are f16 or bf16 with an f32 accumulator",
                         ref="PTX ISA 9.0 §9.7.16.2.1 Table 39")
    try:
        params = ARCH_PARAMS[arch]
    except (KeyError, TypeError):
        raise SimtcError(f"unknown architecture {arch!r}; use sm100 (tcgen05) or sm90 (wgmma)",
                         rule="modelled architectures") from None
    if not isinstance(instr_k, (int, np.integer)) or isinstance(instr_k, bool) or instr_k != params.instr_k:
        raise ShapeError(f"instr_k = {instr_k!r}: a kind::f16 instruction ({dtype} inputs) consumes K = "
                         f"{params.instr_k}", rule=f"instr_k is the K one instruction of the kind consumes "
                         f"(kind::f16: {params.instr_k})", ref=_REF_SHAPES)
    a, b = _numeric(a, "a"), _numeric(b, "b")
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:  # before C's default needs (M, N)
        _check_shapes(a, b, a)
    m, k = a.shape
    n = b.shape[0]
    c = np.zeros((m, n), np.float32) if c is None else _numeric(c, "c")
    _check_shapes(a, b, c)
    if k % instr_k:
        raise ShapeError(f"K = {k} is not a whole number of instructions of K = {instr_k}",
                         rule=f"K is a positive multiple of instr_k = {instr_k} (K is consumed in whole instructions)",
                         ref=_REF_SHAPES)
    for x, name in ((a, "a"), (b, "b")):
        if x.dtype != np.float32:
            raise DtypeError(f"{name} must be a float32 array, got {x.dtype}", rule="operands as float32")
        _check_representable(x, dtype, name)
    if c.dtype != np.float32:
        raise DtypeError(f"c must be a float32 array, got {c.dtype}", rule="fp32 accumulator")
    if d_dtype not in ("fp32", "fp16"):
        raise DtypeError(f"d_dtype {d_dtype!r}: fp32 or fp16", rule="kind::f16 D types",
                         ref="PTX ISA 9.0 §9.7.16.2.1 Table 39")
    if d_dtype == "fp16":
        if dtype == "bf16":
            raise DtypeError("bf16 inputs need an fp32 accumulator", rule="bf16 requires an f32 D",
                             ref="PTX ISA 9.0 §9.7.16.2.1 Table 39")
        _check_representable(c, "fp16", "c")
    d = c
    for k0 in range(0, k, instr_k):
        d = fused_dot_add(a[:, k0:k0 + instr_k], b[:, k0:k0 + instr_k], d, fmt=dtype, params=params, out=d_dtype)
    return d
