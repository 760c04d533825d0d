"""A whole calibration run: :func:`run` measures the sections asked for with :class:`_Runner` (the sections'
pieces together) and returns the recording, which :func:`empty_recording` lays out and ``_device`` describes.
"""

from __future__ import annotations

import datetime
import os
import platform
import time
from collections.abc import Callable, Iterable

from simtc.hw.calibrate.benchmarks import ARCH, PARTS, SECTIONS, _check_sections
from simtc.hw.calibrate.compute import _Compute
from simtc.hw.calibrate.fits import _median, _num
from simtc.hw.calibrate.gpu import Params
from simtc.hw.calibrate.memory import _Memory
from simtc.hw.calibrate.recording import _DATE, FORMAT, VERSION, CalibrationFormatError, validate
from simtc.hw.calibrate.sass import SassCheck, sass_checks
from simtc.hw.calibrate.sync import _Sync


class _Runner(_Compute, _Memory, _Sync):
    """Loads the modules and runs the benchmarks (cupy imported here): one method per section."""


def _device() -> dict:
    import sys

    import numpy

    from simtc.hw.device import describe, probe

    info = probe()
    d: dict = {"name": info.name, "arch": info.arch, "sms": info.sms, "driver": None, "cuda_driver": None,
               "cuda_runtime": None, "cupy": None, "numpy": numpy.__version__, "python": sys.version.split()[0],
               "compiler": os.environ.get("SIMTC_COMPILER", "auto"), "max_smem_per_block": None,
               "describe": describe()}
    try:
        import cupy

        d["cupy"] = cupy.__version__
        v = cupy.cuda.runtime.driverGetVersion()
        d["cuda_driver"] = f"{v // 1000}.{v % 1000 // 10}"
        v = cupy.cuda.runtime.runtimeGetVersion()
        d["cuda_runtime"] = f"{v // 1000}.{v % 1000 // 10}"
        d["max_smem_per_block"] = int(cupy.cuda.runtime.getDeviceProperties(0).get("sharedMemPerBlockOptin", 0))
    except Exception:  # fields stay null
        pass
    try:
        import pynvml

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        d["driver"] = v.decode() if isinstance(v, bytes) else str(v)
    except Exception:  # NVML is optional
        pass
    try:
        from cuda.bindings import nvrtc

        _, major, minor = nvrtc.nvrtcVersion()
        d["compiler"] += f", NVRTC {major}.{minor}"
    except Exception:  # no cuda-bindings: nvcc builds
        pass
    d["platform"] = platform.platform()
    return d


def empty_recording(*, command: str = "", sections: Iterable[str] = SECTIONS, quick: bool = False) -> dict:
    """A recording with every key and no measurements (each section ``null``)."""
    return {"format": FORMAT, "version": VERSION, "arch": ARCH, "command": command,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime(_DATE), "quick": bool(quick),
            "sections": _check_sections(sections), "elapsed_s": 0.0, "device": {},
            "clock_mhz": {"median": None, "probes": []}, "sass": {}, **{s: None for s in SECTIONS}}


def run(sections: Iterable[str] = SECTIONS, *, quick: bool = False, command: str = "",
        checks: dict[str, SassCheck] | None = None, progress: Callable[[str], None] | None = None,
        on_section: Callable[[dict], None] | None = None) -> dict:
    """Measure ``sections`` on the sm_90a GPU here; returns the recording (see the module docstring).

    ``checks`` are the :func:`sass_checks` of those sections (computed when not given); a benchmark whose
    check failed is not run. ``on_section`` receives the recording after every section (to save partial
    results). Raises :class:`~simtc.errors.HardwareUnavailable` without cupy or an sm_90a device.
    """
    from simtc.hw.device import require

    sections = _check_sections(sections)
    require(ARCH)
    progress = progress or (lambda s: None)
    t0 = time.monotonic()
    checks = checks if checks is not None else sass_checks(sections)
    rec = empty_recording(command=command, sections=sections, quick=quick)
    rec["device"] = _device()
    rec["sass"] = {k: c.as_dict() for k, c in checks.items()}
    runner = _Runner(Params.make(quick), checks, progress)
    for section in sections:
        key = PARTS.get(section, section)  # a part alone fills its section's key
        runner.clock(section, "before")
        try:
            rec[key] = getattr(runner, section)()
        except Exception as e:  # one section's failure is recorded; the others still run
            rec[key] = {"status": "error", "reason": f"{type(e).__name__}: {e}"}
        _keep_valid(rec, key)
        runner.clock(section, "after")
        mhz = [p["mhz"] for p in runner.clock_probes if p["mhz"] is not None]
        rec["clock_mhz"] = {"median": _num(_median(mhz)) if mhz else None, "probes": list(runner.clock_probes)}
        rec["elapsed_s"] = round(time.monotonic() - t0, 3)
        if on_section:
            on_section(rec)
    if isinstance(rec["shared_memory"], dict) and "status" not in rec["shared_memory"]:
        # last, so that a fault of the tensor-core kernel cannot touch the other sections' measurements
        runner.clock("shared_memory/wgmma+LDS", "before")
        rec["shared_memory"]["wgmma_lds"] = runner.wgmma_lds()
        _keep_valid(rec, "shared_memory")
        runner.clock("shared_memory/wgmma+LDS", "after")
        mhz = [p["mhz"] for p in runner.clock_probes if p["mhz"] is not None]
        rec["clock_mhz"] = {"median": _num(_median(mhz)) if mhz else None, "probes": list(runner.clock_probes)}
        rec["elapsed_s"] = round(time.monotonic() - t0, 3)
        if on_section:
            on_section(rec)
    return rec


def _keep_valid(rec: dict, section: str) -> None:
    """A section whose data breaks the format (a bug, not a measurement) moves to ``invalid_<section>`` and is
    replaced by an error, so that the recording stays loadable and nothing measured is lost."""
    try:
        validate(rec)
    except CalibrationFormatError as e:
        rec[f"invalid_{section}"] = rec[section]
        rec[section] = {"status": "error", "reason": f"the measurements do not fit the recording format: {e}"}
