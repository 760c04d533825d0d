"""The import layers of simtc, enforced two ways.

1. Statically (AST): every module-level ``import``/``from ... import`` of every module (including
   ``if TYPE_CHECKING:`` blocks) only names packages at or below the importing package's layer.
   Imports inside functions are allowed to reach up (a model's ``__rich__`` imports its view).
2. At import time (a fresh interpreter per package): importing a package loads no package above
   it, and no model package loads rich or cupy.

Layers, bottom to top: errors; numerics; smem; tmem (isa sits beside them: errors plus the pure
value/geometry modules of smem, tmem and numerics); mma; semantics; engine; kernels; render; hw;
cli. The top package ``simtc`` loads nothing heavy.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "simtc"

ORDER = ("errors", "numerics", "smem", "tmem", "isa", "mma", "semantics", "engine", "kernels", "render", "hw", "cli")
"""Packages from the bottom layer to the top one."""

ISA_VALUE_MODULES = frozenset({
    "simtc.smem.desc", "simtc.smem.swizzle", "simtc.smem.layout", "simtc.smem.read", "simtc.tmem.address",
    "simtc.tmem.layouts", "simtc.tmem.ldst", "simtc.tmem.cp", "simtc.numerics.formats",
})
"""What ``simtc.isa`` may use besides ``simtc.errors``: pure values and geometry, no memory model."""


def _below(pkg: str) -> set[str]:
    """Packages a package may import at module level: itself and every layer below it."""
    i = ORDER.index(pkg)
    allowed = set(ORDER[:i + 1])
    if pkg == "isa":
        return {"errors", "isa"}
    if pkg in ("smem", "tmem", "numerics", "errors"):
        allowed.discard("isa")
    return allowed


ALLOWED = {p: _below(p) for p in ORDER}
ALLOWED["simtc"] = {*ORDER, "simtc"}  # the top package (lazy, checked at import time below) and __main__


def _package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] not in ("__main__", "__init__") else "simtc"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_level_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute ``simtc`` import at module level (TYPE_CHECKING blocks included)."""
    out = []
    todo = list(ast.parse(path.read_text(encoding="utf-8")).body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.If, ast.Try)):
            todo += node.body + node.orelse + [h for t in getattr(node, "handlers", []) for h in t.body]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.startswith("simtc"):
            out += [(node.lineno, f"{node.module}.{a.name}" if node.module == "simtc" else node.module)
                    for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("simtc")]
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}: relative import at line {node.lineno}; simtc uses absolute imports")
    return out


MODULES = sorted(PKG.rglob("*.py"))


def test_every_subpackage_has_a_layer():
    found = {p.name for p in PKG.iterdir() if (p / "__init__.py").exists()} | {"errors"}
    assert found == set(ORDER), f"classify new packages in tests/test_layers.py: {sorted(found ^ set(ORDER))}"


def test_tests_mirror_the_package():
    packages = {p.name for p in PKG.iterdir() if (p / "__init__.py").exists()}
    missing = sorted(p for p in packages if not (ROOT / "tests" / p).is_dir())
    assert not missing, f"tests/ should have a folder for each subpackage; missing: {missing}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_level_imports_respect_the_layers(path):
    me = _module_name(path)
    pkg = _package_of(me)
    bad = []
    for line, target in _module_level_imports(path):
        tpkg = _package_of(target)
        if tpkg == "simtc" and target.startswith("simtc."):  # "from simtc import x": x is a package or module
            tpkg = target.split(".")[1]
        if pkg == "isa" and tpkg not in ("isa", "errors"):
            ok = any(target == m or target.startswith(m + ".") for m in ISA_VALUE_MODULES)
        else:
            ok = tpkg in ALLOWED[pkg]
        if not ok:
            bad.append(f"line {line}: {target}")
    assert not bad, f"{me} ({pkg}) imports above its layer: {bad}"


def test_the_checker_sees_a_violation(tmp_path):
    """The AST scan is not vacuous: an upward import in a module body is found."""
    f = tmp_path / "m.py"
    f.write_text("import numpy\nif True:\n    from simtc.render.tmem import TmemMapView\n"
                 "def f():\n    import simtc.cli\n")
    assert [m for _, m in _module_level_imports(f)] == ["simtc.render.tmem"]


def _loaded_after_import(module: str, watch: list[str]) -> list[str]:
    code = (f"import sys, {module}\n"
            f"print(','.join(m for m in {watch!r} if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return [m for m in out.stdout.strip().split(",") if m]


@pytest.mark.parametrize("pkg", [p for p in ORDER if p not in ("cli",)])
def test_importing_a_package_loads_nothing_above_it(pkg):
    module = f"simtc.{pkg}"
    above = [f"simtc.{p}" for p in ORDER[ORDER.index(pkg) + 1:] if p not in _below(pkg)]
    if pkg in ("numerics", "smem", "tmem", "errors"):
        above.append("simtc.isa")
    heavy = ["rich", "cupy", "IPython"] if ORDER.index(pkg) <= ORDER.index("kernels") else ["cupy"]
    assert _loaded_after_import(module, above + heavy) == []


def test_isa_loads_no_machine_state():
    watch = ["simtc.smem.memory", "simtc.tmem.memory", "simtc.mma", "simtc.semantics", "simtc.engine",
             "simtc.render", "simtc.hw", "simtc.cli", "simtc.kernels", "rich", "cupy"]
    assert _loaded_after_import("simtc.isa", watch) == []


def test_import_simtc_is_light():
    assert _loaded_after_import("simtc", ["numpy", "rich", "attrs", "simtc.smem", "simtc.cli"]) == []
