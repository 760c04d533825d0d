"""The FlashMLA head64 QK step as a :class:`simtc.isa.Program`, and its replay through the semantics layer.

The QK step of one KV block (FlashMLA ``csrc/sm100/decode/head64/kernel.cuh`` lines 464-514 and 531-573 at
``9241ae3``, with kerutils ``device/sm100/helpers.cuh`` lines 45-76 for the k loop) [kernel]:

1. (once per request) 16 ``tcgen05.cp.128x256b`` put Q's NoPE dims into TMEM columns 256-383,
   reading a 128-row SW128 view of the ``q`` buffer (rows 64-127 are the next 8-KiB tile, i.e.
   the odd 64-dim chunk); 2 more put the RoPE dims in columns 384-399 (SW64 view);
2. 18 ``tcgen05.mma.ws`` (TS, M=64, N=128, idesc ``0x04200490``) into column 400: RoPE k=0, 1
   first (k=0 overwrites), then NoPE k=0..15; B is the 128-row dual view of the dequantized K;
3. ``tcgen05.commit`` to ``qk_done[buf]``; the softmax warps 0-3 wait on it and each loads its
   TMEM quadrant of P with ``tcgen05.ld.32x32b.x64`` (warps 0, 1: P_lo; warps 2, 3: P_hi).

>>> p = qk_program()
>>> c = p.counts(); c["tcgen05.cp"], c["tcgen05.mma.ws"], c["tcgen05.commit"], c["tcgen05.ld"]
(18, 18, 1, 1)
>>> [c.taddr for c in q_copies()][:5], q_copies()[4].desc.start
([256, 264, 272, 280, 288], 16384)
>>> m = qk_mmas(0)
>>> len(m), m[0].enable_input_d, m[2].a, m[6].b_desc.start
(18, False, 256, 16384)
"""

from __future__ import annotations

import functools

import numpy as np

from simtc.isa.mbarrier import MbarrierTryWait
from simtc.isa.program import Barrier, Program, Role
from simtc.isa.tcgen05 import Alloc, Commit, Cp, FenceAfterThreadSync, Ld, Mma, RelinquishAllocPermit, WaitLd
from simtc.kernels.flashmla.constants import (
    B_H,
    B_TOPK,
    INSTR_K,
    P_COLUMN,
    Q_COLUMN,
    Q_TAIL_COLUMN,
    QK_IDESC,
    TMEM_COLUMNS,
)
from simtc.kernels.flashmla.plan import MBARRIERS_V32, NOPE_VIEW, ROPE_VIEW, SMEM_V32, store_qk_operand
from simtc.semantics import Cta, execute, run_program
from simtc.smem.memory import SharedMemory
from simtc.tmem.memory import TensorMemory

__all__ = ["MMA_WARP", "SOFTMAX_WARPS", "load_qk", "q_copies", "qk_loop", "qk_mmas", "qk_program", "read_p",
           "replay_qk", "tmem_setup"]

MMA_WARP = 4
"""The MMA issuer: warp 4, one elected lane (``kernel.cuh`` line 431) [kernel]."""
SOFTMAX_WARPS = (0, 1, 2, 3)
"""Warpgroup 0: the softmax warps that read P back (``kernel.cuh`` lines 134 and 166-176) [kernel]."""
_COLS_PER_K = INSTR_K // 2  # one k16 step of bf16 A: 8 TMEM columns (two values per cell)
_VIEW_STEPS = 64 // INSTR_K  # k16 steps per 64-dim tile


def load_qk(q: np.ndarray, k: np.ndarray, *, buf: int = 1, smem: SharedMemory | None = None) -> SharedMemory:
    """Shared memory holding Q (``q``, ``q_sw64``) and the dequantized K of ring buffer ``buf``.

    ``buf`` = 1 keeps K clear of Q (``dequant[0]`` aliases ``q``, which FlashMLA reuses only after
    the Q copies have completed).
    """
    sm = smem or SharedMemory()
    store_qk_operand(sm, q, SMEM_V32["q"].offset, SMEM_V32["q_sw64"].offset)
    store_qk_operand(sm, k, SMEM_V32[f"dequant{buf}.nope"].offset, SMEM_V32[f"dequant{buf}.rope"].offset)
    return sm


def q_copies() -> list[Cp]:
    """The 16 + 2 ``tcgen05.cp.128x256b`` of Q (``kernel.cuh`` lines 464-513)."""
    out = []
    q0, r0 = SMEM_V32["q"].offset, SMEM_V32["q_sw64"].offset
    pair = NOPE_VIEW.nbytes  # a 128-row view spans two 64-row tiles: 16 KiB
    for t in range(4):
        for s in range(_VIEW_STEPS):
            desc = NOPE_VIEW.descriptor(start=q0 + pair * t, k_slice=s)
            out.append(Cp(Q_COLUMN + _COLS_PER_K * (_VIEW_STEPS * t + s), desc, label=f"cp Q NoPE t={t} s={s}"))
    for s in range(2):
        out.append(Cp(Q_TAIL_COLUMN + _COLS_PER_K * s, ROPE_VIEW.descriptor(start=r0, k_slice=s),
                      label=f"cp Q RoPE s={s}"))
    return out


def qk_mmas(buf: int = 1) -> list[Mma]:
    """The 18 QK ``tcgen05.mma.ws`` of one block (``kernel.cuh`` lines 532-552: RoPE first, then NoPE)."""
    nope0, rope0 = SMEM_V32[f"dequant{buf}.nope"].offset, SMEM_V32[f"dequant{buf}.rope"].offset
    out = []
    for k in range(2):
        out.append(Mma(P_COLUMN, Q_TAIL_COLUMN + _COLS_PER_K * k, ROPE_VIEW.descriptor(start=rope0, k_slice=k),
                       QK_IDESC, enable_input_d=k > 0, ws=True, label=f"QK RoPE k={k}"))
    for k in range(16):
        desc = NOPE_VIEW.descriptor(start=nope0 + NOPE_VIEW.nbytes * (k // _VIEW_STEPS), k_slice=k % _VIEW_STEPS)
        out.append(Mma(P_COLUMN, Q_COLUMN + _COLS_PER_K * k, desc, QK_IDESC, enable_input_d=True, ws=True,
                       label=f"QK NoPE k={k}"))
    return out


@functools.lru_cache(maxsize=4)
def qk_program(buf: int = 1) -> Program:
    """``flashmla-qk``: the MMA warp's 18 copies, 18 MMAs and commit; the softmax warps' wait and P load.

    A Program is a frozen value, so one instance per ``buf`` is built and shared.
    """
    bar = f"qk_done[{buf}]"
    addr, count = MBARRIERS_V32[bar]
    mma = Role("mma", (MMA_WARP,), (*q_copies(), *qk_mmas(buf), Commit(bar, label="QK done")), threads=1)
    softmax = Role("softmax", SOFTMAX_WARPS, (
        MbarrierTryWait(bar, 0, label="wait for P"),
        FenceAfterThreadSync(),
        Ld(P_COLUMN, "32x32b", B_TOPK, "p", label="P (this warp's quadrant)"),
        WaitLd(),
    ))
    return Program("flashmla-qk", (mma, softmax), barriers=(Barrier(bar, "mbarrier", count, addr=addr),),
                   description="FlashMLA head64 QK step: 18 tcgen05.cp of Q, 18 tcgen05.mma.ws (dual GEMM), "
                               "commit, tcgen05.ld of P",
                   meta=(("kernel", "FlashMLA SM100 sparse decode head64 V32"), ("buf", buf),
                         ("source", "FlashMLA 9241ae3 csrc/sm100/decode/head64/kernel.cuh L464-573")))


def tmem_setup() -> tuple[Alloc, RelinquishAllocPermit]:
    """Warp 0's setup: allocate all 512 columns (address to ``tmem_start_addr``), give up the permit
    (``kernel.cuh`` lines 63-65)."""
    return (Alloc(TMEM_COLUMNS, SMEM_V32["tmem_start_addr"].offset, label="TMEM: all 512 columns"),
            RelinquishAllocPermit())


def replay_qk(q: np.ndarray, k: np.ndarray, *, buf: int = 1, cta: Cta | None = None
              ) -> tuple[TensorMemory, SharedMemory]:
    """Run the QK step through the semantics layer: warp 0's TMEM setup, then ``flashmla-qk``. Returns (TMEM, SMEM).

    The softmax warps' P registers are in ``cta.regs[w]["p"]`` when a ``cta`` is passed.
    """
    cta = cta if cta is not None else Cta()
    load_qk(q, k, buf=buf, smem=cta.smem)
    for r in tmem_setup():
        execute(r, cta, warp=0)
    run_program(qk_program(buf), cta)
    return cta.tmem, cta.smem


def read_p(tm: TensorMemory) -> tuple[np.ndarray, np.ndarray]:
    """P_lo and P_hi (64 x 64 float32) as warps 0-3 read them with ``tcgen05.ld.32x32b.x64``.

    Warp w reads its quadrant (lanes 32w..32w+31) at column 400: warps 0, 1 get P_lo rows 0-63,
    warps 2, 3 get P_hi rows 0-63 (the kernel does it in two x32 halves, ``kernel.cuh`` lines 166-174).
    """
    regs = [tm.ld((32 * w) << 16 | P_COLUMN, "32x32b", B_TOPK, warp=w) for w in SOFTMAX_WARPS]
    p = np.concatenate(regs).view(np.float32)  # (128 lanes, 64 tokens)
    return p[:B_H].copy(), p[B_H:].copy()


def qk_loop(blocks: int):
    """A long loop of the FlashMLA QK pattern (the engine's speed workload, ``benchmarks/bench_engine.py``).

    Per block the MMA thread waits for the softmax warps to free P, issues the 18 QK
    ``tcgen05.mma.ws`` of ``flashmla-qk`` and commits; the four softmax warps wait for the commit,
    load P, wait, compute and arrive.
    """
    from simtc.isa import CudaCoreBlock, FenceBeforeThreadSync, MbarrierArrive

    mmas = qk_mmas(1)
    mma, sm = [], []
    for i in range(blocks):
        ph = i & 1
        mma += [MbarrierTryWait("p_free", ph ^ 1), FenceAfterThreadSync(), *mmas, Commit("qk_done")]
        sm += [MbarrierTryWait("qk_done", ph), FenceAfterThreadSync(), Ld(400, "32x32b", 64, "p"), WaitLd(),
               CudaCoreBlock("softmax", (("FMNMX", 32), ("FFMA2", 16), ("MUFU.EX2", 32)), regs_read=("p",)),
               FenceBeforeThreadSync(), MbarrierArrive("p_free")]
    return Program(f"bench/qk-loop-{blocks}", (Role("mma", (4,), tuple(mma), threads=1),
                                               Role("softmax", (0, 1, 2, 3), tuple(sm))),
                   barriers=(Barrier("qk_done", "mbarrier", 1), Barrier("p_free", "mbarrier", 128)))
