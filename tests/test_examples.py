"""The example scripts run and say what they should."""

import json
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


def _gemm(*args):
    return subprocess.run([sys.executable, str(EXAMPLES / "tcgen05_gemm.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_tcgen05_gemm_example_d_is_bit_exact():
    out = _gemm()
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "tcgen05-gemm: 3 roles, 103 records" in text
    assert "32 tcgen05.mma" in text and "16 cp.async.bulk.tensor" in text
    assert "vs simtc.numerics.tensor_core_mma: bit-exact: True" in text
    err = float(re.search(r"max \|D - A·Bᵀ\| = ([0-9.e+-]+)", text).group(1))
    assert 0 < err < 1e-3  # close to float64, and not equal to it: fp32 accumulation


def test_tcgen05_gemm_committed_json_is_what_the_script_writes(tmp_path):
    """examples/tcgen05_gemm.json is Program.to_json of the script's Program: regenerate it with
    ``python examples/tcgen05_gemm.py --write-json examples/tcgen05_gemm.json``."""
    from simtc.isa import Program

    path = tmp_path / "gemm.json"
    assert _gemm("--write-json", path).returncode == 0
    committed = (EXAMPLES / "tcgen05_gemm.json").read_text(encoding="utf-8")
    assert path.read_text(encoding="utf-8") == committed
    program = Program.from_json(json.loads(committed))
    assert Program.from_json(program.to_json()) == program and program.name == "tcgen05-gemm"


def test_tcgen05_gemm_variants_print_grouped_reports():
    out = _gemm("--variant", "dropped-wait")
    assert out.returncode == 1 and "257 hazards in 2 group(s)" in out.stdout
    assert out.stdout.count("\nhazard: ") == 2 and "255 more caused by the same" in out.stdout
    out = _gemm("--variant", "missing-fence")
    assert out.returncode == 1 and "8 hazards in 1 group(s)" in out.stdout
    assert "missing synchronisation: tcgen05.fence::after_thread_sync in mma between #" in out.stdout


def test_tcgen05_gemm_help_shows_defaults():
    out = _gemm("--help")
    assert out.returncode == 0 and "(default: 8)" in out.stdout and "--write-json" in out.stdout


def test_cuda_kernels_example_runs_with_simtc_cuda():
    """examples/cuda_kernels.py: the CuPy-API script, run with simtc.cuda (no GPU), equals numpy."""
    out = subprocess.run([sys.executable, str(EXAMPLES / "cuda_kernels.py")], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert "vector_add, n = 1000: c == a + b bit for bit: True" in out.stdout
    assert "block_sum, 4 blocks of 128 threads: per-block sums equal numpy's: True" in out.stdout
