"""simtc's SVG writer: self-contained, escaped, coloured from the rich styles, glyphs on a fixed grid."""

import re
import xml.etree.ElementTree as ET

from rich.text import Text

from simtc.kernels.flashmla import TMEM_V32
from simtc.render.export import SVG_GEOMETRY, to_svg
from simtc.render.theme import PHASE_COLORS, phase_style
from simtc.render.tmem import TmemMapView

NS = "{http://www.w3.org/2000/svg}"


def test_no_network_fonts_no_text_length():
    svg = to_svg(TmemMapView(regions=TMEM_V32), width=80, title="simtc tmem map")
    assert "url(" not in svg and "@import" not in svg and "@font-face" not in svg and "textLength" not in svg
    assert re.findall(r"https?://[^\"]+", svg) == ["http://www.w3.org/2000/svg"]
    assert 'font-family="DejaVu Sans Mono, Menlo, Consolas, Liberation Mono, monospace"' in svg


def test_every_glyph_has_its_own_x():
    root = ET.fromstring(to_svg(Text("ab cd"), width=20, title="T"))
    texts = [(t.get("x").split(), t.text) for t in root.iter(NS + "text")]
    g = SVG_GEOMETRY
    assert texts[0] == (["8"], "T")                                    # the title
    assert texts[1] == ([str(g.pad + c * g.char_width) for c in (0, 1, 3, 4)], "abcd")   # space skipped, not collapsed


def test_escaping_and_title():
    svg = to_svg(Text('<a & "b">'), width=20, title="x < y & z")
    root = ET.fromstring(svg)
    assert root.find(NS + "title").text == "x < y & z"
    assert "".join(t.text for t in root.iter(NS + "text")) == 'x<y&z<a&"b">'


def test_colours_come_from_the_styles():
    t = Text("ab", style=phase_style(3)) + Text("c", style="bold white on #D55E00")
    root = ET.fromstring(to_svg(t, width=10))
    rects = [(r.get("x"), r.get("width"), r.get("fill")) for r in root.iter(NS + "rect")][1:]   # [0] = page
    cw, x0 = SVG_GEOMETRY.char_width, SVG_GEOMETRY.pad
    assert rects == [(str(x0), str(2 * cw), PHASE_COLORS[3].lower()), (str(x0 + 2 * cw), str(cw), "#d55e00")]
    c = next(t for t in root.iter(NS + "text") if t.text == "c")
    assert c.get("font-weight") == "bold" and c.get("fill") == "#ffffff"


def test_wide_characters_take_two_cells():
    root = ET.fromstring(to_svg(Text("a中b"), width=10))
    pos = {t.text: int(t.get("x").split()[-1]) for t in root.iter(NS + "text") if t.text}
    g = SVG_GEOMETRY
    assert pos["中"] == g.pad + g.char_width and pos["ab"] == g.pad + 3 * g.char_width
