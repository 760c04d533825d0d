"""FlashMLA SM100 sparse-decode head64, the whole kernel: six roles' Programs for one request of B blocks.

Roles (FlashMLA ``csrc/sm100/decode/head64/kernel.cuh`` lines 134-747 at ``9241ae3``) [kernel]:

* ``softmax`` -- warps 0-3 (WG0, 128 threads): P readback (2 ``tcgen05.ld.32x32b.x32``), P_lo/P_hi
  exchange (8 ``st.shared`` + pair ``bar.sync`` + 8 ``ld.shared``), mask, row max with the ``t ^ 64``
  partner (``rowwise_max_buf``), lazy rescale, exp2, S write (4 ``st.shared``), O rescale, epilogue;
* ``mma`` -- warp 4, one elected thread: Q TMA, Q ``tcgen05.cp``, per block 18/16 + 8 ``tcgen05.mma.ws``, commits;
* ``raw`` -- warp 5, elected: 16 TMA gather4 of fp8 NoPE rows per block (coordinates read from ``tma_coord``);
* ``rope`` -- warp 6, elected: 32 (V32) / 16 (MODEL1) gather4 of bf16 RoPE rows per block;
* ``index`` -- warp 7 (32 threads): indices -> TMA coordinates, scales, valid bits;
* ``dequant`` -- warps 8-11 (WG2): fp8 -> bf16 x scale into the SW128 K tiles.

Ring state (``kernel.cuh`` lines 120-131): block i uses KV buffer ``b = i % 2`` with phase ``(i // 2) % 2``
and index buffer ``ib = i % 4`` with phase ``(i // 4) % 2``; one request starts every ring at 0 and the
per-request barriers at parity 0.

Modelling decisions (each a simplification of this simulator, not of the kernel):

* **Setup** (``kernel.cuh`` lines 43-67: mbarrier init, ``tcgen05.alloc`` of 512 columns, the CTA barrier)
  runs before the roles start (:func:`setup_records`, executed on warp 0 by the replay); the final
  ``everyone_sync`` and ``tcgen05.dealloc`` after them (one request: nothing follows).
* **Warp-dependent addresses** of WG0 (exchange slot ``w ^ 2``, S rows, O staging, ``rowwise_max_buf``)
  use ``warp_offsets``; the exchange's pair barriers use ``bar.sync`` ``warp_ids`` (ids 10/11).
* **The conditional O rescale** (``kernel.cuh`` lines 231 and 268-291) is a warp-uniform branch on data. A
  Program is a static record list, so the builder is told which blocks take it (``rescale``): the replay computes them
  first from the reference P (the same ``tensor_core_mma`` chains the P check uses, bit-exact with the
  kernel's P) and the softmax effect re-derives the decision at run time from its own registers and
  refuses a mismatch (a block needing a rescale without the records). The records are present for all
  four warps of WG0 when any warp rescales; a warp whose own decision is "no" multiplies by 1.0 (exact).
* **The epilogue's TMA stores** are records of every warp of WG0 (a Role's records are the same for its
  warps) marked with the warp that issues them (``issuing_warp``): as in the kernel, the elected lanes of
  warps 0 and 1 issue one each, and warps 2 and 3 skip them; per-thread counts are the kernel's 8 per request.
* **CUDA-core work** is :class:`~simtc.isa.CudaCoreBlock` records whose counts are SASS counts per thread
  per block [sass] (an sm_100a disassembly of FlashMLA's ``instantiations/v32.cu`` with CUDA 13.0; the
  tensor-core, TMA and TMEM code sites are recorded in ``tests/data/flashmla_sm100_sass.json``, these
  CUDA-core class counts are not); where only a role's total was counted, the unlisted remainder is class
  ``"other"`` [sass totals; class split inferred]. Their numpy effects live in
  :mod:`simtc.kernels.flashmla.effects`.

>>> p = head64_program("v32", 2)
>>> c = per_block_counts("v32")
>>> c["mma"]["tcgen05.mma.ws"], c["mma"]["tcgen05.commit"], c["raw"]["cp.async.bulk.tensor"]
(26, 2, 16)
>>> sorted(r.name for r in p.roles)
['dequant', 'index', 'mma', 'raw', 'rope', 'softmax']
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from attrs import frozen

from simtc.errors import SimtcError
from simtc.isa.cuda_core import CudaCoreBlock
from simtc.isa.idesc import InstrDescriptor
from simtc.isa.mbarrier import MbarrierArrive, MbarrierArriveExpectTx, MbarrierTryWait
from simtc.isa.program import Barrier, Program, Role
from simtc.isa.shared import LdShared, StShared
from simtc.isa.sync import BarSync, FenceProxyAsync
from simtc.isa.tcgen05 import (
    Alloc,
    Commit,
    Cp,
    FenceAfterThreadSync,
    FenceBeforeThreadSync,
    Ld,
    Mma,
    RelinquishAllocPermit,
    St,
    WaitLd,
    WaitSt,
)
from simtc.isa.tma import BulkCommitGroup, BulkWaitGroupRead, CpAsyncBulkTensor, CpAsyncBulkTensorStore
from simtc.kernels.flashmla.constants import B_H, B_TOPK, INSTR_K, O_COLUMN, P_COLUMN, Q_COLUMN, QK_IDESC, TMEM_COLUMNS
from simtc.kernels.flashmla.models import NAMED_BARRIERS, Head64Model, model
from simtc.kernels.flashmla.plan import NOPE_TILE, NOPE_VIEW, ROPE_VIEW
from simtc.smem.desc import SmemDescriptor
from simtc.smem.layout import CanonicalLayout

__all__ = ["KNOWN_RACES", "MUTATIONS", "PV_IDESC", "ROLE_WARPS", "S_LAYOUT", "Head64Builder", "KnownRace", "builder",
           "head64_program", "is_known_race", "known_race_records", "mutate", "per_block_counts", "ring_state",
           "role_counts", "setup_records", "split_known_races"]

ROLE_WARPS = {"softmax": (0, 1, 2, 3), "mma": (4,), "raw": (5,), "rope": (6,), "index": (7,),
              "dequant": (8, 9, 10, 11)}
"""Warps of each role (``kernel.cuh`` lines 134, 431, 586, 616, 653, 747) [kernel]."""
_ELECTED = ("mma", "raw", "rope")

PV_IDESC = InstrDescriptor(kind="f16", m=B_H, n=256, a_format="bf16", b_format="bf16", b_major="MN")
"""The PV MMA: M=64, N=256, bf16, B (V) MN-major: ``0x04410490`` (``config.h`` lines 200-202) [kernel] [sass]."""
S_LAYOUT = CanonicalLayout("bf16", "K", "INTERLEAVE", B_H, B_TOPK)
"""S: Sw<0,4,3> o ((8,8),(8,8)):((8,64),(1,512)) -- K-major interleave, LBO 1,024 B, SBO 128 B
(``config.h`` lines 107-111)."""
_COLS_PER_K = INSTR_K // 2
_WG0, _PAIR, _ALL = NAMED_BARRIERS["wg0_sync"], NAMED_BARRIERS["wg0_warp02_sync"], NAMED_BARRIERS["everyone_sync"]

# ---- CUDA-core SASS counts per thread per block [sass] (v32.cu disassembly, not recorded in tests/data);
# "other" = the remainder of the role's approximate total that the count does not break down [inferred]
_DEQUANT_V32 = (("F2FP.F16.E4M3.UNPACK_B", 128), ("HADD2.F32", 251), ("F2FP.BF16.F32.PACK_AB", 124),
                ("HMUL2.BF16_V2", 125), ("LDS.64", 32), ("STS.128", 32), ("other", 137))  # total 829
_DEQUANT_CHAIN = (("LDS.64", 1), ("F2FP.F16.E4M3.UNPACK_B", 1), ("HADD2.F32", 1), ("F2FP.BF16.F32.PACK_AB", 1),
                  ("HMUL2.BF16_V2", 1))
"""One chunk of 8 values: load, unpack, widen, pack, scale -- the 32 (28) chunks of a thread are independent
(kernel.cuh: the next chunk is prefetched), so this is the block's longest dependent chain [kernel]."""


def _dequant_counts(m: Head64Model) -> tuple[tuple[str, int], ...]:
    if m.v32:
        return _DEQUANT_V32
    tiles = m.d_nope // 64  # MODEL1: 28 chunks, not 32 (kernel.cuh L752): 28 + 28 LDS/STS, the rest scaled [inferred]
    return tuple((c, n * tiles // 8 if c not in ("LDS.64", "STS.128") else 4 * tiles) for c, n in _DEQUANT_V32)


def _dequant_wavefronts(m: Head64Model) -> int:
    """Shared-memory wavefronts per dequant warp per block: each LDS.64 of fp8 has a 2-way bank conflict
    (kernel.cuh's own note, line 780) -- 4 wavefronts instead of 2 -- and each STS.128 moves
    512 B, 4 wavefronts [kernel] [inferred]."""
    chunks = dict(_dequant_counts(m))["LDS.64"]
    return chunks * 4 + chunks * 4


def _softmax_counts() -> dict[str, tuple[tuple[str, int], ...]]:
    """WG0 per thread per block: ~384 SASS incl. 128 FMUL2 of the conditional rescale [sass]; the
    records carry 2 LDTM, 13 STS, 9 LDS, 3 BAR; MUFU.EX2 32 (+1 when rescaling), 16 FADD2 of the exchange."""
    return {
        "reduce": (("FADD2", 16), ("LDS.32", 1), ("FSEL", 32), ("FMNMX", 32), ("FMUL", 1)),
        "exp": (("FMNMX", 2), ("VOTE.ANY", 1), ("MUFU.EX2", 32), ("FFMA2", 16), ("FADD2", 16),
                ("F2FP.BF16.F32.PACK_AB", 16), ("FFMA", 1), ("other", 62)),
        "rescale_exp": (("MUFU.EX2", 1), ("FADD", 1)),
        "o_rescale": (("FMUL2", 32),),
    }


_REDUCE_CHAIN = (("LDS.32", 1), ("FADD2", 1), ("FSEL", 1), ("FMNMX", 32), ("FMUL", 1))
"""The add, mask and row maximum: a running maximum over the thread's 32 values of P, one value after the other
(kernel.cuh L222), after the mask word's load and one add [kernel]."""
_EXP_CHAIN = (("FMNMX", 2), ("VOTE.ANY", 1), ("FFMA2", 1), ("MUFU.EX2", 1), ("FADD2", 16), ("FFMA", 1))
"""Row max with the partner's, the rescale vote, then one value's FMA and exp2, and li's sum of the 32 values
(16 packed adds, each on the last) [kernel]."""
_RESCALE_CHAIN = (("FADD", 1), ("MUFU.EX2", 1))
"""scale_for_old = exp2(mi - new_max), before the exponentials (kernel.cuh) [kernel]."""

_PRODUCER_TOTAL = {"raw": 150, "rope_v32": 250, "rope_model1": 170, "index": 244}
"""Approximate SASS per block: raw ~150, RoPE ~250 (V32), index ~244 [sass]; MODEL1 RoPE [inferred]."""


def _other(total: int, explicit: int) -> tuple[tuple[str, int], ...]:
    return (("other", max(total - explicit, 0)),)


def ring_state(i: int) -> tuple[int, int, int, int]:
    """Block ``i``'s ring state (buf_idx, bar_phase, index_buf_idx, index_bar_phase): 2 KV buffers, 4 index buffers.

    Every role advances its own copy once per block (``kernel.cuh`` lines 120-131, ``RingState``).

    >>> ring_state(5)
    (1, 0, 1, 1)
    """
    return i % 2, (i // 2) % 2, i % 4, (i // 4) % 2


def _memo(fn):
    """Cache a builder method's result per argument tuple in the builder (each distinct block built once)."""
    def wrapper(self, *args):
        key = (fn.__name__, *args)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = fn(self, *args)
        return hit
    wrapper.__name__, wrapper.__doc__, wrapper.__wrapped__ = fn.__name__, fn.__doc__, fn
    return wrapper


_SLOT = 4096  # one exchange slot: 256 entries x 16 B
_OWN = (0, 128, 256, 384)  # rowwise_max_buf[t]: 4 B per thread, warp w starts at thread 32w
_PEER = (256, 384, 0, 128)  # rowwise_max_buf[t ^ 64]


class Head64Builder:
    """The head64 kernel's records for one model (V32 or MODEL1), resolved once: every builder method reads
    ``self.m``; each distinct block pattern (per ring state) is built once and shared by the blocks that issue it.

    >>> b = builder("v32")
    >>> b.m.name, len(b.qk_mmas(0)), b.raw_block(0, 0, 0, 0) is b.raw_block(0, 0, 0, 0)
    ('v32', 18, True)
    """

    def __init__(self, m: Head64Model):
        self.m = m
        self._memo: dict[tuple, object] = {}

    # ---- setup -----------------------------------------------------------------------------------------
    def setup_records(self) -> tuple:
        """Warp 0's setup (``kernel.cuh`` lines 43-67) run before the roles: ``tcgen05.alloc`` of all 512 columns,
        relinquish."""
        return (Alloc(TMEM_COLUMNS, self.m.smem["tmem_start_addr"].offset, label="TMEM: all 512 columns"),
                RelinquishAllocPermit())

    # ---- MMA issuer ----------------------------------------------------------------------------------------
    @_memo
    def q_loads(self) -> tuple:
        m = self.m
        q = m.smem["q"].offset
        out = [CpAsyncBulkTensor(q + 8192 * t, 8192, "q_tma", tensor="q_sw128", coords=(8192 * t,),
                                 label=f"Q tile {t} (64x64 bf16 SW128)") for t in range(8)]
        if m.v32:
            out.append(CpAsyncBulkTensor(m.smem["q_sw64"].offset, 8192, "q_tma", tensor="q_sw64", coords=(0,),
                                         label="Q RoPE (5-D box {32, 64, 2}, SW64)"))
        return tuple(out)

    @_memo
    def q_copies(self) -> tuple[Cp, ...]:
        m = self.m
        q0, pair = m.smem["q"].offset, NOPE_VIEW.nbytes
        out = [Cp(Q_COLUMN + _COLS_PER_K * (4 * t + s), NOPE_VIEW.descriptor(start=q0 + pair * t, k_slice=s),
                  label=f"cp Q t={t} s={s}") for t in range(4) for s in range(4)]
        if m.v32:
            r0 = m.smem["q_sw64"].offset
            out += [Cp(Q_COLUMN + 128 + _COLS_PER_K * s, ROPE_VIEW.descriptor(start=r0, k_slice=s),
                       label=f"cp Q RoPE s={s}") for s in range(2)]
        return tuple(out)

    @_memo
    def qk_mmas(self, b: int) -> tuple[Mma, ...]:
        """KV buffer b's QK instructions: every block on that buffer issues these same records (built once)."""
        m = self.m
        nope0 = m.smem[f"dequant{b}.nope"].offset
        out = []
        if m.v32:
            rope0 = m.smem[f"dequant{b}.rope"].offset
            out += [Mma(P_COLUMN, Q_COLUMN + 128 + _COLS_PER_K * k, ROPE_VIEW.descriptor(start=rope0, k_slice=k),
                        QK_IDESC, enable_input_d=k > 0, ws=True, label=f"QK RoPE k={k}") for k in range(2)]
        for k in range(16):
            desc = NOPE_VIEW.descriptor(start=nope0 + NOPE_VIEW.nbytes * (k // 4), k_slice=k % 4)
            out.append(Mma(P_COLUMN, Q_COLUMN + _COLS_PER_K * k, desc, QK_IDESC, enable_input_d=m.v32 or k > 0,
                           ws=True, label=f"QK k={k}"))
        return tuple(out)

    @_memo
    def pv_mmas(self, b: int, first: bool) -> tuple[Mma, ...]:
        """KV buffer b's PV instructions (``first``: the request's first block overwrites O), built once."""
        m = self.m
        s0, v0 = m.smem["s"].offset, m.smem[f"dequant{b}.nope"].offset
        out = []
        for k in range(4):
            for n in range(2):
                a = S_LAYOUT.descriptor(start=s0, k_slice=k)
                bd = SmemDescriptor(start=v0 + 2048 * k + 32768 * n, lbo=8192, sbo=1024, layout_type="SW128")
                out.append(Mma(O_COLUMN + 128 * n, a, bd, PV_IDESC, enable_input_d=not (first and k == 0), ws=True,
                               label=f"PV k={k} n={n}"))
        return tuple(out)

    def mma_role(self, blocks: int) -> list:
        m = self.m
        rec: list = [*self.q_loads(), MbarrierArriveExpectTx("q_tma", m.q_tma_bytes), MbarrierTryWait("q_tma", 0),
                     FenceAfterThreadSync(), *self.q_copies(), Commit("q_utccp", label="Q copies done"),
                     MbarrierTryWait("q_utccp", 0), FenceAfterThreadSync()]
        for i in range(blocks):
            b, ph, _, _ = ring_state(i)
            qk = self.qk_mmas(b)
            if m.v32:
                rec += [MbarrierTryWait(f"rope_ready[{b}]", ph), FenceAfterThreadSync(), *qk[:2],
                        MbarrierTryWait(f"nope_ready[{b}]", ph), FenceAfterThreadSync(), *qk[2:]]
            else:
                rec += [MbarrierTryWait(f"rope_ready[{b}]", ph), MbarrierTryWait(f"nope_ready[{b}]", ph),
                        FenceAfterThreadSync(), *qk]
            rec += [Commit(f"qk_done[{b}]", label=f"QK done, block {i}"), MbarrierTryWait(f"so_ready[{b}]", ph),
                    FenceAfterThreadSync(), *self.pv_mmas(b, i == 0),
                    Commit(f"sv_done[{b}]", label=f"PV done, block {i}")]
        return rec

    # ---- producers -------------------------------------------------------------------------------------------
    def raw_role(self, blocks: int) -> list:
        rec: list = [MbarrierTryWait("q_utccp", 0), MbarrierTryWait("last_store_done", 0)]
        for i in range(blocks):
            rec += self.raw_block(*ring_state(i))
        return rec

    @_memo
    def raw_block(self, b: int, ph: int, ib: int, iph: int) -> tuple:
        """One block of the raw producer; blocks in the same ring state issue the same records (built once)."""
        return (MbarrierTryWait(f"valid_coord_scale_ready[{ib}]", iph), MbarrierTryWait(f"raw_free[{b}]", ph ^ 1),
                *self.raw_body(b, ib))

    @_memo
    def raw_body(self, b: int, ib: int) -> tuple:
        """The raw producer's block after its waits: the same for both phases of a buffer (built once)."""
        m = self.m
        coord0 = m.smem["tma_coord"].offset
        raw = m.smem[f"raw_nope{b}"].offset
        rec: list = []
        for j in range(m.nope_gathers):
            reg = f"coord{b}.{j}"  # one register per gather and buffer: TMA reads it when the copy runs
            rec += [LdShared(coord0 + 256 * ib + 16 * j, 16, reg, threads=1),
                    CpAsyncBulkTensor(raw + m.d_nope * 4 * j, 4 * m.d_nope, f"raw_ready[{b}]", mode="gather4",
                                      tensor="kv_nope", coords=(0,), rows=4, coord_reg=reg)]
        explicit = 2 * m.nope_gathers + 4
        rec += [MbarrierArriveExpectTx(f"raw_ready[{b}]", B_TOPK * m.d_nope),
                MbarrierArrive(f"valid_coord_scale_free[{ib}]"),
                CudaCoreBlock("raw producer loop", _other(_PRODUCER_TOTAL["raw"], explicit))]
        return tuple(rec)

    def rope_role(self, blocks: int) -> list:
        rec: list = [MbarrierTryWait("q_utccp", 0), MbarrierTryWait("last_store_done", 0)]
        for i in range(blocks):
            rec += self.rope_block(*ring_state(i))
        return rec

    @_memo
    def rope_block(self, b: int, ph: int, ib: int, iph: int) -> tuple:
        """One block of the RoPE producer (built once per ring state)."""
        free = f"qk_done[{b}]" if self.m.v32 else f"sv_done[{b}]"
        return (MbarrierTryWait(f"valid_coord_scale_ready[{ib}]", iph), MbarrierTryWait(free, ph ^ 1),
                *self.rope_body(b, ib))

    @_memo
    def rope_body(self, b: int, ib: int) -> tuple:
        """The RoPE producer's block after its waits: the same for both phases of a buffer (built once)."""
        m = self.m
        coord0 = m.smem["tma_coord"].offset
        row_elems = {"SW64": 32, "SW128": 64}[m.rope_swizzle]
        per_row = m.d_rope // row_elems
        rope = m.smem[f"dequant{b}.rope"].offset
        rec: list = []
        for j in range(B_TOPK // 4):
            reg = f"coord{b}.{j}"
            rec.append(LdShared(coord0 + 256 * ib + 16 * j, 16, reg, threads=1))
            rec += [CpAsyncBulkTensor(rope + 4 * j * 2 * row_elems + t * B_TOPK * 2 * row_elems, 4 * 2 * row_elems,
                                      f"rope_ready[{b}]", mode="gather4", tensor="kv_rope", coords=(row_elems * t,),
                                      rows=4, coord_reg=reg, swizzle=m.rope_swizzle) for t in range(per_row)]
        explicit = B_TOPK // 4 * (1 + per_row) + 4
        total = _PRODUCER_TOTAL["rope_v32" if m.v32 else "rope_model1"]
        rec += [MbarrierArriveExpectTx(f"rope_ready[{b}]", B_TOPK * m.d_rope * 2),
                MbarrierArrive(f"valid_coord_scale_free[{ib}]"),
                CudaCoreBlock("rope producer loop", _other(total, explicit))]
        return tuple(rec)

    def index_role(self, blocks: int) -> list:
        rec: list = []
        for i in range(blocks):
            rec += self.index_block(*ring_state(i)[2:])
        return rec

    @_memo
    def index_block(self, ib: int, iph: int) -> tuple:
        """One block of the index warp (built once per index-ring state). The indices' load is in flight while
        the warp waits for the free slot; the scales are gathered from 64 scattered token records, one per lane
        and load (V32: 16 B at record + 512; MODEL1: 8 B in the page block's tail) and converted before the
        stores (``kernel.cuh`` lines 683-731) [kernel]."""
        m = self.m
        valid = m.smem["is_token_valid"].offset + 8 * ib
        ldg = "LDG.E.128" if m.v32 else "LDG.E.64"
        rec = [CudaCoreBlock("index load", (("LDG.E.64", 1), ("IMAD", 2)), effect="fmla.index_load",
                             regs_written=("idx",), chain=(("IMAD", 2),)),
               MbarrierTryWait(f"valid_coord_scale_free[{ib}]", iph ^ 1),
               CudaCoreBlock("index transform", ((ldg, 2), ("SHFL.BFLY", 2), ("STS.U8", 1), ("other", 233)),
                             effect="fmla.index_transform", regs_read=("idx",), regs_written=("coords", "scales"),
                             smem_writes=((valid, valid + 8),), gmem="scattered",
                             chain=(("other", 4), (ldg, 1), ("other", 4), ("SHFL.BFLY", 2), ("STS.U8", 1))),
               StShared(m.smem["tma_coord"].offset + 256 * ib, 8, "coords"),
               StShared(m.smem["scales"].offset + ib * B_TOPK * m.num_scales, 2 * m.num_scales, "scales"),
               MbarrierArrive(f"valid_coord_scale_ready[{ib}]")]
        return tuple(rec)

    def dequant_role(self, blocks: int) -> list:
        rec: list = [MbarrierTryWait("q_utccp", 0)]
        for i in range(blocks):
            rec += self.dequant_block(*ring_state(i))
        return rec

    @_memo
    def dequant_block(self, b: int, ph: int, ib: int, iph: int) -> tuple:
        """One block of the dequant warpgroup (built once per ring state)."""
        return (MbarrierTryWait(f"valid_coord_scale_ready[{ib}]", iph), MbarrierTryWait(f"raw_ready[{b}]", ph),
                MbarrierTryWait(f"sv_done[{b}]", ph ^ 1), *self.dequant_body(b, ib))

    @_memo
    def dequant_body(self, b: int, ib: int) -> tuple:
        """The dequant warpgroup's block after its waits: the same for both phases of a buffer (built once)."""
        m = self.m
        raw, nope = m.smem[f"raw_nope{b}"], m.smem[f"dequant{b}.nope"]
        sc = m.smem["scales"].offset + ib * B_TOPK * m.num_scales
        rec = [CudaCoreBlock("dequant", _dequant_counts(m), effect="fmla.dequant",
                             smem_reads=((raw.offset, raw.end), (sc, sc + B_TOPK * m.num_scales)),
                             smem_writes=((nope.offset, nope.end),), chain=_DEQUANT_CHAIN,
                             wavefronts=_dequant_wavefronts(m)),
               FenceProxyAsync(), MbarrierArrive(f"nope_ready[{b}]"), MbarrierArrive(f"raw_free[{b}]"),
               MbarrierArrive(f"valid_coord_scale_free[{ib}]")]
        return tuple(rec)

    # ---- softmax warpgroup -------------------------------------------------------------------------------------
    def softmax_role(self, blocks: int, rescale: Sequence[bool]) -> list:
        rec: list = [BulkWaitGroupRead(0, label="tma_store_wait<0>"), MbarrierArrive("last_store_done"),
                     CudaCoreBlock("softmax init", (("MOV", 3),), effect="fmla.softmax_init", regs_written=("state",))]
        for i in range(blocks):
            rec += self.softmax_block(*ring_state(i), i == 0, bool(rescale[i]))
        return rec + list(self.softmax_epilogue(*ring_state(blocks - 1)[:2]))

    @_memo
    def softmax_block(self, b: int, ph: int, ib: int, iph: int, first: bool, rescale: bool) -> tuple:
        """One block of the softmax warpgroup (built once per ring state, first block and rescale flag)."""
        m = self.m
        rmax = m.smem["rowwise_max_buf"].offset
        counts = _softmax_counts()
        valid = m.smem["is_token_valid"].offset + 8 * ib
        exp_effect = "fmla.exp.first" if first else ("fmla.exp.rescale" if rescale else "fmla.exp")
        rec: list = [BarSync(*_WG0, label="exchange and row-max buffers free"),
                     MbarrierTryWait(f"valid_coord_scale_ready[{ib}]", iph), MbarrierTryWait(f"qk_done[{b}]", ph),
                     FenceAfterThreadSync(),
                     Ld(P_COLUMN, "32x32b", 32, "p_c0", label="P columns 400-431"),
                     Ld(P_COLUMN + 32, "32x32b", 32, "p_c1", label="P columns 432-463"),
                     WaitLd(), FenceBeforeThreadSync(),
                     CudaCoreBlock("p own/peer", (), effect="fmla.p_select", regs_read=("p_c0", "p_c1"),
                                   regs_written=("p", *(f"pex{j}" for j in range(8))))]
        rec += self.softmax_exchange()
        rec += [CudaCoreBlock("add, mask, row max", counts["reduce"], effect="fmla.reduce",
                              regs_read=("p", *(f"pin{j}" for j in range(8))), regs_written=("p", "cur"),
                              smem_reads=((valid, valid + 8),), chain=_REDUCE_CHAIN),
                StShared(rmax, 4, "cur", warp_offsets=_OWN),
                BarSync(*_WG0, label="row max written"),
                MbarrierArrive(f"valid_coord_scale_free[{ib}]"),
                LdShared(rmax, 4, "cur_peer", warp_offsets=_PEER),
                CudaCoreBlock("lazy rescale, exp2, li", counts["exp"] + (counts["rescale_exp"] if rescale else ()),
                              effect=exp_effect, regs_read=("p", "cur", "cur_peer", "state"),
                              regs_written=("state", "s0", "s1", "s2", "s3"),
                              chain=_EXP_CHAIN[:3] + (_RESCALE_CHAIN if rescale else ()) + _EXP_CHAIN[3:])]
        rec += self.softmax_s_stores()
        if rescale:
            rec.append(FenceAfterThreadSync())
            for c in range(4):
                rec += [Ld(O_COLUMN + 64 * c, "32x32b", 64, "o", label=f"O chunk {c}"), WaitLd(),
                        CudaCoreBlock("O x scale_for_old", counts["o_rescale"], effect="fmla.o_rescale",
                                      regs_read=("o", "state"), regs_written=("o",)),
                        St(O_COLUMN + 64 * c, "32x32b", 64, "o"), WaitSt()]
            rec.append(FenceBeforeThreadSync())
        rec += [FenceProxyAsync(), MbarrierArrive(f"so_ready[{b}]")]
        return tuple(rec)

    @_memo
    def softmax_exchange(self) -> tuple:
        """Every block's P exchange: the peer halves stored to slot w^2, the pair barrier, the own slot read
        (built once)."""
        pex = self.m.smem["p_exchange_buf"].offset
        rec = [StShared(pex + 512 * j, 16, f"pex{j}", warp_offsets=(2 * _SLOT, 3 * _SLOT, 0, _SLOT),
                        label=f"p_peer[{4 * j}:{4 * j + 4}] -> slot w^2") for j in range(8)]
        rec.append(BarSync(_PAIR[0], _PAIR[1], warp_ids=(_PAIR[0], _PAIR[0] + 1, _PAIR[0], _PAIR[0] + 1),
                           label="pair barrier (warps 0+2 / 1+3)"))
        rec += [LdShared(pex + 512 * j, 16, f"pin{j}", warp_offsets=(0, _SLOT, 2 * _SLOT, 3 * _SLOT),
                         label=f"slot w[{4 * j}:{4 * j + 4}]") for j in range(8)]
        return tuple(rec)

    @_memo
    def softmax_s_stores(self) -> tuple:
        """Every block's S stores (bf16 P for the PV MMA; built once)."""
        s0 = self.m.smem["s"].offset
        return tuple(StShared(s0 + 1024 * j, 16, f"s{j}", warp_offsets=(0, 512, 4096, 4608), label=f"S chunk {j}")
                     for j in range(4))

    def softmax_epilogue(self, b: int, ph: int) -> tuple:
        """The softmax warpgroup after its last block (on KV buffer b, phase ph): LSE, then O out through TMA."""
        return (*self.softmax_lse(), MbarrierTryWait(f"sv_done[{b}]", ph), *self.softmax_o_out())

    @_memo
    def softmax_lse(self) -> tuple:
        """Final li (with the partner's) and the LSE (built once)."""
        rmax = self.m.smem["rowwise_max_buf"].offset
        return (CudaCoreBlock("li final", (("FSETP", 1), ("FSEL", 2)), effect="fmla.li_final",
                              regs_read=("state",), regs_written=("li",), chain=(("FSETP", 1), ("FSEL", 2))),
                StShared(rmax, 4, "li", warp_offsets=_OWN), BarSync(*_WG0, label="li written"),
                LdShared(rmax, 4, "li_peer", warp_offsets=_PEER),
                CudaCoreBlock("LSE", (("FADD", 1), ("MUFU.LG2", 1), ("FFMA", 1), ("STG.E", 1), ("MUFU.EX2", 1),
                                      ("MUFU.RCP", 1)), effect="fmla.lse", regs_read=("li", "li_peer", "state"),
                              regs_written=("state",),
                              chain=(("FADD", 1), ("MUFU.LG2", 1), ("FFMA", 1), ("MUFU.EX2", 1), ("MUFU.RCP", 1))))

    @_memo
    def softmax_o_out(self) -> tuple:
        """After the last PV: O read from TMEM, scaled, staged in SW128 tiles, stored by TMA (built once)."""
        rec: list = [FenceAfterThreadSync()]
        obuf = self.m.smem["o_buf"].offset
        for c in range(4):
            col_base = (256 if c >= 2 else 0) + 64 * (c % 2)
            rec += [Ld(O_COLUMN + 64 * c, "32x32b", 64, "o", label=f"O chunk {c}"), WaitLd(),
                    CudaCoreBlock("O x o_scale -> bf16", (("FMUL2", 32), ("F2FP.BF16.F32.PACK_AB", 32)),
                                  effect="fmla.o_out", regs_read=("o", "state"),
                                  regs_written=tuple(f"ob{j}" for j in range(8)))]
            tile = obuf + 8192 * (col_base // 64)
            for j, offs in enumerate(_o_stage_offsets()):
                rec.append(StShared(tile, 16, f"ob{j}", offsets=offs, warp_offsets=(0, 4096, 16384, 20480),
                                    label=f"O chunk {c} dims +{8 * j}"))
            rec += [FenceProxyAsync(), BarSync(*_WG0, label="O chunk staged"),
                    CpAsyncBulkTensorStore(tile, 8192, tensor="o", coords=(8192 * (col_base // 64),), issuing_warp=0,
                                           label=f"O tile {col_base // 64} (warp 0's store)"),
                    CpAsyncBulkTensorStore(tile + 16384, 8192, tensor="o", coords=(8192 * (col_base // 64 + 2),),
                                           issuing_warp=1, label=f"O tile {col_base // 64 + 2} (warp 1's store)")]
        rec.append(BulkCommitGroup())
        return tuple(rec)

    # ---- the Program ------------------------------------------------------------------------------------------
    def barriers(self) -> tuple[Barrier, ...]:
        out = [Barrier(n, "mbarrier", count, addr=addr) for n, (addr, count) in self.m.mbarriers.items()]
        out += [Barrier(n, "named", threads, id=i) for n, (i, threads) in NAMED_BARRIERS.items()]
        return tuple(out)

    @_memo
    def program(self, blocks: int, rescale: tuple[bool, ...]) -> Program:
        m = self.m
        roles = (
            Role("softmax", ROLE_WARPS["softmax"], tuple(self.softmax_role(blocks, rescale))),
            Role("mma", ROLE_WARPS["mma"], tuple(self.mma_role(blocks)), threads=1),
            Role("raw", ROLE_WARPS["raw"], tuple(self.raw_role(blocks)), threads=1),
            Role("rope", ROLE_WARPS["rope"], tuple(self.rope_role(blocks)), threads=1),
            Role("index", ROLE_WARPS["index"], tuple(self.index_role(blocks))),
            Role("dequant", ROLE_WARPS["dequant"], tuple(self.dequant_role(blocks))),
        )
        return Program(f"flashmla-head64-{m.name}", roles, barriers=self.barriers(),
                       description=f"FlashMLA SM100 sparse-decode head64 ({m.name.upper()}): six roles, one request "
                                   f"of {blocks} top-k blocks of {B_TOPK} tokens",
                       meta=(("kernel", f"FlashMLA SM100 sparse decode head64 {m.name}"), ("blocks", blocks),
                             ("rescale_blocks", ",".join(str(i) for i, r in enumerate(rescale) if r)),
                             ("source", "FlashMLA 9241ae3 csrc/sm100/decode/head64/kernel.cuh L35-843, config.h")))


_BUILDERS: dict[str, Head64Builder] = {}


def builder(model_name: str | Head64Model = "v32") -> Head64Builder:
    """The one :class:`Head64Builder` of a model (made on first use)."""
    m = model(model_name)
    b = _BUILDERS.get(m.name)
    if b is None:
        b = _BUILDERS[m.name] = Head64Builder(m)
    return b


def setup_records(m: str | Head64Model = "v32") -> tuple:
    """Warp 0's setup (``kernel.cuh`` lines 43-67) run before the roles: ``tcgen05.alloc`` of all 512 columns,
    relinquish."""
    return builder(m).setup_records()


@functools.lru_cache(maxsize=1)
def _o_stage_offsets() -> tuple[tuple[int, ...], ...]:
    """Per 16-B store j of the O staging: the SW128 byte offset of rows 0-31 at dim 8j, relative to row 0 dim 0
    (one per lane; NOPE_TILE, vectorized once)."""
    base = int(NOPE_TILE.offset(0, 0))
    return tuple(tuple(int(v) - base for v in NOPE_TILE.offset(list(range(32)), [8 * j] * 32)) for j in range(8))


def head64_program(model_name: str | Head64Model = "v32", blocks: int = 1,
                   rescale: Sequence[bool] | None = None) -> Program:
    """The whole kernel for one request of ``blocks`` top-k blocks (a frozen, cached value).

    ``rescale[i]``: block i takes the lazy O rescale (``kernel.cuh`` line 269; never block 0). Default: no block
    (the replay derives it from the data, :func:`simtc.kernels.flashmla.replay.rescale_blocks`).
    """
    m = model(model_name)
    if isinstance(blocks, bool) or not isinstance(blocks, int) or blocks < 1:
        raise SimtcError(f"blocks = {blocks!r}: a request has at least one block of {B_TOPK} tokens",
                         rule="head64 requests have 1 or more top-k blocks")
    r = tuple(bool(x) for x in (rescale if rescale is not None else [False] * blocks))
    if len(r) != blocks or (blocks and r[0]):
        raise SimtcError(f"rescale flags {r}: one per block, and block 0 never rescales O",
                         rule="O is rescaled only after the request's first block (kernel.cuh)")
    return builder(m).program(blocks, r)


def role_counts(program: Program) -> dict[str, dict[str, int]]:
    """Per role, what one thread (one warp) of it issues: opcode -> number (CUDA-core SASS classes under
    ``"cuda_core:<class>"``)."""
    out: dict[str, dict[str, int]] = {}
    for role in program.roles:
        times: dict[int, int] = {}  # each record object once (blocks share them), in first-seen order
        for r in role.records:
            times[id(r)] = times.get(id(r), 0) + 1
        objs = {id(r): r for r in role.records}
        c: dict[str, int] = {}
        for rid, k in times.items():
            r = objs[rid]
            c[r.opcode] = c.get(r.opcode, 0) + k
            if isinstance(r, CudaCoreBlock):
                for cls, n in r.counts:
                    c[f"cuda_core:{cls}"] = c.get(f"cuda_core:{cls}", 0) + n * k
        out[role.name] = c
    return out


def per_block_counts(model_name: str | Head64Model = "v32", rescale: bool = False) -> dict[str, dict[str, int]]:
    """Per role, one steady-state block's counts: the difference between 3 and 2 blocks (block 2, a middle block)."""
    return {r: dict(c) for r, c in _per_block_counts(model(model_name).name, bool(rescale)).items()}


@functools.lru_cache(maxsize=8)
def _per_block_counts(name: str, rescale: bool) -> dict[str, dict[str, int]]:
    a = role_counts(head64_program(name, 3, [False, False, rescale]))
    b = role_counts(head64_program(name, 2))
    return {r: {k: v - b[r].get(k, 0) for k, v in a[r].items() if v - b[r].get(k, 0)} for r in a}


def clear_caches() -> None:
    """Forget every built Program and block (benchmarks time a first build with this)."""
    _BUILDERS.clear()
    _per_block_counts.cache_clear()
    _o_stage_offsets.cache_clear()


# ---- races of the kernel itself ---------------------------------------------------------------------------
@frozen
class KnownRace:
    """A race the hazard checker reports on the faithful Program because the kernel has it: a finding about
    FlashMLA's source, not a hazard the simulator's Program introduced. ``first`` / ``second`` find the two records
    in a role's record list (a mutated Program's too): ``(record class name, register, "first" | "last")``."""

    rule: str
    title: str
    role: str
    first: tuple[str, str, str]
    second: tuple[str, str, str]
    lines: str
    """Where the two accesses are in the kernel."""
    why: str
    """What it means, and why it is benign in practice (or not)."""


KNOWN_RACES = (
    KnownRace(
        "smem-write-after-read", "rowwise_max_buf: the partner's last row max read (kernel.cuh line 229 at 9241ae3) "
        "against the li write (line 309)", "softmax", ("LdShared", "cur_peer", "last"), ("StShared", "li", "first"),
        "FlashMLA csrc/sm100/decode/head64/kernel.cuh at 9241ae3: line 229 reads the partner's row max "
        "rowwise_max_buf[idx_in_warpgroup^64] after the wg0_sync of line 227; after the last block the li exchange "
        "writes rowwise_max_buf[idx_in_warpgroup] at line 309 (the partner t^64 owns the slot just read), with no "
        "barrier between: the loop-top wg0_sync of line 161, which orders every other block's reads before the next "
        "block's writes, does not run after the last block",
        "a write-after-read race between warps w and w^2 of WG0 by the letter of the memory model: nothing orders "
        "the partner's read before this write. Benign in practice: the read is issued right after the wg0_sync "
        "release, the write hundreds of instructions later (the exponentials, the S stores, a possible O rescale, "
        "fence.proxy.async, the so_ready arrive, the final li), so the read has long completed; a warp descheduled "
        "for all that time would read li instead of the row max and could mis-scale its last block"),
)
"""The races of FlashMLA head64 itself that the checker reports (``simtc replay`` and the tour list them apart)."""


def known_race_records(program: Program) -> list[tuple[KnownRace, int, int]]:
    """Each known race of ``program`` (the head64 Program, mutated or not) with the indices of its two records in
    the role (a race whose records the Program lacks is left out)."""
    out = []
    for race in KNOWN_RACES:
        try:
            recs = program.role(race.role).records
        except (KeyError, SimtcError):
            continue
        idx = []
        for cls, reg, which in (race.first, race.second):
            hits = [i for i, r in enumerate(recs) if type(r).__name__ == cls
                    and (getattr(r, "dst", None) == reg or getattr(r, "src", None) == reg)]
            if hits:
                idx.append(hits[-1] if which == "last" else hits[0])
        if len(idx) == 2:
            out.append((race, idx[0], idx[1]))
    return out


def is_known_race(program: Program):
    """A predicate over :class:`simtc.engine.hazards.Hazard`: whether the hazard is a known race of the kernel in
    ``program`` (for :func:`simtc.engine.schedules.explore`'s ``known``)."""
    known = {(race.rule, race.role, a, b) for race, a, b in known_race_records(program)}

    def test(h) -> bool:
        f, g = h.first, h.second
        return bool(f and g and f[0] == g[0] and (h.rule, f[0], f[2], g[2]) in known)
    return test


def split_known_races(program: Program, hazards: Sequence[dict]) -> tuple[list[dict], list[dict]]:
    """``hazards`` (the JSON form, :meth:`simtc.engine.hazards.Hazard.to_json`) split into those the Program
    introduced and those that are known races of the kernel (each of the latter with ``known``: the race's lines
    and meaning)."""
    known = {(race.rule, race.role, a, b): race for race, a, b in known_race_records(program)}
    mine, theirs = [], []
    for h in hazards:
        f, g = h.get("first"), h.get("second")
        race = known.get((h["rule"], f and f["role"], f and f["index"], g and g["index"])) \
            if f and g and f["role"] == g["role"] else None
        if race is None:
            mine.append(h)
        else:
            theirs.append({**h, "known": {"title": race.title, "lines": race.lines, "why": race.why}})
    return mine, theirs


# ---- variants and mutations (the hook the mutation catalogue plugs into) ----------------------------------
from simtc.kernels.flashmla.mutations import MUTATIONS  # noqa: E402  (the catalogue: name -> (text, fn))


def mutate(program: Program, name: str) -> Program:
    """Apply the registered mutation ``name`` to ``program`` (a new Program; the original is a frozen value)."""
    try:
        fn = MUTATIONS[name][1]
    except KeyError:
        raise SimtcError(f"unknown mutation {name!r}; known: {', '.join(sorted(MUTATIONS)) or 'none'}",
                         rule="mutations come from simtc.kernels.flashmla.mutations") from None
    return fn(program)
