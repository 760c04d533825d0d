"""The hazard catalogue (simtc.kernels.hazards) as a whole: every seeded bug flagged with its rule (or by a deadlock)
under 1 and 16 schedules, every correct twin and every tricky correct program clean; every entry cites a PTX
section, round-trips through the Program JSON format and runs from a JSON file and by name through the CLI.
"""

from __future__ import annotations

import json
import re

import pytest

from simtc.engine.hazards import RULES
from simtc.engine.schedules import explore
from simtc.isa.program import Program
from simtc.kernels.hazards import BUGS, CORRECT, EXPECTED, REFS, REGISTRY_ENTRIES, WHAT, build, names

BUG_NAMES = sorted(BUGS)
CLEAN_NAMES = sorted(n for n in EXPECTED if EXPECTED[n] is None)
_PTX_REF = re.compile(r"^PTX ISA 9\.0 §9\.7\.\d+(\.\d+)*")


def _shows(run: dict, rule: str) -> bool:
    return rule in run["rules"] or (rule == "deadlock" and run["deadlock"])


# ---- the catalogue's shape --------------------------------------------------------------------------------------
def test_the_catalogue_has_at_least_30_bugs_each_with_a_twin_and_tricky_correct_programs():
    assert len(BUG_NAMES) >= 30
    assert all(EXPECTED[f"{n}-fixed"] is None for n in BUG_NAMES)
    assert set(EXPECTED) == {*BUG_NAMES, *(f"{n}-fixed" for n in BUG_NAMES), *CORRECT} == set(names())
    assert len(CORRECT) >= 7 and all(n.startswith("hazard/ok-") and EXPECTED[n] is None for n in CORRECT)
    # every class of the catalogue is there: TMEM, shared memory, mbarriers, named barriers, deadlocks
    rules = {EXPECTED[n] for n in BUG_NAMES}
    assert {"tmem-read-before-commit", "tmem-dealloc-in-flight", "smem-write-after-write", "smem-write-after-read",
            "mbarrier-wrong-parity", "mbarrier-uninitialized", "named-barrier-count-mismatch", "deadlock"} <= rules


@pytest.mark.parametrize("name", names())
def test_every_entry_cites_a_ptx_section_and_says_what_it_shows(name):
    ref = REFS[name]
    assert _PTX_REF.match(ref), ref
    base = name.removesuffix("-fixed")
    what = BUGS.get(base) or WHAT[name]
    assert len(what) > 20
    desc = REGISTRY_ENTRIES[name][0]
    assert ref in desc and (what in desc or name.endswith("-fixed"))
    assert ref in build(name).description       # the citation travels with the Program (and its JSON)


@pytest.mark.parametrize("rule", sorted({r for r in EXPECTED.values() if r is not None}))
def test_every_expected_rule_is_a_checker_rule(rule):
    assert rule in RULES and RULES[rule].ref.startswith("PTX ISA")


# ---- bugs flagged, twins and correct programs clean, under 1 and 16 schedules ------------------------------------
@pytest.mark.parametrize("name", BUG_NAMES)
def test_each_bug_is_flagged_with_its_rule_under_1_and_16_schedules(name):
    rule = EXPECTED[name]
    prog = build(name)
    one = explore(prog, 1)
    assert _shows(one.runs[0], rule), (name, one.runs[0])
    many = explore(prog, 16)
    assert [r["seed"] for r in many.runs] == [None, *range(1, 16)]
    assert all(_shows(r, rule) for r in many.runs), (name, [r for r in many.runs if not _shows(r, rule)])
    assert many.first_failing == many.runs[0]


@pytest.mark.parametrize("name", CLEAN_NAMES)
def test_each_twin_and_correct_program_is_clean_under_1_and_16_schedules(name):
    prog = build(name)
    assert explore(prog, 1).first_failing is None
    report = explore(prog, 16)
    assert report.first_failing is None, (name, report.first_failing)


def test_a_bug_and_its_twin_differ_only_in_the_records_that_make_the_bug():
    """A twin is the same scene: the same roles on the same warps, and a handful of records added, removed or moved
    (counted as a multiset per role: a record moved within its role counts 0, so the order must differ then)."""
    from collections import Counter

    for name in BUG_NAMES:
        bug, fixed = build(name), build(f"{name}-fixed")
        assert [(r.name, r.warps) for r in bug.roles] == [(r.name, r.warps) for r in fixed.roles], name
        changed = 0
        for a, b in zip(bug.roles, fixed.roles, strict=True):
            ca, cb = Counter(a.records), Counter(b.records)
            changed += sum((ca - cb).values()) + sum((cb - ca).values())
        changed += len(set(bug.barriers) ^ set(fixed.barriers))
        assert changed <= 8 and (bug.roles, bug.barriers) != (fixed.roles, fixed.barriers), (name, changed)


# ---- JSON round trip, and the command line --------------------------------------------------------------------
def _simulate(capsys, *argv) -> tuple[int, dict]:
    from simtc.cli import main

    rc = main(["simulate", *argv, "--schedules", "16", "--json"])
    return rc, json.loads(capsys.readouterr().out)


def _verdict_ok(name: str, rc: int, report: dict) -> bool:
    rule = EXPECTED[name]
    if rule is None:
        return rc == 0 and report["first_failing"] is None
    return rc == 1 and all(_shows(r, rule) for r in report["runs"])


@pytest.mark.parametrize("name", names())
def test_each_entry_round_trips_through_a_json_file_and_simulates_from_it(name, tmp_path, capsys):
    prog = build(name)
    path = tmp_path / f"{name.replace('/', '_')}.json"
    path.write_text(json.dumps(prog.to_json(), indent=1))
    again = Program.from_json(json.loads(path.read_text()))
    assert again == prog and again.to_json() == prog.to_json()
    rc, report = _simulate(capsys, str(path))
    assert report["program"] == name and report["schedules"] == 16
    assert _verdict_ok(name, rc, report), (name, rc, report["first_failing"])


_SAMPLE = ["hazard/ld-before-commit", "hazard/ld-before-commit-fixed", "hazard/dealloc-ld-in-flight",
           "hazard/smem-war-tma-refill", "hazard/tma-store-before-barrier", "hazard/ring-parity-alias",
           "hazard/named-shared-id", "hazard/deadlock-named-barrier", "hazard/ok-relay-bar-sync",
           "hazard/ok-cp-mma-cross-thread", "hazard/ok-tma-store-two-warps"]


@pytest.mark.parametrize("name", _SAMPLE)
def test_simulate_by_name_under_16_schedules(name, capsys):
    rc, report = _simulate(capsys, name)
    assert _verdict_ok(name, rc, report), (name, rc, report["first_failing"])


def test_program_list_shows_every_entry_with_its_ptx_section(capsys):
    from simtc.cli import main

    assert main(["program", "--list", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    for name in names():
        assert REFS[name] in listing[name], name
    for name in BUG_NAMES:
        assert listing[name].startswith("hazard catalogue, seeded bug: ") and EXPECTED[name] in listing[name]


def test_the_docs_tables_list_every_entry():
    """The engine page's generated tables (docs/scripts/hooks.py): every bug with its rule, section and twin; every
    tricky correct program with its section."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "docs" / "scripts" / "hooks.py"
    spec = importlib.util.spec_from_file_location("_simtc_docs_hooks_catalogue", path)
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    bugs, correct = hooks.hazard_catalogue_table(), hooks.hazard_correct_table()
    for name in BUG_NAMES:
        row = next(line for line in bugs.splitlines() if line.startswith(f"| `{name}` |"))
        assert f"`{EXPECTED[name]}`" in row and f"`{name}-fixed`" in row and REFS[name] in row
    for name in CORRECT:
        row = next(line for line in correct.splitlines() if line.startswith(f"| `{name}` |"))
        assert REFS[name] in row
