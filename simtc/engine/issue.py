"""CUDA cores: an SM sub-partition's issue slot and pipes, and what a block of CUDA-core work costs on them.

An SM has ``sub_partitions`` (4) sub-partitions; warp ``w`` runs on sub-partition ``w % 4``. Each has

* an **issue slot**: ``issue_per_sub_partition`` (1) warp-instruction per cycle, shared by its warps --
  every record a warp issues takes one cycle of it, a CUDA-core block one per instruction;
* **pipes**, one server each: ``fp32`` (FFMA/FMUL/FADD; packed FFMA2/FMUL2/FADD2 do two operations per
  lane), ``fp16`` (HADD2/HMUL2/HFMA2 and the .BF16_V2 forms; HADD2.F32, the f16 -> f32 conversion, at half
  rate), ``alu`` (FMNMX, FSEL, FSETP, integer and logic, and the unlisted remainder ``other``), ``imad``
  (IMAD/IMUL), ``mufu`` (MUFU.*), ``cvt`` (F2F, F2FP, I2F, F2I) and ``shfl`` (SHFL.*). A warp-instruction holds
  its pipe for ``32 x ops / (lanes per sub-partition)`` cycles, lanes from the ``*_lanes`` parameters
  (measured per class on the H200 by ``simtc calibrate``): FP32 1 cycle, FP16 1, ALU, IMAD and FlashMLA's
  fp8/bf16 conversions 2, shuffles 4, MUFU 8; classes measured on separate pipes overlap;
* a **scoreboard**: a register written by an instruction is ready ``*_latency`` cycles after it issues; a
  block's declared dependent chain (:attr:`simtc.isa.CudaCoreBlock.chain`) takes the sum of its
  instructions' latencies however fast they issue.

LDS/STS inside a block book the shared-memory port (one cycle per wavefront); LDG/STG go to the memory
system (:mod:`simtc.engine.memory`): coalesced (one row per warp-instruction) or scattered (one per lane).

A block issues in slices of ``warp_interleave`` instructions with the block's own mix; between slices the
warp lets the sub-partition's other warps in, so warps sharing a sub-partition share its issue slot and
pipes. A slice ends when its last instruction has issued and its pipes and port cycles are done. A single
record another warp issues while a slice holds the issue slot takes its cycle at once and pushes the rest
of the slice back by one (the scheduler picks a ready warp every cycle: a block's warp, mostly waiting on its
pipes, does not keep the others from issuing).

>>> from simtc.engine.parameters import Timing
>>> from simtc.isa import CudaCoreBlock
>>> c = block_cost(CudaCoreBlock("dq", (("F2FP.BF16.F32.PACK_AB", 64), ("MUFU.EX2", 32))), Timing("sm100"))
>>> c.issue, dict(c.pipes), c.bound          # 96 issue cycles; the conversions hold their pipe 2 each, MUFU 8
(96, {'cvt': 128, 'mufu': 256}, 'mufu')
>>> block_cost(CudaCoreBlock("dq", (("F2FP.BF16.F32.PACK_AB", 64),)), Timing("sm100").without("pipe_rates")).duration
64
"""

from __future__ import annotations

import functools
import math
import re

from attrs import frozen

from simtc.engine.calendar import InOrder
from simtc.engine.l1 import load_lines, load_wavefronts

__all__ = ["PIPES", "BlockCost", "SubPartition", "block_cost", "block_parameters", "class_pipe", "memory_access"]

PIPES = ("fp32", "fp16", "alu", "imad", "mufu", "cvt", "shfl")
_LANES = {"fp32": "fp32_lanes", "fp16": "fp16_lanes", "alu": "alu_lanes", "imad": "imad_lanes", "mufu": "mufu_lanes",
          "cvt": "cvt_lanes", "shfl": "shfl_lanes"}
_LATENCY = {"fp32": "fp32_latency", "fp16": "fp16_latency", "alu": "alu_latency", "imad": "fp32_latency",
            "mufu": "mufu_latency", "cvt": "cvt_latency", "shfl": "shfl_latency"}

# SASS class prefix -> (pipe, operations per lane relative to the pipe's lane rate); first match wins
_CLASS_TABLE = (
    ("MUFU", "mufu", 1), ("F2FP", "cvt", 1), ("F2F", "cvt", 1), ("I2F", "cvt", 1), ("F2I", "cvt", 1),
    ("I2I", "cvt", 1), ("FFMA2", "fp32", 2), ("FMUL2", "fp32", 2), ("FADD2", "fp32", 2), ("FFMA", "fp32", 1),
    ("FMUL", "fp32", 1), ("FADD", "fp32", 1), ("IMAD", "imad", 1), ("IMUL", "imad", 1), ("HFMA2", "fp16", 1),
    ("HADD2.F32", "fp16", 2), ("HADD2", "fp16", 1), ("HMUL2", "fp16", 1), ("HMNMX2", "fp16", 1), ("SHFL", "shfl", 1),
)
_MEM_RE = re.compile(r"^(LDS|STS|LDG|STG|LD|ST)(\.|$)")
_WIDTH_RE = re.compile(r"\.(128|64|32|16|U8|S8|U16|S16)\b")
_WIDTHS = {"128": 16, "64": 8, "32": 4, "16": 2, "U8": 1, "S8": 1, "U16": 2, "S16": 2}


@functools.lru_cache(maxsize=256)
def class_pipe(cls: str) -> tuple[str, int]:
    """The pipe a SASS class issues to and its operations per lane: ``("cvt", 1)``, ``("fp32", 2)`` ...

    >>> class_pipe("F2FP.F16.E4M3.UNPACK_B"), class_pipe("FFMA2"), class_pipe("FMNMX"), class_pipe("other")
    (('cvt', 1), ('fp32', 2), ('alu', 1), ('alu', 1))
    """
    c = cls.upper()
    for prefix, pipe, ops in _CLASS_TABLE:
        if c.startswith(prefix):
            return pipe, ops
    return "alu", 1


@functools.lru_cache(maxsize=256)
def memory_access(cls: str) -> tuple[str, bool, int] | None:
    """``(space, is_load, bytes per lane)`` of a memory class (``"smem"`` for LDS/STS, ``"gmem"`` for
    LDG/STG/LD/ST), None for any other class.

    >>> memory_access("LDS.64"), memory_access("STS.U8"), memory_access("LDG.E.128"), memory_access("FFMA")
    (('smem', True, 8), ('smem', False, 1), ('gmem', True, 16), None)
    """
    m = _MEM_RE.match(cls.upper())
    if m is None:
        return None
    op = m.group(1)
    w = _WIDTH_RE.search(cls.upper())
    width = _WIDTHS[w.group(1)] if w else 4
    space = "smem" if op in ("LDS", "STS") else "gmem"
    return space, op in ("LDS", "LDG", "LD"), width


def block_parameters(rec) -> tuple[str, ...]:
    """The parameters a block's time reads: its classes' pipe rates, the latencies along its chain, the shared-memory
    port (LDS/STS) and the memory system (LDG/STG)."""
    out: list[str] = []
    for cls, _ in rec.counts:
        mem = memory_access(cls)
        if mem is None:
            out.append(_LANES[class_pipe(cls)[0]])
        elif mem[0] == "smem":
            out.append("smem_port_bytes_per_cycle")
        else:
            out += ["dram_latency", "hbm_bytes_per_cycle", "sm_count", "sm_bytes_per_cycle", "sector_bytes"]
    for cls, _ in rec.chain:
        mem = memory_access(cls)
        out.append(_LATENCY[class_pipe(cls)[0]] if mem is None else ("smem_ld_latency" if mem[0] == "smem"
                                                                       else "dram_latency"))
    return tuple(dict.fromkeys(out))


@frozen
class BlockCost:
    """What one warp's pass through a :class:`~simtc.isa.CudaCoreBlock` costs (cycles; see the module text)."""

    instructions: int
    issue: int
    """Issue-slot cycles."""
    pipes: tuple[tuple[str, int], ...]
    """Cycles each pipe is held (pipes the block uses)."""
    wavefronts: int
    """Shared-memory port cycles of its LDS/STS."""
    loads: tuple[tuple[int, int, float, int], ...]
    """Global loads: ``(bytes, rows, 128-byte lines, L1 data-pipe wavefronts)`` per warp-instruction."""
    stores: tuple[tuple[int, int, float, int], ...]
    chain: int
    """Latency of the declared dependent chain, less its global loads (cycles)."""
    chain_loads: bool
    """Whether a global load sits on the chain (the block then waits for it)."""
    slices: int

    @property
    def duration(self) -> int:
        """Cycles the block takes alone on a sub-partition, memory latency aside."""
        return max(self.issue, self.wavefronts, self.chain, *(c for _, c in self.pipes))

    @property
    def bound(self) -> str:
        """What bounds the block alone: ``issue``, a pipe name, ``smem`` or ``latency``."""
        best = max([("issue", self.issue), *self.pipes, ("smem", self.wavefronts), ("latency", self.chain)],
                   key=lambda x: x[1])
        return best[0]


def _split(total: int, n: int, k: int) -> int:
    """Slice ``k`` of ``n`` of a total, so that the slices sum to the total."""
    return total * (k + 1) // n - total * k // n


def block_cost(rec, timing) -> BlockCost:
    """The cost of ``rec`` (a :class:`~simtc.isa.CudaCoreBlock`) under ``timing`` (cached per pair)."""
    return _block_cost(rec, timing)


@functools.lru_cache(maxsize=4096)
def _block_cost(rec, timing) -> BlockCost:
    rates = timing.enabled("pipe_rates")
    latency = timing.enabled("latency")
    sps = timing["sub_partitions"]
    pipes: dict[str, float] = {}
    n_instr = 0
    wavefronts = 0
    loads, stores = [], []
    rows = rec.gmem_rows or (32 if rec.gmem == "scattered" else 1)
    l1 = timing.enabled("l1")
    for cls, count in rec.counts:
        n_instr += count
        mem = memory_access(cls)
        if mem is not None:
            space, is_load, width = mem
            if space == "smem":
                wavefronts += count * max(1, math.ceil(32 * width / timing["smem_port_bytes_per_cycle"]))
            else:
                nbytes = 32 * width
                wf = (load_wavefronts(width, rows, rec.gmem_pitch, rec.gmem_lanes, timing["l1_wavefronts_per_row"],
                                      timing["l1_wavefronts_per_conflict"]) if l1 else nbytes / 128)
                port = max(1, round(wf * 128 / timing["smem_port_bytes_per_cycle"]))  # a wavefront: 128 B of port
                (loads if is_load else stores).extend(
                    [(nbytes, rows, load_lines(nbytes, rows, rec.gmem_pitch), port)] * count)
            continue
        pipe, ops = class_pipe(cls)
        per_instr = 32 * ops * sps / timing[_LANES[pipe]] if rates else 1
        pipes[pipe] = pipes.get(pipe, 0) + count * per_instr
    if rec.wavefronts:  # given in 128-byte wavefronts (32 banks x 4 B)
        wavefronts = math.ceil(rec.wavefronts * 128 / timing["smem_port_bytes_per_cycle"])
    chain = 0.0
    chain_loads = False
    for cls, count in rec.chain:
        mem = memory_access(cls)
        if mem is not None:
            if mem[0] == "gmem" and mem[1]:
                chain_loads = True
            elif mem[0] == "smem" and latency:
                chain += count * timing["smem_ld_latency"]
            continue
        if latency:
            chain += count * timing[_LATENCY[class_pipe(cls)[0]]]
    issue = math.ceil(n_instr / timing["issue_per_sub_partition"])
    slices = max(1, math.ceil(n_instr / timing["warp_interleave"]))
    return BlockCost(n_instr, issue, tuple((p, math.ceil(c)) for p, c in pipes.items()), wavefronts, tuple(loads),
                     tuple(stores), math.ceil(chain), chain_loads, slices)


class SubPartition:
    """One SM sub-partition: its issue slot and its pipes (in-order servers)."""

    __slots__ = ("index", "issue", "pipes", "slice_until")

    def __init__(self, index: int):
        self.index = index
        self.issue = InOrder(f"issue[{index}]", spans=False)
        self.pipes = {p: InOrder(f"{p}[{index}]", spans=False) for p in PIPES}
        self.slice_until = 0  # the issue slot is held by a block's slice until then (others may cut in)

    def issue_one(self, t: int) -> int:
        """Book the issue slot for one record at or after ``t``; returns the cycle it issues."""
        issue = self.issue
        if issue.free > t and self.slice_until >= issue.free:  # a slice holds the slot: cut in, push it back
            issue.free += 1
            issue.busy += 1
            self.slice_until = issue.free
            return t
        start = issue.start(t)
        issue.take(start, 1)
        return start

    def slice(self, t: int, cost: BlockCost, k: int) -> tuple[int, int]:
        """Book slice ``k`` of a block at or after ``t``: ``(issue start, end of its issue and pipe cycles)``."""
        n = cost.slices
        ni = _split(cost.issue, n, k)
        start = self.issue.start(t)
        end = self.issue.take(start, ni)
        self.slice_until = end
        for pipe, cycles in cost.pipes:
            c = _split(cycles, n, k)
            if c:
                e = self.pipes[pipe].take(start, c)
                if e > end:
                    end = e
        return start, end
