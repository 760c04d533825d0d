"""64-bit shared-memory matrix descriptors of ``tcgen05.mma`` (sm100) and ``wgmma`` (sm90).

Field layout (PTX ISA 9.0 §9.7.16.4.1 Table 40 for sm100; §9.7.15.5.1.2.2 for sm90;
CUTLASS ``cute/arch/mma_sm100_desc.hpp`` ``UMMA::SmemDescriptor`` and
``cute/arch/mma_sm90_desc.hpp`` ``GmmaDescriptor``). Address-like fields store
``(bytes & 0x3FFFF) >> 4``:

==========  =====================================  ======================================
bits        sm100 (tcgen05)                        sm90 (wgmma)
==========  =====================================  ======================================
0-13        start address >> 4                     start address >> 4
16-29       leading-dimension byte offset >> 4     leading-dimension byte offset >> 4
32-45       stride-dimension byte offset >> 4      stride-dimension byte offset >> 4
46-48       fixed 0b001 ("version" 1)              0
49-51       matrix base offset                     matrix base offset
52          LBO mode (0 relative, 1 absolute)      0
61-63       layout type 0/1/2/4/6                  bits 62-63: swizzle 0/1/2/3
==========  =====================================  ======================================

>>> d = SmemDescriptor.from_u64(0x4000404000010000)
>>> d.start, d.lbo, d.sbo, d.layout_type.name
(0, 16, 1024, 'SW128')
>>> hex(d.to_arch("sm90").encode())
'0x4000004000010000'
"""

from __future__ import annotations

import attrs
from attrs import field, frozen

from simtc.errors import DescriptorError, SimtcError
from simtc.smem.swizzle import SwizzleMode, swizzle_mode

__all__ = ["ARCHS", "SmemDescriptor", "arch_name"]

ARCHS = ("sm100", "sm90")
_REF100 = "PTX ISA 9.0 §9.7.16.4.1 Table 40"
_REF90 = "PTX ISA 9.0 §9.7.15.5.1.2.2"
_MAX_ADDR = 1 << 18  # the 14-bit field holds bytes >> 4 of an 18-bit byte value


def arch_name(value, error: type[SimtcError] = DescriptorError) -> str:
    """The one parser of architecture names: ``"sm100"`` (tcgen05, Blackwell) or ``"sm90"`` (wgmma, Hopper).

    >>> arch_name("sm_90a"), arch_name("Blackwell")
    ('sm90', 'sm100')
    """
    v = str(value).lower()
    if v in ("sm100", "sm_100", "sm_100a", "sm100a", "tcgen05", "blackwell"):
        return "sm100"
    if v in ("sm90", "sm_90", "sm_90a", "sm90a", "wgmma", "hopper"):
        return "sm90"
    raise error(f"unknown architecture {value!r}; use sm100 or sm90",
                rule="simtc models sm100 (tcgen05) and sm90 (wgmma)")


def _ref(arch: str) -> str:
    return _REF100 if arch == "sm100" else _REF90


@frozen
class SmemDescriptor:
    """A shared-memory matrix descriptor as fields; byte values, not encoded ones.

    Construct from fields (values are checked at once) or with :meth:`from_u64`; turn it into
    the 64-bit word with :meth:`encode`. :meth:`advance` is CUTLASS's K-stepping
    (``DescriptorIterator``: the start address moves, nothing else changes).

    >>> SmemDescriptor(start=73728, lbo=16, sbo=1024, layout_type="SW128").hex()
    '0x4000404000011200'
    """

    start: int = field()
    """Start address in bytes (shared-window address of the matrix's first byte)."""
    lbo: int = field()
    """Leading-dimension byte offset, bytes (for ``lbo_mode=1``: an absolute address)."""
    sbo: int = field()
    """Stride-dimension byte offset, bytes."""
    layout_type: SwizzleMode = field(converter=swizzle_mode)
    base_offset: int = field(default=0)
    """Matrix base offset (0-7): the pattern phase when a swizzle atom is not on its boundary."""
    lbo_mode: int = field(default=0)
    """0: LBO is relative; 1: LBO is an absolute address (sm_103a; sm100 only)."""
    arch: str = field(default="sm100", converter=arch_name)

    def __attrs_post_init__(self) -> None:
        self.validate()

    # ---- rules -------------------------------------------------------------------------------
    def validate(self) -> None:
        """Check every field rule; raise :class:`DescriptorError` naming the broken rule."""
        ref = _ref(self.arch)
        for name in ("start", "lbo", "sbo"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise DescriptorError(f"{name} must be an integer number of bytes, got {v!r}", rule="field types")
            if v < 0 or v >= _MAX_ADDR:
                raise DescriptorError(
                    f"{name} = {v} B does not fit the 14-bit field (0 <= bytes < {_MAX_ADDR}, stored as bytes >> 4)",
                    rule="address fields hold (x & 0x3FFFF) >> 4", ref=ref,
                )
            if v % 16:
                raise DescriptorError(f"{name} = {v} B is not 16-byte aligned", rule="16-byte alignment", ref=ref)
        if self.arch == "sm90" and self.layout_type.sm90_code is None:
            raise DescriptorError(
                f"layout {self.layout_type.value} does not exist on sm90 (wgmma knows none, 32B, 64B, 128B)",
                rule="sm90 swizzle field values 0-3", ref=_REF90,
            )
        if not isinstance(self.base_offset, int) or not 0 <= self.base_offset <= 7:
            raise DescriptorError(f"base_offset must be 0..7, got {self.base_offset!r}",
                                  rule="3-bit base-offset field", ref=ref)
        if self.base_offset and self.layout_type is SwizzleMode.INTERLEAVE:
            raise DescriptorError(
                "a non-zero base offset has no meaning without a swizzle (valid for all swizzle modes except none)",
                rule="base offset only with swizzled layouts", ref=ref,
            )
        if self.lbo_mode not in (0, 1):
            raise DescriptorError(f"lbo_mode must be 0 or 1, got {self.lbo_mode!r}", rule="1-bit LBO mode", ref=ref)
        if self.lbo_mode and self.arch == "sm90":
            raise DescriptorError("sm90 descriptors have no LBO mode bit", rule="sm90 field layout", ref=_REF90)

    def check_base_offset(self, pattern_start: int) -> None:
        """Check the base-offset rule for a swizzle pattern that starts at ``pattern_start``.

        Base offset must be 0 when the pattern starts on its natural boundary, else
        ``(pattern_start >> 7) % 8`` (PTX ISA 9.0 §9.7.16.3 Table 41).

        >>> SmemDescriptor(start=256, lbo=16, sbo=1024, layout_type="SW128").check_base_offset(256)
        Traceback (most recent call last):
        ...
        simtc.errors.DescriptorError: the SWIZZLE_128B pattern starts at 256, off its 1024-byte boundary:
        base offset must be 2, is 0 [rule: base offset = (pattern start >> 7) mod 8; ...]
        """
        if self.layout_type is SwizzleMode.INTERLEAVE:
            return
        align = self.layout_type.alignment
        want = 0 if pattern_start % align == 0 else (pattern_start >> 7) % 8
        if self.base_offset != want:
            where = "on" if pattern_start % align == 0 else "off"
            raise DescriptorError(
                f"the {self.layout_type.value} pattern starts at {pattern_start}, {where} its {align}-byte "
                f"boundary: base offset must be {want}, is {self.base_offset}",
                rule="base offset = (pattern start >> 7) mod 8", ref="PTX ISA 9.0 §9.7.16.3 Table 41",
            )

    # ---- encode / decode -------------------------------------------------------------------
    def encode(self) -> int:
        """The 64-bit descriptor word.

        >>> hex(SmemDescriptor(start=0, lbo=16, sbo=512, layout_type="SW64", arch="sm90").encode())
        '0x8000002000010000'
        """
        word = (self.start >> 4) | ((self.lbo >> 4) << 16) | ((self.sbo >> 4) << 32) | (self.base_offset << 49)
        if self.arch == "sm100":
            word |= (1 << 46) | (self.lbo_mode << 52) | (self.layout_type.sm100_code << 61)
        else:
            word |= self.layout_type.sm90_code << 62
        return word

    def hex(self) -> str:
        return f"0x{self.encode():016x}"

    @classmethod
    def from_u64(cls, word: int, arch: str = "sm100") -> SmemDescriptor:
        """Decode a 64-bit descriptor word; reserved bits and illegal codes raise.

        >>> SmemDescriptor.from_u64(0xE000404000010000)
        Traceback (most recent call last):
        ...
        simtc.errors.DescriptorError: layout type 7 in bits 61-63 is not defined (legal: 0 none, 1 128B with 32B
        atomicity, 2 128B, 4 64B, 6 32B) [rule: sm100 layout types; PTX ISA 9.0 §9.7.16.4.1 Table 40]
        """
        arch = arch_name(arch)
        ref = _ref(arch)
        if isinstance(word, str):
            try:
                if not word.isascii():  # int() would take Unicode digits such as '\uff10'
                    raise ValueError(word)
                word = int(word, 0)
            except ValueError:
                raise DescriptorError(f"not an integer: {word!r}", rule="descriptor is a 64-bit word") from None
        if not isinstance(word, int) or not 0 <= word < 1 << 64:
            raise DescriptorError(f"descriptor must be a 64-bit unsigned integer, got {word!r}",
                                  rule="descriptor is a 64-bit word", ref=ref)
        f = lambda lo, n: (word >> lo) & ((1 << n) - 1)  # noqa: E731
        if arch == "sm100":
            zero_bits = [(14, 2), (30, 2), (53, 8)]
            version = f(46, 3)
            if version != 1:
                raise DescriptorError(
                    f"bits 46-48 hold {version:#05b}; sm100 requires the fixed value 0b001 "
                    "(an sm90 wgmma descriptor? decode it with arch sm90)",
                    rule="fixed constant 0b001 in bits 46-48", ref=ref,
                )
            code = f(61, 3)
            modes = {m.sm100_code: m for m in SwizzleMode}
            if code not in modes:
                raise DescriptorError(
                    f"layout type {code} in bits 61-63 is not defined (legal: 0 none, 1 128B with 32B atomicity, "
                    "2 128B, 4 64B, 6 32B)", rule="sm100 layout types", ref=ref,
                )
            layout, lbo_mode = modes[code], f(52, 1)
        else:
            zero_bits = [(14, 2), (30, 2), (46, 3), (52, 10)]
            modes = {m.sm90_code: m for m in SwizzleMode if m.sm90_code is not None}
            layout, lbo_mode = modes[f(62, 2)], 0
        for lo, n in zero_bits:
            if f(lo, n):
                hint = " (an sm100 descriptor? decode it with arch sm100)" if arch == "sm90" and lo == 46 else ""
                raise DescriptorError(
                    f"reserved bits {lo}-{lo + n - 1} must be 0, hold {f(lo, n):#x}{hint}",
                    rule="reserved descriptor bits are zero", ref=ref,
                )
        return cls(start=f(0, 14) << 4, lbo=f(16, 14) << 4, sbo=f(32, 14) << 4, layout_type=layout,
                   base_offset=f(49, 3), lbo_mode=lbo_mode, arch=arch)

    # ---- derived -------------------------------------------------------------------------------
    def advance(self, nbytes: int) -> SmemDescriptor:
        """The descriptor with its start address moved by ``nbytes`` (K-stepping).

        >>> SmemDescriptor(start=0, lbo=16, sbo=1024, layout_type="SW128").advance(32).hex()
        '0x4000404000010002'
        """
        return attrs.evolve(self, start=self.start + nbytes)

    def to_arch(self, arch: str) -> SmemDescriptor:
        """The same fields in the other architecture's encoding."""
        return attrs.evolve(self, arch=arch)

    def fields(self) -> list[tuple[str, str, int, int, str]]:
        """Rows (field, bits, raw field value, value in bytes or code, meaning) in bit order."""
        word = self.encode()
        raw = lambda lo, n: (word >> lo) & ((1 << n) - 1)  # noqa: E731
        lay = self.layout_type
        rows = [
            ("start", "0-13", raw(0, 14), self.start, f"start address {self.start} B (field = bytes >> 4)"),
            ("lbo", "16-29", raw(16, 14), self.lbo, f"leading-dimension byte offset {self.lbo} B"),
            ("sbo", "32-45", raw(32, 14), self.sbo, f"stride-dimension byte offset {self.sbo} B"),
        ]
        if self.arch == "sm100":
            rows.append(("version", "46-48", raw(46, 3), raw(46, 3), "fixed 0b001 (sm100 descriptor)"))
        rows.append(("base_offset", "49-51", raw(49, 3), self.base_offset,
                     "pattern starts on its boundary" if self.base_offset == 0 else
                     f"pattern phase {self.base_offset} (start not on the {lay.alignment}-byte boundary)"))
        if self.arch == "sm100":
            rows.append(("lbo_mode", "52", raw(52, 1), self.lbo_mode,
                         "LBO relative" if self.lbo_mode == 0 else "LBO is an absolute address (sm_103a)"))
            rows.append(("layout_type", "61-63", raw(61, 3), lay.sm100_code, lay.value))
        else:
            rows.append(("swizzle", "62-63", raw(62, 2), lay.sm90_code, lay.value))
        return rows

    def explain(self) -> list[str]:
        """Plain-language sentences that say what the tensor core will read.

        >>> SmemDescriptor.from_u64(0x4000404000010000).explain()[1]
        'Layout SWIZZLE_128B (CuTe Sw<3,4,3>): 128-byte rows, 8-row atoms of 1024 B; the XOR pattern uses
        absolute address bits 7-9, so the atom must sit on a 1024-byte boundary.'
        """
        lay = self.layout_type
        b, m, s = lay.cute
        lines = [f"{'tcgen05 (sm100)' if self.arch == 'sm100' else 'wgmma (sm90)'} shared-memory matrix "
                 f"descriptor {self.hex()}; the matrix starts at shared address {self.start} ({self.start:#x})."]
        if lay is SwizzleMode.INTERLEAVE:
            lines.append("Layout SWIZZLE_NONE (interleave): 8x16-byte core matrices, each 128 contiguous bytes, "
                         "no address swizzle.")
            lines.append(f"K-major: 8-row groups are SBO = {self.sbo} B apart, the two K-adjacent core matrices "
                         f"of an instruction LBO = {self.lbo} B apart.")
            lines.append(f"MN-major: core matrices adjacent along M/N are SBO = {self.sbo} B apart, 8-row groups "
                         f"adjacent along K are LBO = {self.lbo} B apart.")
        else:
            hi = m + s + b - 1
            lines.append(f"Layout {lay.value} (CuTe Sw<{b},{m},{s}>): {lay.width}-byte rows, {lay.atom_rows}-row "
                         f"atoms of {lay.atom_bytes} B; the XOR pattern uses absolute address bits {m + s}-{hi}, so "
                         f"the atom must sit on a {lay.alignment}-byte boundary.")
            lines.append(f"K-major: 8-row groups are SBO = {self.sbo} B apart; LBO ({self.lbo} B) is unused "
                         "(K stays inside one swizzle row).")
            lines.append(f"MN-major: atoms adjacent along M/N are LBO = {self.lbo} B apart; "
                         f"{lay.atom_rows}-row groups adjacent along K are SBO = {self.sbo} B apart.")
        if self.base_offset:
            lines.append(f"Base offset {self.base_offset}: the swizzle row phase is the address's minus "
                         f"{self.base_offset}, so a tile whose pattern starts {self.base_offset} x 128 B past its "
                         "boundary reads as if the pattern restarted there (measured on an H200 with wgmma; "
                         "assumed for tcgen05).")
        else:
            lines.append("Base offset 0: the swizzle pattern starts on its natural boundary.")
        if self.lbo_mode:
            lines.append("LBO mode 1: LBO is an absolute address (sm_103a only; K-major, 128B swizzle).")
        return lines
