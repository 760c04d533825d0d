"""The engine on the H200's gather loops (simtc.kernels.gathers) against their recordings. The L1 parameters were
fitted on the probe's Nsight Compute counts (wavefronts) and its throughput loop (cycles per line), not on these
per-block times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simtc.engine import Engine
from simtc.engine.parameters import Timing
from simtc.kernels.gathers import gather_program, rows_program

DATA = Path(__file__).resolve().parents[1] / "data"
T = Timing("sm90")


def _per_block(program, blocks: int, l2: bool = True, timing=T) -> float:
    eng = Engine(program, timing=timing, active_sms=1, check=False, l2_resident=("",) if l2 else ()).run()
    return eng.cycles / blocks


@pytest.fixture(scope="module")
def rows():
    return json.loads((DATA / "h200_l1_probe.json").read_text())["rows"]


def test_the_row_loop_within_5_percent_at_every_pitch(rows):
    """11 pitches (rows starting on every 16 to 128 bytes of a line), 1,431 to 2,134 cycles per block on the H200:
    the engine within 5% at each, so it also orders them as the hardware does (the bank conflicts of the rows'
    shared 16-byte positions cost the data pipe, simtc.engine.l1.load_wavefronts)."""
    free = [r for r in rows if not r["smem_kib"]]
    assert len(free) >= 12
    for r in free:
        got = _per_block(rows_program(576 if r["m1"] else r["pitch"]), 16)
        assert got == pytest.approx(r["cycles_per_block"], rel=0.05), r["name"]
    # with the kernel's small L1 the same pattern costs a little more on the H200 (1.01-1.06x), which the engine's
    # wavefront rule (fitted with the L1 free) does not add: within 8% there
    for r in (x for x in rows if x["smem_kib"]):
        got = _per_block(rows_program(576 if r["m1"] else r["pitch"]), 16)
        assert got == pytest.approx(r["cycles_per_block"], rel=0.08), r["name"]


def test_the_row_loop_needs_the_conflict_model(rows):
    """Without the L1 mechanisms (data at 128 bytes a wavefront) every pitch costs the same: the hardware's 1.5x
    spread between rows on a line start and rows on 16-byte multiples is the mechanism's doing."""
    off = T.without("l1")
    spread = _per_block(rows_program(512), 8, timing=off) / _per_block(rows_program(656), 8, timing=off)
    assert spread == pytest.approx(1.0, abs=0.02)
    by = {r["name"]: r["cycles_per_block"] for r in rows}
    assert by["rows-p512"] / by["rows-p656"] > 1.4
    assert _per_block(rows_program(512), 8) / _per_block(rows_program(656), 8) > 1.4


def test_calibrates_ldg_gather_one_block_in_flight():
    """``simtc calibrate``'s LDG gather, 1 CTA, 1 block in flight: from L2 the engine is within 5% (V32 2,075 and
    MODEL1 2,282 cycles measured); from HBM it is 21-23% slow today -- the H200 takes the same time from HBM as from
    L2 (2,073 / 2,296), hiding the longer latency this loop exposes in the engine."""
    cal = json.loads((DATA / "h200_calibration.json").read_text())["memory"]["configs"]
    meas = {(c["format"], c["pool"]): c["latency_median"] for c in cal
            if c["status"] == "ok" and c["method"] == "ldg" and c["ctas"] == 1 and c["inflight"] == 1}
    for fmt in ("v32", "model1"):
        assert _per_block(gather_program(fmt), 12) == pytest.approx(meas[(fmt, "l2")], rel=0.05), fmt
        err = _per_block(gather_program(fmt), 12, l2=False) / meas[(fmt, "hbm")] - 1
        assert 0.1 < err < 0.3, (fmt, err)
