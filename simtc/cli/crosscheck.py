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
                    "usage; without cupy or a GPU it says so and exits 0.")
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
