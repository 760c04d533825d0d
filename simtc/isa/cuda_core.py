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
  (``grouped`` or ``interleaved``), which the L1 model reads (:mod:`simtc.engine.l1`);
* ``gmem_loads`` / ``gmem_stores`` -- where the addresses are known (a kernel simtc's executor ran,
  :mod:`simtc.ptx.recording`): each global load's 32-byte sectors (``address // 32``) and cache policy
  (:data:`GMEM_POLICIES`), each store's sectors, in the order of the block's LDG / STG counts. The engine looks them
  up in the SM's L1 and the chip's L2 (:class:`simtc.engine.l1.CachedL1`) wherever the block runs; empty: every
  load is priced as an L1 miss. Sectors are written as runs, ``"0x1f40+4 0x1f48"`` (hex start, ``+count`` when
  more than one): a coalesced warp load is one run.

Its footprint is declared by explicit fields.

>>> b = CudaCoreBlock("exp2", (("FFMA2", 16), ("MUFU.EX2", 32)), effect="softmax_exp2", regs_read=("p",),
...                   chain=(("FFMA2", 1), ("MUFU.EX2", 1)))
>>> b.ptx()
'// cuda_core exp2: FFMA2 x16, MUFU.EX2 x32 -> effect softmax_exp2'
>>> b.instructions
48
>>> CudaCoreBlock("ld", (("LDG.E.32", 1),), gmem_loads=(("l1", [64, 65, 66, 67, 70]),)).gmem_loads
(('l1', '0x40+4 0x46'),)
>>> sectors_of("0x40+4 0x46")
(64, 65, 66, 67, 70)
"""

from __future__ import annotations

import functools
from typing import ClassVar

from attrs import field, frozen

from simtc.isa.base import Instr, as_int, as_str_tuple, fail, is_str, name_str, nonneg, register
from simtc.isa.footprint import PROXIES, Footprint, SmemRange, TmemRect

__all__ = ["GMEM_POLICIES", "LANE_ORDERS", "CudaCoreBlock", "sector_runs", "sectors_of"]


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


GMEM_POLICIES = ("l1", "l1_no_allocate", "l2")
"""Where a global load may be kept (:func:`simtc.engine.l1.load_policy`: from its PTX cache operator)."""


def sector_runs(sectors) -> str:
    """Sector numbers as the text of ``gmem_loads`` / ``gmem_stores``: ascending runs ``"0xSTART[+COUNT]"``."""
    xs = sorted({int(x) for x in sectors})
    if xs and xs[0] < 0:
        fail(f"sector {xs[0]}: sector numbers are address // 32 >= 0", rule="CudaCoreBlock global sectors")
    out, k = [], 0
    while k < len(xs):
        j = k
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(f"{xs[k]:#x}" + (f"+{j - k + 1}" if j > k else ""))
        k = j + 1
    return " ".join(out)


@functools.lru_cache(maxsize=65536)
def sectors_of(text: str) -> tuple[int, ...]:
    """The sector numbers of a ``gmem_loads`` / ``gmem_stores`` text (:func:`sector_runs`)."""
    out: list[int] = []
    for run in text.split():
        start, _, n = run.partition("+")
        try:
            a, c = int(start, 16), int(n) if n else 1
        except ValueError:
            fail(f"sector run {run!r}: 0xSTART or 0xSTART+COUNT", rule="CudaCoreBlock global sectors")
        if a < 0 or c < 1:
            fail(f"sector run {run!r}: a start >= 0 and a count >= 1", rule="CudaCoreBlock global sectors")
        out.extend(range(a, a + c))
    return tuple(out)


def _sectors_text(value) -> str:
    if isinstance(value, str):
        text = " ".join(value.split())
        sectors_of(text)  # (checked)
        return text
    return sector_runs(value)


def _gmem_loads(value) -> tuple[tuple[str, str], ...]:
    out = []
    for item in value:
        try:
            policy, sectors = item
        except (TypeError, ValueError):
            fail(f"gmem_loads entries are (policy, sectors) pairs, got {item!r}", rule="CudaCoreBlock global sectors")
        if policy not in GMEM_POLICIES:
            fail(f"gmem_loads policy {policy!r}: one of {', '.join(GMEM_POLICIES)}",
                 rule="CudaCoreBlock global sectors", ref="PTX ISA 9.0 §9.7.9.1")
        out.append((policy, _sectors_text(sectors)))
    return tuple(out)


def _gmem_stores(value) -> tuple[str, ...]:
    if isinstance(value, str):
        fail("gmem_stores is a list of sector texts, one per store", rule="CudaCoreBlock global sectors")
    return tuple(_sectors_text(v) for v in value)


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
    gmem_loads: tuple[tuple[str, str], ...] = field(default=(), converter=_gmem_loads, metadata={"codec": "pairs"})
    gmem_stores: tuple[str, ...] = field(default=(), converter=_gmem_stores, metadata={"codec": "tuple"})

    @property
    def sectors(self) -> tuple[tuple[tuple[tuple[int, ...], str], ...], tuple[tuple[int, ...], ...]]:
        """``(loads, stores)`` as the engine's cache model takes them: each load's ``(sector numbers, policy)``, each
        store's sector numbers."""
        return (tuple((sectors_of(t), p) for p, t in self.gmem_loads), tuple(sectors_of(t) for t in self.gmem_stores))

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
