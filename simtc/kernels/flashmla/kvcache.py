"""FlashMLA's paged FP8 KV cache as bytes: where a token's record lies and how the kernel dequantizes it.

One source for the replay's own seeded cache (:mod:`simtc.kernels.flashmla.replay`) and FlashMLA's input files
(:mod:`simtc.kernels.flashmla.io`). The cache is ``uint8 [num_blocks, block_stride]``; a flat token ``t`` lives
in page block ``t // page_block_size``, slot ``t % page_block_size`` (FlashMLA ``config.h`` lines 33-41 at ``9241ae3``,
``csrc/api/sparse_decode.h``):

* V32: 656-byte records (512 e4m3 NoPE | 4 fp32 scales | 64 bf16 RoPE), one scale per 128 dims;
* MODEL1: 576-byte records (448 e4m3 NoPE | 64 bf16 RoPE), then 8 bytes of ue8m0 scales per token after the
  block's records, one scale per 64 dims.

>>> kv_layout("model1", 64)
KvLayout(token_bytes=576, scale_offset=36864, min_block_stride=37376, tma_k_stride=576)
"""

from __future__ import annotations

import numpy as np
from attrs import frozen

from simtc.kernels.flashmla.models import Head64Model, model
from simtc.numerics.dequant import dequant_e4m3, v32_scale_to_ue8m0
from simtc.numerics.formats import decode_bits

__all__ = ["KvLayout", "dequant_cache_tokens", "kv_layout", "scale_codes", "token_bytes"]


@frozen
class KvLayout:
    """Where a token's bytes lie in one page block (offsets in bytes from the block's start)."""

    token_bytes: int
    """Stride of the token records within a block (V32 656: NoPE | 4 fp32 scales | RoPE; MODEL1 576: NoPE | RoPE)."""
    scale_offset: int
    """MODEL1: start of the block's scale rows (page_block_size x 8 B after the records); V32: 512 (in the record)."""
    min_block_stride: int
    """Smallest block stride holding page_block_size tokens (V32 pbs x 656; MODEL1 pbs x 584)."""
    tma_k_stride: int
    """The block stride must be a multiple of this (TMA_K_STRIDE; kernel.cuh host assert)."""


def kv_layout(m: str | Head64Model, page_block_size: int) -> KvLayout:
    """The page-block layout of model ``m`` (``sparse_decode.h`` bytes_per_token; ``tests/quant.py``)."""
    m = model(m)
    pbs = int(page_block_size)
    if m.v32:
        return KvLayout(m.tma_k_stride, m.d_nope, pbs * m.tma_k_stride, m.tma_k_stride)
    return KvLayout(m.tma_k_stride, pbs * m.tma_k_stride, pbs * (m.tma_k_stride + 8), m.tma_k_stride)


def token_bytes(m: Head64Model, kv: np.ndarray, page_block_size: int, tokens) -> tuple:
    """(NoPE e4m3 codes [n, d_nope], raw scales [n, tiles] (V32 fp32 bit patterns as uint32, MODEL1 ue8m0 codes),
    RoPE bf16 bits [n, 64]) of flat tokens ``tokens`` of the cache ``kv`` [num_blocks, block_stride] (vectorised
    gathers)."""
    lay = kv_layout(m, page_block_size)
    tokens = np.asarray(tokens, np.int64).reshape(-1)
    blk, slot = tokens // page_block_size, tokens % page_block_size
    rec = kv[blk[:, None], slot[:, None] * lay.token_bytes + np.arange(lay.token_bytes)]
    nope = rec[:, :m.d_nope]
    tiles = m.d_nope // m.quant_tile
    if m.v32:
        scales = np.ascontiguousarray(rec[:, m.d_nope:m.d_nope + 4 * tiles]).view("<u4").astype(np.uint32)
        rope0 = m.d_nope + 4 * tiles
    else:
        scales = kv[blk[:, None], lay.scale_offset + slot[:, None] * 8 + np.arange(tiles)]
        rope0 = m.d_nope
    rope = np.ascontiguousarray(rec[:, rope0:rope0 + 2 * m.d_rope]).view("<u2").astype(np.uint16)
    return nope, scales, rope


def scale_codes(m: Head64Model, scales: np.ndarray) -> np.ndarray:
    """ue8m0 codes of the raw scales (V32: fp32 -> e8m0 as the index warp converts them; MODEL1: as stored)."""
    if m.v32:
        return v32_scale_to_ue8m0(scales.view(np.float32))
    return scales


def dequant_cache_tokens(m: Head64Model, kv: np.ndarray, page_block_size: int, tokens) -> np.ndarray:
    """float32 [n, d_qk]: K of flat tokens as the kernel sees it -- NoPE through FlashMLA's dequant chain
    (:func:`simtc.numerics.dequant.dequant_e4m3`, scales as ue8m0) and the bf16 RoPE."""
    nope, scales, rope = token_bytes(m, kv, page_block_size, tokens)
    codes = np.repeat(scale_codes(m, scales), m.quant_tile, axis=1)
    k_nope = decode_bits(dequant_e4m3(nope, codes), "bf16")
    return np.concatenate([k_nope, decode_bits(rope, "bf16")], axis=1).astype(np.float32)
