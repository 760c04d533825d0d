"""docs/kernel.md: its tables are simtc's model, and every FlashMLA line it cites says what the page says.

``docs/scripts/kernel.py`` generates the page's tables from ``simtc.kernels.flashmla`` and checks the model against
the facts it reads from FlashMLA's source at ``9241ae3`` (counts, formulas, branches, names, each with its line).
``tests/data/flashmla_head64_digests.json`` holds a SHA-256 digest of each cited line, never the line; with a
FlashMLA checkout (``SIMTC_FLASHMLA_DIR``) the digests, the page's citations and the table facts are checked against
the lines themselves. No mkdocs needed (the built page is checked in tests/test_docs_site.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import pytest

from simtc.errors import SimtcError

ROOT = Path(__file__).resolve().parents[1]
CHECKOUT = os.environ.get("SIMTC_FLASHMLA_DIR")
needs_checkout = pytest.mark.skipif(not CHECKOUT, reason="set SIMTC_FLASHMLA_DIR to a FlashMLA checkout that has "
                                                         "commit 9241ae3 (the repository holds digests, not its lines)")


@pytest.fixture(scope="module")
def kp():
    spec = importlib.util.spec_from_file_location("_simtc_docs_kernel_t", ROOT / "docs" / "scripts" / "kernel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def page(kp) -> str:
    return kp.page_text()


@pytest.fixture(scope="module")
def lines(kp) -> dict[str, list[str]]:
    return kp.source_lines(Path(CHECKOUT))


def test_every_citation_is_recorded_and_follows_a_short_fragment(kp, page):
    cites = kp.citations(page)
    assert len(cites) >= 100  # prose and tables
    assert {f for f, *_ in cites} == {"kernel.cuh", "config.h"}
    assert kp.check(page) == []


def test_a_quote_of_the_source_or_a_bare_citation_is_refused(kp, page):
    long = "`" + "x" * (kp.MAX_QUOTE + 1) + "`"
    assert kp.check(page + f"\nThe first barrier ({long} kernel.cuh L45).")[0].startswith(
        "kernel.cuh L45: `xxxx")
    assert kp.check(page + "\nThe end (`}` kernel.cuh L968).") == ["kernel.cuh L968: line 968 is not recorded"]
    assert kp.check("TMEM is allocated here (kernel.cuh L63).")[0].endswith("no fragment is in the line(s) cited")


def test_the_recording_is_the_commit_holds_every_cited_line_and_no_text(kp, page):
    rec = kp.recording()
    assert rec["repository"] == "deepseek-ai/FlashMLA" and rec["commit"].startswith("9241ae3")
    assert len(rec["commit"]) == 40
    for entry in rec["files"].values():
        assert re.fullmatch(r"[0-9a-f]{40}", entry["blob"]) and entry["line_count"] > 200
        assert all(1 <= int(n) <= entry["line_count"] for n in entry["lines"])
        assert all(re.fullmatch(r"[0-9a-f]{64}", d) for d in entry["lines"].values()), "digests only, no lines"
    wanted = {}
    for file, ranges, _s, _e in kp.citations(page):
        wanted.setdefault(kp.FILES[file], set()).update(kp.lines_to_record(ranges))
    assert {p: {str(n) for n in ns} for p, ns in wanted.items()} == {p: set(e["lines"]) for p, e in
                                                                     rec["files"].items()}, \
        "the recording is not the page's lines: python docs/scripts/kernel.py --record <FlashMLA checkout>"


@needs_checkout
def test_the_recording_the_citations_and_the_facts_match_a_flashmla_checkout(kp):
    assert kp.verify(Path(CHECKOUT)) == []


@needs_checkout
def test_a_citation_moved_to_another_line_is_caught_against_the_checkout(kp, page, lines):
    """Swapping two barriers' init citations, or a table fact on the wrong line, fails against the real lines."""
    assert kp.check(page, lines=lines) == [] and kp.site_problems(lines) == []
    swapped = re.sub(r"kernel\.cuh L(45|59)(?![\d-])", lambda m: f"kernel.cuh L{104 - int(m.group(1))}", page)
    problems = kp.check(swapped, lines=lines)
    n = len(re.findall(r"kernel\.cuh L(45|59)(?![\d-])", page))
    assert n >= 2 and len(problems) == n and all("is in the line(s) cited" in p for p in problems)
    moved = {**lines, "kernel.cuh": [*lines["kernel.cuh"]]}
    moved["kernel.cuh"][593], moved["kernel.cuh"][589] = lines["kernel.cuh"][589], lines["kernel.cuh"][593]
    assert any("L594: raw_free[i] wait by raw" in p for p in kp.site_problems(moved))
    rec = kp.recording()
    entry = rec["files"][kp.FILES["kernel.cuh"]]
    assert entry["lines"]["46"] == kp.digest(lines["kernel.cuh"][45]) != kp.digest(lines["kernel.cuh"][44])


def test_tables_are_the_model(kp, page):
    from simtc.kernels.flashmla.head64 import ROLE_WARPS
    from simtc.kernels.flashmla.models import NAMED_BARRIERS, V32

    for b in V32.smem:
        assert f"| `{b.name}` | {b.offset:,} | {b.size:,} |" in page, b.name
    for name, (addr, count) in V32.mbarriers.items():
        key, n = re.sub(r"\[\d+\]", "[i]", name), sum(1 for m in V32.mbarriers if m.startswith(name.split("[")[0]))
        if name.endswith("[0]") or "[" not in name:
            assert (f"| `{key}` (×{n}) | {count} |" if n > 1 else f"| `{key}` | {count} |") in page, name
            assert f"* `{key}` (at {addr:,}" in page, name
    for name, (hw, threads) in NAMED_BARRIERS.items():
        assert f"| `{name}` | {hw} | {threads} |" in page
    for role, warps in ROLE_WARPS.items():
        w = f"{warps[0]}–{warps[-1]}" if len(warps) > 1 else str(warps[0])
        assert f"| `{role}` | {w} |" in page
    for r in V32.tmem:
        assert f"| `{r.name}` | {r.lanes[0]}–{r.lanes[1]} | {r.columns[0]}–{r.columns[1]} |" in page
    assert "| `valid_coord_scale_free[i]` (×4) | 258 |" in page
    assert "init: `init(128+128+1+1)` kernel.cuh L59" in page
    assert "| 32,768 |" in page and "| 73,728 |" in page and "| 8,192 |" in page  # transaction bytes
    assert "<!-- generated:" not in page


def test_a_model_that_disagrees_with_the_source_stops_the_page(kp, monkeypatch):
    sites = dict(kp.BARRIER_SITES)
    sites["nope_ready[i]"] = [("init", "", 50, "64"), *sites["nope_ready[i]"][1:]]
    monkeypatch.setattr(kp, "BARRIER_SITES", sites)
    with pytest.raises(SimtcError, match="mbarrier counts are the kernel's"):
        kp.mbarrier_table()
    sites["nope_ready[i]"] = [*kp.BARRIER_SITES["nope_ready[i]"][:1], ("arrive", "softmax", 837, None),
                              *kp.BARRIER_SITES["nope_ready[i]"][2:]]
    with pytest.raises(SimtcError, match="who arrives and who waits"):
        kp.mbarrier_table()
    monkeypatch.undo()
    smem = dict(kp.SMEM_SITES)
    smem["s"] = (smem["s"][0], smem["s"][1], "B_H*B_TOPK*sizeof(float)")
    monkeypatch.setattr(kp, "SMEM_SITES", smem)
    with pytest.raises(SimtcError, match="shared-memory plan is the kernel's struct"):
        kp.smem_table()
    monkeypatch.undo()
    from simtc.kernels.flashmla import constants

    monkeypatch.setattr(constants, "P_COLUMN", 432)
    with pytest.raises(SimtcError, match="the model's constants are the kernel's"):
        kp.constants_table()


def test_recording_file_is_deterministic_json(kp):
    text = kp.RECORDING.read_text(encoding="utf-8")
    assert text == json.dumps(json.loads(text), indent=1, sort_keys=True) + "\n"
