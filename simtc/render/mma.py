"""Pictures of MMA instruction words (the tcgen05 instruction descriptor)."""

from __future__ import annotations

from rich.console import Group
from rich.jupyter import JupyterMixin
from rich.table import Table
from rich.text import Text

from simtc.mma.idesc import InstrDescriptor
from simtc.render.theme import bit_strip, field_styles, style

__all__ = ["InstrDescriptorView"]


class InstrDescriptorView(JupyterMixin):
    """A ``tcgen05.mma`` instruction descriptor: bits by field, a field table and its meaning."""

    def __init__(self, desc: InstrDescriptor):
        self.desc = desc

    def __rich_console__(self, console, options):
        d = self.desc
        yield Text(f"tcgen05.mma kind::{d.kind} instruction descriptor {d.hex()}", style=style("simtc.title"))
        colors = field_styles(len(d.fields()))
        yield bit_strip(d.encode(), 32, d.fields(), colors)
        table = Table(header_style=style("simtc.header"), show_edge=False)
        for col in ("field", "bits", "raw", "meaning"):
            table.add_column(col, justify="right" if col == "raw" else "left")
        for i, (name, bits, raw, meaning) in enumerate(d.fields()):
            table.add_row(Text(name, style=colors[i]), bits, str(raw), meaning)
        yield table
        yield Group(*[Text("• " + line) for line in d.explain()])
