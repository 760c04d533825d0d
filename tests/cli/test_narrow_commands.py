"""At COLUMNS=80 the newer commands' output is never cut: no rich ellipsis, no line wider than the terminal."""

import pytest

from simtc.cli import main


@pytest.mark.parametrize("argv", [
    ["program", "flashmla-qk"],
    ["program", "hazard/ld-before-commit"],
    ["simulate", "flashmla-qk"],
    ["simulate", "hazard/tx-underflow"],
    ["timing", "mma", "--arch", "sm100", "--m", "64", "--n", "128", "--operands", "TS", "--ws"],
    ["replay", "flashmla-head64", "--blocks", "1"],
    ["replay", "flashmla-head64", "--list-mutations"],
    ["compare", "flashmla-head64", "--blocks", "2"],
    ["predict", "flashmla-head64", "--b", "4", "--s-q", "1", "--topk", "128", "--no-band"],
    ["timing", "sensitivity", "flashmla-qk", "--top", "3"],
    ["timing", "params", "--arch", "sm90", "--label", "derived"],
], ids=lambda a: " ".join(a[:2]))
def test_output_fits_80_columns(argv, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    main(argv)
    out = capsys.readouterr().out
    assert out.strip()
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) <= 80
