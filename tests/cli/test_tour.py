"""``simtc tour`` and ``simtc compare``: they run, pass, and fit the terminal width."""

import argparse
import json
import re

from simtc.cli import compare, tour


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
