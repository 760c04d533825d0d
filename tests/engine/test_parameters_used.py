"""Every timing parameter is used: halving or doubling it moves at least one probe -- a small Program run on the
engine, the closed-form MMA model, or the FlashMLA head64 kernel's cycles per block.

A parameter no probe notices is dead weight in the table (or a mechanism lost its input): the test names it.
"""

from __future__ import annotations

import pytest

from simtc.engine import Engine
from simtc.engine.microbench import ii_program, latency_program
from simtc.engine.parameters import PARAMETERS, Timing
from simtc.engine.timing import predict_mma
from simtc.isa import (
    BarArrive,
    BarSync,
    Commit,
    Cp,
    CpAsyncBulkTensor,
    CudaCoreBlock,
    FenceProxyAsync,
    Ld,
    LdShared,
    MbarrierArrive,
    MbarrierArriveExpectTx,
    MbarrierTryWait,
    Program,
    Role,
    SmemDescriptor,
    St,
    StShared,
    WaitLd,
    WaitSt,
    WgmmaCommitGroup,
    WgmmaFence,
    WgmmaMmaAsync,
    WgmmaWaitGroup,
)
from simtc.isa.program import Barrier

_CLASSES = ("FFMA", "HADD2", "FMNMX", "IMAD", "MUFU.EX2", "F2FP.BF16.F32.PACK_AB", "SHFL.BFLY")


def _cuda_blocks():
    out = []
    for c in _CLASSES:  # throughput, then a dependent chain, of each class
        out += [CudaCoreBlock(f"{c} x", ((c, 48),)), CudaCoreBlock(f"{c} chain", ((c, 48),), chain=((c, 48),))]
    return tuple(out)


def _common(arch: str) -> list[Program]:
    bars = (Barrier("m", "mbarrier", 1), Barrier("t", "mbarrier", 1), Barrier("l", "mbarrier", 1))
    cuda = Program("cuda", (Role("a", (0,), _cuda_blocks()),))
    shared = Program("interleave", (Role("a", (0,), (CudaCoreBlock("cvt", (("F2FP.BF16.F32.PACK_AB", 100),)),)),
                                    Role("b", (4,), (CudaCoreBlock("alu", (("FFMA", 300), ("other", 300))),))))
    smem = Program("smem", (Role("a", (0,), (LdShared(0, 16, "r"), StShared(4096, 16, "r"), *(
        StShared(512 * i, 16, "s") for i in range(8)), FenceProxyAsync(), MbarrierArrive("m"), MbarrierTryWait("m", 0)),
                                 threads=32),
        Role("b", (1,), (BarSync(1, 64), BarArrive(2, 64))), Role("c", (2,), (BarSync(1, 64), BarSync(2, 64)))),
        barriers=(Barrier("m", "mbarrier", 32),))
    tma = [MbarrierArriveExpectTx("t", 8192 + 4 * 100 + 8192), CpAsyncBulkTensor(0, 8192, "t", tensor="kv"),
           CpAsyncBulkTensor(16384, 400, "t", mode="gather4", rows=4, tensor="kv"),
           CpAsyncBulkTensor(32768, 8192, "t", tensor="q"), MbarrierTryWait("t", 0),
           CudaCoreBlock("ldg", (("LDG.E.128", 2), ("IMAD", 2)), gmem="scattered", chain=(("LDG.E.128", 1),))]
    mem = Program("memory", (Role("a", (0,), tuple(tma), threads=1),), barriers=bars)
    issue = Program("tma-issue", (Role("a", (0,), (*(CpAsyncBulkTensor(0, 256, "l") for _ in range(8)),
                                                   CudaCoreBlock("after", (("FFMA", 8),))), threads=1),),
                    barriers=(Barrier("l", "mbarrier", 1),))
    one = Program("one-request", (Role("a", (0,), (MbarrierArriveExpectTx("t", 16384),
                                                   CpAsyncBulkTensor(0, 16384, "t", tensor="kv"),
                                                   MbarrierTryWait("t", 0)), threads=1),), barriers=bars)
    l2 = Program("l2", (Role("a", (0,), (MbarrierArriveExpectTx("t", 8 * 8192),
                                         *(CpAsyncBulkTensor(8192 * i, 8192, "t", tensor="q") for i in range(8)),
                                         MbarrierTryWait("t", 0)), threads=1),), barriers=bars)
    return [cuda, shared, smem, mem, issue, one, l2]


def _sm100() -> list[Program]:
    from simtc.isa import Alloc, Dealloc, RelinquishAllocPermit

    desc = SmemDescriptor(start=0, lbo=16, sbo=1024, layout_type="SW128")
    tc = Program("tcgen05", (Role("a", (0,), (Alloc(512, 0), RelinquishAllocPermit(), Cp(0, desc), Cp(8, desc),
                                              Commit("m"), MbarrierTryWait("m", 0), Ld(0, "32x32b", 64, "r"),
                                              WaitLd(), St(0, "32x32b", 64, "r"), WaitSt(), Dealloc(0, 512)),
                                   threads=32),), barriers=(Barrier("m", "mbarrier", 1),))
    mmas = [latency_program("sm100", m, n, ops, ws, coll) for m, n, ops, ws, coll in
            ((128, 64, "SS", False, "discard"), (64, 128, "TS", True, "discard"))]
    mmas += [ii_program("sm100", 64, 128, 16, "TS", True, "discard"), ii_program("sm100", 32, 64, 16, "TS", True,
                                                                                   "reuse")]
    return [*_common("sm100"), tc, *mmas]


def _sm90() -> list[Program]:
    desc = SmemDescriptor(start=0, lbo=16, sbo=1024, layout_type="SW128", arch="sm90")
    many = [WgmmaFence(), *(WgmmaMmaAsync(64, 64, 16, "bf16", desc, desc, i > 0, "acc") for i in range(16)),
            CudaCoreBlock("after", (("FFMA", 8),)), WgmmaCommitGroup(), WgmmaWaitGroup(0)]
    wg = Program("wgmma", (Role("wg", (0, 1, 2, 3), tuple(many)),))
    return [*_common("sm90"), wg, latency_program("sm90", 64, 64, "SS"), latency_program("sm90", 64, 64, "RS")]


_PROGRAMS = {"sm100": _sm100(), "sm90": _sm90()}
_SHAPES = {"sm100": [dict(m=128, n=64, operands="SS"), dict(m=64, n=128, operands="TS", ws=True),
                     dict(m=64, n=64, operands="SS", ws=True, collector="reuse"),
                     dict(m=128, n=128, operands="TS", cta_group=2), dict(m=256, n=128, operands="TS", cta_group=2),
                     dict(m=64, n=256, operands="SS")],
           "sm90": [dict(m=64, n=n, operands=o) for n in (8, 64, 256) for o in ("SS", "RS")]}


def _caches(arch: str, timing: Timing) -> tuple:
    """The L1 and L2 as tag stores (simtc.engine.l1.CachedL1) on one SM with a CTA holding 200 KiB of shared memory:
    a cold table, the same again (an L1 hit), one L2 sector, a stream of misses through the L1's window; and whether
    4 MiB of device allocations start in L2."""
    import numpy as np

    from simtc.engine.l1 import CachedL1, GlobalCaches, inputs_fit_l2, l1_capacity
    from simtc.engine.memory import MemorySystem

    mem = MemorySystem(timing, active_sms=1)
    cap = l1_capacity(arch, 200 * 1024, timing)
    mem.use_l1(cap)
    l1 = CachedL1(timing, GlobalCaches(cap), mem)
    out = []
    for t, sectors in ((0, np.arange(4)), (2000, np.arange(4)), *((4000, np.arange(16 * k, 16 * k + 16) + 64)
                                                                    for k in range(400))):
        l1.start([(sectors, "l1")], (), t)
        out.append(mem.request(l1.book(t, 1.0), 128, ldg=True))
    warm = GlobalCaches(cap, inputs_in_l2=True)
    l1 = CachedL1(timing, warm, MemorySystem(timing, active_sms=1))
    l1.start([(np.arange(1), "l1")], (), 0)
    out.append(l1.memory.request(l1.book(0, 1.0), 32, ldg=True))
    out.append(inputs_fit_l2(timing, 48 << 20))
    return tuple(out)


def _probe(arch: str, timing: Timing) -> tuple:
    out = [_caches(arch, timing)]
    for p in _PROGRAMS[arch]:
        e = Engine(p, timing=timing, check=False, l2_resident=("q",), active_sms=1 if p.name == "one-request" else None)
        e.run()
        out.append((e.cycles, tuple(w.finished_at for w in e.warps),
                    sum(ev.cycle for ev in e.trace if ev.kind == "issue")))
    for kw in _SHAPES[arch]:
        t = predict_mma(arch, timing=timing, **kw)
        out.append((t.latency_cycles, t.ii_cycles))
    if arch == "sm100":
        from simtc.kernels.flashmla.replay import steady_cycles_per_block

        out.append(steady_cycles_per_block("v32", 6, timing))
    return tuple(out)


@pytest.fixture(scope="module", params=["sm100", "sm90"])
def baseline(request):
    return request.param, _probe(request.param, Timing(request.param))


def test_every_parameter_moves_a_probe(baseline):
    arch, base = baseline
    unused = []
    for name in PARAMETERS[arch]:
        t = Timing(arch)
        if _probe(arch, t.scaled(name, 2)) == base and _probe(arch, t.scaled(name, 0.5)) == base:
            unused.append(name)
    assert not unused, f"{arch} parameters no probe notices: {unused}"
