"""Run simtc-described ``wgmma`` programs on an sm_90a GPU and read the raw accumulators back.

The kernel (``cuda/wgmma_exec.cu``) is a thin executor: simtc builds the shared-memory
image (:mod:`simtc.smem`) and the descriptors; the GPU copies the image verbatim and runs the
instructions. :func:`predict` runs the same program through simtc's own ``wgmma`` model, so a
mismatch is a disagreement between model and hardware.
"""

from __future__ import annotations

from importlib import resources

import numpy as np
from attrs import frozen

from simtc.errors import ShapeError, SimtcError
from simtc.mma.wgmma import wgmma_mma_async
from simtc.smem.memory import SharedMemory

__all__ = ["WgmmaInstr", "WgmmaProgram", "kernel_name", "kernel_source", "predict", "run"]


@frozen
class WgmmaInstr:
    """One instruction: sm90 descriptor words (start relative to the image) and scale-d."""

    a_desc: int
    b_desc: int
    scale_d: bool = True
    group_end: bool = True


@frozen
class WgmmaProgram:
    """A sequence of ``wgmma.mma_async.m64n{n}k16.f32.{dtype}.{dtype}`` on one image."""

    n: int
    dtype: str
    a_major: str
    b_major: str
    instrs: tuple[WgmmaInstr, ...]

    def __attrs_post_init__(self):
        if self.n not in range(8, 257, 8):
            raise ShapeError(f"N = {self.n}: wgmma N is a multiple of 8 up to 256", rule="m64nNk16 shapes")
        if self.dtype not in ("bf16", "fp16"):
            raise SimtcError(f"dtype {self.dtype!r}: the executor runs bf16 or fp16", rule="executor input types")
        if self.a_major not in ("K", "MN") or self.b_major not in ("K", "MN"):
            raise SimtcError("majors are K or MN", rule="transpose immediates")


def kernel_name(n: int, dtype: str, a_major: str, b_major: str) -> str:
    return f"simtc_wgmma_m64n{n}k16_{dtype}_{a_major}{b_major}"


def kernel_source(n: int, dtype: str, a_major: str, b_major: str) -> str:
    """CUDA source of the executor for one (N, dtype, majors) combination."""
    text = resources.files("simtc.hw.cuda").joinpath("wgmma_exec.cu").read_text()
    nreg = n // 2
    fill = {
        "NAME": kernel_name(n, dtype, a_major, b_major),
        "N": str(n), "NREG": str(nreg), "T": {"bf16": "bf16", "fp16": "f16"}[dtype],
        "TA": "1" if a_major == "MN" else "0", "TB": "1" if b_major == "MN" else "0",
        "ACC_LIST": ", ".join(f"%{i}" for i in range(nreg)),
        "ACC_BIND": ", ".join(f'"+f"(d[{i}])' for i in range(nreg)),
        "A_IDX": str(nreg), "B_IDX": str(nreg + 1), "SD_IDX": str(nreg + 2),
    }
    for key, value in fill.items():
        text = text.replace("{{" + key + "}}", value)
    return text


def predict(image: np.ndarray, program: WgmmaProgram) -> np.ndarray:
    """simtc's prediction: the (128, N/2) float32 registers after the program."""
    sm = SharedMemory(arch="sm90", size=_image_size(image))
    sm.data[: image.size] = image
    acc = None
    for ins in program.instrs:
        acc = wgmma_mma_async(sm, ins.a_desc, ins.b_desc, n=program.n, dtype=program.dtype,
                              a_major=program.a_major, b_major=program.b_major, acc=acc, scale_d=ins.scale_d)
    return acc


def _image_size(image: np.ndarray) -> int:
    if image.dtype != np.uint8 or image.ndim != 1 or image.size % 16 or image.size > 227 * 1024 - 1024:
        raise SimtcError("the image must be a 1-D uint8 array, a multiple of 16 bytes, at most 226 KiB",
                         rule="executor image")
    return int(image.size)


def run(image: np.ndarray, program: WgmmaProgram) -> tuple[np.ndarray, np.ndarray]:
    """Execute on the GPU: returns (registers (128, N/2) float32, clock64 stamps per group)."""
    import cupy

    from simtc.hw.compile import load_kernel
    from simtc.hw.device import require

    require("sm_90a")
    size = _image_size(image)
    name = kernel_name(program.n, program.dtype, program.a_major, program.b_major)
    fn = load_kernel(kernel_source(program.n, program.dtype, program.a_major, program.b_major), name, arch="sm_90a")
    prog = np.zeros(len(program.instrs), dtype=[("a", "<u8"), ("b", "<u8"), ("sd", "<u4"), ("ge", "<u4")])
    for i, ins in enumerate(program.instrs):
        prog[i] = (ins.a_desc, ins.b_desc, int(ins.scale_d), int(ins.group_end))
    groups = max(1, int(sum(ins.group_end for ins in program.instrs)))
    d_image = cupy.asarray(image.view(np.uint32))
    d_prog = cupy.asarray(prog.view(np.uint8))
    d_out = cupy.zeros(128 * program.n // 2, dtype=cupy.float32)
    d_stamps = cupy.zeros(groups, dtype=cupy.uint64)
    smem_bytes = size + 1024
    fn.max_dynamic_shared_size_bytes = smem_bytes  # above the 48 KiB default needs an explicit opt-in
    fn((1,), (128,), (d_image, np.uint32(size // 16), d_prog, np.uint32(len(program.instrs)), d_out, d_stamps),
       shared_mem=smem_bytes)
    cupy.cuda.runtime.deviceSynchronize()
    return d_out.get().reshape(128, program.n // 2), d_stamps.get()
