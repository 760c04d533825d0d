"""The CUDA-core and shared-memory sections on the GPU: instruction classes, interleaved pairs, shared-memory
bandwidth and latency, and the wgmma + LDS overlap.
"""

from __future__ import annotations

from simtc.hw.calibrate.benchmarks import (
    ALU_OPS,
    PAIRS,
    WARPS_PER_SP,
    WGMMA_BYTES,
    WGMMA_DEPTHS,
    _pair_key,
    _smem_name,
    benches,
)
from simtc.hw.calibrate.fits import _median, _num, fit_line
from simtc.hw.calibrate.gpu import _GpuBase, _outcome, _Skip


class _Compute(_GpuBase):
    """The ``cuda_core``, ``cuda_core_pairs`` and ``shared_memory`` sections."""

    def cuda_core(self) -> dict:
        out = {}
        shapes = [(1, 128 * k) for k in WARPS_PER_SP]
        by_name = {b.name: b for b in benches()}
        for key, op in ALU_OPS.items():
            out[key] = {"ptx": op.ptx, "sass": dict(op.sass), "unit": op.unit,
                        "throughput": self.step_loop(by_name[f"cuda_core/{key}/throughput"],
                                                     iters=self.p.tp_iters * op.shrink, shapes=shapes),
                        "latency": self.step_loop(by_name[f"cuda_core/{key}/latency"],
                                                  iters=self.p.lat_iters * op.shrink, shapes=shapes)}
        return out

    def cuda_core_pairs(self) -> dict:
        out = {}
        shapes = [(1, 128 * k) for k in WARPS_PER_SP]
        by_name = {b.name: b for b in benches()}
        for a, b in PAIRS:
            key = _pair_key(a, b)
            bench = by_name[f"cuda_core_pairs/{key}"]
            out[key] = {"a": a, "b": b, "sass": dict(bench.per_step),
                        "throughput": self.step_loop(bench, iters=self.p.tp_iters, shapes=shapes)}
        return out

    def shared_memory(self) -> dict:
        out = {}
        shapes = [(1, 128 * k) for k in WARPS_PER_SP]
        by_name = {b.name: b for b in benches()}
        for op in ("LDS", "STS"):
            for bits in (32, 64, 128):
                for ways in (1, 2, 4):
                    name = _smem_name(op, bits, ways)

                    def bw(run, threads, _bits=bits):
                        run["bytes_per_cycle"] = _num(threads * _bits / 8 / run["slope"]) if run["slope"] > 0 else None

                    rec = self.step_loop(by_name[f"shared_memory/{name}"], iters=self.p.smem_iters, shapes=shapes,
                                         extra=bw)
                    out[name] = {"op": op, "bits": bits, "ways": ways, **rec}
        out["LDS.32/latency"] = self.step_loop(by_name["shared_memory/LDS.32/latency"], iters=self.p.lat_iters,
                                               shapes=[(1, 32)], per_sp=False)
        return out

    def wgmma_lds(self) -> dict:
        """A wgmma SS chain alone, LDS.128 streams alone, and both at once (run after every other section)."""
        cp, np = self.cp, self.np
        bench = next(b for b in benches() if b.name == "shared_memory/wgmma+LDS")
        # LDS alone: about as long as the wgmma chains; together: until the wgmma warpgroup raises its flag (the cap,
        # 16 rounds per wgmma, is only a bound: a round of 8 warps x 16 LDS.128 takes far less than 16 wgmmas)
        wg_iters, lds_iters, lds_warps = self.p.tp_iters, 8 * self.p.tp_iters, 8
        rec: dict = {"status": "ok", "reason": None, "n": 256, "bytes_per_wgmma": WGMMA_BYTES, "lds_warps": lds_warps,
                     "wg_iters": wg_iters, "depths": list(WGMMA_DEPTHS), "warm": self.p.warm, "samples": self.p.samples}
        with _outcome(rec):
            self.gate(bench.name)
            from simtc.hw.timing import timing_image

            image, a_desc, b_desc = timing_image(256)
            img = cp.asarray(image.view(np.uint32))
            smem = 1024 + 16384 + 32768 + 128
            wg_cycles: dict = {1: [], 3: []}
            lds_bpc: dict = {2: [], 3: []}
            for v in bench.variants:
                fn = self.fn(bench.module, v.kernel)
                fn.max_dynamic_shared_size_bytes = smem
                for mode in (1, 2, 3):
                    out = cp.zeros((self.p.warm + self.p.samples, 2 + 3 * lds_warps), dtype=cp.uint64)
                    for i in range(self.p.warm + self.p.samples):
                        fn((1,), (384,), (img, np.uint32(image.size // 16), np.uint64(a_desc), np.uint64(b_desc),
                                          np.uint32(mode), np.uint32(wg_iters),
                                          np.uint32(lds_iters if mode == 2 else 16 * wg_iters * v.steps), out[i],
                                          self.sink),
                           shared_mem=smem)
                    o = out.get().astype(np.int64)[self.p.warm:]
                    if mode & 1:
                        wg_cycles[mode].append(float(np.median(o[:, 1] - o[:, 0])))
                    if mode & 2:
                        w = o[:, 2:].reshape(-1, lds_warps, 3)
                        bpc = w[:, :, 2].sum(axis=1) * 16 * 512 / (w[:, :, 1].max(axis=1) - w[:, :, 0].min(axis=1))
                        lds_bpc[mode].append(float(np.median(bpc)))
            x = [wg_iters * d for d in WGMMA_DEPTHS]
            alone, together = fit_line(x, wg_cycles[1])[0], fit_line(x, wg_cycles[3])[0]
            lds_alone, lds_together = _median(lds_bpc[2]), _median(lds_bpc[3])
            rec.update(
                wgmma_alone={"cycles": wg_cycles[1], "cycles_per_wgmma": alone,
                             "smem_bytes_per_cycle": _num(WGMMA_BYTES / alone)},
                lds_alone={"bytes_per_cycle": _num(lds_alone)},
                together={"cycles": wg_cycles[3], "cycles_per_wgmma": together,
                          "wgmma_smem_bytes_per_cycle": _num(WGMMA_BYTES / together),
                          "lds_bytes_per_cycle": _num(lds_together),
                          "sum_bytes_per_cycle": _num(WGMMA_BYTES / together + lds_together)})
            bad = [f"{part}.{k}" for part in ("wgmma_alone", "lds_alone", "together") for k, v in rec[part].items()
                   if v is None]
            if bad:
                raise _Skip("error", f"non-finite {', '.join(bad)}")
            self.progress(bench.name)
        return rec
