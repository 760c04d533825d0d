"""The calibration recording: its format, :func:`save`, :func:`load` and :func:`validate`.

The recording is a JSON object. Top level (every key is present; a section that was not run is ``null``; a
section that failed as a whole is ``{status: "error", reason}``, and if its data broke this format through a bug
it is kept, unchecked, under ``invalid_<section>``):

* ``format``: ``"simtc-calibration"``; ``version``: 1; ``arch``: ``"sm_90a"``.
* ``command``: the command line; ``date``: UTC, ``YYYY-MM-DD HH:MM:SS UTC``; ``quick``: ``--quick`` or not;
  ``sections``: the sections asked for (``memory_latency`` where only the memory section's latency chases
  ran: ``memory`` then holds ``params: {}``, ``configs: []`` and ``latency``); ``elapsed_s``: wall-clock
  seconds of the whole run.
* ``device``: ``name``, ``arch`` (``sm_90a``), ``sms``, ``driver`` (NVML's driver version, or null),
  ``cuda_driver`` and ``cuda_runtime`` (``major.minor`` from CuPy), ``cupy``, ``numpy``, ``python``, ``compiler``
  (simtc's build route and NVRTC version), ``max_smem_per_block`` (bytes, opt-in), ``describe``
  (:func:`simtc.hw.device.describe`'s line).
* ``clock_mhz``: ``median`` of every probe (MHz, or null), ``probes``: list of ``{section, when ("before" or
  "after"), mhz}``.
* ``sass``: one entry per benchmark (its name, e.g. ``"cuda_core/FFMA/throughput"``): ``section``,
  ``kernels`` (names, fewest steps first), ``steps`` (per kernel), ``ok``, ``problems`` (list of strings),
  ``expected_per_step`` and ``per_step`` (declared and measured SASS per step of the declared and glue
  mnemonics, measured = count difference between the last and first kernel / step difference; ``{}`` for fixed
  kernels), ``other_delta`` (that count difference for every other mnemonic but NOP), ``counts`` (declared
  ``[low, high]`` per mnemonic for fixed kernels), ``histogram`` (full SASS mnemonics of the first kernel).
* ``cuda_core``: per class (keys as sm_90a prints them: ``F2FP.F16.E4M3.UNPACK_B``, ``HADD2.F32``,
  ``F2FP.BF16.F32.PACK_AB``, ``HMUL2.BF16_V2``, ``HFMA2``, ``HADD2``, ``dequant``, ``FFMA``, ``FMUL``,
  ``FADD``, ``FMNMX``, ``FSEL``, ``FSETP+FSEL``, ``MUFU.EX2``, ``MUFU.RCP``, ``SHFL.BFLY``, ``IMAD``, ``LOP3``,
  ``IADD3``): ``ptx`` (what one step is), ``sass`` (the SASS groups of one step, ``{group: count}``; a group
  is mnemonics joined by ``|``), ``unit`` (what one step is: ``instruction``, ``8 values`` or ``FSETP + FSEL``) and two
  measurements, ``throughput`` (16 independent chains a thread, 8 for ``dequant``) and ``latency`` (one
  chain), each a *step-loop measurement*.
* ``cuda_core_pairs``: per pair ``"A + B"``: ``a``, ``b``, ``sass`` and ``throughput`` (8 chains of each
  class, steps interleaved 1:1; a step is one A and one B) as a step-loop measurement.
* A *step-loop measurement* is ``{status, reason, steps, iters, warm, samples, runs}``: ``status`` ``"ok"``,
  ``"sass-failed"``, ``"error"``, ``"timeout"`` or ``"skipped"`` (``reason`` says why; null when ok), ``steps``
  the steps per loop iteration of each kernel, ``iters`` loop iterations, ``warm`` launches dropped,
  ``samples`` launches kept per kernel; ``runs`` one entry per launch shape: ``threads``, ``ctas``,
  ``warps_per_sp`` (threads / 128, or null for fewer than 128 threads), ``cycles`` (median over samples of
  the CTA's span, latest clock64 after the loop minus earliest before it, per kernel), ``slope`` and
  ``intercept`` of the fit, ``cycles_per_step`` (= slope: the time for every warp to make one step) and
  ``cycles_per_step_per_sp`` (= slope / warps_per_sp; null without warps_per_sp).
* ``shared_memory``: ``LDS.32/1-way`` ... ``STS.128/4-way`` (ld/st.volatile.shared of 32, 64, 128 bits a
  thread, conflict-free, 2-way and 4-way): a step-loop measurement (one access a warp per step) plus ``op``,
  ``bits``, ``ways``, and per run ``bytes_per_cycle`` (threads x bytes a thread / slope: requested bytes per
  cycle of the SM); ``LDS.32/latency``: a pointer chase by one warp, a step-loop measurement whose
  ``cycles_per_step`` is the dependent-load latency; ``wgmma_lds`` (run after every other section, so that a
  fault there cannot touch them): one warpgroup runs chains of ``wgmma.mma_async.m64n256k16.f32.bf16.bf16``
  with A and B in shared memory (``n``, ``bytes_per_wgmma`` = 10,240 operand bytes, ``wg_iters`` chains of
  ``depths`` wgmmas each, one commit + wait per chain) while two warpgroups (``lds_warps`` = 8 warps) stream
  conflict-free LDS.128 until it finishes: ``{status, reason, wgmma_alone {cycles (per depth), cycles_per_wgmma
  (slope over the wgmma count), smem_bytes_per_cycle}, lds_alone {bytes_per_cycle}, together {cycles,
  cycles_per_wgmma, wgmma_smem_bytes_per_cycle, lds_bytes_per_cycle, sum_bytes_per_cycle}}``.
* ``memory``: ``params`` (``seed``, ``blocks`` measured and ``warm`` blocks per warpgroup, ``launches``,
  ``pools`` {name: bytes}, ``rows`` {format: {useful, moved per method}}) and ``configs``: one per (method
  ``ldg``/``ldgsts``/``bulk``, format ``v32`` 656 B / ``model1`` 584 B, pool ``hbm`` ~4 GiB / ``l2`` 8 MiB, CTAs,
  blocks in flight per SM): ``status``, ``reason``, ``method``, ``format``, ``row_bytes`` (useful bytes a row),
  ``pool``, ``ctas``, ``inflight``, ``threads``, ``latency_mean``, ``latency_median``, ``latency_p10``,
  ``latency_p90`` (cycles per block of 64 rows, issue -> all bytes arrived, over every measured block of
  every launch), ``bytes_per_cycle_per_sm`` (median over CTAs of useful bytes of the measured blocks / the
  CTA's span from the first measured block's t0 to the last block's t1), ``gbps`` (useful bytes of every
  block of the launch / the launch's time from CUDA events, median over launches), ``kernel_ms``,
  ``clock_mhz`` (clock64 / %globaltimer of CTA 0 over the launch, median over launches), ``nbuf`` (shared-memory
  block buffers the warpgroups share, 0 for ``ldg``), ``bytes_moved_per_row`` (bytes a row's copies request,
  redundant ones included). CTA counts above the SM count are clipped to it. ``latency`` (optional: absent
  from recordings made before it existed; ``{status: "error", reason}`` if it failed as a whole):
  ``params`` (``seed``, ``warm``, ``samples``, ``ldg_steps``, ``ldg_iters``, ``bulk_counts``, ``pools``,
  ``strides``, ``flush_bytes``) and ``chases``, keyed ``ldg/<pool>`` (pools ``hbm``, ``l2``, ``l1``) and
  ``bulk/<pool>/<bytes>`` (pools ``hbm``, ``l2``; 64, 512, 2048 bytes): ``status``, ``reason``, ``method``
  (``ldg``/``bulk``), ``pool``, ``pool_bytes``, ``bytes`` (per access: 8 for ldg), ``stride``, ``elements``,
  ``ptx``, ``sass``, ``pages`` (``"random"``), ``pool_pages_2mib``, ``prepare`` (what was done to the pool
  first), ``warm``, ``samples`` and, when ok, ``depths`` (dependent accesses per timed launch, one fit point
  each), ``cycles`` (median over samples per depth), ``slope`` (cycles per dependent access), ``intercept``,
  ``residual_max`` (largest |cycles - fit|); ldg adds ``steps``, ``iters``, ``warm_loads`` and, for ``l1``,
  ``l1_carveout``.
* ``sync``: ``mbarrier_pingpong`` (round trips between two warps: a *count fit* ``{status, reason, counts,
  cycles, slope, intercept}`` over the number of round trips; ``round_trip_cycles`` = slope,
  ``one_way_cycles`` = slope / 2); ``st_async_pingpong`` (a count fit with ``round_trip_cycles``, across a
  cluster of two CTAs with ``st.async`` + the peer's mbarrier); ``tma_wake`` (``samples`` kept after ``warm``
  dropped, medians and p10/p90 of
  ``issue_to_self_wake`` (16-byte ``cp.async.bulk`` issue -> the issuing warp's try_wait succeeds),
  ``issue_to_other_wake`` (-> a second warp's), ``arrive_to_wake`` (plain mbarrier arrive -> the other warp
  wakes), in cycles); ``bar_sync`` (step-loop measurement of ``bar.sync 0`` with 128, 256, 384 threads:
  cycles per barrier = cycles_per_step); ``fence_proxy_async`` and ``sts_fence_proxy_async`` (``fence.proxy.
  async.shared::cta`` alone and after a 16-byte ``st.shared``, 32 and 128 threads); ``barrier_cluster`` and
  ``barrier_cluster_relaxed`` (``barrier.cluster.arrive[.relaxed]`` + ``wait``, cluster of 2 CTAs of 128).
* ``launch``: ``empty_1cta``, ``empty_132cta`` (µs per launch of an empty kernel of 1 CTA, of one CTA per SM
  (132 on an H200), 128 threads each, back to back on one stream) and ``group_of_3`` (µs per group of three
  dependent launches: 1 CTA, then one per SM, then one per SM): each
  ``{status, reason, launches, repeats, us, us_all}`` (``us`` the median over repeats); ``host_enqueue_us``
  (the host's cost of one CuPy launch call, median). The timed launches are queued while a spin kernel
  keeps the stream busy, so the CUDA-event interval is the GPU's back-to-back time, not the host's.

:func:`summary` derives the numbers a cycle model uses (its docstring lists them).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from simtc.errors import SimtcError
from simtc.hw.calibrate.benchmarks import LAT_POOLS, SECTIONS, SELECTABLE

FORMAT = "simtc-calibration"
VERSION = 1
_DATE = "%Y-%m-%d %H:%M:%S UTC"


class CalibrationFormatError(SimtcError, ValueError):
    """A file that is not a calibration recording as :func:`save` writes it."""




def save(recording: dict, path: str | os.PathLike) -> None:
    """Write a recording as JSON (validated first; the file is replaced whole; NaN/inf in unchecked ``invalid_*``
    data are written as null)."""
    validate(recording)
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(_finite(recording), indent=1, allow_nan=False) + "\n", encoding="utf-8")
    tmp.replace(p)


def _finite(obj):
    """``obj`` with every non-finite float (possible only in unchecked ``invalid_*`` data) replaced by None."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def load(path: str | os.PathLike) -> dict:
    """Read a recording written by :func:`save`; a file that is not one raises :class:`CalibrationFormatError`."""
    p = Path(path)
    rule = "calibration recordings as simtc.hw.calibrate.save writes them"
    if not p.is_file():
        raise CalibrationFormatError(f"{str(p)!r} {'does not exist' if not p.exists() else 'is not a file'}",
                                     rule=rule)
    try:
        data = json.loads(p.read_text(encoding="utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError) as e:
        raise CalibrationFormatError(f"{str(p)!r} is not JSON ({e})", rule=rule) from None
    validate(data)
    return data


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _bad(where: str, what: str):
    raise CalibrationFormatError(f"{where}: {what}", rule="calibration recordings as simtc.hw.calibrate.save writes "
                                                          "them (fields: simtc.hw.calibrate.recording docstring)")


def _get(d: dict, key: str, types, where: str, *, nullable: bool = False):
    if not isinstance(d, dict):
        _bad(where, f"expected an object, got {type(d).__name__}")
    if key not in d:
        _bad(f"{where}.{key}" if where else key, "missing")
    v = d[key]
    if v is None and nullable:
        return v
    number = types == "number"
    ok = (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)) if number else \
        isinstance(v, types) and not (isinstance(v, bool) and types in (int, float, (int, float)))
    if not ok:
        want = "a number" if number else getattr(types, "__name__", str(types))
        _bad(f"{where}.{key}" if where else key, f"expected {want}{' or null' if nullable else ''}, got {v!r:.60}")
    return v


_STATUSES = ("ok", "sass-failed", "error", "timeout", "skipped")


def _check_status(m: dict, where: str) -> bool:
    status = _get(m, "status", str, where)
    if status not in _STATUSES:
        _bad(f"{where}.status", f"{status!r} is not one of {', '.join(_STATUSES)}")
    if status != "ok":
        _get(m, "reason", str, where)
    return status == "ok"


def _check_step_loop(m, where: str) -> None:
    if not _check_status(m, where):
        return
    steps = _get(m, "steps", list, where)
    for i, run in enumerate(_get(m, "runs", list, where)):
        w = f"{where}.runs[{i}]"
        cycles = _get(run, "cycles", list, w)
        if len(cycles) != len(steps) or not all(isinstance(c, (int, float)) and not isinstance(c, bool)
                                                for c in cycles):
            _bad(f"{w}.cycles", f"expected {len(steps)} numbers (one per kernel), got {cycles!r:.60}")
        for k in ("threads", "ctas"):
            _get(run, k, int, w)
        for k in ("slope", "intercept", "cycles_per_step"):
            _get(run, k, "number", w)
        for k in ("warps_per_sp", "cycles_per_step_per_sp", "bytes_per_cycle"):
            if k in run:
                _get(run, k, "number", w, nullable=True)


def _lat_key(method: str, pool: str, nbytes: int) -> str:
    return f"ldg/{pool}" if method == "ldg" else f"bulk/{pool}/{nbytes}"


def _check_latency(lat, where: str) -> None:
    if not isinstance(lat, dict):
        _bad(where, f"expected an object, got {type(lat).__name__}")
    if "status" in lat and not _check_status(lat, where):  # the latency part failed as a whole
        return
    _get(lat, "params", dict, where)
    for key, m in _get(lat, "chases", dict, where).items():
        w = f"{where}.chases.{key}"
        method, pool = _get(m, "method", str, w), _get(m, "pool", str, w)
        if method not in ("ldg", "bulk"):
            _bad(f"{w}.method", f"{method!r:.40} is not one of ldg, bulk")
        if pool not in LAT_POOLS or (method == "bulk" and pool == "l1"):
            _bad(f"{w}.pool", f"{pool!r:.40} is not one of {', '.join(LAT_POOLS) if method == 'ldg' else 'hbm, l2'}")
        _get(m, "pool_bytes", int, w)
        nbytes = _get(m, "bytes", int, w)
        if key != _lat_key(method, pool, nbytes):
            _bad(w, f"the key does not name its method, pool and bytes ({_lat_key(method, pool, nbytes)!r})")
        if not _check_status(m, w):
            continue
        depths = _get(m, "depths", list, w)
        if len(depths) < 2 or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in depths):
            _bad(f"{w}.depths", f"expected at least two positive integers, got {depths!r:.60}")
        cycles = _get(m, "cycles", list, w)
        if len(cycles) != len(depths) or not all(isinstance(c, (int, float)) and not isinstance(c, bool)
                                                 and math.isfinite(c) for c in cycles):
            _bad(f"{w}.cycles", f"expected {len(depths)} numbers (one per depth), got {cycles!r:.60}")
        for k in ("slope", "intercept"):
            _get(m, k, "number", w)


def validate(recording) -> None:
    """Raise :class:`CalibrationFormatError` naming the first field that breaks the format."""
    if not isinstance(recording, dict):
        _bad("the file", f"expected a JSON object, got {type(recording).__name__}")
    fmt = recording.get("format")
    if fmt != FORMAT:
        _bad("format", f"expected {FORMAT!r}, got {fmt!r:.60} (not a simtc calibration recording)")
    if recording.get("version") != VERSION:
        _bad("version", f"this simtc reads version {VERSION}, got {recording.get('version')!r:.60}")
    for key in ("command", "date", "arch"):
        _get(recording, key, str, "")
    _get(recording, "quick", bool, "")
    secs = _get(recording, "sections", list, "")
    if any(s not in SELECTABLE for s in secs):
        _bad("sections", f"unknown section in {secs!r:.80}")
    _get(recording, "elapsed_s", "number", "")
    _get(recording, "device", dict, "")
    clock = _get(recording, "clock_mhz", dict, "")
    _get(clock, "median", "number", "clock_mhz", nullable=True)
    _get(clock, "probes", list, "clock_mhz")
    for name, s in _get(recording, "sass", dict, "").items():
        _get(s, "ok", bool, f"sass.{name}")
        _get(s, "problems", list, f"sass.{name}")
    for section in SECTIONS:
        value = _get(recording, section, dict, "", nullable=True)
        if value is None:
            continue
        if "status" in value and not _check_status(value, section):
            continue
        if section == "cuda_core":
            for key, c in value.items():
                for mode in ("throughput", "latency"):
                    _check_step_loop(_get(c, mode, dict, f"cuda_core.{key}"), f"cuda_core.{key}.{mode}")
        elif section == "cuda_core_pairs":
            for key, c in value.items():
                _check_step_loop(_get(c, "throughput", dict, f"cuda_core_pairs.{key}"),
                                 f"cuda_core_pairs.{key}.throughput")
        elif section == "shared_memory":
            for key, c in value.items():
                if key != "wgmma_lds":
                    _check_step_loop(c, f"shared_memory.{key}")
                elif _check_status(c, "shared_memory.wgmma_lds"):
                    for part, k in (("wgmma_alone", "cycles_per_wgmma"), ("lds_alone", "bytes_per_cycle"),
                                    ("together", "cycles_per_wgmma"), ("together", "lds_bytes_per_cycle")):
                        _get(_get(c, part, dict, "shared_memory.wgmma_lds"), k, "number",
                             f"shared_memory.wgmma_lds.{part}")
        elif section == "memory":
            _get(value, "params", dict, "memory")
            for i, cfg in enumerate(_get(value, "configs", list, "memory")):
                w = f"memory.configs[{i}]"
                for k in ("method", "format", "pool"):
                    _get(cfg, k, str, w)
                for k in ("ctas", "inflight", "row_bytes"):
                    _get(cfg, k, int, w)
                if _check_status(cfg, w):
                    for k in ("latency_mean", "latency_median", "latency_p10", "latency_p90",
                              "bytes_per_cycle_per_sm", "gbps", "kernel_ms"):
                        _get(cfg, k, "number", w)
            if "latency" in value:  # optional: recordings made before it existed have none
                _check_latency(value["latency"], "memory.latency")
        elif section == "sync":
            for key, m in value.items():
                w = f"sync.{key}"
                if key in ("mbarrier_pingpong", "st_async_pingpong"):
                    if _check_status(m, w):
                        _get(m, "slope", "number", w)
                        _get(m, "round_trip_cycles", "number", w)
                elif key == "tma_wake":
                    if _check_status(m, w):
                        for k in ("issue_to_self_wake", "issue_to_other_wake", "arrive_to_wake"):
                            _get(_get(m, k, dict, w), "median", "number", f"{w}.{k}")
                else:
                    _check_step_loop(m, w)
        elif section == "launch":
            for key in ("empty_1cta", "empty_132cta", "group_of_3"):
                m = _get(value, key, dict, "launch")
                if _check_status(m, f"launch.{key}"):
                    _get(m, "us", "number", f"launch.{key}")
            _get(value, "host_enqueue_us", "number", "launch", nullable=True)
