"""``simtc.cuda.cuda``: the parts of ``cupy.cuda`` that raw-kernel scripts call around their launches.

simtc runs every launch to completion before :meth:`RawKernel.__call__` returns, so synchronisation has nothing to
wait for: ``Device(0).synchronize()``, ``runtime.deviceSynchronize()``, ``Stream.null.synchronize()``,
``get_current_stream().synchronize()`` and ``Event.synchronize()`` return at once, and the device and stream
context managers (``with Device(0):``, ``with Stream():``) change nothing. ``Device().compute_capability`` is
the default target's (``"90"`` for ``sm_90a``, :data:`simtc.cuda.compiler.DEFAULT_ARCH`). Kernel timing through
events (``get_elapsed_time``) is refused: executed kernels get the engine's cycles in a later step.

>>> Device(0).synchronize(); runtime.deviceSynchronize(); Stream.null.synchronize()
>>> Device().compute_capability, runtime.getDeviceCount()
('90', 1)
"""

from __future__ import annotations

import types

from simtc.cuda import compiler
from simtc.cuda._memory import MemoryPointer, UnownedMemory, alloc
from simtc.errors import SimtcError

__all__ = ["Device", "Event", "MemoryPointer", "Stream", "UnownedMemory", "alloc", "compiler",
           "get_current_stream", "get_elapsed_time", "runtime"]


def _one_device(device_id: int) -> int:
    if int(device_id) != 0:
        raise SimtcError(f"device {device_id}: simtc.cuda has one device, 0", rule="simtc.cuda models one device")
    return 0


class Device:
    """The one simtc device (``cupy.cuda.Device``); id 0."""

    def __init__(self, device=None):
        self.id = _one_device(0 if device is None else device)

    def synchronize(self) -> None:
        """Nothing to wait for: every launch has finished when it returns."""

    def use(self) -> None:
        """Device 0 is always current."""

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc) -> None:
        return None

    @property
    def compute_capability(self) -> str:
        return compiler.DEFAULT_ARCH.removeprefix("sm_").rstrip("af")

    def __eq__(self, other) -> bool:
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self) -> int:
        return hash(("simtc.cuda.Device", self.id))

    def __repr__(self) -> str:
        return f"<CUDA Device {self.id} (simtc)>"


class Stream:
    """A stream (``cupy.cuda.Stream``): launches complete in order as they are made; ``Stream.null`` is the
    default stream."""

    null: Stream

    def __init__(self, null: bool = False, non_blocking: bool = False, ptds: bool = False):
        self.ptr = 0

    def synchronize(self) -> None:
        """Nothing to wait for."""

    def use(self) -> Stream:
        return self

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc) -> None:
        return None

    @property
    def done(self) -> bool:
        return True


Stream.null = Stream(null=True)


def get_current_stream(device_id: int | None = None) -> Stream:
    return Stream.null


class Event:
    """An event (``cupy.cuda.Event``): recorded and done at once."""

    def __init__(self, block: bool = False, disable_timing: bool = False, interprocess: bool = False):
        self.ptr = 0

    def record(self, stream: Stream | None = None) -> None:
        """Nothing to record: launches complete in order."""

    def synchronize(self) -> None:
        """Nothing to wait for."""

    @property
    def done(self) -> bool:
        return True


def get_elapsed_time(start_event: Event, end_event: Event) -> float:
    """Refused: executed kernels are not timed yet."""
    raise SimtcError("simtc.cuda does not time executed kernels yet (the engine's cycles for executed kernels come "
                     "in a later step); use last_launch() for instruction counts",
                     rule="executed kernels are counted, not yet timed")


def _device_synchronize() -> None:
    """Nothing to wait for."""


def _get_device_properties(device_id: int) -> dict:
    _one_device(device_id)
    major, minor = divmod(int(Device().compute_capability), 10)
    return {"name": b"simtc", "major": major, "minor": minor, "warpSize": 32, "maxThreadsPerBlock": 1024,
            "maxThreadsDim": (1024, 1024, 64), "maxGridSize": (2**31 - 1, 65535, 65535)}


runtime = types.SimpleNamespace(
    deviceSynchronize=_device_synchronize,
    getDeviceCount=lambda: 1,
    getDevice=lambda: 0,
    setDevice=_one_device,
    getDeviceProperties=_get_device_properties,
)
"""``cupy.cuda.runtime``'s calls that scripts make around launches (``deviceSynchronize``, ``getDeviceCount``,
``getDevice``, ``setDevice``, ``getDeviceProperties``)."""
