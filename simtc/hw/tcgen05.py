"""The sm_100a dual-GEMM QK kernel: built and SASS-checked anywhere, run on an sm_100 GPU.

``cuda/tcgen05_dual_qk.cu`` executes FlashMLA's QK step exactly as simtc describes it: 18
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
    return resources.files("simtc.hw.cuda").joinpath("tcgen05_dual_qk.cu").read_text()


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
    from simtc.hw.results import CheckResult

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


IMAGE_BYTES = 147456
"""The QK step's shared memory: q, q_sw64 and dequant[1] (nope + rope) end at 147,456 B."""


def dual_qk_inputs(q: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, bytes]:
    """(image, parameter block) for the kernel, from the same records the simulator executes."""
    from simtc.kernels.flashmla import P_COLUMN, QK_IDESC, load_qk, q_copies, qk_mmas

    sm = load_qk(q, k, buf=1)
    cps, mmas = q_copies(), qk_mmas(1)
    params = pack_params(cp_desc=[c.desc.encode() for c in cps], cp_col=[c.taddr for c in cps],
                         b_desc=[m.b_desc.encode() for m in mmas], a_col=[m.a for m in mmas],
                         enable_d=[int(m.enable_input_d) for m in mmas], d_col=P_COLUMN,
                         idesc=QK_IDESC.encode(), image_bytes=IMAGE_BYTES)
    return sm.data[:IMAGE_BYTES].copy(), params


def predict_dual_qk(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """simtc's TMEM cells (128 lanes x columns 256..463, uint32) after the QK step."""
    from simtc.kernels.flashmla import replay_qk

    tm, _ = replay_qk(q, k, buf=1)
    return tm.cells[:, 256:464].copy()


def run_dual_qk(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Run the kernel on an sm_100 GPU; returns the dumped cells (128 x 208 uint32)."""
    import cupy

    from simtc.hw.compile import load_kernel
    from simtc.hw.device import require

    require("sm_100a")
    image, params = dual_qk_inputs(q, k)
    fn = load_kernel(kernel_source(), "simtc_tcgen05_dual_qk", arch="sm_100a")
    smem = IMAGE_BYTES + 16 + 1024
    fn.max_dynamic_shared_size_bytes = smem
    d_img = cupy.asarray(image.view(np.uint32))
    d_prm = cupy.asarray(np.frombuffer(params, dtype=np.uint8))
    d_out = cupy.zeros(128 * 208, dtype=cupy.uint32)
    fn((1,), (128,), (d_img, d_prm, d_out), shared_mem=smem)
    cupy.cuda.runtime.deviceSynchronize()
    return d_out.get().reshape(128, 208)


def gpu_check(seed: int, progress):
    """sm_100a: every dumped TMEM cell (Q region and P) equals simtc's TensorMemory."""
    from simtc.hw.results import CheckResult
    from simtc.numerics.cases import mma_operands

    q = mma_operands("normal", 64, 64, 576, seed=seed + 1)[0]
    k = mma_operands("normal", 64, 64, 576, seed=seed + 2)[0]
    got = run_dual_qk(q, k)
    want = predict_dual_qk(q, k)
    same = got == want
    first = None
    if not same.all():
        lane, c = (int(v) for v in np.argwhere(~same)[0])
        first = (f"TMEM lane {lane}, column {256 + c}: GPU 0x{int(got[lane, c]):08x} vs simtc "
                 f"0x{int(want[lane, c]):08x}")
    progress(1)
    return [CheckResult("tcgen05 dual-GEMM QK step (TMEM cells)", "pass" if same.all() else "FAIL", 1,
                        int(same.all()), same.size, int(same.sum()), first_mismatch=first,
                        detail="18 cp + 18 mma.ws TS M=64 N=128; Q region and P compared cell for cell")]
