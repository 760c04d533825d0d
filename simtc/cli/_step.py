"""Stepping on the command line, one format for ``simtc replay ... --step`` and ``simtc simulate ... --step``.

* ``--step [N]`` with standard input a terminal: interactive. Each move prints the event it reached (cycle, warp,
  the PTX line with its operands, what it read and wrote, the warps it released); commands::

      enter or n [K]   forward one event (K events)
      b [K]            back one event (K events)
      c                continue to the next barrier completion (an mbarrier phase, a named barrier's release)
      j N              jump to step N (0 = before the first event)
      / TEXT           forward to the next event whose PTX line, label or detail contains TEXT
      s                the whole state: warps, barriers, TMEM by writer, shared-memory buffers, units
      t                the timeline with a cursor at this step
      h or ?           this list
      q                quit

* ``--step [N]`` otherwise (a pipe, a file, a test): the first N events (default 40) in the same one-line format,
  then the state after them.
* ``--step-to N [--json] [--svg FILE]``: the state after N events, as the picture or as JSON (``--svg``: the
  picture with the run's timeline and a cursor at the step, as SVG) ``{"step", "event": {"cycle",
  "role", "warp", "ptx", "reads", "writes", "released", ...}, "state": {"tmem", "smem", "mbarriers", "warps",
  ...}}``. A step past the end is an error naming the run's length.
"""

from __future__ import annotations

import sys

__all__ = ["COMMANDS", "add_arguments", "check_arguments", "interact", "run_stepper"]

COMMANDS = __doc__.split("::", 1)[1].split("\n\n*", 1)[0].strip("\n")


def add_arguments(p, default_n: int = 40) -> None:
    from simtc.cli._common import int_in

    p.add_argument("--step", type=int_in(1, 1_000_000, "--step N: 1-1000000 events"), nargs="?", const=default_n,
                   default=None, metavar="N",
                   help="step through the run: interactive when stdin is a terminal (n next, b back, c next "
                        "barrier completion, j N jump, q quit); otherwise the first N events (N defaults to "
                        f"{default_n}) and the state after them")
    p.add_argument("--step-to", type=int_in(0, None, "--step-to N: a step is a non-negative event count"),
                   default=None, metavar="N",
                   help="print the state after N events (with --json: the step's JSON) and exit (default: no stepping)")


def check_arguments(args) -> None:
    """Refuse the combinations that make no sense (one line naming the rule)."""
    from simtc.cli._common import UsageError

    if args.step is not None and args.step_to is not None:
        raise UsageError("--step walks through the run; --step-to prints one step", rule="--step and --step-to do "
                         "not combine")
    if getattr(args, "svg", None) is not None and args.step is not None:
        raise UsageError("--step walks through the run; --svg draws one picture (use --step-to N --svg FILE)",
                         rule="--svg combines with --step-to, not with --step")
    if getattr(args, "json", False) and args.step is not None:
        raise UsageError("--step prints the events as text; --json prints JSON only (use --step-to N --json)",
                         rule="--json and --step do not combine (--json prints JSON only)")


def _print(view, width=None, file=None) -> None:
    from simtc.render.export import make_console

    make_console(width, file=file or sys.stdout).print(view)


def run_stepper(stepper, args, *, stdin=None, stdout=None) -> int:
    """``--step`` / ``--step-to`` on a built :class:`~simtc.engine.stepper.Stepper`; returns the exit status (1
    when the run, as far as it went, shows a hazard or a deadlock)."""
    from simtc.cli._common import emit_json
    from simtc.engine.stepper import StepError
    from simtc.render.step import StepView

    stdin = stdin or sys.stdin
    out = stdout or sys.stdout
    width = getattr(args, "term_width", None)
    if args.step_to is not None:
        try:
            stepper.goto(args.step_to)
        except StepError as e:
            from simtc.cli._common import UsageError

            raise UsageError(e.message, rule=e.rule) from None
        if getattr(args, "svg", None) is not None:  # the step's picture, with the timeline and its cursor
            from simtc.cli._common import write_svg

            write_svg(StepView(stepper), args.svg, width=width, title=f"{stepper.title}, step {args.step_to}")
        if getattr(args, "json", False):
            emit_json(stepper.to_json())
        else:
            _print(StepView(stepper, timeline=False), width, out)
        return _status(stepper)
    if _is_terminal(stdin):
        return interact(stepper, stdin, out, width)
    for e in _forward(stepper, args.step):
        print(e.line(), file=out)
    _print(StepView(stepper, timeline=False, tmem=False), width, out)
    return _status(stepper)


def _forward(stepper, n: int):
    for _ in range(n):
        e = stepper.forward()
        if e is None:
            return
        yield e


def _is_terminal(f) -> bool:
    try:
        return f.isatty()
    except (AttributeError, ValueError):
        return False


def _status(stepper) -> int:
    from simtc.kernels.flashmla.head64 import is_known_race

    eng = stepper.engine  # the hazards found as far as the run went (a known race of FlashMLA's kernel aside)
    known = is_known_race(eng.program)
    return 1 if any(not known(h) for h in eng.hazards) or eng.deadlock else 0


def interact(stepper, stdin, out, width=None) -> int:
    """The interactive loop (see the module text); reads commands from ``stdin`` until ``q`` or end of input."""
    from simtc.engine.stepper import StepError
    from simtc.render.step import EventView, StepView
    from simtc.render.timeline import TimelineView

    def say(text: str) -> None:
        print(text, file=out, flush=True)

    def show(e) -> None:
        total = len(stepper.events) if stepper.finished else None
        _print(EventView(e, total), width, out)

    say(f"{stepper.title}: stepping through the run (h for the commands, q to quit)")
    show(None)
    while True:
        out.write("step> ")
        out.flush()
        line = stdin.readline()
        if not line:
            say("")
            break
        cmd, _, arg = line.strip().partition(" ")
        arg = arg.strip()
        try:
            if cmd in ("", "n"):
                k = int(arg) if arg else 1
                e = stepper.forward(k)
                if e is None:
                    say(f"end of the run: {len(stepper.events)} events, {stepper.engine.cycles} cycles")
                    continue
                show(e)
            elif cmd == "b":
                stepper.back(int(arg) if arg else 1)
                show(stepper.event())
            elif cmd == "c":
                e = stepper.to_next_completion()
                if e is None:
                    say("no barrier completes after this step")
                    continue
                show(e)
            elif cmd == "j":
                if not arg:
                    say("j N: jump to step N")
                    continue
                stepper.goto(int(arg))
                show(stepper.event())
            elif cmd == "/":
                e = _search(stepper, arg)
                if e is None:
                    say(f"no later event mentions {arg!r}")
                    continue
                show(e)
            elif cmd == "s":
                _print(StepView(stepper, timeline=False), width, out)
            elif cmd == "t":
                len(stepper)
                _print(TimelineView(stepper.engine, cursor=stepper.state().cycle, hazards=False), width, out)
            elif cmd in ("h", "?", "help"):
                say(COMMANDS)
            elif cmd in ("q", "quit", "exit"):
                break
            else:
                say(f"unknown command {cmd!r}; h lists the commands")
        except ValueError:
            say(f"{line.strip()!r}: a count or a step is a whole number")
        except StepError as e:
            say(str(e))
    return _status(stepper)


def _search(stepper, text: str):
    from simtc.engine.stepper import StepError

    n = stepper.position
    while True:
        n += 1
        try:
            e = stepper.event(n)
        except StepError:
            return None
        if text in (e.ptx or "") or text in e.label or text in e.detail:
            stepper.goto(n)
            return e
