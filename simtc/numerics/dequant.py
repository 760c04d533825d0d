"""FlashMLA's fp8 KV dequantization, bit for bit.

The dequant warpgroup of FlashMLA's SM100 head64 decode kernel turns fp8 e4m3 K values into bf16
(FlashMLA ``csrc/sm100/helpers.h`` lines 23-33, called at ``csrc/sm100/decode/head64/kernel.cuh`` lines
781-835, at ``9241ae3`` [kernel]; SASS ``F2FP.F16.E4M3.UNPACK_B``, ``F2FP.BF16.F32.PACK_AB``,
``HMUL2.BF16_V2`` [sass]; the exactness notes below are [inferred]):

1. e4m3 x2 -> f16 x2 (``cvt.rn.f16x2.e4m3x2``; exact: every e4m3 value is an fp16 value),
2. f16 -> f32 -> bf16 (``cvt.rn.bf16x2.f32``; exact: e4m3 has 3 mantissa bits and a narrow
   exponent range, so every value is a bf16 value),
3. times the block's scale as bf16, rounded to nearest even (``HMUL2.BF16_V2``): exact for a
   power-of-two scale unless the product leaves bf16's range.

Scales are ue8m0 (a power of two per 128 dims for V32, per 64 dims for MODEL1). V32 stores fp32
scales and its index warp converts them with ``cvt.rz.satfinite.ue8m0x2.f32`` (round toward
zero: exact only for power-of-two scales) [kernel] ``kernel.cuh`` lines 704-711; ue8m0 -> bf16 is
``cvt.rn.bf16x2.ue8m0x2`` (code 0 = 2**-127 becomes the bf16 subnormal 0x0040).

>>> import numpy as np
>>> fp8 = encode_bits(np.float32([1.5, -448.0]), "e4m3")
>>> decode_bits(dequant_e4m3(fp8, v32_scale_to_ue8m0(np.float32([0.25, 0.25]))), "bf16")
array([   0.375, -112.   ], dtype=float32)
"""

from __future__ import annotations

import numpy as np

from simtc.numerics.formats import decode_bits, encode_bits

__all__ = ["dequant_e4m3", "ue8m0_to_bf16", "v32_scale_to_ue8m0"]


def v32_scale_to_ue8m0(scales) -> np.ndarray:
    """FlashMLA V32's fp32 -> e8m0 scale conversion: round toward zero, saturating (uint8 codes)."""
    return encode_bits(np.asarray(scales, dtype=np.float32), "ue8m0", rounding="rz")


def ue8m0_to_bf16(codes) -> np.ndarray:
    """``cvt.rn.bf16x2.ue8m0x2``: bf16 bit patterns (code 0 -> 0x0040 = 2**-127; 0xFF -> NaN 0x7FFF)."""
    c = np.asarray(codes, dtype=np.uint8).astype(np.uint16)
    out = (c << 7).astype(np.uint16)
    out = np.where(c == 0, np.uint16(0x0040), out)
    return np.where(c == 0xFF, np.uint16(0x7FFF), out).astype(np.uint16)


def dequant_e4m3(fp8_bits, scale_codes) -> np.ndarray:
    """bf16 bit patterns of ``e4m3 value x scale`` exactly as FlashMLA computes them.

    ``fp8_bits`` (uint8 e4m3 codes) and ``scale_codes`` (uint8 ue8m0 codes) broadcast together.
    """
    v = decode_bits(np.asarray(fp8_bits, dtype=np.uint8), "e4m3")  # e4m3 -> f16 -> f32: exact
    v_bf16 = encode_bits(v, "bf16")  # exact (asserted by the tests for all 256 codes)
    s = decode_bits(ue8m0_to_bf16(scale_codes), "bf16")
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        prod = decode_bits(v_bf16, "bf16") * s  # bf16 x bf16 is exact in fp32 (16 significant bits)
    return encode_bits(prod, "bf16")  # HMUL2.BF16: one round to nearest even
