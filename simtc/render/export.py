"""Printing and SVG export of simtc views.

Every view is a rich renderable (``__rich_console__``) and mixes in rich's ``JupyterMixin``,
so the same object prints in a terminal and shows as HTML in Jupyter. :func:`to_svg`
renders it with a recording console and a fixed ``unique_id`` so output is reproducible.
"""

from __future__ import annotations

import io
import os

from rich.console import Console

from simtc.render.theme import SIMTC_THEME

__all__ = ["make_console", "print_view", "to_svg", "to_text"]


def make_console(width: int | None = None, *, record: bool = False, file=None, force_terminal=None,
                 stderr: bool = False) -> Console:
    """A console with simtc's theme."""
    return Console(theme=SIMTC_THEME, width=width, record=record, file=file, force_terminal=force_terminal,
                   stderr=stderr)


def print_view(view, width: int | None = None) -> None:
    """Print a view on standard output with simtc's theme."""
    make_console(width).print(view)


def to_text(view, width: int = 120) -> str:
    """Render a view to plain text (no colours) at a fixed width; used by tests."""
    console = Console(theme=SIMTC_THEME, width=width, record=True, file=io.StringIO(), color_system=None,
                      force_terminal=False)
    console.print(view)
    return console.export_text()


def to_svg(view, path: str | os.PathLike | None = None, *, width: int = 120, title: str = "simtc") -> str:
    """Render a view to SVG (returned, and written to ``path`` if given)."""
    console = Console(theme=SIMTC_THEME, width=width, record=True, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor")
    console.print(view)
    svg = console.export_svg(title=title, unique_id="simtc")
    if path is not None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(svg)
    return svg
