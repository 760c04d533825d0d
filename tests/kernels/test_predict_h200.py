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


def test_fixed_costs_are_the_fit_of_their_recordings():
    """The small calls (one block per request, a few splits) and, for the scheduler and the combine kernel only, the
    cost calls (24-120 split rows, 256-512 one-block requests)."""
    f = fit_fixed_costs(_rows("flashmla_h200_sm90_fixed.json"), costs=_rows("flashmla_h200_sm90_timing_costs.json"))
    got = (f.sched_us, f.sched_per_part_us, f.sched_per_request_us, f.splitkv_us, f.combine_us, f.combine_per_split_us,
           f.combine_per_row_us)
    want = (FIXED_H200.sched_us, FIXED_H200.sched_per_part_us, FIXED_H200.sched_per_request_us, FIXED_H200.splitkv_us,
            FIXED_H200.combine_us, FIXED_H200.combine_per_split_us, FIXED_H200.combine_per_row_us)
    assert got == pytest.approx(want, abs=2e-3)
    # the scheduler kernel's span grows with the parts it fills and the requests it walks; the combine with the most
    # splits of a request and with the split rows it merges
    assert f.sched_per_part_us > 0 and f.sched_per_request_us > 0 and f.combine_per_split_us > 0
    assert f.combine_per_row_us > 0
    # the cost calls' combine spans, 5.8-13.3 us, within 2 us of the fit (the small calls alone gave 4.5-5 us)
    from simtc.kernels.flashmla.predict import _max_splits, split_requests
    from simtc.kernels.flashmla.schedule import sched_meta

    for r in _rows("flashmla_h200_sm90_timing_costs.json"):
        pm = sched_meta(r["b"], r["topk"], r["num_sm_parts"])
        got = f.combine(_max_splits(pm, r["topk"] // 64), split_requests(pm, r["topk"] // 64) * r["s_q"])
        assert got == pytest.approx(r["combine_ms"] * 1e3, abs=2.0), r["name"]


def test_the_timed_calls_ran_at_the_boost_clock():
    """nvidia-smi every 20 ms while the cost calls and the 14 calls were timed again
    (tests/data/h200_clocks_timing.csv): the SM clock is 1,980 MHz in nearly every sample of the busy spans -- the
    clock the predictions divide by -- while Nsight Compute's replays read 1.73-1.90 GHz; and the re-timed calls
    agree with the recording of two days before within 2% (the measurements' own spread is small beside the model's
    error)."""
    import csv

    rows = list(csv.reader((DATA / "h200_clocks_timing.csv").read_text().splitlines()))[1:]
    busy = [int(r[1].split()[0]) for r in rows if int(r[4].split()[0]) > 0]
    assert len(busy) > 250
    assert sum(c == 1980 for c in busy) / len(busy) > 0.9 and min(busy) >= 1900
    old = {r["name"]: r["call_ms"] for r in _rows("flashmla_h200_sm90_timing.json")}
    new = {r["name"]: r["call_ms"] for r in _rows("flashmla_h200_sm90_timing_repeat.json")}
    assert set(old) == set(new)
    assert all(abs(new[n] / old[n] - 1) < 0.02 for n in old)


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
    Every call within 14% (today -13.5% to +2.0%, mean -8.1%; before the L1's window of misses in flight and the
    loaded HBM round trip -19.2% to +1.5%, mean -12.6%); the launch-bound ones (b x s_q <= 2) within 3%; the rest
    predicted fast because the engine's split-KV kernel is: its steady cycles per block (5,732 V32 / 6,072 MODEL1 at
    the 1,980 MHz the timed calls ran at) against about 6,370 / 6,650 the calls imply. The targets (7% each, mean
    within 3%) are not met: 8 of 26 calls are within 7%."""
    assert len(comparison) == 26 and {r["model"] for r, _, _ in comparison} == {"v32", "model1"}
    for r, _, err in comparison:
        assert abs(err) <= 0.14, (r["name"], err)
        if r["b"] * r["s_q"] <= 2:
            assert abs(err) <= 0.03, (r["name"], err)
    mean = sum(e for _, _, e in comparison) / len(comparison)
    assert -0.10 < mean < -0.06


@pytest.mark.slow
def test_the_kernel_part_is_where_the_error_is(comparison):
    """The split-KV span carries the bias: predicted against its own CUDA-event span it is 8-15% fast wherever the
    kernel lasts over 40 us (the fixed costs, fitted on the small calls, hold the launch-bound ones)."""
    for r, p, _ in comparison:
        kern = p["parts"]["splitkv_s"] / (r["splitkv_ms"] * 1e-3) - 1
        if r["splitkv_ms"] > 0.04:
            assert -0.16 < kern < -0.07, (r["name"], kern)
