"""The hazard catalogue: small Programs with one seeded bug each, and their correct twins.

Each entry ``hazard/<name>`` breaks exactly one rule of :data:`simtc.engine.hazards.RULES`
(:data:`EXPECTED` names it); ``hazard/<name>-fixed`` is the same Program with the bug repaired and
runs clean. The scenes follow the canonical sequences of PTX ISA 9.0 §9.7.16.6.4 (tcgen05 memory
consistency, https://docs.nvidia.com/cuda/parallel-thread-execution/): an MMA thread (warp 4) and an
epilogue warpgroup (warps 0-3) sharing one accumulator, a producer writing shared memory, TMA loads on an mbarrier.

>>> sorted(EXPECTED)[:2]
['hazard/alloc-after-relinquish', 'hazard/alloc-after-relinquish-fixed']
>>> EXPECTED["hazard/ld-before-commit"], EXPECTED["hazard/ld-before-commit-fixed"]
('tmem-read-before-commit', None)
>>> REGISTRY_ENTRIES["hazard/ld-before-commit"][1]
'simtc.kernels.hazards:hazard_ld_before_commit'
>>> build("hazard/ld-before-commit").counts()["tcgen05.ld"]
1
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["EXPECTED", "PROGRAMS", "REGISTRY_ENTRIES", "build", "names", "register_all"]

_A, _B = 0, 16384        # shared-memory A (128 x 16 bf16) and B (64 x 16 bf16) tiles, SW128 K-major
_TILE_BYTES = 16384


def _isa():
    import simtc.isa as isa

    return isa


def _mma(enable_input_d: bool = False, label: str = ""):
    isa = _isa()
    idesc = isa.InstrDescriptor(kind="f16", m=128, n=64, a_format="bf16", b_format="bf16")
    a = isa.SmemDescriptor(start=_A, lbo=16, sbo=1024, layout_type="SW128")
    b = isa.SmemDescriptor(start=_B, lbo=16, sbo=1024, layout_type="SW128")
    return isa.Mma(0, a, b, idesc, enable_input_d, label=label)


def _bars(*spec):
    from simtc.isa.program import Barrier

    return tuple(Barrier(n, "mbarrier", c) for n, c in spec)


# ---- scene 1: MMA thread -> epilogue warpgroup (-> MMA overwrites the accumulator) -------------------
def _epilogue_scene(name: str, *, wait=True, after=True, wait_ld=True, before=True, early_arrive=False,
                    second_mma=False, lane_base="warp"):
    isa = _isa()
    mma = [isa.MbarrierInit("mma_done", 1), isa.MbarrierInit("epi_done", 128), isa.Alloc(128, 0),
           isa.FenceBeforeThreadSync(), isa.BarSync(1, 160), isa.FenceAfterThreadSync(),
           _mma(False, "D = A B"), isa.Commit("mma_done"), isa.MbarrierTryWait("epi_done", 0),
           isa.FenceAfterThreadSync()]
    if second_mma:
        mma += [_mma(False, "D = A B again (overwrites D)"), isa.Commit("mma_done"),
                isa.MbarrierTryWait("mma_done", 1), isa.FenceAfterThreadSync()]
    mma += [isa.Dealloc(0, 128)]
    epi = [isa.BarSync(1, 160), isa.FenceAfterThreadSync()]
    if wait:
        epi.append(isa.MbarrierTryWait("mma_done", 0))
    if after:
        epi.append(isa.FenceAfterThreadSync())
    taddr = 0 if lane_base == "warp" else (32 << 16)
    epi.append(isa.Ld(taddr, "32x32b", 32, "p", lane_base=lane_base, label="P rows of this warp"))
    use = isa.CudaCoreBlock("row max", (("FMNMX", 32),), regs_read=("p",), regs_written=("m",))
    if early_arrive:
        epi += [isa.FenceBeforeThreadSync(), isa.MbarrierArrive("epi_done"), isa.WaitLd(), use]
    else:
        epi += ([isa.WaitLd(), use] if wait_ld else [use, isa.WaitLd()])
        if before:
            epi.append(isa.FenceBeforeThreadSync())
        epi.append(isa.MbarrierArrive("epi_done"))
    roles = (isa.Role("epilogue", (0, 1, 2, 3), tuple(epi)), isa.Role("mma", (4,), tuple(mma)))
    return isa.Program(name, roles, _bars(("mma_done", 1), ("epi_done", 128)),
                       description="MMA thread -> commit -> epilogue tcgen05.ld (PTX ISA 9.0 §9.7.16.6.4)")


# ---- scene 2: a producer warp writes A/B with st.shared, the MMA thread consumes them ---------------
def _producer_scene(name: str, *, proxy_fence=True, rewrite_b=False, wait_free=True):
    # rewrite_b: the producer writes the next B once it may (after the commit on ab_free) -- or, the bug,
    # as soon as the MMA thread says it has *issued* the MMA (mma_issued), while the MMA may still read B
    isa = _isa()
    write_ab = isa.CudaCoreBlock("write A, B", (("STS.128", 48),), smem_writes=(isa.SmemRange(_A, _B + 2048),))
    prod = [isa.BarSync(1, 64), write_ab]
    if proxy_fence:
        prod.append(isa.FenceProxyAsync())
    prod.append(isa.MbarrierArrive("ab_ready"))
    if rewrite_b:
        prod.append(isa.MbarrierTryWait("ab_free" if wait_free else "mma_issued", 0))
        prod += [isa.CudaCoreBlock("write next B", (("STS.128", 16),), smem_writes=(isa.SmemRange(_B, _B + 2048),)),
                 isa.FenceProxyAsync()]
    mma = [isa.MbarrierInit("ab_ready", 32), isa.MbarrierInit("ab_free", 1), isa.MbarrierInit("mma_done", 1),
           isa.MbarrierInit("mma_issued", 32), isa.Alloc(128, 0), isa.FenceBeforeThreadSync(), isa.BarSync(1, 64),
           isa.FenceAfterThreadSync(), isa.MbarrierTryWait("ab_ready", 0), isa.FenceAfterThreadSync(),
           _mma(False, "D = A B"), isa.MbarrierArrive("mma_issued"), isa.Commit("ab_free"), isa.Commit("mma_done"),
           isa.MbarrierTryWait("mma_done", 0),
           isa.FenceAfterThreadSync(), isa.Dealloc(0, 128)]
    roles = (isa.Role("producer", (5,), tuple(prod)), isa.Role("mma", (4,), tuple(mma)))
    return isa.Program(name, roles, _bars(("ab_ready", 32), ("ab_free", 1), ("mma_done", 1), ("mma_issued", 32)),
                       description="st.shared producer -> fence.proxy.async -> mbarrier -> MMA (PTX §9.7.16.6.5)")


# ---- scene 3: TMA loads on an mbarrier, then the MMA --------------------------------------------------
def _tma_scene(name: str, *, parity=0, expect=_TILE_BYTES + 2048, after=True):
    isa = _isa()
    mma = [isa.MbarrierInit("full", 1), isa.MbarrierInit("mma_done", 1), isa.Alloc(128, 0),
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


def _named_scene(name: str, *, threads=64):
    isa = _isa()
    a = [isa.BarSync(2, threads), isa.CudaCoreBlock("work", (("FADD", 4),))]
    b = [isa.BarSync(2, threads), isa.CudaCoreBlock("work", (("FADD", 4),))]
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


_CATALOGUE: dict[str, tuple[str, Callable, dict, dict]] = {
    # name: (rule, builder, buggy kwargs, fixed kwargs)
    "ld-before-commit": ("tmem-read-before-commit", _epilogue_scene, {"wait": False}, {}),
    "missing-after-fence": ("missing-after-thread-sync-fence", _epilogue_scene, {"after": False}, {}),
    "ld-regs-before-wait": ("ld-regs-before-wait", _epilogue_scene, {"wait_ld": False}, {}),
    "overwrite-before-ld-done": ("tmem-overwrite-in-flight", _epilogue_scene,
                                 {"early_arrive": True, "second_mma": True}, {"second_mma": True}),
    "missing-before-fence": ("missing-before-thread-sync-fence", _epilogue_scene,
                             {"before": False, "second_mma": True}, {"second_mma": True}),
    "lane-quadrant": ("lane-quadrant", _epilogue_scene, {"lane_base": "absolute"}, {}),
    "missing-proxy-fence": ("missing-proxy-fence", _producer_scene, {"proxy_fence": False}, {}),
    "smem-overwrite-in-flight": ("smem-overwrite-in-flight", _producer_scene,
                                 {"rewrite_b": True, "wait_free": False}, {"rewrite_b": True}),
    "tma-wrong-parity": ("smem-read-before-complete", _tma_scene, {"parity": 1}, {}),
    "mma-after-tma-no-fence": ("missing-after-thread-sync-fence", _tma_scene, {"after": False}, {}),
    "tx-underflow": ("mbarrier-tx-underflow", _arrival_scene, {"tx_expect": 1024}, {}),
    "over-arrival": ("mbarrier-over-arrival", _arrival_scene, {"count": 1}, {}),
    "parity-not-flipped": ("mbarrier-wrong-parity", _handshake_scene, {"second_parity": 0}, {}),
    "alloc-over-512": ("tmem-alloc-over-512", _alloc_scene, {"first": 512, "second": 32}, {}),
    "alloc-after-relinquish": ("tmem-alloc-after-relinquish", _alloc_scene, {"relinquish_first": True}, {}),
    "dealloc-unallocated": ("tmem-dealloc-unallocated", _alloc_scene, {"dealloc_col": 128}, {}),
    "deadlock-missing-arrive": ("deadlock", _deadlock_scene, {"arrive": False}, {}),
    "deadlock-named-barrier": ("deadlock", _named_scene, {"threads": 96}, {}),
}

_BUGS: dict[str, str] = {
    "ld-before-commit": "tcgen05.ld of the accumulator without waiting for the MMA's commit",
    "missing-after-fence": "the consumer reads TMEM after the mbarrier wait without tcgen05.fence::after_thread_sync",
    "ld-regs-before-wait": "registers of a tcgen05.ld used before tcgen05.wait::ld",
    "overwrite-before-ld-done": "the reader frees P before its tcgen05.ld completes; the next MMA overwrites P",
    "missing-before-fence": "the TMEM reader arrives on the barrier without tcgen05.fence::before_thread_sync",
    "lane-quadrant": "a warp's tcgen05.ld reaches outside its lane quadrant",
    "missing-proxy-fence": "st.shared data consumed by the MMA (async proxy) without fence.proxy.async",
    "smem-overwrite-in-flight": "shared memory rewritten while an in-flight MMA may still read it",
    "tma-wrong-parity": "the consumer waits on the wrong mbarrier parity and reads before the TMA load completes",
    "mma-after-tma-no-fence": "the MMA reads TMA-loaded shared memory after the mbarrier wait without "
                              "tcgen05.fence::after_thread_sync",
    "tx-underflow": "more bytes arrive than the expect_tx announced (tx-count underflow)",
    "over-arrival": "more arrivals than the mbarrier's expected count in one phase",
    "parity-not-flipped": "the second wait reuses the first phase's parity",
    "alloc-over-512": "tcgen05.alloc beyond the 512 TMEM columns",
    "alloc-after-relinquish": "tcgen05.alloc after tcgen05.relinquish_alloc_permit",
    "dealloc-unallocated": "tcgen05.dealloc of columns that were never allocated",
    "deadlock-missing-arrive": "a consumer waits on an mbarrier that nobody arrives on",
    "deadlock-named-barrier": "bar.sync expects more threads than ever arrive",
}
"""What each seeded bug does, in one line (listed by ``simtc program --list``)."""

EXPECTED: dict[str, str | None] = {}
"""``hazard/<name>`` -> the rule it must be flagged with (``None`` for the ``-fixed`` twins: clean)."""
PROGRAMS: dict[str, Callable] = {}
"""``hazard/<name>`` -> a function building the Program."""


def _make(name: str, builder: Callable, kwargs: dict) -> Callable:
    def build_it():
        return builder(name, **kwargs)

    build_it.__name__ = name.replace("/", "_").replace("-", "_")
    build_it.__doc__ = f"The Program {name}."
    return build_it


REGISTRY_ENTRIES: dict[str, tuple[str, str]] = {}
"""The catalogue in :data:`simtc.kernels.registry.PROGRAMS`' format: name -> (description, "module:function")."""

for _n, (_rule, _builder, _bug, _fix) in _CATALOGUE.items():
    for _name, _kw, _what in ((f"hazard/{_n}", _bug, f"seeded bug: {_BUGS[_n]} (flagged as {_rule})"),
                              (f"hazard/{_n}-fixed", _fix, f"the correct twin of hazard/{_n} (clean)")):
        PROGRAMS[_name] = _make(_name, _builder, _kw)
        EXPECTED[_name] = None if _name.endswith("-fixed") else _rule
        globals()[PROGRAMS[_name].__name__] = PROGRAMS[_name]
        PROGRAMS[_name].__doc__ = f"hazard catalogue, {_what}."
        REGISTRY_ENTRIES[_name] = (f"hazard catalogue, {_what}", f"{__name__}:{PROGRAMS[_name].__name__}")


def names() -> list[str]:
    """Every catalogue name, sorted."""
    return sorted(PROGRAMS)


def build(name: str):
    """The Program ``hazard/<name>`` (or ``hazard/<name>-fixed``)."""
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
