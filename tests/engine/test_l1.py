"""The L1's miss path (simtc.engine.l1): lines per row from the rows' pitch, the per-line cost taken from the H200
probe's recording, and the mechanism timed by hand on small Programs."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from simtc.engine import Engine
from simtc.engine.l1 import lines_per_row, load_lines
from simtc.engine.parameters import Timing
from simtc.errors import SimtcError
from simtc.isa import CudaCoreBlock, Program, Role

DATA = Path(__file__).resolve().parents[1] / "data"
T = Timing("sm90")


def _probe_lines(c: dict) -> float:
    """Lines one probe instruction touches: rows of 512 / rows bytes at the config's pitch and ``align``."""
    return load_lines(512, c["rows"], c["pitch"], c["align"])


def test_lines_per_row_follow_the_pitch():
    assert lines_per_row(64, 656) == 1.375      # offsets 0, 16, ..., 112: the last three straddle a line
    assert lines_per_row(64, 576) == 1.0        # offsets 0 and 64
    assert lines_per_row(64, 0) == 1.0 and lines_per_row(512, 0) == 4.0
    assert lines_per_row(16, 656) == 1.0
    assert lines_per_row(64, 1024, 80) == 2.0 and lines_per_row(64, 1024, 64) == 1.0  # one fixed start in the line
    assert load_lines(512, 8, 656) == 11.0 and load_lines(512, 32, 0) == 32.0


@pytest.fixture(scope="module")
def probe():
    return json.loads((DATA / "h200_l1_probe.json").read_text())


def test_the_line_cost_is_the_median_of_the_small_l1_probe(probe):
    rows = [c for c in probe["configs"] if c["smem_kib"] >= 200 and c["hint"] == "nc" and c["pool"] == "l2"]
    assert len(rows) >= 6
    per_line = [c["cycles_per_instruction"] / _probe_lines(c) for c in rows]
    assert T["l1_line_cycles"] == pytest.approx(statistics.median(per_line), abs=0.005)
    # one cost per line explains every shape within -10% .. +20% (4 to 32 lines, aligned or straddling)
    for c in rows:
        err = T["l1_line_cycles"] * _probe_lines(c) / c["cycles_per_instruction"] - 1
        assert -0.10 < err < 0.20, (c["name"], err)
    # the L1 left free costs about one cycle a line: the cost is the small L1's, and the two differ
    free = [c["cycles_per_instruction"] / _probe_lines(c) for c in probe["configs"]
            if not c["smem_kib"] and c["pool"] == "l2"]
    assert statistics.median(free) < 0.6 * T["l1_line_cycles"]


def test_the_probe_counts_lines_not_bytes(probe):
    """Same bytes (512 per instruction), 4 to 32 lines: the cost grows with the lines (the data-pipe wavefronts
    Nsight Compute counts stay at about one per row, tests/data/ncu/h200_l1_probe.csv)."""
    by = {c["name"]: c["cycles_per_instruction"] for c in probe["configs"]}
    assert by["r8-p1024-a80-nc-s200"] > 1.7 * by["r8-p1024-a0-nc-s200"]      # 16 lines vs 8
    assert by["r32-p1024-a0-nc-s200"] > 4 * by["r8-p1024-a0-nc-s200"] * 0.9  # 32 vs 8
    assert by["r8-p656-a0-nc-s200"] > by["r8-p576-a0-nc-s200"]              # V32 rows straddle lines, MODEL1's do not


def _ldg_program(n: int, rows: int, pitch: int) -> Program:
    blk = CudaCoreBlock("gather", (("LDG.E.128", n),), gmem_rows=rows, gmem_pitch=pitch, chain=(("LDG.E.128", 1),))
    return Program("l1", (Role("a", (0,), (blk,)),))


def _cycles(p: Program, timing=T) -> int:
    return Engine(p, timing=timing).run().cycles


def test_loads_queue_on_the_l1_by_their_lines():
    """n loads of 8 V32 rows from one warp: each books ceil(11 x 1.78) = 20 cycles of the miss path before its
    request leaves, so the last one leaves (n - 1) x 20 cycles after the first; with the mechanism off, at once."""
    n = 16
    per = math.ceil(load_lines(512, 8, 656) * T["l1_line_cycles"])
    on = Engine(_ldg_program(n, 8, 656), timing=T).run()
    off = Engine(_ldg_program(n, 8, 656), timing=T.without("l1")).run()
    assert on.unit_busy["l1"] == n * per
    assert off.unit_busy["l1"] == 0
    assert on.cycles > off.cycles
    # the same bytes in rows that stay in their lines (MODEL1's pitch) cost fewer lines, so less time
    assert _cycles(_ldg_program(n, 8, 576)) < on.cycles


def test_a_scaled_line_cost_moves_the_loads():
    n = 32
    base = _cycles(_ldg_program(n, 8, 656))
    assert _cycles(_ldg_program(n, 8, 656), T.scaled("l1_line_cycles", 2.0)) > base
    assert _cycles(_ldg_program(n, 8, 656), T.scaled("l1_line_cycles", 0.5)) < base


def test_gmem_rows_is_checked():
    with pytest.raises(SimtcError, match="gmem_rows"):
        CudaCoreBlock("bad", (("LDG.E.128", 1),), gmem_rows=3)


# ---- the data pipe: a gather's wavefronts by its lanes' bank conflicts ------------------------------------------
def test_the_wavefront_rule_is_the_fit_of_the_probes_counts():
    """Nsight Compute's data-pipe wavefronts per load of FlashMLA's lane order at 11 row pitches: least squares of
    4 x (a x rows + b x rows on the busiest bank) per quarter-warp gives the table's a and b, within 1% at each."""
    import numpy as np

    from simtc.engine.l1 import conflict_rows
    from simtc.hw.l1_probe import ROWS_CONFIGS, ncu_rows_wavefronts

    measured = ncu_rows_wavefronts(DATA / "ncu" / "h200_l1_probe.csv")
    xs, ys = [], []
    for c in ROWS_CONFIGS:
        if c.m1 or c.smem_kib:
            continue
        q = conflict_rows(16, 8, c.pitch, "interleaved")
        xs.append([sum(n for n, _ in q), sum(m for _, m in q)])
        ys.append(measured[c.name])
    (a, b), *_ = np.linalg.lstsq(np.array(xs), np.array(ys), rcond=None)
    assert (T["l1_wavefronts_per_row"], T["l1_wavefronts_per_conflict"]) == pytest.approx((a, b), abs=0.002)
    pred = np.array(xs) @ np.array([a, b])
    assert np.max(np.abs(pred / np.array(ys) - 1)) < 0.01
    # rows on a line start conflict on every bank: 32 wavefronts; on 16-byte multiples, about 19
    assert measured["rows-p512"] > 32 and 19 < measured["rows-p656"] < 20


def test_the_wavefront_rule_on_the_other_lane_order():
    """The same two numbers on the probe's grouped lanes (not fitted on them): 1 to 32 rows on a line start within
    2%, the kernels' pitches 9% (MODEL1) and 22% (V32) low."""
    import csv

    from simtc.engine.l1 import load_wavefronts
    from simtc.hw.l1_probe import CONFIGS

    lines = [ln for ln in (DATA / "ncu" / "h200_l1_probe.csv").read_text().splitlines() if ln.startswith('"')]
    table = list(csv.reader(lines))
    head, body = table[0], table[2:]
    k = head.index("Kernel Name")
    launches = [r for r in body if r[k].startswith(("simtc_l1_probe_nc", "simtc_l1_probe_plain"))]
    got = {}
    for c, r in zip(CONFIGS, launches[1::2], strict=True):
        got[c.name] = (float(r[head.index("l1tex__data_pipe_lsu_wavefronts.sum")].replace(",", ""))
                       / float(r[head.index("smsp__inst_executed_op_global_ld.sum")].replace(",", "")))
    a, b = T["l1_wavefronts_per_row"], T["l1_wavefronts_per_conflict"]
    for rows in (1, 2, 4, 8, 16, 32):
        assert load_wavefronts(16, rows, 0, "grouped", a, b) == pytest.approx(got[f"r{rows}-p1024-a0-nc"], rel=0.02)
    assert -0.25 < load_wavefronts(16, 8, 656, "grouped", a, b) / got["r8-p656-a0-nc"] - 1 < -0.15
    assert -0.15 < load_wavefronts(16, 8, 576, "grouped", a, b) / got["r8-p576-a0-nc"] - 1 < 0


def test_a_gathers_data_holds_the_port_for_its_wavefronts():
    """One load of 8 rows in FlashMLA's lane order holds the port its expected wavefronts (rounded) when its data is
    back: rows on a line start (pitch 512) 32, rows on 16-byte multiples (V32's 656) 19; with the mechanism off, 4."""
    from simtc.engine.l1 import load_wavefronts

    def port(pitch, timing=T):
        blk = CudaCoreBlock("g", (("LDG.E.128", 1),), gmem_rows=8, gmem_pitch=pitch, gmem_lanes="interleaved",
                            chain=(("LDG.E.128", 1),))
        return Engine(Program("g", (Role("a", (0,), (blk,)),)), timing=timing).run().unit_busy["smem_port"]

    a, b = T["l1_wavefronts_per_row"], T["l1_wavefronts_per_conflict"]
    assert port(512) == round(load_wavefronts(16, 8, 512, "interleaved", a, b)) == 32
    assert port(656) == round(load_wavefronts(16, 8, 656, "interleaved", a, b)) == 19
    assert port(656, T.without("l1")) == 4
    assert port(656, T.scaled("l1_wavefronts_per_conflict", 2.0)) > port(656)


def test_gmem_lanes_is_checked():
    with pytest.raises(SimtcError, match="gmem_lanes"):
        CudaCoreBlock("bad", (("LDG.E.128", 1),), gmem_lanes="diagonal")


def test_the_mbarrier_arrive_is_read_from_its_chain(probe):
    """mbarrier_arrive (sm90) is the arrive chain's step less the select's part, which the ld.shared chain gives
    (its step less the LDS latency); the ping-pong's one-way time then fixes mbarrier_try_wait."""
    c = probe["chains"]
    select = c["ld.shared.b64"]["cycles_per_step"] - T["smem_ld_latency"]
    assert T["mbarrier_arrive"] == round(c["mbarrier.arrive"]["cycles_per_step"] - select)
    assert 25 < T["mbarrier_arrive"] < 35 and T.param("mbarrier_arrive").label == "measured"
