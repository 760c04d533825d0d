"""An engine run as a Chrome / Perfetto trace: the Trace Event Format's JSON Object Format.

:func:`chrome_trace` returns ``{"traceEvents": [...], "displayTimeUnit": ..., "otherData": {...}}``;
:func:`write_chrome_trace` streams the same object to a file that ui.perfetto.dev ("Open trace file") and
chrome://tracing ("Load") open. One process stands for the CTA; its named threads (``ph: "M"`` metadata
``thread_name`` and ``thread_sort_index``) are the tracks:

* one track per warp (``mma [w4]``): each issued record is a complete slice (``ph: "X"``) from its issue to
  the warp's next step (its next issue, its end, or a wait before its next record), named after the record,
  with the record index, its PTX text (``Program`` record ``.ptx()``) and the cycles in ``args``; a wait
  (``mbarrier.try_wait``, ``bar.sync``, ``tcgen05.wait::ld`` ...) is a slice from ``wait`` to ``resume`` inside
  its record's slice, named after what it waits on (a wait for registers comes before its record's issue);
  a one-cycle ``exit`` slice marks the cycle the warp finished;
* one track per unit: the **tensor pipe** (the ``tcgen05.mma`` / ``tcgen05.cp`` / ``wgmma`` work, nothing
  else), **TMA** (the copy engine's loads and stores) and the **TMEM ld/st** path hold each asynchronous
  operation as a slice from when the unit started it to its ``complete`` event -- operations that overlap
  in flight (pipelined MMAs, many TMA loads) go to further lanes of the unit, ``tensor pipe (2)`` ...,
  because slices of one track must nest; the **smem port**, **L1 miss path** and **memory** tracks hold the
  unit's busy spans (:attr:`simtc.engine.core.Engine.unit_spans`);
* one track per barrier (``mbarrier sv_done[0]``, ``bar 9``): each arrival an instant (``ph: "i"``), each
  phase completion (or named-barrier release) a one-cycle slice;
* barrier completions are flow arrows (``ph: "s"`` / ``"f"``, ``cat: "barrier"``): from the record whose
  arrival completed the phase (an arrive, a commit, a TMA load's complete_tx, the last ``bar.sync``) to the
  phase slice, and from the phase slice -- the completion, or the named barrier's release -- to each waiting
  warp's resume (the trace's ``resume`` event names the ``phase`` event as its cause, and the phase event the
  arrival);
* hazards are global instants (``ph: "i"``, ``s: "g"``) on a ``hazards`` track, with the rule, the message
  and the PTX section.

Time: ``ts`` and ``dur`` are microseconds in the format. By default one SM cycle is one microsecond (the
integers are the cycles; ``otherData.time_unit`` says so); with ``clock_ghz`` they are real microseconds at
that clock (Perfetto keeps nanoseconds, so cycles shorter than 1 ns are rounded there). ``args`` always hold
the integer cycles. Flow ends sit half a cycle into their cycle, inside the slices they bind to.

Where an operation entered its unit and when the unit was free again come from the engine's own booking
(``Engine.unit_ops``: the tensor pipe and the TMEM path, :mod:`simtc.engine.tensor_pipe`,
:mod:`simtc.engine.tmem_path`); the copy engine starts a copy at its issue (:mod:`simtc.engine.copy_engine`).
The slices' busy time of each in-order unit equals the engine's record of it (``tests/render/test_perfetto.py``).

The output is deterministic (no wall time, no ids from hashing). A run of more than
:data:`TRACE_EVENT_LIMIT` engine events is refused before anything is written.

>>> from simtc.engine import Engine
>>> from simtc.kernels import hazards
>>> t = chrome_trace(Engine(hazards.build("hazard/ld-before-commit"), mode="timing").run())
>>> t["otherData"]["time_unit"]
'1 us in the viewer = 1 SM cycle'
>>> sorted({e["ph"] for e in t["traceEvents"]})
['M', 'X', 'f', 'i', 's']
"""

from __future__ import annotations

import heapq
import json
import math
import os
import sys
from collections.abc import Iterator

from simtc.errors import SimtcError

__all__ = ["CYCLE_UNIT", "TRACE_EVENT_LIMIT", "TraceExportError", "chrome_trace", "trace_events",
           "write_chrome_trace"]

TRACE_EVENT_LIMIT = 20_000_000
"""Most engine trace events an export takes (a 4096-block head64 replay has about 2.6 million)."""
CYCLE_UNIT = "1 us in the viewer = 1 SM cycle"
PID = 1
_UNIT_TRACKS = (("tensor_pipe", "tensor pipe"), ("tma", "TMA"), ("tmem_path", "TMEM ld/st"),
                ("smem_port", "smem port"), ("l1", "L1 miss path"), ("memory", "memory"))
_SPAN_UNITS = ("smem_port", "l1", "memory")


class TraceExportError(SimtcError, OSError):
    """A trace that cannot be exported: too many events, a bad clock, or a file that cannot be written."""


def _clock_scale(clock_ghz) -> float | None:
    """Microseconds per cycle (None: one cycle = one microsecond)."""
    if clock_ghz is None:
        return None
    try:
        ghz = float(clock_ghz)
    except (TypeError, ValueError):
        ghz = math.nan
    if not (math.isfinite(ghz) and ghz > 0):
        raise TraceExportError(f"clock_ghz must be a positive number of GHz, got {clock_ghz!r}",
                               rule="a trace's clock is a positive frequency in GHz")
    return 1e-3 / ghz


def _check_size(engine) -> None:
    from simtc.engine.core import Engine

    if not isinstance(engine, Engine):
        raise TraceExportError(f"a trace is exported from a simtc.engine.Engine, got {type(engine).__name__}",
                               rule="chrome_trace(engine) takes an Engine that has run (Engine(program).run())")
    n = len(engine.trace)
    if n > TRACE_EVENT_LIMIT:
        raise TraceExportError(f"the run has {n:,} trace events; a trace export takes at most "
                               f"{TRACE_EVENT_LIMIT:,} (stop the run earlier, e.g. simulate --until, or replay fewer "
                               "blocks)", rule=f"a Chrome trace export holds at most {TRACE_EVENT_LIMIT:,} events")


def _header(engine, clock_ghz) -> tuple[str, dict]:
    _clock_scale(clock_ghz)
    unit = CYCLE_UNIT if clock_ghz is None else f"1 us in the viewer = 1 us at {float(clock_ghz):g} GHz"
    hz = engine.hazards
    other = {"time_unit": unit, "program": engine.program.name, "cycles": int(engine.cycles),
             "engine_events": len(engine.trace), "arch": engine.arch, "mode": engine.mode,
             "clock_ghz": None if clock_ghz is None else float(clock_ghz), "hazards": len(hz),
             "deadlock": engine.deadlock is not None, "generator": "simtc.render.perfetto"}
    return ("ms" if clock_ghz is None else "ns"), other


def chrome_trace(engine, *, clock_ghz: float | None = None) -> dict:
    """The run of ``engine`` (finished or stopped) as a Trace Event Format object (see the module text)."""
    from simtc.engine.core import gc_paused

    _check_size(engine)
    unit, other = _header(engine, clock_ghz)
    with gc_paused():  # many small dicts, no garbage cycles: the collector would rescan the engine each time
        events = list(trace_events(engine, clock_ghz=clock_ghz))
    return {"traceEvents": events, "displayTimeUnit": unit, "otherData": other}


def write_chrome_trace(engine, path: str | os.PathLike, *, clock_ghz: float | None = None,
                       announce: bool = False) -> int:
    """Write :func:`chrome_trace` of ``engine`` to ``path`` as JSON, streaming (one event a line, never the whole
    list in memory); returns the number of trace events written (``announce``: say so on stderr). A run over
    :data:`TRACE_EVENT_LIMIT` events is refused before the file is opened; a file that cannot be written is a
    :class:`TraceExportError` naming it."""
    from simtc.engine.core import gc_paused

    _check_size(engine)
    unit, other = _header(engine, clock_ghz)
    events = trace_events(engine, clock_ghz=clock_ghz)  # checked before the file is opened: errors leave no file
    encode = json.JSONEncoder(separators=(",", ":")).encode
    n = 0
    try:
        with open(path, "w", encoding="utf-8") as f, gc_paused():
            f.write('{"traceEvents":[')
            for chunk in _chunks(events, 4096):  # a list of events encoded at once (one call into the encoder)
                f.write(("\n" if n == 0 else ",\n") + encode(chunk)[1:-1])
                n += len(chunk)
            f.write(f'\n],\n"displayTimeUnit":{encode(unit)},\n"otherData":{encode(other)}}}\n')
    except OSError as e:
        raise TraceExportError(f"cannot write the trace to {str(path)!r}: {e.strerror or e}",
                               rule="an output file goes into an existing, writable directory") from None
    if announce:
        print(f"wrote {path} ({n} trace events; open it in ui.perfetto.dev)", file=sys.stderr)
    return n


# ---------------------------------------------------------------------------------------------- the events
def trace_events(engine, *, clock_ghz: float | None = None) -> Iterator[dict]:
    """The trace events of :func:`chrome_trace`, one dict at a time (metadata first)."""
    scale = _clock_scale(clock_ghz)
    _check_size(engine)
    return _Builder(engine, scale).events()


class _Builder:
    """Two passes over the engine's trace: the first finds the asynchronous operations, the barriers and the
    tracks; the second streams the warps' slices, the barriers' slices and instants and the flows."""

    def __init__(self, engine, scale: float | None):
        self.eng = engine
        self.scale = scale
        self.end = max(int(engine.cycles), max(engine.trace.cycles(), default=0))
        self.widx = {(w.role, w.warp): i for i, w in enumerate(engine.warps)}
        self._ptx: dict[int, str] = {}

    # -- time
    def ts(self, cycle):
        return cycle if self.scale is None else round(cycle * self.scale, 6)

    def half(self, cycle: int):
        return self.ts(cycle + 0.5)

    def ptx(self, rec) -> str:
        key = id(rec)
        s = self._ptx.get(key)
        if s is None:
            s = self._ptx[key] = rec.ptx()
        return s

    def who(self, widx: int, index: int) -> str:
        w = self.eng.warps[widx]
        return f"{w.role}[w{w.warp}]#{index}"

    def barrier_of(self, widx: int, index: int) -> str | None:
        """The barrier an arrival of record ``index`` of warp ``widx`` lands on (``bar N`` for a named one)."""
        from simtc.engine import ops as k

        op = self.eng.warps[widx].ops[index]
        if op.kind in (k.K_BAR_SYNC, k.K_BAR_ARRIVE):
            return f"bar {op.arg[0]}"
        return op.bar

    # -- pass 1
    def scan(self) -> None:
        from simtc.engine import ops as k

        eng = self.eng
        unit_of = k.UNIT_OF_KIND
        arriving = (k.K_ARRIVE, k.K_ARRIVE_TX, k.K_COMMIT, k.K_BAR_SYNC, k.K_BAR_ARRIVE)
        issued: dict[tuple[int, int], int] = {}  # the issue cycles of the asynchronous and the arriving records
        done: dict[tuple[int, int], int] = {}
        barriers: dict[str, None] = {}
        widx = self.widx
        warps = eng.warps
        for e in eng.trace:
            kind = e.kind
            if kind == "issue":
                w = widx[e.role, e.warp]
                op = warps[w].ops[e.index]
                if op.kind in unit_of or op.kind in arriving:
                    issued[w, e.index] = e.cycle
            elif kind == "complete":
                done[widx[e.role, e.warp], e.index] = e.cycle
            elif kind == "arrive" and e.index >= 0:
                bar = self.barrier_of(widx[e.role, e.warp], e.index)
                if bar is not None:
                    barriers[bar] = None
        self.barriers = list(barriers)
        self.issued = issued
        units: dict[str, list] = {"tensor_pipe": [], "tma": [], "tmem_path": []}
        for (w, i), c in done.items():
            unit = unit_of.get(warps[w].ops[i].kind)
            if unit == "tma":  # the copy engine starts a copy at its issue
                units["tma"].append((issued[w, i], c, w, i, None))
            elif unit is not None:  # when the unit took it and was free again, as the engine booked it
                start, busy_end = eng.unit_ops[w, i]
                units[unit].append((start, c, w, i, busy_end))
        self.units = {u: _lanes(sorted(v)) for u, v in units.items()}

    # -- pass 2
    def events(self) -> Iterator[dict]:
        self.scan()
        eng = self.eng
        tids: dict = {}
        names: list[str] = []
        for w in eng.warps:
            tids[w.idx] = len(names) + 1
            names.append(f"{w.role} [w{w.warp}]")
        lane_tid: dict[tuple[str, int], int] = {}
        spans = eng.unit_spans
        for unit, label in _UNIT_TRACKS:
            if unit in _SPAN_UNITS:
                if spans[unit]:
                    lane_tid[unit, 0] = len(names) + 1
                    names.append(label)
                continue
            nlanes = 1 + max((lane for *_, lane in self.units[unit]), default=-1)
            for lane in range(nlanes):
                lane_tid[unit, lane] = len(names) + 1
                names.append(label if lane == 0 else f"{label} ({lane + 1})")
        bar_tid = {}
        for b in self.barriers:
            bar_tid[b] = len(names) + 1
            names.append(b if b.startswith("bar ") else f"mbarrier {b}")
        hazard_tid = None
        if eng.hazards:
            hazard_tid = len(names) + 1
            names.append("hazards")

        yield {"ph": "M", "pid": PID, "tid": 0, "name": "process_name",
               "args": {"name": f"CTA: {eng.program.name}"}}
        yield {"ph": "M", "pid": PID, "tid": 0, "name": "process_sort_index", "args": {"sort_index": 0}}
        for tid, name in enumerate(names, 1):
            yield {"ph": "M", "pid": PID, "tid": tid, "name": "thread_name", "args": {"name": name}}
            yield {"ph": "M", "pid": PID, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": tid}}

        yield from self._unit_events(lane_tid, spans)
        yield from self._trace_events(tids, bar_tid)
        if hazard_tid is not None:
            for h in eng.hazards:
                yield {"ph": "i", "s": "g", "pid": PID, "tid": hazard_tid, "ts": self.ts(h.cycle), "name": h.rule,
                       "cat": "hazard", "args": h.to_json()}

    def _unit_events(self, lane_tid, spans) -> Iterator[dict]:
        eng, ts = self.eng, self.ts
        for unit, _label in _UNIT_TRACKS:
            if unit in _SPAN_UNITS:
                tid = lane_tid.get((unit, 0))
                if tid is not None:
                    for s, e, _who in spans[unit]:
                        yield {"ph": "X", "pid": PID, "tid": tid, "ts": ts(s), "dur": ts(e) - ts(s), "name": "busy",
                               "cat": "unit", "args": {"start_cycle": s, "end_cycle": e}}
                continue
            for start, c, w, i, busy_end, lane in self.units[unit]:
                op = eng.warps[w].ops[i]
                args = {"record": self.who(w, i), "index": i, "ptx": self.ptx(op.rec),
                        "issue_cycle": self.issued[w, i], "start_cycle": start,
                        "complete_cycle": c}
                if busy_end is not None:
                    args["unit_free_cycle"] = busy_end
                yield {"ph": "X", "pid": PID, "tid": lane_tid[unit, lane], "ts": ts(start), "dur": ts(c) - ts(start),
                       "name": op.name, "cat": unit, "args": args}

    def _trace_events(self, tids, bar_tid) -> Iterator[dict]:
        from simtc.engine.ops import K_CUDA

        eng, ts, half = self.eng, self.ts, self.half
        warps = eng.warps
        widx = self.widx
        n = len(warps)
        rec_open: list = [None] * n  # (index, issue cycle) of the record whose slice is open
        children: list[list[dict]] = [[] for _ in range(n)]
        wait_open: list = [None] * n  # (index, cycle, what)
        phases: dict[int, tuple[str, int]] = {}  # phase event -> (barrier, its cycle)
        tr = eng.trace

        def close_record(w: int, end: int) -> Iterator[dict]:
            i, c0 = rec_open[w]
            rec_open[w] = None
            op = warps[w].ops[i]
            name = op.name if op.kind != K_CUDA else f"{op.name} {op.rec.name}"  # a block: its name too
            yield {"ph": "X", "pid": PID, "tid": tids[w], "ts": ts(c0), "dur": ts(end) - ts(c0), "name": name,
                   "cat": "instruction", "args": {"record": self.who(w, i), "index": i, "ptx": self.ptx(op.rec),
                                                  "issue_cycle": c0, "end_cycle": end}}
            if children[w]:
                yield from children[w]
                children[w] = []

        def wait_slice(w: int, end: int) -> dict:
            i, c0, what = wait_open[w]
            wait_open[w] = None
            return {"ph": "X", "pid": PID, "tid": tids[w], "ts": ts(c0), "dur": ts(end) - ts(c0),
                    "name": f"wait: {what}", "cat": "wait",
                    "args": {"record": self.who(w, i), "index": i, "waits_on": what, "wait_cycle": c0,
                             "resume_cycle": end}}

        for j, e in enumerate(tr):
            kind, c = e.kind, e.cycle
            if kind == "phase":
                dep = tr[e.dep] if e.dep >= 0 else None
                bar = self.barrier_of(widx[dep.role, dep.warp], dep.index) if dep is not None and dep.index >= 0 \
                    else None
                if bar is None or bar not in bar_tid:
                    continue
                phases[j] = (bar, c)
                label = "released" if e.detail.endswith(" released") else e.detail[len(bar) + 1:]
                aw = widx[dep.role, dep.warp]
                args = {"barrier": bar, "cycle": c, "detail": e.detail,
                        "completed_by": f"{self.who(aw, dep.index)} ({dep.detail})"}
                yield {"ph": "X", "pid": PID, "tid": bar_tid[bar], "ts": ts(c), "dur": ts(c + 1) - ts(c),
                       "name": label, "cat": "barrier", "args": args}
                t0 = self.issued.get((aw, dep.index))
                if t0 is not None:  # from the record whose arrival completed the phase
                    yield {"ph": "s", "pid": PID, "tid": tids[aw], "ts": half(t0), "id": j, "cat": "barrier",
                           "name": bar}
                    yield {"ph": "f", "bp": "e", "pid": PID, "tid": bar_tid[bar], "ts": half(c), "id": j,
                           "cat": "barrier", "name": bar}
                continue
            if not e.role:
                continue
            w = widx[e.role, e.warp]
            if kind == "issue":
                if rec_open[w] is not None:
                    yield from close_record(w, c)
                rec_open[w] = (e.index, c)
            elif kind == "wait":
                if rec_open[w] is not None and e.index != rec_open[w][0]:
                    yield from close_record(w, c)
                wait_open[w] = (e.index, c, e.detail)
            elif kind == "resume":
                if wait_open[w] is None:
                    continue
                i = wait_open[w][0]
                sl = wait_slice(w, c)
                if rec_open[w] is not None and rec_open[w][0] == i:
                    children[w].append(sl)
                else:
                    yield sl
                ph = phases.get(e.dep)
                if ph is not None:
                    bar, pc = ph
                    yield {"ph": "s", "pid": PID, "tid": bar_tid[bar], "ts": half(pc), "id": j, "cat": "barrier",
                           "name": bar}
                    yield {"ph": "f", "bp": "e", "pid": PID, "tid": tids[w], "ts": half(c), "id": j,
                           "cat": "barrier", "name": bar}
            elif kind == "done":
                if rec_open[w] is not None:
                    yield from close_record(w, c)
                yield {"ph": "X", "pid": PID, "tid": tids[w], "ts": ts(c), "dur": ts(c + 1) - ts(c), "name": "exit",
                       "cat": "exit", "args": {"cycle": c}}
            elif kind == "arrive" and e.index >= 0:
                bar = self.barrier_of(w, e.index)
                if bar is None:
                    continue
                what = e.detail[len(bar) + 1:] if e.detail.startswith(bar + " ") else e.detail
                if bar.startswith("bar "):
                    what = "arrive " + what.strip("()")
                yield {"ph": "i", "s": "t", "pid": PID, "tid": bar_tid[bar], "ts": ts(c), "name": what,
                       "cat": "arrival", "args": {"by": self.who(w, e.index), "cycle": c}}
        for w in range(n):  # a stopped or deadlocked run: what is still open ends at the run's end
            if wait_open[w] is not None:
                sl = wait_slice(w, self.end)
                if rec_open[w] is not None:
                    children[w].append(sl)
                else:
                    yield sl
            if rec_open[w] is not None:
                yield from close_record(w, self.end)


def _chunks(it, n: int) -> Iterator[list]:
    chunk = []
    for x in it:
        chunk.append(x)
        if len(chunk) == n:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _lanes(slices: list[tuple]) -> list[tuple]:
    """Slices ``(start, end, ...)`` sorted by start, each given the lowest lane free at its start (a lane is free
    once its last slice ended): ``(start, end, ..., lane)``. Slices of one lane never overlap."""
    free: list[int] = []
    busy: list[tuple[int, int]] = []  # (end, lane)
    out = []
    nlanes = 0
    for s in slices:
        start, end = s[0], s[1]
        while busy and busy[0][0] <= start:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            lane = heapq.heappop(free)
        else:
            lane = nlanes
            nlanes += 1
        heapq.heappush(busy, (end, lane))
        out.append((*s, lane))
    return out
