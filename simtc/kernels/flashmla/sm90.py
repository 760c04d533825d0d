"""FlashMLA SM90 sparse FP8 decode for 64 heads (``flash_fwd_splitkv_mla_fp8_sparse_kernel``), as a Program.

Sources at FlashMLA commit ``9241ae3``: ``csrc/sm90/decode/sparse_fp8/config.h`` (constants, layouts, the
shared-memory plan, the named barriers, ``store_o``), ``splitkv_mla.cuh`` (``devfunc``: the three warpgroups),
``components/dequant.h`` (the fp8 -> bf16 conversion, the cached 128-bit loads) and ``components/helpers.h``
(``gemm``), instantiated by ``instantiations/v32_persistent_h64.cu`` and ``model1_persistent_h64.cu`` [kernel].

The kernel
----------
One CTA of 384 threads (config.h L31) serves the 64 heads of one query token (``BLOCK_M = 64``, L32) for a run of
top-k blocks of 64 tokens (``TOPK_BLOCK_SIZE``, L33) handed to it by the decode scheduler; the grid is
``(1, s_q, num_sm_parts)`` with clusters of one CTA (splitkv_mla.cuh L769-778). Its three warpgroups:

* **WG0** (warps 0-3, 192 registers, splitkv_mla.cuh L186-365) -- for each block, once the block's K is in shared
  memory (``bar_k_local_ready[buf]``, L225), QK: ``wgmma.m64n64k16`` SS, A = Q (64 x D_K bf16, SW128 K-major tiles,
  config.h L36-48), B = K (64 tokens x D_K, INTERLEAVE K-major tiles, L50-61): D_K/16 = 36 (V32) / 32 (MODEL1)
  instructions, the first with scale-d 0 (``gemm<true>``, L230-235; helpers.h L148-180), waited at once (L239);
  after WG1 has freed S and sScale (named barrier ``sScale_and_sS_free``, L242-243) the online softmax in registers
  (``scale_softmax``, L32-84: mask by ``is_kv_valid``, row max with a 4-lane shuffle, exp2, row sum, O x
  scale_for_old, the scale written to ``sScale``), S (bf16) stored with ``stmatrix`` to ``sS`` (SW128, L86-89,
  L159-172) behind ``fence.proxy.async`` (L249-250), then PV for V's dims 0-255: ``wgmma.m64n256k16`` RS (A = S from
  registers, B = V = the same K buffer read MN-major, config.h L63-67, L84, L123-126), 4 instructions (L253-258);
  ``sScale_and_sS_ready`` (L260), wait (L262), ``bar_k_avail[buf]`` arrive (L268).
* **WG1** (warps 4-7, 160 registers, L366-453) -- per block: ``sScale_and_sS_ready`` (L384), O x sScale (L387-396),
  PV for V's dims 256-511: 4 ``wgmma.m64n256k16`` SS (A = sS, B = the buffer's upper half, L381, L399-404), wait,
  ``bar_k_avail[buf]`` arrive (L411), ``sScale_and_sS_free`` (L414-415, not after the last block).
* **WG2, the producer** (warps 8-11, 152 registers, L454-670) -- per block (``process_one_block``, L483-647) each
  thread dequantizes 2 tokens, one per round of 32 (L459-460, L509-624): token ``8 warp + lane % 8`` (+32) and the
  16-byte slice ``lane / 8`` of each 64-dim chunk. A round: the prefetched token index and the next block's index
  (``__ldg``, L517-529), page and row by division (L538-539), the scales (V32: a 16-B load of 4 fp32, L543-551;
  MODEL1: 8 ue8m0 bytes after the page's records, L552-562), the wait for the buffer (``bar_k_avail``, round 0 only,
  L565-567), D_NOPE/64 = 8 (7) cached 16-byte loads of fp8 (``ld.global.nc.L1::evict_last.L2::256B``, dequant.h
  L49-86, splitkv_mla.cuh L583-584) each converted to 16 bf16 x scale (dequant.h L20-34) and stored as two
  ``st.shared.v4`` into the interleaved K tile (L586-597), and the bf16 RoPE: 2 loads and 2 stores (L600-623). Then
  ``fence.proxy.async`` (L626), warp 8 writes the block's ``is_kv_valid`` bytes (L628-642), every thread arrives
  on ``bar_k_local_ready[buf]`` (L645). There is no TMA for K: the producer gathers rows with per-thread loads.

Two K buffers alternate (``NUM_K_BUFS = 2``, L34): block ``i`` uses buffer ``i % 2`` with phase ``(i // 2) % 2``;
``bar_k_local_ready`` counts the producer's 128 threads, ``bar_k_avail`` the 256 of WG0 and WG1 (L116-133). Before
the loops warp 0's elected lane initialises the barriers (L116-133) and loads Q by TMA (9 (8) boxes of 64 x 64,
73,728 (65,536) B on ``bar_q``, L146-153) between the cluster barrier's arrive and wait (L134, L155). After its last
block a split request is written as fp32 partials (L287-364, L418-452; config.h L242-267): the row sums and maxima
through ``sL``/``sM``, ``1 / l`` through ``sOScale``, ``oBuf_free_and_sL_ready``, each thread stores its O x 1/l
into ``oAccumBuf`` (row stride 520 floats, config.h L77-80; 64 ``st.shared.v2``), ``fence.proxy.async``,
``epilogue_r2s_ready``, the elected lane of each of the 8 warps bulk-copies 8 rows of 2,048 B to ``o_accum``, warps
0-1 store the 64 LSEs (log2), ``cp.async.bulk.wait_group.read 0``, ``__syncthreads``.

The Program
-----------
:func:`sm90_program` builds one CTA serving one split request of ``blocks`` blocks: roles ``wg0``, ``wg1``,
``producer`` and ``q_load`` (warp 0's elected lane: mbarrier init and the Q TMA). Every role's records follow the
compiled SASS of that role in order (:mod:`simtc.kernels.flashmla.sm90_sass`, generated from the cubins by
``tests/oracle/regen_flashmla_sm90_sass.py``; ``tests/data/flashmla_sm90_sass.json``): each SASS instruction is
either an explicit record (``wgmma.mma_async`` with descriptors from :class:`~simtc.smem.layout.CanonicalLayout`,
``wgmma.fence/commit_group/wait_group``, mbarrier waits and arrives, named barriers, the ``ld/st.shared`` and
``stmatrix`` of WG0/WG1 with their real per-lane addresses, ``fence.proxy.async``, the Q TMA, the bulk copies) or
part of the :class:`~simtc.isa.CudaCoreBlock` that holds the CUDA-core instructions between two records, with its
SASS classes counted per thread (:func:`sass_class`). Per block: WG0 649 (V32) / 627 (MODEL1) instructions, WG1
177 / 177, the producer 1,080 / 1,102.

Modelling decisions (simplifications of this simulator, not of the kernel) [inferred]:

* **q_load** is a one-thread role on warp 0 beside WG0's warp 0: warp 0's elected lane's extra path (init + Q
  TMA) runs concurrently with the rest of warp 0 instead of before its cluster-barrier wait.
* **One path per role**: the schedule of one split request with valid tokens, no sink, no MODEL1 extra KV
  (``tests/oracle/regen_flashmla_sm90_sass.py`` lists the branch decisions). WG0's epilogue is warp 1's path for
  every warp (warp 0's PDL trigger, 6 (MODEL1 7) instructions, is left out; warps 2-3 issue the 18 instructions of
  the LSE store that only warps 0-1 execute).
  Predicated-off instructions issue (they are counted), except the first block's ``bar.sync`` of WG0 and the last
  block's ``bar.arrive`` of WG1, which are left out (an arrival that does not happen).
* **Global loads** are ``CudaCoreBlock`` classes ``LDG...``: each warp-instruction a request of 512 B from
  :data:`GATHER_ROWS` = 8 token rows (64 contiguous B each, 16 B per lane; scales and indices broadcast across lanes
  are counted at 16 / 8 / 4 B per lane), the rows ``row_pitch`` bytes apart (which lines of the L1 they touch:
  :mod:`simtc.engine.l1`). Where they stall is the SASS's: the generator follows each load's destination registers
  to the first instruction reading them (in the next trip of the loop for the index prefetch); a ``CudaCoreBlock``
  starts at each run of loads (it writes their registers, ready when the data is back) and at each first read (it
  reads them: the warp waits there, the long-scoreboard stall). A block carries a dependent ``chain`` only where it
  is one sequence (the softmax's row maximum, the producer's page/row division); elsewhere the chunks' conversions
  overlap (throughput only).
* **Footprints**: the producer's shared-memory writes are the whole K buffer for every warp (each warp writes its
  16 tokens of it), and ``is_kv_valid`` is written by all four warps (warp 8 only, in the kernel).
* **The bulk copies** of the epilogue: each warp's elected lane copies its 8 rows; as a Role's records are the
  same for its warps, each copy is a record of all four warps with ``issuing_warp`` (the other three skip it).
* **CUDA-core classes** (:func:`sass_class`): the engine maps uniform-datapath instructions (``uniform``) and the
  rest (``other``: branches, predicates, moves to uniform registers, ``CS2R``) to the ALU pipe.

>>> p = sm90_program("v32", 2)
>>> sorted(r.name for r in p.roles)
['producer', 'q_load', 'wg0', 'wg1']
>>> c = per_block_sass("v32")
>>> c["wg0"]["HGMMA.64x64x16.F32.BF16"], c["wg1"]["HGMMA.64x256x16.F32.BF16"], sum(c["producer"].values())
(36, 4, 1080)
"""

from __future__ import annotations

import collections
import functools

from attrs import frozen

from simtc.errors import SimtcError
from simtc.isa.cuda_core import CudaCoreBlock
from simtc.isa.mbarrier import MbarrierArrive, MbarrierArriveExpectTx, MbarrierInit, MbarrierTryWait
from simtc.isa.program import Barrier, Program, Role
from simtc.isa.shared import LdShared, StShared
from simtc.isa.sync import BarArrive, BarSync, FenceProxyAsync
from simtc.isa.tma import BulkCommitGroup, BulkWaitGroupRead, CpAsyncBulk, CpAsyncBulkTensor
from simtc.isa.wgmma import WgmmaCommitGroup, WgmmaFence, WgmmaMmaAsync, WgmmaWaitGroup
from simtc.kernels.flashmla.kvcache import kv_layout
from simtc.kernels.flashmla.plan import PlanBuffer, SmemPlan
from simtc.smem.desc import SmemDescriptor
from simtc.smem.layout import CanonicalLayout

__all__ = ["GATHER_ROWS", "MODELS", "NAMED_BARRIERS", "ROLE_WARPS", "S_TILE", "Sm90Model", "k_avail_cycles", "k_tile",
           "model", "per_block_sass", "program_model1", "program_sass", "program_v32", "q_tile", "record_sass",
           "sass_class", "sm90_engine", "sm90_program", "sm90_run", "steady_cycles_per_block_sm90", "v_descriptor"]

B_H = 64
"""Heads per CTA = wgmma M (``BLOCK_M``, config.h L32)."""
B_TOPK = 64
"""Tokens per block (``TOPK_BLOCK_SIZE``, config.h L33)."""
GATHER_ROWS = 8
"""Tokens one producer warp-instruction loads from: lanes ``8 k + j`` read token ``8 warp + j``'s 16-byte slice
``k`` of a 64-byte chunk (splitkv_mla.cuh L459-460, L583-584)."""
D_V = 512
ROLE_WARPS = {"wg0": (0, 1, 2, 3), "wg1": (4, 5, 6, 7), "producer": (8, 9, 10, 11), "q_load": (0,)}
"""CTA warps of each role (``canonical_warp_group_idx``, splitkv_mla.cuh L94, L186, L366, L454)."""
NAMED_BARRIERS = {0: ("cta_sync", 384), 8: ("sScale_and_sS_ready", 256), 9: ("sScale_and_sS_free", 256),
                  10: ("oBuf_free_and_sL_ready", 256), 11: ("epilogue_r2s_ready", 256)}
"""Hardware id -> (name, threads): config.h L134-141 values + 8 (CUTLASS ``NamedBarrier`` reserves ids 0-7; SASS
``BAR.SYNC 0x8, 0x100`` ...); id 0 is ``__syncthreads`` and, here, the one-CTA cluster barrier [kernel] [sass]."""
S_TILE = CanonicalLayout("bf16", "K", "SW128", B_H, B_TOPK)
"""``sS``: 64 heads x 64 tokens bf16, SW128 K-major (``SmemLayoutS``, config.h L86-89)."""
_O_ROW = 4 * (D_V + 8)
"""Bytes per row of ``oAccumBuf``: 520 floats (config.h L77-80)."""


def q_tile(d_k: int) -> CanonicalLayout:
    """``sQ``: 64 heads x D_K bf16 in SW128 K-major 64 x 64 tiles (``SmemLayoutQ``, config.h L36-48)."""
    return CanonicalLayout("bf16", "K", "SW128", B_H, d_k)


def k_tile(d_k: int) -> CanonicalLayout:
    """One K buffer: 64 tokens x D_K bf16 in INTERLEAVE K-major 64 x 64 tiles (``SmemLayoutK``, config.h L50-61,
    L82): element (token t, dim d) at ``2 (8 t + d % 8 + 512 (d // 8))`` -- what the producer stores
    (splitkv_mla.cuh L512, L587)."""
    return CanonicalLayout("bf16", "K", "INTERLEAVE", B_TOPK, d_k)


def v_descriptor(k_buf: int, k: int, half: int, d_k: int) -> SmemDescriptor:
    """The PV B operand: V (dims x tokens) is the K buffer read MN-major (``SmemLayoutKTilesTransposed``, config.h
    L63-67): dims ``256 half .. +255``, tokens ``16 k .. +15``. The transpose swaps K's core-matrix strides: V's SBO
    (between dim groups) is K's LBO, V's LBO (between token groups) K's SBO (SASS: ``0x80000`` | start, ``0x40``)."""
    kt = k_tile(d_k)
    start = k_buf + int(kt.offset(16 * k, 256 * half))
    return SmemDescriptor(start=start, lbo=kt.sbo, sbo=kt.lbo, layout_type="INTERLEAVE", arch="sm90")


# ---- the two configurations --------------------------------------------------------------------------------------
@frozen
class Sm90Model:
    """One configuration of the SM90 kernel (config.h L23-29)."""

    name: str
    d_k: int
    d_nope: int
    token_bytes: int
    """Global bytes of one token the producer reads: V32 656 (512 fp8 | 4 fp32 scales | 64 bf16), MODEL1 584 (448 fp8
    | 64 bf16, and 8 scale bytes after the page's records)."""
    smem: SmemPlan

    @property
    def v32(self) -> bool:
        return self.name == "v32"

    @property
    def row_pitch(self) -> int:
        """Bytes between a page's token rows in global memory (V32: the 656-byte tokens back to back; MODEL1: the
        576-byte records, the scales after them: :func:`~simtc.kernels.flashmla.kvcache.kv_layout`), which sets
        where a row starts within its 128-byte lines."""
        return kv_layout(self.name, B_TOPK).token_bytes

    @property
    def qk_mmas(self) -> int:
        return self.d_k // 16

    @property
    def q_bytes(self) -> int:
        return B_H * self.d_k * 2

    @property
    def k_buf_bytes(self) -> int:
        return B_TOPK * self.d_k * 2

    def at(self, name: str) -> int:
        return self.smem[name].offset

    @property
    def mbarriers(self) -> dict[str, tuple[int, int]]:
        """name -> (shared-memory address, count): ``bar_q`` 1, ``bar_k_local_ready`` 128, ``bar_k_avail`` 256 (one-CTA
        cluster, splitkv_mla.cuh L116-130); ``bar_k_remote_ready`` exists in the plan but is not initialised."""
        base = self.at("mbarriers")
        return {"bar_q": (base, 1), "bar_k_local_ready[0]": (base + 8, 128), "bar_k_local_ready[1]": (base + 16, 128),
                "bar_k_avail[0]": (base + 40, 256), "bar_k_avail[1]": (base + 48, 256)}


def _plan(name: str, d_k: int) -> SmemPlan:
    """``SharedMemoryPlan`` (config.h L91-103) with 16-byte array alignment and ``s`` at a 1,024-byte boundary:
    V32 231,424 B, MODEL1 208,896 B; the mbarrier addresses the SASS uses (V32 ``0x38480``, MODEL1 ``0x32c80``)
    and the ``is_kv_valid`` / ``sScale`` / ``oAccumBuf`` offsets agree (tests/data/flashmla_sm90_sass.json)
    [kernel] [sass]."""
    q = B_H * d_k * 2
    kb = B_TOPK * d_k * 2
    o_accum = ((B_H - 1) * (D_V + 8) + D_V) * 4
    union = max(2 * kb, B_H * D_V * 2, o_accum)
    s = -(-(q + union) // 1024) * 1024
    v = s + B_H * B_TOPK * 2
    f = v + 2 * B_TOPK
    bars = f + 4 * B_H * 4
    total = -(-(bars + 7 * 8) // 1024) * 1024
    bufs = (
        PlanBuffer("q", 0, q, (), f"Q: {d_k // 64} SW128 64x64 bf16 tiles (TMA)"),
        PlanBuffer("k0", q, kb, ("o_buf", "o_accum"), "K buffer 0: INTERLEAVE K-major tiles (V read MN-major)"),
        PlanBuffer("k1", q + kb, kb, ("o_accum",), "K buffer 1"),
        PlanBuffer("o_buf", q, B_H * D_V * 2, ("k0", "o_accum"), "bf16 O for the no-split TMA store (SW128)"),
        PlanBuffer("o_accum", q, o_accum, ("k0", "k1", "o_buf"), "fp32 O of a split, row stride 520 floats"),
        PlanBuffer("s", s, B_H * B_TOPK * 2, (), "S bf16 64x64 SW128 (WG0 -> WG1)"),
        PlanBuffer("is_kv_valid", v, 2 * B_TOPK, (), "bool[2][64]"),
        PlanBuffer("sM", f, 256, (), "float[64] row maxima (epilogue)"),
        PlanBuffer("sL", f + 256, 256, (), "float[64] row sums (epilogue)"),
        PlanBuffer("sScale", f + 512, 256, (), "float[64] scale_for_old (WG0 -> WG1, per block)"),
        PlanBuffer("sOScale", f + 768, 256, (), "float[64] 1 / l (epilogue)"),
        PlanBuffer("mbarriers", bars, 56, (), "bar_q, bar_k_local_ready[2], bar_k_remote_ready[2], bar_k_avail[2]"),
    )
    plan = SmemPlan(f"FlashMLA SM90 sparse decode {name}", bufs, total,
                    "FlashMLA csrc/sm90/decode/sparse_fp8/config.h SharedMemoryPlan (9241ae3)")
    plan.check("sm90")
    return plan


V32 = Sm90Model("v32", 576, 512, 656, _plan("v32", 576))
MODEL1 = Sm90Model("model1", 512, 448, 584, _plan("model1", 512))
MODELS = {"v32": V32, "model1": MODEL1}


def model(name: str | Sm90Model) -> Sm90Model:
    """The configuration named ``name`` (``"v32"`` or ``"model1"``)."""
    if isinstance(name, Sm90Model):
        return name
    try:
        return MODELS[str(name).lower()]
    except KeyError:
        raise SimtcError(f"unknown FlashMLA SM90 model {name!r}; use v32 or model1",
                         rule="FlashMLA SM90 sparse decode models: V32, MODEL1") from None


# ---- SASS classes --------------------------------------------------------------------------------------------------
_KEEP = frozenset(("LDG", "STG", "LDS", "STS", "STSM", "HGMMA", "MUFU", "F2FP", "F2F", "I2F", "F2I", "I2I", "HADD2",
                   "HMUL2", "HFMA2", "SHFL", "SYNCS", "BAR", "WARPGROUP", "UTMALDG", "UBLKCP", "UTMASTG",
                   "UTMACMDFLUSH", "DEPBAR", "MEMBAR", "FENCE", "UCGABAR_ARV", "UCGABAR_WAIT"))
_BASE = frozenset(("FMUL", "FFMA", "FADD", "FMNMX", "FSEL", "FSETP", "IMAD", "IADD3", "LOP3", "ISETP", "SEL", "SHF",
                   "PRMT", "LEA", "MOV"))


def sass_class(mnemonic: str) -> str:
    """The class a SASS mnemonic (nvdisasm's dotted form) is counted under: the full mnemonic where its modifiers
    matter to the engine (memory widths, conversions, MUFU functions, packed f16, the records' instructions), the
    base name for the FP32 and integer ALU instructions, ``uniform`` for the uniform datapath (``U*``) and ``other``
    for the rest (branches, predicates, ``CS2R``, ``R2UR``, ``LDC`` ...).

    >>> [sass_class(m) for m in ("LDG.E.EL.LTC256B.128.CONSTANT", "FMUL.FTZ", "IMAD.MOV.U32", "UIADD3", "PLOP3.LUT")]
    ['LDG.E.EL.LTC256B.128.CONSTANT', 'FMUL', 'IMAD', 'uniform', 'other']
    """
    base = mnemonic.split(".")[0]
    if base in _KEEP:
        return mnemonic
    if base in _BASE:
        return base
    return "uniform" if base.startswith("U") else "other"


_LDS = {2: "LDS.U16", 4: "LDS", 8: "LDS.64", 16: "LDS.128"}
_STS = {2: "STS.U16", 4: "STS", 8: "STS.64", 16: "STS.128"}


def record_sass(rec, warp: int = 0) -> tuple[tuple[str, int], ...]:
    """The SASS instructions (class, count) one thread of warp ``warp`` issues for record ``rec``: a CudaCoreBlock's
    counts, or the instruction of an explicit record (``wgmma.commit_group`` is none: the ``gsb0`` of the group's
    last HGMMA; ``fence.proxy.async`` is ``MEMBAR.ALL.CTA`` + ``FENCE.VIEW.ASYNC.S``; a bulk copy another warp
    issues is none)."""
    if isinstance(rec, CudaCoreBlock):
        return rec.counts
    if getattr(rec, "issuing_warp", None) is not None and not rec.issued_by(warp):
        return ()
    kind = type(rec).__name__
    if kind == "WgmmaMmaAsync":
        return ((f"HGMMA.64x{rec.n}x16.F32.BF16", 1),)
    if kind == "FenceProxyAsync":
        return (("MEMBAR.ALL.CTA", 1), ("FENCE.VIEW.ASYNC.S", 1))
    if kind == "BarSync":
        return (("UCGABAR_WAIT" if rec.label.startswith("cluster barrier") else "BAR.SYNC.DEFER_BLOCKING", 1),)
    if kind == "LdShared":
        return ((_LDS[rec.width], 1),)
    if kind == "StShared":
        return (("STSM.16.M88.4" if rec.label.startswith("stmatrix") else _STS[rec.width], 1),)
    one = {"WgmmaFence": "WARPGROUP.ARRIVE", "WgmmaWaitGroup": "WARPGROUP.DEPBAR.LE", "WgmmaCommitGroup": None,
           "MbarrierTryWait": "SYNCS.PHASECHK.TRANS64.TRYWAIT", "MbarrierArrive": "SYNCS.ARRIVE.TRANS64.A1T0",
           "MbarrierArriveExpectTx": "SYNCS.ARRIVE.TRANS64", "MbarrierInit": "SYNCS.EXCH.64", "BarArrive": "BAR.ARV",
           "CpAsyncBulkTensor": "UTMALDG.4D", "CpAsyncBulk": "UBLKCP.G.S", "BulkCommitGroup": "UTMACMDFLUSH",
           "BulkWaitGroupRead": "DEPBAR.LE"}
    if kind not in one:
        raise SimtcError(f"no SASS mapping for {kind}", rule="every record of the SM90 Program is one SASS instruction")
    return () if one[kind] is None else ((one[kind], 1),)


# ---- CUDA-core blocks: what the engine needs beyond the counts ------------------------------------------------------
_SOFTMAX_CHAIN = (("FSEL", 1), ("FMNMX", 18), ("SHFL.BFLY", 2), ("FMUL", 1), ("FFMA", 1), ("MUFU.EX2", 1),
                  ("F2FP.BF16.F32.PACK_AB", 1))
"""Mask, the row maximum over the thread's 16 values one after the other, then with the 4-lane partners (2
shuffles + 2 max), x scale, the exponent's FFMA and exp2, the bf16 pack (scale_softmax, splitkv_mla.cuh L51-76)."""
_ADDR_CHAIN = (("I2F.U32.RP", 1), ("MUFU.RCP", 1), ("F2I.FTZ.U32.TRUNC.NTZ", 1), ("IMAD", 6), ("IADD3", 2))
"""A token's page and row (``token / page_block_size``, ``%``, L538-539: reciprocal, high multiply, corrections) and
its address, before its loads can issue."""


def _chain(chain, counts) -> tuple:
    have = dict(counts)
    return tuple((c, min(n, have[c])) for c, n in chain if c in have)


def _block(name: str, counts, **kw) -> CudaCoreBlock:
    chain = _chain(kw.pop("chain", ()), counts)
    return CudaCoreBlock(name, counts, chain=chain, **kw)


@frozen
class _Ctx:
    """Where a token is: the block index (ring buffer, phase), first / last block."""

    i: int = 0
    blocks: int = 1

    @property
    def b(self) -> int:
        return self.i % 2

    @property
    def ph(self) -> int:
        return (self.i // 2) % 2

    @property
    def first(self) -> bool:
        return self.i == 0

    @property
    def last(self) -> bool:
        return self.i == self.blocks - 1


class Sm90Builder:
    """The records of one model, built once per distinct (role, part, block pattern) and shared."""

    def __init__(self, m: Sm90Model):
        self.m = m
        self._memo: dict = {}

    # ---- operands ----------------------------------------------------------------------------------------------
    def k_buf(self, b: int) -> int:
        return self.m.at(f"k{b}")

    def qk_mma(self, b: int, k: int) -> WgmmaMmaAsync:
        m = self.m
        a = q_tile(m.d_k).descriptor(arch="sm90", start=m.at("q"), k_slice=k)
        bd = k_tile(m.d_k).descriptor(arch="sm90", start=self.k_buf(b), k_slice=k)
        return WgmmaMmaAsync(64, 64, 16, "bf16", a, bd, k > 0, "p", label=f"QK k={k} (buffer {b})")

    def pv_mma(self, role: str, b: int, k: int) -> WgmmaMmaAsync:
        m = self.m
        half = 0 if role == "wg0" else 1
        bd = v_descriptor(self.k_buf(b), k, half, m.d_k)
        a = f"s{k}" if role == "wg0" else S_TILE.descriptor(arch="sm90", start=m.at("s"), k_slice=k)
        return WgmmaMmaAsync(64, 256, 16, "bf16", a, bd, True, "o", b_major="MN",
                             label=f"PV tokens {16 * k}-{16 * k + 15}, dims {256 * half}-{256 * half + 255} "
                                   f"(buffer {b})")

    def stsm(self, j: int) -> StShared:
        """``stmatrix.x4`` of S columns ``16 j .. +15``: lane l addresses row ``16 w + l % 16``, column
        ``16 j + 8 (l // 16)`` of the SW128 tile (config.h L159-172; SASS: the rows' base, ``+0x20`` per j, XOR
        swizzle)."""
        offs = tuple(int(S_TILE.offset(lane % 16, 16 * j + 8 * (lane // 16))) for lane in range(32))
        return StShared(self.m.at("s"), 16, f"s{j}", offsets=offs, warp_offsets=(0, 2048, 4096, 6144),
                        label=f"stmatrix S columns {16 * j}-{16 * j + 15}")

    def o_accum_store(self, wg: int, j: int) -> StShared:
        """``store_o<false>`` (config.h L244-252): float2 ``j`` of the thread's 64, row ``16 w + lane/4 (+8)``, column
        ``256 wg + 2 (lane % 4) + 8 (j // 2)``."""
        base = self.m.at("o_accum") + 4 * (8 * (j % 2) * (D_V + 8) + 256 * wg + 8 * (j // 2))
        offs = tuple((lane // 4) * _O_ROW + 8 * (lane % 4) for lane in range(32))
        return StShared(base, 8, "o", offsets=offs, warp_offsets=tuple(16 * _O_ROW * w for w in range(4)),
                        label=f"O x 1/l -> oAccumBuf (float2 {j})")

    def row_store(self, name: str, row8: int, src: str) -> StShared:
        """A per-row float of ``sL``/``sM``/``sOScale`` by the lanes ``lane % 4 == 0``: row
        ``16 w + lane / 4 + 8 row8``."""
        return StShared(self.m.at(name) + 32 * row8, 4, src, threads=8, stride=4, warp_offsets=(0, 64, 128, 192),
                        label=f"{name} rows +{8 * row8} (lanes % 4 == 0)")

    # ---- tokens -> records -----------------------------------------------------------------------------------------
    def records(self, role: str, part: str, tok: str, occ: int, ctx: _Ctx) -> list:
        m = self.m
        kind, _, arg = tok.partition(":")
        if kind in ("ldg", "use"):
            return []  # the next CudaCoreBlock issues / first reads these global loads (Sm90Builder.part)
        if kind in ("bar.sync", "bar.arrive"):
            bid = int(arg)
            name, threads = NAMED_BARRIERS[bid]
            if role == "wg0" and part == "block" and bid == 9 and ctx.first:
                return []  # sScale_and_sS_free is waited only from the second block on (L242)
            if role == "wg1" and part == "block" and bid == 9 and ctx.last:
                return []  # ... and arrived only before the last block (L414)
            cls = BarSync if kind == "bar.sync" else BarArrive
            return [cls(bid, threads, label="__syncthreads (sync_all_threads_in_cluster)" if bid == 0 else name)]
        simple = {"bar.cluster": lambda: BarSync(0, 384, label="cluster barrier (arrive L134 / wait L155), one CTA"),
                  "wgmma.fence": WgmmaFence, "wgmma.commit": WgmmaCommitGroup, "wgmma.wait": lambda: WgmmaWaitGroup(0),
                  "fence.proxy_async": FenceProxyAsync, "bulk.commit": BulkCommitGroup,
                  "bulk.wait": lambda: BulkWaitGroupRead(0, label="tma_store_wait<0>"),
                  "mbarrier.arrive_tx": lambda: MbarrierArriveExpectTx("bar_q", m.q_bytes)}
        if kind in simple:
            return [simple[kind]()]
        if kind == "wgmma.qk":
            return [self.qk_mma(ctx.b, occ)]
        if kind == "wgmma.pv":
            return [self.pv_mma(role, ctx.b, occ)]
        if kind == "mbarrier.wait":
            if part == "prologue":
                return [MbarrierTryWait("bar_q", 0, label="Q in shared memory (L216)")]
            if role == "producer":
                return [MbarrierTryWait(f"bar_k_avail[{ctx.b}]", ctx.ph ^ 1, label="K buffer free (L566)")]
            return [MbarrierTryWait(f"bar_k_local_ready[{ctx.b}]", ctx.ph, label="K buffer ready (L225)")]
        if kind == "mbarrier.arrive":
            bar = f"bar_k_local_ready[{ctx.b}]" if role == "producer" else f"bar_k_avail[{ctx.b}]"
            return [MbarrierArrive(bar)]
        if kind == "mbarrier.init":
            name = ("bar_q", "bar_k_local_ready[0]", "bar_k_avail[0]", "bar_k_local_ready[1]", "bar_k_avail[1]")[occ]
            return [MbarrierInit(name, m.mbarriers[name][1])]
        if kind == "tma.load":
            return [CpAsyncBulkTensor(m.at("q") + 8192 * occ, 8192, "bar_q", tensor="q", coords=(64 * occ, 0, 0, 0),
                                      label=f"Q dims {64 * occ}-{64 * occ + 63} (64x64 SW128 box)")]
        if kind == "bulk.copy":
            wg = 0 if role == "wg0" else 1
            out = []
            for w in range(4):
                row = 8 * occ + 4 * wg + w
                out.append(CpAsyncBulk(m.at("o_accum") + row * _O_ROW, 4 * D_V, dst=f"o_accum[row {row}]",
                                       issuing_warp=w, label=f"o_accum row {row} (warp {4 * wg + w})"))
            return out
        if kind == "ld.shared":
            if arg == "is_kv_valid":
                base = m.at("is_kv_valid") + B_TOPK * ctx.b + 8 * occ
                return [LdShared(base, 2, f"valid{occ}", offsets=tuple(2 * (lane % 4) for lane in range(32)),
                                 label=f"is_kv_valid[{ctx.b}] tokens {8 * occ}+ (char2)")]
            if arg == "sScale":
                return [LdShared(m.at("sScale"), 8, "scale", offsets=tuple(8 * (lane // 4) for lane in range(32)),
                                 warp_offsets=(0, 64, 128, 192), label="sScale (float2 per row pair)")]
            if arg == "sOScale":
                return [LdShared(m.at("sOScale") + 32 * occ, 4, f"oscale{occ}",
                                 offsets=tuple(4 * (lane // 4) for lane in range(32)), warp_offsets=(0, 64, 128, 192),
                                 label=f"sOScale rows +{8 * occ}")]
        if kind == "st.shared":
            if arg == "stsm":
                return [self.stsm(occ)]
            if arg == "sScale":
                return [StShared(m.at("sScale"), 8, "scale_old", threads=8, stride=8, warp_offsets=(0, 64, 128, 192),
                                 label="sScale (lanes % 4 == 0, float2)")]
            if arg in ("sL", "sM", "sOScale"):
                return [self.row_store(arg, occ, {"sL": "l", "sM": "m", "sOScale": "o_scale"}[arg])]
            if arg == "o_accum":
                return [self.o_accum_store(0 if role == "wg0" else 1, occ)]
            if arg == "is_kv_valid":
                return [StShared(m.at("is_kv_valid") + B_TOPK * ctx.b, 2, "valid_idx",
                                 label=f"is_kv_valid[{ctx.b}] (char2 per lane; warp 8 in the kernel)")]
        raise SimtcError(f"unknown SM90 schedule token {tok!r} ({role} {part})",
                         rule="the SM90 schedule's tokens (tests/oracle/regen_flashmla_sm90_sass.py)")

    def gap(self, role: str, part: str, prev: str, occ: int, counts, ctx: _Ctx, loads=(), uses=()) -> CudaCoreBlock:
        """The CUDA-core instructions after token ``prev`` (its ``occ``-th occurrence; ``""``: the part's start);
        ``loads``: the global loads it issues (their registers are ready when the data is back), ``uses``: the loads
        whose data its first instruction reads (the warp waits for them: a long-scoreboard stall)."""
        block = self._gap(role, part, prev, occ, counts, ctx)
        if not loads and not uses:
            return block
        regs_r = tuple(dict.fromkeys((*block.regs_read, *(f"{part}.{n}" for n in uses))))
        regs_w = tuple(dict.fromkeys((*block.regs_written, *(f"{part}.{n}" for n in loads))))
        name = block.name + (f" [loads {', '.join(loads)}]" if loads else "") + (f" [uses {', '.join(uses)}]"
                                                                                  if uses else "")
        return CudaCoreBlock(name, block.counts, smem_reads=block.smem_reads, smem_writes=block.smem_writes,
                             regs_read=regs_r, regs_written=regs_w, chain=block.chain, gmem=block.gmem,
                             gmem_rows=block.gmem_rows, gmem_pitch=block.gmem_pitch, gmem_lanes=block.gmem_lanes)

    def _gap(self, role: str, part: str, prev: str, occ: int, counts, ctx: _Ctx) -> CudaCoreBlock:
        m = self.m
        have = dict(counts)
        name = f"{role} {part}: after {prev or 'start'}" + (f" #{occ}" if occ else "")
        kw: dict = {}
        if role == "wg0" and part == "block":
            if prev == "ld.shared:is_kv_valid" and occ == 7:
                name = "softmax: mask, row max, exp2, S (scale_softmax)"
                kw = {"regs_read": ("p", *(f"valid{j}" for j in range(8))),
                      "regs_written": ("s0", "s1", "s2", "s3", "scale_old", "o", "ml"), "chain": _SOFTMAX_CHAIN}
            elif "FMUL" in have or "FADD" in have:
                kw = {"regs_written": ("o", "ml")}
        elif role == "wg1" and part == "block" and prev == "ld.shared:sScale":
            name = "O x sScale"
            kw = {"regs_read": ("scale",), "regs_written": ("o",), "chain": (("FMUL", 1),)}
        elif role == "producer" and part == "block":
            if not prev:
                name = "producer: token rows and addresses (round 0)"
                kw = {"chain": _ADDR_CHAIN}
            elif "STS.128" in have:
                kb = self.k_buf(ctx.b)
                name = f"producer: dequant and st.shared.v4 of K (after {prev} #{occ})"
                kw = {"smem_writes": ((kb, kb + m.k_buf_bytes),)}
        elif part == "epilogue" and role in ("wg0", "wg1"):
            if (prev, occ) in (("bar.sync:10", 0), ("ld.shared:sOScale", 1)):
                name = "O x 1/l"
                kw = {"regs_written": ("o",), "chain": (("FMUL", 1),)}
            elif role == "wg0" and prev == "bulk.commit":
                name = "LSE (log2) of rows 0-63"
                kw = {"smem_reads": ((m.at("sM"), m.at("sM") + 512),), "chain": (("LDS", 1), ("MUFU.LG2", 1),
                                                                                   ("FADD", 1))}
        if role == "producer" and any(c.startswith("LDG") for c in have):
            kw |= {"gmem_rows": GATHER_ROWS, "gmem_pitch": m.row_pitch, "gmem_lanes": "interleaved"}
        return _block(name, counts, **kw)

    # ---- roles ---------------------------------------------------------------------------------------------------
    def part(self, role: str, part: str, ctx: _Ctx) -> tuple:
        """The records of ``role``'s ``part`` (``prologue``, ``block`` for ``ctx``, ``epilogue``), built once."""
        key = (role, part, (ctx.b, ctx.ph, ctx.first, ctx.last) if part == "block" else None)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        from simtc.kernels.flashmla.sm90_sass import SCHEDULES

        items = SCHEDULES[self.m.name][role][part]
        out: list = []
        seen: collections.Counter = collections.Counter()
        prev, prev_occ = "", 0
        loads: list[str] = []
        uses: list[str] = []
        for it in items:
            if isinstance(it, str):
                kind, _, arg = it.partition(":")
                if kind in ("ldg", "use"):
                    (loads if kind == "ldg" else uses).extend(arg.split(","))
                    continue
                occ = seen[it]
                seen[it] += 1
                out += self.records(role, part, it, occ, ctx)
                prev, prev_occ = it, occ
            else:
                out.append(self.gap(role, part, prev, prev_occ, it, ctx, tuple(loads), tuple(uses)))
                loads, uses = [], []
        self._memo[key] = hit = tuple(out)
        return hit

    def role_records(self, role: str, blocks: int) -> list:
        if role == "q_load":
            return list(self.part("q_load", "prologue", _Ctx()))
        rec = [*self.part("common", "prologue", _Ctx()), *self.part(role, "prologue", _Ctx())]
        for i in range(blocks):
            rec += self.part(role, "block", _Ctx(i, blocks))
        return rec + list(self.part(role, "epilogue", _Ctx()))

    def barriers(self) -> tuple[Barrier, ...]:
        out = [Barrier(n, "mbarrier", count, addr=addr) for n, (addr, count) in self.m.mbarriers.items()]
        out += [Barrier(name, "named", threads, id=i) for i, (name, threads) in NAMED_BARRIERS.items()]
        return tuple(out)

    def program(self, blocks: int) -> Program:
        m = self.m
        roles = tuple(Role(r, ROLE_WARPS[r], tuple(self.role_records(r, blocks)), **({"threads": 1} if r == "q_load"
                                                                                        else {}))
                      for r in ("wg0", "wg1", "producer", "q_load"))
        return Program(f"flashmla-sm90-{m.name}", roles, barriers=self.barriers(),
                       description=f"FlashMLA SM90 sparse FP8 decode, 64 heads ({m.name.upper()}): one CTA, one split "
                                   f"request of {blocks} top-k blocks of {B_TOPK} tokens (WG0 QK + softmax + PV lo, "
                                   f"WG1 PV hi, WG2 gather + dequant)",
                       meta=(("kernel", f"FlashMLA flash_fwd_splitkv_mla_fp8_sparse_kernel {m.name} h64"),
                             ("blocks", blocks), ("arch", "sm90"),
                             ("source", "csrc/sm90/decode/sparse_fp8/splitkv_mla.cuh, config.h @ 9241ae3; SASS "
                                        "schedule tests/data/flashmla_sm90_sass.json")))


@functools.lru_cache(maxsize=4)
def _builder(name: str) -> Sm90Builder:
    return Sm90Builder(model(name))


@functools.lru_cache(maxsize=32)
def _program(name: str, blocks: int) -> Program:
    return _builder(name).program(blocks)


def sm90_program(model_name: str | Sm90Model = "v32", blocks: int = 1) -> Program:
    """The SM90 kernel as one CTA serving one split request of ``blocks`` top-k blocks (a frozen, cached value):
    the prologue (barrier init, Q TMA), the block loop of every role, the split epilogue (o_accum, lse_accum)."""
    m = model(model_name)
    if isinstance(blocks, bool) or not isinstance(blocks, int) or blocks < 1:
        raise SimtcError(f"blocks = {blocks!r}: a split has at least one block of {B_TOPK} tokens",
                         rule="an SM90 split covers 1 or more top-k blocks")
    return _program(m.name, blocks)


def program_v32() -> Program:
    """FlashMLA SM90 sparse FP8 decode h64, V32: one CTA, one split of 2 blocks (run with ``--arch sm90``)."""
    return sm90_program("v32", 2)


def program_model1() -> Program:
    """FlashMLA SM90 sparse FP8 decode h64, MODEL1: one CTA, one split of 2 blocks (run with ``--arch sm90``)."""
    return sm90_program("model1", 2)


# ---- counts ---------------------------------------------------------------------------------------------------------
def program_sass(program: Program) -> dict[str, collections.Counter]:
    """Per role, the SASS classes one thread of its second warp (warp 1 of WG0, ...) issues over the Program."""
    out = {}
    for role in program.roles:
        warp = role.warps[1] if len(role.warps) > 1 else role.warps[0]
        c: collections.Counter = collections.Counter()
        for rec in role.records:
            for cls, n in record_sass(rec, warp):
                c[cls] += n
        out[role.name] = c
    return out


def per_block_sass(model_name: str | Sm90Model = "v32") -> dict[str, dict[str, int]]:
    """Per role, one middle block's SASS classes: the Program of 3 blocks less the one of 2."""
    a = program_sass(sm90_program(model_name, 3))
    b = program_sass(sm90_program(model_name, 2))
    return {r: {k: v - b[r][k] for k, v in a[r].items() if v - b[r][k]} for r in a}


# ---- running it -----------------------------------------------------------------------------------------------------
def k_avail_cycles(eng) -> list[int]:
    """The cycles at which a ``bar_k_avail[*]`` phase completed: one per block, when WG0 and WG1 are done with its K
    buffer (both PV halves complete), in order."""
    return eng.trace.phase_cycles("bar_k_avail")


def _steady(eng) -> float:
    from simtc.engine.trace import mean_interval

    return mean_interval(k_avail_cycles(eng), eng.cycles)


def sm90_engine(model_name: str | Sm90Model = "v32", blocks: int = 12, timing=None, *, check: bool = True,
                active_sms: int | None = None):
    """An :class:`~simtc.engine.Engine` (not yet run) for the Program, its L1 the 28 KiB the kernel's 226 KiB (V32)
    / 204 KiB (MODEL1) of shared memory leave (carve-out 228 KiB, :func:`simtc.engine.l1.l1_capacity` of
    ``smem.total``): what bounds the producer's loads in flight (:meth:`simtc.engine.memory.MemorySystem.use_l1`)."""
    from simtc.engine import Engine
    from simtc.engine.l1 import l1_capacity
    from simtc.engine.parameters import Timing

    timing = timing or Timing("sm90")
    eng = Engine(sm90_program(model_name, blocks), mode="timing", check=check, timing=timing, active_sms=active_sms)
    eng.memory.use_l1(l1_capacity(timing.arch, model(model_name).smem.total, timing))
    return eng


def sm90_run(model_name: str | Sm90Model = "v32", blocks: int = 12, timing=None, *, check: bool = True) -> dict:
    """Run the Program on the engine (``Timing("sm90")`` by default) and summarise: cycles, steady cycles per block,
    busy cycles per block of each unit, per role busy / waiting cycles, hazards and deadlock."""
    eng = sm90_engine(model_name, blocks, timing, check=check).run()
    return {"model": model(model_name).name, "blocks": blocks, "cycles": eng.cycles,
            "cycles_per_block_steady": _steady(eng),
            "units_per_block": {u: round(v / blocks, 1) for u, v in eng.unit_busy.items()},
            "per_role": eng.per_role(), "hazards": [str(h) for h in eng.hazards], "deadlock": eng.deadlock,
            "engine": eng}


def steady_cycles_per_block_sm90(model_name: str | Sm90Model = "v32", blocks: int = 12, timing=None) -> float:
    """Steady-state cycles per block of a timing-only run: the mean interval between consecutive ``bar_k_avail``
    phases (the first block's ramp and the epilogue left out)."""
    return _steady(sm90_engine(model_name, blocks, timing, check=False).run())
