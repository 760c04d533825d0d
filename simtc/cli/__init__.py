"""The ``simtc`` command line.

Each subcommand lives in its own module with a ``register(subparsers)`` function that only
declares arguments (cheap: no numpy, no rich at import) and sets ``handler`` to a function
``run(args) -> int`` that imports what it needs. ``--json`` prints machine-readable output;
errors print one line naming the broken rule and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

__all__ = ["build_parser", "main"]

# Subcommand modules, in the order --help lists them.
COMMAND_MODULES = ("smem", "tmem", "decode", "crosscheck")


def build_parser() -> argparse.ArgumentParser:
    from simtc import __version__

    parser = argparse.ArgumentParser(
        prog="simtc",
        description="simtc: see NVIDIA tcgen05 tensor-core data flow - shared-memory layouts, descriptors, "
                    "Tensor Memory - exact to the byte.",
    )
    parser.add_argument("--version", action="version", version=f"simtc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(f"simtc.cli.{name}")
        except ModuleNotFoundError as e:  # a command module not written yet
            if e.name == f"simtc.cli.{name}":
                continue
            raise
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``simtc`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 0 if args.command is None else 2
    from simtc.errors import SimtcError

    try:
        return int(handler(args) or 0)
    except SimtcError as e:
        print(f"simtc: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # pragma: no cover - e.g. `simtc ... | head`
        return 0
