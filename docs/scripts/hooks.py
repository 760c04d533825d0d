"""mkdocs hooks: the generated pages of the documentation site.

At build time (``mkdocs build``; configured in ``mkdocs.yml``) this adds, without writing into
``docs/``:

* ``concepts/<notebook>.md`` -- one page per tutorial notebook, from its source in
  ``notebooks/src/`` (``docs/scripts/notebooks.py``); with ``SIMTC_DOCS_EXECUTE=1`` the notebooks
  are run and every cell's output is included (slower; off by default);
* ``cli.md`` -- the command reference, from ``simtc.cli.build_parser()`` (``cli_reference.py``);
* ``api/<package>.md`` -- the API reference, one page per subpackage of ``simtc``, from the
  docstrings and signatures (``api_reference.py``);
* ``gallery.md`` and ``gallery/*.svg`` -- pictures drawn by ``simtc.render`` (``gallery.py``).

It also expands ``<!-- readme:NAME -->`` markers in pages with the command block that follows
``<!-- NAME -->`` in README.md, so the site's commands are the README's.

Nothing here imports mkdocs at module level (the test suite imports this file for doctests).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _load(name: str):
    """A sibling script as a module (by path, so no sys.path games and no name clashes)."""
    key = f"_simtc_docs_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, HERE / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


def api_packages() -> list[str]:
    """``simtc`` and its public subpackages/modules, from the source tree (nothing imported).

    >>> api_packages()[:3]
    ['simtc', 'simtc.cli', 'simtc.engine']
    """
    pkg = ROOT / "simtc"
    names = [p.name for p in pkg.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    names += [p.stem for p in pkg.glob("*.py") if not p.stem.startswith("_")]
    return ["simtc", *(f"simtc.{n}" for n in sorted(set(names)) if not n.startswith("_"))]


def generated_pages() -> dict[str, str]:
    """``{path inside the site: Markdown}`` for every generated page."""
    import os

    nb = _load("notebooks")
    run = os.environ.get("SIMTC_DOCS_EXECUTE") == "1"  # include every cell's output (runs the notebooks)
    pages = {f"concepts/{src.stem}.md": nb.to_markdown(src, executed=nb.execute(src) if run else None)
             for src in nb.sources()}
    pages["cli.md"] = _load("cli_reference").markdown()
    pages["gallery.md"] = _load("gallery").markdown("gallery")
    api = _load("api_reference")
    import simtc

    links = "\n".join(f"* [`{p}`]({p}.md)" for p in api_packages()[1:])
    pages["api/simtc.md"] = f"# `simtc`\n\n```text\n{simtc.__doc__.strip()}\n```\n\nPackages:\n\n{links}\n"
    for package in api_packages()[1:]:
        pages[f"api/{package}.md"] = api.markdown(package)
    return pages


def readme_block(name: str) -> str:
    """The fenced code block that follows ``<!-- name -->`` in README.md."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(rf"<!-- {re.escape(name)} -->\s*\n(```[a-z]*\n.*?\n```)", text, re.S)
    if not m:
        raise ValueError(f"README.md has no code block after <!-- {name} -->")
    return m.group(1)


def import_table() -> str:
    """Markdown table: for each subpackage of ``simtc``, the other subpackages its source imports.

    >>> "| `smem` |" in import_table()
    True
    """
    import ast

    pkg = ROOT / "simtc"
    tops = {p.relative_to(pkg).parts[0].removesuffix(".py") for p in pkg.rglob("*.py")}
    subs = sorted(tops - {"__init__", "__main__"})
    uses: dict[str, set[str]] = {s: set() for s in subs}
    for path in pkg.rglob("*.py"):
        owner = path.relative_to(pkg).parts[0].removesuffix(".py")
        if owner not in uses:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else [])
            for name in names:
                parts = name.split(".")
                if parts[0] == "simtc" and len(parts) > 1 and parts[1] in uses and parts[1] != owner:
                    uses[owner].add(parts[1])
    rows = [f"| `{s}` | {', '.join(f'`{u}`' for u in sorted(uses[s])) or '—'} |" for s in subs]
    return "\n".join(["| package | imports from |", "|---|---|", *rows])


def tag_table(tags: tuple[str, ...] = ("[inferred", "[open]")) -> str:
    """Markdown table of every source line under ``simtc/`` (rendering code aside) carrying one of ``tags``."""
    rows = []
    for path in sorted((ROOT / "simtc").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("simtc/render/"):
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines, 1):
            hit = next((t for t in tags if t in line), None)
            if hit is None:
                continue
            # the sentence around the tag (it may start on an earlier line of the same comment or docstring)
            stripped = line.strip()
            if " # " in line:  # a code line with a comment: the comment
                text = line.split(" # ", 1)[1].strip()
            elif stripped[:1] in "\"'" or stripped[:2] in ('f"', "f'") or '": ' in stripped or "=" in stripped:
                text = stripped.rstrip(",")  # a string in code: that line
            else:  # prose in a docstring or comment block: the sentence, which may start up to two lines before
                context = " ".join(" ".join(ln.strip().lstrip("#").split()) for ln in lines[max(0, i - 3):i])
                pos = context.rfind(hit)
                cut = [context.rfind(". ", 0, pos) + 2, context.rfind('"""', 0, pos) + 3]
                text = context[max([0, *(c for c in cut if c > 2)]):].strip()
            text = text.replace("|", "\\|").replace("<", "&lt;").replace("`", "").replace("*", "")
            rows.append(f"| `{rel}:{i}` | {text} |")
    return "\n".join(["| where | text |", "|---|---|", *rows])


_GENERATED = {"imports": import_table, "tags": tag_table}


# ---- mkdocs events ------------------------------------------------------------------------------
def on_files(files, config):
    from mkdocs.structure.files import File

    for path, text in generated_pages().items():
        files.append(File.generated(config, path, content=text))
    for name, _, svg in _load("gallery").svgs():
        files.append(File.generated(config, f"gallery/{name}.svg", content=svg))
    return files


def on_config(config):
    """Fill the navigation's generated sections: one concept page per notebook, one API page per package."""
    nb = _load("notebooks")
    for entry in config["nav"]:
        if isinstance(entry, dict) and "Concepts (notebooks)" in entry:
            entry["Concepts (notebooks)"] = [{nb.title(src): f"concepts/{src.stem}.md"} for src in nb.sources()]
        if isinstance(entry, dict) and "API reference" in entry:
            entry["API reference"] = [{p: f"api/{p}.md"} for p in api_packages()]
    return config


def on_page_markdown(markdown, page, config, files):
    markdown = re.sub(r"<!-- readme:([\w-]+) -->", lambda m: readme_block(m.group(1)), markdown)
    return re.sub(r"<!-- generated:(\w+) -->", lambda m: _GENERATED[m.group(1)](), markdown)
