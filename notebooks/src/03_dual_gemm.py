# %% [markdown]
# # 03 · FlashMLA's dual GEMM: two products in one instruction
#
# FlashMLA's SM100 sparse-decode kernel for 64 heads (`head64`) computes the scores P = Q·Kᵀ of 64 heads × 64 KV
# tokens over 576 head dims with **18** `tcgen05.mma.ws` instructions of K = 16 per block of tokens. 18 × 16 = 288 is
# *half* of 576, and there is no second loop (FlashMLA `csrc/sm100/decode/head64/kernel.cuh` lines 531-573 at
# `9241ae3`). Learners ask three questions:
#
# * **Q1.** Why is the K extent halved with no second loop — where in FlashMLA's code do the "/2"s come from?
# * **Q2.** What does the P_lo/P_hi reduction cost, and why is it still worth it?
# * **Q3.** Does the memory calculation of `tA_frag` in `gemm.cuh` matter? CuTe builds the A fragment's TMEM layout
#   with `make_fragment_A(partition_shape_A(...))`, and the kernel then overwrites its data pointer with
#   `tmem_cols::Q` — what of CuTe's computation reaches the hardware (section 8)?
#
# **Running it.** Install simtc with its `notebooks` extra as the README says (`pip install -e ".[notebooks]"`:
# JupyterLab and ipywidgets), open this notebook (`jupyter lab notebooks/03_dual_gemm.ipynb`) and *Run All*: it
# takes about ten seconds and ends by asserting what it teaches. Section 3 ends with a widget to step through the
# kernel yourself.
#
# **Sources.** FlashMLA is cited from `deepseek-ai/FlashMLA` at commit `9241ae3` by file and lines (for example
# https://github.com/deepseek-ai/FlashMLA/blob/9241ae3/csrc/sm100/decode/head64/config.h), CUTLASS from
# `NVIDIA/cutlass` at `147f567` (the CUTLASS FlashMLA pins); open the lines beside the notebook. What they say is put
# in simtc's words; the code quoted is the short expressions the questions and the explanation turn on (`B_TOPK*2`,
# `tmem_cols::Q`, ...), and each is checked against simtc's numbers below. Tags as in
# `docs/sources.md`: **[kernel]** FlashMLA source, **[cutlass]** CUTLASS/CuTe code, **[doc]** PTX ISA 9.0,
# **[inferred]** our reading, not documented. One rule the technique rests on is **[inferred]**: that each lane half
# of a `.ws` M=64 MMA reads A from its own 64 lanes (notebook 02 §7). Nothing here has run on a Blackwell GPU: the
# model is simtc's replay of the kernel (`simtc.kernels.flashmla`, built from FlashMLA's source), executed bit by bit
# through the semantics layer and cycle by cycle on the engine (`simtc replay flashmla-head64` in a shell); every
# cycle count is the engine's timing model, whose parameters are labelled measured / documented / derived / assumed
# (notebook 04), and each statement of a cost below names the parameters it rests on.

# %%
import gzip
import json
import types
from pathlib import Path

import attrs
import numpy as np
import pycute
from IPython.display import display
from rich.table import Table

import simtc
from simtc.engine import Engine
from simtc.engine.handlers import parameters_of
from simtc.engine.issue import block_cost
from simtc.engine.parameters import LABELS, PARAMETERS, Timing
from simtc.engine.sensitivity import sensitivity
from simtc.engine.stepper import Stepper
from simtc.engine.tensor_pipe import mma_spec_of
from simtc.engine.timing import mma_ii_bounds, mma_spec
from simtc.errors import SimtcError
from simtc.isa.tcgen05 import Mma
from simtc.kernels.flashmla import (
    B_H,
    B_TOPK,
    D_NOPE,
    D_Q,
    D_ROPE,
    P_COLUMN,
    Q_COLUMN,
    Q_TAIL_COLUMN,
    QK_IDESC,
    SMEM_V32,
    TMEM_V32,
    q_copies,
    q_split,
    qk_mmas,
    read_p,
    replay_qk,
    split_dims,
)
from simtc.kernels.flashmla.alternatives import (
    collectors,
    compare,
    dup_q_allocation,
    exchange_band,
    exchange_cost,
    exchange_instructions,
    exchange_parameters,
    layout_f,
    no_exchange,
    prefill_overlap,
    ss_q_smem,
    tensor_pipe_per_block,
)
from simtc.kernels.flashmla.constants import INSTR_K
from simtc.kernels.flashmla.fragment import (
    LANE_STRIDE_16,
    a_reads_outside,
    qk_a_addresses,
    readdress_qk_a,
    split_address,
    tmem_address,
)
from simtc.kernels.flashmla.head64 import head64_program
from simtc.kernels.flashmla.plan import NOPE_TILE, NOPE_VIEW, ROPE_VIEW
from simtc.kernels.flashmla.replay import make_inputs, replay, stepper
from simtc.kernels.flashmla.story import exchange_share
from simtc.numerics import decode_bits, tensor_core_mma
from simtc.render.mma import InstrDescriptorView
from simtc.render.smem import DescriptorView
from simtc.render.step import EventView, StepView
from simtc.render.tmem import CpView, LayoutView, TmemMapView
from simtc.render.widget import StepperWidget, show_steps
from simtc.semantics import Cta, execute
from simtc.smem.memory import SMEM_CAPACITY
from simtc.tmem import cp_shape, datapath_layout

DATA = Path(simtc.__file__).resolve().parents[1] / "tests" / "data"      # the recordings and CuTe's oracle

# %% [markdown]
# ## 1. The request and one QK step
#
# A seeded request (`make_inputs`: bf16 Q of 64 heads × 576 dims, a paged fp8 KV cache with scales, top-k indices)
# and the QK step of its first block of 64 tokens, run through the semantics layer (`replay_qk`: the 18 Q copies, the
# 18 QK instructions, the commit, the softmax warps' P load). Section 2 reads its Tensor Memory (TMEM) and shared
# memory; section 3 steps through the same instructions inside the whole kernel.

# %%
inp = make_inputs("v32", blocks=4, seed=0)
q, k = inp.q, inp.k_rows(0, B_TOPK)    # Q (64 x 576) and block 0's dequantized K (64 tokens x 576), bf16 values
cta = Cta()
tm, sm = replay_qk(q, k, cta=cta)
copies, mmas = q_copies(), qk_mmas(1)   # the step's records (K in ring buffer 1)
nope1, rope1 = SMEM_V32["dequant1.nope"].offset, SMEM_V32["dequant1.rope"].offset
print(f"Q {q.shape}, K {k.shape}; {len(copies)} tcgen05.cp of Q, {len(mmas)} tcgen05.mma.ws: "
      f"{', '.join(m.label for m in mmas[:3])}, ..., {mmas[-1].label}")

# %% [markdown]
# ## 2. Where the "/2"s are: FlashMLA's code beside the placement it causes
#
# The halving is written into six places of FlashMLA's source. Each is cited below (file and lines at `9241ae3`),
# with the expression that carries the "/2" or "*2", and followed by simtc's picture of the placement it causes; the
# code cell checks that the numbers in the expression are the ones simtc's model of the kernel uses.
#
# ### 2.1 The instruction: N = B_TOPK × 2
#
# FlashMLA `csrc/sm100/decode/head64/config.h` lines 196-198 at `9241ae3` [kernel] define the QK MMA, `TiledMMA_P`,
# as one atom of FlashMLA's own `.ws` TS MMA (`SM100_MMA_F16BF16_WS_TS_NOELECT`, defined in
# `csrc/kerutils/include/kerutils/device/sm100/gemm.cuh` lines 13-43) with bf16 operands, an fp32 accumulator, both
# operands K-major, M = `B_H` and N = `B_TOPK*2`; the line's comment says the factor 2 is for the dual GEMM.
#
# One `tcgen05.mma.ws` (`WS`) with A in TMEM (`TS`), M = B_H = 64 heads and **N = B_TOPK × 2 = 128**: twice the 64
# tokens of a block. K is 16 per instruction: the atom's K is 256 bits of its element type (`gemm.cuh` lines 63-64
# at `9241ae3`), 16 bf16. simtc's descriptor of it:

# %%
assert (QK_IDESC.m, QK_IDESC.n, INSTR_K) == (B_H, B_TOPK * 2, 256 // 16)   # B_H, B_TOPK*2; 256 bits of bf16
InstrDescriptorView(QK_IDESC)

# %% [markdown]
# With `.ws` and M = 64 the result uses **Layout E** (PTX ISA 9.0 §9.7.16.10.5 [doc]; [cutlass]): D[m][n] goes to
# lane m + 64·⌊n/64⌋, column n mod 64. The 128 columns of D become two 64-column halves, one per lane half, both
# in TMEM columns 400–463 (`tmem_cols::P` is 400, `config.h` line 79 at `9241ae3`):

# %%
layout_e = datapath_layout(64, 2 * B_TOPK, ws=True)
assert P_COLUMN == 400 and layout_e.map(5, 70) == (69, 6) and layout_e.map(5, 6) == (5, 6)
LayoutView(layout_e, c0=P_COLUMN)

# %% [markdown]
# ### 2.2 Q into TMEM: a 128-row view of 64-row tiles
#
# FlashMLA `csrc/sm100/decode/head64/kernel.cuh` lines 466-487 at `9241ae3` [kernel] (the MMA warp, once per
# request): the warp makes one shared-memory descriptor of Q, viewing Q's bytes as the K-major SW128 atom tiled to
# `B_H*2` rows × 64 columns (the comment: the factor 2 leverages the dual GEMM), and then loops over
# `D_Q_SW128/128` tiles and, inside each, `64/16` subtiles. Each iteration is one 128-lane × 256-bit copy
# (`SM100_UTCCP_128dp256bit_1cta`): its source is the descriptor advanced by B_H·128 bf16 per tile and 16 per subtile
# (turned into the descriptor's 16-byte units: × 2 / 16), its TMEM column `tmem_cols::Q` plus 32 per tile and 8 per
# subtile; the loops' comments say each tile is 64 heads × 128 dims logically and 128 lanes × 64 bf16 in TMEM.
#
# Q sits in shared memory as eight 64 × 64 SW128 tiles (tile t = dims 64t … 64t+63 of the 64 heads, 8 KiB each).
# The copy's descriptor describes **B_H × 2 = 128 rows**, so rows 64–127 of its view are the *next* tile: the odd
# 64-dim chunk of the same heads. Each `tcgen05.cp.128x256b` moves 128 source rows × 32 bytes into 128 lanes × 8
# columns, source row r into lane r (PTX ISA 9.0 §9.7.16.9.2 [doc]):

# %%
CpView(cp_shape("128x256b"), max_rows=8)

# %% [markdown]
# So lanes 0–63 receive Q's even 64-dim chunks and lanes 64–127 the odd ones of the same heads: 64 heads × 128 dims
# per view, held as 128 lanes × 64 bf16. The loop bounds count the copies — D_Q_SW128/128 = 4 views × 64/16 = 4
# slices = 16, plus 2 of the RoPE dims (lines 489-512) = 18 — and the two expressions give each copy's source (the
# descriptor counts 16-byte units, hence `* 2 / 16` on a bf16 index) and TMEM column. simtc's copies against both:

# %%
q0 = SMEM_V32["q"].offset
D_Q_SW128 = 512                                     # config.h line 52 at 9241ae3
from_source = [((t * (B_H * 128) + s * 16) * 2, Q_COLUMN + t * 32 + s * 8)
               for t in range(D_Q_SW128 // 128) for s in range(64 // 16)]
nope_copies = [c for c in copies if "NoPE" in c.label]
in_simtc = [(c.desc.start - q0, c.taddr) for c in nope_copies]
print(f"{len(nope_copies)} NoPE copies (D_Q_SW128/128 x 64/16 = {D_Q_SW128 // 128} x {64 // 16}) + "
      f"{len(copies) - len(nope_copies)} RoPE copies; simtc's source offsets and columns are the cited expressions': "
      f"{in_simtc == from_source}")
for c in copies[:5] + copies[-2:]:
    print(f"  {c.label:<18} TMEM column {c.taddr:>3}  source start {c.desc.start:>6} B  {c.ptx()}")
print(f"the copy's view {NOPE_VIEW}: row 64 starts {NOPE_VIEW.offset(64, 0)} B after row 0 = one "
      f"{NOPE_TILE.rows}x{NOPE_TILE.cols} tile ({NOPE_TILE.nbytes} B)")
DescriptorView(copies[0].desc)

# %% [markdown]
# Read TMEM back after the copies (two bf16 per 32-bit cell, even dim in the low half) and ask: which Q dim is in
# lane L, column c? Lane h holds head h; lane 64 + h holds the same head h, 64 dims further.

# %%
lanes = np.broadcast_to(np.arange(128)[:, None], (128, P_COLUMN - Q_COLUMN))
cols = np.broadcast_to(np.arange(Q_COLUMN, P_COLUMN)[None, :], lanes.shape)
cells = tm.read_cells(lanes, cols, "Q in TMEM")
q_tmem = decode_bits(np.stack([cells & 0xFFFF, cells >> 16], axis=-1).astype(np.uint16).reshape(128, -1), "bf16")


def dims_in_tmem(half: int) -> np.ndarray:
    """The Q dim held at each bf16 position of columns 256-399 by lane half ``half``: NoPE first, then RoPE."""
    d = split_dims(half)                    # the half's 288 dims in the kernel's k order: RoPE (32), then NoPE (256)
    return np.r_[d[D_ROPE // 2:], d[:D_ROPE // 2]]


where = {half: dims_in_tmem(half) for half in (0, 1)}
for lane in (5, 69):
    half = lane // 64
    print(f"lane {lane:>3} (head {lane % 64}): column 256 holds dims {where[half][:2].tolist()}, column 288 "
          f"{where[half][64:66].tolist()}, column 384 (RoPE) {where[half][256:258].tolist()}")
q_placed = all(np.array_equal(q_tmem[64 * h:64 * h + 64], q[:, where[h]]) for h in (0, 1))
print("every cell of columns 256-399 equals Q at those dims:", q_placed)

# %% [markdown]
# ### 2.3 `Q_Tail`: Q over all 128 lanes, so half the columns
#
# FlashMLA `csrc/sm100/decode/head64/config.h` lines 71-80 at `9241ae3` [kernel] assign the kernel's TMEM columns,
# `struct tmem_cols`: O from column 0, `tmem_cols::Q` = 256, `tmem_cols::Q_Tail` = `256 + B_H*D_NOPE/2/128` and
# `tmem_cols::P` = 400; the struct's comment gives O the columns up to 256, Q the next `64*D_Q/256`, and P 400-464.
#
# Read `B_H*D_NOPE/2/128` as: 64 heads × 512 NoPE dims of bf16, two bf16 per 32-bit cell (/2), spread over **all 128
# lanes** (/128) = 128 columns. Q has 64 rows (heads) but fills 128 lanes, because each lane half holds half of every
# head's dims: the dual GEMM's halving is the /128 where a 64-row Q would need /64 (256 columns). The RoPE copies
# write behind it (`kernel.cuh` line 509 at `9241ae3`: their column is `tmem_cols::Q` plus `B_H*D_Q_SW128/2/128` plus
# 16 a tile and 8 a subtile), 64 × 64 RoPE dims / 2 / 128 = 16 columns ending at 399, where P begins (the comment's
# 64·D_Q/256 = 144 columns of Q). simtc's map of the kernel's TMEM:

# %%
q_tail = Q_COLUMN + B_H * D_NOPE // 2 // 128               # Q_Tail = 256 + B_H*D_NOPE/2/128
rope_columns = B_H * D_ROPE // 2 // 128
assert q_tail == Q_TAIL_COLUMN == 384 and q_tail + rope_columns == P_COLUMN == Q_COLUMN + 64 * D_Q // 256
assert [c.taddr for c in copies if "RoPE" in c.label] == [q_tail + 8 * s for s in range(2)]
assert [r.columns for r in TMEM_V32 if r.name in ("Q", "Q_tail", "P")] == [(256, 383), (384, 399), (400, 463)]
TmemMapView(regions=TMEM_V32)

# %% [markdown]
# ### 2.4 A: fragments of half the dims, and one loop over them
#
# FlashMLA `csrc/sm100/decode/head64/kernel.cuh` lines 537-552 at `9241ae3` [kernel] (the MMA warp, every block)
# issues the QK MMAs in two calls, RoPE part first. For each part the warp makes the A fragment with
# `make_fragment_A(partition_shape_A(...))`, for a tile of `B_H` rows × `D_ROPE/2` dims (lines 537-538), then
# `D_NOPE/2` dims (547-548); sets the fragment's data pointer to `tmem_cols::Q_Tail` (line 540), then `tmem_cols::Q`
# (line 550); views the K buffer's RoPE part through `SmemLayoutKTiles_DualGemm_SW64<2/2>`, the NoPE part through
# `SmemLayoutKTiles_DualGemm_SW128<512/64/2>` (section 2.5); and calls `utcmma_ts`, clearing the accumulator for the
# RoPE call and accumulating for the NoPE one. Between the two, lines 543-546 wait for the NoPE part of K.
#
# `utcmma_ts` (`csrc/kerutils/include/kerutils/device/sm100/helpers.cuh` lines 47-76 at `9241ae3`) is the one loop:
# for k over the fragment's k-blocks (`size<2>(tA_frag)`), one `cute::gemm` of A's k-block k with B's, accumulating
# from the second on. What of the fragment those instructions receive is Q3 (section 8).
#
# The A fragments are **B_H × D_ROPE/2** and **B_H × D_NOPE/2**: the instruction sees Q as 64 rows of 32 + 256 = 288
# dims — half of 576, because the other half sits in the other lane half at the same columns. `utcmma_ts` issues one
# instruction per K = 16 slice: 32/16 = 2 RoPE and 256/16 = 16 NoPE instructions, **18**, each reading 8 TMEM
# columns (16 bf16) from `Q_Tail` and from `Q` on; the first overwrites P (the RoPE call clears the accumulator),
# the rest add to it. simtc's 18 records, with the dims each lane half of A reads (section 2.2) beside the K dims the
# same rows of B read (section 2.5):

# %%
d16 = np.arange(16)


def b_dims(mma) -> tuple[np.ndarray, np.ndarray]:
    """The K dims that B rows 0-63 and 64-127 of a QK instruction read, from its descriptor's start address."""
    if "RoPE" in mma.label:                  # the RoPE view: rows 0-63 dims 512-543, rows 64-127 dims 544-575
        col = (mma.b_desc.start - rope1) // 2
        return D_NOPE + col + d16, D_NOPE + D_ROPE // 2 + col + d16
    rel = mma.b_desc.start - nope1           # view tile j = rel // 16 KiB holds K tiles 2j and 2j + 1
    tile, col = 2 * (rel // NOPE_VIEW.nbytes), (rel % NOPE_VIEW.nbytes) // 2
    return 64 * tile + col + d16, 64 * (tile + 1) + col + d16


def a_dims(mma, half: int) -> np.ndarray:
    """The Q dims lane half ``half`` holds in the 8 TMEM columns the instruction reads as A."""
    pos = 2 * (mma.a - Q_COLUMN)
    return where[half][pos:pos + 16]


qk_table = Table(title="The 18 QK instructions of a block: A from TMEM, B from the K view, D = P")
for col in ("instruction", "A columns", "lanes 0-63: Q dims", "B rows 0-63: K dims", "lanes 64-127: Q dims",
            "B rows 64-127: K dims", "P"):
    qk_table.add_column(col, justify="right" if col != "P" else "left")
meet = []
for m in mmas:
    lo, hi = b_dims(m)
    alo, ahi = a_dims(m, 0), a_dims(m, 1)
    meet.append(np.array_equal(alo, lo) and np.array_equal(ahi, hi))
    qk_table.add_row(m.label, f"{m.a}-{m.a + 7}", f"{alo[0]}-{alo[-1]}", f"{lo[0]}-{lo[-1]}", f"{ahi[0]}-{ahi[-1]}",
                     f"{hi[0]}-{hi[-1]}", "+=" if m.enable_input_d else "= (clear)")
display(qk_table)
rope_mmas, nope_mmas = [m for m in mmas if "RoPE" in m.label], [m for m in mmas if "NoPE" in m.label]
covered = np.sort(np.concatenate([np.r_[a_dims(m, 0), a_dims(m, 1)] for m in mmas]))
print(f"RoPE: D_ROPE/2/16 = {D_ROPE // 2 // INSTR_K} instructions from Q_Tail = {q_tail}; NoPE: D_NOPE/2/16 = "
      f"{D_NOPE // 2 // INSTR_K} from Q = {Q_COLUMN}; in every one, each lane half's Q dims are its B rows' K dims: "
      f"{all(meet)}; together they cover each of the {D_Q} dims once: {np.array_equal(covered, np.arange(D_Q))}")

# %% [markdown]
# ### 2.5 B: the dual-GEMM view of K, `<512/64/2>`
#
# FlashMLA `csrc/sm100/decode/head64/config.h` lines 120-125 at `9241ae3` [kernel] (the SW64 RoPE twin is lines
# 143-148) define `SmemLayoutKTiles_DualGemm_SW128<NUM_TILES>`: the K-major SW128 atom tiled to `B_H*2` rows ×
# `64*NUM_TILES` columns, rows first, coalesced.
#
# The dequant warps write K exactly like Q: eight 64 × 64 SW128 tiles (tile t = dims 64t … 64t+63 of the 64 tokens;
# `SmemLayoutKTiles_SW128`, lines 113-118, has `B_H` rows). The QK instruction's B reads the same bytes through a
# layout of **B_H × 2 = 128 rows** and `NUM_TILES` = **512/64/2 = 4** tiles of 64 dims: 512/64 = 8 tiles of K, /2
# because each 128-row tile of the view is two tiles of K stacked. Rows 0–63 of view tile j are K tile 2j (an even
# chunk), rows 64–127 are tile 2j+1 (the odd chunk) of the **same 64 tokens**. No byte is copied — the view aliases
# the tiles — and its K extent, 4 × 64 = 256 = D_NOPE/2, is A's. NoPE instruction k reads view tile ⌊k/4⌋ at K
# offset 16·(k mod 4) (the descriptor's start advances 32 B inside the swizzle atom); the RoPE view (`<2/2>` = 1
# tile of 128 rows × 32 dims) holds dims 512–543 in rows 0–63 and 544–575 in rows 64–127:

# %%
view = sm.read_tile(NOPE_VIEW, nope1)   # the 128 x 64 operand view 0 as the MMA sees it (bf16 values)
view_tiles = sorted({(m.b_desc.start - nope1) // NOPE_VIEW.nbytes for m in nope_mmas})
rope_tiles = sorted({(m.b_desc.start - rope1) // ROPE_VIEW.nbytes for m in rope_mmas})
print(f"view: {NOPE_VIEW.rows} rows (B_H*2) x {NOPE_VIEW.cols} dims; the NoPE instructions read view tiles "
      f"{view_tiles} (512/64/2 = {512 // 64 // 2}), the RoPE ones {rope_tiles} (2/2 = {2 // 2})")
print("view tile 0, rows 0-63 = K dims 0-63:", np.array_equal(view[:64], k[:, 0:64]),
      "| rows 64-127 = K dims 64-127:", np.array_equal(view[64:], k[:, 64:128]))
DescriptorView(nope_mmas[0].b_desc)

# %% [markdown]
# ### 2.6 P_lo and P_hi: two partial sums in the two lane halves
#
# FlashMLA `csrc/sm100/decode/head64/kernel.cuh` lines 166-174 at `9241ae3` [kernel] (the softmax warpgroup, every
# block) load P: two `B_TOPK/2`-column loads per warp (`tmem_ld_32dp32bNx`), of `tmem_cols::P` and `tmem_cols::P+32`.
# Warps 0 and 1 keep the first in `p` and the second in `p_peer`; warps 2 and 3 the other way round.
#
# After the 18 instructions, lanes 0–63 hold the even-chunk product **P_lo** (a sum over dims {0–63, 128–191,
# 256–319, 384–447} ∪ {512–543}) and lanes 64–127 the odd-chunk product **P_hi** (the other 288 dims), each for all 64
# tokens in columns 400–463. Warp w may read only its lane quadrant 32w … 32w+31 (PTX ISA 9.0 §9.7.16.8.1 [doc]), so
# warps 0, 1 hold P_lo of heads 0–63 and warps 2, 3 hold P_hi of the same heads. Each loads both halves of its
# columns (`B_TOPK/2` = 32 each) into `p` (kept) and `p_peer` (sent to warp w ⊕ 2, lines 178-195, section 5):

# %%
owner = Table(title="Who holds what (kernel.cuh lines 166-190; lanes and halves from Layout E)")
for col in ("warp", "TMEM lanes", "heads", "loads", "keeps tokens", "sends tokens", "to warp", "holds P for tokens"):
    owner.add_column(col)
for w in range(4):
    lane0 = 32 * w
    (h0, n0), (h1, _) = layout_e.inverse(lane0, 0), layout_e.inverse(lane0 + 31, 0)
    part = "P_lo" if n0 < B_TOPK else "P_hi"
    keep, send = ("0-31", "32-63") if part == "P_lo" else ("32-63", "0-31")
    owner.add_row(str(w), f"{lane0}-{lane0 + 31}", f"{h0}-{h1}", f"{part}, tokens 0-63", keep, send, str(w ^ 2), keep)
display(owner)

# %% [markdown]
# ## 3. Step through the 18 dual-GEMM instructions
#
# Which 18? In the kernel's Program (`simtc.kernels.flashmla.head64`, built from `kernel.cuh` lines 531-584 at
# `9241ae3`) the MMA warp, warp 4, issues per block: a wait on `rope_ready`, the **2 RoPE QK** instructions (`QK
# RoPE k=0, 1`), a wait on `nope_ready`, the **16 NoPE QK** instructions (`QK k=0` … `15`), a commit to `qk_done`,
# then — after the softmax has written S — 8 PV instructions (`PV k= n=`, O += S·V). The 18 dual-GEMM instructions are
# the QK ones. The kernel's other "18" are the `tcgen05.cp` of Q (section 2.2), issued once per request before the
# first block.
#
# `stepper("v32", 4)` runs the whole kernel for the 4-block request of section 4 on the engine, every cell's bits
# included, and lets you walk it one event at a time: `find(...)` / `to_next(...)` go to the next event matching a
# role, warp, barrier, opcode, kind or label; `state()` is the machine at the current step; `event()` the event that
# led there. First, the step where the Q copies have landed (the `q_utccp` barrier's phase completes): TMEM columns
# 256–399 of all 128 lanes are written, 8 columns per copy, each coloured by its copy.

# %%
s = stepper("v32", 4)
q_ready = s.find(barrier="q_utccp", kind="phase", start=0)
s.goto(q_ready)
StepView(s, timeline=False, smem=False)

# %% [markdown]
# Now the 18 issues of block 0's QK instructions, one `find` each. At its issue the instruction goes to the tensor
# pipe; its writes land *when it completes* (`lands`). The event names, from the record's footprint, the TMEM columns
# its A comes from, whether it reads D back (every instruction but the first accumulates into P) and the P it writes:

# %%
issues, n = [], q_ready
while len(issues) < 18:
    n = s.find(role="mma", opcode="tcgen05.mma", label="QK", kind="issue", start=n)
    issues.append(s.event(n))
nope_wait = s.find(role="mma", barrier="nope_ready", kind="resume", start=issues[1].step)
steps = Table(title="Block 0's QK instructions, issued by the MMA warp (stepper events)")
for col in ("step", "cycle", "record", "reads TMEM: A", "and D", "writes TMEM: D = P", "lands"):
    steps.add_column(col, justify="right" if col in ("step", "cycle") else "left")
for e in issues:
    a, d, (p,) = e.reads["tmem"][0], e.reads["tmem"][1:], e.writes["tmem"]
    steps.add_row(str(e.step), str(e.cycle), e.label, f"lanes {a['lanes'][0]}-{a['lanes'][1]}, columns "
                  f"{a['columns'][0]}-{a['columns'][1]}", "P (accumulates)" if d else "- (overwrites)",
                  f"lanes {p['lanes'][0]}-{p['lanes'][1]}, columns {p['columns'][0]}-{p['columns'][1]}",
                  f"at {e.lands}")
display(steps)
print(f"the RoPE pair issues at cycles {issues[0].cycle}-{issues[1].cycle}; the MMA warp then waits on nope_ready "
      f"(the dequant warps' K), resumes at cycle {s.event(nope_wait).cycle} and issues the 16 NoPE ones one per "
      f"cycle from {issues[2].cycle}")
EventView(issues[2], total=len(s))

# %% [markdown]
# Every instruction reads its A from 8 columns of **all 128 lanes** — both lane halves at once — and writes all of P
# (lanes 0–127, columns 400–463). Colour each Q cell by the instruction that reads it: the 18 instructions walk across
# the 144 columns of Q once, each taking one 16-dim slice from each lane half. That is the whole K loop.

# %%
read_by = np.full((128, 512), -1)
for i, e in enumerate(issues):
    a = e.reads["tmem"][0]                  # A (the others: D, read back when the instruction accumulates)
    read_by[a["lanes"][0]:a["lanes"][1] + 1, a["columns"][0]:a["columns"][1] + 1] = i
reads_q_once = bool((read_by[:, Q_COLUMN:P_COLUMN] >= 0).all() and (read_by[:, :Q_COLUMN] < 0).all()
                    and (read_by[:, P_COLUMN:] < 0).all())
print("the 18 instructions read every cell of columns 256-399 (and nothing else):", reads_q_once)
TmemMapView(types.SimpleNamespace(last_writer=read_by, instructions=[e.label for e in issues]), by="writer",
            title="Q in TMEM, coloured by the QK instruction that reads each cell as A")

# %% [markdown]
# Then the completions. The first one (`QK RoPE k=0`) fills P — columns 400–463 of both lane halves, P_lo and P_hi
# at once — and each later one accumulates into the same cells, so P's last writer moves along the 18 instructions
# while no other cell changes. The pictures of the state after the first and after the last completion
# (`show_steps`: the event, the warps, the barriers, TMEM by last writer):

# %%
done = []
n = issues[0].step
while len(done) < 18:
    n = s.find(role="mma", opcode="tcgen05.mma", label="QK", kind="complete", start=n)
    done.append(s.event(n))
p_writers, q_unchanged = [], []
for e in done:
    st = s.goto(e.step)
    p_writers.append(sorted({st.writers[i] for i in st.writer_ids[:, P_COLUMN:P_COLUMN + B_TOPK].ravel().tolist()}))
    q_unchanged.append(bool((st.tmem_writer[:, Q_COLUMN:P_COLUMN] <= q_ready).all()))
writers_after = [w[0].split(" ", 1)[1] for w in p_writers]
print(f"after each completion P (128 lanes x 64 columns) has one last writer: {all(len(w) == 1 for w in p_writers)}, "
      f"in completion order {', '.join(writers_after[:3])}, ..., {writers_after[-1]}; Q's cells keep their copies as "
      f"last writers: {all(q_unchanged)}; block 0's QK: issued from cycle {issues[0].cycle}, done at {done[-1].cycle}")
show_steps(s, [(done[0].step, "the first QK instruction completes: P written in both lane halves"),
               (done[-1].step, "the 18th completes: P_lo and P_hi final")], timeline=False, smem=False)

# %% [markdown]
# **Step yourself.** The widget drives the same stepper, placed at block 0's first QK issue (the cells above and
# below ask for steps by number, so moving it changes nothing they show). Drag the slider over every event of the
# run, or press **next MMA** to go to the next `tcgen05.mma` issue (17 presses walk the dual GEMM, 8 more the PV).
# The 18 issues come a cycle or so apart and an MMA writes TMEM only when it completes, so to watch P fill press
# **MMA lands** (the next MMA completion: 18 presses, `QK RoPE k=0` to `QK k=15`, the TMEM map recoloured each time).
# **next completion** goes to the next barrier phase; or pick a role or barrier in *next event of* and press **go**. The
# picture below the controls is the `StepView` of the current step, with the whole run's timeline and a cursor at its
# cycle. (Where no live kernel runs — the documentation site — the cell shows the picture of its first step, and
# `StepperWidget.static(steps=[...])` draws chosen steps, as above.)

# %%
widget = StepperWidget(s, start=issues[0].step)
display(widget)

# %% [markdown]
# ## 4. One instruction, two independent products — and P bit for bit
#
# Each lane half reads A from **its own** 64 lanes **[inferred]** (notebook 02 §7: CUTLASS's `.ws` fragments,
# `tcgen05.cp .warpx2::02_13`, and FlashMLA's own comment at `gemm.cuh` line 59 at `9241ae3`, which says the A
# fragment should really be the duplicated kind). Lanes 0–63 hold Q's even chunks and lanes 64–127 the odd ones
# (section 2.2); B rows 0–63 are K's even chunks and rows 64–127 the odd ones (section 2.5). So lanes 0–63 compute
# Q_even·K_evenᵀ and lanes 64–127 Q_odd·K_oddᵀ: two independent 64×64×16 products in one instruction, both landing in
# columns 400–463.
#
# Check it on the model: run **one** instruction (NoPE k = 0, overwriting P) on a fresh copy of the step, and compare
# each lane half with its own 64×64×16 `tensor_core_mma`:

# %%
one = Cta()
replay_qk(q, k, cta=one)
k0 = nope_mmas[0]
execute(attrs.evolve(k0, enable_input_d=False), one, warp=4)
d_lo, d_hi = read_p(one.tmem)           # lanes 0-63 and 64-127 of columns 400-463
(a_lo, a_hi), (b_lo, b_hi) = (a_dims(k0, 0), a_dims(k0, 1)), b_dims(k0)
print(k0.ptx())
for half, a, b in ((0, a_lo, b_lo), (1, a_hi, b_hi)):
    rows = f"{64 * half}-{64 * half + 63}"
    print(f"lanes {rows:<6}: A = Q[:, {a[0]}-{a[-1]}] (TMEM lanes {rows}), B = K[:, {b[0]}-{b[-1]}] "
          f"(view rows {rows}) -> TMEM columns {P_COLUMN}-{P_COLUMN + B_TOPK - 1}")
two_products = {half: np.array_equal(d.view(np.uint32), tensor_core_mma(q[:, a], k[:, b]).view(np.uint32))
                for half, d, a, b in ((0, d_lo, a_lo, b_lo), (1, d_hi, a_hi, b_hi))}
print("each half bit-exact with its own 64x64x16 product:", two_products)

# %% [markdown]
# After all 18: lane half 0 has accumulated P_lo over its 288 dims, half 1 P_hi over the other 288. `q_split` gives
# each half's dims in the kernel's k order; a chain of `tensor_core_mma` over them must equal what the softmax warps'
# `tcgen05.ld` returns, bit for bit. The software adds the halves: **P = P_lo + P_hi = Q·Kᵀ**.

# %%
p_lo, p_hi = read_p(tm)
(q_lo, q_hi), (k_lo, k_hi) = q_split(q), q_split(k)
p_exact = {"P_lo": np.array_equal(p_lo.view(np.uint32), tensor_core_mma(q_lo, k_lo).view(np.uint32)),
           "P_hi": np.array_equal(p_hi.view(np.uint32), tensor_core_mma(q_hi, k_hi).view(np.uint32))}
exact = q.astype(np.float64) @ k.astype(np.float64).T
p_sum = p_lo + p_hi
one_chain = tensor_core_mma(q, k)        # what a single 576-long chain (36 instructions) would give
print("bit-exact:", p_exact, f"| dims per half: {q_lo.shape[1]} + {q_hi.shape[1]} = {D_Q}")
print(f"P_lo + P_hi vs float64 Q.K^T: max abs error {np.abs(p_sum - exact).max():.2e} (|P| up to "
      f"{np.abs(exact).max():.1f})")
print(f"P_lo + P_hi equals one 576-long chain in {np.mean(p_sum == one_chain):.0%} of the entries "
      "(a different summation order)")

# %% [markdown]
# The same holds for the whole kernel: `replay` runs all six roles (index, raw fp8 TMA, RoPE TMA, dequant, MMA,
# softmax) on the engine for a 4-block request, checks P bit-exact in every block, and O and LSE against a float64
# attention:

# %%
run = replay("v32", blocks=4, seed=0, keep_engine=True)
eng = run.engine
print(run.summary())

# %% [markdown]
# ## 5. Q2: what the reduction costs, lane by lane
#
# ### 5.1 The per-lane argument
#
# The softmax warpgroup has 128 threads and a block's P has 64 heads × 64 tokens = 4,096 scores: 32 per thread. Each
# thread owns one TMEM lane (warp w reads lanes 32w … 32w+31, PTX ISA 9.0 §9.7.16.8.1 [doc]), and what its lane holds
# decides its work:
#
# * **dual GEMM** (the kernel): lane t holds *half the K range* for *64 tokens* — P_lo (t < 64) or P_hi (t ≥ 64) of
#   head t mod 64. The thread loads 64 values (two `tcgen05.ld.32x32b.x32`), keeps the 32 tokens it will own, sends
#   the other 32 to its partner t ⊕ 64 through shared memory (8 × 16-byte `st.shared`), takes the partner's 32 (8 ×
#   16-byte `ld.shared`) after a pair barrier, and adds them (16 packed `FADD2`): FlashMLA `kernel.cuh` lines 178-195
#   at `9241ae3` [kernel];
# * **duplicated Q** (CUTLASS's intended `.ws` TS use): lane t would hold the *whole K range* for 32 tokens — one x32
#   load, nothing to exchange — but every lane then needs all 288 columns of Q (section 6);
# * **a second loop** (instructions of N = 64, Q read from shared memory as FlashMLA's earlier SM100 kernel did): the
#   same 32 full scores per lane and no exchange, for twice the QK instructions (36), each reading A from shared memory.
#
# What the exchange adds per thread and per block, from the kernel's Program:

# %%
program = eng.program
per_block = exchange_instructions(program)
for kind, n in per_block.items():
    print(f"{n:>3}  {kind}")
sts_bytes = 16 * per_block["STS.128"]                                         # bytes each thread stores (and loads)
port_rate = eng.timing["smem_port_bytes_per_cycle"]
ldst_rate = eng.timing["tcgen05_ldst_columns_per_cycle"]
port_cycles = 2 * 128 * sts_bytes / port_rate                                 # the warpgroup's stores and loads
path_cycles = 4 * B_TOPK // 2 / ldst_rate                                     # the 4 warps' extra x32 loads
label = {n: PARAMETERS["sm100"][n].label for n in ("smem_port_bytes_per_cycle", "tcgen05_ldst_columns_per_cycle")}
print(f"{sum(per_block.values()):>3}  instructions per softmax thread per block: {sts_bytes} B out and {sts_bytes} B "
      f"in per thread; for the warpgroup {2 * 128 * sts_bytes:,} B through the shared-memory port = {port_cycles:.0f} "
      f"port cycles at {port_rate} B/cycle (smem_port_bytes_per_cycle [{label['smem_port_bytes_per_cycle']}]), "
      f"and 4 x 32 extra TMEM columns = {path_cycles:.0f} cycles of the TMEM load path at {ldst_rate} column/cycle "
      f"(tcgen05_ldst_columns_per_cycle [{label['tcgen05_ldst_columns_per_cycle']}]); the "
      f"exchange buffer {SMEM_V32['p_exchange_buf'].size:,} B shares its bytes with S ({SMEM_V32['s'].size:,} B)")

# %% [markdown]
# ### 5.2 The exchange on the engine, block by block
#
# The stepper of section 3 runs the same 4-block request as `run` (the same Program and timing). For each
# block and softmax warp, four stepper queries find the events that bound the exchange — the first and second P loads
# completing, the first exchange store issuing, the pair barrier releasing the warp, the add block issuing — and two
# more the softmax's span, from seeing `qk_done` to arriving on `so_ready`. The columns, as means over warps 0–3:
#
# * **2nd tcgen05.ld** — how much later the warp's second P load completes than its first. The TMEM load path serves
#   loads in issue order (`simtc.engine.tmem_path`), so each warp's second x32 load waits behind the other three warps'
#   first ones: 4 warps × 32 columns ÷ 1 column per cycle = **128 cycles** (the `path_cycles` above), in every block.
# * **stores + pair barrier** — first `st.shared` issued → the pair barrier releases the warp: the 8 stores issue,
#   then the warp waits until its partner's stores have passed the shared-memory port and are visible.
# * **loads → add** — the release → the add block issues: the 8 `ld.shared` and their data through the port.
# * **exchange** — the three together, what `alternatives.exchange_cost` measures; **softmax span** — `qk_done` seen
#   → `so_ready` arrived (P in, S out), the part of the loop the exchange lengthens.
# * **alongside** — who else draws from the shared-memory port while it runs: the stepper's state at the first store
#   says whether the dequant warps are converting the next block's K (their LDS/STS) and how many TMA copies land.

# %%
def cycle_of(start, **where):
    """The cycle and step of the next event after ``start`` matching ``where`` (a stepper query)."""
    n = s.find(start=start, **where)
    return s.event(n).cycle, n


cost = Table(title="The exchange per block (mean of warps 0-3), cycles from stepper queries on the engine's run")
for col in ("block", "2nd tcgen05.ld", "stores + pair barrier", "loads -> add", "exchange", "softmax span", "share",
            "alongside (at the first store)"):
    cost.add_column(col, justify="left" if col.startswith("alongside") else "right")
rows = {w: [] for w in range(4)}
for w in range(4):
    n = 0
    for _block in range(run.blocks):
        seen, n = cycle_of(n, role="softmax", warp=w, barrier="qk_done", kind="resume")
        ld1, _ = cycle_of(n, role="softmax", warp=w, label="P columns 400-431", kind="complete")
        ld2, _ = cycle_of(n, role="softmax", warp=w, label="P columns 432-463", kind="complete")
        st0, first_store = cycle_of(n, role="softmax", warp=w, label="p_peer[0:4]", kind="issue")
        rel, _ = cycle_of(n, role="softmax", warp=w, label="pair barrier", kind="resume")
        add_at, _ = cycle_of(n, role="softmax", warp=w, opcode="// cuda_core add, mask, row max", kind="issue")
        out, n = cycle_of(n, role="softmax", warp=w, barrier="so_ready", kind="issue")
        rows[w].append((ld2 - ld1, rel - st0, add_at - rel, out - seen, first_store))
per_warp = np.array([[r[:4] for r in rows[w]] for w in range(4)], dtype=float)   # (warp, block, span)
mean = per_warp.mean(axis=0)
exchange_cycles = mean[:, 0] + mean[:, 1] + mean[:, 2]
spans = mean[:, 3]
alongside, here = [], s.position              # (the widget's step, given back below)
for b in range(run.blocks):
    st = s.goto(rows[0][b][4])
    dequant = sorted({w["status"] for w in st.warps if w["role"] == "dequant"})
    alongside.append((dequant, len(st.units["tma"])))
    cost.add_row(str(b), f"{mean[b, 0]:.0f}", f"{mean[b, 1]:.0f}", f"{mean[b, 2]:.0f}", f"{exchange_cycles[b]:.0f}",
                 f"{spans[b]:.0f}", f"{exchange_cycles[b] / spans[b]:.0%}",
                 f"dequant warps {'/'.join(dequant)}, {alongside[-1][1]} TMA copies in flight")
s.goto(here)
display(cost)
o_first, _ = cycle_of(0, role="softmax", warp=0, label="O chunk 0", kind="issue")
o_rescale = cycle_of(s.find(start=0, role="softmax", warp=0, label="O chunk 0", kind="issue"), role="softmax", warp=0,
                     opcode="tcgen05.fence::before_thread_sync", kind="issue")[0] - o_first
print(f"mean {exchange_cycles.mean():.0f} cycles per block (alternatives.exchange_cost of the same run: "
      f"{exchange_cost(eng):.0f}); the request takes {run.cycles_whole:,} cycles, "
      f"{run.cycles_per_block_steady:,.0f} per block in the steady state (between sv_done phases)")
print(f"block {run.rescale_blocks} also rescales O (4 chunks of O loaded, scaled, stored back through the TMEM path): "
      f"{o_rescale:,} cycles of warp 0's span")

# %% [markdown]
# Reading the table: the **128** is the TMEM path's arithmetic above, the same in every block. The shared-memory part
# is shortest in the last block, where nothing else runs beside the exchange (the dequant warps are done, no TMA copy
# lands): that is the exchange with the port to itself. In the earlier blocks the dequant warpgroup is converting the
# next block's K while the exchange runs, and its loads and stores — and the TMA copies' writes — take port cycles the
# exchange's stores and loads then wait for. The softmax span of the block that rescales O is long by the rescale, not
# by the exchange (printed above).
#
# ### 5.3 What it costs the whole kernel
#
# The exchange's cycles lie on the softmax warps' path; how many of them show in the kernel's time? Take the same
# Program without the exchange — no second P load, stores, pair barrier or loads, and the add block without its 16
# FADD2 (`alternatives.no_exchange`, the records `alternatives.exchange_records` lists) — and run it on the engine
# with the same O rescale (timing only: without the exchange the numbers would be wrong, the time is what we ask
# for). The difference is what each lane holding full scores would save, if it could. `story.exchange_share` makes
# the statement, with the whole each fraction is of: the steady-state block (the mean of blocks 1-3, block 2's O
# rescale included, as this request's data decides) or the whole request. `simtc tour` prints the same statement of
# the same replay:

# %%
without = no_exchange(program)
share = exchange_share(run)


def per_block_steady(prog, timing=None) -> float:
    """Cycles per block between the sv_done phases of a timing-only run of ``prog`` (stepper queries)."""
    st = Stepper.for_program(prog, mode="timing", timing=timing)
    at, n = [], 0
    while (n := st.find(barrier="sv_done", kind="phase", start=n)) is not None:
        at.append(st.event(n).cycle)
    return (at[-1] - at[0]) / (len(at) - 1)


without_steady = per_block_steady(without)
saved = share.saved_per_block
on_path = run.critical_path.get("softmax", 0) / sum(run.critical_path.values())
print(share.text())
print(f"the stepper's sv_done phases of the Program without the exchange: {without_steady:,.0f} cycles per "
      f"steady-state block, as exchange_share's replay; the mean of this table's exchange column: "
      f"{exchange_cycles.mean():.0f}. Most of the exchange shows because the softmax warps carry the run's critical "
      f"path ({on_path:.0%} of its events: {run.critical_path}); the rest hides behind the other roles' work")

# %% [markdown]
# **The 16 `FADD2`.** They sit inside the CUDA-core block that adds the halves, masks and takes the row max, so the
# spans above end where they begin. What they add to that block comes from the issue model
# (`simtc.engine.issue.block_cost`: issue-slot cycles, the cycles each pipe is held, the dependent chain's latency, and
# what bounds the block alone) — the block as the kernel has it, and without them:

# %%
adds = {id(r): r for r in program.role("softmax").records if getattr(r, "name", "") == "add, mask, row max"}
add = next(iter(adds.values()))
no_fadd2 = next(r for r in without.role("softmax").records if getattr(r, "name", "") == add.name)
with_fadd2, without_fadd2 = block_cost(add, eng.timing), block_cost(no_fadd2, eng.timing)
for what, c in (("with the 16 FADD2", with_fadd2), ("without them", without_fadd2)):
    print(f"{what:<18} issue {c.issue:>3}, pipes {dict(c.pipes)}, chain {c.chain:>3} -> {c.duration} cycles "
          f"(bound: {c.bound})")
fadd2_cycles = with_fadd2.duration - without_fadd2.duration


def fadd2_at(t):
    return block_cost(add, t).duration - block_cost(no_fadd2, t).duration


add_reads = parameters_of(add)
fadd2_moves = [n for n in add_reads if any(fadd2_at(eng.timing.scaled(n, f)) != fadd2_cycles for f in (0.5, 2))]
add_rests = [f"{n} [{PARAMETERS['sm100'][n].label}]" for n in fadd2_moves]
print(f"the FADD2 add {fadd2_cycles} cycles to the block alone; of the {len(add_reads)} parameters the block's cost "
      f"reads, halving or doubling these moves that figure: {', '.join(add_rests)}")

# %% [markdown]
# **What the exchange's cycles rest on.** `exchange_parameters` lists every timing parameter the exchange's records
# read — the extra `tcgen05.ld`, the `st.shared` / `ld.shared`, the pair barrier and the add block — with its value
# and label. Halving and doubling each one in turn and rerunning the same Program (timing only) shows which of them
# the figure actually moves with:

# %%
rests = exchange_parameters(program)


def exchange_at(t):
    return exchange_cost(Engine(program, mode="timing", check=False, timing=t).run())


ex_base = exchange_at(eng.timing)
ex_rows = sensitivity(exchange_at, eng.timing, names=[p["name"] for p in rests], base=ex_base)
ex_table = Table(title=f"The exchange's {ex_base:.0f} cycles per block: the parameters they rest on")
for col in ("parameter", "value", "unit", "label", "x0.5", "x2"):
    ex_table.add_column(col, justify="right" if col in ("value", "x0.5", "x2") else "left")
for row in ex_rows:
    ex_table.add_row(row.name, f"{row.value:g}", row.unit, row.label, f"{row.down:+.1%}", f"{row.up:+.1%}")
display(ex_table)
rests_text = ", ".join(f"{p['name']} [{p['label']}]" for p in rests)
top = ex_rows[0]
print(f"{ex_base:.0f} cycles per block rest on {rests_text}; they move most with {top.name} [{top.label}] "
      f"(x0.5: {top.down:+.0%}, x2: {top.up:+.0%}): the exchange is a round trip through shared memory, whose "
      "one port the MMAs' operands, the TMA writes and the dequant also use")

# %% [markdown]
# **The exchange's cost with its band.** Halving and doubling shows what the figure moves with; the band says how far it
# could be off. On sm100 every parameter has a label: the CUDA-core, shared-memory latency and barrier values measured
# on the H200 (`tests/data/h200_calibration.json`) are labelled *assumed* here, being taken as equal on a B200.
# `exchange_band` moves each assumed parameter by x/÷1.25 and each derived one by x/÷1.10 (the rule `simtc predict`
# uses), reruns timing-only replays and combines the effects root-sum-square:

# %%
eb = exchange_band("v32", 4)
print(f"the exchange: {eb['value']:.0f} cycles per block, band {eb['low']:.0f}-{eb['high']:.0f}; it rests on "
      f"{eb['parameters']} parameters, {eb['measured_on_sm90']} of them measured on the H200 and taken as equal on "
      f"a B200; the band comes most from {', '.join(r['name'] + ' [' + r['label'] + ']' for r in eb['rests_on'][:3])}")
assert eb["low"] <= eb["value"] <= eb["high"] and eb["high"] > eb["value"]

# %% [markdown]
# ## 6. The alternatives, on the same inputs, engine and checker
#
# Is the exchange worth its cycles? Compare the designs that avoid it (FlashMLA's earlier SM100 kernel kept Q in
# shared memory: `csrc/sm100/decode/sparse_fp8/splitkv_mla.cu` at `fd249aa`; `simtc.kernels.flashmla.alternatives`,
# also `simtc compare flashmla-head64` in a shell). Each variant is the kernel's Program transformed and replayed on
# the same 4-block request — or, where it does not fit, the refusal simtc's TMEM allocator and `tcgen05.cp` give,
# with the rule broken:
#
# * **duplicated-q** — CUTLASS's intended `.ws` TS use: Q in *both* lane halves, 36 QK MMAs of N = 64, no exchange;
# * **ss-q-smem** — the earlier SM100 kernel (FlashMLA `splitkv_mla.cu` at `fd249aa`): Q resident in shared memory,
#   36 SS MMAs of N = 64 (the "second loop"), no Q copies, no exchange;
# * **layout-f** — non-`.ws` M = 64 (half datapath), Q in one slab (refused) or split over two slabs;
# * **prefill-overlap** — the prefill kernel's schedule: P freed right after its TMEM loads, QK(i+1) before PV(i);
# * **b0-b1-collectors** — consecutive `.ws` MMAs alternate the two B collectors.

# %%
variants = {v.name: v for v in compare("v32", blocks=4, seed=0)}


def num(x, fmt=",.0f"):
    return "—" if x is None else format(x, fmt)


alt = Table(title="FlashMLA head64 V32 variants, 4 blocks; cycles are the engine's timing model")
for col in ("variant", "TMEM cols", "SMEM plan B", "fits", "MMAs/blk", "pipe/blk", "cycles/blk", "exch. instr",
            "exch. cyc", "B/QK MMA", "MMA SMEM B/blk"):
    alt.add_column(col, justify="left" if col in ("variant", "fits") else "right", no_wrap=col == "variant")
for v in variants.values():
    alt.add_row(v.name, str(v.tmem_columns), f"{v.smem_bytes:,}", "yes" if v.fits else "NO", str(v.mma_per_block),
                num(v.tensor_pipe_busy_per_block), num(v.cycles_per_block), str(v.exchange_instructions),
                num(v.exchange_cycles_per_block), num(v.smem_bytes_per_qk_mma), num(v.smem_operand_bytes_per_block))
display(alt)
for v in variants.values():
    print(f"{v.name:<18} checked: {v.checks}")
for name in ("dual-gemm", "duplicated-q", "ss-q-smem"):
    print(f"\n{name}: {variants[name].why}")

# %% [markdown]
# ### 6.1 The tensor pipe's spans, from the Program and the timing parameters
#
# *pipe/blk* is how long the tensor pipe is busy per block. It is fixed by which MMAs a block issues and what each
# one costs in the pipe: its initiation interval (II), the largest of four bounds (`simtc.engine.timing.mma_ii_bounds`)
# —
#
# * **compute**: 2·M·N·16 FLOP at `mma_flop_per_cycle_per_k` × 16 = 8,192 FLOP/cycle (a `.ws` M = 64 instruction uses
#   64 rows of the datapath);
# * **port**: the operand bytes read from shared memory (B: N rows × 32 B; A too when it comes from shared memory) at
#   `smem_port_bytes_per_cycle`;
# * **B collector** (`.ws`): the N columns stream, plus `ws_b_fill_startup`, less one 8-column group, before the next
#   fill may start — unless consecutive MMAs alternate the two collectors;
# * **front end**: `mma_min_ii`.
#
# Summed over a block's MMAs this gives the pipe's busy time with the port to itself; the engine, with its one
# shared-memory port that the TMA writes, the dequant and the softmax also use, adds the cycles an MMA waited for its
# operands. Computed from each variant's Program, and checked against the engine run with the shared port switched off
# (`Timing("sm100").without("shared_port")`: each kind of consumer gets a port of its own):

# %%
timing = Timing("sm100")
kinds = Table(title="Tensor pipe per block: each MMA's II from the timing parameters (dual GEMM and second loop)")
for col in ("variant", "MMA", "per block", "K=16 steps (dims)", "compute", "port", "B collector", "front end", "II",
            "cycles"):
    kinds.add_column(col, justify="left" if col in ("variant", "MMA") else "right")
transforms = {"dual-gemm": None, "ss-q-smem": ss_q_smem, "layout-f-split": layout_f,
              "prefill-overlap": prefill_overlap, "b0-b1-collectors": collectors}
pipe, per_kind = {}, {}
for name, fn in transforms.items():
    prog = program if fn is None else fn(program)
    groups: dict = {}
    prev = None
    for r in prog.role("mma").records:
        if isinstance(r, Mma):
            spec = mma_spec_of(r, prev)
            prev = r
            key = ("PV" if r.label.startswith("PV") else "QK", spec)
            groups[key] = groups.get(key, 0) + 1
    closed = 0.0
    for (what, spec), count in groups.items():
        bounds = mma_ii_bounds(spec, None, timing)
        ii = max(bounds.values())
        closed += count * ii / run.blocks
        if name in ("dual-gemm", "ss-q-smem"):
            kinds.add_row(name, f"{what} {spec.m}x{spec.n} {spec.operands} ({spec.collector})",
                          f"{count / run.blocks:g}", f"{count // run.blocks} ({16 * count // run.blocks})",
                          str(bounds["compute"]), str(bounds["smem_port"]), str(bounds.get("b_collector", "")),
                          str(bounds["front_end"]), str(ii), f"{count * ii / run.blocks:,.0f}")
    alone = tensor_pipe_per_block(Engine(prog, mode="timing", check=False, timing=timing.without("shared_port")).run())
    shared = variants[name].tensor_pipe_busy_per_block
    pipe[name] = (closed, alone, shared)
    per_kind[name] = [(what, count // run.blocks, max(mma_ii_bounds(spec, None, timing).values()))
                      for (what, spec), count in groups.items()]
display(kinds)
totals = Table(title="Tensor pipe busy per block: closed form = the engine with the port to itself; + port waits")
for col in ("variant", "closed form", "engine, own port", "engine (pipe/blk)", "waited for the port"):
    totals.add_column(col, justify="left" if col == "variant" else "right")
for name, (closed, alone, shared) in pipe.items():
    totals.add_row(name, f"{closed:,.0f}", f"{alone:,.0f}", f"{shared:,.1f}", f"{shared - closed:,.1f}")
display(totals)
dual_qk, ss_qk, dup_qk, pv = (mma_ii_bounds(mma_spec("sm100", 64, n, operands=ops, ws=True), None, timing)
                              for n, ops in ((128, "TS"), (64, "SS"), (64, "TS"), (256, "SS")))
for name in ("dual-gemm", "ss-q-smem"):
    terms = " + ".join(f"{c} {what} x {ii}" for what, c, ii in per_kind[name])
    print(f"{name}: {terms} = {pipe[name][0]:,.0f} cycles per block")
print(f"a dual QK (64x128 TS) is bound by its B collector: stream {dual_qk['compute']} + ws_b_fill_startup "
      f"{timing['ws_b_fill_startup']} - one 8-column group = {dual_qk['b_collector']}; an SS QK of N = 64 by the port: "
      f"A 2 KiB + B 2 KiB at {port_rate} B/cycle = {ss_qk['smem_port']}; a PV (64x256 SS) by the port: S 2 KiB + "
      f"V 8 KiB = {pv['smem_port']}")
print(f"duplicated Q, had it fitted: 36 TS QK of N = 64 x {max(dup_qk.values())} = {36 * max(dup_qk.values())} cycles "
      f"(bound by the B collector: each instruction pays the fill startup, and there are twice as many)")

# %% [markdown]
# ### 6.2 Lane by lane: what each design asks of a softmax thread, and what it costs instead
#
# The per-lane argument of section 5.1 with the engine's numbers: the dual GEMM's price is the exchange — cycles on
# the softmax warps' path, most of them on the kernel's time — while the designs without it pay in capacity the
# block does not have, or in tensor-pipe time:

# %%
dual, dup, ss = variants["dual-gemm"], variants["duplicated-q"], variants["ss-q-smem"]
chunks, refusal = dup_q_allocation("v32")
lanes_t = Table(title="Per softmax thread (one TMEM lane) and per block")
for col in ("design", "lane holds", "P loads", "exchange per thread", "QK MMAs", "pipe (closed form)", "fits",
            "cycles/blk"):
    lanes_t.add_column(col, justify="left" if col in ("design", "lane holds", "exchange per thread", "fits")
                       else "right")
lanes_t.add_row("dual GEMM", "P_lo or P_hi, 64 tokens", "2 x32",
                f"{sum(per_block.values())} instr., {sts_bytes} B out + in, {exchange_cycles.mean():.0f} cyc",
                "18", f"{pipe['dual-gemm'][0]:,.0f}", f"yes: {dual.tmem_columns} cols, {dual.smem_bytes:,} B",
                f"{dual.cycles_per_block:,.0f}")
dup_pipe = 36 * max(dup_qk.values()) + 8 * max(pv.values())
lanes_t.add_row("duplicated Q", "full P, 32 tokens", "1 x32", "none", "36", f"{dup_pipe:,}",
                f"NO: {dup.tmem_columns} of 512 TMEM columns", "—")
lanes_t.add_row("second loop (Q in SMEM)", "full P, 32 tokens", "1 x32", "none", "36",
                f"{pipe['ss-q-smem'][0]:,.0f}", f"NO: {ss.smem_bytes:,} B of {SMEM_CAPACITY['sm100']:,}",
                f"{ss.cycles_per_block:,.0f}")
display(lanes_t)
print(f"the allocator on duplicated Q: {refusal}")

# %% [markdown]
# ## 7. The answers to Q1 and Q2
#
# **Q1. Why is K halved with no second loop?** Because the second half of K is put in place by **data placement, not
# control flow**, and FlashMLA's code says so in six places (section 2): the instruction is N = `B_TOPK*2` (two 64 × 64
# products side by side, Layout E putting D's halves in the two lane halves); Q is copied through a `B_H*2`-row view,
# so lanes 64–127 hold the odd 64-dim chunks of the same heads, and fills `B_H*D_NOPE/2/128` = 128 columns, which
# puts `Q_Tail` at 384; the A fragments are `B_H × D_ROPE/2` and `B_H × D_NOPE/2`; B is the `B_H*2`-row view
# `SmemLayoutKTiles_DualGemm_SW128<512/64/2>`, whose rows 64–127 are the odd chunks of the same tokens. One k-loop
# (`utcmma_ts`) over the half-width fragments issues 2 + 16 = 18 instructions, and each advances *both* halves of
# K by 16 dims (sections 2.4 and 3): 18 × 16 = 288 dims per half, 576 in all. The two partial sums stay in separate
# lanes until software adds them.

# %%
pv_per_block = dual.mma_per_block - len(mmas)
qk_records = [r for r in program.role("mma").records if getattr(r, "idesc", None) == QK_IDESC]
print(f"QK MMAs per block: {len(mmas)} (+ {pv_per_block} PV = {run.per_block['tcgen05.mma.ws']}), "
      f"{len(qk_records)} QK records for {run.blocks} blocks: one pass over all 576 dims per block")
print(f"each: M = {QK_IDESC.m}, N = {QK_IDESC.n} = 2 x {B_TOPK} tokens, K = 16 -> {len(mmas)} x 16 = "
      f"{16 * len(mmas)} dims per lane half, x 2 halves = {2 * 16 * len(mmas)} = D_Q")
print(f"P_lo / P_hi bit-exact: {p_exact}; one instruction = two products: {two_products}")

# %% [markdown]
# **Q2. What does the reduction cost, and why is it still worth it?** It costs per-lane work on the softmax's side.
# Each softmax thread owns one TMEM lane, and with the dual GEMM that lane holds half the K range's partial scores
# (P_lo or P_hi) for 64 tokens; turning them into full scores for 32 tokens takes one extra 32-column TMEM load, 128 B
# out and 128 B in through shared memory, a pair barrier and 16 packed adds — 34 instructions per thread per block
# (section 5.1). In the engine's model that is a few hundred cycles on each softmax warp per block, most of which the
# kernel's time shows (sections 5.2 and 5.3, printed below), resting mostly on assumed parameters and moving most with
# the shared-memory port's bandwidth. The designs in which each lane holds full scores pay elsewhere, and more: with Q
# duplicated in both lane halves TMEM needs 576 columns and simtc's allocator refuses it; with a second loop (36
# instructions of N = 64, Q from shared memory) the plan overflows the 227 KiB, every QK instruction reads A from
# shared memory too, and the tensor pipe is busy longer: 36 × 32 + 8 × 80 = 1,792 against 18 × 44 + 8 × 80 = 1,432
# cycles per block with the port to itself (section 6.1). The dual GEMM is the design that fits — and it even spends
# less tensor-pipe time on the scores than 36 instructions of N = 64 would; the exchange is its price.

# %%
print(f"the exchange: {dual.exchange_instructions} instructions per softmax thread per block. {share.text()} "
      f"Its cycles' band {eb['low']:.0f}-{eb['high']:.0f}; the FADD2 add {fadd2_cycles} to the add block alone; P "
      f"{B_TOPK} TMEM columns instead of {B_TOPK // 2}; exchange buffer {SMEM_V32['p_exchange_buf'].size:,} B; "
      f"resting on {', '.join(dual.exchange_rests_on)}")
print(f"TMEM: dual {dual.tmem_columns} columns vs duplicated Q {dup.tmem_columns} (of 512) -> fits: "
      f"{dual.fits} / {dup.fits}")
print(f"SMEM: dual {dual.smem_bytes:,} B vs Q resident {ss.smem_bytes:,} B (limit {SMEM_CAPACITY['sm100']:,}) -> "
      f"fits: {dual.fits} / {ss.fits}")
qk_smem = {v.name: v.smem_bytes_per_qk_mma * (v.mma_per_block - pv_per_block) for v in (dual, dup, ss)}
print(f"QK operand bytes from SMEM per block: dual {qk_smem['dual-gemm']:,.0f} vs second loop "
      f"{qk_smem['ss-q-smem']:,.0f}; tensor pipe per block (own port): dual {pipe['dual-gemm'][0]:,.0f} vs "
      f"{pipe['ss-q-smem'][0]:,.0f}; cycles per block: dual {dual.cycles_per_block:,.0f} vs "
      f"{ss.cycles_per_block:,.0f}")

# %% [markdown]
# ## 8. Q3: does the memory calculation of `tA_frag` matter?
#
# A second reader asks whether the memory calculation of `tA_frag` in `gemm.cuh` matters. `tA_frag` is the A
# fragment `utcmma_ts` walks (section 2.4). CuTe computes its TMEM layout when the kernel calls
# `make_fragment_A(partition_shape_A(...))`, from the fragment type FlashMLA's MMA atom declares: FlashMLA
# `csrc/kerutils/include/kerutils/device/sm100/gemm.cuh` line 59 at `9241ae3` [kernel] picks CuTe's 16-bit TMEM
# fragment for one CTA (`tmem_frg_1sm`) with bf16 storage and the `NonInterleaved` allocation mode; its comment says
# A should really be the duplicated kind, which CuTe does not allow for one CTA (CUTLASS
# `include/cute/atom/mma_traits_sm100.hpp` lines 500-501 at `147f567` [cutlass] accept only `Interleaved` and
# `NonInterleaved` there), and that `NonInterleaved` is chosen so that the address calculation comes out right. Then
# the kernel overwrites the fragment's data pointer with `tmem_cols::Q` (`kernel.cuh` line 550; `tmem_cols::Q_Tail`
# for the RoPE part, line 540). What of CuTe's computation reaches the hardware, and what is thrown away?
#
# **What CuTe computes** (CUTLASS at `147f567` [cutlass], in our words):
#
# * `partition_shape_A` (`include/cute/atom/mma_atom.hpp` lines 587-598) cuts the `B_H` × `D_NOPE/2` tile into the
#   atom's M × K = 64 × 16: the shape ((64, 16), 1, 16) — one atom, 16 k-blocks (for RoPE, 2 k-blocks);
# * `make_fragment_A` (line 148) makes a tensor of the fragment type with that shape, which for a TMEM fragment is
#   `tmem_frg::make` (`include/cute/atom/mma_traits_sm100.hpp` lines 462-515, reached through lines 969-975). For
#   M = 64 it lays one k-block out in a "virtual" address space of one unit per lane and 128 per column: the 64 rows
#   as four groups of 16 lanes, 32 lanes apart, the 16 K values along 16 columns (lines 506-508). It tiles the k-blocks
#   after that atom, with a step of two atoms' slots in `NonInterleaved` mode and of one in `Interleaved` mode
#   (line 510: the step of 2 skips the slot 16 lanes down that `Interleaved` fills first). Last it re-strides the
#   virtual addresses (lines 493-495): a lane becomes `TMEM::DP<bf16>` = 131,072 fragment units
#   (`include/cute/arch/tmem_allocator_sm100.hpp` line 53), a column step the ratio of the storage type's bits to the
#   value type's (1 for bf16 storage). The tensor's base is `make_tmem_ptr<bf16>()`, address 0
#   (`include/cute/pointer.hpp` line 340);
# * a fragment offset becomes a TMEM address by CuTe's pointer arithmetic (`include/cute/pointer.hpp` line 311): the
#   offset rotated right by log2(32/16) = 1, so two bf16 share a 32-bit column and the sub-word index lands in bit 31
#   (`simtc.kernels.flashmla.fragment.tmem_address`).
#
# pycute (CuTe's layout algebra in Python, `python/pycute` in CUTLASS, shipped in the `nvidia-cutlass` wheel) has
# every operation these steps use. The same steps in pycute, and the result checked against CuTe C++ itself: the
# oracle `tests/data/cute_tmem.json.gz` (`tests/data/README_tmem.md`) evaluated this fragment type (the one CUTLASS's
# own TS atom declares too) for a 64 × 32 tile, element by element:

# %%
def partition_shape(cols: int) -> tuple:
    """``partition_shape_A`` of a B_H x ``cols`` tile for the 64 x 16 atom: (atom, M tiles, k-blocks)."""
    divided = pycute.zipped_divide(pycute.Layout((B_H, cols)), (pycute.Layout(B_H), pycute.Layout(INSTR_K)))
    atom, (m_tiles, k_blocks) = divided.shape
    return atom, m_tiles, k_blocks


def tmem_fragment(shape: tuple, *, interleaved: bool = False, storage_bits: int = 16) -> pycute.Layout:
    """CuTe's ``tmem_frg::make`` for M = 64 and bf16 values (mma_traits_sm100.hpp lines 493-515 at 147f567)."""
    (m, k), *rest = shape
    assert m == 64
    atom = pycute.Layout(((16, 4), k), ((1, 32), 128))       # one k-block: (rows, K) -> virtual lane + 128 x column
    tiles = tuple(rest)
    logical = pycute.tiled_product(atom, pycute.Layout(tiles, pycute.prefix_product(tiles, 1 if interleaved else 2)))
    restride = pycute.Layout((128, 16384), (LANE_STRIDE_16, storage_bits // 16))
    return pycute.composition(restride, logical)


rope_shape, nope_shape = partition_shape(D_ROPE // 2), partition_shape(D_NOPE // 2)
frag_rope, frag_nope = tmem_fragment(rope_shape), tmem_fragment(nope_shape)
print(f"partition_shape_A: RoPE {rope_shape}, NoPE {nope_shape}")
print(f"tA_frag's layout (bf16 units: lane = {LANE_STRIDE_16:,}, column = 2): RoPE {frag_rope}, NoPE {frag_nope}")


def element(layout, m: int, k: int):
    """(lane, column, sub-word) of A element (m, k) of a fragment whose base is 0."""
    return split_address(tmem_address(layout((m, k % INSTR_K), 0, k // INSTR_K)))


oracle = next(r for r in json.loads(gzip.decompress((DATA / "cute_tmem.json.gz").read_bytes()))["mma_frg"]
              if r["kind"] == "a_operand" and r["m"] == 64)
oracle_agrees = [[list(element(frag_rope, m, k)) for k in range(oracle["cols"])] for m in range(64)] == oracle["map"]
print(f"CuTe C++ ({oracle['frag_type']}, {oracle['rows']} x {oracle['cols']}): {oracle['cute_layout']}; "
      f"every element at the same lane, column and half as pycute's: {oracle_agrees}")

# %% [markdown]
# (CuTe prints the stride of the size-1 M-tile mode as 0, pycute as 16: a mode of size 1 never moves, so the two
# layouts are the same function, as the element-by-element comparison shows.) Read the NoPE layout
# (((16, 4), 16), 1, 16) : (((131072, 4194304), 1), 0, 16) mode by mode: row m of a k-block sits at lane m mod 16 +
# 32·⌊m/16⌋; K value k at sub-word k (two per column); **k-block k at 16·k bf16 = 8·k columns**.
#
# **What reaches the hardware.** `utcmma_ts` hands the instruction one 32-bit TMEM address per k-block, the raw
# pointer of `tA_frag(_, _, k)`: the base plus the fragment's offset of element (0, 0) of k-block k. Computed from
# pycute's layout with the kernel's bases, against what the head64 replay's Program issues (the MMA warp's records
# of block 0, `simtc.kernels.flashmla.fragment.qk_a_addresses`):

# %%
issued = qk_a_addresses(program)                     # the 4-block run's Program, block 0: (label, lane, column)
frag_of = {"RoPE": (frag_rope, Q_TAIL_COLUMN), "NoPE": (frag_nope, Q_COLUMN)}
a_table = Table(title="The A address of each QK instruction: CuTe's fragment offset + the kernel's base")
for col in ("instruction", "k-block", "offset (bf16)", "CuTe address, base 0", "base (tmem_cols)",
            "lane, column", "issued by the Program"):
    a_table.add_column(col, justify="left" if col == "instruction" else "right")
from_cute = []
for label, lane, column in issued:
    part = "RoPE" if "RoPE" in label else "NoPE"
    frag, base = frag_of[part]
    kb = int(label.rsplit("k=", 1)[1])
    offset = frag((0, 0), 0, kb)
    got = split_address(base + tmem_address(offset))[:2]
    from_cute.append((label, *got))
    a_table.add_row(label, str(kb), str(offset), f"column {split_address(tmem_address(offset))[1]}",
                    f"{'Q_Tail' if part == 'RoPE' else 'Q'} = {base}", f"{got[0]}, {got[1]}", f"{lane}, {column}")
display(a_table)
kblock_step = frag_nope((0, 0), 0, 1) - frag_nope((0, 0), 0, 0)
print(f"CuTe's offsets with the kernel's bases give the Program's 18 addresses: {from_cute == issued}; the step "
      f"from one instruction to the next: {kblock_step} bf16 = {split_address(tmem_address(kblock_step))[1]} columns; "
      f"every A read inside Q's columns {Q_COLUMN}-{P_COLUMN - 1}: {not a_reads_outside(program)}")

# %% [markdown]
# **What is thrown away.** Two parts of the computation never reach the instruction:
#
# * **the base.** CuTe's fragment starts at address 0 (`make_tmem_ptr<bf16>()`); the kernel replaces it with
#   `tmem_cols::Q` or `tmem_cols::Q_Tail`. Had it kept CuTe's, the NoPE instructions would read columns 0-127, O's
#   accumulator;
# * **the layout inside a k-block.** The instruction carries one address, not a layout: where each row of A is, the
#   hardware decides by its own data-path layout. For `.ws` M = 64 that is Layout E, each lane half reading A's rows
#   from its own 64 lanes — row m in lanes m and m + 64 **[inferred]** (notebook 02 §7). The fragment's rows sit
#   elsewhere: CuTe's M = 64 atom is the half-datapath layout of a non-`.ws` instruction (Layout F):

# %%
frag_lanes = np.array([element(frag_nope, m, 0)[0] for m in range(B_H)])
ws_lanes = datapath_layout(B_H, 2 * B_TOPK, ws=True).a_lanes(np.arange(B_H))   # (64, 2): lanes m and m + 64
f_lanes = datapath_layout(B_H, 2 * B_TOPK).a_lanes(np.arange(B_H))[:, 0]       # Layout F, lane alignment 0
print(f"the fragment's lane of rows 0, 15, 16, 63: {frag_lanes[[0, 15, 16, 63]].tolist()} (Layout F's: "
      f"{f_lanes[[0, 15, 16, 63]].tolist()}); the .ws instruction reads rows 0, 15, 16, 63 from lanes "
      f"{ws_lanes[[0, 15, 16, 63]].tolist()}: the same for {int((frag_lanes == ws_lanes[:, 0]).sum())} of 64 rows; "
      f"CuTe's own base would put k-block 0 at column {split_address(tmem_address(frag_nope((0, 0), 0, 0)))[1]}")

# %% [markdown]
# **What would break if the stride were wrong.** Take the two fragment types a reader could have written instead and
# let the Program issue the addresses their layouts give (`readdress_qk_a`: each QK instruction's A = the kernel's
# base + the layout's offset of its k-block), then run the one-block replay with its checks:
#
# * CuTe's default allocation mode, `Interleaved`: the k-blocks fill the lane slot 16 lanes down before moving a
#   column, so every second instruction would start at lane 16;
# * `tmem_frg_1sm`'s default storage type, 32 bits (`include/cute/atom/mma_traits_sm100.hpp` lines 586-587 at
#   `147f567`): a bf16 then takes a whole column, and the step doubles to 16 columns.

# %%
wrong = {"Interleaved": tmem_fragment(nope_shape, interleaved=True),
         "32-bit storage": tmem_fragment(nope_shape, storage_bits=32)}
caught = {}
for name, frag in wrong.items():
    def offset(k, frag=frag):
        return tmem_address(frag((0, 0), 0, k))

    firsts = [split_address(offset(k))[:2] for k in range(4)]
    try:
        program1 = readdress_qk_a(head64_program("v32", 1), offset)
    except SimtcError as e:                      # simtc refuses to build the instruction
        caught[name] = ("refused", e.rule)
        print(f"{name}: {frag}; k-blocks 0-3 at (lane, column) {firsts}\n  refused: {e}")
        continue
    with np.errstate(all="ignore"):              # the wrong A makes P garbage: the softmax overflows, as it would
        broken = replay("v32", blocks=1, seed=0, transform=lambda p, o=offset: readdress_qk_a(p, o))
    outside = a_reads_outside(program1)
    caught[name] = ("checked", broken.p_bit_exact, outside)
    print(f"{name}: {frag}; k-blocks 0-3 at (lane, column) {firsts}\n  P bit-exact: {broken.p_bit_exact}; O rel. "
          f"error {broken.o_rel_error}; A read outside Q's columns by {len(outside)} instructions: "
          + ", ".join(f"{lab} ({lo}-{hi})" for lab, lo, hi in outside))

# %% [markdown]
# **Answer.** Yes, it matters — through one number. Of everything CuTe computes for `tA_frag`, the hardware receives
# only the offset between consecutive k-blocks: 16 bf16, **8 TMEM columns**, one K = 16 slice of Q per instruction
# (the 18 addresses above, 384 + 8k and 256 + 8k). The base CuTe computes is thrown away (`tmem_cols::Q` and
# `tmem_cols::Q_Tail` replace it), and the fragment's row layout is never sent (and is not where the `.ws` instruction
# reads A). That is why FlashMLA's comment cares about the allocation mode: with CuTe's default `Interleaved` mode
# every second instruction would start at lane 16, which simtc refuses as an instruction (A must start at D's lane
# alignment); with 32-bit storage the step would be 16 columns, P would no longer be bit-exact and eight instructions
# would read past Q into P and the free columns.

# %%
assert rope_shape == ((B_H, INSTR_K), 1, D_ROPE // 2 // INSTR_K) and nope_shape == ((B_H, INSTR_K), 1, 16)
assert frag_nope.shape == (((16, 4), 16), 1, 16) and frag_nope.stride[0] == ((LANE_STRIDE_16, 32 * LANE_STRIDE_16), 1)
assert frag_nope.stride[2] == 16 and kblock_step == 16 and oracle_agrees and LANE_STRIDE_16 == 131072
assert from_cute == issued and [c for _, _, c in issued] == [384, 392, *range(256, 384, 8)]
assert all(lane == 0 for _, lane, _ in issued) and not a_reads_outside(program)
assert not np.array_equal(frag_lanes, ws_lanes[:, 0]) and np.array_equal(frag_lanes, f_lanes)
assert caught["Interleaved"] == ("refused", "A and D use the same lane alignment")
assert caught["32-bit storage"][:2] == ("checked", False) and len(caught["32-bit storage"][2]) == 8

# %% [markdown]
# ## 9. What this notebook showed (checked)

# %%
# Q1, in FlashMLA's code: N = B_TOPK*2; the 128-row (B_H*2) views; Q_Tail = 256 + B_H*D_NOPE/2/128; A fragments of
# D_ROPE/2 and D_NOPE/2 -> 2 + 16 instructions; B view <512/64/2> = 4 tiles; the copies' cited expressions
assert (QK_IDESC.m, QK_IDESC.n) == (B_H, B_TOPK * 2) and NOPE_VIEW.rows == ROPE_VIEW.rows == B_H * 2
assert Q_TAIL_COLUMN == Q_COLUMN + B_H * D_NOPE // 2 // 128 == 384 and P_COLUMN == Q_TAIL_COLUMN + 16 == 400
assert (len(rope_mmas), len(nope_mmas)) == (D_ROPE // 2 // INSTR_K, D_NOPE // 2 // INSTR_K) == (2, 16)
assert [m.a for m in mmas] == [Q_TAIL_COLUMN, Q_TAIL_COLUMN + 8] + [Q_COLUMN + 8 * i for i in range(16)]
assert len(view_tiles) == 512 // 64 // 2 == 4 and len(rope_tiles) == 2 // 2
assert in_simtc == from_source and len(copies) == 18 and q_placed
assert all(meet) and np.array_equal(covered, np.arange(D_Q))       # each instruction advances both halves by 16
assert np.array_equal(view[:64], k[:, :64]) and np.array_equal(view[64:], k[:, 64:128])
# stepping: 18 QK issues of block 0 read 8 columns of all 128 lanes each, every Q cell once; P has one last writer
assert [e.label for e in issues] == [m.label.replace("NoPE ", "") for m in mmas]
p_cells = [{"lanes": [0, 127], "columns": [P_COLUMN, P_COLUMN + B_TOPK - 1]}]
assert all(e.reads["tmem"][0]["lanes"] == [0, 127] and e.writes["tmem"] == p_cells and e.lands == "completion"
           and len(e.reads["tmem"]) == (1 if e is issues[0] else 2) for e in issues) and reads_q_once
assert issues[1].cycle < s.event(nope_wait).cycle < issues[2].cycle
assert all(len(w) == 1 for w in p_writers) and writers_after == [e.label for e in done] and all(q_unchanged)
assert done[0].label == issues[0].label == "QK RoPE k=0" and widget.total == len(s) and widget.step == issues[0].step
# one instruction computes two independent 64x64x16 products; P_lo and P_hi bit-exact; the replay checks out
assert two_products == {0: True, 1: True} and p_exact == {"P_lo": True, "P_hi": True}
assert np.abs(p_sum - exact).max() < 1e-4 and run.ok and run.p_bit_exact and not run.hazards
assert run.per_block["tcgen05.mma.ws"] == 26 and len(mmas) * 16 * 2 == D_Q and len(qk_records) == 18 * run.blocks
# Q2, per lane: 34 instructions, 128 B each way; the 2nd P load 128 cycles later in every block and warp (4 x 32
# columns at 1 column/cycle); the stepper's exchange is alternatives.exchange_cost; the kernel pays part of it
assert per_block == {"LDTM.x32 (extra)": 1, "STS.128": 8, "LDS.128": 8, "FADD2": 16, "BAR.SYNC (pair)": 1}
assert sts_bytes == 128 and port_cycles == 256 and path_cycles == 128 and (per_warp[:, :, 0] == path_cycles).all()
assert abs(exchange_cycles.mean() - exchange_cost(eng)) < 1e-9 and all(0 < c < sp for c, sp in zip(exchange_cycles,
                                                                                                   spans, strict=True))
assert alongside[-1] == (["done"], 0) and all(a == (["running"], a[1]) for a in alongside[:-1])
assert exchange_cycles[-1] == exchange_cycles.min()                  # nothing else on the port: the shortest
assert 0 < saved < exchange_cycles.mean() and on_path > 0.5 and without_steady == share.steady_cycles_without
assert share.exchange_cycles == exchange_cost(eng) and share.steady_cycles == run.cycles_per_block_steady
assert with_fadd2.issue - without_fadd2.issue == 16 and fadd2_cycles >= 0 and set(fadd2_moves) <= set(add_reads)
# every statement of the exchange's cost names its parameters
assert [f"{p['name']} [{p['label']}]" for p in rests] == list(dual.exchange_rests_on) and rests
assert all(p["label"] in LABELS for p in rests) and {r.name for r in ex_rows} == {p["name"] for p in rests}
assert sum(p["label"] == "assumed" for p in rests) > len(rests) / 2                  # "mostly assumed"
assert ex_base == exchange_cost(eng) and ex_rows[0].name == "smem_port_bytes_per_cycle" and ex_rows[0].effect > 0
# the tensor pipe's spans: the closed form from the Program and the parameters is the engine with its own port, for
# every variant that runs; 18 x 44 + 8 x 80 = 1,432 (dual) vs 36 x 32 + 8 x 80 = 1,792 (second loop)
assert all(closed == alone for closed, alone, _ in pipe.values())
assert (pipe["dual-gemm"][0], pipe["ss-q-smem"][0]) == (18 * 44 + 8 * 80, 36 * 32 + 8 * 80) == (1432, 1792)
assert (max(dual_qk.values()), dual_qk["b_collector"], max(ss_qk.values()), ss_qk["smem_port"]) == (44, 44, 32, 32)
assert max(pv.values()) == pv["smem_port"] == 80 and 36 * max(dup_qk.values()) > 18 * max(dual_qk.values())
# Q2: it is worth it because the alternatives do not fit, and the second loop is slower besides
assert (dual.tmem_columns, dup.tmem_columns) == (464, 576) and dual.fits and not dup.fits and refusal is not None
assert any(c is None for _, _, c in chunks) and ss.smem_bytes > SMEM_CAPACITY["sm100"] >= dual.smem_bytes
assert qk_smem["ss-q-smem"] == 2 * qk_smem["dual-gemm"] == 2 * 18 * 4096 and not ss.fits
assert ss.cycles_per_block > dual.cycles_per_block and ss.tensor_pipe_busy_per_block > dual.tensor_pipe_busy_per_block
# Q3: of CuTe's fragment (pycute = CuTe C++'s oracle) only the k-block step reaches the instruction: 8 columns;
# the base is the kernel's tmem_cols; a wrong step (32-bit storage) breaks P, CuTe's Interleaved mode is refused
assert oracle_agrees and kblock_step == 16 and from_cute == issued and issued[2] == ("QK k=0", 0, Q_COLUMN)
assert caught["32-bit storage"][1] is False and caught["Interleaved"][0] == "refused"
print("all facts of notebook 03 hold")
