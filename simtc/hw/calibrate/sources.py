"""The CUDA source of every calibration module: ``simtc/hw/cuda/calibrate_*.cu`` templates filled with each
benchmark's unrolled steps (:func:`module_source`), and the cubin :func:`simtc.hw.compile.compile_cuda` builds
from it (cached).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from importlib import resources

from simtc.errors import SimtcError
from simtc.hw.calibrate.benchmarks import (
    _SYNC_LOOPS,
    ALU_OPS,
    ARCH,
    CHASE_DEPTHS,
    LDG_CHASE,
    LDG_CHASE_STEPS,
    MODULES,
    PAIR_CHAINS,
    PAIRS,
    SMEM_DEPTHS,
    SYNC_DEPTHS,
    TP_CHAINS,
    TP_DEPTHS,
    WGMMA_DEPTHS,
    AluOp,
    _alu_kernel,
    _ldg_chase_kernel,
    _pair_key,
    _slug,
    _smem_name,
)


def _cu(name: str) -> str:
    return resources.files("simtc.hw.cuda").joinpath(name).read_text()


def _fill(text: str, values: dict[str, str]) -> str:
    for k, v in values.items():
        text = text.replace("{{" + k + "}}", v)
    left = re.search(r"\{\{\w+\}\}", text)
    if left:
        raise SimtcError(f"unfilled placeholder {left.group(0)}",
                         rule="calibration kernel templates are filled completely")
    return text


def _alu_source(name: str, what: str, ops: Sequence[AluOp], chains: int, depth: int) -> str:
    lines = []
    for d in range(depth):
        for c in range(chains):
            if len(ops) == 1:
                body = ops[0].bodies[d % len(ops[0].bodies)]
                lines.append("        " + body.replace("S0", f"x[{c}]").replace("S1", f"y[{c}]"))
            else:
                for op, var in zip(ops, ("x", "y"), strict=True):
                    lines.append("        " + op.bodies[d % len(op.bodies)].replace("S0", f"{var}[{c}]"))
    return _fill(_cu("calibrate_alu.cu"), {
        "NAME": name, "WHAT": what, "CHAINS": str(chains), "STEPS": str(depth * chains), "A": "0x3F800001u",
        "B": "0x3C003C00u", "X0": "0x3F800000u", "Y0": "0x40000000u", "BODY": "\n".join(lines), "FOLD": "x[c] ^ y[c]"})


def _smem_source(name: str, what: str, op: str, bits: int, ways: int, depth: int) -> str:
    lines = []
    words = bits // 32
    for j in range(depth):
        off = (j % 16) * 2048
        regs = ", ".join(f"%{i}" for i in range(words))
        vec = {1: "u32", 2: "v2.u32", 4: "v4.u32"}[words]
        if op == "LDS":
            outs = ", ".join(f'"=r"(w{i})' for i in range(words))
            dst = regs if words == 1 else "{" + regs + "}"
            fold = " ^ ".join(f"w{i}" for i in range(words))
            lines.append(f'        {{ u32 {", ".join(f"w{i}" for i in range(words))}; asm volatile("ld.volatile.shared.'
                         f'{vec} {dst}, [%{words}+{off}];" : {outs} : "r"(base)); acc[{j % 8}] ^= {fold}; }}')
        else:
            src = ", ".join(f"%{i + 1}" for i in range(words))
            src = src if words == 1 else "{" + src + "}"
            ins = ", ".join(f'"r"(v{i})' for i in range(words))
            lines.append(f'        asm volatile("st.volatile.shared.{vec} [%0+{off}], {src};" :: "r"(base), {ins} '
                         f': "memory");')
    return _fill(_cu("calibrate_smem.cu"), {"NAME": name, "WHAT": what, "LANE_STRIDE": str(bits // 8 * ways),
                                            "FILL": "seed + i", "BODY": "\n".join(lines)})


def _chase_source(name: str, depth: int) -> str:
    body = "\n".join('        asm volatile("ld.volatile.shared.u32 %0, [%0];" : "+r"(p));' for _ in range(depth))
    return _fill(_cu("calibrate_smem.cu"), {"NAME": name, "WHAT": "pointer chase: p = *(u32*)p, lane l in bank l",
                                            "LANE_STRIDE": "4", "FILL": "buf + ((i + 32u) & 8191u) * 4u", "BODY": body})


def _ldg_chase_source(name: str, key: str, ptx: str, steps: int) -> str:
    body = "\n".join(f'        asm volatile("{ptx} %0, [%0];" : "+l"(p) :: "memory");' for _ in range(steps))
    return _fill(_cu("calibrate_latency_chase.cu"), {"NAME": name, "WHAT": f"{key}: pointer chase with {ptx}",
                                                     "LD": ptx, "STEPS": str(steps), "BODY": body})


def _wgmma_source(name: str, depth: int) -> str:
    lds = []
    for j in range(16):
        lds.append(f'            {{ u32 w0, w1, w2, w3; asm volatile("ld.volatile.shared.v4.u32 {{%0, %1, %2, %3}}, '
                   f'[%4+{j * 2048}];" : "=r"(w0), "=r"(w1), "=r"(w2), "=r"(w3) : "r"(p)); '
                   'acc ^= w0 ^ w1 ^ w2 ^ w3; }')
    return _fill(_cu("calibrate_wgmma.cu"), {
        "NAME": name, "DEPTH": str(depth), "ACC_LIST": ", ".join(f"%{i}" for i in range(128)),
        "ACC_BIND": ", ".join(f'"+f"(ACC[{i}])' for i in range(128)), "LDS_BODY": "\n".join(lds)})


def _sync_loop_source(name: str, key: str, depth: int) -> str:
    attr, step, _, _ = _SYNC_LOOPS[key]
    body = "\n".join("        " + step.replace("+OFF", f"+{(j % 64) * 16}") for j in range(depth))
    return _fill(_cu("calibrate_sync_loop.cu"), {"NAME": name, "WHAT": key, "ATTR": attr, "STEPS": str(depth),
                                                 "BODY": body})


def module_source(module: str) -> str:
    """The CUDA source of a module (one of :data:`MODULES`): the prelude, then its kernels."""
    parts = [_cu("calibrate_common.cu")]
    if module == "alu":
        for key, op in ALU_OPS.items():
            for d in op.depths("tp"):
                parts.append(_alu_source(_alu_kernel(key, "tp", d), f"{key} throughput", [op], TP_CHAINS // op.state,
                                         d))
            for d in op.depths("lat"):
                parts.append(_alu_source(_alu_kernel(key, "lat", d), f"{key} latency", [op], 1, d))
    elif module == "pairs":
        for a, b in PAIRS:
            for d in TP_DEPTHS:
                parts.append(_alu_source(_alu_kernel(f"{a}_{b}", "pair", d), f"{_pair_key(a, b)} interleaved",
                                         [ALU_OPS[a], ALU_OPS[b]], PAIR_CHAINS, d))
    elif module == "smem":
        for op in ("LDS", "STS"):
            for bits in (32, 64, 128):
                for ways in (1, 2, 4):
                    name = _smem_name(op, bits, ways)
                    for d in SMEM_DEPTHS:
                        parts.append(_smem_source(f"simtc_cal_{_slug(name)}_d{d}", name, op, bits, ways, d))
        for d in CHASE_DEPTHS:
            parts.append(_chase_source(f"simtc_cal_lds_chase_d{d}", d))
    elif module == "wgmma":
        for d in WGMMA_DEPTHS:
            parts.append(_wgmma_source(f"simtc_cal_wgmma_lds_d{d}", d))
    elif module == "sync_loop":
        for key in _SYNC_LOOPS:
            for d in SYNC_DEPTHS:
                parts.append(_sync_loop_source(f"simtc_cal_{key}_d{d}", key, d))
    elif module == "latency":
        parts.append(_cu("calibrate_latency.cu"))
        for key, (ptx, _, tag) in LDG_CHASE.items():
            for d in LDG_CHASE_STEPS:
                parts.append(_ldg_chase_source(_ldg_chase_kernel(tag, d), key, ptx, d))
    elif module in ("memory", "sync", "launch"):
        parts.append(_cu(f"calibrate_{module}.cu"))
    else:
        raise SimtcError(f"no calibration module {module!r}", rule=f"calibration modules: {', '.join(MODULES)}")
    return "\n".join(parts)


def _cubin(module: str) -> bytes:
    from simtc.hw.compile import compile_cuda

    return compile_cuda(module_source(module), arch=ARCH, name=f"calibrate_{_slug(module)}.cu")
