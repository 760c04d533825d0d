#!/usr/bin/env python3
"""Regenerate tests/data/cute_tmem.json.gz from NVIDIA's CuTe C++ headers.

The oracle is tests/oracle/cute_tmem_oracle.cpp: a host-only CuTe program (no GPU, nothing
linked from CUDA) that evaluates CuTe's tcgen05 copy traits, UTCCP traits and UMMA TMEM
fragment types.  This script finds the headers, compiles the program with g++ (three
translation units, built in parallel), runs it, normalises the output and writes one gzip
JSON file (sorted keys, compact separators, gzip mtime 0: byte-for-byte reproducible with the
same zlib).  The schema is documented in tests/data/README_tmem.md.

Usage:
    python tests/oracle/regen_tmem.py            # (re)write tests/data/cute_tmem.json.gz
    python tests/oracle/regen_tmem.py --check    # exit 1 if the committed file differs
    python tests/oracle/regen_tmem.py --out PATH # write elsewhere

Header discovery:
    CUTLASS: $CUTLASS_INCLUDE, else <cutlass_library package>/source/include
             (pip package nvidia-cutlass; 4.2.0.0 was used for the committed file).
    CUDA:    $CUDA_INCLUDE, else the TOP reported by `nvcc --dryrun`, else
             realpath(which nvcc)/../include, else /usr/local/cuda/include.
             Its cccl/ subdirectory is added too (CuTe includes <cuda/std/...>).
    Compiler: $CXX or g++.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SOURCE = HERE / "cute_tmem_oracle.cpp"
DEFAULT_OUT = REPO / "tests" / "data" / "cute_tmem.json.gz"
PARTS = (1, 2, 3)  # ORACLE_PART values, see cute_tmem_oracle.cpp
# Top-level keys that describe the environment rather than the data; --check ignores them.
ENV_KEYS = ("cutlass_package",)

SCHEMA_VERSION = 1


class OracleUnavailable(RuntimeError):
    """Headers or compiler not found: the oracle cannot be regenerated here."""


# --------------------------------------------------------------------------------------------
# Discovery
# --------------------------------------------------------------------------------------------


def find_cutlass_include() -> Path:
    env = os.environ.get("CUTLASS_INCLUDE")
    if env:
        p = Path(env)
        if (p / "cute" / "atom" / "copy_traits_sm100.hpp").is_file():
            return p
        raise OracleUnavailable(f"CUTLASS_INCLUDE={env} has no cute/atom/copy_traits_sm100.hpp")
    try:
        import cutlass_library  # type: ignore
    except ImportError as e:  # pragma: no cover - depends on environment
        raise OracleUnavailable(
            "cutlass_library (pip package nvidia-cutlass) is not importable and CUTLASS_INCLUDE is unset"
        ) from e
    p = Path(cutlass_library.__file__).resolve().parent / "source" / "include"
    if not (p / "cute" / "atom" / "copy_traits_sm100.hpp").is_file():
        raise OracleUnavailable(f"cutlass_library found but {p} lacks the CuTe headers")
    return p


def cutlass_package_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("nvidia-cutlass")
    except Exception:  # any failure just means "unknown"
        return None


def _cuda_include_ok(p: Path) -> bool:
    return (p / "cuda_runtime_api.h").is_file()


def find_cuda_include() -> Path:
    env = os.environ.get("CUDA_INCLUDE")
    if env:
        p = Path(env)
        if _cuda_include_ok(p):
            return p
        raise OracleUnavailable(f"CUDA_INCLUDE={env} has no cuda_runtime_api.h")
    candidates: list[Path] = []
    nvcc = shutil.which("nvcc")
    if nvcc:
        # nvcc may be a wrapper script; ask it where its toolkit lives.
        try:
            out = subprocess.run(
                [nvcc, "--dryrun", "-E", "-x", "cu", os.devnull],
                capture_output=True,
                text=True,
                timeout=60,
            )
            m = re.search(r"^#\$ TOP=(.+)$", out.stdout + out.stderr, re.M)
            if m:
                top = Path(m.group(1).strip())
                candidates += [top / "include", top / "targets" / "x86_64-linux" / "include"]
        except (OSError, subprocess.SubprocessError):
            pass
        candidates.append(Path(os.path.realpath(nvcc)).parent.parent / "include")
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(Path(os.environ[var]) / "include")
    candidates.append(Path("/usr/local/cuda/include"))
    for c in candidates:
        if _cuda_include_ok(c):
            return c.resolve()
    raise OracleUnavailable("no CUDA include directory found (set CUDA_INCLUDE or put nvcc on PATH)")


def find_cxx() -> str:
    cxx = os.environ.get("CXX", "g++")
    path = shutil.which(cxx)
    if not path:
        raise OracleUnavailable(f"C++ compiler {cxx!r} not found")
    return path


# --------------------------------------------------------------------------------------------
# Build and run
# --------------------------------------------------------------------------------------------


def compile_command(cxx: str, cutlass_inc: Path, cuda_inc: Path, part: int, out: Path) -> list[str]:
    cmd = [cxx, "-std=c++17", "-O0", "-w", f"-DORACLE_PART={part}", f"-I{cutlass_inc}", f"-I{cuda_inc}"]
    if (cuda_inc / "cccl").is_dir():
        cmd.append(f"-I{cuda_inc / 'cccl'}")
    cmd += [str(SOURCE), "-o", str(out)]
    return cmd


def build_and_run(verbose: bool = False) -> list[dict[str, Any]]:
    cutlass_inc = find_cutlass_include()
    cuda_inc = find_cuda_include()
    cxx = find_cxx()
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="cute_tmem_oracle_") as tmp:
        tmpd = Path(tmp)
        procs = []
        t0 = time.time()
        for part in PARTS:
            exe = tmpd / f"oracle_part{part}"
            cmd = compile_command(cxx, cutlass_inc, cuda_inc, part, exe)
            if verbose:
                print("+", " ".join(cmd), file=sys.stderr)
            procs.append((part, exe, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
        for part, _exe, p in procs:
            _, err = p.communicate()
            if p.returncode != 0:
                raise RuntimeError(f"compiling ORACLE_PART={part} failed:\n{err[-4000:]}")
        if verbose:
            print(f"compiled in {time.time() - t0:.1f} s", file=sys.stderr)
        for part, exe, _ in procs:
            r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                raise RuntimeError(f"oracle part {part} failed (rc={r.returncode}):\n{r.stderr[-4000:]}")
            results.append(json.loads(r.stdout))
    return results


# --------------------------------------------------------------------------------------------
# Header text: PTX instruction and immediate that CuTe's arch structs emit
# --------------------------------------------------------------------------------------------

_STRUCT_RE = re.compile(r"struct\s+(SM100_(?:TMEM_LOAD|TMEM_STORE|UTCCP)_\w+)\s*\{(.*?)\n\};", re.S)
_STR_RE = re.compile(r'"((?:[^"\\]|\\.)*)"')
_ASM_RE = re.compile(r'asm\s+volatile\s*\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+)')


def parse_arch_asm(cutlass_inc: Path) -> dict[str, dict[str, Any]]:
    """Map arch struct name -> {"ptx": mnemonic, "imm": immediate or None} from copy_sm100.hpp."""
    text = (cutlass_inc / "cute" / "arch" / "copy_sm100.hpp").read_text()
    out: dict[str, dict[str, Any]] = {}
    for name, body in _STRUCT_RE.findall(text):
        m = _ASM_RE.search(body)  # the asm template: adjacent string literals
        if not m:
            continue
        tmpl = "".join(_STR_RE.findall(m.group(1)))
        mnemonic = re.split(r"[\s\[{]", tmpl, maxsplit=1)[0]
        m = re.search(r"\[%\d+\]\s*,\s*(\d+)\s*[,;]", tmpl)
        out[name] = {"ptx": mnemonic, "imm": int(m.group(1)) if m else None}
    return out


# --------------------------------------------------------------------------------------------
# Normalisation into the committed schema
# --------------------------------------------------------------------------------------------

_LDST_RE = re.compile(r"^SM100_TMEM_(LOAD|STORE)_(32dp32b|16dp64b|16dp128b|16dp256b|16dp32b)(\d+)x(_16b)?$")
_PTX_SHAPE = {
    "32dp32b": "32x32b",
    "16dp64b": "16x64b",
    "16dp128b": "16x128b",
    "16dp256b": "16x256b",
    "16dp32b": "16x32bx2",
}
_UTCCP_SHAPE = {
    "SM100_UTCCP_128dp256bit_1cta": "128x256b",
    "SM100_UTCCP_128dp128bit_1cta": "128x128b",
    "SM100_UTCCP_4dp256bit_1cta": "4x256b",
    "SM100_UTCCP_4x32dp128bit_1cta": "32x128b.warpx4",
    "SM100_UTCCP_2x64dp128bitlw0213_1cta": "64x128b.warpx2::02_13",
    "SM100_UTCCP_2x64dp128bitlw0123_1cta": "64x128b.warpx2::01_23",
}


def _layout_letter(rec: dict[str, Any]) -> str | None:
    if rec["kind"] != "acc":
        return None
    m, ws, cg = rec["m"], rec["ws"], rec["cta_group"]
    if cg == 2:
        return {256: "A", 128: "B"}.get(m)
    if ws:
        return {128: "D", 64: "E", 32: "G"}.get(m)
    return {128: "D", 64: "F"}.get(m)


def normalise(
    parts: list[dict[str, Any]], asm: dict[str, dict[str, Any]], package_version: str | None
) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for p in parts:
        for k, v in p.items():
            if k in ("cutlass_version", "tmem_dp_b"):
                if k in merged and merged[k] != v:
                    raise RuntimeError(f"parts disagree on {k}")
                merged[k] = v
            else:
                merged[k] = v

    xcheck = {x["op"]: x["values_compared"] for x in merged["make_tmem_copy_xcheck"]}

    ldst = []
    for r in merged["ldst"]:
        m = _LDST_RE.match(r["op"])
        if not m:
            raise RuntimeError(f"unexpected op name {r['op']}")
        direction, cute_shape, num, p16 = m.group(1), m.group(2), int(m.group(3)), bool(m.group(4))
        if (direction == "LOAD") != (r["dir"] == "load"):
            raise RuntimeError(f"direction mismatch for {r['op']}")
        regs = len(r["map"][0])
        lanes = sorted({pc[0] for th in r["map"] for reg in th for pc in reg})
        cols = sorted({pc[1] for th in r["map"] for reg in th for pc in reg})
        a = asm.get(r["op"], {})
        ldst.append(
            {
                "op": r["op"],
                "dir": r["dir"],
                "shape": _PTX_SHAPE[cute_shape],
                "cute_shape": cute_shape,
                "num": num,
                "pack16": p16,
                "regs_per_thread": regs,
                "lanes_spanned": len(lanes),
                "cols_spanned": len(cols),
                "ptx": a.get("ptx"),
                "imm_half_splitoff": a.get("imm"),
                "make_tmem_copy_checked": r["op"] in xcheck,
                "cute": {
                    "thr_id": r["thr_id"],
                    "val_id": r["val_id"],
                    "src_layout": r["src_layout"],
                    "dst_layout": r["dst_layout"],
                },
                "map": r["map"],
            }
        )
    ldst.sort(key=lambda x: (x["dir"], x["cute_shape"], x["pack16"], x["num"]))

    utccp = []
    for r in merged["utccp"]:
        logical_rows = sorted({e[0] for e in r["entries"]})
        phys = {lr: i for i, lr in enumerate(logical_rows)}
        entries = sorted([phys[e[0]], e[1], e[2], e[3]] for e in r["entries"])
        a = asm.get(r["op"], {})
        utccp.append(
            {
                "op": r["op"],
                "shape": _UTCCP_SHAPE[r["op"]],
                "ptx": a.get("ptx"),
                "src_rows": len(logical_rows),
                "src_chunks_per_row": len({e[1] for e in entries}),
                "src_logical_rows": logical_rows,
                "cute": {
                    "thr_id": r["thr_id"],
                    "val_id": r["val_id"],
                    "src_layout": r["src_layout"],
                    "dst_layout": r["dst_layout"],
                },
                "entries": entries,
            }
        )
    utccp.sort(key=lambda x: x["op"])

    frg = []
    for r in merged["mma_frg"]:
        rec = {k: v for k, v in r.items() if k != "layout_str"}
        rec["cute_layout"] = r["layout_str"]
        rec["layout"] = _layout_letter(r)
        rec.setdefault("tile_k", None)
        frg.append(rec)
    frg.sort(
        key=lambda x: (
            x["kind"],
            x["cta_group"],
            x["ws"],
            x["m"],
            x["n"],
            x["tile_m"],
            str(x["alloc_mode"]),
            str(x["op"]),
        )
    )

    return {
        "schema_version": SCHEMA_VERSION,
        "generator": "tests/oracle/regen_tmem.py (compiles tests/oracle/cute_tmem_oracle.cpp against CuTe headers)",
        "cutlass_version": merged["cutlass_version"],
        "cutlass_package": package_version,
        "tmem_dp_b": merged["tmem_dp_b"],
        "ldst": ldst,
        "utccp": utccp,
        "mma_frg": frg,
        "make_tmem_copy_xcheck": [{"op": k, "values_compared": v} for k, v in sorted(xcheck.items())],
    }


def dumps(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def gzip_bytes(raw: bytes) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as f:
        f.write(raw)
    return buf.getvalue()


def generate(verbose: bool = False) -> dict[str, Any]:
    cutlass_inc = find_cutlass_include()
    parts = build_and_run(verbose=verbose)
    return normalise(parts, parse_arch_asm(cutlass_inc), cutlass_package_version())


def load(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rb") as f:
        return json.loads(f.read())


def diff_summary(new: dict[str, Any], old: dict[str, Any]) -> list[str]:
    out = []
    for k in sorted(set(new) | set(old)):
        if k in ENV_KEYS:
            continue
        if new.get(k) == old.get(k):
            continue
        if isinstance(new.get(k), list) and isinstance(old.get(k), list):
            a, b = new[k], old[k]
            if len(a) != len(b):
                out.append(f"{k}: {len(a)} records regenerated vs {len(b)} committed")
            for x, y in zip(a, b, strict=False):
                if x != y:
                    name = x.get("op") or f"{x.get('kind')} m={x.get('m')} n={x.get('n')}"
                    out.append(f"{k}: record {name} differs")
                    if len(out) > 20:
                        return out
        else:
            out.append(f"{k}: {new.get(k)!r} regenerated vs {old.get(k)!r} committed")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the committed file, exit 1 on difference")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output path (default {DEFAULT_OUT})")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    try:
        obj = generate(verbose=args.verbose)
    except OracleUnavailable as e:
        print(f"regen_tmem: oracle unavailable: {e}", file=sys.stderr)
        return 2
    if args.check:
        if not args.out.is_file():
            print(f"regen_tmem: {args.out} does not exist", file=sys.stderr)
            return 1
        diffs = diff_summary(obj, load(args.out))
        if diffs:
            print("regen_tmem: regenerated data differs from the committed file:", file=sys.stderr)
            for d in diffs:
                print("  " + d, file=sys.stderr)
            return 1
        print(f"regen_tmem: {args.out} is up to date", file=sys.stderr)
        return 0
    data = gzip_bytes(dumps(obj))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    print(
        f"regen_tmem: wrote {args.out} ({len(data)} bytes; {len(obj['ldst'])} ld/st ops, "
        f"{len(obj['utccp'])} cp ops, {len(obj['mma_frg'])} MMA fragments)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
