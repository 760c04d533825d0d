"""``simtc tour`` and ``simtc compare``: they run, pass, and fit the terminal width."""

import argparse
import json
import re

import pytest

from simtc.cli import compare, tour


@pytest.fixture(scope="module")
def tour120():
    """The tour's lines at 120 columns for the default 4-block request, and its text with whitespace folded."""
    lines, passed = tour.tour_lines(120, 4)
    assert passed
    return lines, " ".join(" ".join(lines).split())


def _parser(mod):
    p = argparse.ArgumentParser()
    mod.register(p.add_subparsers())
    return p


def test_tour_passes_at_80_columns(capsys):
    args = _parser(tour).parse_args(["tour", "--width", "80"])
    assert args.handler(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith("PASS") and all(len(x) <= 80 for x in out)
    text = " ".join(" ".join(out).split())
    for fact in ("tcgen05.cp", "8,192 B apart", "P_hi", "464 instead of 576", "[ok] P placement and layouts", "350"):
        assert fact in text
    # Q placement as FlashMLA's copies put it (kernel.cuh lines 477-512 at 9241ae3: t=0 s=0, t=0 s=1, RoPE s=0),
    # and the TMEM bar's regions
    for fact in ("columns 256-263: lanes 0-63 hold Q[h][0..15], lanes 64-127 hold Q[h][64..79]",
                 "columns 264-271: lanes 0-63 hold Q[h][16..31], lanes 64-127 hold Q[h][80..95]",
                 "columns 384-391: lanes 0-63 hold Q[h][512..527], lanes 64-127 hold Q[h][544..559]"):
        assert fact in text
    bar = next(x for x in out if x.startswith("|") and "Q" in x)[1:-1]
    assert bar.index("T") > bar.rindex("Q") and bar.rindex("T") < bar.index("P")
    # the exchange's cost names every parameter it rests on, with its label
    from simtc.kernels.flashmla.alternatives import exchange_parameters
    from simtc.kernels.flashmla.head64 import head64_program
    from simtc.kernels.flashmla.replay import replay

    rests = exchange_parameters(head64_program("v32", 4))
    flat = " ".join(text.split())
    # the exchange's cost with its band, the parameters it rests on counted, the band's largest movers named
    m = re.search(r"band (\d+)-(\d+) .*? It rests on (\d+) timing parameters, (\d+) of them measured on the H200", flat)
    assert m and int(m.group(3)) == len(rests) and int(m.group(1)) < int(m.group(2))
    assert 0 < int(m.group(4)) <= len(rests)
    named = re.search(r"the band comes most from (.*?)\.", flat).group(1)
    assert named.count("[") == 3 and all(n.split(" [")[0] in {p["name"] for p in rests} for n in named.split(", "))
    # the throughput leads with the whole kernel, as the replay computes it, and calls nothing an upper bound
    r = replay("v32", 4, 0)
    throughput = text[text.index("Throughput"):]
    assert throughput.index("whole kernel") < throughput.index("steady state")
    assert f"{r.cycles_whole:,} cycles for the 4-block request" in throughput
    assert "upper bound" not in text


def test_tour_lines_narrow():
    lines, passed = tour.tour_lines(60, 2)
    assert passed and all(len(x) <= 60 for x in lines)


def test_compare_json(capsys):
    args = _parser(compare).parse_args(["compare", "flashmla-head64", "--json", "--blocks", "2"])
    assert args.handler(args) == 0
    out = json.loads(capsys.readouterr().out)
    names = {v["name"]: v for v in out["variants"]}
    for key in ("name", "tmem_columns", "smem_bytes", "fits", "mma_per_block", "tensor_pipe_busy_per_block",
                "cycles_per_block", "exchange_cycles_per_block", "why"):
        assert key in names["dual-gemm"]
    assert names["dual-gemm"]["tmem_columns"] == 464 and names["duplicated-q"]["tmem_columns"] == 576
    assert not names["duplicated-q"]["fits"]


def test_tour_and_compare_report_their_progress():
    """A callback hears each of the tour's 9 sections and each of compare's 5 replays (the CLI draws them as a bar
    on a terminal through simtc.cli._progress; off under --json and off the terminal)."""
    from simtc.cli.tour import tour_lines
    from simtc.kernels.flashmla.alternatives import compare as compare_variants

    seen = []
    _, passed = tour_lines(100, 4, progress=lambda *x: seen.append(x))
    assert passed and seen == [("tour", i, 9) for i in range(10)]
    seen.clear()
    compare_variants("v32", 4, 0, progress=lambda *x: seen.append(x))
    assert seen == [("variants", i, 5) for i in range(5)]


def test_tour_names_the_known_race_and_counts_it_apart(tour120):
    """The timeline's hazards are FlashMLA's own known race, said so where they are printed; the checks then say
    'no hazard besides' it, not a bare 'no hazards'."""
    from simtc.kernels.flashmla.replay import replay
    from simtc.kernels.flashmla.story import hazard_lines

    lines, text = tour120
    r = replay("v32", 4, 0)
    assert r.known_races and not r.hazards
    assert f"{len(r.known_races)} of them FlashMLA's own known race" in text
    assert r.known_races[0]["known"]["title"] in text and "Other hazards: none." in text
    assert " ".join(" ".join(hazard_lines(r)).split()) in text          # the one statement, as story gives it
    assert not any(re.match(r"^\d+ hazard\(s\):", x) for x in lines)     # no unlabelled hazard block
    assert "no hazards," not in text and "[ok] no hazard besides FlashMLA's own known race" in text


def _notebook_03_statement():
    """The exchange statement notebook 03 prints: the notebook's own lines that make ``run`` and ``share``,
    executed here (the cell's imports and those two statements, nothing else of the notebook)."""
    import ast
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("_simtc_nb_script_tour", root / "docs" / "scripts" / "notebooks.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    code = "\n\n".join(body for kind, body in script.cells_of(root / "notebooks" / "src" / "03_dual_gemm.py")
                       if kind == "code")
    stmts = ast.parse(code).body
    run = [s for s in stmts if isinstance(s, ast.Assign) and ast.unparse(s.targets[0]) == "run"]
    share = [s for s in stmts if isinstance(s, ast.Assign) and ast.unparse(s.targets[0]) == "share"]
    assert len(run) == 1 and len(share) == 1, "notebook 03 makes one run and one share"
    assert ast.unparse(share[0].value) == "exchange_share(run)"
    printed = [s for s in ast.walk(ast.Module(body=stmts, type_ignores=[])) if isinstance(s, ast.Call)
               and ast.unparse(s.func) == "print" and "share.text()" in ast.unparse(s)]
    assert printed, "notebook 03 prints share.text()"
    # no second figure for the exchange's share: nothing divides by the steady block besides story
    assert "/ with_ex" not in code and "exchange_cycles_per_block / " not in code
    ns: dict = {}
    exec("from simtc.kernels.flashmla.replay import replay\nfrom simtc.kernels.flashmla.story import exchange_share\n"
         + ast.unparse(run[0]) + "\n" + ast.unparse(share[0]), ns)
    return ns["share"]


def test_tour_and_notebook_03_state_the_exchange_cost_with_one_function(tour120):
    """Both print :meth:`ExchangeShare.text` of the same 4-block replay; the fractions name their wholes."""
    from simtc.kernels.flashmla.replay import replay
    from simtc.kernels.flashmla.story import exchange_share

    share = _notebook_03_statement()
    _, text = tour120
    assert share.text() in text
    assert share == exchange_share(replay("v32", 4, 0, keep_engine=True))
    assert "of the steady-state block" in share.text() and "the whole request" in share.text()
    assert "with data (O rescaled in block" in share.text()
    assert 0 < share.steady_share < share.warp_share < 1 and 0 < share.whole_share < share.steady_share


def test_tour_answers_q3_from_the_programs_addresses(tour120):
    from simtc.kernels.flashmla.fragment import qk_a_addresses
    from simtc.kernels.flashmla.head64 import head64_program

    _, text = tour120
    cols = [c for _, _, c in qk_a_addresses(head64_program("v32", 4))]
    assert cols == [384, 392, *range(256, 384, 8)]
    assert "make_fragment_A(partition_shape_A(...))" in text and "tmem_cols::Q" in text
    assert "columns 384 + 8k and 256 + 8k: a step of 8 columns" in text and "Q3: yes" in text
    assert "P is no longer bit-exact" in text and "[ok] A fragment" in text
