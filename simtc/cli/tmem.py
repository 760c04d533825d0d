"""``simtc tmem``: Tensor Memory data-path layouts, ``tcgen05.ld/st`` maps, ``tcgen05.cp`` maps, TMEM maps."""

from __future__ import annotations

import sys

from simtc.cli._common import add_output_options, emit_json, show

LD_SHAPES = ("32x32b", "16x64b", "16x128b", "16x256b", "16x32bx2")
CP_SHAPES = ("128x256b", "128x128b", "4x256b", "64x128b.warpx2::02_13", "64x128b.warpx2::01_23", "32x128b.warpx4")


def register(sub) -> None:
    p = sub.add_parser("tmem", help="Tensor Memory: data-path layouts, tcgen05.ld/st and cp maps, TMEM maps",
                       description="Tensor Memory (128 lanes x 512 columns of 32-bit cells): where an MMA result "
                                   "lands, which thread/register a tcgen05.ld returns, where tcgen05.cp puts shared "
                                   "memory rows, and a whole-TMEM map.")
    s = p.add_subparsers(dest="tmem_command", metavar="SUBCOMMAND")

    lay = s.add_parser(
        "layout", help="where D[m][n] of an MMA lands in TMEM (layouts A-G)",
        description="Data-path layout of a kind::f16 tcgen05.mma result (PTX ISA 9.0 §9.7.16.10.5; maps from "
                    "CUTLASS's tmem_frg atoms). JSON: layout letter, lanes [first, last], columns used, and "
                    "map[m][n] = [lane, column offset from the d-tmem column] for every element (per-CTA rows "
                    "for cta_group::2).")
    lay.add_argument("--m", type=int, required=True, help="instruction M (32, 64, 128, 256)")
    lay.add_argument("--n", type=int, required=True, help="instruction N")
    lay.add_argument("--ws", action="store_true", help="the .ws (weight-stationary) form")
    lay.add_argument("--cta-group", type=int, choices=(1, 2), default=1)
    lay.add_argument("--sparse", action="store_true")
    lay.add_argument("--lane-align", type=int, choices=(0, 16), default=0, help="L0 for Layouts F and C")
    lay.add_argument("--c0", type=int, default=0, help="d-tmem column, for the picture")
    add_output_options(lay)
    lay.set_defaults(handler=run_layout)

    ld = s.add_parser(
        "ld", help="thread/register <-> (lane, column) map of a tcgen05.ld / tcgen05.st",
        description="The fragment of a warp-collective tcgen05.ld (st is its inverse) (PTX ISA 9.0 §9.7.16.8.3; "
                    "CUTLASS SM100_TMEM_LOAD_* traits). JSON: map[thread][register] = [lane offset, column offset] "
                    "from taddr. With --pack (.pack::16b) a register's low 16 bits come from the low half of the "
                    "cell at column offset c and its high 16 bits from the low half of the cell at c + 1; "
                    "'halves'[thread][register] lists both cells as [[lane, c], [lane, c + 1]].")
    ld.add_argument("--shape", choices=LD_SHAPES, required=True)
    ld.add_argument("--num", type=int, default=1, help=".num repetition count (1, 2, 4, ..., 128)")
    ld.add_argument("--pack", action="store_true", help=".pack::16b (ld) / .unpack::16b (st)")
    ld.add_argument("--imm", type=int, default=None, help="16x32bx2 immHalfSplitoff (default num, 2*num packed)")
    ld.add_argument("--warp", type=int, default=0, help="warp index, for the quadrant note in the picture")
    add_output_options(ld)
    ld.set_defaults(handler=run_ld)

    cp = s.add_parser(
        "cp", help="row -> lane map of a tcgen05.cp shape",
        description="Where tcgen05.cp.cta_group::1 puts each shared-memory source row (PTX ISA 9.0 §9.7.16.9.2; "
                    "CUTLASS SM100_UTCCP_* traits). JSON: rows, columns per lane, lanes[row] = lane offsets.")
    cp.add_argument("--shape", choices=CP_SHAPES, required=True)
    cp.add_argument("--json", action="store_true", help="print machine-readable JSON")
    cp.set_defaults(handler=run_cp)

    mp = s.add_parser(
        "map", help="a whole-TMEM map (FlashMLA head64's O / Q / P regions)",
        description="The 128 x 512 TMEM map of FlashMLA's SM100 head64 decode kernel (V32): one 512-column "
                    "allocation by warp 0 holding O (0-255), Q (256-383), Q_tail (384-399), P (400-463).")
    mp.add_argument("--by", choices=("region", "allocation"), default="region")
    mp.add_argument("--lanes-per-row", type=int, choices=(1, 2, 4, 8, 16, 32), default=4)
    mp.add_argument("--columns-per-char", type=int, choices=(1, 2, 4, 8, 16), default=8)
    add_output_options(mp)
    mp.set_defaults(handler=run_map)
    p.set_defaults(handler=lambda args: (p.print_help(), 0)[1])


def _finish(view, data, args, title: str) -> int:
    if args.json:
        emit_json(data)
        if getattr(args, "svg", None):
            from simtc.render.export import to_svg

            to_svg(view, args.svg, width=args.term_width or 140, title=title)
            print(f"wrote {args.svg}", file=sys.stderr)
        return 0
    show(view, args, title=title)
    return 0


def run_layout(args) -> int:
    from simtc.render.tmem import LayoutView
    from simtc.tmem import datapath_layout

    lay = datapath_layout(args.m, args.n, ws=args.ws, cta_group=args.cta_group, sparse=args.sparse,
                          lane_align=args.lane_align)
    lane, col = lay.full_map()
    lanes = lay.lanes()
    import numpy as np

    rule, tag = lay.a_duplication
    data = {
        "layout": lay.letter, "m": lay.m, "n": lay.n, "ws": lay.ws, "cta_group": lay.cta_group,
        "sparse": lay.sparse, "lane_align": lay.lane_align, "rows_per_cta": lay.rows,
        "lanes": [int(lanes[0]), int(lanes[-1])], "columns": lay.columns, "organization": lay.organization,
        "source": lay.status, "a_operand": {"rule": rule, "source": tag},
        "map": np.stack([lane, col], axis=-1).tolist(),
    }
    return _finish(LayoutView(lay, c0=args.c0), data, args, "simtc tmem layout")


def run_ld(args) -> int:
    from simtc.render.tmem import LdView
    from simtc.tmem import LdStOp

    op = LdStOp(args.shape, args.num, pack=args.pack, imm=args.imm)
    lane, cols = op.cells()
    import numpy as np

    data = {
        "instruction": op.ptx("ld"), "store": op.ptx("st"), "cutlass": op.cutlass, "shape": op.shape.name,
        "num": op.num, "pack": op.pack, "imm": op.imm, "registers": op.nregs, "lanes": op.lanes,
        "columns": op.span,
        "map": np.stack([op.lane_offsets(), op.column_offsets()], axis=-1).tolist(),
    }
    if op.pack:
        data["halves"] = np.stack([lane, cols], axis=-1).tolist()
    return _finish(LdView(op, warp=args.warp), data, args, "simtc tmem ld")


def run_cp(args) -> int:
    from simtc.tmem import cp_shape

    cs = cp_shape(args.shape)
    lanes = cs.lanes().tolist()
    if args.json:
        emit_json({"instruction": cs.ptx(), "rows": cs.rows, "columns": cs.columns, "source": cs.status,
                   "cutlass": cs.cutlass, "lanes": lanes})
        return 0
    print(f"{cs.ptx()}: {cs.rows} source rows x {cs.columns} columns ({cs.columns * 4} bytes per row); "
          f"{cs.status}; CUTLASS {cs.cutlass}")
    step = max(1, cs.rows // 16)
    for r in range(0, cs.rows, step):
        print(f"  row {r:>3} -> lanes {', '.join(str(x) for x in lanes[r])}")
    return 0


def run_map(args) -> int:
    from simtc.render.tmem import TmemMapView
    from simtc.tmem import FLASHMLA_HEAD64_V32, TensorMemory

    tm = TensorMemory()
    tm.alloc(512, warp=0)
    tm.relinquish_alloc_permit(warp=0)
    view = TmemMapView(tm, regions=FLASHMLA_HEAD64_V32 if args.by == "region" else (), by=args.by,
                       lanes_per_row=args.lanes_per_row, columns_per_char=args.columns_per_char,
                       title="FlashMLA SM100 head64 decode (V32) TMEM map, coloured by " + args.by)
    data = {
        "source": "FlashMLA csrc/sm100/decode/head64/config.h",
        "allocations": [{"column": a.column, "ncols": a.ncols, "warp": a.warp} for a in tm.allocations.values()],
        "regions": [{"name": r.name, "lanes": list(r.lanes), "columns": list(r.columns), "note": r.note}
                    for r in FLASHMLA_HEAD64_V32],
    }
    return _finish(view, data, args, "simtc tmem map")
