"""``simtc timing``: the timing model's parameters, what an answer rests on, and MMA microbenchmarks.

* ``simtc timing params [--arch sm100|sm90] [--json]`` -- every parameter the engine reads:
  ``{name, arch, value, unit, label, source, used_by}`` (label: measured / documented / derived / assumed).
* ``simtc timing sensitivity NAME [--factors 0.5,2] [--json]`` -- halves and doubles each parameter (or scales
  it by the factors given) and reports the relative change of the answer, sorted by effect: rows
  ``{name, label, value, unit, "x0.5", "x2", source}``. NAME is
  ``flashmla-head64`` (the answer: steady-state cycles per block of a timing-only replay) or a Program
  (``simtc program --list``, or a Program JSON file; the answer: its cycles).
* ``simtc timing mma`` -- builds the microbenchmark Programs SemiAnalysis's B200 data was measured with
  (latency: one MMA + commit + mbarrier wait by the issuing warp; II: back-to-back chains, slope over depths)
  and runs them on the cycle-level engine; prints ``{"latency_cycles", "ii_cycles", "parameters": [...]}`` with
  ``--json``. Illegal combinations (``.ws`` with ``cta_group::2``, RS on sm100, TS on sm90 ...) are refused naming
  the rule (exit 2).
"""

from __future__ import annotations

from simtc.cli._common import add_output_options, int_in, needs_subcommand

__all__ = ["register", "run_mma_cmd", "run_params_cmd", "run_sensitivity_cmd"]


def register(sub) -> None:
    p = sub.add_parser("timing", help="MMA latency / II microbenchmarks run on the engine",
                       description="Timing microbenchmarks built as Programs and run on the cycle-level engine.")
    s = p.add_subparsers(dest="timing_command", metavar="WHAT")
    m = s.add_parser("mma", help="latency and II of one MMA shape",
                     description="Latency (one MMA + commit + mbarrier wait) and initiation interval (slope of "
                                 "back-to-back chains) of tcgen05.mma (sm100) or wgmma (sm90), with the labelled "
                                 "parameters the engine used.")
    m.add_argument("--arch", choices=("sm100", "sm90"), default="sm100", help="architecture")
    m.add_argument("--m", type=int_in(1, 256, "M is 1 ... 256"), required=True, help="M")
    m.add_argument("--n", type=int_in(1, 256, "N is 1 ... 256"), required=True, help="N")
    m.add_argument("--k", type=int_in(1, 256, "K is 1 ... 256"), default=None,
                   help="K (default: the kind's dense K, 16 for bf16)")
    m.add_argument("--operands", choices=("SS", "TS", "RS"), default="SS", type=str.upper,
                   help="A from shared memory (SS), TMEM (TS, sm100) or registers (RS, sm90)")
    m.add_argument("--ws", action="store_true", help="tcgen05.mma.ws (weight-stationary)")
    m.add_argument("--collector", choices=("discard", "pingpong", "reuse"), default="discard",
                   help=".ws B collector usage")
    m.add_argument("--cta-group", type=int, choices=(1, 2), default=1, help="cta_group")
    add_output_options(m)
    m.set_defaults(handler=run_mma_cmd)
    q = s.add_parser("params", help="every timing parameter with its label and source",
                     description="Every parameter the engine reads: value, unit, label (measured / documented / "
                                 "derived / assumed), source and the mechanisms that use it.")
    q.add_argument("--arch", choices=("sm100", "sm90"), default=None,
                   help="one architecture's table (default: both)")
    q.add_argument("--label", choices=("measured", "documented", "derived", "assumed"), default=None,
                   help="only the parameters with this label (default: all)")
    add_output_options(q)
    q.set_defaults(handler=run_params_cmd)
    v = s.add_parser("sensitivity", help="which parameters an answer rests on (x0.5 and x2 each)",
                     description="Halve and double each timing parameter and report the relative change of the "
                                 "answer, sorted by effect: for flashmla-head64 the steady-state cycles per block of "
                                 "a timing-only replay; for a Program (a name of 'simtc program --list' or a JSON "
                                 "file) its cycles.")
    v.add_argument("name", metavar="NAME", help="flashmla-head64, a Program name or a Program JSON file")
    v.add_argument("--model", choices=("v32", "model1"), default=None,
                   help="flashmla-head64: kernel configuration (default: v32, or the one the name fixes)")
    v.add_argument("--blocks", type=int_in(3, 256, "a steady state needs 3 ... 256 blocks"), default=None,
                   help="flashmla-head64: blocks of the request (default: 12)")
    v.add_argument("--arch", choices=("sm100", "sm90"), default="sm100",
                   help="whose parameter table (flashmla-head64 runs on sm100)")
    v.add_argument("--factors", type=_factors, default=(0.5, 2.0), metavar="F,F,...",
                   help="scale factors, distinct, positive, not 1, within 1/1000 ... 1000 (default: 0.5,2; e.g. "
                        "0.25,0.5,2,4 to see how much slack a parameter has); a list starting with '-' is written "
                        "attached, --factors=-1,2 (and refused: factors are positive)")
    v.add_argument("--top", type=int_in(1, 1000, "rows to show"), default=None,
                   help="show only the N parameters with the largest effect (default: all)")
    add_output_options(v)
    _explain_detached_factors(v)
    v.set_defaults(handler=run_sensitivity_cmd)
    p.set_defaults(handler=needs_subcommand(p))


_MAX_FACTOR = 1000.0
"""Largest sensitivity factor (and 1/this the smallest): a parameter scaled further is no longer a timing."""


_FACTORS_RULE = (f"sensitivity factors are distinct positive numbers other than 1, within 1/{_MAX_FACTOR:g} ... "
                 f"{_MAX_FACTOR:g} (a parameter scaled by zero or a negative number is no longer a timing)")


def _factors(text: str) -> tuple[float, ...]:
    import argparse
    import math

    from simtc.cli._common import UsageError

    def refuse(why: str):
        return argparse.ArgumentTypeError(str(UsageError(f"{text!r}: {why}, e.g. 0.5,2", rule=_FACTORS_RULE)))

    try:
        out = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise refuse("comma-separated numbers") from None
    if not out:
        raise refuse("no factor given")
    bad = next((f for f in out if not f > 0 or math.isnan(f)), None)
    if bad is not None:
        raise refuse(f"factor {bad:g} is not positive")
    if 1.0 in out or len(set(out)) != len(out):
        raise refuse("factor 1 changes nothing" if 1.0 in out else "a factor is repeated")
    if any(not 1 / _MAX_FACTOR <= f <= _MAX_FACTOR for f in out):  # inf, 1e400, 1e-300: no parameter scales so
        raise refuse(f"each factor within 1/{_MAX_FACTOR:g} ... {_MAX_FACTOR:g}")
    return out


def _explain_detached_factors(parser) -> None:
    """``--factors -1,2``: argparse takes ``-1,2`` for an option (it is no negative number to it) and says only
    "expected one argument"; say how to write it instead."""
    from simtc.cli._common import UsageError

    plain = parser.error

    def error(message: str):
        if "argument --factors: expected one argument" in " ".join(message.split()):
            raise UsageError(f"{parser.prog}: --factors needs a value; a list starting with '-' must be attached to "
                             "the option, --factors=-1,2 (argparse reads a separate word starting with '-' as an "
                             "option)", rule=_FACTORS_RULE)
        plain(message)

    parser.error = error


def _lines(r: dict, width: int) -> list[str]:
    import textwrap

    out = [r["instruction"],
           f"latency: {r['latency_cycles']} cycles (one MMA + commit + mbarrier wait, issuing warp)",
           f"II:      {r['ii_cycles']} cycles/MMA (slope over depths {r['depths']}: {r['chain_cycles']} cycles)",
           *(f"note: {n}" for n in r.get("notes", ())),
           "parameters (value, label, source):"]
    for q in r["parameters"]:
        out += textwrap.wrap(f"{q['name']} = {q['value']} [{q['label']}] {q['source']}", width,
                             initial_indent="  ", subsequent_indent="      ")
    return out


def run_mma_cmd(args) -> int:
    from simtc.cli._common import emit
    from simtc.engine.microbench import run_mma
    from simtc.render.lines import LinesView

    r = run_mma(args.arch, args.m, args.n, args.k, operands=args.operands, ws=args.ws, collector=args.collector,
                cta_group=args.cta_group)
    notes = []
    if args.ws:
        notes.append("no .ws latency has been published: the latency composes the non-.ws fixed "
                     "costs with the .ws streaming time [inferred]; the .ws II is calibrated on GB200 measurements")
    r = {**r, "notes": notes}
    title = f"simtc timing mma: {r['instruction']}"
    return emit(args, data=r, view=LinesView(lambda width: _lines(r, width)), title=title)


def _param_rows(arch: str | None, label: str | None) -> list[dict]:
    from simtc.engine.parameters import PARAMETERS

    archs = [arch] if arch else list(PARAMETERS)
    return [p.as_dict(a) for a in archs for p in PARAMETERS[a].values() if label is None or p.label == label]


def _params_lines(rows: list[dict], width: int, arch: str | None = None, label: str | None = None) -> list[str]:
    import textwrap

    if not rows:  # say so rather than print nothing
        return textwrap.wrap(f"no {arch or 'sm100 or sm90'} parameter is labelled {label}", width)
    out = []
    counts: dict[tuple[str, str], int] = {}
    for r in rows:
        counts[r["arch"], r["label"]] = counts.get((r["arch"], r["label"]), 0) + 1
    for arch in dict.fromkeys(r["arch"] for r in rows):
        out.append(f"{arch}: " + ", ".join(f"{n} {lab}" for (a, lab), n in counts.items() if a == arch))
    for r in rows:
        head = f"{r['arch']} {r['name']} = {r['value']} {r['unit']} [{r['label']}] (used by {', '.join(r['used_by'])})"
        out += textwrap.wrap(head, width, subsequent_indent="    ")
        out += textwrap.wrap(r["source"], width, initial_indent="    ", subsequent_indent="    ")
    return out


def run_params_cmd(args) -> int:
    from simtc.cli._common import emit
    from simtc.render.lines import LinesView

    rows = _param_rows(args.arch, args.label)
    return emit(args, data=rows, view=LinesView(lambda width: _params_lines(rows, width, args.arch, args.label)),
                title="simtc timing params")


def _measure(args):
    """(measure: Timing -> float, what it measures, its baseline Timing)."""
    from simtc.engine.parameters import Timing
    from simtc.errors import SimtcError

    fixed = {"flashmla-head64": None, "flashmla-head64-v32": "v32", "flashmla-head64-model1": "model1"}
    if args.name in fixed:
        from simtc.kernels.flashmla.replay import steady_cycles_per_block

        if args.arch != "sm100":
            raise SimtcError("flashmla-head64 is an sm100 kernel: its sensitivity is taken on the sm100 table",
                             rule="flashmla-head64 runs on sm100")
        name_model = fixed[args.name]
        if name_model and args.model and args.model != name_model:
            raise SimtcError(f"{args.name} is the {name_model} kernel; --model {args.model} contradicts it",
                             rule="--model chooses flashmla-head64's configuration")
        model_name, blocks = args.model or name_model or "v32", args.blocks or 12
        return (lambda t: steady_cycles_per_block(model_name, blocks, t),
                f"steady-state cycles per block, FlashMLA head64 {model_name.upper()}, {blocks} blocks",
                Timing("sm100"))
    if args.model is not None or args.blocks is not None:
        raise SimtcError(f"--model and --blocks choose flashmla-head64's request; {args.name!r} is measured as it "
                         "is (its cycles)", rule="timing sensitivity --model/--blocks apply to flashmla-head64 only")
    from simtc.cli.program import load
    from simtc.engine.core import Engine

    program = load(args.name)
    return (lambda t: Engine(program, timing=t, check=False).run().cycles, f"cycles of {program.name}",
            Timing(args.arch))


def _sensitivity_lines(what: str, base: float, rows: list[dict], keys: list[str], width: int) -> list[str]:
    out = [f"{what}: {base:,.1f} with every parameter at its table value",
           f"relative change of the answer when one parameter is scaled ({', '.join(keys)}):",
           f"{'parameter':<32} {'label':<10} " + " ".join(f"{k:>8}" for k in keys)]
    for r in rows:
        out.append(f"{r['name']:<32} {r['label']:<10} " + " ".join(f"{100 * r[k]:>+7.1f}%" for k in keys))
    unmoved = [r["name"] for r in rows if all(r[k] == 0 for k in keys)]
    if unmoved:
        import textwrap

        out += textwrap.wrap(f"no effect on this answer: {', '.join(unmoved)}", width)
    return out


def run_sensitivity_cmd(args) -> int:
    from simtc.cli._common import emit
    from simtc.engine.sensitivity import factor_key, sensitivity
    from simtc.render.lines import LinesView

    measure, what, timing = _measure(args)
    base = float(measure(timing))
    rows = [r.as_dict() for r in sensitivity(measure, timing, factors=args.factors, base=base)]
    shown = rows[:args.top] if args.top else rows
    keys = [factor_key(f) for f in args.factors]
    data = {"measure": what, "value": base, "factors": list(args.factors), "rows": shown}
    return emit(args, data=data, view=LinesView(lambda width: _sensitivity_lines(what, base, shown, keys, width)),
                title=f"simtc timing sensitivity {args.name}")
