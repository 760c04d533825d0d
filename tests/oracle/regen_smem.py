#!/usr/bin/env python3
"""Regenerate ``tests/data/cute_smem_layouts.json.gz`` from NVIDIA's CuTe C++.

The data file is an independent oracle for simtc's shared-memory model: for
canonical UMMA/GMMA tiles it holds the byte offset of every element and the
64-bit matrix descriptors that CuTe itself computes.  This script

1. finds the CuTe/CUTLASS headers (``$CUTLASS_INCLUDE``, else the
   ``nvidia-cutlass`` wheel's ``cutlass_library/source/include``) and the CUDA
   include directory (``$CUDA_INCLUDE``, else ``$CUDA_HOME``/``$CUDA_PATH``,
   else next to ``nvcc``, else what ``nvcc --dryrun`` reports);
2. writes the case list (one ``SIMTC_CASE(...)`` line per case) into a
   temporary directory and compiles ``cute_smem_oracle.cpp`` with
   ``g++ -std=c++17 -O1`` (host only: no GPU, no nvcc), split over a few
   executables that build in parallel;
3. compiles, with ``-fsyntax-only``, one probe per rule of
   ``EXPECTED_REJECTIONS`` (descriptor constructions CuTe refuses) and
   records the ``static_assert`` message that g++ reports (and fails if
   CuTe accepts it after all);
4. runs the executables, parses their output and writes gzip'd JSON with
   sorted keys and gzip mtime 0, so that regeneration is byte-identical.

Usage::

    python tests/oracle/regen_smem.py            # rewrite the data file
    python tests/oracle/regen_smem.py --check    # exit 1 if the data would change
    python tests/oracle/regen_smem.py --check --strict   # ... or any byte of the file
    python tests/oracle/regen_smem.py --check --sample 3 # rebuild every 3rd case only
    python tests/oracle/regen_smem.py --probe-all   # probe every rejected case

This module does not import simtc, and importing it has no side effects.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import gzip
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CPP_SOURCE = HERE / "cute_smem_oracle.cpp"
DATA_FILE = HERE.parent / "data" / "cute_smem_layouts.json.gz"

GENERATOR = "tests/oracle/regen_smem.py + tests/oracle/cute_smem_oracle.cpp"
CXX_STD_FLAGS = ["-std=c++17", "-O1", "-Wno-deprecated-declarations"]
# Printed by CuTe's cast_smem_ptr_to_uint on the host (start address -> 0).
CUTE_HOST_SMEM_NOTICE = "ERROR: cast_smem_ptr_to_uint not supported but used."

# name, C++ type, bytes per element
DTYPES = [
    ("e4m3", "cute::float_e4m3_t", 1),
    ("bf16", "cute::bfloat16_t", 2),
    ("fp16", "cute::half_t", 2),
    ("tf32", "cute::tfloat32_t", 4),
]
# swizzle name -> swizzle width in bytes (INTERLEAVE: one 16-byte core-matrix row)
SWIZZLE_BYTES = {"INTERLEAVE": 16, "SW32": 32, "SW64": 64, "SW128": 128, "SW128_32B": 128}
LAYOUTS = [
    ("K", "INTERLEAVE"),
    ("K", "SW32"),
    ("K", "SW64"),
    ("K", "SW128"),
    ("MN", "INTERLEAVE"),
    ("MN", "SW32"),
    ("MN", "SW64"),
    ("MN", "SW128"),
    ("MN", "SW128_32B"),  # UMMA only; CuTe has no K-major form
]
REALISTIC_SHAPES = [(64, 64), (128, 64), (64, 128), (256, 64)]  # (MN, K) elements
MMA_K_BYTES = 32  # one MMA-K slice: K = 16 bf16/fp16, 8 tf32, 32 e4m3

# Descriptor constructions CuTe is expected to refuse at compile time:
# (api, predicate on a Case).  Every one is confirmed by a probe compile.
EXPECTED_REJECTIONS = [
    # SM90's GMMA::layout_type only knows Swizzle<B,4,3>; the 32-byte-atomic
    # 128B swizzle (Swizzle<2,5,2>) is a Blackwell addition.
    ("gmma", lambda c: c.swizzle == "SW128_32B"),
]


@dataclasses.dataclass(frozen=True)
class Case:
    """One tile (and one MMA-K slice of it for the descriptors)."""

    dtype: str
    ctype: str
    elem_bytes: int
    major: str
    swizzle: str
    rows: int
    cols: int
    k_slice: int = 0

    @property
    def atom(self) -> tuple[int, int]:
        """Atom shape in elements (MN, K), as CuTe's Layout_*_Atom<T> defines it.

        >>> Case("bf16", "", 2, "K", "SW128", 8, 64).atom
        (8, 64)
        >>> Case("bf16", "", 2, "MN", "SW128_32B", 64, 4).atom
        (64, 4)
        """
        width = SWIZZLE_BYTES[self.swizzle] // self.elem_bytes
        if self.major == "K":
            return (8, width)
        return (width, 4 if self.swizzle == "SW128_32B" else 8)

    @property
    def mma_k(self) -> int:
        """Elements of K in one MMA-K slice (32 bytes)."""
        return MMA_K_BYTES // self.elem_bytes

    @property
    def desc_skipped(self) -> str | None:
        """Why no descriptor is attempted for this tile (None: attempted)."""
        if self.cols % self.mma_k:
            return (
                f"not attempted: tile K extent {self.cols} elements ({self.cols * self.elem_bytes} B) "
                f"is not a whole number of MMA-K slices ({self.mma_k} elements = {MMA_K_BYTES} B)"
            )
        return None

    def rejection_rule(self, api: str) -> int | None:
        """Index of the first EXPECTED_REJECTIONS rule refusing `api` here."""
        for n, (a, pred) in enumerate(EXPECTED_REJECTIONS):
            if a == api and pred(self):
                return n
        return None

    def rejected_by(self, api: str) -> bool:
        return self.rejection_rule(api) is not None

    def wants(self, api: str) -> bool:
        """Whether descriptor `api` ('umma'/'gmma') is computed in the main build."""
        return self.desc_skipped is None and not self.rejected_by(api)

    def macro_args(self, ident: int) -> str:
        return (
            f"{ident}, {self.ctype}, {self.major}, {self.swizzle}, {self.rows}, {self.cols}, "
            f"{self.mma_k}, {self.k_slice}"
        )

    def sort_key(self):
        return (
            [d[0] for d in DTYPES].index(self.dtype),
            LAYOUTS.index((self.major, self.swizzle)),
            self.rows,
            self.cols,
            self.k_slice,
        )


def enumerate_cases() -> list[Case]:
    """All cases, in a fixed order.

    Per dtype and canonical layout: the atom, 2x the atom along MN, 2x along
    K, the smallest tile holding whole atoms and one MMA-K slice (`kfull`),
    twice that along both modes, and 64x64 and 128x64 where the atom divides
    them; bf16 also 64x128 and 256x64.  fp16 tiles are byte-for-byte those of
    bf16 (CuTe's atoms depend only on the element width), so fp16 gets only
    the atom, (atom MN, kfull) and 64x64.  K-stepping cases (k_slice > 0):
    every layout of bf16, and the 128B layouts of e4m3 and tf32.

    The list is kept near 200 cases because every descriptor case costs
    g++ about 0.2 s of template instantiation.
    """
    cases: list[Case] = []
    for dtype, ctype, eb in DTYPES:
        for major, swizzle in LAYOUTS:
            proto = Case(dtype, ctype, eb, major, swizzle, 0, 0)
            amn, ak = proto.atom
            kfull = math.lcm(ak, proto.mma_k)  # smallest K holding whole atoms and slices
            if dtype == "fp16":
                shapes = [(amn, ak), (amn, kfull), (64, 64)]
            else:
                shapes = [(amn, ak), (2 * amn, ak), (amn, 2 * ak), (amn, kfull), (2 * amn, 2 * kfull)]
                shapes += REALISTIC_SHAPES if dtype == "bf16" else REALISTIC_SHAPES[:2]
            shapes = [(m, k) for m, k in shapes if m % amn == 0 and k % ak == 0]
            for m, k in dict.fromkeys(shapes):  # ordered de-duplication
                cases.append(dataclasses.replace(proto, rows=m, cols=k))
            if dtype == "bf16" or (dtype in ("e4m3", "tf32") and swizzle in ("SW128", "SW128_32B")):
                # K stepping on a tile with >= 2 K atoms and >= 2 slices: to
                # slice 1, and to the first slice of the second K atom.
                kstep = math.lcm(max(2 * ak, 2 * proto.mma_k), ak, proto.mma_k)
                for sl in sorted({1, max(1, ak // proto.mma_k)}):
                    cases.append(dataclasses.replace(proto, rows=2 * amn, cols=kstep, k_slice=sl))
    cases.sort(key=Case.sort_key)
    return cases


# --------------------------------------------------------------------------- toolchain


class ToolchainMissing(RuntimeError):
    """A header tree or compiler needed for regeneration is not available."""


def find_cutlass_include() -> tuple[Path, str]:
    """(include dir, CUTLASS version string)."""
    env = os.environ.get("CUTLASS_INCLUDE")
    if env:
        inc = Path(env)
        version = None
    else:
        try:
            import cutlass_library  # optional dependency
        except ImportError as exc:
            raise ToolchainMissing(
                "CuTe headers not found: set CUTLASS_INCLUDE or install the nvidia-cutlass wheel"
            ) from exc
        inc = Path(cutlass_library.__file__).resolve().parent / "source" / "include"
        try:
            from importlib.metadata import version as dist_version

            version = dist_version("nvidia-cutlass")
        except Exception:  # metadata is best effort
            version = None
    if not (inc / "cute" / "tensor.hpp").is_file():
        raise ToolchainMissing(f"no cute/tensor.hpp under {inc}")
    if version is None:
        text = (inc / "cutlass" / "version.h").read_text()
        parts = [re.search(rf"#define CUTLASS_{p}\s+(\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")]
        version = ".".join(m.group(1) for m in parts if m)
    return inc, version


def _cuda_include_ok(path: Path) -> bool:
    return (path / "cuda_runtime_api.h").is_file()


def find_cuda_include() -> Path:
    """The CUDA toolkit include directory (holds cuda_runtime_api.h)."""
    env = os.environ.get("CUDA_INCLUDE")
    if env:
        if not _cuda_include_ok(Path(env)):
            raise ToolchainMissing(f"CUDA_INCLUDE={env} has no cuda_runtime_api.h")
        return Path(env)
    candidates = [Path(os.environ[v]) / "include" for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(Path(nvcc).resolve().parent.parent / "include")
    for cand in candidates:
        if _cuda_include_ok(cand):
            return cand
    if nvcc:  # e.g. /usr/local/bin/nvcc is a wrapper script: ask nvcc itself
        with tempfile.TemporaryDirectory() as tmp:
            probe = Path(tmp) / "probe.cu"
            probe.write_text("")
            res = subprocess.run(
                [nvcc, "--dryrun", "-c", str(probe), "-o", str(Path(tmp) / "probe.o")],
                capture_output=True,
                text=True,
                check=False,
            )
        for m in re.finditer(r'INCLUDES="-I([^"]+)"', res.stdout + res.stderr):
            cand = Path(m.group(1)).resolve()
            if _cuda_include_ok(cand):
                return cand
    fallback = Path("/usr/local/cuda/include")
    if _cuda_include_ok(fallback):
        return fallback
    raise ToolchainMissing("CUDA include directory not found: set CUDA_INCLUDE")


def find_cxx() -> str:
    cxx = shutil.which(os.environ.get("CXX", "g++"))
    if not cxx:
        raise ToolchainMissing("no C++ compiler (g++ or $CXX) on PATH")
    return cxx


def compiler_id(cxx: str) -> str:
    out = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=True).stdout
    return out.splitlines()[0].strip()


@dataclasses.dataclass
class Toolchain:
    cxx: str
    cutlass_include: Path
    cutlass_version: str
    cuda_include: Path

    @classmethod
    def locate(cls) -> Toolchain:
        inc, ver = find_cutlass_include()
        return cls(find_cxx(), inc, ver, find_cuda_include())

    def include_flags(self, build_dir: Path) -> list[str]:
        flags = [f"-I{build_dir}", f"-I{self.cutlass_include}", f"-I{self.cuda_include}"]
        if (self.cuda_include / "cccl").is_dir():
            flags.append(f"-I{self.cuda_include / 'cccl'}")
        return flags

    def symbolic_command(self) -> str:
        """The compile command, with placeholders instead of local paths."""
        cccl = " -I<CUDA_INCLUDE>/cccl" if (self.cuda_include / "cccl").is_dir() else ""
        return (
            f"{Path(self.cxx).name} {' '.join(CXX_STD_FLAGS)} -I<build dir with the case list> "
            f"-I<CUTLASS_INCLUDE> -I<CUDA_INCLUDE>{cccl} tests/oracle/cute_smem_oracle.cpp"
        )


# --------------------------------------------------------------------------- probes

_PROBE_CTX = re.compile(r"probe_(umma|gmma)\(\) \[with int ID = (\d+)")
_INSTANTIATION = re.compile(r"In instantiation of ['\u2018`]([^'\u2019]*)")
_STATIC_ASSERT = re.compile(r"error: static assertion failed(?: due to requirement '[^']*')?: (.*)$")


def parse_probe_diagnostics(text: str) -> dict[tuple[str, int], str]:
    """Map (api, probe id) -> first static_assert reason in g++ diagnostics.

    >>> diag = '''x.hpp: In instantiation of 'constexpr T cute::f(const A&) [with A = int]':
    ... y.cpp:1:2:   required from 'long long unsigned int probe_gmma() [with int ID = 7; T = int]'
    ... x.hpp:3:4: error: static assertion failed: Unsupported layout swizzle'''
    >>> parse_probe_diagnostics(diag)
    {('gmma', 7): 'static_assert in cute::f: Unsupported layout swizzle'}
    """
    reasons: dict[tuple[str, int], str] = {}
    func = "?"
    ctx: tuple[str, int] | None = None
    for line in text.splitlines():
        m = _INSTANTIATION.search(line)
        if m:
            sig = m.group(1)
            func = sig.split("(", 1)[0].split()[-1] if "(" in sig else sig
            ctx = None
        m = _PROBE_CTX.search(line)
        if m:
            ctx = (m.group(1), int(m.group(2)))
        m = _STATIC_ASSERT.search(line)
        if m:
            if ctx is None:
                raise RuntimeError(f"static_assert outside any probe context: {line}")
            reasons.setdefault(ctx, f"static_assert in {func}: {m.group(1).strip()}")
    return reasons


def probe_lines(probes: list[tuple[str, int, Case]]) -> str:
    return "".join(f"SIMTC_PROBE_{api.upper()}({case.macro_args(pid)})\n" for api, pid, case in probes)


def run_probe_compile(tc: Toolchain, build: Path, name: str, probes: list[tuple[str, int, Case]]) -> dict:
    """Syntax-only compile of `probes`; every one must be refused by CuTe."""
    inc = build / f"{name}.inc"
    inc.write_text(probe_lines(probes))
    cmd = [
        tc.cxx,
        *CXX_STD_FLAGS,
        "-fsyntax-only",
        "-DSIMTC_PROBE",
        f'-DSIMTC_CASES="{inc.name}"',
        *tc.include_flags(build),
        str(CPP_SOURCE),
    ]
    env = dict(os.environ, LC_ALL="C", LANG="C")  # ASCII quotes in diagnostics
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    reasons = parse_probe_diagnostics(res.stderr)
    missing = [(api, pid) for api, pid, _ in probes if (api, pid) not in reasons]
    if missing or res.returncode == 0:
        raise RuntimeError(
            f"probe compile {name}: CuTe accepted combinations listed in EXPECTED_REJECTIONS: "
            f"{missing or probes}\n{res.stderr[-4000:]}"
        )
    return reasons


# --------------------------------------------------------------------------- main build


def build_and_run(tc: Toolchain, build: Path, name: str, numbered: list[tuple[int, Case]]) -> str:
    inc = build / f"{name}.inc"
    inc.write_text(
        "".join(
            f"SIMTC_CASE({c.macro_args(i)}, {str(c.wants('umma')).lower()}, {str(c.wants('gmma')).lower()})\n"
            for i, c in numbered
        )
    )
    exe = build / name
    cmd = [
        tc.cxx,
        *CXX_STD_FLAGS,
        f'-DSIMTC_CASES="{inc.name}"',
        *tc.include_flags(build),
        str(CPP_SOURCE),
        "-o",
        str(exe),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, LC_ALL="C"), check=False)
    if res.returncode != 0:
        errors = [ln for ln in res.stderr.splitlines() if "error" in ln]
        raise RuntimeError(f"compile of {name} failed:\n" + "\n".join(errors[:40]))
    run = subprocess.run([str(exe)], capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise RuntimeError(f"{name} exited with {run.returncode}:\n{run.stderr[-4000:]}")
    return run.stdout


def parse_output(text: str) -> dict[int, dict]:
    """Parse the program's line protocol (see cute_smem_oracle.cpp)."""
    out: dict[int, dict] = {}
    cur: dict | None = None
    for line in text.splitlines():
        if line == CUTE_HOST_SMEM_NOTICE:
            continue
        tag, _, rest = line.partition(" ")
        if tag == "CASE":
            cur = {"id": int(rest)}
        elif cur is None:
            raise RuntimeError(f"unexpected output line: {line[:200]}")
        elif tag == "ATOM":
            cur["atom"] = tuple(int(v) for v in rest.split())
        elif tag == "LAYOUT":
            cur["cute_layout"] = rest
        elif tag == "OFFSETS":
            cur["offsets"] = [int(v) for v in rest.split()]
        elif tag in ("UMMA", "GMMA"):
            cur[tag.lower()] = None if rest == "-" else rest
        elif tag == "END":
            if int(rest) != cur["id"]:
                raise RuntimeError(f"END {rest} does not close CASE {cur['id']}")
            out[cur["id"]] = cur
            cur = None
        else:
            raise RuntimeError(f"unexpected output line: {line[:200]}")
    return out


def _split(items: list, parts: int) -> list[list]:
    parts = max(1, min(parts, len(items)))
    return [items[i::parts] for i in range(parts)]


def generate(
    tc: Toolchain,
    *,
    parts: int = 2,
    probe_all: bool = False,
    keep: Path | None = None,
    sample_every: int = 1,
) -> dict:
    """Build, run and assemble the JSON document (a dict).

    With ``sample_every=n`` only cases 0, n, 2n, ... of `enumerate_cases()`
    are built (for a quicker partial check); the document's "cases" then
    holds just those, in order, and "sampled_every" records n.
    """
    cases = enumerate_cases()
    numbered = [(i, c) for i, c in enumerate(cases) if i % sample_every == 0]

    # Probes.  g++ reports a failing template instantiation only once, and
    # descriptors of different tiles (even of different dtypes) share
    # instantiations after the recast to uint128_t, so a compile that probes
    # several cases can show each case a different "first" assertion.  Hence
    # one probe compile per EXPECTED_REJECTIONS rule, on the rule's first
    # case in the full list (independent of sampling); its reason is recorded
    # for every case of the rule.  --probe-all compiles every rejected case
    # on its own and fails unless each gives that same reason.
    all_numbered = list(enumerate(cases))
    rule_members: dict[tuple[str, int], list[tuple[str, int, Case]]] = {}
    for i, c in all_numbered:
        for api in ("umma", "gmma"):
            if c.desc_skipped is None and c.rejected_by(api):
                rule_members.setdefault((api, c.rejection_rule(api)), []).append((api, i, c))
    wanted = {i for i, _ in numbered}
    rules = {key: members for key, members in rule_members.items() if any(i in wanted for _, i, _ in members)}
    probe_jobs = [[members[0]] for members in rules.values()]
    if probe_all:
        probe_jobs += [[p] for members in rules.values() for p in members[1:]]

    with tempfile.TemporaryDirectory(prefix="simtc_cute_oracle_") as tmp:
        build = Path(keep) if keep else Path(tmp)
        build.mkdir(parents=True, exist_ok=True)
        workers = max(1, min(parts + len(probe_jobs), os.cpu_count() or 1, 4))
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            # probes first: they are short, so the long builds end together
            probe_futs = [
                pool.submit(run_probe_compile, tc, build, f"probe{j}", job) for j, job in enumerate(probe_jobs)
            ]
            run_futs = [
                pool.submit(build_and_run, tc, build, f"oracle_part{j}", chunk)
                for j, chunk in enumerate(_split(numbered, parts))
            ]
            results: dict[int, dict] = {}
            for f in run_futs:
                results.update(parse_output(f.result()))
            reasons: dict[tuple[str, int], str] = {}
            for f in probe_futs:
                reasons.update(f.result())

    rule_reason = {}
    for key, members in rules.items():
        rep = members[0]
        rule_reason[key] = reasons[(rep[0], rep[1])]
        if probe_all:
            odd = [(api, i) for api, i, _ in members if reasons[(api, i)] != rule_reason[key]]
            if odd:
                raise RuntimeError(f"rule {key}: cases {odd} are rejected for other reasons; split the rule")

    records = []
    for i, c in numbered:
        r = results.get(i)
        if r is None:
            raise RuntimeError(f"case {i} missing from the program output")
        if r["atom"] != c.atom:
            raise RuntimeError(f"case {i}: CuTe's atom is {r['atom']}, the case list assumed {c.atom}")
        n = c.rows * c.cols
        if len(r["offsets"]) != n or sorted(r["offsets"]) != list(range(0, n * c.elem_bytes, c.elem_bytes)):
            raise RuntimeError(f"case {i}: offsets are not a permutation of the dense tile")
        rec = {
            "dtype": c.dtype,
            "elem_bytes": c.elem_bytes,
            "major": c.major,
            "swizzle": c.swizzle,
            "rows": c.rows,
            "cols": c.cols,
            "atom": list(c.atom),
            "mma_k": c.mma_k,
            "k_slice": c.k_slice,
            "cute_layout": r["cute_layout"],
            "offsets": r["offsets"],
            "desc_skipped": c.desc_skipped,
        }
        for api in ("umma", "gmma"):
            rejected = None
            if c.desc_skipped is None and c.rejected_by(api):
                rejected = rule_reason[(api, c.rejection_rule(api))]
            if (r[api] is not None) != c.wants(api):
                raise RuntimeError(f"case {i}: {api} descriptor presence mismatch")
            rec[f"{api}_desc"] = r[api]
            rec[f"{api}_desc_rejected"] = rejected
        records.append(rec)

    doc = {
        "generator": GENERATOR,
        "cutlass_version": tc.cutlass_version,
        "compiler": compiler_id(tc.cxx),
        "compile_command": tc.symbolic_command(),
        "cases": records,
    }
    if sample_every != 1:
        doc["sampled_every"] = sample_every
    return doc


def encode(doc: dict) -> bytes:
    """Deterministic gzip'd JSON: sorted keys, compact, gzip mtime 0, no name."""
    payload = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        gz.write(payload)
    return buf.getvalue()


def load(path: Path = DATA_FILE) -> dict:
    with gzip.open(path, "rt") as fh:
        return json.load(fh)


def compare(new: dict, old: dict) -> tuple[list[str], list[str]]:
    """(differences in the data, differences in provenance metadata only).

    `new` may be a sampled document (see `generate`); it is then compared
    with the matching cases of `old`.
    """
    data_diffs, meta_diffs = [], []
    step = new.get("sampled_every", 1)
    for key in sorted(set(new) | set(old)):
        if key in ("cases", "sampled_every"):
            continue
        if new.get(key) != old.get(key):
            meta_diffs.append(f"{key}: committed {old.get(key)!r}, regenerated {new.get(key)!r}")
    a, b = old.get("cases", [])[::step], new.get("cases", [])
    if len(a) != len(b):
        data_diffs.append(f"case count: committed {len(a)}, regenerated {len(b)}")
    for j, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            fields = sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))
            data_diffs.append(
                f"case {j * step} ({x.get('dtype')} {x.get('major')} {x.get('swizzle')} "
                f"{x.get('rows')}x{x.get('cols')} k_slice {x.get('k_slice')}): {', '.join(fields)}"
            )
    return data_diffs, meta_diffs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DATA_FILE, help="output file (default: %(default)s)")
    ap.add_argument("--check", action="store_true", help="regenerate in memory and compare with --out")
    ap.add_argument(
        "--strict", action="store_true", help="with --check: also fail when only compiler/version metadata differs"
    )
    ap.add_argument("--probe-all", action="store_true", help="probe every rejected case separately (slow)")
    ap.add_argument(
        "--sample", type=int, default=1, metavar="N", help="with --check: rebuild only every N-th case (quicker)"
    )
    ap.add_argument("--parts", type=int, default=2, help="executables built in parallel (default 2)")
    ap.add_argument("--keep-build", type=Path, help="build here and keep the generated files")
    args = ap.parse_args(argv)
    if args.sample < 1 or (args.sample != 1 and not args.check):
        ap.error("--sample N (N >= 1) only goes with --check")

    try:
        tc = Toolchain.locate()
    except ToolchainMissing as exc:
        print(f"regen_smem: {exc}", file=sys.stderr)
        return 2
    doc = generate(tc, parts=args.parts, probe_all=args.probe_all, keep=args.keep_build, sample_every=args.sample)
    blob = encode(doc)
    n = len(doc["cases"])
    if args.check:
        if not args.out.is_file():
            print(f"regen_smem: {args.out} does not exist", file=sys.stderr)
            return 1
        if args.out.read_bytes() == blob:
            print(f"regen_smem: {args.out} is byte-identical ({n} cases)")
            return 0
        data_diffs, meta_diffs = compare(doc, load(args.out))
        for d in meta_diffs:
            print(f"regen_smem: note (provenance only): {d}")
        for d in data_diffs[:50]:
            print(f"regen_smem: DIFF {d}")
        if data_diffs:
            print(f"regen_smem: {len(data_diffs)} difference(s) in the data", file=sys.stderr)
            return 1
        if args.sample != 1:
            print(f"regen_smem: the {n} rebuilt cases (every {args.sample}th) equal the committed ones")
            return 1 if (args.strict and meta_diffs) else 0
        print("regen_smem: data identical; only provenance metadata differs", file=sys.stderr)
        return 1 if args.strict else 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(blob)
    print(f"regen_smem: wrote {args.out} ({n} cases, {len(blob)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
