"""The cross-check cases: shared-memory images and ``wgmma`` programs built by simtc.

Each case is a byte image (as :class:`~simtc.smem.SharedMemory` holds it), a
:class:`~simtc.hw.wgmma.WgmmaProgram` (``wgmma.mma_async`` records whose descriptors come from
simtc's layouts), and labels.
The GPU executes the program; :func:`simtc.hw.wgmma.predict` gives simtc's answer.

Image map (all atoms on 1024-byte boundaries): A (64 x 64) at 0, B (N x 64) at 16 KiB; the rest
of the image up to 96 KiB is filled with random *poison* bytes, so that a wrong descriptor that
reads outside A and B produces a visible, predictable result instead of zeros.
"""

from __future__ import annotations

import numpy as np
from attrs import evolve, field, frozen

from simtc.hw.wgmma import WgmmaProgram, wgmma_k16
from simtc.numerics.cases import Stream, mma_operands
from simtc.smem import CanonicalLayout, SharedMemory, SwizzleMode

__all__ = ["A_BASE", "B_BASE", "IMAGE_BYTES", "Case", "case_key", "dual_gemm_case", "layout_cases", "qk_operands",
           "special_value_cases", "wrong_descriptor_cases"]

A_BASE = 0
B_BASE = 16 * 1024
IMAGE_BYTES = 96 * 1024
K_TOTAL = 64  # four chained k16 instructions
SWIZZLES = ("INTERLEAVE", "SW32", "SW64", "SW128")
CROSSCHECK_DISTRIBUTIONS = ("normal", "wide", "tiny", "zeros", "cancel")


def _read_only(image) -> np.ndarray:
    a = np.array(image, dtype=np.uint8, copy=True)
    a.setflags(write=False)
    return a


@frozen
class Case:
    """One GPU run: an image (a read-only copy), a program, and what it means.

    A value: two cases are equal when their labels, image bytes, program and meta are (the image
    and the meta dict compare and hash by their contents).
    """

    check: str
    label: str
    image: np.ndarray = field(converter=_read_only, eq=lambda a: a.tobytes())
    program: WgmmaProgram
    meta: dict = field(eq=lambda m: tuple(sorted(m.items())))


def case_key(case: Case) -> str:
    """The one name of a case in recordings (written by ``--save``, looked up by ``--replay``).

    >>> case_key(special_value_cases()[3])
    'special values | bf16 K-major SW128 N=64 overflow'
    """
    return f"{case.check} | {case.label}"


def _poisoned_memory(seed: int) -> SharedMemory:
    sm = SharedMemory(arch="sm90", size=IMAGE_BYTES)
    sm.data[:] = (Stream(seed ^ 0x5EED).uint64(IMAGE_BYTES) & np.uint64(0xFF)).astype(np.uint8)
    # keep the poison finite and modest so wrong reads give comparable numbers: clear bf16 exponent MSBs
    sm.data[1::2] &= 0x3F
    return sm


def _build(major: str, sw: str, n: int, dist: str, seed: int, dtype: str = "bf16"):
    a, b, _ = mma_operands(dist, 64, n, K_TOTAL, dtype=dtype, seed=seed)
    sm = _poisoned_memory(seed)
    ta = CanonicalLayout(dtype, major, sw, 64, K_TOTAL)
    tb = CanonicalLayout(dtype, major, sw, n, K_TOTAL)
    sm.write_tile(ta, a, A_BASE)
    sm.write_tile(tb, b, B_BASE)
    mmas = [wgmma_k16(ta.descriptor(arch="sm90", start=A_BASE, k_slice=k).encode(),
                      tb.descriptor(arch="sm90", start=B_BASE, k_slice=k).encode(),
                      n=n, dtype=dtype, major=major, scale_d=k > 0)
            for k in range(K_TOTAL // 16)]
    return sm, ta, tb, WgmmaProgram.chain(mmas)


def layout_cases(seed: int = 0, *, ns=(64, 128, 256), distributions=CROSSCHECK_DISTRIBUTIONS,
                 dtypes=("bf16", "fp16")) -> list[Case]:
    """Every swizzle mode x K/MN-major x N x distribution: a 64 x N x 64 product (4 chained k16)."""
    cases = []
    i = 0
    for dtype in dtypes:
        for major in ("K", "MN"):
            for sw in SWIZZLES:
                for n in ns:
                    for dist in distributions:
                        sm, _, _, prog = _build(major, sw, n, dist, seed * 1000 + i, dtype)
                        cases.append(Case("wgmma layouts", f"{dtype} {major}-major {sw} N={n} {dist}",
                                          sm.data.copy(), prog,
                                          {"major": major, "swizzle": sw, "n": n, "dist": dist, "dtype": dtype}))
                        i += 1
    return cases


def special_value_cases(seed: int = 0) -> list[Case]:
    """Raw bit patterns (NaN, Inf, subnormals) and near-overflow data: behaviour taken from MMA-Sim, measured here."""
    cases = []
    i = 0
    for dtype in ("bf16", "fp16"):
        for dist in ("raw", "overflow"):
            for major, sw, n in [("K", "SW128", 64), ("MN", "SW128", 128), ("K", "SW32", 256)]:
                sm, _, _, prog = _build(major, sw, n, dist, seed * 1000 + 500 + i, dtype)
                cases.append(Case("special values", f"{dtype} {major}-major {sw} N={n} {dist}", sm.data.copy(), prog,
                                  {"major": major, "swizzle": sw, "n": n, "dist": dist, "dtype": dtype}))
                i += 1
    return cases


def wrong_descriptor_cases(seed: int = 0) -> list[Case]:
    """Deliberately wrong descriptors: LBO/SBO swapped, a wrong swizzle code, start off by 16 B."""
    cases = []
    for major, sw, n in [("K", "SW128", 64), ("MN", "SW128", 128), ("K", "INTERLEAVE", 64), ("MN", "SW64", 64),
                         ("K", "SW64", 128), ("MN", "INTERLEAVE", 64)]:
        sm, _, _, good = _build(major, sw, n, "normal", seed + n)
        mode = SwizzleMode[sw]
        wrong_mode = {"INTERLEAVE": "SW32", "SW32": "SW64", "SW64": "SW128", "SW128": "SW64"}[sw]
        edits = {
            "LBO and SBO swapped": lambda d: evolve(d, lbo=d.sbo, sbo=d.lbo),
            f"swizzle {sw} read as {wrong_mode}": lambda d, m=wrong_mode: evolve(d, layout_type=m),
            "start address +16 B": lambda d: evolve(d, start=d.start + 16),
        }
        for what, edit in edits.items():
            bad = [evolve(ins, a=edit(ins.a).encode(), b_desc=edit(ins.b_desc).encode()) for ins in good.mmas]
            cases.append(Case("wrong descriptors", f"{major}-major {mode.name} N={n}: {what}", sm.data.copy(),
                              WgmmaProgram.chain(bad), {"edit": what, "major": major, "swizzle": sw}))
    return cases


def qk_operands(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Q (64 heads x 576) and K (64 tokens x 576), normal bf16 data: the operands of the QK checks."""
    from simtc.kernels.flashmla import B_H, B_TOPK, D_Q

    q = mma_operands("normal", B_H, B_TOPK, D_Q, seed=seed + 1)[0]
    k = mma_operands("normal", B_H, B_TOPK, D_Q, seed=seed + 2)[0]
    return q, k


DUAL_GEMM_IMAGE_BYTES = 160 * 1024
"""The Hopper dual-GEMM image: the FlashMLA plan's q, q_sw64 and dequant[1] (up to 147,456 B), then zeros."""


def dual_gemm_case(seed: int = 0) -> tuple[list[Case], dict]:
    """FlashMLA's QK split on Hopper: P_lo (even 64-dim chunks + RoPE 0-31) and P_hi (odd + RoPE 32-63).

    Q and K are stored by :func:`simtc.kernels.flashmla.load_qk` (the kernel's shared-memory plan and
    tile layouts); each half's 18 m64n64k16 steps are :func:`simtc.kernels.flashmla.qk_half_descriptors`
    (RoPE k=0, 1 first, then NoPE k=0..15; FlashMLA ``kernel.cuh`` lines 532-552 at ``9241ae3``), one
    wgmma-group per half: the two accumulators lanes 0-63 and 64-127 hold on Blackwell become two wgmma chains.
    """
    from simtc.kernels.flashmla import B_TOPK, load_qk, qk_half_descriptors

    q, k = qk_operands(seed)
    sm = load_qk(q, k, buf=1, smem=SharedMemory(arch="sm90", size=DUAL_GEMM_IMAGE_BYTES))
    cases = []
    for half in (0, 1):
        mmas = [wgmma_k16(a.encode(), b.encode(), n=B_TOPK, scale_d=acc)
                for a, b, acc in qk_half_descriptors(half, arch="sm90", buf=1)]
        cases.append(Case("dual GEMM (Hopper)", f"P_{'lo' if half == 0 else 'hi'}: {len(mmas)} chained m64n64k16",
                          sm.data.copy(), WgmmaProgram.chain(mmas, commit="last"), {"half": half}))
    return cases, {"q": q, "k": k}
