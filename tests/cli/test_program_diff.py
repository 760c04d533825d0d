"""``simtc program diff flashmla-head64 --executed``: the hand Program against FlashMLA's compiled kernel.

Usage errors are checked everywhere; the diff itself needs a FlashMLA checkout (``SIMTC_FLASHMLA_DIR``) and nvcc.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from simtc.cli import main

CHECKOUT = os.environ.get("SIMTC_FLASHMLA_DIR")


@pytest.mark.parametrize("argv, needle", [
    (["program", "diff", "flashmla-head64"], "needs --executed"),
    (["program", "diff", "flashmla-qk", "--executed"], "only flashmla-head64"),
    (["program", "diff", "--executed"], "only flashmla-head64"),
    (["program", "diff", "flashmla-head64-v32", "--executed", "--model", "model1"], "contradicts"),
    (["program", "diff", "flashmla-head64", "--executed", "--ptx"], "no --ptx"),
    (["program", "flashmla-head64", "--executed"], "belong to 'simtc program diff"),
    (["program", "flashmla-head64", "flashmla-qk"], "belong to 'simtc program diff"),
])
def test_usage_errors_are_one_line(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("simtc: error:") and needle in err[0] and "[rule:" in err[0]


def test_without_a_checkout_it_says_how_to_give_one(monkeypatch, capsys):
    monkeypatch.delenv("SIMTC_FLASHMLA_DIR", raising=False)
    assert main(["program", "diff", "flashmla-head64", "--executed", "--blocks", "1"]) != 0
    err = capsys.readouterr().err
    assert "--flashmla DIR" in err and "SIMTC_FLASHMLA_DIR" in err


def test_the_plain_listing_is_unchanged(capsys):
    assert main(["program", "flashmla-head64", "--blocks", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "flashmla-head64-v32"


@pytest.mark.skipif(not CHECKOUT or shutil.which("nvcc") is None,
                    reason="set SIMTC_FLASHMLA_DIR to a FlashMLA checkout (9241ae3) and put nvcc on PATH")
@pytest.mark.slow
def test_the_diff_of_one_block_is_all_explained(capsys):
    assert main(["program", "diff", "flashmla-head64", "--executed", "--blocks", "1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["differences"] and all(x["why"] for x in d["differences"])
    # every warp arrives once at the per-request everyone_sync, its diverged warps 4-6 too: no extra bar.sync
    assert not any(x["op"] in ("BarSync", "BarArrive") for x in d["differences"])
