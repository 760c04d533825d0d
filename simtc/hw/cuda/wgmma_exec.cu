// simtc: sm_90a wgmma executor (header-free; double-brace placeholders are filled by simtc.hw.wgmma).
//
// One CTA of 128 threads (one warpgroup). The kernel
//   1. copies a shared-memory byte image built by simtc.smem verbatim into dynamic shared memory,
//      aligned to 1024 bytes (so swizzle phases match the image's offsets),
//   2. runs a program of wgmma.mma_async m64n{{N}}k16 instructions whose 64-bit descriptors were built
//      by simtc (their start fields are relative to the image; the kernel adds the buffer's address),
//   3. writes the raw accumulator registers (thread-major) and a clock64 stamp after each group.
// No layout or swizzle logic lives here: the kernel only executes what simtc describes.

typedef unsigned int u32;
typedef unsigned long long u64;

struct SimtcWgmmaInstr {
    u64 a_desc;     // sm90 descriptor, start relative to the image base
    u64 b_desc;
    u32 scale_d;    // 0: D = A*B (accumulator ignored), 1: D = A*B + D
    u32 group_end;  // 1: record a clock64 stamp after this instruction
};

extern "C" __global__ void __launch_bounds__(128, 1)
{{NAME}}(const uint4* __restrict__ image, u32 image_chunks,
         const SimtcWgmmaInstr* __restrict__ program, u32 n_instr,
         float* __restrict__ out, u64* __restrict__ stamps)
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

    float d[{{NREG}}];
#pragma unroll
    for (int i = 0; i < {{NREG}}; ++i) d[i] = 0.0f;

    const u64 start_shift = (u64)((base >> 4) & 0x3FFFu);
    const u64 t0 = clock64();
    u32 n_stamp = 0;
    for (u32 p = 0; p < n_instr; ++p) {
        const u64 a = program[p].a_desc + start_shift;
        const u64 b = program[p].b_desc + start_shift;
        const u32 sd = program[p].scale_d;
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        asm volatile(
            "{\n .reg .pred p;\n setp.ne.b32 p, %{{SD_IDX}}, 0;\n"
            " wgmma.mma_async.sync.aligned.m64n{{N}}k16.f32.{{T}}.{{T}}\n"
            " {{{ACC_LIST}}},\n %{{A_IDX}}, %{{B_IDX}}, p, 1, 1, {{TA}}, {{TB}};\n}\n"
            : {{ACC_BIND}}
            : "l"(a), "l"(b), "r"(sd)
            : "memory");
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        if (program[p].group_end) {
            if (threadIdx.x == 0) stamps[n_stamp] = clock64() - t0;
            ++n_stamp;
        }
    }
#pragma unroll
    for (int i = 0; i < {{NREG}}; ++i) out[threadIdx.x * {{NREG}} + i] = d[i];
}
