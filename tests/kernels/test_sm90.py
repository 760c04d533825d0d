"""FlashMLA's SM90 sparse FP8 decode (64 heads) as a Program (:mod:`simtc.kernels.flashmla.sm90`).

The Program is held against the kernel's compiled SASS, recorded in ``tests/data/flashmla_sm90_sass.json`` by
``tests/oracle/regen_flashmla_sm90_sass.py`` (per role: one block of the loop, the prologue and the split epilogue,
counted per thread by SASS class); no build is needed. With the cubins present (``.flashmla/out``, made by
``simtc crosscheck --flashmla``) and nvdisasm installed, the recording itself is re-derived from them.
"""

from __future__ import annotations

import collections
import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

from simtc.engine import Engine
from simtc.engine.parameters import Timing
from simtc.isa import (
    BarArrive,
    BarSync,
    CpAsyncBulk,
    CudaCoreBlock,
    LdShared,
    MbarrierArrive,
    MbarrierTryWait,
    Program,
    Role,
    SmemDescriptor,
    StShared,
    WgmmaCommitGroup,
    WgmmaFence,
    WgmmaMmaAsync,
    WgmmaWaitGroup,
)
from simtc.isa.program import Barrier
from simtc.kernels import registry
from simtc.kernels.flashmla import sm90
from simtc.kernels.flashmla.sm90_sass import SCHEDULES
from simtc.smem.read import descriptor_addresses

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "flashmla_sm90_sass.json"
CUBINS = ROOT / ".flashmla" / "out"
MODELS = ("v32", "model1")
ROLES = ("wg0", "wg1", "producer")


@pytest.fixture(scope="module")
def recorded():
    return json.loads(DATA.read_text())


def _sub(a, b) -> dict:
    out = collections.Counter(a)
    out.subtract(b)
    return {k: v for k, v in out.items() if v}


# ---- the Program ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_program_builds_with_the_kernels_roles_and_barriers(name):
    m = sm90.model(name)
    p = sm90.sm90_program(name, 3)
    assert {r.name: r.warps for r in p.roles} == {"wg0": (0, 1, 2, 3), "wg1": (4, 5, 6, 7), "producer": (8, 9, 10, 11),
                                                 "q_load": (0,)}
    assert p.role("q_load").threads == 1
    bars = {b.name: b for b in p.barriers}
    assert {n: bars[n].count for n in ("bar_q", "bar_k_local_ready[0]", "bar_k_avail[1]")} == {
        "bar_q": 1, "bar_k_local_ready[0]": 128, "bar_k_avail[1]": 256}
    assert {b.id: b.count for b in p.barriers if b.kind == "named"} == {0: 384, 8: 256, 9: 256, 10: 256, 11: 256}
    assert bars["bar_q"].addr == (0x38480 if name == "v32" else 0x32C80)
    # arrivals per phase match the counts: 128 producer threads on local_ready, WG0 + WG1 (256) on avail
    arrivers = collections.Counter()
    for role in p.roles:
        for r in role.records:
            if isinstance(r, MbarrierArrive):
                arrivers[(r.bar, role.name)] += role.threads
    assert arrivers[("bar_k_local_ready[0]", "producer")] == 128 * 2  # blocks 0 and 2
    assert arrivers[("bar_k_avail[1]", "wg0")] + arrivers[("bar_k_avail[1]", "wg1")] == 256
    # named barriers: every phase gets its thread count (sScale_and_sS_free: blocks 1.. waited, 0..n-2 arrived)
    named = collections.Counter()
    for role in p.roles:
        for r in role.records:
            if isinstance(r, (BarSync, BarArrive)):
                named[r.id] += len(role.warps) * 32
    assert named == {0: 2 * 384, 8: 3 * 256, 9: 2 * 256, 10: 256, 11: 256}
    wg0 = p.role("wg0").records
    qk = [r for r in wg0 if isinstance(r, WgmmaMmaAsync) and r.n == 64]
    pv = [r for r in wg0 if isinstance(r, WgmmaMmaAsync) and r.n == 256]
    assert len(qk) == 3 * m.d_k // 16 and len(pv) == 3 * 4
    assert [r.scale_d for r in qk[:2]] == [False, True] and all(isinstance(r.a, str) for r in pv)
    assert all(not isinstance(r.a, str) and r.b_major == "MN" for r in p.role("wg1").records
               if isinstance(r, WgmmaMmaAsync))
    assert registry.build(f"flashmla-sm90-{name}") == sm90.sm90_program(name, 2)


def test_refusals():
    with pytest.raises(Exception, match="blocks = 0"):
        sm90.sm90_program("v32", 0)
    with pytest.raises(Exception, match="unknown FlashMLA SM90 model"):
        sm90.model("v4")


@pytest.mark.parametrize("name", MODELS)
def test_smem_plan_matches_the_sass(name, recorded):
    m = sm90.model(name)
    offs = {k: int(v, 16) for k, v in recorded["smem_offsets"][name].items()}
    for buf, off in offs.items():
        assert m.at(buf) == off, buf
    assert m.smem.total == (231424 if name == "v32" else 208896)
    assert m.mbarriers["bar_k_avail[0]"][0] == offs["mbarriers"] + 40  # SASS: [+0x384a8] / [+0x32ca8]


@pytest.mark.parametrize("name", MODELS)
def test_descriptors_are_the_kernels(name):
    """The SASS builds the descriptors' high words as UMOV constants: A (Q, S) 0x40000040 (SW128, SBO 1,024), K
    0x8 (SBO 128) with LBO 0x40 in the low word (1,024 B), V 0x40 (SBO 1,024) with LBO 0x8 (128 B)."""
    m = sm90.model(name)
    b = sm90.Sm90Builder(m)
    qk, pv0, pv1 = b.qk_mma(1, 3), b.pv_mma("wg0", 1, 2), b.pv_mma("wg1", 0, 1)
    assert qk.a.encode() >> 32 == 0x40000040 and (qk.a.encode() >> 16) & 0x3FFF == 1
    assert qk.b_desc.encode() >> 32 == 0x8 and (qk.b_desc.encode() >> 16) & 0x3FFF == 0x40
    assert qk.a.start == m.at("q") + 8192 * 0 + 32 * 3 and qk.b_desc.start == m.at("k1") + 3 * 2048
    for d in (pv0.b_desc, pv1.b_desc):
        assert d.encode() >> 32 == 0x40 and (d.encode() >> 16) & 0x3FFF == 0x8
    assert pv1.a.encode() >> 32 == 0x40000040 and pv1.a.start == m.at("s") + 32
    # V through the descriptor is K transposed: element (dim, token) of the read = K's (token, dim)
    kt = sm90.k_tile(m.d_k)
    for half, k, rec in ((0, 2, pv0), (1, 1, pv1)):
        got = descriptor_addresses(rec.b_desc, major="MN", dtype="bf16", rows=256, k=16)
        dims, toks = np.meshgrid(np.arange(256) + 256 * half, np.arange(16) + 16 * k, indexing="ij")
        want = b.k_buf(1 if rec is pv0 else 0) + kt.offset(toks, dims)
        assert np.array_equal(got, want)


def test_stmatrix_and_oaccum_addresses():
    b = sm90.Sm90Builder(sm90.V32)
    st = b.stsm(1)
    s0 = sm90.V32.at("s")
    # lane 17 of warp 2: row 32 + 1, column 16 + 8 of the SW128 tile (16-byte chunk 3 XOR row 1)
    assert st.addr + st.offsets[17] + st.warp_offsets[2] == s0 + 33 * 128 + 16 * (3 ^ 1)
    o = b.o_accum_store(1, 3)
    # float2 3 of lane 5, warp 1 of WG1: row 16 + 1 + 8, column 256 + 2 + 8
    assert o.addr + o.offsets[5] + o.warp_offsets[1] == sm90.V32.at("o_accum") + 4 * (25 * 520 + 266)


# ---- the SASS -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_per_block_counts_are_the_recorded_sass(name, recorded):
    block = sm90.per_block_sass(name)
    for role in ROLES:
        assert block[role] == recorded["models"][name][role]["block"]["classes"], role
    totals = {r: sum(block[r].values()) for r in ROLES}
    assert totals == ({"wg0": 649, "wg1": 177, "producer": 1080} if name == "v32"
                      else {"wg0": 627, "wg1": 177, "producer": 1102})
    wg0, prod = block["wg0"], block["producer"]
    assert wg0["HGMMA.64x64x16.F32.BF16"] == sm90.model(name).d_k // 16 and wg0["HGMMA.64x256x16.F32.BF16"] == 4
    assert wg0["MUFU.EX2"] == 34 and wg0["FMUL"] == 130 and block["wg1"]["FMUL"] == 128
    nope = sm90.model(name).d_nope // 64
    assert prod["LDG.E.EL.LTC256B.128.CONSTANT"] == 2 * nope
    assert prod["F2FP.F16.E4M3.UNPACK_B"] == 16 * nope and prod["HADD2.F32"] == 32 * nope
    assert prod["STS.128"] == 2 * (2 * nope + 2)


@pytest.mark.parametrize("name", MODELS)
def test_prologue_and_epilogue_are_the_recorded_sass(name, recorded):
    rec = recorded["models"][name]
    two = sm90.program_sass(sm90.sm90_program(name, 2))
    block = sm90.per_block_sass(name)
    left_out = {"wg0": {"BAR.SYNC.DEFER_BLOCKING": 1}, "wg1": {"BAR.ARV": 1}, "producer": {}}
    for role in ROLES:
        rest = _sub(_sub(two[role], block[role]), block[role])
        want = collections.Counter(rec["common"]["prologue"]["classes"])
        want.update(rec[role]["prologue"]["classes"])
        want.update(rec[role]["epilogue"]["classes"])
        want.subtract(left_out[role])
        assert rest == {k: v for k, v in want.items() if v}, role
    assert dict(two["q_load"]) == rec["q_load"]["prologue"]["classes"]


def test_generated_schedule_is_the_recording(recorded):
    """``sm90_sass.SCHEDULES`` and the data file come from the same run: the same tokens, the same classes."""
    for name in MODELS:
        for role, parts in SCHEDULES[name].items():
            for part, items in parts.items():
                rec = recorded["models"][name][role][part]
                assert [x for x in items if isinstance(x, str)] == rec["tokens"], (name, role, part)
                c = collections.Counter()
                for x in items:
                    if not isinstance(x, str):
                        c.update(dict(x))
                for op in rec["token_sass"]:
                    c.update(x for x in op.split(" + ") if x)
                assert dict(c) == rec["classes"], (name, role, part)
                assert len(rec["token_sass"]) == len(rec["tokens"])


@pytest.mark.parametrize("name", MODELS)
def test_block_records_follow_the_compiled_order(name):
    """A middle block of each role: its explicit records in the SASS order, a CudaCoreBlock between two of them
    exactly where the SASS has CUDA-core instructions."""
    p = sm90.sm90_program(name, 3)
    for role in ROLES:
        items = SCHEDULES[name][role]["block"]
        recs = sm90._builder(name).part(role, "block", sm90._Ctx(1, 3))
        kinds = [type(r).__name__ for r in recs]
        want = []
        for x in items:
            if not isinstance(x, str):
                want.append("CudaCoreBlock")
            elif not x.startswith(("ldg:", "use:")):
                want.append(_TOKEN_RECORD[x.split(":")[0]])
        assert kinds == want, role
        assert all(r in p.role(role).records for r in recs)
        # and each explicit record is the instruction the SASS has there
        sass = [s for s in _recorded_block(name, role)["token_sass"] if s]
        mine = ["".join(c for c, _ in sm90.record_sass(r, 1)) for r in recs if not isinstance(r, CudaCoreBlock)]
        assert [s.replace(" + ", "") for s in sass] == [x for x in mine if x], role


def _recorded_block(name, role):
    return json.loads(DATA.read_text())["models"][name][role]["block"]


_TOKEN_RECORD = {"wgmma.fence": "WgmmaFence", "wgmma.wait": "WgmmaWaitGroup", "wgmma.commit": "WgmmaCommitGroup",
                 "wgmma.qk": "WgmmaMmaAsync", "wgmma.pv": "WgmmaMmaAsync", "mbarrier.wait": "MbarrierTryWait",
                 "mbarrier.arrive": "MbarrierArrive", "bar.sync": "BarSync", "bar.arrive": "BarArrive",
                 "fence.proxy_async": "FenceProxyAsync", "ld.shared": "LdShared", "st.shared": "StShared"}


def _regen_module():
    path = ROOT / "tests" / "oracle" / "regen_flashmla_sm90_sass.py"
    spec = importlib.util.spec_from_file_location("regen_sm90", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _nvdisasm() -> bool:
    try:
        from simtc.hw.compile import _nvdisasm

        _nvdisasm()
        return True
    except Exception:
        return False


@pytest.mark.skipif(not (CUBINS / "sm90_v32.cubin").is_file() or not _nvdisasm(),
                    reason="needs the FlashMLA SM90 cubins (.flashmla/out) and nvdisasm")
def test_recording_is_rederived_from_the_cubins(recorded):
    import hashlib

    from simtc.hw.compile import disassemble

    regen = _regen_module()
    cubins = {m: (CUBINS / f"sm90_{m}.cubin").read_bytes() for m in MODELS}
    if any(hashlib.sha256(b).hexdigest() != recorded["cubin_sha256"][m] for m, b in cubins.items()):
        pytest.skip("a different build of the cubins")
    data, scheds = regen.derive({m: disassemble(b) for m, b in cubins.items()})
    assert data == recorded["models"]
    assert scheds == SCHEDULES


# ---- on the engine --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_runs_clean_on_the_sm90_engine(name):
    r = sm90.sm90_run(name, 6)
    eng = r["engine"]
    assert eng.arch == "sm90" and eng.clean, r["hazards"][:3]
    assert all(w.done for w in eng.warps)
    assert len(sm90.k_avail_cycles(eng)) == 6
    cpb = r["cycles_per_block_steady"]
    assert math.isfinite(cpb) and cpb > 0
    units = r["units_per_block"]
    print(f"\n{name}: {cpb:,.0f} cycles per block (steady), {r['cycles']:,} for 6 blocks; per block: "
          + ", ".join(f"{u} {v:,.0f}" for u, v in units.items()) + "; per role busy/wait: "
          + ", ".join(f"{k} {v['busy_cycles']}/{v['waiting_cycles']}" for k, v in r["per_role"].items()))
    # the tensor pipe per block: 36 (32) QK of N = 64 at II 32, 8 PV of N = 256 at II 128
    assert units["tensor_pipe"] >= sm90.model(name).d_k // 16 * 32 + 8 * 128


def test_steady_cycles_per_block():
    v = sm90.steady_cycles_per_block_sm90("v32", 8)
    m1 = sm90.steady_cycles_per_block_sm90("model1", 8, Timing("sm90"))
    print(f"\nsteady cycles per block on Timing('sm90'): V32 {v:,.0f}, MODEL1 {m1:,.0f}")
    assert math.isfinite(v) and v > 0 and math.isfinite(m1) and m1 > 0


# ---- the checker: wgmma.wait_group completes the wgmma's operand reads ----------------------------------------------
def _wgmma_then_overwrite(wait: bool) -> Program:
    d = SmemDescriptor(start=0, lbo=16, sbo=1024, layout_type="SW128", arch="sm90")
    mma = [WgmmaFence(), WgmmaMmaAsync(64, 64, 16, "bf16", d, d, False, "acc"), WgmmaCommitGroup()]
    wg = Role("wg", (0, 1, 2, 3), (*mma, *([WgmmaWaitGroup(0)] if wait else []), MbarrierArrive("free")))
    other = Role("other", (4,), (MbarrierTryWait("free", 0), StShared(0, 16, "x"), CudaCoreBlock("x", ())))
    return Program("wgmma-overwrite", (wg, other), barriers=(Barrier("free", "mbarrier", 128),))


def test_checker_learns_wgmma_completion_from_wait_group():
    bad = Engine(_wgmma_then_overwrite(False), timing=Timing("sm90")).run()
    assert [h.rule for h in bad.hazards] == ["smem-overwrite-in-flight"] * 4
    assert Engine(_wgmma_then_overwrite(True), timing=Timing("sm90")).run().clean


def test_epilogue_bulk_copies_cover_every_row_once():
    p = sm90.sm90_program("model1", 1)
    rows = collections.Counter()
    for role in ("wg0", "wg1"):
        for r in p.role(role).records:
            if isinstance(r, CpAsyncBulk):
                rows[r.dst] += 1
    assert sorted(rows) == sorted(f"o_accum[row {i}]" for i in range(64)) and set(rows.values()) == {1}
    lds = [r for r in p.role("wg1").records if isinstance(r, LdShared)]
    assert [r.dst for r in lds[-2:]] == ["oscale0", "oscale1"]
