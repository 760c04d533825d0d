"""The tutorial notebooks: percent-format sources -> ``notebooks/*.ipynb`` and Markdown pages.

Each notebook is written as a plain Python file in ``notebooks/src/`` (the "percent" format:
``# %%`` starts a code cell, ``# %% [markdown]`` a Markdown cell whose lines are ``# ``-prefixed
comments), so it can be reviewed and linted like code. This script turns them into the Jupyter
notebooks in ``notebooks/`` (stored without outputs; the test suite executes them) and, for the
documentation site, into Markdown pages (``docs/scripts/hooks.py`` calls :func:`to_markdown`).

    python docs/scripts/notebooks.py            # rewrite notebooks/*.ipynb from notebooks/src/
    python docs/scripts/notebooks.py --check    # exit 1 if a notebook differs from its source

Only the standard library is imported at module level (``nbformat`` when writing notebooks).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
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


def execute(path: Path, timeout: int = 120):
    """Run the notebook generated from ``path`` in a fresh kernel (nbclient); returns the executed notebook."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.reads(notebook_json(cells_of(path)), as_version=4)
    NotebookClient(nb, kernel_name="python3", timeout=timeout,
                   resources={"metadata": {"path": str(ROOT)}}).execute()
    return nb


def _output_markdown(output) -> str:
    """One cell output as Markdown: HTML (rich views) raw, text in a ``text`` block."""
    data = output.get("data", {})
    if "text/html" in data:
        return f'<div class="nb-output" markdown="0">\n{data["text/html"].strip()}\n</div>'
    text = output.get("text") or data.get("text/plain") or ""
    if output.get("output_type") == "error":
        text = "\n".join(output.get("traceback", []))
    return f"```text\n{text.rstrip()}\n```" if text.strip() else ""


def to_markdown(path: Path, notebook_url: str | None = None, *, executed=None) -> str:
    """A Markdown page with the notebook's cells: Markdown as is, code in fenced ``python`` blocks.

    With ``executed`` (the notebook run by :func:`execute`) each code cell is followed by its
    outputs; without, the code is shown only (the test suite executes the notebooks; the site's
    pictures come from the gallery). ``notebook_url``, when given, is linked under the title.
    """
    outputs = [c.outputs for c in executed.cells if c.cell_type == "code"] if executed is not None else None
    parts, code_index = [], 0
    for i, (kind, body) in enumerate(cells_of(path)):
        if kind == "markdown":
            parts.append(body)
            if i == 0:
                name = target(path).name
                where = f"[`{name}`]({notebook_url})" if notebook_url else f"`notebooks/{name}`"
                parts.append(f"*This page is the notebook {where}; run it in Jupyter to step through the cells"
                             + (" and see every picture.*" if outputs is None else ".*"))
        else:
            parts.append(f"```python\n{body}\n```")
            if outputs is not None:
                parts.extend(md for md in (_output_markdown(o) for o in outputs[code_index]) if md)
            code_index += 1
    return "\n\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a notebook differs from its source")
    args = parser.parse_args(argv)
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
