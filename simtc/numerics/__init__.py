"""Bit-level number formats used by tensor-core operands.

Only the conversions are here for now (float32 <-> bf16, fp16, tf32, e4m3 bit patterns);
every conversion is vectorized numpy and bit-exact.
"""

from simtc.numerics.formats import DTYPES, DtypeInfo, decode_bits, dtype_info, encode_bits

__all__ = ["DTYPES", "DtypeInfo", "decode_bits", "dtype_info", "encode_bits"]
