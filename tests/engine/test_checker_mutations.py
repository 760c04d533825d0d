"""The mutation sweep of ``benchmarks/checker_mutations.py`` on a 3-block head64 Program (every deletion of a fence,
wait, commit, arrive or barrier, every parity flip): each mutant is flagged by the checker or classified harmless by
a written argument of the sweep's table; none is missed. The counts per role are pinned, so an argument that starts
to cover a mutant the checker used to flag (or the reverse) shows here."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "checker_mutations.py"


def _sweep_module():
    spec = importlib.util.spec_from_file_location("checker_mutations", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SWEEP = _sweep_module()

EXPECTED = {  # role: (mutants, flagged, harmless) at 3 blocks
    "softmax": (56, 41, 15), "mma": (41, 38, 3), "raw": (22, 15, 7), "rope": (22, 16, 6), "index": (9, 6, 3),
    "dequant": (32, 21, 11),
}


@functools.cache
def _sweep(role: str) -> dict:
    return SWEEP.sweep(3, roles={role})


@pytest.mark.parametrize("role", sorted(EXPECTED))
def test_every_mutant_is_flagged_or_argued_harmless(role):
    out = _sweep(role)
    assert out["missed_rows"] == [], [(x["index"], x["how"], x["record"], x["site"]) for x in out["missed_rows"]]
    assert (out["mutants"], out["flagged"], out["harmless"]) == EXPECTED[role]
    for row in out["rows"]:
        if not row["flagged"]:
            assert row["harmless"] and row["harmless"] in SWEEP.HARMLESS.values()


def test_a_deleted_wait_ld_is_flagged_where_the_cells_are_released_or_overwritten():
    """PTX ISA 9.0 §9.7.16.6.4.5: using a tcgen05.ld's registers needs no wait::ld, overwriting the cells it reads
    does. The P readback's wait::ld of blocks 0 and 1 precedes the release to the next block's QK MMA, which
    overwrites P: flagged (tmem-overwrite-in-flight). The last block's and the epilogue's O loads only feed registers
    before another wait::ld or the Program's end: argued harmless."""
    rows = [x for x in _sweep("softmax")["rows"] if x["record"] == "WaitLd" and x["how"] == "delete"]
    p_waits = [x for x in rows if x["site"] == "after P columns 432-463"]
    assert [x["which"] for x in p_waits] == ["any", "any", "last"]
    assert [x["rules"] for x in p_waits[:2]] == [["tmem-overwrite-in-flight"]] * 2
    assert not p_waits[2]["flagged"] and "§9.7.16.6.4.5" in p_waits[2]["harmless"]
    epilogue = [x for x in rows if x["site"].startswith("after O chunk")]
    assert len(epilogue) == 4 and all(not x["flagged"] and "§9.7.16.6.4.5" in x["harmless"] for x in epilogue)


def test_an_unflagged_mutant_without_an_argument_is_a_miss():
    row = {"role": "softmax", "how": "delete", "record": "BarSync", "site": "li written", "which": "any"}
    assert SWEEP.harmless(row) is None
    row = {"role": "raw", "how": "delete", "record": "MbarrierTryWait", "site": "raw_free", "which": "any"}
    assert SWEEP.harmless(row) is None   # only the phantom wait is argued harmless
    assert SWEEP.harmless({**row, "which": "phantom"})
