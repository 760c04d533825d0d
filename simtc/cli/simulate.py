"""``simtc simulate``: run a Program on the cycle-level engine and check it for hazards.

``simtc simulate NAME|FILE.json`` runs a registered Program (``simtc program --list``; the
hazard catalogue ``hazard/<name>``) or a Program's JSON. Exit status: 0 when the run is clean,
1 when a hazard or a deadlock is found, 2 on bad usage. ``--json`` prints ``{"cycles", "events",
"wall_seconds", "hazards": [{"rule", "cycle", "first", "second", "ref"}], "hazard_groups", "deadlock",
"per_role", "units", "mode"}``; otherwise the timeline and the hazard reports are printed, grouped by root cause
(:func:`simtc.engine.hazard_groups.group_hazards`: the first hazard of a group, the missing synchronisation, "N
more caused by the same"; ``--all-hazards`` prints every one). ``--trace FILE.json`` writes
the run (to its end, or to ``--until``) as a Chrome/Perfetto trace (:mod:`simtc.render.perfetto`).

Data: records execute on a CTA state (semantics mode) when every TMA source the Program's
``cp.async.bulk.tensor`` loads name has data: ``--tensor NAME=FILE.npy`` gives one (:func:`tensor_sources`
says which the Program has and what each must hold). Without it the run is timing-only, said once on stderr.
"""

from __future__ import annotations

import sys

from simtc.cli._common import add_output_options, int_in, output_path, schedules_summary

__all__ = ["TensorSource", "load_program", "load_tensors", "register", "run", "tensor_sources"]

_TENSOR_RULE = "--tensor NAME=FILE.npy gives a TMA source of the Program its data"


def register(sub) -> None:
    p = sub.add_parser("simulate", help="run a program on the cycle-level engine (timeline, hazards, deadlocks)",
                       description="Run a Program cycle by cycle: warps as processes, the tensor pipe, TMA, TMEM "
                                   "and shared-memory units, mbarriers; check hazards and deadlocks. Exit 0 clean, "
                                   "1 on hazards or deadlock, 2 on bad usage.")
    p.add_argument("program", metavar="NAME|FILE.json", help="a registered program name or a program JSON file")
    p.add_argument("--timing-only", action="store_true",
                   help="footprints and timing only (no data); default: records also execute on a CTA state when "
                        "every TMA source has data (--tensor)")
    p.add_argument("--tensor", action="append", default=[], metavar="NAME=FILE.npy",
                   help="the data of the TMA source NAME (the tensor its cp.async.bulk.tensor records name): a .npy "
                        "array holding the bytes the loads move, as they land in shared memory; repeat for each "
                        "source (default: none; without data for every source the run is timing-only)")
    p.add_argument("--all-hazards", action="store_true",
                   help="print every hazard (default: one per root cause, with the missing synchronisation and "
                        "how many more it causes)")
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


class TensorSource:
    """A TMA source a Program's loads name: ``name``, the bytes its tile loads read (``nbytes``: the end of the
    furthest box, ``coords[0] + nbytes``), whether a gather4 reads it (a 2-D array), and the ``dtype`` and
    ``shape`` the Program declares for it (a meta entry ``("tensor:NAME", "DTYPE[D0,D1,...]: text")``; None when
    it declares none)."""

    def __init__(self, name: str):
        self.name = name
        self.nbytes = 0
        self.gather = False
        self.dtype: str | None = None
        self.shape: tuple[int, ...] | None = None

    def check(self, array, path: str) -> None:
        """Refuse an array that cannot be this source (one line naming what the Program needs)."""
        import numpy as np

        from simtc.cli._common import UsageError

        got = f"{array.dtype} array of shape {tuple(array.shape)} ({array.nbytes} B)"
        if self.dtype is not None and (np.dtype(self.dtype) != array.dtype or self.shape != tuple(array.shape)):
            raise UsageError(f"--tensor {self.name}={path}: a {got}; the Program declares {self.name} as "
                             f"{self.dtype}{list(self.shape or ())} (meta tensor:{self.name})", rule=_TENSOR_RULE)
        if self.gather and array.ndim != 2:
            raise UsageError(f"--tensor {self.name}={path}: a {got}; .tile::gather4 loads read a 2-D tensor",
                             rule=_TENSOR_RULE, ref="PTX ISA 9.0 §9.7.9.25.5.2")
        if array.nbytes < self.nbytes:
            raise UsageError(f"--tensor {self.name}={path}: a {got}; the Program's tile loads of {self.name} read "
                             f"bytes up to {self.nbytes}", rule=_TENSOR_RULE)


def tensor_sources(program) -> dict[str, TensorSource]:
    """The TMA sources a Program's loads name, by name (sorted), with what each must hold (:class:`TensorSource`).

    >>> from simtc.kernels import hazards
    >>> {n: s.nbytes for n, s in tensor_sources(hazards.build("hazard/mma-after-tma-no-fence")).items()}
    {'A': 8192, 'B': 2048}
    """
    import re

    from simtc.isa import CpAsyncBulkTensor

    out: dict[str, TensorSource] = {}
    for _, _, rec in program.records():
        if isinstance(rec, CpAsyncBulkTensor):
            src = out.get(rec.tensor)
            if src is None:
                src = out[rec.tensor] = TensorSource(rec.tensor)
            if rec.mode == "gather4":
                src.gather = True
            else:
                src.nbytes = max(src.nbytes, (rec.coords[0] if rec.coords else 0) + rec.nbytes)
    for key, value in program.meta:
        m = re.match(r"\s*([a-z]+[0-9]*)\[([0-9, ]*)\]", str(value)) if key.startswith("tensor:") else None
        if m is not None and key[len("tensor:"):] in out:
            src = out[key[len("tensor:"):]]
            src.dtype = m.group(1)
            src.shape = tuple(int(d) for d in m.group(2).replace(" ", "").split(",") if d)
    return dict(sorted(out.items()))


def load_tensors(program, specs) -> dict:
    """``--tensor NAME=FILE.npy`` values as ``{name: array}``, each checked against the Program's TMA sources."""
    import numpy as np

    from simtc.cli._common import UsageError

    sources = tensor_sources(program)
    known = ", ".join(n or "''" for n in sources) or "none"
    out = {}
    for spec in specs:
        name, eq, path = spec.partition("=")
        if not eq or not name or not path:
            raise UsageError(f"--tensor {spec!r}: give NAME=FILE.npy (the Program's TMA sources: {known})",
                             rule=_TENSOR_RULE)
        if name not in sources:
            raise UsageError(f"--tensor {name}={path}: {program.name} has no TMA source {name!r} (its TMA sources: "
                             f"{known})", rule=_TENSOR_RULE)
        if name in out:
            raise UsageError(f"--tensor {name} given twice", rule=_TENSOR_RULE)
        from simtc.isa.files import damaged_errors

        try:  # opened here: numpy leaves its own file open when an archive is truncated; a damaged file is what
            with open(path, "rb") as fh:  # every simtc reader counts as one (simtc.isa.files)
                array = np.load(fh, allow_pickle=False)
        except (OSError, *damaged_errors()) as e:
            raise UsageError(f"--tensor {name}={path}: cannot read a .npy array ({type(e).__name__}: {e})",
                             rule=_TENSOR_RULE) from None
        if not isinstance(array, np.ndarray):
            raise UsageError(f"--tensor {name}={path}: an .npz archive, not one .npy array", rule=_TENSOR_RULE)
        sources[name].check(array, path)
        out[name] = array
    return out


def _data(args, program) -> tuple[str, dict]:
    """The run's mode and its TMA sources' data; a Program whose TMA sources lack data runs timing-only, which
    one note on stderr says (once, with the names and how to give them)."""
    from simtc.cli._common import UsageError

    if args.timing_only:
        if args.tensor:
            raise UsageError("--tensor gives data; --timing-only runs without", rule="--tensor does not combine "
                             "with --timing-only")
        return "timing", {}
    tensors = load_tensors(program, args.tensor)
    missing = [n for n in tensor_sources(program) if n not in tensors]
    if missing:
        names = ", ".join(n or "(a load that names no tensor)" for n in missing)
        print(f"note: {program.name} runs timing-only: its TMA source(s) {names} have no data (give each with "
              "--tensor NAME=FILE.npy; --timing-only asks for this mode and drops this note)", file=sys.stderr)
        return "timing", {}
    return "semantics", tensors


def _semantics_setup(program, tensors=None):
    """A CTA state for semantics mode: the barrier table initialised, the TMA sources' data (``tensors``) in global
    memory; a Program that never allocates Tensor Memory runs after the kernel's setup allocation (all 512
    columns, FlashMLA ``csrc/sm100/decode/head64/kernel.cuh`` lines 63-65 at ``9241ae3``)."""
    from simtc.isa import Alloc, RelinquishAllocPermit
    from simtc.semantics import Cta, execute

    cta = Cta()
    cta.init_barriers(program)
    cta.gmem.update(tensors or {})
    if not any(isinstance(r, Alloc) for role in program.roles for r in role.records):
        execute(Alloc(512, 0), cta, warp=0)
        execute(RelinquishAllocPermit(), cta, warp=0)
    return cta


def run(args) -> int:
    from simtc.cli._common import emit_json, write_svg
    from simtc.cli._step import check_arguments
    from simtc.engine.core import Engine
    from simtc.engine.hazard_groups import group_hazards
    from simtc.render.timeline import TimelineView

    check_arguments(args)
    program = load_program(args.program)
    mode, tensors = _data(args, program)
    if args.trace is not None and (args.schedules is not None or args.step is not None or args.step_to is not None):
        from simtc.cli._common import UsageError

        raise UsageError("--trace writes the trace of one run", rule="--trace does not combine with --schedules, "
                         "--step or --step-to")
    if args.schedules is not None:
        return _schedules(args, program, mode, tensors)
    if args.step is not None or args.step_to is not None:
        from simtc.cli._common import UsageError
        from simtc.cli._step import run_stepper
        from simtc.engine.stepper import Stepper

        if args.until is not None:
            raise UsageError("--until stops a whole run; --step and --step-to stop at an event",
                             rule="--until does not combine with --step or --step-to")
        cta = _semantics_setup(program, tensors) if mode == "semantics" else None
        return run_stepper(Stepper.for_program(program, mode=mode, arch=args.arch, cta=cta), args)
    cta = _semantics_setup(program, tensors) if mode == "semantics" else None
    eng = Engine(program, mode=mode, arch=args.arch, cta=cta)
    eng.run(until=args.until)
    groups = group_hazards(eng.hazards, eng.checker)
    summary = eng.summary()
    summary["hazard_groups"] = [g.to_json() for g in groups]
    summary["mode"] = mode
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
        shown = None if args.all_hazards else groups
        print_view(LinesView(lambda width: _report_lines(eng, program.name, summary, width, shown)),
                   width=args.term_width)
        for s in eng.semantics_errors:
            print(f"note: cycle {s['cycle']}: the semantics layer refused {s['record']}: {s['error']}",
                  file=sys.stderr)
    return 0 if eng.clean else 1


def _schedules(args, program, mode: str, tensors: dict) -> int:
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
                         cta_factory=(lambda: _semantics_setup(program, tensors)) if mode == "semantics" else None)
    if args.json:
        emit_json(dict(report.to_json(), program=program.name, schedule_seed=args.schedule_seed))
    else:
        import textwrap

        print("\n".join(textwrap.wrap(schedules_summary(program.name, report), args.term_width or 100,
                                       subsequent_indent="    ")))
    return 0 if report.first_failing is None else 1


def _report_lines(eng, name: str, summary: dict, width: int, groups=None) -> list[str]:
    """The run's result in words, wrapped to ``width``: cycles, the hazards (every one, or with ``groups`` one per
    root cause: :meth:`simtc.engine.hazard_groups.HazardGroup.lines`), the deadlock and who would arrive."""
    import textwrap

    def wrap(text: str, indent: str = "") -> list[str]:
        return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent + "    ")

    out = wrap(f"{name}: {summary['cycles']} cycles, {summary['events']} events"
               f"{'' if eng.finished else ' (stopped at --until)'}")
    if groups is None:
        for h in eng.hazards:
            out += wrap(f"hazard: {h}")
    else:
        for g in groups:
            for line in g.lines():
                out += wrap(line.strip(), "  " if line.startswith("  ") else "")
        if len(groups) < len(eng.hazards):
            out += wrap(f"{len(eng.hazards)} hazards from {len(groups)} root cause(s); --all-hazards lists every one")
    if eng.deadlock:
        out += wrap("deadlock: " + "; ".join(f"{w['role']}[w{w['warp']}]#{w['index']} waits on {w['waits_on']}"
                                             for w in eng.deadlock["waiting"]))
        for bar, who in eng.deadlock["would_arrive"].items():
            names = ", ".join(f"{w['role']}[w{w['warp']}]#{w['index']} ({w['state']})" for w in who) or "nobody"
            out += wrap(f"{bar} would be arrived on by: {names}", "  ")
    return out
