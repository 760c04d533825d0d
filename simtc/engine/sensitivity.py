"""Which parameters an answer rests on: halve and double each one and see how far the answer moves.

:func:`sensitivity` takes a measure -- a function from a :class:`~simtc.engine.parameters.Timing` to a number
(cycles per block of a kernel, the cycles of a Program) -- and evaluates it with every parameter of the
table scaled by each factor (``x0.5`` and ``x2`` by default; integers rounded, at least 1). Each row gives the
relative change of the answer per factor; rows are sorted by the largest change, so the parameters the
answer rests on come first, with their labels: an answer that moves with an *assumed* parameter is only as
good as that assumption. A parameter with slack (a unit that is busy, but not the one that binds) shows
nothing at x0.5 and x2; wider factors (``x0.25``, ``x4``) show how much slack it has.

>>> from simtc.engine.parameters import Timing
>>> rows = sensitivity(lambda t: 1000 * 16 / t["mufu_lanes"], Timing("sm100"), names=["mufu_lanes", "fp32_lanes"])
>>> [(r.name, r.label, r.down, r.up) for r in rows]
[('mufu_lanes', 'assumed', 1.0, -0.5), ('fp32_lanes', 'assumed', 0.0, 0.0)]
>>> rows[0].as_dict()["x0.5"], rows[0].as_dict()["x2"]
(1.0, -0.5)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from attrs import field, frozen

from simtc.engine.parameters import Timing
from simtc.errors import SimtcError

__all__ = ["BAND_FACTORS", "FACTORS", "SensitivityRow", "band", "band_factors", "factor_key", "sensitivity"]

FACTORS = (0.5, 2.0)


def factor_key(factor: float) -> str:
    """``"x0.5"``, ``"x2"``, ``"x0.25"``: the key a factor's change has in a row's dict."""
    return f"x{factor:g}"


@frozen
class SensitivityRow:
    """One parameter: its label and value, the answer's relative change at each factor."""

    name: str
    label: str
    value: float
    unit: str
    changes: tuple[tuple[float, float], ...] = field(converter=tuple)
    """``(factor, relative change of the answer)`` per factor."""
    source: str

    def change(self, factor: float) -> float:
        for f, c in self.changes:
            if f == factor:
                return c
        raise SimtcError(f"no change recorded at x{factor:g} (factors: {[f for f, _ in self.changes]})",
                         rule="a sensitivity row holds the factors it was run with")

    @property
    def down(self) -> float:
        """The change at x0.5."""
        return self.change(0.5)

    @property
    def up(self) -> float:
        """The change at x2."""
        return self.change(2.0)

    @property
    def effect(self) -> float:
        return max(abs(c) for _, c in self.changes)

    def as_dict(self) -> dict:
        """``{name, label, value, unit, "x0.5", "x2", ..., source}`` (what ``--json`` prints)."""
        return {"name": self.name, "label": self.label, "value": self.value, "unit": self.unit,
                **{factor_key(f): c for f, c in self.changes}, "source": self.source}


def sensitivity(measure: Callable[[Timing], float], timing: Timing, names: Iterable[str] | None = None,
                digits: int = 4, factors: Iterable[float] = FACTORS, base: float | None = None,
                ) -> list[SensitivityRow]:
    """Rows for every parameter of ``timing``'s table (or ``names``), sorted by effect, largest first.

    ``base``: the measure at ``timing`` when the caller has it already.
    """
    factors = tuple(float(f) for f in factors)
    if not factors or any(not f > 0 or f == 1 for f in factors):
        raise SimtcError(f"factors {factors}: positive numbers other than 1", rule="sensitivity scales parameters")
    base = float(measure(timing)) if base is None else float(base)
    if base == 0:
        raise SimtcError("the measure is 0 at the table's values: relative changes are undefined",
                         rule="sensitivity is relative to a nonzero answer")
    rows = []
    for name in names if names is not None else list(timing.table):
        p = timing.param(name)
        changes = tuple((f, round(float(measure(timing.scaled(name, f))) / base - 1, digits) + 0.0) for f in factors)
        rows.append(SensitivityRow(name, p.label, timing[name], p.unit, changes, p.source))
    rows.sort(key=lambda r: (-r.effect, r.name))
    return rows


BAND_FACTORS = {"assumed": 1.25, "derived": 1.10}
"""How far an answer's band lets a parameter move, by label: assumed x/÷ 1.25, derived x/÷ 1.10; measured and
documented ones stay put."""


def band_factors(timing: Timing, names: Iterable[str] | None = None) -> list[tuple[str, float]]:
    """``(name, factor)`` of the parameters (all, or ``names``) whose label gives them a band (:data:`BAND_FACTORS`)."""
    pick = timing.table if names is None else {n: timing.param(n) for n in names}
    return [(n, BAND_FACTORS[p.label]) for n, p in pick.items() if p.label in BAND_FACTORS]


def band(measure: Callable[[Timing], float], timing: Timing, names: Iterable[str] | None = None,
         base: float | None = None, progress: Callable[[str, int, int], None] | None = None) -> dict:
    """An answer's band from the parameters that are not measured: each banded parameter (:func:`band_factors`) up
    and down by its factor, the relative effects above and below the answer combined root-sum-square.
    ``{"value", "low", "high", "rests_on": [{"name", "label", "up", "down"}, ...]}`` (``up``/``down``: the largest
    relative rise and fall it caused), largest first. ``progress(phase, done, total)`` is told of each parameter.

    >>> from simtc.engine.parameters import Timing
    >>> b = band(lambda t: 1000 * 16 / t["mufu_lanes"], Timing("sm100"), names=["mufu_lanes"])
    >>> round(b["low"]), round(b["value"]), round(b["high"])   # 16 lanes x 1.25 and / 1.25, rounded: 20 and 13
    (800, 1000, 1231)
    """
    value = measure(timing) if base is None else base
    lo2 = hi2 = 0.0
    rows = []
    factors = band_factors(timing, names)
    for i, (name, f) in enumerate(factors):
        if progress is not None:
            progress("band", i, len(factors))
        effects = [measure(timing.scaled(name, x)) / value - 1 if value else 0.0 for x in (f, 1 / f)]
        up, down = max(0.0, *effects), min(0.0, *effects)
        hi2 += up ** 2
        lo2 += down ** 2
        if up or down:
            rows.append({"name": name, "label": timing.param(name).label, "up": round(up, 4), "down": round(down, 4)})
    rows.sort(key=lambda r: -max(r["up"], -r["down"]))
    return {"value": value, "low": value * (1 - lo2 ** 0.5), "high": value * (1 + hi2 ** 0.5), "rests_on": rows}
