"""``simtc run flashmla-head64``: FlashMLA's SM100 head64 kernel compiled from a checkout and executed, its outputs
in the replay's format. Usage errors run everywhere; the live run needs SIMTC_FLASHMLA_DIR (and nvcc) and checks the
outputs against the digests recorded in tests/data/flashmla_head64_executed.json."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from simtc.cli import main

RESULTS = Path(__file__).parents[1] / "data" / "flashmla_head64_executed.json"
CHECKOUT = os.environ.get("SIMTC_FLASHMLA_DIR")


@pytest.mark.parametrize("argv, says", [
    (["flashmla-head64", "--kernel", "k"], "--kernel: not for flashmla-head64"),
    (["flashmla-head64", "--timing"], "--timing: not for flashmla-head64"),
    (["flashmla-head64", "--mufu-ulps", "1"], "--mufu-ulps: not for flashmla-head64"),
    (["flashmla-head64", "--blocks", "0"], "--blocks is 1 ... 64"),
    (["flashmla-sm90", "--blocks", "2", "--flashmla", "/nonexistent"], "--blocks: not for flashmla-sm90"),
])
def test_usage_errors_are_one_line(argv, says, capsys, monkeypatch):
    monkeypatch.delenv("SIMTC_FLASHMLA_DIR", raising=False)
    assert main(["run", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("simtc: error:") and says in err[0] and "[rule:" in err[0]


def test_without_a_checkout_it_says_how_to_give_one(capsys, monkeypatch):
    monkeypatch.delenv("SIMTC_FLASHMLA_DIR", raising=False)
    assert main(["run", "flashmla-head64"]) == 2
    assert "--flashmla DIR or $SIMTC_FLASHMLA_DIR" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(not CHECKOUT, reason="set SIMTC_FLASHMLA_DIR to a FlashMLA checkout (9241ae3) with its CUTLASS "
                                        "headers to compile and execute FlashMLA's head64 kernel")
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="compiling FlashMLA's kernel to PTX needs nvcc")
def test_one_block_executes_to_the_recorded_outputs(tmp_path, capsys):
    out = tmp_path / "o.npz"
    assert main(["run", "flashmla-head64", "--flashmla", CHECKOUT, "--blocks", "1", "--save-outputs", str(out),
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    case = next(c for c in json.loads(RESULTS.read_text())["cases"]
                if c["model"] == "v32" and c["blocks"] == 1 and c["b"] == 1 and c["seed"] == 0)
    assert (got["out_sha256"], got["lse_sha256"]) == (case["out_sha256"], case["lse_sha256"])
    assert got["thread_instructions"] == case["thread_instructions"] and out.exists()
