"""More than one schedule (simtc.engine.schedules): the hazard catalogue under 1 and 16 schedules, reproducible
seeds, and the command line."""

from __future__ import annotations

import json

import pytest

from simtc.engine.parameters import Timing
from simtc.engine.schedules import explore, perturbed
from simtc.kernels.hazards import EXPECTED, build


@pytest.mark.parametrize("n", [1, 16])
def test_the_catalogue_under_many_schedules(n):
    """Every seeded bug flagged with its rule in some schedule, every twin clean in all of them."""
    for name, rule in sorted(EXPECTED.items()):
        r = explore(build(name), n)
        if rule is None:
            assert r.first_failing is None, (name, r.first_failing)
        else:
            assert any(rule in run["rules"] or (rule == "deadlock" and run["deadlock"]) for run in r.runs), name


def test_schedules_move_the_timing_and_reproduce_from_their_seed():
    base = Timing("sm100")
    a, b = perturbed(base, 7), perturbed(base, 7)
    assert a == b and a != perturbed(base, 8)
    assert all(0.5 <= a[n] / base[n] <= 2.0 or isinstance(base[n], int) for n in base.table)
    prog = build("hazard/ld-before-commit-fixed")
    r1, r2 = explore(prog, 6, 3), explore(prog, 6, 3)
    assert r1 == r2 and len({run["cycles"] for run in r1.runs}) > 1       # the runs differ in time, not in verdict
    assert [run["seed"] for run in r1.runs] == [None, 4, 5, 6, 7, 8]


def test_the_command_line(capsys):
    from simtc.cli import main

    assert main(["simulate", "hazard/ld-before-commit-fixed", "--schedules", "8", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["schedules"] == 8 and d["first_failing"] is None
    assert main(["simulate", "hazard/ld-before-commit", "--schedules", "4"]) == 1
    assert "tmem-read-before-commit" in capsys.readouterr().out
    for argv in (["--schedules", "0"], ["--schedules", "2", "--step"], ["--schedules", "2", "--until", "10"]):
        assert main(["simulate", "flashmla-qk", *argv]) == 2


def test_replay_under_schedules(capsys):
    """The head64 kernel is clean under 8 schedules; a seeded bug of its mutation catalogue is caught, and the JSON
    names the first schedule that shows it."""
    from simtc.cli import main

    assert main(["replay", "flashmla-head64", "--schedules", "8", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["schedules"] == 8 and d["first_failing"] is None and d["blocks"] == 4
    assert main(["replay", "flashmla-head64", "--schedules", "4", "--mutate", "phase-off-by-one", "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["mutation"] == "phase-off-by-one" and d["first_failing"]["rules"]
    for argv in (["--step"], ["--svg", "x.svg"], ["--schedules", "0"]):
        assert main(["replay", "flashmla-head64", "--schedules", "2", *argv]) == 2
