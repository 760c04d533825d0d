"""``simtc decode``: decode descriptor words taken from a kernel.

How a word is read (one rule for ``smem-desc`` and ``idesc``, :func:`read_word`): with a prefix, in its base
(``0x`` hex, ``0o`` octal, ``0b`` binary); without one, as **hex** when it has a letter a-f or a leading 0
(``04200490``: descriptor words are printed zero-padded in hex by SASS, CUTLASS and simtc), otherwise as
**decimal** (``69207184``). A word read without a prefix is announced (``note: read 04200490 as hex
0x04200490``, on stderr; ``--json`` has ``"input"`` and ``"base"``), and a refusal of such a word says how it
was read and how to write the other reading (``4000404000010000`` is decimal, a reserved bit is set; the message
says to write ``0x4000404000010000`` for hex).
"""

from __future__ import annotations

from simtc.cli._common import add_output_options, emit, needs_subcommand


def register(sub) -> None:
    p = sub.add_parser("decode", help="decode descriptors and instruction words",
                       description="Decode descriptor words (e.g. copied from a kernel or its SASS).")
    s = p.add_subparsers(dest="decode_command", metavar="WHAT")
    d = s.add_parser("smem-desc", help="a 64-bit shared-memory matrix descriptor (tcgen05 or wgmma)",
                     description="Decode a 64-bit shared-memory matrix descriptor into start, LBO, SBO (bytes), "
                                 "base offset, LBO mode, swizzle and version, and explain it.")
    d.add_argument("value", help="the descriptor word, e.g. 0x4000404000010000; without 0x it is hex when it has a "
                                 "leading 0 or a letter a-f, else decimal (a note says which)")
    d.add_argument("--arch", choices=("auto", "sm100", "sm90"), default="auto", type=str.lower,
                   help="sm100 (tcgen05) or sm90 (wgmma); auto: sm100 when bit 46 is set, else sm90")
    add_output_options(d)
    d.set_defaults(handler=run_smem_desc)
    i = s.add_parser("idesc", help="a 32-bit tcgen05.mma instruction descriptor",
                     description="Decode a 32-bit tcgen05.mma instruction descriptor (kind, M, N, formats, majors, "
                                 "negation, sparsity, .ws shift) and explain it. The word does not encode the kind; "
                                 "by default it is inferred from the format codes (0/1 -> kind::f16).")
    i.add_argument("value", help="the descriptor word, e.g. 0x04200490; without 0x it is hex when it has a leading "
                                 "0 or a letter a-f, else decimal (a note says which)")
    i.add_argument("--kind", choices=("auto", "f16", "tf32", "f8f6f4", "i8"), default="auto", type=str.lower,
                   help="the instruction kind the word belongs to; auto: inferred from the format codes")
    add_output_options(i)
    i.set_defaults(handler=run_idesc)
    p.set_defaults(handler=needs_subcommand(p))


_BASES = {"0x": 16, "0o": 8, "0b": 2}
_BASE_NAMES = {16: "hex", 10: "decimal", 8: "octal", 2: "binary"}


def read_word(text: str) -> tuple[int, int]:
    """``(value, base)`` of a descriptor word as typed (the rule in the module docstring); ``ValueError`` when it is
    no integer in that base.

    >>> read_word("0x04200490"), read_word("04200490"), read_word("69207184"), read_word("4000404000010000")
    ((69207184, 16), (69207184, 16), (69207184, 10), (4000404000010000, 10))
    >>> read_word("4000c04000010000")[1], read_word("0")
    (16, (0, 10))
    """
    s = text.strip().replace("_", "")
    if not s.isascii() or not s:  # int() would take Unicode digits such as '\uff10'
        raise ValueError(text)
    sign, body = ("-", s[1:]) if s[:1] in "+-" else ("", s)
    base = _BASES.get(body[:2].lower())
    if base is not None:
        return int(sign + body[2:], base), base
    if any(c in "abcdefABCDEF" for c in body) or (len(body) > 1 and body[0] == "0"):
        return int(sign + body, 16), 16
    return int(sign + body, 10), 10


def _bare(text: str) -> bool:
    return text.strip().lstrip("+-")[:2].lower() not in _BASES


def _reading(text: str, word: int, base: int, bits: int) -> str:
    """``read 04200490 as hex 0x04200490`` (and, for a decimal reading, how to write it as hex)."""
    hexed = f"0x{word:0{bits // 4}X}" if word >= 0 else f"-0x{-word:X}"
    out = f"read {text} as {_BASE_NAMES[base]}" + (f" = {hexed}" if base != 16 else f" {hexed}")
    digits = text.strip().replace("_", "")
    if base == 10 and digits.isdigit() and int(digits, 16) != word and int(digits, 16) < 1 << bits:
        out += f"; a word copied from a kernel is hex: write 0x{digits} for that"
    return out


def _word(text: str, bits: int, ref: str | None) -> tuple[int, int]:
    """``(word, base)``: the descriptor word as an integer, refused unless it is an unsigned ``bits``-bit value."""
    from simtc.errors import DescriptorError

    rule = f"descriptor is a {bits}-bit word"
    try:
        word, base = read_word(text)
    except ValueError:
        raise DescriptorError(f"not an integer: {text!r} (write it as 0x... for hex, or decimal)", rule=rule,
                              ref=ref) from None
    if not 0 <= word < 1 << bits:
        how = f" ({_reading(text, word, base, bits)})" if _bare(text) else ""
        raise DescriptorError(f"{text} does not fit in {bits} unsigned bits (0..0x{(1 << bits) - 1:X}){how}",
                              rule=rule, ref=ref)
    return word, base


def _decode(text: str, word: int, base: int, bits: int, build):
    """``build(word)``; a refusal of a word typed without a prefix says how the word was read."""
    from simtc.errors import SimtcError

    try:
        return build(word)
    except SimtcError as e:
        if not _bare(text):
            raise
        e.message = f"{e.message} ({_reading(text, word, base, bits)})"
        e.args = (e.message,)
        raise e from None


def _note(args, text: str, word: int, base: int, bits: int) -> None:
    import sys

    if _bare(text) and not args.json:
        print(f"note: {_reading(text, word, base, bits)} (rule: a leading 0 or a letter a-f means hex, other "
              "digits decimal; write 0x... to be explicit)", file=sys.stderr)


def run_smem_desc(args) -> int:
    from simtc.smem import SmemDescriptor

    word, base = _word(args.value, 64, "PTX ISA 9.0 §9.7.16.4.1 Table 40, §9.7.15.5.1.2.2")
    arch = args.arch
    if arch == "auto":
        arch = "sm100" if (word >> 46) & 1 else "sm90"
    desc = _decode(args.value, word, base, 64, lambda w: SmemDescriptor.from_u64(w, arch))
    _note(args, args.value, word, base, 64)
    data = {
        "input": args.value, "base": base,
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

    word, base = _word(args.value, 32, "PTX ISA 9.0 §9.7.16.4.2 Table 42")
    d = _decode(args.value, word, base, 32, lambda w: InstrDescriptor.from_u32(w, None if args.kind == "auto"
                                                                                 else args.kind))
    _note(args, args.value, word, base, 32)
    data = {
        "input": args.value, "base": base,
        "value": d.hex(), "kind": d.kind, "m": d.m, "n": d.n, "a_format": d.a_format, "b_format": d.b_format,
        "d_format": d.d_format, "a_major": d.a_major, "b_major": d.b_major, "negate_a": d.negate_a,
        "negate_b": d.negate_b, "sparse": d.sparse, "max_shift": d.max_shift, "explanation": d.explain(),
    }

    def view():
        from simtc.render.mma import InstrDescriptorView

        return InstrDescriptorView(d)

    return emit(args, data=data, view=view, title="simtc decode idesc")
