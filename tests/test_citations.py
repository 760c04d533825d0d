"""Every fact cites a source a reader can open: no citation of a fact sheet kept outside the repository.

A hardware fact in simtc's code, docs, notebooks and examples cites a PTX ISA section, a FlashMLA or CUTLASS
file and line at a named commit, or a recording under ``tests/data`` (docs/sources.md). These tests scan the
text of README.md, docs/, notebooks/ (sources and ``.ipynb``), simtc/, examples/, benchmarks/ and the tests
and fail on:

* a fact-sheet file name (``tcgen05.md``, ``flashmla_head64.md``, ``timing.md``, ``numerics.md``,
  ``toolchain.md``) that is not a file of this repository (``docs/numerics.md`` is a page of the site),
  a path into ``shared/spec`` or ``shared/data`` beside the checkout, or the words "fact sheet" / "the spec";
* a ``§`` section that is not anchored to a document a reader has: PTX (the paragraph names PTX, the ISA or
  ``[doc]``), a numbered heading of the same file, a numbered heading of the notebook it names, or a public
  document named on the same line (an ``owner/repo`` path, directly or through a string constant of the file);
* a FlashMLA / CUTLASS source file cited with a line number where neither the paragraph nor the file names a
  commit of that project (the convention: a module docstring says "at ``9241ae3``" once, its citations after
  it rely on that).

The rules are regular expressions over the citation forms, not a list of lines: a new citation in any of these
forms is checked as it is written.

The repository also holds no other project's text or files (facts and figures are cited, never copied): no line
of FlashMLA's source at ``9241ae3`` of 30 characters or more appears in any text file of the repository (checked
against a checkout named by ``SIMTC_FLASHMLA_DIR``, by digest: a repository line, a backquoted or quoted span of
it, or a comment's text, whitespace collapsed, against every such line of the checkout), the kernel page's
recording holds digests only, and no copy of the published B200 CSV is committed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve()

FACT_SHEETS = ("tcgen05.md", "flashmla_head64.md", "timing.md", "numerics.md", "toolchain.md")
"""The file names of the fact sheets that used to be cited (readers do not have them)."""

_TEXT_SUFFIXES = {".py", ".md", ".ipynb", ".yml", ".yaml", ".toml", ".txt", ".cu", ".cuh", ".h", ".cpp", ".sh",
                  ".css", ".js", ".json"}


def scanned_files() -> list[Path]:
    """README.md, mkdocs.yml, docs/, notebooks/, simtc/, examples/, benchmarks/ and tests/ (their text files;
    this file aside, which spells the patterns it looks for; tests/data's recordings aside, its READMEs in)."""
    out = [ROOT / "README.md", ROOT / "mkdocs.yml"]
    for top in ("docs", "notebooks", "simtc", "examples", "benchmarks", "tests"):
        for p in sorted((ROOT / top).rglob("*")):
            rel = p.relative_to(ROOT).parts
            if not p.is_file() or p.suffix not in _TEXT_SUFFIXES or "__pycache__" in rel or p == HERE:
                continue
            if rel[:2] == ("tests", "data") and p.suffix != ".md":
                continue
            out.append(p)
    return [p for p in out if p.exists()]


def text_of(path: Path) -> str:
    """A file's text; a notebook's cell sources joined (blank line between cells), outputs aside."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".ipynb":
        cells = json.loads(text)["cells"]
        return "\n\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in cells)
    return text


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _paragraph(text: str, pos: int) -> str:
    """The block of non-blank lines around ``pos`` (a Markdown paragraph, a docstring or comment block)."""
    start = text.rfind("\n\n", 0, pos)
    end = text.find("\n\n", pos)
    return text[start + 1 if start >= 0 else 0:end if end >= 0 else len(text)]


def _resolves(token: str, path: Path) -> bool:
    """Whether ``token`` (a path as written) names a file of this repository, from the root or the citing file."""
    for base in (ROOT, path.parent, ROOT / "docs"):
        target = (base / token).resolve()
        if target.is_file() and target.is_relative_to(ROOT):
            return True
    return False


# ---- rule 1: fact sheets ----------------------------------------------------------------------------------------
_MD_TOKEN = re.compile(r"(?<![\w.-])(?P<token>[\w./-]*?(?P<name>[\w-]+\.md))\b")
_OUTSIDE = [
    (re.compile(r"shared/(?:spec|data)\b"), "a path into shared/spec or shared/data beside the checkout"),
    (re.compile(r"\.\./shared\b"), "a path to ../shared beside the checkout"),
    (re.compile(r"\bfact[\s_-]?sheets?\b", re.I), "a fact sheet"),
    (re.compile(r"\bthe spec\b", re.I), "'the spec' (name the PTX ISA section or the source file instead)"),
]


def fact_sheet_citations(text: str, path: Path) -> list[str]:
    """``line: what`` for every citation of a fact sheet in ``text`` (the file at ``path``).

    >>> p = ROOT / "simtc" / "x.py"
    >>> fact_sheet_citations("see tcgen05.md §3 and\\n`docs/numerics.md`, [x](numerics.md)", p)
    ['1: tcgen05.md (a fact sheet, not a file of this repository)']
    >>> fact_sheet_citations("the ../shared/spec notes; the spec says", p)
    ['1: a path into shared/spec or shared/data beside the checkout', '1: a path to ../shared beside the checkout', \
"1: 'the spec' (name the PTX ISA section or the source file instead)"]
    >>> fact_sheet_citations("tcgen05_mma_ws.md §2, mma_spec(...)", p)
    []
    """
    out = []
    for m in _MD_TOKEN.finditer(text):
        if m.group("name") in FACT_SHEETS and not _resolves(m.group("token"), path):
            out.append(f"{_line(text, m.start())}: {m.group('token')} (a fact sheet, not a file of this repository)")
    for pattern, what in _OUTSIDE:
        out += [f"{_line(text, m.start())}: {what}" for m in pattern.finditer(text)]
    return out


# ---- rule 2: § sections -----------------------------------------------------------------------------------------
_SECTION = re.compile(r"§\s?(?P<num>\d+(?:\.\d+)*)")
_PTX = re.compile(r"\bPTX\b|\bISA\b|\[doc\b|docs\.nvidia\.com/cuda/parallel-thread-execution")
_PTX_NUMBER = re.compile(r"9\.7\.\d+")  # §9.7.N...: the PTX ISA's instruction sections (no fact sheet went as deep)
_HEADING = re.compile(r"^(?:#\s)?#{1,6}\s+(?P<num>\d+(?:\.\d+)*)\.?\s", re.M)
_NOTEBOOK = re.compile(r"notebook\s+(?P<nb>\d\d)\s*(?:§|section\s)\s?(?P<num>\d+)")
_REPO = re.compile(r"\b[A-Za-z0-9][\w.-]*/[\w.-]+\s+[\w./-]+\.\w+")  # owner/repo path/to/file.ext


def _headings(text: str) -> set[str]:
    return {m.group("num").rstrip(".") for m in _HEADING.finditer(text)}


def _notebook_headings(nb: str) -> set[str]:
    src = next((ROOT / "notebooks" / "src").glob(f"{nb}_*.py"), None)
    return _headings(src.read_text(encoding="utf-8")) if src else set()


def unanchored_sections(text: str) -> list[str]:
    """``line: §N`` for every ``§`` not anchored to a document a reader has (see the module docstring).

    >>> unanchored_sections("PTX ISA 9.0 §9.7.16.1.\\n\\n## 3. Issue\\nthe scoreboard (§3) and §8.2")
    ['4: §8.2 (not a PTX section, a heading of this file, or a section of a named public document)']
    >>> unanchored_sections('_X = "acme/bench umma/ws.md (GB200)"\\n\\nrow = f"{_X} §2"')
    []
    """
    own = _headings(text)
    out = []
    for m in _SECTION.finditer(text):
        num = m.group("num")
        if _PTX_NUMBER.match(num) or _PTX.search(_paragraph(text, m.start())) or num in own:
            continue
        line_start = text.rfind("\n", 0, m.start()) + 1
        before = text[line_start:m.start()]
        nb = _NOTEBOOK.search(text[max(line_start, m.start() - 20):m.end()])
        if nb and nb.group("num") in _notebook_headings(nb.group("nb")):
            continue
        if _REPO.search(before):
            continue
        var = re.search(r"\{(\w+)\}\s*$", before)
        if var and re.search(rf"^{var.group(1)}\s*=\s*['\"][^'\"]*{_REPO.pattern}", text, re.M):
            continue
        out.append(f"{_line(text, m.start())}: §{num} (not a PTX section, a heading of this file, or a section of a "
                   "named public document)")
    return out


# ---- rule 3: FlashMLA / CUTLASS line citations name a commit ------------------------------------------------------
_SOURCE_FILE = r"(?P<file>[\w./-]*\w\.(?:cuh|hpp|h|cu|cpp|inl))"
_LINE_REF = r"(?P<line>\bL\s?\d+|\blines?\s+\d+|:\d+(?!:\d)|#L\d+)"
_CITATION = re.compile(_SOURCE_FILE + r"\b[`'\")\]]*(?:,|\s|\(|at\s+`*[0-9a-f]{7,40}`*)*" + _LINE_REF)
_COMMIT = re.compile(r"(?<![\w/.-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?![\w-])")
_PROJECT_WORDS = {"cutlass": re.compile(r"cutlass|\bcute\b|cute/", re.I),
                  "flashmla": re.compile(r"flashmla|csrc/|kerutils|head64|kernel\.cuh|config\.h", re.I)}


def _project(file: str) -> str:
    """CUTLASS for CuTe/CUTLASS paths and ``.hpp`` headers; FlashMLA (and its kerutils) otherwise."""
    return "cutlass" if re.search(r"(^|/)(cute|cutlass)/", file) or file.endswith(".hpp") else "flashmla"


def _commit_owner(text: str, m: re.Match) -> str | None:
    """The project a commit belongs to: the nearest project word before it (within 200 characters), else the first
    after it."""
    before = [(w.end(), name) for name, words in _PROJECT_WORDS.items()
              for w in words.finditer(text, max(0, m.start() - 200), m.start())]
    if before:
        return max(before)[1]
    after = [(w.start(), name) for name, words in _PROJECT_WORDS.items()
             for w in words.finditer(text, m.end(), m.end() + 200)]
    return min(after)[1] if after else None


def _names_commit(text: str, project: str) -> bool:
    """Whether ``text`` names a commit of ``project``."""
    return any(_commit_owner(text, m) == project for m in _COMMIT.finditer(text))


def uncommitted_citations(text: str, path: Path) -> list[str]:
    """``line: file Lnn`` for every FlashMLA / CUTLASS file cited with a line number and no commit in sight.

    >>> p = ROOT / "simtc" / "x.py"
    >>> uncommitted_citations("FlashMLA kernel.cuh L43 sets the barriers", p)
    ['1: kernel.cuh L43 (FlashMLA/CUTLASS line citation without a commit in its paragraph or file)']
    >>> uncommitted_citations("FlashMLA at ``9241ae3``.\\n\\nkernel.cuh lines 43-62; config.h:22", p)
    []
    >>> uncommitted_citations("CUTLASS `cute/arch/copy.hpp` line 9 (FlashMLA 9241ae3)", p)
    ['1: cute/arch/copy.hpp` line 9 (FlashMLA/CUTLASS line citation without a commit in its paragraph or file)']
    >>> uncommitted_citations("the fault is at /tmp/api/oob.cu:2", p)
    []
    """
    out = []
    for m in _CITATION.finditer(text):
        file = m.group("file")
        if _resolves(file, path):
            continue  # a file of this repository
        if file.startswith("/"):
            continue  # an absolute path: a user's own file (a fault report's CUDA line), not another project's
        para = _paragraph(text, m.start())
        project = _project(file)
        if _names_commit(para, project) or _names_commit(text, project):
            continue
        out.append(f"{_line(text, m.start())}: {m.group(0)} (FlashMLA/CUTLASS line citation without a commit in "
                   "its paragraph or file)")
    return out


# ---- the tests ------------------------------------------------------------------------------------------------------
FILES = scanned_files()


def _violations(check) -> list[str]:
    out = []
    for path in FILES:
        text = text_of(path)
        for v in check(text, path):
            out.append(f"{path.relative_to(ROOT)}:{v}")
    return out


def test_the_scan_covers_every_kind_of_file():
    rel = {p.relative_to(ROOT).as_posix() for p in FILES}
    assert {"README.md", "docs/index.md", "simtc/kernels/flashmla/head64.py"} <= rel
    assert any(r.startswith("notebooks/src/") for r in rel) and any(r.endswith(".ipynb") for r in rel)
    assert any(r.startswith("examples/") for r in rel) and any(r.startswith("docs/scripts/") for r in rel)
    assert "tests/test_citations.py" not in rel


def test_no_fact_sheet_is_cited():
    bad = _violations(fact_sheet_citations)
    assert not bad, "citations of a fact sheet readers do not have:\n" + "\n".join(bad)


def test_every_section_sign_names_its_document():
    bad = _violations(lambda text, path: unanchored_sections(text))
    assert not bad, "§ references to a document that is not the PTX ISA:\n" + "\n".join(bad)


def test_flashmla_and_cutlass_line_citations_name_a_commit():
    bad = _violations(uncommitted_citations)
    assert not bad, "source-line citations without a commit:\n" + "\n".join(bad)


def test_the_rules_find_what_they_look_for(tmp_path):
    """Each rule flags a planted citation in a file of each kind (so a rule that matches nothing fails here)."""
    planted = ("See tcgen05.md §7 and ../shared/spec/timing.md.\n\nThe fact sheet §4.1 says so; "
               "FlashMLA kernel.cuh L161.\n")
    nb = {"cells": [{"cell_type": "markdown", "source": [planted]}]}
    for name, body in (("x.md", planted), ("x.py", f'"""{planted}"""\n'), ("x.ipynb", json.dumps(nb))):
        p = tmp_path / name
        p.write_text(body, encoding="utf-8")
        text = text_of(p)
        assert len(fact_sheet_citations(text, p)) == 5, (name, fact_sheet_citations(text, p))
        assert [v.split(":")[1].split()[0] for v in unanchored_sections(text)] == ["§7", "§4.1"], name
        assert len(uncommitted_citations(text, p)) == 1, name


@pytest.mark.parametrize("page", ["flashmla.md", "kernel.md", "sources.md"])
def test_kernel_pages_cite_flashmla_at_its_commit(page):
    """The pages about the kernel name FlashMLA's commit, and every FlashMLA line they cite is at that commit."""
    path = ROOT / "docs" / page
    if not path.exists():
        pytest.skip(f"docs/{page} is not in this checkout")
    text = path.read_text(encoding="utf-8")
    assert "9241ae3" in text
    assert not uncommitted_citations(text, path)


# ---- rule 4: no other project's text --------------------------------------------------------------------------------
FLASHMLA_COMMIT = "9241ae3ef9bac614dd25e45e507e089f888280e0"
MIN_COPIED = 30
"""Lines (whitespace collapsed) at least this long count as copied text; shorter ones are names and expressions."""
_SOURCE_SUFFIXES = {".cuh", ".h", ".cu", ".cpp", ".hpp", ".py"}
_SPAN = re.compile(r"`([^`\n]+)`|\"([^\"\n]+)\"|'([^'\n]+)'")
_CODE_OR_PROSE = re.compile(r"[\s()\[\]{}=<>*&+|!?%^~]")
_MARKER = re.compile(r"^\s*(?:#+|//+|/?\*+|>|[-+*]|\d+\.)\s+")
B200_HEADER = "ab_layout,cta_group,m,n,k,latency_cycles,ii_cycles"
"""The header of SemiAnalysisAI/microbench-blackwell's ``umma_latency/fit_results.csv`` (compared, never copied)."""


def line_keys(line: str) -> set[str]:
    """The forms of a line compared for copying: whitespace collapsed, without a trailing ``//`` comment, without a
    trailing ``;``/``,``/``{``; only forms of :data:`MIN_COPIED` characters or more that are code or prose (they hold
    a space, a bracket or an operator: a bare name, path, flag or PTX mnemonic is not text of anyone's) and no
    ``#include`` (naming a header is how one calls it).

    >>> sorted(line_keys("    table.lookup_entry(row*COLS + col);  // note"))
    ['table.lookup_entry(row*COLS + col)', 'table.lookup_entry(row*COLS + col);', \
'table.lookup_entry(row*COLS + col); // note']
    >>> sorted(line_keys("cache.store_entry(ROW_COUNT*COLUMNS);"))
    ['cache.store_entry(ROW_COUNT*COLUMNS)', 'cache.store_entry(ROW_COUNT*COLUMNS);']
    >>> line_keys('#include "smxx/decode/combine/combine.h"'), line_keys("-U__CUDA_NO_HALF_OPERATORS__"), \
line_keys("tcgen05.fence::before_thread_sync;")
    (set(), set(), set())
    """
    full = " ".join(line.split())
    forms = {full, " ".join(line.split("//")[0].split())}
    forms |= {f.rstrip(";,{ ").rstrip() for f in forms}
    return {f for f in forms if len(f) >= MIN_COPIED and _CODE_OR_PROSE.search(f) and not f.startswith("#include")}


def candidate_keys(line: str) -> set[str]:
    """What of a repository line could be a copy: the line, the line without a comment or list marker, and every
    backquoted or quoted span in it."""
    spans = {next(s for s in m.groups() if s is not None) for m in _SPAN.finditer(line)}
    out: set[str] = set()
    for c in {line, _MARKER.sub("", line), *spans}:
        out |= line_keys(c)
    return out


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def source_digests(checkout: Path, commit: str = FLASHMLA_COMMIT) -> set[str]:
    """The digests of every :func:`line_keys` form of every source line of a FlashMLA checkout at ``commit`` (read with
    git: ``ls-tree`` and ``cat-file --batch``), or of the files on disk when the checkout is not a git repository."""
    texts: list[str] = []
    try:
        names = subprocess.run(["git", "-C", str(checkout), "ls-tree", "-r", "--name-only", commit],
                               capture_output=True, text=True, check=True).stdout.split("\n")
        names = [n for n in names if Path(n).suffix in _SOURCE_SUFFIXES]
        out = subprocess.run(["git", "-C", str(checkout), "cat-file", "--batch"], capture_output=True, check=True,
                             input="".join(f"{commit}:{n}\n" for n in names).encode()).stdout
        pos = 0
        while pos < len(out):
            header_end = out.index(b"\n", pos)
            size = int(out[pos:header_end].split()[2])
            texts.append(out[header_end + 1:header_end + 1 + size].decode("utf-8", "replace"))
            pos = header_end + 2 + size
    except (subprocess.CalledProcessError, FileNotFoundError):
        texts = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(checkout.rglob("*"))
                 if p.is_file() and p.suffix in _SOURCE_SUFFIXES and ".git" not in p.parts]
    return {_digest(k) for text in texts for line in text.splitlines() for k in line_keys(line)}


def repository_texts() -> list[tuple[str, str]]:
    """``(path, text)`` of every text file of README.md, mkdocs.yml, docs/, notebooks/ (cell sources and outputs),
    simtc/, examples/, benchmarks/ and tests/, tests/data's recordings included (compressed and binary files aside)."""
    out = []
    for p in [ROOT / "README.md", ROOT / "mkdocs.yml"] + [q for top in ("docs", "notebooks", "simtc", "examples",
                                                                         "benchmarks", "tests")
                                                          for q in sorted((ROOT / top).rglob("*"))]:
        if not p.is_file() or "__pycache__" in p.parts or (p.suffix not in _TEXT_SUFFIXES and p.suffix != ".csv"):
            continue
        text = p.read_text(encoding="utf-8", errors="replace")
        if p.suffix == ".ipynb":
            parts = []
            for cell in json.loads(text)["cells"]:
                parts.append("".join(cell["source"]))
                for o in cell.get("outputs", []):
                    parts += ["".join(o.get("text", "")), *("".join(v) for k, v in o.get("data", {}).items()
                                                            if k.startswith("text/"))]
            text = "\n".join(parts)
        out.append((p.relative_to(ROOT).as_posix(), text))
    return out


def copied_lines(digests: set[str], texts: list[tuple[str, str]]) -> list[str]:
    """``path:line: text`` for every repository line a :func:`candidate_keys` form of which is a source line.

    >>> copied_lines({_digest("for (int k = 0; k < size<2>(tA); ++k)")},
    ...              [("x.md", "ok\\n`for (int k = 0;   k < size<2>(tA); ++k) {`")])
    ['x.md:2: for (int k = 0; k < size<2>(tA); ++k)']
    """
    out = []
    for path, text in texts:
        for n, line in enumerate(text.splitlines(), 1):
            hits = sorted(k for k in candidate_keys(line) if _digest(k) in digests)
            if hits:
                out.append(f"{path}:{n}: {hits[0][:100]}")
    return out


@pytest.mark.skipif(not os.environ.get("SIMTC_FLASHMLA_DIR"),
                    reason="set SIMTC_FLASHMLA_DIR to a FlashMLA checkout with commit 9241ae3 (its lines are not in "
                           "the repository, so nothing here can be compared without it)")
def test_no_flashmla_source_line_is_in_the_repository():
    digests = source_digests(Path(os.environ["SIMTC_FLASHMLA_DIR"]))
    assert len(digests) > 5000, "not a FlashMLA checkout with commit 9241ae3"
    copied = copied_lines(digests, repository_texts())
    assert not copied, ("FlashMLA source lines in the repository (describe them in simtc's words and cite "
                        "file:line at 9241ae3):\n" + "\n".join(copied))


def test_the_kernel_page_recording_holds_digests_not_lines():
    rec = json.loads((ROOT / "tests" / "data" / "flashmla_head64_digests.json").read_text(encoding="utf-8"))
    assert rec["commit"] == FLASHMLA_COMMIT and rec["files"]
    for entry in rec["files"].values():
        assert entry["lines"] and all(re.fullmatch(r"[0-9a-f]{64}", d) for d in entry["lines"].values())
    assert not (ROOT / "tests" / "data" / "flashmla_head64_lines.json").exists()


def test_no_copy_of_the_published_b200_csv_is_committed():
    copies = [path for path, text in repository_texts() if text.lstrip().startswith(B200_HEADER)]
    assert not copies, f"copies of SemiAnalysisAI/microbench-blackwell umma_latency/fit_results.csv: {copies}"
