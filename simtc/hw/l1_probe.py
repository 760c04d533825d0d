"""What one warp's scattered 128-bit global loads cost the SM's L1, measured on a GPU (sm_90a).

The engine's global loads cross the L1 data pipe, the bandwidth shared memory also uses. How many of its cycles a
warp-wide ``LDG.128`` takes depends on where its 32 lanes point: FlashMLA's SM90 producer has 8 tokens per
instruction, 4 lanes x 16 contiguous bytes each, at row pitches (656 / 576 B) that are not multiples of a
128-byte line. This probe measures that cost directly, for load shapes spanning the kernel's:

* ``R`` rows per warp-instruction (1 to 32): lanes in groups of ``32 / R``, each group ``512 / R`` contiguous
  bytes of its own row; rows chosen at random (a per-group LCG) from a pool that fits in L2 (8 MiB), so the
  result is the SM side of the load path, not HBM;
* the rows' start modulo 128 bytes (``align``), with a 1,024-byte pitch, or the kernels' own pitches (656 / 576);
* the cache hints of the kernel's loads (``ld.global.nc.L1::evict_last.L2::256B``) or none (``ld.global``).

One CTA of 32 warps (the SM's other resources idle) issues ``iters x 8`` independent loads per warp (8 in flight
per warp, folded into a register that is stored before the closing barrier), timed with ``clock64`` between two
``__syncthreads``: cycles per warp-instruction = span / (32 x iters x 8), the SM's saturated rate for that shape.
Run under Nsight Compute (``--ncu``) the same launches give the L1's own counts (data-pipe wavefronts, tag
requests, sectors) per instruction.

``python -m simtc.hw.l1_probe --out FILE.json`` runs the sweep (:data:`CONFIGS`); the recording is
``tests/data/h200_l1_probe.json`` (``tests/data/README_h200.md``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from attrs import frozen

from simtc.errors import SimtcError

__all__ = ["CONFIGS", "SOURCE", "ProbeConfig", "kernel_name", "run"]

SOURCE = r"""
typedef unsigned long long u64;
typedef unsigned int u32;

#define SIMTC_PROBE(NAME, LD)                                                                                 \
extern "C" __global__ void __launch_bounds__(1024, 1)                                                         \
NAME(const unsigned char* __restrict__ pool, u32 rows_mask, u32 pitch, u32 lpr_log2, u32 align, u32 iters,      \
     u32 seed, u64* __restrict__ span, u32* __restrict__ sink)                                                \
{                                                                                                             \
    __shared__ u32 fold[1024];                                                                                \
    extern __shared__ u32 simtc_unused[];                                                                     \
    const u32 lane = threadIdx.x & 31u;                                                                       \
    const u32 grp = lane >> lpr_log2;                                                                         \
    const u32 off = align + (lane & ((1u << lpr_log2) - 1u)) * 16u;                                           \
    u32 h = seed ^ ((blockIdx.x * 1024u + (threadIdx.x >> 5) * 32u + grp) * 0x9E3779B9u);                    \
    u32 acc = 0;                                                                                              \
    __syncthreads();                                                                                          \
    u64 t0;                                                                                                   \
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t0) :: "memory");                                           \
    for (u32 it = 0; it < iters; ++it) {                                                                      \
        _Pragma("unroll")                                                                                     \
        for (int j = 0; j < 8; ++j) {                                                                         \
            h = h * 1664525u + 1013904223u;                                                                   \
            const unsigned char* p = pool + (u64)((h >> 7) & rows_mask) * pitch + off;                        \
            u32 w0, w1, w2, w3;                                                                               \
            asm volatile(LD " {%0, %1, %2, %3}, [%4];" : "=r"(w0), "=r"(w1), "=r"(w2), "=r"(w3) : "l"(p));    \
            acc ^= w0 ^ w1 ^ w2 ^ w3;                                                                         \
        }                                                                                                     \
    }                                                                                                         \
    fold[threadIdx.x] = acc;                                                                                  \
    __syncthreads();                                                                                          \
    if (threadIdx.x == 0) {                                                                                   \
        u64 t1;                                                                                               \
        asm volatile("mov.u64 %0, %%clock64;" : "=l"(t1) :: "memory");                                       \
        span[blockIdx.x] = t1 - t0;                                                                           \
    }                                                                                                         \
    sink[blockIdx.x * blockDim.x + threadIdx.x] = fold[threadIdx.x ^ 1u];                                     \
}

SIMTC_PROBE(simtc_l1_probe_nc, "ld.global.nc.L1::evict_last.L2::256B.v4.s32")
SIMTC_PROBE(simtc_l1_probe_plain, "ld.global.v4.s32")

// FlashMLA's SM90 producer pattern, one warpgroup (one CTA): per block of 64 random tokens each thread loads 7
// 64-byte chunks of 2 token rows (lane l: row 8 warp + l % 8 and that + 32, 16-byte slice l / 8 of each chunk:
// splitkv_mla.cuh L459-460, L583-584 at 9241ae3), so a quarter-warp reads one slice of 8 rows. Rows start at
// multiples of `pitch` (MODEL1 pages with `m1`: page t / 64 at 37,440 t / 64, record t % 64 at 576 (t % 64)).
// lat[b] = cycles from the block's first load to its closing barrier (thread 0, clock64).
extern "C" __global__ void __launch_bounds__(128, 1)
simtc_l1_probe_rows(const unsigned char* __restrict__ pool, u32 n_tok, u32 pitch, u32 m1, u32 blocks, u32 seed,
                    u64* __restrict__ lat, u32* __restrict__ sink)
{
    __shared__ u32 fold[4];
    const u32 t = threadIdx.x, lane = t & 31u;
    u32 acc = 0;
    for (u32 blk = 0; blk < blocks + 2; ++blk) {
        u64 rec[2];
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            u32 h = seed ^ ((blk * 64u + (t >> 5) * 8u + (lane & 7u) + 32u * k) * 0x9E3779B9u);
            h ^= h >> 16; h *= 0x7feb352du; h ^= h >> 15; h *= 0x846ca68bu; h ^= h >> 16;
            const u32 tok = __umulhi(h, n_tok);
            rec[k] = m1 ? (u64)(tok >> 6) * 37440u + (u64)(tok & 63u) * 576u : (u64)tok * pitch;
            asm volatile("" : "+l"(rec[k]));
        }
        asm volatile("bar.sync 1, 128;" ::: "memory");
        u64 t0;
        asm volatile("mov.u64 %0, %%clock64;" : "=l"(t0) :: "memory");
        const u32 part = (lane >> 3) * 16u + (u32)(t0 >> 63);
        const unsigned char* p0 = pool + rec[0] + part;
        const unsigned char* p1 = pool + rec[1] + part;
#pragma unroll
        for (int i = 0; i < 7; ++i) {
            u32 w0, w1, w2, w3;
            asm volatile("ld.global.nc.L1::evict_last.L2::256B.v4.s32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(w0), "=r"(w1), "=r"(w2), "=r"(w3) : "l"(p0 + 64 * i));
            acc ^= w0 ^ w1 ^ w2 ^ w3;
            asm volatile("ld.global.nc.L1::evict_last.L2::256B.v4.s32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(w0), "=r"(w1), "=r"(w2), "=r"(w3) : "l"(p1 + 64 * i));
            acc ^= w0 ^ w1 ^ w2 ^ w3;
        }
        asm volatile("st.volatile.shared.u32 [%0], %1;" :: "r"((u32)__cvta_generic_to_shared(fold)), "r"(acc)
                     : "memory");
        asm volatile("bar.sync 1, 128;" ::: "memory");
        if (t == 0 && blk >= 2) {
            u64 t1;
            asm volatile("mov.u64 %0, %%clock64;" : "=l"(t1) :: "memory");
            lat[blk - 2] = t1 - t0;
        }
    }
    sink[t] = acc;
}

// mbarrier.arrive issued back to back by one thread of each of the CTA's warps (a barrier per warp, count
// 2^20 - 1 so no phase completes): cycles per arrive of one warp, span / n.
extern "C" __global__ void __launch_bounds__(1024, 1)
simtc_l1_probe_mbar_arrive(u32 n, u64* __restrict__ span)
{
    __shared__ __align__(8) u64 bars[32];
    const u32 warp = threadIdx.x >> 5;
    const u32 bar = (u32)__cvta_generic_to_shared(&bars[warp]);
    if ((threadIdx.x & 31u) == 0)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(1048575u) : "memory");
    __syncthreads();
    if ((threadIdx.x & 31u) == 0) {
        u64 t0, t1, st;
        asm volatile("mov.u64 %0, %%clock64;" : "=l"(t0) :: "memory");
        for (u32 i = 0; i < n; ++i)
            asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];" : "=l"(st) : "r"(bar) : "memory");
        asm volatile("mov.u64 %0, %%clock64;" : "=l"(t1) :: "memory");
        span[blockIdx.x * 32u + warp] = t1 - t0 + (st & 0u);
    }
}

// Dependent chains on one thread: each step's mbarrier.arrive (OP 0) or ld.shared.b64 of the barrier word (OP 1)
// returns a 64-bit value the next step's address depends on (a select on an impossible value: always the same
// barrier). Step time = the operation's latency + the select's; the ld.shared chain gives the select's part
// (LDS's latency is measured elsewhere: shared_memory "LDS.32/latency" of tests/data/h200_calibration.json).
template <int OP>
__device__ __forceinline__ void simtc_mbar_chain(u32 n, u64 magic, u64* __restrict__ out)
{
    __shared__ __align__(8) u64 bars[2];
    const u32 b0 = (u32)__cvta_generic_to_shared(&bars[0]);
    const u32 b1 = (u32)__cvta_generic_to_shared(&bars[1]);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(b0), "r"(1048575u) : "memory");
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(b1), "r"(1048575u) : "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        u64 st = 0, t0, t1;
        u32 bar = b0;
        asm volatile("mov.u64 %0, %%clock64;" : "=l"(t0) :: "memory");
        for (u32 i = 0; i < n; ++i) {
            if (OP == 0)
                asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];" : "=l"(st) : "r"(bar) : "memory");
            else
                asm volatile("ld.volatile.shared.b64 %0, [%1];" : "=l"(st) : "r"(bar) : "memory");
            bar = st == magic ? b1 : b0;
        }
        asm volatile("mov.u64 %0, %%clock64;" : "=l"(t1) :: "memory");
        out[0] = t1 - t0;
        out[1] = st;
    }
}
extern "C" __global__ void __launch_bounds__(32, 1)
simtc_l1_probe_mbar_chain(u32 n, u64 magic, u64* __restrict__ out) { simtc_mbar_chain<0>(n, magic, out); }
extern "C" __global__ void __launch_bounds__(32, 1)
simtc_l1_probe_lds_chain(u32 n, u64 magic, u64* __restrict__ out) { simtc_mbar_chain<1>(n, magic, out); }
"""

KERNELS = {"nc": "simtc_l1_probe_nc", "plain": "simtc_l1_probe_plain"}
WARPS = 32
ITERS = 64
POOL_BYTES = 8 << 20
HBM_POOL_BYTES = 4 << 30


@frozen
class ProbeConfig:
    """One load shape: ``rows`` per warp-instruction, row ``pitch`` (bytes), the rows' ``align`` (bytes added to
    each row's start), the loads' cache ``hint`` (``nc`` as FlashMLA's NoPE loads, or ``plain``)."""

    rows: int
    pitch: int = 1024
    align: int = 0
    hint: str = "nc"
    smem_kib: int = 0
    """Dynamic shared memory the CTA asks for (unused): 200 KiB leaves the L1 the kernel's ~28 KiB."""
    pool: str = "l2"
    """``l2``: rows from an 8 MiB pool (L2-resident after the warm-up launch); ``hbm``: from a 4 GiB one."""

    @property
    def name(self) -> str:
        tail = (f"-s{self.smem_kib}" if self.smem_kib else "") + ("-hbm" if self.pool == "hbm" else "")
        return f"r{self.rows}-p{self.pitch}-a{self.align}-{self.hint}{tail}"


def kernel_name(hint: str) -> str:
    return KERNELS[hint]


EXPECTED_SASS = {
    "simtc_l1_probe_nc": ("LDG.E.EL.LTC256B.128.CONSTANT", 8),
    "simtc_l1_probe_plain": ("LDG.E.128", 8),
    "simtc_l1_probe_mbar_arrive": ("SYNCS.ARRIVE.TRANS64.A1T0", 1),
    "simtc_l1_probe_rows": ("LDG.E.EL.LTC256B.128.CONSTANT", 14),
    "simtc_l1_probe_mbar_chain": ("SYNCS.ARRIVE.TRANS64.A1T0", 1),
    "simtc_l1_probe_lds_chain": ("LDS.64", 1),
}
"""Each kernel's SASS holds the instruction it measures: the loop's 8 loads (FlashMLA's NoPE load,
``splitkv_mla.cuh`` L583-584 at ``9241ae3``, or a plain one) and the mbarrier arrive (at least one; the loop
is unrolled)."""


@frozen
class RowsConfig:
    """FlashMLA's producer pattern (:data:`SOURCE`'s ``simtc_l1_probe_rows``) with rows ``pitch`` bytes apart
    (``m1``: MODEL1's pages instead), and ``smem_kib`` of shared memory held."""

    pitch: int
    m1: bool = False
    smem_kib: int = 0

    @property
    def name(self) -> str:
        return f"rows-{'m1' if self.m1 else f'p{self.pitch}'}" + (f"-s{self.smem_kib}" if self.smem_kib else "")


ROWS_CONFIGS: tuple[RowsConfig, ...] = (
    *(RowsConfig(p) for p in (512, 576, 592, 608, 624, 640, 656, 672, 704, 768, 1024)),
    RowsConfig(576, True), RowsConfig(656, False, 200), RowsConfig(576, True, 200), RowsConfig(512, False, 200),
)
"""Row pitches whose starts fall on every 16 / 32 / 64 / 128 bytes of a line (V32's 656 and MODEL1's 576 among
them), MODEL1's page layout, and three of them with the kernel's small L1."""
ROWS_BLOCKS = 256


def ncu_rows_wavefronts(path) -> dict[str, float]:
    """L1 data-pipe wavefronts per global-load instruction of each :data:`ROWS_CONFIGS` entry, from the session's
    ``ncu --csv --page raw`` profile of ``python -m simtc.hw.l1_probe --repeats 1`` (two launches a configuration,
    the second one read; ``tests/data/ncu/h200_l1_probe.csv``)."""
    import csv
    from pathlib import Path

    lines = [ln for ln in Path(path).read_text().splitlines() if ln.startswith('"')]
    table = list(csv.reader(lines))
    head, body = table[0], table[2:]
    kernel = head.index("Kernel Name")
    launches = [r for r in body if r[kernel].startswith("simtc_l1_probe_rows")]
    if len(launches) != 2 * len(ROWS_CONFIGS):
        raise SimtcError(f"{path}: {len(launches)} launches of simtc_l1_probe_rows, expected {2 * len(ROWS_CONFIGS)}",
                         rule="the L1 probe's Nsight Compute recording")

    def num(row, name):
        return float(row[head.index(name)].replace(",", ""))

    return {c.name: num(r, "l1tex__data_pipe_lsu_wavefronts.sum") / num(r, "smsp__inst_executed_op_global_ld.sum")
            for c, r in zip(ROWS_CONFIGS, launches[1::2], strict=True)}


def check_sass() -> dict[str, int]:
    """Compile :data:`SOURCE` for sm_90a (no GPU needed) and check :data:`EXPECTED_SASS`; returns the counts found.
    Raises :class:`~simtc.errors.SimtcError` naming the kernel whose SASS lacks its instruction."""
    from simtc.hw.calibrate import sass_by_kernel
    from simtc.hw.compile import compile_cuda, disassemble

    hists = sass_by_kernel(disassemble(compile_cuda(SOURCE, arch="sm_90a", name="l1_probe.cu")))
    found = {}
    for kernel, (mnemonic, least) in EXPECTED_SASS.items():
        found[kernel] = n = hists.get(kernel, {}).get(mnemonic, 0)
        if n < least:
            raise SimtcError(f"{kernel}: {n} x {mnemonic} in its SASS, expected at least {least}",
                             rule="a microbenchmark's SASS contains the instruction it measures")
    return found


CONFIGS: tuple[ProbeConfig, ...] = (
    *(ProbeConfig(r) for r in (1, 2, 4, 8, 16, 32)),
    *(ProbeConfig(r, 1024, a) for r in (1, 8, 32) for a in (16, 32, 64, 80, 112)),
    ProbeConfig(8, 656), ProbeConfig(8, 576), ProbeConfig(8, 576, 64),
    *(ProbeConfig(r, 1024, a, "plain") for r in (1, 8, 32) for a in (0, 16, 80)),
    ProbeConfig(8, 656, 0, "plain"),
    *(ProbeConfig(r, p, a, "nc", 200) for r, p, a in ((1, 1024, 0), (8, 1024, 0), (8, 1024, 80), (32, 1024, 0),
                                                       (8, 656, 0), (8, 576, 0), (4, 1024, 0))),
    *(ProbeConfig(r, p, a, "nc", k, "hbm") for k in (0, 200) for r, p, a in ((1, 1024, 0), (8, 1024, 0),
                                                                            (8, 1024, 80), (32, 1024, 0),
                                                                            (8, 656, 0), (8, 576, 0))),
)
"""The sweep: rows per instruction 1-32 aligned, misalignments of 16-112 B at 1, 8 and 32 rows, the kernels'
pitches, the plain (no-hint) load at a few of them, and some of them with the small L1 FlashMLA's kernel leaves
(200 KiB of shared memory asked for), and some of those gathering from HBM (a 4 GiB pool) instead of L2."""


def run(configs=CONFIGS, rows_configs=ROWS_CONFIGS, *, repeats: int = 5, seed: int = 12345) -> dict:
    """Time each config on the current GPU (cupy); returns the recording (see the module text)."""
    from simtc.hw.device import require

    dev = require("sm_90a")
    check_sass()
    import cupy as cp
    import numpy as np

    from simtc.hw.compile import load_kernel

    pools = {"l2": cp.zeros(POOL_BYTES + 4096, dtype=cp.uint8)}
    if any(c.pool == "hbm" for c in configs):
        pools["hbm"] = cp.zeros(HBM_POOL_BYTES + 4096, dtype=cp.uint8)
    span = cp.zeros(1, dtype=cp.uint64)
    sink = cp.zeros(WARPS * 32, dtype=cp.uint32)
    rows_out = []
    for c in configs:
        fn = load_kernel(SOURCE, kernel_name(c.hint), arch="sm_90a")
        pool = pools[c.pool]
        n_rows = (POOL_BYTES if c.pool == "l2" else HBM_POOL_BYTES) // c.pitch
        mask = (1 << (n_rows.bit_length() - 1)) - 1
        lpr_log2 = (32 // c.rows).bit_length() - 1
        args = (pool, np.uint32(mask), np.uint32(c.pitch), np.uint32(lpr_log2), np.uint32(c.align),
                np.uint32(ITERS), np.uint32(seed), span, sink)
        smem = c.smem_kib * 1024
        if smem > 48 * 1024:
            fn.max_dynamic_shared_size_bytes = smem
        fn((1,), (WARPS * 32,), args, shared_mem=smem)  # warm-up: the pool into L2
        cycles = []
        for _ in range(repeats):
            fn((1,), (WARPS * 32,), args, shared_mem=smem)
            cp.cuda.Device().synchronize()
            cycles.append(int(span.get()[0]))
        per = float(np.median(cycles)) / (WARPS * ITERS * 8)
        rows_out.append({"name": c.name, "rows": c.rows, "pitch": c.pitch, "align": c.align, "hint": c.hint,
                         "smem_kib": c.smem_kib, "pool": c.pool,
                         "cycles_per_instruction": round(per, 3), "spans": cycles,
                         "bytes_per_cycle": round(512 / per, 3)})
    rows_rec = []
    fn = load_kernel(SOURCE, "simtc_l1_probe_rows", arch="sm_90a")
    lat = cp.zeros(ROWS_BLOCKS, dtype=cp.uint64)
    for c in rows_configs:
        n_tok = (POOL_BYTES // 37440) * 64 if c.m1 else POOL_BYTES // c.pitch
        smem = c.smem_kib * 1024
        if smem > 48 * 1024:
            fn.max_dynamic_shared_size_bytes = smem
        meds = []
        for r in range(repeats + 1):  # the first launch warms L2 and is dropped
            fn((1,), (128,), (pools["l2"], np.uint32(n_tok), np.uint32(c.pitch), np.uint32(c.m1),
                              np.uint32(ROWS_BLOCKS), np.uint32(seed + r), lat, sink), shared_mem=smem)
            cp.cuda.Device().synchronize()
            if r:
                meds.append(float(np.median(lat.get())))
        rows_rec.append({"name": c.name, "pitch": c.pitch, "m1": c.m1, "smem_kib": c.smem_kib,
                         "cycles_per_block": float(np.median(meds)), "medians": meds})
    fn = load_kernel(SOURCE, "simtc_l1_probe_mbar_arrive", arch="sm_90a")
    mspan = cp.zeros(WARPS, dtype=cp.uint64)
    mbar = []
    for warps in (1, 4, 32):
        n = 4096
        fn((1,), (warps * 32,), (np.uint32(n), mspan))
        vals = []
        for _ in range(repeats):
            fn((1,), (warps * 32,), (np.uint32(n), mspan))
            cp.cuda.Device().synchronize()
            vals.append(float(np.median(mspan.get()[:warps])) / n)
        mbar.append({"warps": warps, "arrives": n, "cycles_per_arrive": round(float(np.median(vals)), 3)})
    chains = {}
    out = cp.zeros(2, dtype=cp.uint64)
    for kind, name in (("mbarrier.arrive", "simtc_l1_probe_mbar_chain"), ("ld.shared.b64", "simtc_l1_probe_lds_chain")):
        fn = load_kernel(SOURCE, name, arch="sm_90a")
        steps = {}
        for n in (256, 512, 1024, 2048):
            vals = []
            for _ in range(repeats):
                fn((1,), (32,), (np.uint32(n), np.uint64(0xDEADBEEFCAFEBABE), out))
                cp.cuda.Device().synchronize()
                vals.append(int(out.get()[0]))
            steps[n] = float(np.median(vals))
        ns = np.array(sorted(steps), float)
        slope, intercept = np.polyfit(ns, [steps[int(n)] for n in ns], 1)
        chains[kind] = {"cycles": {str(k): v for k, v in steps.items()}, "cycles_per_step": round(float(slope), 3),
                        "intercept": round(float(intercept), 1)}
    return {"format": "simtc-l1-probe", "version": 1, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "device": {"name": dev.name, "arch": dev.arch, "sms": dev.sms},
            "command": "python -m simtc.hw.l1_probe --out FILE.json", "warps": WARPS, "iters": ITERS,
            "pool_bytes": POOL_BYTES, "configs": rows_out, "rows_blocks": ROWS_BLOCKS, "rows": rows_rec,
            "mbarrier_arrive": mbar, "chains": chains}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m simtc.hw.l1_probe", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="", help="comma-separated config names (default: all)")
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args(argv)
    wanted = [n for n in a.only.split(",") if n]
    try:
        unknown = sorted(set(wanted) - {c.name for c in (*CONFIGS, *ROWS_CONFIGS)})
        if unknown:
            raise SimtcError(f"--only {', '.join(unknown)}: no such configuration (known: "
                             f"{', '.join(c.name for c in CONFIGS[:3])}, ...)", rule="the probe's configurations")
        if a.repeats < 1:
            raise SimtcError(f"--repeats {a.repeats}: at least 1", rule="the probe's repeats")
        rec = run([c for c in CONFIGS if not wanted or c.name in wanted],
                  [c for c in ROWS_CONFIGS if not wanted or c.name in wanted], repeats=a.repeats)
    except SimtcError as e:
        print(f"python -m simtc.hw.l1_probe: error: {e}", file=sys.stderr)
        return 2

    with open(a.out, "w") as f:
        json.dump(rec, f, indent=1)
    for r in rec["configs"]:
        print(f"{r['name']:24s} {r['cycles_per_instruction']:8.2f} cycles/instr {r['bytes_per_cycle']:7.2f} B/cycle")
    for r in rec["rows"]:
        print(f"{r['name']:24s} {r['cycles_per_block']:8.1f} cycles per block of 64 rows")
    for m in rec["mbarrier_arrive"]:
        print(f"mbarrier.arrive x{m['arrives']} on {m['warps']} warps: {m['cycles_per_arrive']:.2f} cycles each")
    for kind, c in rec["chains"].items():
        print(f"dependent {kind} chain: {c['cycles_per_step']:.2f} cycles per step")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
