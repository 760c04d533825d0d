"""Engine speed and memory, as a user runs it: each figure from a fresh Python process.

1. **Speed** (target: a 128-block timing-only replay sustains >= 6% of a bare SimPy timeout loop): the same
   process first runs a bare SimPy loop (12 processes each yielding ``env.timeout(1)``, 400,000 events in all;
   events per second), then ``replay("v32", 128, timing_only=True)`` -- building the Program, compiling, running
   and reporting, caches cold -- and reports the replay's trace events per second of its ``wall_seconds`` and of
   the whole call. The ratio to the bare loop is what the target is about. The machine may be shared: each
   figure is the best of ``REPEATS`` fresh processes.
2. **Memory** (targets: the largest request allowed, 4096 blocks, under 600 MB timing-only and under 1 GB with
   full numerics): peak resident memory of ``simtc replay flashmla-head64 --blocks N [--timing-only]`` in a
   fresh process (``resource.getrusage`` of the child; ``--memory`` runs it, it takes minutes).

    .venv/bin/python benchmarks/bench_engine.py [--memory] [--blocks N]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

REPEATS = 3

_SPEED = r"""
import json, time, simpy

def bare(n_events=400000, procs=12):
    env = simpy.Environment()
    per = n_events // procs
    def p(env):
        for _ in range(per):
            yield env.timeout(1)
    for _ in range(procs):
        env.process(p(env))
    t0 = time.perf_counter(); env.run(); dt = time.perf_counter() - t0
    return per * procs / dt

b = bare()
t0 = time.perf_counter()
from simtc.kernels.flashmla.replay import replay
r = replay("v32", BLOCKS, timing_only=True)
call = time.perf_counter() - t0
print(json.dumps({"bare": b, "events": r.events, "wall": r.wall_seconds, "call": call,
                  "cycles_per_block": r.cycles_per_block}))
"""


def speed(blocks: int) -> dict:
    best: dict = {}
    for _ in range(REPEATS):
        out = subprocess.run([sys.executable, "-c", _SPEED.replace("BLOCKS", str(blocks))], capture_output=True,
                             text=True, check=True)
        d = json.loads(out.stdout)
        for k in ("bare",):
            best[k] = max(best.get(k, 0), d[k])
        for k in ("wall", "call"):
            best[k] = min(best.get(k, float("inf")), d[k])
        best["events"], best["cycles_per_block"] = d["events"], d["cycles_per_block"]
    return best


def peak_mb(args: list[str]) -> tuple[float, float]:
    """(peak resident MB, seconds) of ``simtc`` with ``args`` in a child process."""
    t0 = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    subprocess.run([sys.executable, "-m", "simtc", *args], capture_output=True, check=True)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(peak, before) / 1024, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, default=128)
    ap.add_argument("--memory", action="store_true", help="also measure 4096-block peak memory (minutes)")
    a = ap.parse_args()
    s = speed(a.blocks)
    print(f"bare SimPy timeout loop:            {s['bare']:>12,.0f} events/s")
    print(f"replay V32 {a.blocks} blocks, timing only: {s['events']:>9,} events, "
          f"{s['cycles_per_block']:.0f} cycles/block")
    for what in ("wall", "call"):
        rate = s["events"] / s[what]
        label = "replay proper (wall_seconds)" if what == "wall" else "whole call (import excluded)"
        print(f"  {label:<33} {rate:>12,.0f} events/s = {100 * rate / s['bare']:.1f}% of the bare loop "
              "(target >= 6%)")
    if a.memory:
        for extra, target in ((["--timing-only"], 600), ([], 1000)):
            mb, sec = peak_mb(["replay", "flashmla-head64", "--blocks", "4096", "--json", *extra])
            what = "timing only" if extra else "full numerics"
            print(f"4096 blocks, {what:<13}: peak {mb:,.0f} MB in {sec:.0f} s (target < {target} MB)")


if __name__ == "__main__":
    main()
