"""wgmma (sm90): fragment maps vs CUTLASS's CLayout_64xN / ALayout_64x16 (f32 and f16x2 accumulators, A from
registers), execution through descriptors and registers vs tensor_core_mma, refusals."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simtc.errors import DtypeError, ShapeError, SimtcError
from simtc.mma.wgmma import (
    a_fragment_to_matrix,
    fragment_to_matrix,
    matrix_to_a_fragment,
    matrix_to_fragment,
    wgmma_a_fragment,
    wgmma_fragment,
    wgmma_mma_async,
    wgmma_mma_async_rs,
)
from simtc.numerics.cases import mma_operands
from simtc.numerics.fdpa import tensor_core_mma
from simtc.numerics.formats import encode_bits
from simtc.smem import CanonicalLayout, SharedMemory, SwizzleMode


@pytest.mark.parametrize("n", [8, 16, 64, 256])
def test_fragment_matches_cutlass_clayout(n):
    # CLayout_64xN = ((4,8,4),(2,2,N/8)) : ((128,1,16),(64,8,512)) -> column-major index m + 64 n
    t = np.arange(128)[:, None]
    v = np.arange(n // 2)[None, :]
    idx = 128 * (t % 4) + (t // 4) % 8 + 16 * (t // 32) + 64 * (v % 2) + 8 * ((v // 2) % 2) + 512 * (v // 4)
    rows, cols = wgmma_fragment(n)
    assert np.array_equal(rows, idx % 64) and np.array_equal(cols, idx // 64)
    d = np.arange(64 * n).reshape(64, n)
    assert np.array_equal(fragment_to_matrix(matrix_to_fragment(d)), d)  # a bijection


MODES = [(m, s) for m in ("K", "MN") for s in ("INTERLEAVE", "SW32", "SW64", "SW128")]


@pytest.mark.parametrize("major,sw", MODES)
@pytest.mark.parametrize("n", [64, 128, 256])
def test_chain_of_four_matches_tensor_core_mma(major, sw, n):
    a, b, _ = mma_operands("wide", 64, n, 64, seed=n)
    sm = SharedMemory(arch="sm90")
    ta = CanonicalLayout("bf16", major, sw, 64, 64)
    tb = CanonicalLayout("bf16", major, sw, n, 64)
    sm.alloc("A", ta.nbytes, align=1024)
    sm.alloc("B", tb.nbytes, align=1024)
    sm.write_tile(ta, a, "A")
    sm.write_tile(tb, b, "B")
    acc = None
    for k in range(4):
        acc = wgmma_mma_async(sm, sm.descriptor(ta, "A", k_slice=k), sm.descriptor(tb, "B", k_slice=k), n=n,
                              a_major=major, b_major=major, acc=acc, scale_d=k > 0)
    want = tensor_core_mma(a, b, arch="sm90")
    assert np.array_equal(fragment_to_matrix(acc).view(np.uint32), want.view(np.uint32))


def test_descriptor_words_work_too():
    a, b, c = mma_operands("normal", 64, 64, 16, seed=3)
    sm = SharedMemory(arch="sm90")
    t = CanonicalLayout("bf16", "K", SwizzleMode.SW128, 64, 16 * 4)
    sm.write_tile(t, np.pad(a, ((0, 0), (0, 48))), 0)
    sm.write_tile(t, np.pad(b, ((0, 0), (0, 48))), 8192)
    acc = wgmma_mma_async(sm, 0x4000004000010000, 0x4000004000010000 | (8192 >> 4), n=64,
                          acc=matrix_to_fragment(c))
    assert np.array_equal(fragment_to_matrix(acc), tensor_core_mma(a, b, c, arch="sm90"))


def test_errors():
    sm = SharedMemory(arch="sm90")
    with pytest.raises(ShapeError, match="multiple of 8"):
        wgmma_fragment(12)
    with pytest.raises(SimtcError, match="sm_90a only"):
        wgmma_mma_async(SharedMemory(), 0, 0, n=64)
    with pytest.raises(SimtcError, match="not modelled"):
        wgmma_mma_async(sm, 0, 0, n=64, dtype="e4m3")
    with pytest.raises(ShapeError, match=r"\(128, N/2\)"):
        fragment_to_matrix(np.zeros((64, 4)))


# ---- .f16 accumulators and A from registers (RS) ---------------------------------------------------------------

def _cutlass_index(n_values: int) -> np.ndarray:
    """CUTLASS's CLayout_64xN / ALayout_64x16 ((4,8,4),(2,2,V/4)) : ((128,1,16),(64,8,512)) as column-major indices
    m + 64 n of a (64, 2 * n_values) matrix (CUTLASS at 7107b05, mma_traits_sm90_gmma.hpp lines 433-435, 451-452)."""
    t = np.arange(128)[:, None]
    v = np.arange(n_values)[None, :]
    return 128 * (t % 4) + (t // 4) % 8 + 16 * (t // 32) + 64 * (v % 2) + 8 * ((v // 2) % 2) + 512 * (v // 4)


def _finite16(rng, shape, dtype: str) -> np.ndarray:
    """Random finite 16-bit patterns of ``dtype`` (exponent field not all ones)."""
    bits = rng.integers(0, 1 << 16, size=shape, dtype=np.uint32).astype(np.uint16)
    exp_mask = 0x7C00 if dtype == "fp16" else 0x7F80
    return np.where((bits & exp_mask) == exp_mask, bits & ~np.uint16(0x4000), bits).astype(np.uint16)


@pytest.mark.parametrize("n", [8, 64, 256])
def test_f16_accumulator_packs_two_columns_per_register(n):
    """An .f16 D is N/4 .f16x2 registers: register j of thread t holds CLayout value 2j in its low half and 2j+1 in
    its high half (PTX ISA 9.0 §9.7.15.5.1.1.1; CUTLASS's F16F16F16 atoms: CRegisters = uint32_t[N/4])."""
    rng = np.random.default_rng(n)
    bits = _finite16(rng, (64, n), "fp16")
    regs = matrix_to_fragment(bits.view(np.float16), d_dtype="fp16")
    assert regs.shape == (128, n // 4) and regs.dtype == np.uint32
    idx = _cutlass_index(n // 2)
    flat = bits.T.reshape(-1)  # column-major: m + 64 n
    assert np.array_equal(regs & 0xFFFF, flat[idx[:, 0::2]])
    assert np.array_equal(regs >> 16, flat[idx[:, 1::2]])


def test_a_fragment_matches_cutlass_alayout_64x16():
    rows, cols = wgmma_a_fragment()
    idx = _cutlass_index(8)
    assert np.array_equal(rows, idx % 64) and np.array_equal(cols, idx // 64)
    a = np.arange(64 * 16, dtype=np.float32).reshape(64, 16)  # integers below 2048: exact in fp16
    regs = matrix_to_a_fragment(a, "fp16")
    low = (regs & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float32)
    assert np.array_equal(low, a.T.reshape(-1)[idx[:, 0::2]])


@settings(max_examples=40)
@given(st.integers(0, 2**32 - 1), st.sampled_from([8, 16, 24, 128, 256]))
def test_f16_fragment_round_trips(seed, n):
    """matrix -> registers -> matrix keeps every f16 bit pattern (NaN payloads included), and registers -> matrix ->
    registers every word: the packing is a bijection."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 1 << 16, size=(64, n), dtype=np.uint32).astype(np.uint16)
    regs = matrix_to_fragment(bits.view(np.float16), d_dtype="fp16")
    assert np.array_equal(fragment_to_matrix(regs, d_dtype="fp16").view(np.uint16), bits)
    words = rng.integers(0, 1 << 32, size=(128, n // 4), dtype=np.uint64).astype(np.uint32)
    again = matrix_to_fragment(fragment_to_matrix(words, d_dtype="fp16"), d_dtype="fp16")
    assert np.array_equal(again, words)


@settings(max_examples=40)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["bf16", "fp16"]))
def test_a_fragment_round_trips(seed, dtype):
    rng = np.random.default_rng(seed)
    words = _finite16(rng, (128, 8), dtype).view("<u4").astype(np.uint32)  # (128, 4): two values per word
    a = a_fragment_to_matrix(words, dtype)
    assert a.shape == (64, 16) and a.dtype == np.float32
    assert np.array_equal(matrix_to_a_fragment(a, dtype), words)
    assert np.array_equal(a_fragment_to_matrix(matrix_to_a_fragment(a, dtype), dtype).view(np.uint32),
                          a.view(np.uint32))


def _smem_b(b: np.ndarray, major: str, sw: str, dtype: str):
    sm = SharedMemory(arch="sm90")
    tb = CanonicalLayout(dtype, major, sw, b.shape[0], b.shape[1])
    sm.alloc("B", tb.nbytes, align=1024)
    sm.write_tile(tb, b, "B")
    return sm, tb


@pytest.mark.parametrize("major,sw", [("K", "SW128"), ("MN", "SW64"), ("K", "INTERLEAVE"), ("MN", "SW128")])
@pytest.mark.parametrize("dist", ["normal", "wide", "overflow"])
def test_f16_accumulator_chain_matches_tensor_core_mma(major, sw, dist):
    """Four SS instructions with an .f16 D (fp16 inputs) equal tensor_core_mma(..., d_dtype='fp16') on the numpy
    matrices: D rounded to fp16 after every k16 step, C an fp16 matrix."""
    n = 64
    a, b, c = mma_operands(dist, 64, n, 64, dtype="fp16", seed=11)
    c = np.clip(c, -65504, 65504).astype(np.float16)
    sm = SharedMemory(arch="sm90")
    ta = CanonicalLayout("fp16", major, sw, 64, 64)
    tb = CanonicalLayout("fp16", major, sw, n, 64)
    sm.alloc("A", ta.nbytes, align=1024)
    sm.alloc("B", tb.nbytes, align=1024)
    sm.write_tile(ta, a, "A")
    sm.write_tile(tb, b, "B")
    acc = matrix_to_fragment(c, d_dtype="fp16")
    for k in range(4):
        acc = wgmma_mma_async(sm, sm.descriptor(ta, "A", k_slice=k), sm.descriptor(tb, "B", k_slice=k), n=n,
                              dtype="fp16", a_major=major, b_major=major, acc=acc, d_dtype="fp16")
    assert acc.shape == (128, n // 4) and acc.dtype == np.uint32
    want = tensor_core_mma(a, b, c.astype(np.float32), dtype="fp16", arch="sm90", d_dtype="fp16")
    got = fragment_to_matrix(acc, d_dtype="fp16")
    assert np.array_equal(got.view(np.uint16), want.astype(np.float16).view(np.uint16))
    # not the same as accumulating in f32 and rounding once (the test would be blind to per-step rounding otherwise)
    if dist == "normal":
        once = tensor_core_mma(a, b, c.astype(np.float32), dtype="fp16", arch="sm90").astype(np.float16)
        assert (got != once).any()


@pytest.mark.parametrize("dtype,d_dtype", [("bf16", "fp32"), ("fp16", "fp32"), ("fp16", "fp16")])
@pytest.mark.parametrize("major", ["K", "MN"])
@pytest.mark.parametrize("n", [16, 128])
def test_rs_chain_matches_tensor_core_mma(dtype, d_dtype, major, n):
    """A from registers: four RS instructions (A's registers packed with CUTLASS's ALayout_64x16, written here from
    the layout formula, not simtc's helpers), scale-d 0 on the first, imm-scale-a = -1."""
    a, b, _ = mma_operands("wide", 64, n, 64, dtype=dtype, seed=n)
    sm, tb = _smem_b(b, major, "SW128" if n >= 64 else "SW32", dtype)
    idx = _cutlass_index(8)
    acc = None
    for k in range(4):
        ak = a[:, 16 * k:16 * k + 16]
        bits = encode_bits(ak.T.reshape(-1)[idx], dtype).astype(np.uint32)  # (128, 8): value i of thread t
        regs = bits[:, 0::2] | (bits[:, 1::2] << 16)
        acc = wgmma_mma_async_rs(sm, regs, sm.descriptor(tb, "B", k_slice=k), n=n, dtype=dtype, b_major=major,
                                 acc=acc, scale_d=k > 0, negate_a=True, d_dtype=d_dtype)
    want = tensor_core_mma(-a, b, dtype=dtype, arch="sm90", d_dtype=d_dtype)
    got = fragment_to_matrix(acc, d_dtype=d_dtype).astype(np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_f16_and_rs_refusals():
    sm = SharedMemory(arch="sm90")
    regs = np.zeros((128, 4), np.uint32)
    with pytest.raises(DtypeError) as e:
        wgmma_mma_async(sm, 0, 0, n=64, dtype="bf16", d_dtype="fp16")
    assert e.value.rule == "wgmma .bf16 needs an .f32 accumulator"
    with pytest.raises(DtypeError) as e:
        wgmma_mma_async_rs(sm, regs, 0, n=64, dtype="bf16", d_dtype="fp16")
    assert e.value.rule == "wgmma .bf16 needs an .f32 accumulator"
    with pytest.raises(SimtcError) as e:
        wgmma_mma_async_rs(sm, regs, 0, n=64, dtype="tf32")
    assert e.value.rule == "modelled wgmma input types"
    with pytest.raises(ShapeError) as e:
        wgmma_mma_async_rs(sm, np.zeros((128, 8), np.uint32), 0, n=64)
    assert e.value.rule == "A from registers is four .b32 registers per thread"
    with pytest.raises(ShapeError, match=r"\(128, 16\)"):  # an .f32-sized fragment given as the .f16 accumulator
        wgmma_mma_async(sm, 0, 0, n=64, dtype="fp16", acc=np.zeros((128, 32), np.uint32), d_dtype="fp16")
    with pytest.raises(DtypeError, match="not a fp16 value"):
        matrix_to_fragment(np.full((64, 8), 0.1, np.float32), d_dtype="fp16")
    with pytest.raises(DtypeError, match="32-bit words"):
        fragment_to_matrix(np.zeros((128, 4), np.float16), d_dtype="fp16")


def test_semantics_execute_rs_and_f16_records():
    """The hand-replay path: simtc.semantics.execute runs RS and .f16-D records on a Cta's registers (the warp that
    executes holds the warpgroup's (128, 4) A registers and (128, N/4) accumulator words) as wgmma_mma_async_rs does."""
    from simtc.isa.base import IsaError
    from simtc.isa.wgmma import WgmmaMmaAsync
    from simtc.semantics import Cta, SemanticsError, execute

    n = 32
    a, b, c = mma_operands("normal", 64, n, 16, dtype="fp16", seed=2)
    sm, tb = _smem_b(b, "K", "SW32", "fp16")
    cta = Cta(smem=sm)
    regs = cta.warp_regs(0)
    regs["a"] = matrix_to_a_fragment(a, "fp16")
    regs["d"] = matrix_to_fragment(c.astype(np.float16), d_dtype="fp16")
    desc = sm.descriptor(tb, "B")
    rec = WgmmaMmaAsync(64, n, 16, "fp16", "a", desc, True, "d", d_dtype="fp16", scale_b=-1)
    execute(rec, cta, warp=0)
    want = tensor_core_mma(a, -b, c.astype(np.float16).astype(np.float32), dtype="fp16", arch="sm90", d_dtype="fp16")
    assert np.array_equal(fragment_to_matrix(regs["d"], d_dtype="fp16").view(np.uint16),
                          want.astype(np.float16).view(np.uint16))
    with pytest.raises(SemanticsError) as e:
        execute(WgmmaMmaAsync(64, n, 16, "fp16", "nothing", desc, False, "d"), cta, warp=0)
    assert e.value.rule == "registers are written before they are read"
    with pytest.raises(IsaError) as e:
        WgmmaMmaAsync(64, n, 16, "bf16", "a", desc, False, "d", d_dtype="fp16")
    assert e.value.rule == "wgmma accumulator types"
    with pytest.raises(IsaError) as e:
        WgmmaMmaAsync(64, n, 16, "bf16", "a", desc, False, "d", a_major="MN")
    assert e.value.rule == "register A has no transpose"
