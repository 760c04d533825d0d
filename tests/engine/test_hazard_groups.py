"""Hazards grouped by root cause (simtc.engine.hazard_groups): the missing wait or fence, from the checker's data."""

import importlib.util
import sys
from pathlib import Path

import pytest

from simtc.engine import Engine
from simtc.engine.hazard_groups import group_hazards
from simtc.kernels import hazards as catalogue

EXAMPLE = Path(__file__).parents[2] / "examples" / "tcgen05_gemm.py"


@pytest.fixture(scope="module")
def gemm():
    spec = importlib.util.spec_from_file_location("tcgen05_gemm_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    yield mod
    del sys.modules[spec.name]


def _run(program):
    eng = Engine(program)
    eng.run()
    return eng, group_hazards(eng.hazards, eng.checker)


def test_the_dropped_wait_gives_257_hazards_and_two_root_causes(gemm):
    eng, groups = _run(gemm.gemm_program(variant="dropped-wait"))
    assert len(eng.hazards) == 257
    assert [(g.rule, g.roles, g.count) for g in groups] == [
        ("tmem-overwrite-in-flight", ("epilogue", "mma"), 256), ("tmem-dealloc-in-flight", ("mma", "mma"), 1)]
    first = groups[0].missing
    # the epilogue's tcgen05.ld ran ahead of the MMAs: it should have waited on what carries their completion,
    # and the barrier the MMA warp's last commit lands on is waited by no warp (the dropped wait)
    assert (first.kind, first.role, first.of_role) == ("wait", "epilogue", "mma")
    assert "tmem_full" in first.barriers and "tmem_full phase 0" in first.unwaited
    assert sorted(i for g in groups for i in g.indices) == list(range(257))  # a partition of the full list
    lines = [line for g in groups for line in g.lines()]
    assert len(lines) == 5 and "255 more caused by the same" in lines[2]


def test_the_missing_fence_names_the_wait_it_should_follow(gemm):
    program = gemm.gemm_program(variant="missing-fence")
    eng, groups = _run(program)
    assert len(eng.hazards) == 8 and len(groups) == 1
    m = groups[0].missing
    wait = program.role("mma").records[m.after]
    assert (m.kind, m.role, m.before) == ("tcgen05.fence::after_thread_sync", "mma", m.after + 1)
    assert wait.op == "mbarrier.try_wait" and wait.bar == f"full[{gemm.BUG_BLOCK % gemm.STAGES}]"
    assert m.text().startswith(f"tcgen05.fence::after_thread_sync in mma between #{m.after} (mbarrier.try_wait")


def test_the_correct_gemm_has_no_group(gemm):
    eng, groups = _run(gemm.gemm_program())
    assert eng.clean and groups == []


def test_the_checker_knows_where_each_warp_learned_a_completion(gemm):
    """The producer's first TMA load reaches the MMA warp through full[0], and the epilogue only through the MMA
    warp's later commit to tmem_full (relayed: the MMA warp learned it by its wait), and the producer itself through
    empty[0] (the MMA warp's commit releasing the slot); the load's own complete_tx lands on full[0] phase 0."""
    program = gemm.gemm_program()
    eng = Engine(program)
    eng.run()
    idx = {w.role: w.idx for w in eng.warps if w.warp in (0, 4, 5)}
    load = next(i for i, r in enumerate(program.role("producer").records) if r.op == "cp.async.bulk.tensor")
    got = eng.checker.learned(idx["producer"], load)
    mma_wait = next(i for i, r in enumerate(program.role("mma").records) if getattr(r, "bar", "") == "full[0]")
    assert (got[idx["mma"]].record, got[idx["mma"]].barrier) == (mma_wait, "full[0]")
    assert got[idx["epilogue"]].barrier == "tmem_full"
    empty0 = next(i for i, r in enumerate(program.role("producer").records) if getattr(r, "bar", "") == "empty[0]")
    assert (got[idx["producer"]].record, got[idx["producer"]].barrier) == (empty0, "empty[0]")
    first = eng.checker.carried(idx["producer"], load)[0]
    assert (first.record, first.barrier, first.phase) == (load, "full[0]", 0)


@pytest.mark.parametrize("name", ["hazard/ld-before-commit", "hazard/mma-after-tma-no-fence",
                                  "hazard/smem-overwrite-in-flight", "hazard/over-arrival"])
def test_catalogue_bugs_group_without_losing_a_hazard(name):
    eng, groups = _run(catalogue.build(name))
    assert eng.hazards and sum(g.count for g in groups) == len(eng.hazards)
    assert catalogue.EXPECTED[name] in {g.rule for g in groups}
    assert all(g.to_json()["first"] == g.hazards[0].to_json() for g in groups)


def test_the_catalogue_ld_before_commit_names_the_wait_on_mma_done():
    _eng, groups = _run(catalogue.build("hazard/ld-before-commit"))
    m = next(g for g in groups if g.rule == "tmem-read-before-commit").missing
    assert (m.kind, m.role, m.of_role, m.barriers) == ("wait", "epilogue", "mma", ("mma_done",))


def test_without_the_channels_hazards_group_by_rule_and_roles():
    eng, _ = _run(catalogue.build("hazard/ld-before-commit"))
    groups = group_hazards(eng.hazards)
    assert sum(g.count for g in groups) == len(eng.hazards)
    assert all(g.missing.kind == "rule" for g in groups)


def test_a_named_barrier_release_carries_only_its_own_arrivals():
    """Two warp pairs share bar 3: the writers release each other, then the readers do. A release is not a phase
    of a counter that the next one includes: the readers never learn of the writes, the cause is the wait."""
    _eng, groups = _run(catalogue.build("hazard/named-shared-id"))
    assert {(g.missing.kind, g.missing.role, g.missing.of_role, g.missing.barriers) for g in groups} == {
        ("wait", "reader0", "writer0", ("bar 3",)), ("wait", "reader1", "writer1", ("bar 3",))}


def test_every_catalogue_cause_agrees_with_the_checker():
    """An ``order`` cause (the pair is ordered, yet flagged) would mean the grouping and the checker disagree on
    what happens before what; with the checker's own knowledge no catalogue bug gives one."""
    kinds = {g.missing.kind for name in catalogue.BUGS for g in _run(catalogue.build(name))[1]}
    assert "order" not in kinds and "wait" in kinds and "tcgen05.fence::after_thread_sync" in kinds
