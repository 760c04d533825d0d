"""``simtc crosscheck``: run every applicable hardware check and compare bit for bit.

Checks that need no GPU (always run): the executors build for their targets, their SASS holds
the expected tensor-core instructions, and building Blackwell instructions for sm_90a fails
with ptxas's message. Checks that need an sm_90a GPU: ``wgmma`` over every swizzle mode x
major x N x distribution, deliberately wrong descriptors, and FlashMLA's dual-GEMM split on
Hopper. Every GPU result is compared with simtc's own prediction as raw bits.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from attrs import evolve, field, frozen

from simtc.errors import HardwareUnavailable, SimtcError

__all__ = ["CheckResult", "replay", "run_checks"]


@frozen
class CheckResult:
    """One row of the cross-check table."""

    check: str
    status: str
    """``pass``, ``FAIL`` or ``skipped``."""
    cases: int = 0
    bit_exact: int = 0
    """Cases whose every output matched simtc bit for bit."""
    elements: int = 0
    elements_exact: int = 0
    max_abs_diff: float = 0.0
    cycles: float | None = None
    """Median clock64 cycles per instruction group on the GPU, when measured."""
    detail: str = ""
    first_mismatch: str | None = None
    rows: tuple = field(factory=tuple)

    def as_dict(self) -> dict:
        return {"check": self.check, "status": self.status, "cases": self.cases, "bit_exact": self.bit_exact,
                "elements": self.elements, "elements_exact": self.elements_exact,
                "max_abs_diff": self.max_abs_diff, "cycles": self.cycles, "detail": self.detail,
                "first_mismatch": self.first_mismatch}


def _compare(got: np.ndarray, want: np.ndarray):
    g, w = got.view(np.uint32), want.view(np.uint32)
    nan_both = np.isnan(got) & np.isnan(want)
    same = (g == w) | nan_both
    with np.errstate(invalid="ignore"):
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    finite = np.isfinite(diff)
    return same, float(diff[finite & ~same].max()) if np.any(finite & ~same) else 0.0


def _describe_mismatch(case, got_regs, want_regs) -> str:
    from simtc.mma.wgmma import wgmma_fragment
    from simtc.smem import SmemDescriptor, descriptor_addresses

    same, _ = _compare(got_regs, want_regs)
    t, i = (int(v) for v in np.argwhere(~same)[0])
    rows, cols = wgmma_fragment(case.program.n)
    m, n = int(rows[t, i]), int(cols[t, i])
    ins = case.program.instrs[0]
    a = descriptor_addresses(SmemDescriptor.from_u64(ins.a_desc, "sm90"), major=case.program.a_major,
                             dtype=case.program.dtype, rows=64)
    b = descriptor_addresses(SmemDescriptor.from_u64(ins.b_desc, "sm90"), major=case.program.b_major,
                             dtype=case.program.dtype, rows=case.program.n)
    return (f"{case.label}: D[{m}][{n}] (thread {t}, register {i}) GPU {float(got_regs[t, i])!r} "
            f"(0x{int(got_regs.view(np.uint32)[t, i]):08x}) vs simtc {float(want_regs[t, i])!r} "
            f"(0x{int(want_regs.view(np.uint32)[t, i]):08x}); first instruction reads A[{m}][0..15] at smem "
            f"{a[m, 0]:#x}.. and B[{n}][0..15] at {b[n, 0]:#x}..")


_SAVED: dict[str, np.ndarray] = {}


def _gpu_check(name: str, cases, progress) -> tuple[CheckResult, list]:
    from simtc.hw import wgmma as hw

    exact = 0
    elements = elements_exact = 0
    max_diff = 0.0
    cycles = []
    first = None
    outputs = []
    for case in cases:
        got, stamps = hw.run(case.image, case.program)
        _SAVED[f"{case.check} | {case.label}"] = got
        want = hw.predict(case.image, case.program)
        same, diff = _compare(got, want)
        outputs.append((got, want))
        elements += same.size
        elements_exact += int(same.sum())
        max_diff = max(max_diff, diff)
        if same.all():
            exact += 1
        elif first is None:
            first = _describe_mismatch(case, got, want)
        groups = np.diff(np.concatenate([[0], stamps.astype(np.int64)]))
        cycles.extend(groups.tolist())
        progress(1)
    status = "pass" if exact == len(cases) else "FAIL"
    return CheckResult(name, status, len(cases), exact, elements, elements_exact, max_diff,
                       float(np.median(cycles)) if cycles else None, first_mismatch=first), outputs


def build_checks() -> list[CheckResult]:
    """Compile and SASS checks that need no GPU."""
    from simtc.hw import compile as hc
    from simtc.hw import wgmma as hw

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
    for extra in _EXTRA_BUILD_CHECKS:
        results.extend(extra())
    return results


def _tcgen05_build_checks() -> list[CheckResult]:
    from simtc.hw.tcgen05 import build_checks as tc_build

    return tc_build()


_EXTRA_BUILD_CHECKS: list[Callable[[], list[CheckResult]]] = [_tcgen05_build_checks]
def _tcgen05_gpu_check(seed, progress) -> list[CheckResult]:
    from simtc.hw.tcgen05 import gpu_check

    return gpu_check(seed, progress)


def _base_offset_experiment(seed, progress) -> list[CheckResult]:
    from simtc.hw.experiments import run_base_offset_experiment

    return run_base_offset_experiment(seed, progress)


_EXTRA_GPU_CHECKS: dict[str, list[Callable]] = {"sm_90a": [_base_offset_experiment], "sm_100a": [_tcgen05_gpu_check]}


def gpu_checks(seed: int, progress) -> list[CheckResult]:
    """Checks on an sm_90a GPU."""
    from simtc.hw import suite as hc
    from simtc.mma.wgmma import fragment_to_matrix
    from simtc.numerics.fdpa import tensor_core_mma

    results = []
    layout = hc.layout_cases(seed)
    res, _ = _gpu_check("wgmma: swizzle x major x N x data", layout, progress)
    results.append(res)

    wrong = hc.wrong_descriptor_cases(seed)
    res, outs = _gpu_check("wgmma: deliberately wrong descriptors", wrong, progress)
    results.append(evolve(res, detail="the GPU read what simtc's descriptor reading predicts (LBO/SBO swapped, "
                                      "wrong swizzle code, start +16 B)"))

    special = hc.special_value_cases(seed)
    res, _ = _gpu_check("wgmma: NaN/Inf/subnormal bit patterns and overflow", special, progress)
    results.append(evolve(res, detail="behaviour the model takes from MMA-Sim"))

    dual, ops = hc.dual_gemm_case(seed)
    res, outs = _gpu_check("dual GEMM split on Hopper (P_lo, P_hi)", dual, progress)
    p_lo, p_hi = (fragment_to_matrix(got) for got, _ in outs)
    q, k = ops["q"], ops["k"]
    # the model of the same chains: RoPE (2 steps) then NoPE (16 steps) per half
    ref_ok = True
    for half, got in ((0, p_lo), (1, p_hi)):
        dims = np.concatenate([np.arange(512 + 32 * half, 544 + 32 * half)] +
                              [np.arange(128 * t + 64 * half, 128 * t + 64 * half + 64) for t in range(4)])
        want = tensor_core_mma(q[:, dims], k[:, dims], arch="sm90")
        ref_ok &= bool(np.array_equal(want.view(np.uint32), got.view(np.uint32)))
    from simtc.kernels.flashmla import read_p, replay_qk

    e_lo, e_hi = read_p(replay_qk(q, k)[0])  # simtc's Blackwell replay: Layout E, TS .ws, same order
    layout_e = bool(np.array_equal(e_lo.view(np.uint32), p_lo.view(np.uint32))
                    and np.array_equal(e_hi.view(np.uint32), p_hi.view(np.uint32)))
    ref_ok &= layout_e
    p = p_lo.astype(np.float32) + p_hi.astype(np.float32)
    err = float(np.abs(p.astype(np.float64) - q.astype(np.float64) @ k.T.astype(np.float64)).max())
    results.append(evolve(res, status="pass" if res.status == "pass" and ref_ok else "FAIL",
                          detail=f"P_lo/P_hi = simtc's tcgen05 Layout-E replay: {layout_e}; "
                                 f"|P_lo + P_hi - QK^T| <= {err:.2e}"))
    for extra in _EXTRA_GPU_CHECKS["sm_90a"]:
        results.extend(extra(seed, progress))
    return results


def count_gpu_cases(seed: int) -> int:
    from simtc.hw import suite as hc
    from simtc.hw.experiments import base_offset_cases

    return (len(hc.layout_cases(seed)) + len(hc.wrong_descriptor_cases(seed)) + len(hc.special_value_cases(seed))
            + 2 + len(base_offset_cases(seed)))


def save_outputs(path, *, seed: int, device: str) -> int:
    """Write every GPU output of the last run (raw float32 registers by case) to an .npz file."""
    import json

    import simtc

    labels = sorted(_SAVED)
    arrays = {f"out{i}": _SAVED[k] for i, k in enumerate(labels)}
    meta = {"labels": labels, "seed": seed, "device": device, "simtc": simtc.__version__,
            "date": time.strftime("%Y-%m-%d")}
    np.savez_compressed(path, meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **arrays)
    return len(labels)


def run_checks(arch: str = "auto", seed: int = 0, progress: Callable[[int], None] | None = None,
               on_total: Callable[[int], None] | None = None) -> tuple[list[CheckResult], str]:
    """Run what applies here; returns (results, a sentence about the device)."""
    from simtc.hw.device import probe

    progress = progress or (lambda n: None)
    _SAVED.clear()  # --save writes the outputs of this run only
    info = probe()
    results = build_checks()
    if arch == "auto":
        arch = info.arch if info.available else "none"
    if not info.available:
        note = f"no GPU checks: {info.reason}"
        return results, note
    if arch in ("sm90", "sm_90a"):
        if info.arch != "sm_90a":
            return results, f"--arch sm90 asked, but the device is {info.name} ({info.arch})"
        if on_total:
            on_total(count_gpu_cases(seed))
        t = time.time()
        results.extend(gpu_checks(seed, progress))
        return results, f"{info.name} ({info.arch}, {info.sms} SMs); GPU checks took {time.time() - t:.1f} s"
    if arch in ("sm100", "sm_100a"):
        if info.arch not in ("sm_100a", "sm_103a"):
            return results, f"--arch sm100 asked, but the device is {info.name} ({info.arch}): tcgen05 cannot run"
        for extra in _EXTRA_GPU_CHECKS["sm_100a"]:
            results.extend(extra(seed, progress))
        return results, f"{info.name} ({info.arch})"
    raise SimtcError(f"no GPU checks for {arch} ({info.name})", rule="cross-checks exist for sm_90a and sm_100a")


def _all_cases(seed: int):
    from simtc.hw import suite as hc
    from simtc.hw.experiments import base_offset_cases

    dual, _ = hc.dual_gemm_case(seed)
    return [*hc.layout_cases(seed), *hc.wrong_descriptor_cases(seed), *hc.special_value_cases(seed), *dual,
            *base_offset_cases(seed)]


def replay(path, progress: Callable[[int], None] | None = None) -> tuple[list[CheckResult], str]:
    """Compare GPU outputs saved by ``--save`` (or shipped with simtc) with simtc, without a GPU.

    Every case is rebuilt from the recorded seed (cases are deterministic), predicted by simtc and
    compared with the recorded registers (bit for bit where they were kept, else by SHA-256 digest).
    """
    import hashlib
    import json

    from simtc.hw.wgmma import predict

    progress = progress or (lambda n: None)
    z = np.load(path)
    meta = json.loads(bytes(z["meta"]).decode())
    labels = meta["labels"]
    digests = meta.get("digests")
    index = {lab: i for i, lab in enumerate(labels)}
    by_check: dict[str, list] = {}
    for case in _all_cases(int(meta["seed"])):
        key = f"{case.check} | {case.label}"
        if key not in index:
            continue
        i = index[key]
        want = predict(case.image, case.program)
        if f"out{i}" in z.files:
            got = z[f"out{i}"]
            same, diff = _compare(got, want)
            ok, first = bool(same.all()), None if same.all() else _describe_mismatch(case, got, want)
            n_exact, n = int(same.sum()), same.size
        else:
            digest = hashlib.sha256(np.ascontiguousarray(want).view("<u4").tobytes()).hexdigest()
            ok, diff, first = digest == digests[i], 0.0, None if digest == digests[i] else f"{case.label}: digest"
            n_exact, n = (want.size if ok else 0), want.size
        by_check.setdefault(case.check, []).append((ok, diff, first, n_exact, n))
        progress(1)
    cycles = meta.get("cycles_per_group_median", {})
    names = {"wgmma layouts": "wgmma: swizzle x major x N x data", "wrong descriptors":
             "wgmma: deliberately wrong descriptors", "special values":
             "wgmma: NaN/Inf/subnormal bit patterns and overflow", "dual GEMM (Hopper)":
             "dual GEMM split on Hopper (P_lo, P_hi)",
             "base offset": "experiment: non-zero base offset (A off its boundary)"}
    results = []
    for check, rows in by_check.items():
        name = names.get(check, check)
        exact = sum(r[0] for r in rows)
        first = next((r[2] for r in rows if r[2]), None)
        results.append(CheckResult(
            name, "pass" if exact == len(rows) else "FAIL", len(rows), exact, sum(r[4] for r in rows),
            sum(r[3] for r in rows), max(r[1] for r in rows), cycles.get(name),
            detail="replayed from recorded GPU outputs", first_mismatch=first))
    missing = len(labels) - sum(len(r) for r in by_check.values())
    note = f"replay of {path}: {meta.get('device', '?')}, recorded {meta.get('date', '?')}, seed {meta['seed']}"
    if missing:
        note += f"; {missing} recorded cases are not generated by this simtc version"
    return results, note
