"""Which parameters an answer rests on: halve and double each one and see how far the answer moves.

:func:`sensitivity` takes a measure -- a function from a :class:`~simtc.engine.parameters.Timing` to a number
(cycles per block of a kernel, the cycles of a Program) -- and evaluates it with every parameter of the
table at ``x0.5`` and ``x2`` (integers rounded, at least 1). Each row gives the relative change of the
answer; rows are sorted by the larger of the two, so the parameters the answer rests on come first, with
their labels: an answer that moves with an *assumed* parameter is only as good as that assumption.

>>> from simtc.engine.parameters import Timing
>>> rows = sensitivity(lambda t: t["mufu_lanes"] * 0 + 1000 * 16 / t["mufu_lanes"], Timing("sm100"),
...                    names=["mufu_lanes", "fp32_lanes"])
>>> [(r.name, r.label, r.down, r.up) for r in rows]
[('mufu_lanes', 'assumed', 1.0, -0.5), ('fp32_lanes', 'assumed', 0.0, 0.0)]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from attrs import frozen

from simtc.engine.parameters import Timing

__all__ = ["FACTORS", "SensitivityRow", "sensitivity"]

FACTORS = (0.5, 2.0)


@frozen
class SensitivityRow:
    """One parameter: its label and value, the answer's relative change at x0.5 (``down``) and x2 (``up``)."""

    name: str
    label: str
    value: float
    unit: str
    down: float
    up: float
    source: str

    @property
    def effect(self) -> float:
        return max(abs(self.down), abs(self.up))

    def as_dict(self) -> dict:
        """``{name, label, value, unit, "x0.5", "x2", source}`` (what ``--json`` prints)."""
        return {"name": self.name, "label": self.label, "value": self.value, "unit": self.unit,
                "x0.5": self.down, "x2": self.up, "source": self.source}


def sensitivity(measure: Callable[[Timing], float], timing: Timing, names: Iterable[str] | None = None,
                digits: int = 4) -> list[SensitivityRow]:
    """Rows for every parameter of ``timing``'s table (or ``names``), sorted by effect, largest first."""
    base = float(measure(timing))
    if base == 0:
        raise ValueError("the measure is 0 at the table's values: relative changes are undefined")
    rows = []
    for name in names if names is not None else list(timing.table):
        p = timing.param(name)
        down = round(float(measure(timing.scaled(name, FACTORS[0]))) / base - 1, digits)
        up = round(float(measure(timing.scaled(name, FACTORS[1]))) / base - 1, digits)
        rows.append(SensitivityRow(name, p.label, timing[name], p.unit, down + 0.0, up + 0.0, p.source))
    rows.sort(key=lambda r: (-r.effect, r.name))
    return rows
