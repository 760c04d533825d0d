"""``simtc smem``: shared-memory layouts and bank conflicts."""

from __future__ import annotations

from simtc.cli._common import add_output_options, emit_json, show

DTYPES = ("bf16", "fp16", "e4m3", "tf32")
SWIZZLES = ("INTERLEAVE", "SW32", "SW64", "SW128", "SW128_32B")


def register(sub) -> None:
    p = sub.add_parser("smem", help="shared-memory operand layouts, descriptors and bank conflicts",
                       description="Shared-memory operand layouts (CUTLASS canonical atoms), their descriptors, "
                                   "and bank conflicts.")
    s = p.add_subparsers(dest="smem_command", metavar="SUBCOMMAND")
    lay = s.add_parser(
        "layout", help="where every element of an operand tile lives",
        description="Byte offsets of an operand tile X[mn][k] (R = MN extent, C = K extent) in a canonical "
                    "K- or MN-major layout, built like CUTLASS's tile_to_shape; tile base 1024-byte aligned. "
                    "JSON: offsets[r][c] = byte offset of X[r][c] after swizzling, and the descriptor CUTLASS "
                    "builds for the first instruction-K slice at start address 0.")
    lay.add_argument("--rows", type=int, required=True, help="R: MN extent in elements")
    lay.add_argument("--cols", type=int, required=True, help="C: K extent in elements")
    lay.add_argument("--dtype", choices=DTYPES, default="bf16")
    lay.add_argument("--major", choices=("K", "MN"), default="K")
    lay.add_argument("--swizzle", choices=SWIZZLES, default="SW128", type=str.upper)
    lay.add_argument("--view", choices=("logical", "physical"), default="logical",
                     help="logical: matrix rows x 16-byte chunks; physical: 128-byte lines x chunks")
    lay.add_argument("--max-rows", type=int, default=None, help="show at most this many rows")
    add_output_options(lay)
    lay.set_defaults(handler=run_layout)

    b = s.add_parser("banks", help="bank conflicts of one warp's shared-memory access",
                     description="Wavefronts one warp needs for a vector access. Thread t accesses "
                                 "base + t*stride (or the explicit --addresses).")
    b.add_argument("--width", type=int, choices=(4, 8, 16), default=4, help="bytes per thread")
    b.add_argument("--stride", type=int, default=None, help="bytes between consecutive threads' addresses")
    b.add_argument("--base", type=int, default=0)
    b.add_argument("--addresses", type=str, default=None, help="comma-separated byte addresses, one per thread")
    add_output_options(b)
    b.set_defaults(handler=run_banks)
    p.set_defaults(handler=lambda args: (p.print_help(), 0)[1])


def run_layout(args) -> int:
    from simtc.errors import LayoutError
    from simtc.smem import CanonicalLayout
    from simtc.smem.memory import SMEM_CAPACITY

    lay = CanonicalLayout(args.dtype, args.major, args.swizzle, args.rows, args.cols)
    if lay.nbytes > SMEM_CAPACITY["sm100"]:
        raise LayoutError(f"a {args.rows}x{args.cols} {args.dtype} tile takes {lay.nbytes} B, more than the "
                          f"{SMEM_CAPACITY['sm100']} B of shared memory a block may use",
                          rule="227 KiB per block", ref="CUDA C++ Programming Guide, compute capability 9.0/10.0")
    if args.json:
        desc = lay.descriptor(arch="sm100")
        emit_json({
            "dtype": lay.dtype.name, "major": lay.major.value, "swizzle": lay.swizzle.name,
            "rows": lay.rows, "cols": lay.cols,
            "offsets": lay.offsets().tolist(),
            "descriptor": {
                "start": desc.start, "lbo": desc.lbo, "sbo": desc.sbo, "base_offset": desc.base_offset,
                "sm100": desc.hex(),
                "sm90": desc.to_arch("sm90").hex() if lay.swizzle.sm90_code is not None else None,
            },
        })
        if not args.svg:
            return 0
    from simtc.render.smem import TileView

    view = TileView(lay, view=args.view, max_rows=args.max_rows)
    if args.json:  # --json together with --svg: write the picture only
        from simtc.render.export import to_svg

        to_svg(view, args.svg, width=args.term_width or 140, title="simtc smem layout")
        return 0
    show(view, args, title="simtc smem layout")
    return 0


def run_banks(args) -> int:
    import numpy as np

    from simtc.errors import BankError
    from simtc.smem import bank_conflicts

    if args.addresses:
        try:
            addr = np.array([int(x, 0) for x in args.addresses.split(",") if x.strip()], dtype=np.int64)
        except ValueError:
            raise BankError(f"--addresses must be comma-separated integers, got {args.addresses!r}",
                            rule="byte addresses are integers") from None
    else:
        stride = args.width if args.stride is None else args.stride
        addr = args.base + stride * np.arange(32, dtype=np.int64)
    if (addr < 0).any():
        raise BankError(f"thread {int(np.argmax(addr < 0))} would access a negative address ({int(addr.min())})",
                        rule="shared-memory addresses are non-negative")
    rep = bank_conflicts(addr, args.width)
    if args.json:
        emit_json({"width": rep.width, "wavefronts": rep.wavefronts, "ideal": rep.ideal,
                   "phase_wavefronts": list(rep.phase_wavefronts), "addresses": list(rep.addresses)})
        return 0
    from simtc.render.banks import BankMapView

    show(BankMapView(rep), args, title="simtc smem banks")
    return 0
