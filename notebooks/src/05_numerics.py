# %% [markdown]
# # 05 · Tensor-core numerics, bit for bit
#
# Multiply the same bf16 matrices with numpy in float32 and on a tensor core, and the results
# differ in the last bits of many outputs. Neither is "wrong": the tensor core does not compute a
# chain of float32 fused multiply-adds. This notebook shows what it does instead, step by step,
# and checks simtc's model (`simtc.numerics.tensor_core_mma`) bit for bit against:
#
# * **MMA-Sim** golden outputs (`tests/data/mmasim_golden.npz`, a bit-accurate reference model,
#   arXiv 2511.10909), and
# * **an NVIDIA H200** — recorded outputs (`tests/data/h200_crosscheck_seed0.npz`; its date and device
#   are printed below, from the file).
#
# Sources: MMA-Sim (arXiv 2511.10909, `microsoft/MMA-Sim`), Khattak & Mikaitis (arXiv 2512.07004) and
# our H200 measurements (`tests/data/h200_crosscheck_seed0.npz`); `docs/numerics.md`. PTX itself leaves
# the accumulation order and rounding unspecified (PTX ISA 9.0 §9.7.15, wgmma).

# %%
from pathlib import Path

import attrs
import numpy as np
from IPython.display import display
from rich.table import Table

import simtc
from simtc.hw.recording import read_recording
from simtc.mma.wgmma import fragment_to_matrix
from simtc.numerics import ARCH_PARAMS, decode_bits, encode_bits, fused_dot_add, tensor_core_mma
from simtc.numerics.cases import mma_operands

DATA = Path(simtc.__file__).resolve().parents[1] / "tests" / "data"

# %% [markdown]
# ## 1. The recipe
#
# For one instruction (K = 16, bf16 or fp16 inputs, fp32 accumulator) and one output element:
#
# 1. write every input as `s · 2^e`; products keep `e_a + e_b` and their exact significand (not renormalized);
# 2. `E` = the largest of the 17 exponents (16 products and the accumulator; a zero counts as 2^−133);
# 3. every term is **truncated** to **25 fraction bits** relative to `2^E` — no guard or sticky bit;
# 4. the integers are summed exactly and the sum is rounded **toward zero** (RZ) to fp32;
# 5. K > 16 is a chain of instructions, each result feeding the next as the accumulator.
#
# The smallest example: 1 + sixteen products of 2^−26. Exactly, that is 1 + 2^−22, which float32
# represents. On the tensor core each product lies more than 25 bits below the accumulator's
# 2^0 and is truncated away:

# %%
a = np.ones((1, 16), np.float32)
b = np.full((1, 16), 2.0**-26, np.float32)
c = np.ones((1, 1), np.float32)
tiny_tc = float(tensor_core_mma(a, b, c)[0, 0])
tiny_np = float((a @ b.T + c)[0, 0])
print(f"tensor core: {tiny_tc!r}   numpy float32: {tiny_np!r}   exact: {1 + 2.0**-22!r}")

# %% [markdown]
# Round toward zero, not to nearest: a sum just below 1.5 + half an ulp truncates down where
# numpy's round-to-nearest goes up.

# %%
x = np.zeros((1, 16), np.float32)
y = np.zeros((1, 16), np.float32)
x[0, :2] = [1.5, 2.0**-24]        # 1.5 + 2^-24 = 1.5 + half an ulp of 1.5 (fp32 ulp there is 2^-23)
y[0, :2] = [1.0, 1.0]
x[0, 2] = 2.0**-30                # a little more, so nearest rounding goes up
y[0, 2] = 1.0
rz = float(tensor_core_mma(x, y)[0, 0])
rn = float(np.float32(np.float64(1.5) + 2.0**-24 + 2.0**-30))
print(f"tensor core (RZ): {rz!r}   round to nearest: {rn!r}")

# %% [markdown]
# ## 2. How often does float32 agree?
#
# On ordinary data (standard-normal bf16, K = 64 as four chained instructions) numpy's float32
# matmul gives the tensor core's bits for only part of the outputs; on wide-range data (every
# element scaled by 2^±20) for even fewer. The differences are tiny compared with the results
# (alignment truncation and RZ against float32's round-to-nearest at every step), but they are there.

# %%
agree = {}
for dist in ("normal", "wide"):
    a, b, c = mma_operands(dist, 64, 64, 64, seed=7)
    tc = tensor_core_mma(a, b, c)
    ref = a @ b.T + c
    same = float(np.mean(tc.view(np.uint32) == ref.astype(np.float32).view(np.uint32)))
    rel = float(np.abs(tc.astype(np.float64) - ref).max() / np.abs(ref).max())
    agree[dist] = (same, rel)
    print(f"{dist:>6}: numpy float32 bit-identical on {same:6.1%} of 4,096 outputs; "
          f"max |difference| = {rel:.1e} x max |result|")

# %% [markdown]
# ## 3. Why 25 bits, truncation and RZ? Against MMA-Sim
#
# `mmasim_golden.npz` holds MMA-Sim's outputs for thousands of instructions. Take its single
# m64n8k16 instructions on wide-range data (both architectures, bf16 and fp16) and compute each with
# simtc — and with the same recipe keeping 24 or 26 bits instead of 25:

# %%
golden = np.load(DATA / "mmasim_golden.npz")
dists, dtypes, archs = (list(golden[k]) for k in ("distributions", "dtypes", "archs"))
rows = np.flatnonzero(golden["full_dist"] == dists.index("wide"))
match = {"simtc (F = 25)": 0, "F = 24": 0, "F = 26": 0, "numpy float32": 0}
for j in rows:
    dtype, arch = dtypes[golden["full_dtype"][j]], archs[golden["full_arch"][j]]
    a, b, c = mma_operands("wide", 64, 8, 16, dtype=dtype, seed=int(golden["full_seed"][j]))
    want = golden["full_d"][j]
    params = ARCH_PARAMS[arch]
    got = {"simtc (F = 25)": tensor_core_mma(a, b, c, dtype=dtype, arch=arch),
           "F = 24": fused_dot_add(a, b, c, fmt=dtype, params=attrs.evolve(params, frac_bits=24)),
           "F = 26": fused_dot_add(a, b, c, fmt=dtype, params=attrs.evolve(params, frac_bits=26)),
           "numpy float32": (a @ b.T + c).astype(np.float32)}
    for name, d in got.items():
        match[name] += int(np.array_equal(d.view(np.uint32), want))
summary = Table(title=f"{len(rows)} MMA-Sim m64n8k16 instructions (wide data)")
summary.add_column("model")
summary.add_column("bit-exact instructions", justify="right")
for name, n in match.items():
    summary.add_row(name, f"{n} / {len(rows)}")
display(summary)

# %% [markdown]
# ## 4. Against an H200
#
# The recorded H200 run holds the raw `wgmma` accumulator registers of FlashMLA's dual-GEMM split
# run on Hopper: P_lo sums the even 64-dimension chunks of Q·Kᵀ plus RoPE dims 512–543, P_hi the odd
# chunks plus 544–575, each as a chain of 18 m64n64k16 instructions in the kernel's order (RoPE
# first). simtc computes the same chains by reordering K — the chain order is part of the result.

# %%
h200 = read_recording(DATA / "h200_crosscheck_seed0.npz")
print(f"recorded {h200.meta['date']} on {h200.meta['device']}")
q = mma_operands("normal", 64, 64, 576, seed=1)[0]
k = mma_operands("normal", 64, 64, 576, seed=2)[0]
chunks = np.arange(512).reshape(8, 64)
dims = {"P_lo": np.r_[512:544, chunks[0::2].ravel()], "P_hi": np.r_[544:576, chunks[1::2].ravel()]}
hw_exact, np_same = {}, {}
for name, d in dims.items():
    key = next(key for key in h200.keys if key.startswith(f"dual GEMM (Hopper) | {name}"))
    measured = fragment_to_matrix(h200.registers[key])
    model = tensor_core_mma(q[:, d], k[:, d], arch="sm90")
    plain = (q[:, d] @ k[:, d].T).astype(np.float32)
    hw_exact[name] = bool(np.array_equal(model.view(np.uint32), measured.view(np.uint32)))
    np_same[name] = float(np.mean(plain.view(np.uint32) == measured.view(np.uint32)))
    print(f"{name}: simtc bit-exact with the H200: {hw_exact[name]}; numpy float32 identical on {np_same[name]:.1%}")

# %% [markdown]
# What is and is not measured: the H200 confirms this arithmetic for `wgmma` (bf16 and fp16, 272
# recorded cases with outputs, all bit-exact; `docs/hardware.md`). That `tcgen05.mma` on Blackwell
# uses the same arithmetic is an assumption from MMA-Sim and Khattak & Mikaitis — not measured here.
#
# ## 5. Formats: the bits of the inputs
#
# `encode_bits` / `decode_bits` convert to and from the bit patterns. bf16 keeps 7 fraction bits and
# rounds to nearest even: 1 + 2^−8 lies exactly halfway between 1 and 1 + 2^−7 and goes to the even 1.0.

# %%
vals = np.float32([1.0, 1.00390625, 1.005859375, -2.5])
bits = encode_bits(vals, "bf16")
print([hex(int(v)) for v in bits], decode_bits(bits, "bf16").tolist())

# %% [markdown]
# ## What this notebook showed (checked)

# %%
assert tiny_tc == 1.0 and tiny_np == 1.0 + 2.0**-22          # 25-bit truncation drops what float32 keeps
assert rz == 1.5 and rn > 1.5                                  # round toward zero, not to nearest
assert 0.2 < agree["normal"][0] < 0.9 and agree["wide"][0] < agree["normal"][0]
assert max(rel for _, rel in agree.values()) < 1e-5                # ...but only in the last bits
assert match["simtc (F = 25)"] == len(rows) == 256             # every MMA-Sim instruction, bit for bit
assert max(match["F = 24"], match["F = 26"], match["numpy float32"]) < len(rows)
assert hw_exact == {"P_lo": True, "P_hi": True}                # and the H200's registers
assert min(np_same.values()) < 1.0
assert decode_bits(bits, "bf16").tolist() == [1.0, 1.0, 1.0078125, -2.5]
print("all facts of notebook 05 hold")
