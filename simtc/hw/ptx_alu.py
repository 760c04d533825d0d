"""The H200 check of :mod:`simtc.ptx.alu`: a table of PTX instructions, their inputs, and the CUDA kernels
that apply each one on a GPU (``simtc/hw/cuda/ptx_alu.cu``, one inline-asm kernel per case).

``python -m simtc.hw.ptx_alu prepare DIR [main|gaps]`` writes the kernels' source and the inputs (``job.npz``) of
a case set (:data:`CASES`, recorded in tests/data/h200_ptx_alu.npz, or :data:`GAP_CASES`);
``python -m simtc.hw.ptx_alu run DIR OUT.npz`` compiles and runs them on a GPU through CuPy (numpy and
cupy only, so it runs on a bare GPU machine) and stores the inputs and outputs; tests/ptx/test_alu.py
compares simtc's ALU with the recording (tests/data/h200_ptx_alu.npz, described in tests/data/README_h200.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

__all__ = ["CASES", "GAP_CASES", "SETS", "N", "case_inputs", "kernel_source", "operand_types"]

N = 2048
"""Inputs per case: the cross product of edge values first, then random bit patterns."""

_RN = ("rn", "rz", "rm", "rp")
_LUTS = (0x96, 0xE8, 0xF8, 0x1E, 0x3C, 0x80, 0x01, 0xCA, 0x5A, 0xB4)
_CMPF = ("eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan")


def _cases() -> list[str]:
    c: list[str] = []
    c += ["add.s32", "add.sat.s32", "sub.sat.s32", "add.u16", "sub.s64", "add.cc.u32", "addc.cc.u32", "sub.cc.u32",
          "subc.cc.u32", "add.cc.u64", "subc.u64", "mul.lo.s32", "mul.hi.s32", "mul.hi.u32", "mul.lo.u64",
          "mul.hi.u64", "mul.hi.s64", "mul.wide.s32", "mul.wide.u32", "mul.wide.s16", "mul.hi.u16", "mad.lo.s32",
          "mad.hi.u32", "mad.hi.sat.s32", "mad.wide.s32", "mad.hi.s64", "mad.lo.cc.u32", "madc.hi.cc.u32",
          "mul24.lo.s32", "mul24.hi.s32", "mul24.hi.u32", "mad24.lo.u32", "mad24.hi.sat.s32", "sad.s32", "sad.u32",
          "sad.u64", "div.s32", "div.u32", "div.s64", "div.u64", "div.s16", "rem.s32", "rem.u32", "rem.s64",
          "rem.u64", "abs.s32", "abs.s64", "abs.s16", "neg.s32", "min.s32", "min.u32", "max.s64", "max.u16",
          "max.relu.s32", "min.u16x2", "max.s16x2", "min.relu.s16x2", "popc.b32", "popc.b64", "clz.b32", "clz.b64",
          "bfind.u32", "bfind.s32", "bfind.shiftamt.s32", "bfind.u64", "bfind.s64", "brev.b32", "brev.b64",
          "fns.b32", "bfe.u32", "bfe.s32", "bfe.u64", "bfe.s64", "bfi.b32", "bfi.b64", "dp4a.u32.u32",
          "dp4a.s32.s32", "dp4a.s32.u32", "dp2a.lo.u32.u32", "dp2a.hi.s32.s32", "dp2a.lo.s32.u32"]
    c += ["and.b32", "or.b64", "xor.b16", "not.b32", "cnot.b32", "and.pred", "xor.pred", "or.pred", "not.pred"]
    c += [f"lop3.b32 {lut:#x}" for lut in _LUTS]
    c += ["shf.l.wrap.b32", "shf.l.clamp.b32", "shf.r.wrap.b32", "shf.r.clamp.b32", "shl.b16", "shl.b32", "shl.b64",
          "shr.u32", "shr.s32", "shr.b32", "shr.s16", "shr.u64", "shr.s64"]
    c += ["prmt.b32"] + [f"prmt.b32.{m}" for m in ("f4e", "b4e", "rc8", "ecl", "ecr", "rc16")]
    for op in ("add", "sub", "mul", "fma"):
        c += [f"{op}.{r}.f32" for r in _RN] + [f"{op}.{r}.f64" for r in _RN]
        c += [f"{op}.rn.ftz.f32", f"{op}.rn.sat.f32", f"{op}.rz.ftz.sat.f32"]
    c += ["add.f32", "mul.f32", "mad.rn.f32"]
    c += [f"div.{r}.f32" for r in _RN] + [f"div.{r}.f64" for r in _RN] + ["div.rn.ftz.f32"]
    c += [f"rcp.{r}.f32" for r in _RN] + [f"rcp.{r}.f64" for r in _RN] + ["rcp.rn.ftz.f32"]
    c += [f"sqrt.{r}.f32" for r in _RN] + [f"sqrt.{r}.f64" for r in _RN] + ["sqrt.rn.ftz.f32"]
    c += ["div.approx.f32", "div.approx.ftz.f32", "div.full.f32", "div.full.ftz.f32", "rcp.approx.f32",
          "rcp.approx.ftz.f32", "rcp.approx.ftz.f64", "sqrt.approx.f32", "sqrt.approx.ftz.f32", "rsqrt.approx.f32",
          "rsqrt.approx.ftz.f32", "rsqrt.approx.f64", "rsqrt.approx.ftz.f64", "sin.approx.f32", "sin.approx.ftz.f32",
          "cos.approx.f32", "cos.approx.ftz.f32", "lg2.approx.f32", "lg2.approx.ftz.f32", "ex2.approx.f32",
          "ex2.approx.ftz.f32", "tanh.approx.f32"]
    c += ["abs.f32", "abs.ftz.f32", "neg.f32", "neg.ftz.f32", "abs.f64", "neg.f64", "min.f32", "min.ftz.f32",
          "max.f32", "max.ftz.f32", "min.NaN.f32", "max.NaN.f32", "min.xorsign.abs.f32", "max.xorsign.abs.f32",
          "min.f64", "max.f64", "copysign.f32", "copysign.f64"]
    c += [f"testp.{k}.f32" for k in ("finite", "infinite", "number", "notanumber", "normal", "subnormal")]
    c += ["testp.normal.f64", "testp.subnormal.f64"]
    c += ["add.f16", "add.ftz.f16", "add.sat.f16", "sub.f16", "mul.f16", "fma.rn.f16", "fma.rn.ftz.sat.f16",
          "fma.rn.relu.f16", "add.f16x2", "mul.ftz.f16x2", "fma.rn.f16x2", "fma.rn.relu.f16x2", "add.bf16",
          "sub.bf16", "mul.bf16", "fma.rn.bf16", "fma.rn.relu.bf16", "add.rn.bf16x2", "fma.rn.bf16x2", "neg.f16",
          "abs.f16", "neg.bf16", "abs.bf16x2", "min.f16", "max.f16x2", "min.NaN.f16", "max.NaN.bf16x2", "min.bf16",
          "ex2.approx.f16", "ex2.approx.f16x2", "ex2.approx.ftz.bf16", "ex2.approx.ftz.bf16x2",
          "tanh.approx.f16", "tanh.approx.bf16", "tanh.approx.f16x2"]
    c += [f"setp.{k}.f32 pq" for k in _CMPF] + ["setp.lt.ftz.f32 pq", "setp.equ.f64 pq", "setp.lt.f64 pq"]
    c += [f"setp.{k}.s32 pq" for k in ("eq", "ne", "lt", "le", "gt", "ge")]
    c += [f"setp.{k}.u32 pq" for k in ("lo", "ls", "hi", "hs")]
    c += ["setp.lt.s64 pq", "setp.ge.u64 pq", "setp.lt.u16 pq", "setp.ne.b32 pq", "setp.lt.and.s32 pq",
          "setp.ge.or.f32 pq", "setp.gtu.xor.f64 pq", "setp.lt.f16", "setp.ltu.f16x2 pq", "setp.gt.bf16x2 pq",
          "setp.nan.bf16"]
    c += ["set.lt.u32.s32", "set.gtu.f32.f32", "set.ne.and.s32.f64", "selp.b32", "selp.f64", "slct.b32.s32",
          "slct.f32.f32", "slct.ftz.u32.f32"]
    c += ["cvt.s32.s8", "cvt.u32.u8", "cvt.s64.s32", "cvt.u64.u32", "cvt.s64.u32", "cvt.u32.s64", "cvt.s16.s32",
          "cvt.u16.s64", "cvt.sat.u8.s32", "cvt.sat.s8.s32", "cvt.sat.s32.u32", "cvt.sat.u32.s32", "cvt.sat.s16.s64",
          "cvt.sat.u16.u64", "cvt.sat.s32.s64", "cvt.sat.u32.s64", "cvt.sat.s64.u64", "cvt.sat.u64.s64",
          "cvt.sat.u16.s16", "cvt.sat.s8.u8"]
    c += [f"cvt.{r}.f32.s32" for r in _RN] + ["cvt.rn.f32.u32", "cvt.rz.f32.u64", "cvt.rn.f32.s64", "cvt.rm.f32.s64",
                                               "cvt.rp.f32.s64", "cvt.rn.f64.s64", "cvt.rz.f64.u64", "cvt.rp.f64.u64",
                                               "cvt.rn.f64.s32", "cvt.rn.f16.s32", "cvt.rz.f16.u32", "cvt.rn.f16.s16",
                                               "cvt.rn.bf16.s32", "cvt.rn.f32.u16"]
    c += [f"cvt.{r}.s32.f32" for r in ("rni", "rzi", "rmi", "rpi")]
    c += ["cvt.rzi.u32.f32", "cvt.rni.s64.f32", "cvt.rzi.u64.f32", "cvt.rni.s64.f64", "cvt.rzi.u64.f64",
          "cvt.rzi.s32.f64", "cvt.rmi.u32.f64", "cvt.rni.s16.f32", "cvt.rzi.u8.f32", "cvt.rni.s32.f16",
          "cvt.rzi.u16.f16", "cvt.rni.s32.bf16", "cvt.rzi.ftz.s32.f32", "cvt.rpi.u64.f64"]
    c += ["cvt.f64.f32", "cvt.f32.f16", "cvt.f32.bf16", "cvt.f64.f16", "cvt.rn.f16.f64", "cvt.rn.bf16.f64",
          "cvt.rn.relu.f16.f32", "cvt.rn.relu.bf16.f32", "cvt.rni.f32.f32", "cvt.rzi.f32.f32", "cvt.rmi.f64.f64",
          "cvt.rpi.ftz.f32.f32", "cvt.ftz.f32.f32", "cvt.sat.f32.f32", "cvt.ftz.sat.f32.f32", "cvt.rn.ftz.f32.f64",
          "cvt.f64.f64"]
    c += [f"cvt.{r}.f32.f64" for r in _RN] + [f"cvt.{r}.f16.f32" for r in _RN] + [f"cvt.{r}.bf16.f32" for r in _RN]
    c += ["cvt.rn.f16x2.f32", "cvt.rz.f16x2.f32", "cvt.rn.relu.f16x2.f32", "cvt.rn.bf16x2.f32",
          "cvt.rz.relu.bf16x2.f32", "cvt.rn.satfinite.e4m3x2.f32", "cvt.rn.satfinite.relu.e4m3x2.f32",
          "cvt.rn.satfinite.e5m2x2.f32", "cvt.rn.f16x2.e4m3x2", "cvt.rn.f16x2.e5m2x2", "cvt.rn.relu.f16x2.e4m3x2",
          "cvt.rna.tf32.f32", "cvt.rn.tf32.f32", "cvt.rz.tf32.f32", "cvt.rna.satfinite.tf32.f32"]
    return c


CASES: tuple[str, ...] = tuple(_cases())
"""Each case: a PTX instruction name, then ``pq`` for a ``p|q`` predicate pair, or an immediate (lop3's immLut)."""


def _gap_cases() -> list[str]:
    c = ["cvt.pack.sat.u16.s32", "cvt.pack.sat.s16.s32"]
    c += [f"cvt.pack.sat.{k}.s32.b32" for k in ("u8", "s8", "u4", "s4", "u2", "s2")]
    c += [f"set.{k}.f16x2.f16x2" for k in ("eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "geu", "num",
                                             "nan")]
    c += ["set.lt.ftz.f16x2.f16x2", "set.ge.u32.f16x2", "set.neu.s32.f16x2", "set.lt.and.f16x2.f16x2",
          "set.gtu.or.u32.f16x2"]
    c += [f"set.{k}.bf16x2.bf16x2" for k in ("eq", "lt", "ge", "ltu", "nan", "num")]
    c += ["set.le.u32.bf16x2", "set.ne.xor.s32.bf16x2"]
    c += ["set.gt.f16.f32", "set.equ.f16.f16", "set.lt.and.f16.s32", "set.ge.bf16.f32", "set.nan.bf16.f64",
          "set.lt.u16.f16", "set.geu.s16.f16", "set.le.u32.bf16", "set.ne.s32.bf16"]
    return c


GAP_CASES: tuple[str, ...] = tuple(_gap_cases())
"""A second recording set (tests/data/h200_ptx_alu_gaps.npz): ``cvt.pack`` (its saturation) and ``set`` into
f16/bf16 and 16-bit destinations and on packed f16x2/bf16x2 halves (NaN operands, signed zeros, subnormals)."""

SETS = {"main": CASES, "gaps": GAP_CASES}


def operand_types(case: str) -> tuple[tuple[str, ...], tuple[str, ...], bool, bool]:
    """(source types, destination types, carry in, carry out) of a case, from simtc's ALU."""
    from simtc.ptx import alu

    op = alu.compile(_build(case))
    return op.src_types, op.dst_types, op.cc_in, op.cc_out


def _build(case: str):
    from simtc.ptx.ir import Imm, Instruction, Reg

    name, *extra = case.split()
    dst = (Reg("%p1"), Reg("%p2")) if "pq" in extra else Reg("%d")
    nsrc = _nsrc(name)
    srcs: list = [Reg(f"%s{i}") for i in range(nsrc)]
    if name.startswith("lop3"):
        srcs = [*srcs[:3], Imm(int(extra[0], 16))]
    return Instruction(name, (dst, *srcs))


def _nsrc(name: str) -> int:
    opc, *mods = name.split(".")
    bop = any(m in ("and", "or", "xor") for m in mods) and opc in ("setp", "set")
    three = {"mad", "madc", "fma", "mad24", "sad", "bfe", "fns", "dp4a", "dp2a", "shf", "prmt", "selp", "slct", "lop3"}
    if opc in three:
        return 3
    if opc == "bfi":
        return 4
    if opc in ("setp", "set"):
        return 3 if bop else 2
    if opc in ("abs", "neg", "not", "cnot", "popc", "clz", "bfind", "brev", "rcp", "sqrt", "rsqrt", "sin", "cos",
               "lg2", "ex2", "tanh", "testp", "mov"):
        return 1
    if opc == "cvt":
        if "pack" in mods:
            return 3 if mods[-1] == "b32" else 2
        return 2 if mods[-1] == "f32" and mods[-2] in ("f16x2", "bf16x2", "e4m3x2", "e5m2x2") else 1
    return 2


# --- inputs ------------------------------------------------------------------------------------------------

def _edges(t: str) -> np.ndarray:
    from simtc.ptx.alu import type_width

    w = type_width(t)
    if t == "pred":
        return np.array([0, 1], np.uint64)
    if t in ("f32", "f16x2", "bf16x2") or t == "tf32":
        v = [0, 0x80000000, 0x3F800000, 0xBF800000, 0x3F000000, 0x3FC00000, 0x40000000, 0x40400000, 1, 0x80000001,
             0x007FFFFF, 0x00800000, 0x80800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000,
             0x7FC12345, 0x7F800001, 0xFFC00000, 0x3F800001, 0x3FFFFFFF, 0x40490FDB, 0x477FE000, 0x477FF000,
             0x43E00000, 0x43E80000, 0x33800000, 0x4F000000, 0x5F800000, 0xCF000000, 0x3EFFFFFF, 0x40200000,
             0xC0200000, 0x3C003C00, 0x7C00FC00, 0x7E007E00, 0x00010001, 0x3F80BF80, 0x7F807FC0]
    elif t == "f64":
        v = [0, 1 << 63, 0x3FF0000000000000, 0xBFF0000000000000, 0x3FE0000000000000, 0x4000000000000000, 1,
             0x000FFFFFFFFFFFFF, 0x0010000000000000, 0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF, 0x7FF0000000000000,
             0xFFF0000000000000, 0x7FF8000000000000, 0x7FF8000012345678, 0x7FF0000000000001, 0xFFF8000000000000,
             0x3FF0000000000001, 0x400921FB54442D18, 0x47EFFFFFE0000000, 0x47EFFFFFF0000000, 0x3690000000000000,
             0x36A0000000000000, 0x43E0000000000000, 0x43F0000000000000, 0xC3E0000000000000, 0x41E0000000000000,
             0x3FDFFFFFFFFFFFFF, 0x4004000000000000, 0xC004000000000000, 0x380FFFFFFFFFFFFF]
    elif t in ("f16", "bf16"):
        v = [0, 0x8000, 0x3C00, 0xBC00, 0x3800, 0x3E00, 0x4000, 1, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x7C00,
             0xFC00, 0x7E00, 0x7E12, 0x7C01, 0xFE00, 0x3C01, 0x4248, 0x3F80, 0xBF80, 0x7F80, 0xFF80, 0x7FC0, 0x0080,
             0x007F, 0x7F7F, 0x3F81, 0x4049]
    elif t in ("e4m3x2", "e5m2x2"):
        v = [0, 0x8080, 0x3838, 0x7E7F, 0x7F7E, 0x0107, 0x7C7D, 0xFCFD, 0x7B7B, 0x0001, 0x8000, 0x7F7F, 0xFEFE]
    else:
        v = [0, 1, 2, 3, 7, 8, 15, 16, 31, 32, 33, 63, 64, 65, 127, 128, 255, 256, 0x7FFF, 0x8000, 0xFFFF,
             0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x7FFFFFFFFFFFFFFF, 0x8000000000000000, 0xFFFFFFFFFFFFFFFF,
             0xFFFFFFFE, 0x12345678, 0x80000001, (1 << w) - 1, (1 << (w - 1)) if w > 1 else 1,
             ((1 << (w - 1)) - 1) if w > 1 else 0]
    m = (1 << w) - 1
    return np.unique(np.array([x & m for x in v], np.uint64))


def _random(t: str, n: int, rng: np.random.Generator) -> np.ndarray:
    from simtc.ptx.alu import type_width

    w = type_width(t)
    if t == "pred":
        return rng.integers(0, 2, n).astype(np.uint64)
    bits = rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, n, dtype=np.uint64)
    bits &= np.uint64((1 << w) - 1) if w < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    k = n // 4
    if t in ("f32", "f64", "f16", "bf16", "f16x2", "bf16x2"):
        # moderate magnitudes (cancellation, ties, overflow thresholds of narrow formats) for a quarter
        vals = rng.standard_normal(k) * np.exp2(rng.integers(-12, 12, k))
        if t == "f64":
            bits[:k] = vals.view(np.uint64)
        elif t in ("f32",):
            bits[:k] = vals.astype(np.float32).view(np.uint32)
        elif t == "f16":
            bits[:k] = vals.astype(np.float16).view(np.uint16)
        elif t == "bf16":
            bits[:k] = vals.astype(np.float32).view(np.uint32) >> np.uint32(16)
        elif t == "f16x2":
            h = vals.astype(np.float16).view(np.uint16).astype(np.uint64)
            bits[:k] = h | (np.roll(h, 1) << np.uint64(16))
        else:
            h = (vals.astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint64)
            bits[:k] = h | (np.roll(h, 1) << np.uint64(16))
    else:
        bits[:k] = rng.integers(0, min(80, 1 << w), k).astype(np.uint64)  # shift amounts, positions, lengths
    return bits


def case_inputs(case: str, seed: int = 0) -> list[np.ndarray]:
    """The N inputs (uint64 bit patterns) of each source operand of a case: for the first two sources the
    cross product of their edge values, then random patterns; deterministic in (case, seed)."""
    import zlib

    srcs, _, cc_in, _ = operand_types(case)
    types = list(srcs) + (["pred"] if cc_in else [])
    rng = np.random.default_rng([seed, zlib.crc32(case.encode())])
    cols = [_random(t, N, rng) for t in types]
    if types:
        e0 = _edges(types[0])
        e1 = _edges(types[1]) if len(types) > 1 else np.zeros(1, np.uint64)
        g0, g1 = np.meshgrid(e0, e1, indexing="ij")
        m = min(N // 2, g0.size)
        cols[0][:m] = g0.reshape(-1)[:m]
        if len(types) > 1:
            cols[1][:m] = g1.reshape(-1)[:m]
        for j in range(2, len(types)):
            e = _edges(types[j])
            cols[j][:m] = e[np.arange(m) % e.size]
        # close pairs: b = a with its low bits changed (cancellation in add/sub, near-ties in comparisons)
        if len(types) > 1 and types[0] == types[1] and types[0] not in ("pred",):
            k = N // 8
            cols[1][N - k:] = cols[0][N - k:] ^ (rng.integers(0, 16, k).astype(np.uint64))
    return cols


# --- CUDA source -------------------------------------------------------------------------------------------

_C = {8: ("u16", "h"), 16: ("u16", "h"), 32: ("u32", "r"), 64: ("u64", "l")}


def _kernel(i: int, case: str) -> str:
    from simtc.ptx.alu import type_width

    name, *extra = case.split()
    srcs, dsts, cc_in, cc_out = operand_types(case)
    decl, pre, post, ins, outs = [], [], [], [], []
    # outputs first in the asm operand list
    out_ops = []
    for j, t in enumerate(dsts + (("pred",) if cc_out else ())):
        out_ops.append((j, t))
    n_out = len(out_ops)
    idx = n_out
    src_names = []
    if name.startswith("lop3"):
        srcs = srcs[:3]  # the immLut is an immediate
    for j, t in enumerate(srcs):
        w = type_width(t)
        if w == 1:
            ins.append(f'"r"((u32)a{j}[i])')
            src_names.append(f"p{j}")
            pre.append(f"setp.ne.u32 p{j}, %{idx}, 0;")
        else:
            ct, cons = _C[w]
            ins.append(f'"{cons}"(({ct})a{j}[i])')
            if w == 8:
                pre.append(f"cvt.u8.u16 b{j}, %{idx};")
                src_names.append(f"b{j}")
            else:
                src_names.append(f"%{idx}")
        idx += 1
    if cc_in:
        ins.append(f'"r"((u32)a{len(srcs)}[i])')
        pre.append(f"add.cc.u32 cct, %{idx}, 0xFFFFFFFF;")
        idx += 1
    dst_names = []
    for j, t in out_ops:
        w = type_width(t)
        if w == 1:
            outs.append(f'"=r"(r{j})')
            decl.append(f"u32 r{j};")
            if j < len(dsts):
                dst_names.append(f"q{j}")
                post.append(f"selp.u32 %{j}, 1, 0, q{j};")
            else:
                post.append(f"addc.u32 %{j}, 0, 0;")
        else:
            ct, cons = _C[w]
            outs.append(f'"={cons}"(r{j})')
            decl.append(f"{ct} r{j};")
            if w == 8:
                dst_names.append(f"c{j}")
                post.append(f"cvt.u16.u8 %{j}, c{j};")
            else:
                dst_names.append(f"%{j}")
    dpart = f"{dst_names[0]}|{dst_names[1]}" if "pq" in extra else dst_names[0]
    operands = [dpart, *src_names]
    if name.startswith("lop3"):
        operands.append(extra[0])
    body = (".reg .pred p0, p1, p2, p3, q0, q1; .reg .b8 b0, b1, b2, c0; .reg .b32 cct; "
            + " ".join(pre) + f" {name} {', '.join(operands)}; " + " ".join(post))
    params = ", ".join([f"const u64* __restrict__ a{j}" for j in range(4)] +
                       [f"u64* __restrict__ d{j}" for j in range(2)])
    stores = " ".join(f"d{j}[i] = (u64)r{j};" for j, _ in out_ops)
    return (f'extern "C" __global__ void k{i}({params}, int n) {{\n'
            f"  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i >= n) return;\n"
            f"  {' '.join(decl)}\n"
            f'  asm volatile("{{ {body} }}" : {", ".join(outs)} : {", ".join(ins)});\n'
            f"  {stores}\n}}\n")


def kernel_source(cases=CASES) -> str:
    """The CUDA source of every case's kernel (``k<index>``)."""
    template = (Path(__file__).parent / "cuda" / "ptx_alu.cu").read_text()
    return template.replace("{{KERNELS}}", "\n".join(_kernel(i, c) for i, c in enumerate(cases)))


def prepare(out_dir: str | Path, cases=CASES) -> Path:
    """Write ``kernels.cu`` and ``job.npz`` (cases and inputs) for :func:`run_job`."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    (d / "kernels.cu").write_text(kernel_source(cases))
    arrays = {}
    nouts = []
    for i, c in enumerate(cases):
        ins = case_inputs(c)
        for j, a in enumerate(ins):
            arrays[f"in{i}_{j}"] = a
        _srcs, dsts, _, cc_out = operand_types(c)
        nouts.append(len(dsts) + cc_out)
    np.savez(d / "job.npz", cases=np.array(cases), nouts=np.array(nouts), **arrays)
    return d


def run_job(job_dir: str | Path, out_file: str | Path, arch: str = "sm_90a") -> None:
    """On a GPU (numpy and cupy only): compile ``kernels.cu``, run every case, save inputs and outputs."""
    import cupy as cp

    d = Path(job_dir)
    job = np.load(d / "job.npz")
    cases = [str(c) for c in job["cases"]]
    cubin = d / "kernels.cubin"
    if cubin.exists():
        mod = cp.RawModule(path=str(cubin))
    else:
        mod = cp.RawModule(code=(d / "kernels.cu").read_text(), options=(f"-arch={arch}",), backend="nvcc")
    res = {"cases": np.array(cases)}
    dummy = cp.zeros(N, cp.uint64)
    for i, _ in enumerate(cases):
        ins = [cp.asarray(job[f"in{i}_{j}"]) for j in range(4) if f"in{i}_{j}" in job]
        ins += [dummy] * (4 - len(ins))
        outs = [cp.zeros(N, cp.uint64) for _ in range(2)]
        mod.get_function(f"k{i}")(((N + 127) // 128,), (128,), (*ins, *outs, np.int32(N)))
        for j in range(int(job["nouts"][i])):
            res[f"out{i}_{j}"] = cp.asnumpy(outs[j])
        for j in range(4):
            if f"in{i}_{j}" in job:
                res[f"in{i}_{j}"] = job[f"in{i}_{j}"]
    cp.cuda.Device().synchronize()
    props = cp.cuda.runtime.getDeviceProperties(0)
    res["device"] = np.array(props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"]))
    res["driver"] = np.array(cp.cuda.runtime.driverGetVersion())
    np.savez_compressed(out_file, **res)


if __name__ == "__main__":
    # prepare DIR [main|gaps]  (the case set; main by default)  /  run DIR OUT.npz
    if sys.argv[1] == "prepare":
        prepare(sys.argv[2], SETS[sys.argv[3] if len(sys.argv) > 3 else "main"])
    elif sys.argv[1] == "run":
        run_job(sys.argv[2], sys.argv[3])
