"""The L1's miss path: a warp's global load leaves the SM at the pace of the 128-byte lines it touches.

A warp-wide ``LDG`` is looked up in the L1 line by line; lines that miss are allocated and requested from L2.
On the H200 the SM-side cost of a scattered load is set by how many distinct 128-byte lines its lanes touch, not
by its bytes: with the L1 a CTA leaves when it holds 200 KiB of shared memory (FlashMLA's SM90 kernel holds
227 KiB), one CTA of 32 warps issuing loads of 8 rows x 64 B at a time needed 14.5 cycles per instruction when
each row's 64 B sat in one line and 26.8 when they straddled two; 32 rows of 16 B, 61.8; one 512-byte row, 6.1
(``tests/data/h200_l1_probe.json``, :mod:`simtc.hw.l1_probe`; the L2-resident pool keeps HBM out of it). The
engine books ``l1_line_cycles`` per line on one :class:`~simtc.engine.calendar.Calendar` per SM before the
request reaches the memory system, so a load waits behind the lines of the loads issued before it.

Lines per row follow from where rows start: a row of ``b`` bytes at a pitch ``p`` starts at a multiple of
``g = gcd(p, 128)`` within its line (any multiple, for rows chosen at random), so it touches
``ceil((offset + b) / 128)`` lines, averaged over the ``128 / g`` offsets (:func:`lines_per_row`): 1.375 for
FlashMLA's V32 rows (656 B apart, 64 B per row and instruction), 1 for MODEL1's (576 B apart).

Nsight Compute on the same probe counts about one data-pipe wavefront per row (``max(bytes / 128, rows)``):
that is what a load's data costs on the shared-memory port (:mod:`simtc.engine.smem_port`) when it comes
back. With a large L1 the per-line cost is about 1 cycle (the probe's other configurations); the value the
engine uses is the small-L1 one, the case of every kernel simtc models [measured; see the parameter's source].

>>> lines_per_row(64, 656), lines_per_row(64, 576), lines_per_row(512, 0), lines_per_row(64, 0, 80)
(1.375, 1.0, 4.0, 2.0)
>>> from simtc.engine.parameters import Timing
>>> l1 = L1MissPath(Timing("sm90"))
>>> l1.book(0, 8 * 1.375), l1.book(0, 8 * 1.375)   # two loads of 8 V32 rows: the second waits for the first
(20, 40)
"""

from __future__ import annotations

import functools
import math

from simtc.engine.calendar import Calendar, OneServer

__all__ = ["L1MissPath", "lines_per_row", "load_lines"]

LINE = 128


@functools.lru_cache(maxsize=256)
def lines_per_row(nbytes: int, pitch: int = 0, offset: int = 0) -> float:
    """Expected 128-byte lines a row of ``nbytes`` touches when rows start at ``offset`` plus random multiples of
    ``pitch`` (``pitch`` 0: every row starts at ``offset`` within its line)."""
    g = math.gcd(pitch, LINE) if pitch else LINE
    starts = [(offset + o) % LINE for o in range(0, LINE, g)]
    return sum(math.ceil((s + nbytes) / LINE) for s in starts) / len(starts)


def load_lines(nbytes: int, rows: int, pitch: int = 0, offset: int = 0) -> float:
    """Lines one warp-instruction of ``nbytes`` spread over ``rows`` rows touches."""
    rows = max(1, rows)
    return rows * lines_per_row(max(1, nbytes // rows), pitch, offset)


class L1MissPath(OneServer):
    """One SM's L1 miss path (see the module text); with the ``l1`` mechanism off a load takes no time there."""

    __slots__ = ("enabled", "line_cycles", "server")

    def __init__(self, timing):
        self.enabled = timing.enabled("l1")
        self.line_cycles = timing["l1_line_cycles"]
        self.server = Calendar("l1")

    def book(self, t: int, lines: float) -> int:
        """A load touching ``lines`` lines, issued at ``t``: the cycle its last line has left for L2."""
        if not self.enabled:
            return t
        return self.server.book(t, max(1, math.ceil(lines * self.line_cycles)))

    def forget(self, before: int) -> None:
        self.server.forget(before)
