"""Whole-call predictions: how long FlashMLA's sparse decode takes for a batch, on an H200 (SM90 kernel) or a B200
(SM100 head64 kernel), built from the cycle-level engine and FlashMLA's own scheduler.

A call is three kernels (:mod:`simtc.kernels.flashmla.schedule`): the scheduler metadata kernel, the split-KV
kernel, the combine kernel. The prediction composes mechanisms:

* **the split-KV kernel** -- :func:`~simtc.kernels.flashmla.schedule.sched_meta` gives each of the
  ``num_sm_parts`` persistent CTAs (per query position) its segments of blocks. The engine runs the kernel's
  Program for one CTA at two block counts with the HBM share of the SMs that run (``active_sms`` = CTAs in
  the grid, at most one per SM) and fits ``cycles(n) = ramp + n x cycles_per_block``; a CTA's time is the sum
  over its segments, and a split segment also writes its fp32 partial O (128 KiB) through the SM's HBM share.
  The kernel takes as long as its slowest CTA. Cycles become seconds at the GPU's SM clock under this load.
* **the fixed costs of a call** (the scheduler kernel, the launches and host work between the events that time
  a call, the combine kernel) are fitted by least squares on FlashMLA's own small calls recorded on the H200
  (``tests/data/flashmla_h200_sm90_fixed.json``: one block per request, and a few split requests) -- never on
  the calls predictions are held against (``tests/data/flashmla_h200_sm90_timing.json``). On a B200 the same
  fixed costs are assumed.
* **the band** -- every timing parameter that is not measured is moved by its uncertainty (assumed x/÷ 1.25,
  derived x/÷ 1.1, one at a time, on the cycles per block) and the GPU clock by its own; the relative changes
  add in quadrature on each side.

FLOPs as FlashMLA counts them: 2 x 64 x b x s_q x topk x (d_qk + d_v) (``tests/lib.py`` at ``9241ae3``);
utilizations over the split-KV kernel as Nsight Compute reports them (fractions of peak): issue slots, the
tensor pipe's active cycles, L1/TEX (the shared-memory port's busy cycles) and DRAM (HBM bytes over the
datasheet peak).
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

__all__ = ["FIXED_H200", "GPUS", "KERNELS", "FixedCosts", "GpuSpec", "dram_fraction", "fit_fixed_costs", "predict"]

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
    "h200": GpuSpec("NVIDIA H200", "sm90", 132, 1.77, "measured",
                    "the SM clock Nsight Compute measured during FlashMLA's split-KV kernel, clock control off: "
                    "1.747, 1.765 and 1.789 GHz (tests/data/ncu; gpc__cycles_elapsed.avg.per_second)", 0.02,
                    4.8e12, "NVIDIA H200 datasheet: 4.8 TB/s HBM3e"),
    "b200": GpuSpec("NVIDIA B200", "sm100", 148, 1.965, "assumed",
                    "the clock SemiAnalysisAI/microbench-blackwell converts its B200 cycle counts with; the clock "
                    "under this load is not measured (the H200 ran 10% below its boost clock)", 0.10,
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
    from simtc.engine import Engine

    eng = Engine(_program(kernel, model(model_name), blocks), mode="timing", check=False, timing=timing,
                 active_sms=active_sms).run()
    return {"cycles": eng.cycles, "units": dict(eng.unit_busy), "hbm_bytes": eng.memory.hbm_bytes}


def _cta_costs(kernel: str, model_name: str, timing, active_sms: int) -> tuple[float, float, dict]:
    """``(ramp, cycles_per_block, run)``: the line through the engine's whole-run cycles at two block counts."""
    a = _engine(kernel, model_name, _N1, timing, active_sms)
    b = _engine(kernel, model_name, _N2, timing, active_sms)
    per_block = (b["cycles"] - a["cycles"]) / (_N2 - _N1)
    return a["cycles"] - _N1 * per_block, per_block, b


@frozen
class FixedCosts:
    """Microseconds a call costs besides its blocks (least squares on the fixed-cost recording)."""

    sched_us: float
    sched_per_part_us: float
    sched_per_request_us: float
    splitkv_us: float
    """The split-KV span minus the engine's one-CTA time: launch and host work between the events."""
    combine_us: float
    combine_per_split_us: float
    """Per split partial of the most-split request (its combine CTA merges them in turn)."""
    source: str

    def sched(self, parts: int, b: int) -> float:
        return self.sched_us + self.sched_per_part_us * parts + self.sched_per_request_us * b

    def combine(self, max_splits: int) -> float:
        return self.combine_us + self.combine_per_split_us * (max_splits if max_splits > 1 else 0)


FIXED_H200 = FixedCosts(4.916, 0.176, 0.084, -3.138, 4.511, 0.266,
                        source="tests/data/flashmla_h200_sm90_fixed.json (14 small calls on an H200, 2026-12-01), "
                               "fitted by fit_fixed_costs; tests/kernels/test_predict.py refits it")
"""The fixed costs of a call on the H200 (also assumed for the B200)."""


def _max_splits(parts_meta, blocks: int) -> int:
    per_req: dict[int, int] = {}
    for p in parts_meta:
        for s in p.segments(blocks):
            if s.split:
                per_req[s.req] = per_req.get(s.req, 0) + 1
    return max(per_req.values(), default=1)


def fit_fixed_costs(rows: list[dict], source: str = "") -> FixedCosts:
    """Fit :class:`FixedCosts` on the rows of a fixed-cost recording (``simtc crosscheck --flashmla --timing
    --timing-set fixed``; each row a dict with ``model, b, s_q, topk, num_sm_parts, sched_ms, splitkv_ms,
    combine_ms``): the scheduler span against (1, parts, b); the split-KV span minus the engine's prediction of
    the slowest CTA at the H200's clock (median); the combine span against (1, most splits of a request)."""
    from simtc.engine.parameters import Timing

    gpu = GPUS["h200"]
    a = np.array([[1, r["num_sm_parts"], r["b"]] for r in rows], float)
    sched = np.linalg.lstsq(a, [r["sched_ms"] * 1e3 for r in rows], rcond=None)[0]
    rest, comb_x, comb_y = [], [], []
    for r in rows:
        blocks = r["topk"] // 64
        pm = sched_meta(r["b"], r["topk"], r["num_sm_parts"])
        cycles = _kernel_cycles("flashmla-sm90", r["model"], pm, blocks, Timing("sm90"),
                                r["num_sm_parts"] * r["s_q"])[0]
        rest.append(r["splitkv_ms"] * 1e3 - cycles / (gpu.clock_ghz * 1e3))
        ms = _max_splits(pm, blocks)
        comb_x.append([1, ms if ms > 1 else 0])
        comb_y.append(r["combine_ms"] * 1e3)
    comb = np.linalg.lstsq(np.array(comb_x, float), comb_y, rcond=None)[0]
    return FixedCosts(*(round(float(v), 3) for v in sched), round(float(np.median(rest)), 3),
                      *(round(float(v), 3) for v in comb), source=source)


def _kernel_cycles(kernel: str, model_name: str, parts_meta, blocks: int, timing, active: int):
    """Cycles of the split-KV kernel (its slowest CTA), cycles per block, the n-block engine run."""
    ramp, per_block, run = _cta_costs(kernel, model_name, timing, active)
    share = min(timing["hbm_bytes_per_cycle"] / active, timing["sm_bytes_per_cycle"])
    split_write = 64 * 512 * 4 / share  # a split segment's fp32 partial O through the SM's HBM share
    worst = 0.0
    for p in parts_meta:
        segs = p.segments(blocks)
        t = sum(ramp + s.blocks * per_block + (split_write if s.split else 0.0) for s in segs)
        worst = max(worst, t)
    return worst, per_block, run



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
    active = min(ctas, gpu.sms)
    blocks = topk // 64
    pm = sched_meta(b, topk, parts)
    cycles, per_block, run = _kernel_cycles(kernel, m.name, pm, blocks, timing, active)
    cycles *= waves
    fixed = FIXED_H200
    sched_s = fixed.sched(parts, b) * 1e-6
    splitkv_s = launches * (cycles / (gpu.clock_ghz * 1e9) + fixed.splitkv_us * 1e-6)
    combine_s = fixed.combine(_max_splits(pm, blocks)) * 1e-6
    seconds = sched_s + splitkv_s + combine_s
    flops = call_flops(m, b, s_q, topk, h_q)
    run_cycles = run["cycles"]
    util = {"issue": run["units"]["issue"] / (timing["sub_partitions"] * run_cycles),
            "tensor_pipe": run["units"]["tensor_pipe"] / run_cycles,
            "l1tex": run["units"]["smem_port"] / run_cycles,
            "dram": dram_fraction(s_q, topk, s_k) * run["hbm_bytes"] * active / (run_cycles / (gpu.clock_ghz * 1e9))
            / gpu.dram_peak_bytes_per_s}
    out = {"kernel": kernel, "model": m.name, "b": b, "s_q": s_q, "topk": topk, "h_q": h_q, "s_k": s_k,
           "gpu": gpu.name,
           "seconds": seconds, "tflops": flops / seconds / 1e12, "cycles_per_block": per_block,
           "sm_parts": parts, "waves": waves, "sm_clock_ghz": gpu.clock_ghz,
           "utilization": {k: round(min(v, 1.0), 4) for k, v in util.items()},
           "flops": flops, "dram_fraction": dram_fraction(s_q, topk, s_k),
           "parts": {"sched_s": sched_s, "splitkv_s": splitkv_s, "combine_s": combine_s},
           "clock": {"label": gpu.clock_label, "source": gpu.clock_source}, "fixed_costs": fixed.source}
    if band:
        from simtc.engine.sensitivity import band as param_band

        b = param_band(lambda t: _kernel_cycles(kernel, m.name, pm, blocks, t, active)[0] * waves, timing,
                       base=cycles, progress=progress)
        lo2 = gpu.clock_uncertainty ** 2 + (1 - b["low"] / cycles) ** 2
        hi2 = gpu.clock_uncertainty ** 2 + (b["high"] / cycles - 1) ** 2
        moved = b["rests_on"]
        k = splitkv_s / seconds  # the band moves the kernel's share of the call
        out["seconds_low"] = seconds * (1 - k * math.sqrt(lo2))
        out["seconds_high"] = seconds * (1 + k * math.sqrt(hi2))
        out["tflops_low"] = flops / out["seconds_high"] / 1e12
        out["tflops_high"] = flops / out["seconds_low"] / 1e12
        out["band_rests_on"] = moved
    return out


