"""An executed CTA as a :class:`simtc.isa.Program`: what each warp issued, in order, for simtc's engine.

While :func:`simtc.ptx.executor.launch` runs one CTA (``LaunchOptions(recorder=Recorder(...))``), a
:class:`Recorder` keeps, per warp, the ordered stream of the warp instructions it executed and what they did:

* every asynchronous or synchronising operation as the :mod:`simtc.isa` record the executor's handlers
  (:mod:`simtc.ptx.async_ops`) built from the operands' run-time values and applied -- the records
  :func:`simtc.ptx.async_ops.issued` collects: ``tcgen05.*``, ``mbarrier.*``, ``fence.proxy.async``, ``wgmma.*``;
* every TMA and bulk copy a thread issued (:mod:`simtc.ptx.async_tma` executes them at issue and logs no record):
  the recording reads the operands before the instruction runs and writes the records the hand Programs use
  (:mod:`simtc.isa.tma`) -- ``cp.async.bulk.tensor`` loads as :class:`~simtc.isa.tma.CpAsyncBulkTensor` (the
  destination, the box's bytes and rows from the decoded tensor map, the mbarrier, the coordinates, ``gather4``,
  the swizzle), stores and ``cp.reduce.async.bulk.tensor`` as :class:`~simtc.isa.tma.CpAsyncBulkTensorStore`,
  ``cp.async.bulk`` shared -> global as :class:`~simtc.isa.tma.CpAsyncBulk` and global -> shared as a one-row
  ``CpAsyncBulkTensor`` (the isa has no bulk-load record; the engine's memory model was fitted on exactly such
  copies), ``commit_group`` / ``wait_group[.read]`` as :class:`~simtc.isa.tma.BulkCommitGroup` /
  :class:`~simtc.isa.tma.BulkWaitGroupRead`; the copies the engine has no record for (``cp.async`` of sm_80,
  prefetches, shared::cta -> shared::cluster) are listed in the Program's ``meta`` (``untimed``);
* ``bar.sync`` / ``bar.arrive`` / ``bar.red`` as :class:`~simtc.isa.sync.BarSync` / :class:`~simtc.isa.sync.BarArrive`
  with the barrier id and thread count the warp gave (read from its registers when it issued them), one per arrival
  of the warp: where its lanes reach a non-``.aligned`` barrier on different paths, the executor parks the first and
  arrives once, when the last gets there, and the recording keeps that path's instruction only;
* the CUDA-core work between two of those as :class:`~simtc.isa.cuda_core.CudaCoreBlock` s whose cost is
  **PTX-derived** (:func:`sass_classes`): each executed PTX instruction becomes the SASS instruction class(es)
  it compiles to (integer, fp32, fp64, MUFU, conversion, memory, ...), the block's ``chain`` is its longest
  register dependency chain (weighted with the engine's own latencies, :func:`simtc.engine.issue.block_cost`),
  its shared-memory accesses are its ``smem_reads`` / ``smem_writes`` (the byte ranges the lanes touched, seen
  through :meth:`simtc.semantics.Cta.observe`) and its ``wavefronts`` their bank-conflict count
  (:func:`simtc.smem.banks.bank_conflicts` on the lanes' addresses);
* every global load and store with the 32-byte sectors its lanes touched (their addresses read from the registers
  before it runs), kept in its block (``CudaCoreBlock.gmem_loads`` with the load's cache policy, ``gmem_stores``),
  which the engine looks up in the SM's L1 and the chip's L2 wherever the Program runs -- :func:`run_engine`,
  schedules, the stepper, a Program exported and read back (:func:`simtc.engine.handlers.cached_l1`,
  :class:`simtc.engine.l1.GlobalCaches`: an L1 hit costs ``ldg_l1_latency``, an L2 hit ``ldg_l2_latency``, the rest
  an HBM round trip; measured on the H200, ``tests/data/h200_memory_latency.json``). A run of CUDA-core work is cut
  after a branch (when it holds a global load) and before a global load whose address came from one of the run's own
  loads (a pointer chase), so that the engine, which sends a block's loads at its start, sends them as ``ptxas``
  would (a basic block's loads hoisted above the work that does not feed them; assumed) and a dependent load after
  the one it depends on. A load nothing in its block reads is off the block's chain: its registers are the block's
  ``regs_written``, ready when it arrives, and the block that reads them lists them in ``regs_read`` (the engine's
  scoreboard holds it), so loads used late overlap the work in between; a load the next record reads ends its
  block's chain.

:meth:`Recorder.program` builds the Program: warps that ran identical streams (their loads' sectors included) form
one role, the barrier table holds every mbarrier by its shared-memory address (the name
:func:`simtc.ptx.async_ops.mbarrier_name` gives it) with its ``mbarrier.init`` count, and the named barriers with
their thread counts. Each record's ``label`` names its PTX line(s) and CUDA source line(s) (from ``-lineinfo``),
which the stepper and the traces show; the same positions are in :attr:`Recorded.sources`, keyed by ``(role, record
index)``.

:func:`run_engine` runs the Program on :class:`simtc.engine.core.Engine` (timing mode, :meth:`Recorded.engine`: the
recorded sectors in its L1): the CTA's cycles, the hazard checker's report, where the cycles went
(:meth:`EngineRun.breakdown`), the stepper (:meth:`EngineRun.stepper`), schedules (:meth:`EngineRun.schedules`) and
the engine a Perfetto trace is written from (:func:`simtc.render.perfetto.write_chrome_trace`).

**What the derivation is.** PTX is not SASS: ``ptxas`` may fuse, split, hoist or delete instructions. The class
of each PTX instruction is the SASS instruction NVIDIA's compilers emit for it in the plain case (NVIDIA CUDA
Binary Utilities, "Instruction Set Reference", the Hopper and Blackwell tables; e.g. ``fma.rn.f32`` -> ``FFMA``,
``mad.lo.s32`` -> ``IMAD``, ``ex2.approx.f32`` -> ``MUFU.EX2``, ``ld.shared.v4.f32`` -> ``LDS.128``); the
multi-instruction expansions (division, remainder, correctly rounded ``rcp``/``sqrt``, 64-bit integer
arithmetic) are simtc's estimate of their length, labelled as such in :data:`EXPANSIONS`; an ``add.s64`` of a
``mul.wide`` product nothing else reads is folded into its ``IMAD.WIDE`` as ptxas folds it (:func:`_fused`). Moves
and renames are priced as ptxas compiles them, most as no instruction (:data:`MOVES`, with the SASS counts that
show it).
Classes the engine's table does not name (fp64 ``D*``, local memory, atomics, branches) are priced by the engine
as it prices any unlisted class (the ALU pipe). The Program's ``meta`` says so (``cuda_core_costs``).

**Limits.** A :class:`Recorder` times one CTA (the first, or the one asked for): the CTAs that would share its SM
(their warps on its sub-partitions, their loads in its L1) are not simulated, and HBM is shared with one CTA per SM
of the grid (:func:`active_sms`). :class:`Recorders` records several CTAs of a launch and :func:`co_resident` puts
them on one SM (sub-partitions, port, L1, TMEM, copy engine shared; the checker off, their shared-memory addresses
overlapping): ``simtc.cuda``'s ``kernel.timing = [cta, ...]``. A loop that polls with ``mbarrier.test_wait`` keeps every
poll (the engine's ``try_wait`` then passes the later ones at once); a lone ``mbarrier.expect_tx`` /
``complete_tx`` has no record and is not replayed. The L1 starts empty; L2 holds the launch's data when the
device's allocations fit in it, as the host's copies leave them there (measured on the H200:
``tests/data/h200_exec_timing.json``), else nothing (a first touch is an HBM round trip);
``Recorded.engine(inputs_in_l2=...)`` chooses. The Program's ``meta`` holds what an engine needs to price its loads
as this recording does: ``shared_bytes`` (the L1 left beside it), ``inputs_in_l2`` and ``active_sms`` (an
:class:`~simtc.engine.core.Engine` argument: ``Engine(program, active_sms=...)`` for a Program read back from JSON).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator

import attrs
import numpy as np
from attrs import define, field, frozen

from simtc.errors import SimtcError
from simtc.ptx.ir import Address, Imm, Instruction, Reg, Vector

__all__ = ["COSTS", "EXPANSIONS", "GLOBAL_LOADS", "MAX_SHARED_PER_SM", "MAX_WARPS_PER_SM", "MOVES", "EngineRun",
           "Recorded", "Recorder", "Recorders", "Source", "access_bytes", "active_sms", "arch_of", "co_resident",
           "derived_counts", "run_engine", "sass_classes"]

COSTS = ("PTX-derived: each executed PTX instruction as the SASS class(es) it compiles to (simtc.ptx.recording."
         "sass_classes), the block's longest register dependency chain weighted by the engine's latencies, its "
         "shared-memory bank conflicts from the lanes' addresses; priced by simtc.engine.issue.block_cost with the "
         "engine's CUDA-core parameters")
"""The ``cuda_core_costs`` entry of a recorded Program's ``meta``: how its CudaCoreBlocks' costs were derived."""

GLOBAL_LOADS = ("the sectors each executed global load touched (its CudaCoreBlock's gmem_loads / gmem_stores), "
                "looked up in the SM's L1 and the chip's L2 by every engine that runs the Program (simtc.engine.l1."
                "GlobalCaches: L1 hits after ldg_l1_latency, L2 hits after ldg_l2_latency, the rest from HBM); a "
                "block whose sectors are unknown has its loads priced as L1 misses to HBM")
"""The ``global_loads`` entry of a recorded Program's ``meta``."""

EXPANSIONS = {
    "div.f32": ("MUFU.RCP", "FFMA", "FFMA", "FFMA", "FFMA", "FMUL"),
    "div.approx.f32": ("MUFU.RCP", "FMUL"),
    "div.f64": ("MUFU.RCP64H", "DFMA", "DFMA", "DFMA", "DFMA", "DFMA", "DFMA", "DMUL", "DFMA"),
    "div.s32": ("I2F.U32.RP", "MUFU.RCP", "F2I.FTZ.U32.TRUNC", "IMAD", "IMAD", "IMAD", "IMAD", "IMAD", "ISETP",
                "ISETP", "IADD3", "IADD3", "SEL", "LOP3"),
    "rcp.rn.f32": ("MUFU.RCP", "FFMA", "FFMA", "FFMA", "FFMA"),
    "sqrt.rn.f32": ("MUFU.RSQ", "FMUL", "FFMA", "FFMA", "FFMA", "FFMA"),
    "rcp.f64": ("MUFU.RCP64H", "DFMA", "DFMA", "DFMA", "DFMA", "DFMA", "DFMA"),
    "sqrt.f64": ("MUFU.RSQ64H", "DMUL", "DFMA", "DFMA", "DFMA", "DFMA", "DFMA", "DFMA"),
}
"""simtc's estimate of the SASS a multi-instruction PTX operation expands to (the Newton-Raphson refinements of
correctly rounded division, reciprocal and square root; integer division by a reciprocal estimate): the length and
mix are assumed, not measured. 64-bit integer division and remainder count as three 32-bit ones, 64-bit integer
add/sub as two IADD3, 64-bit multiply-add as three IMAD."""

MOVES = """How ptxas compiles PTX's moves and renames, which :func:`sass_classes` and :func:`derived_counts` follow.

* ``mov`` from one register to another, and the packs and unpacks of register halves (``mov.b64 %rd, {%r1, %r2}``,
  ``mov.b64 {%r1, %r2}, %rd``, ``mov.b32 %r, {%h1, %h2}``): no SASS instruction -- the register allocator gives the
  names one register (pair) -- except a pack whose half an unpack took out of another register: one ``MOV`` per such
  half (it is moved into the pair), none when the pack rejoins one register's halves in order;
* ``mov`` of a special register: ``S2R``; of an immediate or a variable's address: ``MOV``;
* ``cvt`` between integer types: none to the same size or narrower (the low bits are the value) or for a zero
  extension; ``SHF.R.S32.HI`` for a sign extension to 64 bits, ``PRMT`` within 32; ``I2I`` when saturating;
* ``cvta.to.global``: none (a generic address of global memory is its global address); ``ld.param``: ``LDC`` (a
  kernel's parameters are in constant bank 0).

Evidence (nvcc 13.0 / ptxas 13.0, ``nvdisasm -c``; static counts of one kernel's PTX-derived classes against its
SASS, NOPs aside). FlashMLA 9241ae3's SM100 head64 kernels (``csrc/sm100/decode/head64/instantiations/*.cu``, the
PTX :mod:`simtc.cuda.executed_sm100.head64` compiles, through ``ptxas -arch=sm_100a -O3``): V32's 6,008 PTX
instructions hold 2,041 movs (1,390 packs and unpacks, 427 register to register, 209 immediates, 12 addresses, 3
special registers) and 136 integer cvts; its SASS has 4,094 instructions, 380 of them moves (67 MOV, 218 UMOV, 95
IMAD.MOV) and 25 PRMT. Counting every PTX instruction as at least one SASS instruction gives 6,008 (+47%); these
rules give 3,967 (-3.1%; 247 MOV, 5 PRMT). MODEL1: 5,788 (+51%) before, 3,802 after, SASS 3,843 (-1.1%). The SASS's
remaining moves are ptxas's own (uniform-register staging, UMOV and R2UR, and pair alignment), with no PTX
instruction to stand for. ``tests/ptx/test_recording_timing.py`` compiles a kernel of crosswise-joined 64-bit
halves here for sm_90a and sm_100a (45 derived vs 43 SASS on sm_100a, its 8 MOVs the SASS's 4 MOV + 4 IMAD.MOV)."""

_FLOATS = {"f16", "bf16", "f16x2", "bf16x2", "f32", "f32x2", "f64", "tf32"}
_INTS = {"b8", "b16", "b32", "b64", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64"}
_TYPES = _FLOATS | _INTS | {"pred", "b128", "e4m3x2", "e5m2x2", "e2m1x2", "ue8m0x2"}
_WIDTH = {"8": 1, "16": 2, "32": 4, "64": 8, "128": 16}
_NO_DST = frozenset(("st", "bar", "barrier", "bra", "brx", "red", "exit", "ret", "call", "membar", "fence",
                     "prefetch", "prefetchu", "trap", "nanosleep", "pmevent", "stmatrix", "setmaxnreg",
                     "griddepcontrol", "mbarrier", "tcgen05", "wgmma", "cp"))
_MEMORY = frozenset(("ld", "ldu", "st", "atom", "red", "ldmatrix", "stmatrix"))


# ------------------------------------------------------------------------------------------------------------
# PTX instructions -> SASS classes
# ------------------------------------------------------------------------------------------------------------

def _type(ins: Instruction) -> str:
    for m in reversed(ins.modifiers):
        if m in _TYPES:
            return m
    return ""


def _bits(t: str) -> int:
    digits = "".join(ch for ch in t if ch.isdigit())
    if t.endswith("x2"):
        return 32
    return int(digits) if digits else 32


def _mem_class(prefix: str, nbytes: int) -> str:
    suffix = {1: "U8", 2: "U16", 4: "32", 8: "64", 16: "128"}.get(nbytes, "128")
    return f"{prefix}.{suffix}"


def access_bytes(ins: Instruction) -> int:
    """Bytes per lane of a load, store or atomic (``ld.shared.v4.f32``: 16; ``ldmatrix...x4``: 16)."""
    if ins.opcode in ("ldmatrix", "stmatrix"):
        num = next((m for m in ins.modifiers if m in ("x1", "x2", "x4")), "x1")
        return 4 * int(num[1:])
    t = _type(ins)
    vec = next((int(m[1:]) for m in ins.modifiers if m in ("v2", "v4", "v8")), 1)
    return max(1, _bits(t) // 8) * vec


@functools.lru_cache(maxsize=4096)
def _classes_of(name: str, ins: Instruction, space: str) -> tuple[str, ...]:
    op = ins.opcode
    mods = ins.modifiers
    t = _type(ins)
    f64 = t == "f64"
    f32 = t in ("f32", "tf32")
    half = t in ("f16", "bf16", "f16x2", "bf16x2")
    wide64 = t in ("u64", "s64", "b64")
    if t == "f32x2" and op in ("add", "sub", "mul", "fma"):  # sm_100's paired fp32 (FlashMLA head64: 384 mul.f32x2
        return ({"add": "FADD2", "sub": "FADD2", "mul": "FMUL2"}.get(op, "FFMA2"),)  # -> 384 FMUL2 in its SASS)
    if op in ("add", "sub"):
        if f32:
            return ("FADD",)
        if f64:
            return ("DADD",)
        if half:
            return ("HADD2",)
        return ("IADD3", "IADD3.X") if wide64 else ("IADD3",)
    if op == "mul":
        if f32:
            return ("FMUL",)
        if f64:
            return ("DMUL",)
        if half:
            return ("HMUL2",)
        if "wide" in mods:
            return ("IMAD.WIDE",)
        return ("IMAD.WIDE.U32", "IMAD", "IMAD") if wide64 else ("IMAD",)
    if op in ("mad", "fma"):
        if f32:
            return ("FFMA",)
        if f64:
            return ("DFMA",)
        if half:
            return ("HFMA2",)
        if "wide" in mods:
            return ("IMAD.WIDE",)
        return ("IMAD.WIDE.U32", "IMAD", "IMAD") if wide64 else ("IMAD",)
    if op in ("mul24", "mad24"):
        return ("IMAD",)
    if op in ("div", "rem"):
        if f32:
            return EXPANSIONS["div.approx.f32" if ("approx" in mods or "full" in mods) else "div.f32"]
        if f64:
            return EXPANSIONS["div.f64"]
        return EXPANSIONS["div.s32"] * (3 if wide64 else 1)
    if op in ("abs", "neg"):
        if f32 or half:
            return ("FADD",) if f32 else ("HADD2",)
        if f64:
            return ("DADD",)
        return ("IABS",) if op == "abs" else ("IADD3",)
    if op in ("min", "max"):
        if f32:
            return ("FMNMX",)
        if f64:
            return ("DMNMX",)
        if half:
            return ("HMNMX2",)
        return ("IMNMX",)
    if op in ("and", "or", "xor", "not", "cnot", "lop3", "copysign"):
        return ("LOP3",)
    if op in ("shl", "shr", "shf"):
        return ("SHF",)
    if op in ("popc",):
        return ("POPC",)
    if op in ("clz", "bfind"):
        return ("FLO",)
    if op == "brev":
        return ("BREV",)
    if op in ("bfe", "bfi", "fns"):
        return ("BMSK", "SHF") if op == "bfe" else ("BMSK", "LOP3") if op == "bfi" else ("POPC",)
    if op == "prmt":
        return ("PRMT",)
    if op in ("dp4a", "dp2a"):
        return ("IDP.4A",)
    if op == "sad":
        return ("VABSDIFF",)
    if op in ("setp", "set", "testp"):
        if f32 or op == "testp":
            return ("FSETP",)
        if f64:
            return ("DSETP",)
        if half:
            return ("HSETP2",)
        return ("ISETP", "ISETP") if wide64 else ("ISETP",)
    if op == "selp":
        return ("SEL",)
    if op == "slct":
        return ("FSEL",)
    if op in ("rcp", "sqrt", "rsqrt", "sin", "cos", "lg2", "ex2", "tanh"):
        fn = {"rcp": "RCP", "sqrt": "SQRT", "rsqrt": "RSQ", "sin": "SIN", "cos": "COS", "lg2": "LG2", "ex2": "EX2",
              "tanh": "TANH"}[op]
        if f64:
            if op in ("rcp", "sqrt"):
                return EXPANSIONS[f"{op}.f64"]
            return (f"MUFU.{fn}64H",)
        if "approx" in mods or half or op in ("sin", "cos", "lg2", "ex2", "tanh", "rsqrt"):
            return ("FMUL", f"MUFU.{fn}") if op in ("sin", "cos") else (f"MUFU.{fn}",)
        return EXPANSIONS[f"{op}.rn.f32"]
    if op == "cvt":
        types = [m for m in mods if m in _TYPES]
        dst, src = [*types, "", ""][:2]
        if "pack" in mods or any(x in ("e4m3x2", "e5m2x2", "e2m1x2", "ue8m0x2", "f16x2", "bf16x2") for x in types):
            return ("F2FP.PACK_AB",)
        if dst in _FLOATS and src in _FLOATS:
            if dst == src:
                return ("FRND",)
            return ("F2F.F64.F32",) if "f64" in (dst, src) else ("F2FP.BF16.F32.PACK_AB",) if dst in (
                "bf16", "f16") else ("HADD2.F32",)
        if dst in _FLOATS:
            return ("I2F",)
        if src in _FLOATS:
            return ("F2I",)
        return _int_cvt(dst, src, mods)
    if op == "mov":
        return _mov(ins)
    if op == "cvta":  # generic -> global is the same address: no instruction (MOVES); the shared window, an IADD3
        return () if mods[:2] == ("to", "global") else ("IADD3",)
    if op == "isspacep":
        return ("ISETP",)
    if op in ("ld", "ldu"):
        n = access_bytes(ins)
        if space == "shared":
            return (_mem_class("LDS", n),)
        if space == "local":
            return ("LDL",)
        if space in ("const", "kparam", "param"):  # (a kernel's parameters are in constant bank 0: LDC / LDCU)
            return ("LDC",)
        return (_mem_class("LDG.E", n),)
    if op == "st":
        n = access_bytes(ins)
        if space == "shared":
            return (_mem_class("STS", n),)
        if space == "local":
            return ("STL",)
        if space == "param":
            return ("MOV",)
        return (_mem_class("STG.E", n),)
    if op == "ldmatrix":
        return (_mem_class("LDS", access_bytes(ins)),)
    if op == "stmatrix":
        return (_mem_class("STS", access_bytes(ins)),)
    if op in ("atom", "red"):
        return ("ATOMS",) if space == "shared" else ("ATOMG",) if op == "atom" else ("RED.E",)
    if op == "shfl":
        return (f"SHFL.{(mods[1] if len(mods) > 1 and mods[0] == 'sync' else mods[0]).upper()}",)
    if op in ("vote", "activemask"):
        return ("VOTE",)
    if op in ("match", "redux", "elect"):
        return (op.upper(),)
    if op in ("bra", "brx"):
        return ("BRA",)
    if op in ("exit", "ret", "call", "trap"):
        return ({"exit": "EXIT", "ret": "RET", "call": "CALL", "trap": "BPT"}[op],)
    if op in ("membar", "fence"):
        return ("MEMBAR",)
    if op == "bar":  # bar.warp.sync
        return ("WARPSYNC",)
    return (op.upper(),)


def _mov(ins: Instruction) -> tuple[str, ...]:
    """A ``mov`` as ptxas compiles it (:data:`MOVES`): a register's value under another name, or its halves packed
    or unpacked (``mov.b64 %rd, {%r1, %r2}``), is no instruction -- the register allocator gives both names one
    register (pair); a special register is an ``S2R``; an immediate or a variable's address a ``MOV``."""
    from simtc.ptx.parser import is_special_register

    ops = ins.operands
    if len(ops) < 2:
        return ("MOV",)
    dst, src = ops[0], ops[1]
    if isinstance(dst, Vector) or isinstance(src, Vector):
        return ()
    if isinstance(src, Reg):
        return ("S2R",) if is_special_register(src.name) else ()
    return ("MOV",)


def _int_cvt(dst: str, src: str, mods) -> tuple[str, ...]:
    """A ``cvt`` between integer types as ptxas compiles it (:data:`MOVES`): saturating, an ``I2I``; to the same
    size or narrower (the low bits are the value), or a zero extension, no instruction; a sign extension to 64 bits
    the ``SHF.R.S32.HI`` that makes the high word, within 32 bits a ``PRMT`` (its sign-replicating mode)."""
    if "sat" in mods:
        return ("I2I",)
    bd, bs = _bits(dst), _bits(src)
    if bd <= bs or not src.startswith("s"):
        return ()
    return ("SHF",) if bd == 64 else ("PRMT",)


def sass_classes(ins: Instruction, space: str = "") -> tuple[str, ...]:
    """The SASS instruction class(es) one executed PTX instruction counts as (see the module text); ``space``:
    where a generic load or store went (``"shared"``, ``"global"``, ``"local"``; default: its state space).

    >>> from simtc.ptx.ir import Instruction
    >>> sass_classes(Instruction("fma.rn.f32")), sass_classes(Instruction("mad.lo.s32"))
    (('FFMA',), ('IMAD',))
    >>> sass_classes(Instruction("ld.shared.v4.f32")), sass_classes(Instruction("ex2.approx.ftz.f32"))
    (('LDS.128',), ('MUFU.EX2',))
    >>> sass_classes(Instruction("ld.u32"), "global"), sass_classes(Instruction("add.s64"))
    (('LDG.E.32',), ('IADD3', 'IADD3.X'))
    """
    if not space:
        space = next((m.split("::")[0] for m in ins.modifiers if m.split("::")[0] in
                      ("global", "shared", "local", "const", "param")), "global")
    return _classes_of(ins.name, ins, space)


# ------------------------------------------------------------------------------------------------------------
# registers read and written (for the dependency chain)
# ------------------------------------------------------------------------------------------------------------

def _regs_in(op) -> list[str]:
    if isinstance(op, Reg):
        return [op.name]
    if isinstance(op, Address):
        return _regs_in(op.base)
    if isinstance(op, Vector):
        return [n for it in op.items for n in _regs_in(it)]
    if isinstance(op, tuple):
        return [n for it in op for n in _regs_in(it)]
    return []


@functools.lru_cache(maxsize=8192)
def _deps(ins: Instruction) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(registers read, registers written) of an instruction."""
    ops = list(ins.operands)
    reads: list[str] = [ins.guard.reg] if ins.guard is not None else []
    if ins.opcode in _NO_DST or not ops:
        return tuple(reads + [n for o in ops for n in _regs_in(o)]), ()
    dst = ops[0]
    writes = _regs_in(dst) if not isinstance(dst, Address) else []
    if isinstance(dst, Address):
        reads += _regs_in(dst)
    reads += [n for o in ops[1:] for n in _regs_in(o)]
    return tuple(reads), tuple(writes)


# ------------------------------------------------------------------------------------------------------------
# the recording
# ------------------------------------------------------------------------------------------------------------

@frozen
class Source:
    """Where a record of a recorded Program came from: its PTX line(s) and CUDA source line(s)."""

    ptx_first: int
    ptx_last: int
    ptx_text: str
    """The PTX text of its (first) instruction."""
    cuda: str = ""
    """``file:line`` or ``file:first-last`` from ``.loc`` (``-lineinfo``); "" when the PTX has none."""
    instructions: int = 1
    """Warp instructions it stands for (a CudaCoreBlock: every executed PTX instruction in it)."""

    def to_json(self) -> dict:
        return {"ptx_lines": [self.ptx_first, self.ptx_last], "ptx": self.ptx_text, "cuda": self.cuda,
                "instructions": self.instructions}


@define(eq=False)
class _Exec:
    """One executed warp instruction of the recorded CTA."""

    fn: str
    pc: int
    ins: Instruction
    lanes: int
    records: list = field(factory=list)
    """(lane, record) the handlers applied while it ran."""
    smem: list = field(factory=list)
    """(kind, byte addresses) of its shared-memory accesses (CUDA-core loads/stores only)."""
    bar: tuple[int, int | None] | None = None
    """(id, thread count or None: all) of a bar.sync/bar.arrive/bar.red."""
    gmem: _Gmem | None = None
    """Its global-memory access (a load or store to global memory), with the sectors its lanes touched."""


@frozen
class _Gmem:
    """A global load's or store's sectors (``address // 32`` of every byte the active lanes touched; None when the
    address could not be read), its L1 policy (:func:`simtc.engine.l1.load_policy`) and the farthest level the
    recording's own pass over the caches found it at (``"l1"``, ``"l2"``, ``"dram"``: the latency its dependent chain
    is weighted with)."""

    kind: str
    sectors: np.ndarray | None = field(eq=False, repr=False)
    policy: str = "l1"
    level: str = "dram"
    space: str = "global"
    """``"local"`` for a generic access whose lanes all went to local memory (an LDL/STL, not in the caches)."""


class _CtaLog(list):
    """The list the executor appends the recorded CTA's warp instructions to (see :class:`Recorder`)."""

    def __init__(self, rec: Recorder, cs, keep: bool):
        super().__init__()
        self._rec, self._cs, self._keep = rec, cs, keep

    def append(self, item) -> None:
        self._rec._instruction(self._cs, item)
        if self._keep:
            super().append(item)


class Recorder:
    """Record one CTA of a launch (``cta``: its ``%ctaid``, default the first); use it as a context manager around
    the launch and pass it as ``LaunchOptions(recorder=...)``; then :meth:`program`.

    >>> Recorder((0, 0, 0)).cta_id
    (0, 0, 0)
    """

    def __init__(self, cta=(0, 0, 0), *, arch: str = "sm100", kernel: str = ""):
        idx = tuple(cta) if isinstance(cta, tuple | list) else (cta,)
        if not idx or len(idx) > 3 or not all(isinstance(v, int | np.integer) and not isinstance(v, bool)
                                               for v in idx):
            raise SimtcError(f"record CTA {cta!r}: one block index (x[, y[, z]]) of integers; simtc times one CTA "
                             "per run (CTAs sharing an SM: simtc.ptx.recording.Recorders)",
                             rule="one recorded CTA per timing run")
        self.cta_id = tuple(int(v) for v in (*idx, 0, 0)[:3])
        self.warps: dict[int, list[_Exec]] = {}
        self.nwarps = 0
        self.threads = 0
        self.arch = arch
        self.kernel = kernel
        self.ctas = 1
        self.shared_bytes = 0
        self.device_bytes = 0
        self.caches = None
        self.untimed: dict[int, str] = {}
        """PTX line -> text of executed copies the engine does not time (cp.async, prefetches, ...)."""
        self.seen = False
        self._log: list | None = None
        self._ctx = None
        self._pos = 0
        self._cur: tuple[int, _Exec] | None = None
        self._stop = None
        self._bars: dict[tuple[int, int], _Exec] = {}
        """``(warp, barrier id)`` -> the warp's last barrier instruction at that id (see :meth:`_one_arrival`)."""

    # ---- the launch's hooks ------------------------------------------------------------------------------
    def __enter__(self) -> Recorder:
        from simtc.ptx import async_ops

        self._ctx = async_ops.issued()
        self._log = self._ctx.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._flush()
        if self._stop is not None:
            self._stop()
            self._stop = None
        if self._ctx is not None:
            self._ctx.__exit__(*exc)
            self._ctx = None

    def cta(self, cs, trace):
        """The executor's per-CTA hook: the recorded CTA gets a recording list, the others keep ``trace``."""
        if tuple(cs.ctaid) != self.cta_id:
            if self.seen:
                self._flush()
            return trace
        if self._log is None:
            raise SimtcError("a Recorder records inside its with-block (with Recorder() as rec: launch(...))",
                             rule="Recorder is a context manager around the launch")
        self.seen = True
        grid = getattr(cs.launch, "grid", (1, 1, 1))
        self.ctas = int(grid[0]) * int(grid[1]) * int(grid[2])
        self.nwarps = len(cs.warps)
        self.threads = sum(int(np.count_nonzero(w.live)) for w in cs.warps)
        from simtc.engine.l1 import GlobalCaches, l1_capacity

        self.shared_bytes = int(getattr(cs, "shared_size", 0) or 0)
        self.device_bytes = sum(int(a.size) for a in cs.launch.device.memory.allocations)
        self.caches = GlobalCaches(l1_capacity(self.arch, self.shared_bytes))
        self._cs = cs
        self._pos = len(self._log)
        self._stop = cs.cta.observe(self._smem)
        return _CtaLog(self, cs, trace is not None)

    def _smem(self, kind: str, record, region) -> None:
        cur = self._cur
        if record is None and cur is not None and cur[1].ins.opcode in _MEMORY:
            cur[1].smem.append((kind, np.asarray(region.addresses, dtype=np.int64)))

    def _flush(self) -> None:
        """Give the records the handlers applied since the last mark to the instruction that ran them."""
        log = self._log
        if log is None or self._cur is None:
            return
        wid, ex = self._cur
        for ctaid, rwid, lane, rec in log[self._pos:]:
            if tuple(ctaid) != self.cta_id:
                continue
            if rwid != wid and type(rec).__name__ == "WgmmaMmaAsync":  # one record for the four warps
                for w in range(4 * (rwid // 4), 4 * (rwid // 4) + 4):
                    mine = self.warps.get(w)
                    if w != wid and mine:
                        mine[-1].records.append((lane, rec))
            ex.records.append((lane, rec))
        self._pos = len(log)

    def _instruction(self, cs, item) -> None:
        self._flush()
        wid, _fn, pc, bits = item
        w = cs.warps[wid]
        f = w.frames[-1]
        ins = f.code.fn.body[pc]
        mine = self.warps.setdefault(wid, [])
        if mine and mine[-1].pc == pc and mine[-1].fn == _fn:
            mine.pop()  # the warp waited at this instruction and runs it again: the earlier attempt did nothing
        ex = _Exec(_fn, pc, ins, bin(bits).count("1"))
        if ins.opcode in ("bar", "barrier") and (not ins.modifiers or ins.modifiers[0] != "warp"):
            ex.bar = self._bar_operands(ins, f, bits)
            self._one_arrival(wid, w, ex, mine)
        elif ins.opcode in ("ld", "ldu", "st"):
            ex.gmem = self._global_access(cs, ins, f, bits)
        elif ins.opcode == "cp":
            self._copies(cs, wid, ins, f, bits, ex)
        mine.append(ex)
        self._cur = (wid, ex)

    def _one_arrival(self, wid: int, w, ex: _Exec, mine: list) -> None:
        """A warp arrives once at a barrier its paths meet at: when some of its lanes already wait at this barrier
        id aside (:attr:`simtc.ptx.warp.Warp.parked`: a non-``.aligned`` barrier reached on different paths), the
        earlier path's barrier instruction arrived at nothing -- the executor arrives once, when the last path
        gets there -- and is dropped from the warp's stream; this one stands for the warp's arrival."""
        bid = ex.bar[0]
        prev = self._bars.get((wid, bid))
        if prev is not None and w.parked.get(bid):
            for k in range(len(mine) - 1, -1, -1):
                if mine[k] is prev:
                    del mine[k]
                    break
        self._bars[(wid, bid)] = ex

    # ---- operands read before the instruction runs (the executor appends it to the trace first) -----------
    @staticmethod
    def _lanes(ins: Instruction, f, bits: int) -> np.ndarray:
        """The lanes that execute the instruction: the warp's active lanes under its guard."""
        m = ((np.uint64(bits) >> np.arange(32, dtype=np.uint64)) & np.uint64(1)).astype(bool)
        g = ins.guard
        if g is not None and g.reg in f.code.reg_index:
            p = np.asarray(f.regs[f.code.reg_index[g.reg]]).astype(bool).reshape(32)
            m &= ~p if g.negated else p
        return m

    @staticmethod
    def _values(op, f, cs) -> np.ndarray | None:
        """An operand's 32 lane values as uint64 (a register, an immediate, an address ``[base+offset]`` with a
        register, a variable or no base); None for what the recording cannot read."""
        from simtc.ptx.ir import Sym
        from simtc.ptx.memory import CONST_WINDOW, PARAM_WINDOW

        off = 0
        if isinstance(op, Address):
            off, op = op.offset, op.base
            if op is None:
                return np.full(32, off & (2**64 - 1), np.uint64)
        if isinstance(op, Imm):
            return np.full(32, int(op.value) & (2**64 - 1), np.uint64)
        if isinstance(op, Reg):
            slot = f.code.reg_index.get(op.name)
            if slot is None:
                return None
            v = np.asarray(f.regs[slot])
            if v.ndim != 1:
                return None
            return v.astype(np.uint64) + np.uint64(off & (2**64 - 1))
        if isinstance(op, Sym):
            img = cs.launch.image
            if op.name in f.code.params:
                base = PARAM_WINDOW + f.code.params[op.name][0]
            elif op.name in img.global_vars:
                base = img.global_vars[op.name]
            elif op.name in img.const_vars:
                base = CONST_WINDOW + img.const_vars[op.name]
            else:
                return None
            return np.full(32, (base + op.offset + off) & (2**64 - 1), np.uint64)
        return None

    def _global_access(self, cs, ins: Instruction, f, bits: int) -> _Gmem | None:
        """The sectors a ``ld``/``ldu``/``st`` to global memory (or a generic one whose lanes are in the global
        window) touches, classified against the recording's pass over the caches (and the caches updated)."""
        from simtc.engine.l1 import load_policy
        from simtc.ptx.memory import WINDOWS

        space = next((m.split("::")[0] for m in ins.modifiers if m.split("::")[0] in
                      ("global", "shared", "local", "const", "param")), "generic")
        if space not in ("global", "generic") or len(ins.operands) < 2:
            return None
        kind = "store" if ins.opcode == "st" else "load"
        policy = load_policy(ins.modifiers) if kind == "load" else "l1"
        a = self._values(ins.operands[0 if kind == "store" else 1], f, cs)
        if a is None:
            return _Gmem(kind, None, policy)
        a = a[self._lanes(ins, f, bits)]
        if space == "generic" and a.size:
            other = np.array([v >> 40 for k, v in WINDOWS.items() if k != "global"], np.uint64)
            tags = a >> np.uint64(40)
            keep = ~np.isin(tags, other)  # (simtc.ptx.memory.window_of, for the warp's lanes at once)
            if not keep.any():
                local = (tags == np.uint64(WINDOWS["local"] >> 40)).all()
                return _Gmem(kind, None, policy, space="local") if local else None
            a = a[keep]
        size = access_bytes(ins)
        if size <= 32:  # naturally aligned (the executor faults otherwise): one sector per lane
            sec = np.unique(a >> np.uint64(5)).astype(np.int64)
        else:
            first = (a >> np.uint64(5)).astype(np.int64)
            sec = np.unique((first[:, None] + np.arange(-(-size // 32))).reshape(-1))
        caches = self.caches
        if kind == "store":
            caches.store(sec, 0)
            return _Gmem(kind, sec, policy, "l2")
        level = caches.level(sec, policy)
        caches.fill(sec, 0, policy)
        return _Gmem(kind, sec, policy, level)

    def _copies(self, cs, wid: int, ins: Instruction, f, bits: int, ex: _Exec) -> None:
        """The TMA and bulk-copy records of an executed ``cp.*`` (one per executing lane), as the hand Programs
        write them (:mod:`simtc.isa.tma`); copies the engine does not time are listed in :attr:`untimed`."""
        parts = ins.name.split(".")
        kind = parts[3] if parts[1:3] == ["async", "bulk"] and len(parts) > 3 else ""
        lanes = np.flatnonzero(self._lanes(ins, f, bits))
        if parts[1] == "reduce" or kind == "tensor":
            store = parts[1] == "reduce" or parts[5].split("::")[0] != "shared"
            for lane in lanes.tolist():
                ex.records.append((lane, self._tensor_copy(cs, wid, ins, f, lane, store)))
        elif kind == "commit_group":
            from simtc.isa.tma import BulkCommitGroup

            ex.records += [(lane, BulkCommitGroup()) for lane in lanes.tolist()]
        elif kind == "wait_group":
            from simtc.isa.tma import BulkWaitGroupRead

            n = int(ins.operands[0].value) if ins.operands and isinstance(ins.operands[0], Imm) else 0
            note = "" if "read" in parts else "wait_group: the engine waits for the source reads only"
            ex.records += [(lane, BulkWaitGroupRead(n, label=note)) for lane in lanes.tolist()]
        elif kind and kind != "prefetch" and ins.name.count("shared") == 1 and "global" in ins.name:
            for lane in lanes.tolist():
                ex.records.append((lane, self._bulk_copy(cs, ins, f, lane)))
        else:
            self.untimed[ins.line] = ins.text or ins.name

    def _shared(self, op, f, cs, lane: int) -> int:
        from simtc.ptx.memory import SHARED_WINDOW, window_of

        v = self._values(op, f, cs)
        if v is None:
            raise SimtcError(f"the recording cannot read the shared-memory operand {op}",
                             rule="recorded copies have register or immediate addresses")
        a = int(v[lane])
        return a - SHARED_WINDOW if window_of(a) == "shared" else a

    def _tensor_copy(self, cs, wid: int, ins: Instruction, f, lane: int, store: bool):
        from simtc.isa.tma import CpAsyncBulkTensor, CpAsyncBulkTensorStore
        from simtc.ptx.async_ops import mbarrier_name
        from simtc.ptx.async_tma import _tensor_map
        from simtc.ptx.ir import TensorRef

        ops = list(ins.operands)
        ref = next(o for o in ops if isinstance(o, TensorRef))
        maps = self._values(ref.tensor, f, cs)
        tm = _tensor_map(cs.warps[wid], f, int(maps[lane]), lane, ins)
        coords = tuple(int(np.uint32(int(v[lane]) & 0xFFFFFFFF).view(np.int32)) for v in
                       (self._values(c, f, cs) for c in ref.coords.items))
        alloc = cs.launch.device.memory.allocation_of(tm.address)
        tensor = (alloc.name if alloc is not None and alloc.name else f"global@{tm.address:#x}")
        gather = "tile::gather4" in ins.modifiers
        nbytes = tm.box_bytes * (4 if gather else 1)
        try:
            if store:
                return CpAsyncBulkTensorStore(self._shared(ops[1], f, cs, lane), nbytes, tensor, coords)
            swz = {"32B": "SW32", "64B": "SW64", "128B": "SW128", "128B_atom_32B": "SW128"}.get(tm.swizzle, "")
            rows = 4 if gather else int(np.prod(tm.box_shape[1:])) if tm.rank > 1 else 1
            return CpAsyncBulkTensor(self._shared(ops[0], f, cs, lane), nbytes,
                                     mbarrier_name(self._shared(ops[2], f, cs, lane)),
                                     mode="gather4" if gather else "tile", tensor=tensor, coords=coords, rows=rows,
                                     swizzle=swz)
        except SimtcError as e:
            raise SimtcError(f"PTX line {ins.line} `{ins.text or ins.name}`: {e.message}", rule=e.rule,
                             ref=e.ref) from None

    def _bulk_copy(self, cs, ins: Instruction, f, lane: int):
        """A non-tensor bulk copy: shared -> global as :class:`~simtc.isa.tma.CpAsyncBulk`; global -> shared as a
        one-row :class:`~simtc.isa.tma.CpAsyncBulkTensor` (the engine's load of ``size`` bytes that completes
        ``complete_tx`` on its mbarrier: what the memory model was fitted on, a chase of bulk copies)."""
        from simtc.isa.tma import CpAsyncBulk, CpAsyncBulkTensor
        from simtc.ptx.async_ops import mbarrier_name

        ops = list(ins.operands)
        size = int(self._values(ops[2], f, cs)[lane])
        to_shared = ins.name.split(".")[3].split("::")[0] == "shared"
        g = int(self._values(ops[1 if to_shared else 0], f, cs)[lane])
        alloc = cs.launch.device.memory.allocation_of(g)
        name = f"{alloc.name}+{g - alloc.base}" if alloc is not None and alloc.name else f"global@{g:#x}"
        try:
            if to_shared:
                return CpAsyncBulkTensor(self._shared(ops[0], f, cs, lane), size,
                                         mbarrier_name(self._shared(ops[3], f, cs, lane)), tensor=name, rows=1,
                                         label="cp.async.bulk global -> shared: a one-row copy")
            return CpAsyncBulk(self._shared(ops[1], f, cs, lane), size, dst=name)
        except SimtcError as e:
            raise SimtcError(f"PTX line {ins.line} `{ins.text or ins.name}`: {e.message}", rule=e.rule,
                             ref=e.ref) from None

    def _bar_operands(self, ins: Instruction, f, bits: int) -> tuple[int, int | None]:
        ops = list(ins.operands)
        if "red" in ins.modifiers:
            ops = ops[1:-1]
        lane = (bits & -bits).bit_length() - 1 if bits else 0

        def value(o) -> int:
            if isinstance(o, Imm):
                return int(o.value)
            slot = f.code.reg_index[o.name]
            return int(f.regs[slot][lane])
        bid = value(ops[0]) if ops else 0
        count = value(ops[1]) if len(ops) > 1 else None
        return bid, count

    # ---- the Program -------------------------------------------------------------------------------------
    def program(self, name: str | None = None) -> Recorded:
        """The recorded CTA as a Program (see the module text) with its side table of sources."""
        from simtc.isa.program import Barrier, Program, Role

        if not self.seen:
            raise SimtcError(f"block {self.cta_id} was not executed by the launch (the grid does not have it)",
                             rule="the recorded CTA is in the grid")
        streams: dict[int, list[tuple]] = {}
        for wid in range(self.nwarps):
            streams[wid] = list(_stream(self.warps.get(wid, []), self.arch, self.nwarps))
        groups: dict[tuple, list[int]] = {}
        for wid, st in streams.items():
            if not st:
                continue
            groups.setdefault(tuple(r for r, _ in st), []).append(wid)
        roles, sources = [], {}
        for recs, wids in groups.items():
            rname = f"warp{wids[0]}" if len(wids) == 1 else _warps_name(wids)
            roles.append(Role(rname, tuple(wids), recs))
            for i, (_, src) in enumerate(streams[wids[0]]):
                sources[(rname, i)] = src
        if not roles:
            raise SimtcError("the recorded CTA issued nothing", rule="a recorded CTA has instructions")
        barriers, counts, named = [], {}, {}
        from simtc.isa.mbarrier import MbarrierInit
        from simtc.isa.sync import BarArrive, BarSync, named_barrier_key

        for role in roles:
            for rec in role.records:
                if isinstance(rec, MbarrierInit):
                    counts.setdefault(rec.bar, set()).add(rec.count)
                elif isinstance(rec, BarSync | BarArrive):
                    named.setdefault(rec.id, set()).add(rec.threads)
        for bar, cs in sorted(counts.items()):
            if len(cs) == 1:
                addr = int(bar.split("@", 1)[1], 16) if bar.startswith("mbar@") else None
                barriers.append(Barrier(bar, "mbarrier", next(iter(cs)), addr=addr))
        for bid, ts in sorted(named.items()):
            if len(ts) == 1:
                barriers.append(Barrier(named_barrier_key(bid), "named", next(iter(ts)), id=bid))
        c = self.cta_id
        prog = Program(name or self.kernel or "kernel", tuple(roles), tuple(barriers),
                       description=f"block ({c[0]},{c[1]},{c[2]}) of {self.kernel or 'the kernel'} as simtc's PTX "
                                   "executor ran it: each warp's records in issue order",
                       meta=(("source", "executed PTX (simtc.ptx.recording)"), ("cta", f"{c[0]},{c[1]},{c[2]}"),
                             ("arch", self.arch), ("cuda_core_costs", COSTS), ("global_loads", GLOBAL_LOADS),
                             ("shared_bytes", self.shared_bytes), ("device_bytes", self.device_bytes),
                             ("inputs_in_l2", int(_fits_l2(self.arch, self.device_bytes))),
                             ("active_sms", _active_sms(self.arch, self.ctas)),
                             *((("untimed", "; ".join(f"PTX {ln} `{_short(t, 60)}`" for ln, t in
                                                      sorted(self.untimed.items()))),) if self.untimed else ())))
        return Recorded(prog, sources, self.arch, self.ctas, shared_bytes=self.shared_bytes,
                        device_bytes=self.device_bytes)


class Recorders:
    """Record several CTAs of one launch (``ctas``: their ``%ctaid``), each by its own :class:`Recorder`; use it as
    the Recorder is used, then :meth:`program` gives them as CTAs sharing one SM (:func:`co_resident`)."""

    def __init__(self, ctas, *, arch: str = "sm100", kernel: str = ""):
        ids = [tuple(int(v) for v in (*tuple(c), 0, 0)[:3]) for c in ctas]
        if not ids or len(set(ids)) != len(ids):
            raise SimtcError(f"record CTAs {list(ctas)!r}: one or more distinct block indices",
                             rule="co-resident CTAs are distinct CTAs of the grid")
        self.parts = [Recorder(c, arch=arch, kernel=kernel) for c in ids]

    def __enter__(self) -> Recorders:
        for p in self.parts:
            p.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        for p in reversed(self.parts):
            p.__exit__(*exc)

    def cta(self, cs, trace):
        for p in self.parts:
            trace = p.cta(cs, trace)
        return trace

    def program(self, name: str | None = None) -> Recorded:
        return co_resident([p.program(name) for p in self.parts])


MAX_SHARED_PER_SM = 228 * 1024
"""Shared memory one SM holds for its CTAs (the largest carve-out, :data:`simtc.engine.l1.SHARED_CARVEOUTS_KIB`)."""
MAX_WARPS_PER_SM = 64
"""Warps resident on one SM (CUDA C++ Programming Guide, technical specifications per compute capability: 2,048
threads per SM for 9.0 and 10.0)."""


def _renamed(rec, k: int, ids: dict[int, int]):
    """A record of CTA ``k`` with its mbarrier named per CTA and its named-barrier ids mapped."""
    from simtc.isa.sync import BarArrive, BarSync

    if isinstance(rec, BarSync | BarArrive):
        return attrs.evolve(rec, id=ids[rec.id], warp_ids=tuple(ids[i] for i in rec.warp_ids))
    bar = getattr(rec, "bar", None)
    if isinstance(bar, str) and bar:
        return attrs.evolve(rec, bar=f"cta{k}:{bar}")
    return rec


def co_resident(parts: list[Recorded]) -> Recorded:
    """Recorded CTAs of one launch as one Program whose CTAs share an SM: CTA ``k``'s warps follow CTA ``k - 1``'s
    (so they share the sub-partitions' issue slots and pipes, warp ``w`` on sub-partition ``w % 4``), its mbarriers
    are named ``cta<k>:...``, its named barriers get ids of their own, and the SM's shared-memory port, L1 (one tag
    store, each CTA's loads at the addresses it used), TMEM columns, copy engine and HBM share are the one SM's. The
    CTAs' records keep their own shared-memory addresses, which overlap, so the hazard checker is off in the
    co-resident run (:meth:`Recorded.engine`; check each CTA alone). Refused: CTAs whose shared memory or warps do not
    fit on one SM, or whose named barriers do not fit in its 16.

    >>> co_resident([])
    Traceback (most recent call last):
    ...
    simtc.errors.SimtcError: co-resident CTAs: none given [rule: one or more recorded CTAs of one launch]
    """
    from simtc.isa.program import Barrier, Program, Role
    from simtc.isa.sync import named_barrier_key

    if not parts:
        raise SimtcError("co-resident CTAs: none given", rule="one or more recorded CTAs of one launch")
    if len(parts) == 1:
        return parts[0]
    shared = sum(p.shared_bytes for p in parts)
    warps = [1 + max(w for r in p.program.roles for w in r.warps) for p in parts]
    if shared > MAX_SHARED_PER_SM or sum(warps) > MAX_WARPS_PER_SM:
        raise SimtcError(f"{len(parts)} CTAs of {parts[0].shared_bytes} bytes of shared memory and {warps[0]} warps "
                         f"do not fit on one SM ({MAX_SHARED_PER_SM} bytes, {MAX_WARPS_PER_SM} warps)",
                         rule="co-resident CTAs fit in one SM's shared memory and warp slots")
    roles, barriers, sources = [], [], {}
    base = next_id = 0
    for k, p in enumerate(parts):
        named = sorted({b.id for b in p.program.barriers if b.kind == "named"})
        ids = {b: next_id + j for j, b in enumerate(named)}
        next_id += len(named)
        if next_id > 16:
            raise SimtcError(f"{len(parts)} CTAs using {len(named)} named barriers each need more than the SM's 16",
                             rule="co-resident CTAs' named barriers fit in 16 ids")
        for r in p.program.roles:
            name = f"cta{k}.{r.name}"
            roles.append(Role(name, tuple(w + base for w in r.warps), tuple(_renamed(x, k, ids) for x in r.records),
                              threads=r.threads))
            for i in range(len(r.records)):
                if (r.name, i) in p.sources:
                    sources[(name, i)] = p.sources[(r.name, i)]
        for b in p.program.barriers:
            if b.kind == "named":
                barriers.append(Barrier(named_barrier_key(ids[b.id]), "named", b.count, id=ids[b.id]))
            else:
                barriers.append(attrs.evolve(b, name=f"cta{k}:{b.name}"))
        base += warps[k]
    first = parts[0].program
    ctas = "; ".join(dict(p.program.meta)["cta"] for p in parts)
    meta = (*((key, shared if key == "shared_bytes" else v) for key, v in first.meta if key != "cta"), ("cta", ctas),
            ("co_resident", str(len(parts))))
    prog = Program(first.name, tuple(roles), tuple(barriers),
                   description=f"blocks {ctas} of {first.name} sharing one SM, as simtc's PTX executor ran each",
                   meta=meta)
    return Recorded(prog, sources, parts[0].arch, parts[0].ctas, shared_bytes=shared,
                    device_bytes=parts[0].device_bytes, co_resident=len(parts))


def _warps_name(wids: list[int]) -> str:
    if wids == list(range(wids[0], wids[-1] + 1)):
        return f"warps{wids[0]}-{wids[-1]}"
    return "warps" + "_".join(map(str, wids))


def _cuda(ins_list) -> str:
    locs = [i.loc for i in ins_list if i.loc is not None and i.loc.line > 0]  # (line 0: no source line)
    if not locs:
        return ""
    files = {loc.file for loc in locs}
    lines = sorted({loc.line for loc in locs})
    base = os.path.basename(locs[0].file)
    if len(files) > 1:
        return f"{base}:{locs[0].line} (+{len(files) - 1} file(s))"
    return f"{base}:{lines[0]}" if len(lines) == 1 else f"{base}:{lines[0]}-{lines[-1]}"


def _short(text: str, n: int = 72) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n - 3] + "..."


def _label(src: Source) -> str:
    where = f"PTX {src.ptx_first}" if src.ptx_first == src.ptx_last else f"PTX {src.ptx_first}-{src.ptx_last}"
    return f"{where}" + (f" | {src.cuda}" if src.cuda else "")


_ELECTED_KEEP = frozenset(("Mma", "Cp", "Commit", "MbarrierInit", "MbarrierArriveExpectTx", "CpAsyncBulkTensor",
                           "CpAsyncBulkTensorStore", "CpAsyncBulk", "BulkCommitGroup", "BulkWaitGroupRead"))


def _records_of(ex: _Exec) -> list:
    """An instruction's records as the warp issues them: per-thread issues of elected records kept (each thread
    issues its own), the per-lane copies of a warp-wide record merged, an mbarrier.arrive's arrivals summed."""
    from simtc.isa.mbarrier import MbarrierArrive, MbarrierArriveExpectTx

    out: list = []
    arrivals: dict[str, int] = {}
    for _lane, rec in ex.records:
        cls = type(rec).__name__
        if cls in _ELECTED_KEEP:
            out.append(rec)
        elif isinstance(rec, MbarrierArrive):
            if rec.bar not in arrivals:
                out.append(rec.bar)  # its place
            arrivals[rec.bar] = arrivals.get(rec.bar, 0) + rec.count
        elif rec not in out:
            out.append(rec)
    final = []
    for r in out:
        if isinstance(r, str):  # the engine counts count x threads arrivals of a warp (threads 32)
            q, rem = divmod(arrivals[r], 32)
            if q:
                final.append(MbarrierArrive(r, q))
            final += [MbarrierArriveExpectTx(r, 0, label="one thread's arrival")] * rem
        else:
            final.append(r)
    return final


def _is_load(ex: _Exec) -> bool:
    """Whether the instruction is a load from global memory."""
    return ex.gmem is not None and ex.gmem.kind == "load" and ex.gmem.space == "global"


def _segments(execs: list[_Exec], nwarps: int) -> list:
    """A warp's executed instructions as ``("block", [execs])`` runs of CUDA-core work and ``("recs", ex, records)``.

    A run is cut at every record, after a branch when the run holds a global load, and before a global load whose
    address (or guard) the run derived from one of its own global loads (a pointer chase). The engine sends a
    block's loads at its start, as ``ptxas`` hoists the loads of a basic block above the work that does not feed
    them (assumed: no software pipelining across a loop's back edge), and a load's consumer in the block waits for
    it (the block's dependent chain runs through it)."""
    from simtc.isa.sync import BarArrive, BarSync

    out: list = []
    block: list[_Exec] = []
    tainted: set[str] = set()
    loads = False
    for ex in execs:
        recs = _records_of(ex)
        if ex.bar is not None:
            bid, count = ex.bar
            threads = count if count is not None else 32 * nwarps
            recs = [(BarArrive if "arrive" in ex.ins.modifiers else BarSync)(bid, threads)]
        if recs:
            if block:
                out.append(("block", block))
                block, tainted, loads = [], set(), False
            out.append(("recs", ex, recs))
            continue
        rd, wr = _deps(ex.ins)
        if block and _is_load(ex) and tainted.intersection(rd):
            out.append(("block", block))
            block, tainted, loads = [], set(), False
        block.append(ex)
        loads = loads or _is_load(ex)
        if _is_load(ex) or tainted.intersection(rd):
            tainted.update(wr)
        else:
            tainted.difference_update(wr)
        if loads and ex.ins.opcode in ("bra", "brx"):
            out.append(("block", block))
            block, tainted, loads = [], set(), False
    if block:
        out.append(("block", block))
    return out


def _reads_first(execs: list[_Exec]) -> tuple[set[str], set[str]]:
    """(registers a run reads before writing them, registers it writes)."""
    reads: set[str] = set()
    written: set[str] = set()
    for ex in execs:
        rd, wr = _deps(ex.ins)
        reads.update(r for r in rd if r not in written)
        written.update(wr)
    return reads, written


def _loaded_out(execs: list[_Exec]) -> set[str]:
    """Registers whose last writer in the run is a global load that nothing after it in the run reads."""
    out: set[str] = set()
    for ex in execs:
        rd, wr = _deps(ex.ins)
        out.difference_update(rd)
        if _is_load(ex):
            out.update(wr)
        else:
            out.difference_update(wr)
    return out


def _stream(execs: list[_Exec], arch: str, nwarps: int) -> Iterator[tuple]:
    """(record, Source) of one warp, in issue order.

    Where a global load's registers are read next: by a later block (that block reads them: the engine's scoreboard
    holds it until they arrive), by a record right after the load's block (the block waits for the load: its
    chain ends with it), or by a record after another block (that block reads them)."""
    items = _segments(execs, nwarps)
    reads_of: dict[int, set[str]] = {}
    at_end: dict[int, set[str]] = {}
    pending: dict[str, int] = {}
    last = -1
    for k, item in enumerate(items):
        if item[0] == "block":
            rd, wr = _reads_first(item[1])
            hit = rd.intersection(pending)
            reads_of[k] = hit
            for r in hit | wr:
                pending.pop(r, None)
            for r in _loaded_out(item[1]):
                pending[r] = k
            last = k
            continue
        rd, wr = _deps(item[1].ins)
        for r in set(rd).intersection(pending):
            k0 = pending.pop(r)
            if k0 == last:
                at_end.setdefault(k0, set()).add(r)
            else:
                reads_of.setdefault(last, set()).add(r)
        for r in wr:
            pending.pop(r, None)
    for k, item in enumerate(items):
        if item[0] == "block":
            yield _block(item[1], arch, at_end.get(k, set()), reads_of.get(k, set()))
            continue
        ex, recs = item[1], item[2]
        src = Source(ex.ins.line, ex.ins.line, ex.ins.text or ex.ins.name, _cuda([ex.ins]))
        where = _label(src).replace(f"PTX {src.ptx_first}", f"PTX {src.ptx_first} `{_short(src.ptx_text)}`", 1)
        for rec in recs:
            yield attrs.evolve(rec, label=where + (f" ({rec.label})" if rec.label else "")), src


@functools.lru_cache(maxsize=1024)
def _latency(cls: str, arch: str) -> int:
    """The engine's latency of one instruction of ``cls`` on a dependent chain (a global load: its DRAM latency;
    :func:`_load_latency` for a load whose level is known)."""
    from simtc.engine.issue import block_cost, memory_access
    from simtc.engine.parameters import Timing
    from simtc.isa.cuda_core import CudaCoreBlock

    t = Timing(arch)
    mem = memory_access(cls)
    if mem is not None and mem[0] == "gmem":
        return int(t["dram_latency"]) if mem[1] else 0
    return block_cost(CudaCoreBlock("latency", ((cls, 1),), chain=((cls, 1),)), t).chain


@functools.lru_cache(maxsize=16)
def _load_latency(level: str, arch: str) -> int:
    """A global load's latency at the level it reaches: ``ldg_l1_latency``, ``ldg_l2_latency`` (measured, see
    :data:`simtc.engine.l1.CACHE_PARAMETERS`) or the engine's ``dram_latency``."""
    from simtc.engine.l1 import CACHE_PARAMETERS
    from simtc.engine.parameters import Timing

    if level == "dram":
        return int(Timing(arch)["dram_latency"])
    return int(CACHE_PARAMETERS[arch][f"ldg_{level}_latency"].value)


def _wavefronts(addrs: np.ndarray, width: int) -> int:
    from simtc.smem.banks import bank_conflicts

    a = addrs
    if width < 4:
        a, width = a - a % 4, 4
    if width not in (4, 8, 16):
        width = 16
    return sum(bank_conflicts(a[i:i + 32], width=width).wavefronts for i in range(0, len(a), 32))


def _pack_moves(body) -> dict[int, int]:
    """Positions of the ``mov`` packs (``mov.b64 %rd, {%a, %b}``) that cost ``MOV`` s, and how many (:data:`MOVES`):
    a half that an unpack took out of another register (pair) sits in that pair's register and is moved into place,
    one ``MOV`` each, unless both halves are the same register's, in order (the pack undoes the unpack); a half
    some other instruction computed is written in place by it. ``body``: the instructions in the order they ran."""
    out: dict[int, int] = {}
    half_of: dict[str, tuple[str, int]] = {}  # register -> (the register it was unpacked from, which half)
    for k, ins in enumerate(body):
        if ins.opcode != "mov" or len(ins.operands) < 2:
            for r in _deps(ins)[1]:
                half_of.pop(r, None)
            continue
        dst, src = ins.operands[0], ins.operands[1]
        if isinstance(src, Vector) and not isinstance(dst, Vector):
            halves = [half_of.get(it.name) if isinstance(it, Reg) else None for it in src.items]
            same = all(h is not None and h[0] == halves[0][0] and h[1] == j for j, h in enumerate(halves))
            n = 0 if same else sum(h is not None for h in halves)
            if n:
                out[k] = n
        for r in _deps(ins)[1]:
            half_of.pop(r, None)
        if isinstance(dst, Vector) and isinstance(src, Reg):
            for j, it in enumerate(dst.items):
                if isinstance(it, Reg):
                    half_of[it.name] = (src.name, j)
    return out


def derived_counts(body) -> dict[str, int]:
    """The SASS classes a straight run of PTX instructions counts as (:func:`sass_classes`, the ``add.s64`` folded
    into a ``mul.wide``'s ``IMAD.WIDE``, the ``MOV`` s of packs that move halves into place): what a recorded
    CUDA-core block's ``counts`` hold for the instructions it ran.

    >>> from simtc.ptx.parser import parse_instruction as p
    >>> regs = ("%r1", "%r2", "%r3", "%r4", "%rd1", "%rd2", "%rd3")
    >>> derived_counts([p("mov.b64 {%r1, %r2}, %rd1;", registers=regs), p("mov.b64 %rd2, {%r1, %r2};", registers=regs),
    ...                 p("mov.b64 {%r3, %r4}, %rd3;", registers=regs), p("mov.b64 %rd2, {%r2, %r3};", registers=regs)])
    {'MOV': 2}
    """
    fused, packs = _fused(body), _pack_moves(body)
    counts: dict[str, int] = {}
    for k, ins in enumerate(body):
        classes = () if k in fused else ("MOV",) * packs[k] if k in packs else sass_classes(ins)
        for c in classes:
            counts[c] = counts.get(c, 0) + 1
    return counts


def _fused(body) -> set[int]:
    """Positions of the ``add.{s,u}64`` that ``ptxas`` folds into the ``IMAD.WIDE`` of a ``mul.wide`` before it (the
    64-bit addend of IMAD.WIDE: ``mul.wide.u32 a, i, 4; add.s64 p, base, a`` is one ``IMAD.WIDE.U32 p, i, 4, base``,
    as nvcc 13.0 compiles an indexed load for sm_90a), when nothing else in the run reads the product."""
    out: set[int] = set()
    product: dict[str, int] = {}
    reads: dict[str, int] = {}
    for ins in body:
        for r in _deps(ins)[0]:
            reads[r] = reads.get(r, 0) + 1
    for k, ins in enumerate(body):
        rd, wr = _deps(ins)
        if (ins.opcode == "add" and _type(ins) in ("s64", "u64", "b64") and ins.guard is None
                and any(r in product and reads.get(r) == 1 for r in rd)):
            out.add(k)
        for r in wr:
            product.pop(r, None)
        if ins.opcode == "mul" and "wide" in ins.modifiers and len(wr) == 1:
            product[wr[0]] = k
    return out


def _block(execs: list[_Exec], arch: str, at_end=frozenset(), reads=frozenset()) -> tuple:
    """A run of CUDA-core work as a :class:`~simtc.isa.cuda_core.CudaCoreBlock` and its Source; the block carries its
    global accesses in the order the engine books them (``gmem_loads``: ``(policy, sectors)`` per load, class by
    class in the counts' order; ``gmem_stores``) when every one's sectors are known. ``at_end``: registers of its
    loads the next record reads (the block's chain ends with those loads); ``reads``: registers of earlier blocks'
    loads it reads (it waits for them)."""
    from simtc.isa.cuda_core import CudaCoreBlock
    from simtc.isa.footprint import coalesce

    counts: dict[str, int] = {}
    depth: dict[str, tuple[int, tuple | None]] = {}
    best: tuple[int, tuple | None] = (0, None)
    reads_smem: list[np.ndarray] = []
    writes: list[np.ndarray] = []
    wavefronts = 0
    loads: dict[str, list] = {}
    stores: dict[str, list] = {}
    late = _loaded_out(execs)  # loads nothing in the block reads: not on its chain unless the next record reads them
    fused = _fused([ex.ins for ex in execs])
    packs = _pack_moves([ex.ins for ex in execs])
    for pos, ex in enumerate(execs):
        ins = ex.ins
        space = ""
        if ins.opcode in _MEMORY:
            space = "shared" if ex.smem else ("" if any(m.split("::")[0] in ("global", "local", "const", "param")
                                                       for m in ins.modifiers) else
                                              ex.gmem.space if ex.gmem is not None else "global")
            width = 16 if ins.opcode in ("ldmatrix", "stmatrix") else access_bytes(ins)  # (ldmatrix: 16 B rows)
            for kind, a in ex.smem:
                (reads_smem if kind == "smem.read" else writes).append(a)
                counted = kind == "smem.read" or ins.opcode not in ("atom", "red")  # an atomic: once
                if counted and a.size and a.size % width == 0:
                    wavefronts += _wavefronts(a.reshape(-1, width)[:, 0], width)
        classes = () if pos in fused else ("MOV",) * packs[pos] if pos in packs else sass_classes(ins, space)
        for c in classes:
            counts[c] = counts.get(c, 0) + 1
        g = ex.gmem
        if g is not None and g.space == "global" and len(classes) == 1 and classes[0].startswith(("LDG", "STG")):
            (loads if g.kind == "load" else stores).setdefault(classes[0], []).append(g)
        rd, wr = _deps(ins)
        d, node = max((depth.get(r, (0, None)) for r in rd), key=lambda x: x[0], default=(0, None))
        for c in classes:
            d += _load_latency(g.level, arch) if _is_load(ex) else _latency(c, arch)  # (g: the load's level)
            node = (c, node)
        for r in wr:
            depth[r] = (d, node)
        if d > best[0] and (not _is_load(ex) or at_end.intersection(wr) or not late.issuperset(wr)):
            best = (d, node)
    chain: dict[str, int] = {}
    node = best[1]
    while node is not None:
        chain[node[0]] = chain.get(node[0], 0) + 1
        node = node[1]
    first = execs[0].ins
    lines = [e.ins.line for e in execs]
    src = Source(min(lines), max(lines), first.text or first.name, _cuda([e.ins for e in execs]), len(execs))
    load_regs = sorted(late)
    gmem_loads: tuple = ()
    gmem_stores: tuple = ()
    if loads or stores:
        from simtc.engine.issue import memory_access

        def of(is_load: bool, table: dict) -> list:
            return [(c, table.get(c, ())) for c in counts if (memory_access(c) or ("",))[:2] == ("gmem", is_load)]

        ld, st = of(True, loads), of(False, stores)
        if all(len(gs) == counts[c] and all(x.sectors is not None for x in gs) for c, gs in ld + st):
            gmem_loads = tuple((x.policy, x.sectors) for _, gs in ld for x in gs)
            gmem_stores = tuple(x.sectors for _, gs in st for x in gs)
    rec = CudaCoreBlock(
        f"ptx_{min(lines)}_{max(lines)}", tuple(counts.items()),
        smem_reads=coalesce(np.concatenate(reads_smem)) if reads_smem else (),
        smem_writes=coalesce(np.concatenate(writes)) if writes else (),
        regs_read=tuple(sorted(reads)), regs_written=tuple(load_regs),
        chain=tuple((c, n) for c, n in chain.items() if c in counts),
        wavefronts=wavefronts, gmem_loads=gmem_loads, gmem_stores=gmem_stores,
        label=f"{_label(src)}: {len(execs)} PTX instructions (PTX-derived cost)")
    return rec, src


# ------------------------------------------------------------------------------------------------------------
# the Program on the engine
# ------------------------------------------------------------------------------------------------------------

@frozen
class Recorded:
    """A recorded CTA: its Program, where each record came from, and the engine architecture it runs on."""

    program: object
    sources: dict = field(eq=False, repr=False)
    """``(role, record index)`` -> :class:`Source`."""
    arch: str = "sm100"
    ctas: int = 1
    """CTAs of the launch's grid (the engine's ``active_sms``: one CTA per SM, at most every SM)."""
    shared_bytes: int = 0
    """The CTA's shared memory (static + dynamic), beside which the L1 is left (:func:`simtc.engine.l1.l1_capacity`)."""

    device_bytes: int = 0
    """Bytes allocated on the device at launch (simtc.cuda's arrays: each copied from the host or set there)."""
    co_resident: int = 1
    """CTAs of the Program sharing the SM (:func:`co_resident`); the checker runs on one CTA only."""

    @property
    def inputs_in_l2(self) -> bool:
        """Whether the launch starts with its data in L2: the device's allocations fit in ``l2_bytes`` (the host's
        copies leave what they wrote in L2: :class:`simtc.engine.l1.GlobalCaches`)."""
        return _fits_l2(self.arch, self.device_bytes)

    def source(self, role: str, index: int) -> Source | None:
        return self.sources.get((role, index))

    def engine(self, *, timing=None, check: bool | None = None, inputs_in_l2: bool | None = None):
        """A fresh :class:`simtc.engine.core.Engine` (timing mode) over the Program; the SMs sharing HBM are
        :func:`active_sms`. The blocks' recorded sectors go through the engine's L1 and L2
        (:func:`simtc.engine.handlers.cached_l1`, as on any engine that runs the Program). ``inputs_in_l2``: every
        sector is in L2 at launch, or a first touch goes to HBM (default: :attr:`inputs_in_l2`, the Program's
        ``meta``)."""
        if check is None:  # co-resident CTAs' records name the same shared-memory bytes (each CTA has its own)
            check = self.co_resident == 1
        from simtc.engine.core import Engine
        from simtc.engine.handlers import cached_l1

        eng = Engine(self.program, mode="timing", arch=self.arch, timing=timing, check=check,
                     active_sms=active_sms(self))
        cached_l1(eng, self.inputs_in_l2 if inputs_in_l2 is None else inputs_in_l2)
        return eng


@define(eq=False)
class EngineRun:
    """A recorded Program run on simtc's engine (timing mode) to its end."""

    recorded: Recorded
    engine: object

    @property
    def program(self):
        return self.recorded.program

    @property
    def cycles(self) -> int:
        return int(self.engine.cycles)

    @property
    def hazards(self) -> list:
        return list(self.engine.hazards)

    @property
    def clean(self) -> bool:
        return bool(self.engine.clean)

    def summary(self) -> dict:
        """The engine's summary (cycles, hazards, deadlock, per role, units), the Program's counts, and the recorded
        global loads by the level that answered them (``global_loads``: ``l1``, ``l2``, ``dram``; with
        ``inputs_in_l2``, whether the launch started with its data in L2)."""
        l1 = getattr(self.engine, "l1", None)
        caches = getattr(l1, "caches", None)
        warm = getattr(caches, "inputs_in_l2", None)
        return dict(self.engine.summary(), arch=self.recorded.arch, program=self.program.name,
                    roles={r.name: list(r.warps) for r in self.program.roles}, counts=self.program.counts(),
                    global_loads=dict(getattr(l1, "levels", {})) if caches is not None else {}, inputs_in_l2=warm)

    def breakdown(self) -> dict:
        """Where the cycles went, per warp: the time from each record's issue to the warp's next issue (or its end),
        summed by record class, CUDA-core blocks by the farthest level their global loads reached
        (``"cuda-core"``, ``"cuda-core, L1 hits"``, ``"cuda-core, L2"``, ``"cuda-core, DRAM"``); and the recorded
        global loads by that level (``"loads"``)."""
        from simtc.isa.cuda_core import CudaCoreBlock

        eng = self.engine
        levels = getattr(eng, "load_levels", {})
        names = {"": "cuda-core", "l1": "cuda-core, L1 hits", "l2": "cuda-core, L2", "dram": "cuda-core, DRAM"}
        roles = {r.name: r for r in self.program.roles}
        issues: dict[int, list] = {}
        ends: dict[int, int] = {}
        for e in eng.trace:
            if e.kind == "issue":
                issues.setdefault(e.warp, []).append((e.cycle, e.role, e.index))
            elif e.kind == "done":
                ends[e.warp] = e.cycle
        out: dict = {}
        for w, seq in sorted(issues.items()):
            agg: dict[str, int] = {}
            for k, (c, role, i) in enumerate(seq):
                nxt = seq[k + 1][0] if k + 1 < len(seq) else ends.get(w, self.cycles)
                rec = roles[role].records[i]
                key = names[levels.get((w, i), "")] if isinstance(rec, CudaCoreBlock) else type(rec).__name__
                agg[key] = agg.get(key, 0) + nxt - c
            out[f"warp{w}"] = dict(sorted(agg.items(), key=lambda kv: -kv[1]))
        l1 = getattr(eng, "l1", None)
        out["loads"] = dict(getattr(l1, "levels", {}))
        return out

    def stepper(self):
        """A :class:`simtc.engine.stepper.Stepper` over a fresh run of the Program."""
        from simtc.engine.stepper import Stepper

        return Stepper(self.recorded.engine, title=self.program.name)

    def schedules(self, n: int, seed: int = 0):
        """The checker under ``n`` schedules (:func:`simtc.engine.schedules.explore`) on the engine
        :meth:`Recorded.engine` builds (its SMs sharing HBM, its L1 and L2 over the recorded sectors): schedule 0 is
        this run's timing."""
        from simtc.engine.parameters import Timing
        from simtc.engine.schedules import explore

        rec = self.recorded
        return explore(self.program, n, seed, timing=Timing(rec.arch), mode="timing",
                       engine=lambda t: rec.engine(timing=t))


def arch_of(module) -> str:
    """The engine table for a module's ``.target`` (``sm_90a`` -> ``"sm90"``; ``sm_100a`` and any other -> ``"sm100"``).

    >>> from types import SimpleNamespace as M
    >>> arch_of(M(target=("sm_90a",))), arch_of(M(target=("sm_100a",))), arch_of(M(target=("sm_80",)))
    ('sm90', 'sm100', 'sm100')
    """
    from simtc.smem.desc import arch_name

    target = getattr(module, "target", ()) or ()
    for t in target:
        try:
            return arch_name(t)
        except SimtcError:
            continue
    return "sm100"


def active_sms(recorded: Recorded) -> int:
    """SMs that share HBM with the recorded CTA: one per CTA of the grid, at most the chip's ``sm_count``
    (simtc's assumption: a CTA per SM, the grid in one wave); the Program's ``meta`` ``active_sms``."""
    return _active_sms(recorded.arch, recorded.ctas)


def _active_sms(arch: str, ctas: int) -> int:
    from simtc.engine.parameters import Timing

    return max(1, min(int(ctas), int(Timing(arch)["sm_count"])))


def _fits_l2(arch: str, device_bytes: int) -> bool:
    from simtc.engine.l1 import CACHE_PARAMETERS

    return device_bytes <= CACHE_PARAMETERS[arch]["l2_bytes"].value


def run_engine(recorded: Recorded) -> EngineRun:
    """Run a recorded Program on the engine to its end (timing mode, the hazard checker on). The SMs sharing HBM
    are the grid's CTAs, one per SM, at most every SM (:func:`active_sms`)."""
    eng = recorded.engine()
    eng.run()
    return EngineRun(recorded, eng)
