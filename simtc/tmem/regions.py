"""Named Tensor Memory regions, for maps and checks.

A region is a label on a rectangle of lanes x columns; it is documentation for renderers,
not an allocation. A kernel's TMEM plan is a tuple of regions owned by that kernel's package
(FlashMLA's: :data:`simtc.kernels.flashmla.TMEM_V32`).

>>> str(TmemRegion("P", (0, 127), (400, 463)))
'P: lanes 0-127, columns 400-463'
"""

from __future__ import annotations

from attrs import frozen

__all__ = ["TmemRegion"]


@frozen
class TmemRegion:
    """A named rectangle: lanes ``lanes[0]..lanes[1]`` and columns ``columns[0]..columns[1]`` (inclusive)."""

    name: str
    lanes: tuple[int, int]
    columns: tuple[int, int]
    note: str = ""

    def __str__(self) -> str:
        return f"{self.name}: lanes {self.lanes[0]}-{self.lanes[1]}, columns {self.columns[0]}-{self.columns[1]}"
