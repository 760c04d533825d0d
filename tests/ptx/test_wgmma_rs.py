"""``wgmma`` with ``.f16`` accumulators and with A from registers (RS) in the PTX executor.

CUDA kernels compiled by NVRTC for sm_90a run through simtc.cuda: simtc's hardware-record kernel
(``simtc/hw/cuda/wgmma_rs_record.cu`` via :mod:`simtc.hw.wgmma_rs`: RS chains with bf16/fp16 inputs, ``.f32`` and
``.f16`` D, B K- and MN-major, imm-scale -1) and a small SS kernel with an ``.f16`` D. Their registers are compared
with :func:`simtc.numerics.tensor_core_mma` computed on the numpy matrices, the registers mapped to D by CUTLASS's
``CLayout_64xN`` formula written out here (not simtc's fragment helpers). Hand PTX checks the refusals, each by its
rule. ``tests/data/h200_wgmma_rs.npz`` (recorded on an H200 by ``python -m simtc.hw.wgmma_rs record``) is compared
when present.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import simtc.cuda as xp
from simtc.hw import wgmma_rs as rs
from simtc.numerics.cases import mma_operands
from simtc.numerics.fdpa import tensor_core_mma
from simtc.numerics.formats import encode_bits
from simtc.ptx import parser
from simtc.ptx.errors import PtxSyntaxError, PtxUnsupported
from simtc.ptx.executor import launch
from simtc.ptx.memory import Device
from simtc.smem import CanonicalLayout, SharedMemory

DATA = Path(__file__).parents[1] / "data" / "h200_wgmma_rs.npz"


def _cutlass_index(values: int) -> np.ndarray:
    """CUTLASS's CLayout_64xN ((4,8,4),(2,2,N/8)) : ((128,1,16),(64,8,512)) (mma_traits_sm90_gmma.hpp lines 433-435
    at 7107b05; ALayout_64x16, lines 451-452, is N = 16) with ``values`` = N/2 per thread: (128, N/2) column-major
    indices m + 64 n of value v of thread t."""
    t = np.arange(128)[:, None]
    v = np.arange(values)[None, :]
    return 128 * (t % 4) + (t // 4) % 8 + 16 * (t // 32) + 64 * (v % 2) + 8 * ((v // 2) % 2) + 512 * (v // 4)


def _cutlass_values(regs: np.ndarray, n: int, d_dtype: str) -> np.ndarray:
    """(128, nreg) accumulator words -> D (64, N) float64 by the CLayout formula: an .f32 D holds value v in word v,
    an .f16 D values 2j and 2j+1 in word j's low and high half."""
    idx = _cutlass_index(n // 2)
    if d_dtype == "fp32":
        vals = regs.view(np.float32)
    else:
        halves = np.stack([regs & 0xFFFF, regs >> 16], axis=-1).reshape(128, n // 2).astype(np.uint16)
        vals = halves.view(np.float16)
    d = np.empty(64 * n)
    d[idx] = vals
    return d.reshape(n, 64).T


def _reference(case: rs.RsCase, inputs: rs.RsInputs) -> np.ndarray:
    """tensor_core_mma on the case's matrices: D = (sa A)(sb B)^T + C (C dropped when the first scale-d is 0)."""
    c = inputs.c if inputs.scale_d[0] else np.zeros_like(inputs.c)
    return tensor_core_mma(case.scale_a * inputs.a, case.scale_b * inputs.b, c, dtype=case.dtype, arch="sm90",
                           d_dtype=case.d_dtype).astype(np.float64)


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    return bool(np.array_equal(got, want, equal_nan=True))


def _one_per_form() -> list[rs.RsCase]:
    first: dict = {}
    for c in rs.CASES:
        first.setdefault((c.n, c.dtype, c.d_dtype, c.b_major), c)
    return list(first.values())


def _wide() -> list[rs.RsCase]:
    return [c for c in rs.CASES if c.dist == "wide" and c.b_major == "K" and c.n == 64]


@pytest.mark.parametrize("case", _one_per_form() + _wide(), ids=lambda c: c.key)
def test_rs_kernel_in_the_executor_equals_tensor_core_mma(case):
    """RS chains of four instructions through the executor (A's registers gathered from the four warps) equal
    numpy's tensor_core_mma; with an .f16 D the result is not D rounded once (the per-step rounding shows)."""
    inputs = rs.build(case)
    idx = _cutlass_index(8)
    for i in range(rs.INSTRUCTIONS):  # A's registers as CUTLASS's ALayout_64x16 places the values
        bits = encode_bits(inputs.a[:, 16 * i:16 * i + 16].T.reshape(-1)[idx], case.dtype).astype(np.uint32)
        assert np.array_equal(inputs.a_regs[i], bits[:, 0::2] | (bits[:, 1::2] << 16))
    got = rs.launch(xp, case, inputs)
    assert got.shape == (128, case.nreg)
    want = _reference(case, inputs)
    assert _same(_cutlass_values(got, case.n, case.d_dtype), want), case.key
    assert np.array_equal(got, rs.predict(case, inputs))  # the model alone agrees with the executed kernel
    if case.d_dtype == "fp16" and case.dist == "normal":
        c = inputs.c if inputs.scale_d[0] else np.zeros_like(inputs.c)
        once = tensor_core_mma(case.scale_a * inputs.a, case.scale_b * inputs.b, c, dtype=case.dtype, arch="sm90")
        assert not _same(_cutlass_values(got, case.n, case.d_dtype), once.astype(np.float16).astype(np.float64))


def test_rs_cases_cover_the_brief():
    forms = {(c.dtype, c.d_dtype) for c in rs.CASES}
    assert forms == {("bf16", "fp32"), ("fp16", "fp32"), ("fp16", "fp16")}
    assert {c.n for c in rs.CASES} == {64, 128} and {c.b_major for c in rs.CASES} == {"K", "MN"}
    assert {c.dist for c in rs.CASES} >= {"normal", "wide"} and len({c.key for c in rs.CASES}) == len(rs.CASES)
    assert any(c.scale_a < 0 for c in rs.CASES) and any(c.scale_b < 0 for c in rs.CASES)


_SS_F16 = r"""
typedef unsigned int u32;
typedef unsigned long long u64;
extern "C" __global__ void __launch_bounds__(128, 1)
ss_f16(const uint4* image, u32 chunks, const u64* a_desc, const u64* b_desc, u32 n_instr, const u32* acc_in,
       u32* out)
{
    extern __shared__ __align__(1024) unsigned char raw[];
    u32 base = (u32)__cvta_generic_to_shared(raw);
    const u32 pad = (1024u - (base & 1023u)) & 1023u;
    uint4* smem = reinterpret_cast<uint4*>(raw + pad);
    base += pad;
    for (u32 i = threadIdx.x; i < chunks; i += 128) smem[i] = image[i];
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    u32 d[16];
    for (int i = 0; i < 16; ++i) d[i] = acc_in[threadIdx.x * 16 + i];
    const u64 shift = (u64)((base >> 4) & 0x3FFFu);
    for (u32 p = 0; p < n_instr; ++p) {
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        asm volatile(
            "{\n .reg .pred p;\n setp.ne.b32 p, %18, 0;\n"
            " wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16\n"
            " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 1, 1;\n}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]),
              "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15])
            : "l"(a_desc[p] + shift), "l"(b_desc[p] + shift), "r"(1u)
            : "memory");
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    }
    for (int i = 0; i < 16; ++i) out[threadIdx.x * 16 + i] = d[i];
}
"""


@pytest.mark.parametrize("dist", ["normal", "wide"])
def test_ss_f16_accumulator_kernel_equals_tensor_core_mma(dist):
    """``wgmma.mma_async...m64n64k16.f16.f16.f16`` with A and B MN-major (imm-trans 1, 1) from shared memory, C in
    the 16 .f16x2 registers: D after four instructions equals tensor_core_mma(d_dtype='fp16')."""
    a, b, c = mma_operands(dist, 64, 64, 64, dtype="fp16", seed=5)
    c = c.astype(np.float16).astype(np.float32)
    ta = CanonicalLayout("fp16", "MN", "SW128", 64, 64)
    tb = CanonicalLayout("fp16", "MN", "SW128", 64, 64)
    sm = SharedMemory(arch="sm90", size=2 * ta.nbytes)
    sm.write_tile(ta, a, 0)
    sm.write_tile(tb, b, ta.nbytes)
    a_desc = np.array([ta.descriptor(arch="sm90", start=0, k_slice=k).encode() for k in range(4)], np.uint64)
    b_desc = np.array([tb.descriptor(arch="sm90", start=ta.nbytes, k_slice=k).encode() for k in range(4)], np.uint64)
    # C's registers by the CLayout formula: word j of thread t = values 2j (low half) and 2j+1 (high half)
    idx = _cutlass_index(32)
    cb = c.astype(np.float16).view(np.uint16).T.reshape(-1)[idx].astype(np.uint32)
    acc = cb[:, 0::2] | (cb[:, 1::2] << 16)
    fn = xp.RawKernel(_SS_F16, "ss_f16", options=("-arch=sm_90a",))
    image = np.array(sm.data)
    out = xp.zeros(128 * 16, dtype=np.uint32)
    fn.max_dynamic_shared_size_bytes = image.size + 1024
    fn((1,), (128,), (xp.asarray(image.view(np.uint32)), np.uint32(image.size // 16), xp.asarray(a_desc),
                      xp.asarray(b_desc), np.uint32(4), xp.asarray(acc.reshape(-1)), out),
       shared_mem=image.size + 1024)
    got = _cutlass_values(out.get().reshape(128, 16), 64, "fp16")
    want = tensor_core_mma(a, b, c, dtype="fp16", arch="sm90", d_dtype="fp16")
    assert _same(got, want.astype(np.float64))
    once = tensor_core_mma(a, b, c, dtype="fp16", arch="sm90").astype(np.float16).astype(np.float64)
    assert not _same(got, once)  # f16 accumulation rounds after every k16 step


# ---- refusals: hand PTX -----------------------------------------------------------------------------------------

def _hand(body: str):
    return parser.parse(f"""
.version 9.0
.target sm_90a
.address_size 64
.visible .entry k()
{{
    .reg .b32 %r<40>; .reg .b64 %rd<4>; .reg .f32 %f<40>;
    {body}
    ret;
}}
""")


_D8 = "{%r0, %r1, %r2, %r3}"
_D16 = "{%r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7}"


@pytest.mark.parametrize(("body", "error", "rule"), [
    (f"wgmma.mma_async.sync.aligned.m64n16k16.f16.bf16.bf16 {_D8}, %rd1, %rd2, 1, 1, 1, 0, 0;", PtxSyntaxError,
     "wgmma .bf16 needs an .f32 accumulator"),
    (f"wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32 {_D16}, %rd1, %rd2, 1, 1, 1, 0, 0;", PtxUnsupported,
     "modelled wgmma types"),
    (f"wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {_D16}, %rd1, %rd2, 1, 1, 1;", PtxUnsupported,
     "modelled wgmma types"),
    (f"wgmma.mma_async.sync.aligned.m64n16k32.s32.s8.s8 {_D16}, %rd1, %rd2, 1;", PtxUnsupported,
     "modelled wgmma types"),
    (f"wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {_D16}, {{%r8, %r9, %r10, %r11}}, %rd2, 1, 1, 1, 1, 0;",
     PtxSyntaxError, "register A has no transpose"),
    (f"wgmma.mma_async.sync.aligned.m64n16k16.f16.f16.f16 {_D16}, %rd1, %rd2, 1, 1, 1, 0, 0;", PtxSyntaxError,
     "wgmma accumulator registers"),
    (f"wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {_D16}, {{%r8, %r9}}, %rd2, 1, 1, 1, 0;",
     PtxSyntaxError, "A from registers is four .b32 registers per thread"),
])
def test_refused_forms_name_their_rule(body, error, rule):
    m = _hand(body)
    with pytest.raises(error) as e:
        launch(m, "k", grid=(1,), block=(128,), args=[], device=Device())
    assert e.value.rule == rule
    assert e.value.ref.startswith("PTX ISA 9.0 §9.7.15")
    assert "line" in e.value.message


# ---- the kernel compiles for the H200; the H200 recording -----------------------------------------------------

@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_record_kernel_compiles_with_nvcc_for_sm_90a(tmp_path):
    """ptxas accepts the recording kernel's RS wgmma (an .f32 D bound as 32-bit words, an .f16 D, imm-scale -1)."""
    for case in (rs.CASES[2], next(c for c in rs.CASES if c.d_dtype == "fp16" and c.n == 128)):
        src = tmp_path / f"{rs.kernel_name(case)}.cu"
        src.write_text(rs.kernel_source(case))
        subprocess.run(["nvcc", "-arch=sm_90a", "-cubin", "-o", str(src.with_suffix(".cubin")), str(src)],
                       check=True, capture_output=True, text=True)
        assert src.with_suffix(".cubin").stat().st_size > 0


def _recorded():
    if not DATA.exists():
        pytest.skip(f"{DATA.name} is absent: record it on an sm_90a GPU with "
                    "`PYTHONPATH=$PWD python3 -P -m simtc.hw.wgmma_rs record tests/data/h200_wgmma_rs.npz`")
    return rs.read_record(DATA)


def test_model_equals_the_h200_recording():
    """simtc's model on every recorded case's inputs gives the H200's registers bit for bit."""
    recs = _recorded()
    assert len(recs) == len(rs.CASES)
    for case, inputs, out in recs:
        assert np.array_equal(rs.predict(case, inputs), out), case.key


def test_recorded_inputs_are_the_cases_inputs():
    for case, inputs, _ in _recorded():
        built = rs.build(case)
        for f in ("image", "a_regs", "b_descs", "scale_d", "acc_in"):
            assert np.array_equal(getattr(built, f), getattr(inputs, f)), (case.key, f)


@pytest.mark.slow
def test_executor_equals_the_h200_recording():
    """The recording kernel itself, executed by simtc on the recorded inputs, gives the H200's registers."""
    for case, inputs, out in _recorded():
        assert np.array_equal(rs.launch(xp, case, inputs), out), case.key
