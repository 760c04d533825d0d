// simtc calibration: shared memory (double-brace placeholders are filled by simtc.hw.calibrate).
//
// {{NAME}}: {{WHAT}}
// One CTA of 128*k threads on one SM; a 32 KiB __shared__ buffer. Lane l of every warp accesses byte
// {{LANE_STRIDE}}*l of a 2 KiB slice (stride 1, 2 or 4 vectors: conflict-free, 2-way, 4-way); unrolled step
// j uses slice j % 16, written as an immediate offset, so no address arithmetic runs in the loop. Accesses
// are ld/st.volatile.shared (the compiler may neither merge nor hoist them); loaded words are folded into
// eight accumulators (so the loads are live and no single dependency chain forms). Lane 0 of every warp
// times `iters` iterations with clock64; the pointer-chase kernel (one warp) instead follows
// p = *(u32*)p, each lane in its own bank, and measures the dependent-load latency.
extern "C" __global__ void __launch_bounds__(512, 1)
{{NAME}}(u32 seed, u32 iters, u64* __restrict__ times, u32* __restrict__ sink)
{
    __shared__ __align__(128) u32 simtc_buf[8192];
    const u32 buf = simtc_smem(simtc_buf);
    for (u32 i = threadIdx.x; i < 8192u; i += blockDim.x)
        simtc_buf[i] = {{FILL}};
    const u32 base = buf + (threadIdx.x & 31u) * {{LANE_STRIDE}}u;
    u32 acc[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i] = 0;
    const u32 v0 = seed ^ threadIdx.x, v1 = v0 + 1u, v2 = v0 + 2u, v3 = v0 + 3u;
    u32 p = base;
    (void)v1; (void)v2; (void)v3;
    __syncthreads();
    const u64 t0 = simtc_clock();
#pragma unroll 1
    for (u32 it = 0; it < iters; ++it) {
{{BODY}}
    }
    const u64 t1 = simtc_clock();
    simtc_store_warp_times(times, t0, t1);
    sink[threadIdx.x] = acc[0] ^ acc[1] ^ acc[2] ^ acc[3] ^ acc[4] ^ acc[5] ^ acc[6] ^ acc[7] ^ p;
}
