"""Replay FlashMLA head64 whole on seeded inputs, and check it (FlashMLA ``csrc/sm100/decode/head64/kernel.cuh`` at
``9241ae3``).

:func:`make_inputs` builds one request from a seed: Q (bf16, 64 x D_Q), a paged fp8 KV cache with its
scales and bf16 RoPE part in the kernel's token-record format, top-k indices with invalid (-1) entries
and a ``topk_length`` that cuts the last block short, and per-head attention sinks. A few tokens of a
middle block get 2^3 larger scales so that the lazy O rescale (threshold 6.0) actually happens.

:func:`replay` runs :func:`~simtc.kernels.flashmla.head64.head64_program` on the engine
(:class:`simtc.engine.Engine`, semantics mode: every record acts on shared memory and TMEM through
:mod:`simtc.semantics`) and checks, into a :class:`Head64Replay`:

* O (bf16) and LSE against a float64 reference attention on the same dequantized inputs;
* P bit-exact, a check of placement and layouts: what the softmax warps' ``tcgen05.ld`` returned equals
  ``tensor_core_mma`` of each lane half's 18 (16) K=16 steps in the kernel's order (RoPE first) -- both sides use
  the same arithmetic, whose own evidence is MMA-Sim and the H200 recordings (:mod:`simtc.numerics.fdpa`);
* counts per block and role against the kernel's (``kernel.cuh`` at ``9241ae3``; SASS code sites in
  ``tests/data/flashmla_sm100_sass.json``); TMEM columns touched; hazards and deadlock.

Throughput, as FlashMLA counts it (2 x 64 heads x 64 tokens x (D_QK + D_V) FLOPs per block, ``tests/lib.py``
line 392 at ``9241ae3``), for a
B200 whose every SM runs a request like this one (``sm_count`` SMs, each with its share of HBM; the clock
``B200_CLOCK_GHZ``):

* ``tflops_whole`` -- the whole kernel: the request's FLOPs over its simulated cycles, Q load, first block
  and epilogue included (``cycles_whole``);
* ``tflops_steady`` -- one block of the steady state: FLOPs per block over the cycles between consecutive
  completions of the PV MMAs (``cycles_per_block_steady``: ``sv_done`` phase to phase, averaged).

Memory stays bounded per block: inputs, the reference P and the reference attention work in groups of blocks, and
the P check keeps a 16-byte digest per block (:class:`PTrace`) rather than the block; :func:`memory_estimate` is the
peak a replay needs (``benchmarks/replay_memory.py`` measures it). ``replay(..., progress=f)`` reports each phase.

Neither is a bound: both are the engine's prediction from its labelled parameters (``simtc timing
sensitivity flashmla-head64`` shows which ones they rest on). FlashMLA publishes "up to 350 TFlops on B200"
for its own benchmark shapes, which also run the scheduler and combine kernels.
"""

from __future__ import annotations

import math
import time

import numpy as np
from attrs import field, frozen

from simtc.errors import SimtcError
from simtc.kernels.flashmla import effects as _effects  # noqa: F401  (registers the effects)
from simtc.kernels.flashmla.constants import B_H, B_TOPK
from simtc.kernels.flashmla.head64 import (
    head64_program,
    per_block_counts,
    role_counts,
    setup_records,
    split_known_races,
)
from simtc.kernels.flashmla.kvcache import dequant_cache_tokens
from simtc.kernels.flashmla.models import Head64Model, model
from simtc.kernels.flashmla.plan import NOPE_TILE, ROPE_TILE
from simtc.numerics.fdpa import tensor_core_mma
from simtc.numerics.formats import decode_bits, encode_bits
from simtc.smem.memory import SharedMemory

__all__ = [
    "B200_CLOCK_GHZ",
    "B200_SMS",
    "PUBLISHED_TFLOPS",
    "Head64Inputs",
    "Head64Replay",
    "PTrace",
    "block_flops",
    "call_flops",
    "clear_caches",
    "hbm_bound",
    "make_inputs",
    "memory_estimate",
    "reference_p",
    "reference_p_chunks",
    "replay",
    "rescale_blocks",
    "run_engine",
    "split_dims",
    "steady_cycles_per_block",
    "sv_done_cycles",
    "tflops",
]

B200_SMS = 148
"""SMs of a B200 (the engine's ``sm_count`` parameter, with its source)."""
B200_CLOCK_GHZ = 1.965
"""The SM clock the cycles are converted at: 1.965 GHz, the B200 clock SemiAnalysis converts its cycle
measurements with (SemiAnalysisAI/microbench-blackwell) [assumed: the clock under this load is not measured]."""
PUBLISHED_TFLOPS = 350
"""FlashMLA ``README.md`` at ``9241ae3``: sparse decode "up to 350 TFlops on B200"."""
PAGE_BLOCK_SIZE = 64
O_TOL, LSE_TOL = 4e-3, 2e-5
"""The replay's acceptance against the float64 reference: O normwise relative error (bf16 O and bf16 P, measured
1.3e-3 to 1.8e-3) and LSE max abs error (float32 row sums: measured at most 6e-6 for 1-64 blocks, 7.7e-6 at 256 and
9.2e-6 at 1,024 blocks over V32 and MODEL1, seeds 0-3; ``tests/kernels/test_replay_tolerance.py``)."""


def split_dims(m: Head64Model, half: int) -> np.ndarray:
    """Q/K dims lane half ``half`` multiplies, in k order (:mod:`simtc.kernels.flashmla.split`): V32 RoPE 32|32
    first, then the even/odd 64-dim chunks; MODEL1 tiles {0, 2, 4, 6} / {1, 3, 5, 7} (7 = RoPE)."""
    from simtc.kernels.flashmla.split import split_dims as v32

    if m.v32:
        return v32(half)
    return np.concatenate([np.arange(64 * (2 * t + half), 64 * (2 * t + half) + 64) for t in range(4)])


@frozen
class Head64Inputs:
    """One request's inputs (numpy arrays; eq=False)."""

    model: Head64Model
    blocks: int
    seed: int
    q: np.ndarray  # (64, D_Q) float32, bf16 values
    kv: np.ndarray  # flat uint8 cache
    rows_per_page: int
    num_pages: int
    indices: np.ndarray  # (64 * blocks,) int32
    topk_length: int
    attn_sink: np.ndarray  # (64,) float32
    sm_scale: float
    k: np.ndarray | None  # (64 * blocks, D_Q) float32: the dequantized K of every position (0 where invalid), or
    # None: dequantized from the cache when asked (k_rows), so that a long request needs no second copy of K
    valid: np.ndarray  # (64 * blocks,) bool
    page_block_size: int = PAGE_BLOCK_SIZE  # tokens per page block of the cache (indices: block x this + row)

    @property
    def sm_scale_div_log2(self) -> np.float32:
        return np.float32(self.sm_scale * math.log2(math.e))

    def k_rows(self, lo: int, hi: int) -> np.ndarray:
        """float32 (hi - lo, D_Q): the dequantized K of positions ``lo .. hi-1`` (0 where invalid)."""
        if self.k is not None:
            return self.k[lo:hi]
        m = self.model
        idx, valid = self.indices[lo:hi], self.valid[lo:hi]
        out = np.zeros((hi - lo, m.d_q), np.float32)
        if valid.any():
            blocks = self.kv.reshape(self.num_pages, -1)
            out[valid] = dequant_cache_tokens(m, blocks, self.page_block_size, idx[valid])
        return out


def _bf16(x) -> np.ndarray:
    return decode_bits(encode_bits(np.asarray(x, np.float32), "bf16"), "bf16")


_CHUNK = 1 << 12
"""Tokens drawn per step when making inputs (the same random stream as one draw; bounded memory)."""


def make_inputs(model_name: str | Head64Model = "v32", blocks: int = 4, seed: int = 0) -> Head64Inputs:
    """A seeded request of ``blocks`` top-k blocks (see the module text). The cache holds ``2 x blocks + 2`` page
    blocks; its tokens are drawn and encoded in chunks, and K is dequantized from the cache when needed
    (:meth:`Head64Inputs.k_rows`), so memory stays about the cache's size."""
    m = model(model_name)
    rng = np.random.default_rng(seed)
    pbs = PAGE_BLOCK_SIZE
    num_pages = 2 * blocks + 2
    rows = pbs if m.v32 else -(-pbs * (m.tma_k_stride + 8) // m.tma_k_stride)  # MODEL1: block stride / 576
    kv = np.zeros((num_pages * rows, m.tma_k_stride), np.uint8)
    ntok = num_pages * pbs

    def row_of(tok: np.ndarray) -> np.ndarray:
        return tok // pbs * rows + tok % pbs

    for t0 in range(0, ntok, _CHUNK):  # NoPE codes, then RoPE, as two single draws would give them
        t = np.arange(t0, min(ntok, t0 + _CHUNK))
        kv[row_of(t), :m.d_nope] = encode_bits(rng.normal(size=(t.size, m.d_nope)).astype(np.float32), "e4m3")
    for t0 in range(0, ntok, _CHUNK):
        t = np.arange(t0, min(ntok, t0 + _CHUNK))
        rope = encode_bits(rng.normal(size=(t.size, m.d_rope)).astype(np.float32), "bf16")
        kv[row_of(t), m.rope_offset:m.rope_offset + 2 * m.d_rope] = rope.view(np.uint8).reshape(t.size, -1)
    ntile = m.d_nope // m.quant_tile
    exps = rng.integers(-1, 1, size=(ntok, ntile))
    indices = rng.choice(ntok, size=B_TOPK * blocks, replace=False).astype(np.int32)
    if blocks >= 2:  # hot tokens: a middle block's first four get 8x larger scales -> the lazy rescale triggers
        exps[indices[B_TOPK * (blocks // 2):B_TOPK * (blocks // 2) + 4]] += 3
    flat = kv.reshape(-1)
    every = np.arange(ntok)
    if m.v32:
        scales = np.exp2(exps).astype(np.float32)  # power-of-two fp32 scales: exact through e8m0
        kv[row_of(every), m.d_nope:m.d_nope + 16] = scales.view(np.uint8).reshape(ntok, 16)
    else:
        codes = np.zeros((ntok, 8), np.uint8)
        codes[:, :ntile] = 127 + exps
        at = every // pbs * rows * m.tma_k_stride + pbs * m.tma_k_stride + every % pbs * 8
        flat[at[:, None] + np.arange(8)] = codes
    drop = rng.random(indices.size) < 0.06
    drop[:2] = False
    indices[drop] = -1
    topk_length = B_TOPK * blocks - 5
    valid = (indices >= 0) & (np.arange(indices.size) < topk_length)
    q = _bf16(rng.normal(size=(B_H, m.d_q)))
    sink = rng.normal(size=B_H).astype(np.float32)
    return Head64Inputs(m, blocks, seed, q, flat, rows, num_pages, indices, topk_length, sink,
                        1.0 / math.sqrt(m.d_q), None, valid)


_P_STEP = 4
"""Blocks per tensor_core_mma call: every (row, token) is its own chain, so N = 4 x 64 gives the same bits faster."""


def reference_p_chunks(inp: Head64Inputs):
    """Yield ``(first block, P)`` for consecutive groups of blocks: P (n, 128, 64) float32, P_lo in rows 0-63 and
    P_hi in 64-127, each half one tensor_core_mma chain of K=16 steps in the kernel's order -- what the tensor
    core leaves in TMEM columns 400-463."""
    m = inp.model
    halves = [(split_dims(m, half), np.ascontiguousarray(inp.q[:, split_dims(m, half)])) for half in (0, 1)]
    for i in range(0, inp.blocks, _P_STEP):
        n = min(_P_STEP, inp.blocks - i)
        k = inp.k_rows(64 * i, 64 * (i + n))
        out = np.empty((n, 2 * B_H, B_TOPK), np.float32)
        for half, (d, qh) in enumerate(halves):
            p = tensor_core_mma(qh, np.ascontiguousarray(k[:, d]))  # (64, 64 n)
            out[:, 64 * half:64 * half + 64] = p.reshape(B_H, n, B_TOPK).transpose(1, 0, 2)
        yield i, out


def reference_p(inp: Head64Inputs) -> np.ndarray:
    """(blocks, 128, 64) float32: the reference P of every block (:func:`reference_p_chunks` joined)."""
    out = np.empty((inp.blocks, 2 * B_H, B_TOPK), np.float32)
    for i, p in reference_p_chunks(inp):
        out[i:i + len(p)] = p
    return out


def rescale_blocks(inp: Head64Inputs, p: np.ndarray | None = None, progress=None) -> list[bool]:
    """Which blocks take the lazy O rescale (``kernel.cuh`` lines 231-246, 268-291), from P as the kernel computes
    it (``p``: the reference P, or None to compute it group by group without keeping it)."""
    scale = inp.sm_scale_div_log2
    mi = np.full(B_H, np.float32(-1e30), np.float32)
    out = []
    chunks = [(0, p)] if p is not None else reference_p_chunks(inp)
    for i0, pc in chunks:
        for j in range(len(pc)):
            out.append(_rescale_step(inp, i0 + j, pc[j], mi, scale))
        if progress is not None:
            progress("reference P", i0 + len(pc), inp.blocks)
    return out


def _rescale_step(inp: Head64Inputs, i: int, p_block: np.ndarray, mi: np.ndarray, scale) -> bool:
    """Block ``i``'s decision from its P (128, 64); updates the running maxima ``mi`` of the two row groups."""
    full = (p_block[:64] + p_block[64:]).astype(np.float32)
    full[:, ~inp.valid[64 * i:64 * i + 64]] = -np.inf
    cur = (full.max(axis=1) * scale).astype(np.float32)
    flag = False
    for g in (slice(0, 32), slice(32, 64)):  # warps 0+2 hold rows 0-31, warps 1+3 rows 32-63
        with np.errstate(invalid="ignore"):
            should = bool(np.any(cur[g] - mi[g] > np.float32(6.0)))
        if should:
            mi[g] = np.maximum(cur[g], mi[g])
            flag = flag or i > 0
    return flag


_K_ROWS = 512
"""Tokens dequantized at a time for the reference attention (the same K; dequantization's temporaries stay small)."""


def reference_attention(inp: Head64Inputs, step: int = 64, progress=None) -> tuple[np.ndarray, np.ndarray]:
    """float64 O (64 x 512) and LSE (64,) on the dequantized inputs, with the attention sink: an online softmax
    over groups of ``step`` blocks (the same attention as one pass, in bounded memory). ``progress``: called as
    ``progress("reference O", blocks done, blocks)``."""
    q = inp.q.astype(np.float64)
    mx = np.full(B_H, -np.inf)
    acc = np.zeros((B_H, 512))
    den = np.zeros(B_H)
    for i in range(0, inp.blocks, step):
        lo, hi = 64 * i, 64 * min(inp.blocks, i + step)
        k = np.concatenate([inp.k_rows(a, min(hi, a + _K_ROWS)) for a in range(lo, hi, _K_ROWS)]).astype(np.float64)
        s = q @ k.T * inp.sm_scale
        s[:, ~inp.valid[lo:hi]] = -np.inf
        new = np.maximum(mx, s.max(axis=1))
        with np.errstate(invalid="ignore"):
            old = np.where(np.isfinite(mx), np.exp(mx - new), 0.0)
            e = np.where(np.isfinite(new)[:, None], np.exp(s - new[:, None]), 0.0)
        acc = acc * old[:, None] + e @ k[:, :512]
        den = den * old + e.sum(axis=1)
        mx = new
        if progress is not None:
            progress("reference O", min(inp.blocks, i + step), inp.blocks)
    with np.errstate(divide="ignore", invalid="ignore"):
        o = acc / (den + np.exp(inp.attn_sink.astype(np.float64) - mx))[:, None]
        return o, mx + np.log(den)


def load_inputs(cta, inp: Head64Inputs) -> None:
    """Global tensors and parameters of the request into ``cta.gmem`` (TMA sources are images of their boxes)."""
    m = inp.model
    scratch = SharedMemory()
    for t in range(8):
        scratch.write_tile(NOPE_TILE, inp.q[:, 64 * t:64 * t + 64], 8192 * t)
    if m.v32:
        for h in range(2):
            scratch.write_tile(ROPE_TILE, inp.q[:, 512 + 32 * h:544 + 32 * h], 65536 + 4096 * h)
    g = cta.gmem
    g["q_sw128"] = scratch.data[:65536].copy()
    g["q_sw64"] = scratch.data[65536:73728].copy()
    g["indices"] = inp.indices
    g["kv"] = inp.kv
    rows = inp.kv.size // m.tma_k_stride
    g["kv_nope"] = inp.kv.reshape(rows, m.tma_k_stride)
    g["kv_rope"] = np.ascontiguousarray(g["kv_nope"][:, m.rope_offset:m.rope_offset + 2 * m.d_rope]).view(np.uint16)
    g["o"] = np.zeros(65536, np.uint8)
    g["lse"] = np.zeros(B_H, np.float32)
    g["head64.p_trace"] = PTrace(inp.blocks)
    for name, v in (("page_block_size", inp.page_block_size), ("num_pages", inp.num_pages),
                    ("rows_per_page", inp.rows_per_page), ("tma_k_stride", m.tma_k_stride),
                    ("topk_length", inp.topk_length), ("num_scales", 4 if m.v32 else 8)):
        g[f"head64.{name}"] = np.array([v], np.int64)
    g["head64.sm_scale_div_log2"] = np.array([inp.sm_scale_div_log2], np.float32)
    g["head64.attn_sink_log2"] = (inp.attn_sink * np.float32(math.log2(math.e))).astype(np.float32)


class PTrace:
    """What the softmax warps' ``tcgen05.ld`` of P returned, block by block, for the P check, in bounded memory.

    Stands where a (blocks, 128, 64) float32 array would (``cta.gmem["head64.p_trace"]``; the softmax effect writes
    ``trace[block, lanes, columns] = values``): a block's P is held only until its eight writes (four softmax
    warps, two column halves each) have landed, then kept as a 16-byte BLAKE2b digest of its bits, so a long
    request keeps 16 bytes per block instead of 32 KiB. :meth:`matches` compares a block with the reference P's
    bits; a block never written compares as zeros, one written more than eight times never matches.
    """

    WRITES_PER_BLOCK = 8

    def __init__(self, blocks: int):
        self.blocks = blocks
        self._open: dict[int, np.ndarray] = {}
        self._writes: dict[int, int] = {}
        self._digests: dict[int, bytes | None] = {}

    @staticmethod
    def _digest(p: np.ndarray) -> bytes:
        import hashlib

        return hashlib.blake2b(np.ascontiguousarray(p, np.float32).view(np.uint32).tobytes(), digest_size=16).digest()

    def __setitem__(self, key, value) -> None:
        blk = int(key[0])
        if not -self.blocks <= blk < self.blocks:
            raise IndexError(f"index {blk} is out of bounds for axis 0 with size {self.blocks}")
        blk %= self.blocks
        if blk in self._digests:  # written again after its eight writes: no longer checkable
            self._digests[blk] = None
            return
        buf = self._open.get(blk)
        if buf is None:
            buf = self._open[blk] = np.zeros((2 * B_H, B_TOPK), np.float32)
        buf[key[1:]] = value
        n = self._writes[blk] = self._writes.get(blk, 0) + 1
        if n == self.WRITES_PER_BLOCK:
            self._digests[blk] = self._digest(self._open.pop(blk))

    def matches(self, i: int, p: np.ndarray) -> bool:
        """Whether block ``i`` holds exactly the bits of ``p`` (128, 64)."""
        if i in self._open:
            return self._digest(self._open[i]) == self._digest(p)
        d = self._digests.get(i, self._digest(np.zeros((2 * B_H, B_TOPK), np.float32)))
        return d is not None and d == self._digest(p)

    @property
    def nbytes(self) -> int:
        """Bytes held for the blocks (open buffers and digests)."""
        return sum(b.nbytes for b in self._open.values()) + 16 * len(self._digests)


def read_o(o_image: np.ndarray) -> np.ndarray:
    """O (64 x 512) float32 from the TMA-stored bf16 image (eight SW128 64 x 64 tiles)."""
    s = SharedMemory()
    s.data[:65536] = o_image
    return np.concatenate([s.read_tile(NOPE_TILE, 8192 * t) for t in range(8)], axis=1)


@frozen
class Head64Replay:
    """The outcome of one replay (see :meth:`to_json` for the keys)."""

    model: str
    blocks: int
    seed: int
    instructions: dict
    per_block: dict
    roles: dict
    cycles: int
    cycles_per_block: float
    tmem_columns: int
    smem_bytes: int
    o_rel_error: float | None
    lse_max_abs_error: float | None
    p_bit_exact: bool | None
    rescale_blocks: list
    hazards: list
    deadlock: dict | None
    semantics_errors: list
    events: int
    per_role: dict
    critical_path: dict
    wall_seconds: float
    tflops_b200: float
    """= ``tflops_steady`` (the name older output used)."""
    rescale_source: str = "data"
    """Where :attr:`rescale_blocks` comes from: "data" (the reference P), "given" (the caller's list, checked by
    the softmax effect at run time) or "assumed" (timing only: no data to decide it)."""
    inputs_seconds: float = 0.0
    """Seconds making the inputs (0 for timing only); :attr:`wall_seconds` excludes them."""
    check_seconds: float = 0.0
    """Seconds of the float64 reference, the reference P and the comparisons; :attr:`wall_seconds` excludes them."""
    tflops_whole: float = 0.0
    """The whole kernel's FLOPs / its cycles, on ``sm_count`` SMs at ``B200_CLOCK_GHZ``."""
    units_per_block: dict = field(factory=dict)
    """Busy cycles per block of each unit (tensor pipe, TMA, TMEM path, shared-memory port, memory link,
    issue slots of all sub-partitions)."""
    sm_count: int = B200_SMS
    engine: object = field(default=None, eq=False, repr=False)
    """The finished :class:`simtc.engine.Engine` (``replay(..., keep_engine=True)``; else None)."""
    known_races: list = field(factory=list)
    """Hazards that are races of FlashMLA's kernel itself (:data:`simtc.kernels.flashmla.head64.KNOWN_RACES`), each
    with ``known`` (the kernel's lines, what it means); :attr:`hazards` holds the others, and :attr:`ok` ignores
    these."""

    @property
    def cycles_whole(self) -> int:
        """Cycles of the whole request (= ``cycles``)."""
        return self.cycles

    @property
    def cycles_per_block_steady(self) -> float:
        """Steady-state cycles per block (= ``cycles_per_block``)."""
        return self.cycles_per_block

    @property
    def tflops_steady(self) -> float:
        return self.tflops_b200

    @property
    def ok(self) -> bool:
        numerics = self.o_rel_error is None or (self.o_rel_error <= O_TOL and self.lse_max_abs_error <= LSE_TOL
                                                and self.p_bit_exact)
        return numerics and not self.hazards and self.deadlock is None and not self.semantics_errors

    def to_json(self) -> dict:
        return {"model": self.model, "blocks": self.blocks, "seed": self.seed, "instructions": self.instructions,
                "per_block": self.per_block, "cycles": self.cycles, "cycles_per_block": self.cycles_per_block,
                "tmem_columns": self.tmem_columns, "smem_bytes": self.smem_bytes, "o_rel_error": self.o_rel_error,
                "lse_max_abs_error": self.lse_max_abs_error, "p_bit_exact": self.p_bit_exact,
                "rescale_blocks": self.rescale_blocks, "rescale_source": self.rescale_source, "hazards": self.hazards,
                "deadlock": self.deadlock,
                "semantics_errors": self.semantics_errors, "events": self.events, "per_role": self.per_role,
                "critical_path": self.critical_path, "cycles_whole": self.cycles_whole,
                "cycles_per_block_steady": self.cycles_per_block_steady, "tflops_whole": self.tflops_whole,
                "tflops_steady": self.tflops_steady, "tflops_b200": self.tflops_b200,
                "b200": {"sms": self.sm_count, "clock_ghz": B200_CLOCK_GHZ}, "units_per_block": self.units_per_block,
                "published_tflops_b200": PUBLISHED_TFLOPS, "wall_seconds": self.wall_seconds,
                "inputs_seconds": self.inputs_seconds, "check_seconds": self.check_seconds, "ok": self.ok,
                "known_races": self.known_races}

    def summary(self) -> str:
        lines = [f"FlashMLA head64 {self.model.upper()}: {self.blocks} block(s), seed {self.seed}: "
                 f"{'OK' if self.ok else 'FAILED'}",
                 f"  per block: {self.per_block.get('tcgen05.mma.ws', 0)} tcgen05.mma.ws, "
                 f"{self.per_block.get('tcgen05.commit', 0)} commits, "
                 f"{self.per_block.get('cp.async.bulk.tensor', 0)} TMA (gather4); per request "
                 f"{self.instructions.get('tcgen05.cp', 0)} tcgen05.cp",
                 f"  TMEM columns {self.tmem_columns} of 512; shared memory {self.smem_bytes} B of 232448"]
        if self.o_rel_error is not None:
            lines.append(f"  O rel. error {self.o_rel_error:.2e} (<= {O_TOL}), LSE max abs error "
                         f"{self.lse_max_abs_error:.2e} (<= {LSE_TOL}), P placement bit-exact {self.p_bit_exact}; "
                         f"O rescaled in blocks {self.rescale_blocks or 'none'}")
        else:
            lines.append(f"  timing only (no data): O rescale {self.rescale_source} in blocks "
                         f"{self.rescale_blocks or 'none'}")
        b200 = f"{self.sm_count}-SM B200 at {B200_CLOCK_GHZ} GHz"
        lines.append(f"  whole kernel: {self.cycles:,} cycles for {self.blocks} block(s) -> {self.tflops_whole:.0f} "
                     f"TFLOP/s on a {b200} (every SM running such a request; FlashMLA publishes up to "
                     f"{PUBLISHED_TFLOPS} for its own benchmark shapes)")
        lines.append(f"  steady state: {self.cycles_per_block:,.0f} cycles per block -> {self.tflops_b200:.0f} TFLOP/s")
        if self.units_per_block:
            names = {"smem_port": "shared-memory port", "memory": "memory link", "tma": "TMA copies in flight",
                     "tensor_pipe": "tensor pipe", "tmem_path": "TMEM path", "issue": "issue slots (4 partitions)"}
            busy = sorted(self.units_per_block.items(), key=lambda kv: -kv[1])
            lines.append("  busy cycles per block: " + ", ".join(f"{names.get(u, u)} {v:,.0f}" for u, v in busy))
        lines.append("  per role busy/waiting cycles: " + ", ".join(
            f"{r} {v['busy_cycles']}/{v['waiting_cycles']}" for r, v in self.per_role.items()))
        lines.append(f"  critical path ({sum(self.critical_path.values())} events): " + ", ".join(
            f"{r} {n}" for r, n in self.critical_path.items()))
        lines.append(f"  hazards {len(self.hazards)}, deadlock {'yes' if self.deadlock else 'no'}, "
                     f"{self.events} events, {self.wall_seconds:.2f} s replay + {self.inputs_seconds:.2f} s inputs + "
                     f"{self.check_seconds:.2f} s checks")
        for h in self.hazards[:5]:
            lines.append(f"    hazard: {h}")
        if self.known_races:
            first = self.known_races[0]
            lines.append(f"  known race of the kernel itself (not counted): {len(self.known_races)} x {first['rule']}, "
                         f"{first['known']['title']}")
        for e in self.semantics_errors[:5]:
            lines.append(f"    refused: {e}")
        return "\n".join(lines)


def _tmem_columns(eng) -> int:
    """TMEM columns the records of each role's first warp touch (the engine's compiled footprints)."""
    return len(eng.tmem_columns(first_warp_only=True))


def _flat_counts(counts: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in counts.values():
        for k, v in c.items():
            if not k.startswith("cuda_core:"):
                out[k] = out.get(k, 0) + v
    return out


def clear_caches() -> None:
    """Forget what a replay caches across calls (built Programs and blocks, MMA plans, descriptor readings), so
    that a benchmark times a replay as a fresh process would run it (less the interpreter start-up)."""
    from simtc.kernels.flashmla import head64
    from simtc.mma import tcgen05
    from simtc.smem import read

    head64.clear_caches()
    tcgen05.clear_caches()
    read.clear_caches()


BASE_BYTES = 300 << 20
"""Memory a numerics replay needs whatever its length: the interpreter and libraries (~60 MiB), the inputs'
drawing chunks, the reference P group and the float64 reference attention's 64-block group, with room to spare:
the estimate stays above the measured peak (``benchmarks/replay_memory.py``: 160 MB measured, 353 MB estimated at
256 blocks; 703 and 927 MB at 4,096)."""
RUN_BYTES_PER_BLOCK = 64 << 10
"""Memory per block beyond the KV cache: the RoPE view of the cache (16 KiB), the engine's trace (~23 KiB, ~640
events) and state, the Program's share; measured ~30 KiB after the cache, rounded up."""


def memory_estimate(model_name: str | Head64Model = "v32", blocks: int = 4, *, timing_only: bool = False) -> int:
    """Bytes a :func:`replay` of ``blocks`` blocks needs at its peak (an upper estimate, for refusing a request
    that would not fit): a fixed part, the seeded KV cache (``2 x blocks + 2`` page blocks of 64 token rows) and
    :data:`RUN_BYTES_PER_BLOCK`. Timing only builds no data: 80 MiB and the run's share per block.

    >>> round(memory_estimate("v32", 4096) / 2**20), round(memory_estimate("v32", 4096, timing_only=True) / 2**20)
    (884, 336)
    """
    m = model(model_name)
    if timing_only:
        return (80 << 20) + RUN_BYTES_PER_BLOCK * blocks
    rows = PAGE_BLOCK_SIZE if m.v32 else -(-PAGE_BLOCK_SIZE * (m.tma_k_stride + 8) // m.tma_k_stride)
    cache = (2 * blocks + 2) * rows * m.tma_k_stride
    return BASE_BYTES + cache + RUN_BYTES_PER_BLOCK * blocks


ENGINE_SLICE = 50_000
"""Cycles the engine runs between two progress reports (:func:`run_engine`)."""


def _silent(phase: str, done: int, total: int) -> None:
    """A progress callback that shows nothing."""


def run_engine(eng, progress=None):
    """``eng.run()``; with a ``progress(phase, done, total)`` callback, in slices of :data:`ENGINE_SLICE` cycles
    (``Engine.run(until)``: the same events in the same order), reporting the records issued by every warp."""
    if progress is None:
        return eng.run()
    total = sum(len(w.ops) for w in eng.warps)
    progress("engine", 0, total)
    until = 0
    while not eng.finished:
        until = max(until, eng.now) + ENGINE_SLICE
        eng.run(until)
        progress("engine", sum(w.pc for w in eng.warps), total)
    progress("engine", total, total)
    return eng


def _rescale_flags(blocks: int, rescale) -> list[bool]:
    """Block indices (``rescale``) -> one flag per block; refused when out of range (block 0 never rescales)."""
    idx = sorted({int(i) for i in rescale})
    if any(i < 1 or i >= blocks for i in idx):
        raise SimtcError(f"rescale blocks {idx}: each must be a block index 1..{blocks - 1} of this {blocks}-block "
                         "request", rule="O is rescaled only after the request's first block (kernel.cuh)")
    return [i in idx for i in range(blocks)]


def replay(model_name: str | Head64Model = "v32", blocks: int = 4, seed: int = 0, *, timing_only: bool = False,
           check: bool = True, transform=None, keep_engine: bool = False,
           inputs: Head64Inputs | None = None, rescale=None, timing=None, progress=None) -> Head64Replay:
    """Replay one request on the engine and check it (numerics skipped with ``timing_only``).

    ``timing``: the engine's :class:`~simtc.engine.parameters.Timing` (default: the sm100 table).
    ``transform``: a function Program -> Program applied to the kernel before the run (a seeded bug of
    :mod:`simtc.kernels.flashmla.mutations`, a variant of :mod:`simtc.kernels.flashmla.alternatives`);
    ``keep_engine``: keep the finished engine in :attr:`Head64Replay.engine` (trace, timeline, units).
    ``inputs``: replay this request instead of seeded ones (model, blocks, seed taken from it; e.g. one row of a
    FlashMLA inputs file, :func:`simtc.kernels.flashmla.io.request`).
    ``rescale``: the block indices that take the lazy O rescale. With full numerics the default (None) derives
    them from the data (:func:`rescale_blocks` on the reference P); a given list is used as is (the softmax
    effect refuses a block whose data disagrees). With ``timing_only`` no inputs are built and no P is
    computed: the pattern is an assumption, None meaning no block rescales (``rescale_source`` = "assumed").
    ``progress``: None, or a function ``progress(phase, done, total)`` called as the work advances -- phases
    "inputs", "reference P" (blocks), "engine" (records issued of all warps; the engine then runs in slices of
    :data:`ENGINE_SLICE` cycles, the same events in the same order), "reference O" and "P check" (blocks).

    Seconds, all measured inside this call (no interpreter start-up): ``wall_seconds`` is the replay proper
    (building the Program, loading the request into global memory, the engine run with the semantics layer and
    the effects, reading back O and LSE, the counts and the critical path); ``inputs_seconds`` making the seeded
    inputs (fp8 encoding, dequantization); ``check_seconds`` the float64 reference attention and the reference P
    (with the rescale pattern derived from it) and the comparisons.
    """
    from simtc.engine import Engine
    from simtc.engine.core import gc_paused
    from simtc.semantics import Cta, execute

    m = model(model_name)
    t_in = time.perf_counter()
    if inputs is not None:
        m, blocks, seed = inputs.model, inputs.blocks, inputs.seed
    inp = None
    tell = progress or _silent
    if not timing_only:
        tell("inputs", 0, 1)
        inp = inputs if inputs is not None else make_inputs(m, blocks, seed)
        tell("inputs", 1, 1)
    t_chk = time.perf_counter()
    inputs_s = t_chk - t_in
    if rescale is not None:
        resc, source = _rescale_flags(blocks, rescale), "given" if not timing_only else "assumed"
    elif timing_only:
        resc, source = [False] * blocks, "assumed"
    else:
        resc, source = rescale_blocks(inp, progress=progress), "data"  # the reference P group by group, not kept
    t0 = time.perf_counter()
    check_s = t0 - t_chk
    with gc_paused():  # building allocates many small long-lived records (no garbage cycles)
        program = head64_program(m, blocks, resc)
    if transform is not None:
        program = transform(program)
    if timing_only:
        eng = run_engine(Engine(program, mode="timing", check=check, timing=timing), progress)
    else:
        cta = Cta()
        cta.init_barriers(program)
        load_inputs(cta, inp)
        for r in setup_records(m):
            execute(r, cta, warp=0)
        eng = run_engine(Engine(program, mode="semantics", check=check, cta=cta, timing=timing), progress)
        o, lse = read_o(cta.gmem["o"]), cta.gmem["lse"]
    o_err = lse_err = p_exact = None
    if not timing_only:
        t_c = time.perf_counter()
        if inp.valid.any():
            o_ref, lse_ref = reference_attention(inp, progress=progress)
            o_err = float(np.linalg.norm(o - o_ref) / np.linalg.norm(o_ref))
            lse_err = float(np.abs(lse.astype(np.float64) - lse_ref).max())
        else:  # no valid token: O = 0 and LSE = +inf exactly (kernel.cuh lines 316-317, 346)
            o_err = 0.0 if not o.any() else float("inf")
            lse_err = 0.0 if np.all(lse == np.inf) else float("inf")
        trace = cta.gmem["head64.p_trace"]
        p_exact = True
        for i, p in reference_p_chunks(inp):
            p_exact = p_exact and all(trace.matches(i + j, pj) for j, pj in enumerate(p))
            tell("P check", i + len(p), blocks)
            if not p_exact:
                break
        dt = time.perf_counter() - t_c
        check_s += dt
        t0 += dt
    cpb = _steady(eng)
    flops = block_flops(m)
    sms = int(eng.timing["sm_count"]) if eng.arch == "sm100" else B200_SMS
    crit: dict[str, int] = {}
    for i in eng.critical_path():
        role = eng.trace[i].role or "(barrier)"
        crit[role] = crit.get(role, 0) + 1
    counts = role_counts(program)
    hazards, known = split_known_races(program, [h.to_json() for h in eng.hazards])
    return Head64Replay(
        m.name, blocks, seed, _flat_counts(counts), _flat_counts(per_block_counts(m)), counts, eng.cycles,
        float(cpb),
        _tmem_columns(eng), m.smem.total, o_err, lse_err, p_exact, [i for i, r in enumerate(resc) if r],
        hazards, eng.deadlock, list(eng.semantics_errors), len(eng.trace),
        eng.per_role(), crit, round(time.perf_counter() - t0, 4), tflops(flops, cpb, sms),
        rescale_source=source, inputs_seconds=round(inputs_s, 4), check_seconds=round(check_s, 4),
        tflops_whole=tflops(flops * blocks, eng.cycles, sms),
        units_per_block={u: round(v / blocks, 1) for u, v in eng.unit_busy.items()}, sm_count=sms,
        engine=eng if keep_engine else None, known_races=known)


def steady_cycles_per_block(model_name: str | Head64Model = "v32", blocks: int = 12, timing=None,
                            rescale=None) -> float:
    """Steady-state cycles per block of a timing-only replay (the answer ``simtc timing sensitivity`` perturbs):
    the mean time between consecutive ``sv_done`` phases. ``rescale``: the blocks that rescale O (default none)."""
    from simtc.engine import Engine

    program = head64_program(model_name, blocks, None if rescale is None else _rescale_flags(blocks, rescale))
    return _steady(Engine(program, mode="timing", check=False, timing=timing).run())


def sv_done_cycles(eng) -> list[int]:
    """The cycles at which an ``sv_done[*]`` barrier completed a phase: one per block, when the block's S x V
    products are done (the MMA warp's commit landed), in order."""
    return eng.trace.phase_cycles("sv_done")


def _steady(eng) -> float:
    """Steady-state cycles per block: the mean interval between consecutive blocks' ``sv_done`` phases (the
    first block's ramp and the epilogue after the last are left out); the whole run when fewer than 2 blocks."""
    from simtc.engine.trace import mean_interval

    return mean_interval(sv_done_cycles(eng), eng.cycles)


def block_flops(m: Head64Model) -> int:
    """FLOPs of one block as FlashMLA counts them: 2 x 64 heads x 64 tokens x (D_QK + D_V) (FlashMLA ``tests/lib.py``,
    ``count_flop_and_mem_vol_for_decode``, at ``9241ae3``).

    >>> block_flops(model("v32")), block_flops(model("model1"))
    (8912896, 8388608)
    """
    return 2 * B_H * B_TOPK * (m.d_q + m.d_v)


def call_flops(m: str | Head64Model, b: int, s_q: int, topk: int, h_q: int = B_H) -> int:
    """FLOPs of a decode call as FlashMLA counts them (every index valid): ``block_flops`` per 64 heads per block of
    64 tokens, for b x s_q queries of topk tokens.

    >>> call_flops("v32", 148, 2, 16384)
    675383607296
    """
    return block_flops(model(m)) * (h_q // B_H) * b * s_q * topk // B_TOPK


def tflops(flops: float, cycles: float, sms: int = B200_SMS, clock_ghz: float = B200_CLOCK_GHZ) -> float:
    """TFLOP/s of ``sms`` SMs each doing ``flops`` in ``cycles`` at ``clock_ghz``.

    >>> round(tflops(8912896, 4096), 1)      # one V32 block per 4,096 cycles on 148 SMs at 1.965 GHz
    632.8
    """
    return flops / (cycles / (clock_ghz * 1e9)) * sms / 1e12 if cycles else 0.0


def hbm_bound(model_name: str | Head64Model = "v32", timing=None) -> dict:
    """The HBM floor on cycles per block: the bytes one block moves from HBM (its KV rows and indices) over the
    SM's share of the chip's bandwidth (``hbm_bytes_per_cycle / sm_count``) when every SM runs."""
    from simtc.engine.parameters import Timing

    t = timing or Timing("sm100")
    m = model(model_name)
    per_token = m.tma_k_stride if m.v32 else m.tma_k_stride + 8  # V32 656 B record; MODEL1 576 + 8 B of scales
    nbytes = B_TOPK * (per_token + 4)  # + the int32 index
    share = t["hbm_bytes_per_cycle"] / t["sm_count"]
    return {"bytes_per_block": nbytes, "bytes_per_cycle_per_sm": round(share, 2),
            "min_cycles_per_block": round(nbytes / share, 1)}


def stepper(model_name: str | Head64Model = "v32", blocks: int = 2, seed: int = 0, *, transform=None):
    """A :class:`simtc.engine.stepper.Stepper` over the head64 replay (semantics mode, the seeded inputs loaded,
    the setup records -- TMEM allocation, barrier init -- applied): step through the kernel one event at a time,
    the shared-memory state named by the kernel's plan (``Head64Model.smem``).

    ``transform`` maps the Program before it runs (a mutation).
    """
    from simtc.engine import Engine
    from simtc.engine.stepper import Stepper
    from simtc.semantics import Cta, execute

    m = model(model_name) if isinstance(model_name, str) else model_name
    inp = make_inputs(m, blocks, seed)
    program = head64_program(m, blocks, rescale_blocks(inp))
    if transform is not None:
        program = transform(program)

    def factory():
        cta = Cta()
        cta.init_barriers(program)
        load_inputs(cta, inp)
        for r in setup_records(m):
            execute(r, cta, warp=0)
        return Engine(program, mode="semantics", cta=cta)

    buffers = [(b.name, b.offset, b.end) for b in m.smem]
    return Stepper(factory, smem_buffers=buffers, title=f"FlashMLA head64 {m.name.upper()}, {blocks} block(s)")
