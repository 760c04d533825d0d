"""``simtc tmem``: Tensor Memory data-path layouts, ``tcgen05.ld/st`` maps, ``tcgen05.cp`` maps, TMEM maps."""

from __future__ import annotations

from simtc.cli._common import add_output_options, emit, int_in, needs_subcommand

# The --shape choices name the model's tables (simtc.tmem.SHAPES, simtc.tmem.CP_SHAPES: the one source of the
# shapes); they are spelled out here only so that building the parser imports no numpy, and tests check that
# they equal the model's keys.
_LD_SHAPE_CHOICES = ("32x32b", "16x64b", "16x128b", "16x256b", "16x32bx2")
_CP_SHAPE_CHOICES = ("128x256b", "128x128b", "4x256b", "64x128b.warpx2::02_13", "64x128b.warpx2::01_23",
                     "32x128b.warpx4")
# TMEM geometry (PTX ISA 9.0 §9.7.16.1); tests check these equal simtc.tmem.address.LANES / COLUMNS (kept
# literal here so that building the parser imports no numpy).
_COLUMNS = 512
_REF_GEOM = "PTX ISA 9.0 §9.7.16.1"
_REF_QUAD = "PTX ISA 9.0 §9.7.16.8.1"
_WARPS = 32  # 1024 threads per block / 32 (CUDA C++ Programming Guide, technical specifications)


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
    shape_int = int_in(None, None, "MMA shapes are integers", "PTX ISA 9.0 §9.7.16.2.1 Table 39")
    lay.add_argument("--m", type=shape_int, required=True,
                     help="instruction M (32 and 64/128 with .ws or cta_group::1; 128/256 with --cta-group 2) "
                          "(required)")
    lay.add_argument("--n", type=shape_int, required=True, help="instruction N (required)")
    lay.add_argument("--ws", action="store_true", help="the .ws (weight-stationary) form")
    lay.add_argument("--cta-group", type=shape_int, choices=(1, 2), default=1,
                     help=".cta_group::1 (one CTA) or ::2 (a CTA pair)")
    lay.add_argument("--sparse", action="store_true", help="the .sp (sparse A) form")
    lay.add_argument("--lane-align", type=shape_int, choices=(0, 16), default=0, help="L0 for Layouts F and C")
    lay.add_argument("--c0", type=int_in(0, _COLUMNS - 1, f"TMEM columns are 0-{_COLUMNS - 1}", _REF_GEOM),
                     default=0, help="d-tmem column (0-511) where the layout starts, for the picture")
    add_output_options(lay)
    lay.set_defaults(handler=run_layout)

    ld = s.add_parser(
        "ld", help="thread/register <-> (lane, column) map of a tcgen05.ld / tcgen05.st",
        description="The fragment of a warp-collective tcgen05.ld (st is its inverse) (PTX ISA 9.0 §9.7.16.8.3; "
                    "CUTLASS SM100_TMEM_LOAD_* traits). JSON: map[thread][register] = [lane offset, column offset] "
                    "from taddr. With --pack (.pack::16b) a register's low 16 bits come from the low half of the "
                    "cell at column offset c and its high 16 bits from the low half of the cell at c + 1; "
                    "'halves'[thread][register] lists both cells as [[lane, c], [lane, c + 1]].")
    ld.add_argument("--shape", choices=_LD_SHAPE_CHOICES, required=True, help="the tcgen05.ld/st shape (required)")
    ld.add_argument("--num", type=int_in(None, None, ".num is a power of two 1..128", "PTX ISA 9.0 §9.7.16.8.3"),
                    default=1, help=".num repetition count (1, 2, 4, ..., 128)")
    ld.add_argument("--pack", action="store_true", help=".pack::16b (ld) / .unpack::16b (st)")
    ld.add_argument("--imm", type=int_in(0, _COLUMNS - 1, f"immHalfSplitoff is a column offset in TMEM's "
                                                          f"{_COLUMNS} columns", _REF_GEOM),
                    default=None, metavar="COLS",
                    help="16x32bx2 immHalfSplitoff, the column offset of threads 16-31's half "
                         "(default: num, 2*num packed, as CUTLASS passes)")
    ld.add_argument("--warp", type=int_in(0, _WARPS - 1, "a CTA has at most 1024 threads = warps 0-31; warp w may "
                                                         "touch only TMEM lanes 32*(w%4) .. 32*(w%4)+31",
                                          _REF_QUAD),
                    default=0, help="warp index in the CTA (0-31): its lane quadrant (w %% 4) is noted in the "
                                    "picture")
    add_output_options(ld)
    ld.set_defaults(handler=run_ld)

    cp = s.add_parser(
        "cp", help="row -> lane map of a tcgen05.cp shape",
        description="Where tcgen05.cp.cta_group::1 puts each shared-memory source row (PTX ISA 9.0 §9.7.16.9.2; "
                    "CUTLASS SM100_UTCCP_* traits). JSON: rows, columns per lane, lanes[row] = lane offsets.")
    cp.add_argument("--shape", choices=_CP_SHAPE_CHOICES, required=True, help="the tcgen05.cp shape (required)")
    add_output_options(cp)
    cp.set_defaults(handler=run_cp)

    mp = s.add_parser(
        "map", help="a whole-TMEM map (FlashMLA head64's O / Q / P regions)",
        description="The 128 x 512 TMEM map of FlashMLA's SM100 head64 decode kernel (V32): one 512-column "
                    "allocation by warp 0 holding O (0-255), Q (256-383), Q_tail (384-399), P (400-463).")
    pow2 = int_in(None, None, "a power of two")
    mp.add_argument("--by", choices=("region", "allocation"), default="region",
                    help="colour the cells by FlashMLA region or by allocation")
    mp.add_argument("--lanes-per-row", type=pow2, choices=(1, 2, 4, 8, 16, 32), default=4,
                    help="TMEM lanes drawn as one text row")
    mp.add_argument("--columns-per-char", type=pow2, choices=(1, 2, 4, 8, 16), default=8,
                    help="TMEM columns drawn as one character")
    add_output_options(mp)
    mp.set_defaults(handler=run_map)
    p.set_defaults(handler=needs_subcommand(p))


def run_layout(args) -> int:
    import numpy as np

    from simtc.errors import TmemAccessError, TmemShapeError
    from simtc.tmem import datapath_layout

    try:
        lay = datapath_layout(args.m, args.n, ws=args.ws, cta_group=args.cta_group, sparse=args.sparse,
                              lane_align=args.lane_align)
    except TmemShapeError as e:
        if args.m == 256 and args.cta_group == 1:  # the shape exists, for a CTA pair
            raise TmemShapeError(f"{e.message}; M=256 is a cta_group::2 shape: add --cta-group 2",
                                 rule=e.rule, ref=e.ref) from None
        raise
    if args.c0 + lay.columns > _COLUMNS:
        raise TmemAccessError(f"Layout {lay.letter} ({lay.m}x{lay.n}) is {lay.columns} columns wide, so "
                              f"--c0 {args.c0} would reach column {args.c0 + lay.columns - 1}; use "
                              f"--c0 0..{_COLUMNS - lay.columns}",
                              rule=f"c0 + the layout's width fits TMEM's columns 0-{_COLUMNS - 1}", ref=_REF_GEOM)
    lane, col = lay.full_map()
    lanes = lay.lanes()
    rule, tag = lay.a_duplication
    data = {
        "layout": lay.letter, "m": lay.m, "n": lay.n, "ws": lay.ws, "cta_group": lay.cta_group,
        "sparse": lay.sparse, "lane_align": lay.lane_align, "rows_per_cta": lay.rows,
        "lanes": [int(lanes[0]), int(lanes[-1])], "columns": lay.columns, "organization": lay.organization,
        "source": lay.status, "a_operand": {"rule": rule, "source": tag},
        "map": np.stack([lane, col], axis=-1).tolist(),
    }

    def view():
        from simtc.render.tmem import LayoutView

        return LayoutView(lay, c0=args.c0)

    return emit(args, data=data, view=view, title="simtc tmem layout")


def run_ld(args) -> int:
    import numpy as np

    from simtc.errors import TmemShapeError
    from simtc.tmem import LdStOp

    op = LdStOp(args.shape, args.num, pack=args.pack, imm=args.imm)
    if op.span > _COLUMNS:
        raise TmemShapeError(f"with --imm {op.imm} threads 16-31 read columns {op.imm}..{op.span - 1} from taddr, "
                             f"past TMEM's {_COLUMNS} columns; immHalfSplitoff + {op.half_span} (one half's "
                             f"columns) must be <= {_COLUMNS}",
                             rule=f"the access stays inside TMEM's {_COLUMNS} columns", ref=_REF_GEOM)
    lane, cols = op.cells()
    data = {
        "instruction": op.ptx("ld"), "store": op.ptx("st"), "cutlass": op.cutlass, "shape": op.shape.name,
        "num": op.num, "pack": op.pack, "imm": op.imm, "registers": op.nregs, "lanes": op.lanes,
        "columns": op.span,
        "map": np.stack([op.lane_offsets(), op.column_offsets()], axis=-1).tolist(),
    }
    if op.pack:
        data["halves"] = np.stack([lane, cols], axis=-1).tolist()

    def view():
        from simtc.render.tmem import LdView

        return LdView(op, warp=args.warp)

    return emit(args, data=data, view=view, title="simtc tmem ld")


def run_cp(args) -> int:
    from simtc.tmem import cp_shape

    cs = cp_shape(args.shape)
    lanes = cs.lanes().tolist()
    data = {"instruction": cs.ptx(), "rows": cs.rows, "columns": cs.columns, "source": cs.status,
            "cutlass": cs.cutlass, "lanes": lanes}
    def view():  # the view says when it shows only every k-th row
        from simtc.render.tmem import CpView

        return CpView(cs)

    return emit(args, data=data, view=view, title="simtc tmem cp")


def run_map(args) -> int:
    from simtc.kernels.flashmla import TMEM_V32
    from simtc.tmem import TensorMemory

    tm = TensorMemory()
    tm.alloc(512, warp=0)
    tm.relinquish_alloc_permit(warp=0)
    data = {
        "source": "FlashMLA csrc/sm100/decode/head64/config.h",
        "allocations": [{"column": a.column, "ncols": a.ncols, "warp": a.warp} for a in tm.allocations.values()],
        "regions": [{"name": r.name, "lanes": list(r.lanes), "columns": list(r.columns), "note": r.note}
                    for r in TMEM_V32],
    }

    def view():
        from simtc.render.tmem import TmemMapView

        return TmemMapView(tm, regions=TMEM_V32 if args.by == "region" else (), by=args.by,
                           lanes_per_row=args.lanes_per_row, columns_per_char=args.columns_per_char,
                           title="FlashMLA SM100 head64 decode (V32) TMEM map, coloured by " + args.by)

    return emit(args, data=data, view=view, title="simtc tmem map")
