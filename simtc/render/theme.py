"""Named styles shared by every simtc view (terminal, Jupyter and SVG agree).

Colours are looked up by name (``simtc.phase.3``, ``simtc.bank.conflict``...) so that a
palette change is one edit here.
"""

from __future__ import annotations

from rich.style import Style
from rich.theme import Theme

__all__ = ["PHASE_COLORS", "SIMTC_THEME", "bit_strip", "field_styles", "phase_style", "style"]

# Eight distinguishable light background colours for swizzle phases / regions (pastel tints of the
# colour-blind-safe Okabe-Ito palette plus grey), all readable with black text.
PHASE_COLORS = ("#9FC9EB", "#F5C97A", "#86D2B8", "#E6B3D0", "#C3E3F7", "#F2A779", "#F7F19E", "#D0D0D0")

_styles = {f"simtc.phase.{i}": f"black on {c}" for i, c in enumerate(PHASE_COLORS)}
_styles.update({
    "simtc.title": "bold",
    "simtc.dim": "dim",
    "simtc.header": "bold cyan",
    "simtc.field": "bold",
    "simtc.value": "green",
    "simtc.bits": "magenta",
    "simtc.note": "italic dim",
    "simtc.inferred": "italic yellow",
    "simtc.bank.ok": "black on #009E73",
    "simtc.bank.conflict": "bold white on #D55E00",
    "simtc.bank.idle": "dim",
})
for i, c in enumerate(PHASE_COLORS):
    _styles[f"simtc.region.{i}"] = f"black on {c}"

SIMTC_THEME = Theme(_styles)


def style(name: str) -> Style:
    """The concrete style behind a simtc style name (works on any console, themed or not)."""
    return SIMTC_THEME.styles[name]


def phase_style(i: int) -> Style:
    """Style for phase / region ``i`` (cycles through 8 colours)."""
    return SIMTC_THEME.styles[f"simtc.phase.{int(i) % len(PHASE_COLORS)}"]


def field_styles(n: int) -> list[Style]:
    """``n`` distinct styles for the fields of an instruction or descriptor word."""
    return [phase_style(i) for i in range(n)]


def bit_strip(word: int, width: int, fields, styles):
    """The bits of ``word`` (MSB first, grouped by 8), each coloured by the field that owns it.

    ``fields`` yields ``(name, "lo-hi" or "bit", ...)`` rows (as ``fields()`` of simtc's
    descriptors do); ``styles`` gives one style per row.
    """
    from rich.text import Text

    owner = {}
    for (_name, bits, *_rest), st in zip(fields, styles, strict=True):
        lo, _, hi = bits.partition("-")
        for b in range(int(lo), int(hi or lo) + 1):
            owner[b] = st
    t = Text(f"bits {width - 1}..0  ")
    for b in range(width - 1, -1, -1):
        t.append(str((word >> b) & 1), style=owner.get(b, style("simtc.dim")))
        if b % 8 == 0 and b:
            t.append(" ")
    return t
