"""``simtc program``: list, show, export and load kernel Programs (:class:`simtc.isa.Program`).

``simtc program --list`` names every registered program with its one-line description;
``simtc program NAME`` (or ``FILE.json``, as written by ``--json``) shows it: a listing by
default, ``--json`` its JSON (``Program.to_json``: name, description, roles with their records,
barriers, counts by opcode; it loads back), ``--ptx`` its PTX listing.
"""

from __future__ import annotations

from simtc.cli._common import add_output_options, emit

_RULE_SOURCE = "a program is a registered name (simtc program --list) or a JSON file written by --json"


def register(sub) -> None:
    p = sub.add_parser("program", help="list, show and export kernel programs (records per warp role)",
                       description="Show a kernel Program: its warp roles and their instruction records. NAME is a "
                                   "registered program (see --list) or a JSON file written by --json.")
    p.add_argument("program", nargs="?", metavar="NAME|FILE.json", help="a registered program name or a JSON file")
    p.add_argument("--list", action="store_true", help="list the registered programs, one line each")
    p.add_argument("--ptx", action="store_true", help="print the PTX listing instead of the picture")
    add_output_options(p)
    p.set_defaults(handler=run)


def load(source: str):
    """The Program ``source`` names: a registry name, or a ``.json`` file (``Program.to_json`` format)."""
    import json
    from pathlib import Path

    from simtc.errors import SimtcError
    from simtc.kernels import registry

    path = Path(source)
    if source.endswith(".json") or path.is_file():
        from simtc.isa.program import Program

        if not path.is_file():
            raise SimtcError(f"no such file: {source!r}", rule=_RULE_SOURCE)
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise SimtcError(f"{source}: not readable JSON ({e})", rule=_RULE_SOURCE) from None
        try:
            return Program.from_json(data)
        except SimtcError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise SimtcError(f"{source}: not a program's JSON ({type(e).__name__}: {e})",
                             rule="program JSON is Program.to_json's format") from None
    return registry.build(source)


def run(args) -> int:
    from simtc.cli._common import UsageError
    from simtc.kernels import registry

    if args.list:
        if args.program or args.ptx:
            raise UsageError("--list takes no program and no --ptx", rule="command-line usage")
        if args.json:
            from simtc.cli._common import emit_json

            emit_json(registry.programs())
            return 0
        listing = registry.programs()
        width = max(map(len, listing))
        for name, desc in listing.items():
            print(f"{name:<{width}}  {desc}")
        return 0
    if not args.program:
        raise UsageError("simtc program: give a program NAME or FILE.json, or --list", rule="command-line usage",
                         ref="see 'simtc program --help'")
    if args.ptx and (args.json or getattr(args, "svg", None)):
        raise UsageError("--ptx prints the PTX listing; it does not combine with --json or --svg",
                         rule="command-line usage")
    prog = load(args.program)
    if args.ptx:
        print(prog.ptx())
        return 0
    return emit(args, data=prog.to_json(), view=prog, title=f"simtc program {prog.name}")
