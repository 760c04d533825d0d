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
