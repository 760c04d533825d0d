"""``simtc predict``: how long one FlashMLA sparse-decode call takes, from the engine and FlashMLA's scheduler.

``simtc predict flashmla-sm90|flashmla-head64 --model v32|model1 --b B --s-q S --topk K [--no-band] [--json]``:
``{"seconds", "tflops", "seconds_low", "seconds_high", "tflops_low", "tflops_high", "cycles_per_block",
"sm_parts", "active_ctas", "waves", "sm_clock_ghz", "utilization": {"issue", "tensor_pipe", "l1tex", "dram"},
"time": {"sm_idle", "ramps", "blocks"}, "waiting": {role: share}, "band": {"coverage", "procedure", ...}, ...}``
(:mod:`simtc.kernels.flashmla.predict` says how each is made). flashmla-sm90 is FlashMLA's SM90 kernel on an
H200, flashmla-head64 its SM100 head64 kernel on a B200.
"""

from __future__ import annotations

from simtc.cli._common import add_output_options, int_in
from simtc.errors import SimtcError

__all__ = ["register", "run"]


def register(sub) -> None:
    p = sub.add_parser("predict", help="predict one FlashMLA decode call's time (H200 SM90 kernel / B200 head64)",
                       description="Predict the time and TFLOP/s of one FlashMLA sparse-decode call: FlashMLA's "
                                   "scheduler splits the batch over the SMs, the engine times one CTA's blocks, "
                                   "the call's fixed costs come from small calls measured on an H200; the band "
                                   "holds the model's own error on the calls measured on an H200 (90% coverage) "
                                   "and the timing parameters that are not measured.")
    p.add_argument("kernel", choices=("flashmla-sm90", "flashmla-head64"),
                   help="flashmla-sm90: the SM90 kernel on an H200; flashmla-head64: the SM100 head64 kernel on a "
                        "B200")
    p.add_argument("--model", choices=("v32", "model1"), default="v32", help="KV-cache format (default: v32)")
    p.add_argument("--b", type=int_in(1, 4096, "b is 1 ... 4096"), required=True, help="batch size")
    p.add_argument("--s-q", type=int_in(1, 64, "s_q is 1 ... 64"), required=True, help="query positions per request")
    p.add_argument("--topk", type=int_in(64, 1 << 17, "topk is 64 ... 131072"), required=True,
                   help="tokens each query attends to (a multiple of 64)")
    p.add_argument("--h-q", type=int, choices=(64, 128), default=64,
                   help="query heads: 128 on flashmla-head64 launches the head64 kernel twice (default: 64)")
    p.add_argument("--s-k", type=int_in(64, 1 << 24, "s_k is 64 ... 16777216"), default=None, metavar="S_K",
                   help="each request's KV length: the DRAM utilization then counts a batch's repeated rows once "
                        "(default: no repeats assumed)")
    p.add_argument("--no-band", action="store_true", help="skip the band (one engine run per unmeasured parameter)")
    add_output_options(p)
    p.set_defaults(handler=run)


def _lines(r: dict, width: int) -> list[str]:
    import textwrap

    out = textwrap.wrap(f"{r['kernel']} {r['model'].upper()} on an {r['gpu']}: b = {r['b']}, s_q = {r['s_q']}, "
                        f"topk = {r['topk']}, h_q = {r['h_q']}", width, subsequent_indent="    ")
    out.append(f"  {r['seconds'] * 1e6:,.1f} us, {r['tflops']:,.0f} TFLOP/s (FlashMLA's FLOP count)")
    if "seconds_low" in r:
        bd = r.get("band", {})
        cov = (f"{bd['coverage']:.0%} band (the model's error on {bd['model_error']['n']} measured calls, and the "
               f"unmeasured parameters)" if bd.get("coverage") else "band (the unmeasured parameters and the clock "
                                                                    "only: no call of this kernel measured)")
        out += textwrap.wrap(f"  {cov}: {r['seconds_low'] * 1e6:,.1f} - {r['seconds_high'] * 1e6:,.1f} us, "
                             f"{r['tflops_low']:,.0f} - {r['tflops_high']:,.0f} TFLOP/s", width,
                             subsequent_indent="    ")
    p = r["parts"]
    out += textwrap.wrap(f"  scheduler {p['sched_s'] * 1e6:.1f} us, split-KV {p['splitkv_s'] * 1e6:,.1f} us, "
                         f"combine {p['combine_s'] * 1e6:.1f} us; {r['sm_parts']} SM parts x s_q, {r['waves']} "
                         f"wave(s), {r['cycles_per_block']:,.0f} cycles per block at {r['sm_clock_ghz']} GHz "
                         f"({r['clock']['label']})", width, subsequent_indent="    ")
    u = r["utilization"]
    reuse = (f" ({r['dram_fraction']:.0%} of the gathered rows distinct, s_k = {r['s_k']})"
             if r.get("s_k") else " (every gathered row from HBM: no --s-k)")
    out += textwrap.wrap(f"  split-KV utilization: issue {u['issue']:.0%}, tensor pipe {u['tensor_pipe']:.0%}, "
                         f"L1/TEX {u['l1tex']:.0%}, DRAM {u['dram']:.0%}{reuse}", width, subsequent_indent="    ")
    if "time" in r:
        t, w = r["time"], r["waiting"]
        waits = ", ".join(f"{k} {v:.0%}" for k, v in w.items() if k != "q_load")
        out += textwrap.wrap(f"  the chip's SM-time: {t['sm_idle']:.0%} idle (no CTA, or finished early), "
                             f"{t['ramps']:.0%} in prologues and epilogues, {t['blocks']:.0%} in blocks "
                             f"({r['active_ctas']} CTAs with work); waiting: {waits}", width, subsequent_indent="    ")
    if r.get("band_rests_on"):
        top = ", ".join(f"{x['name']} [{x['label']}]" for x in r["band_rests_on"][:6])
        out += textwrap.wrap(f"  the band rests most on: {top}", width, subsequent_indent="    ")
    out += textwrap.wrap(f"  fixed costs: {r['fixed_costs']}", width, subsequent_indent="    ")
    return out


def run(args) -> int:
    from simtc.cli._common import emit
    from simtc.kernels.flashmla.predict import predict
    from simtc.render.lines import LinesView

    if args.s_k is not None and args.s_k < args.topk:
        raise SimtcError(f"--s-k {args.s_k} < --topk {args.topk}: a query attends to topk of its s_k tokens",
                         rule="simtc predict: topk <= s_k")
    from simtc.cli._progress import progress

    with progress(args.json) as update:  # the band: one engine run per unmeasured parameter and direction
        r = predict(args.kernel, args.model, args.b, args.s_q, args.topk, h_q=args.h_q, s_k=args.s_k,
                    band=not args.no_band, progress=update)
    return emit(args, data=r, view=LinesView(lambda width: _lines(r, width)), title=f"simtc predict {args.kernel}")
