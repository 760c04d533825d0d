"""The GPU check pipeline without a GPU: with the executor replaced by simtc's own prediction every
check passes, and a single flipped bit is caught and located (so the comparison can fail)."""

import numpy as np

import simtc.hw.wgmma as hw
from simtc.hw.crosscheck import gpu_checks


def test_pipeline_passes_on_predicted_outputs(monkeypatch):
    monkeypatch.setattr(hw, "run", lambda image, prog: (hw.predict(image, prog), np.array([100], np.uint64)))
    results = gpu_checks(0, lambda n: None)
    assert [r.status for r in results] == ["pass"] * 5
    assert sum(r.cases for r in results) == 284


def test_pipeline_reports_a_flipped_bit(monkeypatch):
    def run(image, prog):
        regs = hw.predict(image, prog).copy()
        regs.view(np.uint32)[5, 3] ^= 1
        return regs, np.array([100], np.uint64)

    monkeypatch.setattr(hw, "run", run)
    first = gpu_checks(0, lambda n: None)[0]
    assert first.status == "FAIL" and first.bit_exact == 0
    assert "thread 5, register 3" in first.first_mismatch and "smem" in first.first_mismatch
