"""The L1 on a warp's global loads: its miss path paced per 128-byte line, its data pipe per wavefront.

A warp-wide ``LDG`` goes through two stages of the SM's L1, each a mechanism here (``l1``; measured on the H200 by
:mod:`simtc.hw.l1_probe`, ``tests/data/h200_l1_probe.json`` and its Nsight Compute counts
``tests/data/ncu/h200_l1_probe.csv``):

* **the miss path** -- the lines the lanes touch are looked up and, missing, requested from L2. With the L1 a CTA
  leaves when it holds 200 KiB of shared memory (FlashMLA's SM90 kernel holds 227 KiB), 32 warps issuing scattered
  loads took ``l1_line_cycles`` = 1.78 cycles per distinct 128-byte line (6.1 to 61.8 cycles an instruction for 4 to
  32 lines, -8% to +17%). The engine books that on one :class:`~simtc.engine.calendar.Calendar` per SM before the
  request reaches the memory system. Lines per row follow from where rows start: a row of ``b`` bytes at pitch
  ``p`` starts at a multiple of ``g = gcd(p, 128)`` within its line, so it touches ``ceil((offset + b) / 128)``
  lines averaged over the ``128 / g`` offsets (:func:`lines_per_row`): 1.375 for FlashMLA's V32 rows (656 B apart,
  64 B per row and instruction), 1 for MODEL1's (576 B apart).
* **the data pipe** -- the returning data is read out of the L1's 32 banks by quarter-warps (8 lanes) in
  wavefronts, the same pipe as shared memory (:mod:`simtc.engine.smem_port`, one wavefront a cycle). Rows of one
  quarter that start at the same bank conflict: FlashMLA's producer puts one 16-byte slice of 8 rows in each
  quarter, so its loads cost 32 wavefronts when rows start on a line (pitch 512), 25 on 64-byte multiples
  (MODEL1's 576), 19 on 16-byte multiples (V32's 656) -- Nsight Compute's counts. The rule
  (:func:`load_wavefronts`): per quarter-warp ``l1_wavefronts_per_row`` for each row and
  ``l1_wavefronts_per_conflict`` for each row on its most-shared bank (the expectation over random row starts,
  :func:`conflict_rows`), fitted on 11 pitches (within 1%) and checked on the probe's other lane order (1 to 32 rows
  within 2%; V32's and MODEL1's pitch 22% and 9% low). It is why MODEL1's rows, which move fewer bytes and lines,
  take longer than V32's on the H200: the engine's timing of the probe's row loop follows the hardware within 5% at
  every pitch (``tests/kernels/test_gathers.py``).

With the mechanism off, a load costs no miss-path time and one wavefront per 128 bytes.

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
from simtc.isa.cuda_core import LANE_ORDERS

__all__ = ["LANE_ORDERS", "L1MissPath", "conflict_rows", "lines_per_row", "load_lines", "load_wavefronts"]

LINE = 128
BANK = 4
"""Bytes of one of the L1 data array's 32 banks."""
_SAMPLES = 4096


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


def _quarters(width: int, rows: int, lanes: str):
    """Per quarter-warp (8 lanes): ``(row, byte offset in the row)`` of each lane."""
    rows = max(1, min(32, rows))
    per_row = 32 // rows
    out = []
    for q in range(4):
        if lanes == "interleaved":
            out.append(tuple((lane % rows, (lane // rows) * width) for lane in range(8 * q, 8 * q + 8)))
        else:
            out.append(tuple((lane // per_row, (lane % per_row) * width) for lane in range(8 * q, 8 * q + 8)))
    return out


@functools.lru_cache(maxsize=256)
def conflict_rows(width: int, rows: int, pitch: int = 0, lanes: str = "grouped") -> tuple[tuple[int, float], ...]:
    """Per quarter-warp of one warp-instruction: the rows its 8 lanes read, and the expected largest number of them
    (distinct row and line) that meet on one bank of the L1 data array, the rows starting at random multiples of
    ``gcd(pitch, 128)`` within a line (``pitch`` 0: all on a line start). Averaged over 4,096 seeded draws."""
    import numpy as np

    if lanes not in LANE_ORDERS:
        raise ValueError(f"lane order {lanes!r} is not one of {LANE_ORDERS}")
    g = math.gcd(pitch, LINE) if pitch else LINE
    rng = np.random.default_rng(20261201)
    out = []
    for quarter in _quarters(width, rows, lanes):
        ids = sorted({r for r, _ in quarter})
        starts = rng.integers(0, LINE // g, size=(_SAMPLES, len(ids))) * g
        count = np.zeros((_SAMPLES, LINE // BANK), np.int32)
        seen = set()
        for r, off in quarter:
            for b in range(0, width, BANK):
                byte = starts[:, ids.index(r)] + off + b
                key = (r, off + b)
                if key in seen:
                    continue
                seen.add(key)
                count[np.arange(_SAMPLES), (byte % LINE) // BANK] += 1
        out.append((len(ids), float(count.max(axis=1).mean())))
    return tuple(out)


def load_wavefronts(width: int, rows: int, pitch: int, lanes: str, per_row: float, per_conflict: float) -> float:
    """Expected L1 data-pipe wavefronts of one warp-instruction: per quarter-warp ``per_row`` for each row it reads
    and ``per_conflict`` for each row on its most-shared bank (:func:`conflict_rows`)."""
    return sum(per_row * n + per_conflict * m for n, m in conflict_rows(width, rows, pitch, lanes))


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
