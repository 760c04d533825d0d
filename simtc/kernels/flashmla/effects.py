"""The numpy effects of the head64 kernel's CUDA-core blocks (registered with :func:`simtc.semantics.register_effect`).

Each effect is ``fn(cta, record, warp)``: it reads and writes the warp's registers (``cta.regs[warp]``),
shared memory through ``cta.smem`` (observed accesses; addresses from the record's declared footprint)
and the request's global tensors and parameters (``cta.gmem``, ``"head64.*"`` keys written by
:func:`simtc.kernels.flashmla.replay.load_inputs`). All work is vectorised over the warp's 32 threads.

Arithmetic follows FlashMLA ``kernel.cuh`` lines 178-266 at ``9241ae3`` [kernel]: fp32 packed adds in the
kernel's order, ``max(p) * sm_scale_div_log2``, the lazy-rescale threshold 6.0, ``exp2(fma(p, scale,
-new_max))`` rounded to bf16 (RN), ``li = fma(li, scale_for_old, sum.x + sum.y)`` with unrounded sums.
Approximations [inferred]: ``MUFU.EX2`` / ``MUFU.LG2`` / ``__fdividef`` are approximate on the GPU; simtc
uses numpy's float32 ``exp2`` / ``log`` / division; ``fma`` is computed in float64 and rounded once to
float32 (a double rounding is possible in rare ties).
"""

from __future__ import annotations

import numpy as np

from simtc.kernels.flashmla.plan import NOPE_TILE
from simtc.numerics.dequant import dequant_e4m3, v32_scale_to_ue8m0
from simtc.numerics.formats import encode_bits
from simtc.semantics import SemanticsError, register_effect

__all__ = ["RESCALE_THRESHOLD"]

RESCALE_THRESHOLD = np.float32(6.0)
"""Lazy rescale: only when the running max grows by more than 6.0 (log2 units) [kernel] kernel.cuh."""
_LANES = np.arange(32)
_MAX_INIT = np.float32(-1e30)


def _p(cta, name: str):
    return cta.gmem[f"head64.{name}"]


def _f32(x) -> np.ndarray:
    return np.ascontiguousarray(x).view(np.float32)


def _u32(x) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32).view(np.uint32) if np.asarray(x).dtype == np.float32 \
        else np.ascontiguousarray(x).view(np.uint32)


# ---- index warp (warp 7) --------------------------------------------------------------------------------
@register_effect("fmla.index_load")
def index_load(cta, rec, warp: int) -> None:
    """Each lane loads the indices at positions 2*lane, 2*lane+1 of the warp's next block (LDG.64)."""
    regs = cta.warp_regs(warp)
    blk = int(regs.get("blk", np.zeros(1, np.int64))[0])
    pos = blk * 64 + 2 * _LANES[:, None] + np.arange(2)
    regs["idx"] = cta.gmem["indices"][pos].astype(np.int32)
    regs["pos"] = pos
    regs["blk"] = np.array([blk + 1])


@register_effect("fmla.index_transform")
def index_transform(cta, rec, warp: int) -> None:
    """Valid bits, TMA row coordinates and scales of the block's 64 tokens (``kernel.cuh`` lines 683-728)."""
    regs = cta.warp_regs(warp)
    idx, pos = regs["idx"].astype(np.int64), regs["pos"]
    pbs, pages = int(_p(cta, "page_block_size")[0]), int(_p(cta, "num_pages")[0])
    step, stride = int(_p(cta, "rows_per_page")[0]), int(_p(cta, "tma_k_stride")[0])
    valid = (idx >= 0) & (idx < pages * pbs) & (pos < int(_p(cta, "topk_length")[0]))
    page, slot = np.where(valid, idx // pbs, 0), np.where(valid, idx % pbs, 0)
    coord = np.where(valid, page * step + slot, -1)
    kv = cta.gmem["kv"]
    nsc = int(_p(cta, "num_scales")[0])
    if nsc == 4:  # V32: 4 fp32 at token record + 512 B, to e8m0 rounding toward zero [kernel] kernel.cuh L704-711
        at = np.where(valid, coord, 0)[..., None] * stride + 512 + 4 * np.arange(4)
        f = kv[at[..., None] + np.arange(4)].view(np.float32)[..., 0]
        codes = np.where(valid[..., None], v32_scale_to_ue8m0(f), 0).astype(np.uint8)
    else:  # MODEL1: 8 bytes (7 ue8m0 + pad) at page base + pbs * 576 + slot * 8
        at = page * step * stride + pbs * stride + slot * 8
        codes = np.where(valid[..., None], kv[at[..., None] + np.arange(8)], 0).astype(np.uint8)
    regs["coords"] = coord.astype(np.int32).view(np.uint32)
    regs["scales"] = np.ascontiguousarray(codes.reshape(32, -1)).view(np.uint32)
    bits = valid.reshape(8, 8).astype(np.uint8)  # byte k = tokens 8k..8k+7 (lanes 4k..4k+3, 2 each)
    cta.smem.write(rec.smem_writes[0].start, (bits << np.arange(8, dtype=np.uint8)).sum(1).astype(np.uint8),
                   writer=rec)


# ---- dequant warpgroup (warps 8-11) -------------------------------------------------------------------------
@register_effect("fmla.dequant")
def dequant(cta, rec, warp: int) -> None:
    """fp8 e4m3 x scale -> bf16 into the SW128 K tiles (``kernel.cuh`` lines 747-843; simtc.numerics.dequant)."""
    raw0, sc0 = rec.smem_reads[0].start, rec.smem_reads[1].start
    nope0 = rec.smem_writes[0].start
    d_nope = rec.smem_reads[0].stop - raw0
    d_nope //= 64
    nsc = (rec.smem_reads[1].stop - sc0) // 64
    tiles = d_nope // 64
    per_scale = 2 if nsc == 4 else 1  # 64-dim tiles per scale: V32 quant tile 128, MODEL1 64
    t = 32 * (warp % 4) + _LANES
    g, ig = t // 8, t % 8
    r = 16 * np.arange(4)[None, :, None] + g[:, None, None]  # (32, 4, 1) rows
    c = np.arange(tiles)[None, None, :]  # (1, 1, tiles)
    raw = cta.smem.gather(raw0 + r * d_nope + 64 * c + 8 * ig[:, None, None], 8)  # (32, 4, tiles, 8)
    codes = cta.smem.gather(sc0 + r * nsc + c // per_scale, 1)  # (32, 4, tiles, 1)
    bf = dequant_e4m3(raw, codes)  # (32, 4, tiles, 8) bf16 bits
    dst = nope0 + 8192 * c + NOPE_TILE.offset(np.broadcast_to(r, (32, 4, tiles)),
                                              np.broadcast_to(8 * ig[:, None, None], (32, 4, tiles)))
    cta.smem.scatter(dst, np.ascontiguousarray(bf).view(np.uint8).reshape(32, 4, tiles, 16), writer=rec)


# ---- softmax warpgroup (warps 0-3) --------------------------------------------------------------------------
@register_effect("fmla.softmax_init")
def softmax_init(cta, rec, warp: int) -> None:
    """mi = MAX_INIT_VAL (-1e30), li = 0, real_mi = -inf (state columns: mi, li, real_mi, scale)."""
    st = np.zeros((32, 4), np.float32)
    st[:, 0], st[:, 2] = _MAX_INIT, -np.inf
    cta.warp_regs(warp)["state"] = st


@register_effect("fmla.p_select")
def p_select(cta, rec, warp: int) -> None:
    """Warps 0, 1 keep columns 400-431 (P_lo[:, 0:32]) and send 432-463; warps 2, 3 the other way
    (``kernel.cuh`` lines 166-195)."""
    regs = cta.warp_regs(warp)
    for key in ("p_c0", "p_c1"):  # used before its tcgen05.ld completed (no wait::ld): undefined values, NaN here
        regs.setdefault(key, np.full((32, 32), np.nan, np.float32).view(np.uint32))
    c0, c1 = _f32(regs["p_c0"]), _f32(regs["p_c1"])
    trace = cta.gmem.get("head64.p_trace")
    if trace is not None:  # what the tcgen05.ld returned, for the P check: (block, lane, token)
        blk = int(regs.get("pblk", np.zeros(1, np.int64))[0])
        regs["pblk"] = np.array([blk + 1])
        lanes = 32 * (warp % 4) + _LANES
        trace[blk, lanes, :32], trace[blk, lanes, 32:] = c0, c1
    own, peer = (c0, c1) if warp % 4 < 2 else (c1, c0)
    regs["p"] = own.copy()
    for j in range(8):
        regs[f"pex{j}"] = np.ascontiguousarray(peer[:, 4 * j:4 * j + 4]).view(np.uint32)


@register_effect("fmla.reduce")
def reduce(cta, rec, warp: int) -> None:
    """p += the partner's half (packed fp32 adds), mask invalid tokens to -inf, cur = max(p) * scale."""
    regs = cta.warp_regs(warp)
    pin = np.concatenate([_f32(regs[f"pin{j}"]) for j in range(8)], axis=1)
    p = regs["p"] + pin
    word = cta.smem.read(rec.smem_reads[0].start + 4 * (warp % 4 >= 2), 4).view(np.uint32)[0]
    bits = (int(word) >> np.arange(32)) & 1
    p[:, bits == 0] = -np.inf
    regs["p"] = p
    scale = _p(cta, "sm_scale_div_log2")[0]
    regs["cur"] = (p.max(axis=1) * scale).astype(np.float32)[:, None]


def _fma32(a, b, c) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        return (np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64)).astype(np.float32)


def _exp(cta, rec, warp: int, mode: str) -> None:
    regs = cta.warp_regs(warp)
    st = regs["state"]
    mi, li, real_mi = st[:, 0], st[:, 1], st[:, 2]
    cur = np.maximum(regs["cur"][:, 0], _f32(regs["cur_peer"])[:, 0])
    real_mi = np.maximum(real_mi, cur)
    with np.errstate(invalid="ignore"):
        should = bool(np.any((cur - mi) > RESCALE_THRESHOLD))  # __any_sync over the warp
    if should:
        new_max = np.maximum(cur, mi)
        sfo = np.exp2(mi - new_max).astype(np.float32)
    else:
        new_max, sfo = mi, np.ones(32, np.float32)
    if mode == "plain" and should:
        raise SemanticsError(f"warp {warp}: the data needs the lazy O rescale in this block but the Program has no "
                             "rescale records", rule="the Program's rescale blocks match the data (head64_program "
                             "rescale=...)", ref="FlashMLA kernel.cuh (should_scale_o)")
    scale = _p(cta, "sm_scale_div_log2")[0]
    d = np.exp2(_fma32(regs["p"], scale, -new_max[:, None])).astype(np.float32)
    sx, sy = np.zeros(32, np.float32), np.zeros(32, np.float32)
    for i in range(16):  # float2 adds in the kernel's order
        sx, sy = sx + d[:, 2 * i], sy + d[:, 2 * i + 1]
    st = st.copy()
    st[:, 0], st[:, 1], st[:, 2] = new_max, _fma32(li, sfo, sx + sy), real_mi
    st[:, 3] = sfo
    regs["state"] = st
    s = encode_bits(d, "bf16")  # (32, 32) bf16 bits, round to nearest
    for j in range(4):
        regs[f"s{j}"] = np.ascontiguousarray(s[:, 8 * j:8 * j + 8]).view(np.uint32)


@register_effect("fmla.exp.first")
def exp_first(cta, rec, warp: int) -> None:
    """The request's first block: O is not rescaled (there is no O yet)."""
    _exp(cta, rec, warp, "first")


@register_effect("fmla.exp")
def exp_plain(cta, rec, warp: int) -> None:
    """A block without rescale records: refuses data that needs a rescale."""
    _exp(cta, rec, warp, "plain")


@register_effect("fmla.exp.rescale")
def exp_rescale(cta, rec, warp: int) -> None:
    """A block with rescale records: scale_for_old (1.0 for a warp that does not rescale) for fmla.o_rescale."""
    _exp(cta, rec, warp, "rescale")


@register_effect("fmla.o_rescale")
def o_rescale(cta, rec, warp: int) -> None:
    """O chunk x scale_for_old (32 FMUL2)."""
    regs = cta.warp_regs(warp)
    regs["o"] = (_f32(regs["o"]) * regs["state"][:, 3:4]).astype(np.float32).view(np.uint32)


@register_effect("fmla.li_final")
def li_final(cta, rec, warp: int) -> None:
    """No valid token in the request (real_mi = -inf): li = 0, mi = -inf."""
    regs = cta.warp_regs(warp)
    st = regs["state"].copy()
    none = st[:, 2] == -np.inf
    st[none, 1], st[none, 0] = 0.0, -np.inf
    regs["state"] = st
    regs["li"] = st[:, 1:2].copy()


@register_effect("fmla.lse")
def lse(cta, rec, warp: int) -> None:
    """li += the partner's li; threads t < 64 write the LSE; o_scale = 1 / (li + exp2(sink * log2 e - mi))."""
    regs = cta.warp_regs(warp)
    st = regs["state"].copy()
    li = (regs["li"][:, 0] + _f32(regs["li_peer"])[:, 0]).astype(np.float32)
    mi = st[:, 0]
    rows = 32 * (warp % 2) + _LANES
    if warp % 4 < 2:
        with np.errstate(divide="ignore", invalid="ignore"):
            v = _fma32(mi, np.float32(np.log(2.0)), np.log(li))
        cta.gmem["lse"][rows] = np.where(v == -np.inf, np.inf, v)
    sink = _p(cta, "attn_sink_log2")[rows]
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        o_scale = np.where(li == 0, np.float32(0), np.float32(1) / (li + np.exp2(sink - mi).astype(np.float32)))
    st[:, 1], st[:, 3] = li, o_scale.astype(np.float32)
    regs["state"] = st


@register_effect("fmla.o_out")
def o_out(cta, rec, warp: int) -> None:
    """O chunk x o_scale -> bf16 (RN), eight 16-byte pieces for the SW128 staging stores."""
    regs = cta.warp_regs(warp)
    o = encode_bits((_f32(regs["o"]) * regs["state"][:, 3:4]).astype(np.float32), "bf16")
    for j in range(8):
        regs[f"ob{j}"] = np.ascontiguousarray(o[:, 8 * j:8 * j + 8]).view(np.uint32)
