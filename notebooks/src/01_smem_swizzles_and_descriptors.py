# %% [markdown]
# # 01 · Shared-memory swizzles and matrix descriptors
#
# A tensor-core operand in shared memory is described to the hardware by one 64-bit word, the
# **matrix descriptor**. This notebook answers the questions people ask about it, with simtc
# computing every number (nothing below is typed in by hand):
#
# 1. What is a *core matrix*, and what do **LBO** and **SBO** mean?
# 2. What do the **SW32 / SW64 / SW128** swizzles do to a tile — the pictures of PTX ISA 9.0
#    §9.7.16.3 (tcgen05) and §9.7.15.5.1.2 (wgmma)?
# 3. How do I read a descriptor from a real kernel (FlashMLA's `0x4000404000010000`)?
# 4. How does a kernel step K inside a swizzle atom?
# 5. Why swizzle at all? Bank conflicts.
#
# Sources: PTX ISA 9.0 §9.7.16.3 (canonical layouts, swizzling, Table 41 base offset),
# §9.7.16.4.1 Table 40 (the sm100 descriptor); CUTLASS `cute/swizzle.hpp`,
# `cute/atom/mma_traits_sm100.hpp`; FlashMLA `csrc/sm100/decode/head64/`. The model is checked
# against CuTe's C++ code on 223 tiles and against an H200 (see `docs/smem.md`).

# %%
import numpy as np

from simtc.render import to_text
from simtc.render.banks import BankMapView
from simtc.render.smem import DescriptorView, TileView
from simtc.smem import CanonicalLayout, SmemDescriptor, bank_conflicts, descriptor_addresses, swizzle

# %% [markdown]
# ## 1. Core matrices, LBO and SBO (no swizzle)
#
# Without a swizzle the unit of layout is the **core matrix**: 8 rows × 16 bytes = 128 contiguous
# bytes (8 × 8 bf16 elements). A K-major bf16 tile of 16 rows × 16 K is 2 × 2 core matrices. The
# descriptor says how far apart they are:
#
# * **LBO** (leading-dimension byte offset): from one core matrix to the next **along K**;
# * **SBO** (stride-dimension byte offset): from one 8-row group to the next **along M/N**.
#
# CUTLASS tiles atoms along M/N first, so the next K core matrix comes after *all* rows.
# Each cell below is one 16-byte chunk (8 elements of a row) and shows the byte offset where it lands.

# %%
inter = CanonicalLayout("bf16", "K", "INTERLEAVE", 16, 16)
TileView(inter)

# %%
print(f"LBO = {inter.lbo} B (k 8-15 of row 0 sits at 0x{inter.offset(0, 8):x})")
print(f"SBO = {inter.sbo} B (row 8 sits at 0x{inter.offset(8, 0):x})")
print("rows of one core matrix are 16 B apart:", [int(inter.offset(r, 0)) for r in range(8)])

# %% [markdown]
# With a swizzle the roles change: for **K-major** swizzled tiles K stays inside one swizzle row
# (32, 64 or 128 bytes), so LBO is unused (CUTLASS writes 16 B) and SBO is the distance between
# 8-row groups (8 × the row width when dense). For **MN-major** swizzled tiles LBO steps along
# M/N (between atoms) and SBO along K — the "swap" that PTX's prose hides. The descriptor word
# does not say which major mode it is: that is in the instruction descriptor.

# %%
for major, rows, cols in (("K", 64, 64), ("MN", 128, 16)):
    t = CanonicalLayout("bf16", major, "SW128", rows, cols)
    print(f"{major:>2}-major SW128 {rows}x{cols}: atom {t.atom_shape} (MN x K), LBO {t.lbo} B, SBO {t.sbo} B")

# %% [markdown]
# ## 2. The swizzles, next to the PTX pictures
#
# PTX draws each swizzle mode as rows of 16-byte chunks whose chunk numbers are permuted row by
# row. A swizzle is CuTe's `Swizzle<B,4,3>` applied to the **absolute byte address**: it XORs the
# 16-byte chunk index (address bits 4–6) with address bits 7 and up. The chunk view below is that
# same picture, computed from `simtc.smem.swizzle`: entry `[r][c]` = where logical chunk `c` of
# row `r` of one atom is stored.

# %%
def chunk_permutation(mode: str, row_bytes: int) -> np.ndarray:
    """Stored chunk index of each logical 16-byte chunk, per row of one swizzle atom."""
    rows = np.arange(8)[:, None]
    chunks = np.arange(row_bytes // 16)[None, :]
    stored = swizzle(rows * row_bytes + chunks * 16, mode)
    return (stored % row_bytes) // 16


perms = {mode: chunk_permutation(mode, width) for mode, width in (("SW32", 32), ("SW64", 64), ("SW128", 128))}
for mode, p in perms.items():
    print(mode)
    print(p)

# %% [markdown]
# Read off: SW32 swaps the two chunks of rows 4–7 of each atom (chunk `c ⊕ ⌊r/4⌋ mod 2`), SW64
# XORs with `⌊r/2⌋ mod 4`, SW128 with `r mod 8`. The same tiles as simtc's tile view (cells
# coloured by the 16-byte slot where each chunk lands, so the colours show the permutation):

# %%
for mode in ("SW32", "SW64"):
    print(to_text(TileView(CanonicalLayout("bf16", "K", mode, 8, 16 if mode == "SW32" else 32)), width=100))

# %%
sw128 = CanonicalLayout("bf16", "K", "SW128", 16, 64)
TileView(sw128)

# %% [markdown]
# The physical view turns it around: each row is one 128-byte line of shared memory (all 32
# banks) and each cell names the elements stored there.

# %%
TileView(sw128, view="physical", max_rows=8)

# %% [markdown]
# ## 3. Decoding a descriptor from a real kernel
#
# FlashMLA's SM100 head64 decode kernel copies Q into Tensor Memory with
# `tcgen05.cp.128x256b [taddr], 0x4000404000010000` (CuTe's `make_umma_desc` of a 128 x 64 SW128 view,
# `csrc/sm100/decode/head64/kernel.cuh` lines 466-474 at `9241ae3`; its K operand, the same SW128 view
# in `config.h` lines 120-125, has the same high word `0x40004040`). Table 40 of PTX ISA 9.0 §9.7.16.4.1 gives the
# fields; `SmemDescriptor.from_u64` decodes them and `DescriptorView` explains them:

# %%
flashmla_q = SmemDescriptor.from_u64(0x4000404000010000)
DescriptorView(flashmla_q)

# %% [markdown]
# This is exactly the descriptor CUTLASS builds for a bf16 K-major SW128 tile at address 0 — and
# simtc's `CanonicalLayout.descriptor()` gives the same word (checked against CuTe's
# `make_umma_desc` in `tests/data/cute_smem_layouts.json.gz`). Its Hopper (`wgmma`) twin differs
# only in bit 46, the sm100 "version" field:

# %%
t64 = CanonicalLayout("bf16", "K", "SW128", 64, 64)
print(t64.descriptor().hex(), t64.descriptor(arch="sm90").hex())

# %% [markdown]
# Three more words from the same kernel: the K tile of the second ring buffer (start 73,728), the
# RoPE part (SW64) and V, read MN-major with LBO = 8,192 B:

# %%
for word in (0x4000404000011200, 0x8000402000010000, 0x4000404002000000):
    d = SmemDescriptor.from_u64(word)
    print(f"{d.hex()}: start {d.start:>6}, LBO {d.lbo:>5}, SBO {d.sbo:>5}, {d.layout_type.name}")

# %% [markdown]
# ## 4. K-stepping inside a swizzle atom
#
# One bf16 `kind::f16` instruction consumes K = 16 = 32 bytes of each row. A 64-wide SW128 row
# holds four such slices, and kernels step through them by adding 32 B to the descriptor's start
# (the low word grows by 2) while LBO, SBO and the base offset stay the same. Why this works: the
# swizzle is a function of the absolute address, so the hardware applies the *same* XOR to the
# shifted start (CUTLASS `DescriptorIterator`; measured on the H200 with `wgmma`).

# %%
slices = [t64.descriptor(k_slice=s) for s in range(4)]
for s, d in enumerate(slices):
    print(f"k_slice {s}: start {d.start:>3} B  {d.hex()}")

# %% [markdown]
# `descriptor_addresses` is simtc's reading of a descriptor from its fields alone (the reading the
# H200 confirmed). For every slice it reads exactly the bytes where the tile's layout put
# elements `k = 16s … 16s + 15`:

# %%
reads_match = [bool(np.array_equal(descriptor_addresses(d, major="K", dtype="bf16", rows=64),
                                   t64.offsets()[:, 16 * s:16 * s + 16]))
               for s, d in enumerate(slices)]
print("each slice reads its 16 K columns:", reads_match)

# %% [markdown]
# ## 5. Bank conflicts: why swizzle at all
#
# Shared memory has 32 banks of 4 bytes; a warp's 16-byte accesses go in phases of 8 threads, and
# distinct words in one bank serialize (CUDA C++ Programming Guide; the phase grouping is the usual
# profiler model). Reading a 16-byte *column* of an unswizzled tile with 128-byte rows puts every
# thread of a phase in the same four banks: 8-way conflicts.

# %%
rows = np.arange(32)
plain = bank_conflicts(rows * 128, 16)
BankMapView(plain)

# %% [markdown]
# The same column of the SW128 tile lands in a different 16-byte slot in every row of an atom, so
# each phase touches all 32 banks once:

# %%
swizzled = bank_conflicts(t64.offset(rows % 64, np.zeros(32, int)), 16)
BankMapView(swizzled)

# %%
print(f"unswizzled: {plain.wavefronts} wavefronts, SW128: {swizzled.wavefronts} (ideal {swizzled.ideal})")

# %% [markdown]
# ## What this notebook showed (checked)

# %%
# core matrices: 16-byte rows, LBO along K, SBO along M/N (no swizzle, tiled M/N first)
assert [int(inter.offset(r, 0)) for r in range(8)] == list(range(0, 128, 16))
assert (inter.lbo, inter.sbo) == (256, 128) and int(inter.offset(0, 8)) == 256 and int(inter.offset(8, 0)) == 128
# K-major swizzled: LBO unused (16 B), SBO = 8 rows x 128 B; MN-major: LBO between atoms along M/N
assert (t64.lbo, t64.sbo) == (16, 1024)
assert CanonicalLayout("bf16", "MN", "SW128", 128, 16).lbo == 1024
# the swizzles are the XOR chunk permutations of PTX's pictures
r = np.arange(8)[:, None]
assert np.array_equal(perms["SW128"], np.arange(8)[None, :] ^ r)
assert np.array_equal(perms["SW64"], np.arange(4)[None, :] ^ (r // 2 % 4))
assert np.array_equal(perms["SW32"], np.arange(2)[None, :] ^ (r // 4 % 2))
# FlashMLA's word decodes to SW128, LBO 16 B, SBO 1024 B; it is CUTLASS's descriptor of the tile
assert (flashmla_q.layout_type.name, flashmla_q.lbo, flashmla_q.sbo, flashmla_q.start) == ("SW128", 16, 1024, 0)
assert t64.descriptor().encode() == 0x4000404000010000
assert t64.descriptor().encode() - t64.descriptor(arch="sm90").encode() == 1 << 46
assert SmemDescriptor.from_u64(0x4000404000011200).start == 73728
# K-stepping: +32 B per instruction inside the atom, and the hardware's reading follows
assert [d.start for d in slices] == [0, 32, 64, 96] and all(reads_match)
assert {(d.lbo, d.sbo, d.base_offset) for d in slices} == {(16, 1024, 0)}
# bank conflicts: 8-way without a swizzle, conflict-free with SW128
assert (plain.wavefronts, swizzled.wavefronts, swizzled.ideal) == (32, 4, 4)
print("all facts of notebook 01 hold")
