"""A Gantt view of an engine run: one row per warp, per asynchronous unit and per mbarrier.

Time runs left to right, scaled to the width (each character = ``cycles / width`` cycles):

* warp rows: ``█`` issuing / busy, ``░`` waiting (mbarrier, named barrier, wait::ld/st), ``▲`` an
  arrival it made;
* unit rows (tensor pipe, TMA, TMEM path, shared-memory port): ``█`` while occupied;
* mbarrier rows: ``·`` arrivals, ``│`` phase completions;
* the critical path (following each event's cause back from the last one) is drawn in the
  highlight style wherever it passes.

Works in a terminal and in Jupyter (rich ``JupyterMixin``); SVG through
:func:`simtc.render.export.to_svg`.
"""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.jupyter import JupyterMixin
from rich.style import Style
from rich.text import Text

__all__ = ["TimelineView"]

_BUSY = Style(color="#0072B2")
_WAIT = Style(color="#999999")
_UNIT = Style(color="#009E73")
_BAR = Style(color="#E69F00")
_CRIT = Style(color="#D55E00", bold=True)
_CURSOR = Style(bgcolor="#CC79A7")
_UNIT_NAMES = {"tensor_pipe": "tensor pipe", "tma": "TMA", "tmem_path": "TMEM ld/st", "smem_port": "smem port"}


class TimelineView(JupyterMixin):
    """The timeline of a finished (or paused) :class:`simtc.engine.core.Engine` run."""

    def __init__(self, engine, *, width: int | None = None, barriers: bool = True, title: str | None = None,
                 hazards: bool = True, cursor: int | None = None):
        self.engine = engine
        self.cursor = cursor
        """A cycle marked by a column across every row (a stepper's current cycle), or None."""
        self.width = width
        self.barriers = barriers
        self.hazards = hazards
        self.title = title or f"{engine.program.name}: {engine.cycles} cycles, {len(engine.trace)} events"

    def _rows(self, cols: int):
        eng = self.engine
        tr = eng.trace
        end = max(eng.cycles, 1)
        scale = cols / (end + 1)

        def cell(c):
            return min(cols - 1, int(c * scale))

        crit = set(eng.critical_path())
        rows = []
        for a in eng.agents:
            chars = [" "] * cols
            styles = [None] * cols
            start = None
            wait_from = None
            finish = end
            for e in tr:
                if e.role != a.role or e.warp != a.warp:
                    continue
                k = e.kind
                if start is None and k in ("issue", "wait"):
                    start = e.cycle
                if k == "wait":
                    wait_from = e.cycle
                elif k == "resume" and wait_from is not None:
                    for x in range(cell(wait_from), cell(e.cycle) + 1):
                        chars[x], styles[x] = "░", _WAIT
                    wait_from = None
                elif k == "done":
                    finish = e.cycle
            if start is not None:
                for x in range(cell(start), cell(finish) + 1):
                    if chars[x] == " ":
                        chars[x], styles[x] = "█", _BUSY
            if wait_from is not None:  # still waiting (paused run or deadlock)
                for x in range(cell(wait_from), cols):
                    chars[x], styles[x] = "░", _WAIT
            for i, e in enumerate(tr):
                if e.role == a.role and e.warp == a.warp:
                    if e.kind == "arrive":
                        chars[cell(e.cycle)], styles[cell(e.cycle)] = "▲", _BAR
                    if i in crit and e.kind in ("issue", "resume"):
                        styles[cell(e.cycle)] = _CRIT
            rows.append((f"{a.role}[w{a.warp}]", chars, styles))
        for unit, spans in eng.unit_spans.items():
            if not spans:
                continue
            chars = [" "] * cols
            styles = [None] * cols
            for s, t, _who in spans:
                for x in range(cell(s), cell(max(s, t - 1)) + 1):
                    chars[x], styles[x] = "█", _UNIT
            rows.append((_UNIT_NAMES.get(unit, unit), chars, styles))
        # critical-path completions on the units' rows
        unit_row = {name: r for name, *r in rows}
        for i in crit:
            e = tr[i]
            if e.kind == "complete":
                row = unit_row.get("tensor pipe" if "mma" in e.detail or "cp" in e.detail else
                                   ("TMEM ld/st" if "ld" in e.detail or "st" in e.detail else "TMA"))
                if row is not None:
                    row[1][cell(e.cycle)] = _CRIT
        if self.barriers:
            names: dict[str, tuple[list, list]] = {}
            for i, e in enumerate(tr):
                if e.kind not in ("arrive", "phase"):
                    continue
                bar = _barrier_name(e)
                chars, styles = names.setdefault(bar, ([" "] * cols, [None] * cols))
                x = cell(e.cycle)
                if e.kind == "phase":
                    chars[x], styles[x] = "│", (_CRIT if i in crit else _BAR)
                elif chars[x] == " ":
                    chars[x], styles[x] = "·", _BAR
            rows += [(bar, c, s) for bar, (c, s) in names.items()]
        if self.cursor is not None:
            x = cell(max(0, self.cursor))
            for _label, chars, styles in rows:
                if chars[x] == " ":
                    chars[x] = "┊"
                styles[x] = (styles[x] or Style()) + _CURSOR
        return rows, end

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = self.width or options.max_width
        labels = self._labels()
        label_w = min(max([len(r) for r in labels] + [8]), max(12, width // 3))
        cols = max(10, width - label_w - 3)
        rows, end = self._rows(cols)
        short = {label: _abbreviate(label, label_w) for label, _, _ in rows if len(label) > label_w}
        yield Text(self.title, style="bold")
        for label, chars, styles in rows:
            t = Text(f"{short.get(label, label):<{label_w}} │")
            run_style, run = None, []
            for ch, st in zip(chars, styles, strict=True):
                if st is not run_style and run:
                    t.append("".join(run), style=run_style)
                    run = []
                run_style = st
                run.append(ch)
            if run:
                t.append("".join(run), style=run_style)
            yield t
        axis = Text(" " * label_w + " └" + "─" * cols)
        yield axis
        ticks = [" "] * (cols + label_w + 2)
        for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
            x = label_w + 2 + min(cols - 1, int(frac * (cols - 1)))
            s = str(round(frac * end))
            x = min(x, len(ticks) - len(s))
            ticks[x:x + len(s)] = list(s)
        yield Text("".join(ticks).rstrip() + "  cycles", style="dim", no_wrap=True, overflow="crop")
        legend = Text("█ busy  ", style=_BUSY)
        legend.append("░ waiting  ", style=_WAIT)
        legend.append("▲ arrive  · barrier arrival  │ phase complete  ", style=_BAR)
        legend.append("█ unit occupied  ", style=_UNIT)
        legend.append("critical path", style=_CRIT)
        if self.cursor is not None:
            legend.append(f"  ┊ cursor: cycle {self.cursor}", style=_CURSOR)
        yield legend
        if short:  # names too long for the label column: say what each abbreviation stands for
            yield Text("abbreviated: " + "; ".join(f"{a} = {full}" for full, a in short.items()), style="dim")
        if self.hazards and self.engine.hazards:
            yield Text(f"{len(self.engine.hazards)} hazard(s):", style="bold red")
            for h in self.engine.hazards[:10]:
                yield Text(f"  {h}", style="red")

    def _labels(self) -> list[str]:
        eng = self.engine
        out = [f"{a.role}[w{a.warp}]" for a in eng.agents]
        out += [_UNIT_NAMES.get(u, u) for u, s in eng.unit_spans.items() if s]
        if self.barriers:
            out += list(dict.fromkeys(_barrier_name(e) for e in eng.trace if e.kind in ("arrive", "phase")))
        return out


def _barrier_name(e) -> str:
    """The barrier an ``arrive`` / ``phase`` trace event is about (``"bar 9"`` for a named barrier)."""
    if e.detail.startswith("bar "):
        return " ".join(e.detail.split(" ")[:2])
    return e.detail.split(" ")[0] if e.kind == "arrive" else e.detail.split(" phase")[0]


def _abbreviate(name: str, width: int) -> str:
    """``name`` in ``width`` characters: its head and tail around a ``~`` (listed in full under the picture)."""
    tail = min(4, max(0, width - 2) // 2)
    return name[:width - tail - 1] + "~" + (name[-tail:] if tail else "")
