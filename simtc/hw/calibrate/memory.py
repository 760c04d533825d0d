"""The memory section on the GPU: FlashMLA-shaped row gathers (LDG, LDGSTS, bulk copies) and the dependent
latency chases (``--only memory_latency``).
"""

from __future__ import annotations

from collections.abc import Sequence

from simtc.hw.calibrate.benchmarks import (
    _GATHER,
    BULK_BYTES,
    LAT_FLUSH,
    LAT_POOLS,
    LAT_SEED,
    LAT_STRIDE,
    LDG_CHASE,
    LDG_CHASE_STEPS,
    TIMEOUT_NS,
    Bench,
    benches,
)
from simtc.hw.calibrate.fits import _median, _num, fit_line
from simtc.hw.calibrate.gpu import _GpuBase, _outcome, _Skip
from simtc.hw.calibrate.recording import _lat_key

_LAT_PREPARE = {
    "hbm": f"filled with the cycle, read once whole (TLB entries for as many of its 2 MiB pages as the TLBs "
           f"hold), then a {LAT_FLUSH >> 20} MiB region after it read (none of the pool left in L2); launches "
           f"continue the cycle, so no line is read twice",
    "l2": "filled with the cycle and read once whole (all of it in L2)",
    "l1": "filled with the cycle; every launch first walks the whole cycle untimed (all of it in L1)",
}


def _lat_fit(depths: Sequence[int], cycles: Sequence[float]) -> dict:
    """A latency chase's fit: cycles = intercept + slope x dependent accesses (slope: cycles per access)."""
    slope, intercept = fit_line(depths, cycles)
    if not slope > 0:
        raise _Skip("error", f"the cycles do not grow with the chase depth (slope {slope}): {list(cycles)}")
    resid = max(abs(c - (intercept + slope * d)) for d, c in zip(depths, cycles, strict=True))
    return {"depths": list(depths), "cycles": list(cycles), "slope": slope, "intercept": intercept,
            "residual_max": _num(resid)}



class _Memory(_GpuBase):
    """The ``memory`` section and its latency chases."""

    def memory_latency(self) -> dict:
        """The memory section with only its latency part (``--only memory_latency``)."""
        return {"params": {}, "configs": [], "latency": self.latency()}

    def latency(self) -> dict:
        """Dependent-access chases by one thread: LDG over the HBM, L2 and L1 pools, bulk copies of each size
        over the HBM and L2 pools (see the module docstring)."""
        cp = self.cp
        p = self.p
        params = {"seed": LAT_SEED, "warm": p.warm, "samples": p.samples, "ldg_steps": list(LDG_CHASE_STEPS),
                  "ldg_iters": p.chase_iters, "bulk_counts": list(p.bulk_counts), "pools": dict(LAT_POOLS),
                  "strides": dict(LAT_STRIDE), "flush_bytes": LAT_FLUSH}
        by_name = {b.name: b for b in benches()}
        cursor = cp.zeros(1, dtype=cp.uint64)
        arrays: dict = {}
        why = None
        try:
            arrays["hbm"] = cp.empty(LAT_POOLS["hbm"] + LAT_FLUSH, dtype=cp.uint8)
        except Exception as e:  # out of memory: the L2 and L1 pools only
            why = f"cannot allocate the 4 GiB pool ({type(e).__name__}: {e})"
        arrays["l2"] = cp.empty(LAT_POOLS["l2"], dtype=cp.uint8)
        arrays["l1"] = cp.empty(LAT_POOLS["l1"], dtype=cp.uint8)
        plan = [("ldg", pool, 8) for pool in ("hbm", "l2", "l1")]
        plan += [("bulk", pool, n) for pool in ("hbm", "l2") for n in BULK_BYTES]
        chases: dict = {}
        prepared = None
        for method, pool, nbytes in plan:
            key = _lat_key(method, pool, nbytes)
            stride = LAT_STRIDE[method]
            bench = by_name["memory/latency/" + ("bulk" if method == "bulk" else "ldg" if pool == "l1" else "ldg.cg")]
            ptx, sass = (("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
                          "UBLKCP.S.G + SYNCS.PHASECHK.TRANS64.TRYWAIT + LDS.64") if method == "bulk"
                         else LDG_CHASE[bench.name.rsplit("/", 1)[1]][:2])
            m = {"status": "ok", "reason": None, "method": method, "pool": pool, "pool_bytes": LAT_POOLS[pool],
                 "bytes": nbytes, "stride": stride, "elements": LAT_POOLS[pool] // stride, "ptx": ptx, "sass": sass,
                 "pages": "random", "pool_pages_2mib": max(1, LAT_POOLS[pool] >> 21),
                 "prepare": _LAT_PREPARE[pool], "warm": p.warm, "samples": p.samples}
            try:
                if pool == "hbm" and why:
                    raise _Skip("error", why)
                self.gate(bench.name)
                if prepared != (method, pool):  # every size of a pool continues the same cycle
                    self.gate("memory/latency/fill")
                    self.gate("memory/latency/touch")
                    prepared = None
                    self._lat_prepare(arrays[pool], pool, stride, cursor)
                    prepared = (method, pool)
                if method == "ldg":
                    m.update(self._ldg_chase(bench, cursor, warm=m["elements"] if pool == "l1" else 0))
                else:
                    m.update(self._bulk_chase(bench, cursor, nbytes))
                self.progress(f"memory/latency/{key}")
            except _Skip as e:
                m.update(status=e.status, reason=e.reason)
            except Exception as e:
                m.update(status="error", reason=f"{type(e).__name__}: {e}")
            chases[key] = m
        arrays.clear()
        cp.get_default_memory_pool().free_all_blocks()
        return {"params": params, "chases": chases}

    def _lat_prepare(self, pool, name: str, stride: int, cursor) -> None:
        """Write the cycle into the pool and point the cursor at its first element; then, for the HBM pool, read
        it once (TLB) and read the flush region after it (so none of it is in L2); for the L2 pool, read it once
        (so all of it is in L2)."""
        np = self.np
        size = LAT_POOLS[name]
        bits = (size // stride).bit_length() - 1
        fill = self.fn("latency", "simtc_cal_lat_fill")
        fill((min(self.sms * 8, max(1, (1 << bits) // 256)),), (256,),
             (pool, np.uint32(bits), np.uint32(stride), np.uint32(LAT_SEED), cursor))
        touch = self.fn("latency", "simtc_cal_lat_touch")
        if name in ("hbm", "l2"):
            touch((self.sms,), (256,), (pool, np.uint64(size // 16), self.sink))
        if name == "hbm":
            touch((self.sms,), (256,), (pool[size:], np.uint64(LAT_FLUSH // 16), self.sink))
        self.cp.cuda.runtime.deviceSynchronize()

    def _ldg_chase(self, bench: Bench, cursor, *, warm: int) -> dict:
        cp, np = self.cp, self.np
        p = self.p
        launches = p.warm + p.samples
        depths, cycles = [], []
        carveout = None
        for v in bench.variants:
            fn = self.fn(bench.module, v.kernel)
            if warm:  # the L1 pool: ask for the largest L1 (the kernel uses 8 bytes of shared memory)
                try:
                    fn.preferred_shared_memory_carveout = 0
                    carveout = "0 % shared memory (largest L1) requested"
                except Exception as e:  # a hint only: the driver picks the split when it is not taken
                    carveout = f"not set ({type(e).__name__}: {e})"
            times = cp.zeros((launches, 1), dtype=cp.uint64)
            for i in range(launches):
                fn((1,), (32,), (cursor, np.uint32(warm), np.uint32(p.chase_iters), times[i]))
            t = times.get().astype(np.int64)[p.warm:, 0]
            depths.append(v.steps * p.chase_iters)
            cycles.append(float(np.median(t)))
        out = {"steps": [v.steps for v in bench.variants], "iters": p.chase_iters, "warm_loads": warm,
               **_lat_fit(depths, cycles)}
        if carveout is not None:
            out["l1_carveout"] = carveout
        return out

    def _bulk_chase(self, bench: Bench, cursor, nbytes: int) -> dict:
        cp, np = self.cp, self.np
        p = self.p
        launches = p.warm + p.samples
        fn = self.fn(bench.module, bench.variants[0].kernel)
        flag = cp.zeros(1, dtype=cp.uint32)
        cycles = []
        for n in p.bulk_counts:
            times = cp.zeros((launches, 1), dtype=cp.uint64)
            for i in range(launches):
                fn((1,), (32,), (cursor, np.uint32(nbytes), np.uint32(n), np.uint64(TIMEOUT_NS), times[i], flag))
            cycles.append(float(np.median(times.get().astype(np.int64)[p.warm:, 0])))
        if int(flag.get()[0]):
            raise _Skip("timeout", "an mbarrier wait timed out")
        return _lat_fit(list(p.bulk_counts), cycles)

    def memory(self) -> dict:
        try:  # first, before the gathers' pool is allocated
            latency = self.latency()
        except Exception as e:  # recorded; the gathers still run
            latency = {"status": "error", "reason": f"{type(e).__name__}: {e}"}
        cp, np = self.cp, self.np
        p = self.p
        seed = 20260101
        pools = {"hbm": 4 << 30, "l2": 8 << 20}
        rows = {"v32": {"useful": 656, "ldg": 704, "ldgsts": 656, "bulk": 656},
                "model1": {"useful": 584, "ldg": 608, "ldgsts": 584, "bulk": 592}}
        out = {"params": {"seed": seed, "blocks": p.mem_blocks, "warm": p.mem_warm, "launches": p.mem_launches,
                          "pools": pools, "rows": rows}, "configs": [], "latency": latency}
        pool, why = None, None
        try:
            pool = cp.empty(pools["hbm"], dtype=cp.uint8)
        except Exception as e:  # out of memory: gather from an 8 MiB pool only
            why = f"cannot allocate the 4 GiB pool ({type(e).__name__}: {e})"
            pool = cp.empty(pools["l2"], dtype=cp.uint8)
        touch_bench = next(b for b in benches() if b.name == "memory/touch")
        ctas_list = sorted({min(c, self.sms) for c in p.mem_ctas})
        for method in ("ldg", "ldgsts", "bulk"):
            for fmt in ("v32", "model1"):
                bench_name = f"memory/{method}/{fmt}"
                for pool_name in ("hbm", "l2"):
                    size = pools[pool_name]
                    n_tokens = size // 656 if fmt == "v32" else (size // 37440) * 64
                    for ctas in ctas_list:
                        for f in p.mem_inflight:
                            cfg = {"status": "ok", "reason": None, "method": method, "format": fmt,
                                   "row_bytes": rows[fmt]["useful"], "pool": pool_name, "ctas": ctas, "inflight": f,
                                   "threads": 128 * f}
                            with _outcome(cfg):
                                if pool_name == "hbm" and why:
                                    raise _Skip("error", why)
                                if method == "ldg" and f > 4:
                                    raise _Skip("skipped", "LDG keeps a block's 16-byte loads in registers: 8 "
                                                           "warpgroups x 128 threads x ~100 registers exceed the "
                                                           "65,536-register file")
                                self.gate(bench_name)
                                if pool_name == "l2":
                                    self.gate(touch_bench.name)
                                    self.fn("memory", "simtc_cal_touch")((self.sms,), (256,), (
                                        pool, np.uint64(size // 16), self.sink))
                                cfg.update(self._gather(method, fmt, pool, n_tokens, ctas, f, seed, rows[fmt]))
                            out["configs"].append(cfg)
                self.progress(bench_name)
        del pool
        cp.get_default_memory_pool().free_all_blocks()
        return out

    def _gather(self, method: str, fmt: str, pool, n_tokens: int, ctas: int, f: int, seed: int, rows: dict) -> dict:
        cp, np = self.cp, self.np
        p = self.p
        fn = self.fn("memory", _GATHER[(method, fmt)])
        block_bytes = 64 * (656 if fmt == "v32" else 592)
        nbuf = 0 if method == "ldg" else max(1, min(f, (self.max_smem - 128) // block_bytes))
        smem = 128 + nbuf * block_bytes
        if smem > 48 * 1024:
            fn.max_dynamic_shared_size_bytes = smem
        nb = p.mem_blocks
        lat = cp.zeros(ctas * f * nb, dtype=cp.uint64)
        span = cp.zeros(ctas * f * 2, dtype=cp.uint64)
        clk = cp.zeros(4, dtype=cp.uint64)
        flag = cp.zeros(1, dtype=cp.uint32)
        args = (pool, np.uint32(n_tokens), np.uint32(nb), np.uint32(p.mem_warm), np.uint32(seed), np.uint32(nbuf),
                np.uint64(TIMEOUT_NS), lat, span, clk, flag, self.sink)
        fn((ctas,), (128 * f,), args, shared_mem=smem)  # warm-up launch
        lats, bpc, gbps, ms, mhz = [], [], [], [], []
        useful = rows["useful"] * 64
        for _ in range(p.mem_launches):
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record()
            fn((ctas,), (128 * f,), args, shared_mem=smem)
            e1.record()
            e1.synchronize()
            t_ms = cp.cuda.get_elapsed_time(e0, e1)
            if int(flag.get()[0]):
                raise _Skip("timeout", "an mbarrier wait timed out")
            lats.append(lat.get().astype(np.int64))
            s = span.get().astype(np.int64).reshape(ctas, f, 2)
            cta_span = s[:, :, 1].max(axis=1) - s[:, :, 0].min(axis=1)
            bpc.append(float(np.median(f * nb * useful / np.maximum(cta_span, 1))))
            gbps.append(ctas * f * (nb + p.mem_warm) * useful / (t_ms * 1e6))
            ms.append(t_ms)
            g0, c0, g1, c1 = (int(v) for v in clk.get())
            if g1 > g0:
                mhz.append((c1 - c0) / (g1 - g0) * 1000.0)
        all_lat = np.concatenate(lats)
        out = {"latency_mean": _num(all_lat.mean()), "latency_median": _num(np.median(all_lat)),
                "latency_p10": _num(np.percentile(all_lat, 10)), "latency_p90": _num(np.percentile(all_lat, 90)),
                "bytes_per_cycle_per_sm": _num(_median(bpc)), "gbps": _num(_median(gbps)),
                "kernel_ms": _num(_median(ms)),
                "clock_mhz": _num(_median(mhz)) if mhz else None, "nbuf": nbuf, "bytes_moved_per_row": rows[method]}
        bad = [k for k, v in out.items() if v is None and k != "clock_mhz"]
        if bad:
            raise _Skip("error", f"non-finite {', '.join(bad)} (clock64 spans or event times of zero)")
        return out
