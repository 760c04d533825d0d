"""SVG pictures rasterized with cairosvg: every glyph sits inside its character cell.

simtc's SVG writer places each glyph at an explicit x on a fixed grid (``SVG_GEOMETRY``), so
what a rasterizer draws does not depend on font metrics or on ``textLength`` support. These
tests render the TMEM map and a shared-memory tile picture to PNG and check, from pixels:

* every cell holding a glyph has ink inside its rectangle, and blank cells have none (no glyph
  drifts out of its coloured region);
* every cell holding the same character in the same style renders the same pixels (the glyph
  sits at the same place in each cell, whatever its column);
* the title's ink stays in its own band above the picture (titles do not run together).
"""

from __future__ import annotations

import io

import numpy as np
import pytest

from simtc.kernels.flashmla import TMEM_V32
from simtc.render.export import SVG_GEOMETRY, render_segment_lines, to_svg
from simtc.render.smem import TileView
from simtc.render.tmem import TmemMapView
from simtc.smem import CanonicalLayout

cairosvg = pytest.importorskip("cairosvg", reason="cairosvg (dev extra) converts SVG to PNG")
Image = pytest.importorskip("PIL.Image", reason="pillow (a cairosvg dependency) reads the PNG")

INK = 90  # a pixel is ink when a channel differs from its cell's background by more than this


def rasterize(svg: str) -> np.ndarray:
    png = cairosvg.svg2png(bytestring=svg.encode())
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(np.int16)


def char_grid(view, width: int) -> list[list[tuple[str, object]]]:
    """(character, style) per cell, as the SVG writer sees the view (wide characters take two cells)."""
    from rich.cells import cell_len

    grid = []
    for line in render_segment_lines(view, width):
        row = []
        for seg in line:
            for ch in seg.text:
                row.append((ch, seg.style))
                row.extend([("", seg.style)] * (cell_len(ch) - 1))
        grid.append(row)
    return grid


def ink_per_cell(img: np.ndarray, grid, cell) -> list[list[np.ndarray]]:
    """Per cell: a boolean ink mask of its rectangle (``cell(row, col)`` -> x0, y0, x1, y1 in pixels)."""
    out = []
    for r, row in enumerate(grid):
        masks = []
        for c in range(len(row)):
            x0, y0, x1, y1 = (round(v) for v in cell(r, c))
            px = img[y0:y1, x0:x1]
            bg = np.median(px.reshape(-1, 3), axis=0)
            masks.append((np.abs(px - bg) > INK).any(axis=-1))
        out.append(masks)
    return out


def glyph_problems(img: np.ndarray, grid, cell) -> list[str]:
    """Where the picture breaks the fixed-grid rules (empty = all glyphs inside their cells)."""
    masks = ink_per_cell(img, grid, cell)
    problems = []
    reference: dict[tuple[str, object], np.ndarray] = {}
    for r, row in enumerate(grid):
        for c, (ch, st) in enumerate(row):
            m = masks[r][c]
            if ch == "" or ch in "─│┃━╸·▒":   # continuation cells and glyphs drawn edge to edge
                continue
            if ch.isspace():
                if m.sum() > 2:
                    problems.append(f"ink in blank cell ({r}, {c})")
            elif ch.isalnum():
                if m.sum() == 0:
                    problems.append(f"no ink for {ch!r} at ({r}, {c})")
                key = (ch, st)
                ref = reference.setdefault(key, m)
                if ref.shape == m.shape and (ref ^ m).sum() > 0.1 * max(ref.sum(), 1):
                    problems.append(f"{ch!r} at ({r}, {c}) drawn differently from its first occurrence")
    return problems


def title_problems(img: np.ndarray, title_band: tuple[int, int], picture_top: int) -> list[str]:
    """Ink between the title's band and the picture's first line means the title spills over."""
    page = img[0, 0]
    rows = np.flatnonzero((np.abs(img[:picture_top] - page) > INK).any(axis=(1, 2)))
    y0, y1 = title_band
    stray = rows[(rows < y0) | (rows >= y1)]
    return [f"title ink at pixel rows {stray.min()}-{stray.max()} outside its band {y0}-{y1}"] if stray.size else []


def new_cell(r: int, c: int):
    return SVG_GEOMETRY.cell(r, c)


VIEWS = {
    "tmem map": (TmemMapView(regions=TMEM_V32), 80),
    "smem tile": (TileView(CanonicalLayout("bf16", "K", "SW128", 8, 64)), 100),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_glyphs_stay_in_their_cells(name):
    view, width = VIEWS[name]
    grid = char_grid(view, width)
    img = rasterize(to_svg(view, width=width, title=f"simtc {name}"))
    assert img.shape[1] == SVG_GEOMETRY.size(len(grid), width)[0]
    labelled = sum(1 for row in grid for ch, st in row if ch.isalnum() and st is not None and st.bgcolor)
    assert labelled > 40   # the check covers many coloured cells
    assert glyph_problems(img, grid, new_cell) == []


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_title_stays_in_its_band(name):
    view, width = VIEWS[name]
    g = SVG_GEOMETRY
    img = rasterize(to_svg(view, width=width, title=f"simtc {name}"))
    assert title_problems(img, (g.pad, g.pad + g.line_height), g.top) == []
    # and the title has ink: it is drawn
    assert (np.abs(img[g.pad:g.pad + g.line_height] - img[0, 0]) > INK).any()


def test_coloured_cell_holds_its_label():
    """In the FlashMLA map, the cell at column 384 (Q_tail) is green-ish 't' and its ink is inside it."""
    view, width = VIEWS["tmem map"]
    grid = char_grid(view, width)
    img = rasterize(to_svg(view, width=width))
    r = next(i for i, row in enumerate(grid) if "".join(ch for ch, _ in row).strip().startswith("0-3"))
    line = "".join(ch for ch, _ in grid[r])
    c = line.index("t")
    assert line[c:c + 2] == "tt" and line[c - 1] == "Q" and line[c + 2] == "P"
    x0, y0, x1, y1 = SVG_GEOMETRY.cell(r, c, 2)
    region = img[y0:y1, x0:x1]
    bg = np.median(region.reshape(-1, 3), axis=0)
    assert tuple(bg) == (0x86, 0xD2, 0xB8)            # simtc.region.2, Q_tail's colour
    ink = (np.abs(region - bg) > INK).any(axis=-1)
    assert ink[:, :SVG_GEOMETRY.char_width].sum() > 10 and ink[:, SVG_GEOMETRY.char_width:].sum() > 10
