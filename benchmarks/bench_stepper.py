"""How interactive stepping is: the head64 replay's stepper (semantics mode, data on) at 2 and 16 blocks.

Reports, per size: building the stepper (inputs, Program, engine), running to the end (``len``), a step forward,
a step back, a random jump (``goto``), the state's JSON (``to_json``: what ``--step-to N --json`` prints) and the
terminal picture of a step (``StepView`` without the timeline, rendered to text).

    .venv/bin/python benchmarks/bench_stepper.py
"""

from __future__ import annotations

import random
import time

from _timing import best_of, fmt

from simtc.kernels.flashmla.replay import stepper
from simtc.render.export import to_text
from simtc.render.step import StepView


def main() -> None:
    for blocks in (2, 16):
        t0 = time.perf_counter()
        s = stepper("v32", blocks)
        built = time.perf_counter() - t0
        t0 = time.perf_counter()
        n = len(s)
        ran = time.perf_counter() - t0
        rng = random.Random(0)
        s.goto(n // 2)
        fwd = best_of(lambda s=s: (s.forward(), s.back()), repeat=5) / 2
        jump = best_of(lambda s=s, n=n, rng=rng: s.goto(rng.randrange(n + 1)), repeat=5)
        js = best_of(s.to_json, repeat=5)
        pic = best_of(lambda s=s: to_text(StepView(s, timeline=False), width=120), repeat=3)
        print(f"{blocks:>3} blocks, {n:>6} events: build {fmt(built)}  run to end {fmt(ran)}  step {fmt(fwd)}  "
              f"jump {fmt(jump)}  to_json {fmt(js)}  picture {fmt(pic)}")


if __name__ == "__main__":
    main()
