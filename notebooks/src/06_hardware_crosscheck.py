# %% [markdown]
# # 06 · The hardware cross-check
#
# simtc checks its models against real GPUs with **thin, header-free CUDA executors**: the GPU
# copies a shared-memory byte image that simtc built, verbatim, and runs instructions whose
# descriptors simtc built. No layout, swizzle or arithmetic logic lives in CUDA, so a hardware run
# tests simtc's model — not a second copy of it. This notebook shows:
#
# 1. what one case is (an image, descriptors, simtc's prediction);
# 2. building the kernels and checking their SASS — no GPU needed (NVRTC or nvcc, and nvdisasm);
# 3. the result on a GPU: live if one is here, otherwise the **recorded H200 run** shipped in
#    `tests/data/` (labelled as recorded, with its date and device).
#
# Code: `simtc.hw` (`suite`, `wgmma`, `tcgen05`, `compile`, `crosscheck`, `recording`); the command
# is `simtc crosscheck`. See `docs/hardware.md`.

# %%
from pathlib import Path

import numpy as np

import simtc
from simtc.errors import SimtcError
from simtc.hw import tcgen05, wgmma
from simtc.hw.compile import CompileError, compile_cuda, disassemble, sass_histogram
from simtc.hw.crosscheck import replay
from simtc.hw.device import probe
from simtc.hw.recording import read_recording
from simtc.hw.suite import case_key, layout_cases
from simtc.render.hw import CrosscheckTable

RECORDING = Path(simtc.__file__).resolve().parents[1] / "tests" / "data" / "h200_crosscheck_seed0.npz"

# %% [markdown]
# ## 1. One case: image + descriptors + prediction
#
# A case of the `wgmma` layout sweep: A (64 × 64) and B (64 × 64) bf16, K-major, SW128, on
# wide-range data, stored by `simtc.smem` into a byte image whose unused bytes hold random
# "poison" (so a wrong read shows). The program is four chained `wgmma.m64n64k16`, one per
# 32-byte K slice; their descriptor words are simtc's:

# %%
cases = layout_cases()  # the whole sweep, seeded case by case as in the recorded run
case = next(c for c in cases if case_key(c) == "wgmma layouts | bf16 K-major SW128 N=64 wide")
print(case_key(case), "| image:", case.image.size, "bytes |", len(cases), "layout cases in the sweep")
for ins in case.program.mmas:
    a = ins.a
    print(f"a_desc {a.hex()} (start {a.start:>5}, {a.layout_type.name})  b_desc {ins.b_desc.hex()}  "
          f"scale_d {int(ins.scale_d)}")

# %% [markdown]
# The CUDA side only copies the image and passes these words to `wgmma`; here is the instruction in
# the generated, header-free source:

# %%
source = wgmma.kernel_source(64, "bf16", "K", "K")
print("#include lines:", source.count("#include"))
print(next(line.strip() for line in source.splitlines() if "wgmma.mma_async.sync" in line))

# %% [markdown]
# simtc's prediction is the (128 threads × 32 registers) accumulator fragment the GPU will hold,
# from its own descriptor reading and tensor-core arithmetic:

# %%
predicted = wgmma.predict(case.image, case.program)
print(predicted.shape, predicted.dtype, "thread 0, registers 0-3:", predicted[0, :4])

# %% [markdown]
# ## 2. Build and check the SASS, without a GPU
#
# `compile_cuda` builds a cubin with NVRTC (through `cuda-bindings`, the dev extra) or nvcc;
# `disassemble` runs nvdisasm. The `wgmma` executor must contain `HGMMA` and no local-memory
# spills; the Blackwell dual-GEMM kernel must contain 18 `UTCHMMA.WS` (the `.ws` MMAs), 18
# `UTCCP.T.S` (the `tcgen05.cp` of Q), one `UTCBAR` (the commit) — and building it for sm_90a must fail.

# %%
def build(source: str, arch: str, name: str):
    """The SASS opcode histogram, or the reason it cannot be built here."""
    try:
        return sass_histogram(disassemble(compile_cuda(source, arch=arch, name=name)), full=True), None
    except CompileError:
        raise
    except SimtcError as e:
        return None, str(e)


hopper, why_not = build(source, "sm_90a", "wgmma_exec.cu")
blackwell, _ = build(tcgen05.kernel_source(), "sm_100a", "tcgen05_dual_qk.cu")
if hopper is None:
    print("cannot build here:", why_not)
else:
    hgmma = {k: v for k, v in hopper.items() if k.startswith("HGMMA")}
    spills = sum(v for k, v in hopper.items() if k.split(".")[0] in ("LDL", "STL"))
    print("sm_90a wgmma executor:", hgmma, "| local-memory spills:", spills)
    tcgen05_sass = {k: blackwell.get(k, 0) for k in tcgen05.EXPECTED_SASS}
    print("sm_100a dual-GEMM kernel:", tcgen05_sass)

# %%
try:
    compile_cuda(tcgen05.kernel_source(), arch="sm_90a", name="tcgen05_dual_qk.cu")
    rejected = "it compiled"
except CompileError as e:
    rejected = next(line for line in e.log.splitlines() if "not supported" in line)
except SimtcError as e:
    rejected = f"(no compiler: {e})"
print(rejected)

# %% [markdown]
# ## 3. On a GPU — or the recorded H200 run
#
# With CuPy and an sm_90a GPU, `simtc crosscheck` runs all 284 cases (240 layout × data cases, 18
# deliberately wrong descriptors, 12 special-value cases, the dual-GEMM halves, the 12-run
# base-offset experiment). Here we run one case live if a GPU is present; otherwise we show the
# recorded run, which the test suite replays on every CI run.

# %%
device = probe()
print("GPU here:", device.available, "-", device.reason if not device.available else f"{device.name} {device.arch}")
if device.available and device.arch == "sm_90a":
    got, _ = wgmma.run(case.image, case.program)
    print("live on", device.name, "- bit-exact:", bool(np.array_equal(got.view(np.uint32), predicted.view(np.uint32))))

# %%
recording = read_recording(RECORDING)
label = f"RECORDED {recording.meta['date']} on {recording.meta['device']}"
print(label)
recorded = recording.registers[case_key(case)]
recorded_exact = bool(np.array_equal(recorded.view(np.uint32), predicted.view(np.uint32)))
print(f"this case, recorded registers vs simtc's prediction: bit-exact = {recorded_exact}")

# %% [markdown]
# The whole recorded run, replayed: every case is rebuilt from the recorded seed, predicted by simtc
# and compared with the recorded registers (bit for bit where they were kept, else by SHA-256
# digest). The last row, when present, compares simtc's wgmma timing model (calibrated on this
# recording) with the recorded `wgmma` timings; it is not a bit-exactness check.

# %%
run = replay(RECORDING)
CrosscheckTable(run.results, f"recorded run, replayed without a GPU: {run.note}")

# %% [markdown]
# ## What this notebook showed (checked)

# %%
# the executor is header-free and takes simtc's descriptors; simtc predicts the full fragment
assert source.count("#include") == 0 and "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16" in source
assert len(case.program.mmas) == 4 and predicted.shape == (128, 32)
assert [i.a.start % 1024 for i in case.program.mmas] == [0, 32, 64, 96]
# built without a GPU: HGMMA and no spills; 18 UTCHMMA.WS + 18 UTCCP.T.S + 1 UTCBAR; sm_90a refuses tcgen05
if hopper is not None:
    assert any(k.startswith("HGMMA.64x64x16.F32.BF16") for k in hopper) and spills == 0
    assert tcgen05_sass == tcgen05.EXPECTED_SASS
    assert "not supported on .target 'sm_90a'" in rejected
else:
    assert "nvdisasm" in why_not or "NVRTC" in why_not or "nvcc" in why_not
# the recorded H200 run: this case and every bit-exactness check of all 284 cases
assert "H200" in label and recorded_exact
exact_rows = [r for r in run.results if "timing" not in r.check]
assert sum(r.cases for r in exact_rows) == 284 and all(r.bit_exact == r.cases for r in exact_rows)
print("all facts of notebook 06 hold")
