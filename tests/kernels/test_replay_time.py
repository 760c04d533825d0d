"""The replay's time accounting: cycles per block, whole-kernel cycles and TFLOP/s, recomputed independently from
the engine's trace and FlashMLA's FLOP count, so an off-by-one anywhere in the accounting fails a test."""

import numpy as np
import pytest

from simtc.kernels.flashmla.replay import (
    B200_CLOCK_GHZ,
    B200_SMS,
    replay,
    steady_cycles_per_block,
    sv_done_cycles,
)

BLOCKS = 6


@pytest.fixture(scope="module")
def run():
    return replay("v32", BLOCKS, timing_only=True, keep_engine=True)


def test_one_sv_done_phase_per_block(run):
    eng = run.engine
    phases = sv_done_cycles(eng)
    assert len(phases) == BLOCKS and phases == sorted(phases)
    # recomputed from the raw trace, not through the helper
    raw = [e.cycle for e in eng.trace if e.kind == "phase" and e.detail.startswith("sv_done")]
    assert raw == phases


def test_cycles_per_block_is_the_mean_interval_between_blocks(run):
    phases = np.array(sv_done_cycles(run.engine))
    intervals = np.diff(phases)
    assert len(intervals) == BLOCKS - 1
    assert run.cycles_per_block_steady == pytest.approx(intervals.mean(), abs=1e-9)
    assert run.cycles_per_block_steady * (BLOCKS - 1) == pytest.approx(phases[-1] - phases[0], abs=1e-9)
    assert steady_cycles_per_block("v32", BLOCKS) == run.cycles_per_block_steady


def test_whole_kernel_cycles_end_with_the_last_event(run):
    eng = run.engine
    last = max(e.cycle for e in eng.trace)
    assert run.cycles_whole == eng.cycles == last
    assert run.cycles_whole >= max(w.finished_at for w in eng.warps)
    # the first block's ramp (Q load, first gathers) and the epilogue (O out) lie outside the steady state
    phases = sv_done_cycles(eng)
    assert phases[0] > run.cycles_per_block_steady and run.cycles_whole > phases[-1]


def test_tflops_are_flashmlas_flops_over_the_time(run):
    flops_per_block = 2 * 64 * 64 * (576 + 512)  # 2 x h x tokens x (D_QK + D_V), V32
    per_second = B200_CLOCK_GHZ * 1e9
    whole = flops_per_block * BLOCKS / (run.cycles_whole / per_second) * B200_SMS / 1e12
    steady = flops_per_block / (run.cycles_per_block_steady / per_second) * B200_SMS / 1e12
    assert run.tflops_whole == pytest.approx(whole, rel=1e-12)
    assert run.tflops_steady == pytest.approx(steady, rel=1e-12)


def test_the_report_leads_with_the_whole_kernel_and_claims_no_bound(run):
    text = run.summary()
    lines = [ln.strip() for ln in text.splitlines()]
    whole = next(i for i, ln in enumerate(lines) if ln.startswith("whole kernel"))
    steady = next(i for i, ln in enumerate(lines) if ln.startswith("steady state"))
    assert whole < steady
    assert "upper bound" not in text.lower()


def test_the_epilogue_stores_o_once():
    """The O tiles are stored by warps 0 and 1 of WG0, one store each per chunk: 64 KiB of O leave the SM once."""
    r = replay("v32", 2, timing_only=True, keep_engine=True)
    stores = [e for e in r.engine.trace if e.kind == "issue" and e.detail == "cp.async.bulk.tensor"
              and e.role == "softmax"]
    writes = [e for e in r.engine.trace if e.kind == "complete" and e.detail == "cp.async.bulk.tensor"
              and e.role == "softmax"]
    assert len(writes) == 8 and {e.warp for e in writes} == {0, 1}
    assert len(stores) == 4 * 8  # every warp of WG0 passes the records; warps 2 and 3 skip them
