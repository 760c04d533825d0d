"""The hazard catalogue: small Programs with one seeded bug each, their correct twins, and tricky correct programs.

Each entry ``hazard/<name>`` is the smallest fragment of a warp-specialised ``tcgen05`` kernel that breaks one
ordering rule of the PTX ISA (https://docs.nvidia.com/cuda/parallel-thread-execution/); :data:`EXPECTED` names the
checker rule (:data:`simtc.engine.hazards.RULES`) it must be flagged with, or ``"deadlock"``, and :data:`REFS` the
PTX section it breaks. ``hazard/<name>-fixed`` is the same Program with the bug repaired and runs clean.
``hazard/ok-<name>`` (:data:`CORRECT`) are correct programs a checker easily gets wrong -- pipelined pairs with no
wait, ordering relayed through a second barrier, a fence on the consumer side, a phase waited twice, an allocation
that blocks, the registers of a tcgen05.ld used before tcgen05.wait::ld -- and must run clean too. The scenes
follow the sequences of PTX ISA 9.0 §9.7.16.6.4 (canonical synchronization patterns): an MMA thread (warp 4) and an
epilogue warpgroup (warps 0-3) sharing an accumulator, a producer writing shared memory, TMA loads and stores on
mbarriers and bulk groups, named barriers between warps.

>>> sorted(EXPECTED)[:2]
['hazard/addr-read-unsynchronised', 'hazard/addr-read-unsynchronised-fixed']
>>> EXPECTED["hazard/ld-before-commit"], EXPECTED["hazard/ld-before-commit-fixed"]
('tmem-read-before-commit', None)
>>> REFS["hazard/ld-before-commit"]
'PTX ISA 9.0 §9.7.16.6.4.4'
>>> REGISTRY_ENTRIES["hazard/ld-before-commit"][1]
'simtc.kernels.hazards:hazard_ld_before_commit'
>>> build("hazard/ld-before-commit").counts()["tcgen05.ld"]
1
>>> len(BUGS) >= 30, all(f"{n}-fixed" in EXPECTED for n in BUGS), EXPECTED["hazard/ok-cp-mma-cross-thread"]
(True, True, None)
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["BUGS", "CORRECT", "EXPECTED", "PROGRAMS", "REFS", "REGISTRY_ENTRIES", "WHAT", "build", "names",
           "register_all"]

_A, _B = 0, 16384        # shared-memory A (128 x 16 bf16) and B (64 x 16 bf16) tiles, SW128 K-major
_TILE_BYTES = 16384
_S = 32768               # a 2 KiB staging slot (a TMA-loaded KV tile, an O tile for a TMA store)
_ADDR = 49152            # the shared-memory words tcgen05.alloc writes the TMEM address to (not an operand)
_X = 53248               # a 1 KiB exchange buffer between two warps (2 x 512 B)

_FLASHMLA = "FlashMLA csrc/sm100/decode/head64/kernel.cuh at 9241ae3"
_PTX = "PTX ISA 9.0"


def _isa():
    import simtc.isa as isa

    return isa


def _mma(enable_input_d: bool = False, label: str = "", a=None):
    """The MMA D[0:128, 0:64] (TMEM columns 0-63) = A B: A from shared memory (SS) or, ``a`` an int, from TMEM (TS)."""
    isa = _isa()
    idesc = isa.InstrDescriptor(kind="f16", m=128, n=64, a_format="bf16", b_format="bf16")
    if a is None:
        a = isa.SmemDescriptor(start=_A, lbo=16, sbo=1024, layout_type="SW128")
    b = isa.SmemDescriptor(start=_B, lbo=16, sbo=1024, layout_type="SW128")
    return isa.Mma(0, a, b, idesc, enable_input_d, label=label)


def _bars(*spec):
    from simtc.isa.program import Barrier

    return tuple(Barrier(n, "mbarrier", c) for n, c in spec)


def _use(reg: str, label: str = "use"):
    isa = _isa()
    return isa.CudaCoreBlock(label, (("FMNMX", 32),), regs_read=(reg,), regs_written=(f"{reg}_max",))


def _regs(reg: str, label: str = "compute"):
    isa = _isa()
    return isa.CudaCoreBlock(label, (("FMUL", 32),), regs_written=(reg,))


# ---- scene 1: MMA thread -> epilogue warpgroup (-> MMA overwrites the accumulator) -------------------
def _epilogue_scene(name: str, *, wait=True, after=True, wait_ld=True, before=True, early_arrive=False,
                    second_mma=False, lane_base="warp", parity=0, dealloc="after_epilogue", rewait=False):
    # dealloc: "after_epilogue" (the MMA warp waits epi_done), "after_mma" (it waits only its own commit: the
    # epilogue's tcgen05.ld may still read the columns), "none" (the kernel exits with TMEM allocated)
    # rewait: the epilogue reads a second chunk of D after waiting the same (completed) phase of mma_done again
    isa = _isa()
    mma = [isa.MbarrierInit("mma_done", 1), isa.MbarrierInit("epi_done", 128), isa.Alloc(128, _ADDR),
           isa.FenceBeforeThreadSync(), isa.BarSync(1, 160), isa.FenceAfterThreadSync(),
           _mma(False, "D = A B"), isa.Commit("mma_done")]
    mma += [isa.MbarrierTryWait("mma_done" if dealloc == "after_mma" else "epi_done", 0), isa.FenceAfterThreadSync()]
    if second_mma:
        mma += [_mma(False, "D = A B again (overwrites D)"), isa.Commit("mma_done"),
                isa.MbarrierTryWait("mma_done", 1), isa.FenceAfterThreadSync()]
    if dealloc != "none":
        mma += [isa.Dealloc(0, 128)]
    epi = [isa.BarSync(1, 160), isa.FenceAfterThreadSync()]
    if wait:
        epi.append(isa.MbarrierTryWait("mma_done", parity))
    if after:
        epi.append(isa.FenceAfterThreadSync())
    taddr = 0 if lane_base == "warp" else (32 << 16)
    epi.append(isa.Ld(taddr, "32x32b", 32, "p", lane_base=lane_base, label="P rows of this warp"))
    use = isa.CudaCoreBlock("row max", (("FMNMX", 32),), regs_read=("p",), regs_written=("m",))
    if early_arrive:
        epi += [isa.FenceBeforeThreadSync(), isa.MbarrierArrive("epi_done"), isa.WaitLd(), use]
    else:
        epi += ([isa.WaitLd(), use] if wait_ld else [use, isa.WaitLd()])
        if rewait:
            epi += [isa.MbarrierTryWait("mma_done", 0), isa.FenceAfterThreadSync(),
                    isa.Ld(32, "32x32b", 32, "q", label="columns 32-63 of this warp's rows"), isa.WaitLd(),
                    isa.CudaCoreBlock("row max", (("FMNMX", 32),), regs_read=("q", "m"), regs_written=("m",))]
        if before:
            epi.append(isa.FenceBeforeThreadSync())
        epi.append(isa.MbarrierArrive("epi_done"))
    roles = (isa.Role("epilogue", (0, 1, 2, 3), tuple(epi)), isa.Role("mma", (4,), tuple(mma)))
    return isa.Program(name, roles, _bars(("mma_done", 1), ("epi_done", 128)),
                       description="MMA thread -> commit -> epilogue tcgen05.ld (PTX ISA 9.0 §9.7.16.6.4)")


# ---- scene 2: a producer warp writes A/B with st.shared, the MMA thread consumes them ---------------
def _producer_scene(name: str, *, proxy_fence=True, rewrite_b=False, wait_free=True, fence_after_arrive=False,
                    consumer_fence=False):
    # rewrite_b: the producer writes the next B once it may (after the commit on ab_free) -- or, the bug,
    # as soon as the MMA thread says it has *issued* the MMA (mma_issued), while the MMA may still read B
    # fence_after_arrive: the producer's fence.proxy.async comes after its arrive; consumer_fence: the MMA thread
    # issues fence.proxy.async after its wait instead
    isa = _isa()
    write_ab = isa.CudaCoreBlock("write A, B", (("STS.128", 48),), smem_writes=(isa.SmemRange(_A, _B + 2048),))
    prod = [isa.BarSync(1, 64), write_ab]
    if proxy_fence:
        prod.append(isa.FenceProxyAsync())
    prod.append(isa.MbarrierArrive("ab_ready"))
    if fence_after_arrive:
        prod.append(isa.FenceProxyAsync())
    if rewrite_b:
        prod.append(isa.MbarrierTryWait("ab_free" if wait_free else "mma_issued", 0))
        prod += [isa.CudaCoreBlock("write next B", (("STS.128", 16),), smem_writes=(isa.SmemRange(_B, _B + 2048),)),
                 isa.FenceProxyAsync()]
    mma = [isa.MbarrierInit("ab_ready", 32), isa.MbarrierInit("ab_free", 1), isa.MbarrierInit("mma_done", 1),
           isa.MbarrierInit("mma_issued", 32), isa.Alloc(128, _ADDR), isa.FenceBeforeThreadSync(), isa.BarSync(1, 64),
           isa.FenceAfterThreadSync(), isa.MbarrierTryWait("ab_ready", 0),
           *((isa.FenceProxyAsync(),) if consumer_fence else ()), isa.FenceAfterThreadSync(),
           _mma(False, "D = A B"), isa.MbarrierArrive("mma_issued"), isa.Commit("ab_free"), isa.Commit("mma_done"),
           isa.MbarrierTryWait("mma_done", 0),
           isa.FenceAfterThreadSync(), isa.Dealloc(0, 128)]
    roles = (isa.Role("producer", (5,), tuple(prod)), isa.Role("mma", (4,), tuple(mma)))
    return isa.Program(name, roles, _bars(("ab_ready", 32), ("ab_free", 1), ("mma_done", 1), ("mma_issued", 32)),
                       description="st.shared producer -> fence.proxy.async -> mbarrier -> MMA (PTX §9.7.16.6.5)")


# ---- scene 3: TMA loads on an mbarrier, then the MMA --------------------------------------------------
def _tma_scene(name: str, *, parity=0, expect=_TILE_BYTES + 2048, after=True):
    isa = _isa()
    mma = [isa.MbarrierInit("full", 1), isa.MbarrierInit("mma_done", 1), isa.Alloc(128, _ADDR),
           isa.CpAsyncBulkTensor(_A, _TILE_BYTES // 2, "full", tensor="A"),
           isa.CpAsyncBulkTensor(_A + _TILE_BYTES // 2, _TILE_BYTES // 2, "full", tensor="A"),
           isa.CpAsyncBulkTensor(_B, 2048, "full", tensor="B"),
           isa.MbarrierArriveExpectTx("full", expect), isa.MbarrierTryWait("full", parity),
           *((isa.FenceAfterThreadSync(),) if after else ()), _mma(False, "D = A B"), isa.Commit("mma_done"),
           isa.MbarrierTryWait("mma_done", 0), isa.FenceAfterThreadSync(), isa.Dealloc(0, 128)]
    return isa.Program(name, (isa.Role("mma", (4,), tuple(mma)),), _bars(("full", 1), ("mma_done", 1)),
                       description="TMA -> complete_tx -> mbarrier -> MMA")


# ---- scene 4: a two-slot handshake (full / empty) -----------------------------------------------------
def _handshake_scene(name: str, *, second_parity=1, consumer_arrives=True, full_count=1):
    isa = _isa()
    prod = [isa.MbarrierInit("full", full_count), isa.MbarrierInit("empty", 1), isa.BarSync(1, 64),
            isa.MbarrierArriveExpectTx("full", 0), isa.MbarrierTryWait("empty", 0),
            isa.MbarrierArriveExpectTx("full", 0)]
    cons = [isa.BarSync(1, 64), isa.MbarrierTryWait("full", 0)]
    if consumer_arrives:
        cons.append(isa.MbarrierArriveExpectTx("empty", 0))
    cons.append(isa.MbarrierTryWait("full", second_parity))
    roles = (isa.Role("producer", (5,), tuple(prod), threads=32), isa.Role("consumer", (6,), tuple(cons)))
    return isa.Program(name, roles, _bars(("full", full_count), ("empty", 1)),
                       description="producer/consumer handshake on full/empty mbarriers")


def _arrival_scene(name: str, *, count=32, tx_expect=2048, tx_bytes=2048):
    isa = _isa()
    rec = [isa.MbarrierInit("bar", count), isa.MbarrierInit("tma", 1), isa.MbarrierArrive("bar"),
           isa.MbarrierTryWait("bar", 0), isa.CpAsyncBulkTensor(_B, tx_bytes, "tma", tensor="B"),
           isa.MbarrierArriveExpectTx("tma", tx_expect), isa.MbarrierTryWait("tma", 0)]
    return isa.Program(name, (isa.Role("warp", (0,), tuple(rec)),), _bars(("bar", count), ("tma", 1)),
                       description="arrival and transaction counts of an mbarrier")


def _alloc_scene(name: str, *, first=256, second=256, relinquish_first=False, dealloc_col=0):
    isa = _isa()
    rec = [isa.Alloc(first, 0)]
    if relinquish_first:
        rec.append(isa.RelinquishAllocPermit())
    rec.append(isa.Alloc(second, 8))
    if not relinquish_first:
        rec.append(isa.RelinquishAllocPermit())
    rec.append(isa.Dealloc(dealloc_col, first))
    if first + second <= 512:  # (over 512 the second allocation never happened)
        rec.append(isa.Dealloc(first, second))
    return isa.Program(name, (isa.Role("alloc", (0,), tuple(rec)),), description="tcgen05.alloc / dealloc rules")


def _named_scene(name: str, *, threads=64, threads_b=None):
    isa = _isa()
    a = [isa.BarSync(2, threads), isa.CudaCoreBlock("work", (("FADD", 4),))]
    b = [isa.BarSync(2, threads if threads_b is None else threads_b), isa.CudaCoreBlock("work", (("FADD", 4),))]
    return isa.Program(name, (isa.Role("a", (0,), tuple(a)), isa.Role("b", (2,), tuple(b))),
                       description="a named barrier with a thread count")


def _deadlock_scene(name: str, *, arrive=True):
    isa = _isa()
    prod = [isa.MbarrierInit("ready", 1), isa.BarSync(1, 64), isa.CudaCoreBlock("produce", (("FFMA", 8),))]
    if arrive:
        prod.append(isa.MbarrierArriveExpectTx("ready", 0))
    cons = [isa.BarSync(1, 64), isa.MbarrierTryWait("ready", 0), isa.CudaCoreBlock("consume", (("FFMA", 8),))]
    return isa.Program(name, (isa.Role("producer", (5,), tuple(prod)), isa.Role("consumer", (6,), tuple(cons))),
                       _bars(("ready", 1)), description="a consumer waits on a barrier")


# ---- scene 5: TMEM deallocation by the warp that read it ----------------------------------------------
def _dealloc_scene(name: str, *, wait_ld_first=True):
    """Warp 0 allocates and frees TMEM (FlashMLA's warp 0, kernel.cuh L63 and L425 at 9241ae3) and reads its
    lanes of D; the MMA thread (warp 4) computes D."""
    isa = _isa()
    epi = [isa.MbarrierInit("mma_done", 1), isa.Alloc(64, _ADDR), isa.FenceBeforeThreadSync(), isa.BarSync(1, 64),
           isa.FenceAfterThreadSync(), isa.MbarrierTryWait("mma_done", 0), isa.FenceAfterThreadSync(),
           isa.Ld(0, "32x32b", 32, "p", label="lanes 0-31 of D")]
    if wait_ld_first:
        epi += [isa.WaitLd(), isa.Dealloc(0, 64)]
    else:
        epi += [isa.Dealloc(0, 64), isa.WaitLd()]
    epi.append(_use("p", "row max"))
    mma = [isa.BarSync(1, 64), isa.FenceAfterThreadSync(), _mma(False, "D = A B"), isa.Commit("mma_done")]
    roles = (isa.Role("epilogue", (0,), tuple(epi)), isa.Role("mma", (4,), tuple(mma)))
    return isa.Program(name, roles, _bars(("mma_done", 1)),
                       description="tcgen05.ld -> tcgen05.wait::ld -> tcgen05.dealloc in one warp")


# ---- scene 6: the TMEM address tcgen05.alloc writes to shared memory, read by another warp ------------
def _addr_scene(name: str, *, sync=True):
    """Warp 0 allocates (the address goes to shared memory at ``_ADDR``); warp 1 reads the address with ld.shared
    and uses its lanes; warp 0 frees the columns once warp 1 is done (FlashMLA: allocate, __syncthreads,
    kernel.cuh L63-67 at 9241ae3)."""
    isa = _isa()
    alloc = [isa.Alloc(128, _ADDR)]
    reader = []
    if sync:
        alloc += [isa.FenceBeforeThreadSync(), isa.BarSync(1, 64)]
        reader += [isa.BarSync(1, 64), isa.FenceAfterThreadSync()]
    alloc += [isa.BarSync(2, 64), isa.FenceAfterThreadSync(), isa.Dealloc(0, 128)]
    reader += [isa.LdShared(_ADDR, 4, "taddr", stride=0, label="the TMEM address"),
               _regs("x", "compute x"), isa.St(0, "32x32b", 32, "x", label="x to this warp's lanes"), isa.WaitSt(),
               isa.FenceBeforeThreadSync(), isa.BarSync(2, 64)]
    roles = (isa.Role("alloc", (0,), tuple(alloc)), isa.Role("reader", (1,), tuple(reader)))
    return isa.Program(name, roles, description="tcgen05.alloc -> fence::before -> bar.sync -> fence::after -> "
                                                "ld.shared of the address")


# ---- scene 7: tcgen05.st then tcgen05.ld of the same cells in one thread -------------------------------
def _st_ld_scene(name: str, *, wait_st_first=True):
    isa = _isa()
    rec = [isa.Alloc(32, _ADDR), _regs("s", "S = scale(P)"), isa.St(0, "32x32b", 32, "s", label="S to TMEM")]
    rec += ([isa.WaitSt(), isa.Ld(0, "32x32b", 32, "t", label="S back")] if wait_st_first
            else [isa.Ld(0, "32x32b", 32, "t", label="S back"), isa.WaitSt()])
    rec += [isa.WaitLd(), _use("t"), isa.Dealloc(0, 32)]
    return isa.Program(name, (isa.Role("epilogue", (0,), tuple(rec)),),
                       description="tcgen05.st -> tcgen05.wait::st -> tcgen05.ld (PTX ISA 9.0 §9.7.16.6.4.2)")


# ---- scene 7b: an in-place rescale of TMEM (tcgen05.ld -> scale -> tcgen05.st of the same cells) ---------
def _rescale_scene(name: str, *, wait_ld_first=True):
    """One warp scales its O rows in TMEM in place (FlashMLA's lazy O rescale, kernel.cuh L268-291 at 9241ae3, its
    chunk's tcgen05.ld at L278): the scale reads the tcgen05.ld's registers (a register dependency, respected
    without a wait, PTX ISA 9.0 §9.7.16.6.4.5), but the tcgen05.st over the cells the load reads needs
    tcgen05.wait::ld between them."""
    isa = _isa()
    rec = [isa.Alloc(32, _ADDR), _regs("o", "O"), isa.St(0, "32x32b", 32, "o", label="O to TMEM"), isa.WaitSt(),
           isa.Ld(0, "32x32b", 32, "o_old", label="O rows of this warp")]
    scale = isa.CudaCoreBlock("O *= scale", (("FMUL", 32),), regs_read=("o_old",), regs_written=("o_new",))
    st = isa.St(0, "32x32b", 32, "o_new", label="scaled O back")
    rec += [isa.WaitLd(), scale, st] if wait_ld_first else [scale, st, isa.WaitLd()]
    rec += [isa.WaitSt(), isa.Dealloc(0, 32)]
    return isa.Program(name, (isa.Role("epilogue", (0,), tuple(rec)),),
                       description="tcgen05.ld -> tcgen05.wait::ld -> scale -> tcgen05.st of the same cells "
                                   "(PTX ISA 9.0 §9.7.16.6.4.5)")


# ---- scene 8: an epilogue warpgroup stages O in shared memory; a TMA store writes it out --------------
def _tma_store_scene(name: str, *, proxy_fence=True, store_after_bar=True, two_rounds=False):
    """Each warp writes its 512 B of O with st.shared, fence.proxy.async, bar.sync; warp 0 issues the TMA store
    (FlashMLA kernel.cuh L367-383 at 9241ae3). ``two_rounds``: warps 0 and 1 each store one half, then wait for the
    bulk group's reads and sync before the buffer is written again."""
    isa = _isa()
    rec = []
    for r in range(2 if two_rounds else 1):
        rec.append(_regs("o", f"O tile {r}"))
        rec.append(isa.StShared(_S, 16, "o", warp_offsets=(0, 512, 1024, 1536), label=f"O tile {r} rows"))
        if proxy_fence:
            rec.append(isa.FenceProxyAsync())
        if two_rounds:
            stores = [isa.CpAsyncBulkTensorStore(_S, 1024, tensor="O", issuing_warp=0),
                      isa.CpAsyncBulkTensorStore(_S + 1024, 1024, tensor="O", issuing_warp=1)]
        else:
            stores = [isa.CpAsyncBulkTensorStore(_S, 2048, tensor="O", issuing_warp=0)]
        rec += [isa.BarSync(1, 128), *stores] if store_after_bar else [*stores, isa.BarSync(1, 128)]
        rec += [isa.BulkCommitGroup(), isa.BulkWaitGroupRead(0)]
        if two_rounds and r == 0:
            rec.append(isa.BarSync(1, 128))
    return isa.Program(name, (isa.Role("epilogue", (0, 1, 2, 3), tuple(rec)),),
                       description="st.shared -> fence.proxy.async -> bar.sync -> TMA store -> wait_group.read")


# ---- scene 9: a generic store racing a TMA load into the same bytes (WAW) ------------------------------
def _waw_scene(name: str, *, wait_first=True):
    """The producer loads a 2 KiB KV tile with TMA and zeroes its first 512 B (invalid tokens) with st.shared, then
    reads the tile."""
    isa = _isa()
    rec = [isa.MbarrierInit("full", 1), isa.CpAsyncBulkTensor(_S, 2048, "full", tensor="KV"),
           isa.MbarrierArriveExpectTx("full", 2048), _regs("zeros", "zeros")]
    zero = isa.StShared(_S, 16, "zeros", label="zero the invalid rows")
    rec += [isa.MbarrierTryWait("full", 0), zero] if wait_first else [zero, isa.MbarrierTryWait("full", 0)]
    rec += [isa.LdShared(_S, 16, "kv", label="the tile"), _use("kv")]
    return isa.Program(name, (isa.Role("producer", (5,), tuple(rec)),), _bars(("full", 1)),
                       description="TMA load -> mbarrier wait -> st.shared into the loaded tile")


# ---- scene 10: generic readers of a slot that a TMA refill overwrites (WAR) ----------------------------
def _war_scene(name: str, *, wait_empty=True):
    isa = _isa()
    prod = [isa.MbarrierInit("full", 1), isa.MbarrierInit("empty", 32), isa.BarSync(1, 64),
            isa.CpAsyncBulkTensor(_S, 2048, "full", tensor="KV"), isa.MbarrierArriveExpectTx("full", 2048),
            isa.MbarrierTryWait("empty" if wait_empty else "full", 0),
            isa.CpAsyncBulkTensor(_S, 2048, "full", tensor="KV", label="refill"),
            isa.MbarrierArriveExpectTx("full", 2048)]
    cons = [isa.BarSync(1, 64), isa.MbarrierTryWait("full", 0), isa.LdShared(_S, 16, "kv0"), _use("kv0"),
            isa.MbarrierArrive("empty"), isa.MbarrierTryWait("full", 1), isa.LdShared(_S, 16, "kv1"), _use("kv1")]
    roles = (isa.Role("producer", (5,), tuple(prod)), isa.Role("consumer", (6,), tuple(cons)))
    return isa.Program(name, roles, _bars(("full", 1), ("empty", 32)),
                       description="TMA load -> full -> ld.shared readers -> empty -> TMA refill")


# ---- scene 11: mbarrier.init and the warps that use the barrier --------------------------------------------
def _init_scene(name: str, *, init="before_sync"):
    # init: "before_sync" (the consumer initialises, then bar.sync), "after_sync" (it initialises after the
    # bar.sync, once its setup is done: the producer may arrive first), "no_sync" (no bar.sync at all)
    isa = _isa()
    setup = isa.CudaCoreBlock("setup", (("FFMA", 64),), chain=(("FFMA", 16),))
    sync = [] if init == "no_sync" else [isa.BarSync(1, 64)]
    cons = ([isa.MbarrierInit("ready", 1), *sync, setup] if init != "after_sync"
            else [*sync, setup, isa.MbarrierInit("ready", 1)])
    cons += [isa.MbarrierTryWait("ready", 0), isa.CudaCoreBlock("consume", (("FFMA", 8),))]
    prod = [*sync, isa.CudaCoreBlock("produce", (("FFMA", 8),)), isa.MbarrierArriveExpectTx("ready", 0)]
    if init == "no_sync":
        prod.insert(0, isa.CudaCoreBlock("setup", (("FFMA", 64),), chain=(("FFMA", 16),)))
    # "ready" is not in the barrier table (the table's barriers count as initialised by setup code before the roles)
    return isa.Program(name, (isa.Role("producer", (5,), tuple(prod)), isa.Role("consumer", (6,), tuple(cons))),
                       description="mbarrier.init -> bar.sync -> arrive / try_wait")


# ---- scene 12: a one-slot ring with two consumers taking turns ------------------------------------------
def _ring_scene(name: str, *, observe_every_phase=True):
    """The producer fills one slot three times (phases 0, 1, 2 of ``full``); consumer A takes items 0 and 2,
    consumer B item 1; both release every phase on ``empty`` (count 64), so neither can fall two phases behind."""
    isa = _isa()
    prod = [isa.MbarrierInit("full", 1), isa.MbarrierInit("empty", 64), isa.BarSync(1, 96)]
    for i in range(3):
        prod += [isa.MbarrierTryWait("empty", (i & 1) ^ 1), isa.CpAsyncBulkTensor(_S, 2048, "full", tensor="KV"),
                 isa.MbarrierArriveExpectTx("full", 2048)]

    def take(i):
        return [isa.LdShared(_S, 16, f"kv{i}", label=f"item {i}"), _use(f"kv{i}")]

    a = [isa.BarSync(1, 96), isa.MbarrierTryWait("full", 0), *take(0), isa.MbarrierArrive("empty")]
    if observe_every_phase:
        a += [isa.MbarrierTryWait("full", 1), isa.MbarrierArrive("empty")]
    a += [isa.MbarrierTryWait("full", 0), *take(2), isa.MbarrierArrive("empty")]
    b = [isa.BarSync(1, 96), isa.MbarrierTryWait("full", 0), isa.MbarrierArrive("empty"),
         isa.MbarrierTryWait("full", 1), *take(1), isa.MbarrierArrive("empty"),
         isa.MbarrierTryWait("full", 0), isa.MbarrierArrive("empty")]
    roles = (isa.Role("producer", (5,), tuple(prod)), isa.Role("consumer_a", (6,), tuple(a)),
             isa.Role("consumer_b", (7,), tuple(b)))
    return isa.Program(name, roles, _bars(("full", 1), ("empty", 64)),
                       description="a one-slot ring: full / empty mbarriers, two consumers taking turns")


# ---- scene 13: two warp pairs exchanging data through named barriers ----------------------------------
def _pairs_scene(name: str, *, second_id=4):
    """Warp 0 hands 512 B to warp 2 and warp 1 to warp 3, each pair on its own named barrier (FlashMLA's
    wg0_warp02_sync / wg0_warp13_sync, kernel.cuh L185 at 9241ae3); the readers arrive late."""
    isa = _isa()
    ids = (3, second_id)
    roles = []
    for k in range(2):
        write = [_regs(f"v{k}"), isa.StShared(_X + 512 * k, 16, f"v{k}", label="my half"), isa.BarSync(ids[k], 64)]
        read = [isa.CudaCoreBlock("softmax", (("FFMA", 64),), chain=(("FFMA", 32),)), isa.BarSync(ids[k], 64),
                isa.LdShared(_X + 512 * k, 16, f"w{k}", label="the peer's half"), _use(f"w{k}")]
        roles += [isa.Role(f"writer{k}", (k,), tuple(write)), isa.Role(f"reader{k}", (k + 2,), tuple(read))]
    return isa.Program(name, tuple(roles), description="st.shared -> bar.sync (one id per warp pair) -> ld.shared")


# ---- scene 14: an A operand copied into TMEM (tcgen05.cp) and consumed by a TS MMA ---------------------
def _cp_mma_scene(name: str, *, cross_thread=True):
    """``cross_thread``: warp 5 copies A into TMEM and hands it over with fence::before_thread_sync -> arrive; the
    MMA thread waits, fence::after_thread_sync, MMA (no commit of the cp before the MMA: cp -> mma is a pipelined
    pair; the cp's commit is waited only before the dealloc). Otherwise one thread issues cp, mma, mma (accumulate)
    with no wait between them."""
    isa = _isa()
    a_tmem = 128  # TMEM column of A (8 columns = one K step of bf16)
    a_desc = isa.SmemDescriptor(start=_A, lbo=16, sbo=1024, layout_type="SW128")
    cp = isa.Cp(a_tmem, a_desc, label="A -> TMEM")
    tail = [isa.Commit("mma_done"), isa.MbarrierTryWait("mma_done", 0), isa.FenceAfterThreadSync(),
            isa.Ld(0, "32x32b", 32, "d", label="lanes 0-31 of D"), isa.WaitLd(), _use("d"), isa.Dealloc(0, 256)]
    if not cross_thread:
        rec = [isa.MbarrierInit("mma_done", 1), isa.Alloc(256, _ADDR), cp, _mma(False, "D = A B", a=a_tmem),
               _mma(True, "D += A B", a=a_tmem), *tail]
        return isa.Program(name, (isa.Role("mma", (4,), tuple(rec)),), _bars(("mma_done", 1)),
                           description="tcgen05.cp -> mma -> mma in one thread (PTX ISA 9.0 §9.7.16.6.4.1)")
    # the copier commits its cp only for the teardown: the dealloc waits for it (the MMA does not)
    tail[-1:-1] = [isa.MbarrierTryWait("cp_done", 0), isa.FenceAfterThreadSync()]
    mma = [isa.MbarrierInit("a_ready", 32), isa.MbarrierInit("mma_done", 1), isa.MbarrierInit("cp_done", 1),
           isa.Alloc(256, _ADDR), isa.FenceBeforeThreadSync(), isa.BarSync(1, 64), isa.FenceAfterThreadSync(),
           isa.MbarrierTryWait("a_ready", 0), isa.FenceAfterThreadSync(), _mma(False, "D = A B", a=a_tmem), *tail]
    copier = [isa.BarSync(1, 64), isa.FenceAfterThreadSync(), cp, isa.FenceBeforeThreadSync(),
              isa.MbarrierArrive("a_ready"), isa.Commit("cp_done")]
    roles = (isa.Role("copier", (5,), tuple(copier)), isa.Role("mma", (4,), tuple(mma)))
    return isa.Program(name, roles, _bars(("a_ready", 32), ("mma_done", 1), ("cp_done", 1)),
                       description="tcgen05.cp -> fence::before -> arrive | wait -> fence::after -> tcgen05.mma "
                                   "(PTX ISA 9.0 §9.7.16.6.4.3)")


# ---- scene 15: the MMA's completion relayed to the warpgroup through a named barrier -------------------
def _relay_scene(name: str):
    """PTX ISA 9.0 §9.7.16.6.4.4's composed pattern: warp 0 waits the commit, fence::after_thread_sync,
    fence::before_thread_sync, then bar.sync releases warps 1-3, which fence::after_thread_sync and read."""
    isa = _isa()
    mma = [isa.MbarrierInit("mma_done", 1), isa.MbarrierInit("epi_done", 128), isa.Alloc(128, _ADDR),
           isa.FenceBeforeThreadSync(), isa.BarSync(1, 160), isa.FenceAfterThreadSync(), _mma(False, "D = A B"),
           isa.Commit("mma_done"), isa.MbarrierTryWait("epi_done", 0), isa.FenceAfterThreadSync(),
           isa.Dealloc(0, 128)]
    read = [isa.Ld(0, "32x32b", 32, "p", label="P rows of this warp"), isa.WaitLd(), _use("p", "row max"),
            isa.FenceBeforeThreadSync(), isa.MbarrierArrive("epi_done")]
    relay = [isa.BarSync(1, 160), isa.FenceAfterThreadSync(), isa.MbarrierTryWait("mma_done", 0),
             isa.FenceAfterThreadSync(), isa.FenceBeforeThreadSync(), isa.BarSync(2, 128), *read]
    others = [isa.BarSync(1, 160), isa.FenceAfterThreadSync(), isa.BarSync(2, 128), isa.FenceAfterThreadSync(),
              *read]
    roles = (isa.Role("relay", (0,), tuple(relay)), isa.Role("epilogue", (1, 2, 3), tuple(others)),
             isa.Role("mma", (4,), tuple(mma)))
    return isa.Program(name, roles, _bars(("mma_done", 1), ("epi_done", 128)),
                       description="commit -> one warp waits -> bar.sync -> the warpgroup reads TMEM")


# ---- scene 16: an allocation that blocks until another warp frees its columns -----------------------------
def _blocking_alloc_scene(name: str):
    isa = _isa()
    work = isa.CudaCoreBlock("work", (("FFMA", 64),), chain=(("FFMA", 32),))
    first = [isa.Alloc(512, _ADDR), isa.BarArrive(1, 64), work, isa.Dealloc(0, 512)]
    second = [isa.BarSync(1, 64), isa.Alloc(256, _ADDR + 8, label="blocks until warp 0 frees"), isa.Dealloc(0, 256),
              isa.RelinquishAllocPermit()]
    return isa.Program(name, (isa.Role("first", (0,), tuple(first)), isa.Role("second", (1,), tuple(second))),
                       description="tcgen05.alloc of 512 columns; a later allocation waits for the dealloc")


_TMEM_ORDER = f"{_PTX} §9.7.16.6.4.4"
_CATALOGUE: dict[str, tuple[str, Callable, dict, dict, str, str]] = {
    # name: (rule, builder, buggy kwargs, fixed kwargs, the bug in one line, the PTX section it breaks)
    # -- Tensor Memory
    "ld-before-commit": ("tmem-read-before-commit", _epilogue_scene, {"wait": False}, {},
                         "tcgen05.ld of the accumulator without waiting for the MMA's commit", _TMEM_ORDER),
    "missing-after-fence": ("missing-after-thread-sync-fence", _epilogue_scene, {"after": False}, {},
                            "the consumer reads TMEM after the mbarrier wait without tcgen05.fence::after_thread_sync",
                            f"{_PTX} §9.7.16.6.3, §9.7.16.6.4.4"),
    "ld-st-no-wait-ld": ("tmem-overwrite-in-flight", _rescale_scene, {"wait_ld_first": False}, {},
                         "an in-place rescale: one warp's tcgen05.st overwrites the cells its tcgen05.ld may still "
                         "be reading (the register dependency ld -> scale -> st orders no memory access; wait::ld "
                         "after the st)", f"{_PTX} §9.7.16.6.4.5"),
    "overwrite-before-ld-done": ("tmem-overwrite-in-flight", _epilogue_scene,
                                 {"early_arrive": True, "second_mma": True}, {"second_mma": True},
                                 "the reader frees P before its tcgen05.ld completes; the next MMA overwrites P",
                                 _TMEM_ORDER),
    "missing-before-fence": ("missing-before-thread-sync-fence", _epilogue_scene,
                             {"before": False, "second_mma": True}, {"second_mma": True},
                             "the TMEM reader arrives on the barrier without tcgen05.fence::before_thread_sync",
                             f"{_PTX} §9.7.16.6.3, §9.7.16.6.4.4"),
    "lane-quadrant": ("lane-quadrant", _epilogue_scene, {"lane_base": "absolute"}, {},
                      "a warp's tcgen05.ld reaches outside its lane quadrant", f"{_PTX} §9.7.16.8.1"),
    "dealloc-ld-in-flight": ("tmem-dealloc-in-flight", _dealloc_scene, {"wait_ld_first": False}, {},
                             "tcgen05.dealloc of columns whose tcgen05.ld is still in flight (wait::ld after it)",
                             f"{_PTX} §9.7.16.6.1, §9.7.16.6.4.2, §9.7.16.7.1"),
    "dealloc-unsynchronised": ("tmem-dealloc-in-flight", _epilogue_scene, {"dealloc": "after_mma"}, {},
                               "the MMA warp frees the accumulator after its own commit, without waiting for the "
                               "epilogue warps that read it", _TMEM_ORDER),
    "addr-read-unsynchronised": ("tmem-address-read-before-sync", _addr_scene, {"sync": False}, {},
                                 "another warp reads the TMEM address tcgen05.alloc wrote to shared memory without "
                                 "a barrier after the alloc", f"{_PTX} §9.7.16.6.1, §9.7.16.7.1"),
    "alloc-after-relinquish": ("tmem-alloc-after-relinquish", _alloc_scene, {"relinquish_first": True}, {},
                               "tcgen05.alloc after tcgen05.relinquish_alloc_permit", f"{_PTX} §9.7.16.7.1"),
    "alloc-over-512": ("tmem-alloc-over-512", _alloc_scene, {"first": 512, "second": 32}, {},
                       "tcgen05.alloc beyond the 512 TMEM columns", f"{_PTX} §9.7.16.1.2, §9.7.16.7.1"),
    "dealloc-unallocated": ("tmem-dealloc-unallocated", _alloc_scene, {"dealloc_col": 128}, {},
                            "tcgen05.dealloc of columns that were never allocated", f"{_PTX} §9.7.16.7.1"),
    "not-deallocated": ("tmem-not-deallocated", _epilogue_scene, {"dealloc": "none"}, {},
                        "the kernel exits with its Tensor Memory still allocated", f"{_PTX} §9.7.16.1.2"),
    "st-ld-no-wait-st": ("tmem-read-before-wait-st", _st_ld_scene, {"wait_st_first": False}, {},
                         "one warp's tcgen05.ld of cells its tcgen05.st wrote, with tcgen05.wait::st after the ld",
                         f"{_PTX} §9.7.16.6.4.2"),
    # -- shared memory
    "missing-proxy-fence": ("missing-proxy-fence", _producer_scene, {"proxy_fence": False}, {},
                            "st.shared data consumed by the MMA (async proxy) without fence.proxy.async",
                            f"{_PTX} §9.7.16.6.5"),
    "tma-store-no-proxy-fence": ("missing-proxy-fence", _tma_store_scene, {"proxy_fence": False}, {},
                                 "st.shared data written out by a TMA store (async proxy) without fence.proxy.async",
                                 f"{_PTX} §9.7.9.25.5.2, §9.7.13.4"),
    "smem-overwrite-in-flight": ("smem-overwrite-in-flight", _producer_scene,
                                 {"rewrite_b": True, "wait_free": False}, {"rewrite_b": True},
                                 "shared memory rewritten while an in-flight MMA may still read it",
                                 f"{_PTX} §9.7.16.6.2.1.1, §9.7.16.12.1"),
    "smem-waw-tma": ("smem-write-after-write", _waw_scene, {"wait_first": False}, {},
                     "st.shared into a tile while the TMA load writing it is in flight (before the mbarrier wait)",
                     f"{_PTX} §9.7.9.25.5.2, §9.7.13.15"),
    "smem-war-tma-refill": ("smem-write-after-read", _war_scene, {"wait_empty": False}, {},
                            "a TMA refill of a slot issued once the load landed, not after the ld.shared readers "
                            "released it", f"{_PTX} §9.7.9.25.5.2, §9.7.13.15"),
    "mma-after-tma-no-fence": ("missing-after-thread-sync-fence", _tma_scene, {"after": False}, {},
                               "the MMA reads TMA-loaded shared memory after the mbarrier wait without "
                               "tcgen05.fence::after_thread_sync", f"{_PTX} §9.7.16.6.3, §9.7.16.6.4"),
    "tma-store-before-barrier": ("smem-read-before-complete", _tma_store_scene, {"store_after_bar": False}, {},
                                 "warp 0 issues the TMA store of the warpgroup's tile before the bar.sync that "
                                 "orders the other warps' st.shared", f"{_PTX} §9.7.13.1, §9.7.9.25.5.2"),
    # -- mbarriers
    "tma-wrong-parity": ("smem-read-before-complete", _tma_scene, {"parity": 1}, {},
                         "the consumer waits on the wrong mbarrier parity and reads before the TMA load completes",
                         f"{_PTX} §9.7.13.15.16"),
    "ld-wrong-parity": ("mbarrier-wrong-parity", _epilogue_scene, {"parity": 1}, {},
                        "the epilogue waits parity 1 of the fresh mma_done barrier, which passes at once",
                        f"{_PTX} §9.7.13.15.16"),
    "parity-not-flipped": ("mbarrier-wrong-parity", _handshake_scene, {"second_parity": 0}, {},
                           "the second wait reuses the first phase's parity", f"{_PTX} §9.7.13.15.16"),
    "ring-parity-alias": ("mbarrier-wrong-parity", _ring_scene, {"observe_every_phase": False}, {},
                          "a consumer waits parity 0 for item 2 without having observed phase 1: the wait passes on "
                          "phase 0 and it reads the slot before phase 2's data lands", f"{_PTX} §9.7.13.15.16"),
    "over-arrival": ("mbarrier-over-arrival", _arrival_scene, {"count": 1}, {},
                     "more arrivals than the mbarrier's expected count in one phase", f"{_PTX} §9.7.13.15.13"),
    "tx-underflow": ("mbarrier-tx-underflow", _arrival_scene, {"tx_expect": 1024}, {},
                     "more bytes arrive than the expect_tx announced (tx-count underflow)", f"{_PTX} §9.7.13.15.2"),
    "arrive-before-init": ("mbarrier-uninitialized", _init_scene, {"init": "after_sync"}, {},
                           "the consumer initialises the mbarrier after the start barrier; the producer arrives "
                           "first", f"{_PTX} §9.7.13.15.9"),
    "init-without-sync": ("mbarrier-uninitialized", _init_scene, {"init": "no_sync"}, {},
                          "one warp initialises the mbarrier and another arrives on it with no barrier between "
                          "them", f"{_PTX} §9.7.13.15.9; {_FLASHMLA} L44-67"),
    "proxy-fence-after-arrive": ("missing-proxy-fence", _producer_scene,
                                 {"proxy_fence": False, "fence_after_arrive": True}, {},
                                 "the producer's fence.proxy.async comes after its mbarrier arrive, not before",
                                 f"{_PTX} §9.7.16.6.5"),
    "deadlock-missing-arrive": ("deadlock", _deadlock_scene, {"arrive": False}, {},
                                "a consumer waits on an mbarrier that nobody arrives on", f"{_PTX} §9.7.13.15.16"),
    # -- named barriers
    "named-count-mismatch": ("named-barrier-count-mismatch", _named_scene, {"threads": 64, "threads_b": 96}, {},
                             "two warps sync on one named barrier with different thread counts", f"{_PTX} §9.7.13.1"),
    "named-shared-id": ("smem-read-before-complete", _pairs_scene, {"second_id": 3}, {},
                        "two warp pairs use the same named barrier id: the writers release each other and the "
                        "readers read unordered data", f"{_PTX} §9.7.13.1; {_FLASHMLA} L185"),
    "deadlock-named-barrier": ("deadlock", _named_scene, {"threads": 96}, {},
                               "bar.sync expects more threads than ever arrive", f"{_PTX} §9.7.13.1"),
}

_CORRECT: dict[str, tuple[Callable, dict, str, str]] = {
    # name: (builder, kwargs, what it shows in one line, the PTX section that makes it correct)
    "cp-mma-cross-thread": (_cp_mma_scene, {},
                            "tcgen05.cp by one thread, tcgen05.mma by another: fence::before_thread_sync -> arrive "
                            "-> wait -> fence::after_thread_sync, no commit of the cp (a pipelined pair)",
                            f"{_PTX} §9.7.16.6.2, §9.7.16.6.4.3"),
    "same-thread-pipelined": (_cp_mma_scene, {"cross_thread": False},
                              "tcgen05.cp -> mma -> mma (same accumulator) from one thread with no wait between them",
                              f"{_PTX} §9.7.16.6.2, §9.7.16.6.4.1"),
    "relay-bar-sync": (_relay_scene, {},
                       "one warp waits the commit and releases the warpgroup with bar.sync (fence::after, "
                       "fence::before around it); the others fence::after_thread_sync and read TMEM",
                       f"{_PTX} §9.7.16.6.4.4"),
    "consumer-proxy-fence": (_producer_scene, {"proxy_fence": False, "consumer_fence": True},
                             "the MMA thread, not the st.shared writer, issues fence.proxy.async after its wait",
                             f"{_PTX} §9.7.16.6.5, §9.7.13.4"),
    "rewait-completed-phase": (_epilogue_scene, {"rewait": True},
                               "the epilogue waits the same completed phase of mma_done twice before two tcgen05.ld",
                               f"{_PTX} §9.7.13.15.16"),
    "ld-register-dependency": (_epilogue_scene, {"wait_ld": False, "second_mma": True},
                               "the epilogue uses the registers of its tcgen05.ld right after it, with "
                               "tcgen05.wait::ld only before fence::before_thread_sync and the release to the MMA "
                               "that overwrites D (an intra-thread register dependency needs no wait)",
                               f"{_PTX} §9.7.16.6.4.5"),
    "alloc-blocks-until-freed": (_blocking_alloc_scene, {},
                                 "a tcgen05.alloc that finds no free columns blocks until another warp's dealloc",
                                 f"{_PTX} §9.7.16.7.1, §9.7.16.1.2"),
    "tma-store-two-warps": (_tma_store_scene, {"two_rounds": True},
                            "st.shared -> fence.proxy.async -> bar.sync -> two warps' TMA stores -> "
                            "wait_group.read -> bar.sync before the buffer is written again",
                            f"{_PTX} §9.7.9.25.5.2, §9.7.13.1; {_FLASHMLA} L367-383"),
}

BUGS: dict[str, str] = {f"hazard/{n}": e[4] for n, e in _CATALOGUE.items()}
"""``hazard/<name>`` -> what the seeded bug does, in one line (listed by ``simtc program --list``)."""
WHAT: dict[str, str] = {f"hazard/ok-{n}": e[2] for n, e in _CORRECT.items()}
"""``hazard/ok-<name>`` -> what the tricky correct program shows, in one line."""
CORRECT: tuple[str, ...] = tuple(sorted(WHAT))
"""The tricky correct programs (no twin; each must run clean)."""
EXPECTED: dict[str, str | None] = {}
"""``hazard/<name>`` -> the rule it must be flagged with (``None`` for the ``-fixed`` twins and ``ok-`` programs)."""
REFS: dict[str, str] = {}
"""Every catalogue name -> the PTX section the bug breaks (twins: the same section; ``ok-``: the one it relies on)."""
PROGRAMS: dict[str, Callable] = {}
"""``hazard/<name>`` -> a function building the Program."""
REGISTRY_ENTRIES: dict[str, tuple[str, str]] = {}
"""The catalogue in :data:`simtc.kernels.registry.PROGRAMS`' format: name -> (description, "module:function")."""


def _make(name: str, builder: Callable, kwargs: dict, text: str) -> Callable:
    def build_it():
        import attrs

        p = builder(name, **kwargs)
        return attrs.evolve(p, description=f"{p.description}; {text}")

    build_it.__name__ = name.replace("/", "_").replace("-", "_")
    build_it.__doc__ = f"hazard catalogue, {text}."
    return build_it


def _add(name: str, builder: Callable, kwargs: dict, rule: str | None, ref: str, text: str) -> None:
    PROGRAMS[name] = _make(name, builder, kwargs, text)
    EXPECTED[name] = rule
    REFS[name] = ref
    globals()[PROGRAMS[name].__name__] = PROGRAMS[name]
    REGISTRY_ENTRIES[name] = (f"hazard catalogue, {text}", f"{__name__}:{PROGRAMS[name].__name__}")


for _n, (_rule, _builder, _bug, _fix, _what, _ref) in _CATALOGUE.items():
    _add(f"hazard/{_n}", _builder, _bug, _rule, _ref, f"seeded bug: {_what} (flagged as {_rule}; breaks {_ref})")
    _add(f"hazard/{_n}-fixed", _builder, _fix, None, _ref, f"the correct twin of hazard/{_n} (clean; {_ref})")
for _n, (_builder, _kw, _what, _ref) in _CORRECT.items():
    _add(f"hazard/ok-{_n}", _builder, _kw, None, _ref, f"tricky correct program: {_what} (clean; {_ref})")


def names() -> list[str]:
    """Every catalogue name, sorted."""
    return sorted(PROGRAMS)


def build(name: str):
    """The Program ``hazard/<name>`` (``hazard/<name>-fixed``, ``hazard/ok-<name>``)."""
    from simtc.errors import SimtcError

    try:
        return PROGRAMS[name]()
    except KeyError:
        raise SimtcError(f"no hazard program {name!r}; known: {', '.join(names())}",
                         rule="hazard catalogue names") from None


def register_all(register: Callable[[str, Callable], object]) -> None:
    """Register every catalogue Program with a registry function ``register(name, builder)``."""
    for n in names():
        register(n, PROGRAMS[n])
