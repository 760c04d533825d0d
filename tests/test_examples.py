"""The example scripts run and say what they should."""

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).parents[1] / "examples"


def test_dual_gemm_qk_example():
    out = subprocess.run([sys.executable, str(EXAMPLES / "dual_gemm_qk.py"), "--width", "140"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "tcgen05.cp.cta_group::1.128x256b [0x100], 0x4000404000010000" in text
    assert "tcgen05.mma.ws.cta_group::1.kind::f16 [0x190], [0x180]" in text  # RoPE k=0 into P
    assert "bit-exact: True" in text and text.count("bit-exact: True") == 2
    assert "inferred" in text
