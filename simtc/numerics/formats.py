"""Element types of tensor-core operands and bit-exact conversions to and from float32.

Sources: PTX ISA 9.0 §5.2.5 (alternate floating-point formats: bf16, tf32, e4m3, e5m2) and
§9.7.9.21 (``cvt``: ``.rn`` round-to-nearest-even; e4m3 conversions exist only with
``.satfinite``, which clamps finite overflow and infinities to the largest finite value and
keeps NaN as NaN).

>>> hex(int(encode_bits(np.float32(1.00390625), "bf16")))  # 1 + 2**-8: a tie, rounds to even
'0x3f80'
>>> float(decode_bits(np.uint8(0x7E), "e4m3"))  # the largest finite e4m3 value
448.0
"""

from __future__ import annotations

import numpy as np
from attrs import frozen

from simtc.errors import DtypeError

__all__ = ["DTYPES", "DtypeInfo", "decode_bits", "dtype_info", "encode_bits"]


@frozen
class DtypeInfo:
    """An operand element type: its name, its size in shared memory and its bit container."""

    name: str
    bytes: int
    """Bytes one element occupies in shared memory (tf32 lives in a 32-bit container)."""
    container: type
    """numpy unsigned type that holds one element's bit pattern."""
    ptx: str
    """PTX type name."""
    description: str


DTYPES: dict[str, DtypeInfo] = {
    "e4m3": DtypeInfo("e4m3", 1, np.uint8, ".e4m3", "8-bit float, 4 exponent + 3 mantissa bits (OCP FP8 E4M3)"),
    "bf16": DtypeInfo("bf16", 2, np.uint16, ".bf16", "bfloat16: 8 exponent + 7 mantissa bits"),
    "fp16": DtypeInfo("fp16", 2, np.uint16, ".f16", "IEEE binary16: 5 exponent + 10 mantissa bits"),
    "tf32": DtypeInfo(
        "tf32", 4, np.uint32, ".tf32",
        "TensorFloat-32 in a 32-bit container: the tensor core uses the top 19 bits",
    ),
    "fp32": DtypeInfo("fp32", 4, np.uint32, ".f32", "IEEE binary32"),
}

_ALIASES = {"f16": "fp16", "half": "fp16", "float16": "fp16", "bfloat16": "bf16", "f32": "fp32",
            "float32": "fp32", "float_e4m3": "e4m3", "fp8": "e4m3", "e4m3fn": "e4m3"}


def dtype_info(dtype: str | DtypeInfo) -> DtypeInfo:
    """Look up an element type by name (``"bf16"``, ``"fp16"``, ``"e4m3"``, ``"tf32"``, ``"fp32"``).

    >>> dtype_info("bf16").bytes
    2
    """
    if isinstance(dtype, DtypeInfo):
        return dtype
    key = _ALIASES.get(str(dtype).lower(), str(dtype).lower())
    try:
        return DTYPES[key]
    except KeyError:
        raise DtypeError(
            f"unknown element type {dtype!r}; known: {', '.join(DTYPES)}",
            rule="operand element types of kind::f16 / tf32 / f8f6f4",
            ref="PTX ISA 9.0 §9.7.16.2.1 Table 39",
        ) from None


# All 256 e4m3 codes as float64 (bias 7; exponent field 0 = subnormal; 0x7F / 0xFF = NaN; no inf).
def _e4m3_table() -> np.ndarray:
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exp = (codes >> 3) & 0xF
    man = codes & 0x7
    mag = np.where(exp == 0, man / 8.0 * 2.0**-6, (1 + man / 8.0) * 2.0 ** (exp - 7.0))
    vals = sign * mag
    vals[(codes & 0x7F) == 0x7F] = np.nan
    return vals


_E4M3 = _e4m3_table()
_E4M3_POS = _E4M3[:0x7F]  # codes 0x00..0x7E, ascending magnitudes 0 .. 448


def _f32_to_bf16_rne(x: np.ndarray) -> np.ndarray:
    u = x.view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():  # keep NaN a NaN (truncate the payload, force a quiet bit)
        rounded = np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), rounded)
    return rounded


def _f32_to_e4m3_rn_satfinite(x: np.ndarray) -> np.ndarray:
    mag = np.abs(x.astype(np.float64))
    sign = np.where(np.signbit(x), 0x80, 0x00).astype(np.uint8)
    clipped = np.minimum(np.nan_to_num(mag, nan=0.0, posinf=448.0), 448.0)
    hi = np.searchsorted(_E4M3_POS, clipped, side="left")  # first code with value >= mag
    hi = np.minimum(hi, 0x7E)
    lo = np.maximum(hi - 1, 0)
    d_hi = _E4M3_POS[hi] - clipped
    d_lo = clipped - _E4M3_POS[lo]
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    code = np.where(pick_hi, hi, lo).astype(np.uint8)
    code = np.where(np.isnan(x), np.uint8(0x7F), code)
    return code | sign


def encode_bits(values, dtype: str | DtypeInfo) -> np.ndarray:
    """Convert float values to the bit patterns of ``dtype`` (numpy unsigned integers).

    Rounding is the one the hardware conversion uses: round-to-nearest-even for bf16 and
    fp16 (``cvt.rn``); e4m3 rounds to nearest even with ``.satfinite`` (the only e4m3 form
    of ``cvt``; PTX ISA 9.0 §9.7.9.21). tf32 and fp32 keep the float32 bit pattern unchanged
    (the tensor core itself ignores the low 13 mantissa bits of a tf32 operand).

    >>> encode_bits(np.array([1.0, -2.0, 0.5], dtype=np.float32), "fp16")
    array([15360, 49152, 14336], dtype=uint16)
    """
    info = dtype_info(dtype)
    x = np.asarray(values, dtype=np.float32)
    if info.name == "bf16":
        return _f32_to_bf16_rne(x)
    if info.name == "fp16":
        with np.errstate(over="ignore"):
            return x.astype(np.float16).view(np.uint16)
    if info.name == "e4m3":
        return _f32_to_e4m3_rn_satfinite(x)
    return x.view(np.uint32).copy()


def decode_bits(bits, dtype: str | DtypeInfo) -> np.ndarray:
    """Turn bit patterns of ``dtype`` back into float32 values (exact for every type here).

    >>> decode_bits(np.array([0x3F80, 0xC000], dtype=np.uint16), "bf16")
    array([ 1., -2.], dtype=float32)
    """
    info = dtype_info(dtype)
    b = np.asarray(bits).astype(info.container)
    if info.name == "bf16":
        return (b.astype(np.uint32) << 16).view(np.float32)
    if info.name == "fp16":
        return b.view(np.float16).astype(np.float32)
    if info.name == "e4m3":
        return _E4M3[b].astype(np.float32)
    return b.view(np.float32).copy()
