"""Fits and statistics of the measurements: the least-squares line cycles = intercept + slope x steps
(:func:`fit_line`), medians, and finite numbers rounded for the recording.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from simtc.errors import ShapeError


def fit_line(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Least-squares line y = intercept + slope x; returns (slope, intercept).

    >>> fit_line([64, 128, 192, 256], [100 + 4 * v for v in (64, 128, 192, 256)])
    (4.0, 100.0)
    """
    xs, ys = [float(v) for v in x], [float(v) for v in y]
    if len(xs) != len(ys) or len(set(xs)) < 2 or not all(map(math.isfinite, xs + ys)):
        raise ShapeError(f"a line fit needs at least two distinct x with one finite y each (x={xs}, y={ys})",
                         rule="cycles = intercept + slope x steps, over several step counts")
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((v - mx) ** 2 for v in xs)
    slope = sum((a - mx) * (b - my) for a, b in zip(xs, ys, strict=True)) / sxx
    return round(slope, 6), round(my - slope * mx, 6)


def _median(values: Sequence[float]) -> float:
    s = sorted(values)
    if not s:
        raise ShapeError("median of nothing", rule="a statistic needs samples")
    m = len(s) // 2
    return float(s[m]) if len(s) % 2 else (s[m - 1] + s[m]) / 2.0


def _num(v) -> float | None:
    return None if v is None or not math.isfinite(float(v)) else round(float(v), 6)
