"""Folding wide pictures into stacked panels that fit the console width (never cut them).

A grid view (bank map, tile, ``tcgen05.ld`` map) is a row-header column plus many data
columns. When they do not fit, :func:`fold_columns` splits the data columns into consecutive
chunks that do, and the view draws one panel per chunk, each repeating the row headers and
naming its columns. When not even one data column fits, :func:`too_narrow` says which width
is needed instead of printing a cut picture.

>>> fold_columns([3] * 32, fixed=5, max_width=80)
[range(0, 25), range(25, 32)]
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text

__all__ = ["fold_columns", "too_narrow", "width_of"]


def width_of(*cells) -> int:
    """The widest of some cells (str or rich Text), in terminal cells."""
    return max((cell_len(c.plain if isinstance(c, Text) else str(c)) for c in cells), default=0)


def fold_columns(widths: list[int], *, fixed: int, max_width: int) -> list[range]:
    """Consecutive chunks of columns (each ``widths[i]`` wide, padding included) that fit next to ``fixed``.

    Returns ``[]`` when a single column does not fit (see :func:`too_narrow`).
    """
    chunks: list[range] = []
    start, used = 0, fixed
    for i, w in enumerate(widths):
        if fixed + w > max_width:
            return []
        if used + w > max_width:
            chunks.append(range(start, i))
            start, used = i, fixed
        used += w
    if start < len(widths) or not widths:
        chunks.append(range(start, len(widths)))
    return chunks


def too_narrow(what: str, needed: int, have: int) -> Text:
    """One line saying a picture needs ``needed`` columns and the console has ``have``."""
    from simtc.render.theme import style

    return Text(f"{what}: needs a console at least {needed} characters wide (this one has {have}); "
                "widen the terminal or set a larger width", style=style("simtc.bank.conflict"))
