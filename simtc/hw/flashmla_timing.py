"""FlashMLA's SM90 sparse decode timed on the GPU, the way its own benchmark reports it: whole calls at given shapes.

A *call* is the three launches of FlashMLA's ``sparse_attn_decode_interface`` (``csrc/api/sparse_decode.h``):
the scheduler metadata kernel, the split-KV kernel and the combine kernel. :func:`time_shape` makes a request of
one shape on the device (:func:`device_inputs`), then simtc's C entry point
(``simtc_flashmla_sm90_sparse_decode_timed`` in ``simtc/hw/cuda/flashmla_sm90_entry.cu``) runs ``warmup`` untimed
calls and ``repeats`` timed ones: CUDA events recorded on the stream before the scheduler, between the launches
and after the combine, no host synchronisation inside a call; before each timed call (outside its span) a
``cudaMemsetAsync`` of 256 MiB flushes L2, so every call reads its KV cache from HBM as a decode step of a
serving system does. Medians over the repeats are reported per kernel and for the call.

FLOPs are counted as FlashMLA counts them (``count_flop_and_mem_vol_for_decode`` in ``tests/lib.py`` at
``9241ae3``): ``2 x h_q x b x s_q x topk x (d_qk + d_v)``; its benchmark's time is the split-KV kernel's start to
the combine's end (``get_e2e_time``), which is :attr:`ShapeTiming.splitkv_combine_ms` here (the events around
the two launches, so it includes the gap between them).

The inputs follow FlashMLA's benchmark (``tests/test_flash_mla_sparse_decoding.py``): every batch element has
its own ``s_k`` tokens of cache (32,768 by default) and each (batch, query) row attends to ``topk`` distinct ones
of them. The values are random and valid, not a quantized K: NoPE codes drawn from the distribution of
``e4m3(x / 2^-6)`` for ``x ~ N(0, 1)`` (what FlashMLA's ``quantize_k_cache`` makes of a standard normal K,
whose per-tile scale is 2^-6), scales 2^-6, RoPE and Q standard normal in bf16. Time does not depend on the
values except through the lazy O rescale, which such data triggers about as often as FlashMLA's own.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
from attrs import frozen

from simtc.errors import SimtcError

__all__ = ["COST_SHAPES", "FIXED_SHAPES", "FLUSH_BYTES", "HELD_OUT_SHAPES", "NCU_L1_METRICS", "NCU_METRICS",
           "NCU_SECTIONS", "PROFILE_SHAPES", "TIMING_SETS", "TIMING_SHAPES", "ShapeTiming", "TimingShape",
           "device_inputs", "flops", "load_timing", "main", "ncu_summaries", "ncu_summary", "profile_call",
           "profile_calls", "run_timing", "save_timing", "shape_named", "time_shape"]

FLUSH_BYTES = 256 << 20
"""Bytes written before each timed call to flush L2 (the H200's L2 is 60 MiB)."""
_RULE = "FlashMLA timing runs on an sm_90a GPU with a --flashmla build"


@frozen
class TimingShape:
    """One request shape of a timed call."""

    model: str
    b: int
    s_q: int
    topk: int
    s_k: int = 32768

    @property
    def name(self) -> str:
        return f"{self.model}-b{self.b}-sq{self.s_q}-topk{self.topk}"


TIMING_SHAPES: tuple[TimingShape, ...] = tuple(TimingShape(*s) for s in (
    ("v32", 1, 1, 2048), ("v32", 1, 4, 16384), ("v32", 8, 2, 4096), ("v32", 32, 1, 16384), ("v32", 64, 4, 512),
    ("v32", 64, 2, 2048), ("v32", 132, 1, 8192), ("v32", 148, 2, 16384), ("v32", 264, 2, 4096),
    ("model1", 1, 2, 512), ("model1", 16, 4, 8192), ("model1", 74, 2, 16384), ("model1", 128, 1, 1024),
    ("model1", 264, 1, 8192),
))
"""Shapes spanning batch 1-264, s_q 1/2/4 and topk 512-16,384 for both models (b x s_q from 1 to 528): what
predictions are held against (nothing is fitted on them)."""

FIXED_SHAPES: tuple[TimingShape, ...] = tuple(TimingShape(*s) for s in (
    ("v32", 1, 1, 64), ("v32", 1, 2, 64), ("v32", 1, 4, 64), ("v32", 16, 1, 64), ("v32", 64, 1, 64),
    ("v32", 2, 1, 1024), ("v32", 4, 2, 1024),
    ("model1", 1, 1, 64), ("model1", 1, 2, 64), ("model1", 1, 4, 64), ("model1", 16, 1, 64), ("model1", 64, 1, 64),
    ("model1", 2, 1, 1024), ("model1", 4, 2, 1024),
))
"""Small calls that measure what a call costs besides its blocks: one block per request (the launches, the
scheduler's work per part and per request, a split-KV CTA's fixed cost) and a few split requests (the combine
kernel's work). None of them is one of :data:`TIMING_SHAPES`."""

HELD_OUT_SHAPES: tuple[TimingShape, ...] = tuple(TimingShape(*s) for s in (
    ("v32", 2, 1, 4096), ("v32", 8, 1, 2048), ("v32", 4, 3, 8192), ("v32", 16, 2, 32768, 65536), ("v32", 96, 3, 1024),
    ("v32", 200, 1, 4096),
    ("model1", 4, 1, 16384), ("model1", 8, 3, 2048), ("model1", 6, 4, 4096), ("model1", 32, 2, 4096),
    ("model1", 100, 4, 1024), ("model1", 48, 1, 32768, 65536),
))
"""A second set of held-out calls, none of them a shape of :data:`TIMING_SHAPES` or :data:`FIXED_SHAPES`: batch 2 to
200 (five of them b <= 8), s_q 1 to 4 (3 included), topk 1,024 to 32,768 (the two 32,768 ones over s_k = 65,536
tokens), both models."""

PROFILE_SHAPES: tuple[str, ...] = (
    "v32-b8-sq1-topk2048", "v32-b2-sq1-topk4096", "model1-b4-sq1-topk16384", "model1-b8-sq3-topk2048",
    "model1-b6-sq4-topk4096", "v32-b1-sq4-topk16384", "model1-b1-sq2-topk512", "v32-b96-sq3-topk1024",
    "model1-b32-sq2-topk4096", "v32-b200-sq1-topk4096",
)
"""The shapes Nsight Compute profiles in one process (:func:`profile_calls`): seven with b <= 8, where the prologue,
the epilogue, idle SMs and short splits weigh most, and three larger ones."""

COST_SHAPES: tuple[TimingShape, ...] = tuple(TimingShape(*s) for s in (
    ("v32", 24, 1, 4096), ("v32", 48, 1, 4096), ("v32", 96, 1, 4096), ("v32", 160, 1, 4096), ("v32", 40, 3, 4096),
    ("model1", 48, 2, 4096), ("model1", 112, 1, 8192), ("model1", 80, 2, 2048),
    ("v32", 256, 1, 64), ("v32", 128, 4, 64), ("model1", 192, 2, 64), ("model1", 320, 1, 64),
))
"""Calls that measure what :data:`FIXED_SHAPES` leaves unmeasured: the combine kernel with 24 to 120 split requests
(every request of the first eight is split) and the scheduler at 256 to 512 requests of one block. None of them
is a shape of another set."""

TIMING_SETS = {"calls": TIMING_SHAPES, "fixed": FIXED_SHAPES, "held-out": HELD_OUT_SHAPES, "costs": COST_SHAPES}


def shape_named(name: str) -> TimingShape:
    """The shape of any timing set called ``name`` (``v32-b8-sq1-topk2048``)."""
    for s in (*TIMING_SHAPES, *FIXED_SHAPES, *HELD_OUT_SHAPES, *COST_SHAPES):
        if s.name == name:
            return s
    raise SimtcError(f"no timing shape {name!r}; known: {', '.join(s.name for s in TIMING_SHAPES)}, ...", rule=_RULE)


def flops(shape: TimingShape) -> int:
    """FlashMLA's FLOP count of one call (every index valid): 2 x 64 heads x b x s_q x topk x (d_qk + d_v).

    >>> flops(TimingShape("v32", 148, 2, 16384))
    675383607296
    """
    from simtc.kernels.flashmla.replay import call_flops

    return call_flops(shape.model, shape.b, shape.s_q, shape.topk)


def _e4m3_code_probabilities(scale_exp: int = -6) -> np.ndarray:
    """P(code) of e4m3(x / 2^scale_exp) for x ~ N(0, 1): each code takes the mass of x between the midpoints to its
    neighbours (round to nearest); codes 0x7F / 0xFF (NaN) get none."""
    from simtc.numerics.formats import decode_bits

    vals = decode_bits(np.arange(128, dtype=np.uint8), "e4m3").astype(np.float64)[:127]  # 0 ... 448
    order = np.argsort(vals)
    v = vals[order] * 2.0 ** scale_exp
    edges = np.concatenate([[0.0], (v[1:] + v[:-1]) / 2, [np.inf]])
    cdf = np.array([0.5 * math.erfc(-e / math.sqrt(2)) for e in edges])  # Phi(edge)
    mass = np.diff(cdf)  # P(|x| rounds to v), one side
    p = np.zeros(256)
    p[order] = mass
    p[128 + order] = mass  # the negative codes
    p[0] += p[128]  # -0 folded into +0
    p[128] = 0.0
    return p / p.sum()


def device_inputs(shape: TimingShape, seed: int = 0, page_block_size: int = 64) -> dict:
    """A request of ``shape`` on the device (cupy arrays, FlashMLA's formats: :mod:`simtc.kernels.flashmla.io`)."""
    import cupy as cp

    from simtc.kernels.flashmla.kvcache import kv_layout
    from simtc.kernels.flashmla.models import model

    m = model(shape.model)
    if shape.topk % 64 or not 64 <= shape.topk <= shape.s_k or shape.s_k % page_block_size:
        raise SimtcError(f"{shape.name}: topk a multiple of 64 within s_k = {shape.s_k}, s_k a multiple of the page "
                         f"block size {page_block_size}", rule="FlashMLA's sparse decode shapes")
    lay = kv_layout(m, page_block_size)
    stride = -(-lay.min_block_stride // lay.tma_k_stride) * lay.tma_k_stride
    blocks_per_batch = shape.s_k // page_block_size
    nb = shape.b * blocks_per_batch
    rs = cp.random.RandomState(seed)
    kv = cp.zeros((nb, stride), cp.uint8)
    rec = kv[:, :page_block_size * lay.token_bytes].reshape(nb, page_block_size, lay.token_bytes)
    probs = cp.asarray(_e4m3_code_probabilities())
    tiles = m.d_nope // m.quant_tile
    for lo in range(0, nb, 1024):  # chunks keep the random draws small
        hi = min(nb, lo + 1024)
        rec[lo:hi, :, :m.d_nope] = rs.choice(256, size=(hi - lo, page_block_size, m.d_nope), p=probs).astype(cp.uint8)
        rope = _bf16_bits(rs.standard_normal((hi - lo, page_block_size, m.d_rope), dtype=cp.float32))
        r0 = m.d_nope + (4 * tiles if m.v32 else 0)
        rec[lo:hi, :, r0:r0 + 2 * m.d_rope] = rope.view(cp.uint8).reshape(hi - lo, page_block_size, 2 * m.d_rope)
    if m.v32:  # fp32 scales in the record
        scale = cp.full((1, 1, tiles), 2.0 ** -6, cp.float32).view(cp.uint8).reshape(1, 1, 4 * tiles)
        rec[:, :, m.d_nope:m.d_nope + 4 * tiles] = scale
    else:  # ue8m0 codes after the block's records
        tail = kv[:, lay.scale_offset:lay.scale_offset + 8 * page_block_size].reshape(nb, page_block_size, 8)
        tail[:, :, :tiles] = 127 - 6
    rows = shape.b * shape.s_q
    idx = cp.empty((rows, shape.topk), cp.int32)
    for lo in range(0, rows, 64):
        hi = min(rows, lo + 64)
        perm = cp.argsort(rs.random_sample((hi - lo, shape.s_k)), axis=1)[:, :shape.topk].astype(cp.int32)
        batch = cp.arange(lo, hi, dtype=cp.int32) // shape.s_q
        idx[lo:hi] = perm + batch[:, None] * shape.s_k
    q = _bf16_bits(rs.standard_normal((shape.b, shape.s_q, 64, m.d_q), dtype=cp.float32))
    return {"model": m, "q": q, "kv": kv, "indices": idx.reshape(shape.b, shape.s_q, shape.topk),
            "page_block_size": page_block_size, "num_blocks": nb, "block_stride": stride,
            "sm_scale": 1.0 / math.sqrt(m.d_q)}


def _bf16_bits(x):
    """float32 -> bf16 bits, round to nearest even (cupy)."""
    import cupy as cp

    u = x.view(cp.uint32)
    return ((u + cp.uint32(0x7FFF) + ((u >> 16) & 1)) >> 16).astype(cp.uint16)


@frozen
class ShapeTiming:
    """Medians (and 10th / 90th percentiles) over the timed calls of one shape, milliseconds."""

    shape: TimingShape
    num_sm_parts: int
    repeats: int
    sched_ms: float
    splitkv_ms: float
    combine_ms: float
    call_ms: float
    call_p10_ms: float
    call_p90_ms: float
    splitkv_combine_ms: float

    @property
    def tflops(self) -> float:
        """FlashMLA's FLOPs over the split-KV + combine span (its benchmark's time)."""
        return flops(self.shape) / (self.splitkv_combine_ms * 1e-3) / 1e12

    @property
    def tflops_call(self) -> float:
        """FLOPs over the whole call (scheduler included)."""
        return flops(self.shape) / (self.call_ms * 1e-3) / 1e12

    def as_dict(self) -> dict:
        s = self.shape
        return {"name": s.name, "model": s.model, "b": s.b, "s_q": s.s_q, "topk": s.topk, "s_k": s.s_k,
                "num_sm_parts": self.num_sm_parts, "repeats": self.repeats, "flops": flops(s),
                "sched_ms": self.sched_ms, "splitkv_ms": self.splitkv_ms, "combine_ms": self.combine_ms,
                "call_ms": self.call_ms, "call_p10_ms": self.call_p10_ms, "call_p90_ms": self.call_p90_ms,
                "splitkv_combine_ms": self.splitkv_combine_ms, "tflops": round(self.tflops, 2),
                "tflops_call": round(self.tflops_call, 2)}

    @classmethod
    def from_dict(cls, d: dict) -> ShapeTiming:
        shape = TimingShape(d["model"], d["b"], d["s_q"], d["topk"], d["s_k"])
        return cls(shape, d["num_sm_parts"], d["repeats"], d["sched_ms"], d["splitkv_ms"], d["combine_ms"],
                   d["call_ms"], d["call_p10_ms"], d["call_p90_ms"], d["splitkv_combine_ms"])


def time_shape(build, shape: TimingShape, *, warmup: int = 5, repeats: int = 30, seed: int = 0,
               flush_bytes: int = FLUSH_BYTES) -> ShapeTiming:
    """Time FlashMLA's call at ``shape`` (see the module text) with a ``--flashmla`` build."""
    import ctypes

    from simtc.hw.device import require

    info = require("sm_90a")  # before cupy: no GPU here is one refusal, not an ImportError
    import cupy as cp

    from simtc.hw.flashmla import BYTES_PER_TOKEN, D_V, _timed_library, sm90_num_sm_parts

    fn = _timed_library(build)
    dev = device_inputs(shape, seed)
    nb, s_q, h_q = shape.b, shape.s_q, 64
    parts = sm90_num_sm_parts(info.sms, s_q, h_q)
    splits = nb + parts
    out = cp.zeros((nb, s_q, h_q, D_V), cp.uint16)
    lse = cp.zeros((nb, s_q, h_q), cp.float32)
    meta = cp.zeros((parts, 8), cp.int32)
    nsplit = cp.zeros((nb + 1,), cp.int32)
    lse_acc = cp.zeros((splits, s_q, h_q), cp.float32)
    o_acc = cp.zeros((splits, s_q, h_q, D_V), cp.float32)
    flush = cp.empty((flush_bytes,), cp.uint8) if flush_bytes else None
    ms = np.zeros(3 * repeats, np.float32)
    err = ctypes.create_string_buffer(1024)
    m = dev["model"]
    stream = cp.cuda.get_current_stream()
    rc = fn(int(m.name == "model1"), nb, s_q, h_q, m.d_q, shape.topk, dev["num_blocks"], dev["page_block_size"],
            dev["block_stride"], BYTES_PER_TOKEN[m.name], float(dev["sm_scale"]), dev["q"].data.ptr,
            dev["kv"].data.ptr, dev["indices"].data.ptr, None, None, out.data.ptr, lse.data.ptr, meta.data.ptr,
            nsplit.data.ptr, lse_acc.data.ptr, o_acc.data.ptr, parts, stream.ptr, err, len(err), warmup, repeats,
            flush.data.ptr if flush is not None else None, flush_bytes, ms.ctypes.data)
    if rc:
        raise SimtcError(f"FlashMLA's SM90 sparse decode failed at {shape.name}: {err.value.decode(errors='replace')}",
                         rule="FlashMLA's launcher checks (csrc/sm90/decode/sparse_fp8/splitkv_mla.cuh)")
    if not bool(cp.isfinite(lse).all()):
        raise SimtcError(f"{shape.name}: FlashMLA returned a non-finite LSE on valid inputs", rule=_RULE)
    t = ms.reshape(repeats, 3).astype(np.float64)
    call = t.sum(axis=1)
    med = np.median(t, axis=0)
    del dev, out, lse, meta, nsplit, lse_acc, o_acc, flush
    cp.get_default_memory_pool().free_all_blocks()
    return ShapeTiming(shape, parts, repeats, float(med[0]), float(med[1]), float(med[2]), float(np.median(call)),
                       float(np.percentile(call, 10)), float(np.percentile(call, 90)),
                       float(np.median(t[:, 1] + t[:, 2])))


def run_timing(build, shapes: Iterable[TimingShape] = TIMING_SHAPES, *, warmup: int = 5, repeats: int = 30,
               seed: int = 0, progress: Callable[[str], None] | None = None) -> list[ShapeTiming]:
    """:func:`time_shape` for every shape."""
    out = []
    for s in shapes:
        if progress:
            progress(f"timing {s.name}")
        out.append(time_shape(build, s, warmup=warmup, repeats=repeats, seed=seed))
    return out


def save_timing(path, rows: list[ShapeTiming], *, meta: dict) -> None:
    """Write a timing recording (JSON: ``format``, ``meta``, ``rows``)."""
    doc = {"format": "simtc-flashmla-timing", "version": 1,
           "meta": {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), **meta,
                    "method": __doc__.split("\n\n")[1].replace("\n", " ")},
           "rows": [r.as_dict() for r in rows]}
    Path(path).write_text(json.dumps(doc, indent=1) + "\n")


def load_timing(path) -> tuple[dict, list[ShapeTiming]]:
    """``(meta, rows)`` of a recording written by :func:`save_timing`."""
    doc = json.loads(Path(path).read_text())
    if doc.get("format") != "simtc-flashmla-timing":
        raise SimtcError(f"{path} is not a FlashMLA timing recording", rule="simtc-flashmla-timing files")
    return doc["meta"], [ShapeTiming.from_dict(r) for r in doc["rows"]]


def profile_call(build_dir, name: str, seed: int = 0) -> None:
    """One untimed and one timed call at the shape ``name`` of :data:`TIMING_SHAPES` -- what Nsight Compute profiles
    (``ncu --kernel-name regex:splitkv --launch-skip 1 --launch-count 1 ...``: the second split-KV launch)."""
    from simtc.hw.flashmla import load_build

    time_shape(load_build(build_dir), shape_named(name), warmup=1, repeats=1, seed=seed)


def profile_calls(build_dir, names: Iterable[str], seed: int = 0, progress: Callable[[str], None] | None = None
                  ) -> None:
    """:func:`profile_call` for each shape in turn, in one process: under ``ncu --kernel-name regex:splitkv`` with
    no launch skipped, the profile holds two split-KV launches per shape in this order (the second, after a
    warm-up call, is the one :func:`ncu_summaries` keeps)."""
    from simtc.hw.flashmla import load_build

    build = load_build(build_dir)
    for n in names:
        if progress:
            progress(f"profiling {n}")
        time_shape(build, shape_named(n), warmup=1, repeats=1, seed=seed)


NCU_METRICS = {
    "issue": "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "tensor_pipe": "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "l1tex": "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "dram": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
}
"""The utilizations ``simtc predict`` reports, as Nsight Compute names them (percent of peak): "Issue Slots Busy",
the tensor pipe's active cycles, "L1/TEX Cache Throughput", "DRAM Throughput"."""


NCU_SECTIONS = ("SpeedOfLight", "ComputeWorkloadAnalysis", "MemoryWorkloadAnalysis", "WarpStateStats",
                "SchedulerStats", "Occupancy", "LaunchStats")
"""The Nsight Compute sections of a split-KV profile."""
NCU_L1_METRICS = (
    "l1tex__data_pipe_lsu_wavefronts.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum", "l1tex__m_xbar2l1tex_read_sectors.sum",
    "smsp__inst_executed_op_global_ld.sum", "smsp__inst_executed_op_shared_ld.sum",
    "smsp__inst_executed_op_shared_st.sum", "sm__cycles_active.avg", "sm__cycles_active.sum", "sm__cycles_elapsed.max",
    "lts__t_sector_hit_rate.pct", "dram__bytes.sum.per_second", "gpc__cycles_elapsed.avg.per_second",
)
"""Raw counters added to the sections: the L1 data pipe's wavefronts (global loads, shared loads and stores), the
global loads' requests and sectors, the SMs' active cycles, the L2 hit rate and the bytes read from DRAM (each seen
in an earlier profile on the same device, ``tests/data/ncu/``)."""


def _ncu_tables(path) -> list[dict]:
    import csv

    text = Path(path).read_text()
    rows = list(csv.reader(ln for ln in text.splitlines() if ln.startswith('"')))
    try:
        i = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
    except StopIteration:
        raise SimtcError(f"{path}: no metric table (a `ncu --csv --page raw` output)", rule="Nsight Compute CSV") \
            from None
    return [dict(zip(rows[i], r, strict=False)) for r in rows[i + 2:] if r and r[0] != "ID"]


def ncu_summaries(path, *, every: int = 1, keep: int = 0) -> list[dict]:
    """:func:`ncu_summary` of each launch of a profile holding several (``every`` launches per shape, the
    ``keep``-th of each kept: :func:`profile_calls` profiles give ``every=2, keep=1``)."""
    tables = _ncu_tables(path)
    return [_summary(path, v) for v in tables[keep::every]]


def ncu_summary(path) -> dict:
    """What a ``ncu --csv --page raw`` profile of one split-KV launch says (Nsight Compute's raw metric names):
    ``utilization`` (fractions of peak, :data:`NCU_METRICS`), ``duration_ns``, ``sm_clock_hz`` (the SM clock during
    the launch: ``gpc__cycles_elapsed.avg.per_second``), ``grid``, ``block`` and ``stalls`` (warps stalled per issued
    instruction, by reason: ``smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio``)."""
    return _summary(path, _ncu_tables(path)[0])


def _summary(path, values: dict) -> dict:
    def num(name: str) -> float:
        v = values.get(name)
        if v is None:
            raise SimtcError(f"{path}: no metric {name}", rule="the profile holds the sections simtc asks for")
        return float(v.replace(",", ""))

    prefix, suffix = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
    stalls = {k[len(prefix):-len(suffix)]: float(v.replace(",", "")) for k, v in values.items()
              if k.startswith(prefix) and k.endswith(suffix)}
    return {"kernel": values.get("Kernel Name", "").split("<")[0].replace("void ", ""),
            "grid": values.get("Grid Size"), "block": values.get("Block Size"),
            "duration_ns": num("gpu__time_duration.sum"), "sm_clock_hz": num("gpc__cycles_elapsed.avg.per_second"),
            "utilization": {k: num(m) / 100 for k, m in NCU_METRICS.items()},
            "stalls": dict(sorted(stalls.items(), key=lambda kv: -kv[1])),
            "counters": {k: float(values[k].replace(",", "")) for k in NCU_L1_METRICS
                         if values.get(k, "").replace(",", "").replace(".", "", 1).isdigit()}}


def main(argv=None) -> int:
    """``python -m simtc.hw.flashmla_timing time --build DIR --set held-out --out FILE.json`` (whole calls, as
    ``simtc crosscheck --timing`` times them) or ``... profile --build DIR [--shapes A,B]`` (the calls Nsight Compute
    profiles: :func:`profile_calls`)."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m simtc.hw.flashmla_timing", description=main.__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("time", help="time whole calls of a timing set")
    t.add_argument("--build", required=True)
    t.add_argument("--set", choices=sorted(TIMING_SETS), default="held-out")
    t.add_argument("--out", required=True)
    t.add_argument("--repeats", type=int, default=30)
    pr = sub.add_parser("profile", help="one untimed and one timed call per shape (for Nsight Compute)")
    pr.add_argument("--build", required=True)
    pr.add_argument("--shapes", default=",".join(PROFILE_SHAPES))
    a = ap.parse_args(argv)
    try:
        if a.cmd == "profile":
            profile_calls(a.build, [n for n in a.shapes.split(",") if n], progress=lambda s: print(s, flush=True))
            return 0
        from simtc.hw.device import describe
        from simtc.hw.flashmla import load_build

        b = load_build(a.build)
        meta = {"flashmla_commit": b.commit, "cutlass_commit": b.manifest.get("cutlass_commit"),
                "nvcc": b.manifest.get("nvcc"), "device": describe(), "set": a.set,
                "command": f"python -m simtc.hw.flashmla_timing time --build {a.build} --set {a.set} "
                           f"--out {Path(a.out).name}"}
        rows, failed = [], []
        for shape in TIMING_SETS[a.set]:  # one shape at a time, saved after each: a failure keeps the others
            print(f"{datetime.datetime.now(datetime.timezone.utc).strftime('%H:%M:%S.%f')[:-3]} start {shape.name}",
                  flush=True)
            try:
                r = time_shape(b, shape, repeats=a.repeats)
            except SimtcError as e:
                failed.append(f"{shape.name}: {e}")
                print(f"{shape.name}: error: {e}", flush=True)
                continue
            rows.append(r)
            now = datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M:%S.%f")[:-3]
            print(f"{now} {r.shape.name:28s} call {r.call_ms * 1e3:9.1f} us  split-KV {r.splitkv_ms * 1e3:9.1f} us",
                  flush=True)
            save_timing(a.out, rows, meta={**meta, **({"failed": failed} if failed else {})})
        if failed:
            return 1
    except SimtcError as e:
        print(f"python -m simtc.hw.flashmla_timing: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
