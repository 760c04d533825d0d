"""The gallery: SVG pictures of simtc's views, generated (not stored) when the site is built.

Each picture is drawn by :func:`simtc.render.export.to_svg` from the model functions, so the
gallery always shows what the code computes. ``docs/scripts/hooks.py`` adds the SVGs and the
page to the site; run this file to write the SVGs into a directory instead:

    python docs/scripts/gallery.py OUTDIR
"""

from __future__ import annotations

import sys
from pathlib import Path


def pictures() -> list[tuple[str, str, object]]:
    """``[(name, caption, view), ...]``: the gallery's pictures, in page order."""
    import numpy as np

    from simtc.kernels.flashmla import TMEM_V32
    from simtc.render.banks import BankMapView
    from simtc.render.smem import DescriptorView, TileView
    from simtc.render.tmem import CpView, LayoutView, LdView, TmemMapView
    from simtc.smem import CanonicalLayout, SmemDescriptor, bank_conflicts
    from simtc.tmem import LdStOp, cp_shape, datapath_layout

    sw128 = CanonicalLayout("bf16", "K", "SW128", 16, 64)
    rows = np.arange(32)
    return [
        ("tile_sw128_logical", "A bf16 K-major SW128 tile (16 × 64): each cell is a 16-byte chunk and the byte "
         "offset where it lands; colours show the XOR permutation.", TileView(sw128)),
        ("tile_sw64_logical", "The same for SW64 (8 × 32): the pattern repeats every 512 bytes.",
         TileView(CanonicalLayout("bf16", "K", "SW64", 8, 32))),
        ("tile_mn_sw128_physical", "An MN-major SW128 tile (64 × 16) in the physical view: 128-byte lines of "
         "shared memory and the elements each chunk holds.",
         TileView(CanonicalLayout("bf16", "MN", "SW128", 64, 16), view="physical", max_rows=8)),
        ("descriptor_flashmla_q", "FlashMLA's Q/K descriptor 0x4000404000010000 decoded (PTX ISA 9.0 §9.7.16.4.1 "
         "Table 40).", DescriptorView(SmemDescriptor.from_u64(0x4000404000010000))),
        ("banks_column_unswizzled", "A warp reading a 16-byte column of 128-byte rows without a swizzle: 8-way "
         "bank conflicts (32 wavefronts).", BankMapView(bank_conflicts(rows * 128, 16))),
        ("banks_column_sw128", "The same column of a SW128 tile: conflict-free (4 wavefronts).",
         BankMapView(bank_conflicts(CanonicalLayout("bf16", "K", "SW128", 64, 64).offset(rows % 64, 0 * rows), 16))),
        ("tmem_map_flashmla", "FlashMLA head64's Tensor Memory map: O, Q, Q's RoPE tail and P (columns 400-463).",
         TmemMapView(regions=TMEM_V32)),
        ("layout_e_m64_ws", "Layout E (M=64, .ws, N=128) at column 400: D[:, 0:64] in lanes 0-63, D[:, 64:128] "
         "in lanes 64-127 (the 2x2 pattern; CUTLASS's map, PTX's '2x3' read as 2x2 [inferred]).",
         LayoutView(datapath_layout(64, 128, ws=True), c0=400)),
        ("layout_f_m64", "Layout F (M=64, not .ws, N=128): half of each lane quadrant.",
         LayoutView(datapath_layout(64, 128))),
        ("ld_16x256b", "tcgen05.ld.16x256b.x1: which thread and register own each cell (the mma.sync C fragment).",
         LdView(LdStOp("16x256b", 1))),
        ("cp_64x128b_02_13", "tcgen05.cp.64x128b.warpx2::02_13: each source row goes to lanes r and r + 64.",
         CpView(cp_shape("64x128b", "warpx2::02_13"))),
    ]


def svgs(width: int = 120) -> list[tuple[str, str, str]]:
    """``[(name, caption, svg_text), ...]`` for every picture."""
    from simtc.render.export import to_svg

    return [(name, caption, to_svg(view, width=width, title=name)) for name, caption, view in pictures()]


def markdown(svg_dir: str = "gallery") -> str:
    """The gallery page; images at ``{svg_dir}/{name}.svg``."""
    lines = ["# Gallery", "",
             "Pictures drawn by simtc's views (`simtc.render`) and exported with `simtc.render.export.to_svg` "
             "when this site is built (`docs/scripts/gallery.py`); the same views print in a terminal and show "
             "in Jupyter. The command line draws them too (`--svg FILE`).", ""]
    for name, caption, _ in pictures():
        lines += [f"## {name.replace('_', ' ')}", "", caption, "", f"![{name}]({svg_dir}/{name}.svg)", ""]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python docs/scripts/gallery.py OUTDIR", file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for name, _, svg in svgs():
        (out / f"{name}.svg").write_text(svg, encoding="utf-8")
        print(f"wrote {out / name}.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
