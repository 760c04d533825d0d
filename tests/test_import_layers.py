"""The dependency arrows: model packages never pull in rendering, the CLI or cupy."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["simtc", "simtc.smem", "simtc.numerics", "simtc.errors", "simtc.tmem", "simtc.mma"])
def test_model_imports_stay_light(module):
    code = (f"import sys, {module}\n"
            "bad = [m for m in ('rich', 'simtc.render', 'simtc.cli', 'cupy', 'IPython') if m in sys.modules]\n"
            "print(','.join(bad))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_import_simtc_does_not_load_numpy():
    code = "import sys, simtc\nprint('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
