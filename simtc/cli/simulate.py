"""``simtc simulate``: run a Program on the cycle-level engine and check it for hazards.

``simtc simulate NAME|FILE.json`` runs a registered Program (``simtc program --list``; the
hazard catalogue ``hazard/<name>``) or a Program's JSON. Exit status: 0 when the run is clean,
1 when a hazard or a deadlock is found, 2 on bad usage. ``--json`` prints ``{"cycles", "events",
"wall_seconds", "hazards": [{"rule", "cycle", "first", "second", "ref"}], "deadlock",
"per_role", "units"}``; otherwise the timeline and the hazard reports are printed. ``--trace FILE.json`` writes
the run (to its end, or to ``--until``) as a Chrome/Perfetto trace (:mod:`simtc.render.perfetto`).
"""

from __future__ import annotations

import sys

from simtc.cli._common import add_output_options, int_in, output_path

__all__ = ["load_program", "register", "run"]


def register(sub) -> None:
    p = sub.add_parser("simulate", help="run a program on the cycle-level engine (timeline, hazards, deadlocks)",
                       description="Run a Program cycle by cycle: warps as processes, the tensor pipe, TMA, TMEM "
                                   "and shared-memory units, mbarriers; check hazards and deadlocks. Exit 0 clean, "
                                   "1 on hazards or deadlock, 2 on bad usage.")
    p.add_argument("program", metavar="NAME|FILE.json", help="a registered program name or a program JSON file")
    p.add_argument("--timing-only", action="store_true",
                   help="footprints and timing only (no data); default: records also execute on a CTA state")
    p.add_argument("--until", type=int_in(0, None, "a cycle is a non-negative integer"), default=None,
                   metavar="CYCLE", help="stop at this cycle (default: run to the end)")
    from simtc.cli._step import add_arguments as add_step_arguments

    add_step_arguments(p)
    p.add_argument("--arch", choices=("sm100", "sm90"), default="sm100", help="timing parameter table")
    p.add_argument("--schedules", type=int_in(1, 1024, "schedules is 1 ... 1024"), default=None, metavar="N",
                   help="run N schedules (the table's timing, then N - 1 seeded perturbations of every parameter "
                        "by x0.5-x2) and report the first that shows a hazard or a deadlock (default: one run and "
                        "its timeline)")
    p.add_argument("--schedule-seed", type=int_in(0, 2**32 - 1, "a seed is 0 ... 4294967295"), default=0,
                   metavar="S", help="schedule k > 0 uses seed S + k (default: 0)")
    add_output_options(p)
    p.add_argument("--trace", type=output_path, metavar="FILE.json", default=None,
                   help="write the run as a Chrome/Perfetto trace (Trace Event Format JSON: open it in "
                        "ui.perfetto.dev or chrome://tracing; simtc.render.perfetto) (default: none)")
    p.set_defaults(handler=run)


def load_program(source: str):
    """A registry name, a ``hazard/<name>`` of the catalogue, or a program JSON file."""
    from simtc.cli.program import load
    from simtc.kernels import hazards, registry

    if source in hazards.PROGRAMS and source not in registry.PROGRAMS:
        return hazards.build(source)
    return load(source)


def _semantics_setup(program):
    """A CTA state for semantics mode: the barrier table initialised; a Program that never allocates
    Tensor Memory runs after the kernel's setup allocation (all 512 columns, FlashMLA
    ``csrc/sm100/decode/head64/kernel.cuh`` lines 63-65 at ``9241ae3``)."""
    from simtc.isa import Alloc, RelinquishAllocPermit
    from simtc.semantics import Cta, execute

    cta = Cta()
    cta.init_barriers(program)
    if not any(isinstance(r, Alloc) for role in program.roles for r in role.records):
        execute(Alloc(512, 0), cta, warp=0)
        execute(RelinquishAllocPermit(), cta, warp=0)
    return cta


def run(args) -> int:
    from simtc.cli._common import emit_json, write_svg
    from simtc.cli._step import check_arguments
    from simtc.engine.core import Engine
    from simtc.render.timeline import TimelineView

    check_arguments(args)
    program = load_program(args.program)
    mode = "timing" if args.timing_only else "semantics"
    if args.trace is not None and (args.schedules is not None or args.step is not None or args.step_to is not None):
        from simtc.cli._common import UsageError

        raise UsageError("--trace writes the trace of one run", rule="--trace does not combine with --schedules, "
                         "--step or --step-to")
    if args.schedules is not None:
        return _schedules(args, program, mode)
    if args.step is not None or args.step_to is not None:
        from simtc.cli._common import UsageError
        from simtc.cli._step import run_stepper
        from simtc.engine.stepper import Stepper

        if args.until is not None:
            raise UsageError("--until stops a whole run; --step and --step-to stop at an event",
                             rule="--until does not combine with --step or --step-to")
        cta = _semantics_setup(program) if mode == "semantics" else None
        return run_stepper(Stepper.for_program(program, mode=mode, arch=args.arch, cta=cta), args)
    cta = _semantics_setup(program) if mode == "semantics" else None
    eng = Engine(program, mode=mode, arch=args.arch, cta=cta)
    eng.run(until=args.until)
    summary = eng.summary()
    if eng.semantics_errors:
        summary["semantics_errors"] = eng.semantics_errors
    if getattr(args, "svg", None):
        write_svg(TimelineView(eng), args.svg, width=args.term_width, title=program.name)
    if args.trace is not None:
        from simtc.render.perfetto import write_chrome_trace

        write_chrome_trace(eng, args.trace, announce=True)
    if args.json:
        emit_json(summary)
    else:
        from simtc.render.export import print_view
        from simtc.render.lines import LinesView

        print_view(TimelineView(eng, hazards=False), width=args.term_width)  # the hazards follow, once, below
        print_view(LinesView(lambda width: _report_lines(eng, program.name, summary, width)), width=args.term_width)
        for s in eng.semantics_errors:
            print(f"note: cycle {s['cycle']}: the semantics layer refused {s['record']}: {s['error']}",
                  file=sys.stderr)
    return 0 if eng.clean else 1


def _schedules(args, program, mode: str) -> int:
    """``--schedules N``: the Program under N schedules (simtc.engine.schedules.explore); exit 1 if any showed a
    hazard or a deadlock, with the seed that reproduces the first."""
    from simtc.cli._common import UsageError, emit_json
    from simtc.cli._progress import progress
    from simtc.engine.parameters import Timing
    from simtc.engine.schedules import explore

    for flag in ("step", "step_to", "until", "svg"):
        if getattr(args, flag, None) is not None and getattr(args, flag, None) is not False:
            raise UsageError(f"--schedules runs each schedule to its end; --{flag.replace('_', '-')} shows one run",
                             rule="--schedules does not combine with --step, --step-to, --until or --svg")
    with progress(args.json) as update:
        if update is not None:
            update("schedules", 0, args.schedules)
        report = explore(program, args.schedules, args.schedule_seed, timing=Timing(args.arch), mode=mode,
                         cta_factory=(lambda: _semantics_setup(program)) if mode == "semantics" else None)
    if args.json:
        emit_json(dict(report.to_json(), program=program.name, schedule_seed=args.schedule_seed))
    else:
        import textwrap

        bad = report.first_failing
        n = len(report.runs)
        cycles = [r["cycles"] for r in report.runs]
        text = f"{program.name}: {n} schedule(s), {min(cycles)}-{max(cycles)} cycles; "
        if bad is None:
            text += "all clean"
        else:
            seed = "none: the table's timing" if bad["seed"] is None else str(bad["seed"])
            failing = sum(1 for r in report.runs if r["rules"] or r["deadlock"])
            text += (f"schedule {bad['schedule']} (seed {seed}) shows {', '.join(bad['rules']) or 'no hazard'}"
                     + (" and a deadlock" if bad["deadlock"] else "") + f"; {failing} of {n} schedules show one")
        print("\n".join(textwrap.wrap(text, args.term_width or 100, subsequent_indent="    ")))
    return 0 if report.first_failing is None else 1


def _report_lines(eng, name: str, summary: dict, width: int) -> list[str]:
    """The run's result in words, wrapped to ``width``: cycles, every hazard, the deadlock and who would arrive."""
    import textwrap

    def wrap(text: str, indent: str = "") -> list[str]:
        return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent + "    ")

    out = wrap(f"{name}: {summary['cycles']} cycles, {summary['events']} events"
               f"{'' if eng.finished else ' (stopped at --until)'}")
    for h in eng.hazards:
        out += wrap(f"hazard: {h}")
    if eng.deadlock:
        out += wrap("deadlock: " + "; ".join(f"{w['role']}[w{w['warp']}]#{w['index']} waits on {w['waits_on']}"
                                             for w in eng.deadlock["waiting"]))
        for bar, who in eng.deadlock["would_arrive"].items():
            names = ", ".join(f"{w['role']}[w{w['warp']}]#{w['index']} ({w['state']})" for w in who) or "nobody"
            out += wrap(f"{bar} would be arrived on by: {names}", "  ")
    return out
