"""The synchronisation and launch sections on the GPU: mbarrier and ``st.async`` round trips, TMA wake-ups,
step-loop barriers and fences, and launch overheads.
"""

from __future__ import annotations

import time

from simtc.hw.calibrate.benchmarks import TIMEOUT_NS, Bench, benches
from simtc.hw.calibrate.fits import _median, _num
from simtc.hw.calibrate.gpu import _GpuBase, _outcome, _Skip


class _Sync(_GpuBase):
    """The ``sync`` and ``launch`` sections."""

    def sync(self) -> dict:
        np = self.np
        by_name = {b.name: b for b in benches()}
        out: dict = {}
        t = np.uint64(TIMEOUT_NS)
        rec = self.count_fit(by_name["sync/mbarrier_pingpong"],
                             lambda n, o, f: (np.uint32(n), t, o, f), grid=1, threads=64)
        rec["round_trip_cycles"] = rec["slope"]
        rec["one_way_cycles"] = _num(rec["slope"] / 2) if rec["slope"] is not None else None
        out["mbarrier_pingpong"] = rec
        rec = self.count_fit(by_name["sync/st_async_pingpong"],
                             lambda n, o, f: (np.uint32(n), t, o, f), grid=2, threads=32)
        rec["round_trip_cycles"] = rec["slope"]
        out["st_async_pingpong"] = rec
        out["tma_wake"] = self._tma_wake(by_name["sync/tma_wake"])
        out["bar_sync"] = self.step_loop(by_name["sync/bar_sync"], iters=self.p.sync_iters,
                                         shapes=[(1, 128), (1, 256), (1, 384)])
        for key in ("fence_proxy_async", "sts_fence_proxy_async"):
            out[key] = self.step_loop(by_name[f"sync/{key}"], iters=self.p.sync_iters, shapes=[(1, 32), (1, 128)])
        for key in ("barrier_cluster", "barrier_cluster_relaxed"):
            out[key] = self.step_loop(by_name[f"sync/{key}"], iters=self.p.sync_iters, shapes=[(2, 128)])
        return out

    def _tma_wake(self, bench: Bench) -> dict:
        cp, np = self.cp, self.np
        warm = 16
        rec: dict = {"status": "ok", "reason": None, "samples": self.p.wake_samples, "warm": warm}
        with _outcome(rec):
            self.gate(bench.name)
            n = warm + self.p.wake_samples
            src = cp.arange(64, dtype=cp.uint32)
            out = cp.zeros(5 * n, dtype=cp.uint64)
            flag = cp.zeros(1, dtype=cp.uint32)
            self.fn(bench.module, bench.variants[0].kernel)((1,), (64,), (src, np.uint32(n), np.uint64(TIMEOUT_NS),
                                                                          out, flag))
            o = out.get().astype(np.int64).reshape(n, 5)[warm:]
            if int(flag.get()[0]):
                raise _Skip("timeout", "an mbarrier wait timed out")
            for key, d in (("issue_to_self_wake", o[:, 1] - o[:, 0]), ("issue_to_other_wake", o[:, 2] - o[:, 0]),
                           ("arrive_to_wake", o[:, 4] - o[:, 3])):
                rec[key] = {"median": _num(np.median(d)), "p10": _num(np.percentile(d, 10)),
                            "p90": _num(np.percentile(d, 90))}
            self.progress(bench.name)
        return rec


    def launch(self) -> dict:
        cp = self.cp
        p = self.p
        out: dict = {}
        bench = next(b for b in benches() if b.name == "launch/empty")
        try:
            self.gate(bench.name)
        except _Skip as s:
            out = {k: {"status": s.status, "reason": s.reason} for k in ("empty_1cta", "empty_132cta", "group_of_3")}
            return {**out, "host_enqueue_us": None}
        ea, eb, ec = (self.fn("launch", f"simtc_cal_empty_{c}") for c in "abc")
        spin = self.fn("launch", "simtc_cal_spin")
        big = self.sms
        kinds = {"empty_1cta": [(ea, 1)], "empty_132cta": [(ea, big)], "group_of_3": [(ea, 1), (eb, big), (ec, big)]}
        host = []
        stream = cp.cuda.Stream(non_blocking=True)
        with stream:
            for key, seq in kinds.items():
                rec = {"status": "ok", "reason": None, "launches": p.launches, "repeats": p.launch_repeats}
                with _outcome(rec):
                    if time.monotonic() - self.t_start > p.budget_s:
                        raise _Skip("skipped", f"time budget of {p.budget_s:.0f} s spent")
                    t = time.perf_counter()  # the host's own rate, measured without a spin in front
                    for _ in range(p.launches):
                        for k, g in seq:
                            k((g,), (128,), ())
                    stream.synchronize()
                    per_call = (time.perf_counter() - t) / (p.launches * len(seq))
                    host.append(per_call * 1e6)
                    spin_ns = int(max(3 * per_call * p.launches * len(seq), 1e-3) * 1e9)
                    us = []
                    for r in range(p.launch_repeats + 1):
                        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
                        spin((1,), (32,), (self.np.uint64(spin_ns),))
                        e0.record(stream)
                        for _ in range(p.launches):
                            for k, g in seq:
                                k((g,), (128,), ())
                        e1.record(stream)
                        e1.synchronize()
                        if r:  # the first repeat is a warm-up
                            us.append(cp.cuda.get_elapsed_time(e0, e1) * 1000.0 / p.launches)
                    rec["us"] = _num(_median(us))
                    rec["us_all"] = [_num(v) for v in us]
                out[key] = rec
        out["host_enqueue_us"] = _num(_median(host)) if host else None
        self.progress("launch")
        return out
