"""The recorded H200 wgmma timing (tests/data/h200_wgmma_timing.json) is complete and self-consistent."""

import json
from pathlib import Path

import numpy as np

from simtc.hw.timing import NS, OPERANDS, fit_ii, timing_from_json

DATA = Path(__file__).parents[1] / "data" / "h200_wgmma_timing.json"


def test_recorded_h200_timing_covers_every_shape_and_refits():
    data = json.loads(DATA.read_text())
    assert "H200" in data["device"] and data["command"].startswith("simtc crosscheck")
    rows = timing_from_json(data)
    assert {(r.operands, r.n) for r in rows} == {(o, n) for o in OPERANDS for n in NS}
    for r in rows:
        assert (np.diff(r.chain_cycles) > 0).all(), r  # a deeper chain takes longer
        assert 0 < r.ii_cycles < r.latency_cycles and r.latency_p10 <= r.latency_cycles <= r.latency_p90
        a, b = fit_ii(r.depths, r.chain_cycles)  # the stored II is the fit of the stored chains
        assert abs(a - r.ii_cycles) < 1e-9 and abs(b - r.fit_b) < 1e-9


def test_recorded_h200_timing_is_in_the_recording():
    from simtc.hw.recording import read_recording

    rec = read_recording(DATA.with_name("h200_crosscheck_seed0.npz"))
    assert timing_from_json(rec.meta["wgmma_timing"]) == timing_from_json(json.loads(DATA.read_text()))
