"""The import layers of simtc, enforced three ways.

1. Statically (AST), every import of every module only names packages at or below the importing
   package's layer: module-level imports (``if TYPE_CHECKING:`` blocks included) and imports
   inside functions (lazy imports) alike. A lazy import is an arrow like any other: a model never
   imports its picture; the picture is a view in :mod:`simtc.render` that takes the model
   (``BankMapView(report)``, ``TmemMapView(tm)``). The model packages do not import rich, IPython
   or cupy either, not even in a function.
2. No import circles: the graph of imports between simtc modules (module level and inside
   functions, ``TYPE_CHECKING`` included, lazy facades followed: see below) has no cycle, neither
   A -> B -> A nor a longer one. A failure prints each cycle with the line of every import on it.
3. At import time (a fresh interpreter per package): importing a package loads no package above
   it, and no model package loads rich or cupy.

Layers, bottom to top: errors; numerics; smem; tmem (isa sits beside them: errors plus the pure
value/geometry modules of smem, tmem and numerics); mma; semantics; engine; kernels; ptx (the PTX
front end and its executor: it drives semantics and feeds the engine, and never imports render, hw
or cli); render; hw; cuda (the CuPy-like API over the executor, which may compile through hw); cli.
The top package ``simtc`` loads nothing heavy.

What the AST counts as an import of a module: ``import`` and ``from ... import`` statements,
``importlib.import_module`` with a literal name, and ``simtc.<subpackage>`` in a module that did
``import simtc`` (the top package's ``__getattr__`` imports the subpackage on that access). Module
names computed at run time (the packages' PEP 562 ``__getattr__``, for which the facades'
declarations stand in below; the program registry's ``"module:function"`` builders) are beyond the
AST; check 3 covers what importing a package loads.

The exceptions, each with its reason:

* **The top package** ``simtc``. Its own attributes (``__version__``, ``SimtcError``) may be
  imported from any layer (``from simtc import __version__`` in the CLI, ``import simtc`` in
  :mod:`simtc.hw.recording`): Python runs the top package before any module inside it, and at run
  time it imports only :mod:`simtc.errors`, so the import adds no arrow. The top package is also
  the facade naming every subpackage: lazily (``__getattr__``) and, for type checkers, under
  ``TYPE_CHECKING``; it may import every layer (it is the top). ``from simtc import render`` or
  ``simtc.render`` after ``import simtc`` is an import of :mod:`simtc.render`, checked as such.
* **Lazy facades in the cycle graph.** A package that loads its submodules on first use (PEP 562:
  ``simtc``, ``simtc.engine``, ``simtc.smem``, ``simtc.tmem``) declares them for type checkers
  under ``TYPE_CHECKING`` in its ``__init__``. Those declarations never run, so they are not edges;
  a name imported through the facade is an edge to the module declared for it
  (``from simtc.engine import Engine`` -> :mod:`simtc.engine.core`), which is what runs.
* **Lazy imports reaching up**: none is essential, so :data:`LAZY_EXCEPTIONS` is empty. The
  candidates, and why they are not exceptions: a model's rich hook importing its view (removed:
  ``BankReport.__rich__``, ``TensorMemory.__rich__``; the views take the model); the top package's
  lazy attributes (above); ``simtc.isa.program``'s rich listing (imports rich, a third-party
  library, and no ``simtc.render``: no arrow between simtc's layers; isa is not a model package).
"""

from __future__ import annotations

import ast
import itertools
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "simtc"

ORDER = ("errors", "numerics", "smem", "tmem", "isa", "mma", "semantics", "engine", "kernels", "ptx", "render", "hw",
         "cuda", "cli")
"""Packages from the bottom layer to the top one."""

ISA_VALUE_MODULES = frozenset({
    "simtc.smem.desc", "simtc.smem.swizzle", "simtc.smem.layout", "simtc.smem.read", "simtc.tmem.address",
    "simtc.tmem.layouts", "simtc.tmem.ldst", "simtc.tmem.cp", "simtc.numerics.formats",
})
"""What ``simtc.isa`` may use besides ``simtc.errors``: pure values and geometry, no memory model."""

MODEL_PACKAGES = ("errors", "numerics", "smem", "tmem", "mma", "semantics")
"""Packages that model the hardware: they know nothing of pictures or GPUs, not even in a function."""

OFF_LIMITS_FOR_MODELS = ("rich", "IPython", "cupy")
"""Third-party packages no module of :data:`MODEL_PACKAGES` imports (rendering, notebooks, the GPU)."""

LAZY_EXCEPTIONS: dict[tuple[str, str], str] = {}
"""(importing module, imported module) -> why a lazy import may reach a higher layer. Empty: none is
essential (see the module docstring for the candidates and why they are not exceptions)."""

def _below(pkg: str) -> set[str]:
    """Packages a package may import: itself and every layer below it."""
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


def _target_package(target: str) -> str:
    """The layer an imported name belongs to; ``"simtc"`` for the top package's own attributes."""
    parts = target.split(".")
    if len(parts) == 1:
        return "simtc"
    on_disk = (PKG / parts[1]).is_dir() or (PKG / f"{parts[1]}.py").is_file()
    return parts[1] if parts[1] in ORDER or on_disk else "simtc"  # a module outside ORDER is in no layer: refused


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


class Import(NamedTuple):
    """One import found in a module's source."""

    line: int
    target: str
    """What the layer rule checks: the module imported from (``from a.b import c`` -> ``a.b``), the
    module of ``import a.b``; for ``from simtc import c``, ``simtc.c`` (a subpackage or an attribute)."""
    loads: str
    """The most specific dotted name the import loads (``from a.b import c`` -> ``a.b.c``, which may be a
    module or a name defined in ``a.b``); the cycle graph takes its longest prefix that is a module."""
    lazy: bool
    """Inside a function (runs when the function is called, not when the module is imported)."""
    type_checking: bool
    """Inside ``if TYPE_CHECKING:``."""
    binds: str | None = None
    """The name a ``from ... import`` binds in the importing module (``as`` name or imported name)."""


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _is_import_module(node: ast.Call) -> bool:
    f = node.func
    return ((isinstance(f, ast.Attribute) and f.attr == "import_module") or
            (isinstance(f, ast.Name) and f.id == "import_module")) and bool(node.args) and \
        isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)


def _imports(path: Path, top: str = "simtc") -> list[Import]:
    """Every import of package ``top`` (or a module inside it) in ``path``, in source order."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    binds_top = any(isinstance(n, ast.Import) and any(a.name.split(".")[0] == top and a.asname is None for a in n.names)
                    for n in ast.walk(tree))
    out: list[Import] = []

    def ours(module: str) -> bool:
        return module == top or module.startswith(top + ".")

    def visit(node: ast.AST, lazy: bool, tc: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            lazy = True
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, lazy, True)
            for child in node.orelse:
                visit(child, lazy, tc)
            return
        if isinstance(node, ast.ImportFrom):
            if node.level:
                raise AssertionError(f"{path}: relative import at line {node.lineno}; simtc uses absolute imports")
            if node.module and ours(node.module):
                out.extend(Import(node.lineno, f"{top}.{a.name}" if node.module == top else node.module,
                                  f"{node.module}.{a.name}", lazy, tc, a.asname or a.name) for a in node.names)
        elif isinstance(node, ast.Import):
            out.extend(Import(node.lineno, a.name, a.name, lazy, tc) for a in node.names if ours(a.name))
        elif isinstance(node, ast.Call) and _is_import_module(node) and ours(node.args[0].value):
            out.append(Import(node.lineno, node.args[0].value, node.args[0].value, lazy, tc))
        elif (binds_top and isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id == top and isinstance(node.ctx, ast.Load)):  # the facade's __getattr__ imports it
            out.append(Import(node.lineno, f"{top}.{node.attr}", f"{top}.{node.attr}", lazy, tc))
        for child in ast.iter_child_nodes(node):
            visit(child, lazy, tc)

    visit(tree, False, False)
    return sorted(out, key=lambda i: (i.line, i.target))


def _module_level_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute ``simtc`` import at module level (TYPE_CHECKING blocks included)."""
    return [(i.line, i.target) for i in _imports(path) if not i.lazy]


def _allowed(importer: str, target: str) -> bool:
    """May module ``importer`` import ``target`` (an :attr:`Import.target`) under the layer rule?"""
    pkg, tpkg = _package_of(importer), _target_package(target)
    if tpkg == "simtc":  # the top package's own attributes: see the module docstring
        return True
    if pkg == "isa" and tpkg not in ("isa", "errors"):
        return any(target == m or target.startswith(m + ".") for m in ISA_VALUE_MODULES)
    return tpkg in ALLOWED[pkg]


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
    bad = [f"line {line}: {target}" for line, target in _module_level_imports(path) if not _allowed(me, target)]
    assert not bad, f"{me} ({_package_of(me)}) imports above its layer: {bad}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_lazy_imports_respect_the_layers(path):
    """An import inside a function is an arrow too: it may not reach a higher layer either."""
    me = _module_name(path)
    bad = [f"line {i.line}: {i.target}" for i in _imports(path) if i.lazy and not _allowed(me, i.target)
           and (me, i.target) not in LAZY_EXCEPTIONS]
    assert not bad, (f"{me} ({_package_of(me)}) imports above its layer inside a function: {bad}; a model's picture "
                     f"belongs in a view of simtc.render that takes the model")


@pytest.mark.parametrize("path", [p for p in MODULES if _package_of(_module_name(p)) in MODEL_PACKAGES],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_models_import_no_renderer_or_gpu_library(path):
    bad = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
        bad += [f"line {node.lineno}: {n}" for n in names if n.split(".")[0] in OFF_LIMITS_FOR_MODELS]
    assert not bad, f"{_module_name(path)} is a model module and imports {bad} (even in a function)"


def test_the_checker_sees_a_violation(tmp_path):
    """The AST scan is not vacuous: an upward import is found, in a module body and in a function."""
    f = tmp_path / "m.py"
    f.write_text("import numpy\nif True:\n    from simtc.render.tmem import TmemMapView\n"
                 "def f():\n    import simtc.cli\n"
                 "class C:\n    def __rich__(self):\n        from simtc.render.banks import BankMapView\n"
                 "        return BankMapView(self)\n")
    assert [m for _, m in _module_level_imports(f)] == ["simtc.render.tmem"]
    lazy = [(i.line, i.target) for i in _imports(f) if i.lazy]
    assert lazy == [(5, "simtc.cli"), (8, "simtc.render.banks")]
    assert not any(_allowed("simtc.smem.banks", t) for _, t in lazy)
    assert _allowed("simtc.cli.smem", "simtc.render.banks") and _allowed("simtc.hw.recording", "simtc")


def test_the_checker_sees_imports_through_the_facade(tmp_path):
    """``import simtc`` then ``simtc.render``, ``from simtc import cli`` and a literal import_module are imports."""
    f = tmp_path / "m.py"
    f.write_text("import importlib\nimport simtc\n"
                 "def f():\n    return simtc.render, simtc.__version__\n"
                 "def g():\n    from simtc import cli, __version__\n"
                 "    return importlib.import_module('simtc.hw.device')\n")
    found = [(i.line, i.target, i.lazy) for i in _imports(f)]
    assert found == [(2, "simtc", False), (4, "simtc.__version__", True), (4, "simtc.render", True),
                     (6, "simtc.__version__", True), (6, "simtc.cli", True), (7, "simtc.hw.device", True)]
    assert [t for _, t, _ in found if not _allowed("simtc.tmem.memory", t)] == ["simtc.render", "simtc.cli",
                                                                                  "simtc.hw.device"]


# ---- import circles ------------------------------------------------------------------------------------

def _resolve(imp: Import, modules: dict[str, Path], facades: dict[str, dict[str, str]]) -> str | None:
    """The module an import loads: :attr:`Import.loads` if it is a module, else its longest prefix that is one;
    a name a lazy facade declares (``from simtc.engine import Engine``) loads the module it comes from."""
    parts = imp.loads.split(".")
    for n in range(len(parts), 0, -1):
        module = ".".join(parts[:n])
        if module in modules:
            return facades.get(module, {}).get(parts[n], module) if n < len(parts) else module
    return None


def _is_facade_declaration(me: str, imp: Import, modules: dict[str, Path]) -> bool:
    """A package ``__init__``'s ``TYPE_CHECKING`` import of its own submodule: what its ``__getattr__`` loads."""
    return (imp.type_checking and modules[me].name == "__init__.py" and imp.loads.startswith(me + ".")
            and imp.binds is not None)


def _import_graph(root: Path = ROOT, top: str = "simtc") -> dict[str, dict[str, int]]:
    """module -> {module it imports: line of the first such import}, for every module of ``top`` under ``root``.

    Module-level and lazy imports alike, ``TYPE_CHECKING`` ones too, with one exception: a lazy
    facade's declarations. A package that loads its submodules on first use (PEP 562
    ``__getattr__``: ``simtc``, ``simtc.engine``, ``simtc.smem``, ``simtc.tmem``) names them for type
    checkers under ``TYPE_CHECKING`` in its ``__init__``; those imports never run, so they are not
    edges. Instead an import of a declared name through the facade is an edge to the module
    declared for it (what ``__getattr__`` imports): ``from simtc.engine import Engine`` -> simtc.engine.core.
    """
    modules = {_module_name(p, root): p for p in sorted((root / top).rglob("*.py"))}
    found = {me: _imports(path, top) for me, path in modules.items()}
    facades: dict[str, dict[str, str]] = {}
    for me, imports in found.items():
        for imp in imports:
            if _is_facade_declaration(me, imp, modules):
                facades.setdefault(me, {})[imp.binds] = _resolve(imp, modules, {})
    graph: dict[str, dict[str, int]] = {}
    for me, imports in found.items():
        edges = graph.setdefault(me, {})
        for imp in imports:
            if _is_facade_declaration(me, imp, modules):
                continue
            target = _resolve(imp, modules, facades)
            if target is not None and target != me:
                edges.setdefault(target, imp.line)
    return graph


def _strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's algorithm (iterative): the components of more than one module, each sorted, in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, {})))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def _a_cycle(graph: dict[str, dict[str, int]], component: list[str]) -> list[str]:
    """A shortest cycle through the component's first module: [m0, m1, ..., m0]."""
    members, start = set(component), component[0]
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [*reversed(path), start]
                if w in members and w not in parent:
                    parent[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle through {start} in {component}")


def _describe(graph: dict[str, dict[str, int]], cycle: list[str]) -> str:
    return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in itertools.pairwise(cycle)) + f" -> {cycle[-1]}"


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One cycle per group of modules that import each other, directly or through others."""
    return [_a_cycle(graph, c) for c in _strongly_connected(graph)]


def test_no_import_cycles():
    graph = _import_graph()
    assert len(graph) == len(MODULES)
    report = []
    for component in _strongly_connected(graph):
        cycle = _a_cycle(graph, component)
        report.append(f"  {_describe(graph, cycle)}" + (
            f"  [all of {component} import each other]" if len(component) > len(cycle) - 1 else ""))
    assert not report, ("import cycles between simtc modules (module-level and function-level imports):\n"
                        + "\n".join(report))


def test_the_cycle_finder_is_not_vacuous(tmp_path):
    """A synthetic package: a <-> b (one import lazy), x -> y -> z -> x (three import forms), c -> a, no more."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    sources = {
        "__init__": "",
        "a": "import pkg.b\n",
        "b": "def f():\n    from pkg.a import thing\n    return thing\n",
        "c": "from pkg import a\n",
        "x": "from pkg import y\n",
        "y": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.z import Z\n",
        "z": "import importlib\nX = importlib.import_module('pkg.x')\n",
    }
    for name, text in sources.items():
        (pkg / f"{name}.py").write_text(text)
    graph = _import_graph(tmp_path, "pkg")
    assert graph["pkg.c"] == {"pkg.a": 1} and graph["pkg.b"] == {"pkg.a": 2}
    cycles = _cycles(graph)
    assert cycles == [["pkg.a", "pkg.b", "pkg.a"], ["pkg.x", "pkg.y", "pkg.z", "pkg.x"]]
    assert _describe(graph, cycles[0]) == "pkg.a (line 1) -> pkg.b (line 2) -> pkg.a"
    (pkg / "b.py").write_text("def f():\n    return 1\n")  # break the first: only the second is left
    assert _cycles(_import_graph(tmp_path, "pkg")) == [["pkg.x", "pkg.y", "pkg.z", "pkg.x"]]


def test_the_cycle_finder_sees_through_lazy_facades(tmp_path):
    """A facade's TYPE_CHECKING declarations are no edges; a name imported through it is an edge to its module."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    sources = {
        "__init__": ("import importlib\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                     "    from pkg.core import Engine\n    from pkg import bench as bench\n"
                     "def __getattr__(name):\n    return importlib.import_module(f'pkg.{name}')\n"),
        "core": "def run():\n    from pkg.bench import measure\n    return measure\n",
        "bench": "def measure():\n    from pkg import Engine\n    return Engine\n",
        "user": "from pkg import Engine\n",
    }
    for name, text in sources.items():
        (pkg / f"{name}.py").write_text(text)
    graph = _import_graph(tmp_path, "pkg")
    assert graph["pkg"] == {} and graph["pkg.user"] == {"pkg.core": 1} and graph["pkg.bench"] == {"pkg.core": 2}
    assert _cycles(graph) == [["pkg.bench", "pkg.core", "pkg.bench"]]


# ---- at import time ----------------------------------------------------------------------------------

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
    heavy = ["rich", "cupy", "IPython"] if ORDER.index(pkg) <= ORDER.index("ptx") else ["cupy"]
    assert _loaded_after_import(module, above + heavy) == []


def test_isa_loads_no_machine_state():
    watch = ["simtc.smem.memory", "simtc.tmem.memory", "simtc.mma", "simtc.semantics", "simtc.engine",
             "simtc.render", "simtc.hw", "simtc.cli", "simtc.kernels", "rich", "cupy"]
    assert _loaded_after_import("simtc.isa", watch) == []


def test_import_simtc_is_light():
    assert _loaded_after_import("simtc", ["numpy", "rich", "attrs", "simtc.smem", "simtc.cli"]) == []
