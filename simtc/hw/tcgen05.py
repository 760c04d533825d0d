"""The sm_100a dual-GEMM QK kernel: built and SASS-checked anywhere, run on an sm_100 GPU.

``kernels/tcgen05_dual_qk.cu`` executes FlashMLA's QK step exactly as simtc describes it: 18
``tcgen05.cp.128x256b`` of Q into TMEM columns 256-399 and 18 ``tcgen05.mma.ws`` (TS, M=64,
N=128) into column 400, all descriptors, columns and the instruction descriptor supplied by the
host; then every warp dumps its TMEM quadrant of columns 256-463.
"""

from __future__ import annotations

from importlib import resources

import numpy as np

__all__ = ["EXPECTED_SASS", "PARAM_DTYPE", "kernel_source", "pack_params"]

EXPECTED_SASS = {"UTCHMMA.WS": 18, "UTCCP.T.S": 18, "UTCBAR": 1, "LDTM.x16": 13}
"""Opcode counts the sm_100a build must show (18 MMAs, 18 copies, one commit, 13 x16 loads)."""

PARAM_DTYPE = np.dtype([
    ("cp_desc", "<u8", (18,)), ("cp_col", "<u4", (18,)), ("b_desc", "<u8", (18,)), ("a_col", "<u4", (18,)),
    ("enable_d", "<u4", (18,)), ("d_col", "<u4"), ("idesc", "<u4"), ("image_chunks", "<u4"),
    ("bar_offset", "<u4"),
], align=True)
"""Mirror of ``struct SimtcDualQk`` (C alignment rules)."""


def kernel_source() -> str:
    return resources.files("simtc.hw.kernels").joinpath("tcgen05_dual_qk.cu").read_text()


def pack_params(*, cp_desc, cp_col, b_desc, a_col, enable_d, d_col: int, idesc: int, image_bytes: int) -> bytes:
    """The kernel's parameter block as bytes (descriptor start fields relative to the image)."""
    p = np.zeros((), dtype=PARAM_DTYPE)
    p["cp_desc"], p["cp_col"], p["b_desc"] = cp_desc, cp_col, b_desc
    p["a_col"], p["enable_d"] = a_col, enable_d
    p["d_col"], p["idesc"], p["image_chunks"], p["bar_offset"] = d_col, idesc, image_bytes // 16, image_bytes
    return p.tobytes()


def build_checks():
    """Build for sm_100a (SASS counts) and confirm sm_90a rejects tcgen05 (ptxas's message)."""
    from simtc.errors import HardwareUnavailable
    from simtc.hw.compile import CompileError, compile_cuda, disassemble, sass_histogram
    from simtc.hw.crosscheck import CheckResult

    out = []
    try:
        cubin = compile_cuda(kernel_source(), arch="sm_100a", name="tcgen05_dual_qk.cu")
        h = sass_histogram(disassemble(cubin), full=True)
        got = {k: h.get(k, 0) for k in EXPECTED_SASS}
        ok = got == EXPECTED_SASS
        out.append(CheckResult("build sm_100a tcgen05 dual-GEMM kernel", "pass" if ok else "FAIL", len(got),
                               sum(got[k] == v for k, v in EXPECTED_SASS.items()),
                               detail="SASS " + ", ".join(f"{k} x{v}" for k, v in got.items())))
    except HardwareUnavailable as e:
        out.append(CheckResult("build sm_100a tcgen05 dual-GEMM kernel", "skipped", detail=str(e)))
        return out
    try:
        compile_cuda(kernel_source(), arch="sm_90a", name="tcgen05_dual_qk.cu")
        out.append(CheckResult("sm_90a rejects tcgen05", "FAIL", 1, 0, detail="it compiled"))
    except CompileError as e:
        ok = "not supported on .target 'sm_90a'" in e.log
        out.append(CheckResult("sm_90a rejects tcgen05", "pass" if ok else "FAIL", 1, int(ok),
                               detail=e.log.splitlines()[0].split("error   : ")[-1] if e.log else str(e)))
    return out
