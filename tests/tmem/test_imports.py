"""The model package stays light: importing simtc.tmem loads neither rich, the renderer nor the CLI."""

import subprocess
import sys


def test_tmem_import_is_model_only():
    code = ("import sys, simtc.tmem\n"
            "print(','.join(m for m in ('rich', 'simtc.render', 'simtc.cli', 'cupy', 'IPython') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""
