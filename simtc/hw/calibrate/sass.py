"""The offline SASS checks: every benchmark's kernels compiled for sm_90a and their SASS compared with what the
benchmark declares (:func:`check_bench`, :func:`sass_checks`; rules in :mod:`simtc.hw.calibrate`).
"""

from __future__ import annotations

import collections
import fnmatch
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable

from attrs import field, frozen

from simtc.hw.calibrate.benchmarks import SECTIONS, Bench, _check_sections, benches
from simtc.hw.calibrate.sources import _cubin

OTHER_SLACK = 8
"""How much the total count of undeclared SASS (NOP padding aside) may differ between a benchmark's first and
last kernel (compiler choices in the set-up code, e.g. VIADD for IADD3, move counts between mnemonics)."""



def sass_by_kernel(sass: str) -> dict[str, collections.Counter]:
    """Full-mnemonic histograms of each kernel of a disassembled cubin (``nvdisasm -c``), by function name."""
    from simtc.hw.compile import sass_histogram

    blocks: dict[str, list[str]] = {}
    current = None
    for line in sass.splitlines():
        m = re.match(r"^\s*\.text\.([A-Za-z_]\w*):", line)
        if m:
            current = m.group(1)
            blocks[current] = []
        elif current is not None:
            blocks[current].append(line)
    return {k: sass_histogram("\n".join(v), full=True) for k, v in blocks.items()}


def _group_count(hist: collections.Counter, group: str) -> int:
    return sum(n for m, n in hist.items() if any(fnmatch.fnmatchcase(m, p) for p in group.split("|")))


def _in_group(mnemonic: str, groups: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(mnemonic, p) for g in groups for p in g.split("|"))


@frozen
class SassCheck:
    """The offline SASS check of one benchmark."""

    bench: Bench
    ok: bool
    problems: tuple[str, ...]
    histogram: dict = field(factory=dict)
    """Full SASS mnemonics of the first kernel."""
    per_step: dict = field(factory=dict)
    """Measured SASS per step of the declared and glue mnemonics (count difference between the last and first
    kernel / step difference), non-zero entries."""
    other_delta: dict = field(factory=dict)
    """Count differences (last - first kernel) of every other mnemonic but NOP, non-zero entries."""

    def as_dict(self) -> dict:
        b = self.bench
        return {"section": b.section, "kernels": [v.kernel for v in b.variants], "steps": [v.steps for v in b.variants],
                "ok": self.ok, "problems": list(self.problems), "expected_per_step": dict(b.per_step),
                "per_step": self.per_step, "other_delta": self.other_delta,
                "counts": {g: [lo, hi] for g, lo, hi in b.counts},
                "histogram": dict(sorted(self.histogram.items()))}


def check_bench(bench: Bench, hists: dict[str, collections.Counter]) -> SassCheck:
    """Check one benchmark's kernels against what it declares (see the module docstring)."""
    problems = []
    for v in bench.variants:
        h = hists.get(v.kernel)
        if h is None:
            problems.append(f"{v.kernel}: not in the cubin")
            continue
        for group, per in bench.per_step:
            n, want = _group_count(h, group), per * v.steps
            if not want <= n <= want + bench.slack:
                problems.append(f"{v.kernel}: {n} x {group}, expected {want}..{want + bench.slack}")
        for group, lo, hi in bench.counts:
            n = _group_count(h, group)
            if not lo <= n <= hi:
                problems.append(f"{v.kernel}: {n} x {group}, expected {lo}..{hi}")
        for spill in ("LDL*", "STL*"):
            if _group_count(h, spill):
                problems.append(f"{v.kernel}: register spills ({spill.rstrip('*')})")
    per_step: dict = {}
    other_delta: dict = {}
    first, last = bench.variants[0], bench.variants[-1]
    if not problems and last.steps > first.steps:
        h0, h1 = hists[first.kernel], hists[last.kernel]
        ds = last.steps - first.steps
        delta = {m: h1.get(m, 0) - h0.get(m, 0) for m in set(h0) | set(h1)}
        declared = [g for g, _ in bench.per_step]
        counted = declared + [g for g, _ in bench.glue]
        per_step = {m: round(d / ds, 4) for m, d in sorted(delta.items()) if d and _in_group(m, counted)}
        for group, per in bench.per_step:
            d = sum(n for m, n in delta.items() if _in_group(m, [group]))
            if d != per * ds:
                problems.append(f"{group}: {d / ds:g} per step between {first.kernel} and {last.kernel}, "
                                f"expected {per}")
        other = {}
        for m, d in delta.items():
            if _in_group(m, declared):
                continue
            rate = next((r for g, r in bench.glue if _in_group(m, [g])), None)
            if rate is not None:
                if d > rate * ds:
                    problems.append(f"{m}: {d / ds:g} per step, at most {rate:g} allowed")
            elif m != "NOP":  # NOPs pad the code after EXIT
                other[m] = d
        other_delta = {m: d for m, d in sorted(other.items()) if d}
        net = sum(other.values())
        if abs(net) > OTHER_SLACK:
            grew = ", ".join(f"{m} {d:+d}" for m, d in sorted(other.items()) if d)
            problems.append(f"other SASS changes by {net:+d} between {first.kernel} and {last.kernel} ({grew}): "
                            f"it scales with the steps, and only the measured SASS may")
    return SassCheck(bench, not problems, tuple(problems), dict(hists.get(first.kernel, {})), per_step, other_delta)


def sass_checks(sections: Iterable[str] = SECTIONS,
                progress: Callable[[str], None] | None = None) -> dict[str, SassCheck]:
    """Compile every benchmark of ``sections`` for sm_90a and check its SASS (no GPU). Keyed by benchmark name.

    A module that does not compile fails each of its benchmarks with the compiler's first message; a missing
    ``nvdisasm`` raises :class:`~simtc.errors.HardwareUnavailable`.
    """
    from simtc.hw.compile import CompileError

    wanted = set(_check_sections(sections))
    by_module: dict[str, list[Bench]] = collections.defaultdict(list)
    for b in benches():
        if b.section in wanted or b.part in wanted:
            by_module[b.module].append(b)
    out: dict[str, SassCheck] = {}
    for module, group in by_module.items():
        if progress:
            progress(module)
        try:
            hists = _kernel_histograms(_cubin(module))
        except CompileError as e:
            first = next((ln for ln in e.log.splitlines() if "error" in ln), e.log[:200])
            for b in group:
                out[b.name] = SassCheck(b, False, (f"module {module} does not compile: {first.strip()}",))
            continue
        for b in group:
            out[b.name] = check_bench(b, hists)
    return out


def _kernel_histograms(cubin: bytes) -> dict[str, collections.Counter]:
    """:func:`sass_by_kernel` of a cubin, cached in simtc's build cache by the cubin's SHA-256."""
    from simtc.hw.compile import cache_dir, disassemble

    path = cache_dir() / f"{hashlib.sha256(cubin).hexdigest()[:24]}.sass-histograms.json"
    if path.exists():
        try:
            return {k: collections.Counter(v) for k, v in json.loads(path.read_text()).items()}
        except (OSError, ValueError):  # a damaged cache entry is rebuilt
            pass
    hists = sass_by_kernel(disassemble(cubin))
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({k: dict(v) for k, v in hists.items()}))
    tmp.replace(path)
    return hists
