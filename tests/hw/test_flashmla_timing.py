"""FlashMLA's SM90 call timed on the H200 (tests/data/flashmla_h200_sm90_timing.json) and profiled by Nsight Compute
(tests/data/ncu/): the recordings are complete, self-consistent and agree with each other."""

from pathlib import Path

import numpy as np
import pytest

from simtc.hw import flashmla_timing as ft

DATA = Path(__file__).resolve().parents[1] / "data"
REC = DATA / "flashmla_h200_sm90_timing.json"
NCU = sorted((DATA / "ncu").glob("flashmla_h200_sm90_*.csv"))


@pytest.fixture(scope="module")
def recording():
    return ft.load_timing(REC)


def test_the_recording_spans_the_shapes_asked_for(recording):
    meta, rows = recording
    assert len(rows) >= 10 and {r.shape.model for r in rows} == {"v32", "model1"}
    assert min(r.shape.b for r in rows) == 1 and max(r.shape.b for r in rows) == 264
    assert {r.shape.s_q for r in rows} == {1, 2, 4}
    assert min(r.shape.topk for r in rows) == 512 and max(r.shape.topk for r in rows) == 16384
    assert [r.shape for r in rows] == list(ft.TIMING_SHAPES)
    assert meta["flashmla_commit"].startswith("9241ae3") and "H200" in meta["device"]
    assert all(r.repeats >= 20 for r in rows)


def test_each_row_is_consistent(recording):
    _, rows = recording
    for r in rows:
        s = r.shape
        d_qk = 576 if s.model == "v32" else 512
        assert ft.flops(s) == 2 * 64 * s.b * s.s_q * s.topk * (d_qk + 512)
        assert r.tflops == pytest.approx(ft.flops(s) / (r.splitkv_combine_ms * 1e-3) / 1e12)
        assert r.call_p10_ms <= r.call_ms <= r.call_p90_ms
        # medians of parts vs the median of their sums: within a few percent
        assert r.sched_ms + r.splitkv_ms + r.combine_ms == pytest.approx(r.call_ms, rel=0.05)
        assert r.num_sm_parts == max(132 // s.s_q, 1)


def test_large_requests_reach_flashmlas_own_range(recording):
    """At b x s_q >= 64 the call is a few hundred TFLOP/s (FlashMLA's deep dive reports 410 TFLOP/s on an H800 for
    h_q = 128 with its crossover; h_q = 64 has none); tiny requests are launch- and latency-bound."""
    _, rows = recording
    big = [r.tflops for r in rows if r.shape.b * r.shape.s_q >= 64]
    assert min(big) > 200 and max(big) < 450
    tiny = [r for r in rows if r.shape.b * r.shape.s_q <= 2 and r.shape.topk <= 2048]
    assert tiny and all(r.tflops < 50 for r in tiny)


@pytest.mark.parametrize("path", NCU, ids=lambda p: p.stem)
def test_nsight_compute_profiles(path, recording):
    s = ft.ncu_summary(path)
    assert s["kernel"] == "flash_fwd_splitkv_mla_fp8_sparse_kernel" and s["block"] == "(384, 1, 1)"
    assert all(0 < v < 1 for v in s["utilization"].values())
    # the stall picture: warps wait at barriers and on memory (long scoreboard) far more than on anything else
    top = list(s["stalls"])[:2]
    assert set(top) == {"barrier", "long_scoreboard"}
    assert s["stalls"]["barrier"] + s["stalls"]["long_scoreboard"] > 4 * s["stalls"].get("math_pipe_throttle", 0) + 4
    # the same launch timed two ways: Nsight Compute's duration vs the CUDA-event median of the timed calls
    name = path.stem.replace("flashmla_h200_sm90_", "")
    row = next(r for r in recording[1] if r.shape.name == name)
    assert s["duration_ns"] * 1e-6 == pytest.approx(row.splitkv_ms, rel=0.06)
    # the SM clock under this load, clock control off: below the 1,980 MHz boost
    assert 1.6e9 < s["sm_clock_hz"] < 1.98e9


def test_e4m3_codes_of_a_standard_normal():
    p = ft._e4m3_code_probabilities()
    assert p.sum() == pytest.approx(1) and p[0x7F] == p[0xFF] == 0 and p[0x80] == 0
    assert np.allclose(p[1:0x7F], p[0x81:0xFF])  # symmetric


@pytest.mark.parametrize("argv, msg", [
    (["crosscheck", "--timing"], "needs --flashmla"),
    (["crosscheck", "--save-flashmla-timing", "t.json"], "needs --flashmla"),
    (["crosscheck", "--timing-set", "fixed"], "needs --flashmla"),
])
def test_timing_flags_need_flashmla(argv, msg, capsys):
    from simtc.cli import main

    assert main(argv) == 2
    assert msg in capsys.readouterr().err


HELD_OUT = DATA / "flashmla_h200_sm90_timing_held_out.json"
PROFILES = DATA / "ncu" / "profiles_flashmla_h200_sm90_held_out.csv"


def test_the_held_out_recording_is_the_set_asked_for():
    meta, rows = ft.load_timing(HELD_OUT)
    assert [r.shape for r in rows] == list(ft.HELD_OUT_SHAPES) and meta["set"] == "held-out"
    assert not {s.name for s in ft.HELD_OUT_SHAPES} & {s.name for s in (*ft.TIMING_SHAPES, *ft.FIXED_SHAPES)}
    assert sum(r.shape.b <= 8 for r in rows) >= 5 and {r.shape.s_q for r in rows} == {1, 2, 3, 4}
    assert min(r.shape.topk for r in rows) == 1024 and max(r.shape.topk for r in rows) == 32768
    # built from a `git archive` of 9241ae3 (tests/data/README_h200_held_out.md), so the build saw no git checkout
    assert meta["flashmla_commit"] == "unknown (not a git checkout)" and "H200" in meta["device"]
    assert meta["nvcc"].startswith("Build cuda_13.0")
    for r in rows:
        assert r.repeats == 30 and r.call_p10_ms <= r.call_ms <= r.call_p90_ms
        assert r.sched_ms + r.splitkv_ms + r.combine_ms == pytest.approx(r.call_ms, rel=0.05)
        assert r.num_sm_parts == max(132 // r.shape.s_q, 1)


def test_nsight_compute_over_ten_shapes_in_one_process():
    """profile_calls: two split-KV launches per shape in order; the second of each is the one kept. Its grid is the
    shape's (1, s_q, num_sm_parts), its duration 2.5 to 6.8 us below the CUDA-event span of the timed calls (the
    events also hold the launch: predict's fixed split-KV cost, 3.9 us, is of that size), and the clock below the
    1,980 MHz boost."""
    every = ft.ncu_summaries(PROFILES)
    kept = ft.ncu_summaries(PROFILES, every=2, keep=1)
    assert len(every) == 2 * len(ft.PROFILE_SHAPES) and len(kept) == len(ft.PROFILE_SHAPES)
    timed = {r.shape.name: r for path in (REC, HELD_OUT) for r in ft.load_timing(path)[1]}
    for name, s in zip(ft.PROFILE_SHAPES, kept, strict=True):
        sh = ft.shape_named(name)
        assert s["kernel"] == "flash_fwd_splitkv_mla_fp8_sparse_kernel"
        assert s["grid"] == f"(1, {sh.s_q}, {132 // sh.s_q})"
        row = timed[name]
        assert 0 < row.splitkv_ms - s["duration_ns"] * 1e-6 < 0.008, name  # 2.5 to 6.8 us: the launch, the events
        assert 1.6e9 < s["sm_clock_hz"] < 1.98e9
        assert {"sm__cycles_active.sum", "l1tex__data_pipe_lsu_wavefronts.sum"} <= set(s["counters"])
    assert sum(ft.shape_named(n).b <= 8 for n in ft.PROFILE_SHAPES) >= 5
