"""``simtc inputs``: FlashMLA sparse-decode inputs files (``.npz``) -- write random ones, check given ones.

``simtc inputs make --model v32|model1 --b B --s-q S --topk K [--invalid-frac F] [--attn-sink]
[--page-block-size P] [--num-blocks N] [--empty-rows E] [--hot-scale X] [--topk-length L] --seed N FILE.npz``
writes random inputs in FlashMLA's own format (:func:`simtc.kernels.flashmla.io.make_inputs`: a bf16 K
quantized the way FlashMLA's ``tests/quant.py`` does). ``simtc inputs check FILE.npz`` validates a file
and describes it. The format: ``docs/flashmla_formats.md``. Such a file is replayed with
``simtc replay flashmla-head64 --inputs FILE.npz [--save-outputs OUT.npz]`` (:func:`run_replay_inputs`).

A request whose memory estimate (:func:`simtc.kernels.flashmla.io.make_inputs_memory`,
:func:`~simtc.kernels.flashmla.io.inputs_file_memory`) exceeds the memory available is refused before any work
(:mod:`simtc.cli._progress`); on a terminal a progress bar shows the work on stderr.

Exit status 0 on success, 2 on a bad command line, a file that breaks the format, is truncated or corrupt, cannot be
read or written (the message names it), or a request that would not fit in memory; 1 when a replay's check fails.
"""

from __future__ import annotations

import argparse

from simtc.cli._common import int_in, needs_subcommand, output_path

__all__ = ["register", "run_check", "run_make", "run_replay_inputs"]


def _frac(text: str) -> float:
    from simtc.cli._common import UsageError

    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(str(UsageError(f"must be a number in 0..1, got {text!r}",
                                                        rule="a fraction of the top-k positions, 0..1")))
    return v


def _topk(text: str) -> int:
    from simtc.cli._common import UsageError

    v = int_in(64, 1 << 20, "topk is a positive multiple of 64")(text)
    if v % 64:
        raise argparse.ArgumentTypeError(str(UsageError(
            f"must be a multiple of 64, got {v}", rule="topk is a positive multiple of B_TOPK = 64",
            ref="FlashMLA csrc/sm100/decode/head64/kernel.cuh (KU_ASSERT(params.topk % B_TOPK == 0))")))
    return v


def register(sub) -> None:
    p = sub.add_parser("inputs", help="FlashMLA sparse-decode inputs files (.npz): make random ones, check one",
                       description="FlashMLA's own sparse-decode tensors (q, the paged fp8 KV cache, top-k indices, "
                                   "page_block_size, sm_scale, model, attn_sink) as an .npz file, for "
                                   "'simtc replay flashmla-head64 --inputs FILE'. Format: docs/flashmla_formats.md.")
    s = p.add_subparsers(dest="inputs_command", metavar="SUBCOMMAND")
    p.set_defaults(handler=needs_subcommand(p))

    mk = s.add_parser("make", help="write random inputs in FlashMLA's format",
                      description="Write random FlashMLA sparse-decode inputs: Q ~ N(0,1) and K ~ N(0,1) in bf16, K "
                                  "quantized into the paged fp8 cache as FlashMLA's tests/quant.py does (power-of-two "
                                  "scales per 128 dims for V32, ue8m0 per 64 dims for MODEL1), distinct random top-k "
                                  "tokens per (batch, query) row with some -1 entries.")
    mk.add_argument("file", type=output_path, metavar="FILE.npz", help="the inputs file to write")
    mk.add_argument("--model", choices=("v32", "model1"), default="v32", help="kernel configuration")
    mk.add_argument("--b", type=int_in(1, 4096, "b is an integer 1-4096"), default=1, help="batch size")
    mk.add_argument("--s-q", type=int_in(1, 4096, "s_q is an integer 1-4096"), default=1,
                    help="queries per batch (every (batch, query) row is one request)")
    mk.add_argument("--topk", type=_topk, default=128, help="top-k indices per row (a multiple of 64)")
    mk.add_argument("--invalid-frac", type=_frac, default=0.05, help="fraction of top-k positions set to -1")
    mk.add_argument("--attn-sink", action="store_true", help="add random per-head attention sinks (float32 [64])")
    mk.add_argument("--page-block-size", type=int_in(1, 4096, "page_block_size is an integer 1-4096"), default=64,
                    help="tokens per page block of the cache")
    mk.add_argument("--num-blocks", type=int_in(1, 1 << 20, "num_blocks is an integer 1-1048576"), default=None,
                    help="page blocks in the cache (default: enough for 2 x topk tokens)")
    mk.add_argument("--empty-rows", type=int_in(0, None, "empty rows is an integer >= 0"), default=0,
                    help="the last E (batch, query) rows get no valid token (LSE +inf, O = 0)")
    mk.add_argument("--hot-scale", type=int_in(0, 20, "hot scale is an integer 0-20"), default=3,
                    help="K of 4 hot tokens in each row's middle block is scaled by 2**X before quantization: large "
                         "scores that force the lazy O rescale (0: none; needs topk >= 128)")
    mk.add_argument("--topk-length", type=int_in(0, None, "topk_length is an integer >= 0"), default=None,
                    help="store topk_length = L for every batch (positions >= L are invalid; default: none)")
    mk.add_argument("--seed", type=int_in(0, 2**32 - 1, "a seed is an integer 0-4294967295"), required=True,
                    help="random seed")
    mk.add_argument("--json", action="store_true", help="print the file's description as JSON")
    mk.set_defaults(handler=run_make)

    ck = s.add_parser("check", help="validate an inputs file and describe it",
                      description="Read an inputs file (allow_pickle=False), check every rule of the format and "
                                  "print what it holds; exit 2 naming the rule a bad file breaks.")
    ck.add_argument("file", metavar="FILE.npz", help="the inputs file to check")
    ck.add_argument("--json", action="store_true", help="print the description as JSON")
    ck.set_defaults(handler=run_check)


def _describe(d: dict) -> str:
    empty = ", ".join(f"({i}, {j})" for i, j in d["empty_rows"]) or "none"
    return (f"FlashMLA {d['model'].upper()} sparse-decode inputs: q [{d['b']}, {d['s_q']}, {d['heads']}, {d['d_qk']}] "
            f"bf16, topk {d['topk']}, cache {d['num_blocks']} blocks x {d['block_stride']} B "
            f"(page_block_size {d['page_block_size']}), sm_scale {d['sm_scale']:.6g}, attn_sink "
            f"{'yes' if d['attn_sink'] else 'no'}, topk_length {'yes' if d['topk_length'] else 'no'}; "
            f"{d['valid_tokens']} valid / {d['invalid_tokens']} invalid index entries; rows with no valid token: "
            f"{empty}")


def run_make(args) -> int:
    from simtc.cli._common import emit_json
    from simtc.kernels.flashmla import io

    tl = None
    if args.topk_length is not None:
        if args.topk_length > args.topk:
            from simtc.cli._common import UsageError

            raise UsageError(f"--topk-length {args.topk_length} > --topk {args.topk}", rule="0 <= topk_length <= topk")
        tl = [args.topk_length] * args.b
    if args.empty_rows > args.b * args.s_q:
        from simtc.cli._common import UsageError

        raise UsageError(f"--empty-rows {args.empty_rows} > b x s_q = {args.b * args.s_q}",
                         rule="at most b x s_q rows can be empty")
    from simtc.cli._progress import check_memory, progress

    check_memory(io.make_inputs_memory(args.model, args.b, args.s_q, args.topk, page_block_size=args.page_block_size,
                                       num_blocks=args.num_blocks, hot_scale=args.hot_scale),
                 f"inputs make --b {args.b} --s-q {args.s_q} --topk {args.topk}"
                 + (f" --num-blocks {args.num_blocks}" if args.num_blocks is not None else ""))
    with progress(args.json) as tell:
        inp = io.make_inputs(args.model, args.b, args.s_q, args.topk, seed=args.seed,
                             invalid_frac=args.invalid_frac, attn_sink=args.attn_sink,
                             page_block_size=args.page_block_size, num_blocks=args.num_blocks,
                             empty_rows=args.empty_rows, hot_scale=args.hot_scale, topk_length=tl, progress=tell)
    io.save_inputs(args.file, inp)
    d = inp.describe()
    if args.json:
        emit_json({"file": args.file, **d})
    else:
        print(f"wrote {args.file}: {_describe(d)}")
    return 0


def run_check(args) -> int:
    from simtc.cli._common import emit_json
    from simtc.cli._progress import check_memory
    from simtc.kernels.flashmla import io

    need = io.inputs_file_memory(args.file)
    if need is not None:
        check_memory(need, f"inputs check {args.file}")
    d = io.load_inputs(args.file).describe()
    if args.json:
        emit_json({"file": args.file, **d})
    else:
        print(f"{args.file}: {_describe(d)}")
    return 0


def run_replay_inputs(args, transform=None) -> int:
    """``simtc replay flashmla-head64 --inputs FILE [--save-outputs OUT]``: replay every row of a FlashMLA inputs
    file; exit 0 when every row's checks pass, 1 otherwise."""
    from simtc.cli._common import UsageError, emit_json
    from simtc.kernels.flashmla import io

    if args.inputs is None:
        raise UsageError("--save-outputs needs --inputs FILE.npz", rule="--save-outputs writes the outputs of an "
                         "inputs file's replay")
    given = [f"--{k}" for k in ("model", "blocks", "seed") if getattr(args, k, None) is not None]
    if given:
        raise UsageError(f"{', '.join(given)} cannot be combined with --inputs {args.inputs}: the file fixes the "
                         "model (its 'model'), the blocks (its topk, or topk_length) and the data (it is not seeded)",
                         rule="--inputs replays the file as it is; --model, --blocks and --seed make a seeded request")
    for flag, given in (("--step", getattr(args, "step", None) is not None),
                        ("--step-to", getattr(args, "step_to", None) is not None),
                        ("--svg", getattr(args, "svg", None)),
                        ("--timing-only", getattr(args, "timing_only", False))):
        if given:
            raise UsageError(f"{flag} cannot be combined with --inputs", rule="--inputs replays every row of the file "
                             "with its numerics; --step, --svg and --timing-only work on seeded replays")
    from simtc.cli._progress import check_memory, progress

    need = io.inputs_file_memory(args.inputs, replay=True)
    if need is not None:
        check_memory(need, f"replay --inputs {args.inputs}")
    with progress(args.json) as tell:
        res = io.replay_file(args.inputs, getattr(args, "save_outputs", None), transform=transform, progress=tell)
    if args.json:
        out = res.to_json()
        out["file"] = args.inputs
        if getattr(args, "mutate", None) is not None:
            out["mutation"] = args.mutate
        if getattr(args, "save_outputs", None):
            out["outputs_file"] = args.save_outputs
        emit_json(out)
    else:
        if getattr(args, "mutate", None) is not None:
            print(f"mutation {args.mutate}: {'NOT caught' if res.ok else 'caught'}")
        print(res.summary())
        if getattr(args, "save_outputs", None):
            print(f"wrote {args.save_outputs}: out [{res.inputs.b}, {res.inputs.s_q}, 64, 512] bf16, lse "
                  f"[{res.inputs.b}, {res.inputs.s_q}, 64] float32")
    return 0 if res.ok else 1
