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
    K_ELECT,
    K_FENCE_AFTER,
    K_FENCE_BEFORE,
    K_INIT,
    K_INVAL,
    K_LD,
    K_LD_SHARED,
    K_MMA,
    K_PROXY_FENCE,
    K_RELINQUISH,
    K_SHIFT,
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

__all__ = ["BULK", "EV", "GEN", "LD", "MB", "PGEN", "ST", "TC", "TCI", "TMA", "CheckLog", "HazardChecker", "Lesson",
           "Signal"]

# knowledge-domain tags (keys of the vector clocks are (tag, warp) or (tag, warp, barrier)):
# TC completed tensor-pipe ops (mma, cp, wgmma), TCI issued ones (ordering for pipelined pairs only), LD / ST
# completed tcgen05.ld / st, GEN generic shared-memory accesses, PGEN generic writes behind fence.proxy.async, TMA
# loads per barrier, BULK bulk-store source reads, EV the warp's signals (arrives, commits, TMA issues: what the
# mbarrier parity checks follow, never a memory order), MB the warp's uses of mbarrier objects (kept only in a
# Program that invalidates one: what an mbarrier.inval must happen after)
TC, TCI, LD, ST, GEN, PGEN, TMA, BULK, EV, MB = "tc", "tci", "ld", "st", "gen", "pgen", "tma", "bulk", "ev", "mb"
_TENSOR_OPS = (K_MMA, K_CP, K_WGMMA, K_SHIFT)
# the .sync.aligned tcgen05 instructions: every thread of the warp executes them (PTX ISA 9.0 §9.7.16.7.1,
# §9.7.16.8.3, §9.7.16.8.4, §9.7.16.11.1 -- ".aligned": all threads of the warp execute the same instruction)
_WARP_COLLECTIVE = frozenset((K_ALLOC, K_DEALLOC, K_RELINQUISH, K_LD, K_ST, K_WAIT_LD, K_WAIT_ST))
# fence.proxy.async state spaces that cover shared::cta (PTX ISA 9.0 §9.7.13.4: the plain form covers every state
# space, .shared::cluster the CTA's window within it; .global no shared memory)
_SMEM_FENCES = frozenset(("shared::cta", "shared::cluster", ""))


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

    __slots__ = ("bulk_groups", "bulk_seq", "consumed", "elect", "ev", "gen_seq", "ld_seq", "mb_seq", "pend", "pub",
                 "st_seq", "tc", "tc_seq", "tma_seq", "vc", "wg_groups")

    def __init__(self):
        self.vc: dict = {}
        self.tc: dict = {}
        self.pend: dict = {}
        self.pub: dict = {}
        self.tc_seq = self.ld_seq = self.st_seq = self.gen_seq = self.bulk_seq = self.ev = self.mb_seq = 0
        self.elect = 0  # elect.sync meetings of its CTA warp it reached
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
        self.ranges_of = getattr(index, "ranges_of", None)
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
        # mbarrier life cycles (PTX ISA 9.0 §9.7.13.15.9, §9.7.13.15.10)
        self.barrier_bytes: dict[str, tuple[int, int]] | None = None  # name -> [addr, addr + 8) (on_barrier_memory)
        self._bar_hits: dict[int, tuple[str, ...]] = {}  # shared-memory range-set id -> barriers it overlaps
        self._live: dict[str, tuple | None] = {}  # mbarrier -> its last init record (valid), absent: not valid
        self._invalid: set[str] = set()  # mbarriers an mbarrier.inval ended (and no init since)
        self._inval_of: dict[str, tuple[int, int, int]] = {}  # mbarrier -> (warp, MB seq, record) of that inval
        self._fresh: set[str] = set()  # table mbarriers whose first mbarrier.init is the table's own
        self._fresh_used: set[tuple[str, int]] = set()  # (such a barrier, a warp that used it before any init)
        self._lifecycle = any(op.kind == K_INVAL for a in warps for op in a.ops)
        self._uses: dict[str, dict[int, tuple[int, int]]] = {}  # mbarrier -> warp -> (MB seq, record) of last use
        self._allocs: list[tuple] = []  # (CTA warp, ncols, warp index, record, GEN seq) of each tcgen05.alloc
        self._nbar_count: dict = {}  # named barrier -> (threads, warp, record) of its generation's first arrival
        self._mixed: set = set()  # named-barrier arrivals whose generation already had another thread count
        self._nbar_last: dict = {}  # named barrier -> (threads, warps, {waiter: its EV at arrival}, first record)

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
        """``first`` then ``second`` execute in issue order: ``cp -> mma``, ``shift -> mma``, ``mma -> shift``, and
        ``mma -> mma`` with the same accumulator, shape and kind (PTX ISA 9.0 §9.7.16.6.2)."""
        if second.kind == K_SHIFT:  # mma -> shift [PTX ISA 9.0 §9.7.16.6.2's table, as read here]
            return first.kind == K_MMA
        if second.kind != K_MMA:
            return False
        if first.kind in (K_CP, K_SHIFT):
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
                        if tc_get(rkey, 0) >= rseq or (idx == i and owner == w.idx):  # (its own read: a shift)
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
                    if wkey[0] == GEN and key[0] == GEN:
                        continue  # generic over generic: not checked (a CUDA-core block's footprint is the whole
                    if wkey[0] == GEN and owner == w.idx:  # buffer its warpgroup shares)
                        if vc_get((PGEN, owner), 0) < wseq and not self._alloc_write(owner, idx):
                            self._hazard("missing-proxy-fence", self._rec(owner, idx), me,
                                         f"st.shared {self.fmt(owner, idx)} is overwritten by the async proxy (TMA) "
                                         "without fence.proxy.async between them")
                        continue
                    if vc_get(wkey, 0) < wseq:
                        what = "TMA load" if wkey[0] == TMA else "write"
                        self._hazard("smem-write-after-write", self._rec(owner, idx), me,
                                     f"{w.name} cannot know that the {what} {self.fmt(owner, idx)} of these bytes "
                                     "has completed: the final contents depend on the timing")
                    elif (wkey[0] == GEN and key[0] != GEN and vc_get((PGEN, owner), 0) < wseq
                          and not self._alloc_write(owner, idx)):
                        self._hazard("missing-proxy-fence", self._rec(owner, idx), me,
                                     f"st.shared {self.fmt(owner, idx)} is overwritten by the async proxy (TMA) "
                                     "without fence.proxy.async by the writer before its release or by this warp "
                                     "after its acquire")
            if self.barrier_bytes:
                for bar in self._barriers_hit(q):
                    if bar in self._live:
                        self._hazard("mbarrier-object-overwritten", None, me,
                                     f"{w.name} writes the 8 bytes of the valid mbarrier {bar} (not through an "
                                     "mbarrier instruction)")
            smem_w[q] = (key, seq, w.idx, i)

    def _smem_add_reader(self, w, i: int, ranges, key, seq, table: dict) -> None:
        for q in ranges:
            d = table.get(q)
            if d is None:
                d = table[q] = {}
            d[key] = (seq, w.idx, i)

    def _barrier_use(self, w, i: int, op, k: _Knows) -> None:
        """An mbarrier used (init, inval, arrive, wait, commit, TMA) by warp ``w``: its life cycle (PTX ISA 9.0
        §9.7.13.15.10: an init of a valid object, any operation but init on an invalidated one, an inval that does
        not come after every other warp's use), then, for a barrier outside the Program's table (whose barriers the
        setup code initialised before the roles ran), an ``mbarrier.init`` that happens before the use -- the same
        warp's, or another's followed by a thread sync (PTX ISA 9.0 §9.7.13.15.9)."""
        bar = op.bar
        me = (w.role, w.warp, i)
        kind = op.kind
        if kind == K_INIT:
            if bar in self._fresh and (bar, w.idx) not in self._fresh_used:
                self._fresh.discard(bar)  # the init the table stands for (the warp has not used the barrier yet)
            elif bar in self._live:
                prev = self._live[bar]
                self._hazard("mbarrier-init-in-use", prev, me,
                             f"mbarrier.init of {bar}, which is a valid mbarrier ("
                             f"{'initialised by ' + self._recname(prev) if prev else 'the table initialised it'}) "
                             "with no mbarrier.inval since")
            gone = self._inval_of.pop(bar, None)
            if gone is not None and gone[0] != w.idx and k.vc.get((MB, gone[0]), 0) < gone[1]:
                self._hazard("mbarrier-init-in-use", self._rec(gone[0], gone[2]), me,
                             f"no synchronisation orders {self.fmt(gone[0], gone[2])} before {w.name}'s mbarrier.init "
                             f"of {bar}: in another schedule the init comes first, on a valid barrier")
            self._live[bar] = me
            self._invalid.discard(bar)
        elif bar in self._invalid:
            self._hazard("mbarrier-use-after-inval", None, me,
                         f"{op.name} on {bar} after its mbarrier.inval (no mbarrier.init since)")
        elif kind == K_INVAL and bar in self._live:
            del self._live[bar]
            self._invalid.add(bar)
            for owner, (seq, idx) in self._uses.get(bar, {}).items():
                if owner != w.idx and k.vc.get((MB, owner), 0) < seq:
                    self._hazard("mbarrier-inval-in-use", self._rec(owner, idx), me,
                                 f"no synchronisation orders {self.fmt(owner, idx)} on {bar} before {w.name}'s "
                                 "mbarrier.inval: the object may still be in use")
        elif bar in self._fresh:
            self._fresh_used.add((bar, w.idx))
        if self._lifecycle:
            k.mb_seq += 1
            k.vc[(MB, w.idx)] = k.mb_seq
            self._uses.setdefault(bar, {})[w.idx] = (k.mb_seq, i)
            if kind == K_INVAL and bar in self._invalid:
                self._inval_of[bar] = (w.idx, k.mb_seq, i)
        if self.table is not None and bar in self.table:
            return
        if kind == K_INIT:
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

    @staticmethod
    def _recname(r) -> str:
        return f"{r[0]}[w{r[1]}]#{r[2]}"

    def on_barrier_memory(self, cycle: int, spans: dict) -> None:
        """Where the table's mbarrier objects lie: name -> ``(addr, addr + 8)``. An ordinary write (``st.shared``, a
        CUDA-core block, a TMA load, tcgen05.alloc's address) into those bytes while the barrier is valid is
        ``mbarrier-object-overwritten`` (PTX ISA 9.0 §9.7.13.15.1: an opaque object only the mbarrier instructions
        access; §9.7.13.15.10: its memory serves another purpose only after mbarrier.inval). Writes made before
        this call are checked now (they are the last writers of their bytes)."""
        self._now = cycle
        self.barrier_bytes = dict(spans)
        self._bar_hits = {}
        for q, (_key, _seq, owner, idx) in list(self.smem_w.items()):
            for bar in self._barriers_hit(q):
                if bar in self._live:
                    w = self.warps[owner]
                    self._hazard("mbarrier-object-overwritten", None, (w.role, w.warp, idx),
                                 f"{self.fmt(owner, idx)} writes the 8 bytes of the valid mbarrier {bar}")

    set_barrier_bytes = on_barrier_memory

    def _barriers_hit(self, q: int) -> tuple[str, ...]:
        hit = self._bar_hits.get(q)
        if hit is None:
            spans = self.barrier_bytes or {}
            ranges = self.ranges_of[q]
            hit = self._bar_hits[q] = tuple(b for b, (a0, a1) in spans.items()
                                            if any(r0 < a1 and a0 < r1 for r0, r1 in ranges))
        return hit

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
        if w.threads < 32 and kind in _WARP_COLLECTIVE:
            self._hazard("warp-collective-partial", None, me,
                         f"{op.name} is .sync.aligned: every thread of the warp executes it, but {w.name} runs it with "
                         f"{w.threads} of 32 threads")
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
        elif kind in _TENSOR_OPS:
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
            bid, count = op.arg
            nb = self._nbar.get(bid)
            if nb is None:
                nb = self._nbar[bid] = [{}, {}, []]
                self._nbar_count[bid] = (count, w.idx, i)
                prev = self._nbar_last.get(bid)
                if prev is not None and prev[0] != count and w.idx not in prev[1] \
                        and not any(k.vc.get((EV, p), 0) > e for p, e in prev[2].items()):
                    self._hazard("named-barrier-count-mismatch", prev[3], me,
                                 f"barrier {bid}: {w.name} arrives for {count} threads with nothing ordering it after "
                                 f"the release of the previous generation ({prev[0]} threads): it may join that one")
            else:
                if self._nbar_count[bid][0] != count:  # within one generation (PTX ISA 9.0 §9.7.13.1): the
                    self._mixed.add(me)  # engine's report of this arrival stands (on_violation)
            _join(nb[0], k.vc)
            _join(nb[1], k.pub)
            nb[2].append((w.idx, i, dict(k.vc)))
        elif kind == K_ELECT:  # the warp's lanes meet (a release in on_release): like a bar.sync of the CTA warp
            k.ev += 1
            k.elect += 1
            k.vc[(GEN, w.idx)] = k.gen_seq
            k.vc[(EV, w.idx)] = k.ev
            key = ("elect", w.warp, k.elect)
            nb = self._nbar.get(key)
            if nb is None:
                nb = self._nbar[key] = [{}, {}, []]
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
            if op.rec.state_space not in _SMEM_FENCES:  # proxy accesses (PTX ISA 9.0 §9.7.16.6.5): the writer's
                return  # fence before its release, or the reader's after its acquire; .global orders no smem
            vc = k.vc
            vc[(PGEN, w.idx)] = k.gen_seq
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
            self._allocs.append((w.warp, op.rec.ncols, w.idx, i, k.gen_seq))
        elif kind == K_DEALLOC:
            self._dealloc(w, i, op)
            mine = [a for a in self._allocs if a[1] == op.rec.ncols]
            if mine and not any(a[0] == w.warp for a in mine):
                a = mine[-1]
                self._hazard("tmem-dealloc-other-warp", self._rec(a[2], a[3]), me,
                             f"{w.name} deallocates {op.rec.ncols} columns that warp {a[0]} allocated "
                             f"({self.fmt(a[2], a[3])}); the allocating warp deallocates")
        elif kind == K_RELINQUISH:  # every allocation of the CTA must happen before it (PTX ISA 9.0 §9.7.16.7.1)
            for warp, _n, owner, idx, seq in self._allocs:
                if owner != w.idx and k.vc.get((GEN, owner), 0) < seq:
                    self._hazard("tmem-alloc-after-relinquish", self._rec(owner, idx), me,
                                 f"no synchronisation orders {self.fmt(owner, idx)} of warp {warp} before {w.name}'s "
                                 "relinquish_alloc_permit: in another schedule the allocation comes after it")
        # K_INIT, K_INVAL (above): the engine reports what their state machines refuse (on_violation)

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
        phase: (warp, record, own signals at the reference point, own signals at the wait, phase it passed on,
        phantom). A re-wait of a consumed phase is wrong when the next phase waits on a signal the warp made between
        consuming it and the re-wait; one that depends only on signals made after the re-wait (a re-wait before the
        warp's own release) always sees the same phase again: legal."""
        for w, i, signals, upto, observed, phantom in checks:
            me = (w.role, w.warp, i)
            made = carried.get((EV, w.idx), 0)
            depends = made > signals if phantom else signals < made <= upto
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
        if not w.ops[i].rec.token:  # a token names its phase: it cannot alias one two phases back
            prev = k.consumed.get(bar)
            if observed < 0:
                self._parity.setdefault(bar, []).append((w, i, k.ev, k.ev, observed, True))
            elif prev is not None and prev[0] == observed and k.ev > prev[1]:
                self._parity.setdefault(bar, []).append((w, i, prev[1], k.ev, observed, False))
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
        count = (self._nbar_count.pop(bar_id, None) or (None,))[0]
        n = self._releases.get(bar_id, 0)
        self._releases[bar_id] = n + 1
        name = f"elect.sync w{bar_id[1]}" if isinstance(bar_id, tuple) else f"bar {bar_id}"
        self.signals += [Signal(owner, index, name, n, vc) for owner, index, vc in nb[2]]
        if not isinstance(bar_id, tuple):  # the generation just released: its count, its warps, and the signal
            ids = {w.idx for w in waiters}  # number of each waiter's arrival (what it does next knows the release)
            first = nb[2][0]
            self._nbar_last[bar_id] = (count, {o for o, _i, _vc in nb[2]},
                                       {o: vc.get((EV, o), 0) for o, _i, vc in nb[2] if o in ids},
                                       self._rec(first[0], first[1]))
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
        """A state machine of the engine refused something (reported as it is). The engine's thread-count check of
        a named barrier spans the whole run; the checker's own spans one generation (a count may change between
        generations, PTX ISA 9.0 §9.7.13.1): the engine's report stands for an arrival whose generation mixes
        counts, and is left out otherwise."""
        if rule == "named-barrier-count-mismatch" and second not in self._mixed:
            return
        self._now = cycle
        self._hazard(rule, first, second, message)

    def on_start(self, cycle: int, barriers) -> None:
        """The run starts; ``barriers``: the mbarriers of the Program's table (initialised before the roles)."""
        self._now = cycle
        self.table = set(barriers)
        self._live = dict.fromkeys(self.table)
        self._fresh = {op.bar for a in self.warps for op in a.ops if op.kind == K_INIT and op.bar in self.table}

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
