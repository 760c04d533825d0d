"""The 32-bit instruction descriptor of ``tcgen05.mma`` (kind::f16, tf32, f8f6f4, i8).

Bit layout (PTX ISA 9.0 §9.7.16.4.2 Table 42; CUTLASS ``cute/arch/mma_sm100_desc.hpp``
``UMMA::InstrDescriptor``):

=======  =====================================================================
bits     field
=======  =====================================================================
0-1      sparsity selector (0 unless sparse)
2        sparse flag
3        saturate (kind::i8 only)
4-5      D format: 0 F16, 1 F32, 2 S32
6        reserved (0)
7-9      A format (per kind: f16 0 F16 / 1 BF16; tf32 2; f8f6f4 0 E4M3, 1 E5M2,
         3 E2M3, 4 E3M2, 5 E2M1; i8 0 U8 / 1 S8)
10-12    B format (same codes)
13, 14   negate A, negate B (kind::f16, tf32, f8f6f4)
15, 16   A major, B major: 0 K-major, 1 MN-major
17-22    N >> 3 (1 = N 8 ... 32 = N 256)
23       reserved (0)
24-28    M >> 4 (2 = M 32, 4 = 64, 8 = 128, 16 = 256)
29       reserved (0)
30-31    ``.ws`` maximum B shift: 0 none, 1 -> 8, 2 -> 16, 3 -> 32
=======  =====================================================================

The word does not say which *kind* it belongs to (the kind is part of the opcode): format
code 1 is BF16 for kind::f16 but E5M2 for kind::f8f6f4. :meth:`InstrDescriptor.from_u32`
therefore takes the kind, or infers it from the format codes and says so.

>>> d = InstrDescriptor.from_u32(0x04200490)
>>> d.kind, d.m, d.n, d.a_format, d.b_format, d.d_format, d.a_major, d.b_major
('f16', 64, 128, 'bf16', 'bf16', 'fp32', 'K', 'K')
>>> hex(InstrDescriptor(kind="f16", m=64, n=256, a_format="bf16", b_format="bf16", b_major="MN").encode())
'0x4410490'
"""

from __future__ import annotations

from attrs import field, frozen

from simtc.errors import DescriptorError, LayoutError
from simtc.numerics.formats import dtype_name
from simtc.smem.layout import major

__all__ = ["FORMAT_CODES", "KINDS", "InstrDescriptor"]

_REF = "PTX ISA 9.0 §9.7.16.4.2 Table 42"
KINDS = ("f16", "tf32", "f8f6f4", "i8")

FORMAT_CODES: dict[str, dict[str, int]] = {
    "f16": {"fp16": 0, "bf16": 1},
    "tf32": {"tf32": 2},
    "f8f6f4": {"e4m3": 0, "e5m2": 1, "e2m3": 3, "e3m2": 4, "e2m1": 5},
    "i8": {"u8": 0, "s8": 1},
}
_D_CODES = {"fp16": 0, "fp32": 1, "s32": 2}
_D_ALLOWED = {"f16": ("fp16", "fp32"), "tf32": ("fp32",), "f8f6f4": ("fp16", "fp32"), "i8": ("s32",)}
_MN_MAJOR_OK = {"fp16", "bf16", "tf32", "e4m3", "e5m2", "u8", "s8"}
_SHIFTS = {0: 0, 1: 8, 2: 16, 3: 32}
_PTX_NAME = {"fp16": "F16", "fp32": "F32", "s32": "S32", "bf16": "BF16", "tf32": "TF32", "e4m3": "E4M3",
             "e5m2": "E5M2", "e2m3": "E2M3", "e3m2": "E3M2", "e2m1": "E2M1", "u8": "U8", "s8": "S8"}
def _fmt(v: str) -> str:
    return dtype_name(v)


def _major(v) -> str:
    try:
        return major(getattr(v, "value", v)).value
    except LayoutError:
        raise DescriptorError(f"major must be K or MN, got {v!r}", rule="transpose bits", ref=_REF) from None


@frozen
class InstrDescriptor:
    """A ``tcgen05.mma`` instruction descriptor as named fields (validated on construction).

    >>> InstrDescriptor(kind="f16", m=64, n=128, a_format="bf16", b_format="bf16", d_format="fp16")
    Traceback (most recent call last):
    ...
    simtc.errors.DescriptorError: bf16 inputs need an F32 accumulator (D format fp16) [...]
    """

    kind: str = field()
    m: int = field()
    n: int = field()
    a_format: str = field(converter=_fmt)
    b_format: str = field(converter=_fmt)
    d_format: str = field(default="fp32", converter=_fmt)
    a_major: str = field(default="K", converter=_major)
    b_major: str = field(default="K", converter=_major)
    negate_a: bool = field(default=False)
    negate_b: bool = field(default=False)
    sparse: bool = field(default=False)
    sparsity_selector: int = field(default=0)
    saturate: bool = field(default=False)
    max_shift: int = field(default=0)
    """``.ws`` maximum B shift in rows: 0, 8, 16 or 32."""

    def __attrs_post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check field-level legality; raise :class:`DescriptorError` naming the rule."""
        if self.kind not in KINDS:
            raise DescriptorError(f"unknown kind {self.kind!r}; known: {', '.join(KINDS)}",
                                  rule="instruction kinds", ref="PTX ISA 9.0 §9.7.16.10.9")
        codes = FORMAT_CODES[self.kind]
        for name in ("a_format", "b_format"):
            if getattr(self, name) not in codes:
                raise DescriptorError(f"{name} {getattr(self, name)!r} is not a kind::{self.kind} input type "
                                      f"(allowed: {', '.join(codes)})", rule=f"kind::{self.kind} input types",
                                      ref="PTX ISA 9.0 §9.7.16.2.1 Table 39")
        if self.d_format not in _D_ALLOWED[self.kind]:
            raise DescriptorError(f"D format {self.d_format!r} is not allowed for kind::{self.kind} "
                                  f"(allowed: {', '.join(_D_ALLOWED[self.kind])})",
                                  rule=f"kind::{self.kind} accumulator types", ref="PTX ISA 9.0 §9.7.16.2.1 Table 39")
        if self.kind in ("f16", "i8") and self.a_format != self.b_format:
            raise DescriptorError(f"kind::{self.kind} needs A and B of one type, got {self.a_format} and "
                                  f"{self.b_format}", rule="A and B types match",
                                  ref="PTX ISA 9.0 §9.7.16.2.1 Table 39")
        if "bf16" in (self.a_format, self.b_format) and self.d_format != "fp32":
            raise DescriptorError(f"bf16 inputs need an F32 accumulator (D format {self.d_format})",
                                  rule="bf16 requires an f32 D", ref="PTX ISA 9.0 §9.7.16.2.1 Table 39")
        for name in ("a_major", "b_major"):
            fmt = self.a_format if name == "a_major" else self.b_format
            if getattr(self, name) == "MN" and fmt not in _MN_MAJOR_OK:
                raise DescriptorError(f"{fmt} operands cannot be MN-major ({name} = MN)",
                                      rule="MN-major only for 16-bit, tf32, e4m3/e5m2 and 8-bit integer types",
                                      ref=_REF)
        if self.m not in (32, 64, 128, 256):
            raise DescriptorError(f"M = {self.m} cannot be encoded (M >> 4 in bits 24-28: 32, 64, 128 or 256)",
                                  rule="M field values", ref=_REF)
        if not isinstance(self.n, int) or not (8 <= self.n <= 256 and self.n % 8 == 0):
            raise DescriptorError(f"N = {self.n} cannot be encoded (N >> 3 in bits 17-22: 8 ... 256, step 8)",
                                  rule="N field values", ref=_REF)
        if (self.negate_a or self.negate_b) and self.kind == "i8":
            raise DescriptorError("negate A/B is not available for kind::i8", rule="negate bits", ref=_REF)
        if self.saturate and self.kind != "i8":
            raise DescriptorError("saturate is only for kind::i8", rule="saturate bit", ref=_REF)
        if self.sparse and self.kind == "tf32":
            raise DescriptorError("sparse kind::tf32 is not a thing here", rule="sparse flag", ref=_REF)
        if not self.sparse and self.sparsity_selector:
            raise DescriptorError("a sparsity selector needs the sparse flag", rule="sparsity selector", ref=_REF)
        if self.sparsity_selector not in (0, 1, 2, 3):
            raise DescriptorError("sparsity selector is 2 bits", rule="sparsity selector", ref=_REF)
        if self.max_shift not in _SHIFTS.values():
            raise DescriptorError(f"max_shift must be 0, 8, 16 or 32 rows, got {self.max_shift!r}",
                                  rule=".ws maximum B shift", ref=_REF)

    # ---- encode / decode -------------------------------------------------------------------
    def encode(self) -> int:
        """The 32-bit descriptor word."""
        codes = FORMAT_CODES[self.kind]
        shift_code = {v: k for k, v in _SHIFTS.items()}[self.max_shift]
        return (self.sparsity_selector | (int(self.sparse) << 2) | (int(self.saturate) << 3)
                | (_D_CODES[self.d_format] << 4) | (codes[self.a_format] << 7) | (codes[self.b_format] << 10)
                | (int(self.negate_a) << 13) | (int(self.negate_b) << 14)
                | ((self.a_major == "MN") << 15) | ((self.b_major == "MN") << 16)
                | ((self.n >> 3) << 17) | ((self.m >> 4) << 24) | (shift_code << 30))

    def hex(self) -> str:
        return f"0x{self.encode():08x}"

    @staticmethod
    def infer_kind(word: int) -> str:
        """The kind a word most likely belongs to (formats 0/1: f16; 2: tf32; 3-5: f8f6f4; D S32: i8)."""
        a, b, d = (word >> 7) & 7, (word >> 10) & 7, (word >> 4) & 3
        if d == 2:
            return "i8"
        if a == 2 or b == 2:
            return "tf32"
        if a in (3, 4, 5) or b in (3, 4, 5):
            return "f8f6f4"
        return "f16"

    @classmethod
    def from_u32(cls, word: int | str, kind: str | None = None) -> InstrDescriptor:
        """Decode a 32-bit word; reserved bits and illegal fields raise :class:`DescriptorError`."""
        if isinstance(word, str):
            try:
                if not word.isascii():  # int() would take Unicode digits such as '\uff10'
                    raise ValueError(word)
                word = int(word, 0)
            except ValueError:
                raise DescriptorError(f"not an integer: {word!r}", rule="descriptor is a 32-bit word") from None
        if not isinstance(word, int) or not 0 <= word < 1 << 32:
            raise DescriptorError(f"an instruction descriptor is a 32-bit unsigned integer, got {word!r}",
                                  rule="descriptor is a 32-bit word", ref=_REF)
        for bit in (6, 23, 29):
            if (word >> bit) & 1:
                raise DescriptorError(f"reserved bit {bit} is set", rule="reserved bits are zero", ref=_REF)
        kind = kind or cls.infer_kind(word)
        if kind not in KINDS:
            raise DescriptorError(f"unknown kind {kind!r}; known: {', '.join(KINDS)}", rule="instruction kinds")
        by_code = {v: k for k, v in FORMAT_CODES[kind].items()}
        fmt = {}
        for name, lo in (("a_format", 7), ("b_format", 10)):
            code = (word >> lo) & 7
            if code not in by_code:
                raise DescriptorError(f"{name} code {code} (bits {lo}-{lo + 2}) is not defined for kind::{kind} "
                                      f"(codes: {', '.join(f'{v} {k}' for k, v in FORMAT_CODES[kind].items())})",
                                      rule=f"kind::{kind} input formats", ref=_REF)
            fmt[name] = by_code[code]
        d_code = (word >> 4) & 3
        d_names = {v: k for k, v in _D_CODES.items()}
        if d_code not in d_names:
            raise DescriptorError(f"D format code {d_code} (bits 4-5) is not defined (0 F16, 1 F32, 2 S32)",
                                  rule="D formats", ref=_REF)
        n_field, m_field = (word >> 17) & 0x3F, (word >> 24) & 0x1F
        if n_field == 0 or n_field > 32:
            raise DescriptorError(f"N field {n_field} (bits 17-22) is outside 1 (N=8) ... 32 (N=256)",
                                  rule="N field values", ref=_REF)
        if m_field not in (2, 4, 8, 16):
            raise DescriptorError(f"M field {m_field} (bits 24-28) is not 2, 4, 8 or 16 (M = 32, 64, 128, 256)",
                                  rule="M field values", ref=_REF)
        return cls(kind=kind, m=m_field << 4, n=n_field << 3, a_format=fmt["a_format"], b_format=fmt["b_format"],
                   d_format=d_names[d_code], a_major="MN" if (word >> 15) & 1 else "K",
                   b_major="MN" if (word >> 16) & 1 else "K", negate_a=bool((word >> 13) & 1),
                   negate_b=bool((word >> 14) & 1), sparse=bool((word >> 2) & 1), sparsity_selector=word & 3,
                   saturate=bool((word >> 3) & 1), max_shift=_SHIFTS[(word >> 30) & 3])

    # ---- explanation -----------------------------------------------------------------------
    def fields(self) -> list[tuple[str, str, int, str]]:
        """Rows (field, bits, raw value, meaning) in bit order."""
        w = self.encode()
        r = lambda lo, n: (w >> lo) & ((1 << n) - 1)  # noqa: E731
        return [
            ("sparsity_selector", "0-1", r(0, 2), str(self.sparsity_selector)),
            ("sparse", "2", r(2, 1), "sparse A (2:4)" if self.sparse else "dense"),
            ("saturate", "3", r(3, 1), "saturate" if self.saturate else "no saturation"),
            ("d_format", "4-5", r(4, 2), _PTX_NAME[self.d_format]),
            ("a_format", "7-9", r(7, 3), _PTX_NAME[self.a_format]),
            ("b_format", "10-12", r(10, 3), _PTX_NAME[self.b_format]),
            ("negate_a", "13", r(13, 1), "A negated" if self.negate_a else "A as is"),
            ("negate_b", "14", r(14, 1), "B negated" if self.negate_b else "B as is"),
            ("a_major", "15", r(15, 1), f"A {self.a_major}-major"),
            ("b_major", "16", r(16, 1), f"B {self.b_major}-major"),
            ("n", "17-22", r(17, 6), f"N = {self.n} (field = N >> 3)"),
            ("m", "24-28", r(24, 5), f"M = {self.m} (field = M >> 4)"),
            ("max_shift", "30-31", r(30, 2), f".ws maximum B shift {self.max_shift}" if self.max_shift
             else "no B shift"),
        ]

    def explain(self) -> list[str]:
        """Plain-language sentences about the instruction this word describes.

        >>> InstrDescriptor.from_u32(0x04410490).explain()[0]
        'kind::f16 instruction descriptor 0x04410490: D[64 x 256] (F32) += A[64 x K] (BF16) x B[K x 256] (BF16).'
        """
        k = {"f16": 16, "tf32": 8, "f8f6f4": 32, "i8": 32}[self.kind] * (2 if self.sparse else 1)
        lines = [f"kind::{self.kind} instruction descriptor {self.hex()}: D[{self.m} x {self.n}] "
                 f"({_PTX_NAME[self.d_format]}) += A[{self.m} x K] ({_PTX_NAME[self.a_format]}) x "
                 f"B[K x {self.n}] ({_PTX_NAME[self.b_format]})."]
        lines.append(f"K per instruction is {k} (implied by the kind{', doubled by sparsity' if self.sparse else ''};"
                     " it is not encoded).")
        lines.append(f"A is {self.a_major}-major and B is {self.b_major}-major "
                     "(K-major: K contiguous; MN-major: the transpose).")
        shapes = []
        if self.m in (64, 128):
            shapes.append(f"cta_group::1 M={self.m}")
        if self.m in (128, 256):
            shapes.append(f"cta_group::2 M={self.m} ({self.m // 2} rows per CTA)")
        if self.m in (32, 64, 128) and self.n in (64, 128, 256):
            shapes.append(f".ws M={self.m}")
        lines.append("M and N fit: " + ", ".join(shapes) + "." if shapes else
                     f"No tcgen05.mma variant takes M={self.m} with N={self.n}.")
        if self.negate_a or self.negate_b:
            lines.append("Negation: " + " and ".join(x for x, f in (("A", self.negate_a), ("B", self.negate_b)) if f)
                         + " enter the product negated.")
        if self.max_shift:
            lines.append(f".ws B shift up to {self.max_shift} rows.")
        if self.infer_kind(self.encode()) == self.kind and self.kind == "f16":
            lines.append("The word does not encode the kind: format codes 0/1 read as kind::f16 (F16/BF16); under "
                         "kind::f8f6f4 they would mean E4M3/E5M2.")
        return lines
