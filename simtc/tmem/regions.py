"""Named Tensor Memory regions, for maps and checks (e.g. FlashMLA's head64 decode kernel).

A region is a label on a rectangle of lanes x columns; it is documentation for renderers,
not an allocation. :data:`FLASHMLA_HEAD64_V32` is FlashMLA's SM100 sparse-decode head64 map
(DeepSeek-V3.2 "V32" configuration): warp 0 allocates all 512 columns (start asserted 0),
then O, Q and P live at fixed columns (``csrc/sm100/decode/head64/config.h``; fact sheet
``flashmla_head64.md`` §3).

>>> [str(r) for r in FLASHMLA_HEAD64_V32][:2]
['O: lanes 0-127, columns 0-255', 'Q: lanes 0-127, columns 256-383']
"""

from __future__ import annotations

from attrs import frozen

__all__ = ["FLASHMLA_HEAD64_V32", "TmemRegion"]


@frozen
class TmemRegion:
    """A named rectangle: lanes ``lanes[0]..lanes[1]`` and columns ``columns[0]..columns[1]`` (inclusive)."""

    name: str
    lanes: tuple[int, int]
    columns: tuple[int, int]
    note: str = ""

    def __str__(self) -> str:
        return f"{self.name}: lanes {self.lanes[0]}-{self.lanes[1]}, columns {self.columns[0]}-{self.columns[1]}"


FLASHMLA_HEAD64_V32: tuple[TmemRegion, ...] = (
    TmemRegion("O", (0, 127), (0, 255),
               "O accumulator 64x512 fp32 in Layout E: cols 0-127 = PV n-block 0 (lanes 0-63 dims 0-127, "
               "lanes 64-127 dims 128-255), cols 128-255 = n-block 1 (dims 256-383 | 384-511)"),
    TmemRegion("Q", (0, 127), (256, 383),
               "Q NoPE bf16, two per cell: lanes 0-63 even 64-dim chunks, lanes 64-127 odd chunks"),
    TmemRegion("Q_tail", (0, 127), (384, 399), "Q RoPE bf16: lanes 0-63 dims 512-543, lanes 64-127 dims 544-575"),
    TmemRegion("P", (0, 127), (400, 463),
               "QK result 64x128 fp32 in Layout E: P_lo in lanes 0-63, P_hi in lanes 64-127, token n at 400+n"),
    TmemRegion("free", (0, 127), (464, 511), "48 unused columns"),
)
"""FlashMLA head64 (V32) TMEM map [kernel] ``csrc/sm100/decode/head64/config.h``."""
