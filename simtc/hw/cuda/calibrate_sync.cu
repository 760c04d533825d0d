// simtc calibration: synchronisation round trips (prepended with calibrate_common.cu by simtc.hw.calibrate).
// Every wait gives up after `timeout_ns` of %globaltimer and sets bit 0 of *flag (reported as a timeout, not a
// hang); bit 1 means a cluster kernel did not run as a cluster of two.

// mbarrier ping-pong: warp 0 arrives on A and waits on B; warp 1 waits on A and arrives on B (lane 0 arrives,
// the whole warp waits with mbarrier.try_wait.parity). `rounds` (even) round trips, timed by warp 0 lane 0.
extern "C" __global__ void __launch_bounds__(64, 1)
simtc_cal_mbar_pingpong(u32 rounds, u64 timeout_ns, u64* __restrict__ out, u32* __restrict__ flag)
{
    __shared__ __align__(8) u64 bars[2];
    const u32 a = simtc_smem(&bars[0]), b = simtc_smem(&bars[1]);
    const u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
    if (threadIdx.x == 0) { simtc_mbar_init(a, 1); simtc_mbar_init(b, 1); }
    __syncthreads();
    const u64 deadline = simtc_globaltimer() + timeout_ns;
    const u64 t0 = simtc_clock();
#pragma unroll 1
    for (u32 r = 0; r < rounds; r += 2) {
        if (warp == 0) {
            if (lane == 0) simtc_mbar_arrive(a);
            simtc_mbar_wait(b, 0, deadline, flag);
            if (lane == 0) simtc_mbar_arrive(a);
            simtc_mbar_wait(b, 1, deadline, flag);
        } else {
            simtc_mbar_wait(a, 0, deadline, flag);
            if (lane == 0) simtc_mbar_arrive(b);
            simtc_mbar_wait(a, 1, deadline, flag);
            if (lane == 0) simtc_mbar_arrive(b);
        }
    }
    const u64 t1 = simtc_clock();
    if (threadIdx.x == 0) out[0] = t1 - t0;
}

// Per sample s (warm-up included; the host drops the first ones):
//   TMA: warp 0 lane 0 reads clock64 (t0), mbarrier.arrive.expect_tx(16) and issues one 16-byte cp.async.bulk
//   global -> shared completing on that mbarrier; warp 0 waits on it (lane 0 reads t_self), warp 1 waits on it
//   too (lane 0 reads t_other);
//   mbarrier: warp 0 lane 0 reads t2 and arrives on a second mbarrier; warp 1 waits on it and reads t3.
// out[5 s + {0..4}] = t0, t_self, t_other, t2, t3 (all clock64 of this SM).
extern "C" __global__ void __launch_bounds__(64, 1)
simtc_cal_tma_wake(const uint4* __restrict__ src, u32 samples, u64 timeout_ns, u64* __restrict__ out,
                   u32* __restrict__ flag)
{
    __shared__ __align__(128) uint4 dst[8];
    __shared__ __align__(8) u64 bars[2];
    __shared__ u64 stamp[5];
    const u32 bt = simtc_smem(&bars[0]), bm = simtc_smem(&bars[1]);
    const u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
    if (threadIdx.x == 0) {
        simtc_mbar_init(bt, 1);
        simtc_mbar_init(bm, 1);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the initialised mbarriers, seen by TMA
    }
    __syncthreads();
    const u64 deadline = simtc_globaltimer() + timeout_ns;
#pragma unroll 1
    for (u32 s = 0; s < samples; ++s) {
        __syncthreads();
        if (warp == 0) {
            if (lane == 0) {
                const u64 t0 = simtc_clock();
                simtc_mbar_arrive_expect_tx(bt, 16u);
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 16, [%2];"
                             :: "r"(simtc_smem(&dst[0])), "l"(src), "r"(bt) : "memory");
                stamp[0] = t0;
            }
            simtc_mbar_wait(bt, s & 1u, deadline, flag);
            if (lane == 0) stamp[1] = simtc_clock();
        } else {
            simtc_mbar_wait(bt, s & 1u, deadline, flag);
            if (lane == 0) stamp[2] = simtc_clock();
        }
        __syncthreads();
        if (warp == 0) {
            if (lane == 0) {
                stamp[3] = simtc_clock();
                simtc_mbar_arrive(bm);
            }
        } else {
            simtc_mbar_wait(bm, s & 1u, deadline, flag);
            if (lane == 0) stamp[4] = simtc_clock();
        }
        __syncthreads();
        if (threadIdx.x < 5) out[5 * s + threadIdx.x] = stamp[threadIdx.x];
    }
}

// st.async ping-pong across a cluster of two CTAs (one warp each; lane 0 works, the warp waits): each CTA has
// one mbarrier (count 1) and a 4-byte slot; a message is st.async of 4 bytes into the peer's slot completing
// on the peer's mbarrier. A CTA arms its mbarrier (arrive.expect_tx 4) for a round before the message of that
// round can reach it. `rounds` round trips, timed by CTA rank 0; out[rank] = its loop cycles.
extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(32, 1)
simtc_cal_st_async_pingpong(u32 rounds, u64 timeout_ns, u64* __restrict__ out, u32* __restrict__ flag)
{
    __shared__ __align__(8) u64 bar;
    __shared__ __align__(16) u32 slot[4];
    u32 rank, nranks;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(nranks));
    const u32 lane = threadIdx.x & 31u;
    if (nranks != 2) {  // the launch did not form a cluster of two: report it (flag bit 1), touch no peer
        if (lane == 0) atomicOr(flag, 2u);
        return;
    }
    const u32 lbar = simtc_smem(&bar);
    if (lane == 0) {
        simtc_mbar_init(lbar, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        if (rank == 1) simtc_mbar_arrive_expect_tx(lbar, 4u);
    }
    __syncwarp();
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
    u32 rbar, rslot;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rbar) : "r"(lbar), "r"(rank ^ 1u));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rslot) : "r"(simtc_smem(&slot[0])), "r"(rank ^ 1u));
    const u64 deadline = simtc_globaltimer() + timeout_ns;
    const u64 t0 = simtc_clock();
#pragma unroll 1
    for (u32 r = 0; r < rounds; ++r) {
        if (rank == 0) {
            if (lane == 0) {
                simtc_mbar_arrive_expect_tx(lbar, 4u);
                asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.u32 [%0], %1, [%2];"
                             :: "r"(rslot), "r"(r), "r"(rbar) : "memory");
            }
            simtc_mbar_wait(lbar, r & 1u, deadline, flag);
        } else {
            simtc_mbar_wait(lbar, r & 1u, deadline, flag);
            if (lane == 0) {
                if (r + 1 < rounds) simtc_mbar_arrive_expect_tx(lbar, 4u);
                asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.u32 [%0], %1, [%2];"
                             :: "r"(rslot), "r"(r), "r"(rbar) : "memory");
            }
        }
    }
    const u64 t1 = simtc_clock();
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
    if (lane == 0) out[rank] = t1 - t0;
}
