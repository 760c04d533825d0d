"""``simtc replay flashmla-head64``: the whole FlashMLA SM100 head64 decode kernel on seeded data, checked.

``simtc replay flashmla-head64 [--model v32|model1] [--blocks B] [--seed S] [--timing-only [--rescale-blocks
LIST]] [--step [N] | --step-to N] [--svg FILE] [--trace FILE.json] [--json] [--mutate NAME] [--list-mutations]`` runs
:func:`simtc.kernels.flashmla.replay.replay` on the engine and prints its summary (or, with ``--json``,
``{"model", "blocks", "instructions", "per_block", "cycles", "cycles_per_block", "tmem_columns", "smem_bytes",
"o_rel_error", "lse_max_abs_error", "p_bit_exact", "rescale_blocks", "rescale_source", "hazards", "deadlock",
"events", "wall_seconds", "inputs_seconds", "check_seconds", ...}``).

* ``--mutate NAME`` seeds one bug of :mod:`simtc.kernels.flashmla.mutations` (``--list-mutations``
  lists them): the replay must catch it, so the exit status is then 1.
* ``--timing-only`` builds no data: which blocks take the lazy O rescale (data dependent) is then an
  assumption, ``--rescale-blocks LIST`` (default none); the output says so (``rescale_source`` "assumed").
* ``--step [N]`` steps through the replay (:func:`simtc.kernels.flashmla.replay.stepper`, data and numerics
  on): interactive when standard input is a terminal, otherwise the first N events (default 40) and the state
  after them; ``--step-to N [--json]`` prints the state after N events (:mod:`simtc.cli._step`).
* ``--svg FILE`` writes the run's timeline (one row per warp, unit and mbarrier) as SVG.
* ``--trace FILE.json`` writes the run as a Chrome/Perfetto trace (:mod:`simtc.render.perfetto`).
* ``--inputs FILE.npz [--save-outputs OUT.npz]`` replays every (batch, query) row of a file in FlashMLA's own
  format instead of seeded data (:mod:`simtc.kernels.flashmla.io`, :func:`simtc.cli.inputs.run_replay_inputs`).

An --inputs file fixes the model, the blocks and the data: --model, --blocks or --seed with it is refused. A request
whose memory estimate (:func:`simtc.kernels.flashmla.replay.memory_estimate`) exceeds the memory available is
refused before it starts (:mod:`simtc.cli._progress`); on a terminal a progress bar shows each phase on stderr.

Exit status 0 when every check passes, 1 when one fails or a hazard or deadlock is found (always with
``--mutate``, when the bug is caught), 2 on bad usage.
"""

from __future__ import annotations

from simtc.cli._common import int_in, output_path, svg_path

__all__ = ["register", "run"]

KERNELS = ("flashmla-head64",)
SEEDED = {"model": "v32", "blocks": 4, "seed": 0}
"""What a seeded replay takes when --model, --blocks or --seed is not given (an --inputs file fixes all three)."""


def register(sub) -> None:
    p = sub.add_parser("replay", help="replay a whole kernel on seeded data and check it (FlashMLA head64)",
                       description="Replay FlashMLA's SM100 sparse-decode head64 kernel (six roles, 384 threads) on "
                                   "seeded inputs through the engine; check O and LSE against a float64 reference, P "
                                   "bit-exact, instruction counts, TMEM columns, hazards. Exit 0 when all pass, 1 "
                                   "otherwise, 2 on bad usage.")
    p.add_argument("kernel", choices=KERNELS, help="the kernel to replay")
    p.add_argument("--model", choices=("v32", "model1"), default=None,
                   help=f"kernel configuration (default {SEEDED['model']}; an --inputs file names its own)")
    p.add_argument("--blocks", type=int_in(1, 4096, "blocks is an integer 1-4096"), default=None,
                   help=f"top-k blocks of 64 tokens in the request (default {SEEDED['blocks']}; an --inputs file's "
                        "topk sets them)")
    p.add_argument("--seed", type=int_in(0, 2**32 - 1, "a seed is an integer 0-4294967295"), default=None,
                   help=f"input seed (default {SEEDED['seed']}; an --inputs file is not seeded)")
    p.add_argument("--timing-only", action="store_true", help="footprints and timing only (no data, no numerics)")
    p.add_argument("--rescale-blocks", type=_block_list, metavar="LIST", default=None,
                   help="with --timing-only: the blocks assumed to take the lazy O rescale, e.g. 2,5 (default: "
                        "none; with data the replay derives them from P)")
    p.add_argument("--json", action="store_true", help="print only machine-readable JSON")
    p.add_argument("--mutate", metavar="NAME", default=None,
                   help="seed one bug of the mutation catalogue (see --list-mutations); exit 1 when it is caught "
                        "(default: the unmutated kernel)")
    p.add_argument("--list-mutations", action="store_true", help="list the mutation catalogue and exit")
    p.add_argument("--schedules", type=int_in(1, 256, "schedules is 1 ... 256"), default=None, metavar="N",
                   help="check the kernel (timing only) under N schedules: the table's timing and N - 1 seeded "
                        "perturbations of every parameter by x0.5-x2; report the first that shows a hazard or a "
                        "deadlock (default: one run)")
    p.add_argument("--schedule-seed", type=int_in(0, 2**32 - 1, "a seed is 0 ... 4294967295"), default=0,
                   metavar="S", help="schedule k > 0 uses seed S + k (default: 0)")
    from simtc.cli._step import add_arguments as add_step_arguments

    add_step_arguments(p)
    p.add_argument("--svg", type=svg_path, metavar="FILE.svg", default=None,
                   help="write the run's timeline as SVG to FILE (default: none)")
    p.add_argument("--trace", type=output_path, metavar="FILE.json", default=None,
                   help="write the run as a Chrome/Perfetto trace (Trace Event Format JSON: open it in "
                        "ui.perfetto.dev or chrome://tracing; simtc.render.perfetto) (default: none)")
    p.add_argument("--inputs", metavar="FILE.npz", default=None,
                   help="replay every (batch, query) row of a FlashMLA inputs file (docs/flashmla_formats.md; "
                        "'simtc inputs make' writes one); model and blocks come from the file (default: seeded)")
    p.add_argument("--save-outputs", type=output_path, metavar="FILE.npz", default=None,
                   help="with --inputs: write the kernel's outputs (out, lse) in FlashMLA's format (default: none)")
    p.set_defaults(handler=run)


def _block_list(text: str) -> list[int]:
    """``--rescale-blocks 2,5`` -> [2, 5] (an empty string: no block)."""
    import argparse

    try:
        return [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a comma-separated list of block indices, e.g. 2,5") from None


def _list_mutations(as_json: bool) -> int:
    from simtc.cli._common import emit_json
    from simtc.kernels.flashmla.mutations import CATALOGUE

    if as_json:
        emit_json([{"name": m.name, "text": m.text, "caught_by": m.caught_by, "ref": m.ref}
                   for m in CATALOGUE.values()])
        return 0
    import shutil
    import textwrap

    width = max(40, shutil.get_terminal_size((100, 24)).columns)
    for m in CATALOGUE.values():
        print(m.name)
        print(textwrap.fill(f"{m.text}. Caught by: {m.caught_by} [{m.ref}]", width, initial_indent="    ",
                            subsequent_indent="    "))
    return 0


def run(args) -> int:
    from simtc.cli._common import emit_json

    if args.list_mutations and args.mutate is not None:
        from simtc.cli._common import UsageError

        raise UsageError(f"--list-mutations lists the catalogue and runs nothing; it takes no --mutate "
                         f"{args.mutate!r}", rule="--list-mutations stands alone (see 'simtc replay --help')")
    from simtc.cli._step import check_arguments

    check_arguments(args)
    if args.list_mutations:
        return _list_mutations(args.json)
    if args.mutate is not None:
        from simtc.errors import SimtcError
        from simtc.kernels.flashmla.mutations import MUTATIONS

        if args.mutate not in MUTATIONS:
            raise SimtcError(f"unknown mutation {args.mutate!r}; known: {', '.join(sorted(MUTATIONS))}",
                             rule="mutations come from simtc.kernels.flashmla.mutations (--list-mutations)")
    transform = None
    if args.mutate is not None:
        from simtc.kernels.flashmla.mutations import mutate

        name = args.mutate

        def transform(program):
            return mutate(program, name)
    if args.rescale_blocks is not None and not args.timing_only:
        from simtc.errors import SimtcError

        raise SimtcError("--rescale-blocks is an assumption for --timing-only runs; with data the replay derives "
                         "the rescaled blocks from P", rule="replay --rescale-blocks needs --timing-only")
    if args.trace is not None and (args.schedules is not None or args.inputs is not None or args.step is not None
                                   or args.step_to is not None):
        from simtc.cli._common import UsageError

        raise UsageError("--trace writes the trace of one seeded replay run to its end",
                         rule="--trace does not combine with --schedules, --inputs, --step or --step-to")
    if args.schedules is not None:
        return _schedules(args, transform)
    if args.inputs is not None or args.save_outputs is not None:
        from simtc.cli.inputs import run_replay_inputs

        return run_replay_inputs(args, transform)
    for key, value in SEEDED.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    from simtc.cli._progress import check_memory
    from simtc.kernels.flashmla.replay import memory_estimate

    stepping = args.step is not None or args.step_to is not None
    check_memory(memory_estimate(args.model, args.blocks, timing_only=args.timing_only and not stepping),
                 f"replay --blocks {args.blocks}{' --timing-only' if args.timing_only else ''}")
    if stepping:
        from simtc.cli._step import run_stepper
        from simtc.kernels.flashmla.replay import stepper

        return run_stepper(stepper(args.model, args.blocks, args.seed, transform=transform), args)
    from simtc.cli._progress import progress
    from simtc.kernels.flashmla.replay import replay

    with progress(args.json) as tell:
        r = replay(args.model, args.blocks, args.seed, timing_only=args.timing_only, transform=transform,
                   keep_engine=args.svg is not None or args.trace is not None, rescale=args.rescale_blocks,
                   progress=tell)
    if args.svg is not None:
        from simtc.cli._common import write_svg
        from simtc.render.timeline import TimelineView

        write_svg(TimelineView(r.engine), args.svg,
                  title=f"FlashMLA head64 {r.model.upper()}, {r.blocks} block(s)")
    if args.trace is not None:
        from simtc.render.perfetto import write_chrome_trace

        write_chrome_trace(r.engine, args.trace, announce=True)
    if args.json:
        out = r.to_json()
        if args.mutate is not None:
            out["mutation"] = args.mutate
        emit_json(out)
    else:
        if args.mutate is not None:
            print(f"mutation {args.mutate}: {'NOT caught' if r.ok else 'caught'}")
        print(_fit(r.summary()))
    return 0 if r.ok else 1


def _schedules(args, transform) -> int:
    """``--schedules N``: the kernel's Program (mutated with ``--mutate``; the rescaled blocks of the seeded data, or
    ``--rescale-blocks``) checked under N schedules (simtc.engine.schedules.explore, timing only)."""
    from simtc.cli._common import UsageError, emit_json
    from simtc.cli._progress import progress
    from simtc.engine.parameters import Timing
    from simtc.engine.schedules import explore
    from simtc.kernels.flashmla.head64 import is_known_race
    from simtc.kernels.flashmla.replay import replay

    for flag in ("step", "step_to", "svg", "inputs", "save_outputs"):
        if getattr(args, flag, None) is not None:
            raise UsageError(f"--schedules checks timing-only runs; --{flag.replace('_', '-')} needs one replay",
                             rule="--schedules does not combine with --step, --step-to, --svg, --inputs or "
                                  "--save-outputs")
    for key, value in SEEDED.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    with progress(args.json) as tell:
        if tell is not None:
            tell("schedules", 0, args.schedules)
        base = replay(args.model, args.blocks, args.seed, timing_only=True, transform=transform, keep_engine=True,
                      rescale=args.rescale_blocks)
        report = explore(base.engine.program, args.schedules, args.schedule_seed, timing=Timing("sm100"),
                         known=is_known_race(base.engine.program))
    if args.json:
        out = dict(report.to_json(), model=args.model, blocks=args.blocks, schedule_seed=args.schedule_seed)
        if args.mutate is not None:
            out["mutation"] = args.mutate
        emit_json(out)
    else:
        bad = report.first_failing
        n = len(report.runs)
        head = f"FlashMLA head64 {args.model.upper()}, {args.blocks} block(s), {n} schedule(s): "
        known = sorted({rule for run in report.runs for rule in run.get("known", ())})
        if bad is None:
            text = head + "all clean" + (f" (besides the kernel's own known race: {', '.join(known)})" if known else "")
        else:
            seed = "none: the table's timing" if bad["seed"] is None else str(bad["seed"])
            text = (head + f"schedule {bad['schedule']} (seed {seed}) shows {', '.join(bad['rules']) or 'no hazard'}"
                    + (" and a deadlock" if bad["deadlock"] else ""))
        if args.mutate is not None:
            text = f"mutation {args.mutate}: {'NOT caught' if bad is None else 'caught'}; " + text
        print(_fit(text))
    return 0 if report.first_failing is None else 1


def _fit(text: str) -> str:
    """``text`` wrapped to the terminal width, each line's indent kept for its continuation lines."""
    import shutil
    import textwrap

    width = max(40, shutil.get_terminal_size((100, 24)).columns)
    out = []
    for line in text.splitlines():
        indent = line[:len(line) - len(line.lstrip())]
        out += textwrap.wrap(line, width, subsequent_indent=indent + "  ") or [""]
    return "\n".join(out)
