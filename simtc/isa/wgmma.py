"""Hopper ``wgmma`` records (sm_90a; PTX ISA 9.0 §9.7.15): fence, mma_async, commit_group, wait_group.

All four are warpgroup-collective (``.sync.aligned``, 4 contiguous warps). ``WgmmaMmaAsync``'s
A is an sm90 descriptor (shared memory, the SS form) or the name of A's registers (the RS form: the
warpgroup's four ``.b32`` registers per thread, always K-major); B is an sm90 descriptor; D is the name
of the accumulator registers (``d_dtype`` ``"fp32"``: N/2 ``.f32`` per thread, ``"fp16"``: N/4
``.f16x2``; :mod:`simtc.mma.wgmma` holds the fragments).

>>> from simtc.smem.desc import SmemDescriptor
>>> a = SmemDescriptor(start=0, lbo=16, sbo=1024, layout_type="SW128", arch="sm90")
>>> b = SmemDescriptor(start=8192, lbo=16, sbo=1024, layout_type="SW128", arch="sm90")
>>> WgmmaMmaAsync(64, 64, 16, "bf16", a, b, True, "d").ptx()
'wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 d, 0x4000004000010000, 0x4000004000010200, 1, 1, 1, 0, 0;'
>>> WgmmaMmaAsync(64, 64, 16, "fp16", "a", b, True, "d", d_dtype="fp16", b_major="MN").ptx()  # RS, f16 D
'wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16 d, a, 0x4000004000010200, 1, 1, 1, 1;'
"""

from __future__ import annotations

from typing import ClassVar

from attrs import field, frozen

from simtc.isa.base import Instr, as_bool, as_int, desc_field, fail, name_str, register
from simtc.isa.footprint import Footprint, descriptor_ranges, merge_ranges
from simtc.numerics.formats import DTYPES
from simtc.smem.desc import SmemDescriptor
from simtc.smem.layout import INSTR_K_BYTES

__all__ = ["WgmmaCommitGroup", "WgmmaFence", "WgmmaMmaAsync", "WgmmaWaitGroup"]

_REF = "PTX ISA 9.0 §9.7.15.5.2"
_IN_TYPES = ("bf16", "fp16", "tf32", "e4m3", "e5m2")
_D_TYPES = {"bf16": ("fp32",), "fp16": ("fp32", "fp16"), "tf32": ("fp32",), "e4m3": ("fp32", "fp16"),
            "e5m2": ("fp32", "fp16")}


@register
@frozen
class WgmmaFence(Instr):
    """``wgmma.fence.sync.aligned;``: order prior register accesses before the next wgmma."""

    op: ClassVar[str] = "wgmma.fence"
    opcode: ClassVar[str] = "wgmma.fence"
    ptx_line: ClassVar[str] = "wgmma.fence.sync.aligned;"


def _a(value):
    if isinstance(value, SmemDescriptor):
        return value
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return SmemDescriptor.from_u64(value, "sm90")
    fail(f"wgmma A must be an sm90 descriptor or a register name, got {value!r}", rule="wgmma A operand", ref=_REF)


def _major(inst, attribute, value) -> None:
    if value not in ("K", "MN"):
        fail(f"{attribute.name} must be 'K' or 'MN', got {value!r}", rule="imm-trans-a/b are 0 (K) or 1 (MN)",
             ref=_REF)


def _scale(inst, attribute, value) -> None:
    if value not in (1, -1):
        fail(f"{attribute.name} must be 1 or -1, got {value!r}", rule="imm-scale-a/b in {1, -1}", ref=_REF)


@register
@frozen
class WgmmaMmaAsync(Instr):
    """``wgmma.mma_async.sync.aligned.m64n<N>k<K>.<d>.<a>.<b> d, a, b-desc, scale-d, imm-scale-a, imm-scale-b,
    [imm-trans-a,] imm-trans-b;`` (``imm-trans-a`` only when A is a descriptor)."""

    op: ClassVar[str] = "wgmma.mma_async"
    opcode: ClassVar[str] = "wgmma.mma_async"
    is_async: ClassVar[bool] = True
    m: int = field(converter=as_int)
    n: int = field(converter=as_int)
    k: int = field(converter=as_int)
    dtype: str = field()
    a: SmemDescriptor | str = field(converter=_a, metadata={"codec": "desc_or_reg"})
    b_desc: SmemDescriptor = desc_field("sm90")  # noqa: RUF009
    scale_d: bool = field(converter=as_bool)
    d: str = field(validator=name_str)
    d_dtype: str = field(default="fp32")
    a_major: str = field(default="K", validator=_major)
    b_major: str = field(default="K", validator=_major)
    scale_a: int = field(default=1, converter=as_int, validator=_scale)
    scale_b: int = field(default=1, converter=as_int, validator=_scale)

    def __attrs_post_init__(self) -> None:
        if self.m != 64:
            fail(f"wgmma M is 64, got {self.m}", rule="wgmma shapes are m64nNkK", ref=_REF)
        if not (8 <= self.n <= 256 and self.n % 8 == 0):
            fail(f"wgmma N = {self.n}: a multiple of 8 from 8 to 256", rule="m64nNk16 shapes", ref=_REF)
        if self.dtype not in _IN_TYPES:
            fail(f"wgmma input type {self.dtype!r} is not modelled (use {', '.join(_IN_TYPES)})",
                 rule="modelled wgmma input types", ref=_REF)
        k = INSTR_K_BYTES // DTYPES[self.dtype].bytes
        if self.k != k:
            fail(f"wgmma .{self.dtype} has K = {k}, got {self.k}", rule="K = 32 bytes of the input type", ref=_REF)
        if self.d_dtype not in _D_TYPES[self.dtype]:
            fail(f"wgmma .{self.dtype} accumulates into {_D_TYPES[self.dtype]}, not {self.d_dtype}",
                 rule="wgmma accumulator types", ref=_REF)
        if isinstance(self.a, SmemDescriptor) and self.a.arch != "sm90":
            fail("wgmma A descriptor must be an sm90 descriptor", rule="wgmma descriptors",
                 ref="PTX ISA 9.0 §9.7.15.5.1.2.2")
        if not isinstance(self.a, SmemDescriptor) and self.a_major != "K":
            fail("A from registers is K-major (no imm-trans-a)", rule="register A has no transpose", ref=_REF)
        if DTYPES[self.dtype].bytes != 2 and "MN" in (self.a_major, self.b_major):
            fail(f"MN-major (transposed) operands are only for 16-bit types, not {self.dtype}",
                 rule="imm-trans only for .f16/.bf16", ref=_REF)

    def ptx(self) -> str:
        ty = lambda t: DTYPES[t].ptx  # noqa: E731
        shape = f"m{self.m}n{self.n}k{self.k}{ty(self.d_dtype)}{ty(self.dtype)}{ty(self.dtype)}"
        trans_b = int(self.b_major == "MN")
        if isinstance(self.a, SmemDescriptor):
            tail = f"{int(self.a_major == 'MN')}, {trans_b}"
            a = self.a.hex()
        else:
            tail, a = f"{trans_b}", self.a
        return (f"wgmma.mma_async.sync.aligned.{shape} {self.d}, {a}, {self.b_desc.hex()}, {int(self.scale_d)}, "
                f"{self.scale_a}, {self.scale_b}, {tail};")

    def footprint(self, warp: int = 0) -> Footprint:
        eb = DTYPES[self.dtype].bytes
        reads = descriptor_ranges(self.b_desc.encode(), "sm90", self.b_major, eb, self.n, self.k)
        regs = (self.d,) if self.scale_d else ()
        if isinstance(self.a, SmemDescriptor):
            reads = merge_ranges(reads, descriptor_ranges(self.a.encode(), "sm90", self.a_major, eb, self.m, self.k))
        else:
            regs = (self.a, *regs)
        return Footprint(smem_reads=reads, regs_read=regs, regs_written=(self.d,), proxy="async")


@register
@frozen
class WgmmaCommitGroup(Instr):
    """``wgmma.commit_group.sync.aligned;``: close the current wgmma-group."""

    op: ClassVar[str] = "wgmma.commit_group"
    opcode: ClassVar[str] = "wgmma.commit_group"
    ptx_line: ClassVar[str] = "wgmma.commit_group.sync.aligned;"


@register
@frozen
class WgmmaWaitGroup(Instr):
    """``wgmma.wait_group.sync.aligned n;``: wait until at most ``n`` wgmma-groups are pending."""

    op: ClassVar[str] = "wgmma.wait_group"
    opcode: ClassVar[str] = "wgmma.wait_group"
    n: int = field(default=0, converter=as_int)

    def __attrs_post_init__(self) -> None:
        if self.n < 0:
            fail(f"wait_group N = {self.n} must be >= 0", rule="wgmma.wait_group N is a non-negative constant",
                 ref="PTX ISA 9.0 §9.7.15.7.3 (wgmma.wait_group)")

    def ptx(self) -> str:
        return f"wgmma.wait_group.sync.aligned {self.n};"
