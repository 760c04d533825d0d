"""The MMA microbenchmark Programs run through the engine reproduce the measured B200 figures."""

import pytest

from simtc.engine import calibration, timing
from simtc.engine.microbench import DEPTHS, latency_program, run_mma
from simtc.errors import SimtcError


def _rows():
    return [{"ab_layout": r.operands, "m": r.m, "n": r.n, "latency_cycles": r.latency_cycles, "ii_cycles": r.ii_cycles}
            for r in calibration.B200_ROWS]


@pytest.mark.parametrize("i", range(12))
def test_b200_rows_through_the_engine(i):
    rows = _rows()
    assert len(rows) == 12
    row = rows[i]
    m, n, op = int(row["m"]), int(row["n"]), row["ab_layout"]
    r = run_mma("sm100", m, n, operands=op)
    assert abs(r["latency_cycles"] - int(row["latency_cycles"])) <= 2
    assert abs(r["ii_cycles"] - float(row["ii_cycles"])) <= 0.02 * float(row["ii_cycles"])
    # the engine and the closed-form model agree exactly (same mechanism, two routes)
    p = timing.predict_mma("sm100", m, n, operands=op)
    assert (r["latency_cycles"], r["ii_cycles"]) == (p.latency_cycles, p.ii_cycles)


# measured BF16 TS .ws IIs at depth 256 (KevinZeng08/microbench-blackwell umma_throughput/tcgen05_mma_ws.md
# at 6d40dd8, GB200)
WS_MEASURED = calibration.WS_TABLE


@pytest.mark.parametrize(("collector", "m"), sorted(WS_MEASURED))
def test_ws_table_through_the_engine(collector, m):
    for n, measured in zip((64, 128, 256), WS_MEASURED[(collector, m)], strict=True):
        r = run_mma("sm100", m, n, operands="TS", ws=True, collector=collector)
        assert abs(r["ii_cycles"] - measured) <= 0.02 * measured + 0.5, (collector, m, n, r["ii_cycles"])


def test_chain_is_linear_in_depth():
    r = run_mma("sm100", 64, 128, operands="TS", ws=True)
    spans = r["chain_cycles"]
    steps = {(spans[i + 1] - spans[i]) / (DEPTHS[i + 1] - DEPTHS[i]) for i in range(len(DEPTHS) - 1)}
    assert steps == {r["ii_cycles"]}


def test_sm90_wgmma_matches_the_model():
    for op in ("SS", "RS"):
        for n in (8, 64, 256):
            r = run_mma("sm90", 64, n, operands=op)
            p = timing.predict_mma("sm90", 64, n, operands=op)
            assert (r["latency_cycles"], r["ii_cycles"]) == (p.latency_cycles, p.ii_cycles)


def test_parameters_are_labelled():
    r = run_mma("sm100", 64, 64, operands="SS")
    names = {p["name"] for p in r["parameters"]}
    assert {"commit_arrive", "mbarrier_try_wait", "mma_issue"} <= names
    assert all(p["label"] in ("measured", "derived", "assumed") and p["source"] for p in r["parameters"])


@pytest.mark.parametrize(("kw", "rule"), [
    ({"arch": "sm100", "operands": "RS"}, "tcgen05.mma A is a shared-memory descriptor or a TMEM address"),
    ({"arch": "sm100", "ws": True, "cta_group": 2}, ".ws is cta_group::1 only"),
    ({"arch": "sm90", "operands": "TS"}, "wgmma A is a shared-memory descriptor or registers"),
])
def test_illegal_combinations_are_refused_with_the_rule(kw, rule):
    arch = kw.pop("arch")
    with pytest.raises(SimtcError) as e:
        run_mma(arch, 64, 64, **kw)
    assert e.value.rule == rule


def test_latency_program_is_a_real_program():
    p = latency_program("sm100", 64, 64)
    assert p.counts()["tcgen05.mma"] == 1 and p.counts()["tcgen05.commit"] == 1
