"""On an sm_90a GPU: every cross-check passes bit for bit (skipped, with the reason, elsewhere)."""

import pytest

from simtc.hw.device import probe

INFO = probe()
WHY = INFO.reason if not INFO.available else f"the device is {INFO.arch}"
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not INFO.available or INFO.arch != "sm_90a", reason=f"needs an sm_90a GPU: {WHY}")]


def test_all_sm90_checks_pass():
    from simtc.hw.crosscheck import run_checks

    results, _note = run_checks("sm90", seed=0)
    failed = [r for r in results if r.status == "FAIL"]
    assert not failed, [(r.check, r.first_mismatch) for r in failed]
