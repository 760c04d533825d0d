"""Is there a GPU path here, and what is it? (cupy imported lazily; never at module import.)"""

from __future__ import annotations

from attrs import frozen

from simtc.errors import HardwareUnavailable

__all__ = ["DeviceInfo", "probe", "require"]


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
