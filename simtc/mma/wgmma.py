"""``wgmma.mma_async`` (sm_90a) m64nNk16 with f32 accumulators in registers.

A warpgroup (4 warps, 128 threads) holds the 64 x N f32 accumulator as N/2 registers per
thread. Fragment (PTX ISA 9.0 §9.7.15.5.2 figures as encoded in CUTLASS's ``CLayout_64xN``,
``include/cute/atom/mma_traits_sm90_gmma.hpp`` lines 433-435 at ``7107b05``; run bit for bit on an H200,
``tests/data/h200_crosscheck_seed0.npz``): thread t = 32w + l, register i

* row(t, i) = 16 w + l // 4 + 8 ((i // 2) % 2)
* col(t, i) = 8 (i // 4) + 2 (l % 4) + (i % 2)

Operands come from shared memory through descriptors (:mod:`simtc.mma.operands`), the
arithmetic is :func:`simtc.numerics.tensor_core_mma` with the sm90 parameters. This is the
instruction the H200 cross-check executes.

>>> rows, cols = wgmma_fragment(8)
>>> rows[0].tolist(), cols[0].tolist()   # thread 0: D[0][0], D[0][1], D[8][0], D[8][1]
([0, 0, 8, 8], [0, 1, 0, 1])
"""

from __future__ import annotations

import numpy as np

from simtc.errors import ShapeError, SimtcError
from simtc.mma.operands import read_operand
from simtc.numerics.fdpa import tensor_core_mma
from simtc.smem.desc import SmemDescriptor
from simtc.smem.memory import SharedMemory

__all__ = ["WGMMA_M", "fragment_to_matrix", "matrix_to_fragment", "wgmma_fragment", "wgmma_mma_async"]

WGMMA_M = 64
_REF = "PTX ISA 9.0 §9.7.15.5.2"


def _check_n(n: int) -> None:
    if not isinstance(n, int) or not (8 <= n <= 256 and n % 8 == 0):
        raise ShapeError(f"wgmma N = {n!r}: must be a multiple of 8 from 8 to 256", rule="m64nNk16 shapes", ref=_REF)


def wgmma_fragment(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of D held by thread t, register i: two int arrays of shape (128, n // 2)."""
    _check_n(n)
    t = np.arange(128)[:, None]
    i = np.arange(n // 2)[None, :]
    w, lane = t // 32, t % 32
    rows = 16 * w + lane // 4 + 8 * ((i // 2) % 2)
    cols = 8 * (i // 4) + 2 * (lane % 4) + (i % 2)
    return rows + 0 * cols, cols + 0 * rows


def fragment_to_matrix(regs: np.ndarray) -> np.ndarray:
    """Registers (128, N/2) -> D (64, N)."""
    regs = np.asarray(regs)
    if regs.ndim != 2 or regs.shape[0] != 128:
        raise ShapeError(f"accumulator registers must be (128, N/2), got {regs.shape}", rule="wgmma fragment")
    rows, cols = wgmma_fragment(2 * regs.shape[1])
    d = np.empty((WGMMA_M, 2 * regs.shape[1]), dtype=regs.dtype)
    d[rows, cols] = regs
    return d


def matrix_to_fragment(d: np.ndarray) -> np.ndarray:
    """D (64, N) -> registers (128, N/2)."""
    d = np.asarray(d)
    if d.ndim != 2 or d.shape[0] != WGMMA_M:
        raise ShapeError(f"D must be (64, N), got {d.shape}", rule="wgmma fragment")
    rows, cols = wgmma_fragment(d.shape[1])
    return d[rows, cols]


def wgmma_mma_async(smem: SharedMemory, a_desc: SmemDescriptor | int, b_desc: SmemDescriptor | int, *, n: int,
                    dtype: str = "bf16", a_major: str = "K", b_major: str = "K", acc: np.ndarray | None = None,
                    scale_d: bool = True, negate_a: bool = False, negate_b: bool = False) -> np.ndarray:
    """Execute one ``wgmma.mma_async.sync.aligned.m64nNk16.f32.{dtype}.{dtype}``.

    ``acc`` is the (128, N/2) float32 register fragment (None = zeros). With ``scale_d``
    false the accumulator is ignored (D = A·B). ``negate_a`` / ``negate_b`` are the
    ``imm-scale-a`` / ``imm-scale-b`` = -1 operands. Returns the new register fragment.
    """
    _check_n(n)
    if dtype not in ("bf16", "fp16"):
        raise SimtcError(f"wgmma with {dtype!r} inputs is not modelled (bf16 and fp16 are)",
                         rule="modelled wgmma input types", ref=_REF)
    if smem.arch != "sm90":
        raise SimtcError("wgmma needs sm90 shared memory (SharedMemory(arch='sm90'))", rule="wgmma is sm_90a only",
                         ref=_REF)
    a = read_operand(smem, a_desc, major=a_major, dtype=dtype, rows=WGMMA_M, k=16)
    b = read_operand(smem, b_desc, major=b_major, dtype=dtype, rows=n, k=16)
    a, b = (-a if negate_a else a), (-b if negate_b else b)
    c = np.zeros((WGMMA_M, n), np.float32) if acc is None or not scale_d else fragment_to_matrix(acc)
    d = tensor_core_mma(a, b, c.astype(np.float32), dtype=dtype, arch="sm90")
    return matrix_to_fragment(d)
