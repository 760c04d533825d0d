"""Recorded GPU outputs: what ``simtc crosscheck --save`` writes and ``--replay`` reads.

A recording is a zip archive in the ``.npz`` layout, written and read by this module alone:

* ``meta.json`` — UTF-8 JSON: ``format`` (:data:`FORMAT`), ``version``, ``seed``, ``device``,
  ``date``, ``simtc`` and ``numpy`` versions, ``command``, the two rules below in words,
  ``cases`` (one entry per recorded case, in run order: ``key``, ``sha256``, ``shape``,
  ``registers`` = the member holding its registers or ``null``), ``cycles_per_group_median``
  (by check) and ``wgmma_timing`` (:func:`simtc.hw.timing.timing_to_json`, or ``null``).
* ``regs_NNNN.npy`` — plain little-endian ``float32`` arrays (``.npy`` version 1.0, no pickles,
  no object arrays), one per case that keeps its registers.

**Which cases keep their registers** (:func:`keeps_registers`, one code path for every case): a
case keeps its full (128, N/2) registers when it has at most :data:`FULL_REGISTER_LIMIT` of them
(N ≤ 64) or when it is not part of the layout sweep (special values, wrong descriptors, the dual
GEMM, the base-offset experiment); every case, kept or not, has the SHA-256 digest of its registers
as little-endian ``uint32`` (thread-major). Replay compares kept registers bit for bit and the
others by digest.

Case keys come from :func:`simtc.hw.suite.case_key` only, for writing and for looking up. The
``.npy`` members are written and parsed here (header per the NPY 1.0 specification, padded with
spaces; trailing NULs are tolerated when reading), so a recording reads back the same under every
numpy 2.x.
"""

from __future__ import annotations

import ast
import hashlib
import json
import struct
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from attrs import frozen

from simtc.errors import SimtcError

__all__ = ["FORMAT", "FULL_REGISTER_LIMIT", "Recording", "RecordingError", "digest", "keeps_registers",
           "read_recording", "write_recording"]

FORMAT = "simtc crosscheck recording"
VERSION = 2
FULL_REGISTER_LIMIT = 4096
"""Cases with at most this many registers (128 threads x 32 = N <= 64) keep them in full."""
SWEEP_CHECK = "wgmma layouts"
"""The one check whose larger cases are recorded by digest only."""
META = "meta.json"
_RULE = "--replay reads a recording written by simtc crosscheck --save"
_MAGIC = b"\x93NUMPY"


class RecordingError(SimtcError, ValueError):
    """A file that is not a readable simtc recording."""


def digest(regs: np.ndarray) -> str:
    """SHA-256 of the registers as little-endian uint32, thread-major."""
    return hashlib.sha256(np.ascontiguousarray(regs, dtype="<f4").view("<u4").tobytes()).hexdigest()


def keeps_registers(key: str, regs: np.ndarray) -> bool:
    """The stated rule: full registers for small cases and every case outside the layout sweep."""
    return regs.size <= FULL_REGISTER_LIMIT or not key.startswith(SWEEP_CHECK + " | ")


@frozen
class Recording:
    """A recording read back: metadata, digests by key, and the registers that were kept."""

    meta: dict
    digests: dict
    """key -> SHA-256 hex digest, every recorded case."""
    registers: dict
    """key -> (128, N/2) float32 registers (read-only), the cases that keep them."""

    @property
    def seed(self) -> int:
        return int(self.meta["seed"])

    @property
    def keys(self) -> list[str]:
        return [c["key"] for c in self.meta["cases"]]


def _npy_bytes(a: np.ndarray) -> bytes:
    a = np.ascontiguousarray(a, dtype="<f4")
    shape = tuple(int(x) for x in a.shape)
    header = f"{{'descr': '<f4', 'fortran_order': False, 'shape': {shape!r}, }}"
    pad = -(len(_MAGIC) + 2 + 2 + len(header) + 1) % 64
    text = (header + " " * pad + "\n").encode("latin1")
    return _MAGIC + b"\x01\x00" + struct.pack("<H", len(text)) + text + a.tobytes()


def _npy_array(raw: bytes, name: str) -> np.ndarray:
    def bad(why: str) -> RecordingError:
        return RecordingError(f"member {name}: {why}", rule=_RULE)

    if raw[:6] != _MAGIC or len(raw) < 10:
        raise bad("not an .npy array")
    major = raw[6]
    if major == 1:
        (hlen,), start = struct.unpack("<H", raw[8:10]), 10
    elif major in (2, 3):
        (hlen,), start = struct.unpack("<I", raw[8:12]), 12
    else:
        raise bad(f".npy version {major} is not known")
    text = raw[start:start + hlen].decode("latin1").rstrip(" \x00\n")
    try:
        header = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise bad(f"unreadable .npy header {text[:60]!r}") from None
    if not isinstance(header, dict) or header.get("descr") != "<f4" or header.get("fortran_order") is not False:
        raise bad(f"a plain little-endian float32 array is expected, header {header!r}")
    shape = tuple(header.get("shape", ()))
    body = raw[start + hlen:]
    if len(body) != 4 * int(np.prod(shape, dtype=np.int64)):
        raise bad(f"{len(body)} data bytes for shape {shape}")
    a = np.frombuffer(body, dtype="<f4").reshape(shape).astype(np.float32)
    a.setflags(write=False)
    return a


def write_recording(path: str | Path, outputs: Mapping[str, np.ndarray], *, seed: int, device: str,
                    cycles: Mapping[str, float] | None = None, timing: dict | None = None,
                    command: str | None = None) -> int:
    """Write ``outputs`` (case key -> registers, in run order); returns the number of cases."""
    if not outputs:
        raise RecordingError("no GPU outputs to record", rule="a recording holds the outputs of a GPU run")
    import simtc

    cases, members = [], {}
    for i, (key, regs) in enumerate(outputs.items()):
        regs = np.asarray(regs, dtype=np.float32)
        entry = {"key": key, "sha256": digest(regs), "shape": list(regs.shape), "registers": None}
        if keeps_registers(key, regs):
            entry["registers"] = f"regs_{i:04d}.npy"
            members[entry["registers"]] = _npy_bytes(regs)
        cases.append(entry)
    meta = {"format": FORMAT, "version": VERSION, "seed": int(seed), "device": device,
            "date": time.strftime("%Y-%m-%d"), "simtc": simtc.__version__, "numpy": np.__version__,
            "command": command,
            "register_rule": f"full registers for cases of at most {FULL_REGISTER_LIMIT} registers (N <= 64) and "
                             f"every case outside '{SWEEP_CHECK}'; a digest for every case",
            "digest_rule": "sha256 of the (128, N/2) float32 accumulator registers as little-endian uint32, "
                           "thread-major",
            "cases": cases, "cycles_per_group_median": dict(cycles or {}), "wgmma_timing": timing}
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr(META, json.dumps(meta, indent=1))
        for name, data in members.items():
            z.writestr(name, data)
    return len(cases)


def _check_meta(meta: dict, path) -> None:
    """The fields downstream readers use, typed (a damaged or hand-edited recording is refused here, once)."""
    def bad(why: str) -> RecordingError:
        return RecordingError(f"{str(path)!r}: incomplete metadata ({why})", rule=_RULE)

    if isinstance(meta.get("seed"), bool) or not isinstance(meta.get("seed"), int):
        raise bad(f"seed {meta.get('seed')!r} is not an integer")
    cases = meta.get("cases")
    if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
        raise bad("'cases' is not a list of objects")
    for c in cases:
        if not isinstance(c.get("key"), str) or not isinstance(c.get("sha256"), str) \
                or not isinstance(c.get("shape"), list) or not (c.get("registers") is None
                                                               or isinstance(c.get("registers"), str)):
            raise bad(f"case {c.get('key')!r} lacks its key, sha256, shape or registers")
    cycles = meta.get("cycles_per_group_median")
    if cycles is not None and not (isinstance(cycles, dict) and all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in cycles.values())):
        raise bad("'cycles_per_group_median' is not an object of numbers")
    timing = meta.get("wgmma_timing")
    if timing:
        from simtc.hw.timing import timing_from_json

        timing_from_json(timing)  # a record it cannot read is refused now, not while replaying


def read_recording(path: str | Path) -> Recording:
    """Read and validate a recording; :class:`RecordingError` names what is wrong. A truncated, garbled or foreign
    file is refused through :func:`simtc.isa.files.reading` (the one rule of every simtc reader)."""
    from simtc.isa.files import loads_json, reading

    p = Path(path)
    if not p.is_file():
        raise RecordingError(f"{str(path)!r} does not exist" if not p.exists() else f"{str(path)!r} is not a file",
                             rule=_RULE)
    with reading(p, _RULE, what="simtc recording (an .npz zip archive)", error=RecordingError):
        try:
            z = zipfile.ZipFile(p)
        except zipfile.BadZipFile:
            raise RecordingError(f"{str(path)!r} is not an .npz (zip) archive (or it is truncated)",
                                 rule=_RULE) from None
        with z:
            names = set(z.namelist())
            if META not in names:
                raise RecordingError(f"{str(path)!r} is an archive without {META}: not a simtc recording"
                                     + (" (an older simtc format)" if "meta.npy" in names else ""), rule=_RULE)
            meta = loads_json(z.read(META), f"{str(path)!r}: {META}", _RULE, error=RecordingError)
            if not isinstance(meta, dict) or meta.get("format") != FORMAT:
                raise RecordingError(f"{str(path)!r} is not a simtc recording (format "
                                     f"{meta.get('format') if isinstance(meta, dict) else None!r})", rule=_RULE)
            if meta.get("version") != VERSION:
                raise RecordingError(f"{str(path)!r}: recording version {meta.get('version')!r}; this simtc reads "
                                     f"version {VERSION}", rule=_RULE)
            _check_meta(meta, path)
            digests, registers = {}, {}
            for c in meta["cases"]:
                digests[c["key"]] = c["sha256"]
                if c["registers"] is not None:
                    if c["registers"] not in names:
                        raise RecordingError(f"{str(path)!r}: member {c['registers']} is missing", rule=_RULE)
                    regs = _npy_array(z.read(c["registers"]), c["registers"])
                    if list(regs.shape) != list(c["shape"]) or digest(regs) != c["sha256"]:
                        raise RecordingError(f"{str(path)!r}: {c['key']}: registers and digest disagree", rule=_RULE)
                    registers[c["key"]] = regs
    return Recording(meta, digests, registers)
