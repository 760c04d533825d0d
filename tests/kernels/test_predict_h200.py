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
    for name in ("flashmla_h200_sm90_timing.json", "flashmla_h200_sm90_timing_held_out.json"):
        for r in _rows(name):
            p = predict("flashmla-sm90", r["model"], r["b"], r["s_q"], r["topk"], s_k=r["s_k"], band=False)
            out.append((r, p, p["seconds"] / (r["call_ms"] * 1e-3) - 1))
    return out


@pytest.mark.slow
def test_predictions_meet_the_measured_calls(comparison):
    """26 held-out calls of two recordings (never fitted on), both models, b = 1 to 264: where the model stands.
    Every call within 13% (today -11.9% to +2.5%), the small ones (b x s_q <= 4: launch- and prologue-bound, the
    busy-SM share and the fixed costs at work) within 5%; the rest are predicted fast by 4-12% (mean -6.7%): the
    split-KV kernel's steady cycles per block, 5,353 (V32) / 5,406 (MODEL1) in the engine against 5,834 / 6,072
    active cycles a block in Nsight Compute. The targets (7% each, mean within 3%) are not met."""
    assert len(comparison) == 26 and {r["model"] for r, _, _ in comparison} == {"v32", "model1"}
    for r, _, err in comparison:
        assert abs(err) <= 0.13, (r["name"], err)
        if r["b"] * r["s_q"] <= 4:
            assert abs(err) <= 0.05, (r["name"], err)
    mean = sum(e for _, _, e in comparison) / len(comparison)
    assert -0.09 < mean < -0.04


@pytest.mark.slow
def test_the_kernel_part_is_where_the_error_is(comparison):
    """The split-KV span carries the bias: predicted against its own CUDA-event span it is fast wherever the
    kernel is long, while the fixed costs (fitted on the small calls) hold the small calls."""
    for r, p, _ in comparison:
        kern = p["parts"]["splitkv_s"] / (r["splitkv_ms"] * 1e-3) - 1
        if r["splitkv_ms"] > 0.1:
            assert -0.15 < kern < -0.02, (r["name"], kern)
