"""The cross-check table."""

from __future__ import annotations

from rich.console import Group
from rich.jupyter import JupyterMixin
from rich.table import Table
from rich.text import Text

from simtc.render.theme import style

__all__ = ["CrosscheckTable"]


class CrosscheckTable(JupyterMixin):
    def __init__(self, results, note: str):
        self.results = results
        self.note = note

    def __rich_console__(self, console, options):
        t = Table(header_style=style("simtc.header"), title="simtc crosscheck", title_style=style("simtc.title"))
        for col in ("check", "status", "cases", "bit-exact", "outputs exact", "max |diff|", "cycles/group"):
            t.add_column(col, justify="left" if col in ("check", "status") else "right", no_wrap=col != "check",
                         min_width=24 if col == "check" else None)
        for r in self.results:
            st = {"pass": "simtc.bank.ok", "FAIL": "simtc.bank.conflict"}.get(r.status, "simtc.dim")
            t.add_row(r.check, Text(r.status, style=style(st)), str(r.cases) if r.cases else "",
                      f"{r.bit_exact}/{r.cases}" if r.cases else "",
                      f"{r.elements_exact}/{r.elements}" if r.elements else "",
                      f"{r.max_abs_diff:.3g}" if r.elements else "",
                      f"{r.cycles:.0f}" if r.cycles is not None else "")
        notes = [Text(f"device: {self.note}", style=style("simtc.note"))]
        for r in self.results:
            if r.detail:
                notes.append(Text(f"{r.check}: {r.detail}"))
            if r.first_mismatch:
                notes.append(Text(f"first mismatch: {r.first_mismatch}", style=style("simtc.bank.conflict")))
        yield Group(t, *notes)
