"""`simtc timing params`, `simtc timing sensitivity` and `simtc replay --json` as a user runs them."""

import json

import pytest

import simtc.cli as cli
from simtc.engine.parameters import LABELS, PARAMETERS, USED_BY


@pytest.fixture
def run(capsys):
    def go(*argv):
        rc = cli.main(list(argv))
        out, err = capsys.readouterr()
        return rc, out, err

    return go


@pytest.mark.parametrize("arch", ["sm100", "sm90"])
def test_params_json_rows_cover_the_table_and_every_row_is_used(run, arch):
    rc, out, _ = run("timing", "params", "--arch", arch, "--json")
    assert rc == 0
    rows = json.loads(out)
    assert [r["name"] for r in rows] == list(PARAMETERS[arch])
    for r in rows:
        assert set(r) == {"name", "arch", "value", "unit", "label", "source", "used_by"}
        assert r["arch"] == arch and r["label"] in LABELS and r["source"].strip()
        assert r["used_by"] and set(r["used_by"]) <= set(USED_BY)
        assert isinstance(r["value"], (int, float)) and r["value"] > 0
    # that every one of them moves a probe when halved or doubled is tests/engine/test_parameters_used.py


def test_params_label_filter(run):
    rc, out, _ = run("timing", "params", "--arch", "sm90", "--label", "measured", "--json")
    rows = json.loads(out)
    assert rc == 0 and rows and {r["label"] for r in rows} == {"measured"}
    assert {r["name"] for r in rows} == {n for n, p in PARAMETERS["sm90"].items() if p.label == "measured"}


def test_sensitivity_of_flashmla_head64(run):
    rc, out, _ = run("timing", "sensitivity", "flashmla-head64", "--blocks", "6", "--json")
    assert rc == 0
    data = json.loads(out)
    rows = data["rows"]
    assert {r["name"] for r in rows} == set(PARAMETERS["sm100"])
    for r in rows:
        assert {"name", "label", "x0.5", "x2"} <= set(r)
    effects = [max(abs(r["x0.5"]), abs(r["x2"])) for r in rows]
    assert effects == sorted(effects, reverse=True)
    top = [r["name"] for r in rows[:6]]
    # what the kernel is bound by in this model: the shared-memory port; halving it slows the block most
    assert top[0] == "smem_port_bytes_per_cycle" and rows[0]["x0.5"] > 0.3
    # the HBM share (chip bandwidth over the SMs that share it) moves it both ways
    assert "hbm_bytes_per_cycle" in top and "sm_count" in top


def test_sensitivity_factors_and_a_program(run):
    rc, out, _ = run("timing", "sensitivity", "flashmla-qk", "--factors", "0.25,0.5,2,4", "--top", "5", "--json")
    assert rc == 0
    data = json.loads(out)
    assert data["factors"] == [0.25, 0.5, 2.0, 4.0] and len(data["rows"]) == 5
    assert {"x0.25", "x0.5", "x2", "x4"} <= set(data["rows"][0])
    rc, out, _ = run("timing", "sensitivity", "flashmla-qk", "--factors", "0.25,4", "--top", "3")
    assert rc == 0 and "x0.25" in out and "x4" in out


@pytest.mark.parametrize("factors", ["1", "0,2", "-1", "a,b", "2,2", ""])
def test_sensitivity_refuses_bad_factors(run, factors):
    rc, _, err = run("timing", "sensitivity", "flashmla-qk", "--factors", factors)
    assert rc == 2 and "factor" in err


def test_replay_json_has_the_whole_kernel_and_steady_state_figures(run):
    rc, out, _ = run("replay", "flashmla-head64", "--blocks", "4", "--timing-only", "--json")
    assert rc == 0
    d = json.loads(out)
    for key in ("cycles_whole", "cycles_per_block_steady", "tflops_whole", "tflops_steady"):
        assert isinstance(d[key], (int, float)) and d[key] > 0, key
    assert d["cycles_whole"] == d["cycles"] and d["cycles_per_block_steady"] == d["cycles_per_block"]
    assert d["b200"]["sms"] == 148
    # a whole request includes its ramp and epilogue: slower than the steady state
    assert d["tflops_whole"] < d["tflops_steady"]
    assert d["cycles_whole"] > 4 * d["cycles_per_block_steady"]
