"""Bit-level number formats and tensor-core arithmetic.

* :mod:`simtc.numerics.formats` — bf16, fp16, e4m3, e5m2, ue8m0, tf32, fp32 bit patterns
  (vectorized, exact; round-to-nearest-even, round-toward-zero and round-up where ``cvt`` has them);
* :mod:`simtc.numerics.dequant` — FlashMLA's e4m3 -> fp16 -> fp32 -> bf16 x scale chain;
* :mod:`simtc.numerics.fdpa` — the fused dot-product-add of Hopper/Blackwell tensor cores,
  :func:`tensor_core_mma`;
* :mod:`simtc.numerics.cases` — reproducible operand distributions for tests and cross-checks.
"""

from simtc.numerics.fdpa import ARCH_PARAMS, E_ZERO, fused_dot_add, tensor_core_mma
from simtc.numerics.formats import DTYPES, DtypeInfo, decode_bits, dtype_info, encode_bits

__all__ = ["ARCH_PARAMS", "DTYPES", "E_ZERO", "DtypeInfo", "decode_bits", "dtype_info", "encode_bits",
           "fused_dot_add", "tensor_core_mma"]
