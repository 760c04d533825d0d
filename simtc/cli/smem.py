"""``simtc smem``: shared-memory layouts and bank conflicts."""

from __future__ import annotations

from simtc.cli._common import UsageError, add_output_options, emit, int_in, int_list, needs_subcommand

DTYPES = ("bf16", "fp16", "e4m3", "tf32")
SWIZZLES = ("INTERLEAVE", "SW32", "SW64", "SW128", "SW128_32B")
_CAP_RULE = "227 KiB of shared memory per block"
_CAP_REF = "CUDA C++ Programming Guide, compute capability 9.0/10.0"


def _smem_bytes() -> int:
    """Shared memory one block may use (bytes), from the one definition in :mod:`simtc.smem.memory`."""
    from simtc.smem.memory import SMEM_CAPACITY

    return SMEM_CAPACITY["sm100"]


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
    extent = int_in(1, _smem_bytes, f"a tile has at least one element per side and fits in {_CAP_RULE}", _CAP_REF)
    lay.add_argument("--rows", type=extent, required=True, help="R: MN extent in elements (required)")
    lay.add_argument("--cols", type=extent, required=True, help="C: K extent in elements (required)")
    lay.add_argument("--dtype", choices=DTYPES, default="bf16", type=str.lower, help="element type")
    lay.add_argument("--major", choices=("K", "MN"), default="K", type=str.upper,
                     help="which extent is contiguous: K-major or MN-major")
    lay.add_argument("--swizzle", choices=SWIZZLES, default="SW128", type=str.upper,
                     help="swizzle mode of the canonical layout (INTERLEAVE = no swizzle)")
    lay.add_argument("--view", choices=("logical", "physical"), default="logical",
                     help="logical: matrix rows x 16-byte chunks; physical: 128-byte lines x chunks")
    lay.add_argument("--max-rows", type=int_in(1, None, "show at least one row"), default=None, metavar="N",
                     help="show at most N rows of the picture (default: all)")
    add_output_options(lay)
    lay.set_defaults(handler=run_layout)

    b = s.add_parser("banks", help="bank conflicts of one warp's shared-memory access",
                     description="Wavefronts one warp needs for a vector access. Thread t accesses "
                                 "base + t*stride, or the explicit --addresses.")
    b.add_argument("--width", type=int_in(None, None, "bytes per thread: 4, 8 or 16"), choices=(4, 8, 16),
                   default=4, help="bytes per thread (ld/st.shared .b32, .v2.b32, .v4.b32)")
    where = b.add_mutually_exclusive_group()
    where.add_argument("--stride", type=int_in(lambda: -_smem_bytes(), _smem_bytes,
                                               f"addresses stay inside the {_CAP_RULE}", _CAP_REF),
                       default=None, help="bytes between consecutive threads' addresses (default: --width)")
    where.add_argument("--addresses", type=int_list(0, lambda: _smem_bytes() - 1,
                                                    f"byte addresses inside the {_CAP_RULE}", _CAP_REF,
                                                    max_items=32),
                       default=None, metavar="A0,A1,...",
                       help="comma-separated byte addresses, one per thread, at most 32 (default: base + t*stride)")
    b.add_argument("--base", type=int_in(0, lambda: _smem_bytes() - 1, f"byte addresses inside the {_CAP_RULE}",
                                         _CAP_REF),
                   default=None, help="byte address of thread 0 (default: 0; not with --addresses)")
    add_output_options(b)
    b.set_defaults(handler=run_banks)
    p.set_defaults(handler=needs_subcommand(p))


def run_layout(args) -> int:
    from simtc.errors import LayoutError
    from simtc.smem import CanonicalLayout

    lay = CanonicalLayout(args.dtype, args.major, args.swizzle, args.rows, args.cols)
    if lay.nbytes > _smem_bytes():
        raise LayoutError(f"a {args.rows}x{args.cols} {args.dtype} tile takes {lay.nbytes} B, more than the "
                          f"{_smem_bytes()} B of shared memory a block may use", rule=_CAP_RULE, ref=_CAP_REF)
    data = None
    if args.json:
        desc = lay.descriptor(arch="sm100")
        data = {
            "dtype": lay.dtype.name, "major": lay.major.value, "swizzle": lay.swizzle.name,
            "rows": lay.rows, "cols": lay.cols,
            "offsets": lay.offsets().tolist(),
            "descriptor": {
                "start": desc.start, "lbo": desc.lbo, "sbo": desc.sbo, "base_offset": desc.base_offset,
                "sm100": desc.hex(),
                "sm90": desc.to_arch("sm90").hex() if lay.swizzle.sm90_code is not None else None,
            },
        }

    def view():
        from simtc.render.smem import TileView

        return TileView(lay, view=args.view, max_rows=args.max_rows)

    return emit(args, data=data, view=view, title="simtc smem layout")


def run_banks(args) -> int:
    import numpy as np

    from simtc.errors import BankError
    from simtc.smem import bank_conflicts

    cap = _smem_bytes()
    if args.addresses is not None:
        if args.base is not None:
            raise UsageError("--base goes with --stride; --addresses already gives every thread's address",
                             rule="give either --addresses or --base/--stride")
        addr = np.array(args.addresses, dtype=np.int64)
    else:
        stride = args.width if args.stride is None else args.stride
        addr = (args.base or 0) + stride * np.arange(32, dtype=np.int64)
    if (addr < 0).any():
        raise BankError(f"thread {int(np.argmax(addr < 0))} would access a negative address ({int(addr.min())})",
                        rule="shared-memory addresses are non-negative")
    if (addr + args.width > cap).any():
        t = int(np.argmax(addr + args.width > cap))
        raise BankError(f"thread {t} would access bytes {int(addr[t])}..{int(addr[t]) + args.width - 1}, outside "
                        f"the {cap} B of shared memory (addresses 0..{cap - 1})", rule=_CAP_RULE, ref=_CAP_REF)
    rep = bank_conflicts(addr, args.width)
    data = {"width": rep.width, "wavefronts": rep.wavefronts, "ideal": rep.ideal,
            "phase_wavefronts": list(rep.phase_wavefronts), "addresses": list(rep.addresses)}

    def view():
        from simtc.render.banks import BankMapView

        return BankMapView(rep)

    return emit(args, data=data, view=view, title="simtc smem banks")
