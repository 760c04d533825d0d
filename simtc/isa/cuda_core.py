"""``CudaCoreBlock``: a named block of CUDA-core work (not one PTX instruction).

It carries what the timing model needs and the *name* of the numpy effect it stands for (resolved by the
semantics layer's effect registry; ``""`` = timing only):

* ``counts`` -- SASS instructions per thread by class (``("FFMA2", 16)``, ``("MUFU.EX2", 32)``): the mix
  that occupies the issue slot and the pipes;
* ``chain`` -- the block's longest dependent chain, as the classes along it (``(("FMNMX", 32),)``: a row
  maximum taken one value after the other); its latency is the sum of theirs, however fast they issue.
  Empty: every instruction is independent of the others (only throughput matters);
* ``wavefronts`` -- shared-memory port cycles per warp of its LDS/STS when they are not the conflict-free
  count (e.g. FlashMLA's 2-way conflicted fp8 loads); 0 = derived from the counts;
* ``gmem`` -- how its global loads/stores spread: ``"coalesced"`` (one row per warp-instruction) or
  ``"scattered"`` (one row per lane, a gather); ``gmem_rows`` overrides the rows per warp-instruction (1 to 32,
  e.g. FlashMLA's SM90 producer: 8 tokens x 4 lanes) and ``gmem_pitch`` gives the bytes between rows in memory
  (where rows start within their 128-byte lines; 0 = on a line) and ``gmem_lanes`` how lanes map to rows
  (``grouped`` or ``interleaved``), which the L1 model reads (:mod:`simtc.engine.l1`).

Its footprint is declared by explicit fields.

>>> b = CudaCoreBlock("exp2", (("FFMA2", 16), ("MUFU.EX2", 32)), effect="softmax_exp2", regs_read=("p",),
...                   chain=(("FFMA2", 1), ("MUFU.EX2", 1)))
>>> b.ptx()
'// cuda_core exp2: FFMA2 x16, MUFU.EX2 x32 -> effect softmax_exp2'
>>> b.instructions
48
"""

from __future__ import annotations

from typing import ClassVar

from attrs import field, frozen

from simtc.isa.base import Instr, as_int, as_str_tuple, fail, is_str, name_str, nonneg, register
from simtc.isa.footprint import PROXIES, Footprint, SmemRange, TmemRect

__all__ = ["LANE_ORDERS", "CudaCoreBlock"]


def _counts(value) -> tuple[tuple[str, int], ...]:
    out = []
    for item in value:
        try:
            name, n = item
        except (TypeError, ValueError):
            fail(f"counts entries are (class, count) pairs, got {item!r}", rule="CudaCoreBlock counts")
        if not isinstance(name, str) or not name or isinstance(n, bool) or not isinstance(n, int) or n < 0:
            fail(f"counts entry {item!r}: a SASS class name and a count >= 0", rule="CudaCoreBlock counts")
        out.append((name, n))
    return tuple(out)


def _gmem(inst, attribute, value) -> None:
    if value not in ("coalesced", "scattered"):
        fail(f"gmem must be 'coalesced' or 'scattered', got {value!r}", rule="CudaCoreBlock global access pattern")


LANE_ORDERS = ("grouped", "interleaved")
"""How a warp's lanes spread over a global load's rows: ``grouped`` (consecutive lanes read consecutive bytes of
one row, 32 / rows lanes a row) or ``interleaved`` (lane ``l`` reads row ``l % rows``, slice ``l // rows``)."""


def _gmem_lanes(inst, attribute, value) -> None:
    if value not in LANE_ORDERS:
        fail(f"gmem_lanes must be one of {', '.join(LANE_ORDERS)}, got {value!r}",
             rule="CudaCoreBlock global access pattern")


def _gmem_rows(inst, attribute, value) -> None:
    if value not in (0, 1, 2, 4, 8, 16, 32):
        fail(f"gmem_rows must be 0 (from gmem) or a power of two from 1 to 32 rows per warp-instruction, got "
             f"{value!r}", rule="CudaCoreBlock global access pattern")


def _chain(inst, attribute, value) -> None:
    counts = dict(inst.counts)
    for cls, n in value:
        if cls not in counts:
            fail(f"chain class {cls!r} is not among the block's counts ({', '.join(counts) or 'none'})",
                 rule="a block's dependent chain is made of its own instructions")
        if n > counts[cls]:
            fail(f"chain has {n} x {cls} but the block counts {counts[cls]}",
                 rule="a block's dependent chain is made of its own instructions")


def _ranges(value) -> tuple[SmemRange, ...]:
    return tuple(v if isinstance(v, SmemRange) else SmemRange(*v) for v in value)


def _rects(value) -> tuple[TmemRect, ...]:
    return tuple(v if isinstance(v, TmemRect) else TmemRect(*v) for v in value)


def _proxy(inst, attribute, value) -> None:
    if value not in PROXIES:
        fail(f"proxy must be one of {PROXIES}, got {value!r}", rule="memory proxies", ref="PTX ISA 9.0 §8.6")


@register
@frozen
class CudaCoreBlock(Instr):
    """A named block of CUDA-core work: SASS counts, an effect name, and its declared footprint."""

    op: ClassVar[str] = "cuda_core"
    opcode: ClassVar[str] = "cuda_core"
    name: str = field(validator=name_str)
    counts: tuple[tuple[str, int], ...] = field(default=(), converter=_counts, metadata={"codec": "pairs"})
    effect: str = field(default="", validator=is_str)
    smem_reads: tuple[SmemRange, ...] = field(default=(), converter=_ranges, metadata={"codec": "ranges"})
    smem_writes: tuple[SmemRange, ...] = field(default=(), converter=_ranges, metadata={"codec": "ranges"})
    tmem_reads: tuple[TmemRect, ...] = field(default=(), converter=_rects, metadata={"codec": "rects"})
    tmem_writes: tuple[TmemRect, ...] = field(default=(), converter=_rects, metadata={"codec": "rects"})
    regs_read: tuple[str, ...] = field(default=(), converter=as_str_tuple, metadata={"codec": "tuple"})
    regs_written: tuple[str, ...] = field(default=(), converter=as_str_tuple, metadata={"codec": "tuple"})
    barriers: tuple[str, ...] = field(default=(), converter=as_str_tuple, metadata={"codec": "tuple"})
    proxy: str = field(default="generic", validator=_proxy)
    chain: tuple[tuple[str, int], ...] = field(default=(), converter=_counts, validator=_chain,
                                               metadata={"codec": "pairs"})
    wavefronts: int = field(default=0, converter=as_int, validator=nonneg)
    gmem: str = field(default="coalesced", validator=_gmem)
    gmem_rows: int = field(default=0, converter=as_int, validator=_gmem_rows)
    gmem_pitch: int = field(default=0, converter=as_int, validator=nonneg)
    gmem_lanes: str = field(default="grouped", validator=_gmem_lanes)

    @property
    def instructions(self) -> int:
        """Total SASS instructions of the block."""
        return sum(n for _, n in self.counts)

    def ptx(self) -> str:
        counts = ", ".join(f"{c} x{n}" for c, n in self.counts) or "no counts"
        eff = f" -> effect {self.effect}" if self.effect else ""
        return f"// cuda_core {self.name}: {counts}{eff}"

    def footprint(self, warp: int = 0) -> Footprint:
        return Footprint(smem_reads=self.smem_reads, smem_writes=self.smem_writes, tmem_reads=self.tmem_reads,
                         tmem_writes=self.tmem_writes, regs_read=self.regs_read, regs_written=self.regs_written,
                         barriers=self.barriers, proxy=self.proxy)
