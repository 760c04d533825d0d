"""``simtc crosscheck``: run every applicable hardware check and compare bit for bit.

Checks that need no GPU (always run): the executors build for their targets, their SASS holds
the expected tensor-core instructions, and building Blackwell instructions for sm_90a fails
with ptxas's message. Checks that need an sm_90a GPU: ``wgmma`` over every swizzle mode x
major x N x distribution, deliberately wrong descriptors, special values, FlashMLA's QK split
on Hopper, the base-offset experiment, and the ``wgmma`` timing microbenchmark against the
timing model. Every GPU result is compared with simtc's own prediction as raw bits.

A run returns everything it produced (:class:`CrosscheckRun`: rows, the registers of every case
by :func:`~simtc.hw.suite.case_key`, cycles, timing); :func:`simtc.hw.recording.write_recording`
stores it and :func:`replay` checks a stored run again without a GPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import numpy as np
from attrs import evolve, field, frozen

from simtc.errors import HardwareUnavailable, SimtcError
from simtc.hw.results import CheckResult, compare, describe_mismatch

__all__ = ["CheckResult", "CrosscheckRun", "all_gpu_cases", "build_checks", "gpu_checks", "replay", "run_checks",
           "save_run"]

Progress = Callable[[int], None]

NAMES = {"wgmma layouts": "wgmma: swizzle x major x N x data",
         "wrong descriptors": "wgmma: deliberately wrong descriptors",
         "special values": "wgmma: NaN/Inf/subnormal bit patterns and overflow",
         "dual GEMM (Hopper)": "dual GEMM split on Hopper (P_lo, P_hi)",
         "base offset": "experiment: non-zero base offset (A off its boundary)"}
"""Row name of each check (cases carry the short name in :attr:`~simtc.hw.suite.Case.check`)."""

DUAL_GEMM_SCOPE = ("confirms the arithmetic and FlashMLA's split on Hopper (two wgmma chains; P_lo and P_hi equal "
                   "the values of simtc's Blackwell replay); it does not test Layout E (which TMEM lanes hold which "
                   "half): TMEM does not exist on sm_90a")


def _frozen_outputs(outputs: Mapping[str, np.ndarray]) -> dict:
    out = {}
    for k, v in outputs.items():
        a = np.array(v, copy=True)
        a.setflags(write=False)
        out[k] = a
    return out


@frozen
class CrosscheckRun:
    """What one cross-check run produced."""

    results: tuple[CheckResult, ...]
    note: str
    """A sentence about the device (or why no GPU checks ran)."""
    outputs: dict = field(factory=dict, converter=_frozen_outputs, eq=False)
    """case key -> GPU registers (read-only), in run order; empty when no GPU ran."""
    cycles: dict = field(factory=dict)
    """row name -> median clock64 cycles per instruction group."""
    timing: dict | None = None
    """The wgmma timing measurements (:func:`simtc.hw.timing.timing_to_json`), when measured."""
    seed: int = 0

    @property
    def failed(self) -> bool:
        return any(r.status == "FAIL" for r in self.results)


def _run_cases(name: str, cases, progress: Progress) -> tuple[CheckResult, dict, list]:
    """Run ``cases`` on the GPU; (row, {key: registers}, [(got, want)])."""
    from simtc.hw import wgmma as hw
    from simtc.hw.suite import case_key

    exact = elements = elements_exact = 0
    max_diff = 0.0
    cycles, outputs, pairs = [], {}, []
    first = None
    for case in cases:
        got, stamps = hw.run(case.image, case.program)
        outputs[case_key(case)] = got
        want = hw.predict(case.image, case.program)
        same, diff = compare(got, want)
        pairs.append((got, want))
        elements += same.size
        elements_exact += int(same.sum())
        max_diff = max(max_diff, diff)
        if same.all():
            exact += 1
        elif first is None:
            first = describe_mismatch(case, got, want)
        cycles.extend(np.diff(np.concatenate([[0], np.asarray(stamps).astype(np.int64)])).tolist())
        progress(1)
    status = "pass" if exact == len(cases) else "FAIL"
    return (CheckResult(name, status, len(cases), exact, elements, elements_exact, max_diff,
                        float(np.median(cycles)) if cycles else None, first_mismatch=first), outputs, pairs)


def build_checks() -> list[CheckResult]:
    """Compile and SASS checks that need no GPU."""
    from simtc.hw import compile as hc
    from simtc.hw import wgmma as hw
    from simtc.hw.tcgen05 import build_checks as tcgen05_build_checks

    results = []
    try:
        sass_counts = {}
        for n in (64, 128, 256):
            for am in ("K", "MN"):
                cubin = hc.compile_cuda(hw.kernel_source(n, "bf16", am, am), arch="sm_90a",
                                        name=hw.kernel_name(n, "bf16", am, am) + ".cu")
                h = hc.sass_histogram(hc.disassemble(cubin))
                sass_counts[(n, am)] = (h.get("HGMMA", 0), h.get("LDL", 0) + h.get("STL", 0))
        good = sum(g > 0 and spill == 0 for g, spill in sass_counts.values())
        ok = good == len(sass_counts)
        results.append(CheckResult(
            "build sm_90a wgmma executors", "pass" if ok else "FAIL", len(sass_counts), good,
            detail="SASS: HGMMA present, no local-memory spills in every N x major variant" if ok
            else f"SASS counts (HGMMA, LDL+STL): {sass_counts}"))
    except HardwareUnavailable as e:
        results.append(CheckResult("build sm_90a wgmma executors", "skipped", detail=str(e)))
    results.extend(tcgen05_build_checks())
    return results


def _dual_gemm(seed: int, progress: Progress) -> tuple[CheckResult, dict]:
    from simtc.hw import suite
    from simtc.kernels.flashmla import q_split, read_p, replay_qk
    from simtc.mma.wgmma import fragment_to_matrix
    from simtc.numerics.fdpa import tensor_core_mma

    dual, ops = suite.dual_gemm_case(seed)
    res, outputs, pairs = _run_cases(NAMES["dual GEMM (Hopper)"], dual, progress)
    p_lo, p_hi = (fragment_to_matrix(got) for got, _ in pairs)
    q, k = ops["q"], ops["k"]
    ref_ok = True
    # the model of the same chains: each half's 288 dims in the kernel's k order (RoPE first, then NoPE)
    for q_half, k_half, got in zip(q_split(q), q_split(k), (p_lo, p_hi), strict=True):
        want = tensor_core_mma(q_half, k_half, arch="sm90")
        ref_ok &= bool(np.array_equal(want.view(np.uint32), got.view(np.uint32)))
    e_lo, e_hi = read_p(replay_qk(q, k)[0])  # simtc's Blackwell replay: TS .ws, same order
    same_values = bool(np.array_equal(e_lo.view(np.uint32), p_lo.view(np.uint32))
                       and np.array_equal(e_hi.view(np.uint32), p_hi.view(np.uint32)))
    p = p_lo.astype(np.float32) + p_hi.astype(np.float32)
    err = float(np.abs(p.astype(np.float64) - q.astype(np.float64) @ k.T.astype(np.float64)).max())
    ok = res.status == "pass" and ref_ok and same_values
    return evolve(res, status="pass" if ok else "FAIL",
                  detail=f"{DUAL_GEMM_SCOPE}; P_lo, P_hi = the Blackwell replay's values: {same_values}; "
                         f"|P_lo + P_hi - QK^T| <= {err:.2e} (fp32 accumulation)"), outputs


def gpu_checks(seed: int, progress: Progress) -> CrosscheckRun:
    """The bit-exact checks on an sm_90a GPU (timing excluded): rows and every case's registers."""
    from simtc.hw import suite
    from simtc.hw.experiments import run_base_offset_experiment

    results, outputs = [], {}
    res, out, _ = _run_cases(NAMES["wgmma layouts"], suite.layout_cases(seed), progress)
    results.append(res)
    outputs.update(out)
    res, out, _ = _run_cases(NAMES["wrong descriptors"], suite.wrong_descriptor_cases(seed), progress)
    results.append(evolve(res, detail="the GPU read what simtc's descriptor reading predicts (LBO/SBO swapped, "
                                      "wrong swizzle code, start +16 B)"))
    outputs.update(out)
    res, out, _ = _run_cases(NAMES["special values"], suite.special_value_cases(seed), progress)
    results.append(evolve(res, detail="behaviour the model takes from MMA-Sim"))
    outputs.update(out)
    res, out = _dual_gemm(seed, progress)
    results.append(res)
    outputs.update(out)
    rows, out = run_base_offset_experiment(seed, progress)
    results.extend(rows)
    outputs.update(out)
    cycles = {r.check: r.cycles for r in results if r.cycles is not None}
    return CrosscheckRun(tuple(results), "", outputs, cycles, None, seed)


def all_gpu_cases(seed: int) -> list:
    """Every case an sm_90a run records, in run order."""
    from simtc.hw import suite
    from simtc.hw.experiments import base_offset_cases

    dual, _ = suite.dual_gemm_case(seed)
    return [*suite.layout_cases(seed), *suite.wrong_descriptor_cases(seed), *suite.special_value_cases(seed), *dual,
            *base_offset_cases(seed)]


def _timing(progress: Progress, device: str) -> tuple[CheckResult, dict]:
    from simtc.hw import timing

    rows = timing.measure(progress=progress)
    return timing.timing_check(rows), timing.timing_to_json(rows, device=device, samples=101)


def run_checks(arch: str = "auto", seed: int = 0, progress: Progress | None = None,
               on_total: Callable[[int], None] | None = None, *, with_timing: bool = True) -> CrosscheckRun:
    """Run what applies here and return it all (rows, device note, outputs, cycles, timing)."""
    from simtc.hw.device import probe

    progress = progress or (lambda n: None)
    info = probe()
    results = build_checks()
    if arch == "auto":
        arch = info.arch if info.available else "none"
    if not info.available:
        return CrosscheckRun(tuple(results), f"no GPU checks: {info.reason}", seed=seed)
    if arch in ("sm90", "sm_90a"):
        if info.arch != "sm_90a":
            return CrosscheckRun(tuple(results), f"--arch sm90 asked, but the device is {info.name} ({info.arch})",
                                 seed=seed)
        from simtc.hw import timing

        if on_total:
            on_total(len(all_gpu_cases(seed)) + (len(timing.NS) * len(timing.OPERANDS) if with_timing else 0))
        t = time.time()
        run = gpu_checks(seed, progress)
        device = f"{info.name} ({info.arch}, {info.sms} SMs)"
        timing_json = None
        results.extend(run.results)
        if with_timing:
            row, timing_json = _timing(progress, device)
            results.append(row)
        return evolve(run, results=tuple(results), timing=timing_json,
                      note=f"{device}; GPU checks took {time.time() - t:.1f} s")
    if arch in ("sm100", "sm_100a"):
        if info.arch not in ("sm_100a", "sm_103a"):
            return CrosscheckRun(tuple(results), f"--arch sm100 asked, but the device is {info.name} ({info.arch}): "
                                                 "tcgen05 cannot run", seed=seed)
        from simtc.hw.tcgen05 import gpu_check

        results.extend(gpu_check(seed, progress))
        return CrosscheckRun(tuple(results), f"{info.name} ({info.arch})", seed=seed)
    raise SimtcError(f"no GPU checks for {arch} ({info.name})", rule="cross-checks exist for sm_90a and sm_100a")


def save_run(path, run: CrosscheckRun, *, device: str | None = None, command: str | None = None) -> int:
    """Write a run's outputs (:mod:`simtc.hw.recording`); refuses a run without GPU outputs."""
    from simtc.hw.recording import RecordingError, write_recording

    if not run.outputs:
        raise RecordingError(f"no GPU outputs to save ({run.note})",
                             rule="--save records the outputs of an sm_90a GPU run")
    return write_recording(path, run.outputs, seed=run.seed, device=device or run.note, cycles=run.cycles,
                           timing=run.timing, command=command)


def replay(path, progress: Progress | None = None) -> CrosscheckRun:
    """Compare GPU outputs saved by ``--save`` (or shipped with simtc) with simtc, without a GPU.

    Every case is rebuilt from the recorded seed (cases are deterministic), predicted by simtc and
    compared with the recorded registers (bit for bit where they were kept, else by SHA-256
    digest; :mod:`simtc.hw.recording` states which). Recorded timing is compared with the model.
    """
    from simtc.hw.recording import digest, read_recording
    from simtc.hw.suite import case_key
    from simtc.hw.wgmma import predict

    progress = progress or (lambda n: None)
    rec = read_recording(path)
    by_check: dict[str, list] = {}
    seen, not_recorded = set(), 0
    for case in all_gpu_cases(rec.seed):
        key = case_key(case)
        if key not in rec.digests:
            not_recorded += 1
            continue
        seen.add(key)
        want = predict(case.image, case.program)  # base-offset cases: simtc's reading is the measured one
        if key in rec.registers:
            got = rec.registers[key]
            same, diff = compare(got, want)
            ok, n_exact, n = bool(same.all()), int(same.sum()), same.size
            first = None if ok else describe_mismatch(case, got, want)
        else:
            ok, diff, n = digest(want) == rec.digests[key], 0.0, want.size
            n_exact = n if ok else 0
            first = None if ok else f"{case.label}: the registers' SHA-256 differs from the recorded digest"
        by_check.setdefault(case.check, []).append((ok, diff, first, n_exact, n))
        progress(1)
    cycles = rec.meta.get("cycles_per_group_median") or {}
    results = []
    for check, rows in by_check.items():
        name = NAMES.get(check, check)
        exact = sum(r[0] for r in rows)
        detail = "replayed from recorded GPU outputs"
        if check == "dual GEMM (Hopper)":
            detail += f"; {DUAL_GEMM_SCOPE}"
        results.append(CheckResult(
            name, "pass" if exact == len(rows) else "FAIL", len(rows), exact, sum(r[4] for r in rows),
            sum(r[3] for r in rows), max(r[1] for r in rows), cycles.get(name), detail=detail,
            first_mismatch=next((r[2] for r in rows if r[2]), None)))
    if rec.meta.get("wgmma_timing"):
        from simtc.hw.timing import timing_check, timing_from_json

        results.append(timing_check(timing_from_json(rec.meta["wgmma_timing"]),
                                    source=f"recorded {rec.meta.get('date', '?')}"))
    unknown = len(rec.digests) - len(seen)
    note = f"replay of {path}: {rec.meta.get('device', '?')}, recorded {rec.meta.get('date', '?')}, seed {rec.seed}"
    if unknown:
        note += f"; {unknown} recorded cases are not generated by this simtc version"
    if not_recorded:
        note += f"; {not_recorded} cases of this simtc version are not in the recording"
    return CrosscheckRun(tuple(results), note, {}, dict(cycles), rec.meta.get("wgmma_timing"), rec.seed)
