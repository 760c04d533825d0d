"""Shared-memory model and views: how fast are they? (python benchmarks/bench_smem.py)

Targets (issue: foundation): rendering a 128x64 tile picture takes well under a second.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _timing import best_of, fmt

from simtc.render import to_svg, to_text
from simtc.render.smem import DescriptorView, TileView
from simtc.smem import CanonicalLayout, bank_conflicts, descriptor_addresses


def main() -> None:
    t = CanonicalLayout("bf16", "K", "SW128", 128, 64)
    big = CanonicalLayout("bf16", "MN", "SW128", 256, 256)
    rows = [
        ("offsets of a 128x64 tile", best_of(t.offsets)),
        ("offsets of a 256x256 tile (65,536 elements)", best_of(big.offsets)),
        ("coords (inverse) of 65,536 offsets", best_of(lambda: big.coords(big.offsets()))),
        ("descriptor reading, 128 rows x 1 K-slice", best_of(
            lambda: descriptor_addresses(t.descriptor(), major="K", dtype="bf16", rows=128))),
        ("bank analysis of one warp access", best_of(lambda: bank_conflicts(np.arange(32) * 16, 16))),
        ("render 128x64 tile, text (logical view)", best_of(lambda: to_text(TileView(t), width=140), repeat=3)),
        ("render 128x64 tile, SVG (logical view)", best_of(lambda: to_svg(TileView(t), width=140), repeat=3)),
        ("render 128x64 tile, SVG (physical view)",
         best_of(lambda: to_svg(TileView(t, view="physical"), width=140), repeat=3)),
        ("render descriptor view, SVG", best_of(lambda: to_svg(DescriptorView(t.descriptor())), repeat=3)),
    ]
    for name, s in rows:
        print(f"{name:50s} {fmt(s)}")


if __name__ == "__main__":
    main()
