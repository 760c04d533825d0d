"""Is there a GPU path here, and what is it? (cupy imported lazily; never at module import.)"""

from __future__ import annotations

from attrs import frozen

from simtc.errors import HardwareUnavailable

__all__ = ["DeviceInfo", "describe", "probe", "require"]


@frozen
class DeviceInfo:
    """What :func:`probe` found."""

    available: bool
    reason: str
    name: str = ""
    arch: str = ""
    """``sm_90a``, ``sm_100a``... (compute capability with the arch-specific suffix)."""
    sms: int = 0


def probe() -> DeviceInfo:
    """Find a CUDA device through cupy; never raises."""
    try:
        import cupy
    except ImportError:
        return DeviceInfo(False, "cupy is not installed (pip install 'simtc[gpu]')")
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # cupy raises its own CUDARuntimeError without a driver
        return DeviceInfo(False, f"no usable CUDA driver or device ({type(e).__name__}: {e})")
    if n == 0:
        return DeviceInfo(False, "no CUDA device is visible")
    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    cc = f"{props['major']}{props['minor']}"
    return DeviceInfo(True, "ok", name=name, arch=f"sm_{cc}a", sms=int(props["multiProcessorCount"]))


def require(arch: str | None = None) -> DeviceInfo:
    """The device, or :class:`HardwareUnavailable` saying why not (or that the arch differs)."""
    info = probe()
    if not info.available:
        raise HardwareUnavailable(info.reason, rule="GPU checks need cupy and a CUDA device")
    if arch is not None and info.arch != arch:
        raise HardwareUnavailable(f"this check needs {arch}; the device is {info.name} ({info.arch})",
                                  rule="architecture-specific instructions")
    return info


def describe() -> str:
    """One line naming the device, its driver, CUDA, cupy, numpy and the kernel build route (for recordings)."""
    import os

    import numpy

    info = probe()
    if not info.available:
        return f"no device ({info.reason})"
    import cupy

    parts = [f"{info.name} ({info.arch}, {info.sms} SMs)"]
    try:
        import pynvml

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        parts.append(f"driver {v.decode() if isinstance(v, bytes) else v}")
    except Exception:  # NVML is optional: nvidia-ml-py may be missing or refuse
        pass
    d = cupy.cuda.runtime.driverGetVersion()
    parts.append(f"CUDA {d // 1000}.{d % 1000 // 10} (driver API)")
    route = os.environ.get("SIMTC_COMPILER", "auto")
    try:
        from cuda.bindings import nvrtc

        _, major, minor = nvrtc.nvrtcVersion()
        route += f", NVRTC {major}.{minor}"
    except Exception:  # cuda-bindings missing: kernels come from nvcc
        pass
    parts.append(f"kernels built by route {route}")
    parts.append(f"cupy {cupy.__version__}, numpy {numpy.__version__}")
    return ", ".join(parts)
