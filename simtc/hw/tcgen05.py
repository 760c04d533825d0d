"""The sm_100a dual-GEMM QK kernel: built and SASS-checked anywhere, run on an sm_100 GPU.

``cuda/tcgen05_dual_qk.cu`` executes FlashMLA's QK step exactly as simtc describes it: 18
``tcgen05.cp.128x256b`` of Q into TMEM columns 256-399 and 18 ``tcgen05.mma.ws`` (TS, M=64,
N=128) into column 400, all descriptors, columns and the instruction descriptor supplied by the
host; then every warp dumps its TMEM quadrant of columns 256-463.
"""

from __future__ import annotations

from importlib import resources

import numpy as np

from simtc.kernels.flashmla import B_TOPK, P_COLUMN, Q_COLUMN, SMEM_V32, q_copies, qk_mmas, qk_program

__all__ = ["DUMP_COLUMNS", "EXPECTED_SASS", "IMAGE_BYTES", "PARAM_DTYPE", "kernel_source", "pack_params"]

_BUF = 1
"""The K ring buffer the executed step reads (``dequant[1]``: clear of Q, which ``dequant[0]`` aliases)."""
_N_CP, _N_MMA = len(q_copies()), len(qk_mmas(_BUF))

DUMP_COLUMNS = range(Q_COLUMN, P_COLUMN + B_TOPK)
"""The TMEM columns every warp dumps: the Q region (NoPE, RoPE) and P, 256..463 [kernel] plan."""
_DUMP_LD_COLUMNS = 16
"""The executor dumps with ``tcgen05.ld.32x32b.x16``: 16 columns per load (``cuda/tcgen05_dual_qk.cu``)."""

_SASS_OF = {"tcgen05.mma.ws": "UTCHMMA.WS", "tcgen05.cp": "UTCCP.T.S", "tcgen05.commit": "UTCBAR"}
"""PTX opcode -> the sm_100a SASS opcode it compiles to [measured: nvdisasm of this executor's sm_100a build]."""


def _expected_sass() -> dict[str, int]:
    counts = qk_program(_BUF).counts()
    out = {sass: counts[op] for op, sass in _SASS_OF.items()}
    # Not from the Program's tcgen05.ld records: the softmax warps of flashmla-qk load only P (one
    # 32x32b.x64 each), while the executor dumps the whole Q region and P to compare every cell;
    # its loads follow from the dump span and the x16 shape, and the loop is fully unrolled.
    out["LDTM.x16"] = len(DUMP_COLUMNS) // _DUMP_LD_COLUMNS
    return out


EXPECTED_SASS = _expected_sass()
"""Opcode counts the sm_100a build must show: each tcgen05 opcode of ``flashmla-qk`` once per record
(18 MMAs, 18 copies, one commit) and the dump's x16 loads (13)."""

PARAM_DTYPE = np.dtype([
    ("cp_desc", "<u8", (_N_CP,)), ("cp_col", "<u4", (_N_CP,)), ("b_desc", "<u8", (_N_MMA,)),
    ("a_col", "<u4", (_N_MMA,)), ("enable_d", "<u4", (_N_MMA,)), ("d_col", "<u4"), ("idesc", "<u4"),
    ("image_chunks", "<u4"), ("bar_offset", "<u4"),
], align=True)
"""Mirror of ``struct SimtcDualQk`` (C alignment rules); its array sizes are filled into the source too."""

IMAGE_BYTES = SMEM_V32[f"dequant{_BUF}.rope"].end
"""The QK step's shared memory: q, q_sw64 and dequant[1] (nope + rope) end at 147,456 B [kernel] plan."""


def kernel_source() -> str:
    """The executor's CUDA source, its sizes (copies, MMAs, dumped columns) filled in from the FlashMLA package."""
    text = resources.files("simtc.hw.cuda").joinpath("tcgen05_dual_qk.cu").read_text()
    fill = {"NCP": _N_CP, "NMMA": _N_MMA, "COL0": DUMP_COLUMNS.start, "NCOLS": len(DUMP_COLUMNS)}
    for key, value in fill.items():
        text = text.replace("{{" + key + "}}", str(value))
    return text


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


def dual_qk_inputs(q: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, bytes]:
    """(image, parameter block) for the kernel, from the same records the simulator executes."""
    from simtc.kernels.flashmla import QK_IDESC, load_qk

    sm = load_qk(q, k, buf=_BUF)
    cps, mmas = q_copies(), qk_mmas(_BUF)
    params = pack_params(cp_desc=[c.desc.encode() for c in cps], cp_col=[c.taddr for c in cps],
                         b_desc=[m.b_desc.encode() for m in mmas], a_col=[m.a for m in mmas],
                         enable_d=[int(m.enable_input_d) for m in mmas], d_col=P_COLUMN,
                         idesc=QK_IDESC.encode(), image_bytes=IMAGE_BYTES)
    return sm.data[:IMAGE_BYTES].copy(), params


def predict_dual_qk(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """simtc's TMEM cells (128 lanes x :data:`DUMP_COLUMNS`, uint32) after the QK step."""
    from simtc.kernels.flashmla import replay_qk

    tm, _ = replay_qk(q, k, buf=_BUF)
    return tm.cells[:, DUMP_COLUMNS.start:DUMP_COLUMNS.stop].copy()


def run_dual_qk(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Run the kernel on an sm_100 GPU; returns the dumped cells (128 x 208 uint32: :data:`DUMP_COLUMNS`)."""
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
    d_out = cupy.zeros(128 * len(DUMP_COLUMNS), dtype=cupy.uint32)
    fn((1,), (128,), (d_img, d_prm, d_out), shared_mem=smem)
    cupy.cuda.runtime.deviceSynchronize()
    return d_out.get().reshape(128, len(DUMP_COLUMNS))


def gpu_check(seed: int, progress):
    """sm_100a: every dumped TMEM cell (Q region and P) equals simtc's TensorMemory."""
    from simtc.hw.results import CheckResult
    from simtc.hw.suite import qk_operands

    q, k = qk_operands(seed)
    got = run_dual_qk(q, k)
    want = predict_dual_qk(q, k)
    same = got == want
    first = None
    if not same.all():
        lane, c = (int(v) for v in np.argwhere(~same)[0])
        first = (f"TMEM lane {lane}, column {DUMP_COLUMNS.start + c}: GPU 0x{int(got[lane, c]):08x} vs simtc "
                 f"0x{int(want[lane, c]):08x}")
    progress(1)
    return [CheckResult("tcgen05 dual-GEMM QK step (TMEM cells)", "pass" if same.all() else "FAIL", 1,
                        int(same.all()), same.size, int(same.sum()), first_mismatch=first,
                        detail=f"{_N_CP} cp + {_N_MMA} mma.ws TS M=64 N=128; Q region and P compared cell for cell")]
