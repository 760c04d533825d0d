"""Whole-call predictions: how long FlashMLA's sparse decode takes for a batch, on an H200 (SM90 kernel) or a B200
(SM100 head64 kernel), built from the cycle-level engine and FlashMLA's own scheduler.

A call is three kernels (:mod:`simtc.kernels.flashmla.schedule`): the scheduler metadata kernel, the split-KV
kernel, the combine kernel. The prediction composes mechanisms:

* **the split-KV kernel** -- :func:`~simtc.kernels.flashmla.schedule.sched_meta` gives each of the
  ``num_sm_parts`` persistent CTAs (per query position) its segments of blocks; a CTA whose part is empty returns
  at once, so only the :func:`busy_parts` x ``s_q`` CTAs that have work share the chip's HBM bandwidth
  (``active_sms``, at most one CTA per SM). The engine runs the kernel's Program for one CTA at two block counts
  and fits ``cycles(n) = ramp + n x cycles_per_block`` (the ramp: the Q load, the pipeline's fill and the split
  epilogue, whose fp32 partial O the Program writes); a CTA's time is the sum over its segments, a no-split
  segment :data:`NOSPLIT_SAVING_BYTES` less (its O leaves as bf16). The kernel takes as long as its slowest CTA.
  Cycles become seconds at the GPU's SM clock under this load.
* **the fixed costs of a call** (the scheduler kernel, the launches and host work between the events that time
  a call, the combine kernel) are fitted by least squares on FlashMLA's own small calls recorded on the H200
  (``tests/data/flashmla_h200_sm90_fixed.json``: one block per request, and a few split requests) -- never on
  the calls predictions are held against (``tests/data/flashmla_h200_sm90_timing.json``,
  ``flashmla_h200_sm90_timing_held_out.json``). On a B200 the same fixed costs are assumed.
* **the band** -- :data:`BAND_PROCEDURE`: the model's own error, measured on the held-out H200 calls
  (:data:`MODEL_ERRORS`, log(predicted / measured) per call and the kernel's share of it), as a prediction interval
  at the stated coverage (90%; the call itself left out when it is one of them), widened root-sum-square by the
  unmeasured parameters (assumed x/÷ 1.25, derived x/÷ 1.1, one at a time, on the split-KV kernel) and the clock.
  The model is biased fast (the split-KV kernel by about 10%: mean log error -0.110 per unit of kernel share over
  26 calls), so the band lies above the prediction: the prediction itself is the mechanisms' answer, never
  corrected by the table. On the B200 no call is measured: the band there is the parameters' and the clock's only,
  and says so.
* **utilizations** (:func:`kernel_profile`) -- over the predicted split-KV kernel at this shape, as Nsight
  Compute reports them: every CTA's busy cycles (issue slots, the tensor pipe's datapath cycles, L1/TEX's data
  pipe) over the CTAs' active cycles, DRAM bytes over the kernel's elapsed time; with the share of the chip's
  SM-time idle, in ramps and in blocks, and each role's waiting share (the stall picture).

FLOPs as FlashMLA counts them: 2 x 64 x b x s_q x topk x (d_qk + d_v) (``tests/lib.py`` at ``9241ae3``).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from attrs import frozen

from simtc.errors import SimtcError
from simtc.kernels.flashmla.models import model
from simtc.kernels.flashmla.replay import call_flops
from simtc.kernels.flashmla.schedule import num_sm_parts, sched_meta

__all__ = ["BAND_PROCEDURE", "FIXED_H200", "GPUS", "KERNELS", "MODEL_ERRORS", "NOSPLIT_SAVING_BYTES", "CtaLine",
           "ErrorBand", "FixedCosts", "GpuSpec", "ModelErrors", "busy_parts", "copy_port_bytes", "cta_line",
           "dram_fraction", "fit_fixed_costs", "kernel_profile", "model_errors", "predict", "t_quantile"]

_RULE = "simtc predict: flashmla-sm90 (H200) or flashmla-head64 (B200), b >= 1, s_q >= 1, topk a multiple of 64"


@frozen
class GpuSpec:
    """A GPU a call is predicted on, each figure with its label and source."""

    name: str
    arch: str
    sms: int
    clock_ghz: float
    clock_label: str
    clock_source: str
    clock_uncertainty: float
    """Relative uncertainty of the clock (the band moves it by this much)."""
    dram_peak_bytes_per_s: float
    dram_source: str


GPUS = {
    "h200": GpuSpec("NVIDIA H200", "sm90", 132, 1.98, "measured",
                    "the SM clock nvidia-smi read every 20 ms while FlashMLA's calls were timed "
                    "(tests/data/h200_clocks_timing.csv: 1,980 MHz in 813 of the 833 samples of the timed spans, "
                    "1,935-1,965 MHz in the rest, 200-400 W of 700), the clock the engine's memory parameters were "
                    "measured at (1,980 MHz, tests/data/h200_calibration.json); under Nsight Compute's replays the SM "
                    "clock reads 1.73-1.90 GHz (tests/data/ncu), yet the split-KV launches last as long there as in "
                    "the timed calls: their time is set by the memory system, not by the SM clock", 0.02,
                    4.8e12, "NVIDIA H200 datasheet: 4.8 TB/s HBM3e"),
    "b200": GpuSpec("NVIDIA B200", "sm100", 148, 1.965, "assumed",
                    "the clock SemiAnalysisAI/microbench-blackwell converts its B200 cycle counts with; the clock "
                    "under this load is not measured (the H200 held its 1,980 MHz boost clock)", 0.10,
                    8.0e12, "NVIDIA B200 datasheet: 8 TB/s HBM3e"),
}


@frozen
class KernelSpec:
    name: str
    sched: str
    """``get_meta`` flavour (:func:`~simtc.kernels.flashmla.schedule.num_sm_parts`)."""
    gpu: str


KERNELS = {"flashmla-sm90": KernelSpec("flashmla-sm90", "sm90", "h200"),
           "flashmla-head64": KernelSpec("flashmla-head64", "head64", "b200")}


def _program(kernel: str, m, blocks: int):
    if kernel == "flashmla-head64":
        from simtc.kernels.flashmla.head64 import head64_program

        return head64_program(m, blocks)
    try:
        from simtc.kernels.flashmla.sm90 import sm90_program
    except ImportError:  # pragma: no cover - the module ships with the package
        raise SimtcError("the SM90 kernel's Program is not available", rule=_RULE) from None
    return sm90_program(m.name, blocks)


_N1, _N2 = 3, 9


@functools.lru_cache(maxsize=512)
def _engine(kernel: str, model_name: str, blocks: int, timing, active_sms: int) -> dict:
    if kernel == "flashmla-sm90":
        from simtc.kernels.flashmla.sm90 import sm90_engine

        eng = sm90_engine(model_name, blocks, timing, check=False, active_sms=active_sms).run()
    else:
        from simtc.engine import Engine
        from simtc.engine.l1 import l1_capacity

        m = model(model_name)
        eng = Engine(_program(kernel, m, blocks), mode="timing", check=False, timing=timing, active_sms=active_sms)
        eng.memory.use_l1(l1_capacity(timing.arch, m.smem.total, timing))
        eng.run()
    return {"cycles": eng.cycles, "units": dict(eng.unit_busy), "hbm_bytes": eng.memory.hbm_bytes,
            "waiting": {r: v["waiting_cycles"] for r, v in eng.per_role().items()}}


@functools.lru_cache(maxsize=64)
def _mma_compute(kernel: str, model_name: str, blocks: int, timing) -> int:
    """The tensor pipe's datapath cycles of the Program's MMAs, one CTA: each ``wgmma.mma_async`` /
    ``tcgen05.mma`` record's :func:`~simtc.engine.timing.compute_cycles` (2 rows N K / peak), without the time an
    MMA waits for its operands at the shared-memory port -- the cycles Nsight Compute counts as the pipe's active
    ones (``sm__pipe_tensor_cycles_active``: 37.3% of 5,834 active cycles a block at ``v32-b148-sq2-topk16384`` is
    2,176, what 36 m64n64k16 at 32 and 8 m64n256k16 at 128 cycles add up to; tests/data/ncu, README_h200.md)."""
    from simtc.engine.tensor_pipe import mma_spec_of
    from simtc.engine.timing import compute_cycles

    total = 0
    for role in _program(kernel, model(model_name), blocks).roles:
        prev = None
        for rec in role.records:
            if type(rec).__name__ == "WgmmaMmaAsync" or (hasattr(rec, "idesc") and hasattr(rec, "form")):
                total += compute_cycles(mma_spec_of(rec, prev), None, timing)
                prev = rec
    return total


@frozen
class CtaLine:
    """One CTA's cost of a segment of ``n`` blocks as lines ``a + n b`` through the engine's runs at :data:`_N1` and
    :data:`_N2` blocks: cycles, each unit's busy cycles, HBM bytes, each role's waiting cycles (``(a, b)`` pairs)."""

    cycles: tuple[float, float]
    units: dict
    hbm_bytes: tuple[float, float]
    waiting: dict

    @property
    def ramp(self) -> float:
        return self.cycles[0]

    @property
    def per_block(self) -> float:
        return self.cycles[1]


def _fit(a: float, b: float) -> tuple[float, float]:
    slope = (b - a) / (_N2 - _N1)
    return a - _N1 * slope, slope


def cta_line(kernel: str, model_name: str, timing, active_sms: int) -> CtaLine:
    """:class:`CtaLine` of ``kernel`` with ``active_sms`` SMs sharing HBM (the engine's runs are cached)."""
    a = _engine(kernel, model_name, _N1, timing, active_sms)
    b = _engine(kernel, model_name, _N2, timing, active_sms)
    units = {u: _fit(a["units"].get(u, 0), v) for u, v in b["units"].items()}
    units["tensor_compute"] = _fit(_mma_compute(kernel, model_name, _N1, timing),
                                   _mma_compute(kernel, model_name, _N2, timing))
    return CtaLine(_fit(a["cycles"], b["cycles"]), units, _fit(a["hbm_bytes"], b["hbm_bytes"]),
                   {r: _fit(a["waiting"].get(r, 0), v) for r, v in b["waiting"].items()})


def _cta_costs(kernel: str, model_name: str, timing, active_sms: int) -> tuple[float, float, dict]:
    """``(ramp, cycles_per_block, run)``: the line through the engine's whole-run cycles at two block counts."""
    line = cta_line(kernel, model_name, timing, active_sms)
    return line.ramp, line.per_block, _engine(kernel, model_name, _N2, timing, active_sms)


@frozen
class FixedCosts:
    """Microseconds a call costs besides its blocks (least squares on the fixed-cost recordings)."""

    sched_us: float
    sched_per_part_us: float
    sched_per_request_us: float
    splitkv_us: float
    """The split-KV span minus the engine's one-CTA time: launch and host work between the events."""
    combine_us: float
    combine_per_split_us: float
    """Per split partial of the most-split request (its combine CTA merges them in turn)."""
    source: str
    combine_per_row_us: float = 0.0
    """Per split (request, query) row: the combine kernel's CTAs that merge partials (``combine.cu`` L36-161 at
    ``9241ae3``: one per row and head block; the rows of a no-split request return at once)."""

    def sched(self, parts: int, b: int) -> float:
        return self.sched_us + self.sched_per_part_us * parts + self.sched_per_request_us * b

    def combine(self, max_splits: int, split_rows: int = 0) -> float:
        return (self.combine_us + self.combine_per_split_us * (max_splits if max_splits > 1 else 0)
                + self.combine_per_row_us * split_rows)


FIXED_H200 = FixedCosts(3.967, 0.188, 0.06, 4.018, 4.876, 0.221,
                        source="tests/data/flashmla_h200_sm90_fixed.json (14 small calls on an H200, 2026-12-01) and, "
                               "for the scheduler and the combine, flashmla_h200_sm90_timing_costs.json (12 calls, "
                               "2026-12-03), fitted by fit_fixed_costs; tests/kernels/test_predict_h200.py refits it",
                        combine_per_row_us=0.06)
"""The fixed costs of a call on the H200 (also assumed for the B200)."""


def _max_splits(parts_meta, blocks: int) -> int:
    per_req: dict[int, int] = {}
    for p in parts_meta:
        for s in p.segments(blocks):
            if s.split:
                per_req[s.req] = per_req.get(s.req, 0) + 1
    return max(per_req.values(), default=1)


def split_requests(parts_meta, blocks: int) -> int:
    """Requests the scheduler splits over several parts (the rows the combine kernel merges, per query position)."""
    return len({s.req for p in parts_meta for s in p.segments(blocks) if s.split})


def fit_fixed_costs(rows: list[dict], source: str = "", costs: list[dict] = ()) -> FixedCosts:
    """Fit :class:`FixedCosts` on the rows of the fixed-cost recording (``simtc crosscheck --flashmla --timing
    --timing-set fixed``; each row a dict with ``model, b, s_q, topk, num_sm_parts, sched_ms, splitkv_ms,
    combine_ms``) and, for the scheduler and the combine kernel only, the rows of the cost recording (``costs``:
    :data:`simtc.hw.flashmla_timing.COST_SHAPES`, many requests and split rows): the scheduler span against (1,
    parts, b); the split-KV span of the one-block calls minus the engine's prediction of the slowest CTA at the
    H200's clock (median); the combine span against (1, most splits of a request, split rows) -- the last term only
    when ``costs`` are given (the small calls have at most 8 split rows)."""
    from simtc.engine.parameters import Timing

    gpu = GPUS["h200"]
    both = [*rows, *costs]
    a = np.array([[1, r["num_sm_parts"], r["b"]] for r in both], float)
    sched = np.linalg.lstsq(a, [r["sched_ms"] * 1e3 for r in both], rcond=None)[0]
    rest, comb_x, comb_y = [], [], []
    for r in both:
        blocks = r["topk"] // 64
        pm = sched_meta(r["b"], r["topk"], r["num_sm_parts"])
        if r in rows:
            cycles = _kernel_cycles("flashmla-sm90", r["model"], pm, blocks, Timing("sm90"),
                                    busy_parts(pm, blocks) * r["s_q"])[0]
            rest.append(r["splitkv_ms"] * 1e3 - cycles / (gpu.clock_ghz * 1e3))
        ms = _max_splits(pm, blocks)
        comb_x.append([1, ms if ms > 1 else 0, *((split_requests(pm, blocks) * r["s_q"],) if costs else ())])
        comb_y.append(r["combine_ms"] * 1e3)
    comb = [round(float(v), 3) for v in np.linalg.lstsq(np.array(comb_x, float), comb_y, rcond=None)[0]]
    return FixedCosts(*(round(float(v), 3) for v in sched), round(float(np.median(rest)), 3), comb[0], comb[1],
                      source=source, combine_per_row_us=comb[2] if costs else 0.0)


NOSPLIT_SAVING_BYTES = 64 * 512 * 4 - 64 * 512 * 2
"""Bytes a no-split segment writes less than the Program's split epilogue: its O goes out as bf16 (64 x 512 x 2 B,
``store_o`` through ``o_buf``, config.h L204-238 at ``9241ae3``) where a split's goes out as fp32 partials (64 x
512 x 4 B to ``o_accum``, L242-267); the engine runs the split epilogue for every segment."""


def busy_parts(parts_meta, blocks: int) -> int:
    """Parts that have any block to walk: FlashMLA launches ``num_sm_parts`` CTAs per query position, and a CTA
    whose part is empty returns at once (``splitkv_mla.cuh`` L176-181: its loop over requests is empty), so only
    these share the chip's HBM bandwidth.

    >>> busy_parts(sched_meta(1, 2048, 132), 32), busy_parts(sched_meta(64, 2048, 66), 32)  # payload 41: one each
    (32, 64)
    """
    return sum(1 for p in parts_meta if p.segments(blocks))


def _segment_cost(line: CtaLine, seg, share: float) -> float:
    t = line.ramp + seg.blocks * line.per_block
    return t if seg.split else t - NOSPLIT_SAVING_BYTES / share


def _kernel_cycles(kernel: str, model_name: str, parts_meta, blocks: int, timing, active: int):
    """Cycles of the split-KV kernel (its slowest CTA), cycles per block, the n-block engine run. ``active``: the
    CTAs that run (:func:`busy_parts` x s_q), each on an SM of its own, sharing HBM. A CTA walks its part's segments
    in turn; each segment costs the engine's one-CTA line ``ramp + n x per_block`` (its prologue: the Q load, the
    pipeline's fill; its blocks; the split epilogue with the fp32 partial O, which the engine's Program writes), a
    no-split segment :data:`NOSPLIT_SAVING_BYTES` less at the SM's share of HBM."""
    line = cta_line(kernel, model_name, timing, active)
    share = min(timing["hbm_bytes_per_cycle"] / active, timing["sm_bytes_per_cycle"])
    worst = 0.0
    for p in parts_meta:
        worst = max(worst, sum(_segment_cost(line, s, share) for s in p.segments(blocks)))
    return worst, line.per_block, _engine(kernel, model_name, _N2, timing, active)


def copy_port_bytes(model_name: str, split: bool) -> int:
    """Shared-memory bytes a segment's copy-engine traffic moves (the Q load written in, the epilogue's O read out:
    a split's fp32 partial O, 64 x 512 x 4 B, a no-split's bf16 O, 64 x 512 x 2 B): the asynchronous proxy's writes
    and reads, which the engine books on the SM's one shared-memory port but Nsight Compute's L1/TEX throughput
    (the LSU data pipe's wavefronts, ``l1tex__data_pipe_lsu_wavefronts``) does not count [inferred: checked against
    the profiles of tests/data/ncu at 13 shapes, tests/kernels/test_prediction_bands.py]."""
    return 64 * model(model_name).d_q * 2 + 64 * 512 * (4 if split else 2)


def kernel_profile(kernel: str, model_name: str, parts_meta, blocks: int, s_q: int, timing, sms: int,
                   clock_hz: float, kernel_s: float, dram_peak: float, dram_frac: float = 1.0,
                   requests: int | None = None) -> dict:
    """The split-KV kernel's utilizations and stall picture at one shape, over its predicted duration.

    Each CTA with work is a sum of segments, each of them the engine's line in its block count for every unit's
    busy cycles, the HBM bytes and each role's waiting cycles, as for the cycles (:class:`CtaLine`). Nsight
    Compute's ``*.pct_of_peak_sustained_active`` figures are busy cycles over the *active* cycles of the units that
    ran (an SM is active while a CTA is resident): the CTAs' busy cycles summed, over their durations summed -- a
    short split weighs its prologue and epilogue, which keep the pipes idle, and SMs without work do not count.
    L1/TEX leaves out the copy engine's shared-memory traffic (:func:`copy_port_bytes`). DRAM
    (``gpu__dram_throughput...pct_of_peak_sustained_elapsed``) is over the kernel's elapsed time ``kernel_s`` at
    the peak, so idle SMs and the tail of the slowest CTA lower it; the bytes are the blocks' KV rows (the engine's
    per-block HBM bytes; each batch's repeated rows once, ``dram_frac``) and each of the ``requests`` (batch, query)
    Q tiles once: the other CTAs of a request find its Q in L2, and the partial O written to ``o_accum`` (at most
    132 x 128 KiB, well within the 50 MiB L2) waits there for the combine kernel rather than going to DRAM during
    the kernel [inferred: the L2 hit rates of the profiles, 38-78%, and their DRAM figures]. ``time``: of the
    SM-time the kernel holds (``sms`` x its cycles), the share idle (no CTA, or finished early), in segment ramps
    (prologue, pipeline fill, epilogue) and in steady blocks; ``waiting``: each role's waiting cycles over the
    CTAs' time (the engine's per-role waits)."""
    active = busy_parts(parts_meta, blocks) * s_q
    line = cta_line(kernel, model_name, timing, active)
    share = min(timing["hbm_bytes_per_cycle"] / active, timing["sm_bytes_per_cycle"])
    dur, ramp_t, block_t, hbm, worst, copy_port = 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    busy = {u: 0.0 for u in line.units}
    wait = {r: 0.0 for r in line.waiting}
    for p in parts_meta:
        segs = p.segments(blocks)
        t = sum(_segment_cost(line, sg, share) for sg in segs)
        worst = max(worst, t)
        dur += t
        for sg in segs:
            ramp_t += _segment_cost(line, sg, share) - sg.blocks * line.per_block
            block_t += sg.blocks * line.per_block
            hbm += sg.blocks * line.hbm_bytes[1]
            for u, (a, b) in line.units.items():
                busy[u] += a + sg.blocks * b
            copy_port += copy_port_bytes(model_name, sg.split) / timing["smem_port_bytes_per_cycle"]
            for r, (a, b) in line.waiting.items():
                wait[r] += a + sg.blocks * b
    dur = max(dur, 1.0)
    q_reads = requests if requests is not None else busy_parts(parts_meta, blocks)
    dram_bytes = dram_frac * hbm * s_q + q_reads * s_q * 64 * model(model_name).d_q * 2
    held = max(worst, 1.0) * sms / s_q  # the SM-time of one query position's share of the chip
    util = {"issue": busy.get("issue", 0.0) / (timing["sub_partitions"] * dur),
            "tensor_pipe": busy.get("tensor_compute", 0.0) / dur,
            "l1tex": max(0.0, busy.get("smem_port", 0.0) - copy_port) / dur,
            "dram": dram_bytes / (kernel_s * dram_peak) if kernel_s > 0 else 0.0}
    return {"utilization": {k: round(min(v, 1.0), 4) for k, v in util.items()},
            "active_ctas": active, "cta_cycles_max": worst,
            "cta_cycles_mean": dur / max(1, busy_parts(parts_meta, blocks)),
            "time": {"sm_idle": round(max(0.0, 1 - dur / held), 4), "ramps": round(ramp_t / held, 4),
                     "blocks": round(block_t / held, 4)},
            "waiting": {r: round(min(1.0, w / dur), 4) for r, w in wait.items()},
            "dram_bytes": dram_bytes, "clock_hz": clock_hz}


def dram_fraction(s_q: int, topk: int, s_k: int | None) -> float:
    """Of the KV rows one batch's ``s_q`` queries gather (``topk`` each, drawn at random from its ``s_k`` tokens, as
    FlashMLA's benchmark and :mod:`simtc.hw.flashmla_timing` draw them), the fraction that are distinct -- the ones
    HBM must send when L2 serves the repeats (the queries' CTAs of one batch run at the same time). ``s_k`` None:
    no repeat assumed (1.0).

    >>> round(dram_fraction(2, 16384, 32768), 3), round(dram_fraction(4, 8192, 32768), 3), dram_fraction(1, 64, None)
    (0.75, 0.684, 1.0)
    """
    if s_k is None or s_q == 1:
        return 1.0
    p = min(1.0, topk / s_k)
    return s_k * (1 - (1 - p) ** s_q) / (s_q * topk)


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile (Cornish-Fisher expansion about the normal quantile, within 0.3% of the exact value for
    ``df`` >= 5 and ``p`` <= 0.975).

    >>> round(t_quantile(0.95, 13), 3), round(t_quantile(0.9, 25), 3)   # exact: 1.771, 1.316
    (1.771, 1.316)
    """
    from statistics import NormalDist

    z = NormalDist().inv_cdf(p)
    return (z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * df ** 3))


BAND_PROCEDURE = ("a prediction interval for log(measured / predicted): the model's own error on the calls measured "
                  "on the H200 (the held-out tables, never fitted on), per unit of the split-KV kernel's share k of "
                  "the predicted call (the fixed costs are fitted on small calls of their own, so the error is the "
                  "kernel's: r = log(predicted / measured) / k), taken as normal -- its mean m and standard deviation "
                  "s over the n calls (the call itself left out when it is one of them), the interval k (-m +- "
                  "t(n - 1) s sqrt(1 + 1/n)) at the stated coverage -- widened on each side, root-sum-square, by the "
                  "unmeasured parameters (assumed x/÷ 1.25, derived x/÷ 1.1, one at a time) and the clock's "
                  "uncertainty on the kernel's share of the call")


@frozen
class ErrorBand:
    """The model-error part of a band, in log(measured / predicted): ``center`` +- ``half_width``; ``mean`` and
    ``sd`` of the calls' log(predicted / measured) per unit of kernel share."""

    center: float
    half_width: float
    n: int
    mean: float
    sd: float

    def as_dict(self) -> dict:
        return {"n": self.n, "mean_per_share": round(self.mean, 5), "sd_per_share": round(self.sd, 5),
                "center": round(self.center, 5), "half_width": round(self.half_width, 5)}


@frozen
class ModelErrors:
    """Per call of a kernel measured on its GPU: ``(name, log(predicted / measured), k)`` with ``k`` the split-KV
    kernel's share of the predicted call; and the coverage its bands state."""

    rows: tuple[tuple[str, float, float], ...]
    source: str
    coverage: float = 0.9

    def band(self, exclude: str | None = None, share: float = 1.0) -> ErrorBand:
        """The prediction interval for a call whose kernel is ``share`` of it, from every call but ``exclude``
        (see :data:`BAND_PROCEDURE`)."""
        r = [e / k for n, e, k in self.rows if n != exclude]
        n = len(r)
        mean = sum(r) / n
        sd = math.sqrt(sum((x - mean) ** 2 for x in r) / (n - 1))
        half = t_quantile((1 + self.coverage) / 2, n - 1) * sd * math.sqrt(1 + 1 / n)
        return ErrorBand(-share * mean, share * half, n, mean, sd)

    def leave_one_out(self) -> float:
        """The share of the calls whose measurement falls inside the model-error interval made without them (the
        parameters' widening left out: a lower bound of the band's held-out coverage)."""
        inside = 0
        for name, v, k in self.rows:
            b = self.band(exclude=name, share=k)
            inside += abs(-v - b.center) <= b.half_width
        return inside / len(self.rows)


MODEL_ERRORS: dict[str, ModelErrors] = {
    "flashmla-sm90": ModelErrors((
        ('v32-b1-sq1-topk2048', -0.00076, 0.2334),
        ('v32-b1-sq4-topk16384', -0.03128, 0.6241),
        ('v32-b8-sq2-topk4096', -0.11009, 0.6176),
        ('v32-b32-sq1-topk16384', -0.11082, 0.8392),
        ('v32-b64-sq4-topk512', -0.12708, 0.7776),
        ('v32-b64-sq2-topk2048', -0.14532, 0.807),
        ('v32-b132-sq1-topk8192', -0.12691, 0.902),
        ('v32-b148-sq2-topk16384', -0.10886, 0.979),
        ('v32-b264-sq2-topk4096', -0.11189, 0.9544),
        ('model1-b1-sq2-topk512', 0.01964, 0.3778),
        ('model1-b16-sq4-topk8192', -0.07766, 0.9135),
        ('model1-b74-sq2-topk16384', -0.09861, 0.965),
        ('model1-b128-sq1-topk1024', -0.13027, 0.599),
        ('model1-b264-sq1-topk8192', -0.10217, 0.9422),
        ('v32-b2-sq1-topk4096', -0.01745, 0.2766),
        ('v32-b8-sq1-topk2048', -0.03558, 0.3501),
        ('v32-b4-sq3-topk8192', -0.10249, 0.7158),
        ('v32-b16-sq2-topk32768', -0.12422, 0.9376),
        ('v32-b96-sq3-topk1024', -0.0932, 0.8244),
        ('v32-b200-sq1-topk4096', -0.11908, 0.8542),
        ('model1-b4-sq1-topk16384', -0.05641, 0.4887),
        ('model1-b8-sq3-topk2048', -0.06295, 0.6403),
        ('model1-b6-sq4-topk4096', -0.08361, 0.7519),
        ('model1-b32-sq2-topk4096', -0.09563, 0.8128),
        ('model1-b100-sq4-topk1024', -0.07191, 0.8714),
        ('model1-b48-sq1-topk32768', -0.10816, 0.9362),
    ), "tests/data/flashmla_h200_sm90_timing.json and "
                                     "flashmla_h200_sm90_timing_held_out.json (H200), recomputed by "
                                     "tests/kernels/test_prediction_bands.py"),
}
"""The model's error per kernel (:func:`model_errors` on the recordings; the tests recompute it)."""


def predict(kernel: str = "flashmla-head64", model_name: str = "v32", b: int = 148, s_q: int = 2,
            topk: int = 16384, *, h_q: int = 64, s_k: int | None = None, band: bool = True, timing=None,
            progress=None) -> dict:
    """The prediction of one call (see the module text): a JSON-ready dict.

    ``h_q`` = 128 on flashmla-head64 is FlashMLA's ``Decode_Sm100_Head64x2_Impl`` (``csrc/api/sparse_decode.h``
    lines 108-139): the head64 split-KV kernel launched twice, once per 64 heads, with one scheduler and one
    combine; the SM90 kernel for 128 heads (its cluster "crossover") is not modelled. ``s_k`` (the requests' KV
    length) lets the DRAM utilization count each batch's repeated rows once (:func:`dram_fraction`); the timing does
    not use it: the engine charges every gathered row to the SM's share of HBM, so where a batch's queries repeat
    rows the memory side of the timing is pessimistic. ``progress(phase, done, total)`` is told of the band's
    engine runs (:func:`simtc.engine.sensitivity.band`)."""
    from simtc.engine.parameters import Timing

    spec = KERNELS.get(kernel)
    if spec is None:
        raise SimtcError(f"unknown kernel {kernel!r}; predicted: {', '.join(KERNELS)}", rule=_RULE)
    for nm, v in (("b", b), ("s_q", s_q), ("topk", topk), *((("s_k", s_k),) if s_k is not None else ())):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise SimtcError(f"{nm} = {v!r}: a positive integer", rule=_RULE)
    if topk % 64:
        raise SimtcError(f"topk = {topk}: a multiple of 64 (FlashMLA's block of tokens)", rule=_RULE)
    if h_q not in (64, 128) or (h_q == 128 and kernel != "flashmla-head64"):
        raise SimtcError(f"h_q = {h_q} on {kernel}: 64, or 128 on flashmla-head64 (two head64 launches)",
                         rule="the modelled kernels run 64 heads per launch")
    launches = h_q // 64
    m = model(model_name)
    gpu = GPUS[spec.gpu]
    timing = timing or Timing(gpu.arch)
    parts = num_sm_parts(spec.sched, gpu.sms, s_q)
    ctas = parts * s_q
    waves = math.ceil(ctas / gpu.sms)
    blocks = topk // 64
    pm = sched_meta(b, topk, parts)
    active = min(busy_parts(pm, blocks) * s_q, gpu.sms)
    cycles, per_block, _ = _kernel_cycles(kernel, m.name, pm, blocks, timing, active)
    cycles *= waves
    fixed = FIXED_H200
    sched_s = fixed.sched(parts, b) * 1e-6
    kernel_s = cycles / (gpu.clock_ghz * 1e9)
    splitkv_s = launches * (kernel_s + fixed.splitkv_us * 1e-6)
    combine_s = fixed.combine(_max_splits(pm, blocks), split_requests(pm, blocks) * s_q) * 1e-6
    seconds = sched_s + splitkv_s + combine_s
    flops = call_flops(m, b, s_q, topk, h_q)
    frac = dram_fraction(s_q, topk, s_k)
    prof = kernel_profile(kernel, m.name, pm, blocks, s_q, timing, gpu.sms, gpu.clock_ghz * 1e9,
                          max(kernel_s, splitkv_s / launches), gpu.dram_peak_bytes_per_s, frac, requests=b)
    name = f"{m.name}-b{b}-sq{s_q}-topk{topk}"
    out = {"kernel": kernel, "model": m.name, "b": b, "s_q": s_q, "topk": topk, "h_q": h_q, "s_k": s_k,
           "gpu": gpu.name, "name": name,
           "seconds": seconds, "tflops": flops / seconds / 1e12, "cycles_per_block": per_block,
           "sm_parts": parts, "active_ctas": active, "waves": waves, "sm_clock_ghz": gpu.clock_ghz,
           "utilization": prof["utilization"], "time": prof["time"], "waiting": prof["waiting"],
           "flops": flops, "dram_fraction": frac,
           "parts": {"sched_s": sched_s, "splitkv_s": splitkv_s, "combine_s": combine_s},
           "clock": {"label": gpu.clock_label, "source": gpu.clock_source}, "fixed_costs": fixed.source}
    if band:
        from simtc.engine.sensitivity import band as param_band

        pb = param_band(lambda t: _kernel_cycles(kernel, m.name, pm, blocks, t, active)[0] * waves, timing,
                        base=cycles, progress=progress)
        k = splitkv_s / seconds  # the parameters and the clock move the kernel's share of the call
        par_lo = k * math.sqrt(gpu.clock_uncertainty ** 2 + (1 - pb["low"] / cycles) ** 2)
        par_hi = k * math.sqrt(gpu.clock_uncertainty ** 2 + (pb["high"] / cycles - 1) ** 2)
        errors = MODEL_ERRORS.get(kernel)
        if errors is not None:
            eb = errors.band(exclude=name, share=k)
            lo = eb.center - math.sqrt(eb.half_width ** 2 + par_lo ** 2)
            hi = eb.center + math.sqrt(eb.half_width ** 2 + par_hi ** 2)
            out["band"] = {"coverage": errors.coverage, "procedure": BAND_PROCEDURE, "model_error": eb.as_dict(),
                           "parameters": {"low": -par_lo, "high": par_hi}, "source": errors.source}
        else:  # no call of this kernel measured: the parameters and the clock only
            lo, hi = -par_lo, par_hi
            out["band"] = {"coverage": None, "procedure": "the unmeasured parameters and the clock only: no call of "
                           "this kernel has been measured, so the model's own error is not in the band",
                           "parameters": {"low": -par_lo, "high": par_hi}}
        out["seconds_low"] = seconds * math.exp(lo)
        out["seconds_high"] = seconds * math.exp(hi)
        out["tflops_low"] = flops / out["seconds_high"] / 1e12
        out["tflops_high"] = flops / out["seconds_low"] / 1e12
        out["band_rests_on"] = pb["rests_on"]
    return out


def model_errors(rows, *, s_k: bool = True) -> list[tuple[str, float, float]]:
    """``(name, log(predicted / measured), kernel share)`` of FlashMLA's SM90 calls in a timing recording's rows
    (dicts with ``name, model, b, s_q, topk, s_k, call_ms``): what :data:`MODEL_ERRORS` holds, recomputed by the
    tests."""
    out = []
    for r in rows:
        p = predict("flashmla-sm90", r["model"], r["b"], r["s_q"], r["topk"], s_k=r["s_k"] if s_k else None,
                    band=False)
        out.append((r["name"], round(math.log(p["seconds"] / (r["call_ms"] * 1e-3)), 5),
                    round(p["parts"]["splitkv_s"] / p["seconds"], 4)))
    return out
