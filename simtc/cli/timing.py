"""``simtc timing mma``: MMA latency and initiation interval, measured on the engine.

Builds the microbenchmark Programs of ``timing.md`` §1.1 (latency: one MMA + commit + mbarrier
wait by the issuing warp; II: back-to-back chains, slope over depths) and runs them on the
cycle-level engine; prints ``{"latency_cycles", "ii_cycles", "parameters": [{name, value, label,
source}]}`` with ``--json``. Illegal combinations (``.ws`` with ``cta_group::2``, RS on sm100,
TS on sm90 ...) are refused naming the rule (exit 2).
"""

from __future__ import annotations

from simtc.cli._common import add_output_options, int_in, needs_subcommand

__all__ = ["register", "run_mma_cmd"]


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
    p.set_defaults(handler=needs_subcommand(p))


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
        notes.append("no .ws latency has been measured (timing.md §2, §6): the latency composes the non-.ws fixed "
                     "costs with the .ws streaming time [inferred]; the .ws II is calibrated on GB200 measurements")
    r = {**r, "notes": notes}
    title = f"simtc timing mma: {r['instruction']}"
    return emit(args, data=r, view=LinesView(lambda width: _lines(r, width)), title=title)
