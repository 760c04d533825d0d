// simtc calibration: the latency of one global-memory request (prepended with calibrate_common.cu, followed by
// the LDG chase kernels generated from calibrate_latency_chase.cu, by simtc.hw.calibrate).
//
// A pool of 2^bits elements, `stride` bytes apart (a 128-byte line or more each), holds one random cycle
// through all of its elements: element k of the cycle is slot simtc_chase_slot(k) of the pool, and the first
// 8 bytes of that slot hold the generic address of the slot of element k + 1 (element 2^bits - 1 points back
// to element 0). simtc_chase_slot is a bijection of [0, 2^bits) (an add, then three rounds of multiply by an
// odd constant and xor-shift, all modulo 2^bits; simtc.hw.calibrate.chase_slot is the same function in
// Python), so consecutive loads land on unrelated lines and pages spread over the whole pool. A single thread
// follows the pointers; every kernel starts where the previous launch stopped (`cursor`), so on a pool far
// larger than L2 no line is read twice in a run.

// Slot of element k of the cycle: a bijection of [0, 2^bits), 1 <= bits <= 31.
__device__ __forceinline__ u32 simtc_chase_slot(u32 k, u32 bits, u32 seed) {
    const u32 m = (1u << bits) - 1u;
    const u32 h = (bits + 1u) >> 1;
    u32 x = (k + seed) & m;
    x = (x * 0x9E3779B1u) & m; x ^= x >> h;
    x = (x * 0x85EBCA6Bu) & m; x ^= x >> h;
    x = (x * 0xC2B2AE35u) & m; x ^= x >> h;
    return x;
}

// Write the cycle into the pool (grid-stride over the elements) and point *cursor at element 0.
extern "C" __global__ void __launch_bounds__(256)
simtc_cal_lat_fill(unsigned char* __restrict__ pool, u32 bits, u32 stride, u32 seed, u64* __restrict__ cursor)
{
    const u32 n = 1u << bits;
    for (u32 k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
        const u64 here = (u64)simtc_chase_slot(k, bits, seed) * stride;
        const u64 next = (u64)simtc_chase_slot((k + 1u) & (n - 1u), bits, seed) * stride;
        *(u64*)(pool + here) = (u64)(pool + next);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0)
        cursor[0] = (u64)(pool + (u64)simtc_chase_slot(0u, bits, seed) * stride);
}

// The pools' pages into the TLBs, a small pool into L2, a large region after a pool to evict it (simtc_touch).
extern "C" __global__ void __launch_bounds__(256)
simtc_cal_lat_touch(const uint4* __restrict__ p, u64 n, u32* __restrict__ sink) { simtc_touch(p, n, sink); }

// Bulk-copy chase: one thread (lane 0 of the only warp) repeats `count` times: mbarrier.arrive.expect_tx of
// `bytes`, one cp.async.bulk of `bytes` (16..2048, a multiple of 16) from the current element's slot into
// shared memory completing on that mbarrier, mbarrier.try_wait.parity until it has arrived, and ld.shared of
// the first 8 bytes that arrived: the address of the next element (so every copy depends on the one before).
// times[0] = clock64 after the last copy's first word was read minus clock64 before the first copy (the
// cursor has been read before); a wait that passes the deadline sets bit 0 of *flag and ends the chase.
extern "C" __global__ void __launch_bounds__(32, 1)
simtc_cal_lat_bulk(u64* __restrict__ cursor, u32 bytes, u32 count, u64 timeout_ns, u64* __restrict__ times,
                   u32* __restrict__ flag)
{
    __shared__ __align__(128) unsigned char buf[2048];
    __shared__ __align__(8) u64 bar;
    __shared__ __align__(8) u64 seen;
    if (threadIdx.x != 0) return;
    const u32 b = simtc_smem(&bar), dst = simtc_smem(buf), s = simtc_smem(&seen);
    simtc_mbar_init(b, 1u);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the initialised mbarrier, seen by TMA
    u64 p = cursor[0];
    asm volatile("st.volatile.shared.u64 [%0], %1;" :: "r"(s), "l"(p) : "memory");  // p has arrived
    const u64 deadline = simtc_globaltimer() + timeout_ns;
    const u64 t0 = simtc_clock();
#pragma unroll 1
    for (u32 i = 0; i < count; ++i) {
        simtc_mbar_arrive_expect_tx(b, bytes);
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     :: "r"(dst), "l"(p), "r"(bytes), "r"(b) : "memory");
        if (!simtc_mbar_wait(b, i & 1u, deadline, flag)) break;
        asm volatile("ld.volatile.shared.u64 %0, [%1];" : "=l"(p) : "r"(dst) : "memory");
    }
    asm volatile("st.volatile.shared.u64 [%0], %1;" :: "r"(s), "l"(p) : "memory");  // the last word arrived
    const u64 t1 = simtc_clock();
    times[0] = t1 - t0;
    cursor[0] = p;
}
