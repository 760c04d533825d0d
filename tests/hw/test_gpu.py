"""On an sm_90a GPU: every cross-check passes bit for bit and the timing benchmark measures every shape
(skipped, with the reason, elsewhere)."""

import numpy as np
import pytest

from simtc.hw.device import probe

INFO = probe()
WHY = INFO.reason if not INFO.available else f"the device is {INFO.arch}"
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not INFO.available or INFO.arch != "sm_90a", reason=f"needs an sm_90a GPU: {WHY}")]


def test_all_sm90_checks_pass():
    from simtc.hw.crosscheck import run_checks
    from simtc.hw.timing import CHECK_NAME

    run = run_checks("sm90", seed=0)
    failed = [r for r in run.results if r.status == "FAIL" and r.check != CHECK_NAME]
    assert not failed, [(r.check, r.first_mismatch) for r in failed]
    assert len(run.outputs) == 284
    rows = run.timing["rows"]
    assert {(r["operands"], r["n"]) for r in rows} == {(o, n) for o in ("SS", "RS")
                                                     for n in (8, 16, 24, 32, 48, 64, 96, 128, 192, 256)}
    for r in rows:
        assert 0 < r["ii_cycles"] < r["latency_cycles"], r
        assert (np.diff(r["chain_cycles"]) > 0).all(), r
