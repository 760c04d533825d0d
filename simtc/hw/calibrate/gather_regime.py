"""FlashMLA's producer gather in the kernel's own regime: the ``memory`` section's LDG gather run the way the
split-KV kernel runs its loads (``python -m simtc.hw.calibrate.gather_regime --out FILE.json``).

The ``memory`` section (:mod:`simtc.hw.calibrate.memory`) times ``simtc_cal_gather_ldg_{v32,model1}``
(``simtc/hw/cuda/calibrate_memory.cu``, method 0: FlashMLA's SM90 producer loads, 22 (V32) or 20 (MODEL1) 16-byte
``ld.global.nc`` a thread per block of 64 random rows, 2 rows a thread, lane ``l`` on row ``l % 8``) with the L1
free (the CTA holds 128 B of shared memory) and rows drawn from the whole 4 GiB pool. FlashMLA's kernel differs in
three ways this module varies, one at a time, with the same kernels:

* **the small L1** -- the kernel holds 227 KiB of shared memory (V32), leaving the L1 about 28 KiB: ``smem_kib``
  200 asks for that much dynamic shared memory (unused), as :mod:`simtc.hw.l1_probe`'s ``-s200`` configurations;
* **the chip's share** -- the kernel runs ``num_sm_parts x s_q`` CTAs, one per SM (132 at b x s_q large, fewer
  SMs busy when a call's splits do not fill them): ``ctas`` 1 to 132;
* **L2 reuse** -- a batch's ``s_q`` queries gather from the same ``s_k`` tokens at the same time
  (:func:`simtc.kernels.flashmla.predict.dram_fraction`): ``tokens`` limits the rows drawn to the first ``tokens``
  of the pool; with ``tokens = 32768 x 132 / s`` the 132 CTAs draw from as many distinct rows as ``s_q = s``
  queries of 132 / s batches of 32,768 tokens do (the repeats spread over all CTAs instead of over each batch's
  queries: an approximation of the kernel's pattern, stated).

A fourth set (``--set inflight``, :data:`INFLIGHT_CONFIGS`) measures the L1's loads in flight: one CTA with 1 to 4
warpgroups (``warpgroups``: 1 to 4 blocks in flight, each warpgroup its own loop and named barrier), L1 sizes from
the whole 256 KiB to the kernel's 28 KiB (``smem_kib`` 0, 100, 164, 196, 200: carve-outs 0, 100, 164, 196, 228 KiB)
and rows from HBM and from L2. Little's law reads the SM's limit off it: a limit of ``N`` lines (or sectors) in
flight, each held for its round trip ``L``, caps the rate at ``N / L``, so the same L1 streams L2's shorter round
trip faster, and more warpgroups stop helping once the limit binds.

Each configuration: one warm-up launch, then ``launches`` timed ones of ``blocks`` blocks (after ``warm`` untimed
blocks) per warpgroup, ``warpgroups`` warpgroups (blocks in flight) per CTA. Per block the kernel reports the cycles
from its first load to the barrier after its data arrived (``latency_*``: clock64 of thread 0 of the warpgroup), and
per warpgroup the span from the first measured block's start to the last one's end (``cycles_per_block``: the median
over warpgroups of span / blocks, the loop's rate including the address arithmetic between blocks). The SM clock is
CTA 0's clock64 against ``%globaltimer``. The recordings are ``tests/data/h200_gather_regime.json`` and
``tests/data/h200_gather_inflight.json`` (``tests/data/README_h200_held_out.md``); the engine runs the same loop
as a Program (:func:`simtc.kernels.gathers.gather_program`) in ``tests/kernels/test_prediction_bands.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from attrs import frozen

from simtc.errors import SimtcError

__all__ = ["CONFIGS", "INFLIGHT_CONFIGS", "SETS", "RegimeConfig", "main", "run"]

POOL_BYTES = 4 << 30
L2_POOL_BYTES = 8 << 20
S_K = 32768
"""Tokens of one batch element in FlashMLA's benchmark and :mod:`simtc.hw.flashmla_timing`."""


@frozen
class RegimeConfig:
    """One run of the LDG gather: ``fmt`` (``v32`` / ``model1``), ``ctas`` (one per SM), ``smem_kib`` of shared
    memory held (0: the L1 free; 200: the kernel's small L1), ``tokens`` the rows are drawn from (0: the whole
    4 GiB pool), ``pool`` (``hbm``, or ``l2``: an 8 MiB pool read once before, so L2 serves every row)."""

    fmt: str
    ctas: int
    smem_kib: int = 200
    tokens: int = 0
    pool: str = "hbm"
    warpgroups: int = 1
    """Warpgroups per CTA (1 to 4), each gathering its own blocks: the blocks in flight on the SM."""

    @property
    def name(self) -> str:
        tok = f"-t{self.tokens}" if self.tokens else ""
        wg = f"-w{self.warpgroups}" if self.warpgroups != 1 else ""
        return f"{self.fmt}-c{self.ctas}-s{self.smem_kib}-{self.pool}{tok}{wg}"


CONFIGS: tuple[RegimeConfig, ...] = tuple(
    c for fmt in ("v32", "model1") for c in (
        RegimeConfig(fmt, 132, 0), RegimeConfig(fmt, 132), RegimeConfig(fmt, 66), RegimeConfig(fmt, 33),
        RegimeConfig(fmt, 8), RegimeConfig(fmt, 1), RegimeConfig(fmt, 132, pool="l2"),
        RegimeConfig(fmt, 132, tokens=S_K * 132), RegimeConfig(fmt, 132, tokens=S_K * 66),
        RegimeConfig(fmt, 132, tokens=S_K * 33)))
"""Per format: the ``memory`` section's own configuration (132 CTAs, L1 free) as a cross-check, then the small L1
at 132 / 66 / 33 / 8 / 1 CTAs from HBM, from L2, and with the rows of 132 / 66 / 33 batches of 32,768 tokens
(``s_q`` = 1, 2, 4)."""

INFLIGHT_CONFIGS: tuple[RegimeConfig, ...] = tuple(
    c for fmt in ("v32", "model1") for c in (
        *(RegimeConfig(fmt, 1, s) for s in (0, 100, 164, 196, 200)),
        *(RegimeConfig(fmt, 1, s, warpgroups=w) for s in (0, 200) for w in (2, 3, 4)),
        *(RegimeConfig(fmt, 1, s, pool="l2", warpgroups=w) for s in (0, 200) for w in (1, 2, 4)),
        *(RegimeConfig(fmt, c, 200, warpgroups=w) for c in (8, 132) for w in (2, 4)),
        RegimeConfig(fmt, 132, 0, warpgroups=2), RegimeConfig(fmt, 132, 200, pool="l2", warpgroups=2)))
"""Per format, the L1's loads in flight (see the module text): one CTA at five L1 sizes; 1 to 4 warpgroups with the
L1 free and with the kernel's small L1, from HBM and from L2; 2 and 4 warpgroups on 8 and 132 SMs."""
SETS = {"regime": CONFIGS, "inflight": INFLIGHT_CONFIGS}


def _n_tokens(fmt: str, pool_bytes: int) -> int:
    return pool_bytes // 656 if fmt == "v32" else (pool_bytes // 37440) * 64


def run(configs=CONFIGS, *, blocks: int = 64, warm: int = 4, launches: int = 3, seed: int = 20261203,
        set_name: str = "regime") -> dict:
    """Time each configuration on the current GPU (cupy): the recording (see the module text)."""
    from simtc.hw.device import require

    dev = require("sm_90a")
    import cupy as cp
    import numpy as np

    from simtc.hw.calibrate.benchmarks import _GATHER, TIMEOUT_NS
    from simtc.hw.calibrate.sources import _cubin
    from simtc.hw.compile import cache_dir

    path = cache_dir() / "gather_regime_memory.cubin"
    path.write_bytes(_cubin("memory"))
    mod = cp.RawModule(path=str(path))
    touch = mod.get_function("simtc_cal_touch")
    pools = {"hbm": cp.empty(POOL_BYTES, dtype=cp.uint8), "l2": cp.empty(L2_POOL_BYTES, dtype=cp.uint8)}
    sink = cp.zeros(1 << 20, dtype=cp.uint32)
    rows = []
    for c in configs:
        if c.fmt not in ("v32", "model1") or not 1 <= c.ctas <= dev.sms or not 1 <= c.warpgroups <= 4:
            raise SimtcError(f"{c.name}: format v32/model1, 1 to {dev.sms} CTAs, 1 to 4 warpgroups",
                             rule="the gather regime's configs")
        wg = c.warpgroups
        fn = mod.get_function(_GATHER[("ldg", c.fmt)])
        smem = max(128, c.smem_kib * 1024)
        if smem > 48 * 1024:
            fn.max_dynamic_shared_size_bytes = smem
        pool = pools[c.pool]
        n_tok = _n_tokens(c.fmt, pool.size - 4096)
        if c.tokens:
            n_tok = min(n_tok, c.tokens)
        if c.pool == "l2":
            touch((dev.sms,), (256,), (pool, np.uint64(pool.size // 16), sink))
        lat = cp.zeros(c.ctas * wg * blocks, dtype=cp.uint64)
        span = cp.zeros(c.ctas * wg * 2, dtype=cp.uint64)
        clk = cp.zeros(4, dtype=cp.uint64)
        flag = cp.zeros(1, dtype=cp.uint32)
        lats, per_block, mhz, ms = [], [], [], []
        for i in range(launches + 1):
            args = (pool, np.uint32(n_tok), np.uint32(blocks), np.uint32(warm), np.uint32(seed + 7919 * i),
                    np.uint32(0), np.uint64(TIMEOUT_NS), lat, span, clk, flag, sink)
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record()
            fn((c.ctas,), (128 * wg,), args, shared_mem=smem)
            e1.record()
            e1.synchronize()
            if not i:
                continue  # the warm-up launch
            lats.append(lat.get().astype(np.int64))
            s = span.get().astype(np.int64).reshape(c.ctas * wg, 2)
            per_block.append(float(np.median((s[:, 1] - s[:, 0]) / blocks)))
            g0, c0, g1, c1 = (int(v) for v in clk.get())
            if g1 > g0:
                mhz.append((c1 - c0) / (g1 - g0) * 1000.0)
            ms.append(cp.cuda.get_elapsed_time(e0, e1))
        every = np.concatenate(lats)
        rows.append({"name": c.name, "format": c.fmt, "ctas": c.ctas, "warpgroups": wg, "smem_kib": c.smem_kib,
                     "pool": c.pool,
                     "tokens": int(n_tok), "blocks": blocks, "warm": warm, "launches": launches,
                     "latency_median": float(np.median(every)), "latency_p10": float(np.percentile(every, 10)),
                     "latency_p90": float(np.percentile(every, 90)),
                     "cycles_per_block": round(float(np.median(per_block)), 1), "per_launch": per_block,
                     "clock_mhz": round(float(np.median(mhz)), 1) if mhz else None,
                     "kernel_ms": round(float(np.median(ms)), 4)})
    pools.clear()
    cp.get_default_memory_pool().free_all_blocks()
    return {"format": "simtc-gather-regime", "version": 1,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "device": {"name": dev.name, "arch": dev.arch, "sms": dev.sms},
            "command": "python -m simtc.hw.calibrate.gather_regime --out FILE.json"
                       + (f" --set {set_name}" if set_name != "regime" else ""),
            "kernels": "simtc/hw/cuda/calibrate_memory.cu simtc_cal_gather_ldg_v32 / _model1 (method 0)",
            "method": __doc__.split("\n\n")[1].replace("\n", " "), "configs": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m simtc.hw.calibrate.gather_regime",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--launches", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated config names (default: all of the set)")
    ap.add_argument("--set", default="regime", choices=sorted(SETS),
                    help="regime: the kernel's regime (default); inflight: the L1's loads in flight")
    a = ap.parse_args(argv)
    wanted = [n for n in a.only.split(",") if n]
    configs = SETS[a.set]
    try:
        unknown = sorted(set(wanted) - {c.name for c in configs})
        if unknown:
            raise SimtcError(f"--only {', '.join(unknown)}: no such configuration", rule="the gather regime's configs")
        rec = run([c for c in configs if not wanted or c.name in wanted], launches=a.launches, set_name=a.set)
    except SimtcError as e:
        print(f"python -m simtc.hw.calibrate.gather_regime: error: {e}", file=sys.stderr)
        return 2
    with open(a.out, "w") as f:
        json.dump(rec, f, indent=1)
    for r in rec["configs"]:
        print(f"{r['name']:32s} {r['cycles_per_block']:9.1f} cycles/block  latency {r['latency_median']:9.1f}  "
              f"{r['clock_mhz']} MHz", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
