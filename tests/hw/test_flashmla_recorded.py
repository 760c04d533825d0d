"""FlashMLA's own SM90 sparse decode, recorded on an H200, against simtc's replay of the SM100 head64 kernel.

``tests/data/flashmla_h200_sm90.npz`` holds 8 input sets made by simtc (V32 and MODEL1; 1 to 32 blocks; invalid
indices; attn_sink; rows with no valid token; hot tokens that force the lazy rescale; MODEL1 topk_length) and
the ``out`` / ``lse`` FlashMLA computed for them (how and where: tests/data/README_flashmla.md). The replay runs
here on the recorded inputs, no GPU needed.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from simtc.errors import SimtcError
from simtc.hw import flashmla as fm

DATA = Path(__file__).parents[1] / "data" / "flashmla_h200_sm90.npz"


@pytest.fixture(scope="module")
def recording():
    return fm.load_recording(DATA)


def test_recording_says_what_made_it(recording):
    meta, sets = recording
    assert meta["flashmla_commit"] == "9241ae3ef9bac614dd25e45e507e089f888280e0"
    assert "H200" in meta["device"] and "driver 580" in meta["device"] and "sm_90a" in meta["device"]
    assert meta["command"].startswith("simtc crosscheck --flashmla") and meta["date"].startswith("2026-")
    assert [n for n, _, _ in sets] == [n for n, _ in fm.SUITE]


def test_recorded_sets_cover_the_cases(recording):
    _, sets = recording
    models = {inp.model.name for _, inp, _ in sets}
    assert models == {"v32", "model1"} and len(sets) >= 6
    blocks = [inp.topk // 64 for _, inp, _ in sets]
    assert min(blocks) == 1 and max(blocks) == 32
    assert any(inp.attn_sink is not None for _, inp, _ in sets)
    assert any((~inp.valid().any(axis=-1)).any() for _, inp, _ in sets)  # a row with no valid token
    assert any((inp.indices < 0).any() for _, inp, _ in sets)
    # the inputs are exactly what the suite makes from seed 0 (nothing edited by hand)
    for (name, inp, _), (name2, again) in zip(sets, fm.suite(0), strict=True):
        assert name == name2
        for k, v in inp.arrays().items():
            np.testing.assert_array_equal(v, again.arrays()[k], err_msg=f"{name}/{k}")


def test_flashmla_outputs_match_the_replay(recording):
    rows = fm.replay_recording(DATA)
    for r in rows:
        assert r.o_rel <= 4e-3 and r.lse_abs <= 1e-4 and r.empty_identical, r
    assert sum(r.empty_rows for r in rows) >= 2
    # the recorded FlashMLA empty rows: +inf LSE, O exactly zero
    _, sets = recording
    for _, inp, (out, lse) in sets:
        empty = ~inp.valid().any(axis=-1)
        assert np.all(lse[empty] == np.inf) and not out[empty].any()
        assert np.isfinite(lse[~empty]).all()


def test_the_comparison_catches_a_wrong_output(recording):
    _, sets = recording
    name, inp, (out, lse) = sets[1]
    want = (out, lse)
    bad_o = out.copy()
    bad_o[0, 0, :, :8] ^= np.uint16(0x0080)  # flip a mantissa bit of 8 x 64 values
    assert not fm.compare(name, inp, (bad_o, lse), want).ok
    bad_l = lse.copy()
    bad_l[0, 0, 3] += np.float32(1e-3)
    c = fm.compare(name, inp, (out, bad_l), want)
    assert not c.ok and c.lse_abs == pytest.approx(1e-3, rel=1e-3)
    e = np.argwhere(~inp.valid().any(axis=-1))[0]
    bad_e = lse.copy()
    bad_e[e[0], e[1], 0] = 0.0  # an empty row that is not +inf on one side
    assert not fm.compare(name, inp, (out, bad_e), want).empty_identical


def test_cli_replays_the_recording(capsys):
    from simtc.cli import main

    rc = main(["crosscheck", "--replay-flashmla", str(DATA), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["ok"] and len(out["results"]) == len(fm.SUITE)
    assert out["recording"]["flashmla_commit"].startswith("9241ae3")


def test_bad_recording_is_refused(tmp_path):
    p = tmp_path / "x.npz"
    np.savez(p, a=np.zeros(3))
    with pytest.raises(SimtcError, match="not a FlashMLA recording"):
        fm.load_recording(p)

