"""Example records, one or more per record class (a test checks every registered op has one).

Tests that take a ``record`` argument run once per example.
"""

import pytest

from simtc.isa import (
    Alloc,
    BarArrive,
    BarSync,
    BulkCommitGroup,
    BulkWaitGroupRead,
    Commit,
    Cp,
    CpAsyncBulk,
    CpAsyncBulkTensor,
    CpAsyncBulkTensorStore,
    CudaCoreBlock,
    Dealloc,
    ElectSync,
    FenceAfterThreadSync,
    FenceBeforeThreadSync,
    FenceProxyAsync,
    InstrDescriptor,
    Ld,
    LdShared,
    MbarrierArrive,
    MbarrierArriveExpectTx,
    MbarrierInit,
    MbarrierInval,
    MbarrierTryWait,
    Mma,
    RelinquishAllocPermit,
    Shift,
    SmemDescriptor,
    SmemRange,
    St,
    StShared,
    TmemRect,
    WaitLd,
    WaitSt,
    WgmmaCommitGroup,
    WgmmaFence,
    WgmmaMmaAsync,
    WgmmaWaitGroup,
)

NOPE1 = 73728  # dequant[1].nope, FlashMLA config.h SharedMemoryPlan (lines 159-194 at 9241ae3)
QK_IDESC = InstrDescriptor.from_u32(0x04200490)  # M=64 N=128 bf16 -> f32, K-major (config.h L196-198)
PV_IDESC = InstrDescriptor.from_u32(0x04410490)  # M=64 N=256, B MN-major (config.h L200-202)


def sw128(start: int) -> SmemDescriptor:
    return SmemDescriptor(start=start, lbo=16, sbo=1024, layout_type="SW128")


def qk_b(k: int, nope: int = NOPE1) -> SmemDescriptor:
    """QK NoPE B for instruction k: B + 16384*(k//4) + 32*(k%4) (FlashMLA 9241ae3 config.h L120-125,
    kernel.cuh L551)."""
    return sw128(nope + 16384 * (k // 4) + 32 * (k % 4))


S_DESC = SmemDescriptor(start=212992, lbo=1024, sbo=128, layout_type="INTERLEAVE")  # PV A = S (config.h L107-111)
# PV B = V, nope(0), MN-major (config.h L127-134)
V_DESC = SmemDescriptor(start=0, lbo=8192, sbo=1024, layout_type="SW128")
SM90_A = SmemDescriptor(start=0, lbo=16, sbo=1024, layout_type="SW128", arch="sm90")
SM90_B = SmemDescriptor(start=8192, lbo=16, sbo=1024, layout_type="SW128", arch="sm90")

EXAMPLES = [
    Alloc(512, 231968, label="warp 0 allocates all columns"),
    Dealloc(0, 512),
    RelinquishAllocPermit(),
    Cp(256, sw128(0), label="Q t=0 s=0"),
    Cp(384, SmemDescriptor(start=65536, lbo=16, sbo=512, layout_type="SW64")),
    Cp(0, sw128(1024), "64x128b", "warpx2::02_13"),
    Cp(4, SmemDescriptor(start=0, lbo=16, sbo=128, layout_type="INTERLEAVE"), "4x256b"),
    Mma(400, 256, qk_b(0), QK_IDESC, False, ws=True, label="QK NoPE k=0"),
    Mma(400, 296, qk_b(5), QK_IDESC, True, ws=True, collector="b1::lastuse"),
    Mma(0, S_DESC, V_DESC, PV_IDESC, True, ws=True),
    Mma(16, sw128(0), sw128(8192), InstrDescriptor(kind="f16", m=64, n=64, a_format="bf16", b_format="bf16"), True,
        collector="a::fill"),
    Mma(0, sw128(0), sw128(8192), InstrDescriptor(kind="f8f6f4", m=128, n=64, a_format="e5m2", b_format="e4m3"),
        False),
    Commit("qk_done[0]"),
    Commit("qk_done[0]", multicast=0x3),
    Ld(400, "32x32b", 32, "p"),
    Ld(0x00200010, "16x256b", 2, "r", pack=True, lane_base="absolute"),
    Ld(0, "16x32bx2", 4, "h", imm=16),
    St(64, "32x32b", 64, "o"),
    St(0, "16x128b", 8, "o", unpack=True),
    WaitLd(),
    WaitSt(),
    FenceBeforeThreadSync(),
    FenceAfterThreadSync(),
    MbarrierInit("so_ready[1]", 128),
    MbarrierArrive("so_ready[1]"),
    MbarrierArrive("free", count=4),
    MbarrierArriveExpectTx("q_tma", 73728),
    MbarrierTryWait("qk_done[0]", 1),
    MbarrierTryWait("qk_done[0]", token="st0", label="a token wait"),
    MbarrierArrive("q_free", state="st0", label="an arrive keeping its state token"),
    MbarrierInval("qk_done[0]", label="teardown"),
    ElectSync(label="one lane of the warp"),
    Shift(256, label="tcgen05.shift down"),
    CpAsyncBulkTensor(0, 8192, "q_tma", tensor="q", coords=(0, 0, 0, 0)),
    CpAsyncBulkTensor(147456, 2048, "raw_ready[0]", mode="gather4", tensor="kv_nope", coords=(0, 1, 2, 3, 4),
                      rows=4),
    CpAsyncBulkTensor(65536, 8192, "q_tma"),
    CpAsyncBulkTensorStore(73728, 8192, tensor="o", coords=(0, 0, 0, 0)),
    CpAsyncBulk(73728, 2048, dst="o_accum"),
    BulkCommitGroup(),
    BulkWaitGroupRead(0),
    BarSync(9, 128),
    BarArrive(10, 64),
    FenceProxyAsync(),
    FenceProxyAsync(""),
    LdShared(212992, 16, "p_in"),
    LdShared(147456, 8, "raw", threads=128, stride=8),
    StShared(0, 16, "kv", threads=4, offsets=(0, 2048, 8192, 16)),
    StShared(229376, 4, "m", threads=128),
    WgmmaFence(),
    WgmmaMmaAsync(64, 64, 16, "bf16", SM90_A, SM90_B, True, "d"),
    WgmmaMmaAsync(64, 128, 16, "fp16", "a_regs", SM90_B, False, "acc", b_major="MN", scale_b=-1),
    WgmmaCommitGroup(),
    WgmmaWaitGroup(1),
    CudaCoreBlock("exp2", (("FFMA2", 16), ("MUFU.EX2", 32)), effect="softmax_exp2", regs_read=("p",),
                  regs_written=("s",)),
    CudaCoreBlock("write S", (("STS.128", 4),), smem_writes=(SmemRange(212992, 221184),),
                  tmem_reads=(TmemRect(0, 128, 400, 64),), barriers=("so_ready[0]",)),
]


def pytest_generate_tests(metafunc):
    if "record" in metafunc.fixturenames:
        metafunc.parametrize("record", EXAMPLES, ids=[f"{i}-{r.op}" for i, r in enumerate(EXAMPLES)])


@pytest.fixture
def examples():
    return EXAMPLES
