# %% [markdown]
# # 02 · Tensor Memory
#
# Tensor Memory (TMEM) is where Blackwell's `tcgen05.mma` keeps its accumulator and, optionally,
# its A operand. This notebook walks through what simtc models and where each fact comes from:
#
# 1. geometry and addresses; 2. allocation rules; 3. the lane-quadrant rule;
# 4. the `tcgen05.ld` shapes; 5. data-path layouts D, E, F, G side by side;
# 6. "which lanes does an M=64 tile touch?"; 7. the M=64 2×2 pattern and A duplication.
#
# Provenance tags as in `docs/sources.md`: **[doc]** PTX ISA 9.0 text, **[cutlass]** NVIDIA
# CUTLASS/CuTe code, **[kernel]** FlashMLA source, **[inferred]** our own reading, not documented.
# None of this has run on a Blackwell GPU here: the TMEM maps are checked against CuTe's C++ traits
# (`tests/data/cute_tmem.json.gz`), not hardware.

# %%
import numpy as np

from simtc.errors import LaneQuadrantError, TmemAllocError
from simtc.kernels.flashmla import TMEM_V32
from simtc.render.tmem import LayoutView, LdView, TmemMapView
from simtc.tmem import (
    SHAPES,
    LdStOp,
    TensorMemory,
    TmemAddress,
    cp_shape,
    datapath_layout,
    quadrant_lanes,
)

# %% [markdown]
# ## 1. Geometry and addresses
#
# 128 lanes × 512 columns of 32-bit cells = 256 KiB per CTA [doc] §9.7.16.1. An address is
# `lane << 16 | column` [doc] §9.7.16.1.1, so `taddr + c` moves c columns and `+ (l << 16)` moves l lanes.

# %%
addr = TmemAddress(64, 256)
print(addr.hex(), "=", addr, "| one column on:", TmemAddress(64, 257).hex())

# %% [markdown]
# ## 2. Allocation rules
#
# `tcgen05.alloc` hands out whole columns (all 128 lanes), in powers of two from 32 to 512, issued
# by one whole warp [doc] §9.7.16.1.2, §9.7.16.7.1. FlashMLA's head64 kernel takes all 512 columns in
# warp 0 and then lays out O, Q and P at fixed columns [kernel] `config.h`:

# %%
tm = TensorMemory()
base = tm.alloc(512, warp=0)
print("allocated at", base)
TmemMapView(regions=TMEM_V32)

# %% [markdown]
# Breaking a rule raises an error that names the rule (and its PTX section):

# %%
rules_broken = {}
for what, call in {"48 columns": lambda: TensorMemory().alloc(48, warp=0),
                   "alloc when full": lambda: tm.alloc(32, warp=1)}.items():
    try:
        call()
    except TmemAllocError as e:
        rules_broken[what] = e.rule
        print(f"{what:>16}: {type(e).__name__}: rule = {e.rule}")

# %% [markdown]
# ## 3. The lane-quadrant rule
#
# `tcgen05.ld/st` of warp `w` may touch only lanes `32·(w mod 4)` … `+31` [doc] §9.7.16.8.1;
# CUTLASS asserts the same. So reading all 128 lanes takes the four warps of a warpgroup.
# (`mma` and `cp` are issued by one thread and are not subject to the rule.)

# %%
print({w: quadrant_lanes(w) for w in range(8)})
try:
    tm.ld(32 << 16, "32x32b", 1, warp=2)   # warp 2 reading lanes 32-63
except LaneQuadrantError as e:
    quadrant_error = str(e)
print(quadrant_error)

# %% [markdown]
# ## 4. `tcgen05.ld` shapes
#
# Five shapes [doc] §9.7.16.8.3, each a fixed map from (thread, register) to (lane, column); the maps
# are CUTLASS's `SM100_TMEM_LOAD_*` traits [cutlass], checked for all 74 load forms against CuTe.
# `.16x256b.x1` is the familiar `mma.sync` C fragment: thread t holds row ⌊t/4⌋ and row ⌊t/4⌋+8.

# %%
for name, shape in SHAPES.items():
    print(f"{name:>9}: {shape.lanes} lanes, {shape.columns_per_num} column(s) and {shape.regs_per_num} "
          f"register(s) per .num step (CUTLASS {shape.cutlass})")
LdView(LdStOp("16x256b", 1))

# %% [markdown]
# ## 5. Data-path layouts D, E, F, G side by side
#
# Where `D[m][n]` of an MMA lands depends on M, `.ws` and `cta_group` [doc] §9.7.16.10.5; the
# formulas are CUTLASS's `tmem_frg` atoms [cutlass]. For N = 128:

# %%
layouts = {"D": datapath_layout(128, 128), "F": datapath_layout(64, 128),
           "E": datapath_layout(64, 128, ws=True), "G": datapath_layout(32, 128, ws=True)}
print(f"{'':3}{'case':<34}{'org':<20}{'columns':>8}  {'D[5][70] ->':<14}  lanes used   source")
for letter, lay in layouts.items():
    lanes = lay.lanes()
    print(f"{letter:<3}{lay.case:<34}{lay.organization:<20}{lay.columns:>8}  {lay.map(5, 70)!s:<14}  "
          f"{len(lanes):>3} of 128   {lay.status.split(']')[0]}]")

# %% [markdown]
# ## 6. Which lanes does an M=64 tile touch?
#
# It depends on `.ws`. **Layout F** (M=64, not `.ws`) uses half of each 32-lane quadrant: rows
# 16w…16w+15 in lanes 32w + L0 … +15, with L0 = 0 or 16, and all N columns. A second M=64 tile
# fits in the same columns at L0 = 16 (CUTLASS's "Interleaved" mode).

# %%
def runs(lanes) -> str:
    """Lane numbers as ranges, e.g. '0-15, 32-47'."""
    breaks = np.flatnonzero(np.diff(lanes) != 1)
    starts, ends = np.r_[lanes[0], lanes[breaks + 1]], np.r_[lanes[breaks], lanes[-1]]
    return ", ".join(f"{a}-{b}" for a, b in zip(starts, ends, strict=True))


f0, f16 = datapath_layout(64, 128), datapath_layout(64, 128, lane_align=16)
print("Layout F, L0 = 0: lanes", runs(f0.lanes()))
print("Layout F, L0 = 16: lanes", runs(f16.lanes()))
print("Layout E: lanes", runs(datapath_layout(64, 128, ws=True).lanes()))
LayoutView(f0)

# %% [markdown]
# **Layout E** (M=64, `.ws`) uses *all* 128 lanes and only N/2 columns: the 2×2 pattern below.

# %%
e = datapath_layout(64, 128, ws=True)
LayoutView(e, c0=400)

# %% [markdown]
# ## 7. The M=64 2×2 pattern and A duplication
#
# Layout E folds the 64 × N tile into 128 lanes × N/2 columns: columns n < N/2 go to lanes 0–63,
# columns n ≥ N/2 to lanes 64–127, both at column offset n mod N/2. The map is CUTLASS's `.ws` atom
# [cutlass]; PTX prints this organization as "2x3", which simtc reads as 2x2 **[inferred]**.
#
# When A comes from TMEM (the TS form), which lanes must hold A row m? For Layout D/F: the lanes of
# D row m [cutlass]. For Layout E, simtc assumes that **each lane half reads rows 0–63 from its own 64
# lanes**, so row m must be in lanes m and m+64 — **[inferred]**: no document says so. The evidence:
# CUTLASS's `.ws` sparse-metadata fragment adds a +64-lane copy for M=64 (`tmem_e_frg_ws`,
# `include/cute/atom/mma_traits_sm100_frag.hpp` lines 327-329 at `7107b05`);
# `tcgen05.cp .64x128b.warpx2::02_13` writes exactly this duplicated pattern [doc] (PTX ISA 9.0
# §9.7.16.9.2); FlashMLA's `.ws` TS atom notes that A "should be duplicated" [kernel]
# (`csrc/kerutils/include/kerutils/device/sm100/gemm.cuh` line 59 at `9241ae3`). FlashMLA's dual GEMM stores *different*
# data in the two halves, which turns one instruction into two independent 64×64×16 products.

# %%
for letter, lay in layouts.items():
    rule, tag = lay.a_duplication
    print(f"Layout {letter}: A row 5 in lanes {lay.a_lanes(5).tolist()} -- {rule} {tag}")
dup = cp_shape("64x128b", "warpx2::02_13")
print(f"{dup.ptx()}: source row 5 -> lanes {dup.lanes()[5].tolist()}")

# %% [markdown]
# Reading the result back takes all four warps, each in its own quadrant, with `.32x32b`: warps 0/1
# read `D[:, 0:64]` (FlashMLA's P_lo), warps 2/3 read `D[:, 64:128]` (P_hi).

# %%
readers = {}
for w in range(4):
    first, last = quadrant_lanes(w)
    (m0, n0), (m1, n1) = e.inverse(first, 0), e.inverse(last, e.columns - 1)
    readers[w] = (m0, m1, n0, n1)
    print(f"warp {w}: lanes {first}-{last} hold D rows {m0}-{m1}, columns {n0}-{n1}")

# %% [markdown]
# ## What this notebook showed (checked)

# %%
assert (addr.hex(), TmemAddress(64, 257).hex()) == ("0x00400100", "0x00400101")
assert (base.lane, base.column) == (0, 0)
assert set(rules_broken) == {"48 columns", "alloc when full"}
assert quadrant_lanes(6) == (64, 95) and "64-95" in quadrant_error
assert LdStOp("16x256b", 1).lane_offsets()[5].tolist() == [1, 1, 9, 9]
# layouts: D 4x1 over 128 lanes; F half the lanes; E all lanes, N/2 columns; G all lanes, N/4 columns
assert [(k, v.columns, len(v.lanes())) for k, v in layouts.items()] == [
    ("D", 128, 128), ("F", 128, 64), ("E", 64, 128), ("G", 32, 128)]
assert f0.lanes().tolist() == [q + i for q in (0, 32, 64, 96) for i in range(16)]
assert not set(f0.lanes()) & set(f16.lanes())
# E: the 2x2 fold, and its inverse
assert e.map(5, 70) == (69, 6) and e.inverse(69, 6) == (5, 70) and e.map(5, 6) == (5, 6)
assert readers == {0: (0, 31, 0, 63), 1: (32, 63, 0, 63), 2: (0, 31, 64, 127), 3: (32, 63, 64, 127)}
assert runs(f16.lanes()) == "16-31, 48-63, 80-95, 112-127"
lane, col = e.full_map()
assert set(lane[:, :64].ravel()) == set(range(64)) and set(lane[:, 64:].ravel()) == set(range(64, 128))
assert np.array_equal(col[:, :64], col[:, 64:])
# A duplication: E (inferred) needs rows in m and m + 64, which tcgen05.cp 64x128b.warpx2::02_13 writes
assert e.a_lanes(5).tolist() == [5, 69] and "[inferred]" in e.a_duplication[1]
assert dup.lanes()[5].tolist() == [5, 69]
assert datapath_layout(32, 128, ws=True).a_lanes(5).tolist() == [5, 37, 69, 101]
print("all facts of notebook 02 hold")
