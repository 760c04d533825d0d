// simtc: sm_90a wgmma timing microbenchmark (header-free; double-brace placeholders are filled by simtc.hw.timing).
//
// One CTA of 128 threads (one warpgroup) on one SM. The shared-memory image (A 64 x 16 and B {{N}} x 16
// bf16, built by simtc.smem) is copied verbatim; descriptors come from the host. The instruction is
// wgmma.mma_async.m64n{{N}}k16.f32.bf16.bf16 with A from {{OPERANDS_TEXT}}.
//
//   latency: per sample, the warpgroup meets at a named barrier, issues wgmma.fence, reads clock64,
//            issues ONE wgmma, commit_group, wait_group 0, reads clock64 again. Thread 0 stores the
//            difference (issue -> completion observed by the issuing warpgroup).
//   chains:  per sample and depth D ({{DEPTHS}}), the same timed region holds D back-to-back wgmmas on
//            the same accumulator (fully unrolled, no wait between them), then one commit_group + wait_group 0.
//   empty:   the timed region with nothing in it (the cost of the two clock64 reads).
// Warm-up samples are run and dropped. No layout logic lives here.

typedef unsigned int u32;
typedef unsigned long long u64;

__device__ __forceinline__ u64 simtc_clock() {
    u64 t;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t) :: "memory");
    return t;
}

#define SIMTC_WGMMA(ACC)                                                                           \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %{{SD_IDX}}, 0;\n"                            \
                 " wgmma.mma_async.sync.aligned.m64n{{N}}k16.f32.bf16.bf16\n"                      \
                 " {{{ACC_LIST}}},\n {{A_OPERAND}}, %{{B_IDX}}, p, 1, 1{{TRANS}};\n}\n"            \
                 : {{ACC_BIND}}                                                                    \
                 : {{A_BIND}}"l"(b_desc), "r"(one)                                                 \
                 : "memory")

// Pin the accumulators: keeps the compiler from moving their definitions into a wgmma pipeline stage
// (which would make ptxas serialize the chain; CUTLASS's warpgroup_fence_operand does the same).
#define SIMTC_FENCE_ACC(ACC)                                                                       \
    _Pragma("unroll") for (int i_ = 0; i_ < {{NREG}}; ++i_) asm volatile("" : "+f"(ACC[i_]) :: "memory");  \
    asm volatile("" : "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3) :: "memory")

// Timed chain number J of D back-to-back wgmmas (D a compile-time constant: fully unrolled).
#define SIMTC_TIME_CHAIN(J, D)                                                                     \
    _Pragma("unroll 1") for (u32 s = 0; s < warmup + samples; ++s) {                               \
        asm volatile("bar.sync 1, 128;" ::: "memory");                                            \
        SIMTC_FENCE_ACC(d);                                                                        \
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");                                   \
        const u64 t0 = simtc_clock();                                                              \
        _Pragma("unroll") for (int k_ = 0; k_ < (D); ++k_) SIMTC_WGMMA(d);                         \
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");                            \
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");                            \
        const u64 t1 = simtc_clock();                                                              \
        SIMTC_FENCE_ACC(d);                                                                        \
        if (threadIdx.x == 0 && s >= warmup) chains[(J) * samples + s - warmup] = t1 - t0;       \
    }

extern "C" __global__ void __launch_bounds__(128, 1)
{{NAME}}(const uint4* __restrict__ image, u32 image_chunks, u64 a_desc_rel, u64 b_desc_rel,
         u32 warmup, u32 samples,
         u64* __restrict__ latency, u64* __restrict__ chains, u64* __restrict__ empty,
         float* __restrict__ sink)
{
    extern __shared__ __align__(1024) unsigned char simtc_smem_raw[];
    u32 base;
    asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(base) : "l"(simtc_smem_raw));
    const u32 pad = (1024u - (base & 1023u)) & 1023u;
    uint4* smem = reinterpret_cast<uint4*>(simtc_smem_raw + pad);
    base += pad;
    for (u32 i = threadIdx.x; i < image_chunks; i += 128) smem[i] = image[i];
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();

    const u64 start_shift = (u64)((base >> 4) & 0x3FFFu);
    const u64 a_desc = a_desc_rel + start_shift;
    const u64 b_desc = b_desc_rel + start_shift;
    (void)a_desc;
    const u32 one = 1u;
    // A fragment for the register form: bf16 values in [1, 2) that differ per thread (timing only)
    u32 a0 = 0x3F803F80u | (threadIdx.x & 0x7Fu), a1 = a0 ^ 0x00010000u, a2 = a0 ^ 0x00020000u, a3 = a0 ^ 0x00030000u;

    float d[{{NREG}}];
#pragma unroll
    for (int i = 0; i < {{NREG}}; ++i) d[i] = 0.0f;
    SIMTC_FENCE_ACC(d);

#pragma unroll 1
    for (u32 s = 0; s < warmup + samples; ++s) {
        asm volatile("bar.sync 1, 128;" ::: "memory");
        const u64 t0 = simtc_clock();
        const u64 t1 = simtc_clock();
        if (threadIdx.x == 0 && s >= warmup) empty[s - warmup] = t1 - t0;
    }
#pragma unroll 1
    for (u32 s = 0; s < warmup + samples; ++s) {
        asm volatile("bar.sync 1, 128;" ::: "memory");
        SIMTC_FENCE_ACC(d);
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        const u64 t0 = simtc_clock();
        SIMTC_WGMMA(d);
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        const u64 t1 = simtc_clock();
        SIMTC_FENCE_ACC(d);
        if (threadIdx.x == 0 && s >= warmup) latency[s - warmup] = t1 - t0;
    }
    // one fully unrolled timed chain per depth (depths fixed at build time: no loop between the wgmmas)
{{CHAINS}}
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < {{NREG}}; ++i) acc += d[i];
    sink[threadIdx.x] = acc;
}
