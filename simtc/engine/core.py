"""The cycle-level engine: a Program's warps as SimPy processes beside the SM's units.

Time is an integer SM cycle (:mod:`simtc.engine.scheduler`). One process per warp of each role (an elected
role of one thread is one process) issues its role's records in order (:mod:`simtc.engine.warp`); each
record's handler (:mod:`simtc.engine.handlers`) books the units it uses:

* the warp's **sub-partition** -- issue slot, pipes, scoreboard (:mod:`simtc.engine.issue`);
* the **shared-memory port**, one bandwidth for every reader and writer (:mod:`simtc.engine.smem_port`);
* the **tensor pipe** -- ``tcgen05.mma`` / ``tcgen05.cp`` / ``wgmma`` (:mod:`simtc.engine.tensor_pipe`);
* the **TMEM path** -- ``tcgen05.ld`` / ``st`` (:mod:`simtc.engine.tmem_path`);
* the **copy engine** (TMA) and the **memory system** (:mod:`simtc.engine.copy_engine`,
  :mod:`simtc.engine.memory`);
* **mbarriers** and **named barriers** (:mod:`simtc.engine.barriers`).

Every number comes from a :class:`~simtc.engine.parameters.Timing` (labelled parameters; mechanisms can be
switched off). Two modes give the same event order: ``"timing"`` (footprints only) and ``"semantics"`` (each
record also executes through :func:`simtc.semantics.execute`: sync records at issue, asynchronous ones when
they complete, arrivals when they land). The hazard checker (:mod:`simtc.engine.checker`) is an observer.

Runs are deterministic: SimPy orders events by (time, insertion), processes start in role order, and
nothing depends on hashing order or wall time.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import math
import time as _time

from simtc.engine import ops as k
from simtc.engine.barriers import MBarrier, NamedBarrier
from simtc.engine.calendar import Spans
from simtc.engine.checker import HazardChecker
from simtc.engine.copy_engine import CopyEngine
from simtc.engine.handlers import HANDLERS
from simtc.engine.hazards import Hazard
from simtc.engine.issue import SubPartition, block_cost
from simtc.engine.l1 import L1MissPath
from simtc.engine.memory import MemorySystem
from simtc.engine.ops import KIND_OF_CLASS, EngineError, FootprintIndex, Keys, Op
from simtc.engine.parameters import Timing
from simtc.engine.scheduler import Scheduler
from simtc.engine.smem_port import SharedMemoryPort
from simtc.engine.tensor_pipe import TensorPipe
from simtc.engine.tmem_path import TmemPath
from simtc.engine.trace import Event, Trace
from simtc.engine.warp import Warp, run
from simtc.errors import LaneQuadrantError, SimtcError

__all__ = ["Engine", "EngineError", "Simulation", "gc_paused"]

MODES = ("semantics", "timing")
TMEM_COLUMNS = 512
UNITS = ("tensor_pipe", "tma", "tmem_path", "smem_port", "l1", "memory", "issue")
# records that act in semantics mode when their arrival lands (commit, arrivals) or not at all (waits, barriers)
_NOT_AT_ISSUE = frozenset((k.K_COMMIT, k.K_ARRIVE, k.K_ARRIVE_TX, k.K_TRY_WAIT, k.K_BAR_SYNC, k.K_BAR_ARRIVE))
_ARRIVING = frozenset((k.K_ARRIVE, k.K_ARRIVE_TX, k.K_COMMIT, k.K_TMA_LOAD))


@contextlib.contextmanager
def gc_paused():
    """The cyclic garbage collector off for the block (restored after; nesting is fine). Compiling and running
    allocate many small objects that live as long as the Engine and form no garbage cycles while it runs."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _costs(timing: Timing) -> dict:
    """The fixed latencies handlers read, with the mechanisms that are off set to 0."""
    t = timing
    c = {name: t[name] for name in ("mbarrier_arrive", "mbarrier_try_wait", "named_barrier_arrive",
                                     "named_barrier_release", "named_barrier_per_warp", "smem_ld_latency",
                                     "smem_st_visibility", "proxy_fence")}
    c["commit_arrive"] = t["commit_arrive"] if t.arch == "sm100" else t["mbarrier_arrive"]
    c["wgmma_max_outstanding"] = t["wgmma_max_outstanding"] if t.arch == "sm90" else 1 << 30
    c["wgmma_issue"] = t["wgmma_issue"] if t.arch == "sm90" else t["mma_issue"]
    if not t.enabled("barriers"):
        for name in ("mbarrier_arrive", "mbarrier_try_wait", "named_barrier_arrive", "named_barrier_release",
                     "named_barrier_per_warp", "commit_arrive", "proxy_fence"):
            c[name] = 0
    if not t.enabled("latency"):
        c["smem_ld_latency"] = c["smem_st_visibility"] = 0
    return c


class Engine:
    """Simulate one :class:`simtc.isa.Program` cycle by cycle.

    Parameters
    ----------
    program:
        The Program (roles of warps, their records, the barrier table).
    mode:
        ``"timing"`` (footprints only) or ``"semantics"`` (records also execute on a
        :class:`simtc.semantics.Cta`; pass ``cta`` or one is made from the Program).
    arch:
        ``"sm100"`` or ``"sm90"``: whose parameter table to use (ignored when ``timing`` is given).
    check:
        Run the hazard checker (on by default); deadlocks are reported either way.
    timing:
        A :class:`~simtc.engine.parameters.Timing` (overridden values, mechanisms off); default ``Timing(arch)``.
    active_sms:
        SMs sharing HBM (default: every SM of the chip, ``sm_count``).
    l2_resident:
        Tensor names whose global-memory requests hit in L2.
    observers:
        More observers of accesses and synchronisations (e.g. a :class:`~simtc.engine.checker.CheckLog`).
    """

    def __init__(self, program, *, mode: str = "timing", arch: str = "sm100", check: bool = True,
                 timing: Timing | None = None, cta=None, active_sms: int | None = None, l2_resident=(),
                 observers=()):
        from simtc.isa.program import Program

        if not isinstance(program, Program):
            raise EngineError(f"the engine runs a simtc.isa.Program, got {type(program).__name__}",
                              rule="Engine(program) takes a Program (registry.build(name), Program.from_json)")
        if mode not in MODES:
            raise EngineError(f"mode must be one of {MODES}, got {mode!r}", rule="engine modes")
        if timing is None:
            timing = Timing(arch)
        elif not isinstance(timing, Timing):
            raise EngineError(f"timing must be a simtc.engine.parameters.Timing, got {type(timing).__name__}",
                              rule="Engine(timing=Timing(arch, ...))")
        self.program = program
        self.mode = mode
        self.timing = timing
        self.arch = timing.arch
        self.check = check
        self.c = _costs(timing)
        self.sched = Scheduler()
        self.trace = Trace()
        self.deadlock: dict | None = None
        self.port = SharedMemoryPort(timing)
        self.memory = MemorySystem(timing, active_sms, l2_resident)
        self.l1 = L1MissPath(timing)
        self.pipe = TensorPipe(timing, self.port)
        self.copy = CopyEngine(timing, self.port, self.memory)
        self.tmem = TmemPath(timing)
        self.pipe_last_ev = -1
        self.tma_last_ev = -1
        self.wg_ops: dict = {}
        self._wg_members: dict[tuple[str, int], int] = {}
        self.token = None
        self._tokens = 0
        self._tmem_cols: dict[int, int] = {}  # allocated column ranges: start -> ncols
        self._alloc_waiters: list = []  # (event, warp, op, index) of allocations blocked until columns are freed
        self._relinquished = False
        self._wall = 0.0
        self._started = False
        self._finished = False
        self._violations: list[Hazard] = []
        self.cta = None
        self.semantics_errors: list[dict] = []
        self.unit_ops: dict[tuple[int, int], tuple[int, int]] = {}
        """``(warp index, record index)`` of an operation on the tensor pipe or the TMEM path -> ``(start, free)``:
        when the unit took it and when the unit was free for the next (what a trace viewer draws)."""
        self.released: dict[int, tuple[tuple[str, int], ...]] = {}
        """Trace index of a ``phase`` event -> the waiting warps ``(role, warp)`` it released."""
        if mode == "semantics":
            from simtc import semantics

            self._sem_execute = semantics.execute
            if cta is None:
                cta = semantics.Cta()
                cta.init_barriers(program)
            self.cta = cta
        self.mbars: dict[str, MBarrier] = {}
        self.nbars: dict[int, NamedBarrier] = {}
        for b in program.barriers:  # the barrier table is initialised by the setup code before the roles run
            if b.kind == "mbarrier":  # (as simtc.semantics.Cta.init_barriers does); mbarrier.init may redo it
                self.mbars[b.name] = MBarrier(b.name, b)
                self.mbars[b.name].st.init(b.count)
        with gc_paused():
            self._compile()
        self.checker = HazardChecker(self.warps, self.index, self._tmem_cols if self._alloc_seen else None) \
            if check else None
        self.observers = ([self.checker] if check else []) + list(observers)

    # ------------------------------------------------------------------ compile
    def _compile(self) -> None:
        rects, ranges = Keys(), Keys()
        cache: dict[tuple, tuple] = {}
        by_value: dict[tuple, Op] = {}
        shared_by_id: dict[int, Op] = {}
        warp_by_id: dict[int, dict[int, Op]] = {}
        private = not self.timing.enabled("issue_contention")
        sps = self.timing["sub_partitions"]
        sub = {}

        def compiled(rec, w: int) -> Op:  # after by_id missed
            tpl = by_value.get((rec, None)) or by_value.get((rec, w))
            if tpl is None:
                op = self._compile_op(rec, w, cache, rects, ranges)
                if op.quad_bad is not None:
                    return op
                tpl = by_value[rec, w if op.per_warp else None] = op
            if tpl.per_warp:
                warp_by_id.setdefault(w, {})[id(rec)] = tpl
            else:
                shared_by_id[id(rec)] = tpl
            return tpl

        self.warps: list[Warp] = []
        for role in self.program.roles:
            nthreads = role.threads if role.threads is not None else 32 * len(role.warps)
            per_warp = max(1, min(32, nthreads // max(1, len(role.warps))))
            first: list[Op] | None = None
            recs = role.records
            ids = list(map(id, recs))
            shared_get = shared_by_id.get
            for w in role.warps:
                mine = warp_by_id.setdefault(w, {}).get
                if first is None:
                    ops = first = [shared_get(rid) or mine(rid) or compiled(rec, w)
                                   for rid, rec in zip(ids, recs, strict=True)]
                else:
                    ops = [(mine(rid) or compiled(rec, w)) if op.per_warp else op
                           for rid, rec, op in zip(ids, recs, first, strict=True)]
                key = len(self.warps) if private else w % sps
                sp = sub.get(key)
                if sp is None:
                    sp = sub[key] = SubPartition(key)
                self.warps.append(Warp(len(self.warps), role.name, w, per_warp, ops, sp))
        self.sub_partitions = list(sub.values())
        self._alloc_seen = any(op.kind == k.K_ALLOC for op in by_value.values())
        self.index = FootprintIndex(rects, ranges, by_value.values())

    def _compile_op(self, rec, warp: int, cache, rects, ranges) -> Op:
        cls = type(rec).__name__
        kind = KIND_OF_CLASS.get(cls)
        if kind is None:
            raise EngineError(f"the engine has no model for record {cls} ({getattr(rec, 'op', '?')})",
                              rule="records the engine models")
        op = Op(kind, rec)
        op.name = rec.opcode if isinstance(getattr(rec, "opcode", None), str) else cls
        op.per_warp = k.per_warp(kind, rec)
        op.handler = _alloc_blocking if kind == k.K_ALLOC else HANDLERS[kind]
        op.sync = not rec.is_async and kind not in _NOT_AT_ISSUE and kind != k.K_ALLOC  # (alloc: when granted)
        key = (rec, warp % 4 if op.per_warp else 0)  # equal records share their footprint
        hit = cache.get(key)
        quad = None
        if hit is None:
            try:
                fp = rec.footprint(warp)
            except LaneQuadrantError as e:  # an absolute lane outside the warp's quadrant: flagged at issue
                quad = e.message
                fp = rec.footprint((rec.taddr >> 16) // 32)
            sr = (ranges[tuple((r.start, r.stop) for r in fp.smem_reads)],) if fp.smem_reads else ()
            sw = (ranges[tuple((r.start, r.stop) for r in fp.smem_writes)],) if fp.smem_writes else ()
            tr = tuple(rects[r.lane0, r.lane0 + r.lanes, r.col0, r.col0 + r.cols] for r in fp.tmem_reads)
            tw = tuple(rects[r.lane0, r.lane0 + r.lanes, r.col0, r.col0 + r.cols] for r in fp.tmem_writes)
            cells = sum(r.lanes * r.cols for r in fp.tmem_reads + fp.tmem_writes)
            hit = (sr, sw, tr, tw, tuple(fp.regs_read), tuple(fp.regs_written), fp.proxy == "async", cells)
            cache[key] = hit
        op.smem_r, op.smem_w, op.tmem_r, op.tmem_w, op.regs_r, op.regs_w, op.proxy_async, op.cells = hit
        if kind in (k.K_LD, k.K_ST):
            lo = 32 * (warp % 4)
            bad = [r for r in map(rects.of.__getitem__, op.tmem_r + op.tmem_w) if r[0] < lo or r[1] > lo + 32]
            if bad:
                op.quad_bad = quad or f"warp {warp} may touch lanes {lo}-{lo + 31}, touches {bad[0][0]}-{bad[0][1] - 1}"
        elif kind in (k.K_LD_SHARED, k.K_ST_SHARED):  # a wavefront is 128 B (32 banks x 4 B)
            op.wavefronts = math.ceil(_wavefronts(rec) * 128 / self.port.bytes_per_cycle)
        elif kind == k.K_CUDA:
            op.cost = block_cost(rec, self.timing)
        bar = getattr(rec, "bar", None)
        if bar is not None:
            op.bar = bar
            if bar not in self.mbars:
                self.mbars[bar] = MBarrier(bar, None)
        if kind in (k.K_BAR_SYNC, k.K_BAR_ARRIVE):
            op.arg = (rec.id_for(warp), rec.threads)
        elif kind in (k.K_BULK_WAIT, k.K_WGMMA_WAIT):
            op.arg = rec.n
        return op

    # ------------------------------------------------------------------ trace, observers, semantics
    def ev(self, role: str, warp: int, index: int, kind: str, detail: str, dep: int) -> int:
        """Append a trace event; returns its index."""
        return self.trace.add(int(self.sched.env.now), role, warp, index, kind, detail, dep)

    def issued(self, w: Warp, i: int, op: Op, now: int) -> int:
        """Warp ``w`` issues record ``i`` at ``now``: the trace event, and the observers are told."""
        ev = w.last_ev = self.trace.add(now, w.role, w.warp, i, "issue", op.name, w.last_ev)
        if ev & 1023 == 0:  # now and then, forget the busy time no request can reach any more
            self.port.forget(now)
            self.memory.forget(now)
            self.l1.forget(now)
        token = None
        if op.kind in _ARRIVING:
            self._tokens += 1
            token = self._tokens
        self.token = token
        for o in self.observers:
            o.on_issue(now, w, i, op, token)
        return ev

    def violation(self, rule: str, first, second, message: str) -> None:
        """A state machine refused something: told to the observers (the checker reports it); a deadlock is
        reported with the checker off too."""
        now = self.sched.now
        for o in self.observers:
            o.on_violation(now, rule, first, second, message)
        if not self.check and rule == "deadlock":
            self._violations.append(Hazard(rule, now, first, second, message))

    def observed(self, w: Warp, i: int, bar: str, phase: int) -> None:
        for o in self.observers:
            o.on_wait(self.sched.now, w, i, bar, phase)

    def execute(self, rec, w: Warp) -> None:
        """Semantics mode: apply a record to the Cta. A record the semantics layer refuses (the data consequence
        of a hazard, or a missing input) is kept in ``semantics_errors`` and the run goes on the same way."""
        try:
            self._sem_execute(rec, self.cta, warp=w.warp, threads=w.threads)
        except SimtcError as e:
            self.semantics_errors.append({"cycle": self.sched.now, "warp": w.warp, "record": rec.ptx(),
                                          "error": str(e)})

    # ------------------------------------------------------------------ completions and arrivals
    def complete_at(self, t: int, w: Warp, op: Op, i: int, dep: int, unit: str | None = None) -> None:
        """The asynchronous record ``i`` of ``w`` completes at cycle ``t`` (trace event ``complete``)."""
        self.sched.call_at(t, self._complete, w, op, i, dep, unit)

    def _complete(self, w: Warp, op: Op, i: int, dep: int, unit: str | None) -> None:
        ev = self.ev(w.role, w.warp, i, "complete", op.name, dep)
        if unit == "tensor_pipe":
            self.pipe_last_ev = ev
            now = self.sched.env.now
            if all(f.done <= now for f in w.tc):
                w.tc_last_ev = ev
        if self.mode == "semantics":
            self.execute(op.rec, w)

    def tensor_issued(self, w: Warp, op: Op, i: int, ev: int, flight) -> None:
        """An MMA or tcgen05.cp is on the tensor pipe (its :class:`~simtc.engine.tensor_pipe.Flight`)."""
        w.tc.append(flight)
        self.unit_ops[w.idx, i] = (flight.start, flight.free)
        dep = ev if flight.start <= self.sched.env.now + self.c["wgmma_issue"] else self.pipe_last_ev
        self.complete_at(flight.done, w, op, i, dep, "tensor_pipe")

    def tma_complete_at(self, t: int, w: Warp, op: Op, i: int, dep: int, token) -> None:
        self.sched.call_at(t, self._tma_done, w, op, i, dep, token)

    def _tma_done(self, w: Warp, op: Op, i: int, dep: int, token) -> None:
        ev = self.ev(w.role, w.warp, i, "complete", op.name, dep)
        self.tma_last_ev = ev
        if self.mode == "semantics":
            self.execute(op.rec, w)
        self._land(self.mbars[op.bar], 0, token, (w.role, w.warp, i), ev, "complete_tx", complete_tx=op.rec.nbytes)

    def arrive_at(self, t: int, op: Op, w: Warp, i: int, dep: int, token, count: int, who: str, tx: int = 0) -> None:
        """An arrival of record ``i`` of ``w`` (an arrive or a commit) lands at ``t``."""
        self.sched.call_at(t, self._arrival, op, w, i, dep, token, count, who, tx)

    def _arrival(self, op: Op, w: Warp, i: int, dep: int, token, count: int, who: str, tx: int) -> None:
        if self.mode == "semantics":
            self.execute(op.rec, w)
        self._land(self.mbars[op.bar], count, token, (w.role, w.warp, i), dep, who, tx=tx)

    def _land(self, mb: MBarrier, count: int, token, rec, dep: int, who: str, tx: int = 0,
              complete_tx: int = 0) -> None:
        st = mb.st
        now = self.sched.now
        if not st.initialized:
            self.violation("mbarrier-uninitialized", None, rec, f"arrival on {st.name} before mbarrier.init")
        for o in self.observers:
            o.on_arrival(now, st.name, token)
        if tx:
            st.expect_tx(tx)
        n_err = len(st.errors)
        done = st.complete_tx(complete_tx) if complete_tx else st.arrive(count)
        ev = self.ev(*rec, "arrive", f"{st.name} {who}", dep)
        mb.last_arrive_ev = ev
        for rule, msg in st.errors[n_err:]:
            self.violation(rule, None, rec, msg)
        if done:
            self._phase(mb, ev)

    def _phase(self, mb: MBarrier, dep: int) -> None:
        for o in self.observers:
            o.on_phase(self.sched.now, mb.st.name)
        mb.phase_ev = self.ev("", -1, -1, "phase", f"{mb.st.name} phase {mb.st.phase - 1} complete", dep)
        if mb.waiters:
            keep, released = [], []
            for parity, evt, w in mb.waiters:
                if mb.st.passes(parity):
                    evt.succeed(mb.phase_ev)
                    released.append((w.role, w.warp))
                else:
                    keep.append((parity, evt, w))
            mb.waiters = keep
            if released:
                self.released[mb.phase_ev] = tuple(released)

    def named_arrive(self, w: Warp, op: Op, i: int, ev: int, sync: bool):
        """Warp ``w`` arrives on a named barrier; returns the event ``bar.sync`` waits for (None: ``bar.arrive``)."""
        bid, count = op.arg
        nb = self.nbars.get(bid)
        if nb is None:
            nb = self.nbars[bid] = NamedBarrier(bid)
        nb.counts.add(count)
        if len(nb.counts) > 1:
            self.violation("named-barrier-count-mismatch", None, (w.role, w.warp, i),
                           f"barrier {bid} used with thread counts {sorted(nb.counts)}")
        now = self.sched.now
        visible = max(now, w.store_visible)
        if visible > nb.visible:
            nb.visible = visible
        evt = self.sched.event() if sync else None
        if sync:
            nb.waiters.append((evt, w))
        released = nb.st.arrive(w.threads, count)
        nb.last_ev = self.ev(w.role, w.warp, i, "arrive", f"bar {bid} ({nb.st.arrived or count}/{count})", ev)
        if released:
            nb.counts = set()  # the count may legally change from one generation to the next (PTX ISA 9.0 §9.7.13.1)
            waiters, nb.waiters = nb.waiters, []
            for o in self.observers:
                o.on_release(now, bid, [x for _, x in waiters])
            t = nb.visible + self.c["named_barrier_release"] + self.c["named_barrier_per_warp"] * -(-count // 32)
            nb.visible = 0
            self.sched.call_at(t, self._release, bid, nb.last_ev, waiters)
        return evt

    def _release(self, bid: int, dep: int, waiters) -> None:
        rel = self.ev("", -1, -1, "phase", f"bar {bid} released", dep)
        for evt, _w in waiters:
            evt.succeed(rel)
        if waiters:
            self.released[rel] = tuple((w.role, w.warp) for _, w in waiters)

    def last_complete_ev(self, w: Warp) -> int:
        """The most recent completion event of this warp's units (for the critical path)."""
        tr = self.trace
        for j in range(len(tr) - 1, max(-1, len(tr) - 64), -1):
            e = tr[j]
            if e.kind == "complete" and e.role == w.role and e.warp == w.warp:
                return j
        return w.last_ev

    # ------------------------------------------------------------------ TMEM allocation
    def allocate(self, op: Op, me, retry: bool = False) -> bool:
        """``tcgen05.alloc`` / ``dealloc`` / ``relinquish_alloc_permit`` on the allocation table. An allocation
        that finds no free columns returns False: the warp blocks until a dealloc frees some (PTX ISA 9.0
        §9.7.16.7.1: tcgen05.alloc is potentially blocking); one that never can is reported at the deadlock."""
        if op.kind == k.K_RELINQUISH:
            self._relinquished = True
            return True
        rec = op.rec
        if op.kind == k.K_ALLOC:
            if self._relinquished and not retry:
                self.violation("tmem-alloc-after-relinquish", None, me, "tcgen05.alloc after relinquish_alloc_permit")
            n = rec.ncols
            used = sorted(self._tmem_cols.items())
            start, pos = None, 0
            for s, c in [*used, (TMEM_COLUMNS, 0)]:
                # the allocator's column, aligned to ncols [inferred: PTX ISA 9.0 §9.7.16.7.1 does not say]
                base = -(-pos // n) * n
                if base + n <= s:
                    start = base
                    break
                pos = s + c
            if start is None:
                return False
            self._tmem_cols[start] = n
        else:
            col = rec.taddr & 0xFFFF
            if self._tmem_cols.get(col) != rec.ncols:
                self.violation("tmem-dealloc-unallocated", None, me,
                               f"tcgen05.dealloc of {rec.ncols} columns at column {col}; live allocations: "
                               f"{self._alloc_text()}")
                return True
            del self._tmem_cols[col]
            if self._alloc_waiters:  # every blocked allocation tries again
                waiters, self._alloc_waiters = self._alloc_waiters, []
                for evt, *_ in waiters:
                    evt.succeed(len(self.trace) - 1)
        return True

    def _alloc_text(self) -> str:
        return ", ".join(f"{s}+{c}" for s, c in sorted(self._tmem_cols.items())) or "none"

    # ------------------------------------------------------------------ running
    def _start(self) -> None:
        if self._started:
            return
        self._started = True
        table = tuple(sorted(b.name for b in self.program.barriers if b.kind == "mbarrier"))
        for o in self.observers:  # the mbarriers the setup code initialised (an observer may not need them)
            start = getattr(o, "on_start", None)
            if start is not None:
                start(0, table)
        for w in self.warps:
            w.proc = self.sched.process(run(self, w))

    def run(self, until: int | None = None) -> Engine:
        """Run to the end (or until cycle ``until``); then check for a deadlock."""
        self._start()
        t0 = _time.perf_counter()
        with gc_paused():
            self.sched.run(until)
        self._wall += _time.perf_counter() - t0
        if self.sched.idle:
            self._finish()
        return self

    def step(self) -> Event | None:
        """Process one SimPy event; returns the last trace event it produced (or None)."""
        self._start()
        n = len(self.trace)
        if self.sched.idle:
            self._finish()
            return None
        t0 = _time.perf_counter()
        self.sched.step()
        self._wall += _time.perf_counter() - t0
        if self.sched.idle:
            self._finish()
        return self.trace[-1] if len(self.trace) > n else None

    def peek(self) -> float:
        """Cycle of the next event (``inf`` when nothing is scheduled)."""
        self._start()
        return self.sched.peek()

    @property
    def now(self) -> int:
        return self.sched.now

    @property
    def finished(self) -> bool:
        return self._finished

    def _finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        for o in self.observers:
            o.on_end(self.sched.now)
        live = [w for w in self.warps if not w.done]
        for _evt, w, op, i in self._alloc_waiters:
            self.violation("tmem-alloc-over-512", None, (w.role, w.warp, i),
                           f"tcgen05.alloc of {op.rec.ncols} columns blocks forever: {self._alloc_text()} of "
                           f"{TMEM_COLUMNS} columns stay allocated and no dealloc frees them")
        if live:
            self._report_deadlock(live)
        if self._alloc_seen and self._tmem_cols and not live:
            self.violation("tmem-not-deallocated", None, None, f"still allocated at the end: {self._alloc_text()}")

    def _report_deadlock(self, live: list[Warp]) -> None:
        waits = []
        for a in live:
            waits.append({"role": a.role, "warp": a.warp, "index": a.pc, "record": a.ops[a.pc].name,
                          "waits_on": a.waiting_on, "since": a.wait_since})
        suppliers: dict[str, list[dict]] = {}
        for a in live:
            op = a.ops[a.pc]
            if op.kind == k.K_TRY_WAIT:
                mb = self.mbars[op.bar]
                who = []
                for b in self.warps:
                    for j, o in enumerate(b.ops):
                        if o.bar == op.bar and o.kind in (k.K_ARRIVE, k.K_ARRIVE_TX, k.K_COMMIT, k.K_TMA_LOAD):
                            state = "finished" if b.done else (f"waiting on {b.waiting_on}" if b.waiting_on
                                                                else "running")
                            who.append({"role": b.role, "warp": b.warp, "index": j, "record": o.name,
                                        "state": state, "issued": b.done or b.pc > j})
                suppliers[op.bar] = who
                waits[live.index(a)]["barrier"] = mb.st.state()
        first = live[0]
        self.deadlock = {"cycle": self.sched.now, "waiting": waits, "would_arrive": suppliers}
        who = "; ".join(f"{w['role']}[w{w['warp']}]#{w['index']} waits on {w['waits_on']}" for w in waits)
        self.violation("deadlock", None, (first.role, first.warp, first.pc), who)

    # ------------------------------------------------------------------ results
    @property
    def hazards(self) -> list[Hazard]:
        """Hazards the checker found (with the checker off: the deadlock and what the state machines refused)."""
        return self.checker.hazards if self.checker is not None else self._violations

    @property
    def cycles(self) -> int:
        return self.sched.now

    @property
    def agents(self) -> list[Warp]:
        """The warps (kept under their older name)."""
        return self.warps

    @property
    def unit_spans(self) -> dict[str, Spans]:
        """Busy spans ``(start, end, who)`` of each unit (merged where they touch)."""
        return {"tensor_pipe": self.pipe.spans, "tma": self.copy.spans, "tmem_path": self.tmem.spans,
                "smem_port": self.port.spans, "l1": self.l1.spans, "memory": self.memory.link.spans}

    def warpgroup_members(self, w) -> int:
        """How many warps of ``w``'s role share its warpgroup (those issue each ``wgmma`` together; counted once)."""
        key = (w.role, w.warp // 4)
        n = self._wg_members.get(key)
        if n is None:
            n = self._wg_members[key] = sum(1 for b in self.warps if b.warp // 4 == w.warp // 4 and b.role == w.role)
        return n

    @property
    def unit_busy(self) -> dict[str, int]:
        """Cycles each unit was busy (``issue``: issue-slot cycles over all sub-partitions)."""
        return {"tensor_pipe": self.pipe.busy, "tma": self.copy.busy, "tmem_path": self.tmem.busy,
                "smem_port": self.port.busy, "l1": self.l1.busy, "memory": self.memory.link.busy,
                "issue": sum(sp.issue.busy for sp in self.sub_partitions)}

    def per_role(self) -> dict[str, dict[str, int]]:
        """Busy and waiting cycles per role (mean over the role's warps, rounded)."""
        out: dict[str, list] = {}
        for a in self.warps:
            out.setdefault(a.role, []).append(a)
        return {role: {"busy_cycles": round(sum(a.busy for a in ags) / len(ags)),
                       "waiting_cycles": round(sum(a.waited for a in ags) / len(ags))} for role, ags in out.items()}

    def units(self) -> dict[str, dict[str, int]]:
        return {u: {"busy_cycles": int(v)} for u, v in self.unit_busy.items()}

    def critical_path(self) -> list[int]:
        """Trace indices of the critical path, first to last (follow ``dep`` from the last event)."""
        tr = self.trace
        if not len(tr):
            return []
        cycles = tr.cycles()
        top = max(cycles)
        i = max(j for j in range(len(cycles) - 1, -1, -1) if cycles[j] == top)  # the last event of the latest cycle
        deps = tr._dep
        path = []
        seen = set()
        while i >= 0 and i not in seen:
            seen.add(i)
            path.append(i)
            i = deps[i]
        return path[::-1]

    def tmem_columns(self, first_warp_only: bool = False) -> set[int]:
        """The TMEM columns the Program's records touch (read or write), from their compiled footprints: of every
        warp, or of each role's first warp."""
        cols: set[int] = set()
        seen: set[int] = set()
        roles: set[str] = set()
        rect_of = self.index.rect_of
        for a in self.warps:
            if first_warp_only and a.role in roles:
                continue
            roles.add(a.role)
            for op in a.ops:
                if id(op) in seen:
                    continue
                seen.add(id(op))
                if op.quad_bad is not None:
                    op.rec.footprint(a.warp)
                for q in op.tmem_r + op.tmem_w:
                    _, _, c0, c1 = rect_of[q]
                    cols.update(range(c0, c1))
        return cols

    def snapshot(self) -> dict:
        """The state now: cycle, each warp's pc and wait, barrier states, units, TMEM/smem writers."""
        fmt = self._fmt
        snap = {
            "cycle": self.now,
            "warps": [{"role": a.role, "warp": a.warp, "pc": a.pc, "record": a.ops[a.pc].name if a.pc < len(a.ops)
                       else None, "done": a.done, "waits_on": a.waiting_on} for a in self.warps],
            "mbarriers": {n: m.st.state() for n, m in self.mbars.items()},
            "named_barriers": {i: b.st.state() for i, b in self.nbars.items()},
            "units": {"tensor_pipe_free_at": self.pipe.server.free, "tmem_path_free_at": self.tmem.server.free},
            "tmem_allocations": dict(sorted(self._tmem_cols.items())),
            "tmem_writers": {}, "smem_writers": {},
        }
        if self.checker is not None:
            idx = self.index
            snap["tmem_writers"] = {f"lanes {r[0]}-{r[1] - 1} cols {r[2]}-{r[3] - 1}": fmt(o, i) for r, (_k, _s, o, i)
                                    in sorted((idx.rect_of[q], w) for q, w in self.checker.tmem_w.items())}
            snap["smem_writers"] = {" ".join(f"[{a}, {b})" for a, b in r): fmt(o, i) for r, (_k, _s, o, i)
                                    in sorted((idx.ranges_of[q], w) for q, w in self.checker.smem_w.items()
                                              if self.warps[w[2]].ops[w[3]].kind != k.K_ALLOC)}  # (data only)
        if self.cta is not None:
            for name in ("tmem_owner_map", "smem_owner_map"):
                fn = getattr(self.cta, name, None)
                if callable(fn):
                    snap[name] = fn()
        return snap

    def _fmt(self, owner: int, idx: int) -> str:
        a = self.warps[owner]
        return f"{a.role}[w{a.warp}]#{idx} ({a.ops[idx].name})"

    def summary(self) -> dict:
        """The JSON summary of ``simtc simulate --json``."""
        return {"cycles": self.cycles, "events": len(self.trace), "wall_seconds": round(self._wall, 6),
                "hazards": [h.to_json() for h in self.hazards], "deadlock": self.deadlock,
                "per_role": self.per_role(), "units": self.units()}

    @property
    def clean(self) -> bool:
        return not self.hazards and self.deadlock is None

    def parameters(self) -> list[dict]:
        """The labelled parameters this run's timing model holds (with any overridden values)."""
        return [{**p.as_dict(), "value": self.timing[p.name]} for p in self.timing.table.values()]


Simulation = Engine


def _alloc_blocking(eng: Engine, w: Warp, op: Op, i: int, now: int, ev: int):
    """``tcgen05.alloc``: one issue cycle when the columns are free; else the warp waits until a dealloc frees
    enough of them (PTX ISA 9.0 §9.7.16.7.1), trying again after each dealloc."""
    me = (w.role, w.warp, i)
    retry = False
    while not eng.allocate(op, me, retry):
        retry = True
        evt = eng.sched.event()
        eng._alloc_waiters.append((evt, w, op, i))
        w.block(eng, i, f"tcgen05.alloc {op.rec.ncols} columns ({eng._alloc_text()} allocated)")
        dep = yield evt
        w.unblock(eng, i, dep if isinstance(dep, int) and dep >= 0 else w.last_ev)
    if eng.mode == "semantics":
        eng.execute(op.rec, w)
    w.busy += 1
    yield eng.sched.sleep(1)


def _wavefronts(rec) -> int:
    """Port cycles of an ld/st.shared: wavefronts per 32-thread warp access (:func:`simtc.smem.banks.bank_conflicts`;
    a wavefront moves 128 B = the port's bytes per cycle).

    Moving every address of an access by one row of banks (32 banks x 4 B = 128 B) keeps each word's bank and
    the words' distinctness, hence the wavefronts: accesses are costed once per address modulo 128.
    """
    from simtc.smem.banks import BANK_BYTES, NUM_BANKS

    return _wavefronts_at(rec.addr % (NUM_BANKS * BANK_BYTES), rec.width, tuple(rec.thread_offsets()))


@functools.lru_cache(maxsize=4096)
def _wavefronts_at(addr: int, width: int, offsets: tuple[int, ...]) -> int:
    import numpy as np

    from simtc.smem.banks import bank_conflicts

    a = addr + np.asarray(offsets, dtype=np.int64)
    if width < 4:  # sub-word accesses: 4-byte words, same banks
        a = a - a % 4
        width = 4
    return sum(bank_conflicts(a[i:i + 32], width=width).wavefronts for i in range(0, len(a), 32))
