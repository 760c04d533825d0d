"""mbarrier and tcgen05 in the PTX executor (simtc.ptx.async_ops), on small CUDA kernels with inline PTX.

Each kernel is compiled by NVRTC for sm_100a and run through simtc.cuda, the same API a script uses with CuPy:
an mbarrier ping-pong between two warps (phase parity), the state-token forms, a deadlock reported by name,
an mbarrier overwritten by a plain store, and the tensor-memory rules the models enforce (the lane-quadrant rule of
tcgen05.ld, an allocation of more than 512 columns, an illegal instruction descriptor), each a KernelFault naming
the thread and the PTX line. Hand PTX covers what nvcc would not emit for one CTA (CTA pairs, multicast, shift).
"""

from __future__ import annotations

import numpy as np
import pytest

import simtc.cuda as xp
from simtc.errors import LaneQuadrantError, TmemAllocError
from simtc.isa.tcgen05 import Alloc, Ld
from simtc.kernels.flashmla import QK_IDESC
from simtc.ptx import async_ops, parser
from simtc.ptx.errors import KernelFault, PtxUnsupported
from simtc.ptx.executor import launch
from simtc.ptx.memory import Device
from simtc.semantics import MbarrierState

ARCH = ("-arch=sm_100a",)

HEADER = r"""
typedef unsigned int u32;
typedef unsigned long long u64;
__device__ __forceinline__ u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void bar_init(u32 bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ u64 bar_arrive(u32 bar) {
    u64 state;
    asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 %0, [%1];" : "=l"(state) : "r"(bar) : "memory");
    return state;
}
__device__ __forceinline__ void bar_wait(u32 bar, u32 parity) {
    asm volatile("{\n .reg .pred done;\n WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 " @!done bra WAIT;\n}\n" :: "r"(bar), "r"(parity) : "memory");
}
"""


def _line_of(kernel, text: str) -> int:
    """The PTX line of the kernel's first instruction whose name starts with ``text``."""
    return next(i.line for i in kernel.function.body if i.name.startswith(text))


# ---- mbarrier ------------------------------------------------------------------------------------------------

PING_PONG = HEADER + r"""
extern "C" __global__ void ping_pong(u32* out, int rounds) {
    __shared__ __align__(8) u64 bars[2];      // full (count 1), empty (count 32)
    __shared__ u32 slot;
    const u32 full = smem_u32(&bars[0]), empty = smem_u32(&bars[1]);
    const u32 warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (threadIdx.x == 0) {
        bar_init(full, 1);
        bar_init(empty, 32);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    for (int i = 0; i < rounds; ++i) {
        if (warp == 0) {                       // producer: wait until the consumer freed the slot
            if (i > 0) bar_wait(empty, (i - 1) & 1);
            if (lane == 0) { slot = 100 + i; bar_arrive(full); }
        } else {                               // consumer: wait for round i's value, then free the slot
            bar_wait(full, i & 1);
            out[i * 32 + lane] = slot + lane;
            bar_arrive(empty);
        }
    }
}
"""


def test_ping_pong_between_two_warps_follows_phase_parity():
    k = xp.RawKernel(PING_PONG, "ping_pong", options=ARCH)
    rounds = 6
    out = xp.zeros(rounds * 32, dtype=xp.uint32)
    k((1,), (64,), (out, np.int32(rounds)))
    want = (100 + np.arange(rounds))[:, None] + np.arange(32)[None, :]
    np.testing.assert_array_equal(out.get().reshape(rounds, 32), want)
    # a warp whose phase is not complete is suspended, not spinning: each of the 11 waits (5 of the producer, 6
    # of the consumer) runs its try_wait at most twice (once suspended, once after the phase completed)
    waits = {i.line for i in k.function.body if i.name.startswith("mbarrier.try_wait")}
    tries = sum(n for line, n in k.last_result.by_line.items() if line in waits)
    assert 11 <= tries <= 22


TOKENS = HEADER + r"""
extern "C" __global__ void tokens(u32* out) {
    __shared__ __align__(8) u64 bar;
    const u32 b = smem_u32(&bar);
    u64 st, st2;
    u32 n, done;
    bar_init(b, 3);
    asm volatile("mbarrier.arrive.noComplete.shared::cta.b64 %0, [%1], %2;" : "=l"(st) : "r"(b), "r"(1) : "memory");
    asm volatile("mbarrier.pending_count.b64 %0, %1;" : "=r"(n) : "l"(st));
    out[0] = n;
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(64) : "memory");
    st2 = bar_arrive(b);
    asm volatile("{ .reg .pred p; mbarrier.test_wait.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(b), "l"(st2) : "memory");
    out[1] = done;
    asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(64) : "memory");
    asm volatile("{ .reg .pred p; mbarrier.test_wait.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(b), "l"(st2) : "memory");
    out[2] = done;
    bar_arrive(b);
    asm volatile("{ .reg .pred p; mbarrier.try_wait.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(b), "l"(st2) : "memory");
    out[3] = done;
    asm volatile("{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(b), "r"(1) : "memory");
    out[4] = done;  // phase 1 (parity 1) has not completed
    out[5] = (u32)(st2 >> 63);  // the state of phase 0
    asm volatile("mbarrier.inval.shared::cta.b64 [%0];" :: "r"(b) : "memory");
}
"""


def test_state_tokens_pending_count_and_tx():
    k = xp.RawKernel(TOKENS, "tokens", options=ARCH)
    out = xp.zeros(6, dtype=xp.uint32)
    k((1,), (1,), (out,))
    # pending after the noComplete arrive: 2 of 3; the token's phase completes only when the arrivals and the
    # 64 tx bytes are all in; parity 1 is the next phase, not complete
    assert out.get().tolist() == [2, 0, 0, 1, 0, 0]


def test_mbarrier_image_round_trips_its_fields():
    st = MbarrierState("mbar@0x8", 5, 3, tx=-100, phase=1)
    word = int.from_bytes(async_ops.mbarrier_image(st), "little")
    assert async_ops._image_fields(word) == (3, 5, -100, 1)


DEADLOCK = HEADER + r"""
extern "C" __global__ void never(u32* out) {
    __shared__ __align__(8) u64 bar;
    const u32 b = smem_u32(&bar);
    if (threadIdx.x == 0) bar_init(b, 2);
    __syncthreads();
    if (threadIdx.x == 0) bar_arrive(b);   // one of the two arrivals phase 0 needs
    bar_wait(b, 0);
    out[threadIdx.x] = 1;
}
"""


def test_deadlock_names_each_warp_its_line_the_barrier_and_the_parity():
    k = xp.RawKernel(DEADLOCK, "never", options=ARCH)
    out = xp.zeros(64, dtype=xp.uint32)
    with pytest.raises(KernelFault, match="deadlock") as e:
        k((1,), (64,), (out,))
    line = _line_of(k, "mbarrier.try_wait")
    msg = e.value.message
    for w in (0, 1):
        assert f"warp {w} (threads {32 * w}..{32 * w + 31}) waits at never PTX line {line}" in msg
    assert "mbarrier mbar@0x0 (shared address 0x0) to complete its phase of parity 0 (1 of 2 arrivals" in msg
    assert not out.get().any()


OVERWRITE = HEADER + r"""
extern "C" __global__ void clobber(u32* out) {
    __shared__ __align__(8) u64 bar;
    const u32 b = smem_u32(&bar);
    bar_init(b, 1);
    *(volatile u64*)&bar = 0;     // an ordinary store onto the mbarrier object
    bar_arrive(b);
    out[0] = 1;
}
"""


def test_a_plain_store_onto_an_mbarrier_is_reported_at_its_next_use():
    k = xp.RawKernel(OVERWRITE, "clobber", options=ARCH)
    with pytest.raises(KernelFault, match="changed by an access other than an mbarrier instruction") as e:
        k((1,), (1,), (xp.zeros(1, dtype=xp.uint32),))
    assert e.value.rule == "an mbarrier object is accessed only by mbarrier instructions"
    assert e.value.line == _line_of(k, "mbarrier.arrive")
    assert e.value.thread == ((0, 0, 0), (0, 0, 0))


# ---- tcgen05: the models' rules as faults -------------------------------------------------------------------

TMEM = HEADER + r"""
extern "C" __global__ void tmem_probe(u32* out, u32 ncols, u32 lane_of_warp1, u32 idesc) {
    __shared__ __align__(16) u32 slot[4];
    __shared__ __align__(8) u64 bar;
    const u32 warp = threadIdx.x / 32;
    if (warp == 0) {
        asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;"
                     :: "r"(smem_u32(slot)), "r"(ncols));
        asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
    }
    if (threadIdx.x == 0) bar_init(smem_u32(&bar), 1);
    asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
    __syncthreads();
    asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
    const u32 taddr = *(volatile u32*)slot;
    if (threadIdx.x == 0 && idesc != 0) {
        // one SS MMA (M=64 N=128 bf16) on descriptors at address 0: only its instruction descriptor matters here
        const u64 desc = 0x4000404000010000ull;
        asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, 0, 0;\n"
                     " tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %1, %2, p;\n}\n"
                     :: "r"(taddr), "l"(desc), "r"(idesc) : "memory");
        asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];"
                     :: "r"(smem_u32(&bar)) : "memory");
    }
    // each warp stores its thread index to its quadrant and loads it back; warp 1 loads at lane_of_warp1
    const u32 lane0 = (32 * warp) << 16, from = (warp == 1 ? lane_of_warp1 : 32 * warp) << 16;
    u32 v = threadIdx.x, r;
    asm volatile("tcgen05.st.sync.aligned.32x32b.x1.b32 [%0], {%1};" :: "r"(taddr + lane0), "r"(v) : "memory");
    asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x1.b32 {%0}, [%1];" : "=r"(r) : "r"(taddr + from));
    asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
    out[threadIdx.x] = r;
    asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
    __syncthreads();
    if (warp == 0) {
        asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
        asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" :: "r"(taddr), "r"(ncols));
    }
}
"""


@pytest.fixture(scope="module")
def tmem_kernel():
    return xp.RawKernel(TMEM, "tmem_probe", options=ARCH)


def test_tmem_store_and_load_round_trip_per_quadrant(tmem_kernel):
    out = xp.zeros(128, dtype=xp.uint32)
    tmem_kernel((1,), (128,), (out, np.uint32(32), np.uint32(32), np.uint32(0)))
    assert out.get().tolist() == list(range(128))


def test_tcgen05_ld_with_lane_field_zero_reads_the_warps_own_quadrant(tmem_kernel):
    """Lane field 0 from warp 1 reads lanes 32-63, as FlashMLA's head64 kernel relies on (its P loads pass the bare
    column from every warp and are correct on B200s)."""
    out = xp.zeros(128, dtype=xp.uint32)
    tmem_kernel((1,), (128,), (out, np.uint32(32), np.uint32(0), np.uint32(0)))
    ref = xp.zeros(128, dtype=xp.uint32)
    tmem_kernel((1,), (128,), (ref, np.uint32(32), np.uint32(32), np.uint32(0)))
    np.testing.assert_array_equal(out.get(), ref.get())


def test_tcgen05_ld_outside_the_warps_quadrant_is_a_fault_of_that_warp(tmem_kernel):
    out = xp.zeros(128, dtype=xp.uint32)
    with pytest.raises(KernelFault, match="lane") as e:
        tmem_kernel((1,), (128,), (out, np.uint32(32), np.uint32(64), np.uint32(0)))  # warp 1 at lanes 64-95
    assert e.value.thread == ((0, 0, 0), (32, 0, 0))
    assert e.value.line == _line_of(tmem_kernel, "tcgen05.ld")
    with pytest.raises(LaneQuadrantError) as model:  # the record's own rule, as the hand replay meets it
        Ld(64 << 16, "32x32b", 1, "r", lane_base="absolute").lane0(1)
    assert (e.value.rule, e.value.ref) == (model.value.rule, model.value.ref)
    assert "warp 1 may access lanes 32-63" in e.value.message


def test_alloc_of_more_than_512_columns_is_the_models_error(tmem_kernel):
    with pytest.raises(KernelFault) as e:
        tmem_kernel((1,), (128,), (xp.zeros(128, dtype=xp.uint32), np.uint32(1024), np.uint32(32), np.uint32(0)))
    with pytest.raises(TmemAllocError) as model:
        Alloc(1024, 0)
    assert e.value.rule == model.value.rule == "tcgen05.alloc ncols is a power of 2, >= 32 and <= 512"
    assert e.value.line == _line_of(tmem_kernel, "tcgen05.alloc")
    assert e.value.thread == ((0, 0, 0), (0, 0, 0))


def test_illegal_instruction_descriptor_is_a_fault_naming_its_bit(tmem_kernel):
    bad = QK_IDESC.encode() | (1 << 23)  # reserved bit 23
    with pytest.raises(KernelFault, match="reserved bit 23 is set") as e:
        tmem_kernel((1,), (128,), (xp.zeros(128, dtype=xp.uint32), np.uint32(512), np.uint32(32), np.uint32(bad)))
    assert e.value.line == _line_of(tmem_kernel, "tcgen05.mma")
    assert e.value.ref == "PTX ISA 9.0 §9.7.16.4.2 Table 42"


# ---- refused by name: hand PTX ----------------------------------------------------------------------------------

def _hand(body: str, regs: str = ".reg .b32 %r<4>; .reg .b64 %rd<4>;"):
    return parser.parse(f"""
.version 9.0
.target sm_100a
.address_size 64
.visible .entry k()
{{
    {regs}
    .shared .align 8 .b64 bar;
    {body}
    ret;
}}
""")


@pytest.mark.parametrize(("body", "rule"), [
    ("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [bar], 32;", "tcgen05 with .cta_group::1"),
    ("mov.u32 %r1, bar; mbarrier.init.shared::cta.b64 [%r1], 1; "
     "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%r1], 3;",
     "no cluster multicast"),
    ("tcgen05.shift.cta_group::1.down [%r1];", "modelled tcgen05 instructions"),
    ("mbarrier.arrive_drop.shared::cta.b64 %rd1, [bar];", "modelled mbarrier operations"),
    ("wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.bf16.bf16 {%r0, %r1, %r2, %r3}, %rd1, %rd1, %r1, 0, 1, 1, 1, "
     "0, 0;", "modelled wgmma forms"),
    ("wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 {%r0, %r1, %r2, %r3}, %rd1, %rd1, 1, 1, 1, 0, 0;",
     "modelled wgmma types"),
])
def test_unmodelled_forms_are_refused_by_name(body, rule):
    m = _hand(body)
    with pytest.raises(PtxUnsupported) as e:
        launch(m, "k", grid=(1,), block=(1,), args=[], device=Device())
    assert e.value.rule == rule
    assert e.value.ref.startswith("PTX ISA 9.0 §")
    assert "PTX line" in e.value.message


def test_try_wait_on_an_uninitialised_barrier_is_a_fault():
    m = _hand("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [bar], 0; }")
    with pytest.raises(KernelFault, match="no mbarrier is initialised at shared address 0x0") as e:
        launch(m, "k", grid=(1,), block=(32,), args=[], device=Device())
    assert e.value.rule == "mbarriers are initialised before use"
