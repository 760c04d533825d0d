"""Small helpers shared by the subcommand modules (kept free of heavy imports)."""

from __future__ import annotations

import json
import sys

__all__ = ["add_output_options", "emit_json", "show"]


def add_output_options(p, *, svg: bool = True) -> None:
    """Add ``--json`` (and ``--svg FILE``, ``--term-width N``) to a subcommand parser."""
    p.add_argument("--json", action="store_true", help="print machine-readable JSON instead of a picture")
    if svg:
        p.add_argument("--svg", metavar="FILE", help="also write the picture as an SVG file")
    p.add_argument("--term-width", type=int, default=None, help="terminal width for the picture (default: auto)")


def emit_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=None, separators=(",", ":"))
    sys.stdout.write("\n")


def show(view, args, *, title: str = "simtc") -> None:
    """Print a view (unless --json) and write --svg if asked."""
    from simtc.render.export import print_view, to_svg

    if getattr(args, "svg", None):
        to_svg(view, args.svg, width=args.term_width or 140, title=title)
        print(f"wrote {args.svg}", file=sys.stderr)
    print_view(view, width=args.term_width)
