"""The example scripts run and say what they should."""

import os
import re
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).parents[1] / "examples"


def _run(*args, columns=None):
    env = dict(os.environ)
    if columns is not None:
        env["COLUMNS"] = str(columns)
    out = subprocess.run([sys.executable, str(EXAMPLES / "dual_gemm_qk.py"), *args],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_dual_gemm_qk_example():
    text = _run("--width", "140")
    assert "tcgen05.cp.cta_group::1.128x256b [0x00000100], 0x4000404000010000;" in text
    assert "tcgen05.mma.ws.cta_group::1.kind::f16 [0x00000190], [0x00000180]" in text  # RoPE k=0 into P
    assert "bit-exact: True" in text and text.count("bit-exact: True") == 2
    assert "inferred" in text
    # the story: four narrated steps, in order
    steps = [text.index(f"Step {n}.") for n in (1, 2, 3, 4)]
    assert steps == sorted(steps)
    assert "18 tcgen05.cp.128x256b (16 NoPE, 2 RoPE)" in text and "18 tcgen05.mma.ws (2 RoPE, 16 NoPE" in text
    # the sum is claimed only within fp32 accumulation error, with the measured error printed
    flat = " ".join(text.split())
    assert "equal within fp32 accumulation error, not bit for bit" in flat
    err = float(re.search(r"max \|P_lo \+ P_hi - Q·Kᵀ\| = ([0-9.e+-]+)", flat).group(1))
    assert 0 <= err < 1e-3


def test_dual_gemm_qk_follows_the_terminal_width():
    text = _run(columns=80)
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "Step 4." in text and " ".join(text.split()).count("bit-exact: True") == 2


def test_dual_gemm_qk_help_shows_defaults():
    out = subprocess.run([sys.executable, str(EXAMPLES / "dual_gemm_qk.py"), "--help"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0
    assert "(default: 0)" in out.stdout and "(default: the terminal's width" in " ".join(out.stdout.split())
