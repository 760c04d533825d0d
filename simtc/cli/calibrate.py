"""``simtc calibrate``: microbenchmarks that measure the sm_90a (H100/H200) parameters of the cycle model.

Always builds every selected benchmark and checks its SASS (no GPU needed); on an sm_90a GPU it then
measures and prints a summary (``--json``: the summary and the whole recording), ``--save FILE.json``
writes the recording (rewritten after every section, so an interrupted run keeps what finished).
Without cupy or an sm_90a GPU it says so in one line and exits 0 (1 if a SASS check failed).
"""

from __future__ import annotations

import argparse

from simtc.cli._common import UsageError, emit_json, output_path
from simtc.errors import SimtcError

_SAVE_RULE = "--save records an sm_90a GPU run"


def _sections(text: str) -> list[str]:
    """argparse ``type=`` for ``--only``: a comma-separated list of section (or section-part) names."""
    from simtc.hw.calibrate import SELECTABLE

    names = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in names if s not in SELECTABLE]
    if bad or not names:
        raise argparse.ArgumentTypeError(str(UsageError(
            f"unknown section(s) {', '.join(map(repr, bad)) or '(none given)'}",
            rule=f"sections are {', '.join(SELECTABLE)}")))
    return names


def register(sub) -> None:
    p = sub.add_parser(
        "calibrate", help="measure the sm_90a parameters of the cycle model on an H100/H200 (microbenchmarks)",
        description="Build the calibration microbenchmarks (CUDA-core instruction classes and pairs, shared memory, "
                    "global-memory gathers and dependent-access latency, synchronisation, launch overhead), check "
                    "that each compiled to the SASS "
                    "it measures, and on an sm_90a GPU run them (clock64 inside the kernels, medians of repeated "
                    "launches, slopes over unrolled step counts). Exits 0 when every check passed and every "
                    "measurement ran, 1 otherwise, 2 on bad usage; without cupy or a GPU it says so and exits 0 "
                    "after the SASS checks.")
    p.add_argument("--arch", choices=("sm90", "sm100"), default="sm90",
                   help="the architecture to calibrate (only sm90 has a GPU path)")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON (the summary and the recording)")
    p.add_argument("--save", metavar="FILE.json", type=output_path,
                   help="write the recording (needs an sm_90a GPU) (default: not written)")
    p.add_argument("--quick", action="store_true",
                   help="fewer repeats, iterations and memory configurations (about a minute instead of a few)")
    p.add_argument("--only", metavar="SECTION,...", type=_sections, default=None,
                   help="run only these sections: cuda_core, cuda_core_pairs, shared_memory, memory, sync, launch; "
                        "memory_latency runs only the memory section's latency chases (one thread's dependent LDG "
                        "and cp.async.bulk accesses, a few seconds) (default: all)")
    p.set_defaults(handler=run)


def _command(args) -> str:
    parts = ["simtc calibrate", f"--arch {args.arch}"]
    if args.quick:
        parts.append("--quick")
    if args.only:
        parts.append(f"--only {','.join(args.only)}")
    if args.save:
        parts.append(f"--save {args.save}")
    if args.json:
        parts.append("--json")
    return " ".join(parts)


def run(args) -> int:
    if args.arch == "sm100":
        raise SimtcError("simtc calibrate has no Blackwell (sm_100a) GPU path: its kernels are sm_90a "
                         "microbenchmarks (sm100 timing comes from published B200 figures)",
                         rule="calibrate measures sm_90a (H100/H200) only")
    from rich.console import Console

    from simtc.hw import calibrate as cal
    from simtc.hw.device import probe

    sections = cal._check_sections(args.only or cal.SECTIONS)
    info = probe()
    gpu = info.available and info.arch == cal.ARCH
    why = info.reason if not info.available else f"the device is {info.name} ({info.arch})"
    if args.save and not gpu:
        raise SimtcError(f"nothing to save: no sm_90a GPU here ({why})", rule=_SAVE_RULE)
    err = Console(stderr=True)
    status = err.status("building and checking the benchmarks' SASS", spinner="dots") if not args.json else None
    if status:
        status.start()
    try:
        checks = cal.sass_checks(sections, progress=(lambda m: status.update(f"building and checking {m}"))
                                 if status else None)
    finally:
        if status:
            status.stop()
    failed = sorted(name for name, c in checks.items() if not c.ok)
    if not gpu:
        line = (f"simtc calibrate: nothing measured ({why}); SASS checks: {len(checks) - len(failed)} of "
                f"{len(checks)} benchmarks passed")
        if args.json:
            emit_json({"measured": False, "reason": why, "ok": not failed,
                       "sass": {k: c.as_dict() for k, c in checks.items()}})
        else:
            print(line)
            for name in failed:
                print(f"  SASS check failed: {name}: {'; '.join(checks[name].problems[:3])}")
        return 1 if failed else 0

    def on_section(recording: dict) -> None:
        if args.save:
            cal.save(recording, args.save)

    status = err.status("measuring", spinner="dots") if not args.json else None
    if status:
        status.start()
    try:
        recording = cal.run(sections, quick=args.quick, command=_command(args), checks=checks,
                            progress=(lambda m: status.update(f"measured {m}")) if status else None,
                            on_section=on_section)
    finally:
        if status:
            status.stop()
    summ = cal.summary(recording)
    ok = not failed and not summ["not_measured"]
    if args.json:
        emit_json({"measured": True, "ok": ok, "summary": summ, "recording": recording})
    else:
        _print_summary(Console(), summ, recording)
        if args.save:
            print(f"saved the recording to {args.save}")
    return 0 if ok else 1


def _fmt(v, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _pairs_table(title: str, key: str, value: str, items, digits: int):
    """A two-column table: names and one formatted number each."""
    from rich.table import Table

    t = Table(title=title)
    t.add_column(key)
    t.add_column(value, justify="right")
    for k, v in items:
        t.add_row(k, _fmt(v, digits))
    return t


def _print_summary(console, s: dict, recording: dict) -> None:
    from rich.table import Table

    console.print(f"{s['device']}, SM clock {_fmt(s['clock_mhz'], 0)} MHz, {recording['elapsed_s']:.0f} s "
                  f"({'quick' if recording['quick'] else 'full'} run)", markup=False)
    if s["issue_interval"] or s["latency"]:
        t = Table(title="CUDA-core classes (cycles; issue interval per sub-partition at 4 warps/SP)")
        for col in ("class", "step", "issue interval", "latency"):
            t.add_column(col, justify="left" if col in ("class", "step") else "right")
        for key in s["units"]:
            t.add_row(key, s["units"][key], _fmt(s["issue_interval"].get(key)), _fmt(s["latency"].get(key)))
        console.print(t)
    if s["pairs"]:
        console.print(_pairs_table("Pairs interleaved 1:1 (cycles per pair per sub-partition, 4 warps/SP)", "pair",
                                   "cycles", s["pairs"].items(), 2))
    if s["smem_bytes_per_cycle"]:
        console.print(_pairs_table("Shared memory (B/cycle per SM, 4 warps/SP)", "access", "B/cycle",
                                   s["smem_bytes_per_cycle"].items(), 1))
    if s.get("lds_latency") is not None:
        console.print(f"LDS.32 latency (pointer chase): {_fmt(s['lds_latency'], 1)} cycles", markup=False)
    if s.get("wgmma_lds"):
        w = s["wgmma_lds"]
        console.print(f"wgmma m64n256k16 SS + LDS.128: wgmma {_fmt(w['wgmma_alone_cycles'], 1)} cycles alone "
                      f"({_fmt(w['wgmma_alone_smem_bytes_per_cycle'], 1)} B/cycle), LDS "
                      f"{_fmt(w['lds_alone_bytes_per_cycle'], 1)} B/cycle alone; together wgmma "
                      f"{_fmt(w['wgmma_together_cycles'], 1)} cycles, LDS {_fmt(w['lds_together_bytes_per_cycle'], 1)} "
                      f"B/cycle, sum {_fmt(w['sum_together_bytes_per_cycle'], 1)} B/cycle", markup=False)
    if s["memory"]:
        t = Table(title="Global-memory gathers of 64 rows (cycles per block; B/cycle/SM and GB/s at the most CTAs)")
        for col in ("method/format", "HBM 1x1", "L2 1x1", "B/cycle/SM", "GB/s", "CTAs"):
            t.add_column(col, justify="left" if col == "method/format" else "right")
        for k, m in s["memory"].items():
            t.add_row(k, _fmt(m["unloaded_latency"], 0), _fmt(m["l2_hit_latency"], 0),
                      _fmt(m["per_sm_bytes_per_cycle"], 1), _fmt(m["chip_gbps"], 0), str(m["at_ctas"]))
        console.print(t)
    lat = s.get("memory_latency")
    if lat:
        t = Table(title="Global-memory latency, one thread (cycles per dependent access)")
        for col in ("access", "HBM (4 GiB)", "L2 (8 MiB)", "L1 (64 KiB)"):
            t.add_column(col, justify="left" if col == "access" else "right")
        t.add_row("LDG 8 B", *(_fmt(lat["ldg"].get(pool), 1) for pool in ("hbm", "l2", "l1")))
        for n in sorted({int(k) for by in lat["bulk"].values() for k in by}):
            t.add_row(f"cp.async.bulk {n} B",
                      *(_fmt(lat["bulk"].get(pool, {}).get(str(n)), 1) for pool in ("hbm", "l2")), "")
        for pool, f in lat.get("bulk_per_byte", {}).items():
            if f:
                t.caption = ((t.caption + "; ") if t.caption else "bulk: ") + \
                    f"{pool} {_fmt(f['cycles_at_0_bytes'], 0)} + {_fmt(f['cycles_per_byte'], 3)} cycles/byte"
        console.print(t)
    sync = [("mbarrier round trip", s.get("mbarrier_round_trip")),
            ("st.async round trip", s.get("st_async_round_trip")),
            ("cluster barrier", s.get("barrier_cluster")),
            ("cluster barrier (relaxed arrive)", s.get("barrier_cluster_relaxed"))]
    sync += [(f"bar.sync {n} threads", v) for n, v in s.get("bar_sync", {}).items()]
    sync += [(f"fence.proxy.async ({n} threads)", v) for n, v in s.get("fence_proxy_async", {}).items()]
    if s.get("tma_wake"):
        sync += [(f"TMA 16 B: {k.replace('_', ' ')}", v) for k, v in s["tma_wake"].items()]
    if any(v is not None for _, v in sync):
        console.print(_pairs_table("Synchronisation (cycles)", "what", "cycles", sync, 1))
    if s.get("launch_us"):
        console.print("launch (µs): " + ", ".join(f"{k} {_fmt(v)}" for k, v in s["launch_us"].items()), markup=False)
    for name in s["sass_failed"]:
        console.print(f"SASS check failed (not measured): {name}", markup=False)
    for where, st in s["not_measured"].items():
        console.print(f"not measured: {where} ({st})", markup=False)
