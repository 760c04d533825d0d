"""The documentation site builds with ``mkdocs build --strict`` and has the pages the project promises.

Needs the docs extra (``pip install -e ".[docs]"``: mkdocs, mkdocs-material); skipped, saying so,
without it. The generated parts are checked against their sources: the command reference against
the CLI's own parser, the concept pages against the executed notebooks (every picture, table and
printed line, as the default build includes them), the gallery's SVGs as XML. With Playwright and a
Chromium present, the concept pages are also opened in a headless browser (docs/scripts/check_site.py):
every picture visible, nothing cut at the column's edge; skipped, saying so, without them.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None,
    reason="mkdocs and mkdocs-material (docs extra: pip install -e '.[docs]') not installed")]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-f",
                           str(ROOT / "mkdocs.yml"), "-d", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _commands(parser: argparse.ArgumentParser, path: str = "simtc") -> list[str]:
    out = [path]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _commands(sub, f"{path} {name}")
    return out


def test_at_least_ten_pages_and_the_promised_ones(site):
    pages = [p for p in site.rglob("*.html") if p.name != "404.html"]
    assert len(pages) >= 10
    for name in ("index", "start", "architecture", "kernel", "fidelity", "cli", "gallery", "smem", "tmem", "numerics",
                 "engine", "flashmla", "hardware", "sources", "api/simtc.smem", "api/simtc.tmem", "api/simtc.numerics"):
        assert (site / f"{name}.html").exists(), name


def test_cli_reference_covers_every_command(site):
    from simtc.cli import build_parser

    html = _text(site / "cli.html")
    commands = _commands(build_parser())
    assert {"simtc smem layout", "simtc tmem ld", "simtc decode idesc", "simtc crosscheck"} <= set(commands)
    missing = [c for c in commands if f"<code>{c}</code>" not in html]
    assert not missing, f"commands missing from the command reference: {missing}"
    assert "--swizzle" in html and "SW128" in html  # options and their choices are listed


def test_concept_pages_are_the_notebooks(site):
    sources = sorted((ROOT / "notebooks" / "src").glob("[0-9][0-9]_*.py"))
    assert sources
    for src in sources:
        page = site / "concepts" / f"{src.stem}.html"
        assert page.exists(), page
        first_code = next(block for block in src.read_text(encoding="utf-8").split("# %%")[1:]
                          if not block.startswith(" [markdown]"))
        import_line = next(ln for ln in first_code.splitlines() if ln.startswith(("import ", "from ")))
        assert import_line.split()[1] in _text(page)


def test_fidelity_page_lists_statuses_and_every_inferred_tag(site):
    html = _text(site / "fidelity.html")
    for status in ("hardware-verified", "oracle-verified", "documented", "inferred"):
        assert status in html
    tagged = {p.relative_to(ROOT).as_posix() for p in (ROOT / "simtc").rglob("*.py")
              if "[inferred" in _text(p) and "render" not in p.parts}
    assert tagged and all(f"{rel}:" in html for rel in tagged)


def _table_rows(page: str) -> list[tuple[str, ...]]:
    """Every table row of an HTML page as a tuple of its cells' text (tags stripped, entities decoded)."""
    import html

    rows = []
    for tr in re.findall(r"<tr>(.*?)</tr>", page, re.S):
        cells = re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", tr, re.S)
        rows.append(tuple(html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in cells))
    return rows


def test_engine_page_lists_every_timing_parameter(site):
    from simtc.engine.parameters import LABELS, PARAMETERS

    page = _text(site / "engine.html")
    rows = {r[:5] for r in _table_rows(page) if len(r) == 6}
    for arch, table in PARAMETERS.items():
        for p in table.values():
            assert (p.name, str(p.value), p.unit, p.label, ", ".join(p.used_by)) in rows, (arch, p.name)
    # the parameter tables hold nothing else: one row per parameter of each architecture
    params = [r for r in _table_rows(page) if len(r) == 6 and r[3] in LABELS]
    assert len(params) == sum(len(t) for t in PARAMETERS.values())
    # the sources a reader can open: nothing kept outside the repository (tests/test_citations.py has the rules)
    assert not re.search(r"(?<![\w/])timing\.md|shared/(?:spec|data)", page)


def test_engine_page_lists_every_hazard_rule_and_catalogue_entry(site):
    from simtc.engine.hazards import RULES
    from simtc.kernels.hazards import EXPECTED

    rows = _table_rows(_text(site / "engine.html"))
    rules = {r[0]: r for r in rows if len(r) == 3}
    for rule in RULES.values():
        assert rule.name in rules, rule.name
        assert rules[rule.name][1] == rule.text and rules[rule.name][2] == rule.ref
    flagged = {r[0]: r[2] for r in rows if len(r) == 4 and r[0].startswith("hazard/")}
    assert flagged == {n: rule for n, rule in EXPECTED.items() if rule is not None}


def test_engine_page_calibration_tables(site):
    import json

    rows = _table_rows(_text(site / "engine.html"))
    b200 = [r for r in rows if len(r) == 8 and r[0] in ("SS", "TS")]
    assert len(b200) == 12 and all(r[3] == r[4] or abs(float(r[3]) - float(r[4])) <= 2 for r in b200)
    h200 = json.loads((ROOT / "tests" / "data" / "h200_wgmma_timing.json").read_text())["rows"]
    shapes = {(r[0], r[1]) for r in rows if len(r) == 6 and r[0] in ("SS", "RS")}
    assert shapes == {(r["operands"], str(r["n"])) for r in h200}
    assert "calibrated on these 20 shapes" in _text(site / "engine.html")


def test_flashmla_page_lists_every_mutation_and_variant(site):
    from simtc.kernels.flashmla.alternatives import VARIANTS
    from simtc.kernels.flashmla.mutations import CATALOGUE

    html = _text(site / "flashmla.html")
    rows = _table_rows(html)
    caught = {r[0]: r[2] for r in rows if len(r) == 4 and r[0] in CATALOGUE}
    assert caught == {m.name: m.caught_by for m in CATALOGUE.values()}
    variants = [r[0] for r in rows if len(r) == 10 and r[0] != "variant"]
    assert variants == list(VARIANTS)
    assert "rowwise_max_buf" in html and "[inferred]" in html and "350" in html


def test_flashmla_page_states_the_throughput_as_a_prediction(site):
    """Whole-kernel and steady-state figures from the replay, what binds (units and sensitivity), the published
    figure as an open gap; never called a bound."""
    html = _text(site / "flashmla.html")
    text = " ".join(re.sub(r"<[^>]+>", " ", html).split())
    assert "upper bound" not in text and "upper-bound" not in text
    for phrase in ("whole kernel: TFLOP/s", "steady state: TFLOP/s", "shared-memory port", "smem_port_bytes_per_cycle",
                   "cvt_lanes", "350", "open"):
        assert phrase in text, phrase
    for page in ("index", "fidelity", "engine"):
        assert "upper bound" not in _text(site / f"{page}.html"), page


def test_gallery_svgs_are_generated_and_valid(site):
    html = _text(site / "gallery.html")
    images = re.findall(r'src="gallery/([\w]+\.svg)"', html)
    assert len(images) >= 8
    for name in images:
        root = ET.parse(site / "gallery" / name).getroot()
        assert root.tag.endswith("svg")
    assert not list((ROOT / "docs").rglob("*.svg")), "gallery SVGs are generated at build time, not stored"


def test_start_page_shows_the_readme_commands(site):
    html = _text(site / "start.html")
    readme = _text(ROOT / "README.md")
    for marker in ("main-command", "test-command"):
        block = re.search(rf"<!-- {marker} -->\s*```bash\n(.*?)\n```", readme, re.S).group(1)
        assert block.split("&&")[-1].strip().split()[-1] in html


def test_architecture_import_table_is_generated(site):
    html = _text(site / "architecture.html")
    for pkg in ("smem", "tmem", "numerics", "mma", "render", "cli"):
        assert f"<code>{pkg}</code>" in html


def _load_script(name: str):
    spec = importlib.util.spec_from_file_location(f"_simtc_docs_{name}_t", ROOT / "docs" / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_concept_page_with_outputs_embeds_views_and_text():
    """Each code cell is followed by its outputs: rich HTML raw in a frame that scrolls sideways (with the note
    that says so, marked shown when the picture is wider than the column), text fenced, a widget as the picture it
    offers with a note."""
    nbformat = pytest.importorskip("nbformat")
    notebooks = _load_script("notebooks")
    src = notebooks.sources()[0]
    nb = nbformat.reads(notebooks.notebook_json(notebooks.cells_of(src)), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    wide = "x" * (notebooks.FRAME_COLUMNS + 1)
    code[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="hello 0x4000404000010000\n")]
    code[1].outputs = [nbformat.v4.new_output("display_data", data={"text/html": "<pre>TILE</pre>",
                                                                     "text/plain": "PLAIN-REPR"})]
    code[2].outputs = [nbformat.v4.new_output("display_data", data={"text/html": f"<pre>{wide}</pre>"})]
    code[3].outputs = [nbformat.v4.new_output("display_data", data={
        "application/vnd.jupyter.widget-view+json": {"model_id": "m", "version_major": 2, "version_minor": 0},
        "text/html": "<pre>STEP 3</pre>", "text/plain": "StepperWidget(...)"})]
    page = notebooks.to_markdown(src, executed=nb)
    assert "```text\nhello 0x4000404000010000\n```" in page
    assert '<div class="nb-output nb-scroll" markdown="0">\n<pre>TILE</pre>\n</div>' in page
    assert "PLAIN-REPR" not in page and "StepperWidget(...)" not in page
    assert f'<div class="nb-output nb-scroll nb-wide" markdown="0">\n<pre>{wide}</pre>\n</div>' in page
    assert f"This picture is {notebooks.FRAME_COLUMNS + 1} characters wide" in page
    assert "interactive widget" in page and "<pre>STEP 3</pre>" in page
    assert page.index(code[0].source) < page.index("hello") < page.index(code[1].source) < page.index("TILE")
    assert "executed when the site was built" in page
    assert "run it in Jupyter to step through the cells and see every picture" in notebooks.to_markdown(src)


def _visible_text(fragment: str) -> str:
    """An HTML fragment's text as a browser shows it (tags dropped, entities decoded, spaces collapsed)."""
    import html

    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def test_concept_pages_show_every_output_of_the_notebooks(site):
    """The default build (no environment variable) puts every picture, table and printed line of each executed
    notebook on its concept page, in a frame that scrolls where the picture is wider than the column."""
    nbformat = pytest.importorskip("nbformat")
    notebooks = _load_script("notebooks")
    total = 0
    for src in notebooks.sources():
        page = _text(site / "concepts" / f"{src.stem}.html")
        entry = re.search(r"<!-- simtc-executed: ([\w.-]+) -->", page).group(1)  # the executed copy the build used
        nb = nbformat.read(notebooks.cache_dir() / entry, as_version=4)
        assert entry.startswith(src.stem + "-")
        text = _visible_text(page)
        frames = page.count('<div class="nb-output nb-scroll')
        html_outputs = [o["data"]["text/html"] for c in nb.cells if c.cell_type == "code" for o in c.outputs
                        if "text/html" in o.get("data", {})]
        assert frames == len(html_outputs) >= 1, src.stem
        for out in html_outputs:
            shown = _visible_text(out)
            assert shown and shown in text, (src.stem, shown[:80])
            wide = notebooks.columns(out) > notebooks.FRAME_COLUMNS
            assert (f"This picture is {notebooks.columns(out)} characters wide" in page) and (
                not wide or 'nb-scroll nb-wide"' in page)
        streams = [o["text"] for c in nb.cells if c.cell_type == "code" for o in c.outputs
                   if o["output_type"] == "stream" and o["text"].strip()]
        for s in streams:
            assert " ".join(s.split()) in text, (src.stem, s[:80])
        assert "executed when the site was built" in text
        total += len(html_outputs)
    assert total >= 20
    # the pictures are rich's: coloured spans, box-drawing tables
    assert 'style="color:' in _text(site / "concepts" / "02_tensor_memory.html")
    assert any("│" in _visible_text(_text(p)) for p in (site / "concepts").glob("*.html"))
    css = _text(site / "stylesheets" / "simtc.css")
    assert ".nb-output" in css and "overflow-x: auto" in css
    assert "nb-wide" in _text(site / "javascripts" / "simtc.js")


def test_kernel_page_is_built_with_its_tables(site):
    from simtc.kernels.flashmla.models import V32
    from simtc.kernels.flashmla.plan import SMEM_V32

    rows = _table_rows(_text(site / "kernel.html"))
    smem = {r[0]: r[1:3] for r in rows if len(r) == 5 and r[0] in SMEM_V32.names}
    assert smem == {b.name: (f"{b.offset:,}", f"{b.size:,}") for b in SMEM_V32}
    barriers = {r[0].split(" (×")[0].replace("[i]", "[0]"): r[1] for r in rows if len(r) == 5}
    barriers = {n: c for n, c in barriers.items() if n in V32.mbarriers}
    assert barriers == {n: str(c) for n, (_a, c) in V32.mbarriers.items() if not n.endswith(("[1]", "[2]", "[3]"))}
    html_text = _visible_text(_text(site / "kernel.html"))
    assert "9241ae3" in html_text and "bar_q_tma kernel.cuh L46" in html_text
    assert 'href="kernel.html"' in _text(site / "flashmla.html")


def test_concept_pages_in_a_headless_browser(site, tmp_path):
    """Opens every concept page in Chromium (docs/scripts/check_site.py): each notebook picture and text block has
    a nonzero size and is visible, the content column does not overflow, a picture wider than its frame scrolls and
    says so; writes screenshots of each page's first and widest pictures."""
    check = _load_script("check_site")
    why = check.missing_requirements()
    if why:
        pytest.skip(f"no headless browser check: {why}")
    problems, measured = check.check_site(site, tmp_path, full_page=False)
    assert problems == []
    assert set(measured) == {p.stem for p in (site / "concepts").glob("*.html")}
    for name, m in measured.items():
        assert m["outputs"] and all(o["w"] > 0 and o["h"] > 0 for o in m["outputs"]), name
        assert m["content"]["scrollWidth"] <= m["content"]["clientWidth"] + 1
        assert (tmp_path / f"{name}.view.png").stat().st_size > 10_000
        assert (tmp_path / f"{name}.widest.png").stat().st_size > 1_000
    assert any(o["scrollWidth"] > o["clientWidth"] for m in measured.values() for o in m["outputs"])
