"""The semantics layer: records applied to a Cta, the observed access path, barriers, registers."""

import numpy as np
import pytest

from simtc.errors import LaneQuadrantError
from simtc.isa.cuda_core import CudaCoreBlock
from simtc.isa.mbarrier import MbarrierArrive, MbarrierArriveExpectTx, MbarrierInit, MbarrierTryWait
from simtc.isa.program import Barrier, Program, Role
from simtc.isa.shared import LdShared, StShared
from simtc.isa.sync import BarSync
from simtc.isa.tcgen05 import Alloc, Commit, Cp, Dealloc, Ld, Mma, RelinquishAllocPermit, St, WaitLd
from simtc.isa.tma import CpAsyncBulkTensor
from simtc.isa.wgmma import WgmmaMmaAsync
from simtc.mma import InstrDescriptor
from simtc.mma.tcgen05 import tcgen05_mma
from simtc.mma.wgmma import wgmma_mma_async
from simtc.numerics.cases import mma_operands
from simtc.semantics import Cta, SemanticsError, WouldBlock, execute, register_effect, run_program
from simtc.smem import CanonicalLayout, SharedMemory
from simtc.tmem import TensorMemory

TA = CanonicalLayout("bf16", "K", "SW128", 128, 64)
TB = CanonicalLayout("bf16", "K", "SW128", 128, 64)
IDESC = InstrDescriptor(kind="f16", m=128, n=128, a_format="bf16", b_format="bf16")


def _cta_with_operands(seed=0):
    a, b, _ = mma_operands("normal", 128, 128, 64, seed=seed)
    cta = Cta()
    cta.smem.write_tile(TA, a, 0)
    cta.smem.write_tile(TB, b, 16384)
    execute(Alloc(512, 0x30000), cta, warp=0)
    return cta, a, b


def test_alloc_writes_the_address_and_records_its_writer():
    cta = Cta()
    rec = Alloc(256, 1024)
    execute(rec, cta, warp=0)
    execute(Alloc(128, 1028), cta, warp=0)
    assert cta.smem.read(1028, 4).view("<u4")[0] == 256  # the second block starts at column 256
    assert cta.smem.writer_of(1024) is rec and cta.smem.writer_of(1020) is None
    execute(RelinquishAllocPermit(), cta)
    execute(Dealloc(0, 256), cta)
    execute(Dealloc(256, 128), cta)
    cta.tmem.check_all_freed()


def test_mma_equals_the_direct_call_and_the_record_is_the_last_writer():
    cta, _, _ = _cta_with_operands(1)
    recs = [Mma(0, TA.descriptor(k_slice=k), TB.descriptor(start=16384, k_slice=k), IDESC, enable_input_d=k > 0,
                label=f"k={k}") for k in range(4)]
    for r in recs:
        execute(r, cta, warp=4, threads=1)
    sm, tm = SharedMemory(), TensorMemory()
    sm.data[:] = cta.smem.data
    tm.alloc(512)
    for k in range(4):
        tcgen05_mma(tm, sm, d_taddr=0, a_desc=TA.descriptor(k_slice=k), b_desc=TB.descriptor(start=16384, k_slice=k),
                    idesc=IDESC, enable_input_d=k > 0)
    assert np.array_equal(cta.tmem.cells, tm.cells)
    assert cta.tmem.writer_of(5, 7) is recs[-1] and cta.tmem.instructions[-1] == "k=3"
    assert cta.tmem.writer_of(5, 200) is None


def test_observers_see_every_access_with_the_record():
    cta, _, _ = _cta_with_operands(2)
    seen = []
    stop = cta.observe(lambda kind, rec, region: seen.append((kind, rec, region)))
    cp = Cp(256, TA.descriptor())
    mma = Mma(0, 256, TB.descriptor(start=16384), IDESC, enable_input_d=True)
    execute(cp, cta, warp=4, threads=1)
    execute(mma, cta, warp=4, threads=1)
    execute(Ld(0, "32x32b", 8, "d"), cta, warp=1)
    stop()
    execute(Ld(0, "32x32b", 8, "d2"), cta, warp=1)  # not observed any more
    kinds = [(k, r) for k, r, _ in seen]
    assert kinds == [("smem.read", cp), ("tmem.write", cp), ("smem.read", mma), ("tmem.read", mma),
                     ("tmem.read", mma), ("tmem.write", mma), ("tmem.read", kinds[-1][1])]
    # the copy read exactly the 128 rows x 32 bytes its descriptor names, and wrote 128 lanes x 8 columns
    assert np.unique(seen[0][2].addresses).size == 128 * 32
    assert seen[1][2].lanes.size == 128 * 8 and set(np.unique(seen[1][2].columns)) == set(range(256, 264))
    # the MMA's D write covers 128 lanes x 128 columns; the ld read lanes 32-63 (warp 1's quadrant)
    assert seen[5][2].lanes.size == 128 * 128
    assert set(np.unique(seen[6][2].lanes)) == set(range(32, 64))


def test_ld_and_st_go_through_registers_per_warp():
    cta = Cta()
    execute(Alloc(32, 0), cta)
    vals = np.arange(32 * 4, dtype=np.uint32).reshape(32, 4) + 7
    cta.warp_regs(6)["x"] = vals
    st = St(4, "32x32b", 4, "x")
    execute(st, cta, warp=6)  # warp 6: quadrant 2, lanes 64-95
    execute(Ld(4, "32x32b", 4, "y"), cta, warp=2)
    assert np.array_equal(cta.regs[2]["y"], vals)
    assert cta.tmem.writer_of(64, 4) is st and cta.tmem.writer_of(0, 4) is None
    with pytest.raises(SemanticsError, match="no register array 'z'"):
        execute(St(4, "32x32b", 4, "z"), cta, warp=6)


def test_mbarrier_phases_and_tx_accounting():
    cta = Cta()
    execute(MbarrierInit("b", 2), cta)
    execute(MbarrierTryWait("b", 1), cta)  # a fresh barrier: the phase of parity 1 counts as completed
    with pytest.raises(WouldBlock, match="parity 0"):
        execute(MbarrierTryWait("b", 0), cta)
    execute(MbarrierArriveExpectTx("b", 4096), cta, threads=1)  # one arrival + 4096 tx bytes
    execute(MbarrierArrive("b"), cta, threads=1)
    assert cta.mbarriers["b"].phase == 0 and cta.mbarriers["b"].tx == 4096
    cta.gmem["t"] = np.arange(4096, dtype=np.uint8)
    load = CpAsyncBulkTensor(1024, 4096, "b", tensor="t")
    execute(load, cta, threads=1)
    assert cta.mbarriers["b"].phase == 1
    execute(MbarrierTryWait("b", 0), cta)
    assert np.array_equal(cta.smem.read(1024, 4096), np.arange(4096, dtype=np.uint8))
    assert cta.smem.writer_of(5000) is load
    with pytest.raises(SemanticsError, match="arrival"):
        execute(MbarrierArrive("b"), cta)  # 32 threads arrive on a count of 2
    with pytest.raises(SemanticsError, match=r"before mbarrier\.init"):
        execute(Commit("nope"), cta)


def test_ld_shared_and_st_shared_round_trip_with_a_stride():
    cta = Cta()
    v = (np.arange(32 * 4, dtype=np.uint32).reshape(32, 4) * 3)
    cta.warp_regs(0)["v"] = v
    st = StShared(4096, 16, "v", stride=32)
    execute(st, cta)
    execute(LdShared(4096, 16, "w", stride=32), cta)
    assert np.array_equal(cta.regs[0]["w"], v)
    assert cta.smem.writer_of(4096 + 32 * 5 + 3) is st and cta.smem.writer_of(4096 + 16) is None
    execute(LdShared(4096, 4, "s", stride=32), cta)
    assert np.array_equal(cta.regs[0]["s"][:, 0], v[:, 0])


def test_wgmma_record_equals_the_model():
    a, b, _ = mma_operands("normal", 64, 64, 16, seed=3)
    t = CanonicalLayout("bf16", "K", "SW128", 64, 64)
    cta = Cta(smem=SharedMemory(arch="sm90"))
    cta.smem.write_tile(t, np.pad(a, ((0, 0), (0, 48))), 0)
    cta.smem.write_tile(t, np.pad(b, ((0, 0), (0, 48))), 8192)
    ad, bd = t.descriptor(arch="sm90"), t.descriptor(arch="sm90", start=8192)
    execute(WgmmaMmaAsync(64, 64, 16, "bf16", ad, bd, False, "acc"), cta)
    execute(WgmmaMmaAsync(64, 64, 16, "bf16", ad, bd, True, "acc", scale_a=-1), cta)
    once = wgmma_mma_async(cta.smem, ad, bd, n=64, scale_d=False)
    want = wgmma_mma_async(cta.smem, ad, bd, n=64, acc=once, negate_a=True)
    assert np.array_equal(cta.regs[0]["acc"], want)
    assert not np.array_equal(want, once)


def test_cuda_core_effects_come_from_the_registry():
    @register_effect("test_double")
    def _double(cta, rec, warp):
        cta.warp_regs(warp)["x"] = cta.reg(warp, "x") * 2

    cta = Cta()
    cta.warp_regs(1)["x"] = np.arange(4)
    execute(CudaCoreBlock("double", (("FADD", 1),), effect="test_double"), cta, warp=1)
    execute(CudaCoreBlock("timing only", (("FADD", 1),)), cta, warp=1)
    assert cta.regs[1]["x"].tolist() == [0, 2, 4, 6]
    with pytest.raises(SemanticsError, match="no effect named 'missing'"):
        execute(CudaCoreBlock("x", effect="missing"), cta)
    with pytest.raises(SemanticsError, match="registered already"):
        register_effect("test_double")(lambda *a: None)


def test_run_program_interleaves_roles_at_their_waits():
    cta = Cta()
    execute(Alloc(32, 0), cta)
    cta.warp_regs(1)["v"] = np.full((32, 1), 5, np.uint32)
    prog = Program("handoff", (
        Role("consumer", (0,), (MbarrierTryWait("full", 0), Ld(0, "32x32b", 1, "got"), WaitLd())),
        Role("producer", (1,), (St(0, "32x32b", 1, "v", lane_base="absolute"), MbarrierArrive("full")), threads=1),
    ), barriers=(Barrier("full", "mbarrier", 1),))
    with pytest.raises(LaneQuadrantError, match="warp 1 may access lanes 32-63"):
        run_program(prog, cta)
    prog = Program("handoff", (
        Role("consumer", (1,), (MbarrierTryWait("full", 0), Ld(0, "32x32b", 1, "got"))),
        Role("producer", (5,), (St(0, "32x32b", 1, "v"), MbarrierArrive("full")), threads=1),
    ), barriers=(Barrier("full", "mbarrier", 1),))
    cta.warp_regs(5)["v"] = np.full((32, 1), 9, np.uint32)
    run_program(prog, cta)
    assert (cta.regs[1]["got"] == 9).all()


def test_named_barrier_and_deadlock():
    both = Program("sync", (Role("a", (0,), (BarSync(1, 64),)), Role("b", (1,), (BarSync(1, 64),))))
    cta = run_program(both)
    assert cta.named[1].generation == 1 and cta.named[1].arrived == 0
    alone = Program("stuck", (Role("a", (0,), (BarSync(1, 64),)),))
    with pytest.raises(SemanticsError, match="deadlocks: role 'a' warp 0"):
        run_program(alone)


def test_unknown_record_type_is_refused():
    with pytest.raises(SemanticsError, match="no semantics"):
        execute(object(), Cta())
    with pytest.raises(SemanticsError, match="1 to 32"):
        execute(WaitLd(), Cta(), threads=33)


def test_a_register_no_record_wrote_is_a_semantics_error_not_a_key_error():
    """A mutated Program (a deleted tcgen05.ld or wait) can leave an effect reading a register array nobody wrote:
    the Cta says so with the rule, and the engine keeps it among its semantics errors instead of crashing."""
    import pytest as _pytest

    from simtc.engine import Engine
    from simtc.isa import CudaCoreBlock, Program, Role
    from simtc.semantics.cta import Cta, SemanticsError
    from simtc.semantics.execute import EFFECTS, register_effect

    cta = Cta()
    with _pytest.raises(SemanticsError, match=r"no register array 'o'.*registers are written before they are read"):
        cta.warp_regs(3)["o"]
    name = "test.reads_o"
    if name not in EFFECTS:
        @register_effect(name)
        def _reads_o(cta, rec, warp):
            return cta.warp_regs(warp)["o"] * 2
    prog = Program("reads-o", (Role("w", (0,), (CudaCoreBlock("use o", (("FMUL", 1),), effect=name),)),))
    eng = Engine(prog, mode="semantics", cta=Cta()).run()
    assert len(eng.semantics_errors) == 1 and "no register array 'o'" in eng.semantics_errors[0]["error"]
