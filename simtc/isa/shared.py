"""``ld.shared`` / ``st.shared`` records: one warp-wide (or role-wide) shared-memory access of
``width`` bytes per thread (PTX ISA 9.0 §9.7.9.8 ld, §9.7.9.11 st; vector forms ``.v2``/``.v4``).

Thread ``i`` (of the ``threads`` executing threads, in order) accesses
``[addr + offset_i, addr + offset_i + width)`` with ``offset_i = i * stride`` (``stride``
defaults to ``width``), or ``offsets[i]`` when explicit per-thread offsets are given (e.g.
FlashMLA's pre-swizzled dequant stores). Addresses must be aligned to the access size (PTX ISA §6.4.1).
``warp_offsets`` (one byte offset per warp of a warpgroup, indexed by ``warp % 4``) is added for the
executing warp: the address a warpgroup role computes from its warp index (FlashMLA's P exchange
writes slot ``w ^ 2``); ``footprint(warp)`` applies it.

>>> StShared(212992, 16, "p_peer").footprint().smem_writes
(SmemRange(start=212992, stop=213504),)
>>> LdShared(0, 16, "r").ptx()
'ld.shared.v4.b32 r, [0x0];'
"""

from __future__ import annotations

import functools
from typing import ClassVar

import numpy as np
from attrs import field, frozen

from simtc.isa.base import Instr, as_int, as_int_tuple, as_opt_int, fail, name_str, nonneg, register
from simtc.isa.footprint import Footprint, SmemRange, element_ranges

__all__ = ["WIDTHS", "LdShared", "StShared"]

WIDTHS = {1: ".b8", 2: ".b16", 4: ".b32", 8: ".v2.b32", 16: ".v4.b32"}
"""Bytes per thread -> PTX type suffix (``.v2.b32`` = LDS.64, ``.v4.b32`` = LDS.128)."""
_REF = ("PTX ISA 9.0 §9.7.9.8 (ld) / §9.7.9.11 (st): .v8/.v4.b64 are .global only, so at most 16 B per thread "
        "in .shared; §6.4.1 (Addresses as Operands): addresses aligned to the access size")


def _width(inst, attribute, value) -> None:
    if value not in WIDTHS:
        fail(f"{inst.op} width {value} B: use 1, 2, 4, 8 or 16 bytes per thread",
             rule="ld/st.shared widths 1, 2, 4, 8, 16 B", ref=_REF)


def _threads(inst, attribute, value) -> None:
    if not 1 <= value <= 1024:
        fail(f"{inst.op}: threads = {value} must be 1 ... 1024", rule="threads of a CTA")


@functools.lru_cache(maxsize=4096)
def _ranges(addr: int, width: int, offsets: tuple[int, ...]) -> tuple[SmemRange, ...]:
    return element_ranges(addr + np.asarray(offsets, dtype=np.int64), width)


class _Shared(Instr):
    __slots__ = ()

    def _check(self) -> None:
        if self.offsets and len(self.offsets) != self.threads:
            fail(f"{self.op}: {len(self.offsets)} offsets for {self.threads} threads",
                 rule="one explicit offset per thread")
        if self.warp_offsets and (len(self.warp_offsets) != 4 or any(o % self.width for o in self.warp_offsets)):
            fail(f"{self.op}: warp_offsets {self.warp_offsets}: four offsets (one per warp of a warpgroup), "
                 f"multiples of {self.width} B", rule="per-warp offsets of a warpgroup access", ref=_REF)
        if self.offsets and self.stride is not None:
            fail(f"{self.op}: give stride or offsets, not both", rule="one per-thread address rule")
        offs = np.asarray(self.thread_offsets(), dtype=np.int64)
        if ((self.addr + offs) % self.width).any() or (self.addr + offs < 0).any():
            fail(f"{self.op}: a thread address is negative or not {self.width}-byte aligned",
                 rule="ld/st.shared addresses are aligned to the access size", ref=_REF)

    def warp_offset(self, warp: int) -> int:
        """The byte offset ``warp_offsets`` adds for ``warp`` (0 when not given)."""
        return self.warp_offsets[warp % 4] if self.warp_offsets else 0

    def thread_offsets(self) -> tuple[int, ...]:
        """Each thread's byte offset from ``addr``."""
        if self.offsets:
            return self.offsets
        step = self.width if self.stride is None else self.stride
        return tuple(range(0, step * self.threads, step)) if step else (0,) * self.threads

    def ranges(self, warp: int = 0) -> tuple[SmemRange, ...]:
        return _ranges(self.addr + self.warp_offset(warp), self.width, self.thread_offsets())


@register
@frozen
class LdShared(_Shared):
    """``ld.shared<type> dst, [addr];`` -- ``width`` bytes per thread into register(s) ``dst``."""

    op: ClassVar[str] = "ld.shared"
    opcode: ClassVar[str] = "ld.shared"
    addr: int = field(converter=as_int, validator=nonneg)
    width: int = field(converter=as_int, validator=_width)
    dst: str = field(validator=name_str)
    threads: int = field(default=32, converter=as_int, validator=_threads)
    stride: int | None = field(default=None, converter=as_opt_int)
    offsets: tuple[int, ...] = field(default=(), converter=as_int_tuple, metadata={"codec": "tuple"})
    warp_offsets: tuple[int, ...] = field(default=(), converter=as_int_tuple, metadata={"codec": "tuple"})

    def __attrs_post_init__(self) -> None:
        self._check()

    def ptx(self) -> str:
        return f"ld.shared{WIDTHS[self.width]} {self.dst}, [{self.addr:#x}];"

    def footprint(self, warp: int = 0) -> Footprint:
        return Footprint(smem_reads=self.ranges(warp), regs_written=(self.dst,))


@register
@frozen
class StShared(_Shared):
    """``st.shared<type> [addr], src;`` -- ``width`` bytes per thread from register(s) ``src``."""

    op: ClassVar[str] = "st.shared"
    opcode: ClassVar[str] = "st.shared"
    addr: int = field(converter=as_int, validator=nonneg)
    width: int = field(converter=as_int, validator=_width)
    src: str = field(validator=name_str)
    threads: int = field(default=32, converter=as_int, validator=_threads)
    stride: int | None = field(default=None, converter=as_opt_int)
    offsets: tuple[int, ...] = field(default=(), converter=as_int_tuple, metadata={"codec": "tuple"})
    warp_offsets: tuple[int, ...] = field(default=(), converter=as_int_tuple, metadata={"codec": "tuple"})

    def __attrs_post_init__(self) -> None:
        self._check()

    def ptx(self) -> str:
        return f"st.shared{WIDTHS[self.width]} [{self.addr:#x}], {self.src};"

    def footprint(self, warp: int = 0) -> Footprint:
        return Footprint(smem_writes=self.ranges(warp), regs_read=(self.src,))
