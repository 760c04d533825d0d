"""The checker's former blind spots, one small Program each: a seeded bug (flagged with its rule), its correct twin
and tricky correct programs (clean), every one under 16 schedules.

The classes (PTX ISA 9.0): the mbarrier life cycle -- an init of a barrier still in use, a use after
``mbarrier.inval``, an inval before another warp's use, ordinary writes into a valid barrier object
(§9.7.13.15.1, §9.7.13.15.9, §9.7.13.15.10); the TMEM allocation rules beyond the 512 columns -- dealloc by the
allocating warp, every allocation before ``relinquish_alloc_permit``, the ``.sync.aligned`` instructions by the
whole warp (§9.7.16.7.1); a generic write overwritten by the async proxy without ``fence.proxy.async`` and the state
space the fence names (§9.7.16.6.5, §9.7.13.4); a re-wait of a consumed phase before the warp's own release and
token waits (§9.7.13.15.16); a named barrier whose thread count changes between generations (§9.7.13.1); a commit
from another lane of the issuing warp and a dealloc after another thread's uncommitted ``tcgen05.cp`` whose
pipelined MMA was committed (§9.7.16.12.1: a commit tracks its own thread's operations); ``elect.sync``, partial
warps and ``tcgen05.shift`` as records (§9.7.13.14, §9.7.16.9.3).
"""

from __future__ import annotations

import pytest

import simtc.isa as isa
from simtc.engine.core import Engine
from simtc.engine.schedules import explore
from simtc.errors import SimtcError
from simtc.isa.program import Barrier

A, B, ADDR, BUF, BAR_ADDR = 0, 16384, 49152, 65536, 98304
IDESC = isa.InstrDescriptor(kind="f16", m=128, n=64, a_format="bf16", b_format="bf16")


def smem(start: int) -> isa.SmemDescriptor:
    return isa.SmemDescriptor(start=start, lbo=16, sbo=1024, layout_type="SW128")


def work(name: str = "work", reads=(), writes=()) -> isa.CudaCoreBlock:
    return isa.CudaCoreBlock(name, (("FFMA", 16),), regs_read=tuple(reads), regs_written=tuple(writes))


def program(*roles, bars=(), name="t") -> isa.Program:
    out = []
    for role in roles:
        n, w, r, *threads = role
        out.append(isa.Role(n, w, tuple(r), **({"threads": threads[0]} if threads else {})))
    table = tuple(b if isinstance(b, Barrier) else Barrier(b[0], "mbarrier", b[1], addr=b[2] if len(b) > 2 else None)
                  for b in bars)
    return isa.Program(name, tuple(out), table)


def rules(prog, schedules: int = 16) -> list[set[str]]:
    """The rules each schedule shows (a deadlock as "deadlock")."""
    r = explore(prog, schedules)
    return [set(run["rules"]) | ({"deadlock"} if run["deadlock"] else set()) for run in r.runs]


# ---- the mbarrier life cycle (§9.7.13.15.9, §9.7.13.15.10) ---------------------------------------------------------
def reinit(inval: bool):
    body = [isa.MbarrierInit("x", 1), isa.MbarrierArrive("x"), isa.MbarrierTryWait("x", 0)]
    body += [isa.MbarrierInval("x")] if inval else []
    body += [isa.MbarrierInit("x", 1), isa.MbarrierArrive("x"), isa.MbarrierTryWait("x", 0)]
    return program(("w", (0,), body, 1))


def reinit_table(inval: bool):
    body = [isa.MbarrierArrive("t"), isa.MbarrierTryWait("t", 0)]
    body += [isa.MbarrierInval("t")] if inval else []
    body += [isa.MbarrierInit("t", 1), isa.MbarrierArrive("t"), isa.MbarrierTryWait("t", 0)]
    return program(("w", (0,), body, 1), bars=[("t", 1)])


def use_after_inval(reinit_first: bool):
    body = [isa.MbarrierInit("x", 1), isa.MbarrierArrive("x"), isa.MbarrierTryWait("x", 0), isa.MbarrierInval("x")]
    body += [isa.MbarrierInit("x", 1)] if reinit_first else []
    body += [isa.MbarrierArrive("x"), isa.MbarrierTryWait("x", 0 if reinit_first else 1)]
    return program(("w", (0,), body, 1))


def inval_in_use(ordered: bool):
    """The producer invalidates ``full`` after its arrive; the consumer waits on it. Fixed: the consumer reports on
    ``done`` after its wait, and the producer invalidates only after waiting for that."""
    prod = [work(), isa.MbarrierArrive("full")]
    prod += [isa.MbarrierTryWait("done", 0)] if ordered else []
    prod += [isa.MbarrierInval("full")]
    cons = [isa.MbarrierTryWait("full", 0), work("consume")]
    cons += [isa.MbarrierArrive("done")] if ordered else []
    return program(("producer", (0,), prod, 1), ("consumer", (1,), cons, 1), bars=[("full", 1), ("done", 1)])


def init_after_other_warps_inval(ordered: bool):
    """Warp 0 uses ``x`` and invalidates it; warp 1 initialises it anew for its own use. Fixed: a bar.sync after the
    inval orders warp 1's init after it (without it, another schedule inits first, on the still-valid barrier)."""
    first = [isa.MbarrierInit("x", 32), isa.MbarrierArrive("x"), isa.MbarrierTryWait("x", 0), isa.MbarrierInval("x"),
             isa.BarSync(1, 64) if ordered else work()]
    second = [isa.BarSync(1, 64) if ordered else work(), isa.MbarrierInit("x", 32), isa.MbarrierArrive("x"),
              isa.MbarrierTryWait("x", 0)]
    return program(("first", (0,), first), ("second", (1,), second))


def overwrite_barrier(after_inval: bool):
    """An st.shared of 8 bytes at the barrier's address (the table's ``addr``): a bug while the barrier is valid,
    the memory's next use once it is invalidated."""
    body = [isa.MbarrierArrive("t"), isa.MbarrierTryWait("t", 0)]
    body += [isa.MbarrierInval("t")] if after_inval else []
    body += [isa.StShared(BAR_ADDR, 4, "r", threads=2)]
    return program(("w", (0,), body, 1), bars=[("t", 1, BAR_ADDR)])


def tma_over_barrier(after_inval: bool):
    """A TMA load whose box covers another barrier's 8 bytes (``t`` lies inside the load's destination)."""
    body = [isa.MbarrierArrive("t"), isa.MbarrierTryWait("t", 0)]
    body += [isa.MbarrierInval("t")] if after_inval else []
    body += [isa.MbarrierArriveExpectTx("tma", 4096), isa.CpAsyncBulkTensor(BAR_ADDR - 1024, 4096, "tma", tensor="q"),
             isa.MbarrierTryWait("tma", 0)]
    return program(("w", (0,), body, 1), bars=[("t", 1, BAR_ADDR), ("tma", 1, BAR_ADDR + 8192)])


def reuse_after_inval():
    """Tricky correct: a barrier's bytes reused for data after its inval, then a barrier initialised again at the
    same address by name (a new object) -- and a table barrier whose first init is the table's own."""
    body = [isa.MbarrierInit("t", 1), isa.MbarrierArrive("t"), isa.MbarrierTryWait("t", 0), isa.MbarrierInval("t"),
            isa.StShared(BAR_ADDR, 4, "r", threads=2), isa.LdShared(BAR_ADDR, 4, "s", threads=2),
            isa.MbarrierInit("t", 1), isa.MbarrierArrive("t"), isa.MbarrierTryWait("t", 0)]
    return program(("w", (0,), body, 1), bars=[("t", 1, BAR_ADDR)])


# ---- generic then async proxy, and the fence's state space (§9.7.16.6.5, §9.7.13.4) --------------------------------
def tma_over_generic(fence: str | None):
    """A warp stores into a buffer, then a TMA load of the same warp overwrites it."""
    body = [isa.StShared(BUF, 16, "r")]
    body += [isa.FenceProxyAsync(fence)] if fence is not None else []
    body += [isa.MbarrierArriveExpectTx("tma", 4096), isa.CpAsyncBulkTensor(BUF, 4096, "tma", tensor="k"),
             isa.MbarrierTryWait("tma", 0)]
    return program(("w", (0,), body, 1), bars=[("tma", 1)])


def tma_over_other_warp(fence: bool):
    """Warp 1 stores into the buffer and releases it with bar.sync; warp 0 then refills it by TMA."""
    writer = [isa.StShared(BUF, 16, "r")] + ([isa.FenceProxyAsync()] if fence else []) + [isa.BarSync(1, 64)]
    loader = [isa.BarSync(1, 64), isa.MbarrierArriveExpectTx("tma", 4096),
              isa.CpAsyncBulkTensor(BUF, 4096, "tma", tensor="k"), isa.MbarrierTryWait("tma", 0)]
    return program(("loader", (0,), loader), ("writer", (1,), writer), bars=[("tma", 1)])


def mma_after_store(space: str):
    """The MMA thread's own st.shared of its A operand, then the MMA: the fence's state space must cover shared
    memory."""
    body = [isa.Alloc(64, ADDR), isa.StShared(A, 16, "a"), isa.FenceProxyAsync(space), isa.FenceBeforeThreadSync(),
            isa.FenceAfterThreadSync(),
            isa.Mma(0, smem(A), smem(B), IDESC, False), isa.Commit("done"), isa.MbarrierTryWait("done", 0),
            isa.FenceAfterThreadSync(), isa.Ld(0, "32x32b", 32, "d"), isa.WaitLd(), isa.Dealloc(0, 64)]
    return program(("w", (0,), body), bars=[("done", 1)])


# ---- TMEM allocation (§9.7.16.7.1) -------------------------------------------------------------------------------
def dealloc_by(warp: int):
    alloc = [isa.Alloc(64, ADDR), isa.BarSync(1, 64)] + ([isa.Dealloc(0, 64)] if warp == 0 else [])
    other = [isa.BarSync(1, 64), isa.LdShared(ADDR, 4, "t", threads=1)] + ([isa.Dealloc(0, 64)] if warp == 1 else [])
    return program(("alloc", (0,), alloc), ("other", (1,), other))


def alloc_vs_relinquish(ordered: bool):
    """Warp 0 relinquishes the CTA's permit; warp 1 allocates. Fixed: the allocation is published by bar.sync
    before the relinquish."""
    rel = ([isa.BarSync(1, 64)] if ordered else [work()]) + [isa.RelinquishAllocPermit()]
    alloc = [isa.Alloc(64, ADDR)] + ([isa.BarSync(1, 64)] if ordered else []) + [isa.Dealloc(0, 64)]
    return program(("rel", (0,), rel), ("alloc", (1,), alloc))


def partial_alloc(threads: int):
    return program(("a", (0,), [isa.Alloc(32, ADDR), work(), isa.Dealloc(0, 32)], threads))


def lane_relinquish(by_lane: bool):
    """Warp 0 allocates, meets its elected lane (elect.sync) and deallocates; the relinquish (.sync.aligned) comes
    from the lane's one-thread role (the bug) or from the whole warp (fixed)."""
    warp = [isa.Alloc(32, ADDR), isa.ElectSync()] + ([] if by_lane else [isa.RelinquishAllocPermit()])
    lane = [isa.ElectSync()] + ([isa.RelinquishAllocPermit()] if by_lane else [work()])
    return program(("a", (0,), [*warp, isa.Dealloc(0, 32)]), ("lane", (0,), lane, 1))


# ---- re-waits and tokens (§9.7.13.15.16) -----------------------------------------------------------------------
def rewait(flipped: bool, before_release: bool = False):
    """A two-slot-free ring: the producer refills ``full`` after each ``empty`` phase; the consumer waits, consumes
    and releases. ``before_release``: the consumer re-waits phase 0 *before* releasing it (after an unrelated
    signal on ``log``): legal, the next phase needs the release made after the re-wait."""
    prod = [isa.MbarrierArrive("full"), isa.MbarrierTryWait("empty", 0), isa.MbarrierArrive("full")]
    if before_release:
        cons = [isa.MbarrierTryWait("full", 0), work("consume"), isa.MbarrierArrive("log"),
                isa.MbarrierTryWait("full", 0), work("again"), isa.MbarrierArrive("empty"),
                isa.MbarrierTryWait("full", 1)]
    else:
        cons = [isa.MbarrierTryWait("full", 0), work("consume"), isa.MbarrierArrive("empty"),
                isa.MbarrierTryWait("full", 1 if flipped else 0), work("consume")]
    return program(("producer", (0,), prod, 1), ("consumer", (1,), cons, 1),
                   bars=[("full", 1), ("empty", 1), ("log", 1)])


def tokens(use_token: bool):
    """Two phases of a count-1 barrier complete, then the warp waits for the first one again. The token names
    phase 0 (complete: passes); ``try_wait.parity 0`` reads the barrier's last completed phase (1) and waits for
    phase 2, which nothing completes (a deadlock)."""
    wait = isa.MbarrierTryWait("b", token="st0") if use_token else isa.MbarrierTryWait("b", 0)
    body = [isa.MbarrierArrive("b", state="st0"), isa.MbarrierArrive("b", state="st1"),
            isa.MbarrierTryWait("b", token="st1"), wait, work()]
    return program(("w", (0,), body, 1), bars=[("b", 1)])


def token_handoff():
    """Tricky correct: a consumer signals with a kept token and the producer's refill is waited through the token
    of the consumer's own arrive on a count-2 barrier (both arrive; the token waits for that very phase)."""
    prod = [isa.StShared(BUF, 16, "r"), isa.MbarrierArrive("both", state="p0"), isa.MbarrierTryWait("both", token="p0")]
    cons = [isa.MbarrierArrive("both", state="c0"), isa.MbarrierTryWait("both", token="c0"),
            isa.LdShared(BUF, 16, "s")]
    return program(("producer", (0,), prod), ("consumer", (1,), cons), bars=[("both", 64)])


# ---- named barriers whose count changes between generations (§9.7.13.1) --------------------------------------------
def named_generations(same_generation: bool):
    """Generation 0 of barrier 3: warps 0 and 1 (64 threads); generation 1: warps 0, 1 and 2 (96). Warp 2 joins only
    after warp 0 told it (``g0``) that generation 0 is over. The bug: warp 2 names 96 in generation 0."""
    w0 = [isa.BarSync(3, 64), isa.MbarrierArrive("g0"), isa.BarSync(3, 96)]
    w1 = [isa.BarSync(3, 64), isa.BarSync(3, 96)]
    w2 = ([] if same_generation else [isa.MbarrierTryWait("g0", 0)]) + [isa.BarSync(3, 96)]
    return program(("a", (0,), w0), ("b", (1,), w1), ("c", (2,), w2), bars=[("g0", 32)])


# ---- lanes of one warp: elect.sync, commits by another lane (§9.7.13.14, §9.7.16.12.1) -------------------------------
def commit_lane(same_lane: bool):
    """Warp 4's lane A issues the MMA; the commit comes from lane A (fixed) or from lane B after an elect.sync that
    orders it after A's issue (the bug: B's commit tracks B's operations only). The epilogue reads D after the
    commit's barrier."""
    lane_a = [isa.ElectSync(), isa.Mma(0, smem(A), smem(B), IDESC, False)]
    lane_a += [isa.Commit("done"), isa.ElectSync()] if same_lane else [isa.ElectSync()]
    lane_b = [isa.ElectSync(), isa.ElectSync()] + ([] if same_lane else [isa.Commit("done")])
    epi = [isa.MbarrierTryWait("done", 0), isa.FenceAfterThreadSync(), isa.Ld(0, "32x32b", 32, "d"), isa.WaitLd()]
    return program(("epi", (0,), epi), ("lane_a", (4,), lane_a, 1), ("lane_b", (4,), lane_b, 1), bars=[("done", 1)])


def cp_then_mma(cp_committed: bool):
    """Lane A copies the A operand into TMEM (tcgen05.cp) and publishes the issue; lane B's MMA reads it (cp -> mma
    is pipelined across threads) and is committed. The dealloc after B's commit: A's cp is tracked by no commit of
    A (the bug), or A commits it too (fixed)."""
    cp = [isa.Cp(128, smem(A)), isa.FenceBeforeThreadSync(), isa.MbarrierArrive("issued")]
    cp += [isa.Commit("cp_done")] if cp_committed else []
    mma = [isa.MbarrierTryWait("issued", 0), isa.FenceAfterThreadSync(),
           isa.Mma(0, 128, smem(B), IDESC, False), isa.Commit("done")]
    epi = [isa.Alloc(256, ADDR), isa.FenceBeforeThreadSync(), isa.BarSync(1, 96), isa.MbarrierTryWait("done", 0)]
    epi += [isa.MbarrierTryWait("cp_done", 0)] if cp_committed else []
    epi += [isa.FenceAfterThreadSync(), isa.Ld(0, "32x32b", 32, "d"), isa.WaitLd(), isa.Dealloc(0, 256)]
    sync = [isa.BarSync(1, 96), isa.FenceAfterThreadSync()]
    return program(("epi", (0,), epi), ("cp", (4,), [*sync, *cp]), ("mma", (5,), [*sync, *mma]),
                   bars=[("issued", 32), ("done", 1), ("cp_done", 1)])


def cp_then_mma_lanes(cp_committed: bool):
    """The same within one warp: lane A's tcgen05.cp, then (elect.sync, with the tcgen05 fences around it) lane B's
    MMA reading the copy and B's commit; the epilogue deallocates after B's commit only (the bug) or after A's own
    commit too (fixed)."""
    lane_a = [isa.ElectSync(), isa.Cp(128, smem(A)), isa.FenceBeforeThreadSync(), isa.ElectSync()]
    lane_a += [isa.Commit("cp_done")] if cp_committed else []
    lane_b = [isa.ElectSync(), isa.ElectSync(), isa.FenceAfterThreadSync(), isa.Mma(0, 128, smem(B), IDESC, False),
              isa.Commit("done")]
    epi = [isa.Alloc(256, ADDR), isa.FenceBeforeThreadSync(), isa.BarSync(1, 64), isa.MbarrierTryWait("done", 0)]
    epi += [isa.MbarrierTryWait("cp_done", 0)] if cp_committed else []
    epi += [isa.FenceAfterThreadSync(), isa.Ld(0, "32x32b", 32, "d"), isa.WaitLd(), isa.Dealloc(0, 256)]
    warp = [isa.BarSync(1, 64), isa.FenceAfterThreadSync(), isa.ElectSync(), isa.ElectSync()]
    return program(("epi", (0,), epi), ("warp4", (4,), warp), ("lane_a", (4,), lane_a, 1),
                   ("lane_b", (4,), lane_b, 1), bars=[("done", 1), ("cp_done", 1)])


def elect_store(elect: bool):
    """Warp 0 fills a tile with st.shared and fences it for the async proxy; its elected lane stores it to global
    memory by TMA. elect.sync orders the lane's store after the warp's st.shared (one warp's program order); without
    it the lane's role is a thread nothing orders after the stores."""
    warp = [isa.StShared(BUF, 16, "r"), isa.FenceProxyAsync()] + ([isa.ElectSync()] if elect else [])
    lane = ([isa.ElectSync()] if elect else []) + [isa.CpAsyncBulkTensorStore(BUF, 512, tensor="o"),
                                                  isa.BulkCommitGroup(), isa.BulkWaitGroupRead(0)]
    return program(("warp", (0,), warp), ("lane", (0,), lane, 1))


def partial_warps():
    """Tricky correct: two 16-lane roles share warp 0, each stores its half of a row and arrives (16 arrivals each
    on a count-32 barrier); warp 1 reads the row after the phase."""
    lo = [isa.StShared(BUF, 16, "lo", threads=16), isa.MbarrierArrive("row")]
    hi = [isa.StShared(BUF + 256, 16, "hi", threads=16), isa.MbarrierArrive("row")]
    reader = [isa.MbarrierTryWait("row", 0), isa.LdShared(BUF, 16, "r")]
    return program(("lo", (0,), lo, 16), ("hi", (0,), hi, 16), ("reader", (1,), reader), bars=[("row", 32)])


# ---- tcgen05.shift (§9.7.16.9.3) -------------------------------------------------------------------------------
def shift_then_ld(committed: bool):
    body = [isa.Alloc(256, ADDR), isa.Shift(128)]
    body += [isa.Commit("done"), isa.MbarrierTryWait("done", 0), isa.FenceAfterThreadSync()] if committed else []
    body += [isa.Ld(128, "32x32b", 8, "s"), isa.WaitLd()]
    body += [] if committed else [isa.Commit("done"), isa.MbarrierTryWait("done", 0), isa.FenceAfterThreadSync()]
    body += [isa.Dealloc(0, 256)]
    return program(("w", (0,), body), bars=[("done", 1)])


def shift_then_mma():
    """Tricky correct: shift -> mma of one thread, the MMA reading the shifted cells as its A: a pipelined pair, no
    wait between them; one commit covers both."""
    body = [isa.Alloc(256, ADDR), isa.Shift(128), isa.Mma(0, 128, smem(B), IDESC, False),
            isa.Commit("done"), isa.MbarrierTryWait("done", 0), isa.FenceAfterThreadSync(),
            isa.Ld(0, "32x32b", 32, "d"), isa.WaitLd(), isa.Dealloc(0, 256)]
    return program(("w", (0,), body), bars=[("done", 1)])


# ---- the sweep ------------------------------------------------------------------------------------------------
BUGS = {  # name: (program, the rule each of 16 schedules shows)
    "reinit-in-use": (lambda: reinit(False), "mbarrier-init-in-use"),
    "reinit-table-barrier": (lambda: reinit_table(False), "mbarrier-init-in-use"),
    "use-after-inval": (lambda: use_after_inval(False), "mbarrier-use-after-inval"),
    "init-unordered-after-inval": (lambda: init_after_other_warps_inval(False), "mbarrier-init-in-use"),
    "inval-before-consumer": (lambda: inval_in_use(False), "mbarrier-inval-in-use"),
    "store-into-barrier": (lambda: overwrite_barrier(False), "mbarrier-object-overwritten"),
    "tma-into-barrier": (lambda: tma_over_barrier(False), "mbarrier-object-overwritten"),
    "tma-over-own-store": (lambda: tma_over_generic(None), "missing-proxy-fence"),
    "tma-over-other-warps-store": (lambda: tma_over_other_warp(False), "missing-proxy-fence"),
    "fence-names-global": (lambda: mma_after_store("global"), "missing-proxy-fence"),
    "dealloc-by-other-warp": (lambda: dealloc_by(1), "tmem-dealloc-other-warp"),
    "alloc-unordered-with-relinquish": (lambda: alloc_vs_relinquish(False), "tmem-alloc-after-relinquish"),
    "partial-warp-alloc": (lambda: partial_alloc(16), "warp-collective-partial"),
    "one-lane-relinquish": (lambda: lane_relinquish(True), "warp-collective-partial"),
    "rewait-not-flipped": (lambda: rewait(False), "mbarrier-wrong-parity"),
    "parity-two-phases-back": (lambda: tokens(False), "deadlock"),
    "named-count-changes-within-generation": (lambda: named_generations(True), "named-barrier-count-mismatch"),
    "commit-from-another-lane": (lambda: commit_lane(False), "tmem-read-before-commit"),
    "dealloc-after-uncommitted-cp": (lambda: cp_then_mma(False), "tmem-dealloc-in-flight"),
    "dealloc-after-uncommitted-cp-of-a-lane": (lambda: cp_then_mma_lanes(False), "tmem-dealloc-in-flight"),
    "lane-store-without-elect": (lambda: elect_store(False), "smem-read-before-complete"),
    "shift-then-ld-without-commit": (lambda: shift_then_ld(False), "tmem-read-before-commit"),
}
TWINS = {  # the bugs fixed (each the same scene)
    "reinit-in-use": lambda: reinit(True),
    "reinit-table-barrier": lambda: reinit_table(True),
    "use-after-inval": lambda: use_after_inval(True),
    "init-unordered-after-inval": lambda: init_after_other_warps_inval(True),
    "inval-before-consumer": lambda: inval_in_use(True),
    "store-into-barrier": lambda: overwrite_barrier(True),
    "tma-into-barrier": lambda: tma_over_barrier(True),
    "tma-over-own-store": lambda: tma_over_generic("shared::cta"),
    "tma-over-other-warps-store": lambda: tma_over_other_warp(True),
    "fence-names-global": lambda: mma_after_store("shared::cta"),
    "dealloc-by-other-warp": lambda: dealloc_by(0),
    "alloc-unordered-with-relinquish": lambda: alloc_vs_relinquish(True),
    "partial-warp-alloc": lambda: partial_alloc(32),
    "one-lane-relinquish": lambda: lane_relinquish(False),
    "rewait-not-flipped": lambda: rewait(True),
    "parity-two-phases-back": lambda: tokens(True),
    "named-count-changes-within-generation": lambda: named_generations(False),
    "commit-from-another-lane": lambda: commit_lane(True),
    "dealloc-after-uncommitted-cp": lambda: cp_then_mma(True),
    "dealloc-after-uncommitted-cp-of-a-lane": lambda: cp_then_mma_lanes(True),
    "lane-store-without-elect": lambda: elect_store(True),
    "shift-then-ld-without-commit": lambda: shift_then_ld(True),
}
TRICKY = {  # correct programs a checker easily gets wrong
    "memory-reused-after-inval": reuse_after_inval,
    "plain-fence-covers-shared": lambda: mma_after_store(""),
    "cluster-fence-covers-cta": lambda: tma_over_generic("shared::cluster"),
    "rewait-before-own-release": lambda: rewait(True, before_release=True),
    "token-names-an-old-phase": lambda: tokens(True),
    "token-handoff": token_handoff,
    "named-count-changes-between-generations": lambda: named_generations(False),
    "partial-warps-share-a-warp": partial_warps,
    "shift-mma-pipelined": shift_then_mma,
    "elect-orders-the-lane": lambda: elect_store(True),
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_each_seeded_bug_is_flagged_with_its_rule_under_16_schedules(name):
    build, rule = BUGS[name]
    shown = rules(build())
    assert all(rule in s for s in shown), (name, shown)


@pytest.mark.parametrize("name", sorted(TWINS))
def test_each_twin_is_clean_under_16_schedules(name):
    assert rules(TWINS[name]()) == [set()] * 16, name


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_each_tricky_correct_program_is_clean_under_16_schedules(name):
    assert rules(TRICKY[name]()) == [set()] * 16, name


def test_the_sweep_is_large_enough_and_every_bug_has_its_twin():
    assert len(BUGS) >= 15 and len(TRICKY) >= 8 and set(TWINS) == set(BUGS)
    from simtc.engine.hazards import RULES

    assert all(rule in RULES or rule == "deadlock" for _, rule in BUGS.values())
    for name, (build, _) in BUGS.items():   # each twin is the same scene: the same roles on the same warps
        bug, twin = build(), TWINS[name]()
        same = [(r.name, r.warps, r.threads) for r in bug.roles] == [(r.name, r.warps, r.threads) for r in twin.roles]
        assert same or name == "partial-warp-alloc", name   # (its twin: the whole warp)


# ---- the records ------------------------------------------------------------------------------------------------
def test_the_new_records_round_trip_through_json_and_print_their_ptx():
    recs = [isa.MbarrierInval("full"), isa.ElectSync(), isa.Shift(128), isa.MbarrierArrive("e", state="st"),
            isa.MbarrierArriveExpectTx("f", 64, state="tx"), isa.MbarrierTryWait("e", token="st")]
    for r in recs:
        assert isa.record_from_json(r.to_json()) == r
    assert [r.ptx() for r in recs] == [
        "mbarrier.inval.shared::cta.b64 [full];", "elect.sync _|p, 0xffffffff;",
        "tcgen05.shift.cta_group::1.down [0x00000080];", "mbarrier.arrive.shared::cta.b64 st, [e];",
        "mbarrier.arrive.expect_tx.shared::cta.b64 tx, [f], 64;", "mbarrier.try_wait.shared::cta.b64 p, [e], st;"]
    p = commit_lane(False)
    assert isa.Program.from_json(p.to_json()) == p


def test_records_refuse_what_ptx_refuses():
    with pytest.raises(SimtcError, match="parity or on a state token"):
        isa.MbarrierTryWait("b")
    with pytest.raises(SimtcError, match="parity or on a state token"):
        isa.MbarrierTryWait("b", 0, token="st")
    with pytest.raises(SimtcError, match="only the full warp"):
        isa.ElectSync(0xFFFF)
    with pytest.raises(SimtcError, match="quadrant"):
        isa.Shift(16 << 16)
    with pytest.raises(SimtcError, match="no earlier arrive of the role on 'b'"):
        program(("w", (0,), [isa.MbarrierArrive("a", state="st"), isa.MbarrierTryWait("b", token="st")]))


def test_a_token_wait_passes_on_its_own_phase_and_a_parity_wait_two_phases_back_does_not():
    ok = Engine(tokens(True)).run()
    assert ok.clean
    stuck = Engine(tokens(False)).run()
    assert stuck.deadlock is not None and "b parity 0" in stuck.deadlock["waiting"][0]["waits_on"]


def test_elect_sync_meets_the_warps_roles_and_a_missing_partner_deadlocks():
    eng = Engine(elect_store(True)).run()
    assert eng.clean
    lone = program(("warp", (0,), [isa.ElectSync(), work()]), ("lane", (0,), [work()], 1))
    assert Engine(lone).run().clean   # the lane's role holds no elect.sync: the warp meets only itself
    two = program(("warp", (0,), [isa.ElectSync(), isa.ElectSync()]), ("lane", (0,), [isa.ElectSync()], 1))
    eng = Engine(two).run()           # the lane has left: the warp's second elect.sync is its own
    assert eng.clean
    events = [e for e in eng.trace if e.kind == "phase" and "elect.sync" in e.detail]
    assert len(events) == 2


def test_barrier_bytes_are_checked_in_a_replayed_recording_too():
    from simtc.engine.checker import CheckLog, HazardChecker

    log = CheckLog()
    eng = Engine(overwrite_barrier(False), observers=[log]).run()
    again = HazardChecker.replay(log, eng.warps, eng.index)
    assert [h.rule for h in again.hazards] == [h.rule for h in eng.hazards] == ["mbarrier-object-overwritten"]


def test_the_checker_does_not_change_the_trace_of_any_sweep_program():
    progs = [b() for b, _ in BUGS.values()] + [b() for b in TWINS.values()] + [b() for b in TRICKY.values()]
    for p in progs:
        on, off = Engine(p).run(), Engine(p, check=False).run()
        assert on.trace == off.trace, p.name
        assert all(z.rule == "deadlock" for z in off.hazards)
