"""mkdocs hooks: the generated pages of the documentation site.

At build time (``mkdocs build``; configured in ``mkdocs.yml``) this adds, without writing into
``docs/``:

* ``concepts/<notebook>.md`` -- one page per tutorial notebook, from its source in
  ``notebooks/src/`` (``docs/scripts/notebooks.py``), with every cell's output: the notebooks are
  executed when the site is built, or taken from the cache of executed notebooks when neither they
  nor simtc changed (``notebooks.executed_all``); ``SIMTC_DOCS_EXECUTE=0`` leaves the outputs out
  (a quick draft of the site);
* ``cli.md`` -- the command reference, from ``simtc.cli.build_parser()`` (``cli_reference.py``);
* ``api/<package>.md`` -- the API reference, one page per subpackage of ``simtc``, from the
  docstrings and signatures (``api_reference.py``);
* ``gallery.md`` and ``gallery/*.svg`` -- pictures drawn by ``simtc.render`` (``gallery.py``).

It also expands ``<!-- readme:NAME -->`` markers in pages with the command block that follows
``<!-- NAME -->`` in README.md, so the site's commands are the README's, and ``<!-- generated:NAME -->``
markers with tables computed from the code (``_GENERATED``): the import graph, the ``[inferred]`` tags,
the timing parameters of ``simtc.engine.parameters.PARAMETERS`` (with their labels, sources and the mechanisms
that read them), the engine's record handlers and switchable mechanisms, the calibration data, the hazard rules
and catalogues, and FlashMLA head64's replay, sensitivity and design alternatives (run through the engine when
the site is built).

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
    ['simtc', 'simtc.cli', 'simtc.cuda']
    """
    pkg = ROOT / "simtc"
    names = [p.name for p in pkg.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    names += [p.stem for p in pkg.glob("*.py") if not p.stem.startswith("_")]
    return ["simtc", *(f"simtc.{n}" for n in sorted(set(names)) if not n.startswith("_"))]


def _log_info(message: str) -> None:
    import logging

    logging.getLogger("mkdocs.plugins.simtc").info(message)


def generated_pages() -> dict[str, str]:
    """``{path inside the site: Markdown}`` for every generated page."""
    import os

    nb = _load("notebooks")
    run = os.environ.get("SIMTC_DOCS_EXECUTE", "1") != "0"  # every cell's output (executed or cached notebooks)
    done = nb.executed_all(nb.sources(), log=_log_info) if run else {}
    pages = {f"concepts/{src.stem}.md": nb.to_markdown(src, executed=done.get(src)) for src in nb.sources()}
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
    """Markdown table of every parameter of ``simtc.engine.parameters.PARAMETERS[arch]``, in the table's order:
    value, unit, label, the mechanisms that read it (``used_by``) and its source.

    >>> t = timing_parameter_table("sm90")
    >>> "| `wgmma_issue` | 13 | cycles | measured | tensor pipe, mma model |" in t
    True
    """
    from simtc.engine.parameters import PARAMETERS

    rows = [f"| `{p.name}` | {p.value} | {_cell(p.unit)} | {p.label} | {', '.join(p.used_by)} | "
            f"{_cell(p.source)} |" for p in PARAMETERS[arch].values()]
    return "\n".join(["| parameter | value | unit | label | used by | source |", "|---|---|---|---|---|---|", *rows])


def timing_label_counts() -> str:
    """One line per architecture: how many parameters carry each label.

    >>> "documented" in timing_label_counts()
    True
    """
    from simtc.engine.parameters import LABELS, PARAMETERS

    out = []
    for arch, table in PARAMETERS.items():
        n = {lab: sum(1 for p in table.values() if p.label == lab) for lab in LABELS}
        out.append(f"* `{arch}`: {len(table)} parameters: " + ", ".join(f"{v} {k}" for k, v in n.items()))
    return "\n".join(out)


_READS = {"issue": "issue", "smem_port": "shared-memory port", "tensor_pipe": "tensor pipe", "mma_model": "mma model",
          "tmem_path": "tmem path", "copy_engine": "copy engine", "memory": "memory system", "mbarrier": "mbarrier",
          "named_barrier": "named barrier"}


def parameters_read(key: str) -> str:
    """The parameters a mechanism reads (``used_by`` of the tables), per architecture, with their labels.

    >>> "`cvt_lanes` (64, assumed)" in parameters_read("issue")
    True
    """
    from simtc.engine.parameters import PARAMETERS

    used = _READS[key]
    parts = []
    for arch, table in PARAMETERS.items():
        names = [f"`{p.name}` ({p.value}, {p.label})" for p in table.values() if used in p.used_by]
        parts.append(f"**{arch}**: " + (", ".join(names) if names else "none"))
    return "Parameters read (generated from `used_by`): " + "; ".join(parts) + "."


def mechanisms_table() -> str:
    """``simtc.engine.parameters.MECHANISMS``: what each switchable mechanism models, and what off means.

    >>> from simtc.engine.parameters import MECHANISMS
    >>> all(f"`{m}`" in mechanisms_table() for m in MECHANISMS)
    True
    """
    from simtc.engine.parameters import MECHANISMS

    rows = [f"| `{name}` | {_cell(text)} |" for name, text in MECHANISMS.items()]
    return "\n".join(["| `Timing.without(...)` | what the mechanism models (and what switching it off leaves) |",
                      "|---|---|", *rows])


_HANDLER_TEXT = {
    "bulk_commit": "cp.async.bulk.commit_group: closes the warp's open bulk group (one issue cycle).",
    "wgmma_commit": "wgmma.commit_group: closes the warp's open wgmma group (one issue cycle).",
    "wgmma_wait": "wgmma.wait_group n: until all but the last n committed groups have completed.",
    "init": "mbarrier.init: resets the barrier's state (one issue cycle); re-initialising a barrier in use is "
            "flagged.",
    "alloc": "tcgen05.alloc / dealloc / relinquish_alloc_permit on the engine's allocation table (one issue cycle); "
             "what the allocator refuses is flagged.",
}


def handler_table() -> str:
    """Every record kind's handler (``simtc.engine.handlers.HANDLERS``): the ``simtc.isa`` classes it takes, what it
    does (its docstring) and the timing parameters it reads beyond the issue slot's (``READS``; sm100 names).

    >>> "`tma_load`" in handler_table() and "`tma_issue_gap`" in handler_table()
    True
    """
    from simtc.engine import handlers, ops

    issue = ("sub_partitions", "issue_per_sub_partition")
    classes: dict = {}
    for cls, kind in ops.KIND_OF_CLASS.items():
        classes.setdefault(handlers.HANDLERS[kind].__name__, []).append((cls, kind))
    rows = []
    for name, members in classes.items():
        fn = getattr(handlers, name)
        doc = " ".join((fn.__doc__ or "").split("\n\n")[0].split()).replace("``", "")
        doc = doc or _HANDLER_TEXT.get(name, "one issue cycle.")
        reads = list(dict.fromkeys(n for _, kind in members for n in handlers.READS.get(kind, ()) if n not in issue))
        cell = ", ".join(f"`{n}`" for n in reads)
        if name == "cuda_core":
            cell = ("`warp_interleave`, and per instruction class its pipe's `*_lanes` and `*_latency`; "
                    "`smem_port_bytes_per_cycle` for LDS/STS, the memory system's parameters for LDG/STG")
        rows.append(f"| {', '.join(f'`{c}`' for c, _ in members)} | `{name}` | {_cell(doc)} | {cell or '—'} |")
    return "\n".join(["| records (`simtc.isa`) | handler | what it books, and when the warp goes on | "
                      "parameters it reads (sm100; besides the issue slot's) |", "|---|---|---|---|", *rows])


def _cli_text(argv: list[str], width: int = 100) -> str:
    """What ``simtc ARGV`` prints (run in this process, ``width`` columns wide), as a console block."""
    import contextlib
    import io

    from simtc.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main([*argv, "--term-width", str(width)])
    if rc != 0:
        raise RuntimeError(f"simtc {' '.join(argv)} exited {rc}")
    return f"```console\n$ simtc {' '.join(argv)}\n{buf.getvalue().rstrip()}\n```"


def params_cli() -> str:
    """``simtc timing params --arch sm100 --label documented``, as it prints."""
    return _cli_text(["timing", "params", "--arch", "sm100", "--label", "documented"])


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
    """The hazard catalogue (``simtc.kernels.hazards``): each seeded-bug Program, the PTX section it breaks, its
    rule and its clean twin.

    >>> from simtc.kernels.hazards import BUGS
    >>> all(f"| `{name}` |" in hazard_catalogue_table() for name in BUGS)
    True
    """
    from simtc.kernels.hazards import BUGS, EXPECTED, REFS

    rows = [f"| `{name}` | {_cell(BUGS[name])} ({_cell(REFS[name])}) | `{EXPECTED[name]}` | "
            f"{f'`{name}-fixed`' if f'{name}-fixed' in EXPECTED else '—'} |" for name in sorted(BUGS)]
    return "\n".join(["| program | seeded bug (the PTX section it breaks) | flagged as | clean twin |",
                      "|---|---|---|---|", *rows])


def hazard_correct_table() -> str:
    """The hazard catalogue's tricky correct programs (``simtc.kernels.hazards.CORRECT``): what each shows and the
    PTX section that makes it correct.

    >>> from simtc.kernels.hazards import CORRECT
    >>> all(f"| `{name}` |" in hazard_correct_table() for name in CORRECT)
    True
    """
    from simtc.kernels.hazards import CORRECT, REFS, WHAT

    rows = [f"| `{name}` | {_cell(WHAT[name])} | {_cell(REFS[name])} |" for name in CORRECT]
    return "\n".join(["| program (must run clean) | what it shows | source |", "|---|---|---|", *rows])


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


REPLAY_BLOCKS = 32
"""Blocks of the request the site's throughput figures come from (``simtc replay flashmla-head64 --blocks 32``)."""
SENSITIVITY_BLOCKS = 12
"""Blocks of the timing-only request ``simtc timing sensitivity flashmla-head64`` perturbs (its default)."""


def _replay():
    if "replay" not in _CACHE:
        from simtc.kernels.flashmla.replay import replay

        _CACHE["replay"] = replay("v32", REPLAY_BLOCKS, 0)
    return _CACHE["replay"]


def replay_numbers() -> str:
    """The replay's throughput figures (V32, ``REPLAY_BLOCKS`` blocks, seed 0, every check on), computed when the
    site is built: whole kernel and steady state, the FLOP count, the HBM floor."""
    from simtc.engine.parameters import Timing
    from simtc.kernels.flashmla.constants import B_H, B_TOPK
    from simtc.kernels.flashmla.models import V32
    from simtc.kernels.flashmla.replay import B200_CLOCK_GHZ, PUBLISHED_TFLOPS, hbm_bound

    r = _replay()
    t = Timing("sm100")
    flops = 2 * B_H * B_TOPK * (V32.d_q + V32.d_v)
    hb = hbm_bound("v32")
    chip = t["hbm_bytes_per_cycle"] * B200_CLOCK_GHZ / 1000
    rows = [("replay checks (O, LSE, P bit-exact, hazards, deadlock)", "pass" if r.ok else "**FAIL**"),
            ("request", f"{r.blocks} blocks of {B_TOPK} tokens, seed {r.seed}; O rescaled in blocks "
                        f"{', '.join(map(str, r.rescale_blocks)) or 'none'}"),
            (f"FLOP per block (2 · {B_H} · {B_TOPK} · ({V32.d_q} + {V32.d_v}))", f"{flops:,}"),
            ("whole kernel: simulated cycles (Q load, first block and epilogue included)", f"{r.cycles_whole:,}"),
            (f"whole kernel: TFLOP/s on {r.sm_count} SMs at {B200_CLOCK_GHZ} GHz", f"{r.tflops_whole:,.0f}"),
            ("steady state: cycles per block (`sv_done` phase to phase, mean)", f"{r.cycles_per_block_steady:,.0f}"),
            (f"steady state: TFLOP/s on {r.sm_count} SMs at {B200_CLOCK_GHZ} GHz", f"{r.tflops_steady:,.0f}"),
            ("FlashMLA's published figure (B200, its own benchmark shapes)", f"up to {PUBLISHED_TFLOPS} TFLOP/s"),
            (f"HBM bytes per block ({B_TOPK} tokens × ({V32.tma_k_stride} B record + 4 B index))",
             f"{hb['bytes_per_block']:,}"),
            (f"one SM's share of {chip:.2f} TB/s (`hbm_bytes_per_cycle` / `sm_count`)",
             f"{hb['bytes_per_cycle_per_sm']} B/cycle"),
            ("HBM floor on cycles per block (bytes / share)", f"{hb['min_cycles_per_block']:,.0f}")]
    return "\n".join(["| quantity | value |", "|---|---|", *(f"| {a} | {b} |" for a, b in rows)])


_UNIT_TEXT = {
    "smem_port": ("shared-memory port", "cycles the SM's one shared-memory bandwidth moved bytes"),
    "memory": ("memory link", "cycles the SM's share of HBM carried sectors"),
    "tensor_pipe": ("tensor pipe", "cycles an MMA or `tcgen05.cp` held the pipe"),
    "tmem_path": ("TMEM path", "cycles of `tcgen05.ld` / `st` column transfers"),
    "issue": ("issue slots", "issue cycles summed over the 4 sub-partitions (the share: their mean)"),
    "tma": ("TMA", "cycles with at least one TMA copy in flight (occupancy, not a rate limit)"),
}


def replay_units() -> str:
    """Busy cycles per block of each unit in the replay (``units_per_block``), as a share of the steady-state
    cycles per block."""
    r = _replay()
    cpb = r.cycles_per_block_steady
    rows = []
    for unit, busy in sorted(r.units_per_block.items(), key=lambda kv: -kv[1]):
        name, what = _UNIT_TEXT.get(unit, (unit, ""))
        share = "—" if unit == "tma" else f"{(busy / 4 if unit == 'issue' else busy) / cpb:.0%}"
        rows.append(f"| {name} | {busy:,.0f} | {share} | {what} |")
    return "\n".join(["| unit | busy cycles per block | share of the steady block | what is counted |",
                      "|---|---|---|---|", *rows])


def _measure(t):
    from simtc.kernels.flashmla.replay import steady_cycles_per_block

    return steady_cycles_per_block("v32", SENSITIVITY_BLOCKS, t)


def _sensitivity():
    """``(base, rows)``: the sensitivity of head64's steady-state cycles per block, as ``simtc timing sensitivity
    flashmla-head64`` computes it (cached: one run per build)."""
    if "sensitivity" not in _CACHE:
        from simtc.engine.parameters import Timing
        from simtc.engine.sensitivity import sensitivity

        t = Timing("sm100")
        base = float(_measure(t))
        _CACHE["sensitivity"] = base, sensitivity(_measure, t, base=base)
    return _CACHE["sensitivity"]


def sensitivity_cli(top: int = 12) -> str:
    """``simtc timing sensitivity flashmla-head64 --top 12`` as it prints (its own formatter, the rows computed
    here with the same measure)."""
    from simtc.cli.timing import _sensitivity_lines

    base, rows = _sensitivity()
    what = f"steady-state cycles per block, FlashMLA head64 V32, {SENSITIVITY_BLOCKS} blocks"
    lines = _sensitivity_lines(what, base, [r.as_dict() for r in rows[:top]], ["x0.5", "x2"], 100)
    return "\n".join(["```console", f"$ simtc timing sensitivity flashmla-head64 --top {top}", *lines, "```"])


def sensitivity_table(top: int = 10) -> str:
    """The ``top`` parameters head64's steady-state cycles per block rest on, with labels and the relative change
    at x0.5 and x2; then the parameters that do not move it."""
    base, rows = _sensitivity()
    body = [f"| `{r.name}` | {r.value:g} {_cell(r.unit)} | {r.label} | {100 * r.down:+.1f} % | {100 * r.up:+.1f} % |"
            for r in rows[:top]]
    still = [f"`{r.name}`" for r in rows if r.effect == 0]
    return "\n".join([f"Steady-state cycles per block at the table's values: {base:,.1f} (V32, {SENSITIVITY_BLOCKS} "
                      "blocks, timing only, no O rescale).", "",
                      "| parameter | value | label | x0.5 | x2 |", "|---|---|---|---|---|", *body, "",
                      f"No effect at x0.5 or x2 ({len(still)} of {len(rows)}): {', '.join(still)}."])


def slack_table() -> str:
    """How much slack the dequant warpgroup's pipes have: the conversion and half-precision rates scaled down."""
    from simtc.engine.parameters import Timing
    from simtc.engine.sensitivity import sensitivity

    base, _ = _sensitivity()
    rows = sensitivity(_measure, Timing("sm100"), names=["cvt_lanes", "fp16_lanes"], factors=(0.5, 0.25), base=base)
    body = [f"| `{r.name}` | {r.value:g} {_cell(r.unit)} | {r.label} | {100 * r.change(0.5):+.1f} % | "
            f"{100 * r.change(0.25):+.1f} % |" for r in rows]
    return "\n".join(["| parameter | value | label | x0.5 | x0.25 |", "|---|---|---|---|---|", *body])


def dequant_step_check() -> str:
    """FlashMLA's SM90 dequant step (8 fp8 values -> bf16) measured whole on the H200 (``simtc calibrate``) next to
    the engine's prediction from the per-class rates, as ``tests/engine/test_timing.py`` computes it."""
    import json

    from simtc.engine import Engine
    from simtc.engine.parameters import Timing
    from simtc.isa import CudaCoreBlock, Program, Role

    rec = json.loads((ROOT / "tests" / "data" / "h200_calibration.json").read_text(encoding="utf-8"))
    step = rec["sass"]["cuda_core/dequant/throughput"]["per_step"]
    runs = {r["warps_per_sp"]: r["cycles_per_step_per_sp"] for r in rec["cuda_core"]["dequant"]["throughput"]["runs"]}
    rows = []
    for wps in (1, 2, 4):
        cycles = []
        for steps in (8, 32):
            blk = CudaCoreBlock("dequant", tuple((c, int(n) * steps) for c, n in step.items()))
            prog = Program("dq", (Role("dq", tuple(range(4 * int(wps))), (blk,)),))
            cycles.append(Engine(prog, timing=Timing("sm90")).run().cycles)
        predicted = (cycles[1] - cycles[0]) / 24 / wps
        rows.append(f"| {wps:g} | {predicted:.1f} | {runs[wps]:.1f} | {100 * (predicted / runs[wps] - 1):+.0f} % |")
    sass = ", ".join(f"{_cell(c)} {n:g}" for c, n in step.items())
    return "\n".join([f"SASS per step ({sum(step.values()):g} instructions): {sass}.", "",
                      "| warps per sub-partition | engine (cycles per 8 values) | H200 measured | engine vs measured |",
                      "|---|---|---|---|", *rows])


def wgmma_lds_check() -> str:
    """The H200's shared memory shared by an SS ``wgmma`` chain and LDS.128 streams (``simtc calibrate``), next to
    what the engine's port gives them (the tensor reads first, the warps the cycles left)."""
    import json

    from simtc.engine.parameters import Timing

    rec = json.loads((ROOT / "tests" / "data" / "h200_calibration.json").read_text(encoding="utf-8"))
    w = rec["shared_memory"]["wgmma_lds"]
    port = Timing("sm90")["smem_port_bytes_per_cycle"]
    alone, both = w["wgmma_alone"], w["together"]
    rows = [("`wgmma` m64n256k16 SS chain, alone", f"{alone['smem_bytes_per_cycle']:.1f}",
             f"{alone['cycles_per_wgmma']:.1f} cycles per instruction"),
            ("LDS.128 streams, alone", f"{w['lds_alone']['bytes_per_cycle']:.1f}", ""),
            ("together: the `wgmma` chain", f"{both['wgmma_smem_bytes_per_cycle']:.1f}",
             f"{both['cycles_per_wgmma']:.1f} cycles per instruction"),
            ("together: the LDS.128 streams", f"{both['lds_bytes_per_cycle']:.1f}",
             f"the engine gives them {port - both['wgmma_smem_bytes_per_cycle']:.1f} (the port's {port} less the "
             "chain's)"),
            ("together: sum", f"{both['sum_bytes_per_cycle']:.1f}", f"of the {port} B/cycle port")]
    return "\n".join(["| H200, one SM | bytes per cycle | note |", "|---|---|---|",
                      *(f"| {a} | {b} | {c} |" for a, b, c in rows)])


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
              "hazard_catalogue": hazard_catalogue_table, "hazard_correct": hazard_correct_table,
              "mutations": mutation_table,
              "alternatives": alternatives_table, "head64_barriers": head64_barrier_table,
              "head64_counts": head64_counts_table, "replay_numbers": replay_numbers, "replay_units": replay_units,
              "formats_link": formats_link, "mechanisms": mechanisms_table, "handlers": handler_table,
              "params_cli": params_cli, "sensitivity_cli": sensitivity_cli, "sensitivity": sensitivity_table,
              "slack": slack_table, "dequant_step": dequant_step_check, "wgmma_lds": wgmma_lds_check,
              **{f"reads_{key}": (lambda key=key: parameters_read(key)) for key in _READS}}


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


def _generated(name: str) -> str:
    """The Markdown of a ``<!-- generated:NAME -->`` marker: this file's tables, then the kernel page's."""
    if name in _GENERATED:
        return _GENERATED[name]()
    return _load("kernel").GENERATED[name]()


def on_page_markdown(markdown, page, config, files):
    markdown = re.sub(r"<!-- readme:([\w-]+) -->", lambda m: readme_block(m.group(1)), markdown)
    return re.sub(r"<!-- generated:(\w+) -->", lambda m: _generated(m.group(1)), markdown)
