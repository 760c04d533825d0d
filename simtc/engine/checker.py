"""The hazard checker: an observer of a run's accesses and synchronisations (rules in :mod:`simtc.engine.hazards`).

The engine tells its observers what happens, in simulated-time order; the checker keeps what each warp
*knows* to have completed (a vector clock over every warp's operations) and flags two conflicting accesses that no
happens-before order relates, however the timing fell:

* ``on_start(cycle, barriers)`` -- the run starts; ``barriers`` are the mbarriers of the Program's table (its setup
  code initialised them before the roles run);
* ``on_issue(cycle, w, i, op, token)`` -- warp ``w`` issues record ``i`` (compiled ``op``: its record, kind
  and interned footprint). Accesses and knowledge changes that happen at issue are applied here. A record
  whose arrival lands later (``mbarrier.arrive``, ``tcgen05.commit``, a TMA's ``complete_tx``) comes with
  a ``token`` (an int the engine gives each such arrival): the checker keeps what the arrival carries;
* ``on_arrival(cycle, bar, token)`` -- that arrival lands on mbarrier ``bar``;
* ``on_phase(cycle, bar)`` -- ``bar`` completes a phase;
* ``on_wait(cycle, w, i, bar, observed)`` -- warp ``w``'s ``try_wait`` passed, having observed phase
  ``observed`` of ``bar`` (-1: the fresh barrier's phantom phase);
* ``on_release(cycle, bar_id, waiters)`` -- named barrier ``bar_id`` releases these warps;
* ``on_violation(cycle, rule, first, second, message)`` -- a state machine refused something (over-arrival,
  tx underflow, an uninitialised barrier, an allocation that can never be satisfied, a deadlock).

What a warp knows (PTX ISA 9.0 §9.7.16.6, tcgen05 memory consistency; §8, the memory consistency model):

* ``vc`` -- what happens-before the warp's next operation: its own program order, and what mbarrier phases
  and named barriers carried to it (knowledge is transitive: a warp that waited on a commit's mbarrier and then
  releases others with ``bar.sync`` passes the commit on);
* ``tc`` -- what its *tcgen05* operations may rely on. Another thread's tcgen05 work counts only when it crossed a
  thread sync between ``tcgen05.fence::before_thread_sync`` (or the commit, which implies it) and
  ``tcgen05.fence::after_thread_sync`` (§9.7.16.6.4); ``pub`` is what the warp's next sync publishes (what its
  before-fence covered, and what earlier publishers sent through it), ``pend`` what it received since its last
  after-fence;
* a thread's own asynchronous tcgen05 operations are ordered only where PTX says so (§9.7.16.6.2): ``cp -> mma``
  and ``mma -> mma`` on the same accumulator, shape and kind are pipelined (issue order suffices, across threads
  too once the issue is published with the fences); everything else waits (``wait::ld``, ``wait::st``, or a
  commit observed through its mbarrier): ``tcgen05.st; tcgen05.wait::st; tcgen05.ld``;
* a use of a ``tcgen05.ld``'s destination registers needs no ``wait::ld``: an intra-thread true register dependency
  is respected without any other synchronisation (§9.7.16.6.4.5, register dependencies, same thread; the engine's
  scoreboard holds the use until the load completes). It orders nothing else, so it is no knowledge here: a later
  write of the cells the load reads (the thread's own ``tcgen05.st``, MMA or ``cp``, or another thread's after a
  release, since ``fence::before_thread_sync`` publishes only waited loads) and their ``tcgen05.dealloc`` still
  need ``wait::ld`` (``tmem-overwrite-in-flight``, ``tmem-dealloc-in-flight``).

A warp knows that its ``wgmma.mma_async`` (and their shared-memory operand reads) completed once a
``wgmma.wait_group`` has retired their commit group.

What the checker computes is kept for queries after the run (:mod:`simtc.engine.hazard_groups` derives the
missing synchronisation of each hazard from it, with no rules of its own):

* ``completions[(warp, record)]`` -> ``(key, seq)``: a warp knows that the record completed once its ``vc`` holds
  ``key`` at ``seq`` or more (the record's own entry: ``(TC, warp)`` for an MMA, ``(LD, warp)`` for a
  ``tcgen05.ld``, ``(TMA, warp, barrier)`` for a TMA load, ...; a record without one: the warp's next signal,
  ``(EV, warp)``);
* ``signals``: each arrival as it landed (:class:`Signal`: the record, the mbarrier phase it counted towards or
  the named barrier's release, and the ``vc`` it carried);
* ``lessons``: each passed wait and named-barrier release (:class:`Lesson`: the record, the phase it observed,
  and the ``vc`` it joined into the warp's);
* :meth:`HazardChecker.learned` (where each warp first learned that a record completed) and
  :meth:`HazardChecker.carried` (which of the record's own warp's signals carried its completion) query them.

The checker needs no engine: :class:`CheckLog` records the calls of a run (``Engine(..., observers=[log])``)
and :meth:`HazardChecker.replay` runs a fresh checker over the recording -- the same hazards as a live check.
"""

from __future__ import annotations

from attrs import field, frozen

from simtc.engine.hazards import Hazard
from simtc.engine.ops import (
    K_ALLOC,
    K_ARRIVE,
    K_ARRIVE_TX,
    K_BAR_ARRIVE,
    K_BAR_SYNC,
    K_BULK_COMMIT,
    K_BULK_WAIT,
    K_COMMIT,
    K_CP,
    K_CUDA,
    K_DEALLOC,
    K_FENCE_AFTER,
    K_FENCE_BEFORE,
    K_INIT,
    K_LD,
    K_LD_SHARED,
    K_MMA,
    K_PROXY_FENCE,
    K_ST,
    K_ST_SHARED,
    K_TMA_LOAD,
    K_TMA_STORE,
    K_WAIT_LD,
    K_WAIT_ST,
    K_WGMMA,
    K_WGMMA_COMMIT,
    K_WGMMA_WAIT,
)

__all__ = ["BULK", "EV", "GEN", "LD", "PGEN", "ST", "TC", "TCI", "TMA", "CheckLog", "HazardChecker", "Lesson",
           "Signal"]

# knowledge-domain tags (keys of the vector clocks are (tag, warp) or (tag, warp, barrier)):
# TC completed tensor-pipe ops (mma, cp, wgmma), TCI issued ones (ordering for pipelined pairs only), LD / ST
# completed tcgen05.ld / st, GEN generic shared-memory accesses, PGEN generic writes behind fence.proxy.async, TMA
# loads per barrier, BULK bulk-store source reads, EV the warp's signals (arrives, commits, TMA issues: what the
# mbarrier parity checks follow, never a memory order)
TC, TCI, LD, ST, GEN, PGEN, TMA, BULK, EV = "tc", "tci", "ld", "st", "gen", "pgen", "tma", "bulk", "ev"


def _join(dst: dict, src: dict) -> None:
    if not dst:
        dst.update(src)
        return
    get = dst.get
    for k, v in src.items():
        if v > get(k, 0):
            dst[k] = v


@frozen
class Signal:
    """An arrival as it landed: record ``record`` of warp ``warp`` counted towards phase ``phase`` of mbarrier
    ``barrier`` (a named barrier: ``"bar N"`` and its release number), carrying the vector clock ``knows``."""

    warp: int
    record: int
    barrier: str
    phase: int
    knows: dict = field(eq=False, repr=False)


@frozen
class Lesson:
    """A passed wait: warp ``warp``'s record ``record`` observed phase ``phase`` of ``barrier`` (a named barrier's
    release: ``"bar N"``, the release number, the warp's arriving record) and joined the vector clock ``knows``
    into its own (what every completed phase carried; the release: what its arrivals carried)."""

    warp: int
    record: int
    barrier: str
    phase: int
    knows: dict = field(eq=False, repr=False)


class _Knows:
    """What one warp knows, and its own sequence counters."""

    __slots__ = ("bulk_groups", "bulk_seq", "consumed", "ev", "gen_seq", "ld_seq", "pend", "pub", "st_seq", "tc",
                 "tc_seq", "tma_seq", "vc", "wg_groups")

    def __init__(self):
        self.vc: dict = {}
        self.tc: dict = {}
        self.pend: dict = {}
        self.pub: dict = {}
        self.tc_seq = self.ld_seq = self.st_seq = self.gen_seq = self.bulk_seq = self.ev = 0
        self.consumed: dict[str, tuple[int, int, int]] = {}  # bar -> (phase observed, own signals then, record)
        self.tma_seq: dict[str, int] = {}
        self.bulk_groups: list[int] = []
        self.wg_groups: list[int] = []  # the warp's tensor-op sequence number at each wgmma.commit_group


def _smem_keys(vc: dict) -> dict:
    """The shared-memory writes (generic stores, TMA loads) among what a thread sync makes known."""
    return {k: v for k, v in vc.items() if k[0] in (GEN, TMA)}


class HazardChecker:
    """A happens-before checker over one run (see the module text).

    ``warps`` are the engine's warps (``idx``, ``role``, ``warp``, ``ops`` with the compiled records);
    ``index`` holds the interned footprints: ``rect_of``, ``rect_over``, ``range_over_w``, ``range_over_r``,
    ``range_over_g``; ``allocations`` is the live TMEM allocation table (start -> columns) or None when the Program
    allocates nothing; ``barriers`` the names of the mbarriers the Program's table initialises before the roles
    run (any other must be initialised by an ``mbarrier.init`` ordered before its use).
    """

    def __init__(self, warps, index, allocations=None, barriers=None):
        self.warps = warps
        self.rect_of = index.rect_of
        self.rect_over = index.rect_over
        self.range_over_w = index.range_over_w
        self.range_over_r = index.range_over_r
        self.range_over_g = getattr(index, "range_over_g", None)
        self.allocations = allocations
        self.table = barriers  # the mbarriers the setup code initialised before the roles (None: not known)
        self._inits: dict[str, tuple] = {}  # mbarrier -> (key, seq, owner, index) of its last mbarrier.init
        self.knows = [_Knows() for _ in warps]
        self.hazards: list[Hazard] = []
        self._keys: set = set()
        self._now = 0
        self._mbar: dict[str, list[dict]] = {}  # name -> [cur_vc, cur_tc, done_vc, done_tc]
        self._carried: dict[int, tuple] = {}  # arrival token -> (vc, tc) it carries, (warp, record) sending it
        self._nbar: dict[int, list] = {}  # id -> [vc, tc, [(warp, record, vc) of each arrival]]
        self._releases: dict[int, int] = {}  # named barrier -> releases so far
        self.completions: dict[tuple[int, int], tuple[tuple, int]] = {}  # the exposed knowledge (module text)
        self.signals: list[Signal] = []
        self.lessons: list[Lesson] = []
        self._phases: dict[str, int] = {}  # mbarrier -> phases completed
        self._parity: dict[str, list] = {}  # mbarrier -> parity checks waiting for its next phase
        self._acc: dict[int, tuple | None] = {}
        self.tmem_w: dict = {}
        self.tmem_r: dict = {}
        self.smem_w: dict = {}
        self.smem_r: dict = {}
        self.smem_g: dict = {}

    # ------------------------------------------------------------------ reports
    def _hazard(self, rule: str, first, second, message: str) -> None:
        key = (rule, first, second)
        if key in self._keys:
            return
        self._keys.add(key)
        self.hazards.append(Hazard(rule, int(self._now), first, second, message))

    def _rec(self, owner: int, index: int) -> tuple[str, int, int]:
        a = self.warps[owner]
        return (a.role, a.warp, index)

    def fmt(self, owner: int, index: int) -> str:
        a = self.warps[owner]
        return f"{a.role}[w{a.warp}]#{index} ({a.ops[index].name})"

    def _need(self, k: _Knows, name: str, key, seq: int, rule: str, first, second, what: str,
              issued=None, synchronous: bool = False) -> None:
        """A tcgen05 operation depends on ``key`` reaching ``seq``: known through ``tc`` (own waits, or a thread sync
        between the two tcgen05 fences), or -- for a pipelined pair (``issued``: the producer's issue key) -- known
        to have been *issued* the same way. A ``synchronous`` one (tcgen05.dealloc) executes in program order after
        the sync: published knowledge suffices, without fence::after_thread_sync (PTX ISA 9.0 §9.7.16.6.1)."""
        if k.tc.get(key, 0) >= seq or (issued is not None and k.tc.get(issued, 0) >= seq):
            return
        if synchronous and k.pend.get(key, 0) >= seq:
            return
        if k.pend.get(key, 0) >= seq or (issued is not None and k.pend.get(issued, 0) >= seq):
            self._hazard("missing-after-thread-sync-fence", first, second,
                         f"{name} learned through a thread sync that {what} completed"
                         f"{' or was issued' if issued is not None else ''}, but issues this tcgen05 operation "
                         "without tcgen05.fence::after_thread_sync after the sync")
        elif k.vc.get(key, 0) >= seq:
            self._hazard("missing-before-thread-sync-fence", first, second,
                         f"{what} was published to {name} by a thread sync without "
                         "tcgen05.fence::before_thread_sync before the arrive")
        else:
            self._hazard(rule, first, second, f"{name} cannot know that {what} has completed")

    # ------------------------------------------------------------------ pipelined pairs (PTX ISA 9.0 §9.7.16.6.2)
    def _accumulator(self, op) -> tuple | None:
        acc = self._acc.get(id(op), False)
        if acc is False:
            rec = op.rec
            acc = None
            if op.kind == K_MMA:
                d = rec.idesc
                acc = (rec.d_taddr, d.kind, d.m, d.n, bool(getattr(rec, "ws", False)))
            self._acc[id(op)] = acc
        return acc

    def _pipelined(self, first, second) -> bool:
        """``first`` then ``second`` execute in issue order: ``cp -> mma``, and ``mma -> mma`` with the same
        accumulator, shape and kind (PTX ISA 9.0 §9.7.16.6.2)."""
        if second.kind != K_MMA:
            return False
        if first.kind == K_CP:
            return True
        return first.kind == K_MMA and self._accumulator(first) == self._accumulator(second)

    # ------------------------------------------------------------------ Tensor Memory
    def _tmem_read(self, w, i: int, op, rects, unit_tc: bool) -> None:
        k = self.knows[w.idx]
        me = (w.role, w.warp, i)
        for q in rects:
            for r in self.rect_over[q]:
                hit = self.tmem_w.get(r)
                if hit is None:
                    continue
                key, seq, owner, idx = hit
                if k.tc.get(key, 0) >= seq:
                    continue
                tag = key[0]
                issued = None
                if tag == TC and unit_tc and self._pipelined(self.warps[owner].ops[idx], op):
                    if owner == w.idx:
                        continue  # the thread's own pipelined pair
                    issued = (TCI, owner)
                if tag == ST:
                    rule, what = "tmem-read-before-wait-st", f"the tcgen05.st {self.fmt(owner, idx)}"
                else:
                    rule, what = "tmem-read-before-commit", f"the MMA/cp {self.fmt(owner, idx)} writing this TMEM"
                self._need(k, w.name, key, seq, rule, self._rec(owner, idx), me, what, issued)

    def _tmem_write(self, w, i: int, op, rects, key, seq, unit_tc: bool) -> None:
        k = self.knows[w.idx]
        me = (w.role, w.warp, i)
        tc_get = k.tc.get
        for q in rects:
            for r in self.rect_over[q]:
                readers = self.tmem_r.get(r)
                if readers:
                    for rkey, (rseq, owner, idx) in readers.items():
                        if tc_get(rkey, 0) >= rseq:
                            continue
                        issued = None
                        if rkey[0] == TC and unit_tc and self._pipelined(self.warps[owner].ops[idx], op):
                            if owner == w.idx:
                                continue
                            issued = (TCI, owner)
                        self._need(k, w.name, rkey, rseq, "tmem-overwrite-in-flight", self._rec(owner, idx), me,
                                   f"the TMEM read {self.fmt(owner, idx)}", issued)
                hit = self.tmem_w.get(r)
                if hit is not None:
                    wkey, wseq, owner, idx = hit
                    issued = None
                    if wkey[0] == TC and unit_tc and self._pipelined(self.warps[owner].ops[idx], op):
                        issued = (TCI, owner)
                    if tc_get(wkey, 0) < wseq and not (issued is not None and owner == w.idx):
                        self._need(k, w.name, wkey, wseq, "tmem-overwrite-in-flight", self._rec(owner, idx), me,
                                   f"the TMEM write {self.fmt(owner, idx)}", issued)
            self.tmem_w[q] = (key, seq, w.idx, i)

    def _tmem_add_reader(self, w, i: int, rects, key, seq) -> None:
        for q in rects:
            d = self.tmem_r.get(q)
            if d is None:
                d = self.tmem_r[q] = {}
            d[key] = (seq, w.idx, i)

    def _dealloc(self, w, i: int, op) -> None:
        """``tcgen05.dealloc``: every TMEM access to the columns must be known complete by the deallocating warp
        (its own ``wait::ld`` / ``wait::st`` or observed commit; another warp's through the fences and a thread
        sync, PTX ISA 9.0 §9.7.16.7.1, §9.7.16.6.4); the columns' access history ends here."""
        k = self.knows[w.idx]
        me = (w.role, w.warp, i)
        c0 = op.rec.taddr & 0xFFFF
        c1 = c0 + op.rec.ncols
        rect_of = self.rect_of
        gone = [q for q in {*self.tmem_w, *self.tmem_r} if rect_of[q][2] < c1 and c0 < rect_of[q][3]]
        for q in sorted(gone):
            accesses = [(rkey, rseq, owner, idx) for rkey, (rseq, owner, idx) in self.tmem_r.get(q, {}).items()]
            hit = self.tmem_w.get(q)
            if hit is not None:
                accesses.append(hit)
            for key, seq, owner, idx in accesses:
                if k.tc.get(key, 0) < seq:
                    self._need(k, w.name, key, seq, "tmem-dealloc-in-flight", self._rec(owner, idx), me,
                               f"the TMEM access {self.fmt(owner, idx)} to columns {c0}-{c1 - 1}", synchronous=True)
            self.tmem_w.pop(q, None)
            self.tmem_r.pop(q, None)

    # ------------------------------------------------------------------ shared memory
    def _smem_read(self, w, i: int, ranges, async_proxy: bool, tcgen05: bool = False) -> None:
        """A read of shared memory: each write it overlaps must be known complete. ``async_proxy`` (MMA, cp,
        TMA store): a generic write needs fence.proxy.async between it and the read (PTX ISA 9.0 §9.7.16.6.5).
        ``tcgen05`` (an MMA or tcgen05.cp reading its operands): shared-memory data another warp wrote (st.shared)
        or loaded (TMA), learned through a thread sync, is usable only after tcgen05.fence::after_thread_sync
        (PTX ISA 9.0 §9.7.16.6.4)."""
        if not self.smem_w:
            return
        k = self.knows[w.idx]
        me = (w.role, w.warp, i)
        get, vc_get = self.smem_w.get, k.vc.get
        for q in ranges:
            for r in self.range_over_w[q]:
                hit = get(r)
                if hit is None:
                    continue
                key, seq, owner, idx = hit
                gen = key[0] == GEN
                if owner == w.idx and gen:
                    if async_proxy and vc_get((PGEN, owner), 0) < seq and not self._alloc_write(owner, idx):
                        self._hazard("missing-proxy-fence", self._rec(owner, idx), me,
                                     f"st.shared {self.fmt(owner, idx)} is read by the async proxy without "
                                     "fence.proxy.async between them")
                    continue
                if vc_get(key, 0) < seq:
                    if self._alloc_write(owner, idx):
                        self._hazard("tmem-address-read-before-sync", self._rec(owner, idx), me,
                                     f"{w.name} reads the TMEM address {self.fmt(owner, idx)} wrote to shared "
                                     "memory without a thread sync after the allocation")
                        continue
                    what = f"the {'st.shared' if gen else 'TMA load'} {self.fmt(owner, idx)}"
                    self._hazard("smem-read-before-complete", self._rec(owner, idx), me,
                                 f"{w.name} cannot know that {what} has completed")
                elif gen and async_proxy and vc_get((PGEN, owner), 0) < seq and not self._alloc_write(owner, idx):
                    self._hazard("missing-proxy-fence", self._rec(owner, idx), me,
                                 f"st.shared {self.fmt(owner, idx)} is read by the async proxy without "
                                 "fence.proxy.async by the writer before its release or by this warp after its "
                                 "acquire")
                elif (tcgen05 and k.tc.get(key, 0) < seq and k.pend.get(key, 0) >= seq):
                    what = f"the {'st.shared' if gen else 'TMA load'} {self.fmt(owner, idx)}"
                    self._hazard("missing-after-thread-sync-fence", self._rec(owner, idx), me,
                                 f"{w.name} learned through a thread sync that {what} completed, but issues this "
                                 "tcgen05 operation on its data without tcgen05.fence::after_thread_sync after "
                                 "the sync")

    def _alloc_write(self, owner: int, idx: int) -> bool:
        """Whether the write is the TMEM address a tcgen05.alloc stored (ordered with the thread's later tcgen05
        operations as a synchronous tcgen05 instruction, PTX ISA 9.0 §9.7.16.6.1: no proxy fence)."""
        return self.warps[owner].ops[idx].kind == K_ALLOC

    def _smem_write(self, w, i: int, ranges, key, seq) -> None:
        """A write of shared memory: the asynchronous reads it overlaps must be known complete, the generic reads
        of other warps must happen before it, and so must the previous write of the bytes when either is a TMA
        load."""
        k = self.knows[w.idx]
        me = (w.role, w.warp, i)
        vc_get = k.vc.get
        smem_r, smem_g, smem_w = self.smem_r.get, self.smem_g, self.smem_w
        for q in ranges:
            if self.smem_r:
                for r in self.range_over_r[q]:
                    readers = smem_r(r)
                    if readers:
                        for rkey, (rseq, owner, idx) in readers.items():
                            if vc_get(rkey, 0) < rseq:
                                self._hazard("smem-overwrite-in-flight", self._rec(owner, idx), me,
                                             f"{w.name} cannot know that the async read {self.fmt(owner, idx)} of "
                                             "this shared memory has completed")
            if smem_g:
                for r in self.range_over_g[q]:
                    readers = smem_g.get(r)
                    if readers:
                        for rkey, (rseq, owner, idx) in readers.items():
                            if owner != w.idx and vc_get(rkey, 0) < rseq:
                                self._hazard("smem-write-after-read", self._rec(owner, idx), me,
                                             f"no synchronisation orders the read {self.fmt(owner, idx)} of these "
                                             f"bytes before {w.name} overwrites them")
            if smem_w:
                for r in self.range_over_w[q]:
                    hit = smem_w.get(r)
                    if hit is None:
                        continue
                    wkey, wseq, owner, idx = hit
                    if wkey[0] == GEN and (owner == w.idx or key[0] == GEN):
                        continue  # the warp's own program order; generic over generic: not checked (a CUDA-core
                    if vc_get(wkey, 0) < wseq:  # block's footprint is the whole buffer its warpgroup shares)
                        what = "TMA load" if wkey[0] == TMA else "write"
                        self._hazard("smem-write-after-write", self._rec(owner, idx), me,
                                     f"{w.name} cannot know that the {what} {self.fmt(owner, idx)} of these bytes "
                                     "has completed: the final contents depend on the timing")
            smem_w[q] = (key, seq, w.idx, i)

    def _smem_add_reader(self, w, i: int, ranges, key, seq, table: dict) -> None:
        for q in ranges:
            d = table.get(q)
            if d is None:
                d = table[q] = {}
            d[key] = (seq, w.idx, i)

    def _barrier_use(self, w, i: int, op, k: _Knows) -> None:
        """An mbarrier used (init, arrive, wait, commit, TMA) by warp ``w``: a barrier outside the Program's table
        (whose barriers the setup code initialised before the roles ran) needs an ``mbarrier.init`` that happens
        before the use -- the same warp's, or another's followed by a thread sync (PTX ISA 9.0 §9.7.13.15.9)."""
        bar = op.bar
        if self.table is not None and bar in self.table:
            return
        me = (w.role, w.warp, i)
        if op.kind == K_INIT:
            self._inits[bar] = ((GEN, w.idx), self._generic(w, i, k), w.idx, i)
            return
        init = self._inits.get(bar)
        if init is None:
            if self.table is not None:
                self._hazard("mbarrier-uninitialized", None, me,
                             f"{op.name} on {bar} before any mbarrier.init of it")
            return
        key, seq, owner, idx = init
        if owner != w.idx and k.vc.get(key, 0) < seq:
            self._hazard("mbarrier-uninitialized", self._rec(owner, idx), me,
                         f"{w.name} uses {bar} with no synchronisation after its mbarrier.init "
                         f"{self.fmt(owner, idx)}")

    def _check_alloc(self, op, me) -> None:
        cols = self.allocations
        if cols is None:
            return
        for r in map(self.rect_of.__getitem__, op.tmem_r + op.tmem_w):
            if not any(s <= r[2] and r[3] <= s + c for s, c in cols.items()):
                text = ", ".join(f"{s}+{c}" for s, c in sorted(cols.items())) or "none"
                self._hazard("tmem-unallocated-access", None, me,
                             f"columns {r[2]}-{r[3] - 1} outside the live allocations ({text})")
                return

    # ------------------------------------------------------------------ the observer interface
    def _generic(self, w, i: int, k: _Knows) -> int:
        """Record ``i`` of warp ``w`` is its next generic access (shared memory, mbarrier.init): its sequence
        number, whose knowledge is the record's completion."""
        k.gen_seq += 1
        self.completions[(w.idx, i)] = ((GEN, w.idx), k.gen_seq)
        return k.gen_seq

    def on_issue(self, cycle: int, w, i: int, op, token: int | None = None) -> None:
        """Warp ``w`` issues its record ``i`` (``token``: the id of the arrival it will make, if any)."""
        self._now = cycle
        k = self.knows[w.idx]
        me = (w.role, w.warp, i)
        if op.quad_bad:
            self._hazard("lane-quadrant", None, me, op.quad_bad)
        kind = op.kind
        done = self.completions
        done[(w.idx, i)] = ((EV, w.idx), k.ev + 1)  # no access of its own: known with the warp's next signal
        if op.bar is not None:
            self._barrier_use(w, i, op, k)
        if kind == K_ST_SHARED:
            self._smem_write(w, i, op.smem_w, (GEN, w.idx), self._generic(w, i, k))
        elif kind == K_LD_SHARED:
            self._generic(w, i, k)
            self._smem_read(w, i, op.smem_r, False)
            self._smem_add_reader(w, i, op.smem_r, (GEN, w.idx), k.gen_seq, self.smem_g)
        elif kind == K_TMA_LOAD:
            s = k.tma_seq.get(op.bar, 0) + 1
            k.tma_seq[op.bar] = s
            k.ev += 1
            key = (TMA, w.idx, op.bar)
            done[(w.idx, i)] = (key, s)
            self._smem_write(w, i, op.smem_w, key, s)
            self._carried[token] = ({key: s, (EV, w.idx): k.ev}, {key: s}, w.idx, i)
        elif kind in (K_MMA, K_CP, K_WGMMA):
            k.tc_seq += 1
            key = (TC, w.idx)
            done[(w.idx, i)] = (key, k.tc_seq)
            if op.smem_r:
                self._smem_read(w, i, op.smem_r, True, tcgen05=kind != K_WGMMA)
                self._smem_add_reader(w, i, op.smem_r, key, k.tc_seq, self.smem_r)
            if op.tmem_r:
                self._tmem_read(w, i, op, op.tmem_r, True)
                self._tmem_add_reader(w, i, op.tmem_r, key, k.tc_seq)
            if op.tmem_w:
                self._tmem_write(w, i, op, op.tmem_w, key, k.tc_seq, True)
            self._check_alloc(op, me)
        elif kind in (K_ARRIVE, K_ARRIVE_TX):
            k.ev += 1
            vc = k.vc
            vc[(GEN, w.idx)] = k.gen_seq
            vc[(EV, w.idx)] = k.ev
            self._carried[token] = (dict(vc), dict(k.pub), w.idx, i)
        elif kind == K_CUDA:
            if op.smem_r or op.smem_w:
                self._generic(w, i, k)
            if op.smem_r:
                self._smem_read(w, i, op.smem_r, False)
                self._smem_add_reader(w, i, op.smem_r, (GEN, w.idx), k.gen_seq, self.smem_g)
            if op.smem_w:
                self._smem_write(w, i, op.smem_w, (GEN, w.idx), k.gen_seq)
        elif kind in (K_BAR_SYNC, K_BAR_ARRIVE):
            k.ev += 1
            k.vc[(GEN, w.idx)] = k.gen_seq
            k.vc[(EV, w.idx)] = k.ev
            nb = self._nbar.get(op.arg[0])
            if nb is None:
                nb = self._nbar[op.arg[0]] = [{}, {}, []]
            _join(nb[0], k.vc)
            _join(nb[1], k.pub)
            nb[2].append((w.idx, i, dict(k.vc)))
        elif kind == K_LD:
            k.ld_seq += 1
            done[(w.idx, i)] = ((LD, w.idx), k.ld_seq)
            self._tmem_read(w, i, op, op.tmem_r, False)
            self._tmem_add_reader(w, i, op.tmem_r, (LD, w.idx), k.ld_seq)
            self._check_alloc(op, me)
        elif kind == K_ST:
            k.st_seq += 1
            done[(w.idx, i)] = ((ST, w.idx), k.st_seq)
            self._tmem_write(w, i, op, op.tmem_w, (ST, w.idx), k.st_seq, False)
            self._check_alloc(op, me)
        elif kind == K_PROXY_FENCE:  # the generic writes this warp made or knows of, ordered before its async-
            vc = k.vc  # proxy accesses (PTX ISA 9.0 §9.7.16.6.5): the writer's fence before its release, or
            vc[(PGEN, w.idx)] = k.gen_seq  # the reader's after its acquire
            for key, s in [(key, s) for key, s in vc.items() if key[0] == GEN]:
                p = (PGEN, key[1])
                if s > vc.get(p, 0):
                    vc[p] = s
        elif kind == K_FENCE_AFTER:
            _join(k.tc, k.pend)
            k.pend = {}
        elif kind == K_FENCE_BEFORE:
            _join(k.pub, k.tc)
            if k.tc_seq > k.pub.get((TCI, w.idx), 0):
                k.pub[(TCI, w.idx)] = k.tc_seq
        elif kind in (K_WAIT_LD, K_WAIT_ST):
            key = (LD, w.idx) if kind == K_WAIT_LD else (ST, w.idx)
            k.vc[key] = k.tc[key] = k.ld_seq if kind == K_WAIT_LD else k.st_seq
        elif kind == K_COMMIT:  # tracks the thread's earlier tensor ops, implies fence::before_thread_sync
            k.ev += 1  # (PTX ISA 9.0 §9.7.16.12.1)
            _join(k.pub, k.tc)
            if k.tc_seq > k.pub.get((TCI, w.idx), 0):
                k.pub[(TCI, w.idx)] = k.tc_seq
            tc = dict(k.pub)
            tc[(TC, w.idx)] = k.tc_seq
            vc = dict(k.vc)
            vc[(TC, w.idx)] = k.tc_seq
            vc[(EV, w.idx)] = k.ev
            self._carried[token] = (vc, tc, w.idx, i)
        elif kind == K_TMA_STORE:
            k.bulk_seq += 1
            done[(w.idx, i)] = ((BULK, w.idx), k.bulk_seq)
            self._smem_read(w, i, op.smem_r, True)
            self._smem_add_reader(w, i, op.smem_r, (BULK, w.idx), k.bulk_seq, self.smem_r)
        elif kind == K_BULK_COMMIT:
            k.bulk_groups.append(k.bulk_seq)
        elif kind == K_WGMMA_COMMIT:
            k.wg_groups.append(k.tc_seq)
        elif kind == K_WGMMA_WAIT:  # wgmma.wait_group n: all but the last n groups are complete, operand reads
            n = op.arg  # included (PTX ISA 9.0 §9.7.15.7.3)
            groups = k.wg_groups[:-n] if n else k.wg_groups
            if groups:
                key = (TC, w.idx)
                k.vc[key] = k.tc[key] = max(k.vc.get(key, 0), max(groups))
                k.wg_groups = k.wg_groups[len(groups):]
        elif kind == K_BULK_WAIT:
            n = op.arg
            groups = k.bulk_groups[:-n] if n else k.bulk_groups
            if groups:
                k.vc[(BULK, w.idx)] = max(k.vc.get((BULK, w.idx), 0), max(groups))
                k.bulk_groups = k.bulk_groups[len(groups):]
        elif kind == K_ALLOC:  # the allocated address is written to shared memory, in the warp's program order
            if op.smem_w:  # for its non-tcgen05 accesses (PTX ISA 9.0 §9.7.16.6.1)
                self._smem_write(w, i, op.smem_w, (GEN, w.idx), self._generic(w, i, k))
        elif kind == K_DEALLOC:
            self._dealloc(w, i, op)
        # K_INIT (above), K_RELINQUISH: the engine reports what their state machines refuse (on_violation)

    def on_arrival(self, cycle: int, bar: str, token: int) -> None:
        """The arrival ``token`` lands on mbarrier ``bar`` with what its record's issue knew."""
        knowledge = self._carried.pop(token, None)
        if knowledge is None:
            return
        mb = self._mbar.get(bar)
        if mb is None:
            mb = self._mbar[bar] = [{}, {}, {}, {}]
        vc, tc, owner, index = knowledge
        self.signals.append(Signal(owner, index, bar, self._phases.get(bar, 0), vc))
        if vc:
            _join(mb[0], vc)
        if tc:
            _join(mb[1], tc)

    def on_phase(self, cycle: int, bar: str) -> None:
        """Mbarrier ``bar`` completed a phase: what its arrivals carried becomes what a waiter learns."""
        self._now = cycle
        mb = self._mbar.get(bar)
        if mb is None:
            mb = self._mbar[bar] = [{}, {}, {}, {}]
        phase = self._phases.get(bar, 0)
        self._phases[bar] = phase + 1
        checks = self._parity.pop(bar, None)
        if checks:
            self._check_parity(bar, phase, mb[0], checks)
        mb[2] = dict(mb[2])  # a new dict each phase: the one a wait saw stays as it saw it (Lesson.knows)
        _join(mb[2], mb[0])
        _join(mb[3], mb[1])
        mb[0], mb[1] = {}, {}

    def _check_parity(self, bar: str, phase: int, carried: dict, checks: list) -> None:
        """PTX ISA 9.0 §9.7.13.15.16: ``try_wait.parity`` passes on the last completed phase of that parity. Phase
        ``phase`` just completed with the knowledge ``carried``; each check is a wait that passed on an earlier
        phase: (warp, record, own signals at the reference point, phase it passed on, phantom)."""
        for w, i, signals, observed, phantom in checks:
            me = (w.role, w.warp, i)
            depends = carried.get((EV, w.idx), 0) > signals
            parity = w.ops[i].rec.parity
            if phantom and not depends:
                self._hazard("mbarrier-wrong-parity", me, me,
                             f"try_wait.parity {parity} on {bar} passed on the fresh barrier's phantom phase, but "
                             f"phase 0 completes without anything {w.name} did after the wait: a completion barrier "
                             "whose data had not arrived (wait on parity 0)")
            elif not phantom and depends:
                self._hazard("mbarrier-wrong-parity", me, me,
                             f"try_wait.parity {parity} on {bar} passed on phase {observed}, which {w.name} had "
                             f"already consumed, while phase {phase} waits on {w.name}'s own signal made after that "
                             "(parity not flipped)")

    def on_wait(self, cycle: int, w, i: int, bar: str, observed: int) -> None:
        """Warp ``w``'s ``try_wait`` (record ``i``) passed on phase ``observed`` of ``bar``: it learns what every
        completed phase carried (a completed phase waited again carries its knowledge again)."""
        self._now = cycle
        k = self.knows[w.idx]
        prev = k.consumed.get(bar)
        if observed < 0:
            self._parity.setdefault(bar, []).append((w, i, k.ev, observed, True))
        elif prev is not None and prev[0] == observed and k.ev > prev[1]:
            self._parity.setdefault(bar, []).append((w, i, prev[1], observed, False))
        if prev is None or prev[0] != observed:
            k.consumed[bar] = (observed, k.ev, i)
        if observed >= 0:
            mb = self._mbar.get(bar)
            self.lessons.append(Lesson(w.idx, i, bar, observed, {} if mb is None else mb[2]))
            if mb is not None:
                _join(k.vc, mb[2])
                _join(k.pend, mb[3])
                _join(k.pub, mb[3])  # relayed: a later thread sync passes it on
                _join(k.pend, _smem_keys(mb[2]))  # shared-memory data learned here: a tcgen05 op needs the fence

    def on_release(self, cycle: int, bar_id: int, waiters) -> None:
        """Named barrier ``bar_id`` releases ``waiters`` (warps)."""
        nb = self._nbar.pop(bar_id, None)
        if nb is None:
            return
        n = self._releases.get(bar_id, 0)
        self._releases[bar_id] = n + 1
        name = f"bar {bar_id}"
        self.signals += [Signal(owner, index, name, n, vc) for owner, index, vc in nb[2]]
        smem = _smem_keys(nb[0])
        last = {owner: index for owner, index, _vc in nb[2]}  # each warp's arriving record (its last)
        for w in waiters:
            k = self.knows[w.idx]
            if w.idx in last:
                self.lessons.append(Lesson(w.idx, last[w.idx], name, n, nb[0]))
            _join(k.vc, nb[0])
            _join(k.pend, nb[1])
            _join(k.pub, nb[1])
            _join(k.pend, smem)

    def on_violation(self, cycle: int, rule: str, first, second, message: str) -> None:
        """A state machine of the engine refused something (reported as it is)."""
        self._now = cycle
        self._hazard(rule, first, second, message)

    def on_start(self, cycle: int, barriers) -> None:
        """The run starts; ``barriers``: the mbarriers of the Program's table (initialised before the roles)."""
        self._now = cycle
        self.table = set(barriers)

    def on_end(self, cycle: int) -> None:
        self._now = cycle

    # ------------------------------------------------------------------ the knowledge, queried after the run
    def learned(self, owner: int, index: int) -> dict[int, Lesson]:
        """Where each warp first learned that record ``index`` of warp ``owner`` completed through a wait: warp ->
        the first :class:`Lesson` (passed wait or named-barrier release) whose knowledge holds the record's
        completion (none: no wait carried it to the warp; its own synchronous records it knows in program order
        too)."""
        key, seq = self.completions.get((owner, index), (None, 0))
        first: dict[int, Lesson] = {}
        if key is None:
            return first
        for lesson in self.lessons:
            if lesson.warp not in first and lesson.knows.get(key, 0) >= seq:
                first[lesson.warp] = lesson
        return first

    def carried(self, owner: int, index: int) -> list[Signal]:
        """The signals of warp ``owner`` that carried the completion of its record ``index`` (in record order)."""
        key, seq = self.completions.get((owner, index), (None, 0))
        if key is None:
            return []
        mine = [s for s in self.signals if s.warp == owner and s.knows.get(key, 0) >= seq]
        return sorted(mine, key=lambda s: s.record)

    # ------------------------------------------------------------------ a recorded run
    @classmethod
    def replay(cls, log: CheckLog, warps, index, allocations=None) -> HazardChecker:
        """A fresh checker run over a :class:`CheckLog` (allocations: the table the run ended with is not the
        one each access saw, so give None unless the run allocated nothing)."""
        chk = cls(warps, index, allocations)
        for name, args in log.calls:
            getattr(chk, name)(*args)
        return chk


class CheckLog:
    """An observer that records what the engine tells a checker (``calls``: ``(method, args)`` in order)."""

    def __init__(self):
        self.calls: list[tuple[str, tuple]] = []

    def __getattr__(self, name: str):
        if not name.startswith("on_"):
            raise AttributeError(name)

        def record(*args):
            self.calls.append((name, args))
        return record
