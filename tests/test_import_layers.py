"""The dependency arrows: model packages never pull in rendering, the CLI or cupy."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

import simtc


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


def _on_disk() -> set[str]:
    """Every importable child of the simtc package directory (directories holding Python files, and modules)."""
    root = Path(simtc.__file__).parent
    pkgs = {p.parent.name for p in root.glob("*/*.py")}
    mods = {p.stem for p in root.glob("*.py")}
    return {n for n in pkgs | mods if not n.startswith("_")}


def test_every_subpackage_on_disk_is_a_lazy_attribute():
    names = _on_disk()
    assert {"errors", "numerics", "smem", "tmem", "mma", "kernels", "render", "hw", "cli"} <= names
    code = ("import sys, simtc\n"
            "print(sorted(n for n in dir(simtc) if f'simtc.{n}' in sys.modules and not n.startswith('_')))\n"
            f"mods = [getattr(simtc, n) for n in {sorted(names)!r}]\n"
            "print([m.__name__ for m in mods])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == "['errors']"  # only the error hierarchy is loaded by `import simtc`
    assert out[1] == str([f"simtc.{n}" for n in sorted(names)])
    assert names <= set(dir(simtc)) and names <= set(simtc.__all__)


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        simtc.nonexistent  # noqa: B018


def test_docstring_lists_every_subpackage():
    listed = set(re.findall(r"``simtc\.(\w+)``", simtc.__doc__))
    assert listed == _on_disk()


def test_cycle_level_claim_is_backed_by_the_engine():
    """The package calls itself cycle-level only because the engine and its labelled timing model exist."""
    from simtc.engine import timing

    pyproject = (Path(simtc.__file__).parent.parent / "pyproject.toml").read_text()
    description = re.search(r'^description = "(.*)"$', pyproject, re.MULTILINE).group(1)
    for text in (simtc.__doc__, description):
        assert "cycle-level" in text.lower() and "bit-exact" in text
    labels = {p.label for table in timing.PARAMETERS.values() for p in table.values()}
    assert labels <= {"measured", "documented", "derived", "assumed"} and "derived" in labels
