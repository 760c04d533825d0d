"""Every seeded bug of the mutation catalogue is caught by the replay; the unmutated kernel is clean."""

import argparse

import pytest

from simtc.errors import SimtcError
from simtc.kernels.flashmla import head64, mutations, replay


def test_catalogue_is_the_head64_hook():
    assert len(mutations.MUTATIONS) >= 8 and head64.MUTATIONS is mutations.MUTATIONS
    with pytest.raises(SimtcError, match="unknown mutation"):
        mutations.mutate(head64.head64_program("v32", 1), "nope")


def test_unmutated_kernel_is_clean():
    r = replay.replay("v32", 3, 0)
    assert r.ok and not r.hazards and r.p_bit_exact


@pytest.mark.parametrize("name", sorted(mutations.CATALOGUE))
def test_every_mutation_is_caught(name):
    m = mutations.CATALOGUE[name]
    prog = head64.head64_program("v32", 3, [False, True, False])
    assert mutations.mutate(prog, name) != prog
    r = replay.replay("v32", 3, 0, transform=lambda p: mutations.mutate(p, name))
    assert not r.ok
    rules = {h["rule"] for h in r.hazards}
    if m.caught_by == "result":
        assert not r.p_bit_exact and r.o_rel_error > 4e-3
    else:
        assert m.caught_by in rules


def test_cli_mutate_exits_1(capsys):
    from simtc.cli import replay as cli

    p = argparse.ArgumentParser()
    cli.register(p.add_subparsers())
    args = p.parse_args(["replay", "flashmla-head64", "--blocks", "2", "--mutate", "exchange-no-pair-barrier"])
    assert args.handler(args) == 1
    assert "caught" in capsys.readouterr().out
    args = p.parse_args(["replay", "flashmla-head64", "--list-mutations"])
    assert args.handler(args) == 0
    out = capsys.readouterr().out
    assert all(n in out for n in mutations.MUTATIONS)


def test_cli_step_and_svg(tmp_path, capsys):
    from simtc.cli import replay as cli

    p = argparse.ArgumentParser()
    cli.register(p.add_subparsers())
    args = p.parse_args(["replay", "flashmla-head64", "--blocks", "1", "--step", "15"])
    assert args.handler(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[15].startswith("step 15 ")  # 15 event lines, then the state after them
    assert any("waits on q_utccp" in x for x in out)
    svg = tmp_path / "t.svg"
    args = p.parse_args(["replay", "flashmla-head64", "--blocks", "1", "--svg", str(svg)])
    assert args.handler(args) == 0 and svg.read_text().startswith("<svg")
