"""Printing and SVG export of simtc views.

Every view is a rich renderable (``__rich_console__``) and mixes in rich's ``JupyterMixin``,
so the same object prints in a terminal and shows as HTML in Jupyter.

:func:`to_svg` is simtc's own SVG writer. It renders the view into rich ``Segment`` lines and
draws them on a fixed character grid: one background ``<rect>`` per run of cells with the
same background colour, and the glyphs of each run in one ``<text>`` whose ``x`` attribute
lists the position of every glyph. Glyph positions therefore never depend on the font's
metrics or on ``textLength`` (which some rasterizers, cairosvg among them, ignore), and the
font is a generic monospace stack with no network font, so the picture is the same offline,
in cairosvg, resvg and browsers. The output is deterministic (no ids, no time stamps).

>>> from rich.text import Text
>>> svg = to_svg(Text("a<b", style="bold"), width=10, title="t")
>>> '<text x="8 17 26" y="43" font-weight="bold">a&lt;b</text>' in svg
True
"""

from __future__ import annotations

import functools
import io
import os
from xml.sax.saxutils import escape, quoteattr

from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.terminal_theme import TerminalTheme

from simtc.render.theme import SIMTC_THEME

__all__ = ["SVG_GEOMETRY", "SvgGeometry", "make_console", "print_view", "render_segment_lines", "to_svg",
           "to_text"]


def make_console(width: int | None = None, *, record: bool = False, file=None, force_terminal=None,
                 stderr: bool = False) -> Console:
    """A console with simtc's theme."""
    return Console(theme=SIMTC_THEME, width=width, record=record, file=file, force_terminal=force_terminal,
                   stderr=stderr)


def print_view(view, width: int | None = None) -> None:
    """Print a view on standard output with simtc's theme (``width`` = terminal width, ``None`` = auto).

    Views fold themselves into stacked panels to fit the width; a view that still cannot fit
    says so in one line instead of being cut.
    """
    make_console(width).print(view)


def to_text(view, width: int = 120) -> str:
    """Render a view to plain text (no colours) at a fixed width; used by tests."""
    console = Console(theme=SIMTC_THEME, width=width, record=True, file=io.StringIO(), color_system=None,
                      force_terminal=False)
    console.print(view)
    return console.export_text()


class SvgGeometry:
    """The character grid of :func:`to_svg`, in SVG user units (pixels at scale 1).

    Cell ``(row, col)`` of the rendered view (row 0 = the view's first line) covers
    ``x in [pad + col * char_width, pad + (col + 1) * char_width)`` and
    ``y in [top + row * line_height, top + (row + 1) * line_height)``; ``top`` leaves room for the title line.
    """

    char_width = 9
    line_height = 18
    font_size = 14
    pad = 8
    baseline = 13  # text baseline below the top of its line

    @property
    def top(self) -> int:
        return self.pad + self.line_height + self.pad // 2

    def cell(self, row: int, col: int, ncols: int = 1) -> tuple[int, int, int, int]:
        """(x0, y0, x1, y1) of ``ncols`` cells starting at (row, col) of the view."""
        x0 = self.pad + col * self.char_width
        y0 = self.top + row * self.line_height
        return x0, y0, x0 + ncols * self.char_width, y0 + self.line_height

    def size(self, nrows: int, ncols: int) -> tuple[int, int]:
        """(width, height) of the whole picture."""
        return 2 * self.pad + ncols * self.char_width, self.top + nrows * self.line_height + self.pad


SVG_GEOMETRY = SvgGeometry()
_PLAIN = Style()

# A light terminal palette (ANSI colours darkened to read on white); truecolor styles pass through.
_LIGHT = TerminalTheme(
    (255, 255, 255), (20, 20, 20),
    [(0, 0, 0), (170, 30, 30), (0, 120, 40), (150, 110, 0), (30, 70, 180), (150, 40, 150), (0, 120, 140),
     (255, 255, 255)],
    [(90, 90, 90), (210, 50, 50), (0, 150, 60), (180, 140, 0), (60, 100, 220), (190, 60, 190), (0, 150, 170),
     (255, 255, 255)],
)
_FONT_STACK = "DejaVu Sans Mono, Menlo, Consolas, Liberation Mono, monospace"


def _hex(rgb) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def _colors(style: Style) -> tuple[str, str | None]:
    """(foreground, background or None) of a style on the light palette, dim blended towards the background."""
    fg = style.color.get_truecolor(_LIGHT, foreground=True) if style.color else _LIGHT.foreground_color
    bg = style.bgcolor.get_truecolor(_LIGHT, foreground=False) if style.bgcolor else None
    if style.reverse:
        fg, bg = (bg or _LIGHT.background_color), fg
    if style.dim:
        base = bg or _LIGHT.background_color
        fg = tuple(int(f * 0.55 + b * 0.45) for f, b in zip(fg, base, strict=True))
    return _hex(fg), (_hex(bg) if bg is not None else None)


def render_segment_lines(view, width: int) -> list[list[Segment]]:
    """The view rendered by rich into lines of styled segments (control codes dropped), ``width`` cells wide."""
    console = Console(theme=SIMTC_THEME, width=width, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", legacy_windows=False, record=True)
    console.print(view)
    segments = [s for s in console._record_buffer if not s.control]  # what export_svg/export_text read
    lines = list(Segment.split_lines(segments))
    while lines and not "".join(s.text for s in lines[-1]).strip():
        lines.pop()
    return lines


def _glyph_runs(text: str, col: int):
    """Split ``text`` starting at cell ``col`` into (glyphs, x cells) for x lists, and lone glyphs.

    Yields ``("run", chars, cols)`` for narrow BMP glyphs (one x each) and ``("one", char, col)`` for
    wide, astral or zero-width ones, each drawn in its own element so no x list depends on how a
    renderer counts characters.
    """
    if text.isascii() and text.isprintable():  # the common case: one cell per character
        cols = [col + i for i, ch in enumerate(text) if ch != " "]
        if cols:
            yield "run", [text[c - col] for c in cols], cols
        return
    chars: list[str] = []
    cols = []
    for ch in text:
        w = cell_len(ch)
        if ch.isspace():
            pass
        elif w == 1 and ord(ch) < 0x10000:
            chars.append(ch)
            cols.append(col)
        else:
            yield "one", ch, max(col - (w == 0), 0)
        col += w
    if chars:
        yield "run", chars, cols


def _text_elements(text: str, col: int, y: int, attrs: str) -> list[str]:
    """``<text>`` elements drawing ``text`` from cell ``col`` on the baseline ``y``, every glyph placed explicitly."""
    g = SVG_GEOMETRY
    pad, cw = g.pad, g.char_width
    out = []
    for kind, chars, cols in _glyph_runs(text, col):
        if kind == "run":
            xs = " ".join([str(pad + c * cw) for c in cols])
            out.append(f'<text x="{xs}" y="{y}"{attrs}>{escape("".join(chars))}</text>')
        else:
            out.append(f'<text x="{pad + cols * cw}" y="{y}"{attrs}>{escape(chars)}</text>')
    return out


@functools.lru_cache(maxsize=4096)
def _style_svg(style: Style) -> tuple[str | None, str]:
    """(background colour or None, ``<text>`` attributes) of a style: computed once per distinct style."""
    fg, bg = _colors(style)
    attrs = ""
    if fg != _hex(_LIGHT.foreground_color):
        attrs += f' fill="{fg}"'
    if style.bold:
        attrs += ' font-weight="bold"'
    if style.italic:
        attrs += ' font-style="italic"'
    if style.underline:
        attrs += ' text-decoration="underline"'
    return bg, attrs


def to_svg(view, path: str | os.PathLike | None = None, *, width: int = 120, title: str = "simtc") -> str:
    """Render a view to a self-contained SVG (returned, and written to ``path`` if given).

    ``width`` is the number of character cells per line (as a terminal width); ``title`` is
    drawn in bold above the picture. Geometry: :data:`SVG_GEOMETRY`.
    """
    g = SVG_GEOMETRY
    lines = render_segment_lines(view, width)
    ncols = max([width, cell_len(title)] + [sum(cell_len(s.text) for s in line) for line in lines])
    w, h = g.size(len(lines), ncols)
    bg_parts: list[str] = []
    fg_parts: list[str] = []
    for row, line in enumerate(lines):
        col = 0
        run_bg, run_start = None, 0
        baseline = g.cell(row, 0)[1] + g.baseline
        for seg in line:
            text = seg.text
            n = len(text) if text.isascii() else cell_len(text)
            bg, attrs = _style_svg(seg.style or _PLAIN)
            if bg != run_bg:
                if run_bg is not None and col > run_start:
                    x0, y0, x1, y1 = g.cell(row, run_start, col - run_start)
                    bg_parts.append(f'<rect x="{x0}" y="{y0}" width="{x1 - x0}" height="{y1 - y0}" fill="{run_bg}"/>')
                run_bg, run_start = bg, col
            fg_parts += _text_elements(text, col, baseline, attrs)
            col += n
        if run_bg is not None and col > run_start:
            x0, y0, x1, y1 = g.cell(row, run_start, col - run_start)
            bg_parts.append(f'<rect x="{x0}" y="{y0}" width="{x1 - x0}" height="{y1 - y0}" fill="{run_bg}"/>')
    title_el = "\n".join(_text_elements(title, 0, g.pad + g.baseline, ' font-weight="bold"'))
    svg = "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}">',
        f"<title>{escape(title)}</title>",
        f'<rect width="{w}" height="{h}" fill="{_hex(_LIGHT.background_color)}"/>',
        f'<g font-family={quoteattr(_FONT_STACK)} font-size="{g.font_size}" '
        f'fill="{_hex(_LIGHT.foreground_color)}" xml:space="default">',
        title_el,
        *bg_parts,
        *fg_parts,
        "</g>",
        "</svg>",
        "",
    ])
    if path is not None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(svg)
    return svg
