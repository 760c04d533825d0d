"""Hardware path without a GPU: the executors build for sm_90a, their SASS is right, cases are sound."""

import importlib.util

import numpy as np
import pytest

from simtc.errors import SimtcError
from simtc.hw import suite as hc
from simtc.hw.wgmma import WgmmaProgram, kernel_source, predict
from simtc.mma.wgmma import fragment_to_matrix
from simtc.numerics.fdpa import tensor_core_mma

HAVE_NVRTC = importlib.util.find_spec("cuda") is not None and importlib.util.find_spec("cuda.bindings") is not None
needs_compiler = pytest.mark.skipif(not HAVE_NVRTC,
                                    reason="cuda-bindings + nvidia-cuda-nvrtc (dev extra) not installed")


@needs_compiler
@pytest.mark.parametrize("n", [64, 256])
@pytest.mark.parametrize("major", ["K", "MN"])
def test_executor_builds_with_hgmma_and_no_spills(n, major):
    from simtc.errors import HardwareUnavailable
    from simtc.hw.compile import compile_cuda, disassemble, sass_histogram

    cubin = compile_cuda(kernel_source(n, "bf16", major, major), arch="sm_90a", name="x.cu")
    assert cubin[:4] == b"\x7fELF"
    try:
        sass = disassemble(cubin)
    except HardwareUnavailable as e:
        pytest.skip(str(e))
    h = sass_histogram(sass)
    assert h["HGMMA"] >= 1 and h["WARPGROUP"] >= 1
    assert h.get("LDL", 0) == 0 and h.get("STL", 0) == 0
    full = sass_histogram(sass, full=True)
    assert any(k.startswith(f"HGMMA.64x{n}x16.F32.BF16") for k in full)


@needs_compiler
def test_wgmma_kernel_is_rejected_for_sm100a():
    from simtc.hw.compile import CompileError, compile_cuda

    with pytest.raises(CompileError, match=r"not supported on \.target 'sm_100a'"):
        compile_cuda(kernel_source(64, "bf16", "K", "K"), arch="sm_100a", name="x.cu")


def test_kernel_source_is_header_free_and_filled():
    src = kernel_source(128, "fp16", "MN", "K")
    assert "#include" not in src and "{{" not in src
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in src
    assert "p, 1, 1, 1, 0;" in src


def test_case_counts_and_layout_coverage():
    cases = hc.layout_cases()
    assert len(cases) == 2 * 2 * 4 * 3 * 5  # dtype x major x swizzle x N x distribution
    assert {(c.meta["major"], c.meta["swizzle"]) for c in cases} == {
        (m, s) for m in ("K", "MN") for s in ("INTERLEAVE", "SW32", "SW64", "SW128")}


def test_prediction_equals_numerics_model():
    case = hc.layout_cases(ns=(64,), distributions=("wide",), dtypes=("bf16",))[0]
    sm_a = predict(case.image, case.program)
    from simtc.numerics.cases import mma_operands

    a, b, _ = mma_operands("wide", 64, 64, 64, seed=0)
    assert np.array_equal(fragment_to_matrix(sm_a), tensor_core_mma(a, b, arch="sm90"))


def test_wrong_descriptors_change_what_is_read():
    wrong = hc.wrong_descriptor_cases()
    differs = 0
    for c in wrong:
        correct = hc._build(c.meta["major"], c.meta["swizzle"], c.program.n, "normal", c.program.n)[3]
        assert c.program != correct
        differs += not np.array_equal(predict(c.image, c.program), predict(c.image, correct))
    assert differs >= len(wrong) - 2  # (a swap of equal LBO/SBO can read the same)


def test_programs_are_isa_records():
    from simtc.isa.wgmma import WgmmaCommitGroup, WgmmaMmaAsync

    case = hc.layout_cases(ns=(128,), distributions=("normal",), dtypes=("fp16",))[4]  # fp16 MN-major INTERLEAVE
    p = case.program
    assert [type(r) for r in p.records] == [WgmmaMmaAsync, WgmmaCommitGroup] * 4
    assert (p.n, p.dtype, p.a_major, p.b_major) == (128, "fp16", "MN", "MN")
    assert p.mmas[1].ptx().startswith("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 d, ")
    assert [m.scale_d for m in p.mmas] == [False, True, True, True] and p.group_ends == (True,) * 4
    with pytest.raises(SimtcError, match="one executor"):
        WgmmaProgram((*p.records, hc.layout_cases(ns=(64,), distributions=("normal",), dtypes=("fp16",))[0]
                      .program.mmas[0]))


def test_cases_are_values():
    a, b = hc.special_value_cases()[:2], hc.special_value_cases()[:2]
    assert a == b and hash(a[0]) == hash(b[0]) and a[0] != a[1]
    assert len({*a, *b}) == 2
    assert not a[0].image.flags.writeable


def test_dual_gemm_halves_sum_to_qk():
    cases, ops = hc.dual_gemm_case()
    # the kernel's placement (FlashMLA config.h SharedMemoryPlan, kernel.cuh lines 532-552 at 9241ae3): Q RoPE at
    # 65,536, K NoPE (dequant[1]) at 73,728;
    # half 1's first step reads its 4-KiB RoPE tile, NoPE step k=5 of half 0 reads tile 2 at +32 B
    hi_first, lo_k5 = cases[1].program.mmas[0], cases[0].program.mmas[2 + 5]
    assert (hi_first.a.start, hi_first.b_desc.start, hi_first.scale_d) == (65536 + 4096, 139264 + 4096, False)
    assert (lo_k5.a.start, lo_k5.b_desc.start) == (2 * 8192 + 32, 73728 + 2 * 8192 + 32)
    assert [len(c.program.mmas) for c in cases] == [18, 18] and cases[0].program.group_ends[-2:] == (False, True)
    lo, hi = (fragment_to_matrix(predict(c.image, c.program)) for c in cases)
    exact = ops["q"].astype(np.float64) @ ops["k"].T.astype(np.float64)
    assert np.abs((lo + hi) - exact).max() < 1e-4 * np.abs(exact).max() + 1e-4
