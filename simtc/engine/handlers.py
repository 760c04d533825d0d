"""What each kind of record costs and when it completes: one short handler per kind.

A handler is called when a warp issues the record (cycle ``now``; ``ev`` is the trace index of the issue
event). It books the units the record uses and returns how many cycles the warp is held before its next
record (an ``int``: one for most records), or a generator the warp runs to the end when the record blocks
(a wait, a barrier, a CUDA-core block that issues in slices). Asynchronous work completes through the
engine's callbacks (:meth:`~simtc.engine.core.Engine.complete_at`, :meth:`~simtc.engine.core.Engine.arrive_at`).

=======================================  =====================================================================
record                                   handler
=======================================  =====================================================================
``ld.shared`` / ``st.shared``            :func:`ld_shared` / :func:`st_shared`: wavefronts on the port
``cuda_core`` block                      :func:`cuda_core`: slices on the sub-partition, LDS/STS, LDG/STG
``cp.async.bulk.tensor`` (load)          :func:`tma_load`: copy engine -> memory -> port -> ``complete_tx``
TMA store / bulk copy                    :func:`tma_store`: copy engine, port read, memory write
``tcgen05.mma`` / ``wgmma``              :func:`mma`: the tensor pipe (operands on the port)
``tcgen05.cp``                           :func:`cp`: the tensor pipe, source bytes on the port
``tcgen05.commit``                       :func:`commit`: arrives once the thread's earlier ops completed
``tcgen05.ld`` / ``tcgen05.st``          :func:`tmem_access`: the TMEM path
``tcgen05.wait::ld`` / ``::st``          :func:`wait_tmem`: until the warp's loads / stores completed
``mbarrier.arrive[.expect_tx]``          :func:`arrive`: lands ``mbarrier_arrive`` later, after the stores
``mbarrier.try_wait.parity``             :func:`try_wait`: until the phase of that parity completed
``bar.sync`` / ``bar.arrive``            :func:`named_barrier`: released after the last (+ per warp)
``fence.proxy.async``                    :func:`proxy_fence`: holds the warp ``proxy_fence`` cycles
``mbarrier.init``, allocs, fences ...    one issue cycle (:func:`init`, :func:`alloc`, :func:`one_cycle`)
``mbarrier.inval``                       :func:`inval`: one issue cycle; the object is no mbarrier any more
``elect.sync``                           :func:`elect_sync`: the n-th elect.sync of every role on the CTA warp meet
``tcgen05.shift``                        :func:`shift`: the tensor pipe (32 B per lane through the TMEM path)
=======================================  =====================================================================

``mbarrier.inval``, ``elect.sync`` and ``tcgen05.shift`` (kinds :data:`simtc.engine.ops.K_INVAL`, ``K_ELECT``,
``K_SHIFT``) are modelled by this module's handlers and the checker only (the semantics layer computes nothing for
them).
"""

from __future__ import annotations

from simtc.engine import ops as k

__all__ = ["HANDLERS", "K_ELECT", "K_INVAL", "K_SHIFT", "READS", "cached_l1", "parameters_of"]

K_INVAL, K_ELECT, K_SHIFT = k.K_INVAL, k.K_ELECT, k.K_SHIFT


def one_cycle(eng, w, op, i, now, ev) -> int:
    """tcgen05 fences and other records that only take their issue cycle."""
    return 1


def proxy_fence(eng, w, op, i, now, ev) -> int:
    """``fence.proxy.async``: holds the warp ``proxy_fence`` cycles (measured on the H200)."""
    return max(1, eng.c["proxy_fence"])


# ---- shared memory ----------------------------------------------------------------------------------
def ld_shared(eng, w, op, i, now, ev) -> int:
    """Wavefronts on the port; the loaded registers are ready ``smem_ld_latency`` after the data left it."""
    end = eng.port.transfer(now, op.wavefronts, "ldst", w.idx)
    ready = end + eng.c["smem_ld_latency"]
    for r in op.regs_w:
        w.ready[r] = ready
    return 1


def st_shared(eng, w, op, i, now, ev) -> int:
    """Wavefronts on the port; the store is visible to a barrier ``smem_st_visibility`` after it left it."""
    end = eng.port.transfer(now, op.wavefronts, "ldst", w.idx) + eng.c["smem_st_visibility"]
    if end > w.store_visible:
        w.store_visible = end
    return 1


def cached_l1(eng, inputs_in_l2: bool | None = None):
    """The engine's L1 as :class:`simtc.engine.l1.CachedL1` (tag stores over the L1 and L2,
    :class:`~simtc.engine.l1.GlobalCaches`), put in place of its plain miss path (keeping what that booked) the first
    time a block with known sectors runs, or by the caller beforehand. The L1 holds what the unified cache leaves
    beside the Program's ``shared_bytes`` (its ``meta``; :func:`~simtc.engine.l1.l1_capacity`); L2 holds the launch's
    data at the start when ``inputs_in_l2`` (default: the Program's ``meta`` ``inputs_in_l2``, else no)."""
    from simtc.engine.l1 import CachedL1, GlobalCaches, l1_capacity

    l1 = eng.l1
    if isinstance(l1, CachedL1) and inputs_in_l2 is None:
        return l1
    meta = dict(eng.program.meta)
    if inputs_in_l2 is None:
        inputs_in_l2 = bool(meta.get("inputs_in_l2", 0))
    caches = GlobalCaches(l1_capacity(eng.arch, int(meta.get("shared_bytes", 0))), inputs_in_l2)
    new = CachedL1(eng.timing, caches, eng.memory)
    new.server = l1.server
    eng.l1 = new
    eng.__dict__.setdefault("load_levels", {})
    return new


def cuda_core(eng, w, op, i, now):
    """A block of CUDA-core work: its slices on the sub-partition (issue slot and pipes), its LDS/STS on the
    port, its LDG/STG in the memory system (a load's data then crosses the port too: L1 and shared memory are
    one data pipe); the warp goes on when the slices are done and its dependent chain
    has run; the registers it writes are ready then (or when its loads are back, if they are not on the chain).
    A block whose loads' and stores' sectors are known (``gmem_loads`` / ``gmem_stores``: a recorded kernel's) has
    them looked up in the L1 and L2 (:func:`cached_l1`); the farthest level its loads reached is kept in the
    engine's ``load_levels`` under ``(warp, record index)``."""
    cost = op.cost
    env = eng.sched.env
    sp, port, n = w.sp, eng.port, cost.slices
    start = mem_done = 0
    rec = op.rec
    planned = bool(rec.gmem_loads or rec.gmem_stores)
    for s in range(n):
        t0, end = sp.slice(env.now, cost, s)
        if s == 0:
            if t0 > env.now:
                yield env.timeout(t0 - env.now)
            start = t0
            eng.issued(w, i, op, t0)
            if eng.mode == "semantics":
                eng.execute(op.rec, w)
            if planned:
                l1 = cached_l1(eng)
                if len(rec.gmem_loads) != len(cost.loads) or len(rec.gmem_stores) != len(cost.stores):
                    raise k.EngineError(f"{rec.name}: {len(rec.gmem_loads)} load and {len(rec.gmem_stores)} store "
                                      f"sector lists for {len(cost.loads)} LDG and {len(cost.stores)} STG",
                                      rule="a block's gmem_loads / gmem_stores follow its LDG / STG counts")
                l1.start(*rec.sectors, t0)
            for nbytes, rows, lines, wavefronts in cost.loads:
                # out through the L1's miss path (per line), to L2/HBM, back through the L1 data pipe (the SM's
                # port: the load's wavefronts, simtc.engine.l1.load_wavefronts)
                sent = eng.l1.book(t0, lines)
                back = eng.memory.request(sent, nbytes, rows, ldg=True)
                done = port.transfer(back, wavefronts, "ldst", w.idx)
                if done > mem_done:
                    mem_done = done
            for nbytes, rows, _, _ in cost.stores:
                eng.memory.request(t0, nbytes, rows, write=True, ldg=True)
            if planned and rec.gmem_loads:
                eng.load_levels[(w.warp, i)] = eng.l1.block_level
        wf = cost.wavefronts * (s + 1) // n - cost.wavefronts * s // n
        if wf:
            e = port.transfer(t0, wf, "ldst", w.idx)
            if e > end:
                end = e
            if op.smem_w:
                vis = e + eng.c["smem_st_visibility"]
                if vis > w.store_visible:
                    w.store_visible = vis
        if end > env.now:
            w.busy += end - env.now
            yield env.timeout(end - env.now)
    chain_end = (mem_done if cost.chain_loads else start) + cost.chain
    if chain_end > env.now:
        w.busy += chain_end - env.now
        yield env.timeout(chain_end - env.now)
    ready = max(env.now, mem_done)
    for r in op.regs_w:
        w.ready[r] = ready


# ---- the copy engine ----------------------------------------------------------------------------------
def tma_load(eng, w, op, i, now, ev) -> int:
    """The thread is held ``tma_issue_gap``; copy engine -> memory -> port; ``complete_tx`` on the mbarrier when
    the last byte is written."""
    done = eng.copy.load(now, op.rec, w.idx)
    eng.tma_complete_at(done, w, op, i, ev, eng.token)
    return max(1, eng.copy.gap)


def tma_store(eng, w, op, i, now, ev) -> int:
    """The thread is held ``tma_issue_gap``; the source is read through the port (what ``wait_group.read``
    waits for), then written to memory. A warp that is not the store's ``issuing_warp`` skips it (its branch
    around the store: one issue cycle)."""
    if not op.rec.issued_by(w.warp):
        return 1
    read, written = eng.copy.store(now, op.rec.nbytes, getattr(op.rec, "tensor", ""), w.idx)
    w.bulk_open = max(w.bulk_open, read)
    eng.complete_at(written, w, op, i, ev)
    return max(1, eng.copy.gap)


def bulk_commit(eng, w, op, i, now, ev) -> int:
    w.bulk_groups.append(w.bulk_open)
    w.bulk_open = 0
    return 1


def _wait_groups(eng, w, i, now, attr: str, n: int, why: str):
    """Wait until all but the last ``n`` of the warp's committed groups (``w.<attr>``: their completion cycles) are
    done, and forget them."""
    groups = getattr(w, attr)
    done = groups[:-n] if n else groups
    if not done:
        return 1
    setattr(w, attr, groups[len(done):])
    t = max(done)
    return w.wait_until(eng, i, t, why) if t > now + 1 else 1


def bulk_wait(eng, w, op, i, now, ev):
    """``cp.async.bulk.wait_group.read n``: until all but the last ``n`` committed groups have read their source."""
    return _wait_groups(eng, w, i, now, "bulk_groups", op.arg, "wait_group.read")


# ---- the tensor pipe ------------------------------------------------------------------------------------
def mma(eng, w, op, i, now, ev) -> int:
    """The tensor pipe: enter in order, operands through the port, complete after the latency."""
    eng.tensor_issued(w, op, i, ev, eng.pipe.mma(now, op.rec, w.idx))
    return 1


def cp(eng, w, op, i, now, ev) -> int:
    """``tcgen05.cp``: the tensor pipe, the source bytes through the port."""
    eng.tensor_issued(w, op, i, ev, eng.pipe.cp(now, op.rec.nbytes, w.idx))
    return 1


def shift(eng, w, op, i, now, ev) -> int:
    """``tcgen05.shift``: the tensor pipe, like a ``tcgen05.cp`` of the bytes it moves (32 per lane) [assumed: no
    measurement of tcgen05.shift; PTX ISA 9.0 §9.7.16.9.3 calls it asynchronous, tracked by tcgen05.commit]."""
    eng.tensor_issued(w, op, i, ev, eng.pipe.cp(now, op.rec.nbytes, w.idx))
    return 1


def wgmma(eng, w, op, i, now, ev):
    """``wgmma.mma_async``: the first warp of the warpgroup to issue it enqueues it; the others share it. A warp
    with ``wgmma_max_outstanding`` in flight stalls until the oldest completes."""
    inflight = [t for t in w.wg_inflight if t > now]
    w.wg_inflight = inflight
    limit = eng.c["wgmma_max_outstanding"]
    w.wg_count += 1
    gkey = (w.warp // 4, w.wg_count)
    entry = eng.wg_ops.get(gkey)
    if entry is not None:
        done = entry[0]
        entry[1] -= 1
        if entry[1] <= 0:
            del eng.wg_ops[gkey]
    else:
        flight = eng.pipe.mma(now, op.rec, w.idx)
        eng.unit_ops[w.idx, i] = (flight.start, flight.free)
        done = flight.done
        members = eng.warpgroup_members(w)
        if members > 1:
            eng.wg_ops[gkey] = [done, members - 1]
        eng.complete_at(done, w, op, i, ev if flight.start <= now + eng.c["wgmma_issue"] else eng.pipe_last_ev,
                        "tensor_pipe")
    w.wg_open = max(w.wg_open, done)
    inflight.append(done)
    if len(inflight) > limit:
        oldest = min(inflight)
        return w.wait_until(eng, i, oldest, "wgmma in flight")
    return 1


def wgmma_commit(eng, w, op, i, now, ev) -> int:
    w.wg_groups.append(w.wg_open)
    w.wg_open = 0
    return 1


def wgmma_wait(eng, w, op, i, now, ev):
    """``wgmma.wait_group n``: until all but the last ``n`` committed groups completed."""
    return _wait_groups(eng, w, i, now, "wg_groups", op.arg, "wgmma.wait_group")


def commit(eng, w, op, i, now, ev) -> int:
    """``tcgen05.commit``: arrives on its mbarrier ``commit_arrive`` after every earlier asynchronous tcgen05
    operation of the thread completed (PTX ISA 9.0 §9.7.16.12.1)."""
    last = max((f.done for f in w.tc_flights(now)), default=now)
    t = max(now, last) + eng.c["commit_arrive"]
    dep = w.tc_last_ev if last > now else ev
    eng.arrive_at(t, op, w, i, dep, eng.token, 1, "commit")
    return 1


# ---- the TMEM path ------------------------------------------------------------------------------------
def tmem_access(eng, w, op, i, now, ev) -> int:
    """``tcgen05.ld`` / ``tcgen05.st`` on the TMEM path; a load's registers are ready when it completes."""
    load = op.kind == k.K_LD
    done = eng.tmem.access(now, op.cells, load, w.idx)
    eng.unit_ops[w.idx, i] = eng.tmem.last
    if load:
        if done > w.ld_last:
            w.ld_last = done
        for r in op.regs_w:
            w.ready[r] = done
    elif done > w.st_last:
        w.st_last = done
    eng.complete_at(done, w, op, i, ev, "tmem_path")
    return 1


def wait_tmem(eng, w, op, i, now, ev):
    """``tcgen05.wait::ld`` / ``::st``: until the warp's earlier loads / stores completed."""
    load = op.kind == k.K_WAIT_LD
    last = w.ld_last if load else w.st_last
    if last > now + 1:
        return w.wait_until(eng, i, last, "wait::ld" if load else "wait::st", eng.last_complete_ev(w))
    return 1


# ---- barriers -------------------------------------------------------------------------------------------
def arrive(eng, w, op, i, now, ev) -> int:
    """``mbarrier.arrive`` (``.expect_tx``): lands ``mbarrier_arrive`` after issue, and not before this warp's
    shared-memory stores are visible (the arrive releases them)."""
    t = max(now, w.store_visible) + eng.c["mbarrier_arrive"]
    mb = eng.mbars[op.bar]
    _barrier_memory(eng)
    if op.rec.state:  # the token: the phase the arrival counts towards [assumed: read at issue, it lands at t]
        mb.tokens[w.idx, op.rec.state] = mb.st.phase
    if op.kind == k.K_ARRIVE:
        eng.arrive_at(t, op, w, i, ev, eng.token, op.rec.count * (1 if op.rec.elected else w.threads), "arrive")
    else:
        eng.arrive_at(t, op, w, i, ev, eng.token, 1, f"arrive.expect_tx {op.rec.tx_bytes} B", tx=op.rec.tx_bytes)
    return 1


def try_wait(eng, w, op, i, now, ev):
    """``mbarrier.try_wait``: until the phase of that parity has completed, or (a state token) the phase the token
    names; the warp sees it ``mbarrier_try_wait`` later."""
    mb = eng.mbars[op.bar]
    st = mb.st
    _barrier_memory(eng)
    if not st.initialized:
        eng.violation("mbarrier-uninitialized", None, (w.role, w.warp, i),
                      f"try_wait on {st.name} before mbarrier.init")
    token = op.rec.token
    if token:
        phase = mb.tokens.get((w.idx, token), st.phase)
        parity = phase & 1  # the phase after it is the first whose completion passes (PTX ISA 9.0 §9.7.13.15.16)
        passed = st.phase > phase
    else:
        parity = op.rec.parity
        passed = st.passes(parity)
    if not passed:
        w.block(eng, i, f"{st.name} {'token ' + token if token else f'parity {parity}'} (phase {st.phase})")
        evt = eng.sched.event()
        mb.waiters.append((parity, evt, w))
        dep = yield evt
        w.unblock(eng, i, dep)
    # the phase it passed on (-1: the fresh barrier's phantom phase); a token names its own
    eng.observed(w, i, op.bar, phase if token else st.phase - 1)
    d = eng.c["mbarrier_try_wait"]
    w.busy += d
    yield eng.sched.sleep(d)


def named_barrier(eng, w, op, i, now, ev):
    """``bar.sync`` / ``bar.arrive``: the arrival counts once the warp's stores are visible; the barrier releases
    its waiters ``named_barrier_release + named_barrier_per_warp x warps`` after its last arrival; ``bar.arrive``
    holds the warp ``named_barrier_arrive``."""
    sync = op.kind == k.K_BAR_SYNC
    released = eng.named_arrive(w, op, i, ev, sync)
    if not sync:
        d = eng.c["named_barrier_arrive"]
        w.busy += d
        yield eng.sched.sleep(d)
        return
    evt = released
    if not evt.triggered:
        w.block(eng, i, f"bar {op.arg[0]} ({op.arg[1]} threads)")
        dep = yield evt
        w.unblock(eng, i, dep)
    else:
        yield evt


def init(eng, w, op, i, now, ev) -> int:
    """``mbarrier.init``: the state machine starts anew (the checker judges an init of a barrier still valid,
    ``mbarrier-init-in-use``)."""
    _barrier_memory(eng)
    eng.mbars[op.bar].st.init(op.rec.count)
    return 1


def inval(eng, w, op, i, now, ev) -> int:
    """``mbarrier.inval``: the object is no mbarrier any more (PTX ISA 9.0 §9.7.13.15.10); its state machine stays
    as it was, so a run that goes on using it (a bug the checker reports) keeps its timing."""
    _barrier_memory(eng)
    eng.mbars[op.bar].st.invalidated = True
    return 1


def _barrier_memory(eng) -> None:
    """Tell the observers where the table's mbarrier objects lie (once, at the first barrier record): the 8 bytes no
    other write may touch while the barrier is valid (PTX ISA 9.0 §9.7.13.15.1, §9.7.13.15.10)."""
    if "_barrier_memory" in eng.__dict__:
        return
    spans = eng.__dict__["_barrier_memory"] = {name: (mb.decl.addr, mb.decl.addr + 8) for name, mb in eng.mbars.items()
                                               if mb.decl is not None and mb.decl.addr is not None}
    if spans:
        for o in eng.observers:
            tell = getattr(o, "on_barrier_memory", None)
            if tell is not None:
                tell(eng.sched.now, spans)


def elect_sync(eng, w, op, i, now, ev):
    """``elect.sync``: the n-th ``elect.sync`` of every role on this CTA warp is one warp-wide instruction (PTX ISA 9.0
    §9.7.13.14, ``.sync``): each role waits until all have reached it; then the observers learn it as a release of
    the warp's lanes, and all go on the next cycle [assumed: one issue cycle, as a convergence point]."""
    state = eng.__dict__.get("_elect_syncs")
    if state is None:  # per engine: how many elect.sync each warp's role holds, and the meetings in progress
        state = eng.__dict__["_elect_syncs"] = {
            "count": {b.idx: sum(1 for o in b.ops if o.kind == K_ELECT) for b in eng.warps}, "seen": {}, "open": {}}
    n = state["seen"][w.idx] = state["seen"].get(w.idx, 0) + 1
    key = ("elect", w.warp, n)
    meeting = state["open"].setdefault(key, [])
    evt = eng.sched.event()
    meeting.append((evt, w))
    expected = sum(1 for b in eng.warps if b.warp == w.warp and state["count"][b.idx] >= n)
    if len(meeting) >= expected:
        del state["open"][key]
        for o in eng.observers:
            o.on_release(now, key, [x for _, x in meeting])
        rel = eng.ev("", -1, -1, "phase", f"elect.sync of warp {w.warp} #{n}", ev)
        for e, _x in meeting:
            e.succeed(rel)
    if not evt.triggered:
        w.block(eng, i, f"elect.sync of warp {w.warp} #{n}")
        dep = yield evt
        w.unblock(eng, i, dep)
    else:
        yield evt
    w.busy += 1
    yield eng.sched.sleep(1)


def alloc(eng, w, op, i, now, ev) -> int:
    eng.allocate(op, (w.role, w.warp, i))
    return 1


_ISSUE = ("sub_partitions", "issue_per_sub_partition")
_TENSOR = ("mma_issue", "mma_flop_per_cycle_per_k", "mma_datapath_rows", "mma_column_group", "mma_fixed_latency_ts",
           "mma_min_ii", "ws_b_fill_startup", "ss_a_fetch_startup", "smem_port_bytes_per_cycle", "commit_arrive",
           "mbarrier_try_wait")
_WGMMA = ("wgmma_flop_per_cycle", "wgmma_issue", "wgmma_tail_ss", "wgmma_tail_rs", "wgmma_max_outstanding",
          "smem_port_bytes_per_cycle")
_MEMORY = ("sm_count", "hbm_bytes_per_cycle", "sm_bytes_per_cycle", "dram_latency", "request_bytes_per_cycle",
           "sector_bytes", "l2_hit_latency", "l2_bytes_per_cycle")
READS = {
    k.K_LD_SHARED: (*_ISSUE, "smem_port_bytes_per_cycle", "smem_ld_latency"),
    k.K_ST_SHARED: (*_ISSUE, "smem_port_bytes_per_cycle", "smem_st_visibility"),
    k.K_TMA_LOAD: (*_ISSUE, "tma_issue_gap", *_MEMORY, "smem_port_bytes_per_cycle"),
    k.K_TMA_STORE: (*_ISSUE, "tma_issue_gap", *_MEMORY, "smem_port_bytes_per_cycle"),
    k.K_MMA: (*_ISSUE, *_TENSOR), k.K_CP: (*_ISSUE, "mma_issue", "smem_port_bytes_per_cycle", "tcgen05_cp_fixed"),
    K_SHIFT: (*_ISSUE, "mma_issue", "smem_port_bytes_per_cycle", "tcgen05_cp_fixed"),
    k.K_WGMMA: (*_ISSUE, *_WGMMA), k.K_COMMIT: (*_ISSUE, "commit_arrive"),
    k.K_LD: (*_ISSUE, "tcgen05_ld_fixed", "tcgen05_ldst_columns_per_cycle"),
    k.K_ST: (*_ISSUE, "tcgen05_st_fixed", "tcgen05_ldst_columns_per_cycle"),
    k.K_ARRIVE: (*_ISSUE, "mbarrier_arrive", "smem_st_visibility"),
    k.K_ARRIVE_TX: (*_ISSUE, "mbarrier_arrive", "smem_st_visibility"),
    k.K_TRY_WAIT: (*_ISSUE, "mbarrier_try_wait"),
    k.K_BAR_SYNC: (*_ISSUE, "named_barrier_release", "named_barrier_per_warp", "smem_st_visibility"),
    k.K_BAR_ARRIVE: (*_ISSUE, "named_barrier_arrive", "named_barrier_release", "named_barrier_per_warp"),
    k.K_PROXY_FENCE: (*_ISSUE, "proxy_fence"),
}
"""Record kind -> the timing parameters its handler reads (beyond these, a CUDA-core block reads its classes' pipe
rates and latencies, :func:`parameters_of`; the other kinds take their issue cycle only)."""


def parameters_of(rec, arch: str = "sm100") -> tuple[str, ...]:
    """The timing parameters the time of ``rec`` rests on, in the order the handler reads them (the table's
    names of ``arch``)."""
    from simtc.engine.issue import block_parameters
    from simtc.engine.parameters import PARAMETERS

    kind = k.KIND_OF_CLASS.get(type(rec).__name__)
    names = READS.get(kind, _ISSUE)
    if kind == k.K_CUDA:
        names = (*_ISSUE, "warp_interleave", *block_parameters(rec))
    table = PARAMETERS[arch]
    return tuple(dict.fromkeys(n for n in names if n in table))


HANDLERS = {
    k.K_LD_SHARED: ld_shared, k.K_ST_SHARED: st_shared, k.K_CUDA: cuda_core, k.K_TMA_LOAD: tma_load,
    k.K_TMA_STORE: tma_store, k.K_BULK_COMMIT: bulk_commit, k.K_BULK_WAIT: bulk_wait, k.K_MMA: mma, k.K_CP: cp,
    k.K_WGMMA: wgmma, k.K_WGMMA_COMMIT: wgmma_commit, k.K_WGMMA_WAIT: wgmma_wait, k.K_WGMMA_FENCE: one_cycle,
    k.K_COMMIT: commit, k.K_LD: tmem_access, k.K_ST: tmem_access, k.K_WAIT_LD: wait_tmem, k.K_WAIT_ST: wait_tmem,
    k.K_ARRIVE: arrive, k.K_ARRIVE_TX: arrive, k.K_TRY_WAIT: try_wait, k.K_BAR_SYNC: named_barrier,
    k.K_BAR_ARRIVE: named_barrier, k.K_INIT: init, k.K_ALLOC: alloc, k.K_DEALLOC: alloc, k.K_RELINQUISH: alloc,
    k.K_PROXY_FENCE: proxy_fence, k.K_FENCE_AFTER: one_cycle, k.K_FENCE_BEFORE: one_cycle, K_INVAL: inval,
    K_ELECT: elect_sync, K_SHIFT: shift,
}
"""Record kind -> its handler."""
