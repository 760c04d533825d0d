"""Published measurements the sm100 timing model is calibrated on (data, with their sources).

One copy of these numbers serves the tests, the documentation and ``simtc timing``. They are
measurements by third parties, transcribed from the project's timing fact sheet (``timing.md``);
a test compares :data:`B200_ROWS` with the CSV the fact sheet ships (when it is present beside
the repository). The H200 measurements simtc took itself live in ``tests/data/h200_wgmma_timing.json``.

>>> len(B200_ROWS), B200_ROWS[0]
(12, B200Row(operands='SS', m=64, n=64, latency_cycles=152, ii_cycles=32.02))
>>> WS_TABLE["pingpong", 64]
(16.5, 32.5, 64.5)
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["B200_ROWS", "B200_SOURCE", "WS_N", "WS_SOURCE", "WS_TABLE", "B200Row"]


class B200Row(NamedTuple):
    operands: str
    m: int
    n: int
    latency_cycles: int
    ii_cycles: float


B200_SOURCE = ("SemiAnalysisAI/microbench-blackwell umma_latency/fit_results.csv (commit 9a068d8; B200, sm_100a, "
               "tcgen05.mma BF16 cta_group::1, K = 16; latency = one MMA + commit + mbarrier wait, median of 100; "
               "II = fitted asymptotic initiation interval); timing.md §1")
B200_ROWS: tuple[B200Row, ...] = tuple(B200Row(*r) for r in (
    ("SS", 64, 64, 152, 32.02), ("SS", 64, 128, 184, 64.02), ("SS", 64, 256, 248, 128.0),
    ("SS", 128, 64, 168, 48.02), ("SS", 128, 128, 200, 64.02), ("SS", 128, 256, 264, 128.0),
    ("TS", 64, 64, 136, 32.02), ("TS", 64, 128, 168, 64.03), ("TS", 64, 256, 232, 128.03),
    ("TS", 128, 64, 136, 32.02), ("TS", 128, 128, 168, 64.02), ("TS", 128, 256, 232, 128.03),
))
"""Measured B200 latency and II (cycles)."""

WS_SOURCE = ("KevinZeng08/microbench-blackwell umma_throughput/tcgen05_mma_ws.md (commit 6d40dd8; GB200, 1-SM dense "
             "tcgen05.mma.ws BF16, A from TMEM, fitted II at depth 256); timing.md §2")
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
