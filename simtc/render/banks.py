"""Picture of a bank-conflict report: per phase, how many distinct words each bank serves.

On a narrow console the 32 banks fold into stacked panels (the wavefront column ends the last one).
"""

from __future__ import annotations

from rich.jupyter import JupyterMixin
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from simtc.render.fold import fold_columns, too_narrow, width_of
from simtc.render.theme import style
from simtc.smem.banks import NUM_BANKS, BankReport

__all__ = ["BankMapView"]

_WAVES = " wavefronts"


def _cell(n: int) -> Text:
    st = "simtc.bank.idle" if n == 0 else ("simtc.bank.ok" if n == 1 else "simtc.bank.conflict")
    return Text(f"{n:>3}" if n else "  .", style=style(st))


class BankMapView(JupyterMixin):
    """Phases x 32 banks; a cell is the number of distinct 4-byte words (red when > 1)."""

    def __init__(self, report: BankReport):
        self.report = report

    def _widths(self) -> tuple[int, list[int]]:
        r = self.report
        fixed = width_of("phase", *(str(p) for p in range(len(r.bank_words))))
        return fixed, [3] * NUM_BANKS + [width_of(_WAVES, *(str(w) for w in r.phase_wavefronts))]

    def __rich_measure__(self, console, options):
        fixed, widths = self._widths()
        return Measurement(fixed + max(widths), fixed + sum(widths))

    def __rich_console__(self, console, options):
        r = self.report
        yield Text(f"{r.width}-byte accesses, {r.phase_threads} threads per phase: {r.wavefronts} wavefronts "
                   f"(ideal {r.ideal}, conflict degree {r.conflict_degree:.2f})", style=style("simtc.title"))
        fixed, widths = self._widths()
        chunks = fold_columns(widths, fixed=fixed, max_width=options.max_width)
        if not chunks:
            yield too_narrow("bank map", fixed + max(widths), options.max_width)
            return
        for chunk in chunks:
            banks = [c for c in chunk if c < NUM_BANKS]
            if len(chunks) > 1:
                yield Text(f"banks {banks[0]}-{banks[-1]}" if banks else "wavefronts", style=style("simtc.note"))
            table = Table(box=None, padding=(0, 0), header_style=style("simtc.header"), pad_edge=False)
            table.add_column("phase", justify="right", no_wrap=True)
            for b in banks:
                table.add_column(f"{b:>2}", justify="right", min_width=3, no_wrap=True)
            waves = NUM_BANKS in chunk
            if waves:
                table.add_column(_WAVES, justify="right", no_wrap=True)
            for p, per_bank in enumerate(r.bank_words):
                cells = [_cell(len(per_bank[b])) for b in banks]
                table.add_row(str(p), *cells, *([str(r.phase_wavefronts[p])] if waves else []))
            yield table
        legend = Text("cell = distinct 4-byte words a bank serves in the phase: ")
        legend.append("  1", style=style("simtc.bank.ok"))
        legend.append(" one word (no conflict)  ")
        legend.append(" 2+", style=style("simtc.bank.conflict"))
        legend.append(" conflict: one wavefront per word  ")
        legend.append("  .", style=style("simtc.bank.idle"))
        legend.append(" bank not used")
        yield legend
