"""The ``simtc`` command line.

Each subcommand lives in its own module with a ``register(subparsers)`` function that only
declares arguments (cheap: no numpy, no rich at import) and sets ``handler`` to a function
``run(args) -> int`` that imports what it needs. ``--json`` prints machine-readable output.

Every failure prints exactly one line ``simtc: error: <message> [rule: ...; <ref>]`` on stderr:
exit status 2 for a bad command line or input (argparse's own usage errors included), 1 when a
check ran and failed (a :class:`~simtc.errors.SimtcError` with ``exit_code = 1``); never a
traceback (set ``SIMTC_TRACEBACK=1`` to see one for an internal error).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from simtc.cli._common import ArgumentParser, UsageError

__all__ = ["build_parser", "main"]

# Subcommand modules, in the order --help lists them.
COMMAND_MODULES = ("tour", "smem", "tmem", "decode", "program", "simulate", "run", "timing", "replay", "compare",
                   "inputs", "crosscheck", "calibrate", "predict")


def build_parser() -> argparse.ArgumentParser:
    from simtc import __version__

    parser = ArgumentParser(
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


def _fail(message: str) -> None:
    print(f"simtc: error: {' '.join(str(message).split())}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``simtc`` console script; returns the exit status."""
    from simtc.errors import SimtcError

    saved = os.environ.get("COLUMNS")
    try:
        _settle_columns()
        parser = build_parser()
        args = parser.parse_args(argv)
        handler = getattr(args, "handler", None)
        if handler is None:  # bare `simtc`: help on stdout, the reason on stderr, exit 2
            parser.print_help()
            raise UsageError("a command is required", rule="simtc COMMAND ...", ref="see 'simtc --help'")
        return int(handler(args) or 0)
    except SimtcError as e:
        _fail(str(e))
        return int(getattr(e, "exit_code", 2))
    except BrokenPipeError:  # pragma: no cover - e.g. `simtc ... | head`
        return 0
    except KeyboardInterrupt:  # pragma: no cover - interactive only
        _fail("interrupted [rule: stopped by the user]")
        return 130
    except OSError as e:
        name = f" {e.filename!r}" if getattr(e, "filename", None) else ""
        _fail(f"cannot access{name}: {e.strerror or e} [rule: files must exist and be readable/writable]")
        return 2
    except Exception as e:
        if os.environ.get("SIMTC_TRACEBACK"):
            raise
        _fail(f"internal error {type(e).__name__}: {e} [rule: none - this is a bug in simtc; please report "
              f"the command line (SIMTC_TRACEBACK=1 shows the traceback)]")
        return 1
    finally:
        if saved is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved


def _settle_columns() -> None:
    """Make every width reader (argparse, rich, ``shutil``) see a usable width while the command runs: ``COLUMNS``
    clamped to 40-4096 (0, negative or not an integer: refused, exit 2); a terminal narrower than 40 columns is
    treated as 40 wide. :func:`main` restores ``COLUMNS`` afterwards."""
    from simtc.cli._common import MIN_TERM_WIDTH, columns_from_env

    width = columns_from_env()
    if width is None and sys.stdout.isatty():
        try:
            if os.get_terminal_size(sys.stdout.fileno()).columns < MIN_TERM_WIDTH:
                width = MIN_TERM_WIDTH
        except OSError:  # pragma: no cover - not a terminal after all
            width = None
    if width is not None:
        os.environ["COLUMNS"] = str(width)
