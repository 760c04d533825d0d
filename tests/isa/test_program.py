"""Program / Role / Barrier: counts keyed by PTX opcode, exact JSON, diff, listings and pictures."""

import io
import json

import attrs
import pytest

from simtc.isa import (
    Barrier,
    BarSync,
    Commit,
    Cp,
    FenceAfterThreadSync,
    FenceBeforeThreadSync,
    InstrDescriptor,
    IsaError,
    Ld,
    MbarrierTryWait,
    Mma,
    Program,
    Role,
    SmemDescriptor,
    WaitLd,
)

QK = InstrDescriptor.from_u32(0x04200490)


def sw(start, sbo=1024, layout="SW128"):
    return SmemDescriptor(start=start, lbo=16, sbo=sbo, layout_type=layout)


def qk_program(nope=73728, rope=139264):
    """FlashMLA's QK step (kernel.cuh lines 464-573 at 9241ae3): 18 Q copies, 18 .ws MMAs, commit; softmax
    loads P."""
    cps = [Cp(256 + 32 * t + 8 * s, sw(16384 * t + 32 * s), label=f"Q t={t} s={s}") for t in range(4)
           for s in range(4)]
    cps += [Cp(384 + 8 * s, sw(65536 + 32 * s, 512, "SW64"), label=f"Q RoPE s={s}") for s in range(2)]
    mmas = [Mma(400, 384 + 8 * k, sw(rope + 32 * k, 512, "SW64"), QK, k > 0, ws=True, label=f"QK RoPE k={k}")
            for k in range(2)]
    mmas += [Mma(400, 256 + 8 * k, sw(nope + 16384 * (k // 4) + 32 * (k % 4)), QK, True, ws=True,
                 label=f"QK NoPE k={k}") for k in range(16)]
    mma = Role("mma", (4,), (*cps, Commit("q_utccp"), *mmas, Commit("qk_done[1]")), threads=1)
    softmax = Role("softmax", (0, 1, 2, 3), (BarSync(9, 128), MbarrierTryWait("qk_done[1]", 0), FenceAfterThreadSync(),
                                             Ld(400, "32x32b", 32, "p"), Ld(432, "32x32b", 32, "p_peer"), WaitLd(),
                                             FenceBeforeThreadSync()))
    bars = (Barrier("q_utccp", "mbarrier", 1, addr=232000), Barrier("qk_done[1]", "mbarrier", 1, addr=232144),
            Barrier("wg0_sync", "named", 128, id=9))
    return Program("flashmla-qk", (mma, softmax), bars, description="QK step, V32, buffer 1",
                   meta=(("b", 1), ("variant", "V32")))


def test_counts_by_opcode():
    p = qk_program()
    c = p.counts()
    assert c["tcgen05.cp"] == 18 and c["tcgen05.mma.ws"] == 18 and "tcgen05.mma" not in c
    assert c["tcgen05.commit"] == 2 and c["tcgen05.ld"] == 2 and c["tcgen05.wait"] == 1
    assert c["tcgen05.fence"] == 2 and c["mbarrier.try_wait"] == 1 and c["bar.sync"] == 1
    assert sum(c.values()) == len(p) == 38 + 7
    w = p.counts(per_warp=True)
    assert w["tcgen05.ld"] == 8 and w["bar.sync"] == 4 and w["tcgen05.mma.ws"] == 18  # mma is elected: once


def test_json_round_trip_through_text():
    p = qk_program()
    d = p.to_json()
    assert set(d) >= {"name", "description", "roles", "barriers", "counts"}
    assert d["roles"]["mma"]["threads"] == 1 and d["roles"]["softmax"]["threads"] == 128
    assert d["counts"]["tcgen05.mma.ws"] == 18
    back = Program.from_json(json.loads(json.dumps(d)))
    assert back == p and back.diff(p) == []
    d["counts"]["tcgen05.cp"] = 17
    with pytest.raises(IsaError, match="counts"):
        Program.from_json(d)


def test_diff_names_what_changed():
    p = qk_program()
    mma = p.role("mma")
    recs = list(mma.records)
    recs[3] = attrs.evolve(recs[3], taddr=recs[3].taddr + 8)
    recs[4] = attrs.evolve(recs[4], label="renamed")
    q = attrs.evolve(p, roles=(attrs.evolve(mma, records=tuple(recs[:-1])),
                               Role("index", (7,), (BarSync(12, 384),))),
                     barriers=p.barriers[1:])
    d = p.diff(q)
    assert "role 'softmax' removed" in d and "role 'index' added" in d
    assert any(x.startswith("role 'mma' record 3 changed: tcgen05.cp") and "[0x00000118]" in x for x in d)
    assert any(x.startswith("role 'mma' record 4 changed ('Q t=1 s=0' -> 'renamed')") for x in d)
    assert any(x.startswith("role 'mma' record 37 removed: tcgen05.commit") for x in d)
    assert "barrier 'q_utccp' removed" in d
    assert len(d) == 6


def test_role_and_barrier_rules():
    assert Role("r", (0, 1), ()).threads == 64
    with pytest.raises(IsaError, match="threads"):
        Role("r", (0,), (), threads=33)
    with pytest.raises(IsaError, match="distinct"):
        Role("r", (1, 1), ())
    with pytest.raises(IsaError, match="isa records"):
        Role("r", (0,), ("bar.sync 1;",))
    with pytest.raises(IsaError) as e:
        Barrier("b", "named", 100, id=3)
    assert "multiple of the warp size" in e.value.rule
    with pytest.raises(IsaError, match="0-15"):
        Barrier("b", "named", 128, id=16)
    with pytest.raises(IsaError, match="count"):
        Barrier("b", "mbarrier", 0)
    with pytest.raises(IsaError, match="8-byte"):
        Barrier("b", "mbarrier", 1, addr=4)
    with pytest.raises(IsaError, match="unique role names"):
        Program("p", (Role("a", (0,), ()), Role("a", (1,), ())))
    with pytest.raises(IsaError, match="no role"):
        qk_program().role("dequant")
    assert qk_program().barrier("wg0_sync").id == 9


def test_ptx_listing_per_role():
    text = qk_program().ptx().splitlines()
    assert text[0] == "// program flashmla-qk: QK step, V32, buffer 1"
    assert text[1] == "// role mma (warps 4; 1 threads)"
    mma_lines = [t for t in text if t.startswith("tcgen05.mma.ws") and "kind::f16" in t]
    assert len(mma_lines) == 18
    assert text[2] == "tcgen05.cp.cta_group::1.128x256b [0x00000100], 0x4000404000010000;  // Q t=0 s=0"
    assert "// role softmax (warps 0, 1, 2, 3; 128 threads)" in text


def test_rich_and_jupyter_renderings():
    from rich.console import Console

    p = qk_program()
    buf = io.StringIO()
    Console(file=buf, width=250, color_system=None).print(p)
    out = buf.getvalue()
    assert "role mma" in out and "role softmax" in out
    assert "tcgen05.cp.cta_group::1.128x256b [0x00000100], 0x4000404000010000;" in out and "QK NoPE k=15" in out
    html = p._repr_html_()
    assert html.count("<table>") == 2 and "QK NoPE k=15" in html
    bundle = p._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"} and "tcgen05.mma.ws" in bundle["text/plain"]


@pytest.mark.parametrize("bad", [
    {},
    {"name": "x"},
    {"name": "x", "roles": []},
    {"name": "x", "roles": {"a": {"warps": [0]}}},
    {"name": "x", "roles": {"a": {"warps": [0], "records": [{"op": "tcgen05.alloc"}]}}},
], ids=["empty", "no-roles", "roles-list", "role-no-records", "record-missing-fields"])
def test_bad_program_json_is_refused_with_the_rule(bad):
    from simtc.errors import SimtcError

    with pytest.raises(SimtcError) as info:
        Program.from_json(bad)
    assert info.value.rule
