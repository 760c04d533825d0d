"""``SharedMemory``: one CTA's shared memory as a byte store with named buffers.

Capacity: 227 KiB (232,448 B) of dynamic shared memory per block on both sm90 and sm100
(CUDA C++ Programming Guide, "Technical Specifications per Compute Capability": maximum
shared memory per thread block 227 KB for compute capability 9.0 and 10.0). Address 0 of the
image is taken to be 1024-byte aligned, as CUTLASS, DeepGEMM and FlashMLA arrange.

Instructions access the image only through :meth:`SharedMemory.read`, :meth:`~SharedMemory.write`,
:meth:`~SharedMemory.gather` and :meth:`~SharedMemory.scatter`: these tell an observer
(:attr:`SharedMemory.on_access`) and keep each byte's last writer. The tile helpers
(:meth:`~SharedMemory.write_tile` ...) are host-side setup, like a test filling memory, and are
not observed.

Buffers are named byte ranges. They may alias (FlashMLA unions Q with ``dequant[0]``);
:meth:`SharedMemory.aliases` shows which buffers share bytes.

>>> sm = SharedMemory()
>>> q = sm.alloc("q", 65536, align=1024)
>>> k = sm.alloc("dequant0", 73728, at=0)          # an explicit union with q
>>> [b.name for b in sm.aliases("q")]
['dequant0']
>>> sm.free_bytes
158720
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from attrs import define, field, frozen

from simtc.errors import AllocationError, SmemError
from simtc.smem.desc import arch_name
from simtc.smem.image import read_tile, read_tile_bits, write_tile, write_tile_bits
from simtc.smem.layout import CanonicalLayout

__all__ = ["SMEM_CAPACITY", "Buffer", "SharedMemory"]

SMEM_CAPACITY = {"sm100": 227 * 1024, "sm90": 227 * 1024}
_CAP_REF = "CUDA C++ Programming Guide, technical specifications per compute capability (9.0, 10.0)"


@frozen
class Buffer:
    """A named byte range of shared memory."""

    name: str
    offset: int
    size: int
    align: int = 16

    @property
    def end(self) -> int:
        return self.offset + self.size

    def overlaps(self, other: Buffer) -> bool:
        return self.offset < other.end and other.offset < self.end


def _arch(a: str) -> str:
    return arch_name(a, error=SmemError)


_WORDS = {2: (np.uint16, 1), 4: (np.uint32, 1), 8: (np.uint64, 1), 16: (np.uint64, 2)}
"""Access width -> (word dtype, words per access) of the aligned gather/scatter path."""


@define(eq=False)
class SharedMemory:
    """Per-CTA shared memory: a ``uint8`` image plus named, aligned buffers."""

    arch: str = field(default="sm100", converter=_arch)
    size: int | None = field(default=None)
    """Bytes to model (default: the architecture's per-block maximum)."""
    data: np.ndarray = field(init=False)
    buffers: dict[str, Buffer] = field(init=False, factory=dict)
    writers: list = field(init=False, factory=list)
    """What wrote bytes through :meth:`write` / :meth:`scatter` with a ``writer`` (instruction records)."""
    last_writer: np.ndarray | None = field(init=False, default=None)
    """Per byte, index into :attr:`writers` of its last writer (-1 = none or a host write); allocated on the
    first write that names a writer."""
    on_access: Callable | None = field(init=False, default=None)
    """Observer of instruction accesses, ``on_access(kind, addresses)`` with kind ``"smem.read"`` or
    ``"smem.write"`` and the byte addresses touched (set by :class:`simtc.semantics.Cta`)."""
    _top: int = field(init=False, default=0)

    def __attrs_post_init__(self) -> None:
        cap = SMEM_CAPACITY[self.arch]
        if self.size is None:
            self.size = cap
        if not isinstance(self.size, int) or not 0 < self.size <= cap:
            raise AllocationError(f"{self.size!r} B of shared memory is more than the {cap} B a block may use "
                                  f"on {self.arch}", rule="227 KiB per block", ref=_CAP_REF)
        self.data = np.zeros(self.size, dtype=np.uint8)

    @property
    def capacity(self) -> int:
        return SMEM_CAPACITY[self.arch]

    @property
    def free_bytes(self) -> int:
        """Bytes above the highest allocated byte."""
        return self.size - max((b.end for b in self.buffers.values()), default=0)

    # ---- buffers ---------------------------------------------------------------------------
    def alloc(self, name: str, size: int, *, align: int = 16, at: int | None = None) -> Buffer:
        """Allocate ``size`` bytes named ``name``, aligned to ``align``.

        Without ``at`` the buffer goes after the highest allocated byte; with ``at`` it is
        placed there, which may alias other buffers (allowed, and visible via :meth:`aliases`).
        """
        if name in self.buffers:
            raise AllocationError(f"a buffer named {name!r} exists already", rule="buffer names are unique")
        if not isinstance(size, int) or size <= 0:
            raise AllocationError(f"buffer size must be a positive integer, got {size!r}", rule="buffer sizes")
        if align <= 0 or align & (align - 1):
            raise AllocationError(f"alignment must be a power of two, got {align}", rule="power-of-two alignment")
        if at is None:
            top = max((b.end for b in self.buffers.values()), default=0)
            at = -(-top // align) * align
        elif at % align:
            raise AllocationError(f"offset {at} of {name!r} is not {align}-byte aligned", rule="buffer alignment")
        if at < 0 or at + size > self.size:
            raise AllocationError(
                f"{name!r}: {size} B at offset {at} ends at {at + size} B, beyond the {self.size} B of shared "
                f"memory ({self.arch} allows {self.capacity} B per block)",
                rule="227 KiB per block", ref=_CAP_REF,
            )
        buf = Buffer(name, at, size, align)
        self.buffers[name] = buf
        return buf

    def buffer(self, name: str | Buffer) -> Buffer:
        if isinstance(name, Buffer):
            return name
        try:
            return self.buffers[name]
        except KeyError:
            raise SmemError(f"no buffer named {name!r}; have {sorted(self.buffers)}", rule="known buffers") from None

    def aliases(self, name: str | Buffer) -> list[Buffer]:
        """Other buffers sharing at least one byte with ``name``."""
        b = self.buffer(name)
        return [o for o in self.buffers.values() if o.name != b.name and o.overlaps(b)]

    def _addr(self, where: str | Buffer | int) -> int:
        return where if isinstance(where, (int, np.integer)) else self.buffer(where).offset

    def view(self, where: str | Buffer, dtype=np.uint8, shape=None) -> np.ndarray:
        """A typed numpy view of a buffer (writes go to shared memory)."""
        b = self.buffer(where)
        dt = np.dtype(dtype)
        if b.size % dt.itemsize or b.offset % dt.itemsize:
            raise SmemError(f"buffer {b.name!r} ({b.size} B at {b.offset}) is not a whole number of aligned "
                            f"{dt.itemsize}-byte items", rule="typed views are aligned")
        v = self.data[b.offset:b.end].view(dt)
        return v.reshape(shape) if shape is not None else v

    # ---- raw access: the one access API of instructions (reads and writes, observed, writers kept) -----------
    def read(self, address: int, nbytes: int) -> np.ndarray:
        """Copy of ``nbytes`` bytes at ``address``."""
        self._check_range(address, nbytes)
        if self.on_access is not None:
            self.on_access("smem.read", np.arange(address, address + nbytes))
        return self.data[address:address + nbytes].copy()

    def write(self, address: int, payload, *, writer=None) -> None:
        """Write bytes at ``address``; ``writer`` (an instruction record) becomes their last writer."""
        b = np.frombuffer(bytes(payload), dtype=np.uint8) if not isinstance(payload, np.ndarray) else payload
        b = np.asarray(b).view(np.uint8).ravel()
        self._check_range(address, b.size)
        where = slice(address, address + b.size)
        if self.on_access is not None:
            self.on_access("smem.write", np.arange(address, address + b.size))
        self.data[where] = b
        self._record_writer(where, writer)

    def gather(self, addresses, nbytes: int) -> np.ndarray:
        """Bytes at many addresses at once: result shape ``addresses.shape + (nbytes,)``."""
        if self.on_access is None:
            a, words = self._aligned(addresses, nbytes)
            if words is not None:  # whole aligned words: one index per access, not one per byte
                return words[a // nbytes].view(np.uint8).reshape((*a.shape, nbytes))
        a = self._byte_addresses(addresses, nbytes)
        if self.on_access is not None:
            self.on_access("smem.read", a.ravel())
        return self.data[a]

    def scatter(self, addresses, payload, *, writer=None) -> None:
        """Write ``payload`` (uint8, shape ``addresses.shape + (nbytes,)``) at many addresses (inverse of gather)."""
        p = np.asarray(payload, dtype=np.uint8)
        nbytes = p.shape[-1] if p.ndim else 1
        if self.on_access is None:
            a, words = self._aligned(addresses, nbytes)
            if words is not None and p.shape == (*a.shape, nbytes):  # whole aligned words (see gather)
                at = a // nbytes
                words[at] = np.ascontiguousarray(p).view(words.dtype).reshape((*at.shape, words.shape[1]))
                if writer is not None or self.last_writer is not None:
                    if self.last_writer is None:
                        self.last_writer = np.full(self.size, -1, dtype=np.int32)
                    self._record_writer((at,), writer, self.last_writer.reshape(-1, nbytes))
                return
        a = self._byte_addresses(addresses, nbytes)
        if self.on_access is not None:
            self.on_access("smem.write", a.ravel())
        self.data[a] = p.reshape(a.shape)
        self._record_writer(a, writer)

    def writer_of(self, address: int):
        """The record that last wrote byte ``address`` through :meth:`write` / :meth:`scatter`, else None."""
        if self.last_writer is None or self.last_writer[address] < 0:
            return None
        return self.writers[int(self.last_writer[address])]

    def _record_writer(self, where, writer, last=None) -> None:
        if writer is None and self.last_writer is None:
            return
        if self.last_writer is None:
            self.last_writer = np.full(self.size, -1, dtype=np.int32)
        if last is None:
            last = self.last_writer
        if writer is None:
            last[where] = -1
            return
        self.writers.append(writer)
        last[where] = len(self.writers) - 1

    def _aligned(self, addresses, nbytes: int) -> tuple[np.ndarray, np.ndarray | None]:
        """``(addresses as int64, shared memory as (words, k) rows of nbytes)`` when every access is a whole
        aligned 2/4/8/16-byte word inside shared memory, else ``(addresses, None)``."""
        a = np.asarray(addresses, dtype=np.int64)
        w = _WORDS.get(nbytes)
        if w is None or not a.ndim or not a.size or self.size % nbytes or (a & (nbytes - 1)).any() \
                or a.min() < 0 or a.max() + nbytes > self.size:
            return a, None
        return a, self.data.view(w[0]).reshape(-1, w[1])

    def _byte_addresses(self, addresses, nbytes: int) -> np.ndarray:
        a = np.asarray(addresses, dtype=np.int64)
        if a.size and (a.min() < 0 or a.max() + nbytes > self.size):
            raise SmemError(f"address range {int(a.min())}..{int(a.max()) + nbytes} is outside the {self.size} B "
                            "of shared memory", rule="accesses stay inside shared memory")
        return a[..., None] + np.arange(nbytes)

    def _check_range(self, address: int, nbytes: int) -> None:
        if address < 0 or nbytes < 0 or address + nbytes > self.size:
            raise SmemError(f"{nbytes} B at {address} is outside the {self.size} B of shared memory",
                            rule="accesses stay inside shared memory")

    # ---- tiles -----------------------------------------------------------------------------
    def write_tile(self, layout: CanonicalLayout, values, where: str | Buffer | int, offset: int = 0) -> None:
        """Store a float matrix in ``layout`` at a buffer (plus ``offset``) or an address."""
        write_tile(self.data, layout, values, self._addr(where) + offset)

    def read_tile(self, layout: CanonicalLayout, where: str | Buffer | int, offset: int = 0) -> np.ndarray:
        return read_tile(self.data, layout, self._addr(where) + offset)

    def write_tile_bits(self, layout: CanonicalLayout, bits, where: str | Buffer | int, offset: int = 0) -> None:
        write_tile_bits(self.data, layout, bits, self._addr(where) + offset)

    def read_tile_bits(self, layout: CanonicalLayout, where: str | Buffer | int, offset: int = 0) -> np.ndarray:
        return read_tile_bits(self.data, layout, self._addr(where) + offset)

    def descriptor(self, layout: CanonicalLayout, where: str | Buffer | int, *, k_slice: int = 0,
                   offset: int = 0):
        """The descriptor CUTLASS would build for ``layout`` stored at ``where`` (absolute start)."""
        return layout.descriptor(arch=self.arch, start=self._addr(where) + offset, k_slice=k_slice)
