"""Tiny timing helper shared by the benchmark scripts (best-of-repeats wall time)."""

from __future__ import annotations

import time


def best_of(fn, *, repeat: int = 7, number: int | None = None) -> float:
    """Seconds per call: the best of ``repeat`` runs of ``number`` calls (auto-sized to ~0.2 s)."""
    if number is None:
        number, t = 1, 0.0
        while True:
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            t = time.perf_counter() - t0
            if t > 0.2 or number >= 1 << 16:
                break
            number *= 2
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def fmt(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:8.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:8.2f} ms"
    return f"{seconds:8.2f} s "
