"""Tensor maps as kernel parameters: ``cuTensorMapEncodeTiled``'s arguments in, 128 bytes out, and back.

NVIDIA's ``CUtensorMap`` is 128 bytes (the encoder needs its address 64-byte aligned; CUDA 13.0 ``cuda.h`` declares
the struct ``alignas(128)``, so a ``__grid_constant__`` map or a CuTe TMA atom holding one is ``.param .align 128``
in the PTX), and **opaque** ("a tensor map object is an opaque value,
and, as such, should only be accessed through CUDA APIs and PTX": CUDA Driver API, Tensor Map Object Management,
``cuTensorMapEncodeTiled``; ``CU_TENSOR_MAP_NUM_QWORDS = 16`` in CUDA 13.0 ``cuda.h``). simtc therefore has its
**own byte layout** (not the hardware's), read back by the executor when a ``cp.async.bulk.tensor`` names the
map by its address (a ``__grid_constant__`` kernel parameter: ``cvta.param`` of ``.param .align 64 .b8 p[128]``):

=======  =====  ===========================================================
offset   bytes  field (little-endian)
=======  =====  ===========================================================
0        8      magic ``b"simtcTM1"``
8        8      global address
16       40     globalDim[0..4] (u64 each; unused dimensions 0)
56       32     globalStrides[0..3] in bytes (dimensions 1..4; u64 each)
88       10     boxDim[0..4] (u16 each)
98       5      elementStrides[0..4] (u8 each)
103      6      data type, rank, interleave, swizzle, L2 promotion, OOB fill (u8 each: the ``CUtensorMap*`` enum values)
109      19     zero
=======  =====  ===========================================================

:func:`tensor_map` (re-exported as ``simtc.cuda.tensor_map``) takes the arguments in ``cuTensorMapEncodeTiled``'s
order; enums are given as the driver's integer values or as names (``"BFLOAT16"``, ``"SWIZZLE_128B"``, ``"128B"``).
The rules are :class:`simtc.smem.tma.TensorMap`'s (the driver's, each error naming it).

>>> p = tensor_map("FLOAT32", 2, 0x7F0000000000, (64, 32), (256,), (32, 8), (1, 1), swizzle="SWIZZLE_128B")
>>> len(p), p[:8]
(128, b'simtcTM1')
>>> tm = decode(p)
>>> tm.dtype, tm.dims, tm.box, tm.swizzle, tm.box_bytes
('f32', (64, 32), (32, 8), '128B', 1024)
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from simtc.smem.tma import DTYPES, INTERLEAVES, L2_PROMOTIONS, OOB_FILLS, SWIZZLES, TensorMap, TensorMapError

__all__ = ["MAGIC", "SIZE", "decode", "encode", "tensor_map"]

SIZE = 128
"""Bytes of a tensor map (``CU_TENSOR_MAP_NUM_QWORDS`` = 16 quadwords), which kernels take 64-byte aligned."""
MAGIC = b"simtcTM1"
_FMT = struct.Struct("<8sQ5Q4Q5H5B6B19x")
_REF = "CUDA Driver API, Tensor Map Object Management: cuTensorMapEncodeTiled (CUDA 13.0 cuda.h)"

DATA_TYPES = ("UINT8", "UINT16", "UINT32", "INT32", "UINT64", "INT64", "FLOAT16", "FLOAT32", "FLOAT64", "BFLOAT16",
              "FLOAT32_FTZ", "TFLOAT32", "TFLOAT32_FTZ", "16U4_ALIGN8B", "16U4_ALIGN16B", "16U6_ALIGN16B")
"""``CUtensorMapDataType`` names by enum value (``CU_TENSOR_MAP_DATA_TYPE_`` dropped)."""
_SIMTC_DTYPE = dict(zip(DATA_TYPES, (*DTYPES, "16U4_ALIGN8B", "16U4_ALIGN16B", "16U6_ALIGN16B"), strict=True))
_INTERLEAVES = tuple(INTERLEAVES)
_SWIZZLES = tuple(SWIZZLES)
_OOB = ("NONE", "NAN_REQUEST_ZERO_FMA")


def _enum(value, names: Sequence[str], prefix: str, what: str) -> int:
    """The enum value of ``value`` (an int or a name with or without the driver's prefix), case-insensitive."""
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):
        if 0 <= value < len(names):
            return value
    elif isinstance(value, str):
        v = value.upper().removeprefix("CU_TENSOR_MAP_").removeprefix(prefix)
        for i, n in enumerate(names):
            if v in (n.upper(), n.upper().removeprefix(prefix)):
                return i
    raise TensorMapError(f"{what} {value!r}: one of {', '.join(f'{i} ({n})' for i, n in enumerate(names))}",
                         rule=f"{what} is a CUtensorMap enum value", ref=_REF)


def _address(a) -> int:
    """A device address: an int, or an array with ``.data.ptr`` (simtc.cuda / CuPy ndarray)."""
    data = getattr(a, "data", None)
    ptr = getattr(data, "ptr", None)
    if ptr is not None:
        return int(ptr)
    if isinstance(a, (int, np.integer)) and not isinstance(a, bool):
        return int(a)
    what = "a host numpy array" if isinstance(a, np.ndarray) else f"{type(a).__name__} {a!r}"
    raise TensorMapError(f"globalAddress {what}: a device address (an int) or a device array (simtc.cuda.asarray "
                         "puts a host array there)", rule="globalAddress is a device address", ref=_REF)


def _int_list(value, name: str) -> tuple[int, ...]:
    """The entries of ``globalDim``/``globalStrides``/``boxDim``/``elementStrides``: a sequence of integers (the
    driver's ``cuuint64_t``/``cuuint32_t`` arrays); a float, a bool or a bare number is refused, not truncated."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise TensorMapError(f"{name} {value!r}: a sequence of integers, one per dimension (e.g. (64,) for one)",
                             rule=f"{name} is an array of integers", ref=_REF)
    out = []
    for i, v in enumerate(value):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TensorMapError(f"{name}[{i}] = {v!r}: an integer", rule=f"{name} is an array of integers",
                                 ref=_REF)
        out.append(int(v))
    return tuple(out)


def tensor_map(data_type, rank: int, global_address, global_dim: Sequence[int], global_strides: Sequence[int],
               box_dim: Sequence[int], element_strides: Sequence[int], interleave=0, swizzle=0, l2_promotion=0,
               oob_fill=0) -> bytes:
    """``cuTensorMapEncodeTiled`` for simtc: the 128-byte kernel parameter of a tiled tensor map.

    ``global_address`` is a device address or a ``simtc.cuda`` array; ``global_strides`` has ``rank - 1`` byte
    strides (dimensions 1 and up), the other arrays ``rank`` entries, dimension 0 first. Pass the result as the
    ``const __grid_constant__ CUtensorMap`` argument of a ``RawKernel``. Every rule the driver checks raises a
    :class:`~simtc.smem.tma.TensorMapError` naming it.

    >>> tensor_map("BFLOAT16", 2, 0x7F0000000008, (64, 64), (128,), (64, 64), (1, 1))
    Traceback (most recent call last):
    ...
    simtc.smem.tma.TensorMapError: globalAddress 0x7f0000000008 is not 16-byte aligned [rule: globalAddress is \
16-byte aligned; CUDA Driver API, Tensor Map Object Management: cuTensorMapEncodeTiled (CUDA 13.0 cuda.h)]
    """
    dt = DATA_TYPES[_enum(data_type, DATA_TYPES, "DATA_TYPE_", "tensorDataType")]
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or not 1 <= rank <= 5:
        raise TensorMapError(f"tensorRank {rank!r}: 1 to 5 dimensions", rule="tensorRank is non-zero and at most 5",
                             ref=_REF)
    rank = int(rank)
    global_dim, global_strides = _int_list(global_dim, "globalDim"), _int_list(global_strides, "globalStrides")
    box_dim, element_strides = _int_list(box_dim, "boxDim"), _int_list(element_strides, "elementStrides")
    if len(global_dim) != rank:
        raise TensorMapError(f"globalDim has {len(global_dim)} entries; tensorRank is {rank}",
                             rule="globalDim has tensorRank entries", ref=_REF)
    sw = _enum(swizzle, ["SWIZZLE_" + s.upper() for s in _SWIZZLES], "SWIZZLE_", "swizzle")
    il = _enum(interleave, ["INTERLEAVE_" + s.upper() for s in _INTERLEAVES], "INTERLEAVE_", "interleave")
    l2 = _enum(l2_promotion, ("L2_PROMOTION_NONE", "L2_PROMOTION_L2_64B", "L2_PROMOTION_L2_128B",
                              "L2_PROMOTION_L2_256B"), "L2_PROMOTION_", "l2Promotion")
    oob = _enum(oob_fill, ["FLOAT_OOB_FILL_" + s for s in _OOB], "FLOAT_OOB_FILL_", "oobFill")
    tm = TensorMap(_SIMTC_DTYPE[dt], _address(global_address), dims=global_dim, strides=global_strides,
                   box=box_dim, element_strides=element_strides, interleave=_INTERLEAVES[il], swizzle=_SWIZZLES[sw],
                   l2_promotion=L2_PROMOTIONS[l2], oob_fill=OOB_FILLS[oob])
    return encode(tm)


def encode(tm: TensorMap) -> bytes:
    """The 128 bytes of ``tm`` in simtc's layout (see the module text)."""
    pad = 5 - tm.rank
    es = tm.element_strides or (1,) * tm.rank
    return _FMT.pack(MAGIC, tm.address, *tm.dims, *(0,) * pad, *tm.strides, *(0,) * (4 - len(tm.strides)),
                     *tm.box, *(0,) * pad, *es, *(0,) * pad, list(DTYPES).index(tm.dtype), tm.rank,
                     _INTERLEAVES.index(tm.interleave), _SWIZZLES.index(tm.swizzle),
                     L2_PROMOTIONS.index(tm.l2_promotion), OOB_FILLS.index(tm.oob_fill))


def decode(raw: bytes) -> TensorMap:
    """The :class:`~simtc.smem.tma.TensorMap` in 128 bytes written by :func:`encode` (checked again)."""
    raw = bytes(raw)
    if len(raw) != SIZE or raw[:8] != MAGIC:
        raise TensorMapError(f"the {len(raw)} bytes at the tensor-map address are not a tensor map made by "
                             f"simtc.cuda.tensor_map (they start {raw[:8].hex()}, not {MAGIC.hex()})",
                             rule="a tensor map comes from tensor_map (simtc's encoding of cuTensorMapEncodeTiled)",
                             ref=_REF)
    f = _FMT.unpack(raw)
    addr, dims, strides, box, es = f[1], f[2:7], f[7:11], f[11:16], f[16:21]
    dt, rank, il, sw, l2, oob = f[21:27]
    if not 1 <= rank <= 5 or dt >= len(DTYPES) or il >= 3 or sw >= len(_SWIZZLES) or l2 >= 4 or oob >= 2:
        raise TensorMapError("a tensor map whose fields are out of range (overwritten?)",
                             rule="a tensor map comes from tensor_map", ref=_REF)
    return TensorMap(list(DTYPES)[dt], addr, dims=dims[:rank], strides=strides[:rank - 1], box=box[:rank],
                     element_strides=es[:rank], interleave=_INTERLEAVES[il], swizzle=_SWIZZLES[sw],
                     l2_promotion=L2_PROMOTIONS[l2], oob_fill=OOB_FILLS[oob])
