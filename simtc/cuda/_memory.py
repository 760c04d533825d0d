"""Device memory for :mod:`simtc.cuda`: one default simtc device, allocations that free themselves, pointers.

Every :class:`~simtc.cuda.ndarray` lives in the global memory of one :class:`simtc.ptx.memory.Device` (the
*default device*, made on first use), the memory the executor's loads and stores check. An allocation is a
:class:`Memory` (freed when nothing refers to it any more, as CuPy's memory pool returns it); ``ndarray.data`` is a
:class:`MemoryPointer` into it, whose ``ptr`` is the device address a kernel receives (never 0, like
``cudaMalloc``'s).
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

__all__ = ["Memory", "MemoryPointer", "UnownedMemory", "alloc", "default_device", "global_memory",
           "reset_default_device"]

_DEVICE: list[Any] = []


def default_device():
    """The :class:`simtc.ptx.memory.Device` every array and launch of :mod:`simtc.cuda` uses (made on first use)."""
    if not _DEVICE:
        from simtc.ptx.memory import Device

        _DEVICE.append(Device())
    return _DEVICE[0]


def reset_default_device() -> None:
    """Forget the default device (its memory and loaded modules): the next array or launch makes a fresh one.
    Arrays made before keep the old device's memory alive but must not be passed to a kernel afterwards."""
    _DEVICE.clear()


def global_memory():
    """The default device's :class:`simtc.ptx.memory.GlobalMemory`."""
    return default_device().memory


class Memory:
    """One device allocation of ``size`` bytes at address ``ptr``, freed when garbage-collected."""

    __slots__ = ("__weakref__", "_gm", "device", "ptr", "size")

    def __init__(self, size: int, *, name: str | None = None):
        if size < 0:
            raise ValueError(f"negative allocation size {size}")
        self.device = default_device()
        self._gm = self.device.memory
        self.size = int(size)
        self.ptr = self._gm.alloc(max(1, self.size), name=name)

    def view(self) -> np.ndarray:
        """A writable uint8 view of the whole allocation (host access to device memory)."""
        return self._gm.view(self.ptr, max(1, self.size))[: self.size]

    def __del__(self):
        with contextlib.suppress(Exception):  # interpreter shutdown, or a device already reset
            self._gm.free(self.ptr)


class UnownedMemory:
    """Device memory simtc.cuda did not allocate (a module's ``__device__`` or ``__constant__`` variable): ``size``
    bytes at ``ptr`` whose host view is ``data`` (a uint8 array: part of a global allocation or of a module's
    constant bank)."""

    __slots__ = ("_data", "device", "ptr", "size")

    def __init__(self, ptr: int, size: int, device, data: np.ndarray):
        self.device = device
        self.ptr = int(ptr)
        self.size = int(size)
        self._data = data

    def view(self) -> np.ndarray:
        return self._data


class MemoryPointer:
    """A device address inside an allocation (CuPy's ``cupy.cuda.MemoryPointer``): ``ptr`` is the address,
    ``mem`` the allocation, ``ptr - mem.ptr`` the offset; ``p + n`` moves it by ``n`` bytes."""

    __slots__ = ("mem", "ptr")

    def __init__(self, mem: Memory | UnownedMemory, offset: int = 0):
        self.mem = mem
        self.ptr = mem.ptr + int(offset)

    @property
    def device_id(self) -> int:
        return 0

    def __add__(self, offset: int) -> MemoryPointer:
        return MemoryPointer(self.mem, self.ptr - self.mem.ptr + int(offset))

    def __int__(self) -> int:
        return self.ptr

    def __repr__(self) -> str:
        return f"<MemoryPointer 0x{self.ptr:x} (allocation 0x{self.mem.ptr:x}, {self.mem.size} bytes)>"


def alloc(nbytes: int, *, name: str | None = None) -> MemoryPointer:
    """A fresh allocation of ``nbytes`` on the default device (``cupy.cuda.alloc``)."""
    return MemoryPointer(Memory(nbytes, name=name))
