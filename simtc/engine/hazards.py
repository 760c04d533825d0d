"""The hazard rules the engine checks, and the report it gives for each one.

Every rule names where it comes from. Section numbers are those of the PTX ISA 9.0
(https://docs.nvidia.com/cuda/parallel-thread-execution/: §9.7.16 = tcgen05, §9.7.13.15 = mbarrier).

The checker is a happens-before analysis over the simulated run, not a pattern match: every
warp carries what it *knows* to have happened (a vector clock over every warp's operations),
arrivals, barrier phases and named barriers carry that knowledge to the waiters (transitively),
a ``tcgen05`` operation may only rely on knowledge that crossed the thread sync between
``tcgen05.fence::before_thread_sync`` and ``tcgen05.fence::after_thread_sync``, and a thread's own
asynchronous tcgen05 operations are ordered by issue only as the pipelined pairs of §9.7.16.6.2
(``cp -> mma``, ``mma -> mma`` on one accumulator). Two conflicting accesses that no such order
relates are flagged, however the timing happened to fall.

A use of a ``tcgen05.ld``'s destination registers before ``tcgen05.wait::ld`` breaks no rule: the intra-thread
register dependency is respected (§9.7.16.6.4.5); what needs the wait is a later write, dealloc or release of the
cells the load reads (``tmem-overwrite-in-flight``, ``tmem-dealloc-in-flight``).

>>> "ld-regs-before-wait" in RULES
False
>>> RULES["tmem-read-before-commit"].ref
'PTX ISA 9.0 §9.7.16.6.2, §9.7.16.6.4, §9.7.16.12.1'
>>> sorted(RULES) == sorted(set(RULES))
True
"""

from __future__ import annotations

from attrs import frozen

__all__ = ["RULES", "Hazard", "Rule"]


@frozen
class Rule:
    """One checked rule: its name, what it means, and its source."""

    name: str
    text: str
    ref: str


_RULES = (
    Rule("tmem-read-before-commit",
         "Tensor Memory read (tcgen05.ld, or an MMA/cp operand) before the completion of the asynchronous "
         "operation that writes it was observed (tcgen05.commit -> mbarrier wait -> "
         "tcgen05.fence::after_thread_sync); only the pipelined pairs cp -> mma and mma -> mma on the same "
         "accumulator, shape and kind are ordered by issue alone (within a thread, or across threads through "
         "fence::before_thread_sync -> sync -> fence::after_thread_sync)",
         "PTX ISA 9.0 §9.7.16.6.2, §9.7.16.6.4, §9.7.16.12.1"),
    Rule("tmem-overwrite-in-flight",
         "Tensor Memory written while an earlier asynchronous operation that reads or writes it may still be "
         "in flight (tcgen05.ld not waited with wait::ld, tcgen05.st not waited with wait::st, MMA or cp not "
         "committed and observed), unless the two form a pipelined pair; a register dependency on the tcgen05.ld "
         "does not order its TMEM read before the write (anti-dependency: wait::ld)",
         "PTX ISA 9.0 §9.7.16.6.2, §9.7.16.6.4, §9.7.16.6.4.5"),
    Rule("smem-overwrite-in-flight",
         "shared memory written while an in-flight asynchronous operation (MMA, tcgen05.cp, TMA store) may "
         "still read it",
         "PTX ISA 9.0 §9.7.16.6.4; cp.async.bulk.tensor (completion mechanisms)"),
    Rule("smem-write-after-read",
         "shared memory written (st.shared, a TMA load, tcgen05.alloc's address) over bytes another warp read with "
         "ld.shared or a CUDA-core block, with no happens-before order from that read to this write (no barrier "
         "or mbarrier chain): the read may return the new data",
         "PTX ISA 9.0 §8 (memory consistency model: causality order), §9.7.13.15 (mbarrier)"),
    Rule("smem-write-after-write",
         "shared memory written while the previous write of the same bytes (a TMA load not observed complete "
         "through its mbarrier, or another warp's store not ordered by a barrier) may still land: which value "
         "stays depends on the timing",
         "PTX ISA 9.0 §8.10.1 (coherence follows causality order), §9.7.13.15 (mbarrier complete-tx)"),
    Rule("smem-read-before-complete",
         "shared memory read before the write that produces it is known complete (TMA complete_tx not "
         "observed through its mbarrier, or a generic store of another warp not ordered by a barrier)",
         "PTX ISA 9.0 §9.7.13.15 (mbarrier complete-tx); memory consistency model (§8)"),
    Rule("missing-proxy-fence",
         "shared memory written through the generic proxy (st.shared) and then read by the async proxy (MMA, "
         "tcgen05.cp, TMA store) or overwritten by it (a TMA load) without fence.proxy.async between them: by the "
         "writer before its release, or by the consumer after its acquire; a fence naming .global orders no shared "
         "memory (.shared::cta, .shared::cluster and the plain form do: PTX ISA 9.0 §9.7.13.4, membar/fence)",
         "PTX ISA 9.0 §9.7.16.6.5 (fence.proxy.async)"),
    Rule("missing-after-thread-sync-fence",
         "a tcgen05 operation relies on a thread sync (mbarrier wait, bar.sync) without "
         "tcgen05.fence::after_thread_sync between the sync and the operation: for TMEM another thread wrote, and "
         "for the shared-memory operands of an MMA or tcgen05.cp that a TMA load or another warp's st.shared "
         "produced",
         "PTX ISA 9.0 §9.7.16.6.4"),
    Rule("missing-before-thread-sync-fence",
         "a thread sync publishes tcgen05 state (a waited tcgen05.ld/st) without "
         "tcgen05.fence::before_thread_sync before the arrive",
         "PTX ISA 9.0 §9.7.16.6.4"),
    Rule("tmem-read-before-wait-st",
         "Tensor Memory written by tcgen05.st read (a later tcgen05.ld of the same warp, or an MMA) before "
         "tcgen05.wait::st: st -> ld is not a pipelined pair (tcgen05.st; tcgen05.wait::st; tcgen05.ld)",
         "PTX ISA 9.0 §9.7.16.6.2, §9.7.16.6.4, §9.7.16.8.5"),
    Rule("lane-quadrant",
         "tcgen05.ld/st by warp w touches lanes outside 32*(w%4) .. 32*(w%4)+31",
         "PTX ISA 9.0 §9.7.16.8.1"),
    Rule("mbarrier-over-arrival",
         "more arrivals on an mbarrier phase than its expected count",
         "PTX ISA 9.0 §9.7.13.15"),
    Rule("mbarrier-tx-underflow",
         "more transaction bytes completed on an mbarrier phase than were expected",
         "PTX ISA 9.0 §9.7.13.15"),
    Rule("mbarrier-wrong-parity",
         "try_wait.parity passed on a phase this warp already consumed while the barrier's next phase depends on "
         "a signal the warp made after consuming it and before the re-wait (parity not flipped: re-waiting a "
         "completed phase is otherwise legal and carries its knowledge again, also before the warp's own release), "
         "or on the barrier's initial phase while the barrier is a completion barrier: phase 0 completes without "
         "anything the warp did after the wait (producer's data not yet there); a wait on a state token names its "
         "phase and cannot alias",
         "PTX ISA 9.0 §9.7.13.15, §9.7.13.15.16"),
    Rule("mbarrier-init-in-use",
         "mbarrier.init of an mbarrier that is still valid (initialised, by the table or an earlier init, and not "
         "invalidated with mbarrier.inval since)",
         "PTX ISA 9.0 §9.7.13.15.9 (mbarrier.init), §9.7.13.15.10 (mbarrier.inval)"),
    Rule("mbarrier-use-after-inval",
         "an mbarrier operation other than mbarrier.init (arrive, wait, commit, TMA complete_tx, inval) on an "
         "mbarrier after its mbarrier.inval",
         "PTX ISA 9.0 §9.7.13.15.10 (mbarrier.inval)"),
    Rule("mbarrier-inval-in-use",
         "mbarrier.inval while another warp's use of the mbarrier (an arrive, a wait, a commit or a TMA on it) "
         "is not ordered before it by any synchronisation",
         "PTX ISA 9.0 §9.7.13.15.10 (mbarrier.inval), §8 (memory consistency model: causality order)"),
    Rule("mbarrier-object-overwritten",
         "an ordinary write (st.shared, a CUDA-core block, a TMA load, tcgen05.alloc's address) into the 8 bytes "
         "of a valid mbarrier object (the table's address): only mbarrier instructions access the object until "
         "mbarrier.inval",
         "PTX ISA 9.0 §9.7.13.15.1 (size and alignment of the mbarrier object), §9.7.13.15.10 (mbarrier.inval)"),
    Rule("mbarrier-uninitialized",
         "an mbarrier used before mbarrier.init",
         "PTX ISA 9.0 §9.7.13.15"),
    Rule("tmem-alloc-over-512",
         "tcgen05.alloc that can never be satisfied: the allocation blocks until enough of the 512 columns are "
         "free, and no tcgen05.dealloc frees them (the warp waits forever)",
         "PTX ISA 9.0 §9.7.16.1.2, §9.7.16.7.1"),
    Rule("tmem-dealloc-unallocated",
         "tcgen05.dealloc of columns that were not allocated",
         "PTX ISA 9.0 §9.7.16.7.1"),
    Rule("tmem-dealloc-other-warp",
         "tcgen05.dealloc by a warp that allocated no such columns while another warp did: the warp that "
         "allocated Tensor Memory deallocates it",
         "PTX ISA 9.0 §9.7.16.7.1"),
    Rule("warp-collective-partial",
         "a .sync.aligned tcgen05 instruction (alloc, dealloc, relinquish_alloc_permit, ld, st, wait::ld, wait::st) "
         "executed by fewer than the 32 threads of the warp (a partial-warp or one-lane role): every thread of the "
         "warp executes the same instruction",
         "PTX ISA 9.0 §9.7.16.7.1, §9.7.16.8.3, §9.7.16.8.4, §9.7.16.11.1 (.sync, .aligned)"),
    Rule("tmem-dealloc-in-flight",
         "tcgen05.dealloc of columns a TMEM access may still touch: the deallocating warp must know every access "
         "complete (its own tcgen05.ld/st waited, an MMA/cp committed and observed, another warp's accesses "
         "published with tcgen05.fence::before_thread_sync -> sync -> fence::after_thread_sync)",
         "PTX ISA 9.0 §9.7.16.7.1, §9.7.16.6.4"),
    Rule("tmem-address-read-before-sync",
         "the TMEM address tcgen05.alloc writes to shared memory read by another warp that no thread sync (bar.sync, "
         "an mbarrier) orders after the allocation",
         "PTX ISA 9.0 §9.7.16.7.1, §9.7.16.6.1"),
    Rule("tmem-alloc-after-relinquish",
         "tcgen05.alloc after tcgen05.relinquish_alloc_permit, or not ordered before it (another warp's allocation "
         "that no synchronisation places before the relinquish: another schedule runs it after)",
         "PTX ISA 9.0 §9.7.16.7.1"),
    Rule("tmem-not-deallocated",
         "the kernel ends with Tensor Memory still allocated",
         "PTX ISA 9.0 §9.7.16.1.2"),
    Rule("tmem-unallocated-access",
         "Tensor Memory touched outside every live allocation",
         "PTX ISA 9.0 §9.7.16.1.2"),
    Rule("named-barrier-count-mismatch",
         "participants of one generation of a named barrier name different thread counts (the count may change "
         "from one generation to the next)",
         "PTX ISA 9.0 §9.7.13.1"),
    Rule("deadlock",
         "every live warp waits and nothing in flight can release any of them",
         "PTX ISA 9.0 §9.7.13.15, §9.7.13.1"),
)

RULES: dict[str, Rule] = {r.name: r for r in _RULES}


@frozen
class Hazard:
    """One report: the rule, the cycle, the two records involved and the PTX section.

    ``first`` is the earlier record (the producer, writer or in-flight operation), ``second`` the
    one that breaks the rule; each is ``(role, warp, index)`` or ``None`` where there is no
    earlier record (e.g. an allocation beyond 512 columns).
    """

    rule: str
    cycle: int
    first: tuple[str, int, int] | None
    second: tuple[str, int, int] | None
    message: str

    @property
    def ref(self) -> str:
        return RULES[self.rule].ref

    def to_json(self) -> dict:
        def rec(r):
            return None if r is None else {"role": r[0], "warp": r[1], "index": r[2]}

        return {"rule": self.rule, "cycle": self.cycle, "first": rec(self.first), "second": rec(self.second),
                "ref": self.ref, "message": self.message}

    def __str__(self) -> str:
        def rec(r):
            return "-" if r is None else f"{r[0]}[w{r[1]}]#{r[2]}"

        return f"cycle {self.cycle}: {self.rule}: {rec(self.first)} -> {rec(self.second)}: {self.message} [{self.ref}]"
