"""FlashMLA head64 (V32) memory plans as data: the shared-memory plan with its unions, the mbarrier
table, the TMEM column map, and the shared-memory tile layouts of Q and K.

Shared-memory offsets are the V32 ``SharedMemoryPlan`` of FlashMLA ``csrc/sm100/decode/head64/config.h``
lines 159-194 at ``9241ae3`` [kernel]: its members in order, CuTe's ``array_aligned`` 16-byte aligned
(CUTLASS ``include/cute/container/array_aligned.hpp`` line 39 at ``147f567``, FlashMLA's submodule); sizes
are derived from the constants (:mod:`simtc.kernels.flashmla.constants`) and :meth:`SmemPlan.check` verifies that the
buffers tile the struct (every overlap is a declared union), that the total is the kernel's
232,192 B and that it fits the 227 KiB a block may use.

>>> SMEM_V32["dequant1.nope"].offset, SMEM_V32.total, SMEM_V32.total <= SMEM_CAPACITY["sm100"]
(73728, 232192, True)
>>> [b.name for b in SMEM_V32.aliases("q")]
['dequant0.nope']
>>> MBARRIERS_V32["qk_done[0]"]
(232136, 1)
>>> [str(r) for r in TMEM_V32][3]
'P: lanes 0-127, columns 400-463'
"""

from __future__ import annotations

from attrs import frozen

from simtc.errors import SimtcError
from simtc.kernels.flashmla.constants import (
    B_H,
    B_TOPK,
    D_NOPE,
    D_ROPE,
    D_V,
    NUM_BUFS,
    NUM_INDEX_BUFS,
    O_COLUMN,
    P_COLUMN,
    Q_COLUMN,
    Q_TAIL_COLUMN,
    TMEM_COLUMNS,
)
from simtc.smem.layout import CanonicalLayout
from simtc.smem.memory import SMEM_CAPACITY, SharedMemory
from simtc.tmem.regions import TmemRegion

__all__ = [
    "MBARRIERS_V32", "NOPE_TILE", "NOPE_VIEW", "ROPE_TILE", "ROPE_VIEW", "SMEM_V32", "TMEM_V32", "PlanBuffer",
    "SmemPlan", "store_qk_operand",
]

_BF16, _FP8, _F32 = 2, 1, 4
_SRC = "FlashMLA 9241ae3 csrc/sm100/decode/head64/config.h L159-194 (SharedMemoryPlan)"


@frozen
class PlanBuffer:
    """One member of the shared-memory plan: ``size`` bytes at ``offset``; ``unions`` = members it may share."""

    name: str
    offset: int
    size: int
    unions: tuple[str, ...] = ()
    note: str = ""

    @property
    def end(self) -> int:
        return self.offset + self.size

    def overlaps(self, other: PlanBuffer) -> bool:
        return self.offset < other.end and other.offset < self.end


@frozen
class SmemPlan:
    """A kernel's shared-memory plan: named buffers (some unions of others) and the struct's total size."""

    name: str
    buffers: tuple[PlanBuffer, ...]
    total: int
    source: str = ""

    def __getitem__(self, name: str) -> PlanBuffer:
        for b in self.buffers:
            if b.name == name:
                return b
        raise SimtcError(f"no buffer {name!r} in the {self.name} plan (have {', '.join(self.names)})",
                         rule="plan buffer names")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.buffers)

    def __iter__(self):
        return iter(self.buffers)

    def aliases(self, name: str) -> list[PlanBuffer]:
        """The other buffers sharing at least one byte with ``name``."""
        b = self[name]
        return [o for o in self.buffers if o.name != name and o.overlaps(b)]

    def check(self, arch: str = "sm100") -> None:
        """Raise unless every overlap is a declared union (both ways), all buffers lie inside the total,
        and the total fits the per-block shared memory of ``arch``."""
        for b in self.buffers:
            if b.offset < 0 or b.end > self.total:
                raise SimtcError(f"{self.name}: {b.name} ({b.size} B at {b.offset}) leaves the {self.total}-B plan",
                                 rule="plan buffers lie inside the plan", ref=self.source)
            for o in self.aliases(b.name):
                if o.name not in b.unions or b.name not in o.unions:
                    raise SimtcError(f"{self.name}: {b.name} and {o.name} share bytes but are not declared a union",
                                     rule="buffers overlap only as declared unions", ref=self.source)
        cap = SMEM_CAPACITY[arch]
        if self.total > cap:
            raise SimtcError(f"{self.name}: {self.total} B of shared memory is more than the {cap} B a block may use",
                             rule="227 KiB per block", ref="CUDA C++ Programming Guide, compute capability 10.0")

    def allocate(self, smem: SharedMemory) -> SharedMemory:
        """Name every buffer of the plan in ``smem`` (at its plan offset; unions alias, as in the kernel)."""
        for b in self.buffers:
            smem.alloc(b.name, b.size, at=b.offset)
        return smem


def _v32_buffers() -> tuple[PlanBuffer, ...]:
    nope, rope = B_TOPK * D_NOPE * _BF16, B_TOPK * D_ROPE * _BF16  # one dequantized K tile: 65,536 + 8,192 B
    o_stride = D_V + 8  # fp32 O staging row stride 520 floats: avoids bank conflicts [kernel]
    o_accum = ((B_H - 1) * o_stride + D_V) * _F32
    d1 = ("dequant1.nope", "dequant1.rope")
    raw = tuple(f"raw_nope{b}" for b in range(NUM_BUFS))
    return (
        PlanBuffer("q", 0, B_H * D_NOPE * _BF16, ("dequant0.nope",), "Q NoPE: 8 SW128 tiles 64x64 bf16"),
        PlanBuffer("q_sw64", 65536, B_H * D_ROPE * _BF16, ("dequant0.rope",), "Q RoPE: two 64x32 SW64 tiles"),
        PlanBuffer("o_buf", 73728, B_H * D_V * _BF16, ("o_accum_buf", *d1), "bf16 O for the TMA store (SW128)"),
        PlanBuffer("o_accum_buf", 73728, o_accum, ("o_buf", *d1, *raw), "fp32 O, row stride 520 floats"),
        PlanBuffer("dequant0.nope", 0, nope, ("q",), "K NoPE bf16 SW128 (also read as V)"),
        PlanBuffer("dequant0.rope", 65536, rope, ("q_sw64",), "K RoPE bf16: two 64x32 SW64 tiles"),
        PlanBuffer("dequant1.nope", 73728, nope, ("o_buf", "o_accum_buf")),
        PlanBuffer("dequant1.rope", 139264, rope, ("o_buf", "o_accum_buf")),
        PlanBuffer("raw_nope0", 147456, B_TOPK * D_NOPE * _FP8, ("o_accum_buf",), "fp8, D_NOPE bytes per token row"),
        PlanBuffer("raw_nope1", 180224, B_TOPK * D_NOPE * _FP8, ("o_accum_buf",)),
        PlanBuffer("p_exchange_buf", 212992, 4 * 256 * 16, ("s",), "P halves exchanged between warps w and w^2"),
        PlanBuffer("s", 212992, B_H * B_TOPK * _BF16, ("p_exchange_buf",), "S bf16 64x64, K-major interleave"),
        PlanBuffer("rowwise_max_buf", 229376, 2 * B_H * _F32, (), "float[128]; also exchanges li"),
        PlanBuffer("is_token_valid", 229888, NUM_INDEX_BUFS * B_TOPK // 8, (), "1 bit per token"),
        PlanBuffer("tma_coord", 229920, NUM_INDEX_BUFS * B_TOPK * 4, (), "int per token"),
        PlanBuffer("scales", 230944, NUM_INDEX_BUFS * B_TOPK * (D_NOPE // 128), (), "e8m0, one per 128 dims"),
        PlanBuffer("tmem_start_addr", 231968, 16, (), "tcgen05.alloc writes the TMEM address here"),
        PlanBuffer("mbarriers", 231984, 25 * 8, (), "25 mbarriers x 8 B (MBARRIERS_V32)"),
    )


SMEM_V32 = SmemPlan("FlashMLA head64 V32", _v32_buffers(), 232192, _SRC)
"""The V32 shared-memory plan (232,192 B = 226.75 KiB) [kernel]."""
SMEM_V32.check()


def _mbarriers() -> dict[str, tuple[int, int]]:
    names = [("last_store_done", B_H * 2), ("q_tma", 1), ("q_utccp", 1)]
    names += [(f"rope_ready[{b}]", 1) for b in range(NUM_BUFS)]
    names += [(f"nope_ready[{b}]", 128) for b in range(NUM_BUFS)]
    names += [(f"raw_ready[{b}]", 1) for b in range(NUM_BUFS)]
    names += [(f"raw_free[{b}]", 128) for b in range(NUM_BUFS)]
    names += [(f"valid_coord_scale_ready[{i}]", 32) for i in range(NUM_INDEX_BUFS)]
    names += [(f"valid_coord_scale_free[{i}]", 128 + 128 + 1 + 1) for i in range(NUM_INDEX_BUFS)]
    names += [(f"qk_done[{b}]", 1) for b in range(NUM_BUFS)]
    names += [(f"so_ready[{b}]", 128) for b in range(NUM_BUFS)]
    names += [(f"sv_done[{b}]", 1) for b in range(NUM_BUFS)]
    base = SMEM_V32["mbarriers"].offset
    return {n: (base + 8 * i, count) for i, (n, count) in enumerate(names)}


MBARRIERS_V32: dict[str, tuple[int, int]] = _mbarriers()
"""mbarrier name -> (shared-memory offset, expected arrivals), in the plan's order (``config.h`` lines 187-193;
counts from ``kernel.cuh`` lines 43-62) [kernel]; the SASS polls 232,008 (rope_ready[0]) and commits to 232,136
(qk_done[0]) [sass]."""

TMEM_V32: tuple[TmemRegion, ...] = (
    TmemRegion("O", (0, 127), (O_COLUMN, Q_COLUMN - 1),
               "O accumulator 64x512 fp32 in Layout E: cols 0-127 = PV n-block 0 (lanes 0-63 dims 0-127, "
               "lanes 64-127 dims 128-255), cols 128-255 = n-block 1 (dims 256-383 | 384-511)"),
    TmemRegion("Q", (0, 127), (Q_COLUMN, Q_TAIL_COLUMN - 1),
               "Q NoPE bf16, two per cell: lanes 0-63 even 64-dim chunks, lanes 64-127 odd chunks"),
    TmemRegion("Q_tail", (0, 127), (Q_TAIL_COLUMN, P_COLUMN - 1),
               "Q RoPE bf16: lanes 0-63 dims 512-543, lanes 64-127 dims 544-575"),
    TmemRegion("P", (0, 127), (P_COLUMN, P_COLUMN + B_TOPK - 1),
               "QK result 64x128 fp32 in Layout E: P_lo in lanes 0-63, P_hi in lanes 64-127, token n at 400+n"),
    TmemRegion("free", (0, 127), (P_COLUMN + B_TOPK, TMEM_COLUMNS - 1), "48 unused columns"),
)
"""The V32 TMEM column map (``config.h`` lines 71-80; O's and P's halves as Layout E places them) [kernel];
budget 464 of 512 columns."""

# ---- tile layouts [kernel] config.h L82-157 ------------------------------------------------------------------
NOPE_TILE = CanonicalLayout("bf16", "K", "SW128", B_H, 64)
"""One 64 x 64 K-major SW128 tile of Q NoPE (row = head) or K NoPE (row = token): 8 KiB."""
ROPE_TILE = CanonicalLayout("bf16", "K", "SW64", B_H, 32)
"""One 64 x 32 K-major SW64 tile of RoPE dims (V32): 4 KiB."""
NOPE_VIEW = CanonicalLayout("bf16", "K", "SW128", 2 * B_H, 64)
"""The 128-row "dual view": tiles t and t+1 as one 128 x 64 operand (rows 64-127 = the odd 64-dim tile)."""
ROPE_VIEW = CanonicalLayout("bf16", "K", "SW64", 2 * B_H, 32)
"""The 128-row RoPE dual view: rows 64-127 = RoPE dims 32-63."""


def store_qk_operand(smem: SharedMemory, x, nope_at: int, rope_at: int) -> None:
    """Store Q or K (64 x 576) as FlashMLA does: eight 64x64 SW128 NoPE tiles, then two 64x32 SW64 RoPE tiles."""
    tile_bytes, rope_bytes = NOPE_TILE.nbytes, ROPE_TILE.nbytes
    for t in range(D_NOPE // 64):
        smem.write_tile(NOPE_TILE, x[:, 64 * t:64 * t + 64], nope_at + tile_bytes * t)
    for h in range(D_ROPE // 32):
        smem.write_tile(ROPE_TILE, x[:, D_NOPE + 32 * h:D_NOPE + 32 * h + 32], rope_at + rope_bytes * h)
