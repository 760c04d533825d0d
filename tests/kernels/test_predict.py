"""FlashMLA's scheduler (ported) and whole-call predictions."""

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simtc.kernels.flashmla.predict import predict
from simtc.kernels.flashmla.schedule import FIXED_OVERHEAD_BLOCKS, num_sm_parts, sched_meta


@settings(max_examples=200, deadline=None)
@given(b=st.integers(1, 300), blocks=st.integers(1, 300), parts=st.integers(1, 160),
       lengths=st.lists(st.integers(0, 300 * 64), min_size=300, max_size=300), varlen=st.booleans())
def test_the_schedule_covers_every_block_once(b, blocks, parts, lengths, varlen):
    topk = 64 * blocks
    tl = [min(x, topk) for x in lengths[:b]] if varlen else None
    nblk = [max((max(t, 1) - 1) // 64 + 1, 1) for t in tl] if varlen else [blocks] * b
    pm = sched_meta(b, topk, parts, topk_length=tl)
    assert len(pm) == parts
    seen = {r: [] for r in range(b)}
    for p in pm:
        for s in p.segments(nblk):
            seen[s.req].append((s.begin, s.end, s.split))
    total = sum(n + FIXED_OVERHEAD_BLOCKS for n in nblk)
    payload = -(-total // parts) + FIXED_OVERHEAD_BLOCKS
    for r, segs in seen.items():
        segs.sort()
        assert segs[0][0] == 0 and segs[-1][1] == nblk[r]                       # from the first to the last block
        assert all(a[1] == c[0] for a, c in itertools.pairwise(segs))           # no gap, no overlap
        assert all(split == (len(segs) > 1) for _, _, split in segs)            # split exactly when shared
    for p in pm:  # no part takes more than its payload (blocks + the overhead of each request it starts)
        assert p.blocks(nblk) <= payload


def test_num_sm_parts_is_get_meta():
    assert [num_sm_parts("sm90", 132, s) for s in (1, 2, 4, 3)] == [132, 66, 33, 44]
    assert [num_sm_parts("head64", 148, s) for s in (1, 2, 4)] == [148, 74, 37]


@pytest.fixture(scope="module")
def head64_peak():
    return predict("flashmla-head64", "v32", 148, 2, 16384)


def test_prediction_keys_and_arithmetic(head64_peak):
    r = head64_peak
    for k in ("seconds", "tflops", "seconds_low", "seconds_high", "tflops_low", "tflops_high", "cycles_per_block",
              "sm_parts", "waves", "sm_clock_ghz"):
        assert k in r
    assert set(r["utilization"]) == {"issue", "tensor_pipe", "l1tex", "dram"}
    assert all(0 < v <= 1 for v in r["utilization"].values())
    assert r["flops"] == 2 * 64 * 148 * 2 * 16384 * (576 + 512)
    assert r["tflops"] == pytest.approx(r["flops"] / r["seconds"] / 1e12)
    assert r["seconds_low"] < r["seconds"] < r["seconds_high"]
    assert r["tflops_low"] < r["tflops"] < r["tflops_high"]
    assert r["sm_parts"] == 74 and r["waves"] == 1 and r["sm_clock_ghz"] == 1.965
    parts = r["parts"]
    assert r["seconds"] == pytest.approx(parts["sched_s"] + parts["splitkv_s"] + parts["combine_s"])
    assert r["band_rests_on"] and all(x["label"] in ("assumed", "derived") for x in r["band_rests_on"])


def test_more_work_takes_longer_and_a_bigger_batch_runs_faster_per_flop():
    small = predict("flashmla-head64", "v32", 8, 1, 2048, band=False)
    big = predict("flashmla-head64", "v32", 148, 1, 2048, band=False)
    assert big["seconds"] > small["seconds"] and big["tflops"] > small["tflops"]


def test_cli_json(capsys):
    from simtc.cli import main

    assert main(["predict", "flashmla-head64", "--model", "v32", "--b", "148", "--s-q", "2", "--topk", "16384",
                 "--json", "--no-band"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["kernel"] == "flashmla-head64" and d["tflops"] > 0 and "seconds_low" not in d


def test_s_k_counts_a_batchs_repeated_rows_once(capsys):
    """Two queries of a batch drawing 4,096 of 8,192 tokens each share a quarter of their rows: the DRAM
    utilization's KV part is 3/4 of the no-repeat figure; the time does not change (every row is charged to HBM)."""
    from simtc.cli import main
    from simtc.kernels.flashmla.predict import dram_fraction

    assert dram_fraction(2, 16384, 32768) == 0.75 and dram_fraction(1, 2048, 4096) == 1.0
    a = predict("flashmla-sm90", "v32", 8, 2, 4096, band=False)
    b = predict("flashmla-sm90", "v32", 8, 2, 4096, s_k=8192, band=False)
    assert b["seconds"] == a["seconds"] and b["s_k"] == 8192 and a["s_k"] is None
    # the KV rows count 3/4; each request's Q tile (read once, 72 KiB of the ~6 MB) does not repeat
    assert a["utilization"]["dram"] * 0.75 < b["utilization"]["dram"] < a["utilization"]["dram"] * 0.77
    assert main(["predict", "flashmla-sm90", "--b", "8", "--s-q", "2", "--topk", "4096", "--s-k", "8192",
                 "--no-band", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dram_fraction"] == 0.75


@pytest.mark.parametrize("argv", [["--b", "0"], ["--topk", "100"], ["--s-q", "0"], ["--s-k", "64"],
                                  ["--s-k", "x"]])
def test_cli_refuses_bad_shapes(argv, capsys):
    from simtc.cli import main

    base = {"--b": "4", "--s-q": "1", "--topk": "128"}
    base.update(dict(zip(argv[::2], argv[1::2], strict=True)))
    rc = main(["predict", "flashmla-head64", *[x for kv in base.items() for x in kv]])
    assert rc == 2


def test_the_band_reports_its_progress_and_keeps_its_answer():
    from simtc.engine.parameters import Timing
    from simtc.engine.sensitivity import band_factors

    seen = []
    a = predict("flashmla-sm90", "v32", 4, 1, 512)
    b = predict("flashmla-sm90", "v32", 4, 1, 512, progress=lambda *x: seen.append(x))
    n = len(band_factors(Timing("sm90")))
    assert seen == [("band", i, n) for i in range(n)] and n > 0
    assert (a["seconds_low"], a["seconds_high"]) == (b["seconds_low"], b["seconds_high"])
