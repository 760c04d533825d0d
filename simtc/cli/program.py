"""``simtc program``: list, show, export and load kernel Programs (:class:`simtc.isa.Program`).

``simtc program --list`` names every registered program with its one-line description (folded to the
terminal's width; ``--json`` a name -> description object, ``--svg FILE`` the list as a picture);
``simtc program NAME`` (or ``FILE.json``, as written by ``--json``) shows it: a listing by default,
``--json`` its JSON (``Program.to_json``: name, description, roles with their records, barriers, counts by
opcode; it loads back), ``--ptx`` its PTX listing. ``simtc program --schema`` prints the JSON Schema every
Program file is checked against when it is loaded (``simtc/isa/program.schema.json``, generated from the record
classes: :mod:`simtc.isa.schema`); a file is read as strict JSON (UTF-8, each key once per object) and refused
with one line naming the JSON path and the rule.

Whole kernels take ``--model v32|model1`` and ``--blocks N``: ``simtc program flashmla-head64 --model model1
--blocks 2`` is FlashMLA's SM100 head64 kernel for a 2-block request, as the replay builds it;
``flashmla-head64-v32`` (the name a replay's timeline shows) and ``flashmla-sm90[-v32|-model1]`` likewise
(:mod:`simtc.kernels.registry`).

``simtc program diff flashmla-head64 --executed [--flashmla DIR] [--model M] [--blocks N] [--seed S] [--json]`` runs
FlashMLA's own compiled head64 kernel in simtc (:mod:`simtc.cuda.executed_sm100.head64`; the checkout from
``--flashmla`` or ``$SIMTC_FLASHMLA_DIR``) on ``N`` blocks of random inputs, records block (0,0,0), and prints every
difference between its asynchronous operations and the hand Program's, per role and in order (opcode, every
descriptor field, instruction-descriptor bits, TMEM addresses and shapes, barriers, phases, tx bytes, TMA boxes and
coordinates, named barriers); ``docs/kernel.md`` explains each one.
"""

from __future__ import annotations

import argparse

from simtc.cli._common import add_output_options, emit, int_in

__all__ = ["list_lines", "load", "register", "run"]

_RULE_SOURCE = "a program is a registered name (simtc program --list) or a JSON file written by --json"
_MAX_BLOCKS = 64
"""Most blocks ``simtc program`` lists (a listing of 64 blocks is about 38,000 lines and takes seconds; every further
block repeats the steady-state one). The registry builds up to 4096, as ``simtc replay`` runs."""
_PARAM_RULE = "--model and --blocks choose a whole kernel's configuration (flashmla-head64, flashmla-sm90 ...)"


def register(sub) -> None:
    p = sub.add_parser("program", help="list, show and export kernel programs (records per warp role)",
                       description="Show a kernel Program: its warp roles and their instruction records. NAME is a "
                                   "registered program (see --list) or a JSON file written by --json.")
    p.add_argument("program", nargs="?", metavar="NAME|FILE.json", help="a registered program name or a JSON file "
                   "(or 'diff' followed by a program: see --executed)")
    p.add_argument("target", nargs="?", metavar="PROGRAM", help=argparse.SUPPRESS)
    p.add_argument("--executed", action="store_true",
                   help="with 'diff flashmla-head64': hold the hand Program against FlashMLA's own compiled kernel "
                        "executed in simtc (needs --flashmla DIR or SIMTC_FLASHMLA_DIR, and nvcc)")
    p.add_argument("--flashmla", metavar="DIR", default=None,
                   help="a FlashMLA checkout for diff --executed (default: $SIMTC_FLASHMLA_DIR)")
    p.add_argument("--seed", type=int_in(0, 2**31 - 1, "--seed is a non-negative integer"), default=0,
                   help="diff --executed: the random inputs' seed (default 0)")
    p.add_argument("--list", action="store_true", help="list the registered programs, one entry each")
    p.add_argument("--ptx", action="store_true", help="print the PTX listing instead of the picture")
    p.add_argument("--schema", action="store_true",
                   help="print the JSON Schema of Program files (what every FILE.json is checked against) and exit")
    p.add_argument("--model", choices=("v32", "model1"), default=None,
                   help="whole kernels (flashmla-head64, flashmla-sm90): the KV-cache model (default: v32, or the "
                        "one the name fixes)")
    p.add_argument("--blocks", type=int_in(1, _MAX_BLOCKS, f"simtc program lists 1-{_MAX_BLOCKS} blocks (each further "
                                                          "block repeats the steady-state one; simtc replay runs up "
                                                          "to 4096)"),
                   default=None, metavar="N",
                   help="whole kernels: top-k blocks of 64 tokens in the request (default: 4 for flashmla-head64, "
                        "2 for flashmla-sm90)")
    add_output_options(p)
    p.set_defaults(handler=run)


def load(source: str, *, model: str | None = None, blocks: int | None = None):
    """The Program ``source`` names: a registry name (``model``/``blocks`` for the whole kernels that take them),
    or a ``.json`` file (``Program.to_json`` format)."""
    from pathlib import Path

    from simtc.errors import SimtcError
    from simtc.kernels import registry

    path = Path(source)
    if source.endswith(".json") or path.is_file():
        from simtc.isa.files import read_json
        from simtc.isa.program import Program

        if model is not None or blocks is not None:
            raise SimtcError(f"{source}: a Program file is built already; --model and --blocks apply to registered "
                             "whole kernels", rule=_PARAM_RULE)
        if not path.exists():
            raise SimtcError(f"no such file: {source!r}", rule=_RULE_SOURCE)
        data = read_json(path, _RULE_SOURCE, what="Program JSON file", constants=False)
        try:
            return Program.from_json(data)
        except SimtcError as e:  # name the file too
            e.message = f"{source}: {e.message}"
            e.args = (e.message,)
            raise e from None
    if (model is not None or blocks is not None) and not registry.parameters(source):
        raise SimtcError(f"program {source!r} takes no --model or --blocks", rule=_PARAM_RULE)
    if model is not None and "model" not in registry.parameters(source):
        fixed = source.rsplit("-", 1)[-1]
        if model != fixed:
            raise SimtcError(f"program {source!r} is the {fixed} kernel; --model {model} contradicts it (use "
                             f"{source.rsplit('-', 1)[0]} --model {model})", rule=_PARAM_RULE)
        model = None
    return registry.build(source, model=model, blocks=blocks)


def list_lines(listing: dict[str, str], width: int) -> list[str]:
    """``name  description`` lines folded to ``width`` columns: descriptions continue under themselves, or, when
    the names leave too little room, start on the line below the name, indented."""
    import textwrap

    names = max(map(len, listing), default=0)
    out = []
    if width - names - 2 >= 30:
        for name, desc in listing.items():
            out += textwrap.wrap(desc, width, initial_indent=f"{name:<{names}}  ", subsequent_indent=" " * (names + 2),
                                 break_on_hyphens=False) or [name]
    else:
        for name, desc in listing.items():
            out.append(name)
            out += textwrap.wrap(desc, width, initial_indent="    ", subsequent_indent="    ", break_on_hyphens=False)
    return out


def _diff(args) -> int:
    from simtc.cli._common import UsageError

    if args.target not in ("flashmla-head64", "flashmla-head64-v32", "flashmla-head64-model1"):
        raise UsageError(f"simtc program diff: {args.target or 'a program'}: only flashmla-head64 can be diffed "
                         "against its executed kernel (simtc program diff flashmla-head64 --executed)",
                         rule="command-line usage")
    if not args.executed:
        raise UsageError("simtc program diff flashmla-head64 needs --executed (the kernel FlashMLA's checkout "
                         "compiles, run in simtc)", rule="command-line usage")
    if args.ptx or args.list or args.schema:
        raise UsageError("diff takes no --ptx, --list or --schema", rule="command-line usage")
    fixed = args.target.rsplit("-", 1)[1] if args.target.count("-") == 2 else None
    if fixed and args.model and args.model != fixed:
        raise UsageError(f"{args.target} is the {fixed} kernel; --model {args.model} contradicts it",
                         rule="command-line usage")
    model = args.model or fixed or "v32"
    from simtc.cuda.executed_sm100.head64 import executed_diff
    from simtc.render.lines import LinesView

    d = executed_diff(args.flashmla, model, args.blocks or 2, args.seed)
    return emit(args, data=d.to_json(), view=LinesView(lambda width: d.lines()),
                title=f"simtc program diff {args.target} --executed")


def run(args) -> int:
    from simtc.cli._common import UsageError
    from simtc.kernels import registry

    if args.program == "diff":
        return _diff(args)
    if args.target or args.executed or args.flashmla:
        raise UsageError("a second program, --executed and --flashmla belong to 'simtc program diff "
                         "flashmla-head64 --executed'", rule="command-line usage")

    if args.schema:
        if args.program or args.list or args.ptx or args.model or args.blocks or args.json \
                or getattr(args, "svg", None):
            raise UsageError("--schema prints the Program JSON Schema; it takes no program or other option",
                             rule="command-line usage")
        from simtc.isa.schema import SCHEMA_FILE

        print(SCHEMA_FILE.read_text(encoding="utf-8"), end="")
        return 0
    if args.list:
        if args.program or args.ptx or args.model or args.blocks:
            raise UsageError("--list takes no program, --ptx, --model or --blocks", rule="command-line usage")
        from simtc.render.lines import LinesView

        listing = registry.programs()
        return emit(args, data=listing, view=LinesView(lambda width: list_lines(listing, width)),
                    title="simtc program --list")
    if not args.program:
        raise UsageError("simtc program: give a program NAME or FILE.json, or --list", rule="command-line usage",
                         ref="see 'simtc program --help'")
    if args.ptx and (args.json or getattr(args, "svg", None)):
        raise UsageError("--ptx prints the PTX listing; it does not combine with --json or --svg",
                         rule="command-line usage")
    prog = load(args.program, model=args.model, blocks=args.blocks)
    if args.ptx:
        print(prog.ptx())
        return 0
    return emit(args, data=prog.to_json(), view=prog, title=f"simtc program {prog.name}")
