// simtc calibration: synchronisation instructions in a timed loop (double-brace placeholders are filled by
// simtc.hw.calibrate).
//
// {{NAME}}: {{WHAT}}
// Every thread of the CTA (of the cluster, where the kernel declares one) runs `iters` iterations of
// {{STEPS}} unrolled steps; lane 0 of every warp of CTA 0 times the loop with clock64 (times[2w], times[2w+1]),
// and thread 0 writes the number of CTAs in its cluster after them. A fit over kernels that differ only in the
// number of unrolled steps gives the cycles per step without the loop overhead.
extern "C" __global__ void {{ATTR}} __launch_bounds__(512, 1)
{{NAME}}(u32 seed, u32 iters, u64* __restrict__ times, u32* __restrict__ sink)
{
    __shared__ __align__(128) u32 simtc_buf[1024];
    const u32 buf = simtc_smem(simtc_buf) + (threadIdx.x & 31u) * 16u;
    const u32 v = seed ^ threadIdx.x;
    (void)buf; (void)v;
    __syncthreads();
    const u64 t0 = simtc_clock();
#pragma unroll 1
    for (u32 it = 0; it < iters; ++it) {
{{BODY}}
    }
    const u64 t1 = simtc_clock();
    if (blockIdx.x == 0) simtc_store_warp_times(times, t0, t1);
    if (blockIdx.x == 0 && threadIdx.x == 0) {  // after the pairs: the CTAs in this CTA's cluster (1 without one)
        u32 n;
        asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
        times[2 * (blockDim.x >> 5)] = n;
    }
    sink[blockIdx.x * blockDim.x + threadIdx.x] = v;
}
