"""simtc predict flashmla-sm90 held against FlashMLA's SM90 call measured on the H200 (tests/data, never fitted on):
where the model stands. The fixed costs are refitted from their own recording (small calls, none of the held-out
shapes)."""

import json
from pathlib import Path

import pytest

from simtc.kernels.flashmla.predict import FIXED_H200, fit_fixed_costs, predict

DATA = Path(__file__).resolve().parents[1] / "data"


def _rows(name):
    return json.loads((DATA / name).read_text())["rows"]


def test_fixed_costs_are_the_fit_of_their_recording():
    f = fit_fixed_costs(_rows("flashmla_h200_sm90_fixed.json"))
    got = (f.sched_us, f.sched_per_part_us, f.sched_per_request_us, f.splitkv_us, f.combine_us, f.combine_per_split_us)
    want = (FIXED_H200.sched_us, FIXED_H200.sched_per_part_us, FIXED_H200.sched_per_request_us, FIXED_H200.splitkv_us,
            FIXED_H200.combine_us, FIXED_H200.combine_per_split_us)
    assert got == pytest.approx(want, abs=2e-3)
    # the scheduler kernel's span grows with the parts it fills and the requests it walks
    assert f.sched_per_part_us > 0 and f.sched_per_request_us > 0 and f.combine_per_split_us > 0


@pytest.fixture(scope="module")
def comparison():
    out = []
    for r in _rows("flashmla_h200_sm90_timing.json"):
        p = predict("flashmla-sm90", r["model"], r["b"], r["s_q"], r["topk"], band=False)
        out.append((r, p, p["seconds"] / (r["call_ms"] * 1e-3) - 1))
    return out


def test_where_the_prediction_stands(comparison):
    """Today: within 10% on the smallest calls (their fixed costs dominate); V32's large calls 11-16% fast, MODEL1's
    20-22% fast (the engine runs a block of the SM90 kernel in ~5,000 (V32) / ~4,600 (MODEL1) cycles where the H200
    takes ~5,900 / ~6,100) -- short of the ±15% / ±25% the model is meant to reach for MODEL1. The test keeps the
    model from getting worse and its error from changing sign unseen."""
    for r, _, err in comparison:
        big = r["b"] * r["s_q"] >= 64
        assert -0.30 < err < (0.05 if big else 0.15), (r["name"], err)
        if big and r["model"] == "v32":   # with the L1's per-line cost (simtc.engine.l1)
            assert err > -0.17, (r["name"], err)


def test_predicted_utilizations_beside_nsight_compute():
    """Issue slots and the tensor pipe within 12 points of Nsight Compute at the three profiled shapes."""
    from simtc.hw.flashmla_timing import ncu_summary

    for path in sorted((DATA / "ncu").glob("flashmla_h200_sm90_*.csv")):
        s = ncu_summary(path)
        m, b, sq, tk = path.stem.replace("flashmla_h200_sm90_", "").split("-")
        p = predict("flashmla-sm90", m, int(b[1:]), int(sq[2:]), int(tk[4:]), band=False)
        for k in ("issue", "tensor_pipe"):
            assert abs(p["utilization"][k] - s["utilization"][k]) < 0.12, (path.stem, k)
