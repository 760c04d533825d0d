"""``simtc crosscheck``: simulator vs hardware, bit for bit (and the wgmma timing model vs the GPU)."""

from __future__ import annotations

from simtc.cli._common import check_writable, emit_json, int_in
from simtc.errors import SimtcError

_CONFLICT = "--replay checks a recording; --save and --save-timing record a GPU run: give one or the other"
_SAVE_RULE = "--save records the outputs of an sm_90a GPU run"


def register(sub) -> None:
    p = sub.add_parser(
        "crosscheck", help="run simtc's models against a real GPU, bit for bit",
        description="Build the hardware executors (always), check their SASS, and on a GPU run every applicable "
                    "check: wgmma over all swizzle modes x majors x N x data distributions, deliberately wrong "
                    "descriptors, special values, FlashMLA's dual-GEMM split and the base-offset experiment, and "
                    "the wgmma timing microbenchmark against the timing model (sm_90a); the tcgen05 dual-GEMM "
                    "kernel (sm_100a). Exits 0 when everything that ran matched, 1 when a check failed, 2 on bad "
                    "usage; without cupy or a GPU it says so and exits 0. With FILE.cu|FILE.ptx and simtc run's "
                    "arguments: that kernel on the GPU (CuPy) and in simtc, every output diffed (exit 0 when all "
                    "are bit-identical, 1 otherwise, 2 without CuPy or a GPU).")
    p.add_argument("--arch", choices=("auto", "sm90", "sm100"), default="auto",
                   help="which GPU checks to run (auto: those of the device found)")
    p.add_argument("--seed", type=int_in(0, 2**31 - 1, "case seeds are 0..2^31-1"), default=0,
                   help="seed of the generated cases")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.add_argument("--no-timing", action="store_true", help="skip the wgmma timing microbenchmark")
    p.add_argument("--save", metavar="FILE.npz",
                   help="record every GPU output of this run (what --replay reads; needs an sm_90a GPU) "
                        "(default: not recorded)")
    p.add_argument("--save-timing", metavar="FILE.json",
                   help="write the wgmma timing measurements as JSON (default: not written)")
    p.add_argument("--replay", metavar="FILE.npz",
                   help="check outputs recorded by --save against simtc, no GPU needed "
                        "(default: run the checks here instead)")
    g = p.add_argument_group("FlashMLA's own kernels (replaces the checks above)")
    g.add_argument("--flashmla", metavar="DIR",
                   help="a FlashMLA checkout (with its csrc/cutlass submodule) or a build folder made from one: build "
                        "FlashMLA's SM90 sparse FP8 decode (sm_90a) and SM100 head64 kernel (sm_100a) with nvcc, check "
                        "their SASS and the head64 SASS against the replay Program, and on an sm_90a GPU run the SM90 "
                        "kernels on simtc-made inputs beside the replay (default: not run)")
    g.add_argument("--cutlass", metavar="DIR",
                   help="CUTLASS headers for --flashmla (default: $SIMTC_FLASHMLA_CUTLASS, else the checkout's "
                        "csrc/cutlass/include)")
    g.add_argument("--build-dir", metavar="DIR",
                   help="where --flashmla builds (default: $SIMTC_CACHE/flashmla/<key>); the folder can be given "
                        "to --flashmla on another machine")
    g.add_argument("--save-flashmla", metavar="FILE.npz",
                   help="record the inputs and FlashMLA's outputs of the --flashmla GPU run (default: not recorded)")
    g.add_argument("--timing", action="store_true",
                   help="with --flashmla on an sm_90a GPU: also time FlashMLA's whole call (scheduler, split-KV, "
                        "combine; CUDA events, L2 flushed, median of 30 after 5 warm-ups) at the shapes of "
                        "simtc.hw.flashmla_timing.TIMING_SHAPES (default: not timed)")
    g.add_argument("--timing-set", choices=("calls", "fixed"), default=None,
                   help="--timing's shapes: calls (14 shapes of both models, what predictions are held against) or "
                        "fixed (small calls measuring the launches, scheduler and combine) (default: calls)")
    g.add_argument("--save-flashmla-timing", metavar="FILE.json",
                   help="write the --timing measurements as JSON (default: not written)")
    g.add_argument("--replay-flashmla", metavar="FILE.npz",
                   help="replay simtc on a --save-flashmla recording and compare with its FlashMLA outputs, no GPU "
                        "needed (default: not run)")
    from simtc.cli.crosscheck_kernel import add_arguments

    add_arguments(p)  # simtc crosscheck FILE.cu --kernel NAME ...: a kernel of your own, GPU vs simtc
    p.set_defaults(handler=run)


def _command(args) -> str:
    parts = ["simtc crosscheck", f"--seed {args.seed}"]
    if args.arch != "auto":
        parts.append(f"--arch {args.arch}")
    if args.no_timing:
        parts.append("--no-timing")
    if args.save:
        parts.append(f"--save {args.save}")
    if args.save_timing:
        parts.append(f"--save-timing {args.save_timing}")
    return " ".join(parts)


def run(args) -> int:
    from simtc.cli import crosscheck_kernel

    if crosscheck_kernel.in_use(args):
        return crosscheck_kernel.run(args)
    if args.flashmla or args.replay_flashmla:
        return _run_flashmla(args)
    for flag in ("cutlass", "build_dir", "save_flashmla", "timing", "timing_set", "save_flashmla_timing"):
        if getattr(args, flag):
            raise SimtcError(f"--{flag.replace('_', '-')} needs --flashmla", rule="FlashMLA options go with --flashmla")
    if args.replay and (args.save or args.save_timing):
        raise SimtcError("--replay cannot be combined with --save or --save-timing", rule=_CONFLICT)
    for path in (args.save, args.save_timing):
        if path is not None:
            check_writable(path)  # before any work
    if args.save_timing and args.no_timing:
        raise SimtcError("--save-timing with --no-timing: nothing would be measured",
                         rule="--save-timing writes the measurements of this run")
    if args.save or args.save_timing:
        from simtc.hw.device import probe

        info = probe()
        if not info.available or info.arch != "sm_90a":
            why = info.reason if not info.available else f"the device is {info.name} ({info.arch})"
            raise SimtcError(f"nothing to save: no sm_90a GPU here ({why})", rule=_SAVE_RULE)

    from rich.progress import Progress

    from simtc.render.export import make_console

    console = make_console(stderr=True) if args.json else make_console()
    if args.replay:
        from simtc.hw.crosscheck import replay
        from simtc.hw.recording import read_recording

        read_recording(args.replay)  # a bad file is refused before the progress bar
    with Progress(console=console, transient=True, disable=args.json) as bar:
        task = bar.add_task("cross-checking", total=None)
        if args.replay:
            result = replay(args.replay, progress=lambda n: bar.advance(task, n))
        else:
            from simtc.hw.crosscheck import run_checks

            result = run_checks(args.arch, args.seed, progress=lambda n: bar.advance(task, n),
                                on_total=lambda n: bar.update(task, total=n), with_timing=not args.no_timing)
    if args.save:
        from simtc.hw.crosscheck import save_run
        from simtc.hw.device import describe

        if not result.outputs:
            raise SimtcError(f"no GPU outputs to save ({result.note}); nothing was written", rule=_SAVE_RULE)
        n = save_run(args.save, result, device=describe(), command=_command(args))
        console.print(f"saved {n} GPU outputs to {args.save}")
    if args.save_timing:
        import json

        from simtc.hw.device import describe

        if result.timing is None:
            raise SimtcError(f"no timing measurements to save ({result.note}); nothing was written",
                             rule="--save-timing writes the measurements of an sm_90a run")
        data = dict(result.timing, device=describe(), command=_command(args))
        with open(args.save_timing, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
        console.print(f"saved wgmma timing ({len(data['rows'])} shapes) to {args.save_timing}")
    if args.json:
        emit_json({"device": result.note, "results": [r.as_dict() for r in result.results], "ok": not result.failed})
    else:
        from simtc.render.hw import CrosscheckTable

        make_console().print(CrosscheckTable(list(result.results), result.note))
    return 1 if result.failed else 0


def _flashmla_command(args) -> str:
    parts = ["simtc crosscheck", f"--flashmla {args.flashmla}", f"--seed {args.seed}"]
    for flag in ("cutlass", "build_dir", "save_flashmla", "save_flashmla_timing"):
        if getattr(args, flag):
            parts.append(f"--{flag.replace('_', '-')} {getattr(args, flag)}")
    if args.timing:
        parts.append("--timing" + (f" --timing-set {args.timing_set}" if args.timing_set else ""))
    return " ".join(parts)


def _run_flashmla(args) -> int:
    """``--flashmla``: build FlashMLA's kernels, check their SASS, and on an sm_90a GPU run them beside the replay;
    ``--replay-flashmla``: compare a recording with the replay."""
    import datetime

    from rich.table import Table

    from simtc.hw import flashmla as fm
    from simtc.render.export import make_console

    if args.flashmla and args.replay_flashmla:
        raise SimtcError("--flashmla runs FlashMLA, --replay-flashmla checks a recording: give one",
                         rule="one FlashMLA mode per run")
    if args.save_flashmla:
        check_writable(args.save_flashmla)
    if args.save_flashmla_timing:
        if not args.timing:
            raise SimtcError("--save-flashmla-timing writes what --timing measures: give --timing too",
                             rule="FlashMLA options go with --flashmla")
        check_writable(args.save_flashmla_timing)
    if args.timing_set and not args.timing:
        raise SimtcError("--timing-set chooses --timing's shapes: give --timing too",
                         rule="FlashMLA options go with --flashmla")
    if args.timing and args.replay_flashmla:
        raise SimtcError("--timing runs FlashMLA on a GPU; --replay-flashmla checks a recording",
                         rule="one FlashMLA mode per run")
    timing: list = []
    console = make_console(stderr=True) if args.json else make_console()
    report: dict = {}
    rows = []
    note = ""
    if args.replay_flashmla:
        meta, _ = fm.load_recording(args.replay_flashmla)
        rows = fm.replay_recording(args.replay_flashmla)
        note = (f"recording {args.replay_flashmla}: FlashMLA {meta.get('flashmla_commit')}, {meta.get('device')}, "
                f"{meta.get('date')}")
        report = {"recording": {k: meta.get(k) for k in ("flashmla_commit", "device", "date", "command")}}
    else:
        b = fm.open_build(args.flashmla, cutlass=args.cutlass, build_dir=args.build_dir,
                          progress=lambda s: console.print(f"[dim]{s}[/dim]") if not args.json else None)
        report = fm.build_report(b)
        from simtc.hw.device import probe

        info = probe()
        if info.available and info.arch == "sm_90a":
            run = fm.run_suite(b, args.seed)
            rows = list(run.rows)
            note = f"FlashMLA SM90 sparse decode on {info.name} ({info.arch})"
            if args.save_flashmla:
                from simtc.hw.device import describe

                fm.save_recording(args.save_flashmla, run, meta={
                    "flashmla_commit": b.commit, "cutlass_commit": b.manifest.get("cutlass_commit"),
                    "nvcc": b.manifest.get("nvcc"), "device": describe(),
                    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                    "command": _flashmla_command(args), "seed": args.seed})
                console.print(f"saved {len(rows)} FlashMLA input sets and outputs to {args.save_flashmla}")
            if args.timing:
                from simtc.hw import flashmla_timing as ft
                from simtc.hw.device import describe

                say = (lambda s: console.print(f"[dim]{s}[/dim]")) if not args.json else None
                timing = ft.run_timing(b, ft.TIMING_SETS[args.timing_set or "calls"], progress=say)
                if args.save_flashmla_timing:
                    ft.save_timing(args.save_flashmla_timing, timing, meta={
                        "flashmla_commit": b.commit, "cutlass_commit": b.manifest.get("cutlass_commit"),
                        "nvcc": b.manifest.get("nvcc"), "device": describe(), "command": _flashmla_command(args)})
                    console.print(f"saved {len(timing)} timed shapes to {args.save_flashmla_timing}")
        else:
            why = info.reason if not info.available else f"the device is {info.name} ({info.arch})"
            if args.save_flashmla or args.save_flashmla_timing:
                raise SimtcError(f"nothing to save: no sm_90a GPU here ({why})",
                                 rule="--save-flashmla and --save-flashmla-timing record an sm_90a GPU run")
            note = f"built and checked only: FlashMLA's SM90 kernels need an sm_90a GPU ({why})"
    ok = all(r.ok for r in rows) and report.get("build_ok", True) and report.get("sass_ok", True)
    if args.json:
        emit_json({**report, "note": note, "results": [r.as_dict() for r in rows],
                   "timing": [t.as_dict() for t in timing], "ok": ok})
        return 0 if ok else 1
    out = make_console()
    if "checks" in report:
        out.print(f"FlashMLA {report['flashmla_commit']} (CUTLASS {report['cutlass_commit']}), {report['nvcc']}, "
                  f"built in {report['build_dir']}")
        for c in report["checks"]:
            mma = f", {c['mma']} x{c['mma_count']}" if c["mma"] else ""
            out.print(f"  {'pass' if c['ok'] else 'FAIL'}  {c['arch']} {c['name']}: {c['kernel']} "
                      f"{'present' if c['kernel_present'] else 'MISSING'}, {c['instructions']} SASS{mma}")
        t = Table(title="SM100 head64: SASS code sites vs the replay Program (static = per request + per block)")
        for col in ("instruction", "model", "SASS", "Program", "per block", "per request", "diff"):
            t.add_column(col, justify="left" if col in ("instruction", "model") else "right")
        for r in report["sass_table"]:
            t.add_row(r["instruction"], r["model"], str(r["sass"]), str(r["program_static"]),
                      str(r["program_per_block"]), str(r["program_per_request"]), str(r["difference"]))
        out.print(t)
        for k, v in fm.SASS_NOTES.items():
            out.print(f"  {k}: {v}", markup=False)
    if rows:
        t = Table(title=f"FlashMLA vs replay (O rel <= {fm.O_TOL:g}, |LSE| <= {fm.LSE_TOL:g}, empty rows identical)")
        for col in ("input set", "model", "b", "s_q", "topk", "O rel", "LSE abs", "empty rows", "status"):
            t.add_column(col, justify="left" if col in ("input set", "model", "status") else "right")
        for r in rows:
            t.add_row(r.name, r.model, str(r.shape[0]), str(r.shape[1]), str(r.shape[2]), f"{r.o_rel:.2e}",
                      f"{r.lse_abs:.2e}", f"{r.empty_rows} {'identical' if r.empty_identical else 'DIFFER'}",
                      "pass" if r.ok else "FAIL")
        out.print(t)
    if timing:
        t = Table(title="FlashMLA SM90 call times (median ms; TFLOP/s over split-KV + combine, FlashMLA's count)")
        for col in ("shape", "parts", "sched", "split-KV", "combine", "call", "TFLOP/s"):
            t.add_column(col, justify="left" if col == "shape" else "right")
        for r in timing:
            t.add_row(r.shape.name, str(r.num_sm_parts), f"{r.sched_ms:.3f}", f"{r.splitkv_ms:.3f}",
                      f"{r.combine_ms:.3f}", f"{r.call_ms:.3f}", f"{r.tflops:.0f}")
        out.print(t)
    out.print(note, markup=False)
    return 0 if ok else 1
