"""Named barriers, the async-proxy fence and ``elect.sync`` (PTX ISA 9.0 §9.7.13.1 bar/barrier, §9.7.13.4
membar/fence, §9.7.13.14 elect.sync).

The record holds the hardware barrier id (0-15); FlashMLA's named barriers are CUTLASS values
+ 8 (CUTLASS reserves ids 0-7), e.g. ``wg0_sync`` = id 9 (SASS ``BAR.SYNC 0x9, 0x80``).

>>> BarSync(9, 128).ptx(), BarSync(9, 128).footprint().barriers
('bar.sync 9, 128;', ('named[9]',))
"""

from __future__ import annotations

from typing import ClassVar

from attrs import field, frozen

from simtc.isa.base import Instr, as_int, as_int_tuple, fail, register
from simtc.isa.footprint import Footprint

__all__ = ["NAMED_BARRIERS", "BarArrive", "BarSync", "ElectSync", "FenceProxyAsync", "named_barrier_key"]

NAMED_BARRIERS = 16
"""Named barriers per CTA: ids 0-15 (PTX ISA 9.0 §9.7.13.1)."""
_REF = "PTX ISA 9.0 §9.7.13.1 (bar, barrier)"


def named_barrier_key(bar_id: int) -> str:
    """The name a named barrier has in footprints: ``"named[<id>]"``."""
    return f"named[{bar_id}]"


def _bar_id(inst, attribute, value) -> None:
    if not 0 <= value < NAMED_BARRIERS:
        fail(f"named barrier id {value} is outside 0-15", rule="named barrier ids are 0-15", ref=_REF)


def _threads(inst, attribute, value) -> None:
    if value <= 0 or value % 32 or value > 1024:
        fail(f"{inst.op} thread count {value} must be a positive multiple of 32 (at most 1024)",
             rule="bar thread count is a multiple of the warp size",
             ref=f"{_REF}; at most 1024 = the CTA size limit (CUDA C++ Programming Guide, compute capabilities)")


def _warp_ids(inst, attribute, value) -> None:
    if value and (len(value) != 4 or any(not 0 <= v < NAMED_BARRIERS for v in value)):
        fail(f"{inst.op} warp_ids {value}: four barrier ids 0-15 (one per warp of a warpgroup)",
             rule="per-warp named barrier ids", ref=_REF)


class _Named(Instr):
    __slots__ = ()

    def id_for(self, warp: int) -> int:
        """The barrier id warp ``warp`` uses: ``warp_ids[warp % 4]`` when given (a warpgroup role whose warps
        pair up on different barriers, e.g. FlashMLA's ``wg0_warp02_sync`` / ``wg0_warp13_sync``), else ``id``."""
        return self.warp_ids[warp % 4] if self.warp_ids else self.id

    def footprint(self, warp: int = 0) -> Footprint:
        return Footprint(barriers=(named_barrier_key(self.id_for(warp)),))


@register
@frozen
class BarSync(_Named):
    """``bar.sync id, threads;``: arrive and wait until ``threads`` threads have arrived."""

    op: ClassVar[str] = "bar.sync"
    opcode: ClassVar[str] = "bar.sync"
    id: int = field(converter=as_int, validator=_bar_id)
    threads: int = field(converter=as_int, validator=_threads)
    warp_ids: tuple[int, ...] = field(default=(), converter=as_int_tuple, validator=_warp_ids,
                                      metadata={"codec": "tuple"})

    def ptx(self) -> str:
        return f"bar.sync {self.id}, {self.threads};"


@register
@frozen
class BarArrive(_Named):
    """``bar.arrive id, threads;``: arrive without waiting."""

    op: ClassVar[str] = "bar.arrive"
    opcode: ClassVar[str] = "bar.arrive"
    id: int = field(converter=as_int, validator=_bar_id)
    threads: int = field(converter=as_int, validator=_threads)
    warp_ids: tuple[int, ...] = field(default=(), converter=as_int_tuple, validator=_warp_ids,
                                      metadata={"codec": "tuple"})

    def ptx(self) -> str:
        return f"bar.arrive {self.id}, {self.threads};"


_SPACES = ("shared::cta", "shared::cluster", "global", "")


@register
@frozen
class FenceProxyAsync(Instr):
    """``fence.proxy.async[.<state_space>];``: order the thread's generic-proxy accesses with later
    async-proxy ones (tensor core, TMA) -- PTX ISA 9.0 §9.7.13.4 (membar/fence) and §9.7.16.6.5 (tcgen05
    operands written through the generic proxy).
    ``state_space=""`` is the plain form (all state spaces)."""

    op: ClassVar[str] = "fence.proxy.async"
    opcode: ClassVar[str] = "fence.proxy.async"
    state_space: str = field(default="shared::cta")

    def __attrs_post_init__(self) -> None:
        if self.state_space not in _SPACES:
            fail(f"fence.proxy.async state space {self.state_space!r}: use one of {_SPACES}",
                 rule="fence.proxy.async state spaces", ref="PTX ISA 9.0 §9.7.13.4 (membar/fence)")

    def ptx(self) -> str:
        return f"fence.proxy.async{'.' + self.state_space if self.state_space else ''};"


@register
@frozen
class ElectSync(Instr):
    """``elect.sync %r|%p, membermask;`` -- the warp elects one lane (PTX ISA 9.0 §9.7.13.14).

    ``.sync``: every thread of ``membermask`` executes it before any goes on. In a Program the elected lane's work
    is a one-thread role on the same CTA warp (``Role(threads=1)``) and the rest of the warp another role: both
    roles write ``elect.sync`` where the warp reaches it -- the warp role before the branch, the one-lane role as its
    first record (and again at each later ``elect.sync`` of the warp) -- and the engine runs the n-th ``elect.sync``
    of every role on that CTA warp as one warp-wide instruction: each waits for the others, and what each knew is
    known to all after it (their program orders meet there). A commit "from another lane" is a second one-lane
    role of the warp: ``tcgen05.commit`` tracks only its own thread's operations (§9.7.16.12.1)."""

    op: ClassVar[str] = "elect.sync"
    opcode: ClassVar[str] = "elect.sync"
    membermask: int = field(default=0xFFFFFFFF, converter=as_int)

    def __attrs_post_init__(self) -> None:
        if self.membermask != 0xFFFFFFFF:
            fail(f"elect.sync membermask {self.membermask:#x}: only the full warp (0xffffffff) is modelled",
                 rule="elect.sync over the whole warp", ref="PTX ISA 9.0 §9.7.13.14")

    def ptx(self) -> str:
        return f"elect.sync _|p, {self.membermask:#010x};"
