// simtc calibration: a wgmma SS chain and LDS.128 streams sharing shared memory (double-brace placeholders are
// filled by simtc.hw.calibrate).
//
// {{NAME}}: one CTA of 384 threads. The shared-memory image (A 64 x 16 and B 256 x 16 bf16, K-major, no swizzle,
// built by simtc.smem: simtc.hw.timing.timing_image) is copied verbatim to a 1024-byte-aligned buffer; the
// descriptors come from the host (start address added here, as wgmma_timing.cu does). A separate 32 KiB region
// holds the words the loads read.
//   warpgroup 0 (mode bit 0): `wg_iters` times { wgmma.fence; {{DEPTH}} back-to-back
//            wgmma.mma_async.m64n256k16.f32.bf16.bf16 (A and B from shared memory) on one accumulator;
//            commit_group; wait_group 0 }, timed by thread 0, which then raises a stop flag in shared memory;
//   warpgroups 1-2 (mode bit 1): every warp repeats 16 conflict-free ld.volatile.shared.v4 (one per 2 KiB slice,
//            lane l at 16 l) until `lds_iters` rounds have run or, in mode 3, the stop flag is up (checked after
//            every round); lane 0 writes its first and last clock64 and its round count.
// out = {wgmma t0, wgmma t1, then per load warp: t0, t1, rounds}.

#define SIMTC_WGMMA_256(ACC)                                                                       \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %130, 0;\n"                                   \
                 " wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16\n"                        \
                 " {{{ACC_LIST}}},\n %128, %129, p, 1, 1, 0, 0;\n}\n"                               \
                 : {{ACC_BIND}}                                                                    \
                 : "l"(a_desc), "l"(b_desc), "r"(one)                                              \
                 : "memory")

#define SIMTC_FENCE_ACC(ACC)                                                                       \
    _Pragma("unroll") for (int i_ = 0; i_ < 128; ++i_) asm volatile("" : "+f"(ACC[i_]) :: "memory")

extern "C" __global__ void __launch_bounds__(384, 1)
{{NAME}}(const uint4* __restrict__ image, u32 image_chunks, u64 a_desc_rel, u64 b_desc_rel, u32 mode,
         u32 wg_iters, u32 lds_iters, u64* __restrict__ out, u32* __restrict__ sink)
{
    extern __shared__ __align__(1024) unsigned char simtc_smem_raw[];
    u32 base = simtc_smem(simtc_smem_raw);
    const u32 pad = (1024u - (base & 1023u)) & 1023u;
    uint4* smem = reinterpret_cast<uint4*>(simtc_smem_raw + pad);
    base += pad;
    for (u32 i = threadIdx.x; i < image_chunks; i += blockDim.x) smem[i] = image[i];
    const u32 lds_base = base + 16384u, flag = base + 16384u + 32768u;
    for (u32 i = threadIdx.x; i < 2048u; i += blockDim.x) smem[1024u + i] = make_uint4(i, i + 1u, i + 2u, i + 3u);
    if (threadIdx.x == 0) asm volatile("st.volatile.shared.u32 [%0], %1;" :: "r"(flag), "r"(0u) : "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    const u32 wg = __shfl_sync(0xffffffffu, threadIdx.x >> 7, 0), lane = threadIdx.x & 31u;  // warp-uniform
    if (wg == 0) {
        if (!(mode & 1u)) return;
        const u64 shift = (u64)((base >> 4) & 0x3FFFu);
        const u64 a_desc = a_desc_rel + shift, b_desc = b_desc_rel + shift;
        const u32 one = 1u;
        float d[128];
#pragma unroll
        for (int i = 0; i < 128; ++i) d[i] = 0.0f;
        SIMTC_FENCE_ACC(d);
        const u64 t0 = simtc_clock();
#pragma unroll 1
        for (u32 it = 0; it < wg_iters; ++it) {
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
            for (int k = 0; k < {{DEPTH}}; ++k) SIMTC_WGMMA_256(d);
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
            SIMTC_FENCE_ACC(d);
        }
        const u64 t1 = simtc_clock();
        if (threadIdx.x == 0) {
            out[0] = t0;
            out[1] = t1;
            asm volatile("st.volatile.shared.u32 [%0], %1;" :: "r"(flag), "r"(1u) : "memory");
        }
        float acc = 0.0f;
#pragma unroll
        for (int i = 0; i < 128; ++i) acc += d[i];
        sink[threadIdx.x] = __float_as_uint(acc);
    } else if (mode & 2u) {
        const u32 p = lds_base + lane * 16u;
        u32 acc = 0, n = 0;
        const u64 t0 = simtc_clock();
        while (n < lds_iters) {
{{LDS_BODY}}
            ++n;
            if (mode & 1u) {
                u32 f;
                asm volatile("ld.volatile.shared.u32 %0, [%1];" : "=r"(f) : "r"(flag) : "memory");
                if (f) break;
            }
        }
        const u64 t1 = simtc_clock();
        const u32 w = (threadIdx.x >> 5) - 4u;
        if (lane == 0) {
            out[2 + 3 * w] = t0;
            out[3 + 3 * w] = t1;
            out[4 + 3 * w] = n;
        }
        sink[threadIdx.x] = acc;
    }
}
