"""The engine: barrier state machines, the hazard catalogue, determinism, step-through and snapshots."""

import itertools

import pytest

from simtc.engine.barriers import MBarrierState, NamedBarrierState
from simtc.engine.core import Engine
from simtc.engine.hazards import RULES
from simtc.kernels.hazards import EXPECTED, build, names


# ---- mbarrier (PTX ISA 9.0 §9.7.13.15) ------------------------------------------------------------
def test_fresh_barrier_parity():
    b = MBarrierState("b", count=1)
    assert b.passes(1) and not b.passes(0)          # the "free slot" wait passes at once
    assert b.arrive(1)
    assert b.passes(0) and not b.passes(1)
    assert b.arrive(1)                              # second phase
    assert b.passes(1) and not b.passes(0) and b.phase == 2


def test_phase_needs_arrivals_and_tx():
    b = MBarrierState("b", count=2)
    b.expect_tx(100)
    assert not b.arrive(1)
    assert not b.complete_tx(100)                   # one arrival still pending
    assert b.arrive(1)
    assert b.pending == 2 and b.tx == 0


def test_tx_may_go_negative_before_expect_but_not_after_all_arrivals():
    b = MBarrierState("b", count=1)
    assert not b.complete_tx(64)                    # TMA bytes before expect_tx: legal, tx = -64
    assert b.errors == []
    b.expect_tx(64)
    assert b.arrive(1)
    b2 = MBarrierState("b2", count=1)
    b2.expect_tx(32)
    b2.arrive(1)
    b2.complete_tx(64)
    assert b2.errors and b2.errors[0][0] == "mbarrier-tx-underflow"


def test_over_arrival_recorded():
    b = MBarrierState("b", count=1)
    b.arrive(2)
    assert b.errors[0][0] == "mbarrier-over-arrival"


def test_named_barrier_releases_at_count():
    n = NamedBarrierState(3)
    assert not n.arrive(32, 96) and not n.arrive(32, 96) and n.arrive(32, 96)
    assert n.generation == 1 and n.arrived == 0


# ---- the hazard catalogue -------------------------------------------------------------------------
def test_catalogue_size_and_rules():
    bugs = {n: r for n, r in EXPECTED.items() if r is not None}
    assert len(bugs) >= 10
    assert len(set(bugs.values())) >= 6 and "deadlock" in bugs.values()
    assert all(r in RULES for n, r in bugs.items())
    assert all(f"{n}-fixed" in EXPECTED and EXPECTED[f"{n}-fixed"] is None for n in bugs)
    assert names() == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(n for n, r in EXPECTED.items() if r is not None))
def test_seeded_bug_is_flagged_with_its_rule(name):
    e = Engine(build(name)).run()
    rules = {h.rule for h in e.hazards}
    assert EXPECTED[name] in rules, (name, [str(h) for h in e.hazards])
    for h in e.hazards:
        assert h.ref == RULES[h.rule].ref and h.ref.startswith("PTX ISA")
        assert h.second is not None or h.first is not None or h.rule == "tmem-not-deallocated"


@pytest.mark.parametrize("name", sorted(n for n, r in EXPECTED.items() if r is None))
def test_fixed_twin_is_clean(name):
    e = Engine(build(name)).run()
    assert e.clean, [str(h) for h in e.hazards]
    assert e.deadlock is None and all(a.done for a in e.agents)


def test_hazard_names_both_records():
    e = Engine(build("hazard/ld-before-commit")).run()
    h = next(h for h in e.hazards if h.rule == "tmem-read-before-commit")
    assert h.first[0] == "mma" and h.second[0] == "epilogue"
    prog = build("hazard/ld-before-commit")
    assert type(prog.role("mma").records[h.first[2]]).__name__ == "Mma"
    assert type(prog.role("epilogue").records[h.second[2]]).__name__ == "Ld"


def test_deadlock_names_the_waiters_and_the_missing_arrivals():
    e = Engine(build("hazard/deadlock-missing-arrive")).run()
    d = e.deadlock
    assert d is not None
    assert [(w["role"], w["waits_on"].split()[0]) for w in d["waiting"]] == [("consumer", "ready")]
    assert d["waiting"][0]["barrier"]["pending"] == 1
    assert d["would_arrive"] == {"ready": []}   # nobody in the Program arrives on it
    e2 = Engine(build("hazard/deadlock-named-barrier")).run()
    assert {w["role"] for w in e2.deadlock["waiting"]} == {"a", "b"}


# ---- determinism, step-through, snapshots ---------------------------------------------------------
def test_same_inputs_same_trace():
    p = build("hazard/overwrite-before-ld-done-fixed")
    t1 = Engine(p).run().trace
    t2 = Engine(build("hazard/overwrite-before-ld-done-fixed")).run().trace
    assert t1 == t2 and len(t1) > 50


def test_step_equals_run():
    p = build("hazard/missing-before-fence-fixed")
    full = Engine(p).run()
    e = Engine(p)
    steps = 0
    while not e.finished:
        e.step()
        steps += 1
    assert e.trace == full.trace and e.cycles == full.cycles and steps >= len(full.trace) // 4


def test_run_until_then_snapshot():
    p = build("hazard/ld-before-commit-fixed")
    e = Engine(p).run(until=100)
    assert e.now <= 100 and not e.finished
    s = e.snapshot()
    waits = {(w["role"], w["warp"]): w["waits_on"] for w in s["warps"]}
    assert waits[("epilogue", 0)].startswith("mma_done parity 0")
    assert s["mbarriers"]["mma_done"]["phase"] == 0
    assert s["tmem_allocations"] == {0: 128}
    assert any("tcgen05.mma" in v for v in s["tmem_writers"].values())
    e.run()
    assert e.finished and e.snapshot()["mbarriers"]["mma_done"]["phase"] == 1


def test_snapshot_names_shared_memory_writers_by_byte_range():
    e = Engine(build("hazard/tma-wrong-parity-fixed")).run()   # three TMA loads: A (2 x 8 KiB) and B (2 KiB)
    writers = e.snapshot()["smem_writers"]
    assert writers == {"[0, 8192)": "mma[w4]#3 (cp.async.bulk.tensor)",
                       "[8192, 16384)": "mma[w4]#4 (cp.async.bulk.tensor)",
                       "[16384, 18432)": "mma[w4]#5 (cp.async.bulk.tensor)"}


def test_summary_and_critical_path():
    e = Engine(build("hazard/missing-before-fence-fixed")).run()
    s = e.summary()
    assert s["cycles"] == e.cycles and s["events"] == len(e.trace) and s["hazards"] == []
    assert set(s["per_role"]) == {"epilogue", "mma"}
    assert s["units"]["tensor_pipe"]["busy_cycles"] > 0
    path = e.critical_path()
    tr = e.trace
    assert tr[path[-1]].cycle == e.cycles
    assert all(tr[a].cycle <= tr[b].cycle for a, b in itertools.pairwise(path))
    assert any(tr[i].kind == "complete" for i in path)       # the MMA sits on the critical path


# ---- semantics mode ---------------------------------------------------------------------------------
def test_semantics_mode_same_events_and_same_data_as_the_untimed_run():
    import numpy as np

    from simtc.kernels.flashmla.programs import load_qk, replay_qk, tmem_setup
    from simtc.kernels.registry import build as build_registered
    from simtc.semantics import Cta, execute

    rng = np.random.default_rng(1)
    q = rng.standard_normal((64, 576)).astype(np.float32)
    k = rng.standard_normal((64, 576)).astype(np.float32)
    ref = Cta()
    replay_qk(q, k, cta=ref)
    cta = Cta()
    load_qk(q, k, smem=cta.smem)
    for r in tmem_setup():
        execute(r, cta, warp=0)
    prog = build_registered("flashmla-qk")
    cta.init_barriers(prog)
    sem = Engine(prog, mode="semantics", cta=cta).run()
    timing_only = Engine(prog).run()
    assert sem.clean and sem.semantics_errors == []
    assert sem.trace == timing_only.trace
    for w in range(4):
        assert np.array_equal(cta.regs[w]["p"], ref.regs[w]["p"])


def test_flashmla_qk_is_clean_and_pipe_bound():
    from simtc.kernels.registry import build as build_registered

    e = Engine(build_registered("flashmla-qk")).run()
    assert e.clean
    assert e.units()["tensor_pipe"]["busy_cycles"] > e.cycles // 2
