"""The picture of one step of a :class:`simtc.engine.stepper.Stepper`: the event with its PTX line, what it read
and wrote and whom it released, then the state -- warps (PC, PTX line, what each waits on), mbarriers and named
barriers, Tensor Memory coloured by the instruction that last wrote each cell, the shared-memory buffers and who
last wrote them, the units' operations in flight, and (optionally) the run's timeline with a cursor at the step.

One renderable for the terminal (``simtc replay/simulate --step``), Jupyter (the stepping widget) and SVG.

>>> from simtc.engine.stepper import Stepper
>>> from simtc.kernels.hazards import build
>>> from simtc.render.export import to_text
>>> s = Stepper.for_program(build("hazard/ld-before-commit-fixed"), mode="timing")
>>> _ = s.goto(3)
>>> "step 3 " in to_text(StepView(s, timeline=False), width=100)
True
>>> n = len(s)  # run to the end: the picture then says how many steps there are
>>> f"step 3 of {n}" in to_text(StepView(s, timeline=False), width=100)
True
"""

from __future__ import annotations

import types

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.jupyter import JupyterMixin
from rich.table import Table
from rich.text import Text

from simtc.render.theme import style

__all__ = ["EventView", "StepView"]


def _fmt_access(acc: dict) -> list[str]:
    out = []
    for r in acc.get("tmem", ()):
        out.append(f"TMEM lanes {r['lanes'][0]}-{r['lanes'][1]} cols {r['columns'][0]}-{r['columns'][1]}")
    for r in acc.get("smem", ()):
        a, b = r["range"]
        where = f" ({', '.join(r['buffers'])})" if r["buffers"] and not r["buffers"][0].startswith("[") else ""
        pieces = f" in {r['pieces']} pieces" if r.get("pieces", 1) > 1 else ""
        out.append(f"smem [{a:#x}, {b:#x}) {r.get('bytes', b - a)} B{pieces}{where}")
    if acc.get("regs"):
        out.append("regs " + ", ".join(acc["regs"]))
    return out


class EventView(JupyterMixin):
    """One event: cycle, who, kind, the PTX line, reads, writes, released warps."""

    def __init__(self, event, total: int | None = None):
        self.e, self.total = event, total

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        e = self.e
        if e is None:
            yield Text("step 0: before the first event", style=style("simtc.title"))
            return
        of = f" of {self.total}" if self.total is not None else ""
        head = Text(f"step {e.step}{of}  cycle {e.cycle}  {e.who}", style=style("simtc.title"))
        if e.index >= 0:
            head.append(f" record #{e.index}")
        head.append(f"  {e.kind}", style="bold")
        if e.label:
            head.append(f"  ({e.label})", style=style("simtc.dim"))
        yield head
        if e.ptx:
            yield Text("  " + e.ptx, style=style("simtc.header"), overflow="fold")
        if e.kind not in ("issue", "complete") or not e.ptx:
            from simtc.engine.trace import EVENT_KINDS

            yield Text("  " + (e.detail or EVENT_KINDS.get(e.kind, "")), overflow="fold")
        when = {"issue": "at issue", "completion": "when it completes"}.get(e.lands or "", "")
        for what, acc in (("reads", e.reads), ("writes", e.writes)):
            items = _fmt_access(acc)
            if items:
                tail = f"  [lands {when}]" if what == "writes" and when else ""
                yield Text(f"  {what}: " + "; ".join(items) + tail, overflow="fold")
        if e.released:
            yield Text("  releases " + ", ".join(f"{r}[w{w}]" for r, w in e.released), style="bold")


class StepView(JupyterMixin):
    """The current step of a stepper and the state there (see the module text)."""

    def __init__(self, stepper, *, timeline: bool = True, tmem: bool = True, smem: bool = True,
                 all_barriers: bool = False):
        self.s, self.timeline, self.tmem, self.smem, self.all_barriers = stepper, timeline, tmem, smem, all_barriers

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        s = self.s
        total = len(s.events) if s.finished else None
        st = s.state()
        yield EventView(s.event(), total)
        yield Text("")
        warps = Table(title=f"warps at cycle {st.cycle}", title_justify="left", box=None, padding=(0, 1),
                      title_style=style("simtc.title"))
        for col in ("warp", "pc", "on (PTX)", "state"):
            warps.add_column(col, overflow="fold")
        for w in st.warps:
            state = w["status"] if not w["waiting_on"] else f"waits on {w['waiting_on']}"
            ptx = w["ptx"] or ""
            warps.add_row(Text(f"{w['role']}[w{w['warp']}]"), str(w["pc"]),
                          Text(ptx if len(ptx) <= 60 else ptx[:57] + "..."), Text(state))
        yield warps
        touched = {e.barrier for e in s.events[:st.step] if e.barrier} if not self.all_barriers else None
        bars = Table(title="barriers", title_justify="left", box=None, padding=(0, 1), title_style=style("simtc.title"))
        for col in ("barrier", "phases done", "arrivals pending", "tx bytes pending"):
            bars.add_column(col)
        shown = 0
        for m in st.mbarriers:
            if touched is None or m["name"] in touched:
                bars.add_row(Text(m["name"]), str(m["phase"]), f"{m['pending']}/{m['expected']}", str(m["tx"]))
                shown += 1
        for b in st.named_barriers:
            bars.add_row(f"bar {b['id']}", f"gen {b['generation']}", f"{b['arrived']}/{b['count']} threads in", "")
            shown += 1
        hidden = len(st.mbarriers) - sum(1 for m in st.mbarriers if touched is None or m["name"] in touched)
        if shown:
            yield bars
        if hidden:
            yield Text(f"({hidden} mbarrier(s) not used yet)", style=style("simtc.dim"))
        if any(st.units.values()):
            def few(q):
                return ", ".join(q[:4]) + (f" and {len(q) - 4} more" if len(q) > 4 else "")

            yield Text("in flight: " + "; ".join(f"{u.replace('_', ' ')} {len(q)}: {few(q)}"
                                                 for u, q in st.units.items() if q), overflow="fold")
        if self.tmem:
            from simtc.render.tmem import TmemMapView

            tm = types.SimpleNamespace(last_writer=st.writer_ids, instructions=list(st.writers))
            yield Text("")
            yield TmemMapView(tm, by="writer", title=f"Tensor Memory at step {st.step}: the instruction that last "
                                                     f"wrote each cell ({st.tmem['cells_written']} cells written)")
        if self.smem:
            written = [b for b in st.smem if b["writer"]]
            t = Table(title=f"shared memory: {len(written)} of {len(st.smem)} buffers written", title_justify="left",
                      box=None, padding=(0, 1), title_style=style("simtc.title"))
            for col in ("buffer", "bytes", "last written by (step)"):
                t.add_column(col, overflow="fold")
            for b in written:
                a, z = b["range"]
                t.add_row(Text(b["buffer"]), Text(f"[{a:#x}, {z:#x})"), Text(f"{b['writer']} ({b['step']})"))
            yield t
        if self.timeline:
            from simtc.render.timeline import TimelineView

            len(s)  # the timeline shows the whole run
            yield Text("")
            yield TimelineView(s.engine, cursor=st.cycle, hazards=False,
                               title=f"{s.title}: the whole run, cursor at step {st.step} (cycle {st.cycle})")


def group(*views) -> Group:
    return Group(*views)
