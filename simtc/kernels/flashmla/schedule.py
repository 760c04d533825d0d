"""FlashMLA's decode scheduler: how a call's requests are split over the SMs (the split-KV tile schedule).

A decode call runs three kernels (``sparse_attn_decode_interface``, FlashMLA ``csrc/api/sparse_decode.h`` at
``9241ae3``): the scheduler metadata kernel, the split-KV kernel, the combine kernel. The split-KV kernel's grid
is ``(h_q / 64, s_q, num_sm_parts)``: for every query position, ``num_sm_parts`` persistent CTAs, each walking
its own slice of the batch's blocks of 64 tokens. :func:`num_sm_parts` is each implementation's
``get_meta``; :func:`sched_meta` is ``get_mla_metadata_kernel``
(``csrc/smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.cu``) in Python, step for step: every
request costs its blocks plus ``fixed_overhead_num_blocks`` (5), the total is cut into ``num_sm_parts`` equal
payloads (``ceil(total / parts) + 5``), and the parts take requests in order, splitting a request where a
payload runs out. A split request's partial results go to ``o_accum`` / ``lse_accum`` and the combine kernel
merges them (``num_splits`` per request).

>>> parts = sched_meta(b=2, topk=2048, num_sm_parts=4)      # 2 x 32 blocks; payload ceil(74 / 4) + 5 = 24
>>> [(p.begin_req, p.begin_block, p.end_req, p.end_block) for p in parts]
[(0, 0, 0, 19), (0, 19, 1, 1), (1, 1, 1, 20), (1, 20, 1, 32)]
>>> [p.blocks(32) for p in parts]
[19, 14, 19, 12]
>>> [(s.req, s.begin, s.end) for s in parts[1].segments(32)]    # the rest of request 0, the first block of 1
[(0, 19, 32), (1, 0, 1)]
"""

from __future__ import annotations

from collections.abc import Sequence

from attrs import frozen

from simtc.errors import SimtcError

__all__ = ["BLOCK_SIZE_N", "FIXED_OVERHEAD_BLOCKS", "PartMeta", "Segment", "num_sm_parts", "sched_meta"]

BLOCK_SIZE_N = 64
"""``block_size_topk`` of every sparse decode implementation's ``get_meta`` (tokens per block)."""
FIXED_OVERHEAD_BLOCKS = 5
"""``fixed_overhead_num_blocks`` of the SM90 and SM100 head64 implementations' ``get_meta``."""


def num_sm_parts(kernel: str, num_sms: int, s_q: int, h_q: int = 64) -> int:
    """``get_meta``'s ``num_sm_parts``: SM90 ``max(num_sms / s_q / (h_q / 64), 1)``; SM100 head64
    ``max(num_sms / s_q, 1)`` (integer division; ``csrc/api/sparse_decode.h`` lines 59-64 and 92-97).

    >>> num_sm_parts("sm90", 132, 2), num_sm_parts("head64", 148, 2), num_sm_parts("sm90", 132, 200)
    (66, 74, 1)
    """
    if kernel == "sm90":
        return max(num_sms // s_q // (h_q // 64), 1)
    if kernel == "head64":
        return max(num_sms // s_q, 1)
    raise SimtcError(f"unknown kernel {kernel!r}: sm90 or head64", rule="FlashMLA's sparse decode implementations")


@frozen
class Segment:
    """Blocks ``[begin, end)`` of request ``req`` processed by one part; ``split``: its result is partial (written
    to ``o_accum`` for the combine kernel), else it is the request's whole output."""

    req: int
    begin: int
    end: int
    split: bool

    @property
    def blocks(self) -> int:
        return self.end - self.begin


@frozen
class PartMeta:
    """One ``DecodingSchedMeta`` (``csrc/params.h``): requests ``begin_req`` ... ``end_req`` (inclusive), from
    block ``begin_block`` of the first to ``end_block`` (exclusive) of the last."""

    begin_req: int
    end_req: int
    begin_block: int
    end_block: int
    begin_split: int
    first_split: bool
    last_split: bool

    def segments(self, blocks_per_req: Sequence[int] | int) -> list[Segment]:
        """The part's work as the split-KV kernel walks it (``splitkv_mla.cuh`` lines 176-181): the first request
        from ``begin_block``, the last up to ``end_block``, whole requests between."""
        out = []
        for r in range(self.begin_req, self.end_req + 1):
            n = blocks_per_req if isinstance(blocks_per_req, int) else blocks_per_req[r]
            lo = self.begin_block if r == self.begin_req else 0
            hi = self.end_block if r == self.end_req else n
            split = self.first_split if r == self.begin_req else (self.last_split if r == self.end_req else False)
            if hi > lo:
                out.append(Segment(r, lo, hi, split))
        return out

    def blocks(self, blocks_per_req: Sequence[int] | int) -> int:
        return sum(s.blocks for s in self.segments(blocks_per_req))


def sched_meta(b: int, topk: int, num_sm_parts: int, topk_length: Sequence[int] | None = None,
               block_size_n: int = BLOCK_SIZE_N, fixed_overhead: int = FIXED_OVERHEAD_BLOCKS) -> list[PartMeta]:
    """``get_mla_metadata_kernel`` for a sparse call (no extra KV): one :class:`PartMeta` per part."""
    if b < 1 or num_sm_parts < 1 or topk < 1:
        raise SimtcError(f"b = {b}, topk = {topk}, num_sm_parts = {num_sm_parts}: all >= 1",
                         rule="a decode call has requests, tokens and parts")
    seqlen = [max(int(topk_length[i]) if topk_length is not None else topk, 1) for i in range(b)]
    nblocks = [(s - 1) // block_size_n + 1 for s in seqlen]
    last = [n - 1 for n in nblocks]
    total = sum(n + fixed_overhead for n in nblocks)
    payload = -(-total // num_sm_parts) + fixed_overhead
    req, block, nsplit = 0, 0, 0
    out = []
    for _ in range(num_sm_parts):
        begin_req, begin_block, begin_split, first_split = req, block, nsplit, block != 0
        remain = payload
        while req < b:
            left = nblocks[req] - block
            if remain >= left + fixed_overhead:
                remain -= left + fixed_overhead
                req, block, nsplit = req + 1, 0, 0
            else:
                if remain - fixed_overhead > 0:
                    block += remain - fixed_overhead
                    nsplit += 1
                break
        end_req = req if block > 0 else req - 1
        end_block = block if block > 0 else last[req - 1] + 1
        last_split = end_block != last[end_req] + 1
        if begin_req == end_req:
            first_split = last_split = first_split or last_split
        out.append(PartMeta(begin_req, end_req, begin_block, end_block, begin_split, first_split, last_split))
    if not (req == b and block == 0 and nsplit == 0):  # FLASH_DEVICE_ASSERT in the kernel
        raise SimtcError("the schedule did not cover every block", rule="get_mla_metadata_kernel's final assert")
    return out
