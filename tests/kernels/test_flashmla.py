"""The FlashMLA package: its plan against the kernel's numbers, the split, the flashmla-qk Program."""

import json

import numpy as np
import pytest

from simtc.errors import SimtcError
from simtc.isa.program import Program
from simtc.kernels import flashmla, registry
from simtc.kernels.flashmla.plan import PlanBuffer, SmemPlan
from simtc.mma.operands import read_operand
from simtc.mma.tcgen05 import tcgen05_mma
from simtc.numerics import tensor_core_mma
from simtc.numerics.cases import mma_operands
from simtc.semantics import Cta
from simtc.smem import SharedMemory, SmemDescriptor
from simtc.tmem import TensorMemory


@pytest.fixture(scope="module")
def qk():
    return mma_operands("normal", 64, 64, 576, seed=1)[0], mma_operands("normal", 64, 64, 576, seed=2)[0]


# ---- plan: FlashMLA config.h SharedMemoryPlan, lines 159-194 at 9241ae3 -------------------------------------
STRUCT_V32 = {"q": (0, 65536), "q_sw64": (65536, 8192), "o_buf": (73728, 65536), "o_accum_buf": (73728, 133088),
             "dequant0.nope": (0, 65536), "dequant0.rope": (65536, 8192), "dequant1.nope": (73728, 65536),
             "dequant1.rope": (139264, 8192), "raw_nope0": (147456, 32768), "raw_nope1": (180224, 32768),
             "p_exchange_buf": (212992, 16384), "s": (212992, 8192), "rowwise_max_buf": (229376, 512),
             "is_token_valid": (229888, 32), "tma_coord": (229920, 1024), "scales": (230944, 1024),
             "tmem_start_addr": (231968, 16), "mbarriers": (231984, 200)}


def test_smem_plan_is_the_kernels_struct():
    assert {b.name: (b.offset, b.size) for b in flashmla.SMEM_V32} == STRUCT_V32
    assert flashmla.SMEM_V32.total == 232192 <= 227 * 1024
    assert max(b.end for b in flashmla.SMEM_V32) == 232184  # the barriers end 8 B before the struct's size
    assert {b.name for b in flashmla.SMEM_V32.aliases("o_accum_buf")} == {
        "o_buf", "dequant1.nope", "dequant1.rope", "raw_nope0", "raw_nope1"}


def test_plan_check_refuses_an_undeclared_overlap_and_an_oversized_plan():
    bad = SmemPlan("bad", (PlanBuffer("a", 0, 64), PlanBuffer("b", 32, 64)), 128)
    with pytest.raises(SimtcError, match="not declared a union"):
        bad.check()
    with pytest.raises(SimtcError, match="227 KiB"):
        SmemPlan("big", (PlanBuffer("a", 0, 64),), 232449).check()
    with pytest.raises(SimtcError, match="no buffer 'x'"):
        flashmla.SMEM_V32["x"]


def test_plan_allocates_into_shared_memory_with_its_unions():
    sm = flashmla.SMEM_V32.allocate(SharedMemory())
    assert [b.name for b in sm.aliases("q")] == ["dequant0.nope"]
    assert sm.free_bytes == 227 * 1024 - 232184


def test_mbarrier_offsets_are_the_ones_the_sass_uses():
    # [sass] (sm_100a disassembly of v32.cu): the MMA thread polls 0x38a48 / 0x38a58 / 0x38ad8, commits to
    # 0x38ac8 / 0x38ae8 -- the offsets config.h lines 159-194 give rope_ready[0], nope_ready[0], so_ready[0], ...
    m = flashmla.MBARRIERS_V32
    assert len(m) == 25
    assert (m["rope_ready[0]"][0], m["nope_ready[0]"][0], m["so_ready[0]"][0]) == (0x38A48, 0x38A58, 0x38AD8)
    assert (m["qk_done[0]"][0], m["sv_done[0]"][0]) == (0x38AC8, 0x38AE8)
    assert m["valid_coord_scale_free[3]"] == (232104 + 24, 258) and m["last_store_done"] == (231984, 128)


def test_tmem_map_matches_the_kernel_and_the_budget():
    # FlashMLA config.h lines 71-80: O 0-255, Q 256-383, Q_tail 384-399, P 400-463, all 128 lanes
    assert [(r.name, r.columns) for r in flashmla.TMEM_V32] == [
        ("O", (0, 255)), ("Q", (256, 383)), ("Q_tail", (384, 399)), ("P", (400, 463)), ("free", (464, 511))]
    assert {r.lanes for r in flashmla.TMEM_V32} == {(0, 127)}
    used = sum(r.columns[1] - r.columns[0] + 1 for r in flashmla.TMEM_V32 if r.name != "free")
    assert used == 464


# ---- the split --------------------------------------------------------------------------------------------
def test_split_covers_every_dim_once_and_sums_to_qk(qk):
    q, k = qk
    dims = np.concatenate([flashmla.split_dims(0), flashmla.split_dims(1)])
    assert sorted(dims.tolist()) == list(range(576))
    (q_lo, q_hi), (k_lo, k_hi) = flashmla.q_split(q), flashmla.q_split(k)
    exact = q.astype(np.float64) @ k.T.astype(np.float64)
    assert np.allclose(q_lo.astype(np.float64) @ k_lo.T + q_hi.astype(np.float64) @ k_hi.T, exact, atol=1e-9)
    with pytest.raises(SimtcError, match="half must be 0"):
        flashmla.split_dims(2)


@pytest.mark.parametrize("half", [0, 1])
def test_hopper_descriptors_read_exactly_the_split(qk, half):
    """Each of the 18 k16 steps of a half reads, through its descriptors, the next 16 split dims."""
    q, k = qk
    sm = flashmla.load_qk(q, k, smem=SharedMemory(arch="sm90"))
    steps = flashmla.qk_half_descriptors(half)
    assert len(steps) == 18 and [acc for _, _, acc in steps] == [False] + [True] * 17
    q_h, k_h = flashmla.q_split(q)[half], flashmla.q_split(k)[half]
    for i, (ad, bd, _) in enumerate(steps):
        assert np.array_equal(read_operand(sm, ad, major="K", dtype="bf16", rows=64, k=16), q_h[:, 16 * i:16 * i + 16])
        assert np.array_equal(read_operand(sm, bd, major="K", dtype="bf16", rows=64, k=16), k_h[:, 16 * i:16 * i + 16])
    # the words hw's Hopper case used before the split moved here (the SW128 K-major operand, sm90 encoding)
    first_nope = SmemDescriptor(start=8192 * half, lbo=16, sbo=1024, layout_type="SW128", arch="sm90")
    assert steps[2][0] == first_nope


# ---- the program ------------------------------------------------------------------------------------------
def test_qk_program_counts_and_json_round_trip():
    p = flashmla.qk_program()
    c = p.counts()
    assert (c["tcgen05.cp"], c["tcgen05.mma.ws"], c["tcgen05.commit"], c["tcgen05.ld"]) == (18, 18, 1, 1)
    assert "tcgen05.mma" not in c
    assert p.counts(per_warp=True)["tcgen05.ld"] == 4  # each softmax warp loads its quadrant
    assert Program.from_json(json.loads(json.dumps(p.to_json()))) == p
    assert p.barrier("qk_done[1]").addr == flashmla.MBARRIERS_V32["qk_done[1]"][0]
    assert registry.build("flashmla-qk") == p and "18 tcgen05.mma.ws" in registry.describe("flashmla-qk")
    with pytest.raises(SimtcError, match="unknown program 'nope'"):
        registry.build("nope")


def test_records_follow_table_7_1_and_7_2():
    mmas = flashmla.qk_mmas(1)
    assert [m.a for m in mmas] == [384, 392] + [256 + 8 * k for k in range(16)]
    assert [m.b_desc.start - 139264 for m in mmas[:2]] == [0, 32]
    assert [m.b_desc.start - 73728 for m in mmas[2:]] == [16384 * (k // 4) + 32 * (k % 4) for k in range(16)]
    assert [m.enable_input_d for m in mmas] == [False] + [True] * 17
    assert all(m.ws and m.d_taddr == 400 and m.idesc.hex() == "0x04200490" for m in mmas)
    assert {m.b_desc.encode() >> 32 for m in mmas} == {0x40004040, 0x80004020}
    assert [c.taddr for c in flashmla.q_copies()] == list(range(256, 400, 8))


def test_dual_gemm_end_to_end(qk):
    """18 cp + 18 TS .ws M=64 N=128 through the semantics layer; P_lo, P_hi bit-exact per half."""
    q, k = qk
    cta = Cta()
    tm, _ = flashmla.replay_qk(q, k, cta=cta)
    p_lo, p_hi = flashmla.read_p(tm)
    for half, got in ((0, p_lo), (1, p_hi)):
        q_h, k_h = flashmla.q_split(q)[half], flashmla.q_split(k)[half]
        assert np.array_equal(got.view(np.uint32), tensor_core_mma(q_h, k_h).view(np.uint32))
    exact = q.astype(np.float64) @ k.T.astype(np.float64)
    assert np.abs(p_lo + p_hi - exact).max() <= 1e-6 * np.abs(q).max() * np.abs(k).max() * 576
    # the softmax warps' registers hold the same P (warps 0, 1: P_lo; 2, 3: P_hi)
    regs = np.concatenate([cta.regs[w]["p"] for w in range(4)]).view(np.float32)
    assert np.array_equal(regs[:64], p_lo) and np.array_equal(regs[64:], p_hi)
    last = flashmla.qk_mmas(1)[-1]
    assert tm.writer_of(0, flashmla.P_COLUMN) == last and tm.instructions[tm.last_writer[0, 400]] == "QK NoPE k=15"
    assert tm.writer_of(0, 256).label == "cp Q NoPE t=0 s=0"


def test_replay_equals_the_records_run_by_hand(qk):
    """An independent path: the same records applied with TensorMemory.cp and tcgen05_mma directly."""
    q, k = qk
    tm_replay, _ = flashmla.replay_qk(q, k)
    sm, tm = SharedMemory(), TensorMemory()
    flashmla.load_qk(q, k, smem=sm)
    tm.alloc(512)
    for c in flashmla.q_copies():
        tm.cp(c.taddr, sm, c.desc, c.shape)
    for m in flashmla.qk_mmas(1):
        tcgen05_mma(tm, sm, d_taddr=m.d_taddr, a_taddr=m.a, b_desc=m.b_desc, idesc=m.idesc,
                    enable_input_d=m.enable_input_d, ws=True)
    assert np.array_equal(tm.cells, tm_replay.cells)
