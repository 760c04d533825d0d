"""The cross-check table (a grid where it fits, one wrapped block per check where it does not)."""

from __future__ import annotations

from rich.console import Group
from rich.jupyter import JupyterMixin
from rich.table import Table
from rich.text import Text

from simtc.render.theme import style

__all__ = ["CrosscheckTable"]

_COLUMNS = ("check", "status", "cases", "bit-exact", "outputs exact", "max |diff|", "cycles/group")
_CHECK_MIN = 24


def _status_style(status: str) -> str:
    return style({"pass": "simtc.bank.ok", "FAIL": "simtc.bank.conflict"}.get(status, "simtc.dim"))


def _cells(r) -> tuple[str, ...]:
    return (r.check, r.status, str(r.cases) if r.cases else "",
            f"{r.bit_exact}/{r.cases}" if r.cases else "",
            f"{r.elements_exact}/{r.elements}" if r.elements else "",
            f"{r.max_abs_diff:.3g}" if r.elements else "",
            f"{r.cycles:.0f}" if r.cycles is not None else "")


class CrosscheckTable(JupyterMixin):
    def __init__(self, results, note: str):
        self.results = results
        self.note = note

    def grid_width(self) -> int:
        """Narrowest width of the grid: the check column at its minimum, the others unwrapped, plus borders."""
        rows = [_cells(r) for r in self.results]
        widths = [_CHECK_MIN] + [max(len(x) for x in (head, *(row[i] for row in rows)))
                                 for i, head in enumerate(_COLUMNS) if i > 0]
        return sum(widths) + 3 * len(_COLUMNS) + 1

    def _grid(self) -> Table:
        t = Table(header_style=style("simtc.header"), title="simtc crosscheck", title_style=style("simtc.title"))
        for col in _COLUMNS:
            t.add_column(col, justify="left" if col in ("check", "status") else "right", no_wrap=col != "check",
                         min_width=_CHECK_MIN if col == "check" else None)
        for r in self.results:
            cells = _cells(r)
            t.add_row(cells[0], Text(cells[1], style=_status_style(r.status)), *cells[2:])
        return t

    def _stacked(self) -> Group:
        """The same facts as the grid, one wrapped block per check (for narrow consoles)."""
        blocks = [Text("simtc crosscheck", style=style("simtc.title"))]
        for r in self.results:
            cells = _cells(r)
            blocks.append(Text.assemble((r.status, _status_style(r.status)), "  ", (r.check, style("simtc.header"))))
            facts = [f"{head} {value}" for head, value in zip(_COLUMNS[2:], cells[2:], strict=True) if value]
            if facts:
                blocks.append(Text("    " + " · ".join(facts)))
        return Group(*blocks)

    def __rich_console__(self, console, options):
        body = self._grid() if self.grid_width() <= options.max_width else self._stacked()
        notes = [Text(f"device: {self.note}", style=style("simtc.note"))]
        for r in self.results:
            if r.detail:
                notes.append(Text(f"{r.check}: {r.detail}"))
            if r.first_mismatch:
                notes.append(Text(f"first mismatch: {r.first_mismatch}", style=style("simtc.bank.conflict")))
        yield Group(body, *notes)
