"""``simtc replay flashmla-head64``: the whole FlashMLA SM100 head64 decode kernel on seeded data, checked.

``simtc replay flashmla-head64 [--model v32|model1] [--blocks B] [--seed S] [--timing-only] [--json]``
runs :func:`simtc.kernels.flashmla.replay.replay` on the engine and prints its summary (or, with
``--json``, ``{"model", "blocks", "instructions", "per_block", "cycles", "cycles_per_block",
"tmem_columns", "smem_bytes", "o_rel_error", "lse_max_abs_error", "p_bit_exact", "hazards", "deadlock",
"events", "wall_seconds", ...}``). Exit status 0 when every check passes, 1 when one fails or a hazard or
deadlock is found, 2 on bad usage.
"""

from __future__ import annotations

from simtc.cli._common import int_in

__all__ = ["register", "run"]

KERNELS = ("flashmla-head64",)


def register(sub) -> None:
    p = sub.add_parser("replay", help="replay a whole kernel on seeded data and check it (FlashMLA head64)",
                       description="Replay FlashMLA's SM100 sparse-decode head64 kernel (six roles, 384 threads) on "
                                   "seeded inputs through the engine; check O and LSE against a float64 reference, P "
                                   "bit-exact, instruction counts, TMEM columns, hazards. Exit 0 when all pass, 1 "
                                   "otherwise, 2 on bad usage.")
    p.add_argument("kernel", choices=KERNELS, help="the kernel to replay")
    p.add_argument("--model", choices=("v32", "model1"), default="v32", help="kernel configuration (default v32)")
    p.add_argument("--blocks", type=int_in(1, 4096, "blocks is an integer 1-4096"), default=4,
                   help="top-k blocks of 64 tokens in the request (default 4)")
    p.add_argument("--seed", type=int_in(0, 2**32 - 1, "a seed is an integer 0-4294967295"), default=0,
                   help="input seed (default 0)")
    p.add_argument("--timing-only", action="store_true", help="footprints and timing only (no data, no numerics)")
    p.add_argument("--json", action="store_true", help="print only machine-readable JSON")
    p.set_defaults(handler=run)


def run(args) -> int:
    from simtc.cli._common import emit_json
    from simtc.kernels.flashmla.replay import replay

    r = replay(args.model, args.blocks, args.seed, timing_only=args.timing_only)
    if args.json:
        emit_json(r.to_json())
    else:
        print(r.summary())
    return 0 if r.ok else 1
