"""Hardware experiments that settle open questions (run by ``simtc crosscheck`` on an sm_90a GPU).

**What does a non-zero matrix base offset do?** PTX says the base offset must be
``(pattern start >> 7) mod 8`` when a swizzle pattern does not start on its natural boundary
(PTX ISA 9.0 §9.7.16.3 Table 41), but not how the hardware uses it; CUTLASS and DeepGEMM always
align and encode 0. The experiment puts the A tile of a ``wgmma`` off its boundary (start ≡ 256
mod 1024 for SW128, 256 mod 512 for SW64, 128 mod 256 for SW32), fills it two ways — swizzled by
absolute address (as TMA writes it) or with the pattern restarted at the tile start — and runs
it with base offset 0 and with the PTX value. Each run's registers are compared with the
predictions of :data:`simtc.smem.read.BASE_OFFSET_HYPOTHESES`.

Result on an H200 (2026-11-29): only ``subtract`` predicts all 12 runs (absolute 6/12,
relative 0/12) — simtc's reading since.
"""

from __future__ import annotations

import numpy as np

from simtc.hw.results import CheckResult
from simtc.hw.suite import Case, _poisoned_memory, case_key
from simtc.hw.wgmma import WgmmaProgram, wgmma_k16
from simtc.mma.operands import read_operand
from simtc.mma.wgmma import matrix_to_fragment
from simtc.numerics.cases import mma_operands
from simtc.numerics.fdpa import tensor_core_mma
from simtc.numerics.formats import encode_bits
from simtc.smem import CanonicalLayout, SharedMemory, SmemDescriptor, SwizzleMode, swizzle
from simtc.smem.read import BASE_OFFSET_HYPOTHESES, MEASURED_BASE_OFFSET

__all__ = ["base_offset_cases", "predict_base_offset"]

B_START = 16384
_MISALIGN = {"SW128": (1024 + 256, 2), "SW64": (1024 + 256, 2), "SW32": (1024 + 128, 1)}


def base_offset_cases(seed: int = 0) -> list[Case]:
    """3 swizzle modes x 2 data placements x 2 base offsets: 12 runs of a 64 x 64 x K product."""
    cases = []
    for i, sw in enumerate(("SW128", "SW64", "SW32")):
        mode = SwizzleMode[sw]
        k_total = mode.width // 2  # one swizzle atom of K: 64 / 32 / 16 bf16
        a, b, _ = mma_operands("normal", 64, 64, k_total, seed=seed * 100 + i)
        lay_a = CanonicalLayout("bf16", "K", sw, 64, k_total)
        lay_b = CanonicalLayout("bf16", "K", sw, 64, k_total)
        a_start, ptx_base = _MISALIGN[sw]
        for data in ("absolute", "restarted"):
            sm = _poisoned_memory(seed + 17 * i)
            sm.write_tile(lay_b, b, B_START)
            mn, kk = np.meshgrid(np.arange(64), np.arange(k_total), indexing="ij")
            lin = lay_a.linear_offset(mn, kk)
            phys = swizzle(a_start + lin, mode) if data == "absolute" else a_start + swizzle(lin, mode)
            bits = encode_bits(a, "bf16").astype("<u2").view(np.uint8).reshape(64, k_total, 2)
            sm.data[phys[..., None] + np.arange(2)] = bits
            for base in (0, ptx_base):
                mmas = [wgmma_k16(SmemDescriptor(start=a_start + 32 * s, lbo=16, sbo=8 * mode.width, layout_type=sw,
                                                 base_offset=base, arch="sm90").encode(),
                                  lay_b.descriptor(arch="sm90", start=B_START, k_slice=s).encode(), n=64,
                                  scale_d=s > 0)
                        for s in range(k_total // 16)]
                cases.append(Case("base offset", f"{sw}: A at {a_start} ({data} swizzle), base offset {base}",
                                  sm.data.copy(), WgmmaProgram.chain(mmas),
                                  {"swizzle": sw, "data": data, "base_offset": base}))
    return cases


def predict_base_offset(case: Case, hypothesis: str) -> np.ndarray:
    """The registers the program gives if the hardware follows ``hypothesis`` (A only; B is aligned)."""
    sm = SharedMemory(arch="sm90", size=case.image.size)
    sm.data[:] = case.image
    acc = np.zeros((64, case.program.n), np.float32)
    for ins in case.program.mmas:
        a = read_operand(sm, ins.a, major="K", dtype="bf16", rows=64, k=16, base_offset_hypothesis=hypothesis)
        b = read_operand(sm, ins.b_desc, major="K", dtype="bf16", rows=case.program.n, k=16)
        acc = tensor_core_mma(a, b, acc if ins.scale_d else np.zeros_like(acc), arch="sm90")
    return matrix_to_fragment(acc)


def run_base_offset_experiment(seed: int, progress) -> tuple[list[CheckResult], dict[str, np.ndarray]]:
    """Run the 12 cases; a hypothesis is confirmed when it predicts every run bit for bit.

    Returns the row and the GPU registers of every case (by :func:`~simtc.hw.suite.case_key`).
    """
    from simtc.hw import wgmma as hw

    matches = {h: 0 for h in BASE_OFFSET_HYPOTHESES}
    rows, outputs = [], {}
    cases = base_offset_cases(seed)
    for case in cases:
        got, _ = hw.run(case.image, case.program)
        outputs[case_key(case)] = got
        ok = {h: bool(np.array_equal(got.view(np.uint32), predict_base_offset(case, h).view(np.uint32)))
              for h in BASE_OFFSET_HYPOTHESES}
        for h, v in ok.items():
            matches[h] += v
        rows.append((case.label, ok))
        progress(1)
    confirmed = [h for h, n in matches.items() if n == len(cases)]
    detail = (f"hypothesis consistent with all {len(cases)} runs: {', '.join(confirmed) or 'none'} "
              f"(simtc reads base offsets as {MEASURED_BASE_OFFSET}); "
              + "; ".join(f"{h} {n}/{len(cases)}" for h, n in matches.items()))
    ok = matches[MEASURED_BASE_OFFSET] == len(cases)
    return [CheckResult("experiment: non-zero base offset (A off its boundary)", "pass" if ok else "FAIL",
                        len(cases), matches[MEASURED_BASE_OFFSET], detail=detail, rows=tuple(rows))], outputs
