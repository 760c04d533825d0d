"""FlashMLA's own sparse-decode kernels beside simtc's replay: built from a checkout the user supplies.

simtc ships no FlashMLA or CUTLASS code. :func:`find_checkout` takes a FlashMLA source checkout
(``deepseek-ai/FlashMLA`` with its ``csrc/cutlass`` submodule, or CUTLASS headers named by
``cutlass=`` / ``$SIMTC_FLASHMLA_CUTLASS``) and :func:`build` compiles, with ``nvcc`` and the nvcc flags of
FlashMLA's ``setup.py``:

* **sm_90a** -- the SM90 sparse FP8 decode for 64 heads, V32 and MODEL1
  (``csrc/sm90/decode/sparse_fp8/instantiations/{v32,model1}_persistent_h64.cu``), the scheduler
  metadata kernel (``csrc/smxx/decode/get_decoding_sched_meta``) and the combine kernel
  (``csrc/smxx/decode/combine``), linked with simtc's own C entry point
  (``simtc/hw/cuda/flashmla_sm90_entry.cu``) into one shared library with a static CUDA runtime. The entry
  point makes the three launches of FlashMLA's ``sparse_attn_decode_interface``
  (``csrc/api/sparse_decode.h``) without torch: the caller (CuPy, :func:`run_sm90`) allocates every buffer.
* **sm_100a** -- the SM100 head64 kernel (``csrc/sm100/decode/head64/instantiations/{v32,model1}.cu``) as
  cubins, for the SASS comparison (:mod:`simtc.hw.flashmla_sass`); no Blackwell GPU is needed or used.

A build is a folder: the library, the cubins and ``build.json`` (FlashMLA and CUTLASS commits, nvcc version,
flags, the SASS checks). :func:`load_build` reopens one, so a build made on one machine runs on another
with the same CUDA major version (the H200 run in ``tests/data/README_flashmla.md``).

FlashMLA's kernels are compared with the replay by :func:`compare` (O normwise relative difference per
(batch, query) row, LSE absolute difference, empty rows: +inf LSE and zero O on both sides).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
from attrs import field, frozen

from simtc.errors import HardwareUnavailable, SimtcError

__all__ = ["BYTES_PER_TOKEN", "ENTRY_SOURCE", "NVCC_FLAGS", "RECORDED_SM100_SASS", "SASS_NOTES", "SASS_ROWS",
           "SM90_SOURCES", "SM100_SOURCES", "SUITE", "FlashMLABuild", "FlashMLACheckout", "FlashMLAComparison",
           "FlashMLARun", "build", "compare", "find_checkout", "load_build", "load_recording", "program_static_counts",
           "recorded_sass_agreement", "replay_recording", "run_sm90", "run_suite", "sass_counts", "sass_table",
           "save_recording", "sm90_num_sm_parts", "suite"]

_RULE = "simtc builds FlashMLA from a FlashMLA checkout with its CUTLASS headers (--flashmla DIR)"
_ENTRY = "simtc_flashmla_sm90_sparse_decode"
ENTRY_SOURCE = Path(__file__).parent / "cuda" / "flashmla_sm90_entry.cu"
"""simtc's C entry point to FlashMLA's SM90 sparse decode (simtc code; it includes FlashMLA's headers)."""

NVCC_FLAGS = ("-O3", "-std=c++20", "-DNDEBUG", "-D_USE_MATH_DEFINES", "-Wno-deprecated-declarations",
              "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__", "-U__CUDA_NO_HALF2_OPERATORS__",
              "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "--expt-relaxed-constexpr", "--expt-extended-lambda",
              "--use_fast_math")
"""FlashMLA ``setup.py``'s nvcc flags (without ``-lineinfo``, ``--source-in-ptx``, ptxas verbosity, threads)."""

SM90_SOURCES = {
    "v32": "csrc/sm90/decode/sparse_fp8/instantiations/v32_persistent_h64.cu",
    "model1": "csrc/sm90/decode/sparse_fp8/instantiations/model1_persistent_h64.cu",
    "combine": "csrc/smxx/decode/combine/combine.cu",
    "sched_meta": "csrc/smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.cu",
}
"""FlashMLA sources of the SM90 path (64 heads), by role (FlashMLA ``setup.py``)."""
SM100_SOURCES = {"v32": "csrc/sm100/decode/head64/instantiations/v32.cu",
                 "model1": "csrc/sm100/decode/head64/instantiations/model1.cu"}
"""FlashMLA sources of the SM100 head64 kernel, by model."""
SM90_KERNELS = {"v32": "flash_fwd_splitkv_mla_fp8_sparse_kernel", "model1": "flash_fwd_splitkv_mla_fp8_sparse_kernel",
                "combine": "flash_fwd_mla_combine_kernel", "sched_meta": "get_mla_metadata_kernel"}
"""The ``__global__`` function each SM90 object must hold (its SASS is checked)."""
SM90_MMA = {"v32": "HGMMA", "model1": "HGMMA"}
"""Tensor-core opcode the SM90 split-KV kernels must contain (wgmma -> HGMMA [sass]:
``tests/data/flashmla_sm90_sass.json``)."""
SM100_MMA = "UTCHMMA"
SM100_KERNEL = "6head6439flash_fwd_splitkv_mla_fp8_sparse_kernel"
"""``sm100::decode::head64::flash_fwd_splitkv_mla_fp8_sparse_kernel`` as it appears (mangled) in the SASS."""
BLOCK_SIZE_TOPK, FIXED_OVERHEAD_BLOCKS = 64, 5
"""``Decode_Sm90_Impl::get_meta`` (csrc/api/sparse_decode.h): block_size_topk 64, fixed overhead 5 blocks."""
D_V = 512
BYTES_PER_TOKEN = {"v32": 512 + 64 * 2 + (512 // 128) * 4, "model1": 448 + 64 * 2 + 448 // 64 + 1}
"""``bytes_per_token`` of ``sparse_attn_decode_interface`` (csrc/api/sparse_decode.h): 656 and 584; the SM90
launcher asserts ``stride_kv_row`` equals it."""
Progress = Callable[[str], None]


def _git(root: Path, *args: str) -> str | None:
    git = shutil.which("git")
    if git is None:
        return None
    proc = subprocess.run([git, "-C", str(root), *args], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else None


def _own_git(root: Path, *args: str, tops: tuple[Path, ...] = ()) -> str | None:
    """``git -C root ARGS`` only where ``root`` (or one of ``tops``) is the top level of its own git checkout: a folder
    inside some other repository (a copy unpacked into a project, an ``include`` folder) has no commit of its own,
    and the enclosing repository's would be wrong. None otherwise."""
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is None:
        return None
    try:
        mine = {p.resolve() for p in (root, *tops)}
        if Path(top).resolve() not in mine:
            return None
    except OSError:  # pragma: no cover - a path that cannot be resolved
        return None
    return _git(root, *args)


@frozen
class FlashMLACheckout:
    """A FlashMLA source checkout and the CUTLASS headers it builds with."""

    root: Path
    commit: str
    """``git rev-parse HEAD`` of the checkout, or ``"unknown (not a git checkout)"`` (also when the folder is inside
    another repository without being a checkout's top level: that repository's commit is not FlashMLA's)."""
    cutlass_include: Path
    cutlass_commit: str
    """The submodule commit FlashMLA pins (``git ls-tree HEAD csrc/cutlass``), or where the headers came from."""
    dirty: bool = False

    def includes(self) -> list[str]:
        c = self.root / "csrc"
        tools = self.cutlass_include.parent / "tools" / "util" / "include"
        inc = [c, c / "kerutils" / "include", c / "sm90", self.cutlass_include]
        return [f"-I{p}" for p in (*inc, *([tools] if tools.is_dir() else []))]


def find_checkout(path, cutlass=None) -> FlashMLACheckout:
    """Check that ``path`` is a FlashMLA checkout holding the files simtc builds, and find CUTLASS's headers
    (``cutlass``, else ``$SIMTC_FLASHMLA_CUTLASS``, else ``csrc/cutlass/include``)."""
    root = Path(path).expanduser()
    if not root.is_dir():
        raise SimtcError(f"--flashmla {path}: no such directory", rule=_RULE)
    wanted = (*SM90_SOURCES.values(), *SM100_SOURCES.values(), "csrc/params.h")
    missing = [s for s in wanted if not (root / s).is_file()]
    if missing:
        raise SimtcError(f"{root} is not a FlashMLA checkout simtc can build: missing {', '.join(missing)}",
                         rule=_RULE)
    cut = cutlass or os.environ.get("SIMTC_FLASHMLA_CUTLASS")
    inc = Path(cut).expanduser() if cut else root / "csrc" / "cutlass" / "include"
    if (inc / "include" / "cute").is_dir():
        inc = inc / "include"
    if not (inc / "cute" / "tensor.hpp").is_file() or not (inc / "cutlass" / "cutlass.h").is_file():
        raise SimtcError(f"no CUTLASS/CuTe headers at {inc} (run `git submodule update --init csrc/cutlass` in the "
                         "checkout, or give --cutlass DIR / $SIMTC_FLASHMLA_CUTLASS)", rule=_RULE)
    commit = _own_git(root, "rev-parse", "HEAD") or "unknown (not a git checkout)"
    pinned = _own_git(root, "ls-tree", "HEAD", "csrc/cutlass")
    cut_commit = pinned.split()[2] if pinned and len(pinned.split()) >= 3 else "unknown"
    if cut:
        own = _own_git(inc, "rev-parse", "HEAD", tops=(inc.parent,))
        cut_commit = f"headers from {inc} ({own or 'not a git checkout'}); FlashMLA pins {cut_commit}"
    status = _own_git(root, "status", "--porcelain", "--untracked-files=no", "--ignore-submodules")
    return FlashMLACheckout(root.resolve(), commit, inc.resolve(), cut_commit, dirty=bool(status))


@frozen
class FlashMLABuild:
    """A build folder (:func:`build`, :func:`load_build`)."""

    dir: Path
    manifest: dict = field(eq=False)

    @property
    def library(self) -> Path | None:
        lib = self.manifest.get("sm90", {}).get("library")
        return self.dir / lib if lib else None

    def cubin(self, arch: str, name: str) -> Path:
        return self.dir / self.manifest[arch]["cubins"][name]

    @property
    def commit(self) -> str:
        return self.manifest["flashmla_commit"]


def _nvcc() -> str:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise HardwareUnavailable("nvcc not found: FlashMLA's kernels are built with nvcc (CUDA 12.9 or later)",
                                  rule="building FlashMLA needs nvcc on PATH")
    return nvcc


def _run(cmd: list[str], what: str) -> None:
    from simtc.hw.compile import CompileError

    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        log = (proc.stderr or proc.stdout)[-6000:]
        raise CompileError(f"nvcc could not build {what}:\n{log}", log)


def _nvcc_version(nvcc: str) -> str:
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    return out.strip().splitlines()[-1] if out.strip() else "unknown"


def _compile_object(nvcc: str, co: FlashMLACheckout, src: Path, out_o: Path, out_cubin: Path, arch: str) -> None:
    """``nvcc -c`` for ``arch`` keeping the intermediate cubin (for the SASS checks)."""
    code = arch.replace("sm_", "")
    with tempfile.TemporaryDirectory() as keep:
        _run([nvcc, *NVCC_FLAGS, "-Xcompiler", "-fPIC", f"-gencode=arch=compute_{code},code={arch}",
              "--keep", "--keep-dir", keep, *co.includes(), "-c", str(src), "-o", str(out_o)], src.name)
        cubins = sorted(Path(keep).glob("*.cubin"))
        if len(cubins) != 1:
            raise SimtcError(f"nvcc --keep left {len(cubins)} cubins for {src.name}", rule="one cubin per object")
        shutil.move(str(cubins[0]), out_cubin)


def _sass_check(cubin: Path, kernel: str, mma: str | None) -> dict:
    from simtc.hw.compile import disassemble, sass_histogram

    sass = disassemble(cubin.read_bytes())
    hist = sass_histogram(sass)
    has_kernel = kernel in sass
    ok = has_kernel and (mma is None or hist.get(mma, 0) > 0)
    return {"kernel": kernel, "kernel_present": has_kernel, "instructions": int(sum(hist.values())),
            "mma": mma, "mma_count": int(hist.get(mma, 0)) if mma else None,
            "spills": int(hist.get("LDL", 0) + hist.get("STL", 0)), "ok": bool(ok)}


def _key(co: FlashMLACheckout, nvcc_version: str, arch: str) -> str:
    entry = ENTRY_SOURCE.read_bytes() if arch == "sm90" else b""
    parts = [co.commit, co.cutlass_commit, str(co.root), nvcc_version, arch, *NVCC_FLAGS]
    return hashlib.sha256("\x00".join(parts).encode() + entry).hexdigest()[:16]


def build(checkout: FlashMLACheckout, out_dir=None, *, sm90: bool = True, sm100: bool = True,
          progress: Progress | None = None) -> FlashMLABuild:
    """Build FlashMLA's kernels into ``out_dir`` (default ``$SIMTC_CACHE/flashmla/<key>``), or reuse that folder
    when it already holds a build of the same checkout commit, flags and nvcc. A dirty checkout always rebuilds."""
    from simtc.hw.compile import cache_dir

    nvcc = _nvcc()
    version = _nvcc_version(nvcc)
    keys = {"sm90": _key(checkout, version, "sm90"), "sm100": _key(checkout, version, "sm100")}
    out = Path(out_dir) if out_dir else cache_dir() / "flashmla" / hashlib.sha256(
        (keys["sm90"] + keys["sm100"]).encode()).hexdigest()[:16]
    out.mkdir(parents=True, exist_ok=True)
    mpath = out / "build.json"
    manifest = _manifest(mpath) if mpath.is_file() else {}
    manifest.update({"format": "simtc-flashmla-build", "version": 1, "flashmla_commit": checkout.commit,
                     "flashmla_dirty": checkout.dirty, "cutlass_commit": checkout.cutlass_commit,
                     "checkout": str(checkout.root), "nvcc": version, "nvcc_flags": list(NVCC_FLAGS)})
    say = progress or (lambda s: None)
    if sm90 and (checkout.dirty or manifest.get("sm90", {}).get("key") != keys["sm90"]
                 or not (out / "libflashmla_sm90.so").is_file()):
        objs, cubins, checks = [], {}, {}
        for name, rel in {**SM90_SOURCES, "entry": None}.items():
            say(f"nvcc sm_90a {rel or ENTRY_SOURCE.name}")
            src = ENTRY_SOURCE if rel is None else checkout.root / rel
            o = out / f"sm90_{name}.o"
            cub = out / f"sm90_{name}.cubin"
            _compile_object(nvcc, checkout, src, o, cub, "sm_90a")
            objs.append(str(o))
            if rel is not None:
                cubins[name] = cub.name
                checks[name] = _sass_check(cub, SM90_KERNELS[name], SM90_MMA.get(name))
            else:
                cub.unlink(missing_ok=True)
        say("link libflashmla_sm90.so")
        _run([nvcc, "-shared", "-gencode=arch=compute_90a,code=sm_90a", "-cudart", "static", "-o",
              str(out / "libflashmla_sm90.so"), *objs], "libflashmla_sm90.so")
        for o in objs:
            Path(o).unlink()
        manifest["sm90"] = {"key": keys["sm90"], "library": "libflashmla_sm90.so", "entry": _ENTRY,
                            "cubins": cubins, "sass": checks, "sources": SM90_SOURCES}
    if sm100 and (checkout.dirty or manifest.get("sm100", {}).get("key") != keys["sm100"]):
        cubins, checks = {}, {}
        for name, rel in SM100_SOURCES.items():
            say(f"nvcc sm_100a {rel}")
            cub = out / f"sm100_head64_{name}.cubin"
            _run([nvcc, *NVCC_FLAGS, "-arch=sm_100a", "-cubin", *checkout.includes(), str(checkout.root / rel),
                  "-o", str(cub)], rel)
            cubins[name] = cub.name
            checks[name] = _sass_check(cub, SM100_KERNEL, SM100_MMA)
        manifest["sm100"] = {"key": keys["sm100"], "cubins": cubins, "sass": checks, "sources": SM100_SOURCES}
    mpath.write_text(json.dumps(manifest, indent=1) + "\n")
    return FlashMLABuild(out.resolve(), manifest)


def load_build(path) -> FlashMLABuild:
    """Reopen a build folder written by :func:`build` (no checkout or compiler needed)."""
    p = Path(path)
    m = p / "build.json"
    if not m.is_file():
        raise SimtcError(f"{p} is not a simtc FlashMLA build folder (it has no build.json)", rule=_RULE)
    manifest = _manifest(m)
    if manifest.get("format") != "simtc-flashmla-build":
        raise SimtcError(f"{m} is not a simtc FlashMLA build manifest", rule=_RULE)
    return FlashMLABuild(p.resolve(), manifest)


def _manifest(m: Path) -> dict:
    """A build folder's ``build.json``, read by :func:`simtc.isa.files.read_json` (damaged: one refusal)."""
    from simtc.isa.files import read_json

    manifest = read_json(m, _RULE, what="simtc FlashMLA build manifest")
    if not isinstance(manifest, dict):
        raise SimtcError(f"{m} is not a simtc FlashMLA build manifest (a JSON {type(manifest).__name__}, not an "
                         "object)", rule=_RULE)
    return manifest


# ---- running the SM90 kernels (CuPy) -----------------------------------------------------------------------

def sm90_num_sm_parts(num_sms: int, s_q: int, h_q: int = 64) -> int:
    """``Decode_Sm90_Impl::get_meta``: max(num_sms / s_q / (h_q / 64), 1) (integer division, csrc/api/sparse_decode.h).

    >>> sm90_num_sm_parts(132, 1), sm90_num_sm_parts(132, 2), sm90_num_sm_parts(132, 200)
    (132, 66, 1)
    """
    return max(num_sms // s_q // (h_q // 64), 1)


_LIBS: dict[str, object] = {}


def _library(b: FlashMLABuild):
    import ctypes

    lib = b.library
    if lib is None or not lib.is_file():
        raise SimtcError(f"the build in {b.dir} has no SM90 library", rule="run_sm90 needs an sm_90a build")
    key = str(lib)
    if key not in _LIBS:
        h = ctypes.CDLL(key)
        fn = getattr(h, _ENTRY)
        ptr, i32 = ctypes.c_void_p, ctypes.c_int
        fn.argtypes = [*[i32] * 10, ctypes.c_float, *[ptr] * 11, i32, ptr, ctypes.c_char_p, i32]
        fn.restype = i32
        _LIBS[key] = fn
    return _LIBS[key]


def _timed_library(b: FlashMLABuild):
    """The timed entry point (``simtc_flashmla_sm90_sparse_decode_timed``; :mod:`simtc.hw.flashmla_timing`)."""
    import ctypes

    lib = b.library
    if lib is None or not lib.is_file():
        raise SimtcError(f"the build in {b.dir} has no SM90 library", rule="FlashMLA timing needs an sm_90a build")
    key = f"{lib}:timed"
    if key not in _LIBS:
        h = ctypes.CDLL(str(lib))
        fn = getattr(h, _ENTRY + "_timed", None)
        if fn is None:
            raise SimtcError(f"the build in {b.dir} predates the timed entry point: rebuild it (--flashmla CHECKOUT)",
                             rule="FlashMLA timing needs a build of the current entry point")
        ptr, i32 = ctypes.c_void_p, ctypes.c_int
        fn.argtypes = [*[i32] * 10, ctypes.c_float, *[ptr] * 11, i32, ptr, ctypes.c_char_p, i32, i32, i32, ptr,
                       ctypes.c_longlong, ptr]
        fn.restype = i32
        _LIBS[key] = fn
    return _LIBS[key]


def run_sm90(b: FlashMLABuild, inp) -> tuple[np.ndarray, np.ndarray]:
    """Run FlashMLA's SM90 sparse decode (scheduler, split-KV kernel, combine) on a
    :class:`~simtc.kernels.flashmla.io.FlashMLAInputs` through CuPy; returns ``(out, lse)`` as an outputs file
    holds them: uint16 bf16 bits [b, s_q, 64, 512] and float32 [b, s_q, 64] (natural log)."""
    import ctypes

    from simtc.hw.device import require

    info = require("sm_90a")
    import cupy as cp

    fn = _library(b)
    nb, s_q, h_q, d_qk = inp.q.shape
    parts = sm90_num_sm_parts(info.sms, s_q, h_q)
    splits = nb + parts
    dev = {k: cp.asarray(np.ascontiguousarray(v)) for k, v in
           (("q", inp.q), ("kv", inp.kv), ("idx", inp.indices), ("sink", inp.attn_sink), ("tl", inp.topk_length))
           if v is not None}
    out = cp.zeros((nb, s_q, h_q, D_V), cp.uint16)
    lse = cp.zeros((nb, s_q, h_q), cp.float32)
    meta = cp.zeros((parts, 8), cp.int32)  # DecodingSchedMeta: 8 ints (csrc/params.h)
    nsplit = cp.zeros((nb + 1,), cp.int32)
    lse_acc = cp.zeros((splits, s_q, h_q), cp.float32)
    o_acc = cp.zeros((splits, s_q, h_q, D_V), cp.float32)
    err = ctypes.create_string_buffer(1024)

    def ptr(k):
        return dev[k].data.ptr if k in dev else None

    rc = fn(int(inp.model.name == "model1"), nb, s_q, h_q, d_qk, inp.topk, inp.num_blocks, inp.page_block_size,
            inp.block_stride, BYTES_PER_TOKEN[inp.model.name],
            float(inp.sm_scale), ptr("q"), ptr("kv"), ptr("idx"), ptr("tl"), ptr("sink"), out.data.ptr, lse.data.ptr,
            meta.data.ptr, nsplit.data.ptr, lse_acc.data.ptr, o_acc.data.ptr, parts, None, err, len(err))
    if rc:
        raise SimtcError(f"FlashMLA's SM90 sparse decode failed: {err.value.decode(errors='replace')}",
                         rule="FlashMLA's launcher checks (csrc/sm90/decode/sparse_fp8/splitkv_mla.cuh)")
    return cp.asnumpy(out), cp.asnumpy(lse)


# ---- comparing with the replay -----------------------------------------------------------------------------

O_TOL, LSE_TOL = 4e-3, 1e-4
"""Acceptance: O normwise relative difference per (batch, query) row <= 4e-3; |LSE difference| <= 1e-4."""


@frozen
class FlashMLAComparison:
    """FlashMLA's outputs vs the replay's on one inputs file."""

    name: str
    model: str
    shape: tuple[int, int, int]
    """(b, s_q, topk)."""
    o_rel: float
    """Largest O normwise relative difference ||O_fm - O_sim||_F / ||O_sim||_F over the non-empty rows."""
    lse_abs: float
    """Largest |LSE_fm - LSE_sim| over finite entries."""
    empty_rows: int
    empty_identical: bool
    """Every empty row has LSE +inf and O = 0 on both sides, and no other row is infinite on either side."""

    @property
    def ok(self) -> bool:
        return self.o_rel <= O_TOL and self.lse_abs <= LSE_TOL and self.empty_identical

    def as_dict(self) -> dict:
        return {"name": self.name, "model": self.model, "b": self.shape[0], "s_q": self.shape[1],
                "topk": self.shape[2], "o_rel": self.o_rel, "lse_abs": self.lse_abs, "empty_rows": self.empty_rows,
                "empty_identical": self.empty_identical, "ok": self.ok}


def _bf16_to_f64(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def compare(name: str, inp, got: tuple[np.ndarray, np.ndarray], want: tuple[np.ndarray, np.ndarray]
            ) -> FlashMLAComparison:
    """Compare ``got`` = (out bits, lse) of FlashMLA with ``want`` = the replay's on the inputs ``inp``
    (:class:`~simtc.kernels.flashmla.io.FlashMLAInputs`), row by row. A row is empty when it has no valid token.

    >>> from simtc.kernels.flashmla.io import make_inputs
    >>> inp = make_inputs("v32", b=1, s_q=2, topk=64, empty_rows=1)
    >>> rng = np.random.default_rng(0)
    >>> o = (rng.normal(size=(1, 2, 64, 512)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    >>> lse = np.array([[[1.0] * 64, [np.inf] * 64]], np.float32); o[0, 1] = 0
    >>> c = compare("t", inp, (o, lse), (o, lse)); (c.o_rel, c.lse_abs, c.empty_rows, c.ok)
    (0.0, 0.0, 1, True)
    >>> o2 = o.copy(); o2[0, 0, 0, 0] ^= 0x4000
    >>> compare("t", inp, (o2, lse), (o, lse)).ok
    False
    """
    o_g, o_w = _bf16_to_f64(got[0]), _bf16_to_f64(want[0])
    l_g, l_w = np.asarray(got[1], np.float64), np.asarray(want[1], np.float64)
    if o_g.shape != o_w.shape or l_g.shape != l_w.shape:
        raise SimtcError(f"{name}: output shapes differ: {o_g.shape}/{l_g.shape} vs {o_w.shape}/{l_w.shape}",
                         rule="both sides produce FlashMLA's output shapes")
    empty = ~inp.valid().any(axis=-1)  # [b, s_q]: no valid token
    nonempty = ~empty
    diff = np.sqrt(((o_g - o_w) ** 2).sum(axis=(-2, -1)))
    norm = np.sqrt((o_w ** 2).sum(axis=(-2, -1)))
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(norm > 0, diff / norm, np.where(diff > 0, np.inf, 0.0))
    o_rel = float(rel[nonempty].max()) if nonempty.any() else 0.0
    if not np.isfinite(o_g[nonempty]).all():
        o_rel = float("inf")
    fin = np.isfinite(l_g) & np.isfinite(l_w)
    lse_abs = float(np.abs(l_g[fin] - l_w[fin]).max()) if fin.any() else 0.0
    inf_g, inf_w = ~np.isfinite(l_g), ~np.isfinite(l_w)
    e = empty[..., None]
    empty_ok = bool(np.array_equal(inf_g, inf_w) and np.array_equal(inf_g, np.broadcast_to(e, inf_g.shape))
                    and (l_g[inf_g] == np.inf).all() and (l_w[inf_w] == np.inf).all()
                    and not o_g[empty].any() and not o_w[empty].any())
    return FlashMLAComparison(name, inp.model.name, (inp.b, inp.s_q, inp.topk), o_rel, lse_abs, int(empty.sum()),
                              empty_ok)


# ---- the SM100 head64 SASS vs the replay Program -----------------------------------------------------------

SASS_ROWS = ("UTCHMMA.WS", "UTCCP.T.S", "UTCBAR", "UTMALDG.2D.GATHER4", "UTMALDG.4D+5D", "UTMASTG.4D", "UBLKCP.G.S",
             "LDTM.x32", "LDTM.x64", "STTM.x64", "FENCE.VIEW.ASYNC.T", "MUFU.EX2")
"""The instructions compared [sass], from the PTX ``tcgen05.mma.ws``, ``tcgen05.cp``, ``tcgen05.commit``, TMA
gather4 / tile loads, TMA store, bulk copy, ``tcgen05.ld`` / ``st``, ``tcgen05.wait::st`` and ``ex2`` (recorded in
``tests/data/flashmla_sm100_sass.json``)."""

SASS_NOTES = {
    "LDTM.x32": "kernel.cuh (WG0, load P): `if (warp_idx < 2) {ld P -> p; ld P+32 -> p_peer} else {ld P -> p_peer; "
                "ld P+32 -> p}` -- two branches of 2 loads are 4 code sites; a thread executes one branch (2 loads "
                "per block), which is what the Program holds (the branch is resolved per warp by warp_offsets)",
    "LDTM.x64": "4 code sites each: the lazy O rescale, the no-split epilogue and the split-KV epilogue (o_accum); "
                "the Program replays one request without split-KV, so it has the first two (8)",
    "UBLKCP.G.S": "the split-KV epilogue's 16 bulk copies of 2,048-byte o_accum rows (an unrolled loop of B_H/4); "
                  "not in the Program (one request, no split-KV)",
}
"""Why the SASS code-site count differs from the Program's static count, row by row (FlashMLA
``csrc/sm100/decode/head64/kernel.cuh``)."""


RECORDED_SM100_SASS = {
    "flashmla_commit": "9241ae3ef9bac614dd25e45e507e089f888280e0", "nvcc": "nvcc 13.0 (V13.0.88)", "arch": "sm_100a",
    "v32": {"UTCHMMA.WS": 26, "UTCCP.T.S": 18, "UTCBAR": 3, "UTMALDG.2D.GATHER4": 48, "UTMALDG.4D+5D": 9,
            "UTMASTG.4D": 8, "UBLKCP.G.S": 16, "LDTM.x32": 4, "LDTM.x64": 12, "STTM.x64": 4, "FENCE.VIEW.ASYNC.T": 4,
            "MUFU.EX2": 34},
    "model1": {"UTCHMMA.WS": 24, "UTCCP.T.S": 16, "UTCBAR": 3, "UTMALDG.2D.GATHER4": 32, "UTMALDG.4D+5D": 8,
               "UTMASTG.4D": 8, "UBLKCP.G.S": 16, "LDTM.x32": 4, "LDTM.x64": 12, "STTM.x64": 4,
               "FENCE.VIEW.ASYNC.T": 4, "MUFU.EX2": 34},
}
"""The head64 cubins' code-site counts of :data:`SASS_ROWS` as recorded from a real build (FlashMLA at the commit
named, nvcc, ``-arch``): ``tests/data/flashmla_sm100_sass.json`` (a test checks that this copy equals it), kept
here so that ``simtc tour`` needs neither the build nor the tests folder."""


def recorded_sass_agreement(model_name: str) -> list[dict]:
    """Rows ``{instruction, recorded, program, difference, explained}``: the recorded build's code sites
    (:data:`RECORDED_SM100_SASS`) against the replay Program's static counts (:func:`program_static_counts`),
    recomputed now; ``explained`` says whether a difference has its reason in :data:`SASS_NOTES`."""
    prog = program_static_counts(model_name)["static"]
    rec = RECORDED_SM100_SASS[model_name]
    return [{"instruction": k, "recorded": rec[k], "program": prog[k], "difference": rec[k] - prog[k],
             "explained": rec[k] == prog[k] or k in SASS_NOTES} for k in SASS_ROWS]


def _program_classes(program) -> dict[str, int]:
    from simtc.isa.cuda_core import CudaCoreBlock
    from simtc.isa.tcgen05 import Commit, Cp, Ld, Mma, St, WaitSt
    from simtc.isa.tma import CpAsyncBulk, CpAsyncBulkTensor, CpAsyncBulkTensorStore

    out = dict.fromkeys(SASS_ROWS, 0)
    for _, _, r in program.records():
        name = None
        if isinstance(r, Mma):
            name = "UTCHMMA.WS" if r.opcode == "tcgen05.mma.ws" else "UTCHMMA"
        elif isinstance(r, Cp):
            name = "UTCCP.T.S"
        elif isinstance(r, Commit):
            name = "UTCBAR"
        elif isinstance(r, CpAsyncBulkTensorStore):
            name = "UTMASTG.4D"
        elif isinstance(r, CpAsyncBulkTensor):
            name = "UTMALDG.2D.GATHER4" if r.mode == "gather4" else "UTMALDG.4D+5D"
        elif isinstance(r, CpAsyncBulk):
            name = "UBLKCP.G.S"
        elif isinstance(r, Ld):
            name = f"LDTM.x{r.num}"
        elif isinstance(r, St):
            name = f"STTM.x{r.num}"
        elif isinstance(r, WaitSt):
            name = "FENCE.VIEW.ASYNC.T"
        elif isinstance(r, CudaCoreBlock):
            out["MUFU.EX2"] += sum(n for c, n in r.counts if c == "MUFU.EX2")
        if name is not None:
            out[name] = out.get(name, 0) + 1
    return out


def program_static_counts(model_name: str) -> dict[str, dict[str, int]]:
    """The replay Program's counts in SASS terms, split the way a binary's code sites are: ``per_request``
    (prologue + epilogue), ``per_block`` (one steady-state block with every branch taken: the lazy rescale on)
    and ``static`` = their sum -- what one code site per instruction would give."""
    from simtc.kernels.flashmla.head64 import head64_program

    def c(blocks, rescale=None):
        return _program_classes(head64_program(model_name, blocks, rescale))

    two, three_r, three, one = c(2), c(3, [False, False, True]), c(3), c(1)
    block_all = {k: three_r[k] - two[k] for k in SASS_ROWS}
    block_plain = {k: three[k] - two[k] for k in SASS_ROWS}
    request = {k: one[k] - block_plain[k] for k in SASS_ROWS}
    return {"per_request": request, "per_block": block_all,
            "static": {k: request[k] + block_all[k] for k in SASS_ROWS}}


def sass_counts(cubin: bytes) -> dict[str, int]:
    """A head64 cubin's code-site counts for :data:`SASS_ROWS` (nvdisasm; full dotted mnemonics)."""
    from simtc.hw.compile import disassemble, sass_histogram

    h = sass_histogram(disassemble(cubin), full=True)
    out = {k: int(h.get(k, 0)) for k in SASS_ROWS}
    out["UTMALDG.4D+5D"] = int(h.get("UTMALDG.4D", 0) + h.get("UTMALDG.5D", 0))
    return out


def sass_table(sass: Mapping[str, Mapping[str, int]]) -> list[dict]:
    """Rows ``{instruction, model, sass, program_static, program_per_block, program_per_request, difference,
    note}`` for the given SASS counts by model (``{"v32": {...}, "model1": {...}}``)."""
    rows = []
    for name, counts in sass.items():
        prog = program_static_counts(name)
        for k in SASS_ROWS:
            d = int(counts[k]) - prog["static"][k]
            rows.append({"instruction": k, "model": name, "sass": int(counts[k]), "program_static": prog["static"][k],
                         "program_per_block": prog["per_block"][k], "program_per_request": prog["per_request"][k],
                         "difference": d, "note": SASS_NOTES.get(k, "") if d else ""})
    return rows


# ---- the cross-check suite, its run, its recording ---------------------------------------------------------

SUITE = (
    ("v32-1block-invalid", dict(model_name="v32", b=1, s_q=1, topk=64, invalid_frac=0.2)),
    ("v32-sink-empty-row", dict(model_name="v32", b=2, s_q=2, topk=128, attn_sink=True, empty_rows=1)),
    ("v32-rescale", dict(model_name="v32", b=1, s_q=2, topk=256, hot_scale=4, invalid_frac=0.1)),
    ("v32-32blocks", dict(model_name="v32", b=1, s_q=1, topk=2048, num_blocks=33, attn_sink=True)),
    ("model1-1block-invalid", dict(model_name="model1", b=1, s_q=1, topk=64, invalid_frac=0.2)),
    ("model1-sink-empty-row", dict(model_name="model1", b=2, s_q=1, topk=128, attn_sink=True, empty_rows=1)),
    ("model1-rescale-16blocks", dict(model_name="model1", b=1, s_q=1, topk=1024, num_blocks=17, hot_scale=4)),
    ("model1-topk-length", dict(model_name="model1", b=2, s_q=1, topk=256, topk_length=(100, 256))),
)
"""The input sets of ``simtc crosscheck --flashmla`` (:func:`simtc.kernels.flashmla.io.make_inputs` arguments;
each set's seed is the run's seed + its position): V32 and MODEL1, 1 to 32 blocks, invalid indices, attn_sink,
a row with no valid token, hot tokens whose large scores force the lazy O rescale, MODEL1's topk_length."""


def suite(seed: int = 0) -> list[tuple[str, object]]:
    """``[(name, FlashMLAInputs), ...]`` of :data:`SUITE`."""
    from simtc.kernels.flashmla.io import make_inputs

    return [(name, make_inputs(**kw, seed=seed + i)) for i, (name, kw) in enumerate(SUITE)]


@frozen
class FlashMLARun:
    """FlashMLA's SM90 kernels on every input set, beside the replay."""

    rows: tuple[FlashMLAComparison, ...]
    inputs: tuple = field(eq=False, repr=False)
    """((name, FlashMLAInputs), ...)."""
    outputs: tuple = field(eq=False, repr=False)
    """((out, lse) of FlashMLA, ...) in the same order."""

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)


def _replay(inp) -> tuple[np.ndarray, np.ndarray]:
    from simtc.kernels.flashmla.io import replay_inputs

    res = replay_inputs(inp)
    return res.outputs.out, res.outputs.lse


def run_suite(b: FlashMLABuild, seed: int = 0, progress: Callable[[int], None] | None = None) -> FlashMLARun:
    """Run FlashMLA's SM90 sparse decode on every set of :func:`suite` (needs an sm_90a GPU and cupy) and
    compare each with the replay."""
    rows, inputs, outputs = [], [], []
    for name, inp in suite(seed):
        got = run_sm90(b, inp)
        rows.append(compare(name, inp, got, _replay(inp)))
        inputs.append((name, inp))
        outputs.append(got)
        if progress:
            progress(1)
    return FlashMLARun(tuple(rows), tuple(inputs), tuple(outputs))


RECORDING_FORMAT = "simtc-flashmla-sm90-recording"


def save_recording(path, run: FlashMLARun, *, meta: Mapping) -> None:
    """One ``.npz``: every set's input arrays as ``<name>/<key>``, FlashMLA's ``<name>/out`` and ``<name>/lse``,
    and ``meta.json`` (format, FlashMLA commit, device, date, command, the comparison rows)."""
    arrays = {}
    for (name, inp), (out, lse) in zip(run.inputs, run.outputs, strict=True):
        for k, v in inp.arrays().items():
            arrays[f"{name}/{k}"] = np.asarray(v)
        arrays[f"{name}/out"], arrays[f"{name}/lse"] = out, lse
    m = {"format": RECORDING_FORMAT, "version": 1, **meta, "sets": [n for n, _ in run.inputs],
         "rows": [r.as_dict() for r in run.rows]}
    arrays["meta.json"] = np.frombuffer(json.dumps(m, indent=1).encode(), np.uint8)
    with open(path, "wb") as f:
        np.savez_compressed(f, **arrays)


def load_recording(path) -> tuple[dict, list[tuple[str, object, tuple[np.ndarray, np.ndarray]]]]:
    """``(meta, [(name, FlashMLAInputs, (out, lse)), ...])`` of a file written by :func:`save_recording`; every
    set's inputs and outputs are validated by :mod:`simtc.kernels.flashmla.io`."""
    from simtc.isa.files import loads_json
    from simtc.kernels.flashmla.io import read_npz, validate_inputs, validate_outputs

    rule = "a FlashMLA recording is written by simtc crosscheck --flashmla --save-flashmla"
    data = read_npz(path, "recording", rule=rule)  # missing, truncated, not an archive: refused there
    if "meta.json" not in data:
        raise SimtcError(f"{path}: not a FlashMLA recording (it has no meta.json member)", rule=rule)
    raw = data.pop("meta.json")  # a uint8 array (save_recording); a plain zip member reads back as bytes
    if not isinstance(raw, bytes) and (raw.dtype != np.uint8 or raw.ndim != 1):
        raise SimtcError(f"{path}: not a FlashMLA recording (meta.json is a {raw.dtype} array of shape {raw.shape}, "
                         "not bytes)", rule=rule)
    meta = loads_json(raw if isinstance(raw, bytes) else raw.tobytes(), f"{path}: meta.json", rule)
    if not isinstance(meta, dict) or meta.get("format") != RECORDING_FORMAT:
        got = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise SimtcError(f"{path}: format {got!r}, not {RECORDING_FORMAT}", rule=rule)
    names = meta.get("sets")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise SimtcError(f"{path}: meta.json's 'sets' is not a non-empty list of set names", rule=rule)
    sets = []
    for name in names:
        part = {k.split("/", 1)[1]: v for k, v in data.items() if k.split("/", 1)[0] == name and "/" in k}
        missing = [k for k in ("out", "lse") if k not in part]
        if missing:
            raise SimtcError(f"{path}: set {name!r} has no {' or '.join(missing)} array (FlashMLA's outputs)",
                             rule=rule)
        outs = {k: part.pop(k) for k in ("out", "lse")}
        try:
            inp = validate_inputs(part)
            o = validate_outputs(outs, inp)
        except SimtcError as e:
            raise type(e)(f"{path}: set {name!r}: {e.message}", rule=e.rule, ref=e.ref) from None
        sets.append((name, inp, (o.out, o.lse)))
    return meta, sets


def replay_recording(path) -> list[FlashMLAComparison]:
    """Replay simtc on a recording's inputs and compare with the recorded FlashMLA outputs (no GPU)."""
    _, sets = load_recording(path)
    return [compare(name, inp, got, _replay(inp)) for name, inp, got in sets]


def open_build(path, *, cutlass=None, build_dir=None, progress: Progress | None = None) -> FlashMLABuild:
    """``--flashmla DIR``: a build folder (``build.json``) is reopened as is; a FlashMLA checkout is built
    (into ``build_dir``, default the cache)."""
    p = Path(path).expanduser()
    if (p / "build.json").is_file():
        return load_build(p)
    return build(find_checkout(p, cutlass), build_dir, progress=progress)


def _checks(b: FlashMLABuild) -> list[dict]:
    """The SASS checks of every cubin in the build, disassembled now (else as recorded at build time when no
    disassembler is found here)."""
    kernels = {"sm90": SM90_KERNELS, "sm100": dict.fromkeys(SM100_SOURCES, SM100_KERNEL)}
    mmas = {"sm90": SM90_MMA, "sm100": dict.fromkeys(SM100_SOURCES, SM100_MMA)}
    out = []
    for arch in ("sm90", "sm100"):
        part = b.manifest.get(arch, {})
        for name in part.get("cubins", {}):
            try:
                c = _sass_check(b.cubin(arch, name), kernels[arch][name], mmas[arch].get(name))
            except HardwareUnavailable:
                c = dict(part.get("sass", {}).get(name, {}), recorded_at_build=True)
            out.append({"arch": arch, "name": name, **c})
    return out


def build_report(b: FlashMLABuild) -> dict:
    """The build checks (SASS of every FlashMLA kernel built) and the SM100 head64 SASS-vs-Program table."""
    checks = _checks(b)
    sass = {}
    try:
        for name in b.manifest.get("sm100", {}).get("cubins", {}):
            sass[name] = sass_counts(b.cubin("sm100", name).read_bytes())
    except HardwareUnavailable:
        sass = {}
    table = sass_table(sass) if sass else []
    unexplained = [r for r in table if r["difference"] and not r["note"]]
    return {"flashmla_commit": b.commit, "cutlass_commit": b.manifest.get("cutlass_commit"),
            "nvcc": b.manifest.get("nvcc"), "build_dir": str(b.dir), "checks": checks,
            "build_ok": bool(checks) and all(c.get("ok") for c in checks), "sass_table": table,
            "sass_ok": not unexplained}
