"""The tutorial notebooks: percent-format sources -> ``notebooks/*.ipynb`` and Markdown pages.

Each notebook is written as a plain Python file in ``notebooks/src/`` (the "percent" format:
``# %%`` starts a code cell, ``# %% [markdown]`` a Markdown cell whose lines are ``# ``-prefixed
comments), so it can be reviewed and linted like code. This script turns them into the Jupyter
notebooks in ``notebooks/`` (stored without outputs; the test suite executes them) and, for the
documentation site, into Markdown pages with every cell's output (``docs/scripts/hooks.py`` calls
:func:`executed_all` and :func:`to_markdown`).

The site's pages show what the notebooks show, so the notebooks are executed when the site is built. Executing
all of them takes 30-60 s, so each executed notebook is cached (``$SIMTC_CACHE/docs-notebooks``, default
``~/.cache/simtc/docs-notebooks``) under a key that hashes its source, everything under ``simtc/`` and
``tests/data/``, this script and the versions of Python and the packages the outputs depend on: a change to any
of them re-executes the notebook, an unchanged tree builds from the cache in well under a second. Missing
notebooks are executed in parallel, each in its own process and fresh kernel.

Rich views come out as HTML (``<pre>`` with inline colours) at Jupyter's width of 115 columns, wider than the
site's text column: each sits in a frame that scrolls sideways, with a note under it that shows while the frame
scrolls (marked ``nb-wide`` here when the picture is wider than :data:`FRAME_COLUMNS`, and kept current for the
window's width by ``docs/javascripts/simtc.js``). An ipywidgets widget shows the picture it offers as
``text/html`` (the state it was left in), with a note that it is interactive in Jupyter.

    python docs/scripts/notebooks.py            # rewrite notebooks/*.ipynb from notebooks/src/
    python docs/scripts/notebooks.py --check    # exit 1 if a notebook differs from its source
    python docs/scripts/notebooks.py --execute  # execute every notebook into the cache (what the site build does)

Only the standard library is imported at module level (``nbformat`` when writing notebooks).
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "notebooks" / "src"
OUT = ROOT / "notebooks"

_MARKER = re.compile(r"^# %%(?P<md> \[markdown\])?(?P<title>.*)$")


def sources() -> list[Path]:
    """The notebook sources, in order (``01_...py``, ``02_...py``, ...)."""
    return sorted(SRC.glob("[0-9][0-9]_*.py"))


def parse_percent(text: str) -> list[tuple[str, str]]:
    """Cells of a percent-format file: ``[(kind, source), ...]`` with kind ``"markdown"`` or ``"code"``.

    >>> parse_percent("# %% [markdown]\\n# # Title\\n# text\\n\\n# %%\\nx = 1\\nx\\n")
    [('markdown', '# Title\\ntext'), ('code', 'x = 1\\nx')]
    """
    cells: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        m = _MARKER.match(line)
        if m:
            cells.append(("markdown" if m.group("md") else "code", []))
        elif cells:
            cells[-1][1].append(line)
    out = []
    for kind, lines in cells:
        if kind == "markdown":
            lines = [ln[2:] if ln.startswith("# ") else ln[1:] if ln.startswith("#") else ln for ln in lines]
        body = "\n".join(lines).strip("\n")
        if body:
            out.append((kind, body))
    return out


def cells_of(path: Path) -> list[tuple[str, str]]:
    return parse_percent(path.read_text(encoding="utf-8"))


def notebook_json(cells: list[tuple[str, str]]) -> str:
    """The ``.ipynb`` text for ``cells``: nbformat 4.5, no outputs, deterministic cell ids, validated."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                   "language_info": {"name": "python"}}
    for i, (kind, body) in enumerate(cells):
        cell = nbformat.v4.new_markdown_cell(body) if kind == "markdown" else nbformat.v4.new_code_cell(body)
        cell.id = f"cell-{i:02d}"
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nbformat.writes(nb) + "\n"


def title(src: Path) -> str:
    """The notebook's title: its first Markdown heading without the number (``01 · Title`` -> ``Title``)."""
    for kind, body in cells_of(src):
        if kind == "markdown" and body.startswith("# "):
            return body.splitlines()[0][2:].split("·", 1)[-1].strip()
    return src.stem


def target(src: Path) -> Path:
    return OUT / (src.stem + ".ipynb")


def execute(path: Path, timeout: int = 300):
    """Run the notebook generated from ``path`` in a fresh kernel (nbclient); returns the executed notebook."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.reads(notebook_json(cells_of(path)), as_version=4)
    NotebookClient(nb, kernel_name="python3", timeout=timeout,
                   resources={"metadata": {"path": str(ROOT)}}).execute()
    return nb


# ---- executed notebooks, cached -------------------------------------------------------------------------------
_CACHE_PACKAGES = ("numpy", "rich", "simpy", "attrs", "ipywidgets", "nbformat")


def cache_dir() -> Path:
    """Where executed notebooks are kept: ``$SIMTC_CACHE/docs-notebooks`` (default ``~/.cache/simtc``)."""
    return Path(os.environ.get("SIMTC_CACHE", Path.home() / ".cache" / "simtc")) / "docs-notebooks"


def _tree_digest() -> str:
    """One hash of every file under ``simtc/`` and ``tests/data/`` (path and bytes) and of this script."""
    h = hashlib.sha256()
    files = [p for top in ("simtc", "tests/data") for p in (ROOT / top).rglob("*")
             if p.is_file() and "__pycache__" not in p.parts]
    for p in sorted([*files, Path(__file__).resolve()]):
        h.update(p.relative_to(ROOT).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    out = [sys.version.split()[0]]
    for name in _CACHE_PACKAGES:
        try:
            out.append(f"{name}={version(name)}")
        except PackageNotFoundError:
            out.append(f"{name}=-")
    return " ".join(out)


def cache_key(src: Path, tree: str | None = None) -> str:
    """The cache key of notebook ``src``: its cells, the tree digest, the versions (hex, 24 digits).

    >>> k = cache_key(sources()[0]); len(k), k == cache_key(sources()[0]), k == cache_key(sources()[1])
    (24, True, False)
    """
    h = hashlib.sha256()
    h.update(json.dumps(cells_of(src)).encode())
    h.update((tree or _tree_digest()).encode())
    h.update(_versions().encode())
    return h.hexdigest()[:24]


def cached_path(src: Path, tree: str | None = None) -> Path:
    return cache_dir() / f"{src.stem}-{cache_key(src, tree)}.ipynb"


def _kernel_env(base: Path) -> dict[str, str]:
    """Environment for a kernel that runs this interpreter (a ``python3`` kernelspec first on JUPYTER_PATH),
    with Jupyter's and IPython's own directories under ``base``: no user-level Jupyter setup is read."""
    spec = base / "kernels" / "python3"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (simtc docs)", "language": "python"}), encoding="utf-8")
    return {**os.environ, "JUPYTER_PATH": str(base), "JUPYTER_PLATFORM_DIRS": "1", "IPYTHONDIR": str(base / "ipy"),
            "JUPYTER_RUNTIME_DIR": str(base / "runtime"), "JUPYTER_CONFIG_DIR": str(base / "config"),
            "MPLBACKEND": "Agg", "SIMTC_PROGRESS": "0"}


def executed_all(srcs: list[Path] | None = None, jobs: int | None = None, log=None) -> dict[Path, object]:
    """Every notebook of ``srcs`` executed (nbformat nodes), from the cache where its key is there; the others
    are executed in parallel (``jobs`` processes, default the CPU count), each in a fresh kernel, and cached.

    A notebook that fails raises :class:`simtc.errors.SimtcError` with the end of its error output."""
    import importlib.util

    from simtc.errors import SimtcError

    lacking = [m for m in ("nbclient", "nbformat", "ipykernel") if importlib.util.find_spec(m) is None]
    if lacking:
        raise SimtcError(f"the concept pages show the executed notebooks, which needs {', '.join(lacking)} (the docs "
                         "extra: pip install -e '.[docs]'); SIMTC_DOCS_EXECUTE=0 builds the pages without outputs",
                         rule="the site's concept pages are the executed notebooks")
    import nbformat

    srcs = list(srcs if srcs is not None else sources())
    tree = _tree_digest()
    paths = {src: cached_path(src, tree) for src in srcs}
    missing = [src for src in srcs if not paths[src].exists()]
    t0 = time.perf_counter()
    if missing:
        cache_dir().mkdir(parents=True, exist_ok=True)
        jobs = max(1, min(len(missing), jobs or os.cpu_count() or 1))
        with tempfile.TemporaryDirectory(prefix="simtc-docs-nb-") as tmp:
            env = _kernel_env(Path(tmp))
            pending = list(missing)
            running: list[tuple[Path, subprocess.Popen, Path]] = []
            failed = []
            while pending or running:
                while pending and len(running) < jobs:
                    src = pending.pop(0)
                    err = Path(tmp) / f"{src.stem}.log"
                    with err.open("w") as log_file:
                        proc = subprocess.Popen([sys.executable, __file__, "--execute-one", str(src), str(paths[src])],
                                                cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT)
                    running.append((src, proc, err))
                time.sleep(0.05)
                for item in [r for r in running if r[1].poll() is not None]:
                    running.remove(item)
                    src, proc, err = item
                    if proc.returncode != 0:
                        failed.append(f"{src.name}:\n" + "\n".join(err.read_text(errors="replace").splitlines()[-25:]))
            if failed:
                raise SimtcError("notebooks failed while the site was built:\n" + "\n\n".join(failed),
                                 rule="the site's concept pages are the executed notebooks")
        for src in missing:
            _prune(src)
    if log is not None:
        log(f"notebooks: {len(srcs) - len(missing)} from the cache, {len(missing)} executed "
            f"({time.perf_counter() - t0:.1f} s; {cache_dir()})")
    out = {}
    for src in srcs:
        nb = nbformat.read(paths[src], as_version=4)
        nb.metadata["simtc_executed"] = paths[src].name  # the cache entry the page was made from
        out[src] = nb
    return out


CACHE_KEEP = 3
"""Executed copies kept per notebook (the newest): a few trees built in turn all find theirs."""


def _prune(src: Path) -> None:
    """Forget all but the :data:`CACHE_KEEP` newest executed copies of ``src``."""
    old = sorted(cache_dir().glob(f"{src.stem}-*.ipynb"), key=lambda p: p.stat().st_mtime, reverse=True)
    for p in old[CACHE_KEEP:]:
        p.unlink(missing_ok=True)


def _execute_one(src: Path, out: Path) -> None:
    """Execute ``src`` and write it to ``out`` atomically (a half-written cache entry is never read)."""
    import nbformat

    nb = execute(src)
    fd, tmp = tempfile.mkstemp(dir=out.parent, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        nbformat.write(nb, f)
    os.replace(tmp, out)


# ---- Markdown -------------------------------------------------------------------------------------------------
FRAME_COLUMNS = 84
"""About as many character cells as the site's text column holds at the pictures' font size (736 px at a
1,280-px window, 8.2 px per cell): a wider picture is marked as scrolling before any script runs."""

_WIDGET = "application/vnd.jupyter.widget-view+json"


def columns(text_or_html: str) -> int:
    """The widest line of a picture, in character cells (tags stripped, entities decoded, wide glyphs counted 2).

    >>> columns('<pre><span style="color: red">ab&lt;</span>\\n全</pre>')
    3
    """
    from rich.cells import cell_len

    text = html.unescape(re.sub(r"<[^>]+>", "", text_or_html))
    return max((cell_len(line) for line in text.splitlines()), default=0)


def _framed(inner: str, width: int) -> str:
    """A picture in a frame that scrolls sideways, and the note that says so (shown while it scrolls)."""
    wide = " nb-wide" if width > FRAME_COLUMNS else ""
    return (f'<div class="nb-output nb-scroll{wide}" markdown="0">\n{inner}\n</div>\n'
            f'<p class="nb-scroll-note">↔ This picture is {width} characters wide: scroll sideways in its frame to '
            'see all of it.</p>')


def _output_markdown(output) -> str:
    """One cell output as Markdown: HTML (rich views) raw in a scrolling frame, SVG inline, PNG as an image, text in
    a ``text`` block; a widget as the picture it offers, with a note."""
    data = output.get("data", {})
    widget = _WIDGET in data
    note = ('<p class="nb-widget-note"><em>In Jupyter this is an interactive widget; the page shows its picture '
            'as the notebook left it.</em></p>\n') if widget else ""
    if "text/html" in data:
        body = data["text/html"].strip()
        return note + _framed(body, columns(body))
    if "image/svg+xml" in data:
        return note + f'<div class="nb-output nb-image" markdown="0">\n{data["image/svg+xml"].strip()}\n</div>'
    if "image/png" in data:
        return note + (f'<div class="nb-output nb-image" markdown="0">\n<img alt="notebook output" '
                       f'src="data:image/png;base64,{data["image/png"].strip()}">\n</div>')
    if widget:
        return note.strip()
    text = output.get("text") or data.get("text/plain") or ""
    if output.get("output_type") == "error":
        text = "\n".join(output.get("traceback", []))
    return f"```text\n{text.rstrip()}\n```" if text.strip() else ""


def to_markdown(path: Path, notebook_url: str | None = None, *, executed=None) -> str:
    """A Markdown page with the notebook's cells: Markdown as is, code in fenced ``python`` blocks.

    With ``executed`` (the notebook run by :func:`execute` or :func:`executed_all`) each code cell is followed by
    its outputs; without, the code is shown only. ``notebook_url``, when given, is linked under the title.
    """
    outputs = [c.outputs for c in executed.cells if c.cell_type == "code"] if executed is not None else None
    parts, code_index = [], 0
    for i, (kind, body) in enumerate(cells_of(path)):
        if kind == "markdown":
            parts.append(body)
            if i == 0 and executed is not None and executed.metadata.get("simtc_executed"):
                parts.append(f"<!-- simtc-executed: {executed.metadata['simtc_executed']} -->")
            if i == 0:
                name = target(path).name
                where = f"[`{name}`]({notebook_url})" if notebook_url else f"`notebooks/{name}`"
                parts.append(f"*This page is the notebook {where}" + (
                    "; run it in Jupyter to step through the cells and see every picture.*" if outputs is None else
                    ", executed when the site was built: every output below is what the cell above it printed or "
                    "showed. Run it in Jupyter to step through the cells.*"))
        else:
            parts.append(f"```python\n{body}\n```")
            if outputs is not None:
                parts.extend(md for md in (_output_markdown(o) for o in outputs[code_index]) if md)
            code_index += 1
    return "\n\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a notebook differs from its source")
    parser.add_argument("--execute", action="store_true", help="execute every notebook into the cache")
    parser.add_argument("--execute-one", nargs=2, metavar=("SRC", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.execute_one:
        _execute_one(Path(args.execute_one[0]), Path(args.execute_one[1]))
        return 0
    if args.execute:
        executed_all(log=print)
        return 0
    stale = []
    for src in sources():
        text = notebook_json(cells_of(src))
        out = target(src)
        if args.check:
            if not out.exists() or json.loads(out.read_text(encoding="utf-8")) != json.loads(text):
                stale.append(out.name)
        else:
            out.write_text(text, encoding="utf-8")
            print(f"wrote {out.relative_to(ROOT)}")
    if stale:
        print("out of date (run python docs/scripts/notebooks.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
