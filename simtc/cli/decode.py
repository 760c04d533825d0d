"""``simtc decode``: decode descriptor words taken from a kernel."""

from __future__ import annotations

from simtc.cli._common import add_output_options, emit, needs_subcommand


def register(sub) -> None:
    p = sub.add_parser("decode", help="decode descriptors and instruction words",
                       description="Decode descriptor words (e.g. copied from a kernel or its SASS).")
    s = p.add_subparsers(dest="decode_command", metavar="WHAT")
    d = s.add_parser("smem-desc", help="a 64-bit shared-memory matrix descriptor (tcgen05 or wgmma)",
                     description="Decode a 64-bit shared-memory matrix descriptor into start, LBO, SBO (bytes), "
                                 "base offset, LBO mode, swizzle and version, and explain it.")
    d.add_argument("value", help="the descriptor word, e.g. 0x4000404000010000")
    d.add_argument("--arch", choices=("auto", "sm100", "sm90"), default="auto", type=str.lower,
                   help="sm100 (tcgen05) or sm90 (wgmma); auto: sm100 when bit 46 is set, else sm90")
    add_output_options(d)
    d.set_defaults(handler=run_smem_desc)
    i = s.add_parser("idesc", help="a 32-bit tcgen05.mma instruction descriptor",
                     description="Decode a 32-bit tcgen05.mma instruction descriptor (kind, M, N, formats, majors, "
                                 "negation, sparsity, .ws shift) and explain it. The word does not encode the kind; "
                                 "by default it is inferred from the format codes (0/1 -> kind::f16).")
    i.add_argument("value", help="the descriptor word, e.g. 0x04200490")
    i.add_argument("--kind", choices=("auto", "f16", "tf32", "f8f6f4", "i8"), default="auto", type=str.lower,
                   help="the instruction kind the word belongs to; auto: inferred from the format codes")
    add_output_options(i)
    i.set_defaults(handler=run_idesc)
    p.set_defaults(handler=needs_subcommand(p))


def _word(text: str, bits: int, ref: str | None):
    """The descriptor word as an integer, refused unless it is an unsigned ``bits``-bit value."""
    from simtc.cli._common import parse_int
    from simtc.errors import DescriptorError

    rule = f"descriptor is a {bits}-bit word"
    try:
        word = parse_int(text)
    except ValueError:
        raise DescriptorError(f"not an integer: {text!r} (write it as 0x... or decimal)", rule=rule,
                              ref=ref) from None
    if not 0 <= word < 1 << bits:
        raise DescriptorError(f"{text} does not fit in {bits} unsigned bits (0..0x{(1 << bits) - 1:X})",
                              rule=rule, ref=ref)
    return word


def run_smem_desc(args) -> int:
    from simtc.smem import SmemDescriptor

    word = _word(args.value, 64, "PTX ISA 9.0 §9.7.16.4.1 Table 40, §9.7.15.5.1.2.2")
    arch = args.arch
    if arch == "auto":
        arch = "sm100" if (word >> 46) & 1 else "sm90"
    desc = SmemDescriptor.from_u64(word, arch)
    data = {
        "value": desc.hex(), "arch": desc.arch, "start": desc.start, "lbo": desc.lbo, "sbo": desc.sbo,
        "base_offset": desc.base_offset, "lbo_mode": desc.lbo_mode, "swizzle": desc.layout_type.name,
        "layout_type": desc.layout_type.sm100_code if desc.arch == "sm100" else desc.layout_type.sm90_code,
        "version": (word >> 46) & 0x7, "explanation": desc.explain(),
    }

    def view():
        from simtc.render.smem import DescriptorView

        return DescriptorView(desc)

    return emit(args, data=data, view=view, title="simtc decode smem-desc")


def run_idesc(args) -> int:
    from simtc.mma.idesc import InstrDescriptor

    word = _word(args.value, 32, "PTX ISA 9.0 §9.7.16.4.2 Table 42")
    d = InstrDescriptor.from_u32(word, None if args.kind == "auto" else args.kind)
    data = {
        "value": d.hex(), "kind": d.kind, "m": d.m, "n": d.n, "a_format": d.a_format, "b_format": d.b_format,
        "d_format": d.d_format, "a_major": d.a_major, "b_major": d.b_major, "negate_a": d.negate_a,
        "negate_b": d.negate_b, "sparse": d.sparse, "max_shift": d.max_shift, "explanation": d.explain(),
    }

    def view():
        from simtc.render.mma import InstrDescriptorView

        return InstrDescriptorView(d)

    return emit(args, data=data, view=view, title="simtc decode idesc")
