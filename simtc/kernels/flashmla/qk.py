"""FlashMLA's SM100 sparse-decode head64 kernel (V32 configuration): the QK step, as data.

Everything here comes from ``deepseek-ai/FlashMLA`` ``csrc/sm100/decode/head64/{config.h,
kernel.cuh}`` and ``csrc/kerutils/.../sm100/{gemm,helpers}.cuh`` as summarised in the fact
sheet ``flashmla_head64.md`` (§3 TMEM map, §4 shared-memory plan, §7 operand tables, §8
dual-GEMM placement) [kernel].

The QK step of one KV block:

1. (once per request) 16 ``tcgen05.cp.128x256b`` put Q's NoPE dims into TMEM columns 256-383,
   reading a 128-row SW128 view of the ``q`` buffer (rows 64-127 are the next 8-KiB tile, i.e. the
   odd 64-dim chunk); 2 more put the RoPE dims in columns 384-399 (SW64 view);
2. 18 ``tcgen05.mma.ws`` (TS, M=64, N=128, idesc ``0x04200490``) into column 400: RoPE k=0,1 first
   (k=0 overwrites), then NoPE k=0..15; B is the 128-row "dual view" of the dequantized K tile.

With Layout E (:mod:`simtc.tmem.layouts`) lanes 0-63 compute P_lo (even chunks + RoPE 0-31) and
lanes 64-127 P_hi (odd chunks + RoPE 32-63), both in columns 400-463; P = P_lo + P_hi.

>>> [c.taddr for c in q_copies()][:5], q_copies()[4].desc.start
([256, 264, 272, 280, 288], 16384)
>>> m = qk_mmas(0)
>>> len(m), m[0].enable_input_d, m[2].a, m[6].b_desc.start
(18, False, 256, 16384)
"""

from __future__ import annotations

import numpy as np

from simtc.kernels.instructions import Tcgen05Cp, Tcgen05Mma
from simtc.mma.idesc import InstrDescriptor
from simtc.smem import CanonicalLayout, SharedMemory
from simtc.tmem import TensorMemory

__all__ = [
    "D_NOPE",
    "D_Q",
    "D_ROPE",
    "P_COLUMN",
    "QK_IDESC",
    "Q_COLUMN",
    "Q_TAIL_COLUMN",
    "SMEM_V32",
    "load_qk",
    "q_copies",
    "qk_mmas",
    "read_p",
    "replay_qk",
]

D_Q, D_NOPE, D_ROPE = 576, 512, 64
B_H = B_TOPK = 64
Q_COLUMN, Q_TAIL_COLUMN, P_COLUMN = 256, 384, 400
QK_IDESC = InstrDescriptor(kind="f16", m=64, n=128, a_format="bf16", b_format="bf16")  # 0x04200490

SMEM_V32 = {
    "q": (0, 65536), "q_sw64": (65536, 8192),
    "dequant0.nope": (0, 65536), "dequant0.rope": (65536, 8192),
    "dequant1.nope": (73728, 65536), "dequant1.rope": (139264, 8192),
}
"""Byte offset and size of the buffers the QK step touches (flashmla_head64.md §4, V32)."""

_NOPE_TILE = CanonicalLayout("bf16", "K", "SW128", 64, 64)
_ROPE_TILE = CanonicalLayout("bf16", "K", "SW64", 64, 32)
_NOPE_VIEW = CanonicalLayout("bf16", "K", "SW128", 128, 64)  # the 128-row dual view: tiles t and t+1
_ROPE_VIEW = CanonicalLayout("bf16", "K", "SW64", 128, 32)


def _store_q_like(sm: SharedMemory, x: np.ndarray, nope_at: int, rope_at: int) -> None:
    """Q or K (64 x 576): eight 64x64 SW128 NoPE tiles, then two 64x32 SW64 RoPE tiles."""
    for t in range(8):
        sm.write_tile(_NOPE_TILE, x[:, 64 * t:64 * t + 64], nope_at + 8192 * t)
    for h in range(2):
        sm.write_tile(_ROPE_TILE, x[:, 512 + 32 * h:544 + 32 * h], rope_at + 4096 * h)


def load_qk(q: np.ndarray, k: np.ndarray, *, buf: int = 1, smem: SharedMemory | None = None) -> SharedMemory:
    """Shared memory holding Q (``q``, ``q_sw64``) and the dequantized K of ring buffer ``buf``.

    ``buf`` = 1 keeps K clear of Q (``dequant[0]`` aliases ``q``, which FlashMLA reuses only after
    the Q copies have completed).
    """
    sm = smem or SharedMemory()
    _store_q_like(sm, q, SMEM_V32["q"][0], SMEM_V32["q_sw64"][0])
    _store_q_like(sm, k, SMEM_V32[f"dequant{buf}.nope"][0], SMEM_V32[f"dequant{buf}.rope"][0])
    return sm


def q_copies() -> list[Tcgen05Cp]:
    """The 16 + 2 ``tcgen05.cp.128x256b`` of Q (flashmla_head64.md §7.2)."""
    out = []
    q0, r0 = SMEM_V32["q"][0], SMEM_V32["q_sw64"][0]
    for t in range(4):
        for s in range(4):
            desc = _NOPE_VIEW.descriptor(start=q0 + 16384 * t, k_slice=s)
            out.append(Tcgen05Cp(Q_COLUMN + 8 * (4 * t + s), desc, label=f"cp Q NoPE t={t} s={s}"))
    for s in range(2):
        out.append(Tcgen05Cp(Q_TAIL_COLUMN + 8 * s, _ROPE_VIEW.descriptor(start=r0, k_slice=s),
                             label=f"cp Q RoPE s={s}"))
    return out


def qk_mmas(buf: int = 1) -> list[Tcgen05Mma]:
    """The 18 QK ``tcgen05.mma.ws`` of one block (flashmla_head64.md §7.1 rows 1-18)."""
    nope0, rope0 = SMEM_V32[f"dequant{buf}.nope"][0], SMEM_V32[f"dequant{buf}.rope"][0]
    out = []
    for k in range(2):
        out.append(Tcgen05Mma(P_COLUMN, Q_TAIL_COLUMN + 8 * k, _ROPE_VIEW.descriptor(start=rope0, k_slice=k),
                              QK_IDESC, enable_input_d=k > 0, ws=True, label=f"QK RoPE k={k}"))
    for k in range(16):
        desc = _NOPE_VIEW.descriptor(start=nope0 + 16384 * (k // 4), k_slice=k % 4)
        out.append(Tcgen05Mma(P_COLUMN, Q_COLUMN + 8 * k, desc, QK_IDESC, enable_input_d=True, ws=True,
                              label=f"QK NoPE k={k}"))
    return out


def replay_qk(q: np.ndarray, k: np.ndarray, *, buf: int = 1) -> tuple[TensorMemory, SharedMemory]:
    """Run the QK step: allocate all 512 columns, copy Q, issue the 18 MMAs. Returns (TMEM, SMEM)."""
    sm = load_qk(q, k, buf=buf)
    tm = TensorMemory()
    tm.alloc(512, warp=0)
    tm.relinquish_alloc_permit(warp=0)
    for cp in q_copies():
        cp.execute(tm, sm)
    for mma in qk_mmas(buf):
        mma.execute(tm, sm)
    return tm, sm


def read_p(tm: TensorMemory) -> tuple[np.ndarray, np.ndarray]:
    """P_lo and P_hi (64 x 64 float32) as warps 0-3 read them with ``tcgen05.ld.32x32b.x64``.

    Warp w reads its quadrant (lanes 32w..32w+31) at column 400: warps 0, 1 get P_lo rows 0-63,
    warps 2, 3 get P_hi rows 0-63 (flashmla_head64.md §9 does it in two x32 halves).
    """
    regs = [tm.ld((32 * w) << 16 | P_COLUMN, "32x32b", 64, warp=w) for w in range(4)]
    p = np.concatenate(regs).view(np.float32)  # (128 lanes, 64 tokens)
    return p[:64].copy(), p[64:].copy()
