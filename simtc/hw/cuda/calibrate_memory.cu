// simtc calibration: global-memory gathers of FlashMLA KV-cache rows (filled by nothing; prepended with
// calibrate_common.cu by simtc.hw.calibrate).
//
// A "block" is 64 token rows chosen at random (simtc_hash of a fixed seed, the CTA, the warpgroup, the block
// and the row) from a pool of n_tokens rows laid out as FlashMLA's KV cache:
//   FMT 0 (V32, 656 B a row):    row t is 656 contiguous bytes at pool + 656 t;
//   FMT 1 (MODEL1, 584 B a row): page t/64 starts at pool + 37440 (t/64); its row t%64 is a 576-byte record at
//                                page + 576 (t%64) and 8 scale bytes at page + 36864 + 8 (t%64).
// One CTA per SM holds F warpgroups (blockDim = 128 F); each warpgroup fetches its own stream of blocks, one at
// a time, so F blocks are in flight per SM. Per block, thread 0 of the warpgroup reads clock64 after a
// warpgroup barrier (t0), the warpgroup issues the copies, waits for them, meets at a second barrier and
// thread 0 reads clock64 again (t1): t1 - t0 is the block's latency, issue -> all bytes arrived. The row
// addresses are computed before t0 and made to depend on t0 (plus zero), so no load can start early.
//
// METHOD 0 (LDG): FlashMLA's SM90 producer pattern (sparse_fp8/splitkv_mla.cuh): 4 lanes per row, each lane
//   ld.global.nc.v4 of its 16 B of every 64 B of the row (NoPE with L1::evict_last.L2::256B, RoPE and V32 scales
//   with L2::128B; MODEL1 scales one 8-byte ld.global.nc per lane), 2 rows per thread; every loaded word is
//   folded into an accumulator that is stored to shared memory before the closing barrier (so the loads are
//   live and the barrier is passed only once the data has arrived).
// METHOD 1 (LDGSTS): every 16-byte chunk of the row copied once with cp.async.cg 16 (MODEL1 scales: one
//   cp.async.ca 8), commit_group, wait_group 0.
// METHOD 2 (bulk): thread r < 64 issues the row's cp.async.bulk (V32: 656 B; MODEL1: the 576-byte record and the
//   16-byte aligned chunk holding its 8 scale bytes) after mbarrier.arrive.expect_tx of its bytes on the
//   warpgroup's mbarrier (count 64); the whole warpgroup waits on the mbarrier's phase.
// Warpgroups write their shared-memory buffers modulo `nbuf` (two warpgroups may share a buffer when F buffers
// do not fit: the bytes still move; their content is not used).
//
// Outputs: lat[(cta F + g) blocks + b] (measured blocks only), span[(cta F + g) 2 + {0,1}] = t0 of the first
// measured block and t1 of the last, clk[0..3] = globaltimer and clock64 of CTA 0 at start and end.

#define SIMTC_V32_ROW 656u
#define SIMTC_M1_REC 576u
#define SIMTC_M1_PAGE 37440u
#define SIMTC_M1_SCALES 36864u

__device__ __forceinline__ u32 simtc_token(u32 seed, u32 key, u32 n_tokens) {
    return __umulhi(simtc_hash(seed ^ simtc_hash(key)), n_tokens);
}

// Byte offsets of row `tok`'s record and scales in the pool.
template <int FMT>
__device__ __forceinline__ void simtc_row(u32 tok, u64& rec, u64& scale) {
    if (FMT == 0) {
        rec = (u64)tok * SIMTC_V32_ROW;
        scale = rec + 512u;
    } else {
        const u64 page = (u64)(tok >> 6) * SIMTC_M1_PAGE;
        rec = page + (u64)(tok & 63u) * SIMTC_M1_REC;
        scale = page + SIMTC_M1_SCALES + (u64)(tok & 63u) * 8u;
    }
}

#define SIMTC_LDG_NOPE(P, ACC) { u32 w0, w1, w2, w3;                                                        \
    asm volatile("ld.global.nc.L1::evict_last.L2::256B.v4.s32 {%0, %1, %2, %3}, [%4];"                      \
                 : "=r"(w0), "=r"(w1), "=r"(w2), "=r"(w3) : "l"(P));                                         \
    ACC ^= w0 ^ w1 ^ w2 ^ w3; }
#define SIMTC_LDG_128(P, ACC) { u32 w0, w1, w2, w3;                                                         \
    asm volatile("ld.global.nc.L1::evict_last.L2::128B.v4.s32 {%0, %1, %2, %3}, [%4];"                      \
                 : "=r"(w0), "=r"(w1), "=r"(w2), "=r"(w3) : "l"(P));                                         \
    ACC ^= w0 ^ w1 ^ w2 ^ w3; }
#define SIMTC_LDG_64(P, ACC) { u32 w0, w1;                                                                  \
    asm volatile("ld.global.nc.v2.s32 {%0, %1}, [%2];" : "=r"(w0), "=r"(w1) : "l"(P));                      \
    ACC ^= w0 ^ w1; }

template <int METHOD, int FMT>
__device__ __forceinline__ void simtc_gather(const unsigned char* __restrict__ pool, u32 n_tokens, u32 blocks,
                                             u32 warm, u32 seed, u32 nbuf, u64 timeout_ns,
                                             u64* __restrict__ lat, u64* __restrict__ span, u64* __restrict__ clk,
                                             u32* __restrict__ flag, u32* __restrict__ sink)
{
    extern __shared__ __align__(128) unsigned char simtc_dyn[];
    const u32 F = blockDim.x >> 7;
    const u32 g = threadIdx.x >> 7;           // warpgroup
    const u32 t = threadIdx.x & 127u;         // thread in the warpgroup
    const u32 lane = threadIdx.x & 31u;
    const u32 bar_id = 1u + g;                // named barrier of the warpgroup (ids 1..8)
    const u32 row_bytes = FMT == 0 ? 64u * SIMTC_V32_ROW : 64u * (SIMTC_M1_REC + 16u);
    const u32 smem0 = simtc_smem(simtc_dyn);
    const u32 mbar = smem0 + 8u * g;          // F mbarriers at the front, then the buffers
    const u32 buf = smem0 + 128u + (g % (nbuf ? nbuf : 1u)) * row_bytes;
    if (METHOD == 2 && t == 0) {
        simtc_mbar_init(mbar, 64u);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the initialised mbarrier, seen by TMA
    }
    __syncthreads();
    if (blockIdx.x == 0 && threadIdx.x == 0) { clk[0] = simtc_globaltimer(); clk[1] = simtc_clock(); }
    const u64 deadline = simtc_globaltimer() + timeout_ns;
    const u32 total = warm + blocks;
    u32 acc = 0;
    u64 first = 0;
    for (u32 blk = 0; blk < total; ++blk) {
        const u32 key = ((blockIdx.x * F + g) * total + blk) * 64u;
        // ---- addresses (before t0) ----
        u64 rec[2], scl[2];
        u32 slot[2];
        if (METHOD == 2) {
            slot[0] = t & 63u;
            slot[1] = slot[0];
        } else {
            slot[0] = (t >> 5) * 8u + (lane & 7u);
            slot[1] = slot[0] + 32u;
        }
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            simtc_row<FMT>(simtc_token(seed, key + slot[k], n_tokens), rec[k], scl[k]);
            asm volatile("" : "+l"(rec[k]), "+l"(scl[k]));  // computed here, before t0 (not sunk into the copies)
        }
        asm volatile("bar.sync %0, 128;" :: "r"(bar_id) : "memory");
        const u64 t0 = simtc_clock();
        const u64 zero = t0 >> 63;            // 0, but only known once t0 has been read
        const unsigned char* p0 = pool + rec[0] + zero;
        const unsigned char* p1 = pool + rec[1] + zero;
        const unsigned char* s0 = pool + scl[0] + zero;
        const unsigned char* s1 = pool + scl[1] + zero;
        if (METHOD == 0) {
            const u32 part = (lane >> 3) * 16u;
            if (FMT == 0) {
#pragma unroll
                for (int i = 0; i < 8; ++i) { SIMTC_LDG_NOPE(p0 + part + 64 * i, acc); SIMTC_LDG_NOPE(p1 + part + 64 * i, acc); }
                SIMTC_LDG_128(s0, acc); SIMTC_LDG_128(s1, acc);
#pragma unroll
                for (int i = 0; i < 2; ++i) { SIMTC_LDG_128(p0 + 528 + part + 64 * i, acc); SIMTC_LDG_128(p1 + 528 + part + 64 * i, acc); }
            } else {
#pragma unroll
                for (int i = 0; i < 7; ++i) { SIMTC_LDG_NOPE(p0 + part + 64 * i, acc); SIMTC_LDG_NOPE(p1 + part + 64 * i, acc); }
                SIMTC_LDG_64(s0, acc); SIMTC_LDG_64(s1, acc);
#pragma unroll
                for (int i = 0; i < 2; ++i) { SIMTC_LDG_128(p0 + 448 + part + 64 * i, acc); SIMTC_LDG_128(p1 + 448 + part + 64 * i, acc); }
            }
            // a store of the folded words, before the barrier: the thread cannot pass it until every load arrived
            asm volatile("st.volatile.shared.u32 [%0], %1;" :: "r"(smem0 + 64u + 4u * g), "r"(acc) : "memory");
        } else if (METHOD == 1) {
            const u32 part = lane >> 3;
            const u32 pitch = FMT == 0 ? SIMTC_V32_ROW : SIMTC_M1_REC;
            const u32 nchunks = pitch / 16u;
#pragma unroll
            for (int k = 0; k < 2; ++k) {
                const unsigned char* src = k == 0 ? p0 : p1;
                const u32 dst = buf + slot[k] * pitch;
#pragma unroll
                for (u32 m = 0; m < 11u; ++m) {
                    const u32 c = part + 4u * m;
                    if (c < nchunks)
                        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst + 16u * c), "l"(src + 16u * c) : "memory");
                }
                if (FMT == 1 && part == 0)
                    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;"
                                 :: "r"(buf + 64u * SIMTC_M1_REC + 8u * slot[k]), "l"(k == 0 ? s0 : s1) : "memory");
            }
            asm volatile("cp.async.commit_group;" ::: "memory");
            asm volatile("cp.async.wait_group 0;" ::: "memory");
        } else {
            if (t < 64u) {
                if (FMT == 0) {
                    simtc_mbar_arrive_expect_tx(mbar, SIMTC_V32_ROW);
                    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                                 :: "r"(buf + t * SIMTC_V32_ROW), "l"(p0), "r"(SIMTC_V32_ROW), "r"(mbar) : "memory");
                } else {
                    simtc_mbar_arrive_expect_tx(mbar, SIMTC_M1_REC + 16u);
                    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                                 :: "r"(buf + t * SIMTC_M1_REC), "l"(p0), "r"(SIMTC_M1_REC), "r"(mbar) : "memory");
                    const unsigned char* s16 = (const unsigned char*)((u64)s0 & ~(u64)15u);
                    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                                 :: "r"(buf + 64u * SIMTC_M1_REC + 16u * t), "l"(s16), "r"(16u), "r"(mbar) : "memory");
                }
            }
            simtc_mbar_wait(mbar, blk & 1u, deadline, flag);
        }
        asm volatile("bar.sync %0, 128;" :: "r"(bar_id) : "memory");
        if (t == 0) {
            const u64 t1 = simtc_clock();
            if (blk >= warm) lat[(blockIdx.x * F + g) * blocks + (blk - warm)] = t1 - t0;
            if (blk == warm) first = t0;
            if (blk + 1 == total) {
                span[2 * (blockIdx.x * F + g)] = first;
                span[2 * (blockIdx.x * F + g) + 1] = t1;
            }
        }
    }
    __syncthreads();
    if (blockIdx.x == 0 && threadIdx.x == 0) { clk[2] = simtc_globaltimer(); clk[3] = simtc_clock(); }
    sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

#define SIMTC_GATHER(NAME, METHOD, FMT, MAXTHREADS)                                                          \
extern "C" __global__ void __launch_bounds__(MAXTHREADS, 1)                                                  \
NAME(const unsigned char* __restrict__ pool, u32 n_tokens, u32 blocks, u32 warm, u32 seed, u32 nbuf,           \
     u64 timeout_ns, u64* __restrict__ lat, u64* __restrict__ span, u64* __restrict__ clk,                    \
     u32* __restrict__ flag, u32* __restrict__ sink)                                                          \
{ simtc_gather<METHOD, FMT>(pool, n_tokens, blocks, warm, seed, nbuf, timeout_ns, lat, span, clk, flag, sink); }

// LDG keeps 22 (V32) or 18 (MODEL1) 16-byte loads of a thread in registers at once: at most 4 warpgroups.
SIMTC_GATHER(simtc_cal_gather_ldg_v32, 0, 0, 512)
SIMTC_GATHER(simtc_cal_gather_ldg_model1, 0, 1, 512)
SIMTC_GATHER(simtc_cal_gather_ldgsts_v32, 1, 0, 1024)
SIMTC_GATHER(simtc_cal_gather_ldgsts_model1, 1, 1, 1024)
SIMTC_GATHER(simtc_cal_gather_bulk_v32, 2, 0, 1024)
SIMTC_GATHER(simtc_cal_gather_bulk_model1, 2, 1, 1024)

// A small pool into L2 before it is gathered (simtc_touch).
extern "C" __global__ void __launch_bounds__(256)
simtc_cal_touch(const uint4* __restrict__ p, u64 n, u32* __restrict__ sink) { simtc_touch(p, n, sink); }
