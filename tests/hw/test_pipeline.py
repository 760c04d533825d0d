"""The GPU check pipeline without a GPU: the executor is replaced by simtc's own prediction.

Every check passes; a single flipped bit is caught and located; and what ``--save`` writes is
exactly what ``--replay`` reads: a run saved and replayed passes, and a flipped bit in a case kept
in full or in one kept as a digest makes replay fail.
"""

import numpy as np
import pytest
from attrs import evolve

import simtc.hw.wgmma as hw
from simtc.hw.crosscheck import gpu_checks, replay, save_run
from simtc.hw.recording import keeps_registers, read_recording


def _predicted(image, prog):
    return hw.predict(image, prog), np.array([100], np.uint64)


@pytest.fixture(scope="module")
def predicted_run():
    mp = pytest.MonkeyPatch()
    mp.setattr(hw, "run", _predicted)
    try:
        yield gpu_checks(0, lambda n: None)
    finally:
        mp.undo()


def test_pipeline_passes_on_predicted_outputs(predicted_run):
    assert [r.status for r in predicted_run.results] == ["pass"] * 5
    assert sum(r.cases for r in predicted_run.results) == 284
    assert len(predicted_run.outputs) == 284  # the run returns every case's registers


def test_pipeline_reports_a_flipped_bit(monkeypatch):
    def run(image, prog):
        regs = hw.predict(image, prog).copy()
        regs.view(np.uint32)[5, 3] ^= 1
        return regs, np.array([100], np.uint64)

    monkeypatch.setattr(hw, "run", run)
    first = gpu_checks(0, lambda n: None).results[0]
    assert first.status == "FAIL" and first.bit_exact == 0
    assert "thread 5, register 3" in first.first_mismatch and "smem" in first.first_mismatch


def test_save_then_replay_passes_every_case(predicted_run, tmp_path):
    path = tmp_path / "run.npz"
    assert save_run(path, predicted_run, device="predicted") == 284
    rec = read_recording(path)
    assert rec.keys == list(predicted_run.outputs)  # one label function for writing and reading
    kept = {k for k, v in predicted_run.outputs.items() if keeps_registers(k, v)}
    assert set(rec.registers) == kept and 0 < len(kept) < 284
    back = replay(path)
    assert "not in the recording" not in back.note and "not generated" not in back.note
    assert [r.status for r in back.results] == ["pass"] * 5
    assert sum(r.cases for r in back.results) == 284


@pytest.mark.parametrize("kept", [True, False], ids=["registers kept", "digest only"])
def test_replay_catches_a_flipped_bit(predicted_run, tmp_path, kept):
    key = next(k for k, v in predicted_run.outputs.items() if keeps_registers(k, v) == kept)
    outputs = dict(predicted_run.outputs)
    bad = outputs[key].copy()
    bad.view(np.uint32)[7, 1] ^= 1 << 4
    outputs[key] = bad
    path = tmp_path / "flipped.npz"
    save_run(path, evolve(predicted_run, outputs=outputs), device="predicted")
    failed = [r for r in replay(path).results if r.status == "FAIL"]
    assert len(failed) == 1 and failed[0].cases - failed[0].bit_exact == 1
    label = key.split(" | ", 1)[1]
    assert label in failed[0].first_mismatch
    if kept:
        assert "thread 7, register 1" in failed[0].first_mismatch
    else:
        assert "SHA-256" in failed[0].first_mismatch
