"""Tensor maps: cuTensorMapEncodeTiled's rules (each refusal names its rule) and simtc's 128-byte encoding."""

from __future__ import annotations

import numpy as np
import pytest

import simtc.cuda as xp
from simtc.ptx.tensor_map import MAGIC, SIZE, decode, encode, tensor_map
from simtc.smem.tma import DTYPES, SWIZZLES, TensorMap, TensorMapError

BASE = 0x7F00_0000_0000
OK = dict(data_type="BFLOAT16", rank=2, global_address=BASE, global_dim=(64, 64), global_strides=(128,),
          box_dim=(64, 8), element_strides=(1, 1))


def _args(**kw):
    a = dict(OK)
    a.update(kw)
    return a


@pytest.mark.parametrize(("change", "rule"), [
    (dict(rank=0, global_dim=(), global_strides=(), box_dim=(), element_strides=()), "tensorRank is non-zero"),
    (dict(rank=6, global_dim=(2,) * 6, global_strides=(16,) * 5, box_dim=(8,) * 6, element_strides=(1,) * 6),
     "at most 5"),
    (dict(global_address=BASE + 8), "globalAddress is 16-byte aligned"),
    (dict(global_dim=(0, 64)), "globalDim is non-zero and <= 2^32"),
    (dict(global_dim=(2**32 + 1, 64)), "globalDim is non-zero and <= 2^32"),
    (dict(global_strides=(136,)), "multiples of 16 and < 2^40"),
    (dict(global_strides=(2**40,)), "multiples of 16 and < 2^40"),
    (dict(box_dim=(64, 0)), "boxDim is non-zero and <= 256"),
    (dict(box_dim=(64, 257)), "boxDim is non-zero and <= 256"),
    (dict(box_dim=(12, 8)), "multiple of 16 bytes"),
    (dict(box_dim=(128, 8), swizzle="SWIZZLE_128B"), "<= the swizzle span"),
    (dict(box_dim=(32, 8), swizzle="SWIZZLE_32B"), "<= the swizzle span"),
    (dict(element_strides=(1, 0)), "elementStrides are 1 to 8"),
    (dict(element_strides=(1, 9)), "elementStrides are 1 to 8"),
    (dict(interleave="INTERLEAVE_16B"), "tensorRank >= 3 when interleave is not NONE"),
    (dict(rank=3, global_dim=(16, 4, 4), global_strides=(32, 128), box_dim=(16, 4, 4), element_strides=(1, 1, 1),
          interleave="INTERLEAVE_32B", swizzle="SWIZZLE_64B"), "interleave 32B requires swizzle 32B"),
    (dict(data_type="INT32", oob_fill="NAN_REQUEST_ZERO_FMA"), "floating-point data type"),
    (dict(data_type="16U4_ALIGN8B"), "CUtensorMapDataType"),
    (dict(data_type=16), "tensorDataType is a CUtensorMap enum value"),
    (dict(swizzle="SWIZZLE_96B"), "swizzle is a CUtensorMap enum value"),
    (dict(global_strides=(128, 128)), "globalStrides has 1 entries"),
    (dict(box_dim=(64,)), "boxDim has 2 entries"),
])
def test_each_driver_rule_is_refused_by_name(change, rule):
    with pytest.raises(TensorMapError) as e:
        tensor_map(**_args(**change))
    assert rule in str(e.value), str(e.value)
    assert "cuTensorMapEncodeTiled" in (e.value.ref or "")


def test_the_limits_themselves_are_accepted():
    tensor_map(**_args(global_dim=(2**32, 1), box_dim=(64, 256)))
    tensor_map(**_args(global_strides=(2**40 - 16,)))
    tensor_map(**_args(box_dim=(64, 8), swizzle="SWIZZLE_128B", element_strides=(1, 8)))
    tensor_map(**_args(box_dim=(16, 8), swizzle="SWIZZLE_32B", data_type="FLOAT16"))


@pytest.mark.parametrize("seed", range(20))
def test_encoding_round_trips(seed):
    rng = np.random.default_rng(seed)
    dt = list(DTYPES)[rng.integers(len(DTYPES))]
    es = DTYPES[dt]
    rank = int(rng.integers(1, 6))
    sw = list(SWIZZLES)[rng.integers(len(SWIZZLES))]
    span = 128 if sw.startswith("128B") else {"none": 256, "32B": 32, "64B": 64}[sw]
    inner = int(rng.integers(1, span // 16 + 1)) * 16 // es
    dims = tuple(int(x) for x in rng.integers(1, 1000, rank))
    strides = tuple(int(x) * 16 for x in rng.integers(1, 10_000, rank - 1))
    box = (min(inner, 256), *(int(x) for x in rng.integers(1, 257, rank - 1)))
    tm = TensorMap(dt, BASE + 16 * int(rng.integers(1000)), dims=dims, strides=strides, box=box,
                   element_strides=tuple(int(x) for x in rng.integers(1, 9, rank)), swizzle=sw,
                   l2_promotion=int(rng.choice([0, 64, 128, 256])),
                   oob_fill="nan" if dt.startswith(("f", "bf", "tf")) and rng.random() < 0.5 else "zero")
    raw = encode(tm)
    assert len(raw) == SIZE and raw.startswith(MAGIC)
    assert decode(raw) == tm


def test_tensor_map_takes_an_array_and_names_like_the_driver():
    g = xp.zeros((64, 64), dtype=xp.uint16)
    raw = xp.tensor_map(9, 2, g, (64, 64), (128,), (64, 8), (1, 1), 0, 3, 2, 0)
    tm = decode(raw)
    assert (tm.address, tm.dtype, tm.swizzle, tm.l2_promotion, tm.oob_fill) == (g.data.ptr, "bf16", "128B", 128,
                                                                                  "zero")
    assert decode(xp.tensor_map("CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", 2, g, (64, 64), (128,), (64, 8), (1, 1),
                                "CU_TENSOR_MAP_INTERLEAVE_NONE", "CU_TENSOR_MAP_SWIZZLE_128B",
                                "CU_TENSOR_MAP_L2_PROMOTION_L2_128B")) == tm


def test_bytes_that_are_no_tensor_map_are_refused():
    with pytest.raises(TensorMapError, match=r"not a tensor map made by simtc\.cuda\.tensor_map"):
        decode(bytes(128))
    with pytest.raises(TensorMapError, match="not a tensor map"):
        decode(b"x" * 64)
