"""Step through a run: one trace event at a time, forward and back, with the state at every point.

A :class:`Stepper` drives an :class:`~simtc.engine.core.Engine` lazily -- the engine runs only as far as
the furthest step asked for -- and records, for each trace event, what it changed: the warp's PC and wait,
the mbarrier or named barrier it arrived on or completed, the TMEM cells and shared-memory bytes it wrote,
the units' in-flight operations. The state after ``n`` events is those changes folded from the start (from
the nearest checkpoint), so stepping back is exact and cheap, and a step back then forward gives the same
state again.

Step ``n`` means "after the first ``n`` events": step 0 is before anything ran; :meth:`Stepper.event` ``(n)``
is the ``n``-th event (1-based, the one that led to step ``n``). What an event reads and writes comes from
its record's footprint (:meth:`simtc.isa.base.Instr.footprint`, the same as the checker's and the
pictures'); writes land where the engine applies them: a synchronous record's at its ``issue``, an
asynchronous one's (``tcgen05.mma``/``cp``/``ld``/``st``, TMA) at its ``complete``.

>>> from simtc.kernels.hazards import build
>>> s = Stepper.for_program(build("hazard/ld-before-commit-fixed"), mode="timing")
>>> first = s.forward()
>>> s.position, first.kind, first.ptx.split()[0]
(1, 'issue', 'bar.sync')
>>> _ = s.goto(len(s)); _ = s.back(); s.position == len(s) - 1
True
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator

import attrs
import numpy as np
from attrs import field, frozen

from simtc.engine import ops as k
from simtc.engine.trace import Trace
from simtc.errors import SimtcError

__all__ = ["StepError", "StepEvent", "StepState", "Stepper"]

LANES, COLUMNS = 128, 512
CHECKPOINT_EVERY = 256


class StepError(SimtcError, IndexError):
    """A step outside the run (before step 0 or past the last event), or an unknown stepping target."""


@frozen
class StepEvent:
    """One trace event with what it means: the PTX line of its record, what it read and wrote, whom it released."""

    step: int
    """1-based: the state after this event is step ``step``."""
    cycle: int
    role: str
    warp: int
    index: int
    """The record's index in its role (-1: a barrier's phase event or a warp's ``done``)."""
    kind: str
    detail: str
    ptx: str | None
    label: str
    reads: dict = field(factory=dict)
    writes: dict = field(factory=dict)
    lands: str | None = None
    """Where the record's writes take effect: ``"issue"``, ``"completion"`` (asynchronous records) or None."""
    released: tuple[tuple[str, int], ...] = ()
    """The waiting warps this event released (a phase completion or a named barrier's release)."""
    barrier: str | None = None

    @property
    def who(self) -> str:
        return f"{self.role}[w{self.warp}]" if self.role else "-"

    def line(self) -> str:
        """One line: cycle, who, what (the PTX line for a record's events)."""
        what = self.ptx if self.ptx and self.kind in ("issue", "complete") else self.detail
        rec = f"#{self.index}" if self.index >= 0 else ""
        text = f"{self.cycle:>7}  {self.who:<16}{rec:<6}{self.kind:<9}{what}"
        if self.released:
            text += "  -> releases " + ", ".join(f"{r}[w{w}]" for r, w in self.released)
        return text

    def to_json(self) -> dict:
        return {"step": self.step, "cycle": self.cycle, "role": self.role, "warp": self.warp, "index": self.index,
                "kind": self.kind, "detail": self.detail, "ptx": self.ptx, "label": self.label, "reads": self.reads,
                "writes": self.writes, "lands": self.lands,
                "released": [{"role": r, "warp": w} for r, w in self.released], "barrier": self.barrier}


class _Fold:
    """The folded state (mutable; copied at checkpoints)."""

    __slots__ = ("cycle", "inflight", "mbars", "nbars", "smem_writer", "step", "tmem_writer", "warps")

    def __init__(self, warps: dict, mbars: dict, nbuffers: int):
        self.step = 0
        self.cycle = 0
        self.warps = warps
        self.mbars = mbars
        self.nbars: dict[int, dict] = {}
        self.tmem_writer = np.full((LANES, COLUMNS), -1, dtype=np.int32)
        self.smem_writer = np.full(nbuffers, -1, dtype=np.int32)
        self.inflight: dict[str, list[int]] = {"tensor_pipe": [], "tma": [], "tmem_path": []}


@frozen
class StepState:
    """The state at one step (see :meth:`Stepper.state`)."""

    step: int
    cycle: int
    warps: tuple[dict, ...]
    mbarriers: tuple[dict, ...]
    named_barriers: tuple[dict, ...]
    tmem: dict
    smem: tuple[dict, ...]
    units: dict
    tmem_writer: np.ndarray = field(eq=False, repr=False)
    """(128, 512) int: the step (event) that last wrote each TMEM cell, -1 none."""
    writers: tuple[str, ...] = field(repr=False, default=())
    """Names of the writers :attr:`tmem_writer` ids point at, by id (``writer_ids``)."""
    writer_ids: np.ndarray = field(eq=False, repr=False, default=None)

    def to_json(self) -> dict:
        return {"cycle": self.cycle, "tmem": self.tmem, "smem": list(self.smem), "mbarriers": list(self.mbarriers),
                "named_barriers": list(self.named_barriers), "warps": list(self.warps), "units": self.units}

    def __eq__(self, other) -> bool:
        if not isinstance(other, StepState):
            return NotImplemented
        return self.to_json() == other.to_json() and np.array_equal(self.tmem_writer, other.tmem_writer)

    __hash__ = None


class _HookedTrace(Trace):
    """The engine's trace, calling ``hook(index)`` after each event is appended."""

    __slots__ = ("hook",)

    def __init__(self, hook):
        super().__init__()
        self.hook = hook

    def add(self, cycle, role, warp, index, kind, detail, dep) -> int:
        i = super().add(cycle, role, warp, index, kind, detail, dep)
        self.hook(i)
        return i


class Stepper:
    """Step through an engine run (see the module text).

    Parameters
    ----------
    factory:
        A function returning a fresh, not yet started :class:`~simtc.engine.core.Engine` (timing or semantics
        mode). Called once.
    smem_buffers:
        ``(name, start, stop)`` of the shared-memory buffers whose contents the state names (a kernel's plan);
        default: the merged ranges the Program's records write.
    title:
        A name for pictures.
    """

    def __init__(self, factory: Callable[[], object], *, smem_buffers=None, title: str | None = None):
        self.engine = eng = factory()
        if eng._started:
            raise StepError("the stepper needs an engine that has not started", rule="Stepper(factory) builds a "
                            "fresh Engine")
        eng.trace = _HookedTrace(self._record)
        self.title = title or eng.program.name
        self._by_key = {(w.role, w.warp): w for w in eng.warps}
        self._ptx_cache: dict[int, str] = {}
        self.buffers = tuple(smem_buffers) if smem_buffers is not None else _written_ranges(eng)
        self._starts = np.array([b[1] for b in self.buffers], dtype=np.int64)
        self._stops = np.array([b[2] for b in self.buffers], dtype=np.int64)
        self.events: list[StepEvent] = []
        self._deltas: list[tuple] = []
        warps = {(w.role, w.warp): (0, None, "not started") for w in eng.warps}
        mbars = {n: m.st.state() for n, m in eng.mbars.items()}
        self._fold = _Fold(warps, mbars, len(self.buffers))
        self._checkpoints: list[_Fold] = [copy.deepcopy(self._fold)]
        self._pos = 0
        self._cur = copy.deepcopy(self._fold)  # the state at self._pos

    # ------------------------------------------------------------------ constructors
    @classmethod
    def for_program(cls, program, *, mode: str = "semantics", arch: str = "sm100", timing=None, cta=None,
                    smem_buffers=None) -> Stepper:
        """A stepper over a Program's run (semantics mode needs a ``cta`` with its inputs, or makes an empty one)."""
        from simtc.engine.core import Engine

        return cls(lambda: Engine(program, mode=mode, arch=arch, timing=timing, cta=cta), smem_buffers=smem_buffers,
                   title=program.name)

    # ------------------------------------------------------------------ recording (runs inside engine steps)
    def _ptx(self, rec, op=None) -> str:
        """The PTX line of a record as the warp runs it (a named barrier's id can depend on the warp:
        ``op.arg`` is the compiled ``(id, threads)``)."""
        if op is not None and op.kind in (k.K_BAR_SYNC, k.K_BAR_ARRIVE):
            return f"bar.{'sync' if op.kind == k.K_BAR_SYNC else 'arrive'} {op.arg[0]}, {op.arg[1]};"
        p = self._ptx_cache.get(id(rec))
        if p is None:
            p = self._ptx_cache[id(rec)] = rec.ptx()
        return p

    def _record(self, i: int) -> None:
        eng = self.engine
        e = eng.trace[i]
        step = i + 1
        w = self._by_key.get((e.role, e.warp))
        op = w.ops[e.index] if w is not None and 0 <= e.index < len(w.ops) else None
        warp_d = None
        if w is not None:
            status = "done" if w.done else ("waiting" if w.waiting_on else "running")
            warp_d = ((e.role, e.warp), w.pc, w.waiting_on, status)
        bar = bar_d = nbar_d = None
        tmem_w = smem_w = ()
        unit_d = None
        reads: dict = {}
        writes: dict = {}
        lands = None
        ptx = label = None
        if e.kind in ("arrive", "phase"):
            name = e.detail.split(" ", 1)[0]
            if name in eng.mbars:
                bar = name
                bar_d = (name, eng.mbars[name].st.state())
            elif e.detail.startswith("bar "):
                bid = int(e.detail.split(" ", 2)[1])
                bar = f"bar {bid}"
                nb = eng.nbars.get(bid)
                if nb is not None:
                    nbar_d = (bid, nb.st.state())
        if op is not None:
            rec = op.rec
            ptx, label = self._ptx(rec, op), getattr(rec, "label", "") or ""
            if op.bar is not None and bar is None:
                bar = op.bar
            elif op.kind in (k.K_BAR_SYNC, k.K_BAR_ARRIVE) and bar is None:
                bar = f"bar {op.arg[0]}"
            if e.kind in ("issue", "complete"):
                known = op.quad_bad is None  # the engine's compiled footprint (a lane-quadrant error: none)
                if known:
                    rect_of, ranges_of = eng.index.rect_of, eng.index.ranges_of
                    reads = self._accesses([rect_of[q] for q in op.tmem_r], [ranges_of[q] for q in op.smem_r],
                                           op.regs_r)
                    writes = self._accesses([rect_of[q] for q in op.tmem_w], [ranges_of[q] for q in op.smem_w],
                                            op.regs_w)
                unit = k.UNIT_OF_KIND.get(op.kind)
                asynchronous = bool(rec.is_async)
                lands = ("completion" if asynchronous else "issue") if writes else None
                if known and ((e.kind == "issue" and op.sync) or (e.kind == "complete" and asynchronous)):
                    tmem_w = tuple(eng.index.rect_of[q] for q in op.tmem_w)
                    smem_w = tuple(r for q in op.smem_w for r in eng.index.ranges_of[q])
                if unit is not None and asynchronous:
                    unit_d = (unit, e.kind == "issue", (e.role, e.warp, e.index))
        released = eng.released.get(i, ())
        self.events.append(StepEvent(step, e.cycle, e.role, e.warp, e.index, e.kind, e.detail, ptx, label or "",
                                     reads, writes, lands, released, bar))
        self._deltas.append((e.cycle, warp_d, bar_d, nbar_d, tmem_w, smem_w, unit_d))

    def _accesses(self, rects, range_lists, regs) -> dict:
        """What one side (reads or writes) of a compiled footprint touches, JSON-ready: TMEM rectangles (inclusive
        lanes and columns), shared-memory pieces grouped by the buffers they fall in (a swizzled tile is many short
        pieces), registers."""
        out: dict = {}
        if rects:
            out["tmem"] = [{"lanes": [l0, l1 - 1], "columns": [c0, c1 - 1]} for l0, l1, c0, c1 in rects]
        groups: dict[tuple, dict] = {}
        for a, b in (r for ranges in range_lists for r in ranges):
            key = tuple(self._buffer_names(a, b))
            g = groups.get(key)
            if g is None:
                groups[key] = {"range": [a, b], "bytes": b - a, "pieces": 1, "buffers": list(key)}
            else:
                g["range"] = [min(g["range"][0], a), max(g["range"][1], b)]
                g["bytes"] += b - a
                g["pieces"] += 1
        if groups:
            out["smem"] = list(groups.values())
        if regs:
            out["regs"] = list(regs)
        return out

    def _buffer_names(self, start: int, stop: int) -> list[str]:
        hit = np.nonzero((self._starts < stop) & (self._stops > start))[0]
        return [self.buffers[j][0] for j in hit.tolist()]

    # ------------------------------------------------------------------ folding
    def _apply(self, f: _Fold, n: int) -> None:
        """Fold event ``n`` (1-based step) into ``f``."""
        cycle, warp_d, bar_d, nbar_d, tmem_w, smem_w, unit_d = self._deltas[n - 1]
        f.step = n
        f.cycle = cycle
        if warp_d is not None:
            f.warps[warp_d[0]] = warp_d[1:]
        if bar_d is not None:
            f.mbars[bar_d[0]] = bar_d[1]
        if nbar_d is not None:
            f.nbars[nbar_d[0]] = nbar_d[1]
        for l0, l1, c0, c1 in tmem_w:
            f.tmem_writer[l0:l1, c0:c1] = n
        for a, b in smem_w:
            f.smem_writer[(self._starts < b) & (self._stops > a)] = n
        if unit_d is not None:
            unit, start, key = unit_d
            q = f.inflight[unit]
            if start:
                q.append(n)
            else:
                for j, m in enumerate(q):
                    if self._key(m) == key:
                        del q[j]
                        break

    def _key(self, n: int) -> tuple[str, int, int]:
        e = self.events[n - 1]
        return (e.role, e.warp, e.index)

    def _ensure(self, n: int) -> None:
        """Run the engine until more than ``n`` events exist or it finishes (so whether step ``n`` is the last one,
        and the state there, never depends on how far earlier calls ran it)."""
        eng = self.engine
        while len(self.events) <= n and not eng.finished:
            before = len(self.events)
            eng.step()
            for j in range(before, len(self.events)):  # whom a phase released is known once its step ends
                if j in eng.released:
                    self.events[j] = attrs.evolve(self.events[j], released=eng.released[j])
        while len(self._checkpoints) * CHECKPOINT_EVERY <= len(self.events):
            f = self._checkpoints[-1]
            f = copy.deepcopy(f)
            stop = len(self._checkpoints) * CHECKPOINT_EVERY
            for m in range(f.step + 1, stop + 1):
                self._apply(f, m)
            self._checkpoints.append(f)

    def _fold_at(self, n: int) -> _Fold:
        if n == self._pos:
            return self._cur
        if self._pos < n and n - self._pos < CHECKPOINT_EVERY:
            f = self._cur
        else:
            f = copy.deepcopy(self._checkpoints[min(n // CHECKPOINT_EVERY, len(self._checkpoints) - 1)])
        for m in range(f.step + 1, n + 1):
            self._apply(f, m)
        self._cur, self._pos = f, n
        return f

    # ------------------------------------------------------------------ navigation
    def __len__(self) -> int:
        """The number of events of the whole run (runs the engine to its end)."""
        self._ensure(1 << 62)
        return len(self.events)

    @property
    def position(self) -> int:
        return self._pos

    @property
    def finished(self) -> bool:
        """The engine has run to its end (``len`` is known without running more)."""
        return self.engine.finished

    def goto(self, n: int) -> StepState:
        """Move to step ``n`` (0 = before the first event); returns the state there."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise StepError(f"a step is an integer, got {n!r}", rule="steps are event counts")
        n = int(n)
        if n < 0:
            raise StepError(f"step {n} is before the start (step 0 is before the first event)",
                            rule="steps run from 0 to the number of events")
        self._ensure(n)
        if n > len(self.events):
            raise StepError(f"step {n} is past the end: the run has {len(self.events)} events "
                            f"(ends at cycle {self.engine.cycles})", rule="steps run from 0 to the number of events")
        self._fold_at(n)
        return self.state()

    def forward(self, n: int = 1) -> StepEvent | None:
        """Go ``n`` events forward (stops at the end); returns the last event stepped over (None at the end)."""
        self._ensure(self._pos + n)
        target = min(self._pos + n, len(self.events))
        if target == self._pos:
            return None
        self._fold_at(target)
        return self.events[target - 1]

    def back(self, n: int = 1) -> StepEvent | None:
        """Go ``n`` events back (stops at step 0); returns the event now current (None at step 0)."""
        target = max(0, self._pos - n)
        self._fold_at(target)
        return self.events[target - 1] if target else None

    def find(self, *, role: str | None = None, warp: int | None = None, barrier: str | None = None,
             opcode: str | None = None, kind: str | None = None, cycle: int | None = None,
             label: str | None = None, start: int | None = None) -> int | None:
        """The step of the next event after ``start`` (default: the current step) matching every condition given
        (``opcode``: a prefix of the PTX line, e.g. ``"tcgen05.mma"``; ``barrier``: a name or a prefix, e.g.
        ``"qk_done"``, ``"bar 1"``; ``cycle``: the first event at or after that cycle; ``label``: a substring of
        the record's label); None when there is none."""
        if role is warp is barrier is opcode is kind is cycle is label is None:
            raise StepError("find() needs at least one condition (role, warp, barrier, opcode, kind, cycle, label)",
                            rule="stepping targets")
        n = self._pos if start is None else start
        while True:
            self._ensure(n + 1)
            if n >= len(self.events):
                return None
            e = self.events[n]
            n += 1
            if role is not None and e.role != role:
                continue
            if warp is not None and e.warp != warp:
                continue
            if kind is not None and e.kind != kind:
                continue
            if cycle is not None and e.cycle < cycle:
                continue
            if opcode is not None and not (e.ptx or "").startswith(opcode):
                continue
            if barrier is not None and not (e.barrier or "").startswith(barrier):
                continue
            if label is not None and label not in e.label:
                continue
            return n

    def to_next(self, **conditions) -> StepEvent | None:
        """Go to the next event matching :meth:`find`'s conditions; None (and no move) when there is none."""
        n = self.find(**conditions)
        if n is None:
            return None
        self._fold_at(n)
        return self.events[n - 1]

    def to_next_completion(self) -> StepEvent | None:
        """Go to the next barrier completion (an mbarrier phase or a named barrier's release)."""
        return self.to_next(kind="phase")

    def event(self, n: int | None = None) -> StepEvent | None:
        """The event that led to step ``n`` (default: the current step); None at step 0."""
        n = self._pos if n is None else int(n)
        if n == 0:
            return None
        self._ensure(n)
        if not 1 <= n <= len(self.events):
            raise StepError(f"no event {n}: the run has {len(self.events)} events",
                            rule="steps run from 0 to the number of events")
        return self.events[n - 1]

    def __iter__(self) -> Iterator[StepEvent]:
        """Every event from the current step on, moving forward."""
        while (e := self.forward()) is not None:
            yield e

    # ------------------------------------------------------------------ state
    def _writer_name(self, n: int) -> str:
        e = self.events[n - 1]
        what = e.label or _short_opcode(e.ptx or e.detail)
        return f"{e.who}#{e.index} {what}"

    def state(self) -> StepState:
        """The state at the current step."""
        f = self._fold_at(self._pos)
        eng = self.engine
        warps = []
        for w in eng.warps:
            pc, waiting, status = f.warps[(w.role, w.warp)]
            ptx = self._ptx(w.ops[pc].rec, w.ops[pc]) if pc < len(w.ops) else None
            label = (getattr(w.ops[pc].rec, "label", "") or "") if pc < len(w.ops) else ""
            warps.append({"role": w.role, "warp": w.warp, "pc": pc, "ptx": ptx, "label": label,
                          "waiting_on": waiting, "status": status})
        mbars = [{"name": n, "phase": s["phase"], "pending": s["pending"], "tx": s["tx"], "expected": s["expected"]}
                 for n, s in f.mbars.items()]
        nbars = [{"id": i, "arrived": s["arrived"], "count": s["count"], "generation": s["generation"]}
                 for i, s in sorted(f.nbars.items())]
        shifted = f.tmem_writer.ravel().astype(np.int64) + 1  # writers are steps: count them (no sort)
        ids = np.nonzero(np.bincount(shifted, minlength=1))[0]
        lut = np.zeros(int(shifted.max()) + 1, dtype=np.int64)
        lut[ids] = np.arange(ids.size)
        inverse = lut[shifted].reshape(f.tmem_writer.shape)
        ids = ids - 1
        k = ids.size
        lane_of, col_of = np.indices(inverse.shape)
        flat = inverse.ravel()
        cells = np.bincount(flat, minlength=k)
        box = []
        for grid, fn, start in ((lane_of, np.minimum, LANES), (lane_of, np.maximum, -1), (col_of, np.minimum, COLUMNS),
                                (col_of, np.maximum, -1)):
            v = np.full(k, start, dtype=np.int64)
            fn.at(v, flat, grid.ravel())
            box.append(v.tolist())
        names, regions = [], []
        for j, n in enumerate(ids.tolist()):
            if n < 0:
                continue
            names.append(self._writer_name(n))
            regions.append({"writer": names[-1], "step": n, "lanes": [box[0][j], box[1][j]],
                            "columns": [box[2][j], box[3][j]], "cells": int(cells[j])})
        offset = 1 if ids.size and ids[0] < 0 else 0
        writer_ids = inverse - offset  # -1 = never written
        allocs = dict(sorted(eng._tmem_cols.items())) if f.step == len(self.events) and eng.finished else None
        tmem = {"written": regions, "cells_written": int((f.tmem_writer >= 0).sum())}
        if allocs is not None:
            tmem["allocated"] = [{"column": c, "columns": n} for c, n in allocs.items()]
        smem = tuple({"buffer": name, "range": [a, b], "writer": self._writer_name(int(n)) if n > 0 else None,
                      "step": int(n) if n > 0 else None}
                     for (name, a, b), n in zip(self.buffers, f.smem_writer.tolist(), strict=True))
        units = {u: [self._writer_name(n) for n in q] for u, q in f.inflight.items()}
        return StepState(f.step, f.cycle, tuple(warps), tuple(mbars), tuple(nbars), tmem, smem, units,
                         f.tmem_writer.copy(), tuple(names), writer_ids)

    def to_json(self) -> dict:
        """``{"step", "event", "state"}`` at the current step (``event`` None at step 0)."""
        e = self.event()
        return {"step": self._pos, "event": None if e is None else e.to_json(), "state": self.state().to_json()}


def _short_opcode(ptx: str) -> str:
    """The opcode of a PTX line, its qualifiers cut to the first two (``cp.async.bulk.tensor...``)."""
    op = ptx.split(" ", 1)[0].rstrip(";")
    parts = op.split(".")
    return op if len(parts) <= 4 else ".".join(parts[:4]) + "..."


def _written_ranges(eng) -> tuple[tuple[str, int, int], ...]:
    """The merged shared-memory ranges the Program's records write (named by their range): the default buffers."""
    spans = []
    for w in eng.warps:
        for op in w.ops:
            for q in op.smem_w:
                spans.extend(eng.index.ranges_of[q])
    spans.sort()
    merged: list[list[int]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return tuple((f"[{a}, {b})", a, b) for a, b in merged)
