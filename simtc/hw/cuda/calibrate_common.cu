// simtc calibration microbenchmarks: the prelude prepended to every calibrate_*.cu module (header-free).
//
// Helpers only, no kernels: clock64 and %globaltimer reads, shared-memory addresses, a 32-bit integer
// hash for seeded random choices, and mbarrier waits that give up after a deadline (a benchmark that
// would hang reports a timeout through its flag word instead of stopping the whole run).

typedef unsigned int u32;
typedef unsigned long long u64;

__device__ __forceinline__ u64 simtc_clock() {
    u64 t;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t) :: "memory");
    return t;
}

__device__ __forceinline__ u64 simtc_globaltimer() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) :: "memory");
    return t;
}

__device__ __forceinline__ u32 simtc_smem(const void* p) {
    u32 a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

// A 32-bit finalizer (xor-shift-multiply rounds): a fixed seed gives the same "random" rows on every run.
__device__ __forceinline__ u32 simtc_hash(u32 x) {
    x ^= x >> 16; x *= 0x85EBCA6Bu;
    x ^= x >> 13; x *= 0xC2B2AE35u;
    x ^= x >> 16;
    return x;
}

__device__ __forceinline__ void simtc_mbar_init(u32 bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void simtc_mbar_arrive(u32 bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}

__device__ __forceinline__ void simtc_mbar_arrive_expect_tx(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}

// mbarrier.try_wait.parity until the phase with this parity has completed; after `deadline` (a %globaltimer
// value, ns) it sets bit 0 of *flag and returns false. The deadline is read only when try_wait fails.
__device__ __forceinline__ bool simtc_mbar_wait(u32 bar, u32 parity, u64 deadline, u32* flag) {
    while (true) {
        u32 done;
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
        if (done) return true;
        if (simtc_globaltimer() > deadline) {
            atomicOr(flag, 1u);
            return false;
        }
    }
}

// Lane 0 of each warp writes the warp's clock64 stamps around a timed loop: times[2 w] = t0, times[2 w + 1] = t1.
__device__ __forceinline__ void simtc_store_warp_times(u64* __restrict__ times, u64 t0, u64 t1) {
    if ((threadIdx.x & 31u) == 0) {
        times[2 * (threadIdx.x >> 5)] = t0;
        times[2 * (threadIdx.x >> 5) + 1] = t1;
    }
}

// Read every 16 bytes of [p, p + 16 n) once (grid-stride): the pool's pages get TLB entries (as many as the TLBs
// hold), a small pool sits in L2 afterwards, and reading a large region after a pool evicts it from L2.
__device__ __forceinline__ void simtc_touch(const uint4* __restrict__ p, u64 n, u32* __restrict__ sink) {
    u32 acc = 0;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        const uint4 v = p[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
