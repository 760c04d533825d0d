"""FlashMLA's own SM90 sparse decode compiled from a checkout (``SIMTC_FLASHMLA_DIR``) and executed by simtc,
against the H200's outputs (``tests/data/flashmla_h200_sm90.npz``): O and LSE bit-identical except where a MUFU
approximation enters, and the results recorded in ``tests/data/flashmla_sm90_executed.json`` reproduced.

Without a checkout (as in CI) or nvcc these tests skip with the reason; ``tests/cli/test_run_flashmla.py`` checks the
recorded results without one."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

DATA = Path(__file__).resolve().parents[1] / "data"
RECORDING = DATA / "flashmla_h200_sm90.npz"
RESULTS = DATA / "flashmla_sm90_executed.json"
CHECKOUT = os.environ.get("SIMTC_FLASHMLA_DIR")

pytestmark = [
    pytest.mark.skipif(not CHECKOUT, reason="set SIMTC_FLASHMLA_DIR to a FlashMLA checkout (9241ae3) with its CUTLASS "
                                            "headers to compile and execute FlashMLA's SM90 kernels"),
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="compiling FlashMLA's kernels to PTX needs nvcc"),
]

KNOWN_GAPS: tuple[str, ...] = ()
"""Executor gaps the compiled kernels still reach: none. The two they reached (tests/data/flashmla_sm90_executed.json,
``executor_gaps``: ``barrier.cluster`` and a ``trap`` path in the post-dominator analysis) are closed; a gap named
here would turn its tests into expected failures naming it."""


@pytest.fixture(scope="module")
def build():
    from simtc.cli.run_flashmla import compile_ptx
    from simtc.hw.flashmla import find_checkout

    return compile_ptx(find_checkout(CHECKOUT))


@pytest.fixture(scope="module")
def recorded():
    return json.loads(RESULTS.read_text())


def _executed(fn):
    """Run ``fn``; an executor gap of :data:`KNOWN_GAPS` is an expected failure naming it."""
    from simtc.ptx.errors import KernelFault, PtxUnsupported

    try:
        return fn()
    except (KernelFault, PtxUnsupported) as e:
        if any(g in str(e) for g in KNOWN_GAPS):
            pytest.xfail(f"executor gap: {e}")
        raise


def test_the_probe_layouts_are_the_ptx_parameters(build):
    """The struct sizes nvcc gives the host (the probe) are the sizes of the kernels' PTX parameters, and the Q tensor
    map cute builds is the [b, s_q, h_q, d_qk] tensor with a 64 x 64 box, 128-byte swizzle (splitkv_mla.cuh lines
    705-716: shape (h_q, d_qk, s_q, b), strides (stride_q_h_q, 1, stride_q_s_q, stride_q_b))."""
    from simtc.cli.run_flashmla import probe_layouts
    from simtc.cuda.compiler import parse_ptx
    from simtc.hw.flashmla import load_recording

    _, sets = load_recording(RECORDING)
    for name, inp, _ in (sets[2], sets[6]):
        lay = probe_layouts(build, inp, 0x7F00_0000_0000)
        mod = parse_ptx(build.ptx[inp.model.name].read_text())
        (kernel,) = [k for k in mod.kernels() if "splitkv" in k]
        sizes = [p.size for p in mod.functions[kernel].params]
        assert sizes == [lay.size("SparseAttnDecodeParams"), int(lay.tma["sizeof"])], name
        sched = parse_ptx(build.ptx["sched_meta"].read_text())
        assert [p.size for f in sched.kernels() for p in sched.functions[f].params] == \
            [lay.size("GetDecodeSchedMetaParams")]
        comb = parse_ptx(build.ptx["combine"].read_text())
        assert {p.size for f in comb.kernels() for p in comb.functions[f].params} == {lay.size("CombineParams")}
        e = lay.tma_q_encode
        b, s_q, h_q, d_qk = inp.q.shape
        assert e["calls"] == 1 and e["data_type"] == 9 and e["swizzle"] == 3 and e["address"] == 0x7F00_0000_0000
        assert e["global_dim"] == [d_qk, h_q, s_q, b] and e["box_dim"] == [64, 64, 1, 1]
        assert e["global_strides"] == [2 * d_qk, 2 * h_q * d_qk, 2 * s_q * h_q * d_qk]


@pytest.mark.slow
def test_one_set_executes_bit_identical_in_o(build):
    """One block, one split per request: every O value equals the H200's; LSE within 2 ulps (logf = lg2.approx)."""
    from simtc.cli.run_flashmla import execute
    from simtc.hw.flashmla import load_recording
    from simtc.kernels.flashmla.executed import compare_bits

    _, sets = load_recording(RECORDING)
    name, inp, (out, lse) = sets[0]
    r = _executed(lambda: execute(build, inp))
    c = compare_bits(r.out, r.lse, out, lse)
    assert c.o_identical == c.o_values and c.lse_max_ulp <= 2, (name, c)
    assert np.isfinite(r.lse).all()


@pytest.mark.slow
def test_every_set_matches_the_h200_where_no_mufu_result_reaches(build, recorded):
    """All 8 recorded sets, each also with every MUFU result moved within the H200's measured MUFU error bounds
    (simtc.cli.run_flashmla.PERTURBATIONS): the differing values within 2 ulps, the numbers (counts, what the
    perturbations reach, digests) those recorded in tests/data/flashmla_sm90_executed.json."""
    from simtc.cli.run_flashmla import compare_with_recording

    got = _executed(lambda: compare_with_recording(build, RECORDING))
    want = {r["name"]: r for r in recorded["sets"]}
    assert [r["name"] for r in got["sets"]] == list(want)
    for r in got["sets"]:
        w = want[r["name"]]
        for key in ("o", "lse"):
            assert r[key]["max_ulp"] <= 2, (r["name"], key, r[key])
            assert r[key] == w[key], (r["name"], key)
        for k in ("out_sha256", "lse_sha256", "o_accum_sha256", "lse_accum_sha256", "sched_meta", "num_splits",
                  "thread_instructions"):
            assert r[k] == w[k], (r["name"], k)


@pytest.mark.slow
def test_the_command_writes_the_outputs_file(build, tmp_path, capsys):
    """``simtc run flashmla-sm90 --inputs --save-outputs --json`` on one recorded set: the file reads back as
    FlashMLA's outputs format and holds the executed outputs (the recorded digest)."""
    from simtc.cli import main
    from simtc.hw.flashmla import load_recording
    from simtc.kernels.flashmla import io

    _, sets = load_recording(RECORDING)
    name, inp, _ = sets[4]
    io.save_inputs(tmp_path / "in.npz", inp)
    out = tmp_path / "out.npz"
    rc = main(["run", "flashmla-sm90", "--flashmla", CHECKOUT, "--inputs", str(tmp_path / "in.npz"),
               "--save-outputs", str(out), "--json"])
    cap = capsys.readouterr()
    if rc == 1 and any(g in cap.err for g in KNOWN_GAPS):  # the command prints the fault as one line
        pytest.xfail(f"executor gap: {cap.err.strip()}")
    assert rc == 0, cap.err
    summary = json.loads(cap.out)
    assert summary["num_sm_parts"] == 132 and summary["outputs"] == str(out)
    o = io.load_outputs(out, inp)
    import hashlib

    want = {r["name"]: r for r in json.loads(RESULTS.read_text())["sets"]}[name]
    assert hashlib.sha256(np.ascontiguousarray(o.out).tobytes()).hexdigest() == want["out_sha256"]
