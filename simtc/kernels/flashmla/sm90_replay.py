"""The numbers of FlashMLA's SM90 sparse FP8 decode (64 heads): the SM90 Program's wgmma records replayed on data.

:func:`sm90_replay` computes what one call of FlashMLA's SM90 sparse decode writes (``out`` bf16, ``lse``) for an
inputs set in FlashMLA's format (:mod:`simtc.kernels.flashmla.io`; the sets of
``tests/data/flashmla_h200_sm90.npz``), following the three launches of ``sparse_attn_decode_interface``
(``csrc/api/sparse_decode.h``) at FlashMLA ``9241ae3``:

1. **The scheduler** (``get_mla_metadata_kernel``): :func:`simtc.kernels.flashmla.schedule.sched_meta` with
   ``num_sm_parts = num_sms / s_q`` cuts every (batch, query) request into the segments the split-KV kernel's
   persistent CTAs walk; a request covered by one CTA is *no-split*, a longer one is split over several
   (on the H200's 132 SMs, ``v32-32blocks`` becomes 32 splits of one block each).
2. **The split-KV kernel** (``csrc/sm90/decode/sparse_fp8/splitkv_mla.cuh``), one segment at a time:

   * the producer (L509-645): each token of a block is dequantized as ``cvt_fp8x8_bf16x8`` does
     (``components/dequant.h`` L20-34: e4m3 -> fp32 -> bf16 RN, times the bf16 scale, one RN;
     :func:`simtc.numerics.dequant.dequant_e4m3`): V32's fp32 scales become bf16 by ``(bf16)`` (L550; equal to
     the ue8m0 code's value because the cache's scales are powers of two -- checked), MODEL1's ue8m0 codes by
     ``__nv_cvt_e8m0x2_to_bf162raw`` (L560). A token with index -1 (MODEL1: also at or past ``topk_length``,
     L531-535) gets scale 0 and fp8 bytes 0 (L577-595) -- K = 0 -- and ``is_kv_valid`` false (L628-641). K is
     stored into the block's buffer ``k{i % 2}`` of :class:`~simtc.kernels.flashmla.sm90.Sm90Model`'s shared-
     memory plan in the :func:`~simtc.kernels.flashmla.sm90.k_tile` layout, Q into ``q``
     (:func:`~simtc.kernels.flashmla.sm90.q_tile`), S into ``s`` (:data:`~simtc.kernels.flashmla.sm90.S_TILE`).
   * WG0's QK (L230-239) and both PV halves (WG0 RS dims 0-255, L253-258; WG1 SS dims 256-511, L399-405) are the
     ``wgmma.mma_async`` records of :func:`~simtc.kernels.flashmla.sm90.sm90_program` for the segment's block
     count, in order: each record's operands are read out of that shared-memory image through its own
     descriptors (:func:`simtc.mma.operands.read_operand`; WG0's PV A operand ``s{k}`` is the register fragment,
     S's tokens ``16k .. 16k + 15``) and the chain of K = 16 steps is :func:`simtc.numerics.fdpa.tensor_core_mma`
     with the sm90 parameters (the H200-verified wgmma arithmetic), accumulating into the fp32 registers.
   * ``scale_softmax`` (L32-84), per row: invalid tokens -> -inf (L54-55), ``cur_max = max * sm_scale_div_log2``
     (L61), ``rM = max(cur_max, rM)`` from ``MAX_INIT_VAL = -1e30`` (L22, L62-63), ``scale_for_old =
     exp2(old - rM)`` (L64), O x scale_for_old in *every* block (WG0 L67-70, WG1 through ``sScale`` L387-396; the
     SM100 kernel rescales lazily), ``p = exp2(fma(P, sm_scale_div_log2, -rM))`` (L75), S = bf16(p) RN (L76),
     each thread's sum of its 16 unrounded ``p`` of the row in its own order (L77; the thread holds columns
     ``8 j + 2 (lane % 4) + {0, 1}``), ``rL = fma(rL, scale_for_old, sum)`` (L80).
   * the epilogue: the 4 lanes' ``rL`` summed by two shuffles (L288-291); a no-split request writes
     ``O x 1 / (rL + exp2(sink log2e - rM))`` as bf16 RN (L306, config.h L217-220) and
     ``LSE = log(rL) + rM / log2e`` (natural log, L340; +inf when ``rL = 0``, with O = 0); a split writes fp32
     ``O x 1 / rL`` to ``o_accum`` (L308, config.h L244-252) and ``lse_accum = log2(rL) + rM`` (-inf when empty,
     L358).
3. **The combine kernel** (``csrc/smxx/decode/combine/combine.cu`` L36-161) for a request of several splits: the
   largest ``lse_accum`` (0 when all are -inf, L81-88), the sum of ``exp2(lse - max)`` over the splits with lane
   ``s % 32`` holding split ``s`` and a butterfly over 32 lanes (L90-96), ``LSE = (log2(sum) + max) / log2e``
   (+inf for an empty row, L98-100), the sink folded into the weights only (L102-113: the stored LSE has no
   sink, as in the no-split path), ``O = sum_s fma(exp2(lse_s - lse), o_accum_s, O)`` in split order, bf16 RN
   (L114-160).

Approximations [inferred]: ``MUFU.EX2`` / ``MUFU.LG2`` and ``__fdividef`` are approximate on the GPU (the kernels
are built with ``--use_fast_math``); simtc uses numpy's float32 ``exp2`` / ``log2`` / ``log`` / division, flushes
subnormal exp2 results to zero (``.ftz``), and computes each ``fma`` in float64 rounded once to float32. The
float sums follow the kernel's order where it is written out (the per-thread row sums, the shuffles, the combine's
split order); where the compiler may reassociate, the written order is taken.

Measured against FlashMLA's outputs recorded on an H200 (``tests/data/flashmla_h200_sm90.npz``, 8 sets, V32 and
MODEL1, 1 to 32 blocks, invalid indices, sinks, empty rows, ``topk_length``; ``tests/kernels/test_sm90_numerics.py``,
table in ``tests/data/README_flashmla.md``): O bit-exact but for 7 of 458,752 bf16 values (1-2 ulps; normwise at
most 5.8e-5 per row), LSE within 2 float32 ulps (3.8e-6), empty rows identical. :class:`Sm90Numerics` switches
single steps off (P kept in fp32, natural ``exp`` for ``exp2``, no split-KV); the test shows the comparison sees
each of them.

>>> from simtc.kernels.flashmla.io import make_inputs
>>> inp = make_inputs("v32", b=1, s_q=1, topk=128, seed=3, invalid_frac=0.1)
>>> out, lse = sm90_replay(inp)
>>> out.shape, out.dtype, lse.shape, bool(np.isfinite(lse).all())
((1, 1, 64, 512), dtype('uint16'), (1, 1, 64), True)
>>> [(s.req, s.begin, s.end, s.split) for s in sm90_segments(inp)[0]]   # 2 blocks over 132 CTAs: 2 splits
[(0, 0, 1, True), (0, 1, 2, True)]
"""

from __future__ import annotations

import math

import numpy as np
from attrs import frozen

from simtc.errors import SimtcError
from simtc.isa.wgmma import WgmmaMmaAsync
from simtc.kernels.flashmla.kvcache import token_bytes
from simtc.kernels.flashmla.schedule import Segment, num_sm_parts, sched_meta
from simtc.kernels.flashmla.sm90 import B_H, B_TOPK, D_V, S_TILE, Sm90Model, k_tile, model, q_tile, sm90_program
from simtc.mma.operands import read_operand
from simtc.numerics.dequant import dequant_e4m3, ue8m0_to_bf16, v32_scale_to_ue8m0
from simtc.numerics.fdpa import tensor_core_mma
from simtc.numerics.formats import decode_bits, encode_bits
from simtc.smem.memory import SharedMemory

__all__ = ["H200_SMS", "BlockMmas", "Sm90Numerics", "block_mmas", "combine", "sm90_replay", "sm90_segments",
           "split_kv"]

H200_SMS = 132
"""SMs of the H200 the recording ran on (``tests/data/flashmla_h200_sm90.npz`` meta): 132 / s_q parts."""
LOG2E = np.float32(math.log2(math.e))
"""``CUDART_L2E_F`` / ``(float)M_LOG2E``."""
MAX_INIT_VAL = np.float32(-1e30)
"""The running maximum's start (splitkv_mla.cuh L22: "Prevent (-inf) - (-inf) = nan")."""
_TINY = np.float32(2.0 ** -126)
_SRC = "FlashMLA csrc/sm90/decode/sparse_fp8/splitkv_mla.cuh (9241ae3)"


@frozen
class Sm90Numerics:
    """Which of the kernel's numeric steps the replay takes (defaults: all, as FlashMLA does). The switches exist to
    measure what each step does to the result; none of them describes a FlashMLA configuration."""

    p_bf16: bool = True
    """P rounded to bf16 (RN) before PV (L76). False: P stays fp32 and PV is the exact float64 product added to the
    fp32 O (the tensor core cannot take fp32 operands)."""
    exp2: bool = True
    """``exp2`` of the log2e-scaled scores (L64, L75). False: natural ``exp`` of the same arguments."""
    split_kv: bool = True
    """The scheduler's split-KV segments and the combine kernel. False: every request is one no-split segment."""


# ---- the Program's tensor-core records ------------------------------------------------------------------------
@frozen
class BlockMmas:
    """The ``wgmma.mma_async`` records of one block of the Program, in issue order."""

    buffer: int
    """The K buffer the block uses (``i % 2``)."""
    qk: tuple
    """WG0's QK: D_K / 16 records m64n64k16 SS, the first with scale-d 0."""
    pv_lo: tuple
    """WG0's PV, V dims 0-255: 4 records m64n256k16, A = the S registers ``s0`` .. ``s3``."""
    pv_hi: tuple
    """WG1's PV, V dims 256-511: 4 records m64n256k16, A = ``sS`` through its descriptor."""


def block_mmas(model_name: str | Sm90Model, blocks: int) -> tuple[BlockMmas, ...]:
    """The wgmma records of each block of ``sm90_program(model_name, blocks)``, cut at each QK chain's first record
    (scale-d 0); each block's chains are checked against the kernel's shapes."""
    m = model(model_name)
    prog = sm90_program(m, blocks)
    wg0 = [r for r in prog.role("wg0").records if isinstance(r, WgmmaMmaAsync)]
    wg1 = [r for r in prog.role("wg1").records if isinstance(r, WgmmaMmaAsync)]
    per0, per1 = m.qk_mmas + 4, 4
    if len(wg0) != per0 * blocks or len(wg1) != per1 * blocks:
        raise SimtcError(f"the {m.name} Program of {blocks} blocks has {len(wg0)} / {len(wg1)} wgmma records in "
                         f"WG0 / WG1, not {per0 * blocks} / {per1 * blocks}",
                         rule="per block: D_K/16 QK + 4 PV (WG0), 4 PV (WG1)", ref=_SRC)
    out = []
    for i in range(blocks):
        qk = tuple(wg0[per0 * i:per0 * i + m.qk_mmas])
        lo, hi = tuple(wg0[per0 * i + m.qk_mmas:per0 * (i + 1)]), tuple(wg1[per1 * i:per1 * (i + 1)])
        ok = ([r.n for r in qk] == [B_TOPK] * m.qk_mmas and [r.scale_d for r in qk] == [False] + [True] * (len(qk) - 1)
              and all(r.n == D_V // 2 and r.scale_d and r.b_major == "MN" for r in lo + hi)
              and [r.a for r in lo] == [f"s{k}" for k in range(4)] and not any(isinstance(r.a, str) for r in hi))
        if not ok:
            raise SimtcError(f"block {i} of the {m.name} Program: its wgmma records are not QK (m64n64k16, first "
                             "scale-d 0) then PV (m64n256k16, V MN-major; WG0 A = s0..s3, WG1 A in shared memory)",
                             rule="the SM90 kernel's block: gemm<true> QK, gemm<false> PV in two halves", ref=_SRC)
        out.append(BlockMmas(i % 2, qk, lo, hi))
    return tuple(out)


def _operand(smem: SharedMemory, rec: WgmmaMmaAsync, which: str, regs: np.ndarray | None = None) -> np.ndarray:
    """Operand ``which`` ("a" or "b") of one record: float32 (rows, 16) as the instruction reads it."""
    if which == "a":
        if isinstance(rec.a, str):  # RS: the A fragment of the register tensor (16 columns per instruction)
            k = int(rec.a[1:])
            return np.ascontiguousarray(regs[:, 16 * k:16 * k + 16])
        return read_operand(smem, rec.a, major=rec.a_major, dtype=rec.dtype, rows=rec.m, k=rec.k)
    return read_operand(smem, rec.b_desc, major=rec.b_major, dtype=rec.dtype, rows=rec.n, k=rec.k)


def _mma_chain(smem: SharedMemory, recs, acc: np.ndarray | None, regs: np.ndarray | None = None,
               exact: bool = False) -> np.ndarray:
    """D (64, N) float32 after the records ``recs`` (one accumulator chain, in order) on ``acc``; ``exact``: A is
    ``regs`` (fp32 P) for every record and the product is float64 instead of the tensor core's
    (:attr:`Sm90Numerics.p_bf16` off)."""
    b = np.concatenate([_operand(smem, r, "b") for r in recs], axis=1)
    c = None if not recs[0].scale_d else acc
    if exact:
        a = regs[:, :b.shape[1]]
        base = np.zeros((a.shape[0], b.shape[0])) if c is None else c.astype(np.float64)
        return (base + a.astype(np.float64) @ b.T.astype(np.float64)).astype(np.float32)
    a = np.concatenate([_operand(smem, r, "a", regs) for r in recs], axis=1)
    return tensor_core_mma(a, b, c, dtype=recs[0].dtype, arch="sm90")


# ---- arithmetic helpers ---------------------------------------------------------------------------------------------
def _fma32(a, b, c) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        return (np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64)).astype(np.float32)


def _ex2(x, natural: bool = False) -> np.ndarray:
    """``MUFU.EX2`` (``ex2.approx.ftz.f32``): exp2 with subnormal results flushed to zero."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        y = (np.exp if natural else np.exp2)(np.asarray(x, np.float32)).astype(np.float32)
    return np.where(np.abs(y) < _TINY, np.float32(0), y).astype(np.float32)


# ---- the split-KV kernel: one CTA's segment of one request ------------------------------------------------------
def _block_k(inp, m: Sm90Model, idx: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """bf16 bits (64, D_K) the producer stores for one block's tokens (zeros for an invalid token, L577-595)."""
    k = np.zeros((B_TOPK, m.d_k), np.uint16)
    if not valid.any():
        return k
    hm = inp.model
    nope, scales, rope = token_bytes(hm, inp.kv, inp.page_block_size, idx[valid])
    if m.v32:  # (bf16)scales_float[i] (L550): the ue8m0 code's bf16 value for a power-of-two scale
        f = scales.view(np.float32)
        codes = v32_scale_to_ue8m0(f)
        if not np.array_equal(ue8m0_to_bf16(codes), encode_bits(f, "bf16")):
            raise SimtcError("a V32 scale is not a power of two: (bf16) of it differs from its ue8m0 value",
                             rule="V32 scales are powers of two (FlashMLA tests/quant.py)", ref=_SRC)
    else:
        codes = scales
    k[valid, :m.d_nope] = dequant_e4m3(nope, np.repeat(codes, hm.quant_tile, axis=1))
    k[valid, m.d_nope:] = rope
    return k


@frozen
class _Partial:
    o: np.ndarray
    """float32 (64, 512): O x o_scale (no split: before the bf16 rounding)."""
    lse: np.ndarray
    """float32 (64,): no split: natural log; split: ``lse_accum`` (log2)."""


def split_kv(inp, batch: int, query: int, seg: Segment, numerics: Sm90Numerics = Sm90Numerics()) -> _Partial:
    """One CTA's work on request (``batch``, ``query``): blocks ``seg.begin .. seg.end - 1``; ``seg.split`` chooses
    the epilogue (fp32 ``o_accum`` + log2 ``lse_accum``, or O / l with the sink + natural LSE)."""
    m = model(inp.model.name)
    n = seg.blocks
    mmas = block_mmas(m, n)
    smem = SharedMemory(arch="sm90")
    smem.write_tile_bits(q_tile(m.d_k), inp.q[batch, query], m.at("q"))
    scale = np.float32(inp.sm_scale) * LOG2E  # sm_scale_div_log2: float sm_scale x LOG_2_E (sparse_decode.h L387)
    tl = inp.topk_len(batch)
    rm = np.full(B_H, MAX_INIT_VAL, np.float32)
    rl = np.zeros((B_H, 4), np.float32)  # per row, the partial sums of the 4 lanes holding it
    o = np.zeros((B_H, D_V), np.float32)
    nat = not numerics.exp2
    for i, mm in enumerate(mmas):
        pos = B_TOPK * (seg.begin + i) + np.arange(B_TOPK)
        idx = inp.indices[batch, query, pos]
        valid = idx != -1
        if not m.v32:
            valid &= pos < tl  # token_index = -1 past topk_length (L531-535), is_kv_valid (L630-635)
        smem.write_tile_bits(k_tile(m.d_k), _block_k(inp, m, idx, valid), m.at(f"k{mm.buffer}"))
        p = _mma_chain(smem, mm.qk, None)  # (64 heads, 64 tokens)
        p[:, ~valid] = -np.inf
        cur = (p.max(axis=1) * scale).astype(np.float32)
        new = np.maximum(cur, rm)
        sfo = _ex2(rm - new, nat)
        rm = new
        o = (o * sfo[:, None]).astype(np.float32)
        e = _ex2(_fma32(p, scale, -rm[:, None]), nat)
        s_bits = encode_bits(e, "bf16")
        quad = e.reshape(B_H, 8, 4, 2).transpose(0, 2, 1, 3).reshape(B_H, 4, 16)  # lane % 4, its 16 in order
        part = np.zeros((B_H, 4), np.float32)
        for j in range(16):
            part = (part + quad[:, :, j]).astype(np.float32)
        rl = _fma32(rl, sfo[:, None], part)
        smem.write_tile_bits(S_TILE, s_bits, m.at("s"))
        a = decode_bits(s_bits, "bf16") if numerics.p_bf16 else e
        exact = not numerics.p_bf16
        o[:, :D_V // 2] = _mma_chain(smem, mm.pv_lo, o[:, :D_V // 2], regs=a, exact=exact)
        o[:, D_V // 2:] = _mma_chain(smem, mm.pv_hi, o[:, D_V // 2:], regs=a, exact=exact)
    half = (rl[:, 0] + rl[:, 1]).astype(np.float32), (rl[:, 2] + rl[:, 3]).astype(np.float32)
    li = (half[0] + half[1]).astype(np.float32)
    empty = li == 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if seg.split:
            o_scale = np.where(empty, np.float32(0), np.float32(1) / li)
            lse = np.where(empty, np.float32(-np.inf), np.log2(li) + rm)
        else:
            sink = _sink_log2(inp)
            o_scale = np.where(empty, np.float32(0), np.float32(1) / (li + _ex2(sink - rm)))
            lse = np.where(empty, np.float32(np.inf), np.log(li) + rm / LOG2E)
    return _Partial((o * o_scale.astype(np.float32)[:, None]).astype(np.float32), lse.astype(np.float32))


def _sink_log2(inp) -> np.ndarray:
    """``attn_sink x CUDART_L2E_F`` per head (L199-205); -inf without a sink."""
    if inp.attn_sink is None:
        return np.full(B_H, -np.inf, np.float32)
    return (inp.attn_sink.astype(np.float32) * LOG2E).astype(np.float32)


# ---- the combine kernel ---------------------------------------------------------------------------------------------
def combine(partials, attn_sink_log2: np.ndarray, max_splits: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """``flash_fwd_mla_combine_kernel`` for one request of several splits (``partials``: split order, each with
    fp32 ``o`` (64, 512) and log2 ``lse``): (bf16 bits (64, 512), natural LSE (64,)). ``max_splits``: the kernel's
    ``MAX_SPLITS`` (32, 64, ... 160 from ``num_sm_parts``), which sets how many splits each lane holds."""
    lse = np.stack([p.lse for p in partials]).astype(np.float32)  # (splits, 64)
    ns = len(partials)
    per_lane = -(-max_splits // 32)
    if ns > max_splits:
        raise SimtcError(f"{ns} splits > MAX_SPLITS {max_splits}", rule="a request has at most MAX_SPLITS splits",
                         ref="FlashMLA csrc/smxx/decode/combine/combine.cu L43")
    local = np.full((per_lane, 32, B_H), -np.inf, np.float32)  # lane l holds splits l, l + 32, ...
    for s in range(ns):
        local[s // 32, s % 32] = lse[s]
    mx = local.max(axis=(0, 1))
    mx = np.where(mx == -np.inf, np.float32(0), mx).astype(np.float32)
    acc = np.zeros((32, B_H), np.float32)
    for i in range(per_lane):
        acc = (acc + _ex2(local[i] - mx)).astype(np.float32)
    lanes = np.arange(32)
    for off in (16, 8, 4, 2, 1):
        acc = (acc + acc[lanes ^ off]).astype(np.float32)
    total = acc[0]
    with np.errstate(divide="ignore"):
        glse = np.where(total == 0, np.float32(np.inf), np.log2(total) + mx).astype(np.float32)
    lse_out = (glse / LOG2E).astype(np.float32)
    sink = attn_sink_log2
    with np.errstate(invalid="ignore", over="ignore"):
        fold = (glse + np.log2(np.float32(1) + _ex2(sink - glse))).astype(np.float32)
    glse = np.where(glse != np.inf, fold, np.where(sink == -np.inf, np.float32(np.inf), sink)).astype(np.float32)
    o = np.zeros((B_H, D_V), np.float32)
    for s, p in enumerate(partials):
        o = _fma32(_ex2(lse[s] - glse)[:, None], p.o, o)
    return encode_bits(o, "bf16"), lse_out


def _max_splits(parts: int) -> int:
    """``MLA_NUM_SPLITS_SWITCH(num_sm_parts)`` (combine.cu L165-185): 32, 64, 96, 128 or 160."""
    for cap in (32, 64, 96, 128, 160):
        if parts <= cap:
            return cap
    raise SimtcError(f"num_sm_parts = {parts} > 160", rule="the combine kernel takes up to 160 splits",
                     ref="FlashMLA csrc/smxx/decode/combine/combine.cu L183")


# ---- the call ---------------------------------------------------------------------------------------------------
def _inputs(inputs):
    from simtc.kernels.flashmla.io import FlashMLAInputs, validate_inputs

    inp = inputs if isinstance(inputs, FlashMLAInputs) else validate_inputs(inputs)
    if inp.model.v32 and inp.topk_length is not None:
        raise SimtcError("V32 with topk_length: FlashMLA's SM90 kernel refuses it",
                         rule="KU_ASSERT(params.topk_length == nullptr) for V3.2", ref=f"{_SRC} L701")
    return inp


def sm90_segments(inputs, num_sms: int = H200_SMS, numerics: Sm90Numerics = Sm90Numerics()) -> list[list[Segment]]:
    """Per request (batch index), its segments in split order: the scheduler's parts (``num_sm_parts(num_sms,
    s_q)``), or one no-split segment each with ``numerics.split_kv`` off."""
    inp = _inputs(inputs)
    blocks = [max(-(-max(inp.topk_len(i), 1) // B_TOPK), 1) for i in range(inp.b)]
    if not numerics.split_kv:
        return [[Segment(i, 0, n, False)] for i, n in enumerate(blocks)]
    parts = num_sm_parts("sm90", num_sms, inp.s_q)
    tl = None if inp.topk_length is None else [int(x) for x in inp.topk_length]
    out: list[list[Segment]] = [[] for _ in range(inp.b)]
    for p in sched_meta(inp.b, inp.topk, parts, tl):
        for s in p.segments(blocks):
            out[s.req].append(s)
    return out


def sm90_replay(inputs, *, num_sms: int = H200_SMS,
                numerics: Sm90Numerics = Sm90Numerics()) -> tuple[np.ndarray, np.ndarray]:
    """FlashMLA's SM90 sparse decode on ``inputs`` (a :class:`~simtc.kernels.flashmla.io.FlashMLAInputs` or the
    arrays of an inputs file / recording set: q, kv, indices, page_block_size, sm_scale, model, attn_sink,
    topk_length): ``(out, lse)`` as FlashMLA writes them, uint16 bf16 bits [b, s_q, 64, 512] and float32
    [b, s_q, 64] (natural log; +inf and O = 0 for a row with no valid token)."""
    inp = _inputs(inputs)
    segs = sm90_segments(inp, num_sms, numerics)
    cap = _max_splits(num_sm_parts("sm90", num_sms, inp.s_q))
    sink = _sink_log2(inp)
    out = np.zeros((inp.b, inp.s_q, B_H, D_V), np.uint16)
    lse = np.zeros((inp.b, inp.s_q, B_H), np.float32)
    for i, req in enumerate(segs):
        for j in range(inp.s_q):
            parts = [split_kv(inp, i, j, s, numerics) for s in req]
            if len(parts) == 1 and not req[0].split:
                out[i, j], lse[i, j] = encode_bits(parts[0].o, "bf16"), parts[0].lse
            elif len(parts) > 1 and all(s.split for s in req):
                out[i, j], lse[i, j] = combine(parts, sink, cap)
            else:
                raise SimtcError(f"request {i}: segments {req}", rule="a request is one no-split segment or "
                                 "several split ones (get_mla_metadata_kernel)", ref=_SRC)
    return out, lse

