"""The GPU side's plumbing: how much a run measures (:class:`Params`), a measurement's outcome (:class:`_Skip`,
:func:`_outcome`), and :class:`_GpuBase`, which loads the modules through CuPy, gates every benchmark on its
SASS check and the time budget, probes the SM clock and runs the two kinds of timed kernels (step loops and
count fits). The sections' measurements are in :mod:`~simtc.hw.calibrate.compute`,
:mod:`~simtc.hw.calibrate.memory` and :mod:`~simtc.hw.calibrate.sync`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Callable, Sequence

from attrs import frozen

from simtc.hw.calibrate.benchmarks import ARCH, Bench
from simtc.hw.calibrate.fits import _num, fit_line
from simtc.hw.calibrate.sass import SassCheck
from simtc.hw.calibrate.sources import _cubin, module_source


@frozen
class Params:
    """How much a run measures (full or ``--quick``)."""

    quick: bool
    warm: int
    samples: int
    tp_iters: int
    lat_iters: int
    smem_iters: int
    sync_iters: int
    rounds: tuple[int, ...]
    wake_samples: int
    mem_ctas: tuple[int, ...]
    mem_inflight: tuple[int, ...]
    mem_blocks: int
    mem_warm: int
    mem_launches: int
    chase_iters: int
    """LDG chases: loop iterations of every kernel (depths = unrolled steps x this)."""
    bulk_counts: tuple[int, ...]
    """Bulk chases: dependent copies per launch, one fit point each."""
    launches: int
    launch_repeats: int
    budget_s: float
    """Wall-clock seconds after which the remaining benchmarks are skipped (the run always ends in time)."""

    @classmethod
    def make(cls, quick: bool) -> Params:
        if quick:
            return cls(quick=True, warm=1, samples=3, tp_iters=16, lat_iters=8, smem_iters=16, sync_iters=16,
                       rounds=(64, 256), wake_samples=64, mem_ctas=(1, 132), mem_inflight=(1, 4), mem_blocks=48,
                       mem_warm=4, mem_launches=1, chase_iters=16, bulk_counts=(64, 128, 192, 256), launches=100,
                       launch_repeats=3, budget_s=150.0)
        return cls(quick=False, warm=2, samples=9, tp_iters=32, lat_iters=16, smem_iters=32, sync_iters=32,
                   rounds=(64, 128, 256, 512), wake_samples=256, mem_ctas=(1, 8, 33, 66, 132),
                   mem_inflight=(1, 2, 4, 8), mem_blocks=256, mem_warm=8, mem_launches=3, chase_iters=32,
                   bulk_counts=(128, 256, 384, 512), launches=200, launch_repeats=5, budget_s=330.0)


class _Skip(Exception):
    """A measurement that is not taken (time budget, failed SASS check)."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


@contextlib.contextmanager
def _outcome(rec: dict):
    """Run one measurement: a :class:`_Skip` or any other exception becomes ``rec``'s status and reason (the run goes
    on with the next measurement)."""
    try:
        yield
    except _Skip as s:
        rec.update(status=s.status, reason=s.reason)
    except Exception as e:
        rec.update(status="error", reason=f"{type(e).__name__}: {e}")


class _GpuBase:
    """Loads the modules and times kernels (cupy imported here); the sections are in the subclasses."""

    def __init__(self, params: Params, checks: dict[str, SassCheck], progress: Callable[[str], None]):
        import cupy
        import numpy

        self.cp, self.np = cupy, numpy
        self.p = params
        self.checks = checks
        self.progress = progress
        self.modules: dict[str, object] = {}
        self.t_start = time.monotonic()
        self.clock_probes: list[dict] = []
        props = cupy.cuda.runtime.getDeviceProperties(0)
        self.sms = int(props["multiProcessorCount"])
        self.max_smem = int(props.get("sharedMemPerBlockOptin", 232448))
        self.sink = cupy.zeros(1 << 20, dtype=cupy.uint32)

    # -- plumbing
    def fn(self, module: str, kernel: str):
        if module not in self.modules:
            from simtc.hw.compile import cache_dir

            if os.environ.get("SIMTC_COMPILER", "auto") == "cupy":
                mod = self.cp.RawModule(code=module_source(module), options=("-std=c++17", f"-arch={ARCH}"),
                                        backend="nvrtc")
            else:
                cubin = _cubin(module)
                path = cache_dir() / f"{hashlib.sha256(cubin).hexdigest()[:24]}.load.cubin"
                if not path.exists():
                    path.write_bytes(cubin)
                mod = self.cp.RawModule(path=str(path))
            self.modules[module] = mod
        return self.modules[module].get_function(kernel)

    def gate(self, bench_name: str) -> None:
        """Raise _Skip when the benchmark's SASS check failed or the time budget is spent."""
        c = self.checks.get(bench_name)
        if c is None or not c.ok:
            why = "; ".join(c.problems[:3]) if c is not None else "not checked"
            raise _Skip("sass-failed", f"SASS check failed: {why}")
        if time.monotonic() - self.t_start > self.p.budget_s:
            raise _Skip("skipped", f"time budget of {self.p.budget_s:.0f} s spent")

    def clock(self, section: str, when: str) -> None:
        out = self.cp.zeros(4, dtype=self.cp.uint64)
        try:
            self.fn("launch", "simtc_cal_clock_probe")((1,), (32,), (self.np.uint64(2_000_000), out))
            g0, c0, g1, c1 = (int(v) for v in out.get())
            mhz = _num((c1 - c0) / (g1 - g0) * 1000.0) if g1 > g0 else None
        except Exception as e:  # a broken context must not stop the run from reporting
            mhz = None
            self.progress(f"clock probe failed: {type(e).__name__}: {e}")
        self.clock_probes.append({"section": section, "when": when, "mhz": mhz})

    # -- step loops
    def step_loop(self, bench: Bench, *, iters: int, shapes: Sequence[tuple[int, int]], per_sp: bool = True,
                  extra: Callable[[dict, int], None] | None = None) -> dict:
        """Run every kernel of a step-loop benchmark for each (ctas, threads) shape; fit cycles over steps."""
        cp, np = self.cp, self.np
        steps = [v.steps for v in bench.variants]
        rec = {"status": "ok", "reason": None, "steps": steps, "iters": iters, "warm": self.p.warm,
               "samples": self.p.samples, "runs": []}
        with _outcome(rec):
            self.gate(bench.name)
            launches = self.p.warm + self.p.samples
            for ctas, threads in shapes:
                warps = threads // 32
                cycles = []
                for v in bench.variants:
                    fn = self.fn(bench.module, v.kernel)
                    times = cp.zeros((launches, 2 * warps + 1), dtype=cp.uint64)
                    for i in range(launches):
                        fn((ctas,), (threads,), (np.uint32(0), np.uint32(iters), times[i], self.sink))
                    t = times.get().astype(np.int64)[self.p.warm:]
                    if bench.module == "sync_loop" and ctas > 1 and not (t[:, -1] == ctas).all():
                        raise _Skip("error", f"the launch did not form a cluster of {ctas} CTAs "
                                             f"(%cluster_nctarank = {int(t[0, -1])})")
                    spans = t[:, 1:-1:2].max(axis=1) - t[:, 0:-1:2].min(axis=1)
                    cycles.append(float(np.median(spans)))
                slope, intercept = fit_line([s * iters for s in steps], cycles)
                k = threads / 128 if per_sp and threads >= 128 else None
                run = {"threads": threads, "ctas": ctas, "warps_per_sp": k, "cycles": cycles, "slope": slope,
                       "intercept": intercept, "cycles_per_step": slope,
                       "cycles_per_step_per_sp": _num(slope / k) if k else None}
                if extra:
                    extra(run, threads)
                rec["runs"].append(run)
            self.progress(bench.name)
        return rec

    def count_fit(self, bench: Bench, kernel_args: Callable[[int, object, object], tuple], *, grid: int,
                  threads: int, out_index: int = 0) -> dict:
        """Kernels timed over a runtime count of round trips: fit cycles over the counts."""
        cp, np = self.cp, self.np
        rec = {"status": "ok", "reason": None, "counts": list(self.p.rounds), "cycles": [], "slope": None,
               "intercept": None}
        with _outcome(rec):
            self.gate(bench.name)
            fn = self.fn(bench.module, bench.variants[0].kernel)
            flag = cp.zeros(1, dtype=cp.uint32)
            for n in self.p.rounds:
                outs = cp.zeros((self.p.warm + self.p.samples, 2), dtype=cp.uint64)
                for i in range(self.p.warm + self.p.samples):
                    fn((grid,), (threads,), kernel_args(n, outs[i], flag))
                rec["cycles"].append(float(np.median(outs.get().astype(np.int64)[self.p.warm:, out_index])))
            f = int(flag.get()[0])
            if f & 2:
                raise _Skip("error", "the launch did not form a cluster of two CTAs")
            if f:
                raise _Skip("timeout", "an mbarrier wait timed out")
            rec["slope"], rec["intercept"] = fit_line(rec["counts"], rec["cycles"])
            self.progress(bench.name)
        return rec
