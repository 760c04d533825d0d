"""Recorded H200 outputs (tests/data/h200_crosscheck_seed0.npz) equal simtc's predictions, bit for bit.

The file holds what an NVIDIA H200 computed for every cross-check case of seed 0 (2026-11-29,
``simtc crosscheck --save``): full registers for the N=64, special-value, dual-GEMM and base-offset
cases and a SHA-256 digest of the registers for the rest. Cases are rebuilt from the seed; see tests/data/README.md.
"""

from pathlib import Path

from simtc.hw.crosscheck import replay

DATA = Path(__file__).parents[1] / "data" / "h200_crosscheck_seed0.npz"


def test_every_recorded_h200_output_matches_simtc():
    results, note = replay(DATA)
    assert "H200" in note and "not generated" not in note
    by_name = {r.check: r for r in results}
    assert by_name["wgmma: swizzle x major x N x data"].cases == 240
    assert by_name["wgmma: deliberately wrong descriptors"].cases == 18
    assert by_name["wgmma: NaN/Inf/subnormal bit patterns and overflow"].cases == 12
    assert by_name["dual GEMM split on Hopper (P_lo, P_hi)"].cases == 2
    assert by_name["experiment: non-zero base offset (A off its boundary)"].cases == 12
    for r in results:
        assert r.status == "pass" and r.bit_exact == r.cases, (r.check, r.first_mismatch)


def test_cli_replay(capsys):
    from simtc.cli import main

    assert main(["crosscheck", "--replay", str(DATA), "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and sum(r["cases"] for r in out["results"]) == 284


def test_h200_dual_gemm_equals_the_tcgen05_layout_e_replay():
    """The H200's two wgmma chains give, bit for bit, what simtc's Blackwell replay puts in TMEM lanes 0-63/64-127."""
    import json

    import numpy as np

    from simtc.hw.suite import dual_gemm_case
    from simtc.kernels.flashmla import read_p, replay_qk
    from simtc.mma.wgmma import fragment_to_matrix

    z = np.load(DATA)
    labels = json.loads(bytes(z["meta"]).decode())["labels"]
    _, ops = dual_gemm_case(0)
    p_lo, p_hi = read_p(replay_qk(ops["q"], ops["k"])[0])
    for name, want in (("P_lo", p_lo), ("P_hi", p_hi)):
        i = next(j for j, lab in enumerate(labels) if lab.startswith(f"dual GEMM (Hopper) | {name}"))
        got = fragment_to_matrix(z[f"out{i}"])
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), name
