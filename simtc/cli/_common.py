"""Helpers shared by the subcommand modules (kept free of heavy imports: no numpy, no rich here).

* :class:`ArgumentParser`: argparse whose usage errors become one ``simtc: error: ... [rule: ...]``
  line (a :class:`UsageError`, exit 2) and whose help shows every option's default.
* ``type=`` validators: :func:`int_in` (a bounded integer; bounds may be computed lazily) and
  :func:`int_list` (a non-empty comma-separated list of bounded integers).
* Output: :func:`add_output_options` (``--json``, ``--svg FILE``, ``--term-width N``),
  :func:`check_writable` (refuse an output path before any work is done) and :func:`emit`, the one
  output routine of every picture command: ``--json`` prints only JSON on stdout, ``--svg`` writes
  the SVG whether or not ``--json`` is given ("wrote FILE" on stderr), otherwise the picture is
  printed.

>>> int_in(0, 511, "TMEM columns 0-511")("17")
17
>>> int_in(0, 511, "TMEM columns 0-511")("600")
Traceback (most recent call last):
...
argparse.ArgumentTypeError: must be in 0..511, got 600 [rule: TMEM columns 0-511]
>>> int_list(0, 100, "byte addresses")("0, 0x10,32")
[0, 16, 32]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

from simtc.errors import SimtcError

__all__ = [
    "MIN_TERM_WIDTH",
    "SVG_WIDTH",
    "ArgumentParser",
    "HelpFormatter",
    "OutputError",
    "UsageError",
    "add_output_options",
    "check_writable",
    "columns_from_env",
    "emit",
    "emit_json",
    "int_in",
    "int_list",
    "needs_subcommand",
    "output_path",
    "parse_int",
    "svg_path",
    "terminal_width",
    "write_svg",
]

MIN_TERM_WIDTH = 40
"""Narrowest picture width accepted by ``--term-width`` (columns)."""
MAX_TERM_WIDTH = 4096
"""Widest picture width accepted by ``--term-width`` (columns)."""
SVG_WIDTH = 140
"""Width (terminal columns) of an SVG picture when ``--term-width`` is not given."""

_USAGE_RULE = "command-line usage"


class UsageError(SimtcError, ValueError):
    """A command line the parser cannot accept (unknown option, missing or malformed value)."""


class OutputError(SimtcError, OSError):
    """An output file that cannot be written (missing directory, a directory, no permission)."""


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows ``(default: X)`` after every option that takes a value.

    Flags (``store_true``) are off unless given, so they get no default note; an option whose
    default is ``None`` must say in its help what happens without it (e.g. "default: auto").
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.nargs == 0 or action.default is None or action.default is argparse.SUPPRESS:
            return text
        if "%(default)" in text or re.search(r"\(default\b|\bdefault:", text):  # the help says it already
            return text
        if not action.option_strings:  # positionals are required: nothing to default to
            return text
        return text + " (default: %(default)s)"


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` for simtc: usage errors raise :class:`UsageError` (exit 2, one line).

    Subparsers made with ``add_subparsers().add_parser`` are of this class too and get
    :class:`HelpFormatter` unless told otherwise.
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # type: ignore[override]
        """Raise instead of printing usage and exiting: :func:`simtc.cli.main` prints one line, exit 2."""
        message = " ".join(message.split())
        if "[rule:" in message:  # a validator already named the rule
            raise UsageError(f"{self.prog}: {message}")
        raise UsageError(f"{self.prog}: {message}", rule=_USAGE_RULE, ref=f"see '{self.prog} --help'")


def needs_subcommand(p: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    """A handler for a command group run without its subcommand: help on stdout, then a usage error."""

    def handler(args: argparse.Namespace) -> int:
        p.print_help()
        raise UsageError(f"{p.prog}: a subcommand is required", rule=_USAGE_RULE, ref=f"see '{p.prog} --help'")

    return handler


# ---- type= validators ---------------------------------------------------------------------------------

def parse_int(text: str) -> int:
    """An integer written in ASCII decimal, or with a 0x / 0o / 0b prefix; ``ValueError`` otherwise (also for
    Unicode digits such as the full-width '\uff10', which ``int()`` would take)."""
    s = text.strip().replace("_", "")
    if not s.isascii():
        raise ValueError(f"not ASCII: {text!r}")
    try:
        return int(s, 10)
    except ValueError:
        return int(s, 0)


def _bound(b: int | Callable[[], int] | None) -> int | None:
    return b() if callable(b) else b


def _range_text(lo: int | None, hi: int | None) -> str:
    if lo is not None and hi is not None:
        return f"in {lo}..{hi}"
    return f">= {lo}" if lo is not None else f"<= {hi}"


def int_in(lo: int | Callable[[], int] | None, hi: int | Callable[[], int] | None, rule: str,
           ref: str | None = None) -> Callable[[str], int]:
    """An argparse ``type=``: an integer with ``lo <= value <= hi`` (either bound may be ``None``).

    A bound may be a zero-argument function, evaluated when the option is parsed (so a limit
    that lives in a numpy-importing module costs nothing while the parser is built). A refused
    value raises ``argparse.ArgumentTypeError`` whose text names ``rule`` (and ``ref``), so the
    user sees ``simtc: error: ...: argument --x: 600 is outside 0..511 [rule: ...]``.
    """

    def convert(text: str) -> int:
        try:
            value = parse_int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                str(UsageError(f"not an integer: {text!r}", rule=rule, ref=ref))) from None
        low, high = _bound(lo), _bound(hi)
        if (low is not None and value < low) or (high is not None and value > high):
            raise argparse.ArgumentTypeError(
                str(UsageError(f"must be {_range_text(low, high)}, got {value}", rule=rule, ref=ref)))
        return value

    convert.__name__ = "integer"
    return convert


def int_list(lo: int | Callable[[], int] | None, hi: int | Callable[[], int] | None, rule: str,
             ref: str | None = None, *, max_items: int | None = None) -> Callable[[str], list[int]]:
    """An argparse ``type=``: a non-empty comma-separated list of integers, each in ``lo..hi``."""
    one = int_in(lo, hi, rule, ref)

    def convert(text: str) -> list[int]:
        items = [x for x in text.split(",") if x.strip()]
        if not items:
            raise argparse.ArgumentTypeError(
                str(UsageError(f"empty list {text!r}: give at least one comma-separated integer", rule=rule,
                               ref=ref)))
        if max_items is not None and len(items) > max_items:
            raise argparse.ArgumentTypeError(
                str(UsageError(f"{len(items)} values, at most {max_items} allowed", rule=rule, ref=ref)))
        return [one(x) for x in items]

    convert.__name__ = "integer list"
    return convert


# ---- output ------------------------------------------------------------------------------------------

def check_writable(path: str | os.PathLike) -> Path:
    """Refuse an output path that cannot be written, before any work is done; return it as a ``Path``.

    The file's directory must exist and be writable; the path must not be a directory; an
    existing file must be writable. Nothing is created. Raises :class:`OutputError`.
    """
    rule = "an output file goes into an existing, writable directory"
    p = Path(path)
    if str(path) == "":
        raise OutputError("empty output file name", rule=rule)
    if p.is_dir():
        raise OutputError(f"cannot write {str(path)!r}: it is a directory", rule=rule)
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        what = "does not exist" if not parent.exists() else "is not a directory"
        raise OutputError(f"cannot write {str(path)!r}: directory {str(parent)!r} {what}", rule=rule)
    if p.exists() and not os.access(p, os.W_OK):
        raise OutputError(f"cannot write {str(path)!r}: the file is not writable", rule=rule)
    if not p.exists() and not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write {str(path)!r}: directory {str(parent)!r} is not writable", rule=rule)
    return p


def output_path(text: str) -> str:
    """argparse ``type=`` for output files (``--svg``, ``--save``): :func:`check_writable` at parse time."""
    try:
        check_writable(text)
    except OutputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


_SVG_RULE = "--svg writes SVG: the file name ends in .svg"


def svg_path(text: str) -> str:
    """argparse ``type=`` for ``--svg FILE``: a writable file (:func:`check_writable`) whose name ends in ``.svg``
    (any case); a raster or other name (``picture.png``) is refused rather than filled with SVG text."""
    output_path(text)  # a directory, a missing folder ... first: that is what is wrong with the path
    err = _svg_name_error(text)
    if err is not None:
        raise argparse.ArgumentTypeError(str(err))
    return text


def _svg_name_error(path: str | os.PathLike) -> OutputError | None:
    p = Path(path)
    if p.suffix.lower() == ".svg":
        return None
    what = f"a {p.suffix!r} file" if p.suffix else "a name without the .svg suffix"
    return OutputError(f"cannot write SVG to {str(path)!r}: {what} (name it e.g. {p.stem or 'picture'}.svg)",
                       rule=_SVG_RULE)


_term_width = int_in(MIN_TERM_WIDTH, MAX_TERM_WIDTH,
                     f"a picture needs at least {MIN_TERM_WIDTH} terminal columns (at most {MAX_TERM_WIDTH})")


def add_output_options(p: argparse.ArgumentParser, *, svg: bool = True) -> None:
    """Add ``--json`` (and ``--svg FILE``), ``--term-width N`` to a picture command's parser."""
    p.add_argument("--json", action="store_true",
                   help="print only machine-readable JSON on stdout (with --svg the SVG is still written)")
    if svg:
        p.add_argument("--svg", metavar="FILE.svg", type=svg_path,
                       help="also write the picture as an SVG file, its name ending in .svg (default: none)")
    p.add_argument("--term-width", type=_term_width, default=None, metavar="N",
                   help=f"picture width in terminal columns, {MIN_TERM_WIDTH}-{MAX_TERM_WIDTH} "
                        f"(default: the terminal's width; {SVG_WIDTH} for --svg)")


_COLUMNS_RULE = (f"COLUMNS, like --term-width, is a terminal width in columns (narrower than {MIN_TERM_WIDTH} counts "
                 f"as {MIN_TERM_WIDTH}, wider than {MAX_TERM_WIDTH} as {MAX_TERM_WIDTH})")


def columns_from_env(environ=None) -> int | None:
    """The terminal width the ``COLUMNS`` environment variable asks for, clamped to
    ``MIN_TERM_WIDTH .. MAX_TERM_WIDTH``; None when it is unset or empty. Zero, a negative number or anything
    else that is not an ASCII integer is refused (:class:`UsageError`): ``COLUMNS=0`` would print nothing.

    >>> columns_from_env({"COLUMNS": "10"}), columns_from_env({"COLUMNS": "100"}), columns_from_env({})
    (40, 100, None)
    """
    text = (os.environ if environ is None else environ).get("COLUMNS", "").strip()
    if not text:
        return None
    try:
        if not text.isascii():
            raise ValueError(text)
        n = int(text, 10)
    except ValueError:
        raise UsageError(f"COLUMNS={text!r} is not a number of columns: unset it, or set it to an integer such as "
                         "80", rule=_COLUMNS_RULE) from None
    if n <= 0:
        raise UsageError(f"COLUMNS={n}: a terminal has at least one column; unset it, or set it to an integer such "
                         "as 80", rule=_COLUMNS_RULE)
    return min(max(n, MIN_TERM_WIDTH), MAX_TERM_WIDTH)


def terminal_width(default: int = 100) -> int:
    """The width text output folds to: ``COLUMNS`` (:func:`columns_from_env`), else the terminal's (``default``
    when there is none), never below ``MIN_TERM_WIDTH``."""
    import shutil

    env = columns_from_env()
    if env is not None:
        return env
    return min(max(shutil.get_terminal_size((default, 24)).columns, MIN_TERM_WIDTH), MAX_TERM_WIDTH)


def emit_json(obj) -> None:
    """Print ``obj`` as one line of compact JSON on stdout."""
    json.dump(obj, sys.stdout, indent=None, separators=(",", ":"))
    sys.stdout.write("\n")


def write_svg(view, path: str | os.PathLike, *, width: int | None = None, title: str = "simtc") -> None:
    """Write ``view`` as SVG to ``path``; an ``OSError`` becomes an :class:`OutputError` naming the path."""
    from simtc.render.export import to_svg

    check_writable(path)
    err = _svg_name_error(path)
    if err is not None:
        raise err
    try:
        to_svg(view, path, width=width or SVG_WIDTH, title=title)
    except OSError as e:
        raise OutputError(f"cannot write {str(path)!r}: {e.strerror or e}",
                          rule="an output file goes into an existing, writable directory") from None
    print(f"wrote {path}", file=sys.stderr)


def emit(args: argparse.Namespace, *, data: dict | None, view, title: str) -> int:
    """The one output routine of every picture command; returns the exit status (0).

    ``view`` is a rich renderable, or a zero-argument function building one (called only when
    a picture is needed). ``--svg FILE`` writes the SVG (whether or not ``--json`` is given);
    ``--json`` then prints only ``data`` as JSON on stdout; otherwise the picture is printed.
    """
    svg = getattr(args, "svg", None)
    want_json = bool(getattr(args, "json", False))
    width = getattr(args, "term_width", None)
    if want_json and data is None:
        raise UsageError("this command has no JSON output", rule=_USAGE_RULE)
    built = None
    if svg or not want_json:
        built = view() if callable(view) and not hasattr(view, "__rich_console__") else view
    if svg:
        write_svg(built, svg, width=width, title=title)
    if want_json:
        emit_json(data)
    else:
        from simtc.render.export import print_view

        print_view(built, width=width)
    return 0


def schedules_summary(name: str, report) -> str:
    """One paragraph for a run under many schedules (:func:`simtc.engine.schedules.explore`'s report): how many,
    the cycle range, and the first schedule that shows a hazard or a deadlock (``simulate`` and ``run``)."""
    bad = report.first_failing
    n = len(report.runs)
    cycles = [r["cycles"] for r in report.runs]
    text = f"{name}: {n} schedule(s), {min(cycles)}-{max(cycles)} cycles; "
    if bad is None:
        return text + "all clean"
    seed = "none: the table's timing" if bad["seed"] is None else str(bad["seed"])
    failing = sum(1 for r in report.runs if r["rules"] or r["deadlock"])
    return text + (f"schedule {bad['schedule']} (seed {seed}) shows {', '.join(bad['rules']) or 'no hazard'}"
                   + (" and a deadlock" if bad["deadlock"] else "") + f"; {failing} of {n} schedules show one")
