"""Picture of a bank-conflict report: per phase, how many distinct words each bank serves."""

from __future__ import annotations

from rich.jupyter import JupyterMixin
from rich.table import Table
from rich.text import Text

from simtc.render.theme import style
from simtc.smem.banks import NUM_BANKS, BankReport

__all__ = ["BankMapView"]


class BankMapView(JupyterMixin):
    """Phases x 32 banks; a cell is the number of distinct 4-byte words (red when > 1)."""

    def __init__(self, report: BankReport):
        self.report = report

    def __rich_console__(self, console, options):
        r = self.report
        yield Text(f"{r.width}-byte accesses, {r.phase_threads} threads per phase: {r.wavefronts} wavefronts "
                   f"(ideal {r.ideal}, conflict degree {r.conflict_degree:.2f})", style=style("simtc.title"))
        table = Table(box=None, padding=(0, 0), header_style=style("simtc.header"), pad_edge=False)
        table.add_column("phase", justify="right")
        for b in range(NUM_BANKS):
            table.add_column(f"{b:>2}", justify="right", min_width=3)
        table.add_column(" wavefronts", justify="right")
        for p, per_bank in enumerate(r.bank_words):
            cells = []
            for words in per_bank:
                n = len(words)
                style_ = style("simtc.bank.idle" if n == 0 else ("simtc.bank.ok" if n == 1 else "simtc.bank.conflict"))
                cells.append(Text(f"{n:>3}" if n else "  .", style=style_))
            table.add_row(str(p), *cells, str(r.phase_wavefronts[p]))
        yield table
