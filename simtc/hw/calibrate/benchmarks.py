"""What ``simtc calibrate`` measures: the sections, the CUDA-core classes, the benchmarks and their kernels.

:func:`benches` lists every benchmark (:class:`Bench`: its kernels, :class:`Variant`, and the SASS they must
contain), in run order; no GPU and no compiler are needed. :data:`SECTIONS` and :data:`PARTS` are what a run
(``--only``) may name; :func:`_check_sections` puts a request in run order.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Iterable

from attrs import frozen

from simtc.errors import SimtcError

ARCH = "sm_90a"
SECTIONS = ("cuda_core", "cuda_core_pairs", "shared_memory", "memory", "sync", "launch")
"""The sections of a run (and of the recording), in the order they run."""
PARTS = {"memory_latency": "memory"}
"""Parts of a section that a run can ask for alone (``--only memory_latency``): name -> the section that holds
them (a run of the whole section runs them too)."""
SELECTABLE = SECTIONS + tuple(PARTS)
"""What ``sections`` (``--only``) may name."""
OTHER_SLACK = 8
"""How much the total count of undeclared SASS (NOP padding aside) may differ between a benchmark's first and
last kernel (compiler choices in the set-up code, e.g. VIADD for IADD3, move counts between mnemonics)."""
TIMEOUT_NS = 2_000_000_000
"""mbarrier waits give up (and flag a timeout) after this much %globaltimer time in one launch."""



@frozen
class AluOp:
    """One CUDA-core instruction class: the PTX of one step on a chain's state, and the SASS it must become."""

    key: str
    """The class as the recording names it (the SASS mnemonic where there is one)."""
    ptx: str
    """What one step is, in PTX terms (documentation)."""
    bodies: tuple[str, ...]
    """Inline-asm statements of one step; step d uses ``bodies[d % len(bodies)]``. ``S0`` (``S1``) stands for
    the chain's 32-bit state word(s); ``a`` and ``b`` are loop-invariant 32-bit operands."""
    sass: tuple[tuple[str, int], ...]
    """SASS per step: (group, count); a group is full mnemonics joined by ``|`` (``*`` globs allowed)."""
    unit: str = "instruction"
    state: int = 1
    """32-bit words of state per chain (2 for the dequant step)."""
    glue: tuple[tuple[str, float], ...] = ()
    """SASS that may grow with the steps, at most this many per step (e.g. the dequant step's feedback)."""
    shrink: int = 1
    """Unrolled depths divided by this (and loop iterations multiplied by it): keeps a long step's loop body
    small enough for the instruction cache (the dequant step is 23 instructions)."""

    def depths(self, mode: str) -> tuple[int, ...]:
        return tuple(d // self.shrink for d in (TP_DEPTHS if mode == "tp" else LAT_DEPTHS))


def _asm(ptx: str, n_in: int = 2, state: int = 1) -> str:
    outs = '"+r"(S0)' if state == 1 else '"+r"(S0), "+r"(S1)'
    ins = ("", ' : "r"(a)', ' : "r"(a), "r"(b)')[n_in]
    return f'asm volatile("{ptx}" : {outs}{ins});'


def _fp(body: str) -> str:
    """A float step on the chain word: f = chain, p = a, q = b, P a predicate."""
    return _asm("{ .reg .f32 f, p, q; .reg .pred P; mov.b32 f, %0; mov.b32 p, %1; mov.b32 q, %2; " + body
                + " mov.b32 %0, f; }")


_DEQUANT = _asm(
    "{ .reg .b16 l0, h0, l1, h1, e0, e1, e2, e3, e4, e5, e6, e7; .reg .b32 u0, u1, u2, u3, p0, p1, p2, p3, t0, t1; "
    ".reg .f32 f0, f1, f2, f3, f4, f5, f6, f7; "
    "cvt.u16.u32 l0, %0; shr.u32 t0, %0, 16; cvt.u16.u32 h0, t0; "
    "cvt.u16.u32 l1, %1; shr.u32 t1, %1, 16; cvt.u16.u32 h1, t1; "
    "cvt.rn.f16x2.e4m3x2 u0, l0; cvt.rn.f16x2.e4m3x2 u1, h0; cvt.rn.f16x2.e4m3x2 u2, l1; cvt.rn.f16x2.e4m3x2 u3, h1; "
    "mov.b32 {e0, e1}, u0; mov.b32 {e2, e3}, u1; mov.b32 {e4, e5}, u2; mov.b32 {e6, e7}, u3; "
    "cvt.f32.f16 f0, e0; cvt.f32.f16 f1, e1; cvt.f32.f16 f2, e2; cvt.f32.f16 f3, e3; "
    "cvt.f32.f16 f4, e4; cvt.f32.f16 f5, e5; cvt.f32.f16 f6, e6; cvt.f32.f16 f7, e7; "
    "cvt.rn.bf16x2.f32 p0, f1, f0; cvt.rn.bf16x2.f32 p1, f3, f2; cvt.rn.bf16x2.f32 p2, f5, f4; "
    "cvt.rn.bf16x2.f32 p3, f7, f6; "
    "mul.bf16x2 p0, p0, %2; mul.bf16x2 p1, p1, %2; mul.bf16x2 p2, p2, %2; mul.bf16x2 p3, p3, %2; "
    "mov.b32 %0, p0; xor.b32 p1, p1, p2; xor.b32 %1, p1, p3; }", 1, state=2)

_HMUL_BF16 = "HMUL2.BF16_V2|HFMA2.MMA.BF16_V2"

ALU_OPS: dict[str, AluOp] = {op.key: op for op in (
    AluOp("F2FP.F16.E4M3.UNPACK_B", "cvt.rn.f16x2.e4m3x2 of the chain word's low 16 bits",
          (_asm("{ .reg .b16 l, h; mov.b32 {l, h}, %0; cvt.rn.f16x2.e4m3x2 %0, l; }", 0),),
          (("F2FP.F16.E4M3.UNPACK_B", 1),)),
    AluOp("HADD2.F32", "cvt.f32.f16 of the chain word's low 16 bits (ptxas emits HADD2.F32 -RZ, R.H0_H0)",
          (_asm("{ .reg .b16 l, h; .reg .f32 f; mov.b32 {l, h}, %0; cvt.f32.f16 f, l; mov.b32 %0, f; }", 0),),
          (("HADD2.F32", 1),)),
    AluOp("F2FP.BF16.F32.PACK_AB", "cvt.rn.bf16x2.f32 (chain, a)",
          (_asm("{ .reg .f32 f, p; mov.b32 f, %0; mov.b32 p, %1; cvt.rn.bf16x2.f32 %0, f, p; }", 1),),
          (("F2FP.BF16.F32.PACK_AB", 1),)),
    AluOp("HMUL2.BF16_V2", "mul.bf16x2 (what cuda_bf16.h's operator* emits); ptxas alternates HMUL2.BF16_V2 and "
          "HFMA2.MMA.BF16_V2", (_asm("mul.bf16x2 %0, %0, %1;", 1),), ((_HMUL_BF16, 1),)),
    AluOp("HFMA2", "fma.rn.f16x2; ptxas alternates HFMA2 and HFMA2.MMA", (_asm("fma.rn.f16x2 %0, %0, %1, %2;"),),
          (("HFMA2|HFMA2.MMA", 1),)),
    AluOp("HADD2", "add.f16x2; ptxas alternates HADD2 and HFMA2.MMA (x * 1 + a)", (_asm("add.f16x2 %0, %0, %1;", 1),),
          (("HADD2|HFMA2.MMA", 1),)),
    AluOp("dequant", "FlashMLA SM90 cvt_fp8x8_bf16x8 for 8 values, as cuda_fp8.h/cuda_bf16.h lower it: the high "
          "fp8 pair of each word shifted down (shr.u32), 4 cvt.rn.f16x2.e4m3x2, 8 cvt.f32.f16, 4 cvt.rn.bf16x2.f32, "
          "4 mul.bf16x2 by a bf16x2 scale; one 3-input xor feeds the outputs back",
          (_DEQUANT,), (("SHF.R.U32.HI", 2), ("F2FP.F16.E4M3.UNPACK_B", 4), ("HADD2.F32", 8),
                        ("F2FP.BF16.F32.PACK_AB", 4), (_HMUL_BF16, 4)), unit="8 values", state=2,
          glue=(("LOP3.LUT", 1.0),), shrink=4),
    AluOp("FFMA", "fma.rn.f32", (_fp("fma.rn.f32 f, f, p, q;"),), (("FFMA", 1),)),
    AluOp("FMUL", "mul.rn.f32", (_fp("mul.rn.f32 f, f, p;"),), (("FMUL", 1),)),
    AluOp("FADD", "add.rn.f32", (_fp("add.rn.f32 f, f, p;"),), (("FADD", 1),)),
    AluOp("FMNMX", "max.f32 (fmaxf), every other step on the negated chain",
          (_fp("max.f32 f, f, p;"), _fp("neg.f32 f, f; max.f32 f, f, q;")), (("FMNMX", 1),)),
    AluOp("FSEL", "selp.f32 on a loop-invariant predicate, every other step on the negated chain",
          (_fp("setp.lt.f32 P, p, q; selp.f32 f, f, q, P;"),
           _fp("setp.lt.f32 P, p, q; neg.f32 f, f; selp.f32 f, f, p, P;")), (("FSEL", 1),)),
    AluOp("FSETP+FSEL", "setp.lt.f32 on the chain, then selp.f32 choosing the next value",
          (_fp("setp.lt.f32 P, f, p; selp.f32 f, p, q, P;"),), (("FSETP.*", 1), ("FSEL", 1)), unit="FSETP + FSEL"),
    AluOp("MUFU.EX2", "ex2.approx.ftz.f32, every other step on the negated chain",
          (_fp("ex2.approx.ftz.f32 f, f;"), _fp("neg.f32 f, f; ex2.approx.ftz.f32 f, f;")), (("MUFU.EX2", 1),)),
    AluOp("MUFU.RCP", "rcp.approx.ftz.f32 then neg.f32 (ptxas folds rcp(rcp(x)))",
          (_fp("rcp.approx.ftz.f32 f, f; neg.f32 f, f;"),), (("MUFU.RCP", 1),)),
    AluOp("SHFL.BFLY", "shfl.sync.bfly.b32 lane ^ 1, all 32 lanes",
          (_asm("shfl.sync.bfly.b32 %0, %0, 1, 0x1f, 0xffffffff;", 0),), (("SHFL.BFLY", 1),)),
    AluOp("IMAD", "mad.lo.u32", (_asm("mad.lo.u32 %0, %0, %1, %2;"),), (("IMAD", 1),)),
    AluOp("LOP3", "lop3.b32 (xor of three)", (_asm("lop3.b32 %0, %0, %1, %2, 0x96;"),), (("LOP3.LUT", 1),)),
    AluOp("IADD3", "two add.u32 that ptxas fuses into one IADD3",
          (_asm("{ .reg .u32 t; add.u32 t, %0, %1; add.u32 %0, t, %2; }"),), (("IADD3", 1),)),
)}
"""The CUDA-core classes, in the order they run."""

PAIRS = (("F2FP.BF16.F32.PACK_AB", "FFMA"), ("F2FP.BF16.F32.PACK_AB", "MUFU.EX2"),
         ("F2FP.F16.E4M3.UNPACK_B", "F2FP.BF16.F32.PACK_AB"), ("HFMA2", "FFMA"), ("FMNMX", "FFMA"), ("IMAD", "FFMA"))
"""Classes interleaved 1:1 to see which share a pipe."""

TP_CHAINS, TP_DEPTHS = 16, (4, 8, 12, 16)
"""Throughput kernels: independent chains a thread, and unrolled depths (steps = chains x depth)."""
LAT_DEPTHS = (32, 64, 96, 128)
"""Latency kernels: one chain, this many dependent steps per loop iteration."""
PAIR_CHAINS = 8
SMEM_DEPTHS = (8, 16, 24, 32)
CHASE_DEPTHS = (32, 64, 96, 128)
SYNC_DEPTHS = (8, 16, 24, 32)
WARPS_PER_SP = (1, 2, 3, 4)
WGMMA_DEPTHS = (16, 32)
"""wgmma + LDS: back-to-back m64n256k16 per commit group, per kernel."""
WGMMA_BYTES = 64 * 16 * 2 + 256 * 16 * 2
"""Operand bytes one m64n256k16 bf16 SS wgmma reads from shared memory (A 2 KiB + B 8 KiB)."""
LAT_SEED = 0x5EED
"""Seed of the latency chases' cycle order (:func:`chase_slot`)."""
LAT_POOLS = {"hbm": 4 << 30, "l2": 8 << 20, "l1": 64 << 10}
"""Latency pools (bytes): far larger than L2, L2-resident, L1-resident."""
LAT_STRIDE = {"ldg": 128, "bulk": 2048}
"""Bytes between the chase's elements: one 128-byte line per LDG element; 2 KiB per bulk element (the
largest copy)."""
LAT_FLUSH = 256 << 20
"""Bytes read after the 4 GiB latency pool has been touched, so that none of the pool stays in L2."""
LDG_CHASE_STEPS = (8, 16, 24, 32)
"""LDG chase kernels: dependent loads unrolled per loop iteration."""
LDG_CHASE = {"ldg.cg": ("ld.global.cg.u64", "LDG.E.64.STRONG.GPU", "cg"),
             "ldg": ("ld.global.u64", "LDG.E.64", "l1")}
"""LDG chase benchmarks: (PTX of one step, its SASS, kernel tag). ``ld.global.cg`` (cache in L2, not in L1)
serves the HBM and L2 pools; a plain ``ld.global`` (cached in L1) the L1 pool."""
BULK_BYTES = (64, 512, 2048)
"""Sizes of the dependent bulk copies (bytes)."""
_CHASE_MULS = (0x9E3779B1, 0x85EBCA6B, 0xC2B2AE35)
MODULES = ("alu", "pairs", "smem", "wgmma", "sync", "sync_loop", "memory", "latency", "launch")
"""The CUDA modules (one cubin each) holding every benchmark's kernels."""


@frozen
class Variant:
    """One kernel of a benchmark."""

    kernel: str
    steps: int
    """Measured steps a warp makes per loop iteration (0 for a kernel without a step loop)."""


@frozen
class Bench:
    """A benchmark: the kernels that measure one thing, and the SASS they must contain."""

    section: str
    name: str
    module: str
    """Key of the CUDA module holding the kernels (:func:`module_source`)."""
    variants: tuple[Variant, ...]
    per_step: tuple[tuple[str, int], ...] = ()
    counts: tuple[tuple[str, int, int], ...] = ()
    """Fixed kernels: (group, low, high) count of every kernel."""
    slack: int = 64
    glue: tuple[tuple[str, float], ...] = ()
    what: str = ""
    part: str | None = None
    """The part of the section (:data:`PARTS`) the benchmark belongs to, if any."""


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def _alu_kernel(op_key: str, mode: str, depth: int) -> str:
    return f"simtc_cal_{_slug(op_key)}_{mode}{depth}"


def _pair_key(a: str, b: str) -> str:
    return f"{a} + {b}"


def _smem_name(op: str, bits: int, ways: int) -> str:
    return f"{op}.{bits}/{ways}-way"


_SYNC_LOOPS = {
    "bar_sync": ("", 'asm volatile("bar.sync 0;" ::: "memory");', (("BAR.SYNC.DEFER_BLOCKING", 1),), ()),
    "fence_proxy_async": ("", 'asm volatile("fence.proxy.async.shared::cta;" ::: "memory");',
                          (("MEMBAR.ALL.CTA", 1), ("FENCE.VIEW.ASYNC.S", 1)), ()),
    "sts_fence_proxy_async": (
        "", 'asm volatile("st.volatile.shared.v4.u32 [%0+OFF], {%1, %1, %1, %1};\\n\\tfence.proxy.async.shared::cta;" '
            ':: "r"(buf), "r"(v) : "memory");', (("STS.128", 1), ("MEMBAR.ALL.CTA", 1), ("FENCE.VIEW.ASYNC.S", 1)), ()),
    "barrier_cluster": ("__cluster_dims__(2, 1, 1)",
                        'asm volatile("barrier.cluster.arrive.aligned;\\n\\tbarrier.cluster.wait.aligned;" '
                        '::: "memory");',
                        (("UCGABAR_ARV", 1), ("UCGABAR_WAIT", 1), ("MEMBAR.ALL.GPU", 1), ("ERRBAR", 1),
                         ("CGAERRBAR", 1), ("CCTL.IVALL", 1)), ()),
    "barrier_cluster_relaxed": (
        "__cluster_dims__(2, 1, 1)",
        'asm volatile("barrier.cluster.arrive.relaxed.aligned;\\n\\tbarrier.cluster.wait.aligned;" ::: "memory");',
        (("UCGABAR_ARV", 1), ("UCGABAR_WAIT", 1), ("CCTL.IVALL", 1)), ()),
}
"""Step-loop sync benchmarks: (kernel attribute, one step, SASS per step, glue)."""

_GATHER = {(m, f): f"simtc_cal_gather_{m}_{f}" for m in ("ldg", "ldgsts", "bulk") for f in ("v32", "model1")}


def _ldg_chase_kernel(tag: str, steps: int) -> str:
    return f"simtc_cal_lat_ldg_{tag}_d{steps}"


def chase_slot(k, bits: int, seed: int = LAT_SEED):
    """Slot of element ``k`` of a latency chase's cycle over 2^bits slots: the same bijection of [0, 2^bits) as
    ``simtc_chase_slot`` in ``calibrate_latency.cu`` (``k`` an int or a NumPy unsigned array).

    >>> sorted(chase_slot(k, 4) for k in range(16)) == list(range(16))
    True
    """
    m, h = (1 << bits) - 1, (bits + 1) >> 1
    x = (k + seed) & m
    for a in _CHASE_MULS:
        x = (x * a) & m
        x ^= x >> h
    return x


def benches() -> list[Bench]:
    """Every benchmark, in run order (no GPU, no compiler needed)."""
    out: list[Bench] = []
    for key, op in ALU_OPS.items():
        chains = TP_CHAINS // op.state
        out.append(Bench("cuda_core", f"cuda_core/{key}/throughput", "alu",
                         tuple(Variant(_alu_kernel(key, "tp", d), chains * d) for d in op.depths("tp")), op.sass,
                         glue=op.glue, what=f"{key}: {chains} independent chains a thread"))
        out.append(Bench("cuda_core", f"cuda_core/{key}/latency", "alu",
                         tuple(Variant(_alu_kernel(key, "lat", d), d) for d in op.depths("lat")), op.sass,
                         glue=op.glue, what=f"{key}: one dependent chain"))
    for a, b in PAIRS:
        key = _pair_key(a, b)
        per = collections.Counter()
        for g, n in ALU_OPS[a].sass + ALU_OPS[b].sass:
            per[g] += n
        out.append(Bench("cuda_core_pairs", f"cuda_core_pairs/{key}", "pairs",
                         tuple(Variant(_alu_kernel(f"{a}_{b}", "pair", d), PAIR_CHAINS * d) for d in TP_DEPTHS),
                         tuple(per.items()), what=f"{key}: {PAIR_CHAINS} chains of each, interleaved 1:1"))
    for op in ("LDS", "STS"):
        for bits in (32, 64, 128):
            mnem = op if bits == 32 else f"{op}.{bits}"
            glue = (("LOP3.LUT", 2.0),) if op == "LDS" else ()
            for ways in (1, 2, 4):
                name = _smem_name(op, bits, ways)
                out.append(Bench("shared_memory", f"shared_memory/{name}", "smem",
                                 tuple(Variant(f"simtc_cal_{_slug(name)}_d{d}", d) for d in SMEM_DEPTHS),
                                 ((mnem, 1),), glue=glue, what=f"{name}: one access a warp per step"))
    out.append(Bench("shared_memory", "shared_memory/LDS.32/latency", "smem",
                     tuple(Variant(f"simtc_cal_lds_chase_d{d}", d) for d in CHASE_DEPTHS), (("LDS", 1),),
                     what="pointer chase p = *p, one warp"))
    out.append(Bench("shared_memory", "shared_memory/wgmma+LDS", "wgmma",
                     tuple(Variant(f"simtc_cal_wgmma_lds_d{d}", d) for d in WGMMA_DEPTHS),
                     (("HGMMA.64x256x16.F32.BF16", 1),), slack=0, glue=(("NOP", 1.0),),
                     counts=(("WARPGROUP.ARRIVE", 1, 1), ("WARPGROUP.DEPBAR.LE", 1, 1), ("LDS.128", 16, 16)),
                     what="a wgmma m64n256k16 SS chain on one warpgroup, LDS.128 streams on two others"))
    out.append(Bench("sync", "sync/mbarrier_pingpong", "sync", (Variant("simtc_cal_mbar_pingpong", 0),),
                     counts=(("SYNCS.ARRIVE.TRANS64.A1T0", 2, 8), ("SYNCS.PHASECHK.TRANS64.TRYWAIT", 2, 16)),
                     what="mbarrier arrive -> try_wait ping-pong between two warps"))
    out.append(Bench("sync", "sync/tma_wake", "sync", (Variant("simtc_cal_tma_wake", 0),),
                     counts=(("UBLKCP.S.G", 1, 2), ("SYNCS.ARRIVE.TRANS64", 1, 2),
                             ("SYNCS.ARRIVE.TRANS64.A1T0", 1, 2), ("SYNCS.PHASECHK.TRANS64.TRYWAIT", 3, 12)),
                     what="16-byte cp.async.bulk completion -> waiting warps wake"))
    out.append(Bench("sync", "sync/st_async_pingpong", "sync", (Variant("simtc_cal_st_async_pingpong", 0),),
                     counts=(("STAS", 2, 4), ("UCGABAR_ARV", 2, 2), ("UCGABAR_WAIT", 2, 2)),
                     what="st.async + peer mbarrier ping-pong across a cluster of two"))
    for key, (_, _, per, glue) in _SYNC_LOOPS.items():
        out.append(Bench("sync", f"sync/{key}", "sync_loop",
                         tuple(Variant(f"simtc_cal_{key}_d{d}", d) for d in SYNC_DEPTHS), per, glue=glue,
                         slack=16, what=key))
    ldg = {"v32": (("LDG.E.EL.LTC256B.128.CONSTANT", 16, 16), ("LDG.E.EL.LTC128B.128.CONSTANT", 6, 6)),
           "model1": (("LDG.E.EL.LTC256B.128.CONSTANT", 14, 14), ("LDG.E.EL.LTC128B.128.CONSTANT", 4, 4),
                      ("LDG.E.64.CONSTANT", 2, 2))}
    for (method, fmt), kernel in _GATHER.items():
        if method == "ldg":
            counts = ldg[fmt] + (("STS", 1, 1),)
        elif method == "ldgsts":
            counts = (("LDGSTS.E.BYPASS.128", 2, 22), ("LDGDEPBAR", 1, 1), ("DEPBAR.LE", 1, 1))
            if fmt == "model1":
                counts += (("LDGSTS.E.64", 1, 2),)
        else:
            counts = (("UBLKCP.S.G", 1 if fmt == "v32" else 2, 2), ("SYNCS.ARRIVE.TRANS64", 1, 1))
        out.append(Bench("memory", f"memory/{method}/{fmt}", "memory", (Variant(kernel, 0),),
                         counts=(*counts, ("BAR.SYNC.DEFER_BLOCKING", 4, 4)), what=f"{method} gather of {fmt} rows"))
    out.append(Bench("memory", "memory/touch", "memory", (Variant("simtc_cal_touch", 0),),
                     counts=(("LDG.E.128*", 1, 2),), what="read a pool once (puts a small pool in L2)"))
    for key, (ptx, sass, tag) in LDG_CHASE.items():
        out.append(Bench("memory", f"memory/latency/{key}", "latency",
                         tuple(Variant(_ldg_chase_kernel(tag, d), d) for d in LDG_CHASE_STEPS), ((sass, 1),),
                         counts=(("STS.64", 2, 2), ("CS2R", 2, 2)), slack=2, part="memory_latency",
                         what=f"pointer chase p = *(u64*)p with {ptx}, one thread"))
    out.append(Bench("memory", "memory/latency/bulk", "latency", (Variant("simtc_cal_lat_bulk", 0),),
                     counts=(("UBLKCP.S.G", 1, 1), ("SYNCS.ARRIVE.TRANS64", 1, 1),
                             ("SYNCS.PHASECHK.TRANS64.TRYWAIT", 1, 2), ("LDS.64", 1, 1), ("LDG.E.64", 1, 1),
                             ("STS.64", 2, 2), ("CS2R", 4, 4)), part="memory_latency",
                     what="dependent cp.async.bulk copies (the next address is the first word that arrived)"))
    out.append(Bench("memory", "memory/latency/fill", "latency", (Variant("simtc_cal_lat_fill", 0),),
                     counts=(("STG.E.64", 2, 2),), part="memory_latency", what="write a chase's cycle into a pool"))
    out.append(Bench("memory", "memory/latency/touch", "latency", (Variant("simtc_cal_lat_touch", 0),),
                     counts=(("LDG.E.128*", 1, 2),), part="memory_latency",
                     what="read a pool once (TLB entries; L2-resident small pools; the L2 flush)"))
    out.append(Bench("launch", "launch/empty", "launch",
                     tuple(Variant(f"simtc_cal_empty_{c}", 0) for c in "abc"), counts=(("EXIT", 1, 1),),
                     what="empty kernels"))
    out.append(Bench("launch", "launch/clock_probe", "launch", (Variant("simtc_cal_clock_probe", 0),),
                     counts=(("CS2R", 4, 4),), what="clock64 / %globaltimer over a ~2 ms spin"))
    return out



def _check_sections(sections: Iterable[str]) -> list[str]:
    """The sections and parts asked for, in run order (a part at its section's place; a part whose whole
    section is asked for too is dropped: the section runs it)."""
    sections = list(sections)
    bad = [s for s in sections if s not in SELECTABLE]
    if bad or not sections:
        raise SimtcError(f"unknown section(s) {', '.join(map(repr, bad)) or '(none given)'}; "
                         f"sections are {', '.join(SELECTABLE)}", rule="calibration sections")
    out = []
    for s in SECTIONS:
        if s in sections:
            out.append(s)
        else:
            out += [part for part, sec in PARTS.items() if sec == s and part in sections]
    return out
