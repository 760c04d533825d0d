"""FlashMLA head64 whole-kernel replay speed (python benchmarks/bench_replay.py).

Target (issue 11): a 32-block V32 replay with full numerics costs at most 3x the bare
``tensor_core_mma`` arithmetic it contains, measured in one run: per block, each of the 26 MMAs is
two independent lane-half products (QK: 64x64x16 each, 18 instructions; PV: 64x128x16 each, 8),
i.e. 52 ``tensor_core_mma`` calls of one K=16 step. Also: timing-only events per second.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from simtc.kernels.flashmla.replay import replay
from simtc.numerics import tensor_core_mma
from simtc.numerics.cases import mma_operands

BLOCKS = 32


def bare_arithmetic(blocks: int) -> float:
    """Seconds for the MMA arithmetic alone: per block 36 calls 64x64x16 (QK halves) + 16 calls 64x128x16 (PV)."""
    a, b, c = mma_operands("normal", 64, 64, 16, dtype="bf16", seed=1)
    a2, b2, c2 = mma_operands("normal", 64, 128, 16, dtype="bf16", seed=2)
    t0 = time.perf_counter()
    for _ in range(blocks):
        for _ in range(36):
            tensor_core_mma(a, b, c)
        for _ in range(16):
            tensor_core_mma(a2, b2, c2)
    return time.perf_counter() - t0


def main() -> None:
    bare = bare_arithmetic(BLOCKS)
    t0 = time.perf_counter()
    r = replay("v32", BLOCKS, seed=1)
    full = time.perf_counter() - t0
    t0 = time.perf_counter()
    rt = replay("v32", BLOCKS, seed=1, timing_only=True)
    timing = time.perf_counter() - t0
    print(f"{'bare tensor_core_mma arithmetic, 32 blocks':48s} {bare:8.3f} s")
    print(f"{'replay V32 32 blocks, full numerics + checks':48s} {full:8.3f} s  ({full / bare:.2f} x; target <= 3)")
    print(f"{'replay V32 32 blocks, timing only':48s} {timing:8.3f} s  ({rt.events / timing:,.0f} events/s)")
    print(f"checks: {'OK' if r.ok else 'FAILED'}; {r.cycles_per_block:.0f} cycles per block; "
          f"{r.tflops_b200:.0f} TFLOP/s predicted (B200, 148 SMs, 1.965 GHz; no HBM/L2 model)")
    np.testing.assert_equal(r.ok, True)


if __name__ == "__main__":
    main()
