"""Published measurements the sm100 timing model is calibrated on (data, with their sources).

One copy of these numbers serves the tests, the documentation and ``simtc timing``. They are
measurements by third parties, transcribed from their published CSV and Markdown files (named in
:data:`B200_SOURCE` and :data:`WS_SOURCE`); a test compares :data:`B200_ROWS` with a copy of that CSV where one
is given (``SIMTC_B200_CSV``; the repository keeps no copy of it). The H200 measurements simtc took itself live in
``tests/data/h200_wgmma_timing.json`` (wgmma) and ``tests/data/h200_calibration.json`` /
``tests/data/h200_memory_latency.json`` (``simtc calibrate``);
:data:`H200` transcribes what the sm90 timing table takes from the latter two, and a test checks it against
the recordings' summaries.

>>> len(B200_ROWS), B200_ROWS[0]
(12, B200Row(operands='SS', m=64, n=64, latency_cycles=152, ii_cycles=32.02))
>>> WS_TABLE["pingpong", 64]
(16.5, 32.5, 64.5)
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["B200_ROWS", "B200_SOURCE", "H200", "H200_SOURCE", "WS_N", "WS_SOURCE", "WS_TABLE", "B200Row"]


class B200Row(NamedTuple):
    operands: str
    m: int
    n: int
    latency_cycles: int
    ii_cycles: float


B200_SOURCE = ("SemiAnalysisAI/microbench-blackwell umma_latency/fit_results.csv (commit 9a068d8; B200, sm_100a, "
               "tcgen05.mma BF16 cta_group::1, K = 16; latency = one MMA + commit + mbarrier wait, median of 100; "
               "II = fitted asymptotic initiation interval)")
B200_ROWS: tuple[B200Row, ...] = tuple(B200Row(*r) for r in (
    ("SS", 64, 64, 152, 32.02), ("SS", 64, 128, 184, 64.02), ("SS", 64, 256, 248, 128.0),
    ("SS", 128, 64, 168, 48.02), ("SS", 128, 128, 200, 64.02), ("SS", 128, 256, 264, 128.0),
    ("TS", 64, 64, 136, 32.02), ("TS", 64, 128, 168, 64.03), ("TS", 64, 256, 232, 128.03),
    ("TS", 128, 64, 136, 32.02), ("TS", 128, 128, 168, 64.02), ("TS", 128, 256, 232, 128.03),
))
"""Measured B200 latency and II (cycles)."""

WS_SOURCE = ("KevinZeng08/microbench-blackwell umma_throughput/tcgen05_mma_ws.md (commit 6d40dd8; GB200, 1-SM dense "
             "tcgen05.mma.ws BF16, A from TMEM, fitted II at depth 256)")
WS_N = (64, 128, 256)
WS_TABLE: dict[tuple[str, int], tuple[float, float, float]] = {
    ("discard", 32): (28.45, 44.46, 76.46),
    ("discard", 64): (28.46, 44.46, 76.46),
    ("discard", 128): (42.46, 74.45, 138.46),
    ("pingpong", 64): (16.50, 32.50, 64.50),
    ("reuse", 32): (9.52, 16.56, 32.63),
    ("reuse", 64): (16.50, 32.50, 64.50),
    ("reuse", 128): (32.50, 64.49, 128.50),
}
"""Measured ``.ws`` II (cycles) by (collector usage, M) at N = 64, 128, 256."""


H200_SOURCE = ("tests/data/h200_calibration.json and tests/data/h200_memory_latency.json: simtc calibrate --arch sm90 "
               "on an NVIDIA H200 (132 SMs, SM clock "
               "1,980 MHz measured during the run, driver 580.159.04), 2026-12-01 (tests/data/README_h200.md)")
H200 = {
    "clock_mhz": 1980,
    # cycles per warp-instruction per sub-partition, 4 warps on every sub-partition (throughput)
    "issue_interval": {"FFMA": 0.99, "FMUL": 0.99, "FADD": 0.99, "HFMA2": 1.0, "HADD2": 1.0, "HMUL2.BF16_V2": 1.0,
                       "HADD2.F32": 2.0, "FMNMX": 2.01, "FSEL": 2.01, "LOP3": 2.0, "IADD3": 2.0, "IMAD": 2.0,
                       "F2FP.F16.E4M3.UNPACK_B": 2.01, "F2FP.BF16.F32.PACK_AB": 2.0, "MUFU.EX2": 8.0, "MUFU.RCP": 8.0,
                       "SHFL.BFLY": 4.0},
    # cycles per dependent instruction (one chain, one warp per sub-partition)
    "latency": {"FFMA": 4, "FMNMX": 4, "LOP3": 4, "IADD3": 4, "IMAD": 4, "F2FP.F16.E4M3.UNPACK_B": 4,
                "F2FP.BF16.F32.PACK_AB": 4, "HADD2.F32": 5, "HFMA2": 8, "MUFU.EX2": 17, "SHFL.BFLY": 24},
    # cycles per pair interleaved 1:1 (two instructions: at least 2 issue cycles)
    "pairs": {("F2FP.BF16.F32.PACK_AB", "FFMA"): 2.01, ("F2FP.BF16.F32.PACK_AB", "MUFU.EX2"): 8.0,
              ("F2FP.F16.E4M3.UNPACK_B", "F2FP.BF16.F32.PACK_AB"): 4.0, ("FMNMX", "FFMA"): 1.99,
              ("IMAD", "FFMA"): 2.12},
    "dequant_8_values": 26.0,  # FlashMLA's SM90 fp8x8 -> bf16x8 step, cycles per warp per sub-partition
    "smem_bytes_per_cycle": 128,  # LDS/STS conflict-free, 32/64/128 bits: 127.5-128.3
    "lds_latency": 23,  # pointer chase, cycles per dependent LDS.32
    "wgmma_lds": {"wgmma_cycles_alone": 128.0, "wgmma_cycles_together": 128.0, "lds_alone": 127.7,
                  "lds_together": 33.5},
    "bar_sync": {128: 20, 256: 28, 384: 36},  # cycles per bar.sync in a loop, by threads
    "fence_proxy_async": 9.0,  # cycles per fence, one warp
    "mbarrier_one_way": 74.75,  # half of the two-warp ping-pong round trip (149.5)
    "tma16_issue_to_wake": 296,  # a 16-byte cp.async.bulk (L2-resident), issue to the issuing warp's wake
    "bulk_issue_64_rows": 2113,  # 64 one-row cp.async.bulk issued by one thread, 1 block in flight, cycles
    "bulk_sm_bytes_per_cycle": 34.4,  # one SM, 4-8 blocks in flight, scattered 656-B rows from the 4 GiB pool
    "bulk_l2_bytes_per_cycle": 44.6,  # the same from the 8 MiB pool (L2-resident)
    "bulk_chip_gbps": 3823,  # 132 SMs, 4 blocks in flight each, 4 GiB pool
    "ldg_chip_gbps": 2956,  # the same rows gathered with 128-bit LDG
    # tests/data/h200_memory_latency.json: one thread's pointer chases, cycles per dependent access
    "ldg_chase": {"hbm": 691.2, "l2": 323.8, "l1": 32.0},
    "bulk_chase": {"hbm": {64: 771.3, 512: 832.0, 2048: 878.7}, "l2": {64: 338.7, 512: 347.3, 2048: 367.3}},
}
"""What the sm90 timing table takes from :data:`H200_SOURCE` (rounded as the table uses it)."""
