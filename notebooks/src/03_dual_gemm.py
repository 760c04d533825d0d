# %% [markdown]
# # 03 · FlashMLA's dual GEMM: two products in one instruction
#
# FlashMLA's SM100 sparse-decode kernel for 64 heads (`head64`) computes the scores P = Q·Kᵀ of
# 64 heads × 64 KV tokens over 576 head dims with **18** `tcgen05.mma.ws` instructions of K = 16.
# 18 × 16 = 288 is *half* of 576, and there is no second loop (FlashMLA `csrc/sm100/decode/head64/kernel.cuh`
# lines 535-573 at `9241ae3`). Learners ask two questions:
#
# * **Q1.** Why is the K extent halved with no second loop?
# * **Q2.** Is there reduction overhead, and why is it still worth it?
#
# This notebook answers both step by step with the **replay**: simtc's model of the kernel as
# instruction records (`simtc.kernels.flashmla`, built from FlashMLA's source), executed bit by bit
# through the semantics layer (shared memory, Tensor Memory, the tensor core's arithmetic) and
# cycle by cycle on the engine (`simtc replay flashmla-head64` runs the same thing from the shell).
#
# Provenance tags as in `docs/sources.md`: **[kernel]** FlashMLA source (`deepseek-ai/FlashMLA`
# `csrc/sm100/decode/head64/`, snapshot `9241ae3`), **[cutlass]** CUTLASS/CuTe code, **[doc]** PTX
# ISA 9.0, **[sass]** our sm_100a compile, **[inferred]** our reading, not documented. One rule
# the whole technique rests on is **[inferred]**: that each lane half of a `.ws` M=64 MMA reads A
# from its own 64 lanes. Nothing here has run on a Blackwell GPU, and every cycle count below is
# the engine's timing model, whose parameters are labelled measured / documented / derived / assumed
# (notebook 04); each statement of the exchange's cost below names the parameters it rests on.

# %%
import attrs
import numpy as np
from IPython.display import display
from rich.table import Table

from simtc.engine import Engine
from simtc.engine.handlers import parameters_of
from simtc.engine.issue import block_cost
from simtc.engine.parameters import LABELS, PARAMETERS
from simtc.engine.sensitivity import sensitivity
from simtc.kernels.flashmla import (
    B_TOPK,
    D_Q,
    D_ROPE,
    P_COLUMN,
    Q_COLUMN,
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
    compare,
    exchange_band,
    exchange_cost,
    exchange_instructions,
    exchange_parameters,
)
from simtc.kernels.flashmla.plan import NOPE_TILE, NOPE_VIEW
from simtc.kernels.flashmla.replay import make_inputs, replay
from simtc.numerics import decode_bits, tensor_core_mma
from simtc.render.mma import InstrDescriptorView
from simtc.render.smem import DescriptorView
from simtc.render.tmem import CpView, LayoutView, TmemMapView
from simtc.semantics import Cta, execute
from simtc.smem.memory import SMEM_CAPACITY
from simtc.tmem import cp_shape, datapath_layout

# %% [markdown]
# ## 1. One block of the replay
#
# A seeded request (`make_inputs`: bf16 Q of 64 heads × 576 dims, a paged fp8 KV cache with scales,
# top-k indices) and the QK step of its first KV block: 18 `tcgen05.cp` put Q into TMEM, 18
# `tcgen05.mma.ws` compute P into columns 400–463, one `tcgen05.commit`, and warps 0–3 read P back
# (`replay_qk` runs the `flashmla-qk` Program through the semantics layer). Below, the kernel's TMEM
# map [kernel] `config.h`, then TMEM after the step, coloured by the instruction that last wrote each cell.

# %%
inp = make_inputs("v32", blocks=4, seed=0)
q, k = inp.q, inp.k_rows(0, B_TOPK)    # Q (64 x 576) and block 0's dequantized K (64 tokens x 576), bf16 values
cta = Cta()
tm, sm = replay_qk(q, k, cta=cta)
TmemMapView(regions=TMEM_V32)

# %%
TmemMapView(tm, by="writer", columns_per_char=8, title="TMEM after the QK step: last writer of each cell")

# %% [markdown]
# ## 2. Q into TMEM: 18 `tcgen05.cp`, and which dims land in which lanes
#
# Q sits in shared memory as eight 64×64 SW128 tiles (tile t = dims 64t … 64t+63, 8 KiB each) plus
# two 64×32 SW64 RoPE tiles [kernel]. Each copy is `tcgen05.cp.cta_group::1.128x256b`: 128 source
# rows × 32 bytes → 128 lanes × 8 columns, source row r into lane r ([doc] §9.7.16.9.2; [cutlass]
# `SM100_UTCCP_128dp256bit_1cta`):

# %%
CpView(cp_shape("128x256b"), max_rows=8)

# %% [markdown]
# The trick is the **source**: the copy's descriptor describes 128 rows, but a Q tile has 64. The
# descriptor's SBO (1,024 B per 8 rows) carries rows 64–127 exactly one tile (8 KiB) further — onto
# the *next* 64-dim chunk. So lanes 0–63 receive an even chunk of Q, lanes 64–127 the odd chunk that
# follows it, for the same heads. The first copy's descriptor:

# %%
copies = q_copies()
print(f"{len(copies)} copies; view {NOPE_VIEW}: row 64 starts {NOPE_VIEW.offset(64, 0)} B after row 0 "
      f"= one {NOPE_TILE.rows}x{NOPE_TILE.cols} tile ({NOPE_TILE.nbytes} B)")
for c in copies[:5] + copies[-2:]:
    print(f"  {c.label:<18} TMEM column {c.taddr:>3}  source start {c.desc.start:>6} B  {c.ptx()}")
DescriptorView(copies[0].desc)

# %% [markdown]
# Read TMEM back (two bf16 per 32-bit cell, even dim in the low half) and ask: which Q dim is in
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
print(f"TMEM columns for Q: {P_COLUMN - Q_COLUMN} = {D_Q} dims x 2 B / 4 B / 2 lane halves")

# %% [markdown]
# ## 3. K in shared memory: the 128-row aliased view
#
# K is written by the dequant warps exactly like Q: eight 64×64 SW128 tiles, tile t = dims
# 64t … 64t+63 of the 64 tokens. The QK MMA's B descriptor uses the **same 128-row view**
# (`…_DualGemm_SW128` in FlashMLA's `config.h`) [kernel]: view rows 0–63 are tile 2j (an even chunk),
# rows 64–127 are tile 2j+1 (the odd chunk) of the **same 64 tokens**. No byte is copied: the view
# aliases the tiles. NoPE instruction k reads view j = ⌊k/4⌋ at K offset 16·(k mod 4) (the descriptor
# start advances 32 B inside the swizzle atom, and 16 KiB = two tiles per view):

# %%
mmas = qk_mmas(1)
nope0 = SMEM_V32["dequant1.nope"].offset


def b_dims(mma) -> tuple[np.ndarray, np.ndarray]:
    """The K dims that B rows 0-63 and 64-127 of a NoPE QK instruction read, from its descriptor start."""
    rel = mma.b_desc.start - nope0
    tile, col = 2 * (rel // NOPE_VIEW.nbytes), (rel % NOPE_VIEW.nbytes) // 2
    d = np.arange(16)
    return 64 * tile + col + d, 64 * (tile + 1) + col + d


view = sm.read_tile(NOPE_VIEW, nope0)   # the 128 x 64 operand view 0 as the MMA sees it (bf16 values)
print("view rows 0-63 = K dims 0-63:", np.array_equal(view[:64], k[:, 0:64]),
      "| rows 64-127 = K dims 64-127:", np.array_equal(view[64:], k[:, 64:128]))
for m in mmas[2:7] + mmas[-1:]:
    lo, hi = b_dims(m)
    print(f"  {m.label:<15} B start {m.b_desc.start:>6}: rows 0-63 dims {lo[0]}-{lo[-1]}, rows 64-127 dims "
          f"{hi[0]}-{hi[-1]}")
DescriptorView(mmas[2].b_desc)

# %% [markdown]
# ## 4. One instruction, two independent 64×64×16 products
#
# The QK instruction is `tcgen05.mma.ws` with M = 64, **N = 128** (`2 * B_TOPK`, "×2 for dual gemm" in
# `config.h`) [kernel], A from TMEM (TS form):

# %%
InstrDescriptorView(QK_IDESC)

# %% [markdown]
# With `.ws` and M = 64 the result uses **Layout E** [doc] §9.7.16.10.5, [cutlass]: D[m][n] goes to lane
# m + 64·⌊n/64⌋, column n mod 64. Columns n = 0–63 of D (B rows 0–63: the even chunk) live in lanes
# 0–63, columns 64–127 (B rows 64–127: the odd chunk) in lanes 64–127:

# %%
layout_e = datapath_layout(64, 2 * B_TOPK, ws=True)
LayoutView(layout_e, c0=P_COLUMN)

# %% [markdown]
# Each lane half reads A from **its own** 64 lanes **[inferred]** (notebook 02 §7: CUTLASS's `.ws`
# fragments, `tcgen05.cp .warpx2::02_13`, FlashMLA's "should be duplicated" comment). Lanes 0–63 hold
# Q's even chunk, lanes 64–127 the odd chunk (section 2). So lanes 0–63 compute Q_even·K_evenᵀ and lanes
# 64–127 compute Q_odd·K_oddᵀ: two independent 64×64×16 products, both landing in columns 400–463.
#
# Check it on the model: run **one** instruction (NoPE k = 0, overwriting P) on a fresh copy of the
# step, and compare each lane half with its own 64×64×16 `tensor_core_mma`:

# %%
one = Cta()
replay_qk(q, k, cta=one)
k0 = mmas[2]
execute(attrs.evolve(k0, enable_input_d=False), one, warp=4)
d_lo, d_hi = read_p(one.tmem)           # lanes 0-63 and 64-127 of columns 400-463
(a_lo, a_hi), (b_lo, b_hi) = (where[0][:16], where[1][:16]), b_dims(k0)
print(k0.ptx())
for half, a, b in ((0, a_lo, b_lo), (1, a_hi, b_hi)):
    rows = f"{64 * half}-{64 * half + 63}"
    print(f"lanes {rows:<6}: A = Q[:, {a[0]}-{a[-1]}] (TMEM lanes {rows}), B = K[:, {b[0]}-{b[-1]}] "
          f"(view rows {rows}) -> TMEM columns {P_COLUMN}-{P_COLUMN + B_TOPK - 1}")
two_products = {half: np.array_equal(d.view(np.uint32), tensor_core_mma(q[:, a], k[:, b]).view(np.uint32))
                for half, d, a, b in ((0, d_lo, a_lo, b_lo), (1, d_hi, a_hi, b_hi))}
print("each half bit-exact with its own 64x64x16 product:", two_products)

# %% [markdown]
# ## 5. P_lo and P_hi after all 18 instructions, bit for bit
#
# The 18 instructions run RoPE k = 0, 1 first (k = 0 overwrites), then NoPE k = 0 … 15 [kernel]. Lane
# half 0 accumulates P_lo over its 288 dims {0–63, 128–191, 256–319, 384–447} ∪ RoPE {512–543}, half 1
# accumulates P_hi over the other 288. `q_split` gives each half's dims in that k order; a chain of
# `tensor_core_mma` over them must equal what the softmax warps' `tcgen05.ld` returns, bit for bit.
# The software adds the halves: **P = P_lo + P_hi = Q·Kᵀ**.

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
# The same holds for the whole kernel: `replay` runs all six roles (index, raw fp8 TMA, RoPE TMA,
# dequant, MMA, softmax) on the engine for a 4-block request, checks P bit-exact in every block, and
# O and LSE against a float64 attention:

# %%
run = replay("v32", blocks=4, seed=0, keep_engine=True)
print(run.summary())

# %% [markdown]
# ## 6. The exchange and reduction, and what it costs
#
# After the QK commit, warp w of the softmax warpgroup may read only its lane quadrant 32w … 32w+31
# [doc] §9.7.16.8.1. So warps 0, 1 hold P_lo and warps 2, 3 hold P_hi of the same heads. Each warp
# loads its quadrant in two `tcgen05.ld.32x32b.x32` (tokens 0–31 and 32–63), keeps one half, and
# swaps the other with its partner warp w ⊕ 2 through shared memory [kernel] (`kernel.cuh` lines 167-190
# at `9241ae3`):

# %%
owner = Table(title="Who holds what (kernel.cuh lines 167-190; lanes and halves from Layout E)")
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
# **Instructions.** The records of one block in the softmax Program that exist only because P comes
# in two halves: the second TMEM load, 8 × 16-byte `st.shared`, the pair barrier, 8 × 16-byte
# `ld.shared`, and 16 packed adds (`FADD2`, inside the "add, mask, row max" CUDA-core block):

# %%
per_block = exchange_instructions(run.engine.program)
for kind, n in per_block.items():
    print(f"{n:>3}  {kind}")
print(f"{sum(per_block.values()):>3}  instructions per softmax thread per block; {16 * per_block['STS.128']} B stored "
      f"and as many loaded per thread; exchange buffer {SMEM_V32['p_exchange_buf'].size:,} B, "
      f"a union with S ({SMEM_V32['s'].size:,} B)")

# %% [markdown]
# **Cycles, from the engine's trace.** For each block and softmax warp: how much later the second P
# load completes than the first (the warp's `wait::ld` waits for both), and the span from the first
# `st.shared` to the issue of the block that adds the halves (stores, pair barrier wait, loads) — what
# `alternatives.exchange_cost` measures. "softmax span" is the warp's time from seeing `qk_done` to
# arriving on `so_ready` (P in, S out): the part of the loop the exchange lengthens.

# %%
eng = run.engine
softmax = eng.program.role("softmax")
labels = [getattr(r, "label", "") or "" for r in softmax.records]
bars = [getattr(r, "bar", "") for r in softmax.records]
block_starts = [i for i, lab in enumerate(labels) if lab == "P columns 400-431"]   # each block's first P load
seen: dict[tuple[int, int, str], int] = {}
for e in eng.trace:
    if e.role == "softmax" and e.index >= 0:
        seen.setdefault((e.warp, e.index, e.kind), e.cycle)
cost = Table(title="Exchange per block (mean of warps 0-3), cycles from the replay's trace")
for col in ("block", "2nd tcgen05.ld", "st / bar / ld.shared", "exchange", "softmax span", "share"):
    cost.add_column(col, justify="right")
exchange_cycles, spans = [], []
for b, s in enumerate(block_starts):
    first_st = next(i for i in range(s, len(labels)) if labels[i].startswith("p_peer"))
    last_ld = max(i for i in range(first_st, first_st + 20) if labels[i].startswith("slot w"))
    qk_wait = max(i for i in range(s) if bars[i].startswith("qk_done"))
    so_arrive = next(i for i in range(s, len(bars)) if bars[i].startswith("so_ready"))
    ld2 = np.mean([seen[w, s + 1, "complete"] - seen[w, s, "complete"] for w in range(4)])
    smem = np.mean([seen[w, last_ld + 1, "issue"] - seen[w, first_st, "issue"] for w in range(4)])
    span = np.mean([seen[w, so_arrive, "issue"] - seen[w, qk_wait, "resume"] for w in range(4)])
    exchange_cycles.append(ld2 + smem)
    spans.append(span)
    cost.add_row(str(b), f"{ld2:.0f}", f"{smem:.0f}", f"{exchange_cycles[-1]:.0f}", f"{span:.0f}",
                 f"{exchange_cycles[-1] / span:.0%}")
display(cost)
print(f"mean {np.mean(exchange_cycles):.0f} cycles per block (alternatives.exchange_cost: {exchange_cost(eng):.0f}); "
      f"the whole {run.blocks}-block request takes {run.cycles_whole:,} cycles, {run.cycles_per_block_steady:,.0f} "
      "per block in the steady state (between sv_done phases)")

# %% [markdown]
# **The 16 `FADD2`.** They sit inside the CUDA-core block that adds the halves, masks and takes the row
# max, so the span above ends where they begin. What they add to that block comes from the issue model
# (`simtc.engine.issue.block_cost`: issue-slot cycles, the cycles each pipe is held, the dependent
# chain's latency, and what bounds the block alone) — the block as the kernel has it, and without them:

# %%
add = next(r for r in softmax.records if getattr(r, "name", "") == "add, mask, row max")
no_fadd2 = attrs.evolve(add, counts=tuple(x for x in add.counts if x[0] != "FADD2"),
                        chain=tuple(x for x in add.chain if x[0] != "FADD2"))
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
# **What the exchange's cycles rest on.** `exchange_parameters` lists every timing parameter the
# exchange's records read — the extra `tcgen05.ld`, the `st.shared` / `ld.shared`, the pair barrier
# and the add block — with its value and label. Halving and doubling each one in turn and rerunning the
# same Program (timing only) shows which of them the trace's figure actually moves with:

# %%
rests = exchange_parameters(eng.program)


def exchange_at(t):
    return exchange_cost(Engine(eng.program, mode="timing", check=False, timing=t).run())


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
# **The exchange's cost with its band.** Halving and doubling shows what the figure moves with; the band says how
# far it could be off. On sm100 every parameter has a label: the CUDA-core, shared-memory latency and barrier
# values measured on the H200 (`tests/data/h200_calibration.json`) are labelled *assumed* here, being taken as
# equal on a B200. `exchange_band` moves each assumed parameter by x/÷1.25 and each derived one by x/÷1.10 (the
# rule `simtc predict` uses), reruns timing-only replays and combines the effects root-sum-square:

# %%
eb = exchange_band("v32", 4)
print(f"the exchange: {eb['value']:.0f} cycles per block, band {eb['low']:.0f}-{eb['high']:.0f}; it rests on "
      f"{eb['parameters']} parameters, {eb['measured_on_sm90']} of them measured on the H200 and taken as equal on "
      f"a B200; the band comes most from {', '.join(r['name'] + ' [' + r['label'] + ']' for r in eb['rests_on'][:3])}")
assert eb["low"] <= eb["value"] <= eb["high"] and eb["high"] > eb["value"]

# %% [markdown]
# ## 7. The alternatives, on the same inputs, engine and checker
#
# Is the exchange worth its cycles? Compare the designs that avoid it (FlashMLA's earlier SM100 kernel kept Q
# in shared memory: `csrc/sm100/decode/sparse_fp8/splitkv_mla.cu` at `fd249aa`;
# `simtc.kernels.flashmla.alternatives`, also `simtc compare flashmla-head64` in a shell). Each variant
# is the kernel's Program transformed and replayed on the same 4-block request — or, where it
# does not fit, the refusal simtc's TMEM allocator and `tcgen05.cp` give, with the rule broken:
#
# * **duplicated-q** — CUTLASS's intended `.ws` TS use: Q in *both* lane halves, 36 QK MMAs of N = 64, no exchange;
# * **ss-q-smem** — the earlier SM100 kernel (FlashMLA `splitkv_mla.cu` at `fd249aa`): Q resident in shared
#   memory, 36 SS MMAs of N = 64, no Q copies, no exchange;
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
print(f"\nexch. cyc of the dual GEMM rests on: {', '.join(variants['dual-gemm'].exchange_rests_on)}")
for name in ("dual-gemm", "duplicated-q", "ss-q-smem"):
    print(f"\n{name}: {variants[name].why}")

# %% [markdown]
# ## 8. The two answers
#
# **Q1. Why is K halved with no second loop?** Because the second half of K is put in place by **data
# placement, not control flow**. One `.ws` M=64 instruction with N = 128 is two 64×64 products side by
# side: D columns 0–63 in lanes 0–63, columns 64–127 in lanes 64–127 (Layout E), each lane half reading
# A from its own lanes **[inferred]**. The Q copies put Q's even 64-dim chunks in lanes 0–63 and the odd
# chunks in lanes 64–127 (section 2); the 128-row aliased view of K makes B rows 64–127 the odd chunks of the
# same tokens (section 3). So each of the 18 instructions advances *both* halves of K by 16 dims: 18 × 16 = 288
# dims per half, 576 in all, with the one k-loop the kernel has (`utcmma_ts`, 16 NoPE + 2 RoPE steps).
# The two partial sums stay in separate lanes until software adds them.

# %%
pv_per_block = variants["dual-gemm"].mma_per_block - len(mmas)
qk_records = [r for r in eng.program.role("mma").records if getattr(r, "idesc", None) == QK_IDESC]
print(f"QK MMAs per block: {len(mmas)} (+ {pv_per_block} PV = {run.per_block['tcgen05.mma.ws']}), "
      f"{len(qk_records)} QK records for {run.blocks} blocks: one pass over all 576 dims per block")
print(f"each: M = {QK_IDESC.m}, N = {QK_IDESC.n} = 2 x {B_TOPK} tokens, K = 16 -> {len(mmas)} x 16 = "
      f"{16 * len(mmas)} dims per lane half, x 2 halves = {2 * 16 * len(mmas)} = D_Q")
print(f"P_lo / P_hi bit-exact: {p_exact}; one instruction = two products: {two_products}")

# %% [markdown]
# **Q2. Is there reduction overhead, and why is it still worth it?** Yes. Every block, each softmax
# thread issues one extra TMEM load, 8 + 8 shared-memory stores and loads, a pair barrier and 16 packed
# adds, on the softmax's part of the loop; the engine's cycle count for it is printed below with the
# parameters it rests on (section 6: mostly assumed, and it moves most with the shared-memory port's
# bandwidth). P takes twice the TMEM columns, and the exchange needs a 16 KiB buffer (shared with S).
# It pays in **capacity and bandwidth**, not in tensor-core FLOPs: with Q duplicated in both lane halves
# TMEM overflows and simtc's allocator refuses it; with Q resident in shared memory the plan overflows
# the 227 KiB and every QK instruction reads A from shared memory too. In this model the SS design is
# also slower per block — twice the QK operand bytes through the shared-memory port and a busier tensor
# pipe — but the decisive point is that the dual GEMM fits at all.

# %%
dual, dup, ss = variants["dual-gemm"], variants["duplicated-q"], variants["ss-q-smem"]
qk_smem = {v.name: v.smem_bytes_per_qk_mma * (v.mma_per_block - pv_per_block) for v in (dual, dup, ss)}
overhead = dual.exchange_cycles_per_block / dual.cycles_per_block
print(f"overhead: {dual.exchange_instructions} instructions per softmax thread per block, "
      f"{dual.exchange_cycles_per_block:.0f} of {dual.cycles_per_block:.0f} cycles per block ({overhead:.0%}) in the "
      f"engine's model, resting on {', '.join(dual.exchange_rests_on)}; the FADD2 add {fadd2_cycles} more to the add "
      f"block alone (moving with {', '.join(add_rests)}); P {B_TOPK} TMEM columns instead of {B_TOPK // 2}; "
      f"exchange buffer {SMEM_V32['p_exchange_buf'].size:,} B")
print(f"TMEM: dual {dual.tmem_columns} columns vs duplicated Q {dup.tmem_columns} (of 512) -> fits: "
      f"{dual.fits} / {dup.fits}")
print(f"SMEM: dual {dual.smem_bytes:,} B vs Q resident {ss.smem_bytes:,} B (limit {SMEM_CAPACITY['sm100']:,}) -> fits: "
      f"{dual.fits} / {ss.fits}")
print(f"QK operand bytes from SMEM per block: dual {qk_smem['dual-gemm']:,.0f} vs SS {qk_smem['ss-q-smem']:,.0f}; "
      f"QK instructions from one thread: {len(mmas)} vs {ss.mma_per_block - pv_per_block}")
print(f"cycles per block (model): dual {dual.cycles_per_block:.0f}, SS {ss.cycles_per_block:.0f}, "
      f"prefill-style overlap {variants['prefill-overlap'].cycles_per_block:.0f}; tensor pipe busy per block: dual "
      f"{dual.tensor_pipe_busy_per_block:.0f}, SS {ss.tensor_pipe_busy_per_block:.0f}")

# %% [markdown]
# ## What this notebook showed (checked)

# %%
# Q placement by tcgen05.cp: lane h = head h, even chunks in lanes 0-63, odd chunks in lanes 64-127
assert q_placed and len(copies) == 18 and [c.taddr for c in copies[:5]] == [256, 264, 272, 280, 288]
assert where[0][:2].tolist() == [0, 1] and where[1][:2].tolist() == [64, 65] and where[1][256] == 544
assert NOPE_VIEW.offset(64, 0) == NOPE_TILE.nbytes == 8192 and P_COLUMN - Q_COLUMN == 144
# the 128-row aliased view of K: rows 64-127 are the next (odd) 64-dim tile of the same tokens
assert np.array_equal(view[:64], k[:, :64]) and np.array_equal(view[64:], k[:, 64:128])
assert [b_dims(m)[1][0] for m in mmas[2:7]] == [64, 80, 96, 112, 192]
# one instruction computes two independent 64x64x16 products, one per lane half
assert two_products == {0: True, 1: True} and (QK_IDESC.m, QK_IDESC.n) == (64, 128)
assert layout_e.map(5, 70) == (69, 6) and layout_e.map(5, 6) == (5, 6)
# P_lo and P_hi bit-exact; their sum is Q.K^T to rounding; the whole replay checks out
assert p_exact == {"P_lo": True, "P_hi": True} and np.abs(p_sum - exact).max() < 1e-4
assert run.ok and run.p_bit_exact and not run.hazards and run.per_block["tcgen05.mma.ws"] == 26
# the exchange: 34 instructions per thread per block, its cycles counted in the engine's (simulated) trace
assert per_block == {"LDTM.x32 (extra)": 1, "STS.128": 8, "LDS.128": 8, "FADD2": 16, "BAR.SYNC (pair)": 1}
assert abs(np.mean(exchange_cycles) - exchange_cost(eng)) < 1e-6 and 0 < overhead < 1
assert all(0 < c < s for c, s in zip(exchange_cycles, spans, strict=True))   # a part of the softmax's span
# the FADD2 in the add block: 16 more issue cycles, the block alone no faster without them
assert with_fadd2.issue - without_fadd2.issue == 16 and fadd2_cycles >= 0 and set(fadd2_moves) <= set(add_reads)
# every statement of the exchange's cost names its parameters: the same set in the notebook and the alternatives
assert [f"{p['name']} [{p['label']}]" for p in rests] == list(dual.exchange_rests_on) and rests
assert all(p["label"] in LABELS for p in rests) and {r.name for r in ex_rows} == {p["name"] for p in rests}
assert sum(p["label"] == "assumed" for p in rests) > len(rests) / 2                  # "mostly assumed"
assert ex_base == exchange_cost(eng) and ex_rows[0].effect > 0 and ex_rows[0].name == "smem_port_bytes_per_cycle"
# Q1: no second loop -- 18 straight-line QK MMAs per block cover 2 x 288 = 576 dims
assert len(mmas) * 16 * 2 == D_Q and len(qk_records) == len(mmas) * run.blocks
# Q2: it is worth it because the alternatives do not fit
assert (dual.tmem_columns, dup.tmem_columns) == (464, 576) and dual.fits and not dup.fits
assert ss.smem_bytes > SMEM_CAPACITY["sm100"] >= dual.smem_bytes and not ss.fits
assert qk_smem["ss-q-smem"] == 2 * qk_smem["dual-gemm"] == 2 * 18 * 4096
assert ss.cycles_per_block > dual.cycles_per_block                    # in this model SS is slower per block too
assert ss.tensor_pipe_busy_per_block > dual.tensor_pipe_busy_per_block
print("all facts of notebook 03 hold")
