// simtc: sm_100a executor of FlashMLA's dual-GEMM QK step (header-free).
//
// One CTA of 128 threads (warps 0-3). The kernel
//   1. copies a shared-memory byte image built by simtc.smem verbatim (1024-byte aligned),
//   2. warp 0 allocates all 512 TMEM columns and relinquishes the permit,
//   3. thread 0 issues the 18 tcgen05.cp.128x256b of Q (NoPE, then RoPE) and the 18
//      tcgen05.mma.ws (TS, M=64, N=128) exactly as simtc describes them (descriptors, instruction
//      descriptor, A columns, enable-input-d all come from the host), then commits to an mbarrier,
//   4. every warp waits on the mbarrier and reads its 32-lane quadrant of TMEM columns 256..463
//      (Q region and P) with tcgen05.ld.32x32b, and writes the raw 32-bit cells to global memory,
//   5. warp 0 frees TMEM.
// All layout knowledge lives in simtc; this file only executes it.

typedef unsigned int u32;
typedef unsigned long long u64;

// sizes filled in by simtc.hw.tcgen05.kernel_source from simtc.kernels.flashmla (18, 18, 256, 208)
#define SIMTC_NCP {{NCP}}
#define SIMTC_NMMA {{NMMA}}
#define SIMTC_COL0 {{COL0}}
#define SIMTC_NCOLS {{NCOLS}}

struct SimtcDualQk {
    u64 cp_desc[SIMTC_NCP];    // sm100 descriptors of the Q copies (start relative to the image)
    u32 cp_col[SIMTC_NCP];     // destination TMEM column of each copy
    u64 b_desc[SIMTC_NMMA];    // sm100 descriptors of B (K dual view)
    u32 a_col[SIMTC_NMMA];     // TMEM column of A for each MMA
    u32 enable_d[SIMTC_NMMA];  // enable-input-d per MMA (0: overwrite)
    u32 d_col;                 // TMEM column of D (P)
    u32 idesc;                 // 32-bit instruction descriptor
    u32 image_chunks;          // image size / 16
    u32 bar_offset;            // byte offset of the mbarrier / TMEM-address slot after the image
};

__device__ __forceinline__ u32 simtc_smem_addr(const void* p) {
    u32 a;
    asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

extern "C" __global__ void __launch_bounds__(128, 1)
simtc_tcgen05_dual_qk(const uint4* __restrict__ image, const SimtcDualQk* __restrict__ prm,
                      u32* __restrict__ out)
{
    extern __shared__ __align__(1024) unsigned char simtc_smem_raw[];
    u32 base = simtc_smem_addr(simtc_smem_raw);
    const u32 pad = (1024u - (base & 1023u)) & 1023u;
    unsigned char* smem = simtc_smem_raw + pad;
    base += pad;
    const u32 warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (u32 i = threadIdx.x; i < prm->image_chunks; i += 128) reinterpret_cast<uint4*>(smem)[i] = image[i];
    const u32 bar = base + prm->bar_offset;       // 8-byte mbarrier
    const u32 slot = base + prm->bar_offset + 8;  // TMEM address written by tcgen05.alloc
    if (warp == 0) {
        asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;" :: "r"(slot), "r"(512));
        asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
    }
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(1));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
    __syncthreads();
    asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
    const u32 taddr = *reinterpret_cast<volatile u32*>(smem + prm->bar_offset + 8);
    const u64 start_shift = (u64)((base >> 4) & 0x3FFFu);

    if (threadIdx.x == 0) {
#pragma unroll
        for (int i = 0; i < SIMTC_NCP; ++i) {
            asm volatile("tcgen05.cp.cta_group::1.128x256b [%0], %1;"
                         :: "r"(taddr + prm->cp_col[i]), "l"(prm->cp_desc[i] + start_shift) : "memory");
        }
#pragma unroll
        for (int i = 0; i < SIMTC_NMMA; ++i) {
            asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %4, 0;\n"
                         " tcgen05.mma.ws.cta_group::1.kind::f16 [%0], [%1], %2, %3, p;\n}\n"
                         :: "r"(taddr + prm->d_col), "r"(taddr + prm->a_col[i]), "l"(prm->b_desc[i] + start_shift),
                            "r"(prm->idesc), "r"(prm->enable_d[i]) : "memory");
        }
        asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];"
                     :: "r"(bar) : "memory");
    }
    // every thread waits for the commit (phase 0)
    asm volatile("{\n .reg .pred done;\n WAIT:\n"
                 " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 " @!done bra WAIT;\n}\n" :: "r"(bar), "r"(0) : "memory");
    asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");

    // warp w reads lanes 32w..32w+31 (its quadrant), columns 256..463, 16 columns at a time
    const u32 row = 32 * warp + lane;
#pragma unroll
    for (int c = 0; c < SIMTC_NCOLS; c += 16) {
        u32 r[16];
        asm volatile("tcgen05.ld.sync.aligned.32x32b.x16.b32 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, [%16];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]),
                       "=r"(r[7]), "=r"(r[8]), "=r"(r[9]), "=r"(r[10]), "=r"(r[11]), "=r"(r[12]), "=r"(r[13]),
                       "=r"(r[14]), "=r"(r[15])
                     : "r"(taddr + ((32 * warp) << 16) + SIMTC_COL0 + c));
        asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
#pragma unroll
        for (int j = 0; j < 16; ++j) out[row * SIMTC_NCOLS + c + j] = r[j];
    }
    asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
    __syncthreads();
    if (warp == 0) {
        asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
        asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" :: "r"(taddr), "r"(512));
    }
}
