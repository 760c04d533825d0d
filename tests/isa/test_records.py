"""Records: frozen, PTX lines, exact JSON round trips, validation naming the rule."""

import json
import subprocess
import sys

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import simtc.isa as isa
from simtc.errors import (
    DescriptorError,
    LaneQuadrantError,
    ShapeError,
    SimtcError,
    TmemAccessError,
    TmemAllocError,
    TmemShapeError,
)
from simtc.isa import (
    REGISTRY,
    Alloc,
    BarArrive,
    BarSync,
    Commit,
    Cp,
    CpAsyncBulk,
    CpAsyncBulkTensor,
    CudaCoreBlock,
    Dealloc,
    InstrDescriptor,
    IsaError,
    Ld,
    LdShared,
    MbarrierArriveExpectTx,
    MbarrierInit,
    MbarrierTryWait,
    Mma,
    SmemDescriptor,
    St,
    StShared,
    WgmmaMmaAsync,
    WgmmaWaitGroup,
    record_from_json,
)
from simtc.tmem.ldst import all_ops

QK = InstrDescriptor.from_u32(0x04200490)


def sw128(start):
    return SmemDescriptor(start=start, lbo=16, sbo=1024, layout_type="SW128")


# ---- layering and shape of the package ----------------------------------------------------------------
def test_import_isa_loads_no_machine_state_or_renderer():
    banned = ("simtc.smem.memory", "simtc.tmem.memory", "simtc.mma", "simtc.semantics", "simtc.engine",
              "simtc.render", "simtc.hw", "simtc.cli", "rich", "cupy")
    code = f"import sys, simtc.isa\nprint([m for m in {banned!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_at_least_twelve_frozen_record_types():
    assert len(REGISTRY) >= 12
    for op, cls in REGISTRY.items():
        assert attrs.has(cls) and cls.__attrs_attrs__ is not None
        assert issubclass(cls, isa.Instr) and cls.op == op
        assert cls.__setattr__ is not object.__setattr__  # attrs frozen


def test_every_record_type_has_an_example(examples):
    assert {r.op for r in examples} == set(REGISTRY)


def test_records_are_frozen(record):
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        record.label = "changed"
    hash(record)


def test_json_round_trip_is_exact(record):
    d = record.to_json()
    back = record_from_json(json.loads(json.dumps(d)))
    assert back == record and type(back) is type(record)
    assert back.to_json() == d
    assert type(record).from_json(d) == record


def test_opcode_is_a_counting_key(record):
    assert record.opcode in isa.OPCODES
    assert record.ptx().endswith(";") or record.op == "cuda_core"


def test_mma_json_keeps_the_kind():
    f8 = InstrDescriptor(kind="f8f6f4", m=128, n=64, a_format="e5m2", b_format="e5m2")  # word reads as f16 bf16
    assert InstrDescriptor.from_u32(f8.encode()).kind == "f16"
    m = Mma(0, sw128(0), sw128(8192), f8, False)
    d = m.to_json()
    assert d["kind"] == "f8f6f4" and d["idesc"] == f8.hex()
    assert record_from_json(d) == m


def test_unknown_op_and_fields_raise():
    with pytest.raises(IsaError, match="unknown record op"):
        record_from_json({"op": "mbarrier.arrive_drop"})
    with pytest.raises(IsaError, match="unknown JSON field"):
        record_from_json({"op": "tcgen05.commit", "bar": "b", "multicast": None, "label": "", "mask": 1})


# ---- PTX lines (syntax of PTX ISA 9.0 §9.7.16.7-§9.7.16.12; FlashMLA 9241ae3 kerutils device/sm100/gemm.cuh
# lines 38, 135) ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("rec", "line"), [
    (Alloc(512, 231968), "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [0x38a20], 512;"),
    (Dealloc(0, 512), "tcgen05.dealloc.cta_group::1.sync.aligned.b32 0x00000000, 512;"),
    (isa.RelinquishAllocPermit(), "tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;"),
    (Cp(256, sw128(0)), "tcgen05.cp.cta_group::1.128x256b [0x00000100], 0x4000404000010000;"),
    (Cp(264, sw128(32)), "tcgen05.cp.cta_group::1.128x256b [0x00000108], 0x4000404000010002;"),
    (Cp(0, sw128(0), "64x128b", "warpx2::01_23"),
     "tcgen05.cp.cta_group::1.64x128b.warpx2::01_23 [0x00000000], 0x4000404000010000;"),
    (Mma(400, 256, sw128(73728), QK, False, ws=True),
     "tcgen05.mma.ws.cta_group::1.kind::f16 [0x00000190], [0x00000100], 0x4000404000011200, 0x04200490, 0;"),
    (Mma(400, 256, sw128(73728), QK, True, ws=True, collector="b0::use"),
     "tcgen05.mma.ws.cta_group::1.kind::f16.collector::b0::use [0x00000190], [0x00000100], 0x4000404000011200, "
     "0x04200490, 1;"),
    (Mma(0, sw128(0), sw128(8192), InstrDescriptor(kind="f16", m=128, n=64, a_format="bf16", b_format="bf16"), True,
         collector="a::lastuse"),
     "tcgen05.mma.cta_group::1.kind::f16.collector::a::lastuse [0x00000000], 0x4000404000010000, "
     "0x4000404000010200, 0x08100490, 1;"),
    (Commit("qk_done[0]"), "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [qk_done[0]];"),
    (Commit("b", multicast=3),
     "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [b], 0x0003;"),
    (Ld(400, "32x32b", 32, "p"), "tcgen05.ld.sync.aligned.32x32b.x32.b32 p, [0x00000190];"),
    (Ld(0, "16x256b", 1, "r", pack=True), "tcgen05.ld.sync.aligned.16x256b.x1.pack::16b.b32 r, [0x00000000];"),
    (Ld(0, "16x32bx2", 2, "r"), "tcgen05.ld.sync.aligned.16x32bx2.x2.b32 r, [0x00000000], 2;"),
    (St(64, "32x32b", 64, "o"), "tcgen05.st.sync.aligned.32x32b.x64.b32 [0x00000040], o;"),
    (St(0, "16x32bx2", 1, "o", unpack=True), "tcgen05.st.sync.aligned.16x32bx2.x1.unpack::16b.b32 [0x00000000], 2, o;"),
    (isa.WaitLd(), "tcgen05.wait::ld.sync.aligned;"),
    (isa.WaitSt(), "tcgen05.wait::st.sync.aligned;"),
    (isa.FenceBeforeThreadSync(), "tcgen05.fence::before_thread_sync;"),
    (isa.FenceAfterThreadSync(), "tcgen05.fence::after_thread_sync;"),
    (MbarrierInit("q_tma", 1), "mbarrier.init.shared::cta.b64 [q_tma], 1;"),
    (isa.MbarrierArrive("so_ready[0]"), "mbarrier.arrive.shared::cta.b64 state, [so_ready[0]];"),
    (MbarrierArriveExpectTx("rope_ready[1]", 8192),
     "mbarrier.arrive.expect_tx.shared::cta.b64 state, [rope_ready[1]], 8192;"),
    (MbarrierTryWait("qk_done[1]", 0), "mbarrier.try_wait.parity.shared::cta.b64 p, [qk_done[1]], 0;"),
    (CpAsyncBulkTensor(0, 8192, "q_tma", tensor="q", coords=(0, 0, 0, 0)),
     "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [0x0], [q, {0, 0, 0, 0}], "
     "[q_tma];"),
    (isa.CpAsyncBulkTensorStore(73728, 8192, tensor="o", coords=(0, 64, 0, 0)),
     "cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [o, {0, 64, 0, 0}], [0x12000];"),
    (CpAsyncBulk(73728, 2048, dst="o_accum"),
     "cp.async.bulk.global.shared::cta.bulk_group [o_accum], [0x12000], 2048;"),
    (isa.BulkCommitGroup(), "cp.async.bulk.commit_group;"),
    (isa.BulkWaitGroupRead(0), "cp.async.bulk.wait_group.read 0;"),
    (BarSync(9, 128), "bar.sync 9, 128;"),
    (BarArrive(10, 64), "bar.arrive 10, 64;"),
    (isa.FenceProxyAsync(), "fence.proxy.async.shared::cta;"),
    (isa.FenceProxyAsync(""), "fence.proxy.async;"),
    (LdShared(212992, 16, "r"), "ld.shared.v4.b32 r, [0x34000];"),
    (LdShared(0, 8, "r"), "ld.shared.v2.b32 r, [0x0];"),
    (StShared(4, 4, "m"), "st.shared.b32 [0x4], m;"),
    (isa.WgmmaFence(), "wgmma.fence.sync.aligned;"),
    (WgmmaMmaAsync(64, 128, 16, "fp16", "a", SmemDescriptor(0, 16, 1024, "SW128", arch="sm90"), False, "d",
                   b_major="MN"),
     "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 d, a, 0x4000004000010000, 0, 1, 1, 1;"),
    (isa.WgmmaCommitGroup(), "wgmma.commit_group.sync.aligned;"),
    (WgmmaWaitGroup(0), "wgmma.wait_group.sync.aligned 0;"),
])
def test_ptx_lines(rec, line):
    assert rec.ptx() == line


def test_opcodes_and_forms():
    ts = Mma(400, 256, sw128(73728), QK, False, ws=True)
    ss = Mma(0, sw128(0), sw128(8192), InstrDescriptor(kind="f16", m=128, n=64, a_format="bf16", b_format="bf16"),
             True)
    assert (ts.opcode, ts.form, ss.opcode, ss.form) == ("tcgen05.mma.ws", "TS", "tcgen05.mma", "SS")
    assert isa.WaitLd().opcode == isa.WaitSt().opcode == "tcgen05.wait"
    assert isa.FenceBeforeThreadSync().opcode == isa.FenceAfterThreadSync().opcode == "tcgen05.fence"
    assert isa.CpAsyncBulkTensorStore(0, 16).opcode == "cp.async.bulk.tensor"
    assert Cp.elected and Cp.is_async and Mma.elected and not Ld.elected and Ld.is_async and not BarSync.is_async


# ---- validation -----------------------------------------------------------------------------------------
def _raises(exc, fn, *args, rule=None, ref="PTX", **kw):
    with pytest.raises(exc) as info:
        fn(*args, **kw)
    e = info.value
    assert isinstance(e, SimtcError) and e.rule
    if rule:
        assert rule in e.rule
    if ref:
        assert e.ref and ref in e.ref
    return e


@pytest.mark.parametrize("ncols", [0, 16, 48, 96, 1024])
def test_alloc_ncols_power_of_two_32_to_512(ncols):
    _raises(TmemAllocError, Alloc, ncols, 0, rule="power of 2")
    _raises(TmemAllocError, Dealloc, 0, ncols, rule="power of 2")


def test_alloc_and_dealloc_operands():
    _raises(IsaError, Alloc, 32, 2, rule="4-byte aligned")
    _raises(TmemAllocError, Dealloc, 0x00010000, 32, rule="lane field 0")
    _raises(TmemAccessError, Dealloc, 256, 512, rule="512 columns")


@pytest.mark.parametrize(("shape", "num"), [("16x256b", 64), ("16x128b", 128), ("32x32b", 3), ("32x32b", 256),
                                            ("32x64b", 1), ("16x64b", 0)])
def test_ld_st_shape_num_combinations(shape, num):
    _raises(TmemShapeError, Ld, 0, shape, num, "r")
    _raises(TmemShapeError, St, 0, shape, num, "r")


def test_every_legal_ld_st_form_is_accepted():
    for op in all_ops():
        ld, st_ = Ld(0, op.shape.name, op.num, "r", pack=op.pack), St(0, op.shape.name, op.num, "r", unpack=op.pack)
        for rec in (ld, st_):
            assert rec.nregs == op.nregs


def test_ld_st_lane_and_column_rules():
    _raises(LaneQuadrantError, Ld, 32 << 16, "32x32b", 1, "r", rule="quadrant")  # quadrant-relative lane 32
    _raises(LaneQuadrantError, Ld, 16 << 16, "32x32b", 1, "r")
    assert Ld(16 << 16, "16x64b", 1, "r").footprint(3).tmem_reads[0].lane0 == 112
    _raises(LaneQuadrantError, Ld, 8 << 16, "16x64b", 1, "r", lane_base="absolute")
    _raises(TmemAccessError, Ld, 500, "32x32b", 16, "r", rule="512 columns")
    _raises(TmemShapeError, Ld, 0, "32x32b", 1, "r", imm=4)
    _raises(IsaError, Ld, 0, "32x32b", 1, "r", lane_base="relative", ref=None)
    absolute = Ld(64 << 16, "32x32b", 1, "r", lane_base="absolute")
    assert absolute.footprint(6).tmem_reads[0].lane0 == 64
    _raises(LaneQuadrantError, absolute.footprint, 1, rule="lanes 32*(w%4)")


def test_cp_shapes_from_the_table():
    _raises(TmemShapeError, Cp, 0, sw128(0), "64x128b", rule="warpx2")
    _raises(TmemShapeError, Cp, 0, sw128(0), "128x256b", "warpx4")
    _raises(TmemShapeError, Cp, 0, sw128(0), "256x256b")
    _raises(TmemShapeError, Cp, 0, sw128(0), "64x128b.warpx2::02_13", ref="PTX")
    _raises(TmemAccessError, Cp, 508, sw128(0))
    _raises(TmemAccessError, Cp, 1 << 16, sw128(0))  # 128 lanes from lane 1 leave TMEM
    _raises(DescriptorError, Cp, 0, SmemDescriptor(0, 16, 1024, "SW128", arch="sm90"))


def test_mma_rules():
    f64 = InstrDescriptor(kind="f16", m=64, n=64, a_format="bf16", b_format="bf16")
    _raises(IsaError, Mma, 0, 0, sw128(0), f64, True, collector="b0::fill", rule="collector")  # not .ws
    _raises(IsaError, Mma, 0, 0, sw128(0), QK, True, ws=True, collector="a::use")
    _raises(IsaError, Mma, 0, 0, sw128(0), QK, True, ws=True, collector="b4::use")
    _raises(TmemAccessError, Mma, 32 << 16, 0, sw128(0), f64, True, rule="Layout F")
    _raises(TmemAccessError, Mma, 16 << 16, 0, sw128(0), f64, True, rule="same lane alignment")
    assert Mma(16 << 16, 16 << 16, sw128(0), f64, True).layout.lane_align == 16
    _raises(TmemAccessError, Mma, 1 << 16, 0, sw128(0), QK, True, ws=True, rule="lane alignment 0")
    mn_a = InstrDescriptor(kind="f16", m=64, n=128, a_format="bf16", b_format="bf16", a_major="MN")
    _raises(IsaError, Mma, 400, 256, sw128(0), mn_a, True, ws=True, rule="K-major A")
    n8 = InstrDescriptor(kind="f16", m=64, n=8, a_format="bf16", b_format="bf16")
    _raises(ShapeError, Mma, 0, 256, sw128(0), n8, True, ws=True, rule=".ws N")
    m32 = InstrDescriptor(kind="f16", m=32, n=64, a_format="bf16", b_format="bf16")
    _raises(ShapeError, Mma, 0, 256, sw128(0), m32, True, rule="M in {64, 128}")
    sparse = InstrDescriptor(kind="f16", m=64, n=128, a_format="bf16", b_format="bf16", sparse=True)
    _raises(IsaError, Mma, 0, 256, sw128(0), sparse, True, ws=True, rule="dense")
    _raises(TmemAccessError, Mma, 480, 256, sw128(0), QK, True, ws=True)  # D columns 480-543
    _raises(TmemAccessError, Mma, 400, 508, sw128(0), QK, True, ws=True)  # A columns 508-515


def test_barrier_and_sync_rules():
    for count in (0, -1, 1 << 20):
        _raises(IsaError, MbarrierInit, "b", count, rule="1 ... 2**20 - 1")
    _raises(IsaError, MbarrierArriveExpectTx, "b", 1 << 20, rule="tx-count")
    _raises(IsaError, MbarrierTryWait, "b", 2, rule="parity")
    _raises(IsaError, MbarrierInit, "", 1, ref=None)
    _raises(IsaError, Commit, "b", multicast=0, rule="ctaMask")
    _raises(IsaError, Commit, "b", multicast=1 << 16)
    for bar_id in (-1, 16):
        _raises(IsaError, BarSync, bar_id, 128, rule="0-15")
    for threads in (0, 48, 1056):
        _raises(IsaError, BarArrive, 1, threads, rule="multiple of the warp size")


def test_shared_and_bulk_rules():
    _raises(IsaError, LdShared, 0, 3, "r", rule="widths")
    _raises(IsaError, StShared, 8, 16, "r", rule="aligned")
    _raises(IsaError, StShared, 0, 16, "r", stride=24, rule="aligned")
    _raises(IsaError, StShared, 0, 16, "r", threads=2, offsets=(0,), ref=None)
    _raises(IsaError, CpAsyncBulkTensor, 64, 2048, "b", rule="128-byte", ref="TMA")
    _raises(IsaError, CpAsyncBulkTensor, 0, 100, "b", rule="multiples of 16")
    _raises(IsaError, CpAsyncBulkTensor, 0, 2048, "b", mode="gather4", coords=(0, 1, 2, 3), rule="gather4")
    _raises(IsaError, CpAsyncBulkTensor, 0, 2048, "b", mode="im2col")
    _raises(IsaError, CpAsyncBulk, 8, 2048, rule="16-byte aligned")


def test_wgmma_rules():
    b = SmemDescriptor(0, 16, 1024, "SW128", arch="sm90")
    _raises(IsaError, WgmmaMmaAsync, 64, 12, 16, "bf16", "a", b, True, "d", rule="m64nNk16")
    _raises(IsaError, WgmmaMmaAsync, 64, 64, 32, "bf16", "a", b, True, "d", rule="K = 32 bytes")
    _raises(IsaError, WgmmaMmaAsync, 64, 64, 16, "bf16", "a", b, True, "d", a_major="MN", rule="no transpose")
    _raises(IsaError, WgmmaMmaAsync, 64, 64, 16, "bf16", "a", b, True, "d", d_dtype="fp16", rule="accumulator")
    _raises(DescriptorError, WgmmaMmaAsync, 64, 64, 16, "bf16", "a", sw128(0), True, "d")
    _raises(IsaError, WgmmaWaitGroup, -1, rule="non-negative")


def test_cuda_core_block_counts():
    _raises(IsaError, CudaCoreBlock, "x", (("FFMA", -1),), rule="counts", ref=None)
    _raises(IsaError, CudaCoreBlock, "x", ("FFMA",), rule="counts", ref=None)
    assert CudaCoreBlock("x", [("FFMA", 2), ("FADD", 3)]).instructions == 5


# ---- property round trips --------------------------------------------------------------------------------
@given(k=st.integers(0, 15), b=st.integers(0, 1), col=st.sampled_from([256, 264, 376]),
       enable=st.booleans(), coll=st.sampled_from(isa.COLLECTORS_WS))
def test_mma_round_trip_property(k, b, col, enable, coll):
    nope = (0, 73728)[b]
    m = Mma(400, col, sw128(nope + 16384 * (k // 4) + 32 * (k % 4)), QK, enable, ws=True, collector=coll)
    assert record_from_json(json.loads(json.dumps(m.to_json()))) == m


@given(op=st.sampled_from(all_ops()), col=st.integers(0, 384), base=st.sampled_from(["warp", "absolute"]),
       lane=st.sampled_from([0, 16, 32, 96]))
def test_ld_st_round_trip_property(op, col, base, lane):
    try:
        ld = Ld((lane << 16) | col, op.shape.name, op.num, "r", pack=op.pack, lane_base=base)
    except SimtcError:
        return
    st_ = St(ld.taddr, op.shape.name, op.num, "r", unpack=op.pack, lane_base=base)
    for rec in (ld, st_):
        assert record_from_json(json.loads(json.dumps(rec.to_json()))) == rec


@given(addr=st.integers(0, 1000).map(lambda x: 16 * x), threads=st.integers(1, 128),
       stride=st.sampled_from([None, 0, 16, 32, 528]))
def test_shared_round_trip_property(addr, threads, stride):
    rec = StShared(addr, 16, "v", threads=threads, stride=stride)
    assert record_from_json(json.loads(json.dumps(rec.to_json()))) == rec
    assert LdShared.from_json(LdShared(addr, 16, "v", threads=threads, stride=stride).to_json()).threads == threads
