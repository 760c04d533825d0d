"""FlashMLA's own SM100 head64 kernel executed in simtc, held against the hand replay and the hand Program.

CI has no FlashMLA checkout: there the recorded results (``tests/data/flashmla_head64_executed.json``, made by
``python -P -m simtc.cuda.executed_sm100.head64 FILE`` with ``SIMTC_FLASHMLA_DIR`` set) are checked against
what CI computes itself: the hand replay's outputs for the same inputs (the executed O is bit-identical to them),
the hand Program's own records (the compared counts, the residuals each record class must show), and the diff's
machinery on Programs built here. With a checkout (``SIMTC_FLASHMLA_DIR``) and nvcc the kernel itself is compiled
and run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import attrs
import numpy as np
import pytest

from simtc.kernels.flashmla import executed_head64 as ex
from simtc.kernels.flashmla.head64 import head64_program
from simtc.kernels.flashmla.models import model

DATA = Path(__file__).resolve().parents[1] / "data" / "flashmla_head64_executed.json"
CHECKOUT = os.environ.get("SIMTC_FLASHMLA_DIR")
needs_kernel = pytest.mark.skipif(not CHECKOUT or shutil.which("nvcc") is None,
                                  reason="set SIMTC_FLASHMLA_DIR to a FlashMLA checkout (9241ae3, its CUTLASS headers) "
                                         "and put nvcc on PATH: the kernel is compiled from FlashMLA's source, which "
                                         "the repository does not hold")


@pytest.fixture(scope="module")
def data() -> dict:
    return json.loads(DATA.read_text())


def _sha(a) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


# ---- the recording, checked against what CI computes -----------------------------------------------------------
def test_recorded_cases_cover_one_cta_over_1_2_4_blocks_and_a_small_grid(data):
    got = {(c["model"], c["blocks"], c["b"], c["s_q"]) for c in data["cases"]}
    assert {("v32", 1, 1, 1), ("v32", 2, 1, 1), ("v32", 4, 1, 1), ("model1", 1, 1, 1)} <= got
    assert any(c["grid"][0] * c["grid"][1] > 1 and c["b"] > 1 for c in data["cases"])
    assert data["flashmla_commit"].startswith("9241ae3")


def test_recorded_numerics_are_within_the_replays_tolerance_and_o_is_the_replays(data):
    from simtc.kernels.flashmla.replay import LSE_TOL, O_TOL

    for c in data["cases"]:
        assert c["out_sha256"] == c["replay_out_sha256"] and c["out_elements_differing_from_replay"] == 0
        for r in c["rows"]:
            assert r["o_rel_error"] <= O_TOL and r["lse_max_abs_error"] <= LSE_TOL
        # LSE: logf under --use_fast_math is lg2.approx (MUFU) in the kernel: at most a few ulp from the replay's
        assert c["lse_max_abs_difference_from_replay"] <= 1e-6


@pytest.mark.parametrize("case", [("v32", 1, 1, 1), ("model1", 1, 1, 1)])
def test_recorded_out_digest_is_the_replays_computed_here(data, case):
    from simtc.kernels.flashmla.io import make_inputs, replay_inputs

    c = next(c for c in data["cases"] if (c["model"], c["blocks"], c["b"], c["s_q"]) == case)
    inp = make_inputs(c["model"], b=c["b"], s_q=c["s_q"], topk=64 * c["blocks"], seed=c["seed"])
    rep = replay_inputs(inp)
    assert _sha(rep.outputs.out) == c["replay_out_sha256"] == c["out_sha256"]
    assert _sha(rep.outputs.lse) == c["replay_lse_sha256"]


def test_recorded_diff_counts_are_the_hand_programs_own(data):
    """The hand side of every recorded comparison, recomputed from the hand Program; each residual is explained, and
    each kind occurs exactly as often as the hand Program has the records it concerns."""
    for c in data["cases"]:
        d = c["diff"]
        if c["b"] > 1:  # each CTA ran b requests; the hand Program is one
            assert d is None
            continue
        m = model(c["model"])
        rescale = [i in c["rescale_blocks"] for i in range(c["blocks"])]
        hand = head64_program(m, c["blocks"], rescale)
        streams = ex.hand_streams(hand, m)
        assert d["unexplained"] == 0 and not any(k.endswith("UNEXPLAINED") for k in d["by_kind"])
        assert {k.split("|")[-1] for k in d["by_kind"]} <= set(ex.EXPLANATIONS)
        for role in hand.roles:
            n = sum(len(ex._compared(streams[(role.name, w)], {}, warp=w)) for w in role.warps)
            assert d["compared"][role.name]["hand"] == n, (c["model"], c["blocks"], role.name)
        for role in ("raw", "rope"):  # every gather4 differs in coordinates and register, nothing else
            gathers = sum(1 for r in hand.role(role).records if type(r).__name__ == "CpAsyncBulkTensor")
            assert d["by_kind"][f"{role}|field|CpAsyncBulkTensor|coords|tma-coordinates"] == gathers
            assert d["by_kind"][f"{role}|field|CpAsyncBulkTensor|coord_reg|tma-coordinates"] == gathers
        # every gather4 copied the four rows the index warp computes from the request's indices
        assert d["gather4_rows_as_computed_from_the_indices"] == d["gather4_copies"]
        assert d["gather4_copies"]["warp5"] == c["blocks"] * 16
        mma_ops = {k.split("|")[2] for k in d["by_kind"] if k.startswith("mma|")}
        assert mma_ops <= {"CpAsyncBulkTensor", "BarSync"}  # every Cp, Mma, Commit, wait and fence is identical


def test_recorded_engine_comparison(data):
    """Steady state over 12 blocks: the executed kernel's PTX-derived costs (moves priced as ptxas compiles them,
    simtc.ptx.recording.MOVES) within 10 % of the hand Program's SASS counts (docs/kernel.md); no deadlock (each
    warp arrives once at everyone_sync)."""
    e12 = next(e for e in data["engine"] if e["blocks"] == 12)
    x, h = e12["executed"], e12["hand"]
    assert abs(x["steady_cycles_per_block"] / h["steady_cycles_per_block"] - 1) < 0.10
    for e in data["engine"]:
        x, h = e["executed"], e["hand"]
        assert x["cycles"] > 0 and h["cycles"] > 0 and not x["deadlock"]
        rules = {z["rule"] for z in x["hazards"]}
        assert "deadlock" not in rules
        assert "smem-write-after-read" in rules  # FlashMLA's known rowwise_max_buf race, found on the executed kernel
        assert {k["rule"] for k in h["known_races"]} == {"smem-write-after-read"}


# ---- the diff's machinery, on Programs built here ----------------------------------------------------------------
def test_the_hand_program_against_itself_has_no_difference():
    for name in ("v32", "model1"):
        hand = head64_program(name, 3, [False, False, True])
        assert ex.diff_programs(hand, _as_executed(hand, model(name)), m=model(name)) == []


def test_a_changed_descriptor_field_is_found_and_named():
    from simtc.isa.tcgen05 import Mma

    m = model("v32")
    hand = head64_program(m, 2)
    fake = _as_executed(hand, m)
    role = fake.role("warp4")
    i = next(i for i, r in enumerate(role.records) if isinstance(r, Mma))
    bad = attrs.evolve(role.records[i].b_desc, sbo=role.records[i].b_desc.sbo + 16)
    recs = list(role.records)
    recs[i] = attrs.evolve(recs[i], b_desc=bad)
    fake = attrs.evolve(fake, roles=tuple(attrs.evolve(r, records=tuple(recs)) if r.name == "warp4" else r
                                          for r in fake.roles))
    d = ex.diff_programs(hand, fake, m=m)
    assert len(d) == 1 and d[0]["op"] == "Mma" and d[0]["field"] == "b_desc" and d[0]["why"] is None
    assert d[0]["executed_value"]["sbo"] - d[0]["hand_value"]["sbo"] == 16


def test_a_missing_commit_is_found():
    from simtc.isa.tcgen05 import Commit

    m = model("model1")
    hand = head64_program(m, 2)
    fake = _as_executed(hand, m)
    role = fake.role("warp4")
    recs = list(role.records)
    del recs[next(i for i, r in enumerate(recs) if isinstance(r, Commit))]
    fake = attrs.evolve(fake, roles=tuple(attrs.evolve(r, records=tuple(recs)) if r.name == "warp4" else r
                                          for r in fake.roles))
    d = ex.diff_programs(hand, fake, m=m)
    assert [(x["kind"], x["op"]) for x in d] == [("only_hand", "Commit")]


def test_explanations_hold_only_where_their_claim_does():
    gather = {"kind": "field", "op": "CpAsyncBulkTensor", "role": "raw", "field": "coords"}
    assert ex.explain({**gather, "hand_value": [0], "executed_value": [0, 5, 9, -1, 3]}) == "tma-coordinates"
    assert ex.explain({**gather, "hand_value": [32], "executed_value": [0, 5, 9, -1, 3]}) is None
    tile = {**gather, "role": "mma"}
    assert ex.explain({**tile, "hand_value": [8192], "executed_value": [64, 0, 0, 0]}) == "tma-coordinates"
    assert ex.explain({**tile, "hand_value": [8192], "executed_value": [64, 0, 1, 0]}) is None
    # a warp whose paths meet at everyone_sync arrives once (simtc.ptx.recording): an extra BarSync is no notation
    bar = {"kind": "only_executed", "op": "BarSync", "role": "mma", "field": None, "hand_value": None}
    assert ex.explain({**bar, "executed_value": {"op": "BarSync", "id": 12, "threads": 384}}) is None


def test_sched_arrays_are_get_mla_metadata_kernels_layout():
    meta, splits = ex.sched_arrays(2, 128, 1)
    assert meta.shape == (1, 8) and list(meta[0, :7]) == [0, 1, 0, 2, 0, 0, 0]
    assert list(splits) == [0, 1, 2]
    meta, splits = ex.sched_arrays(1, 2048, 4)  # one request split over 4 parts: 4 splits
    assert list(splits) == [0, 4] and meta[:, 5].tolist() == [1, 1, 1, 1]


def _as_executed(hand, m):
    """The hand Program as a recording would present it: one role per warp, framed (setup, teardown) as executed."""
    from simtc.isa.program import Program, Role

    streams = ex.hand_streams(hand, m)
    roles = []
    for role in hand.roles:
        for w in role.warps:
            recs = tuple(r for r in streams[(role.name, w)] if getattr(r, "issuing_warp", None) in (None, w))
            roles.append(Role(f"warp{w}", (w,), recs))
    return Program(hand.name + "-as-executed", tuple(roles), hand.barriers)


# ---- the kernel itself (a FlashMLA checkout and nvcc) ---------------------------------------------------------
@needs_kernel
def test_the_parameter_probe_agrees_with_the_kernels_ptx_parameters():
    from simtc.cuda.executed_sm100 import head64 as run
    from simtc.kernels.flashmla.io import make_inputs

    lau = run.build_launch(CHECKOUT, make_inputs("v32", topk=64, seed=0))
    sizes = [p.size for p in lau.kernel.function.params]
    assert sizes == [len(lau.params), len(lau.tma_params)] == [280, 1408]
    assert lau.shared_mem == model("v32").smem.total


@needs_kernel
@pytest.mark.slow
def test_the_executed_kernel_gives_the_replays_outputs():
    from simtc.cuda.executed_sm100.head64 import run_head64
    from simtc.kernels.flashmla.io import make_inputs, replay_inputs

    inp = make_inputs("v32", topk=128, seed=0)
    out = run_head64(CHECKOUT, inp)
    assert np.array_equal(out.out, replay_inputs(inp).outputs.out)
