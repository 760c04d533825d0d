"""Recorded H200 outputs (tests/data/h200_crosscheck_seed0.npz) equal simtc's predictions, bit for bit.

The file holds what an NVIDIA H200 computed for every cross-check case of seed 0, written by
``simtc crosscheck --seed 0 --save`` (how and where: tests/data/README_h200.md): full registers for
the cases that :func:`simtc.hw.recording.keeps_registers` keeps and a SHA-256 digest of every case's
registers. Cases are rebuilt from the seed.
"""

import json
from pathlib import Path

import numpy as np

from simtc.hw.crosscheck import replay
from simtc.hw.recording import read_recording
from simtc.hw.timing import CHECK_NAME

DATA = Path(__file__).parents[1] / "data" / "h200_crosscheck_seed0.npz"


def test_every_recorded_h200_output_matches_simtc():
    run = replay(DATA)
    assert "H200" in run.note and "not generated" not in run.note and "not in the recording" not in run.note
    by_name = {r.check: r for r in run.results}
    assert by_name["wgmma: swizzle x major x N x data"].cases == 240
    assert by_name["wgmma: deliberately wrong descriptors"].cases == 18
    assert by_name["wgmma: NaN/Inf/subnormal bit patterns and overflow"].cases == 12
    assert by_name["dual GEMM split on Hopper (P_lo, P_hi)"].cases == 2
    assert by_name["experiment: non-zero base offset (A off its boundary)"].cases == 12
    for r in run.results:
        if r.check != CHECK_NAME:
            assert r.status == "pass" and r.bit_exact == r.cases, (r.check, r.first_mismatch)


def test_cli_replay(capsys):
    from simtc.cli import main

    rc = main(["crosscheck", "--replay", str(DATA), "--json"])
    out = json.loads(capsys.readouterr().out)
    bit_exact = [r for r in out["results"] if r["check"] != CHECK_NAME]
    assert sum(r["cases"] for r in bit_exact) == 284 and all(r["status"] == "pass" for r in bit_exact)
    assert rc == (0 if out["ok"] else 1)


def test_h200_dual_gemm_halves_equal_the_blackwell_replays_values():
    """The H200's two wgmma chains give, bit for bit, the values simtc's Blackwell replay computes for P_lo/P_hi.

    This confirms the arithmetic and the split; it says nothing about Layout E (TMEM lanes), which Hopper lacks.
    """
    from simtc.hw.suite import dual_gemm_case
    from simtc.kernels.flashmla import read_p, replay_qk
    from simtc.mma.wgmma import fragment_to_matrix

    rec = read_recording(DATA)
    _, ops = dual_gemm_case(rec.seed)
    p_lo, p_hi = read_p(replay_qk(ops["q"], ops["k"])[0])
    for name, want in (("P_lo", p_lo), ("P_hi", p_hi)):
        key = next(k for k in rec.registers if k.startswith(f"dual GEMM (Hopper) | {name}"))
        got = fragment_to_matrix(rec.registers[key])
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), name
