"""``simtc compare flashmla-head64``: FlashMLA head64's design alternatives side by side.

``simtc compare flashmla-head64 [--model v32|model1] [--blocks B] [--seed S] [--json]`` runs
:func:`simtc.kernels.flashmla.alternatives.compare`: one row per variant with ``name``, ``tmem_columns``,
``smem_bytes``, ``fits``, ``mma_per_block``, tensor-pipe busy cycles and cycles per block (from the engine),
the softmax exchange's cost (instructions per thread and cycles per block) and why it fits or not. Exit 0
when every variant that was run passed its checks, 1 otherwise.
"""

from __future__ import annotations

from simtc.cli._common import add_output_options, int_in

__all__ = ["register", "run", "table_lines"]


def register(sub) -> None:
    p = sub.add_parser("compare", help="FlashMLA head64's design alternatives side by side",
                       description="Run FlashMLA head64 and its design alternatives (duplicated Q, Q in SMEM with SS "
                                   "MMAs, non-.ws Layout F, prefill-style overlap, b0/b1 collectors) on the same "
                                   "inputs, engine and checker; one row per variant.")
    p.add_argument("kernel", choices=("flashmla-head64",), help="the kernel")
    p.add_argument("--model", choices=("v32", "model1"), default="v32", help="kernel configuration (default v32)")
    p.add_argument("--blocks", type=int_in(2, 256, "blocks is an integer 2-256"), default=4,
                   help="top-k blocks of 64 tokens (default 4)")
    p.add_argument("--seed", type=int_in(0, 2**32 - 1, "a seed is an integer 0-4294967295"), default=0,
                   help="input seed (default 0)")
    add_output_options(p)
    p.set_defaults(handler=run)


def _fmt(x, spec: str = ".0f") -> str:
    return "-" if x is None else format(x, spec)


def table_lines(rows, width: int) -> list[str]:
    """The comparison as text lines of at most ``width`` columns: a numeric table, then each row's reason."""
    import textwrap

    head = ("variant", "TMEM", "SMEM B", "fits", "MMA", "pipe", "cyc/blk", "exch", "exch cyc")
    body = [(v.name, str(v.tmem_columns), f"{v.smem_bytes:,}", "yes" if v.fits else "NO", str(v.mma_per_block),
             _fmt(v.tensor_pipe_busy_per_block), _fmt(v.cycles_per_block), str(v.exchange_instructions),
             _fmt(v.exchange_cycles_per_block)) for v in rows]
    w = [max(len(r[i]) for r in (head, *body)) for i in range(len(head))]
    out = ["  ".join(c.ljust(w[i]) if i == 0 else c.rjust(w[i]) for i, c in enumerate(r)) for r in (head, *body)]
    if max(len(x) for x in out) > width:  # narrow terminal: one stacked block per variant
        out = []
        for r in body:
            out.append(r[0])
            out += textwrap.wrap("  ".join(f"{h}={c}" for h, c in zip(head[1:], r[1:], strict=True)), width,
                                 initial_indent="    ", subsequent_indent="    ")
    out.append("TMEM = columns, SMEM B = plan bytes (limit 232,448), MMA = tcgen05.mma per block, pipe = tensor-pipe "
               "busy cycles per block, cyc/blk = cycles per block, exch = exchange instructions per softmax thread "
               "per block, exch cyc = the exchange's cycles per block on a softmax warp (engine trace)")
    out = [*out[:-1], *textwrap.wrap(out[-1], width)]
    for v in rows:
        out += textwrap.wrap(f"{v.name} ({v.checks}{'' if v.ok is None else ', ok' if v.ok else ', FAILED'}): "
                             f"{v.design}. {v.why}", width, subsequent_indent="    ")
    return out


def run(args) -> int:
    from simtc.cli._common import emit
    from simtc.cli._progress import progress
    from simtc.kernels.flashmla.alternatives import compare
    from simtc.render.lines import LinesView

    with progress(args.json) as update:
        rows = compare(args.model, args.blocks, args.seed, progress=update)
    data = {"model": args.model, "blocks": args.blocks, "seed": args.seed, "variants": [v.to_json() for v in rows]}
    emit(args, data=data, view=LinesView(lambda width: table_lines(rows, width)),
         title=f"simtc compare flashmla-head64 ({args.model}, {args.blocks} blocks)")
    return 0 if all(v.ok is not False for v in rows) else 1
