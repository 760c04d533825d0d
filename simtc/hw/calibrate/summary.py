"""The numbers a cycle model takes from a calibration recording (:func:`summary`).
"""

from __future__ import annotations

import collections

from simtc.hw.calibrate.benchmarks import BULK_BYTES, SECTIONS
from simtc.hw.calibrate.fits import fit_line
from simtc.hw.calibrate.recording import validate


def _ok(m) -> bool:
    return isinstance(m, dict) and m.get("status") == "ok"


def _run_at(m, **match) -> dict | None:
    if not _ok(m):
        return None
    return next((r for r in m.get("runs", []) if all(r.get(k) == v for k, v in match.items())), None)


def summary(recording: dict) -> dict:
    """The numbers a cycle model takes from a recording (only from benchmarks whose SASS check passed and
    that ran; missing ones are absent or null):

    * ``issue_interval``: per CUDA-core class, cycles per warp-step per sub-partition with 4 warps on every
      sub-partition (``cycles_per_step_per_sp`` of the throughput run at warps_per_sp 4); ``latency``: cycles
      per dependent step (one chain, one warp per sub-partition); ``units``: what a step is per class;
      ``pairs``: cycles per interleaved pair per sub-partition at 4 warps per sub-partition;
    * ``smem_bytes_per_cycle``: requested bytes per SM cycle of each LDS/STS form at 4 warps per sub-partition;
      ``smem_bytes_per_cycle_best``: the largest of them; ``lds_latency``: the pointer chase's cycles per load;
      ``wgmma_lds``: cycles per m64n256k16 SS wgmma and shared-memory bytes per cycle of the wgmma chain and of
      the LDS.128 streams, each alone and together, and their sum together (null when not measured);
    * ``memory``: per ``method/format`` — ``unloaded_latency`` (median cycles per block, 1 CTA, 1 block in
      flight, the 4 GiB pool), ``l2_hit_latency`` (the same on the 8 MiB pool), ``loaded`` (every (ctas,
      inflight) of the 4 GiB pool: latency_median, bytes_per_cycle_per_sm, gbps), ``per_sm_bytes_per_cycle``
      and ``chip_gbps`` (the most over blocks in flight, at the largest CTA count);
    * ``memory_latency`` (null when the recording has no latency chases): cycles per dependent access of one
      thread, ``ldg`` {``hbm``, ``l2``, ``l1``} (LDG pointer chase) and ``bulk`` {``hbm``, ``l2``} {``"64"``,
      ``"512"``, ``"2048"``} (dependent ``cp.async.bulk`` copies of that many bytes), and ``bulk_per_byte``
      {``hbm``, ``l2``}: ``cycles_per_byte`` and ``cycles_at_0_bytes`` of a line through the bulk sizes;
    * ``mbarrier_round_trip`` and ``mbarrier_one_way``, ``tma_wake`` (the three medians), ``st_async_round_trip``,
      ``bar_sync`` (cycles per barrier by thread count), ``fence_proxy_async`` (cycles per fence by thread
      count), ``barrier_cluster`` and ``barrier_cluster_relaxed`` (cycles per cluster barrier);
    * ``launch_us``: ``empty_1cta``, ``empty_132cta``, ``group_of_3``, ``host_enqueue``;
    * ``clock_mhz`` (median of the probes), ``device`` (its name), ``sass_failed`` (benchmarks whose SASS
      check failed) and ``not_measured`` (measurements whose status is not ok, with it).
    """
    validate(recording)
    r = recording
    out: dict = {"device": r["device"].get("name"), "clock_mhz": r["clock_mhz"]["median"],
                 "sass_failed": sorted(k for k, v in r["sass"].items() if not v["ok"]), "not_measured": {}}

    def missing(where: str, m) -> None:
        if isinstance(m, dict) and m.get("status") not in (None, "ok"):
            out["not_measured"][where] = m["status"]

    for section in SECTIONS:  # a section that failed as a whole
        missing(section, r[section])
        if isinstance(r[section], dict) and "status" in r[section]:
            r = {**r, section: None}
    cc = r["cuda_core"] or {}
    out["issue_interval"], out["latency"], out["units"] = {}, {}, {}
    for key, c in cc.items():
        missing(f"cuda_core.{key}.throughput", c["throughput"])
        missing(f"cuda_core.{key}.latency", c["latency"])
        run = _run_at(c["throughput"], warps_per_sp=4)
        if run is not None:
            out["issue_interval"][key] = run.get("cycles_per_step_per_sp")
        run = _run_at(c["latency"], warps_per_sp=1)
        if run is not None:
            out["latency"][key] = run["cycles_per_step"]
        out["units"][key] = c.get("unit", "instruction")
    out["pairs"] = {}
    for key, c in (r["cuda_core_pairs"] or {}).items():
        missing(f"cuda_core_pairs.{key}", c["throughput"])
        run = _run_at(c["throughput"], warps_per_sp=4)
        if run is not None:
            out["pairs"][key] = run.get("cycles_per_step_per_sp")
    sm = r["shared_memory"] or {}
    out["smem_bytes_per_cycle"] = {}
    for key, m in sm.items():
        missing(f"shared_memory.{key}", m)
        run = _run_at(m, warps_per_sp=4) if key != "wgmma_lds" else None
        if run is not None and "bytes_per_cycle" in run:
            out["smem_bytes_per_cycle"][key] = run["bytes_per_cycle"]
    best = [v for v in out["smem_bytes_per_cycle"].values() if v is not None]
    out["smem_bytes_per_cycle_best"] = max(best) if best else None
    run = _run_at(sm.get("LDS.32/latency"), threads=32)
    out["lds_latency"] = run["cycles_per_step"] if run else None
    wl = sm.get("wgmma_lds")
    out["wgmma_lds"] = {
        "wgmma_alone_cycles": wl["wgmma_alone"]["cycles_per_wgmma"],
        "wgmma_alone_smem_bytes_per_cycle": wl["wgmma_alone"]["smem_bytes_per_cycle"],
        "lds_alone_bytes_per_cycle": wl["lds_alone"]["bytes_per_cycle"],
        "wgmma_together_cycles": wl["together"]["cycles_per_wgmma"],
        "lds_together_bytes_per_cycle": wl["together"]["lds_bytes_per_cycle"],
        "sum_together_bytes_per_cycle": wl["together"]["sum_bytes_per_cycle"]} if _ok(wl) else None
    out["memory"] = _memory_summary(r["memory"], missing)
    out["memory_latency"] = _latency_summary(r["memory"], missing)
    sy = r["sync"] or {}
    for key, m in sy.items():
        missing(f"sync.{key}", m)
    mp = sy.get("mbarrier_pingpong")
    out["mbarrier_round_trip"] = mp["round_trip_cycles"] if _ok(mp) else None
    out["mbarrier_one_way"] = mp.get("one_way_cycles") if _ok(mp) else None
    sa = sy.get("st_async_pingpong")
    out["st_async_round_trip"] = sa["round_trip_cycles"] if _ok(sa) else None
    tw = sy.get("tma_wake")
    out["tma_wake"] = {k: tw[k]["median"] for k in ("issue_to_self_wake", "issue_to_other_wake", "arrive_to_wake")} \
        if _ok(tw) else None
    out["bar_sync"] = {str(run["threads"]): run["cycles_per_step"] for run in sy.get("bar_sync", {}).get("runs", [])} \
        if _ok(sy.get("bar_sync")) else {}
    out["fence_proxy_async"] = {str(run["threads"]): run["cycles_per_step"]
                                for run in sy.get("fence_proxy_async", {}).get("runs", [])} \
        if _ok(sy.get("fence_proxy_async")) else {}
    for key in ("barrier_cluster", "barrier_cluster_relaxed"):
        run = _run_at(sy.get(key), ctas=2)
        out[key] = run["cycles_per_step"] if run else None
    la = r["launch"] or {}
    out["launch_us"] = {k: (la[k].get("us") if _ok(la.get(k)) else None)
                        for k in ("empty_1cta", "empty_132cta", "group_of_3") if k in la}
    for k in ("empty_1cta", "empty_132cta", "group_of_3"):
        missing(f"launch.{k}", la.get(k))
    if la:
        out["launch_us"]["host_enqueue"] = la.get("host_enqueue_us")
    return out


def _latency_summary(mem, missing) -> dict | None:
    lat = mem.get("latency") if isinstance(mem, dict) else None
    if lat is None:  # not measured, or a recording made before the latency chases existed
        return None
    missing("memory.latency", lat)
    if "status" in lat:
        return None
    out: dict = {"ldg": {pool: None for pool in ("hbm", "l2", "l1")},
                 "bulk": {pool: {str(n): None for n in BULK_BYTES} for pool in ("hbm", "l2")}}
    for key, m in lat["chases"].items():
        missing(f"memory.latency.{key}", m)
        v = m["slope"] if _ok(m) else None
        if m["method"] == "ldg":
            out["ldg"][m["pool"]] = v
        else:
            out["bulk"].setdefault(m["pool"], {})[str(m["bytes"])] = v
    out["bulk_per_byte"] = {}
    for pool, by in out["bulk"].items():
        pts = [(int(n), v) for n, v in by.items() if v is not None]
        fit = fit_line(*zip(*pts, strict=True)) if len(pts) >= 2 else None
        out["bulk_per_byte"][pool] = {"cycles_per_byte": fit[0], "cycles_at_0_bytes": fit[1]} if fit else None
    return out


def _memory_summary(mem, missing) -> dict:
    out: dict = {}
    if not mem or "configs" not in mem:
        return out
    by: dict = collections.defaultdict(list)
    for cfg in mem["configs"]:
        by[f"{cfg['method']}/{cfg['format']}"].append(cfg)
        if cfg["status"] != "ok":
            missing(f"memory.{cfg['method']}/{cfg['format']}/{cfg['pool']}/{cfg['ctas']}x{cfg['inflight']}", cfg)
    for key, cfgs in by.items():
        ok = [c for c in cfgs if c["status"] == "ok"]
        hbm = [c for c in ok if c["pool"] == "hbm"]

        def at(pool, ctas, f, _ok=ok):
            return next((c for c in _ok if c["pool"] == pool and c["ctas"] == ctas and c["inflight"] == f), None)

        u, l2 = at("hbm", 1, 1), at("l2", 1, 1)
        top = max((c["ctas"] for c in hbm), default=None)
        at_top = [c for c in hbm if c["ctas"] == top]
        out[key] = {
            "unloaded_latency": u["latency_median"] if u else None,
            "l2_hit_latency": l2["latency_median"] if l2 else None,
            "loaded": [{"ctas": c["ctas"], "inflight": c["inflight"], "latency_median": c["latency_median"],
                        "bytes_per_cycle_per_sm": c["bytes_per_cycle_per_sm"], "gbps": c["gbps"]}
                       for c in sorted(hbm, key=lambda c: (c["ctas"], c["inflight"]))],
            "per_sm_bytes_per_cycle": max((c["bytes_per_cycle_per_sm"] for c in at_top), default=None),
            "chip_gbps": max((c["gbps"] for c in at_top), default=None),
            "at_ctas": top,
        }
    return out
