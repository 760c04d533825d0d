"""Cost of the timing model's calls (run: python benchmarks/bench_timing.py).

The engine's tensor-pipe unit asks ``mma_occupancy_cycles`` and ``mma_completion_cycles`` once per
MMA (cached per ``MmaSpec``); ``predict_mma`` (checked spec, breakdown, parameters used) is what the
CLI calls once.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import best_of, fmt

from simtc.engine.timing import mma_completion_cycles, mma_occupancy_cycles, mma_spec, predict_mma


def main() -> None:
    spec = mma_spec("sm100", 64, 128, operands="TS", ws=True)
    rows = [
        ("mma_occupancy_cycles + mma_completion_cycles (cached)",
         best_of(lambda: (mma_occupancy_cycles(spec), mma_completion_cycles(spec)))),
        ("mma_spec (legality checks)", best_of(lambda: mma_spec("sm100", 64, 128, operands="TS", ws=True))),
        ("predict_mma sm100 .ws", best_of(lambda: predict_mma("sm100", 64, 128, operands="TS", ws=True))),
        ("predict_mma sm90", best_of(lambda: predict_mma("sm90", 64, 256))),
    ]
    for name, t in rows:
        print(f"{fmt(t)}  {name}")


if __name__ == "__main__":
    main()
