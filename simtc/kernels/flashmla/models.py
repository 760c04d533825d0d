"""The two configurations of FlashMLA's SM100 head64 sparse-decode kernel: V32 and MODEL1.

One :class:`Head64Model` per configuration holds what differs: dims, scale format, KV record, RoPE
swizzle, the shared-memory plan, the mbarrier table and the TMEM regions. Sources: ``deepseek-ai/FlashMLA``
``csrc/sm100/decode/head64/config.h`` at ``9241ae3`` (constants lines 33-55, ``SharedMemoryPlan`` lines
159-194) and ``kernel.cuh`` (barrier init lines 43-62; MODEL1's QK, RoPE and scales at lines 553-572,
624-628 and 712-716) [kernel]; MODEL1 offsets are computed from
the struct with 16-byte array alignment and reproduce the compiled total 218,848 B [inferred].

>>> V32.smem.total, MODEL1.smem.total, V32.qk_mmas, MODEL1.qk_mmas
(232192, 218848, 18, 16)
>>> MODEL1.mbarriers["qk_done[0]"][0] == V32.mbarriers["qk_done[0]"][0] - 13344
True
>>> V32.tmem_columns_used, MODEL1.tmem_columns_used
(464, 448)
"""

from __future__ import annotations

from attrs import frozen

from simtc.errors import SimtcError
from simtc.kernels.flashmla.constants import (
    B_H,
    B_TOPK,
    P_COLUMN,
    Q_COLUMN,
    TMEM_COLUMNS,
)
from simtc.kernels.flashmla.plan import MBARRIERS_V32, SMEM_V32, TMEM_V32, PlanBuffer, SmemPlan
from simtc.tmem.regions import TmemRegion

__all__ = ["MODEL1", "MODELS", "NAMED_BARRIERS", "V32", "Head64Model", "model"]

_SRC = "FlashMLA 9241ae3 csrc/sm100/decode/head64/config.h L159-194 (SharedMemoryPlan)"

NAMED_BARRIERS = {"wg0_sync": (1 + 8, 128), "wg0_warp02_sync": (2 + 8, 64), "wg0_warp13_sync": (3 + 8, 64),
                  "everyone_sync": (4 + 8, 384)}
"""FlashMLA's named barriers: name -> (hardware id = value + 8, threads) [kernel]: values ``config.h`` lines
22-28, thread counts at their uses in ``kernel.cuh`` (lines 116, 161, 185); CUTLASS's ``NamedBarrier`` adds
the 8 ids it reserves (``include/cutlass/arch/barrier.h`` lines 168-177 and 331 at ``147f567``).
``main_loop_sync`` (value 0) is unused. SASS ``BAR.SYNC 0x9, 0x80`` is ``wg0_sync`` [sass]."""


def _model1_buffers() -> tuple[PlanBuffer, ...]:
    d1 = ("dequant1.nope", "dequant1.rope")
    raw = ("raw_nope0", "raw_nope1")
    return (
        PlanBuffer("q", 0, 65536, ("dequant0.nope", "dequant0.rope"), "Q (512 dims incl. RoPE): 8 SW128 tiles"),
        PlanBuffer("o_buf", 65536, 65536, ("o_accum_buf", *d1), "bf16 O for the TMA store (SW128)"),
        PlanBuffer("o_accum_buf", 65536, 133088, ("o_buf", *d1, *raw), "fp32 O, row stride 520 floats"),
        PlanBuffer("dequant0.nope", 0, 57344, ("q",), "K NoPE bf16: 7 SW128 tiles"),
        PlanBuffer("dequant0.rope", 57344, 8192, ("q",), "K RoPE bf16: SW128 tile 7 (part of V)"),
        PlanBuffer("dequant1.nope", 65536, 57344, ("o_buf", "o_accum_buf")),
        PlanBuffer("dequant1.rope", 122880, 8192, ("o_buf", "o_accum_buf")),
        PlanBuffer("raw_nope0", 131072, 28672, ("o_accum_buf",), "fp8, 448 bytes per token row"),
        PlanBuffer("raw_nope1", 159744, 28672, ("o_accum_buf",)),
        PlanBuffer("p_exchange_buf", 198624, 16384, ("s",), "P halves exchanged between warps w and w^2"),
        PlanBuffer("s", 198624, 8192, ("p_exchange_buf",), "S bf16 64x64, K-major interleave"),
        PlanBuffer("rowwise_max_buf", 215008, 512, (), "float[128]; also exchanges li"),
        PlanBuffer("is_token_valid", 215520, 32, (), "1 bit per token"),
        PlanBuffer("tma_coord", 215552, 1024, (), "int per token"),
        PlanBuffer("scales", 216576, 2048, (), "ue8m0: 7 + 1 pad per token"),
        PlanBuffer("tmem_start_addr", 218624, 16, (), "tcgen05.alloc writes the TMEM address here"),
        PlanBuffer("mbarriers", 218640, 200, (), "25 mbarriers x 8 B"),
    )


def _mbarriers(plan: SmemPlan) -> dict[str, tuple[int, int]]:
    base_v32 = SMEM_V32["mbarriers"].offset
    base = plan["mbarriers"].offset
    return {n: (addr - base_v32 + base, count) for n, (addr, count) in MBARRIERS_V32.items()}


@frozen
class Head64Model:
    """One configuration of the head64 kernel (``config.h`` lines 33-55, ``ModelType::V32`` / ``MODEL1``)."""

    name: str
    d_q: int
    d_nope: int
    d_rope: int
    quant_tile: int
    """K dims per fp8 scale."""
    num_scales: int
    """Scale bytes per token in the scales ring (V32: 4 e8m0; MODEL1: 7 ue8m0 + 1 pad)."""
    tma_k_stride: int
    """Bytes per token row in the KV tensor maps (TMA_K_STRIDE)."""
    rope_offset: int
    """Byte offset of the bf16 RoPE part in a token record."""
    rope_swizzle: str
    """K RoPE's shared-memory swizzle (K_ROPE_SW): SW64 (two 64x32 tiles) or SW128 (tile 7 of the K buffer)."""
    smem: SmemPlan
    mbarriers: dict[str, tuple[int, int]]
    tmem: tuple[TmemRegion, ...]

    @property
    def d_v(self) -> int:
        return 512

    @property
    def v32(self) -> bool:
        return self.name == "v32"

    @property
    def qk_mmas(self) -> int:
        """QK MMAs per block: one K=16 step of each lane half per instruction (D_Q / 32)."""
        return self.d_q // 32

    @property
    def q_copies(self) -> int:
        """``tcgen05.cp.128x256b`` of Q per request (D_Q / 32)."""
        return self.d_q // 32

    @property
    def nope_gathers(self) -> int:
        return B_TOPK // 4

    @property
    def rope_gathers(self) -> int:
        """RoPE gather4 per block: one per 4 tokens per swizzle-row of K RoPE (V32 2 x 16, MODEL1 16)."""
        row_elems = {"SW64": 32, "SW128": 64}[self.rope_swizzle]
        return B_TOPK // 4 * (self.d_rope // row_elems)

    @property
    def q_tma_bytes(self) -> int:
        return B_H * self.d_q * 2

    @property
    def tmem_columns_used(self) -> int:
        return sum(r.columns[1] - r.columns[0] + 1 for r in self.tmem if r.name != "free")


def _model1_tmem() -> tuple[TmemRegion, ...]:
    return (
        TMEM_V32[0],
        TmemRegion("Q", (0, 127), (Q_COLUMN, Q_COLUMN + 127),
                   "Q bf16 incl. RoPE (512 dims), two per cell: lanes 0-63 tiles 0, 2, 4, 6; lanes 64-127 tiles "
                   "1, 3, 5, 7 (7 = RoPE)"),
        TmemRegion("P", (0, 127), (P_COLUMN, P_COLUMN + B_TOPK - 1),
                   "QK result 64x128 fp32 in Layout E: P_lo in lanes 0-63, P_hi in lanes 64-127"),
        TmemRegion("free", (0, 127), (P_COLUMN + B_TOPK, TMEM_COLUMNS - 1), "384-399 and 464-511 unused"),
    )


V32 = Head64Model("v32", 576, 512, 64, 128, 4, 656, 528, "SW64", SMEM_V32, MBARRIERS_V32, TMEM_V32)
"""DeepSeek-V3.2: D_Q 576 (512 fp8 NoPE + 64 bf16 RoPE), 4 fp32 scales per token (one per 128 dims)."""

_SMEM_MODEL1 = SmemPlan("FlashMLA head64 MODEL1", _model1_buffers(), 218848, _SRC)
_SMEM_MODEL1.check()
MODEL1 = Head64Model("model1", 512, 448, 64, 64, 8, 576, 448, "SW128", _SMEM_MODEL1, _mbarriers(_SMEM_MODEL1),
                     _model1_tmem())
"""MODEL1: D_Q 512 (448 fp8 NoPE + 64 bf16 RoPE, RoPE part of V), 7 ue8m0 scales per token (one per 64 dims)."""

MODELS = {"v32": V32, "model1": MODEL1}



def model(name: str | Head64Model) -> Head64Model:
    """The configuration named ``name`` (``"v32"`` or ``"model1"``)."""
    if isinstance(name, Head64Model):
        return name
    try:
        return MODELS[str(name).lower()]
    except KeyError:
        raise SimtcError(f"unknown FlashMLA head64 model {name!r}; use v32 or model1",
                         rule="head64 models (FlashMLA config.h L33-55)") from None
