"""The L1 probe (simtc.hw.l1_probe): its SASS holds what it measures; bad requests are refused naming the rule; the
recording it made has the shapes the L1 model is read from."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from simtc.hw import l1_probe
from simtc.hw.device import probe

HAVE_NVRTC = importlib.util.find_spec("cuda") is not None and importlib.util.find_spec("cuda.bindings") is not None
SM90 = probe().arch == "sm_90a"
DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.mark.skipif(not HAVE_NVRTC, reason="needs NVRTC (cuda-bindings) to compile the probe")
def test_the_probes_sass_holds_the_loads_it_measures():
    found = l1_probe.check_sass()
    assert found["simtc_l1_probe_nc"] == 8 and found["simtc_l1_probe_plain"] == 8
    assert found["simtc_l1_probe_mbar_arrive"] >= 1


@pytest.mark.parametrize("argv, says", [
    (["--only", "r9-nope"], "no such configuration"),
    (["--repeats", "0"], "at least 1"),
])
def test_bad_requests_name_the_rule(argv, says, tmp_path, capsys):
    assert l1_probe.main(["--out", str(tmp_path / "x.json"), *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and "[rule:" in err
    assert not (tmp_path / "x.json").exists()


@pytest.mark.skipif(SM90, reason="an sm_90a GPU is here: the probe would run")
def test_without_a_gpu_it_says_so(tmp_path, capsys):
    assert l1_probe.main(["--out", str(tmp_path / "x.json"), "--only", "r8-p656-a0-nc"]) == 2
    assert "GPU checks need cupy and a CUDA device" in capsys.readouterr().err


def test_the_recording_covers_every_configuration():
    rec = json.loads((DATA / "h200_l1_probe.json").read_text())
    assert rec["device"]["arch"] == "sm_90a" and rec["warps"] == l1_probe.WARPS
    assert [c["name"] for c in rec["configs"]] == [c.name for c in l1_probe.CONFIGS]
    for c in rec["configs"]:
        spans = sorted(c["spans"])
        assert c["cycles_per_instruction"] == pytest.approx(
            spans[len(spans) // 2] / (rec["warps"] * rec["iters"] * 8), abs=1e-3)
    # the row loop in FlashMLA's lane order, every configuration, each the median of its launches' medians
    assert [r["name"] for r in rec["rows"]] == [c.name for c in l1_probe.ROWS_CONFIGS]
    for r in rec["rows"]:
        m = sorted(r["medians"])
        assert r["cycles_per_block"] == pytest.approx(m[len(m) // 2])
    # the dependent chains the mbarrier arrive is read from: steps of 2x the operations take about 2x the cycles
    for chain in rec["chains"].values():
        c = {int(k): v for k, v in chain["cycles"].items()}
        assert c[2048] / c[1024] == pytest.approx(2.0, rel=0.05) and chain["cycles_per_step"] > 20
