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
``<!-- NAME -->`` in README.md, so the site's commands are the README's, and ``<!-- generated:NAME -->``
markers with tables computed from the code (``_GENERATED``): the import graph, the ``[inferred]`` tags,
the timing parameters of ``simtc.engine.timing.PARAMETERS`` and their calibration data, the hazard rules
and catalogues, and FlashMLA head64's design alternatives (run through the engine when the site is built).

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


def _cell(text) -> str:
    """Text shown as written inside a Markdown table cell (no emphasis, code, HTML or column breaks).

    >>> _cell("32*(w%4) .. 32*(w%4)+31 | a_b <c>")
    '32\\\\*(w%4) .. 32\\\\*(w%4)+31 \\\\| a\\\\_b &lt;c>'
    """
    out = str(text).replace("\\", "\\\\").replace("&", "&amp;").replace("<", "&lt;").replace("\n", " ")
    for ch in "|*_`[]":
        out = out.replace(ch, "\\" + ch)
    return out


def timing_parameter_table(arch: str) -> str:
    """Markdown table of every parameter of ``simtc.engine.timing.PARAMETERS[arch]``, in the table's order.

    >>> t = timing_parameter_table("sm90")
    >>> "| `wgmma_issue` | 13 | cycles | measured |" in t
    True
    """
    from simtc.engine.timing import PARAMETERS

    rows = [f"| `{p.name}` | {p.value} | {_cell(p.unit)} | {p.label} | {_cell(p.source)} |"
            for p in PARAMETERS[arch].values()]
    return "\n".join(["| parameter | value | unit | label | source |", "|---|---|---|---|---|", *rows])


def timing_label_counts() -> str:
    """One line per architecture: how many parameters carry each label."""
    from simtc.engine.timing import LABELS, PARAMETERS

    out = []
    for arch, table in PARAMETERS.items():
        n = {lab: sum(1 for p in table.values() if p.label == lab) for lab in LABELS}
        out.append(f"* `{arch}`: {len(table)} parameters: " + ", ".join(f"{v} {k}" for k, v in n.items()))
    return "\n".join(out)


def calibration_b200() -> str:
    """The 12 B200 rows, measured next to the model's prediction (computed now).

    >>> len(calibration_b200().splitlines())
    14
    """
    from simtc.engine.calibration import B200_ROWS
    from simtc.engine.timing import predict_mma

    rows = []
    for ab, m, n, lat, ii in B200_ROWS:
        t = predict_mma("sm100", m, n, operands=ab)
        rows.append(f"| {ab} | {m} | {n} | {lat} | {t.latency_cycles} | {ii} | {t.ii_cycles} | {t.bottleneck} |")
    return "\n".join(["| A/B | M | N | latency measured | latency model | II measured | II model | II set by |",
                      "|---|---|---|---|---|---|---|---|", *rows])


def calibration_ws() -> str:
    """The ``.ws`` initiation intervals (GB200), measured / model, for N = 64, 128, 256."""
    from simtc.engine.calibration import WS_N, WS_TABLE
    from simtc.engine.timing import predict_mma

    rows = []
    for (coll, m), measured in WS_TABLE.items():
        cells = [f"{x} / {predict_mma('sm100', m, n, operands='TS', ws=True, collector=coll).ii_cycles}"
                 for n, x in zip(WS_N, measured, strict=True)]
        rows.append(f"| {coll} | {m} | " + " | ".join(cells) + " |")
    return "\n".join(["| collector | M | N = 64 | N = 128 | N = 256 |", "|---|---|---|---|---|", *rows])


def calibration_h200() -> str:
    """Every row of ``tests/data/h200_wgmma_timing.json`` (our H200), measured next to the sm90 model."""
    import json

    from simtc.engine.timing import predict_mma

    data = json.loads((ROOT / "tests" / "data" / "h200_wgmma_timing.json").read_text(encoding="utf-8"))
    rows = []
    for r in data["rows"]:
        t = predict_mma("sm90", 64, int(r["n"]), operands=r["operands"])
        rows.append(f"| {r['operands']} | {r['n']} | {r['latency_cycles']:g} | {t.latency_cycles} | "
                    f"{r['ii_cycles']:.2f} | {t.ii_cycles} |")
    head = [f"{len(rows)} shapes, {_cell(data['device'])}, {data['date']}; `{_cell(data['command'])}`.", "",
            "| A | N | latency measured | latency model | II measured | II model |", "|---|---|---|---|---|---|"]
    return "\n".join([*head, *rows])


def hazard_rules_table() -> str:
    """Every rule of ``simtc.engine.hazards.RULES``: name, meaning, PTX reference.

    >>> from simtc.engine.hazards import RULES
    >>> all(f"`{name}`" in hazard_rules_table() for name in RULES)
    True
    """
    from simtc.engine.hazards import RULES

    rows = [f"| `{r.name}` | {_cell(r.text)} | {_cell(r.ref)} |" for r in RULES.values()]
    return "\n".join(["| rule | what it flags | source |", "|---|---|---|", *rows])


def hazard_catalogue_table() -> str:
    """The hazard catalogue (``simtc.kernels.hazards``): each seeded-bug Program, its rule, its clean twin."""
    from simtc.kernels.hazards import EXPECTED, REGISTRY_ENTRIES

    rows = []
    for name in sorted(EXPECTED):
        if EXPECTED[name] is None:
            continue
        what = REGISTRY_ENTRIES[name][0].removeprefix("hazard catalogue, seeded bug: ").split(" (flagged as")[0]
        twin = f"`{name}-fixed`" if f"{name}-fixed" in EXPECTED else "—"
        rows.append(f"| `{name}` | {_cell(what)} | `{EXPECTED[name]}` | {twin} |")
    return "\n".join(["| program | seeded bug | flagged as | clean twin |", "|---|---|---|---|", *rows])


def mutation_table() -> str:
    """The head64 mutation catalogue (``simtc.kernels.flashmla.mutations.CATALOGUE``).

    >>> from simtc.kernels.flashmla.mutations import CATALOGUE
    >>> all(f"`{name}`" in mutation_table() for name in CATALOGUE)
    True
    """
    from simtc.kernels.flashmla.mutations import CATALOGUE

    rows = [f"| `{m.name}` | {_cell(m.text)} | `{m.caught_by}` | {_cell(m.ref)} |" for m in CATALOGUE.values()]
    return "\n".join(["| mutation | the bug | caught by | source |", "|---|---|---|---|", *rows])


def head64_barrier_table() -> str:
    """FlashMLA head64 (V32)'s mbarriers: expected count, and which roles arrive / commit / wait, read from the
    records of ``head64_program("v32", 4)`` (``[i]`` = one barrier per ring buffer).

    >>> "| `qk_done[i]` | 2 | 1 |" in head64_barrier_table()
    True
    """
    from simtc.kernels.flashmla.head64 import head64_program
    from simtc.kernels.flashmla.models import NAMED_BARRIERS, V32

    prog = head64_program(V32, 4)
    uses: dict[str, dict[str, set]] = {}
    for role in prog.roles:
        for rec in role.records:
            bar = getattr(rec, "bar", None)
            if isinstance(bar, str) and bar in V32.mbarriers:
                key = re.sub(r"\[\d+\]", "[i]", bar)
                uses.setdefault(key, {}).setdefault(rec.opcode, set()).add(role.name)
    counts: dict[str, tuple[int, int]] = {}
    for name, (_addr, count) in V32.mbarriers.items():
        key = re.sub(r"\[\d+\]", "[i]", name)
        counts[key] = (counts.get(key, (0, count))[0] + 1, count)

    def who(ops: dict, waits: bool) -> str:
        items = [f"{', '.join(sorted(r))} (`{op}`)" for op, r in sorted(ops.items())
                 if (op == "mbarrier.try_wait") == waits]
        return "; ".join(items) or "—"

    rows = [f"| `{k}` | {n} | {c} | {who(uses.get(k, {}), False)} | {who(uses.get(k, {}), True)} |"
            for k, (n, c) in counts.items()]
    named = [f"| `{k}` | id {i} | {t} threads |" for k, (i, t) in NAMED_BARRIERS.items()]
    return "\n".join(["| mbarrier | how many | expected arrivals | arrive / complete (role, record) | waited on by |",
                      "|---|---|---|---|---|", *rows, "", "| named barrier | hardware id | count |", "|---|---|---|",
                      *named])


def head64_counts_table() -> str:
    """Per role, one steady-state block's records and CUDA-core SASS counts per thread (``per_block_counts``)."""
    from simtc.kernels.flashmla.head64 import ROLE_WARPS, per_block_counts

    plain, rescale = per_block_counts("v32"), per_block_counts("v32", rescale=True)
    rows = []
    for role, c in plain.items():
        recs = ", ".join(f"{k} {v}" for k, v in c.items() if not k.startswith("cuda_core:"))
        sass = ", ".join(f"{k.removeprefix('cuda_core:')} {v}" for k, v in c.items() if k.startswith("cuda_core:"))
        extra = {k: v - c.get(k, 0) for k, v in rescale[role].items() if v != c.get(k, 0)}
        more = ", ".join(f"{k.removeprefix('cuda_core:')} +{v}" for k, v in extra.items()) or "—"
        w = ROLE_WARPS[role]
        warps = f"{w[0]}–{w[-1]}" if len(w) > 1 else f"{w[0]}"
        rows.append(f"| `{role}` | {warps} | {_cell(recs)} | {_cell(sass) or '—'} | {_cell(more)} |")
    return "\n".join(["| role | warps | records per block | CUDA-core SASS per thread per block | "
                      "with the O rescale |", "|---|---|---|---|---|", *rows])


_CACHE: dict = {}


def _compare_rows():
    if "compare" not in _CACHE:
        from simtc.kernels.flashmla.alternatives import compare

        _CACHE["compare"] = compare("v32", 4, 0)
    return _CACHE["compare"]


def alternatives_table() -> str:
    """``simtc compare flashmla-head64`` (V32, 4 blocks, seed 0) as a table, computed when the site is built."""
    def f(x, spec=",.0f"):
        return "—" if x is None else format(x, spec)

    rows = []
    for v in _compare_rows():
        rows.append(f"| `{v.name}` | {v.tmem_columns} | {v.smem_bytes:,} | {'yes' if v.fits else '**no**'} | "
                    f"{v.mma_per_block} | {f(v.tensor_pipe_busy_per_block)} | {f(v.cycles_per_block)} | "
                    f"{v.exchange_instructions} | {f(v.exchange_cycles_per_block)} | {_cell(v.checks)} |")
    why = [f"* `{v.name}` — {_cell(v.design)}. {_cell(v.why)}" for v in _compare_rows()]
    return "\n".join(["| variant | TMEM columns | SMEM B | fits | MMA / block | tensor pipe busy / block | "
                      "cycles / block | exchange instr. / thread | exchange cycles / block | run as |",
                      "|---|---|---|---|---|---|---|---|---|---|", *rows, "", *why])


def replay_numbers() -> str:
    """The baseline replay's throughput figures (V32, 4 blocks, seed 0), computed when the site is built."""
    from simtc.kernels.flashmla.alternatives import hbm_bound
    from simtc.kernels.flashmla.constants import B_H, B_TOPK
    from simtc.kernels.flashmla.models import V32
    from simtc.kernels.flashmla.replay import B200_CLOCK_GHZ, B200_SMS, PUBLISHED_TFLOPS, replay

    r = replay("v32", 4, 0)
    flops = 2 * B_H * B_TOPK * (V32.d_q + V32.d_v)
    hb = hbm_bound("v32")
    rows = [("replay checks (O, LSE, P, hazards, deadlock)", "pass" if r.ok else "**FAIL**"),
            ("simulated cycles per block (steady state: `sv_done` phase to phase)", f"{r.cycles_per_block:,.0f}"),
            (f"FLOP per block (2 · {B_H} · {B_TOPK} · ({V32.d_q} + {V32.d_v}))", f"{flops:,}"),
            (f"predicted throughput, {B200_SMS} SMs at {B200_CLOCK_GHZ} GHz",
             f"{r.tflops_b200:,.0f} TFLOP/s (upper bound)"),
            ("FlashMLA's published figure (B200)", f"up to {PUBLISHED_TFLOPS} TFLOP/s"),
            (f"KV bytes per block ({B_TOPK} tokens × ({V32.tma_k_stride} B record + 4 B index))",
             f"{hb['bytes_per_block']:,}"),
            ("one SM's share of 8 TB/s HBM", f"{hb['bytes_per_cycle_per_sm']} B/cycle"),
            ("HBM lower bound on cycles per block", f"{hb['min_cycles_per_block']:,.0f}")]
    return "\n".join(["| quantity | value |", "|---|---|", *(f"| {a} | {b} |" for a, b in rows)])


def formats_link() -> str:
    """A link to the FlashMLA input/output format page, when that page exists."""
    if (ROOT / "docs" / "flashmla_formats.md").exists():
        return ("The request format FlashMLA's own inputs and outputs are exchanged in is described in "
                "[FlashMLA input/output files](flashmla_formats.md).")
    return ""


_GENERATED = {"imports": import_table, "tags": tag_table, "timing_sm100": lambda: timing_parameter_table("sm100"),
              "timing_sm90": lambda: timing_parameter_table("sm90"), "timing_labels": timing_label_counts,
              "calibration_b200": calibration_b200, "calibration_ws": calibration_ws,
              "calibration_h200": calibration_h200, "hazard_rules": hazard_rules_table,
              "hazard_catalogue": hazard_catalogue_table, "mutations": mutation_table,
              "alternatives": alternatives_table, "head64_barriers": head64_barrier_table,
              "head64_counts": head64_counts_table, "replay_numbers": replay_numbers, "formats_link": formats_link}


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
