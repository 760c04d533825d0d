"""``simtc crosscheck``: simulator vs hardware, bit for bit."""

from __future__ import annotations

from simtc.cli._common import emit_json


def register(sub) -> None:
    p = sub.add_parser(
        "crosscheck", help="run simtc's models against a real GPU, bit for bit",
        description="Build the hardware executors (always), check their SASS, and on a GPU run every applicable "
                    "check: wgmma over all swizzle modes x majors x N x data distributions, deliberately wrong "
                    "descriptors, and FlashMLA's dual-GEMM split (sm_90a); the tcgen05 dual-GEMM kernel (sm_100a). "
                    "Exits 0 when everything that ran matched; without cupy or a GPU it says so and exits 0.")
    p.add_argument("--arch", choices=("auto", "sm90", "sm100"), default="auto")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.add_argument("--save", metavar="FILE.npz", help="save every raw GPU output (for offline comparison)")
    p.add_argument("--replay", metavar="FILE.npz", help="compare GPU outputs saved earlier with simtc (no GPU needed)")
    p.set_defaults(handler=run)


def run(args) -> int:
    from rich.progress import Progress

    from simtc.hw.crosscheck import run_checks
    from simtc.render.export import make_console

    console = make_console(stderr=True) if args.json else make_console()
    with Progress(console=console, transient=True, disable=args.json) as bar:
        task = bar.add_task("cross-checking", total=None)
        if args.replay:
            from simtc.hw.crosscheck import replay

            results, note = replay(args.replay, progress=lambda n: bar.advance(task, n))
        else:
            results, note = run_checks(args.arch, args.seed, progress=lambda n: bar.advance(task, n),
                                       on_total=lambda n: bar.update(task, total=n))
    failed = any(r.status == "FAIL" for r in results)
    if args.save:
        from simtc.hw.crosscheck import save_outputs

        n = save_outputs(args.save, seed=args.seed, device=note)
        console.print(f"saved {n} GPU outputs to {args.save}")
    if args.json:
        emit_json({"device": note, "results": [r.as_dict() for r in results], "ok": not failed})
    else:
        from simtc.render.hw import CrosscheckTable

        make_console().print(CrosscheckTable(results, note))
    return 1 if failed else 0
