"""Engine speed: simulated events per second in timing-only mode (target >= 200,000 on 2 cores).

The workload is a long synthetic loop of the FlashMLA QK pattern: per block the MMA thread waits
for the softmax warps to free P, issues the 18 QK ``tcgen05.mma.ws`` of ``flashmla-qk`` and
commits; the four softmax warps wait for the commit, load P, wait, compute and arrive.

    .venv/bin/python benchmarks/bench_engine.py [BLOCKS]
"""

from __future__ import annotations

import sys
import time

from simtc.engine.core import Engine
from simtc.isa import (
    Commit,
    CudaCoreBlock,
    FenceAfterThreadSync,
    FenceBeforeThreadSync,
    Ld,
    MbarrierArrive,
    MbarrierTryWait,
    Program,
    Role,
    WaitLd,
)
from simtc.isa.program import Barrier
from simtc.kernels.flashmla.programs import qk_mmas


def qk_loop(blocks: int) -> Program:
    mmas = qk_mmas(1)
    mma, sm = [], []
    for i in range(blocks):
        ph = i & 1
        mma += [MbarrierTryWait("p_free", ph ^ 1), FenceAfterThreadSync(), *mmas, Commit("qk_done")]
        sm += [MbarrierTryWait("qk_done", ph), FenceAfterThreadSync(), Ld(400, "32x32b", 64, "p"), WaitLd(),
               CudaCoreBlock("softmax", (("FMNMX", 32), ("FFMA2", 16), ("MUFU.EX2", 32)), regs_read=("p",)),
               FenceBeforeThreadSync(), MbarrierArrive("p_free")]
    return Program(f"bench/qk-loop-{blocks}", (Role("mma", (4,), tuple(mma), threads=1),
                                               Role("softmax", (0, 1, 2, 3), tuple(sm))),
                   barriers=(Barrier("qk_done", "mbarrier", 1), Barrier("p_free", "mbarrier", 128)))


def main(blocks: int = 400) -> None:
    prog = qk_loop(blocks)
    for check in (True, False):
        best_run = best_all = None
        for _ in range(5):
            t0 = time.perf_counter()
            e = Engine(prog, check=check)
            t1 = time.perf_counter()
            e.run()
            t2 = time.perf_counter()
            assert e.clean, e.hazards[:3]
            best_run = t2 - t1 if best_run is None else min(best_run, t2 - t1)
            best_all = t2 - t0 if best_all is None else min(best_all, t2 - t0)
        n = len(e.trace)
        print(f"timing-only, checker {'on ' if check else 'off'}: {blocks} blocks, {e.cycles:,} cycles, {n:,} events: "
              f"run {best_run:.3f} s -> {n / best_run:,.0f} events/s; with compile {best_all:.3f} s -> "
              f"{n / best_all:,.0f} events/s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 400)
