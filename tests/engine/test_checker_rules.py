"""The checker's happens-before rules, one small Program each (PTX ISA 9.0 §9.7.16.6, tcgen05 memory consistency):
program order only for the pairs PTX pipelines (§9.7.16.6.2), cross-thread pipelined hand-over, transitive
knowledge through a second barrier, a consumer-side fence.proxy.async, re-waiting a completed phase, both clauses of
mbarrier-wrong-parity, a blocking tcgen05.alloc (§9.7.16.7.1), dealloc ordering, the TMEM address in shared memory,
shared-memory write-after-write and write-after-read; FlashMLA head64's known race reported apart; a mutated
Program in semantics mode reported, not crashing."""

from __future__ import annotations

import attrs
import pytest

import simtc.isa as isa
from simtc.engine.checker import CheckLog, HazardChecker
from simtc.engine.core import Engine
from simtc.engine.hazards import RULES
from simtc.engine.schedules import explore
from simtc.isa.program import Barrier

A, B, S, ADDR = 0, 16384, 32768, 49152
IDESC = isa.InstrDescriptor(kind="f16", m=128, n=64, a_format="bf16", b_format="bf16")
IDESC_N128 = isa.InstrDescriptor(kind="f16", m=128, n=128, a_format="bf16", b_format="bf16")


def smem(start: int) -> isa.SmemDescriptor:
    return isa.SmemDescriptor(start=start, lbo=16, sbo=1024, layout_type="SW128")


def mma(d: int = 0, a=None, accumulate: bool = False, idesc=IDESC) -> isa.Mma:
    return isa.Mma(d, smem(A) if a is None else a, smem(B), idesc, accumulate)


def regs(reg: str) -> isa.CudaCoreBlock:
    return isa.CudaCoreBlock("compute", (("FMUL", 32),), regs_written=(reg,))


def use(reg: str) -> isa.CudaCoreBlock:
    return isa.CudaCoreBlock("use", (("FMNMX", 32),), regs_read=(reg,), regs_written=(f"{reg}_max",))


def program(*roles, bars=()) -> isa.Program:
    return isa.Program("t", tuple(isa.Role(n, w, tuple(r)) for n, w, r in roles),
                       tuple(Barrier(b, "mbarrier", c) for b, c in bars))


def rules(prog, schedules: int = 4) -> set[str]:
    """Every rule any of ``schedules`` schedules shows (a deadlock as "deadlock")."""
    r = explore(prog, schedules)
    return {x for run in r.runs for x in run["rules"]} | ({"deadlock"} if any(run["deadlock"] for run in r.runs)
                                                           else set())


# ---- a thread's own operations: ordered only where PTX pipelines them (§9.7.16.6.2) -------------------------
def _one_warp(body):
    done = [isa.Commit("done"), isa.MbarrierTryWait("done", 0), isa.FenceAfterThreadSync()]
    return program(("w", (0,), [isa.Alloc(256, ADDR), *body, *done, isa.Dealloc(0, 256)]), bars=[("done", 1)])


def test_st_then_ld_needs_wait_st():
    st, ld = isa.St(0, "32x32b", 32, "s"), isa.Ld(0, "32x32b", 32, "t")
    assert rules(_one_warp([regs("s"), st, ld, isa.WaitSt(), isa.WaitLd(), use("t")])) == {"tmem-read-before-wait-st"}
    assert rules(_one_warp([regs("s"), st, isa.WaitSt(), ld, isa.WaitLd(), use("t")])) == set()


def test_ld_then_st_and_st_then_st_need_their_waits():
    ld, st = isa.Ld(0, "32x32b", 32, "t"), isa.St(0, "32x32b", 32, "s")
    assert rules(_one_warp([regs("s"), ld, st, isa.WaitLd(), isa.WaitSt(), use("t")])) == {"tmem-overwrite-in-flight"}
    assert rules(_one_warp([regs("s"), ld, isa.WaitLd(), st, isa.WaitSt(), use("t")])) == set()
    assert rules(_one_warp([regs("s"), st, st, isa.WaitSt()])) == {"tmem-overwrite-in-flight"}
    assert rules(_one_warp([regs("s"), st, isa.WaitSt(), st, isa.WaitSt()])) == set()


def test_mma_then_mma_is_pipelined_on_the_same_accumulator_only():
    same = [mma(), mma(accumulate=True)]
    assert rules(_one_warp(same)) == set()
    # the second MMA reads the first one's D (columns 0-63) as its A operand from TMEM: another accumulator
    other = [mma(d=0), mma(d=128, a=0)]
    assert rules(_one_warp(other)) == {"tmem-read-before-commit"}
    # same accumulator address, another shape: not a pipelined pair
    assert rules(_one_warp([mma(), mma(accumulate=True, idesc=IDESC_N128)])) == {"tmem-read-before-commit",
                                                                                 "tmem-overwrite-in-flight"}


def test_cp_then_mma_is_pipelined_but_mma_then_cp_is_not():
    cp = isa.Cp(128, smem(A))
    assert rules(_one_warp([cp, mma(a=128)])) == set()
    assert rules(_one_warp([mma(a=128), cp])) == {"tmem-overwrite-in-flight"}   # cp overwrites what the MMA reads


# ---- a register dependency on tcgen05.ld (§9.7.16.6.4.5): respected without wait::ld, orders no memory access -----
def scale(src: str, dst: str) -> isa.CudaCoreBlock:
    return isa.CudaCoreBlock("scale", (("FMUL", 32),), regs_read=(src,), regs_written=(dst,))


def test_the_registers_of_a_tcgen05_ld_may_be_used_before_wait_ld():
    assert "ld-regs-before-wait" not in RULES
    ld = isa.Ld(0, "32x32b", 32, "t")
    assert rules(_one_warp([ld, use("t"), isa.WaitLd()])) == set()
    assert rules(_one_warp([ld, use("t"), scale("t_max", "u"), isa.WaitLd()])) == set()   # a chain of uses
    # the use orders nothing about the load's TMEM read: with no wait::ld at all, the dealloc frees cells in flight
    assert rules(_one_warp([ld, use("t")])) == {"tmem-dealloc-in-flight"}


def test_a_write_of_the_cells_after_a_register_dependency_still_needs_wait_ld():
    """ld -> scale -> st of the same cells (FlashMLA's O rescale without its wait::ld): the st's source registers
    depend on the ld, which orders no TMEM access (the anti-dependency needs wait::ld); so does an MMA or a cp that
    writes the cells."""
    ld, st = isa.Ld(0, "32x32b", 32, "t"), isa.St(0, "32x32b", 32, "s")
    assert rules(_one_warp([ld, scale("t", "s"), st, isa.WaitSt(), isa.WaitLd()])) == {"tmem-overwrite-in-flight"}
    assert rules(_one_warp([ld, isa.WaitLd(), scale("t", "s"), st, isa.WaitSt()])) == set()
    assert rules(_one_warp([ld, use("t"), mma(), isa.WaitLd()])) == {"tmem-overwrite-in-flight"}   # D over the cells
    assert rules(_one_warp([ld, use("t"), isa.WaitLd(), mma()])) == set()
    ld_a = isa.Ld(128, "32x32b", 8, "a")
    assert rules(_one_warp([ld_a, use("a"), isa.Cp(128, smem(A)), isa.WaitLd()])) == {"tmem-overwrite-in-flight"}
    assert rules(_one_warp([ld_a, use("a"), isa.WaitLd(), isa.Cp(128, smem(A))])) == set()


def test_a_dealloc_after_a_register_dependency_still_needs_wait_ld():
    main = [isa.Alloc(64, ADDR), mma(), isa.Commit("done"), isa.MbarrierTryWait("done", 0),
            isa.FenceAfterThreadSync(), isa.Ld(0, "32x32b", 32, "p"), use("p")]
    assert rules(program(("w", (0,), [*main, isa.Dealloc(0, 64), isa.WaitLd()]), bars=[("done", 1)])) == {
        "tmem-dealloc-in-flight"}
    assert rules(program(("w", (0,), [*main, isa.WaitLd(), isa.Dealloc(0, 64)]), bars=[("done", 1)])) == set()


def _release(wait_ld: str):
    """The epilogue uses its tcgen05.ld's registers at once and releases the accumulator to the MMA thread
    (fence::before_thread_sync -> arrive), which overwrites it. ``wait_ld``: "before" the fence, "after" the arrive,
    or "none"."""
    epi = [isa.BarSync(1, 64), isa.MbarrierTryWait("done", 0), isa.FenceAfterThreadSync(),
           isa.Ld(0, "32x32b", 32, "p"), use("p"), *([isa.WaitLd()] if wait_ld == "before" else []),
           isa.FenceBeforeThreadSync(), isa.MbarrierArrive("epi_done"), *([isa.WaitLd()] if wait_ld == "after" else [])]
    mma_ = [isa.Alloc(128, ADDR), isa.FenceBeforeThreadSync(), isa.BarSync(1, 64), isa.FenceAfterThreadSync(), mma(),
            isa.Commit("done"), isa.MbarrierTryWait("epi_done", 0), isa.FenceAfterThreadSync(), mma(),
            isa.Commit("done"), isa.MbarrierTryWait("done", 1), isa.FenceAfterThreadSync(), isa.Dealloc(0, 128)]
    return program(("epilogue", (0,), epi), ("mma", (4,), mma_), bars=[("done", 1), ("epi_done", 32)])


def test_a_release_after_a_register_dependency_still_needs_wait_ld():
    """fence::before_thread_sync publishes only the loads the warp waited: without wait::ld before it, the MMA
    thread's next MMA overwrites D while the epilogue's load may still read it (and its dealloc frees them)."""
    assert rules(_release("before"), 16) == set()
    assert rules(_release("after"), 16) == {"tmem-overwrite-in-flight", "tmem-dealloc-in-flight"}
    assert rules(_release("none"), 16) == {"tmem-overwrite-in-flight", "tmem-dealloc-in-flight"}


def test_a_use_of_the_registers_issues_after_the_tcgen05_ld_completes():
    """The engine's scoreboard: a record reading the load's destination registers waits until the load completes
    (no wait::ld between them); a record that reads none of them issues at once."""
    ld = isa.Ld(0, "32x32b", 32, "t")
    other = isa.CudaCoreBlock("other", (("FADD", 4),), regs_written=("x",))
    eng = Engine(_one_warp([ld, other, use("t"), isa.WaitLd()])).run()
    assert eng.clean
    done = next(e.cycle for e in eng.trace if e.kind == "complete" and e.index == 1)      # the ld (record 1)
    issue = {e.index: e.cycle for e in eng.trace if e.kind == "issue"}
    assert issue[1] < issue[2] < done <= issue[3]                       # "other" before, the use after completion
    wait = [e for e in eng.trace if e.kind == "wait" and e.index == 3]
    assert wait and wait[0].detail == "registers t"


# ---- across threads ----------------------------------------------------------------------------------------
def _cp_hand_over(before=True, after=True):
    copier = [isa.BarSync(1, 64), isa.Cp(128, smem(A)), *([isa.FenceBeforeThreadSync()] if before else []),
              isa.MbarrierArrive("a_ready"), isa.Commit("cp_done")]
    mma_ = [isa.Alloc(256, ADDR), isa.FenceBeforeThreadSync(), isa.BarSync(1, 64), isa.FenceAfterThreadSync(),
            isa.MbarrierTryWait("a_ready", 0), *([isa.FenceAfterThreadSync()] if after else []), mma(a=128),
            isa.Commit("done"), isa.MbarrierTryWait("done", 0), isa.MbarrierTryWait("cp_done", 0),
            isa.FenceAfterThreadSync(), isa.Dealloc(0, 256)]
    return program(("copier", (5,), copier), ("mma", (4,), mma_), bars=[("a_ready", 32), ("done", 1), ("cp_done", 1)])


def test_cp_handed_over_with_the_fences_is_pipelined_across_threads():
    assert rules(_cp_hand_over()) == set()
    assert rules(_cp_hand_over(after=False)) == {"missing-after-thread-sync-fence"}
    assert rules(_cp_hand_over(before=False)) == {"tmem-read-before-commit"}


def _relay(relay_fences: bool):
    """The MMA's commit waited by warp 0 alone, relayed to warps 1-3 by bar.sync (warp 0 has no tcgen05 work of its
    own to publish, so it needs no fence: knowledge is transitive)."""
    fences = [isa.FenceAfterThreadSync(), isa.FenceBeforeThreadSync()] if relay_fences else []
    first = [isa.BarSync(1, 160), isa.MbarrierTryWait("done", 0), *fences, isa.BarSync(2, 128),
             isa.FenceAfterThreadSync(), isa.Ld(0, "32x32b", 32, "p"), isa.WaitLd(), use("p"),
             isa.FenceBeforeThreadSync(), isa.MbarrierArrive("epi_done")]
    rest = [isa.BarSync(1, 160), isa.BarSync(2, 128), isa.FenceAfterThreadSync(), isa.Ld(0, "32x32b", 32, "p"),
            isa.WaitLd(), use("p"), isa.FenceBeforeThreadSync(), isa.MbarrierArrive("epi_done")]
    mma_ = [isa.Alloc(128, ADDR), isa.FenceBeforeThreadSync(), isa.BarSync(1, 160), isa.FenceAfterThreadSync(),
            mma(), isa.Commit("done"), isa.MbarrierTryWait("epi_done", 0), isa.FenceAfterThreadSync(),
            isa.Dealloc(0, 128)]
    return program(("first", (0,), first), ("rest", (1, 2, 3), rest), ("mma", (4,), mma_),
                   bars=[("done", 1), ("epi_done", 128)])


@pytest.mark.parametrize("relay_fences", [False, True])
def test_knowledge_relayed_through_a_second_barrier(relay_fences):
    assert rules(_relay(relay_fences)) == set()


def _proxy(writer_fence: str | None, reader_fence: str | None):
    """A producer stores A and B with st.shared and arrives; the MMA thread waits and multiplies. ``writer_fence``:
    the producer's fence.proxy.async "before" or "after" its arrive; ``reader_fence``: the MMA thread's, "after" its
    wait or "before" it."""
    pf = [isa.FenceProxyAsync()]
    write = isa.CudaCoreBlock("write A, B", (("STS.128", 48),), smem_writes=(isa.SmemRange(A, B + 2048),))
    prod = [isa.BarSync(1, 64), write, *(pf if writer_fence == "before" else []), isa.MbarrierArrive("ready"),
            *(pf if writer_fence == "after" else [])]
    cons = [isa.Alloc(128, ADDR), isa.FenceBeforeThreadSync(), isa.BarSync(1, 64), isa.FenceAfterThreadSync(),
            *(pf if reader_fence == "before" else []), isa.MbarrierTryWait("ready", 0),
            *(pf if reader_fence == "after" else []), isa.FenceAfterThreadSync(), mma(), isa.Commit("done"),
            isa.MbarrierTryWait("done", 0), isa.FenceAfterThreadSync(), isa.Dealloc(0, 128)]
    return program(("producer", (5,), prod), ("mma", (4,), cons), bars=[("ready", 32), ("done", 1)])


def test_the_proxy_fence_by_the_writer_before_its_release_or_by_the_reader_after_its_acquire():
    assert rules(_proxy("before", None)) == set()
    assert rules(_proxy(None, "after")) == set()
    assert rules(_proxy("after", None)) == {"missing-proxy-fence"}    # after the release: orders nothing for the MMA
    assert rules(_proxy(None, "before")) == {"missing-proxy-fence"}   # before the acquire: the writes not yet known
    assert rules(_proxy(None, None)) == {"missing-proxy-fence"}


# ---- mbarrier parity ----------------------------------------------------------------------------------------
def _handshake(second_parity: int, arrive_between: bool):
    prod = [isa.BarSync(1, 64), isa.CudaCoreBlock("produce", (("FFMA", 64),)), isa.MbarrierArriveExpectTx("full", 0),
            isa.MbarrierTryWait("empty", 0), isa.MbarrierArriveExpectTx("full", 0)]
    cons = [isa.BarSync(1, 64), isa.MbarrierTryWait("full", 0), *([isa.MbarrierArriveExpectTx("empty", 0)]
                                                                   if arrive_between else []),
            isa.MbarrierTryWait("full", second_parity), *([] if arrive_between else
                                                          [isa.MbarrierArriveExpectTx("empty", 0)])]
    return program(("producer", (5,), prod), ("consumer", (6,), cons), bars=[("full", 1), ("empty", 1)])


def test_rewaiting_a_completed_phase_is_legal_unless_the_next_phase_waits_on_the_warp():
    assert rules(_handshake(0, arrive_between=False), 16) == set()      # the same phase again: passes, carries again
    assert "mbarrier-wrong-parity" in rules(_handshake(0, arrive_between=True))  # it released phase 1 first
    assert rules(_handshake(1, arrive_between=True), 16) == set()


def _tma_wait(parity: int):
    rec = [isa.Alloc(128, ADDR), isa.CpAsyncBulkTensor(A, 16384, "full", tensor="A"),
           isa.CpAsyncBulkTensor(B, 2048, "full", tensor="B"), isa.MbarrierArriveExpectTx("full", 18432),
           isa.MbarrierTryWait("full", parity), isa.FenceAfterThreadSync(), mma(), isa.Commit("done"),
           isa.MbarrierTryWait("done", 0), isa.FenceAfterThreadSync(), isa.Dealloc(0, 128)]
    return program(("mma", (4,), rec), bars=[("full", 1), ("done", 1)])


def test_a_completion_barrier_waited_on_its_phantom_phase():
    assert rules(_tma_wait(0)) == set()
    assert {"mbarrier-wrong-parity", "smem-read-before-complete"} <= rules(_tma_wait(1))


# ---- Tensor Memory allocation -------------------------------------------------------------------------------
def test_alloc_blocks_until_another_warp_deallocates():
    first = [isa.Alloc(512, ADDR), isa.BarArrive(1, 64), isa.CudaCoreBlock("work", (("FFMA", 64),)),
             isa.Dealloc(0, 512)]
    second = [isa.BarSync(1, 64), isa.Alloc(256, ADDR + 8), isa.Dealloc(0, 256)]
    eng = Engine(program(("first", (0,), first), ("second", (1,), second))).run()
    assert eng.clean
    wait = [e for e in eng.trace if e.kind == "wait" and e.role == "second" and e.index == 1]
    assert wait and wait[0].detail.startswith("tcgen05.alloc 256 columns (0+512 allocated)")
    never = Engine(program(("w", (0,), [isa.Alloc(512, ADDR), isa.Alloc(32, ADDR + 8), isa.Dealloc(0, 512)]))).run()
    assert {h.rule for h in never.hazards} == {"tmem-alloc-over-512", "deadlock"}


def _dealloc(wait_ld_first: bool, other_warp_synced: bool | None = None):
    body = [isa.Ld(0, "32x32b", 32, "p")]
    body += [isa.WaitLd(), isa.Dealloc(0, 64)] if wait_ld_first else [isa.Dealloc(0, 64), isa.WaitLd()]
    main = [isa.Alloc(64, ADDR), mma(), isa.Commit("done"), isa.MbarrierTryWait("done", 0),
            isa.FenceAfterThreadSync(), *body, use("p")]
    if other_warp_synced is None:
        return program(("w", (0,), main), bars=[("done", 1)])
    main[1:1] = [isa.FenceBeforeThreadSync(), isa.BarSync(1, 64)]
    if other_warp_synced:
        main[-3:-3] = [isa.MbarrierTryWait("read", 0)]
    reader = [isa.BarSync(1, 64), isa.MbarrierTryWait("done", 0), isa.FenceAfterThreadSync(),
              isa.Ld(0, "32x32b", 32, "q"), isa.WaitLd(), use("q"), isa.FenceBeforeThreadSync(),
              isa.MbarrierArrive("read")]
    return program(("w", (0,), main), ("reader", (1,), reader), bars=[("done", 1), ("read", 32)])


def test_dealloc_after_every_access_completed():
    assert rules(_dealloc(True)) == set()
    assert rules(_dealloc(False)) == {"tmem-dealloc-in-flight"}           # its own tcgen05.ld still in flight
    assert rules(_dealloc(True, other_warp_synced=True)) == set()
    assert rules(_dealloc(True, other_warp_synced=False)) == {"tmem-dealloc-in-flight"}   # warp 1's ld not ordered


def _address(sync: bool):
    alloc = [isa.Alloc(128, ADDR), *([isa.BarSync(1, 64)] if sync else []), isa.MbarrierTryWait("read", 0),
             isa.Dealloc(0, 128)]
    reader = [*([isa.BarSync(1, 64)] if sync else []), isa.LdShared(ADDR, 4, "taddr"), use("taddr"),
              isa.MbarrierArrive("read")]
    return program(("alloc", (0,), alloc), ("reader", (1,), reader), bars=[("read", 32)])


def test_the_tmem_address_in_shared_memory_needs_a_thread_sync():
    assert rules(_address(True)) == set()
    assert rules(_address(False)) == {"tmem-address-read-before-sync"}


# ---- shared memory: write after write, write after read -----------------------------------------------------
def test_a_store_over_an_in_flight_tma_load():
    def prog(wait_first):
        tma = [isa.CpAsyncBulkTensor(S, 2048, "full", tensor="KV"), isa.MbarrierArriveExpectTx("full", 2048)]
        wait = [isa.MbarrierTryWait("full", 0)]
        store = [isa.StShared(S, 16, "x")]
        rec = [regs("x"), *tma, *(wait + store if wait_first else store + wait)]
        return program(("w", (0,), rec), bars=[("full", 1)])
    assert rules(prog(True)) == set()
    assert rules(prog(False)) == {"smem-write-after-write"}


def test_a_tma_refill_over_another_warps_reads():
    def prog(wait_empty):
        prod = [isa.CpAsyncBulkTensor(S, 2048, "full", tensor="KV"), isa.MbarrierArriveExpectTx("full", 2048),
                isa.MbarrierTryWait("full", 0), *([isa.MbarrierTryWait("empty", 0)] if wait_empty else []),
                isa.CpAsyncBulkTensor(S, 2048, "full", tensor="KV"), isa.MbarrierArriveExpectTx("full", 2048)]
        cons = [isa.MbarrierTryWait("full", 0), isa.LdShared(S, 16, "kv"), use("kv"), isa.MbarrierArrive("empty"),
                isa.MbarrierTryWait("full", 1)]
        return program(("producer", (5,), prod), ("consumer", (6,), cons), bars=[("full", 1), ("empty", 32)])
    assert rules(prog(True)) == set()
    assert rules(prog(False)) == {"smem-write-after-read"}


def test_every_new_rule_names_its_ptx_section():
    for name in ("smem-write-after-read", "smem-write-after-write", "tmem-dealloc-in-flight",
                 "tmem-address-read-before-sync"):
        assert RULES[name].ref.startswith("PTX ISA 9.0 §"), name


def test_a_recorded_run_replays_to_the_same_hazards():
    prog = _address(False)
    log = CheckLog()
    eng = Engine(prog, observers=[log]).run()
    again = HazardChecker.replay(log, eng.warps, eng.index)
    assert [str(h) for h in again.hazards] == [str(h) for h in eng.hazards] and eng.hazards


# ---- FlashMLA head64 -----------------------------------------------------------------------------------------
def test_head64_reports_the_kernels_own_race_apart():
    from simtc.kernels.flashmla import replay as rp
    from simtc.kernels.flashmla.head64 import KNOWN_RACES, head64_program, known_race_records

    r = rp.replay("v32", 3, 0, timing_only=True)
    assert r.hazards == [] and r.ok
    assert len(r.known_races) == 4 and {h["rule"] for h in r.known_races} == {"smem-write-after-read"}
    # warp w's li store over its partner w ^ 2's read of the last block's row max
    assert {(h["first"]["warp"], h["second"]["warp"]) for h in r.known_races} == {(0, 2), (2, 0), (1, 3), (3, 1)}
    program = head64_program("v32", 3)
    (race, first, second), = known_race_records(program)
    recs = program.role("softmax").records
    assert race is KNOWN_RACES[0] and "line 229" in race.lines and "line 309" in race.lines
    assert type(recs[first]).__name__ == "LdShared" and recs[first].dst == "cur_peer"
    assert type(recs[second]).__name__ == "StShared" and recs[second].src == "li"
    assert not any(isinstance(x, isa.BarSync) for x in recs[first:second])  # nothing orders them
    assert "known race of the kernel itself" in r.summary()


def test_head64_any_other_hazard_still_fails_the_replay():
    from simtc.kernels.flashmla import replay as rp
    from simtc.kernels.flashmla.head64 import head64_program

    program = head64_program("v32", 3)
    recs = list(program.role("softmax").records)
    li_sync = max(i for i, x in enumerate(recs) if isinstance(x, isa.BarSync) and x.label == "li written")

    def drop(p):
        return attrs.evolve(p, roles=tuple(attrs.evolve(r, records=tuple(x for i, x in enumerate(r.records)
                                                                          if i != li_sync))
                                           if r.name == "softmax" else r for r in p.roles))
    r = rp.replay("v32", 3, 0, timing_only=True, transform=drop)
    assert not r.ok and "smem-read-before-complete" in {h["rule"] for h in r.hazards}


def test_head64_o_rescale_without_wait_ld_is_reported_in_semantics_mode():
    """Deleting an O-rescale tcgen05.wait::ld: the checker flags it, the data run goes on (no exception)."""
    from simtc.kernels.flashmla import replay as rp

    def drop(p):
        recs = list(p.role("softmax").records)
        k = next(i for i, x in enumerate(recs) if isinstance(x, isa.WaitLd) and isinstance(recs[i - 1], isa.Ld)
                 and recs[i - 1].label.startswith("O chunk"))
        del recs[k]
        return attrs.evolve(p, roles=tuple(attrs.evolve(r, records=tuple(recs)) if r.name == "softmax" else r
                                           for r in p.roles))
    r = rp.replay("v32", 4, 0, transform=drop)   # seed 0: block 2 takes the O rescale (from the data)
    assert r.rescale_blocks == [2] and not r.ok
    # the scale's registers depend on the ld (ordered, §9.7.16.6.4.5), but the st overwrites the cells it reads
    assert {h["rule"] for h in r.hazards} == {"tmem-overwrite-in-flight"}
    assert all(e["record"] and e["error"] for e in r.semantics_errors)  # a refusal names the record
