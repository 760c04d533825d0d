"""FlashMLA's Q split: which head dims each TMEM lane half multiplies.

Sources: FlashMLA ``csrc/sm100/decode/head64/kernel.cuh`` lines 464-513 (the Q copies through a 128-row
view) and ``config.h`` lines 120-125 and 143-148 (K's ``DualGemm`` views), 196-198 (``TiledMMA_P``, N =
2 * B_TOPK "for dual gemm") at ``9241ae3`` [kernel]; Layout E is CUTLASS's ``tmem_frg_ws`` 2x2 atom
(``include/cute/atom/mma_traits_sm100_frag.hpp`` lines 554-559 at ``7107b05``); that each lane half reads
A from its own 64 lanes is [inferred] (PTX does not say; FlashMLA's ``gemm.cuh`` line 59 notes that A
"should be duplicated").

The QK MMA is M=64 ``.ws`` (Layout E): lanes 0-63 hold Q's even 64-dim NoPE chunks and RoPE
dims 512-543, lanes 64-127 the odd chunks and RoPE dims 544-575 (the ``tcgen05.cp`` of the
128-row dual view puts them there). So one instruction chain computes two partial products,
P_lo and P_hi, and the softmax warps add them: P = P_lo + P_hi. In the kernel's k order each
half multiplies 288 dims: its 32 RoPE dims (two k=16 steps) first, then its four NoPE chunks.

On Hopper the same split is two ``wgmma`` chains of 18 m64n64k16 instructions, each reading its
half's tiles directly (:func:`qk_half_descriptors`).

>>> d = split_dims(1)
>>> d.size, d[:2].tolist(), d[32:34].tolist(), d[96:98].tolist()
(288, [544, 545], [64, 65], [192, 193])
"""

from __future__ import annotations

import numpy as np

from simtc.kernels.flashmla.constants import D_NOPE, D_ROPE, INSTR_K
from simtc.kernels.flashmla.plan import NOPE_TILE, ROPE_TILE, SMEM_V32
from simtc.smem.desc import SmemDescriptor

__all__ = ["HALVES", "q_split", "qk_half_descriptors", "split_dims"]

HALVES = 2
"""Lane halves of Layout E: 0 (lanes 0-63, P_lo) and 1 (lanes 64-127, P_hi)."""
_CHUNK = 64


def split_dims(half: int) -> np.ndarray:
    """The 288 head dims lane half ``half`` multiplies, in the kernel's k order (RoPE first, then NoPE)."""
    if half not in (0, 1):
        from simtc.errors import SimtcError

        raise SimtcError(f"half must be 0 (P_lo) or 1 (P_hi), got {half!r}", rule="Layout E has two lane halves")
    rope = D_NOPE + (D_ROPE // HALVES) * half + np.arange(D_ROPE // HALVES)
    nope = [np.arange(_CHUNK * (HALVES * t + half), _CHUNK * (HALVES * t + half) + _CHUNK)
            for t in range(D_NOPE // _CHUNK // HALVES)]
    return np.concatenate([rope, *nope])


def q_split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(x_lo, x_hi): the columns of Q or K (rows x 576) each lane half uses, in k order (rows x 288 each).

    P_lo = x_lo(Q) · x_lo(K)^T and P_hi likewise, as the tensor core chains them.
    """
    x = np.asarray(x)
    return x[:, split_dims(0)], x[:, split_dims(1)]


def qk_half_descriptors(half: int, *, arch: str = "sm90", buf: int = 1,
                        q_at: int | None = None, q_rope_at: int | None = None,
                        k_at: int | None = None, k_rope_at: int | None = None
                        ) -> list[tuple[SmemDescriptor, SmemDescriptor, bool]]:
    """The 18 (A = Q, B = K, accumulate) k16 steps of lane half ``half``: RoPE k=0, 1, then NoPE k=0..15.

    Q and K are stored as :func:`~simtc.kernels.flashmla.plan.store_qk_operand` stores them (default
    places: the plan's ``q`` / ``q_sw64`` and ``dequant[buf]``). NoPE step k reads tile
    ``2*(k//4) + half`` at ``32*(k%4)`` bytes; RoPE step k reads the half's 64x32 tile at ``32*k``.
    The first step overwrites (accumulate False), as in the kernel.
    """
    q_at = SMEM_V32["q"].offset if q_at is None else q_at
    q_rope_at = SMEM_V32["q_sw64"].offset if q_rope_at is None else q_rope_at
    k_at = SMEM_V32[f"dequant{buf}.nope"].offset if k_at is None else k_at
    k_rope_at = SMEM_V32[f"dequant{buf}.rope"].offset if k_rope_at is None else k_rope_at
    split_dims(half)  # checks half
    steps = []
    rope_k = D_ROPE // HALVES // INSTR_K
    for k in range(rope_k):
        off = ROPE_TILE.nbytes * half
        steps.append((ROPE_TILE.descriptor(arch=arch, start=q_rope_at + off, k_slice=k),
                      ROPE_TILE.descriptor(arch=arch, start=k_rope_at + off, k_slice=k), k > 0))
    per_tile = _CHUNK // INSTR_K
    for k in range(D_NOPE // HALVES // INSTR_K):
        off = NOPE_TILE.nbytes * (HALVES * (k // per_tile) + half)
        steps.append((NOPE_TILE.descriptor(arch=arch, start=q_at + off, k_slice=k % per_tile),
                      NOPE_TILE.descriptor(arch=arch, start=k_at + off, k_slice=k % per_tile), True))
    return steps
