"""``simtc run flashmla-sm90``: FlashMLA's own SM90 sparse decode, compiled to PTX from a checkout and executed.

The three kernels of FlashMLA's ``sparse_attn_decode_interface`` (scheduler metadata, split-KV, combine) are compiled
from the checkout with the nvcc flags of FlashMLA's ``setup.py`` (:data:`simtc.hw.flashmla.NVCC_FLAGS`) to
``sm_90a`` PTX, cached under simtc's build cache (``$SIMTC_CACHE/flashmla-ptx/<key>``, the key: checkout commit,
CUTLASS commit, nvcc version, flags, the probe's source), and launched through :mod:`simtc.cuda` in order with the
parameters :mod:`simtc.kernels.flashmla.executed` builds as FlashMLA's host code does. Inputs and outputs are the
formats of ``simtc replay --inputs/--save-outputs`` (:mod:`simtc.kernels.flashmla.io`).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from attrs import frozen

from simtc.errors import SimtcError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["KERNELS", "SM90_PTX", "Executed", "PtxBuild", "add_arguments", "compile_ptx", "execute", "probe_layouts",
           "refuse_flashmla_options", "run"]

KERNELS = ("flashmla-sm90", "flashmla-head64")
"""What ``simtc run`` takes in place of a FILE: FlashMLA's own kernels, compiled from ``--flashmla DIR``: the SM90
sparse decode (scheduler, split-KV, combine) and the SM100 head64 kernel
(:mod:`simtc.cuda.executed_sm100.head64`)."""
_OPTIONS = ("flashmla", "cutlass", "inputs", "save_outputs", "mufu_ulps", "model", "blocks")

SM90_PTX = {
    "v32": "csrc/sm90/decode/sparse_fp8/instantiations/v32_persistent_h64.cu",
    "model1": "csrc/sm90/decode/sparse_fp8/instantiations/model1_persistent_h64.cu",
    "combine": "csrc/smxx/decode/combine/combine.cu",
    "sched_meta": "csrc/smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.cu",
}
"""FlashMLA's translation units, whose explicit instantiations (``template void run_...<...>``) instantiate the
kernels simtc executes (FlashMLA ``setup.py`` lists them)."""

_RULE = "simtc compiles FlashMLA's SM90 decode from a FlashMLA checkout with its CUTLASS headers (--flashmla DIR)"


@frozen
class PtxBuild:
    """The compiled PTX (``ptx[name]`` paths), the layout probe binary, and how they were made."""

    dir: Path
    ptx: dict
    probe: Path
    manifest: dict

    def path(self, name: str, mufu_ulps: int = 0) -> Path:
        """The PTX file of ``name``; with ``mufu_ulps``, a copy whose MUFU results move by that many ulps
        (:func:`simtc.kernels.flashmla.executed.perturb_mufu`), written next to it once."""
        if not mufu_ulps:
            return self.ptx[name]
        from simtc.kernels.flashmla.executed import perturb_mufu

        p = self.dir / f"{name}.mufu{mufu_ulps:+d}.ptx"
        if not p.is_file():
            text, _ = perturb_mufu(self.ptx[name].read_text(), mufu_ulps)
            tmp = p.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.replace(p)
        return p


def _key(co, nvcc_version: str) -> str:
    from simtc.hw.flashmla import NVCC_FLAGS
    from simtc.kernels.flashmla.executed import LAYOUT_PROBE

    parts = [co.commit, co.cutlass_commit, str(co.root), nvcc_version, "sm_90a", *NVCC_FLAGS]
    return hashlib.sha256("\x00".join(parts).encode() + LAYOUT_PROBE.read_bytes()).hexdigest()[:16]


def compile_ptx(checkout, *, progress=None) -> PtxBuild:
    """Compile the SM90 decode's four translation units to ``sm_90a`` PTX and the layout probe to a host program,
    into the build cache (reused when the key matches; a dirty checkout always rebuilds)."""
    from concurrent.futures import ThreadPoolExecutor

    from simtc.hw.compile import cache_dir
    from simtc.hw.flashmla import NVCC_FLAGS, _nvcc, _nvcc_version, _run
    from simtc.kernels.flashmla.executed import LAYOUT_PROBE

    nvcc = _nvcc()
    version = _nvcc_version(nvcc)
    out = cache_dir() / "flashmla-ptx" / _key(checkout, version)
    out.mkdir(parents=True, exist_ok=True)
    mpath = out / "build.json"
    ptx = {name: out / f"{name}.ptx" for name in SM90_PTX}
    probe = out / "flashmla_sm90_layout"
    if not checkout.dirty and mpath.is_file() and all(p.is_file() for p in (*ptx.values(), probe)):
        return PtxBuild(out, ptx, probe, json.loads(mpath.read_text()))
    say = progress or (lambda s: None)
    jobs = [([nvcc, *NVCC_FLAGS, "-arch=sm_90a", "-ptx", *checkout.includes(), str(checkout.root / rel), "-o",
              str(ptx[name])], rel) for name, rel in SM90_PTX.items()]
    # the probe: a host program; CUTLASS calls cuTensorMapEncodeTiled by name, which the probe defines
    jobs.append(([nvcc, *NVCC_FLAGS, "-DCUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL=1", "-arch=sm_90a",
                  *checkout.includes(), str(LAYOUT_PROBE), "-o", str(probe)], LAYOUT_PROBE.name))
    for _, what in jobs:
        say(f"nvcc sm_90a {what}")
    with ThreadPoolExecutor(max_workers=2) as pool:
        for f in [pool.submit(_run, cmd, what) for cmd, what in jobs]:
            f.result()
    manifest = {"format": "simtc-flashmla-sm90-ptx", "version": 1, "flashmla_commit": checkout.commit,
                "flashmla_dirty": checkout.dirty, "cutlass_commit": checkout.cutlass_commit, "nvcc": version,
                "nvcc_flags": list(NVCC_FLAGS), "arch": "sm_90a", "sources": SM90_PTX,
                "ptx_sha256": {n: hashlib.sha256(p.read_bytes()).hexdigest() for n, p in ptx.items()}}
    mpath.write_text(json.dumps(manifest, indent=1) + "\n")
    return PtxBuild(out, ptx, probe, manifest)


def probe_layouts(build: PtxBuild, inp, q_address: int):
    """Run the layout probe for ``inp``'s shapes and Q's device address: :class:`~simtc.kernels.flashmla.executed.
    Layouts`."""
    from simtc.kernels.flashmla.executed import Layouts

    b, s_q, h_q, d_qk = inp.q.shape
    args = [str(int(inp.model.name == "model1")), str(h_q), str(d_qk), str(s_q), str(b), str(s_q * h_q * d_qk),
            str(h_q * d_qk), str(d_qk), hex(q_address)]
    proc = subprocess.run([str(build.probe), *args], capture_output=True, text=True)
    if proc.returncode:
        raise SimtcError(f"the layout probe failed: {proc.stderr.strip()[-2000:]}", rule=_RULE)
    return Layouts.from_json(proc.stdout)


@frozen
class LaunchStats:
    kernel: str
    grid: tuple
    block: tuple
    warp_instructions: int
    thread_instructions: int
    seconds: float
    notes: tuple


@frozen
class Executed:
    """One inputs set executed: the outputs (bf16 bits, float32), the split accumulators, each launch's counts."""

    out: np.ndarray
    lse: np.ndarray
    lse_accum: np.ndarray
    o_accum: np.ndarray
    sched_meta: np.ndarray
    num_splits: np.ndarray
    launches: tuple
    parts: int

    @property
    def seconds(self) -> float:
        return float(sum(s.seconds for s in self.launches))

    @property
    def thread_instructions(self) -> int:
        return int(sum(s.thread_instructions for s in self.launches))

    def as_dict(self) -> dict:
        return {"num_sm_parts": self.parts, "seconds": round(self.seconds, 3),
                "thread_instructions": self.thread_instructions,
                "launches": [{"kernel": s.kernel, "grid": list(s.grid), "block": list(s.block),
                              "warp_instructions": s.warp_instructions,
                              "thread_instructions": s.thread_instructions, "seconds": round(s.seconds, 3),
                              "notes": list(s.notes)}
                             for s in self.launches]}


def _stats(kernel, short: str) -> LaunchStats:
    r = kernel.last_result
    return LaunchStats(short, tuple(r.grid), tuple(r.block), int(sum(r.warp_instructions.values())),
                       int(sum(r.thread_instructions.values())), float(r.seconds), tuple(r.notes))


def _kernel(xp, path: Path, contains: tuple[str, ...]):
    mod = xp.RawModule(path=str(path))
    names = [k for k in mod.module.kernels() if all(c in k for c in contains)]
    if len(names) != 1:
        raise SimtcError(f"{path.name}: {len(names)} kernels named like {' '.join(contains)}, not one", rule=_RULE)
    return mod.get_function(names[0])


def execute(build: PtxBuild, inp, *, num_sms: int | None = None, mufu_ulps: int = 0) -> Executed:
    """Launch the three kernels through :mod:`simtc.cuda` on ``inp`` (a
    :class:`~simtc.kernels.flashmla.io.FlashMLAInputs`), as ``sparse_attn_decode_interface`` does on an H200.
    ``mufu_ulps``: run the kernels with every MUFU result moved by that many ulps (where MUFU enters)."""
    import numpy as np

    import simtc.cuda as xp
    from simtc.kernels.flashmla import executed as ex

    plan = ex.launch_plan(inp, num_sms or ex.H200_SMS)
    b, s_q, h_q, _ = inp.q.shape
    dev = {"q": xp.asarray(np.ascontiguousarray(inp.q)), "kv": xp.asarray(np.ascontiguousarray(inp.kv)),
           "indices": xp.asarray(np.ascontiguousarray(inp.indices))}
    if inp.attn_sink is not None:
        dev["attn_sink"] = xp.asarray(np.ascontiguousarray(inp.attn_sink, np.float32))
    if inp.topk_length is not None:
        dev["topk_length"] = xp.asarray(np.ascontiguousarray(inp.topk_length, np.int32))
    # FlashMLA allocates these with torch.empty (FlashMLA csrc/api/sparse_decode.h lines 299-300, 420-421, 456-457
    # at 9241ae3); zeros here
    dev["out"] = xp.zeros((b, s_q, h_q, ex.D_V), xp.uint16)
    dev["lse"] = xp.zeros((b, s_q, h_q), xp.float32)
    dev["meta"] = xp.zeros((plan.parts, 8), xp.int32)
    dev["splits"] = xp.zeros((b + 1,), xp.int32)
    dev["lse_accum"] = xp.zeros((plan.total_splits, s_q, h_q), xp.float32)
    dev["o_accum"] = xp.zeros((plan.total_splits, s_q, h_q, ex.D_V), xp.float32)
    ptr = {k: v.data.ptr for k, v in dev.items()}
    lay = probe_layouts(build, inp, ptr["q"])
    launches = []

    sched = _kernel(xp, build.path("sched_meta", mufu_ulps), ("get_mla_metadata_kernel",))
    sched.max_dynamic_shared_size_bytes = plan.sched_smem
    p = ex.sched_params(lay, inp, topk_length=ptr.get("topk_length", 0), meta=ptr["meta"], splits=ptr["splits"],
                        parts=plan.parts)
    sched(plan.sched_grid, plan.sched_block, (np.void(p),), shared_mem=plan.sched_smem)
    launches.append(_stats(sched, "get_mla_metadata_kernel"))

    model = inp.model.name
    kern = _kernel(xp, build.path(model, mufu_ulps), ("flash_fwd_splitkv_mla_fp8_sparse_kernel",))
    q_map = xp.tensor_map(**ex.q_tensor_map_args(lay))
    o_map = xp.tensor_map(**ex.o_tensor_map_args(inp, ptr["out"]))
    params = ex.decode_params(lay, inp, ptr, plan.parts)
    tma = ex.tma_params(lay, q_map, o_map)
    smem = lay.shared_plan  # sizeof(SharedMemoryPlan) (FlashMLA sparse_fp8/splitkv_mla.cuh line 753 at 9241ae3)
    kern.max_dynamic_shared_size_bytes = smem
    kern(plan.splitkv_grid, plan.splitkv_block, (np.void(params),
                                                 np.void(tma)), shared_mem=smem)
    launches.append(_stats(kern, "flash_fwd_splitkv_mla_fp8_sparse_kernel"))

    # the bf16 instance for NUM_SPLITS (FlashMLA combine.cu lines 192-196 at 9241ae3: <bf16, 512, 8, NUM_SPLITS, 256>)
    comb = _kernel(xp, build.path("combine", mufu_ulps),
                   ("bfloat16", f"ELi512ELi8ELi{plan.combine_splits}ELi256E"))
    cp = ex.combine_params(lay, inp, ptr, plan.parts)
    # dynamic shared memory 0 (FlashMLA combine.cu line 205 at 9241ae3): its smem_buf is a static __shared__ array
    comb(plan.combine_grid, plan.combine_block, (np.void(cp),), shared_mem=0)
    launches.append(_stats(comb, "flash_fwd_mla_combine_kernel"))
    return Executed(dev["out"].get(), dev["lse"].get(), dev["lse_accum"].get(), dev["o_accum"].get(),
                    dev["meta"].get(), dev["splits"].get(), tuple(launches), plan.parts)


# ---- the command ------------------------------------------------------------------------------------------

def add_arguments(p) -> None:
    """``simtc run flashmla-sm90``'s options (on ``simtc run``'s parser)."""
    from simtc.cli._common import int_in

    g = p.add_argument_group("FlashMLA's own kernels (simtc run flashmla-sm90)")
    g.add_argument("--flashmla", metavar="DIR", default=None,
                   help="a FlashMLA checkout with its CUTLASS headers (default: $SIMTC_FLASHMLA_DIR); its SM90 "
                        "sparse decode is compiled to PTX (cached) and executed")
    g.add_argument("--cutlass", metavar="DIR", default=None,
                   help="CUTLASS headers for --flashmla (default: $SIMTC_FLASHMLA_CUTLASS, else the checkout's "
                        "csrc/cutlass/include)")
    g.add_argument("--inputs", metavar="FILE.npz", default=None,
                   help="a FlashMLA inputs file (docs/flashmla_formats.md; 'simtc inputs make' writes one; required "
                        "for flashmla-sm90; default: none)")
    g.add_argument("--save-outputs", metavar="OUT.npz", default=None,
                   help="write the executed kernel's outputs (out, lse) in FlashMLA's format (default: none)")
    g.add_argument("--mufu-ulps", type=int_in(-4, 4, "--mufu-ulps is -4 ... 4"), default=0, metavar="K",
                   help="move every MUFU result (ex2/lg2/rcp/div .approx) K ulps: which outputs a MUFU "
                        "approximation reaches (flashmla-sm90; default 0: simtc's correctly rounded MUFU)")
    g.add_argument("--model", choices=("v32", "model1"), default=None,
                   help="flashmla-head64 without --inputs: the model of the seeded request (default v32)")
    g.add_argument("--blocks", type=int_in(1, 64, "--blocks is 1 ... 64"), default=None, metavar="N",
                   help="flashmla-head64 without --inputs: a seeded one-request input of N blocks of 64 tokens "
                        "(default 1)")


def refuse_flashmla_options(args) -> None:
    """The flashmla-sm90 options given with a FILE: a usage error naming them."""
    from simtc.cli._common import UsageError

    given = [f"--{k.replace('_', '-')}" for k in _OPTIONS if getattr(args, k, None) not in (None, 0)]
    if given:
        raise UsageError(f"{', '.join(given)} go with simtc run flashmla-sm90, not with a FILE",
                         rule="FlashMLA's options go with simtc run flashmla-sm90")


def run(args) -> int:
    import os

    from simtc.cli._common import UsageError, emit_json, output_path
    from simtc.hw.flashmla import find_checkout
    from simtc.kernels.flashmla import io

    if args.file == "flashmla-head64":
        return _run_head64(args)
    rule = "simtc run flashmla-sm90 --flashmla DIR --inputs FILE.npz [--save-outputs OUT.npz] [--json]"
    others = [f"--{k}" for k in ("kernel", "grid", "block", "out", "arch") if getattr(args, k, None) is not None]
    others += [f"--{k}" for k in ("arg", "option") if getattr(args, k, None)]
    others += [f"--{k.replace('_', '-')}" for k in ("timing", "trace", "schedules", "step", "step_to", "cta")
               if getattr(args, k, None) not in (None, False)]
    others += [f"--{k}" for k in ("model", "blocks") if getattr(args, k, None) is not None]
    if others:
        raise UsageError(f"{', '.join(others)}: not for flashmla-sm90 (its launches are FlashMLA's own)", rule=rule)
    where = args.flashmla or os.environ.get("SIMTC_FLASHMLA_DIR")
    if not where:
        raise UsageError("flashmla-sm90 needs a FlashMLA checkout: --flashmla DIR or $SIMTC_FLASHMLA_DIR", rule=rule)
    if args.inputs is None:
        raise UsageError("flashmla-sm90 needs --inputs FILE.npz (docs/flashmla_formats.md)", rule=rule)
    inp = io.load_inputs(args.inputs)
    save = output_path(args.save_outputs) if args.save_outputs else None
    checkout = find_checkout(where, args.cutlass)
    say = (lambda s: None) if args.json else (lambda s: print(s, file=sys.stderr))
    build = compile_ptx(checkout, progress=say)
    r = execute(build, inp, mufu_ulps=args.mufu_ulps)
    outputs = io.validate_outputs({"out": r.out, "lse": r.lse}, inp)
    if save is not None:
        io.save_outputs(save, outputs)
    summary = {"kernel": "flashmla-sm90", "model": inp.model.name, "b": inp.b, "s_q": inp.s_q, "topk": inp.topk,
               "flashmla_commit": checkout.commit, "ptx_dir": str(build.dir), "mufu_ulps": args.mufu_ulps,
               **r.as_dict(), "outputs": str(save) if save is not None else None,
               "sched_meta": r.sched_meta.tolist(), "num_splits": r.num_splits.tolist()}
    if args.json:
        emit_json(summary)
        return 0
    c = checkout.commit
    print(f"FlashMLA {c[:12] if ' ' not in c else c} SM90 sparse decode, {inp.model.name}, b={inp.b} s_q={inp.s_q} "
          f"topk={inp.topk}: num_sm_parts {r.parts}, executed in {r.seconds:.1f} s "
          f"({r.thread_instructions:,} thread instructions)")
    for s_ in r.launches:
        print(f"  {s_.kernel:42s} grid {s_.grid} block {s_.block[0]:4d}: {s_.thread_instructions:>12,} thread "
              f"instructions, {s_.seconds:6.2f} s")
    if save is not None:
        print(f"wrote {save} (out {r.out.shape}, lse {r.lse.shape})")
    return 0


def _run_head64(args) -> int:
    """``simtc run flashmla-head64``: FlashMLA's SM100 head64 kernel compiled from the checkout (sm_100a) and executed
    on ``--inputs`` (or a seeded request of ``--blocks`` blocks), its outputs in the replay's format."""
    import hashlib
    import os
    import time

    import numpy as np

    from simtc.cli._common import UsageError, emit_json, output_path
    from simtc.cuda.executed_sm100.head64 import execute_head64
    from simtc.kernels.flashmla import io

    rule = ("simtc run flashmla-head64 --flashmla DIR [--inputs FILE.npz | --model M --blocks N] "
            "[--save-outputs OUT.npz] [--json]")
    others = [f"--{k}" for k in ("kernel", "grid", "block", "out", "arch", "cutlass") if getattr(args, k, None)
              is not None]
    others += [f"--{k}" for k in ("arg", "option") if getattr(args, k, None)]
    others += [f"--{k.replace('_', '-')}" for k in ("timing", "trace", "schedules", "step", "step_to", "cta",
                                                      "mufu_ulps") if getattr(args, k, None) not in (None, False, 0)]
    if others:
        raise UsageError(f"{', '.join(others)}: not for flashmla-head64 (its launch is FlashMLA's own; its engine "
                         "time, diff and checker: simtc program diff flashmla-head64 --executed)", rule=rule)
    where = args.flashmla or os.environ.get("SIMTC_FLASHMLA_DIR")
    if not where:
        raise UsageError("flashmla-head64 needs a FlashMLA checkout: --flashmla DIR or $SIMTC_FLASHMLA_DIR", rule=rule)
    inp = io.load_inputs(args.inputs) if args.inputs is not None else None
    save = output_path(args.save_outputs) if args.save_outputs else None
    t0 = time.perf_counter()
    ex = execute_head64(where, inp, model=args.model, blocks=args.blocks)
    seconds = time.perf_counter() - t0
    out = ex.outputs
    if save is not None:
        io.save_outputs(save, out)
    n = ex.result.total_thread_instructions
    summary = {"kernel": "flashmla-head64", "seconds": round(seconds, 3), "thread_instructions": n,
               "out_sha256": hashlib.sha256(np.ascontiguousarray(out.out).tobytes()).hexdigest(),
               "lse_sha256": hashlib.sha256(np.ascontiguousarray(out.lse).tobytes()).hexdigest(),
               "outputs": str(save) if save is not None else None}
    if args.json:
        emit_json(summary)
        return 0
    print(f"FlashMLA SM100 head64 kernel executed in {seconds:.1f} s ({n:,} thread instructions); out "
          f"{tuple(out.out.shape)}, lse {tuple(out.lse.shape)}")
    if save is not None:
        print(f"wrote {save}")
    return 0


# ---- the record of a run on the H200 recording's input sets ---------------------------------------------------

RESULTS_FORMAT = "simtc-flashmla-sm90-executed"


def _sha(a: np.ndarray) -> str:
    import numpy as np

    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


PERTURBATIONS = (1, -1, 2, -2)
"""The MUFU perturbations of a recording comparison (ulps; the sign pattern of
:func:`simtc.kernels.flashmla.executed.perturb_mufu` and its mirror): the H200's MUFU.EX2/LG2 results lie within 2
ulps of simtc's correctly rounded ones (tests/ptx/test_alu.py)."""


def compare_with_recording(build: PtxBuild, recording, *, names=None, perturb: tuple[int, ...] = PERTURBATIONS,
                           progress=None) -> dict:
    """Execute every set of an H200 recording (:func:`simtc.hw.flashmla.load_recording`; ``names``: a subset) and
    compare O and LSE with the recorded outputs bit for bit; also under MUFU results moved by each of ``perturb``
    (ulps, :func:`simtc.kernels.flashmla.executed.perturb_mufu`): ``mufu_reached`` counts the values one of them
    moves, ``differing_not_reached`` the values that differ from the H200 although none of them moves them.
    Returns the ``tests/data/flashmla_sm90_executed.json`` object."""
    import numpy as np

    from simtc.hw.flashmla import load_recording
    from simtc.kernels.flashmla.executed import MUFU_OPCODES, compare_bits

    meta, sets = load_recording(recording)
    rows = []
    for name, inp, (rec_out, rec_lse) in sets:
        if names is not None and name not in names:
            continue
        if progress:
            progress(f"{name}: executing")
        r = execute(build, inp)
        cmp = compare_bits(r.out, r.lse, rec_out, rec_lse)
        row = {"name": name, "model": inp.model.name, "b": inp.b, "s_q": inp.s_q, "topk": inp.topk,
               **r.as_dict(), "sched_meta": r.sched_meta.tolist(), "num_splits": r.num_splits.tolist(),
               "o": {"values": cmp.o_values, "identical": cmp.o_identical, "max_ulp": cmp.o_max_ulp,
                     "max_rel": cmp.o_max_rel},
               "lse": {"values": cmp.lse_values, "identical": cmp.lse_identical, "max_ulp": cmp.lse_max_ulp,
                       "max_abs": cmp.lse_max_abs},
               "out_sha256": _sha(r.out), "lse_sha256": _sha(r.lse),
               "o_accum_sha256": _sha(r.o_accum), "lse_accum_sha256": _sha(r.lse_accum)}
        if perturb:
            moved_o = np.zeros(r.out.shape, bool)
            moved_l = np.zeros(r.lse.shape, bool)
            for k in perturb:
                if progress:
                    progress(f"{name}: executing with MUFU results moved {k:+d} ulp")
                q = execute(build, inp, mufu_ulps=k)
                moved_o |= q.out != r.out
                moved_l |= q.lse.view(np.uint32) != r.lse.view(np.uint32)
            diff_o = r.out != rec_out
            diff_l = r.lse.view(np.uint32) != np.asarray(rec_lse, np.float32).view(np.uint32)
            row["o"].update(mufu_reached=int(moved_o.sum()), differing_mufu_reached=int((diff_o & moved_o).sum()),
                            differing_not_reached=int((diff_o & ~moved_o).sum()))
            row["lse"].update(mufu_reached=int(moved_l.sum()), differing_mufu_reached=int((diff_l & moved_l).sum()),
                              differing_not_reached=int((diff_l & ~moved_l).sum()))
        rows.append(row)
    m = build.manifest
    return {"format": RESULTS_FORMAT, "version": 1, "flashmla_commit": m["flashmla_commit"],
            "cutlass_commit": m["cutlass_commit"], "nvcc": m["nvcc"], "nvcc_flags": m["nvcc_flags"],
            "arch": m["arch"], "recording": Path(recording).name, "recording_sha256": hashlib.sha256(
                Path(recording).read_bytes()).hexdigest(), "recording_device": meta.get("device"),
            "mufu_opcodes": list(MUFU_OPCODES), "perturbation_ulps": list(perturb), "sets": rows}
