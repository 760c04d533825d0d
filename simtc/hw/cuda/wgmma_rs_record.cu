// simtc: sm_90a wgmma with A from registers (the RS form), header-free; double-brace placeholders are filled by
// simtc.hw.wgmma_rs (kernel_source), one kernel per (N, input type, accumulator type, B major).
//
// One CTA of 128 threads (one warpgroup). The kernel
//   1. copies a shared-memory byte image built by simtc.smem (B's tiles) verbatim into dynamic shared memory,
//      aligned to 1024 bytes (so swizzle phases match the image's offsets),
//   2. loads its accumulator registers from acc_in (thread-major raw words: f32 bits, or two f16 per word),
//   3. runs n_instr instructions
//        wgmma.mma_async.sync.aligned.m64n{{N}}k16.{{D}}.{{T}}.{{T}} d, {a0, a1, a2, a3}, b-desc, p, {{SA}}, {{SB}}, {{TB}};
//      instruction i takes this thread's four A registers from a_regs[(i * 128 + thread) * 4 + 0..3] and its B
//      descriptor (start relative to the image) from b_descs[i], scale-d from scale_d[i],
//   4. writes the raw accumulator registers (thread-major) to out.
// No layout, fragment or swizzle logic lives here: A's registers arrive as simtc packed them, B's descriptors as
// simtc built them.

typedef unsigned int u32;
typedef unsigned long long u64;

extern "C" __global__ void __launch_bounds__(128, 1)
{{NAME}}(const uint4* __restrict__ image, u32 image_chunks, const u32* __restrict__ a_regs,
         const u64* __restrict__ b_descs, const u32* __restrict__ scale_d, u32 n_instr,
         const u32* __restrict__ acc_in, u32* __restrict__ out)
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

    u32 d[{{NREG}}];
#pragma unroll
    for (int i = 0; i < {{NREG}}; ++i) d[i] = acc_in[threadIdx.x * {{NREG}} + i];

    const u64 start_shift = (u64)((base >> 4) & 0x3FFFu);
    for (u32 p = 0; p < n_instr; ++p) {
        const u32* a = a_regs + ((u64)p * 128u + threadIdx.x) * 4u;
        const u32 a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
        const u64 b = b_descs[p] + start_shift;
        const u32 sd = scale_d[p];
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        asm volatile(
            "{\n .reg .pred p;\n setp.ne.b32 p, %{{SD_IDX}}, 0;\n"
            " wgmma.mma_async.sync.aligned.m64n{{N}}k16.{{D}}.{{T}}.{{T}}\n"
            " {{{ACC_LIST}}},\n {%{{A_IDX0}}, %{{A_IDX1}}, %{{A_IDX2}}, %{{A_IDX3}}},\n"
            " %{{B_IDX}}, p, {{SA}}, {{SB}}, {{TB}};\n}\n"
            : {{ACC_BIND}}
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(b), "r"(sd)
            : "memory");
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    }
#pragma unroll
    for (int i = 0; i < {{NREG}}; ++i) out[threadIdx.x * {{NREG}} + i] = d[i];
}
