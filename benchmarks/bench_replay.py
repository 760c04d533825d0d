"""FlashMLA head64 whole-kernel replay speed (python benchmarks/bench_replay.py).

Target (issue 11): a 32-block V32 replay with full numerics costs at most 3x the bare
``tensor_core_mma`` arithmetic it contains, measured in one run: per block, each of the 26 MMAs is
two independent lane-half products (QK: 64x64x16 each, 18 instructions; PV: 64x128x16 each, 8),
i.e. 52 ``tensor_core_mma`` calls of one K=16 step. Also: timing-only events per second, for the
whole replay (seeded inputs and the reference P that decides the rescale blocks included) and for
the engine alone (compile + run of the same Program).

The machine may be shared: every figure is the best of ``REPEAT`` runs, interleaved in one process.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from simtc.engine import Engine
from simtc.kernels.flashmla.head64 import head64_program
from simtc.kernels.flashmla.models import model
from simtc.kernels.flashmla.replay import make_inputs, reference_p, replay, rescale_blocks
from simtc.numerics import tensor_core_mma
from simtc.numerics.cases import mma_operands

BLOCKS = 32
REPEAT = 3


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


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main() -> None:
    m = model("v32")
    inp = make_inputs(m, BLOCKS, 1)
    program = head64_program(m, BLOCKS, rescale_blocks(inp, reference_p(inp)))
    bare = full = timing = engine = float("inf")
    for _ in range(REPEAT):
        bare = min(bare, bare_arithmetic(BLOCKS))
        t, r = _timed(lambda: replay("v32", BLOCKS, seed=1))
        full = min(full, t)
        t, rt = _timed(lambda: replay("v32", BLOCKS, seed=1, timing_only=True))
        timing = min(timing, t)
        t, eng = _timed(lambda: Engine(program, mode="timing").run())
        engine = min(engine, t)
    print(f"{'bare tensor_core_mma arithmetic, 32 blocks':48s} {bare:8.3f} s")
    print(f"{'replay V32 32 blocks, full numerics + checks':48s} {full:8.3f} s  ({full / bare:.2f} x; target <= 3)")
    print(f"{'replay V32 32 blocks, timing only':48s} {timing:8.3f} s  ({rt.events / timing:,.0f} events/s)")
    print(f"{'  engine alone (compile + run), timing mode':48s} {engine:8.3f} s  "
          f"({len(eng.trace) / engine:,.0f} events/s; target >= 200,000)")
    print(f"checks: {'OK' if r.ok else 'FAILED'}; {r.cycles_per_block:.0f} cycles per block; "
          f"{r.tflops_b200:.0f} TFLOP/s predicted (B200, 148 SMs, 1.965 GHz; no HBM/L2 model)")
    np.testing.assert_equal((r.ok, len(eng.trace)), (True, rt.events))


if __name__ == "__main__":
    main()
