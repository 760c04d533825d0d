"""The cycle-level engine: a Program's warps as SimPy processes beside the asynchronous units.

Time is an integer SM cycle. One SimPy process per warp of each role (an elected role of one
thread is one process) issues its role's records in order. Asynchronous work runs on units
modelled as in-order servers with a "next free" cycle (occupancy) and a completion latency:

* **tensor pipe** -- ``tcgen05.mma`` / ``tcgen05.cp`` / ``wgmma.mma_async`` in issue order;
  occupancy per MMA = the timing model's initiation interval, completion after its latency.
  ``tcgen05.commit`` arrives on its mbarrier once every earlier async tcgen05 operation of the
  committing thread has completed, plus the commit cost (PTX ISA 9.0 §9.7.16.12.1).
* **TMA engine** -- latency + bytes / bandwidth; ``complete_tx`` on the mbarrier.
* **TMEM path** -- ``tcgen05.ld`` / ``st`` asynchronous; ``tcgen05.wait::ld`` / ``::st`` block
  until the warp's earlier ones complete.
* **shared-memory port** -- 128 B per cycle: ``ld/st.shared`` take one cycle per wavefront
  (bank conflicts from :func:`simtc.smem.banks.bank_conflicts`).
* **issue slots** -- one warp-instruction per cycle per SM sub-partition (warp ``w`` on
  sub-partition ``w % 4``); a ``CudaCoreBlock`` holds its sub-partition for its instruction
  counts times the per-class cycles of the timing model.
* **mbarriers / named barriers** -- :mod:`simtc.engine.barriers`.

All costs come from :class:`simtc.engine.costs.Costs` (the timing model's labelled parameter
tables). Two modes give the same event order: ``"timing"`` (footprints only) and
``"semantics"`` (each record also executes through :func:`simtc.semantics.execute`: sync records
at issue, asynchronous ones when they complete).

Runs are deterministic: SimPy orders events by (time, priority, insertion), processes start in
role order, and nothing depends on hashing order or wall time.
"""

from __future__ import annotations

import contextlib
import gc
import heapq
import itertools
import time as _time
from typing import Any

import simpy
from simpy.events import NORMAL

from simtc.engine.barriers import MBarrierState, NamedBarrierState
from simtc.engine.hazards import Hazard
from simtc.engine.trace import Event
from simtc.errors import LaneQuadrantError, SimtcError

__all__ = ["Engine", "EngineError", "Simulation"]

MODES = ("semantics", "timing")
TMEM_COLUMNS = 512
QUADRANT_REF = "PTX ISA 9.0 §9.7.16.8.1"

# op codes for the compiled program (dispatch on ints in the hot loop)
(K_SYNC, K_MMA, K_CP, K_COMMIT, K_LD, K_ST, K_WAIT_LD, K_WAIT_ST, K_FENCE_BEFORE, K_FENCE_AFTER, K_INIT, K_ARRIVE,
 K_ARRIVE_TX, K_TRY_WAIT, K_TMA_LOAD, K_TMA_STORE, K_BULK_COMMIT, K_BULK_WAIT, K_BAR_SYNC, K_BAR_ARRIVE,
 K_PROXY_FENCE, K_LD_SHARED, K_ST_SHARED, K_CUDA, K_ALLOC, K_DEALLOC, K_RELINQUISH, K_WGMMA, K_WGMMA_COMMIT,
 K_WGMMA_WAIT, K_WGMMA_FENCE) = range(31)

_KIND_OF_CLASS = {
    "Mma": K_MMA, "Cp": K_CP, "Commit": K_COMMIT, "Ld": K_LD, "St": K_ST, "WaitLd": K_WAIT_LD, "WaitSt": K_WAIT_ST,
    "FenceBeforeThreadSync": K_FENCE_BEFORE, "FenceAfterThreadSync": K_FENCE_AFTER, "MbarrierInit": K_INIT,
    "MbarrierArrive": K_ARRIVE, "MbarrierArriveExpectTx": K_ARRIVE_TX, "MbarrierTryWait": K_TRY_WAIT,
    "CpAsyncBulkTensor": K_TMA_LOAD, "CpAsyncBulkTensorStore": K_TMA_STORE, "CpAsyncBulk": K_TMA_STORE,
    "BulkCommitGroup": K_BULK_COMMIT, "BulkWaitGroupRead": K_BULK_WAIT, "BarSync": K_BAR_SYNC,
    "BarArrive": K_BAR_ARRIVE, "FenceProxyAsync": K_PROXY_FENCE, "LdShared": K_LD_SHARED, "StShared": K_ST_SHARED,
    "CudaCoreBlock": K_CUDA, "Alloc": K_ALLOC, "Dealloc": K_DEALLOC, "RelinquishAllocPermit": K_RELINQUISH,
    "WgmmaMmaAsync": K_WGMMA, "WgmmaCommitGroup": K_WGMMA_COMMIT, "WgmmaWaitGroup": K_WGMMA_WAIT,
    "WgmmaFence": K_WGMMA_FENCE,
}
_TCGEN05_OPS = frozenset((K_MMA, K_CP, K_LD, K_ST))
# the records whose shared-memory reads the checker keeps as in-flight readers (_smem_add_reader)
_SMEM_ASYNC_READERS = frozenset((K_MMA, K_CP, K_WGMMA, K_TMA_STORE))
# semantics mode: arrivals execute when they land; waits and named barriers are ordering only (the engine's)
_SEM_AT_ARRIVAL = frozenset((K_COMMIT, K_ARRIVE, K_ARRIVE_TX, K_TRY_WAIT, K_BAR_SYNC, K_BAR_ARRIVE))

# knowledge-domain tags (keys of the vector clocks are (tag, agent) or (tag, agent, barrier))
TC, LD, ST, GEN, TMA, BULK = "tc", "ld", "st", "gen", "tma", "bulk"

UNITS = ("tensor_pipe", "tma", "tmem_path", "smem_port", "issue")
_new_event = tuple.__new__  # Event(*fields) without the named tuple's argument-parsing __new__ (the hot loop)


@contextlib.contextmanager
def gc_paused():
    """The cyclic garbage collector off for the block (restored after; nesting is fine). Compiling and running
    allocate many small objects that live as long as the Engine and form no garbage cycles while it runs, so
    collections there only re-scan live objects (a full one costs milliseconds); what becomes garbage is
    collected after the block as usual."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _per_warp(kind: int, rec) -> bool:
    """Whether a record's footprint depends on the executing warp (TMEM quadrant; warp_offsets; warp_ids)."""
    return kind in (K_LD, K_ST) or bool(getattr(rec, "warp_offsets", ()) or getattr(rec, "warp_ids", ()))


class EngineError(SimtcError, RuntimeError):
    """A Program the engine cannot run (unknown record, unknown barrier, bad mode)."""


class _Op:
    """One compiled record of one warp: kind, record, cached footprint pieces and costs. Shared by every
    position of the role (and every warp, unless ``per_warp``) holding this record or an equal one: the
    position (record index) travels beside it."""

    __slots__ = (
        "arg",
        "bar",
        "kind",
        "lat",
        "name",
        "occ",
        "per_warp",
        "proxy_async",
        "quad_bad",
        "rec",
        "regs_r",
        "regs_w",
        "smem_r",
        "smem_w",
        "tmem_r",
        "tmem_w",
    )

    def __init__(self, kind: int, rec: Any):
        self.kind = kind
        self.rec = rec
        self.smem_r = self.smem_w = self.tmem_r = self.tmem_w = ()
        self.regs_r = self.regs_w = ()
        self.occ = self.lat = 0
        self.bar = None
        self.arg = None
        self.quad_bad = None
        self.name = ""
        self.proxy_async = False
        self.per_warp = False


class _Agent:
    """One warp (or elected thread) of a role, issuing the role's records in order."""

    __slots__ = (
        "bulk_groups",
        "bulk_open",
        "bulk_seq",
        "busy",
        "consumed",
        "done",
        "fenced_gen",
        "finished_at",
        "gen_seq",
        "idx",
        "last_ev",
        "ld_last",
        "ld_seq",
        "ops",
        "pc",
        "pend",
        "proc",
        "pub",
        "regs_pending",
        "role",
        "sp",
        "st_last",
        "st_seq",
        "tc",
        "tc_last",
        "tc_last_ev",
        "tc_seq",
        "threads",
        "tma_seq",
        "vc",
        "wait_since",
        "waited",
        "waiting_on",
        "warp",
        "wg_count",
        "wg_groups",
        "wg_last",
        "wg_open",
    )

    def __init__(self, idx: int, role: str, warp: int, threads: int, ops: list[_Op]):
        self.idx, self.role, self.warp, self.threads, self.ops = idx, role, warp, threads, ops
        self.sp = warp % 4
        self.pc = 0
        self.done = False
        self.waiting_on: str | None = None
        self.wait_since = 0
        self.vc: dict = {}
        self.tc: dict = {}
        self.pend: dict = {}
        self.pub: dict = {}
        self.tc_seq = self.ld_seq = self.st_seq = self.gen_seq = self.fenced_gen = self.bulk_seq = 0
        self.tc_last = self.ld_last = self.st_last = 0
        self.tc_last_ev = -1
        self.regs_pending: dict[str, int] = {}
        self.last_ev = -1
        self.busy = self.waited = 0
        self.tma_seq: dict[str, int] = {}
        self.bulk_groups: list[tuple[int, int]] = []  # (read-done cycle, last bulk seq) per committed group
        self.bulk_open = (0, 0)
        self.wg_groups: list[int] = []
        self.wg_open = 0
        self.wg_count = 0
        self.wg_last = 0
        self.consumed: dict[str, int] = {}
        self.proc = None
        self.finished_at: int | None = None

    @property
    def name(self) -> str:
        return f"{self.role}[w{self.warp}]"


class _MBar:
    __slots__ = ("cur_tc", "cur_vc", "decl", "done_tc", "done_vc", "last_arrive_ev", "phase_ev", "st", "waiters")

    def __init__(self, name: str, decl):
        self.st = MBarrierState(name)
        self.waiters: list = []
        self.cur_vc: dict = {}
        self.cur_tc: dict = {}
        self.done_vc: dict = {}
        self.done_tc: dict = {}
        self.last_arrive_ev = -1
        self.phase_ev = -1
        self.decl = decl


class _NBar:
    __slots__ = ("counts", "last_ev", "st", "tc", "vc", "waiters")

    def __init__(self, id: int):
        self.st = NamedBarrierState(id)
        self.waiters: list = []
        self.vc: dict = {}
        self.tc: dict = {}
        self.counts: set[int] = set()
        self.last_ev = -1


class _Call:
    """A callback queued on the SimPy environment: the least an event needs for ``Environment.step``
    (its ``callbacks`` and ``_ok``), without a Timeout and a closure per call."""

    __slots__ = ("args", "callbacks", "fn")
    _ok = True

    def __init__(self, fn, args: tuple):
        self.fn = fn
        self.args = args
        self.callbacks = [_call]


class _Wake:
    """What a warp yields to sleep: queued as ``env.timeout`` queues its Timeout (same (time, priority, id) key),
    with the least ``Environment.step`` and ``Process._resume`` read (``callbacks``, ``_ok``, ``_value``)."""

    __slots__ = ("callbacks",)
    _ok = True
    _value = None

    def __init__(self):
        self.callbacks = []


def _call(c: _Call) -> None:
    c.fn(*c.args)


def _join(dst: dict, src: dict) -> None:
    if not dst:
        dst.update(src)
        return
    get = dst.get
    for k, v in src.items():
        if v > get(k, 0):
            dst[k] = v


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
        ``"sm100"`` or ``"sm90"``: which parameter table of the timing model to use.
    check:
        Run the hazard and deadlock checker (on by default).
    costs:
        A :class:`simtc.engine.costs.Costs` (default: the timing model's table for ``arch``).
    """

    def __init__(self, program, *, mode: str = "timing", arch: str = "sm100", check: bool = True, costs=None,
                 cta=None):
        from simtc.isa.program import Program

        if not isinstance(program, Program):
            raise EngineError(f"the engine runs a simtc.isa.Program, got {type(program).__name__}",
                              rule="Engine(program) takes a Program (registry.build(name), Program.from_json)")
        if mode not in MODES:
            raise EngineError(f"mode must be one of {MODES}, got {mode!r}", rule="engine modes")
        if costs is None:
            from simtc.engine.costs import Costs

            costs = Costs(arch)
        self.program = program
        self.mode = mode
        self.arch = arch
        self.check = check
        self.costs = costs
        self.env = simpy.Environment()
        self.trace: list[Event] = []
        self.hazards: list[Hazard] = []
        self._hazard_keys: set = set()
        self.deadlock: dict | None = None
        self.unit_busy = dict.fromkeys(UNITS, 0)
        self.unit_spans: dict[str, list[tuple[int, int, int]]] = {u: [] for u in UNITS[:4]}
        self._sp_free = [0, 0, 0, 0]
        self._pipe_free = 0
        self._pipe_last_ev = -1
        self._pipe_prev = None
        self._mma_costs: dict[tuple[int, int], tuple[int, int, int]] = {}
        self._tma_free = 0
        self._tma_last_ev = -1
        self._wg_ops: dict = {}
        self._tmem_free = 0
        self._port_free = 0
        self._tmem_cols: dict[int, int] = {}  # allocated column ranges: start -> ncols
        self._relinquished = False
        self._wall = 0.0
        self._started = False
        self._finished = False
        # run() to the end lets a warp advance the clock itself when no other event is due before its next
        # record (same event order, fewer SimPy events); step() and run(until=...) take every event singly
        self._fast = False
        self.cta = None
        self.semantics_errors: list[dict] = []
        if mode == "semantics":
            from simtc import semantics

            self._sem_execute = semantics.execute
            if cta is None:
                cta = semantics.Cta()
                cta.init_barriers(program)
            self.cta = cta
        self._mbars: dict[str, _MBar] = {}
        self._nbars: dict[int, _NBar] = {}
        for b in program.barriers:  # the barrier table is initialised by the setup code before the roles run
            if b.kind == "mbarrier":  # (as simtc.semantics.Cta.init_barriers does); mbarrier.init may redo it
                self._mbars[b.name] = _MBar(b.name, b)
                self._mbars[b.name].st.init(b.count)
        with gc_paused():
            self._compile()
        # happens-before state of memory
        self._tmem_w: dict = {}
        self._tmem_r: dict = {}
        self._smem_w: dict = {}
        self._smem_r: dict = {}

    # ------------------------------------------------------------------ compile
    def _compile(self) -> None:
        # TMEM rectangles and shared-memory range sets get small int ids: the checker's dicts hash those, not
        # the tuples (a swizzled descriptor read is one range set of over a hundred ranges)
        rects, ranges = _Keys(), _Keys()
        cache: dict[tuple, tuple] = {}
        # a record compiles once per warp it depends on (None: the same for every warp); its op is then shared
        # by each index where the same record object (by_id; the Program holds every record for the Engine's
        # life, so ids are stable) or an equal one (by_value) appears. An op with a lane-quadrant report is not
        # reused (its message names the first access).
        by_value: dict[tuple, _Op] = {}
        shared_by_id: dict[int, _Op] = {}  # by_id for the ops every warp shares: record id -> op
        warp_by_id: dict[int, dict[int, _Op]] = {}  # by_id for the per-warp ops: warp -> record id -> op

        def compiled(rec, w: int) -> _Op:  # after by_id missed
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

        self.agents: list[_Agent] = []
        for role in self.program.roles:
            nthreads = role.threads if role.threads is not None else 32 * len(role.warps)
            per_warp = max(1, min(32, nthreads // max(1, len(role.warps))))
            first: list[_Op] | None = None
            recs = role.records
            ids = list(map(id, recs))
            shared_get = shared_by_id.get
            for w in role.warps:
                mine = warp_by_id.setdefault(w, {}).get  # by_id lookups without a call in the common case
                if first is None:
                    ops = first = [shared_get(rid) or mine(rid) or compiled(rec, w)
                                   for rid, rec in zip(ids, recs, strict=True)]
                else:  # only TMEM ld/st and warp-offset records depend on the warp: share the other compiled ops
                    ops = [(mine(rid) or compiled(rec, w)) if op.per_warp else op
                           for rid, rec, op in zip(ids, recs, first, strict=True)]
                self.agents.append(_Agent(len(self.agents), role.name, w, per_warp, ops))
        self._alloc_seen = any(op.kind == K_ALLOC for op in by_value.values())  # (quadrant-report ops are ld/st)
        self._rect_of, self._ranges_of = rects.of, ranges.of
        self._rect_over = _Interned(rects, _Overlaps(rects.of, _rect_overlap))
        self._range_over = _RangeSetOverlaps(ranges.of)
        # the overlapping ids that can hold a writer / an in-flight reader (the same ids in the same order, less
        # those no record writes / reads asynchronously: their lookups always miss)
        ops = by_value.values()
        self._range_over_w = _Subset(self._range_over, {q for op in ops for q in op.smem_w})
        self._range_over_r = _Subset(self._range_over,
                                     {q for op in ops if op.kind in _SMEM_ASYNC_READERS for q in op.smem_r})

    def _compile_op(self, rec, warp: int, cache, rects, ranges) -> _Op:
        cls = type(rec).__name__
        kind = _KIND_OF_CLASS.get(cls)
        if kind is None:
            raise EngineError(f"the engine has no model for record {cls} ({getattr(rec, 'op', '?')})",
                              rule="records the engine models")
        op = _Op(kind, rec)
        op.name = rec.opcode if isinstance(getattr(rec, "opcode", None), str) else cls
        op.per_warp = _per_warp(kind, rec)
        key = (rec, warp % 4 if op.per_warp else 0)  # equal records share their footprint
        hit = cache.get(key)
        quad = None
        if hit is None:
            try:
                fp = rec.footprint(warp)
            except LaneQuadrantError as e:  # an absolute lane outside the warp's quadrant: flagged at issue
                quad = e.message
                fp = rec.footprint((rec.taddr >> 16) // 32)
            # shared memory: one key per record = the tuple of its byte ranges (overlaps between keys are
            # exact and memoised, so a descriptor read of many swizzled pieces costs one lookup)
            sr = (ranges[tuple((r.start, r.stop) for r in fp.smem_reads)],) if fp.smem_reads else ()
            sw = (ranges[tuple((r.start, r.stop) for r in fp.smem_writes)],) if fp.smem_writes else ()
            tr = tuple(rects[r.lane0, r.lane0 + r.lanes, r.col0, r.col0 + r.cols] for r in fp.tmem_reads)
            tw = tuple(rects[r.lane0, r.lane0 + r.lanes, r.col0, r.col0 + r.cols] for r in fp.tmem_writes)
            hit = (sr, sw, tr, tw, tuple(fp.regs_read), tuple(fp.regs_written), fp.proxy == "async",
                   self._costs_of(kind, rec, warp))
            cache[key] = hit
        op.smem_r, op.smem_w, op.tmem_r, op.tmem_w, op.regs_r, op.regs_w, op.proxy_async, (op.occ, op.lat) = hit
        if kind in (K_LD, K_ST):
            lo = 32 * (warp % 4)
            bad = [r for r in map(rects.of.__getitem__, op.tmem_r + op.tmem_w) if r[0] < lo or r[1] > lo + 32]
            if bad:
                op.quad_bad = quad or f"warp {warp} may touch lanes {lo}-{lo + 31}, touches {bad[0][0]}-{bad[0][1] - 1}"
        bar = getattr(rec, "bar", None)
        if bar is not None:
            op.bar = bar
            if bar not in self._mbars:
                self._mbars[bar] = _MBar(bar, None)
        if kind in (K_BAR_SYNC, K_BAR_ARRIVE):
            op.arg = (rec.id_for(warp), rec.threads)
        elif kind in (K_BULK_WAIT, K_WGMMA_WAIT):
            op.arg = rec.n
        return op

    def _costs_of(self, kind: int, rec, warp: int) -> tuple[int, int]:
        """``(occupancy, latency)`` of a record on its unit (MMAs: computed at issue, as their occupancy
        depends on the previous MMA's collector state)."""
        c = self.costs
        if kind == K_CP:
            return c.cp(rec)
        if kind in (K_TMA_LOAD, K_TMA_STORE):
            return c.tma(rec)
        if kind == K_LD:
            return c.tmem_ld(rec)
        if kind == K_ST:
            return c.tmem_st(rec)
        if kind == K_CUDA:
            return c.cuda_core(rec, warp), 0
        if kind in (K_LD_SHARED, K_ST_SHARED):
            return c.shared_access(rec), c.shared_latency(rec)
        return 0, 0

    def _execute(self, rec, cta, *, warp: int, threads: int) -> None:
        """Semantics mode: apply a record to the Cta. A record the semantics layer refuses (the
        data consequence of a hazard, or a missing input) is recorded in ``semantics_errors`` and
        the run goes on with the same event order."""
        try:
            self._sem_execute(rec, cta, warp=warp, threads=threads)
        except SimtcError as e:
            self.semantics_errors.append({"cycle": int(self.env.now), "warp": warp, "record": rec.ptx(),
                                          "error": str(e)})

    # ------------------------------------------------------------------ trace and hazards
    def _ev(self, role: str, warp: int, index: int, kind: str, detail: str, dep: int) -> int:
        tr = self.trace
        tr.append(_new_event(Event, (self.env._now, role, warp, index, kind, detail, dep)))
        return len(tr) - 1

    def _hazard(self, rule: str, first, second, message: str) -> None:
        key = (rule, first, second)
        if key in self._hazard_keys:
            return
        self._hazard_keys.add(key)
        self.hazards.append(Hazard(rule, int(self.env._now), first, second, message))

    # knowledge check: can agent `ag` rely on domain `key` having reached `seq`?
    def _known(self, ag: _Agent, key, seq: int, tcgen05: bool, rule: str, first, second, what: str) -> None:
        if tcgen05:
            if ag.tc.get(key, 0) >= seq:
                return
            if ag.vc.get(key, 0) >= seq:
                if ag.pend.get(key, 0) >= seq:
                    self._hazard("missing-after-thread-sync-fence", first, second,
                                 f"{ag.name} learned through a thread sync that {what} completed, but issues this "
                                 "tcgen05 operation without tcgen05.fence::after_thread_sync after the sync")
                else:
                    self._hazard("missing-before-thread-sync-fence", first, second,
                                 f"{what} was published to {ag.name} by a thread sync without "
                                 "tcgen05.fence::before_thread_sync before the arrive")
                return
        elif ag.vc.get(key, 0) >= seq:
            return
        self._hazard(rule, first, second, f"{ag.name} cannot know that {what} has completed")

    def _rec(self, owner: int, index: int) -> tuple[str, int, int]:
        a = self.agents[owner]
        return (a.role, a.warp, index)

    def _tmem_read(self, ag: _Agent, i: int, rects, unit_tc: bool) -> None:
        w_all = self._tmem_w
        over = self._rect_over
        me = (ag.role, ag.warp, i)
        for q in rects:
            for r in over[q]:
                w = w_all.get(r)
                if w is None:
                    continue
                key, seq, owner, idx = w
                tag = key[0]
                if owner == ag.idx and ((tag == TC and unit_tc) or (tag == ST and not unit_tc)):
                    continue  # same thread's in-order tensor pipe / same warp's TMEM path
                if ag.tc.get(key, 0) >= seq:
                    continue  # known complete (what _known checks first)
                if tag == ST:
                    rule = "tmem-read-before-wait-st"
                    what = f"the tcgen05.st {self._fmt(owner, idx)}"
                else:
                    rule = "tmem-read-before-commit"
                    what = f"the MMA/cp {self._fmt(owner, idx)} writing this TMEM"
                self._known(ag, key, seq, True, rule, self._rec(owner, idx), me, what)

    def _tmem_write(self, ag: _Agent, i: int, rects, key, seq, unit_tc: bool) -> None:
        me = (ag.role, ag.warp, i)
        w_all, r_all = self._tmem_w, self._tmem_r
        over = self._rect_over
        tc = ag.tc
        for q in rects:
            for r in over[q]:
                readers = r_all.get(r)
                if readers:
                    for rkey, (rseq, owner, idx) in readers.items():
                        if tc.get(rkey, 0) >= rseq:
                            continue
                        if owner == ag.idx and rkey[0] == TC and unit_tc:
                            continue  # the same thread's in-order tensor pipe
                        self._known(ag, rkey, rseq, True, "tmem-overwrite-in-flight", self._rec(owner, idx), me,
                                    f"the TMEM read {self._fmt(owner, idx)}")
                w = w_all.get(r)
                if w is not None:
                    wkey, wseq, owner, idx = w
                    if owner == ag.idx and ((wkey[0] == TC and unit_tc) or (wkey[0] == ST and not unit_tc)):
                        pass
                    elif tc.get(wkey, 0) < wseq:
                        self._known(ag, wkey, wseq, True, "tmem-overwrite-in-flight", self._rec(owner, idx), me,
                                    f"the TMEM write {self._fmt(owner, idx)}")
            w_all[q] = (key, seq, ag.idx, i)

    def _tmem_add_reader(self, ag: _Agent, i: int, rects, key, seq) -> None:
        r_all = self._tmem_r
        for q in rects:
            d = r_all.get(q)
            if d is None:
                d = r_all[q] = {}
            d[key] = (seq, ag.idx, i)

    def _smem_read(self, ag: _Agent, i: int, ranges, async_proxy: bool) -> None:
        w_all = self._smem_w
        if not w_all:  # nothing written to shared memory yet
            return
        me = (ag.role, ag.warp, i)
        get, vc_get, over = w_all.get, ag.vc.get, self._range_over_w
        for q in ranges:
            for r in over[q]:
                w = get(r)
                if w is None:
                    continue
                key, seq, owner, idx = w
                if key[0] == GEN:
                    if async_proxy and self.agents[owner].fenced_gen < seq:
                        self._hazard("missing-proxy-fence", self._rec(owner, idx), me,
                                     f"st.shared {self._fmt(owner, idx)} is read by the async proxy without "
                                     "fence.proxy.async in the writing warp")
                    if owner == ag.idx:
                        continue
                if vc_get(key, 0) < seq:
                    what = f"the {'st.shared' if key[0] == GEN else 'TMA load'} {self._fmt(owner, idx)}"
                    self._hazard("smem-read-before-complete", self._rec(owner, idx), me,
                                 f"{ag.name} cannot know that {what} has completed")

    def _smem_write(self, ag: _Agent, i: int, ranges, key, seq) -> None:
        me = (ag.role, ag.warp, i)
        w_all, get, vc_get, over = self._smem_w, self._smem_r.get, ag.vc.get, self._range_over_r
        for q in ranges:
            for r in over[q]:
                readers = get(r)
                if readers:
                    for rkey, (rseq, owner, idx) in readers.items():
                        if vc_get(rkey, 0) < rseq:
                            self._hazard("smem-overwrite-in-flight", self._rec(owner, idx), me,
                                         f"{ag.name} cannot know that the async read {self._fmt(owner, idx)} of "
                                         "this shared memory has completed")
            w_all[q] = (key, seq, ag.idx, i)

    def _smem_add_reader(self, ag: _Agent, i: int, ranges, key, seq) -> None:
        r_all = self._smem_r
        for q in ranges:
            d = r_all.get(q)
            if d is None:
                d = r_all[q] = {}
            d[key] = (seq, ag.idx, i)

    def _fmt(self, owner: int, idx: int) -> str:
        a = self.agents[owner]
        return f"{a.role}[w{a.warp}]#{idx} ({a.ops[idx].name})"

    # ------------------------------------------------------------------ barriers
    def _mbar(self, name: str) -> _MBar:
        return self._mbars[name]

    def _mbar_arrive(self, mb: _MBar, count: int, vc: dict, tc: dict, who: str, dep: int, tx: int = 0,
                     complete_tx: int = 0, rec=None) -> None:
        st = mb.st
        if not st.initialized and self.check:
            self._hazard("mbarrier-uninitialized", None, rec, f"arrival on {st.name} before mbarrier.init")
        if vc:
            _join(mb.cur_vc, vc)
        if tc:
            _join(mb.cur_tc, tc)
        if tx:
            st.expect_tx(tx)
        n_err = len(st.errors)
        done = st.complete_tx(complete_tx) if complete_tx else st.arrive(count)
        ev = self._ev(*(rec or ("", -1, -1)), "arrive", f"{st.name} {who}", dep)
        mb.last_arrive_ev = ev
        if len(st.errors) > n_err and self.check:
            for rule, msg in st.errors[n_err:]:
                self._hazard(rule, None, rec, msg)
        if done:
            self._mbar_phase(mb, ev)

    def _mbar_phase(self, mb: _MBar, dep: int) -> None:
        _join(mb.done_vc, mb.cur_vc)
        _join(mb.done_tc, mb.cur_tc)
        mb.cur_vc = {}
        mb.cur_tc = {}
        mb.phase_ev = self._ev("", -1, -1, "phase", f"{mb.st.name} phase {mb.st.phase - 1} complete", dep)
        if mb.waiters:
            keep = []
            for parity, evt, ag in mb.waiters:
                if mb.st.passes(parity):
                    evt.succeed(mb.phase_ev)
                else:
                    keep.append((parity, evt, ag))
            mb.waiters = keep

    # ------------------------------------------------------------------ processes
    def _start(self) -> None:
        if self._started:
            return
        self._started = True
        for ag in self.agents:
            ag.proc = self.env.process(self._run_agent(ag))

    def _issue_slot(self, ag: _Agent, cycles: int) -> int:
        """Reserve the warp's sub-partition issue slot; returns the stall before issue."""
        now = self.env._now
        free = self._sp_free[ag.sp]
        t0 = free if free > now else now
        self._sp_free[ag.sp] = t0 + cycles
        self.unit_busy["issue"] += cycles
        return t0 - now

    def _run_agent(self, ag: _Agent):
        env = self.env
        costs = self.costs
        check = self.check
        sem = self.mode == "semantics"
        sp_free, sp, busy, trace = self._sp_free, ag.sp, self.unit_busy, self.trace
        mma_costs = self._mma_costs
        q, eid, heappush = env._queue, env._eid, heapq.heappush  # _advance and _sleep inlined (the hot path)
        role, warp = ag.role, ag.warp
        spans = self.unit_spans
        port_spans, tma_spans, pipe_spans, tmem_spans = (spans["smem_port"], spans["tma"], spans["tensor_pipe"],
                                                         spans["tmem_path"])
        for i, op in enumerate(ag.ops):
            ag.pc = i
            kind = op.kind
            cycles = op.occ if kind == K_CUDA else 1
            now = env._now
            free = sp_free[sp]  # the sub-partition's issue slot (inlined _issue_slot: the hot path)
            if free > now:
                sp_free[sp] = free + cycles
                busy["issue"] += cycles
                if self._fast and (not q or q[0][0] > free):
                    env._now = free
                else:
                    w = _Wake()
                    heappush(q, (free, NORMAL, next(eid), w))
                    yield w
                now = env._now
            else:
                sp_free[sp] = now + cycles
                busy["issue"] += cycles
            me = (role, warp, i)
            trace.append(_new_event(Event, (now, role, warp, i, "issue", op.name, ag.last_ev)))
            ev = ag.last_ev = len(trace) - 1
            if check and op.regs_r and ag.regs_pending:
                for reg in op.regs_r:
                    s = ag.regs_pending.get(reg)
                    if s is not None and ag.vc.get((LD, ag.idx), 0) < s:
                        self._hazard("ld-regs-before-wait", me, me,
                                     f"register {reg} written by a tcgen05.ld not yet waited (wait::ld)")
            if check and op.quad_bad:
                self._hazard("lane-quadrant", None, me, op.quad_bad)
            wait = None  # a generator to run for blocking records
            delay = cycles
            if kind in (K_LD_SHARED, K_ST_SHARED):
                start = now if now > self._port_free else self._port_free
                self._port_free = start + op.occ
                busy["smem_port"] += op.occ
                port_spans.append((start, start + op.occ, ag.idx))
                if kind == K_ST_SHARED:
                    ag.gen_seq += 1
                    ag.vc[(GEN, ag.idx)] = ag.gen_seq
                    if check:
                        self._smem_write(ag, i, op.smem_w, (GEN, ag.idx), ag.gen_seq)
                elif check:
                    self._smem_read(ag, i, op.smem_r, False)
                end = start + op.occ
                if end > now + 1:
                    delay = end - now
            elif kind == K_TMA_LOAD:
                mb = self._mbars[op.bar]
                start = now if now > self._tma_free else self._tma_free
                self._tma_free = start + op.occ
                busy["tma"] += op.occ
                tma_spans.append((start, start + op.occ, ag.idx))
                done = start + op.lat
                s = ag.tma_seq.get(op.bar, 0) + 1
                ag.tma_seq[op.bar] = s
                key = (TMA, ag.idx, op.bar)
                if check:
                    self._smem_write(ag, i, op.smem_w, key, s)
                dep = ev if start == now else self._tma_last_ev
                self._at(done, self._tma_done, ag, op, i, mb, key, s, dep)
            elif kind == K_TRY_WAIT:
                wait = self._try_wait(ag, i, self._mbars[op.bar], op.rec.parity)
            elif kind in (K_MMA, K_CP, K_WGMMA):
                shared = None
                if kind == K_CP:
                    pre, occ, body = costs.pipe_issue, op.occ, op.lat
                elif kind == K_MMA:  # the cost depends on the previous MMA (collector state)
                    ckey = (id(op.rec), id(self._pipe_prev))  # records live as long as the Program
                    c = mma_costs.get(ckey)
                    if c is None:
                        c = mma_costs[ckey] = costs.mma(op.rec, self._pipe_prev)
                    pre, occ, body = c
                    self._pipe_prev = op.rec
                else:  # warpgroup-collective: the first warp of the group to issue it enqueues it
                    ag.wg_count += 1
                    gkey = (ag.warp // 4, ag.wg_count)
                    entry = self._wg_ops.get(gkey)
                    if entry is not None:
                        shared = (entry[0], entry[1])
                        entry[2] -= 1
                        if entry[2] <= 0:
                            del self._wg_ops[gkey]
                    else:
                        pre, occ, body = costs.wgmma(op.rec, self._pipe_prev)
                        self._pipe_prev = op.rec
                        members = sum(1 for b in self.agents if b.warp // 4 == ag.warp // 4 and b.role == ag.role)
                if shared is not None:
                    done, dep = shared
                else:
                    start = now + pre if now + pre > self._pipe_free else self._pipe_free
                    dep = ev if start <= now + pre else self._pipe_last_ev
                    self._pipe_free = start + occ
                    busy["tensor_pipe"] += occ
                    pipe_spans.append((start, start + occ, ag.idx))
                    done = start + body
                    if kind == K_WGMMA and members > 1:
                        self._wg_ops[gkey] = [done, dep, members - 1]
                ag.tc_seq += 1
                if done > ag.tc_last:
                    ag.tc_last = done
                if kind == K_WGMMA:
                    ag.wg_open = max(ag.wg_open, done)
                if check:
                    key = (TC, ag.idx)
                    if op.smem_r:
                        self._smem_read(ag, i, op.smem_r, True)
                        self._smem_add_reader(ag, i, op.smem_r, key, ag.tc_seq)
                    if op.tmem_r:
                        self._tmem_read(ag, i, op.tmem_r, True)
                        self._tmem_add_reader(ag, i, op.tmem_r, key, ag.tc_seq)
                    if op.tmem_w:
                        self._tmem_write(ag, i, op.tmem_w, key, ag.tc_seq, True)
                    if self._alloc_seen:
                        self._check_tmem_alloc(op, me)
                if shared is None:
                    self._at(done, self._complete, ag, op, i, dep, "tensor_pipe")
            elif kind in (K_ARRIVE, K_ARRIVE_TX):
                mb = self._mbars[op.bar]
                ag.vc[(GEN, ag.idx)] = ag.gen_seq
                if kind == K_ARRIVE:
                    n = op.rec.count * (1 if op.rec.elected else ag.threads)
                    self._at(now + costs.arrive, self._warp_arrive, mb, n, dict(ag.vc), dict(ag.pub), me, ev, 0,
                             op, ag)
                else:
                    self._at(now + costs.arrive, self._warp_arrive, mb, 1, dict(ag.vc), dict(ag.pub), me, ev,
                             op.rec.tx_bytes, op, ag)
            elif kind == K_CUDA:
                if check and (op.smem_r or op.smem_w or op.tmem_r or op.tmem_w):
                    if op.smem_r:
                        self._smem_read(ag, i, op.smem_r, False)
                    if op.smem_w:
                        ag.gen_seq += 1
                        ag.vc[(GEN, ag.idx)] = ag.gen_seq
                        self._smem_write(ag, i, op.smem_w, (GEN, ag.idx), ag.gen_seq)
                if check and op.regs_w:
                    for reg in op.regs_w:
                        ag.regs_pending.pop(reg, None)
            elif kind in (K_BAR_SYNC, K_BAR_ARRIVE):
                wait = self._bar(ag, op, i, kind == K_BAR_SYNC, ev)
            elif kind in (K_LD, K_ST):
                start = now if now > self._tmem_free else self._tmem_free
                self._tmem_free = start + op.occ
                busy["tmem_path"] += op.occ
                tmem_spans.append((start, start + op.occ, ag.idx))
                done = start + op.lat
                if kind == K_LD:
                    ag.ld_seq += 1
                    ag.ld_last = max(ag.ld_last, done)
                    if check:
                        self._tmem_read(ag, i, op.tmem_r, False)
                        self._tmem_add_reader(ag, i, op.tmem_r, (LD, ag.idx), ag.ld_seq)
                        for reg in op.regs_w:
                            ag.regs_pending[reg] = ag.ld_seq
                else:
                    ag.st_seq += 1
                    ag.st_last = max(ag.st_last, done)
                    if check:
                        self._tmem_write(ag, i, op.tmem_w, (ST, ag.idx), ag.st_seq, False)
                if check:
                    self._check_tmem_alloc(op, me)
                self._schedule_complete(ag, op, i, done, ev, "tmem_path")
            elif kind == K_PROXY_FENCE:
                ag.fenced_gen = ag.gen_seq
            elif kind == K_FENCE_AFTER:
                _join(ag.tc, ag.pend)
                ag.pend = {}
            elif kind in (K_WAIT_LD, K_WAIT_ST):
                last = ag.ld_last if kind == K_WAIT_LD else ag.st_last
                if last > now + 1:
                    wait = self._wait_until(ag, i, last, "wait::ld" if kind == K_WAIT_LD else "wait::st")
                key = (LD, ag.idx) if kind == K_WAIT_LD else (ST, ag.idx)
                seq = ag.ld_seq if kind == K_WAIT_LD else ag.st_seq
                ag.vc[key] = ag.tc[key] = seq
                if kind == K_WAIT_LD:
                    ag.regs_pending.clear()
            elif kind == K_FENCE_BEFORE:
                ag.pub = dict(ag.tc)
            elif kind == K_COMMIT:
                mb = self._mbars[op.bar]
                t_arr = max(now, ag.tc_last) + costs.commit
                know = {(TC, ag.idx): ag.tc_seq}
                tc = dict(ag.tc)
                tc.update(know)
                vc = dict(ag.vc)
                vc.update(know)
                dep = ag.tc_last_ev if ag.tc_last > now else ev
                self._at(t_arr, self._commit_arrive, mb, vc, tc, me, dep, op, ag)
            elif kind == K_TMA_STORE:
                start = now if now > self._tma_free else self._tma_free
                self._tma_free = start + op.occ
                busy["tma"] += op.occ
                tma_spans.append((start, start + op.occ, ag.idx))
                ag.bulk_seq += 1
                read_done = start + op.occ
                ag.bulk_open = (max(ag.bulk_open[0], read_done), ag.bulk_seq)
                if check:
                    self._smem_read(ag, i, op.smem_r, True)
                    self._smem_add_reader(ag, i, op.smem_r, (BULK, ag.idx), ag.bulk_seq)
                self._schedule_complete(ag, op, i, start + op.lat, ev, None)
            elif kind == K_BULK_COMMIT:
                ag.bulk_groups.append(ag.bulk_open)
                ag.bulk_open = (0, ag.bulk_seq)
            elif kind == K_BULK_WAIT:
                n = op.arg
                groups = ag.bulk_groups[:-n] if n else ag.bulk_groups
                if groups:
                    t = max(g[0] for g in groups)
                    seq = max(g[1] for g in groups)
                    ag.bulk_groups = ag.bulk_groups[len(groups):]
                    if t > now + 1:
                        wait = self._wait_until(ag, i, t, "wait_group.read")
                    ag.vc[(BULK, ag.idx)] = max(ag.vc.get((BULK, ag.idx), 0), seq)
            elif kind == K_INIT:
                mb = self._mbars[op.bar]
                if mb.st.initialized and mb.st.phase == 0 and mb.st.pending != mb.st.expected and check:
                    self._hazard("mbarrier-over-arrival", None, me, f"{op.bar} re-initialized while in use")
                mb.st.init(op.rec.count)
            elif kind in (K_ALLOC, K_DEALLOC, K_RELINQUISH):
                self._alloc(ag, op, kind, me)
            elif kind == K_WGMMA_COMMIT:
                ag.wg_groups.append(ag.wg_open)
                ag.wg_open = 0
            elif kind == K_WGMMA_WAIT:
                n = op.arg
                groups = ag.wg_groups[:-n] if n else ag.wg_groups
                if groups:
                    t = max(groups)
                    ag.wg_groups = ag.wg_groups[len(groups):]
                    if t > now + 1:
                        wait = self._wait_until(ag, i, t, "wgmma.wait_group")
            if sem and not op.rec.is_async and kind not in _SEM_AT_ARRIVAL:
                self._execute(op.rec, self.cta, warp=ag.warp, threads=ag.threads)
            if wait is not None:
                yield from wait
            else:
                ag.busy += delay
                t = now + delay
                if self._fast and (not q or q[0][0] > t):
                    env._now = t
                else:
                    w = _Wake()
                    heappush(q, (t, NORMAL, next(eid), w))
                    yield w
        ag.done = True
        ag.finished_at = env._now
        ag.pc = len(ag.ops)
        ag.last_ev = self._ev(ag.role, ag.warp, -1, "done", "", ag.last_ev)

    def _advance(self, t: int) -> bool:
        """In ``run()`` to the end: move the clock to cycle ``t`` if no other event is due by then (the
        same event order as a timeout to ``t``, without the event) and return True; else False."""
        q = self.env._queue
        if self._fast and (not q or q[0][0] > t):
            self.env._now = t
            return True
        return False

    # scheduled callbacks -------------------------------------------------------------------------
    def _at(self, t: int, fn, *args) -> None:
        """Call ``fn(*args)`` at cycle ``t`` (or now): queued exactly as ``env.timeout`` would queue it."""
        env = self.env
        now = env._now
        heapq.heappush(env._queue, (t if t > now else now, NORMAL, next(env._eid), _Call(fn, args)))

    def _sleep(self, delay: int) -> _Wake:
        """An event ``delay`` cycles from now (``env.timeout(delay)`` without the Timeout)."""
        env = self.env
        w = _Wake()
        heapq.heappush(env._queue, (env._now + delay, NORMAL, next(env._eid), w))
        return w

    def _schedule_complete(self, ag: _Agent, op: _Op, i: int, done: int, dep: int, unit: str | None) -> None:
        self._at(done, self._complete, ag, op, i, dep, unit)

    def _complete(self, ag: _Agent, op: _Op, i: int, dep: int, unit: str | None) -> None:
        ev = self._ev(ag.role, ag.warp, i, "complete", op.name, dep)
        if unit == "tensor_pipe":
            self._pipe_last_ev = ev
            if self.env._now >= ag.tc_last:
                ag.tc_last_ev = ev
        if self.mode == "semantics":
            self._execute(op.rec, self.cta, warp=ag.warp, threads=ag.threads)

    def _commit_arrive(self, mb: _MBar, vc, tc, rec, dep, op, ag) -> None:
        if self.mode == "semantics":
            self._execute(op.rec, self.cta, warp=ag.warp, threads=ag.threads)
        self._mbar_arrive(mb, 1, vc, tc, "commit", dep, rec=rec)

    def _warp_arrive(self, mb: _MBar, n, vc, tc, rec, dep, tx, op, ag) -> None:
        if self.mode == "semantics":
            self._execute(op.rec, self.cta, warp=ag.warp, threads=ag.threads)
        self._mbar_arrive(mb, n, vc, tc, "arrive" if not tx else f"arrive.expect_tx {tx} B", dep, tx=tx, rec=rec)

    def _tma_done(self, ag: _Agent, op: _Op, i: int, mb: _MBar, key, seq, dep) -> None:
        ev = self._ev(ag.role, ag.warp, i, "complete", op.name, dep)
        self._tma_last_ev = ev
        if self.mode == "semantics":
            self._execute(op.rec, self.cta, warp=ag.warp, threads=ag.threads)
        know = {key: seq}
        self._mbar_arrive(mb, 0, know, know, "complete_tx", ev, complete_tx=op.rec.nbytes,
                          rec=(ag.role, ag.warp, i))

    # blocking helpers ------------------------------------------------------------------------------
    def _block(self, ag: _Agent, i: int, what: str):
        ag.waiting_on = what
        ag.wait_since = self.env._now
        ag.last_ev = self._ev(ag.role, ag.warp, i, "wait", what, ag.last_ev)

    def _unblock(self, ag: _Agent, i: int, dep: int, extra: int):
        ag.waited += self.env._now - ag.wait_since
        ag.waiting_on = None
        ag.last_ev = self._ev(ag.role, ag.warp, i, "resume", "", dep)

    def _wait_until(self, ag: _Agent, i: int, t: int, what: str):
        self._block(ag, i, what)
        if not self._advance(t):
            yield self._sleep(t - self.env._now)
        self._unblock(ag, i, self._last_complete_ev(ag, what), 0)

    def _last_complete_ev(self, ag: _Agent, what: str) -> int:
        # the most recent completion event of this warp's TMEM path / tensor pipe (for the critical path)
        tr = self.trace
        for i in range(len(tr) - 1, max(-1, len(tr) - 64), -1):
            e = tr[i]
            if e.kind == "complete" and e.role == ag.role and e.warp == ag.warp:
                return i
        return ag.last_ev

    def _try_wait(self, ag: _Agent, i: int, mb: _MBar, parity: int):
        env = self.env
        st = mb.st
        me = (ag.role, ag.warp, i)
        if not st.initialized and self.check:
            self._hazard("mbarrier-uninitialized", None, me, f"try_wait on {st.name} before mbarrier.init")
        dep = ag.last_ev
        if not st.passes(parity):
            self._block(ag, i, f"{st.name} parity {parity} (phase {st.phase})")
            evt = env.event()
            mb.waiters.append((parity, evt, ag))
            dep = yield evt
            self._unblock(ag, i, dep, 0)
        # the phase observed: the last completed one (phase - 1; -1 = the fresh barrier's phantom phase)
        observed = st.phase - 1
        if self.check:
            prev = ag.consumed.get(st.name)
            if prev is not None and prev == observed and observed >= 0:
                self._hazard("mbarrier-wrong-parity", me, me,
                             f"try_wait.parity {parity} on {st.name} passed on phase {observed}, which this warp "
                             "already consumed (parity not flipped)")
            ag.consumed[st.name] = observed
        if observed >= 0:
            _join(ag.vc, mb.done_vc)
            _join(ag.pend, mb.done_tc)
        ag.busy += self.costs.wait
        if not self._advance(env._now + self.costs.wait):
            yield self._sleep(self.costs.wait)

    def _bar(self, ag: _Agent, op: _Op, i: int, sync: bool, ev: int):
        bid, count = op.arg
        nb = self._nbars.get(bid)
        if nb is None:
            nb = self._nbars[bid] = _NBar(bid)
        me = (ag.role, ag.warp, i)
        nb.counts.add(count)
        if len(nb.counts) > 1 and self.check:
            self._hazard("named-barrier-count-mismatch", None, me,
                         f"barrier {bid} used with thread counts {sorted(nb.counts)}")
        ag.vc[(GEN, ag.idx)] = ag.gen_seq
        _join(nb.vc, ag.vc)
        _join(nb.tc, ag.pub)
        evt = self.env.event() if sync else None
        if sync:
            nb.waiters.append((evt, ag))
        released = nb.st.arrive(ag.threads, count)
        nb.last_ev = self._ev(ag.role, ag.warp, i, "arrive", f"bar {bid} ({nb.st.arrived or count}/{count})", ev)
        if released:
            rel = self._ev("", -1, -1, "phase", f"bar {bid} released", nb.last_ev)
            vc, tc = nb.vc, nb.tc
            nb.vc, nb.tc = {}, {}
            waiters, nb.waiters = nb.waiters, []
            for w_evt, w_ag in waiters:
                _join(w_ag.vc, vc)
                _join(w_ag.pend, tc)
                w_evt.succeed(rel)
        if not sync:
            ag.busy += 1
            if not self._advance(self.env._now + 1):
                yield self._sleep(1)
            return
        if not evt.triggered:
            self._block(ag, i, f"bar {bid} ({count} threads)")
            dep = yield evt
            self._unblock(ag, i, dep, 0)
        else:
            yield evt
        ag.busy += self.costs.named_barrier
        if not self._advance(self.env._now + self.costs.named_barrier):
            yield self._sleep(self.costs.named_barrier)

    # TMEM allocation --------------------------------------------------------------------------------
    def _alloc(self, ag: _Agent, op: _Op, kind: int, me) -> None:
        if kind == K_RELINQUISH:
            self._relinquished = True
            return
        rec = op.rec
        if kind == K_ALLOC:
            if self._relinquished and self.check:
                self._hazard("tmem-alloc-after-relinquish", None, me, "tcgen05.alloc after relinquish_alloc_permit")
            n = rec.ncols
            used = sorted(self._tmem_cols.items())
            start, pos = None, 0
            for s, c in [*used, (TMEM_COLUMNS, 0)]:
                base = -(-pos // n) * n  # the allocator's column, aligned to ncols [inferred, tcgen05.md §14.7]
                if base + n <= s:
                    start = base
                    break
                pos = s + c
            if start is None:
                if self.check:
                    self._hazard("tmem-alloc-over-512", None, me,
                                 f"tcgen05.alloc of {n} columns with {sum(self._tmem_cols.values())} of "
                                 f"{TMEM_COLUMNS} allocated (on hardware the warp would block)")
                return
            self._tmem_cols[start] = n
        else:
            col = rec.taddr & 0xFFFF
            if self._tmem_cols.get(col) != rec.ncols:
                if self.check:
                    self._hazard("tmem-dealloc-unallocated", None, me,
                                 f"tcgen05.dealloc of {rec.ncols} columns at column {col}; live allocations: "
                                 f"{self._alloc_text()}")
                return
            del self._tmem_cols[col]

    def _alloc_text(self) -> str:
        return ", ".join(f"{s}+{c}" for s, c in sorted(self._tmem_cols.items())) or "none"

    def _check_tmem_alloc(self, op: _Op, me) -> None:
        if not self._alloc_seen:  # the allocation rules apply to Programs that allocate at all
            return
        for r in map(self._rect_of.__getitem__, op.tmem_r + op.tmem_w):
            if not any(s <= r[2] and r[3] <= s + c for s, c in self._tmem_cols.items()):
                self._hazard("tmem-unallocated-access", None, me,
                             f"columns {r[2]}-{r[3] - 1} outside the live allocations ({self._alloc_text()})")
                return

    # ------------------------------------------------------------------ public API
    def run(self, until: int | None = None) -> Engine:
        """Run to the end (or until cycle ``until``); then check for a deadlock."""
        self._start()
        t0 = _time.perf_counter()
        env = self.env
        step = env.step
        with gc_paused():
            try:
                if until is None:
                    self._fast = True
                    q, pop = env._queue, heapq.heappop
                    while q:  # Environment.step inlined (the same order; a failed event crashes the run as there)
                        env._now, _, _, event = pop(q)
                        callbacks, event.callbacks = event.callbacks, None
                        for callback in callbacks:
                            callback(event)
                        if not event._ok and not hasattr(event, "_defused"):
                            exc = type(event._value)(*event._value.args)
                            exc.__cause__ = event._value
                            raise exc
                else:
                    while env._queue and env.peek() < until:
                        step()
            except simpy.core.EmptySchedule:  # pragma: no cover - guarded above
                pass
            finally:
                self._fast = False
        self._wall += _time.perf_counter() - t0
        if not env._queue:
            self._finish()
        return self

    def step(self) -> Event | None:
        """Process one SimPy event; returns the last trace event it produced (or None)."""
        self._start()
        n = len(self.trace)
        if not self.env._queue:
            self._finish()
            return None
        t0 = _time.perf_counter()
        self.env.step()
        self._wall += _time.perf_counter() - t0
        if not self.env._queue:
            self._finish()
        return self.trace[-1] if len(self.trace) > n else None

    def peek(self) -> float:
        """Cycle of the next event (``inf`` when nothing is scheduled)."""
        self._start()
        return self.env.peek()

    @property
    def now(self) -> int:
        return int(self.env.now)

    @property
    def finished(self) -> bool:
        return self._finished

    def _finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        live = [a for a in self.agents if not a.done]
        if live:
            self._report_deadlock(live)
        if self.check and self._alloc_seen and self._tmem_cols and not live:
            self._hazard("tmem-not-deallocated", None, None, f"still allocated at the end: {self._alloc_text()}")

    def _report_deadlock(self, live: list[_Agent]) -> None:
        waits = []
        for a in live:
            waits.append({"role": a.role, "warp": a.warp, "index": a.pc, "record": a.ops[a.pc].name,
                          "waits_on": a.waiting_on, "since": a.wait_since})
        suppliers: dict[str, list[dict]] = {}
        for a in live:
            op = a.ops[a.pc]
            if op.kind == K_TRY_WAIT:
                mb = self._mbars[op.bar]
                who = []
                for b in self.agents:
                    for j, o in enumerate(b.ops):
                        if o.bar == op.bar and o.kind in (K_ARRIVE, K_ARRIVE_TX, K_COMMIT, K_TMA_LOAD):
                            state = "finished" if b.done else (f"waiting on {b.waiting_on}" if b.waiting_on
                                                                else "running")
                            who.append({"role": b.role, "warp": b.warp, "index": j, "record": o.name,
                                        "state": state, "issued": b.done or b.pc > j})
                suppliers[op.bar] = who
                waits[live.index(a)]["barrier"] = mb.st.state()
        first = live[0]
        self.deadlock = {"cycle": int(self.env.now), "waiting": waits, "would_arrive": suppliers}
        who = "; ".join(f"{w['role']}[w{w['warp']}]#{w['index']} waits on {w['waits_on']}" for w in waits)
        self._hazard("deadlock", None, (first.role, first.warp, first.pc), who)

    # ------------------------------------------------------------------ results
    @property
    def cycles(self) -> int:
        return int(self.env.now)

    def per_role(self) -> dict[str, dict[str, int]]:
        """Busy and waiting cycles per role (mean over the role's warps, rounded)."""
        out: dict[str, list] = {}
        for a in self.agents:
            out.setdefault(a.role, []).append(a)
        res = {}
        for role, ags in out.items():
            n = len(ags)
            res[role] = {"busy_cycles": round(sum(a.busy for a in ags) / n),
                         "waiting_cycles": round(sum(a.waited for a in ags) / n)}
        return res

    def units(self) -> dict[str, dict[str, int]]:
        return {u: {"busy_cycles": int(v)} for u, v in self.unit_busy.items()}

    def critical_path(self) -> list[int]:
        """Trace indices of the critical path, first to last (follow ``dep`` from the last event)."""
        tr = self.trace
        if not tr:
            return []
        cycles = [e[0] for e in tr]
        i = len(cycles) - 1 - cycles[::-1].index(max(cycles))  # the last event of the latest cycle
        path = []
        seen = set()
        while i >= 0 and i not in seen:
            seen.add(i)
            path.append(i)
            i = tr[i].dep
        return path[::-1]

    def tmem_columns(self, first_warp_only: bool = False) -> set[int]:
        """The TMEM columns the Program's records touch (read or write), from their compiled footprints: of every
        warp, or of each role's first warp. A record whose lanes lie outside its warp's quadrant raises the
        footprint's :class:`simtc.errors.LaneQuadrantError` (as ``rec.footprint(warp)`` does)."""
        cols: set[int] = set()
        seen: set[int] = set()
        roles: set[str] = set()
        rect_of = self._rect_of
        for a in self.agents:
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
        """The state now: cycle, each warp's pc and wait, barrier states, in-flight work, TMEM/smem owners."""
        snap = {
            "cycle": self.now,
            "warps": [{"role": a.role, "warp": a.warp, "pc": a.pc, "record": a.ops[a.pc].name if a.pc < len(a.ops)
                       else None, "done": a.done, "waits_on": a.waiting_on} for a in self.agents],
            "mbarriers": {n: m.st.state() for n, m in self._mbars.items()},
            "named_barriers": {i: b.st.state() for i, b in self._nbars.items()},
            "units": {"tensor_pipe_free_at": self._pipe_free, "tma_free_at": self._tma_free,
                      "tmem_path_free_at": self._tmem_free, "smem_port_free_at": self._port_free},
            "tmem_allocations": dict(sorted(self._tmem_cols.items())),
            "tmem_writers": {f"lanes {r[0]}-{r[1] - 1} cols {r[2]}-{r[3] - 1}": self._fmt(o, i)
                             for r, (_k, _s, o, i) in sorted((self._rect_of[q], w) for q, w in self._tmem_w.items())},
            "smem_writers": {" ".join(f"[{a}, {b})" for a, b in r): self._fmt(o, i)
                             for r, (_k, _s, o, i) in sorted((self._ranges_of[q], w) for q, w in self._smem_w.items())},
        }
        if self.cta is not None:
            for name in ("tmem_owner_map", "smem_owner_map"):
                fn = getattr(self.cta, name, None)
                if callable(fn):
                    snap[name] = fn()
        return snap

    def summary(self) -> dict:
        """The JSON summary of ``simtc simulate --json``."""
        return {"cycles": self.cycles, "events": len(self.trace), "wall_seconds": round(self._wall, 6),
                "hazards": [h.to_json() for h in self.hazards], "deadlock": self.deadlock,
                "per_role": self.per_role(), "units": self.units()}

    @property
    def clean(self) -> bool:
        return not self.hazards and self.deadlock is None

    def timeline(self, **kw):
        """The run as a :class:`simtc.render.timeline.TimelineView` (rich Gantt)."""
        from simtc.render.timeline import TimelineView

        return TimelineView(self, **kw)


Simulation = Engine


def _rect_overlap(a, b) -> bool:
    return a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]


class _Keys(dict):
    """key -> a small int id, in first-seen order (``of[id]`` gives the key back)."""

    def __init__(self):
        super().__init__()
        self.of: list = []

    def __missing__(self, key) -> int:
        self.of.append(key)
        i = self[key] = len(self.of) - 1
        return i


class _Interned(dict):
    """id of a registered key -> the ids of the registered keys overlapping it, in ``over``'s order
    (``over`` maps a key to its overlapping keys; computed on first use)."""

    def __init__(self, ids: _Keys, over: dict):
        super().__init__()
        self._ids, self._over = ids, over

    def __missing__(self, i: int) -> tuple[int, ...]:
        ids = self._ids
        res = self[i] = tuple(ids[k] for k in self._over[ids.of[i]])
        return res


class _RangeSetOverlaps(dict):
    """id of a registered shared-memory range-set key -> the ids of the registered keys sharing at least one
    byte with it, all computed at once (vectorised; a sorted sweep over every byte range of every key).

    Order: first seen when scanning the key's ranges in order, each range's overlapping ranges sorted by
    ``(start, stop)``, and the keys holding each of those in id order (the order the checker reports hazards
    in). Ids without any overlap (empty ranges only) give ``()``.

    >>> over = _RangeSetOverlaps([((0, 16), (64, 80)), ((70, 90),), ((16, 32),), ((8, 24), (100, 104))])
    >>> over[0], over[1], over[2], over[3], over[9]
    ((0, 3, 1), (0, 1), (3, 2), (0, 3, 2), ())
    """

    def __init__(self, keys: list):
        super().__init__()
        import numpy as np

        lens = np.fromiter((len(k) for k in keys), np.int64, len(keys))
        total = int(lens.sum())
        if not total:
            return
        chain = itertools.chain.from_iterable
        se = np.fromiter(chain(chain(keys)), np.int64, 2 * total).reshape(total, 2)
        kid = np.repeat(np.arange(len(keys), dtype=np.int64), lens)
        pos = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)
        order = np.argsort(se[:, 0], kind="stable")
        starts = se[order, 0]
        lo = np.searchsorted(starts, starts, "left")
        hi = np.searchsorted(starts, se[order, 1], "left")
        n = hi - lo  # the ranges starting inside range s: every overlapping pair is among them, seen at least
        s_idx = np.repeat(np.arange(order.size), n)  # from the side of the earlier start
        t_idx = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n) + np.repeat(lo, n)
        a, b = order[s_idx], order[t_idx]
        hit = (se[a, 0] < se[b, 1]) & (se[b, 0] < se[a, 1])  # [a0, a1) and [b0, b1) share a byte, or an
        a, b = a[hit], b[hit]  # empty range lies strictly inside the other
        qa, ka = np.concatenate([a, b]), np.concatenate([b, a])  # (query occurrence, candidate occurrence)
        # the first occurrence of each (query key, candidate key) pair in (query range position, candidate range
        # in (start, stop) order) -- found with one sort of int64 keys, then the pairs in that order per query
        rank = np.unique(se[:, 0] * (int(se[:, 1].max()) + 1) + se[:, 1], return_inverse=True)[1].reshape(-1)
        nk, nsub = len(keys), int(lens.max()) * (int(rank.max()) + 1)
        sub = pos[qa] * (nsub // int(lens.max())) + rank[ka]
        pair = kid[qa] * nk + kid[ka]
        if nk * nk * nsub < 2**62:
            c = np.sort(pair * nsub + sub)
            pair, sub = np.divmod(c, nsub)
        else:  # pragma: no cover - a Program of very many shared-memory keys
            srt = np.lexsort((sub, pair))
            pair, sub = pair[srt], sub[srt]
        first = np.ones(pair.size, bool)
        first[1:] = pair[1:] != pair[:-1]
        q, k = np.divmod(pair[first], nk)
        srt = np.lexsort((k, sub[first], q))  # each query's candidates by first sight
        q, k = q[srt], k[srt]
        out: dict[int, list[int]] = {}
        for qi, ki in zip(q.tolist(), k.tolist(), strict=True):
            out.setdefault(qi, []).append(ki)
        for qi, ks in out.items():
            self[qi] = tuple(ks)

    def __missing__(self, i: int) -> tuple[int, ...]:
        return ()


class _Subset(dict):
    """id -> the ids of ``over[id]`` that lie in ``keep``, in ``over``'s order (computed on first use)."""

    def __init__(self, over: dict, keep: set):
        super().__init__()
        self._over, self._keep = over, keep

    def __missing__(self, i: int) -> tuple[int, ...]:
        keep = self._keep
        res = self[i] = tuple(r for r in self._over[i] if r in keep)
        return res


class _Overlaps(dict):
    """item -> the registered items overlapping it; computed on first use (a sorted sweep on the
    first coordinate pair, so compiling a long Program stays linear-ish)."""

    def __init__(self, items: list, fn):
        super().__init__()
        import bisect

        self._bisect = bisect.bisect_left
        self._items = sorted(items)
        self._starts = [it[0] for it in self._items]
        self._maxlen = max((it[1] - it[0] for it in self._items), default=0)
        self._fn = fn

    def __missing__(self, key):
        lo = self._bisect(self._starts, key[0] - self._maxlen)
        hi = self._bisect(self._starts, key[1])
        out = [b for b in self._items[lo:hi] if self._fn(key, b)]
        self[key] = out
        return out
