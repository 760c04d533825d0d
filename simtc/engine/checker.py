"""The hazard checker: an observer of a run's accesses and synchronisations (rules in :mod:`simtc.engine.hazards`).

The engine tells its observers what happens, in simulated-time order; the checker keeps what each warp
*knows* to have completed (a vector clock over every warp's asynchronous operations) and flags a read,
write or overwrite that the issuing warp cannot know is safe, however the timing fell:

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
  tx underflow, an uninitialised barrier, an allocation error, a deadlock).

A ``tcgen05`` operation may rely only on knowledge that crossed a thread sync between
``tcgen05.fence::before_thread_sync`` and ``tcgen05.fence::after_thread_sync``. A warp knows that its
``wgmma.mma_async`` (and their shared-memory operand reads) completed once a ``wgmma.wait_group`` has retired
their commit group.

The checker needs no engine: :class:`CheckLog` records the calls of a run (``Engine(..., observers=[log])``)
and :meth:`HazardChecker.replay` runs a fresh checker over the recording -- the same hazards as a live check.
"""

from __future__ import annotations

from simtc.engine.hazards import Hazard
from simtc.engine.ops import (
    K_ARRIVE,
    K_ARRIVE_TX,
    K_BAR_ARRIVE,
    K_BAR_SYNC,
    K_BULK_COMMIT,
    K_BULK_WAIT,
    K_COMMIT,
    K_CP,
    K_CUDA,
    K_FENCE_AFTER,
    K_FENCE_BEFORE,
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

__all__ = ["BULK", "GEN", "LD", "ST", "TC", "TMA", "CheckLog", "HazardChecker"]

# knowledge-domain tags (keys of the vector clocks are (tag, warp) or (tag, warp, barrier))
TC, LD, ST, GEN, TMA, BULK = "tc", "ld", "st", "gen", "tma", "bulk"


def _join(dst: dict, src: dict) -> None:
    if not dst:
        dst.update(src)
        return
    get = dst.get
    for k, v in src.items():
        if v > get(k, 0):
            dst[k] = v


class _Knows:
    """What one warp knows, and its own sequence counters."""

    __slots__ = ("bulk_groups", "bulk_seq", "consumed", "fenced_gen", "gen_seq", "ld_seq", "pend", "pub",
                 "regs_pending", "st_seq", "tc", "tc_seq", "tma_seq", "vc", "wg_groups")

    def __init__(self):
        self.vc: dict = {}
        self.tc: dict = {}
        self.pend: dict = {}
        self.pub: dict = {}
        self.tc_seq = self.ld_seq = self.st_seq = self.gen_seq = self.fenced_gen = self.bulk_seq = 0
        self.regs_pending: dict[str, int] = {}
        self.consumed: dict[str, int] = {}
        self.tma_seq: dict[str, int] = {}
        self.bulk_groups: list[int] = []
        self.wg_groups: list[int] = []  # the warp's tensor-op sequence number at each wgmma.commit_group


def _smem_keys(vc: dict) -> dict:
    """The shared-memory writes (generic stores, TMA loads) among what a thread sync makes known."""
    return {k: v for k, v in vc.items() if k[0] in (GEN, TMA)}


class HazardChecker:
    """A happens-before checker over one run (see the module text).

    ``warps`` are the engine's warps (``idx``, ``role``, ``warp``, ``ops`` with the compiled records);
    ``index`` holds the interned footprints: ``rect_of``, ``rect_over``, ``range_over_w``, ``range_over_r``;
    ``allocations`` is the live TMEM allocation table (start -> columns) or None when the Program
    allocates nothing.
    """

    def __init__(self, warps, index, allocations=None):
        self.warps = warps
        self.rect_of = index.rect_of
        self.rect_over = index.rect_over
        self.range_over_w = index.range_over_w
        self.range_over_r = index.range_over_r
        self.allocations = allocations
        self.knows = [_Knows() for _ in warps]
        self.hazards: list[Hazard] = []
        self._keys: set = set()
        self._now = 0
        self._mbar: dict[str, list[dict]] = {}  # name -> [cur_vc, cur_tc, done_vc, done_tc]
        self._carried: dict[int, tuple[dict, dict]] = {}  # arrival token -> (vc, tc) it carries
        self._nbar: dict[int, list[dict]] = {}  # id -> [vc, tc]
        self.tmem_w: dict = {}
        self.tmem_r: dict = {}
        self.smem_w: dict = {}
        self.smem_r: dict = {}

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

    def _known(self, k: _Knows, name: str, key, seq: int, tcgen05: bool, rule: str, first, second,
               what: str) -> None:
        if tcgen05:
            if k.tc.get(key, 0) >= seq:
                return
            if k.vc.get(key, 0) >= seq:
                if k.pend.get(key, 0) >= seq:
                    self._hazard("missing-after-thread-sync-fence", first, second,
                                 f"{name} learned through a thread sync that {what} completed, but issues this "
                                 "tcgen05 operation without tcgen05.fence::after_thread_sync after the sync")
                else:
                    self._hazard("missing-before-thread-sync-fence", first, second,
                                 f"{what} was published to {name} by a thread sync without "
                                 "tcgen05.fence::before_thread_sync before the arrive")
                return
        elif k.vc.get(key, 0) >= seq:
            return
        self._hazard(rule, first, second, f"{name} cannot know that {what} has completed")

    # ------------------------------------------------------------------ memory accesses
    def _tmem_read(self, w, i: int, rects, unit_tc: bool) -> None:
        k = self.knows[w.idx]
        me = (w.role, w.warp, i)
        for q in rects:
            for r in self.rect_over[q]:
                hit = self.tmem_w.get(r)
                if hit is None:
                    continue
                key, seq, owner, idx = hit
                tag = key[0]
                if owner == w.idx and ((tag == TC and unit_tc) or (tag == ST and not unit_tc)):
                    continue  # same thread's in-order tensor pipe / same warp's TMEM path
                if k.tc.get(key, 0) >= seq:
                    continue
                if tag == ST:
                    rule, what = "tmem-read-before-wait-st", f"the tcgen05.st {self.fmt(owner, idx)}"
                else:
                    rule, what = "tmem-read-before-commit", f"the MMA/cp {self.fmt(owner, idx)} writing this TMEM"
                self._known(k, w.name, key, seq, True, rule, self._rec(owner, idx), me, what)

    def _tmem_write(self, w, i: int, rects, key, seq, unit_tc: bool) -> None:
        k = self.knows[w.idx]
        me = (w.role, w.warp, i)
        for q in rects:
            for r in self.rect_over[q]:
                readers = self.tmem_r.get(r)
                if readers:
                    for rkey, (rseq, owner, idx) in readers.items():
                        if k.tc.get(rkey, 0) >= rseq:
                            continue
                        if owner == w.idx and rkey[0] == TC and unit_tc:
                            continue
                        self._known(k, w.name, rkey, rseq, True, "tmem-overwrite-in-flight", self._rec(owner, idx),
                                    me, f"the TMEM read {self.fmt(owner, idx)}")
                hit = self.tmem_w.get(r)
                if hit is not None:
                    wkey, wseq, owner, idx = hit
                    if owner == w.idx and ((wkey[0] == TC and unit_tc) or (wkey[0] == ST and not unit_tc)):
                        pass
                    elif k.tc.get(wkey, 0) < wseq:
                        self._known(k, w.name, wkey, wseq, True, "tmem-overwrite-in-flight", self._rec(owner, idx),
                                    me, f"the TMEM write {self.fmt(owner, idx)}")
            self.tmem_w[q] = (key, seq, w.idx, i)

    def _tmem_add_reader(self, w, i: int, rects, key, seq) -> None:
        for q in rects:
            d = self.tmem_r.get(q)
            if d is None:
                d = self.tmem_r[q] = {}
            d[key] = (seq, w.idx, i)

    def _smem_read(self, w, i: int, ranges, async_proxy: bool, tcgen05: bool = False) -> None:
        """A read of shared memory: each write it overlaps must be known complete. ``tcgen05`` (an MMA or
        tcgen05.cp reading its operands): shared-memory data another warp wrote (st.shared) or loaded (TMA), learned
        through a thread sync (an mbarrier wait, a named barrier), is usable only after
        tcgen05.fence::after_thread_sync (PTX ISA 9.0 §9.7.16.6.4)."""
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
                if key[0] == GEN:
                    if async_proxy and self.knows[owner].fenced_gen < seq:
                        self._hazard("missing-proxy-fence", self._rec(owner, idx), me,
                                     f"st.shared {self.fmt(owner, idx)} is read by the async proxy without "
                                     "fence.proxy.async in the writing warp")
                    if owner == w.idx:
                        continue
                if vc_get(key, 0) < seq:
                    what = f"the {'st.shared' if key[0] == GEN else 'TMA load'} {self.fmt(owner, idx)}"
                    self._hazard("smem-read-before-complete", self._rec(owner, idx), me,
                                 f"{w.name} cannot know that {what} has completed")
                elif (tcgen05 and (key[0] == TMA or owner != w.idx) and k.tc.get(key, 0) < seq
                      and k.pend.get(key, 0) >= seq):
                    what = f"the {'st.shared' if key[0] == GEN else 'TMA load'} {self.fmt(owner, idx)}"
                    self._hazard("missing-after-thread-sync-fence", self._rec(owner, idx), me,
                                 f"{w.name} learned through a thread sync that {what} completed, but issues this "
                                 "tcgen05 operation on its data without tcgen05.fence::after_thread_sync after "
                                 "the sync")

    def _smem_write(self, w, i: int, ranges, key, seq) -> None:
        k = self.knows[w.idx]
        me = (w.role, w.warp, i)
        get, vc_get = self.smem_r.get, k.vc.get
        for q in ranges:
            for r in self.range_over_r[q]:
                readers = get(r)
                if readers:
                    for rkey, (rseq, owner, idx) in readers.items():
                        if vc_get(rkey, 0) < rseq:
                            self._hazard("smem-overwrite-in-flight", self._rec(owner, idx), me,
                                         f"{w.name} cannot know that the async read {self.fmt(owner, idx)} of "
                                         "this shared memory has completed")
            self.smem_w[q] = (key, seq, w.idx, i)

    def _smem_add_reader(self, w, i: int, ranges, key, seq) -> None:
        for q in ranges:
            d = self.smem_r.get(q)
            if d is None:
                d = self.smem_r[q] = {}
            d[key] = (seq, w.idx, i)

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
    def on_issue(self, cycle: int, w, i: int, op, token: int | None = None) -> None:
        """Warp ``w`` issues its record ``i`` (``token``: the id of the arrival it will make, if any)."""
        self._now = cycle
        k = self.knows[w.idx]
        me = (w.role, w.warp, i)
        if op.regs_r and k.regs_pending:
            for reg in op.regs_r:
                s = k.regs_pending.get(reg)
                if s is not None and k.vc.get((LD, w.idx), 0) < s:
                    self._hazard("ld-regs-before-wait", me, me,
                                 f"register {reg} written by a tcgen05.ld not yet waited (wait::ld)")
        if op.quad_bad:
            self._hazard("lane-quadrant", None, me, op.quad_bad)
        kind = op.kind
        if kind == K_ST_SHARED:
            k.gen_seq += 1
            k.vc[(GEN, w.idx)] = k.gen_seq
            self._smem_write(w, i, op.smem_w, (GEN, w.idx), k.gen_seq)
        elif kind == K_LD_SHARED:
            self._smem_read(w, i, op.smem_r, False)
        elif kind == K_TMA_LOAD:
            s = k.tma_seq.get(op.bar, 0) + 1
            k.tma_seq[op.bar] = s
            key = (TMA, w.idx, op.bar)
            self._smem_write(w, i, op.smem_w, key, s)
            self._carried[token] = ({key: s}, {key: s})
        elif kind in (K_MMA, K_CP, K_WGMMA):
            k.tc_seq += 1
            key = (TC, w.idx)
            if op.smem_r:
                self._smem_read(w, i, op.smem_r, True, tcgen05=kind != K_WGMMA)
                self._smem_add_reader(w, i, op.smem_r, key, k.tc_seq)
            if op.tmem_r:
                self._tmem_read(w, i, op.tmem_r, True)
                self._tmem_add_reader(w, i, op.tmem_r, key, k.tc_seq)
            if op.tmem_w:
                self._tmem_write(w, i, op.tmem_w, key, k.tc_seq, True)
            self._check_alloc(op, me)
        elif kind in (K_ARRIVE, K_ARRIVE_TX):
            k.vc[(GEN, w.idx)] = k.gen_seq
            self._carried[token] = (dict(k.vc), dict(k.pub))
        elif kind == K_CUDA:
            if op.smem_r:
                self._smem_read(w, i, op.smem_r, False)
            if op.smem_w:
                k.gen_seq += 1
                k.vc[(GEN, w.idx)] = k.gen_seq
                self._smem_write(w, i, op.smem_w, (GEN, w.idx), k.gen_seq)
            for reg in op.regs_w:
                k.regs_pending.pop(reg, None)
        elif kind in (K_BAR_SYNC, K_BAR_ARRIVE):
            k.vc[(GEN, w.idx)] = k.gen_seq
            nb = self._nbar.get(op.arg[0])
            if nb is None:
                nb = self._nbar[op.arg[0]] = [{}, {}]
            _join(nb[0], k.vc)
            _join(nb[1], k.pub)
        elif kind == K_LD:
            k.ld_seq += 1
            self._tmem_read(w, i, op.tmem_r, False)
            self._tmem_add_reader(w, i, op.tmem_r, (LD, w.idx), k.ld_seq)
            for reg in op.regs_w:
                k.regs_pending[reg] = k.ld_seq
            self._check_alloc(op, me)
        elif kind == K_ST:
            k.st_seq += 1
            self._tmem_write(w, i, op.tmem_w, (ST, w.idx), k.st_seq, False)
            self._check_alloc(op, me)
        elif kind == K_PROXY_FENCE:
            k.fenced_gen = k.gen_seq
        elif kind == K_FENCE_AFTER:
            _join(k.tc, k.pend)
            k.pend = {}
        elif kind == K_FENCE_BEFORE:
            k.pub = dict(k.tc)
        elif kind in (K_WAIT_LD, K_WAIT_ST):
            key = (LD, w.idx) if kind == K_WAIT_LD else (ST, w.idx)
            k.vc[key] = k.tc[key] = k.ld_seq if kind == K_WAIT_LD else k.st_seq
            if kind == K_WAIT_LD:
                k.regs_pending.clear()
        elif kind == K_COMMIT:
            know = {(TC, w.idx): k.tc_seq}
            tc = dict(k.tc)
            tc.update(know)
            vc = dict(k.vc)
            vc.update(know)
            self._carried[token] = (vc, tc)
        elif kind == K_TMA_STORE:
            k.bulk_seq += 1
            self._smem_read(w, i, op.smem_r, True)
            self._smem_add_reader(w, i, op.smem_r, (BULK, w.idx), k.bulk_seq)
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
        # K_INIT, K_ALLOC, K_DEALLOC: the engine reports what their state machines refuse (on_violation)

    def on_arrival(self, cycle: int, bar: str, token: int) -> None:
        """The arrival ``token`` lands on mbarrier ``bar`` with what its record's issue knew."""
        knowledge = self._carried.pop(token, None)
        if knowledge is None:
            return
        mb = self._mbar.get(bar)
        if mb is None:
            mb = self._mbar[bar] = [{}, {}, {}, {}]
        vc, tc = knowledge
        if vc:
            _join(mb[0], vc)
        if tc:
            _join(mb[1], tc)

    def on_phase(self, cycle: int, bar: str) -> None:
        """Mbarrier ``bar`` completed a phase: what its arrivals carried becomes what a waiter learns."""
        mb = self._mbar.get(bar)
        if mb is None:
            mb = self._mbar[bar] = [{}, {}, {}, {}]
        _join(mb[2], mb[0])
        _join(mb[3], mb[1])
        mb[0], mb[1] = {}, {}

    def on_wait(self, cycle: int, w, i: int, bar: str, observed: int) -> None:
        """Warp ``w``'s ``try_wait`` (record ``i``) passed on phase ``observed`` of ``bar``."""
        self._now = cycle
        k = self.knows[w.idx]
        me = (w.role, w.warp, i)
        prev = k.consumed.get(bar)
        if prev is not None and prev == observed and observed >= 0:
            parity = w.ops[i].rec.parity
            self._hazard("mbarrier-wrong-parity", me, me,
                         f"try_wait.parity {parity} on {bar} passed on phase {observed}, which this warp already "
                         "consumed (parity not flipped)")
        k.consumed[bar] = observed
        if observed >= 0:
            mb = self._mbar.get(bar)
            if mb is not None:
                _join(k.vc, mb[2])
                _join(k.pend, mb[3])
                _join(k.pend, _smem_keys(mb[2]))  # shared-memory data learned here: a tcgen05 op needs the fence

    def on_release(self, cycle: int, bar_id: int, waiters) -> None:
        """Named barrier ``bar_id`` releases ``waiters`` (warps)."""
        nb = self._nbar.pop(bar_id, None)
        if nb is None:
            return
        for w in waiters:
            k = self.knows[w.idx]
            _join(k.vc, nb[0])
            _join(k.pend, nb[1])
            _join(k.pend, _smem_keys(nb[0]))

    def on_violation(self, cycle: int, rule: str, first, second, message: str) -> None:
        """A state machine of the engine refused something (reported as it is)."""
        self._now = cycle
        self._hazard(rule, first, second, message)

    def on_end(self, cycle: int) -> None:
        self._now = cycle

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
