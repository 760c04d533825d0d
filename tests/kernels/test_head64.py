"""FlashMLA head64 replayed whole (V32, MODEL1): counts against the kernel's, numerics, hazards."""

import argparse
import json

import numpy as np
import pytest

from simtc.errors import SimtcError
from simtc.kernels.flashmla import head64, models, replay

# per thread per block and per request, as literals: FlashMLA kernel.cuh at 9241ae3 (MMA thread lines 438-581,
# raw producer 597-610, RoPE producer 632-647, WG0 161-294); SASS code sites in tests/data/flashmla_sm100_sass.json
PER_BLOCK = {
    "v32": {"mma": {"tcgen05.mma.ws": 26, "tcgen05.commit": 2}, "raw": {"cp.async.bulk.tensor": 16},
            "rope": {"cp.async.bulk.tensor": 32}},
    "model1": {"mma": {"tcgen05.mma.ws": 24, "tcgen05.commit": 2}, "raw": {"cp.async.bulk.tensor": 16},
               "rope": {"cp.async.bulk.tensor": 16}},
}
SOFTMAX_PER_BLOCK = {"tcgen05.ld": 2, "st.shared": 8 + 4 + 1, "ld.shared": 8 + 1, "bar.sync": 3,
                     "cuda_core:MUFU.EX2": 32, "cuda_core:FADD2": 16 + 16}


@pytest.mark.parametrize("name", ["v32", "model1"])
def test_counts_per_block_are_the_sass_counts(name):
    c = head64.per_block_counts(name)
    for role, want in PER_BLOCK[name].items():
        assert {k: c[role][k] for k in want} == want
    assert {k: c["softmax"][k] for k in SOFTMAX_PER_BLOCK} == SOFTMAX_PER_BLOCK
    deq = 32 if name == "v32" else 28
    assert (c["dequant"]["cuda_core:LDS.64"], c["dequant"]["cuda_core:STS.128"]) == (deq, deq)
    r = head64.per_block_counts(name, rescale=True)["softmax"]
    assert (r["tcgen05.ld"], r["tcgen05.st"], r["cuda_core:FMUL2"], r["cuda_core:MUFU.EX2"]) == (2 + 4, 4, 128, 33)
    req = head64.role_counts(head64.head64_program(name, 2))["mma"]
    n_q = 18 if name == "v32" else 16
    assert req["tcgen05.cp"] == n_q and req["tcgen05.commit"] == 1 + 2 * 2
    assert req["cp.async.bulk.tensor"] == (9 if name == "v32" else 8)  # Q TMA: 8 boxes (+ 1 RoPE box)


def test_plans_and_barriers():
    assert (models.V32.smem.total, models.MODEL1.smem.total) == (232192, 218848)
    assert all(m.smem.total <= 227 * 1024 for m in models.MODELS.values())
    p = head64.head64_program("v32", 1)
    mb = [b for b in p.barriers if b.kind == "mbarrier"]
    assert len(mb) == 25 and {b.name for b in p.barriers if b.kind == "named"} == {
        "wg0_sync", "wg0_warp02_sync", "wg0_warp13_sync", "everyone_sync"}
    assert models.MODEL1.mbarriers["sv_done[1]"][0] == 232176 - 13344
    with pytest.raises(SimtcError, match="block 0 never"):
        head64.head64_program("v32", 2, [True, False])
    with pytest.raises(SimtcError, match="unknown mutation"):
        head64.mutate(p, "nope")


@pytest.mark.parametrize("name,blocks", [("v32", 1), ("v32", 4), ("model1", 4)])
def test_replay_is_exact_and_clean(name, blocks):
    r = replay.replay(name, blocks, seed=0)
    assert r.p_bit_exact and r.o_rel_error <= 4e-3 and r.lse_max_abs_error <= 1e-3
    assert r.tmem_columns == (464 if name == "v32" else 448)
    assert not r.hazards and r.deadlock is None and not r.semantics_errors and r.ok
    if blocks == 4:
        assert r.rescale_blocks == [2]  # the seeded hot tokens force the lazy O rescale there
    per = r.per_block
    assert per["tcgen05.mma.ws"] == (26 if name == "v32" else 24) and per["tcgen05.commit"] == 2


def test_v32_32_blocks():
    r = replay.replay("v32", 32, seed=1)
    assert r.p_bit_exact and r.o_rel_error <= 4e-3 and r.lse_max_abs_error <= 1e-3 and r.ok
    assert r.instructions["tcgen05.mma.ws"] == 26 * 32 and r.tmem_columns == 464 and r.cycles_per_block > 0


def test_the_data_decides_the_rescale():
    """A Program without the rescale records the data needs is refused by the softmax effect."""
    inp = replay.make_inputs("v32", 4, 0)
    assert replay.rescale_blocks(inp, replay.reference_p(inp)) == [False, False, True, False]
    from simtc.engine import Engine
    from simtc.semantics import Cta, execute

    prog = head64.head64_program("v32", 4)  # no rescale records
    cta = Cta()
    cta.init_barriers(prog)
    replay.load_inputs(cta, inp)
    for rec in head64.setup_records("v32"):
        execute(rec, cta, warp=0)
    eng = Engine(prog, mode="semantics", cta=cta).run()
    assert any("rescale" in e["error"] for e in eng.semantics_errors)


def test_cli_json(capsys):
    from simtc.cli import replay as cli

    p = argparse.ArgumentParser()
    cli.register(p.add_subparsers())
    args = p.parse_args(["replay", "flashmla-head64", "--model", "model1", "--blocks", "1", "--json"])
    assert args.handler(args) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("model", "blocks", "instructions", "per_block", "cycles", "cycles_per_block", "tmem_columns",
                "smem_bytes", "o_rel_error", "lse_max_abs_error", "p_bit_exact", "hazards", "deadlock", "events",
                "wall_seconds"):
        assert key in out
    assert out["model"] == "model1" and out["tmem_columns"] == 448 and np.isfinite(out["o_rel_error"])


def test_timing_only_builds_no_data_and_states_the_assumed_rescale(monkeypatch):
    full = replay.replay("v32", 4, seed=0, keep_engine=True)
    assert full.rescale_blocks == [2] and full.rescale_source == "data"

    def no_data(*a, **k):
        raise AssertionError("timing only must not build inputs or compute P")

    monkeypatch.setattr(replay, "make_inputs", no_data)
    monkeypatch.setattr(replay, "reference_p", no_data)
    same = replay.replay("v32", 4, seed=0, timing_only=True, rescale=[2], keep_engine=True)
    none = replay.replay("v32", 4, seed=0, timing_only=True)
    assert same.rescale_source == none.rescale_source == "assumed" and none.rescale_blocks == []
    assert same.o_rel_error is None and same.inputs_seconds == 0.0 and same.ok
    # with the data's pattern assumed, timing only is the semantics run's trace, event for event
    assert same.engine.trace == full.engine.trace and same.instructions == full.instructions
    # no rescale: per thread 4 O chunks x (ld, wait::ld, FMUL2 block, st, wait::st) and 2 fences fewer
    assert none.events < same.events and none.instructions["tcgen05.ld"] == same.instructions["tcgen05.ld"] - 4
    for bad in ([0], [4]):
        with pytest.raises(SimtcError, match=r"block index 1\.\.3"):
            replay.replay("v32", 4, timing_only=True, rescale=bad)


def test_cli_rescale_blocks(capsys):
    from simtc.cli import main

    assert main(["replay", "flashmla-head64", "--blocks", "3", "--timing-only", "--rescale-blocks", "1,2",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rescale_blocks"] == [1, 2] and out["rescale_source"] == "assumed" and out["o_rel_error"] is None
    assert out["inputs_seconds"] == 0.0 and out["check_seconds"] == 0.0 and out["wall_seconds"] > 0
    assert main(["replay", "flashmla-head64", "--rescale-blocks", "1"]) == 2
    assert "needs --timing-only" in capsys.readouterr().err
    assert main(["replay", "flashmla-head64", "--timing-only", "--rescale-blocks", "x"]) == 2
