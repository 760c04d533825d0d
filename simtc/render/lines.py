"""A view made of text lines laid out for the console width (tables and reports written as plain text).

The same object prints in a terminal, shows in Jupyter and exports to SVG like every other view:
``make_lines(width)`` is called with the width rich renders at, so the text folds itself instead of
being cut.

>>> from simtc.render.export import to_text
>>> print(to_text(LinesView(lambda w: [f"width {w}"]), width=50).strip())
width 50
"""

from __future__ import annotations

from collections.abc import Callable

from rich.jupyter import JupyterMixin
from rich.text import Text

__all__ = ["LinesView"]


class LinesView(JupyterMixin):
    def __init__(self, make_lines: Callable[[int], list[str]]):
        self.make_lines = make_lines

    def __rich_console__(self, console, options):
        for line in self.make_lines(options.max_width):
            yield Text(line, no_wrap=False, overflow="fold")
