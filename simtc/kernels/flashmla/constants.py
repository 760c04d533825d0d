"""FlashMLA SM100 sparse-decode head64 constants (V32 = DeepSeek-V3.2 configuration).

Every value is ``deepseek-ai/FlashMLA`` ``csrc/sm100/decode/head64/config.h`` at ``9241ae3`` [kernel]:
lines 33-55 (constants), 71-80 (TMEM columns) and 196-198 (``TiledMMA_P``, whose instruction descriptor
CUTLASS's ``UMMA::make_instr_desc`` builds); derived values state their formula and are checked against
the kernel's numbers.

>>> Q_TAIL_COLUMN == Q_COLUMN + B_H * D_NOPE // 2 // 128, P_COLUMN == Q_TAIL_COLUMN + B_H * D_ROPE // 2 // 128
(True, True)
>>> QK_IDESC.hex()
'0x04200490'
"""

from __future__ import annotations

from simtc.isa.idesc import InstrDescriptor

__all__ = [
    "B_H", "B_TOPK", "D_NOPE", "D_Q", "D_ROPE", "D_V", "INSTR_K", "NUM_BUFS", "NUM_INDEX_BUFS", "NUM_THREADS",
    "O_COLUMN", "P_COLUMN", "QK_IDESC", "Q_COLUMN", "Q_TAIL_COLUMN", "TMEM_COLUMNS",
]

# ---- constants [kernel] config.h L33-55 -----------------------------------------------------------------
D_Q = 576
"""QK head dim (D_Q = D_K)."""
D_V = 512
"""V / output head dim."""
D_NOPE = 512
"""fp8-quantized part of K (and Q's NoPE dims)."""
D_ROPE = 64
"""bf16 RoPE part."""
B_H = 64
"""Heads per CTA = the MMA's M."""
B_TOPK = 64
"""KV tokens per block (the QK MMA's N is 2 * B_TOPK in the 128-row dual view)."""
NUM_BUFS = 2
"""KV ring depth (dequant, RoPE, raw fp8 buffers and their barriers)."""
NUM_INDEX_BUFS = 4
"""Ring depth of tma_coord / is_token_valid / scales."""
NUM_THREADS = 384
"""Three warpgroups (config.h L49; the roles: kernel.cuh lines 134-747)."""
INSTR_K = 16
"""K per bf16 MMA instruction: 256 bits [kernel] kerutils ``device/sm100/gemm.cuh`` L63-64."""

# ---- TMEM columns [kernel] config.h L71-80 --------------------------------------------------------------
TMEM_COLUMNS = 512
"""Warp 0 allocates all 512 columns; the start address is asserted to be 0 (kernel.cuh L63-65)."""
O_COLUMN = 0
"""O accumulator (64 x 512 fp32 in Layout E: 256 columns)."""
Q_COLUMN = 256
"""Q NoPE, bf16 two per cell, 128 columns."""
Q_TAIL_COLUMN = Q_COLUMN + B_H * D_NOPE // 2 // 128
"""Q RoPE: ``Q_Tail = 256 + B_H*D_NOPE/2/128`` = 384 (the source's formula)."""
P_COLUMN = Q_TAIL_COLUMN + B_H * D_ROPE // 2 // 128
"""QK result P (64 x 128 fp32 in Layout E): 400."""

# ---- instruction descriptor [kernel] config.h L196-198, gemm.cuh L78-79; [sass] UMOV 0x4200490 ------------
QK_IDESC = InstrDescriptor(kind="f16", m=B_H, n=2 * B_TOPK, a_format="bf16", b_format="bf16")
"""The QK MMA: M=64, N=128, bf16 x bf16 -> f32, A and B K-major (``0x04200490``)."""
