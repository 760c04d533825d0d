"""Run simtc-described ``wgmma`` programs on an sm_90a GPU and read the raw accumulators back.

The kernel (``cuda/wgmma_exec.cu``) is a thin executor: simtc builds the shared-memory
image (:mod:`simtc.smem`) and the descriptors; the GPU copies the image verbatim and runs the
instructions. :func:`predict` runs the same program through simtc's own ``wgmma`` model, so a
mismatch is a disagreement between model and hardware.
"""

from __future__ import annotations

from importlib import resources

import numpy as np
from attrs import field, frozen

from simtc.errors import SimtcError
from simtc.isa.wgmma import WgmmaCommitGroup, WgmmaMmaAsync
from simtc.smem.desc import SmemDescriptor
from simtc.smem.memory import SharedMemory

__all__ = ["WgmmaProgram", "kernel_name", "kernel_source", "predict", "run", "wgmma_k16"]

_FORM = "the executor runs m64nNk16 bf16/fp16 wgmma.mma_async with A from shared memory and an f32 accumulator"


def wgmma_k16(a: SmemDescriptor | int, b: SmemDescriptor | int, *, n: int, dtype: str = "bf16", major: str = "K",
              scale_d: bool = True) -> WgmmaMmaAsync:
    """The executor's instruction as its isa record: ``wgmma.mma_async.m64n{n}k16.f32.{dtype}.{dtype} d, a, b``.

    ``a`` and ``b`` are sm90 descriptors (or their 64-bit words); both operands have the same ``major``.
    """
    return WgmmaMmaAsync(64, n, 16, dtype, a, b, scale_d, "d", a_major=major, b_major=major)


def _records(value) -> tuple:
    recs = tuple(value)
    mmas = [r for r in recs if isinstance(r, WgmmaMmaAsync)]
    if not mmas or any(not isinstance(r, (WgmmaMmaAsync, WgmmaCommitGroup)) for r in recs):
        raise SimtcError("a wgmma program is one or more wgmma.mma_async records with commit_group records "
                         "between them", rule="executor programs")
    first = mmas[0]
    for r in mmas:
        if isinstance(r.a, str) or r.k != 16 or r.d_dtype != "fp32" or r.dtype not in ("bf16", "fp16"):
            raise SimtcError(f"{r.ptx()}: {_FORM}", rule="executor instruction form")
        if (r.n, r.dtype, r.a_major, r.b_major, r.d) != (first.n, first.dtype, first.a_major, first.b_major, first.d):
            raise SimtcError(f"{r.ptx()} differs from {first.ptx()} in N, type, majors or accumulator: one executor "
                             "is compiled per (N, type, majors)", rule="one executor per program")
    return recs


@frozen
class WgmmaProgram:
    """``wgmma.mma_async`` records (one N, type and majors: one compiled executor) on one accumulator.

    A :class:`~simtc.isa.wgmma.WgmmaCommitGroup` after an instruction ends a wgmma-group there (the
    executor stamps ``clock64`` at every group's end).
    """

    records: tuple[WgmmaMmaAsync | WgmmaCommitGroup, ...] = field(converter=_records)

    @classmethod
    def chain(cls, mmas, *, commit: str = "each") -> WgmmaProgram:
        """``mmas`` with a commit_group after each one (``commit="each"``) or after the last only (``"last"``)."""
        if commit not in ("each", "last"):
            raise SimtcError(f"commit={commit!r}: 'each' or 'last'", rule="executor programs")
        mmas = list(mmas)
        recs = []
        for i, m in enumerate(mmas):
            recs.append(m)
            if commit == "each" or i == len(mmas) - 1:
                recs.append(WgmmaCommitGroup())
        return cls(tuple(recs))

    @property
    def mmas(self) -> tuple[WgmmaMmaAsync, ...]:
        return tuple(r for r in self.records if isinstance(r, WgmmaMmaAsync))

    @property
    def group_ends(self) -> tuple[bool, ...]:
        """Per instruction: whether a commit_group follows it."""
        recs = self.records
        return tuple(isinstance(r, WgmmaMmaAsync) and i + 1 < len(recs) and isinstance(recs[i + 1], WgmmaCommitGroup)
                     for i, r in enumerate(recs) if isinstance(r, WgmmaMmaAsync))

    @property
    def n(self) -> int:
        return self.mmas[0].n

    @property
    def dtype(self) -> str:
        return self.mmas[0].dtype

    @property
    def a_major(self) -> str:
        return self.mmas[0].a_major

    @property
    def b_major(self) -> str:
        return self.mmas[0].b_major


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
    """simtc's prediction: the (128, N/2) float32 registers after the program (:func:`simtc.semantics.execute`)."""
    from simtc.semantics import Cta, execute

    sm = SharedMemory(arch="sm90", size=_image_size(image))
    sm.data[: image.size] = image
    cta = Cta(smem=sm)
    for r in program.records:
        execute(r, cta, warp=0)  # the warpgroup-collective record: warp 0 holds the (128, N/2) fragment
    return cta.warp_regs(0)[program.mmas[0].d]


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
    mmas, ends = program.mmas, program.group_ends
    prog = np.zeros(len(mmas), dtype=[("a", "<u8"), ("b", "<u8"), ("sd", "<u4"), ("ge", "<u4")])
    for i, (r, end) in enumerate(zip(mmas, ends, strict=True)):
        prog[i] = (r.a.encode(), r.b_desc.encode(), int(r.scale_d), int(end))
    groups = max(1, sum(ends))
    d_image = cupy.asarray(image.view(np.uint32))
    d_prog = cupy.asarray(prog.view(np.uint8))
    d_out = cupy.zeros(128 * program.n // 2, dtype=cupy.float32)
    d_stamps = cupy.zeros(groups, dtype=cupy.uint64)
    smem_bytes = size + 1024
    fn.max_dynamic_shared_size_bytes = smem_bytes  # above the 48 KiB default needs an explicit opt-in
    fn((1,), (128,), (d_image, np.uint32(size // 16), d_prog, np.uint32(len(mmas)), d_out, d_stamps),
       shared_mem=smem_bytes)
    cupy.cuda.runtime.deviceSynchronize()
    return d_out.get().reshape(128, program.n // 2), d_stamps.get()
