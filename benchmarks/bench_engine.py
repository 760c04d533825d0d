"""Engine speed: simulated events per second in timing-only mode (target >= 200,000 on 2 cores).

The workload is :func:`simtc.kernels.flashmla.programs.qk_loop`, a long synthetic loop of the FlashMLA QK
pattern: per block the MMA thread waits for the softmax warps to free P, issues the 18 QK
``tcgen05.mma.ws`` of ``flashmla-qk`` and commits; the four softmax warps wait for the commit,
load P, wait, compute and arrive. The machine is shared, so each figure is taken over several
runs and reported as min / median / best events per second.

    .venv/bin/python benchmarks/bench_engine.py [BLOCKS] [REPEATS]
"""

from __future__ import annotations

import statistics
import sys
import time

from simtc.engine.core import Engine
from simtc.kernels.flashmla.programs import qk_loop


def _rates(n: int, seconds: list[float]) -> str:
    r = sorted(n / s for s in seconds)
    return f"min {r[0]:,.0f} / median {statistics.median(r):,.0f} / best {r[-1]:,.0f} events/s"


def main(blocks: int = 400, repeats: int = 7) -> None:
    prog = qk_loop(blocks)
    for check in (True, False):
        runs, alls = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            e = Engine(prog, check=check)
            t1 = time.perf_counter()
            e.run()
            t2 = time.perf_counter()
            assert e.clean, e.hazards[:3]
            runs.append(t2 - t1)
            alls.append(t2 - t0)
        n = len(e.trace)
        print(f"timing-only, checker {'on ' if check else 'off'}: {blocks} blocks, {e.cycles:,} cycles, {n:,} events")
        print(f"  simulation only:   {_rates(n, runs)}")
        print(f"  with compile:      {_rates(n, alls)}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
