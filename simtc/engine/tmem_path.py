"""The TMEM load/store path: ``tcgen05.ld`` / ``tcgen05.st``, in issue order.

A load or store of ``cells`` 32-bit cells holds the path for ``cells / 32 / tcgen05_ldst_columns_per_cycle``
cycles (one 32-lane column per cycle) and completes ``tcgen05_ld_fixed`` / ``tcgen05_st_fixed`` after it
started moving (all assumed: no public measurement). ``tcgen05.wait::ld`` / ``::st`` wait
for the warp's earlier ones.

With the ``tmem_path`` mechanism off loads and stores complete when they are issued.

>>> from simtc.engine.parameters import Timing
>>> p = TmemPath(Timing("sm100"))
>>> p.access(0, 32 * 32, load=True), p.access(0, 32 * 64, load=True)
(132, 196)
"""

from __future__ import annotations

import math

from simtc.engine.calendar import InOrder, OneServer

__all__ = ["TmemPath"]


class TmemPath(OneServer):
    """The SM's TMEM load/store path (see the module text)."""

    __slots__ = ("enabled", "last", "ld_fixed", "per_cycle", "server", "st_fixed")

    def __init__(self, timing):
        self.last = (0, 0)
        """``(start, end)`` of the last access on the path (when it entered, when the path was free again)."""
        self.enabled = timing.enabled("tmem_path") and timing.arch == "sm100"
        self.server = InOrder("tmem_path")
        if timing.arch == "sm100":
            self.ld_fixed = timing["tcgen05_ld_fixed"]
            self.st_fixed = timing["tcgen05_st_fixed"]
            self.per_cycle = timing["tcgen05_ldst_columns_per_cycle"]
        else:
            self.ld_fixed = self.st_fixed = 0
            self.per_cycle = 1

    def access(self, t: int, cells: int, load: bool, who: int = -1) -> int:
        """A ``tcgen05.ld`` (``load``) or ``tcgen05.st`` of ``cells`` cells issued at ``t``; returns its completion
        (its time on the path: :attr:`last`)."""
        if not self.enabled:
            self.last = (t, t)
            return t
        cols = math.ceil(cells / 32 / self.per_cycle)
        start = self.server.start(t)
        self.server.take(start, cols, who)
        self.last = (start, start + cols)
        return start + cols + (self.ld_fixed if load else self.st_fixed)
