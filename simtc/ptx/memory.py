"""Device memory for executed PTX: global allocations with memcheck-quality faults, the generic address
space and its windows, constant banks and module-scope variables.

**Global memory** (:class:`GlobalMemory`) hands out device addresses like ``cudaMalloc`` (never 0, 256-byte
aligned by default) and checks every lane's access against the allocations: an access outside every
allocation, or one that is not a multiple of its size, raises :class:`~simtc.ptx.errors.KernelFault` naming the
lane, the address, the access size and the nearest allocation (its base, size, name and how far the address is
from it), as compute-sanitizer's memcheck reports it. PTX requires an address to be naturally aligned to the
access size (PTX ISA 9.0 §6.4.1, addresses as operands: "the address must be naturally aligned to a multiple
of the access size"; a vector access to the whole vector's size).

**Generic addressing** (PTX ISA 9.0 §6.4.1.1, generic addressing; ``cvta`` in §9.7.9): one 64-bit space in
which windows stand for the state spaces. Where the windows lie is not architectural (the hardware's are
undocumented), so these bases are **simtc's own choice**, one per 2**40 bytes so that ``address >> 40`` names
the window:

==========  ======================  ==========================================================
window      base                    an address in it is
==========  ======================  ==========================================================
global      ``0x7F00_0000_0000``    a global address itself (``cvta.global`` is the identity)
shared      ``0x7E00_0000_0000``    ``base + `` the CTA's shared-memory offset
local       ``0x7D00_0000_0000``    ``base + `` the thread's local (stack) offset, per thread
const       ``0x7C00_0000_0000``    ``base + `` the offset in the module's constant bank
param       ``0x7B00_0000_0000``    ``base + `` the offset in the kernel's parameter buffer
==========  ======================  ==========================================================

>>> g = GlobalMemory()
>>> a = g.alloc(16, name="x")
>>> hex(a), window_of(a), window_of(SHARED_WINDOW + 64)
('0x7f0000000000', 'global', 'shared')
>>> g.view(a, 16)[:4] = [1, 2, 3, 4]
>>> g.load(np.array([a], np.uint64), 4, np.array([True])).view(np.uint32)
array([[67305985]], dtype=uint32)
>>> try:
...     g.load(np.array([a + 16], np.uint64), 4, np.array([True]))
... except KernelFault as e:
...     print(e.message.replace("; ", ";\\n"))
invalid global read of size 4 bytes by lane 0: address 0x7f0000000010 is out of bounds;
it is 0 bytes after the nearest allocation 'x' at 0x7f0000000000 of size 16 bytes
"""

from __future__ import annotations

import bisect

import numpy as np
from attrs import define, field, frozen

from simtc.ptx.errors import KernelFault, LaunchError

__all__ = [
    "CONST_WINDOW",
    "GLOBAL_BASE",
    "LOCAL_WINDOW",
    "PARAM_WINDOW",
    "SHARED_WINDOW",
    "WINDOWS",
    "Allocation",
    "Device",
    "GlobalMemory",
    "ModuleImage",
    "window_of",
]

GLOBAL_BASE = 0x7F00_0000_0000
"""Where simtc's global heap starts (simtc's choice; ``cudaMalloc`` addresses on Linux look alike)."""
SHARED_WINDOW = 0x7E00_0000_0000
LOCAL_WINDOW = 0x7D00_0000_0000
CONST_WINDOW = 0x7C00_0000_0000
PARAM_WINDOW = 0x7B00_0000_0000
WINDOWS = {"global": GLOBAL_BASE, "shared": SHARED_WINDOW, "local": LOCAL_WINDOW, "const": CONST_WINDOW,
           "param": PARAM_WINDOW}
"""Generic-address window bases by state space (simtc's own layout: see the module text)."""
_BY_TAG = {v >> 40: k for k, v in WINDOWS.items()}
CONST_BANK_SIZE = 64 * 1024
"""Bytes of the module's constant bank (CUDA C++ Programming Guide, technical specifications: 64 KB)."""

_ALIGN_REF = "PTX ISA 9.0 §6.4.1"
_BOUNDS_REF = "PTX ISA 9.0 §5.1.4"
_WORD = {1: (np.uint8, 1), 2: (np.uint16, 1), 4: (np.uint32, 1), 8: (np.uint64, 1), 16: (np.uint64, 2),
         32: (np.uint64, 4)}


def window_of(address: int) -> str:
    """The state space whose generic window holds ``address`` (``"global"`` for anything outside the others).

    >>> window_of(LOCAL_WINDOW), window_of(0)
    ('local', 'global')
    """
    return _BY_TAG.get(int(address) >> 40, "global")


@frozen
class Allocation:
    """One global allocation: ``base`` (device address), ``size`` (bytes), ``name`` and its bytes."""

    base: int
    size: int
    name: str | None
    data: np.ndarray = field(eq=False, repr=False)

    def describe(self) -> str:
        return f"{self.name!r} at {self.base:#x} of size {self.size} bytes" if self.name else \
            f"at {self.base:#x} of size {self.size} bytes"


def _word_rows(data: np.ndarray, offsets: np.ndarray, size: int) -> np.ndarray:
    """Rows of ``size`` bytes at the (aligned) byte offsets, as a (n, size) uint8 array."""
    w, k = _WORD[size]
    return data.view(w).reshape(-1, k)[offsets // size].view(np.uint8).reshape(-1, size)


def _fault(kind: str, space: str, size: int, lane: int, address: int, why: str, *, rule: str, ref: str,
           allocation: str | None = None) -> KernelFault:
    e = KernelFault(f"invalid {space} {kind} of size {size} bytes by lane {lane}: address {address:#x} {why}",
                    rule=rule, ref=ref, address=address, size=size, allocation=allocation)
    e.lane = lane  # the executor turns the lane into (ctaid, tid) and adds the PTX line
    return e


@define(eq=False)
class GlobalMemory:
    """The device's global memory: allocations at device addresses, checked vectorised loads and stores."""

    _bases: list[int] = field(init=False, factory=list)
    _allocs: list[Allocation] = field(init=False, factory=list)
    _top: int = field(init=False, default=GLOBAL_BASE)
    _base_array: np.ndarray = field(init=False, factory=lambda: np.zeros(0, np.uint64))

    def alloc(self, nbytes: int, *, align: int = 256, name: str | None = None) -> int:
        """Allocate ``nbytes`` (zero-filled) at an ``align``-byte boundary; returns its device address (never 0).

        Allocations are never adjacent: a 256-byte gap follows each, so an access just past the end is reported
        against the allocation it overran (memcheck reports the same).
        """
        if not isinstance(nbytes, int) or nbytes < 0:
            raise LaunchError(f"cannot allocate {nbytes!r} bytes", rule="allocation sizes are non-negative")
        if align <= 0 or align & (align - 1):
            raise LaunchError(f"alignment {align} is not a power of two", rule="power-of-two alignment")
        base = -(-self._top // max(align, 256)) * max(align, 256)
        data = np.zeros(max(16, -(-nbytes // 32) * 32), dtype=np.uint8)
        a = Allocation(base, nbytes, name, data)
        i = bisect.bisect(self._bases, base)
        self._bases.insert(i, base)
        self._allocs.insert(i, a)
        self._base_array = np.array(self._bases, dtype=np.uint64)
        self._top = base + max(nbytes, 1) + 256
        return base

    def free(self, addr: int) -> None:
        """Free the allocation that starts at ``addr`` (``cudaFree``); freeing anything else is an error."""
        i = bisect.bisect_left(self._bases, addr)
        if i == len(self._bases) or self._bases[i] != addr:
            raise LaunchError(f"free of {addr:#x}, which is not the start of an allocation",
                              rule="free takes an address alloc returned")
        del self._bases[i], self._allocs[i]
        self._base_array = np.array(self._bases, dtype=np.uint64)

    @property
    def allocations(self) -> tuple[Allocation, ...]:
        return tuple(self._allocs)

    def allocation_of(self, addr: int) -> Allocation | None:
        """The allocation holding byte ``addr``, or None."""
        i = bisect.bisect(self._bases, int(addr)) - 1
        if i >= 0:
            a = self._allocs[i]
            if int(addr) < a.base + a.size:
                return a
        return None

    def view(self, addr: int, nbytes: int) -> np.ndarray:
        """A writable uint8 view of ``nbytes`` at ``addr`` (inside one allocation), for host copies."""
        a = self.allocation_of(addr)
        if a is None or addr + nbytes > a.base + a.size:
            raise LaunchError(f"{nbytes} bytes at {addr:#x} are not inside one allocation",
                              rule="host copies stay inside an allocation")
        off = addr - a.base
        return a.data[off:off + nbytes]

    def nearest(self, addr: int) -> tuple[Allocation | None, str]:
        """The allocation nearest to ``addr`` and where ``addr`` lies from it, in memcheck's words."""
        if not self._allocs:
            return None, "; there are no allocations"
        i = bisect.bisect(self._bases, addr) - 1
        cands = [self._allocs[j] for j in (i, i + 1) if 0 <= j < len(self._allocs)]

        def dist(a: Allocation) -> int:
            return a.base - addr if addr < a.base else max(0, addr - (a.base + a.size))

        a = min(cands, key=dist)
        where = f"{a.base - addr} bytes before" if addr < a.base else f"{addr - (a.base + a.size)} bytes after"
        return a, f"; it is {where} the nearest allocation {a.describe()}"

    def _locate(self, addrs: np.ndarray, size: int, kind: str, lanes: np.ndarray) -> tuple[Allocation, np.ndarray]:
        """The one allocation all ``addrs`` (active lanes' addresses) fall in, and their offsets; faults name lanes."""
        if addrs.size == 0:
            return None, addrs
        mis = (addrs & np.uint64(size - 1)) if size & (size - 1) == 0 else addrs % np.uint64(size)
        if mis.any():
            j = int(np.flatnonzero(mis)[0])
            a = self.allocation_of(int(addrs[j]))
            raise _fault(kind, "global", size, int(lanes[j]), int(addrs[j]),
                         f"is misaligned (not a multiple of {size})", rule="natural alignment of accesses",
                         ref=_ALIGN_REF, allocation=a.describe() if a else None)
        idx = np.searchsorted(self._base_array, addrs, side="right") - 1
        i0 = int(idx[0])
        if (idx == i0).all() and i0 >= 0:
            a = self._allocs[i0]
            off = addrs - np.uint64(a.base)
            if int(off.max()) + size <= a.size:
                return a, off.astype(np.int64)
        # slow path: several allocations, or a fault
        for j, ad in enumerate(addrs.tolist()):
            a = self.allocation_of(ad)
            if a is None or ad + size > a.base + a.size:
                near, where = self.nearest(ad)
                raise _fault(kind, "global", size, int(lanes[j]), ad, "is out of bounds" + where,
                             rule="every access lies inside an allocation", ref=_BOUNDS_REF,
                             allocation=near.describe() if near else None)
        return None, idx

    def load(self, addrs: np.ndarray, size: int, mask: np.ndarray) -> np.ndarray:
        """``size`` bytes at each active lane's address: a (number of active lanes, size) uint8 array."""
        lanes = np.flatnonzero(mask)
        a_act = np.asarray(addrs, dtype=np.uint64)[lanes]
        alloc, off = self._locate(a_act, size, "read", lanes)
        if alloc is not None:
            return _word_rows(alloc.data, off, size)
        if a_act.size == 0:
            return np.zeros((0, size), np.uint8)
        out = np.empty((a_act.size, size), np.uint8)
        for j, ad in enumerate(a_act.tolist()):
            al = self.allocation_of(ad)
            o = ad - al.base
            out[j] = al.data[o:o + size]
        return out

    def store(self, addrs: np.ndarray, values: np.ndarray, size: int, mask: np.ndarray) -> None:
        """Write ``values`` ((active lanes, size) uint8) at each active lane's address; lanes in order, so where
        two lanes write the same bytes the higher lane's value stays (PTX leaves the winner unspecified)."""
        lanes = np.flatnonzero(mask)
        a_act = np.asarray(addrs, dtype=np.uint64)[lanes]
        alloc, off = self._locate(a_act, size, "write", lanes)
        if alloc is not None:
            w, k = _WORD[size]
            alloc.data.view(w).reshape(-1, k)[off // size] = np.ascontiguousarray(values).view(w).reshape(-1, k)
            return
        for j, ad in enumerate(a_act.tolist()):
            al = self.allocation_of(ad)
            o = ad - al.base
            al.data[o:o + size] = values[j]

    def check(self, addrs: np.ndarray, size: int, mask: np.ndarray, kind: str) -> list[tuple[Allocation, int]]:
        """(allocation, offset) of each active lane's access, checked (for atomics, which go lane by lane)."""
        lanes = np.flatnonzero(mask)
        a_act = np.asarray(addrs, dtype=np.uint64)[lanes]
        self._locate(a_act, size, kind, lanes)
        out = []
        for ad in a_act.tolist():
            al = self.allocation_of(ad)
            out.append((al, ad - al.base))
        return out


@define(eq=False)
class ModuleImage:
    """What loading a module put on a device: its ``.global`` variables' addresses and its constant bank."""

    module: object
    global_vars: dict[str, int] = field(factory=dict)
    """Variable name -> device address."""
    const_vars: dict[str, int] = field(factory=dict)
    """Variable name -> offset in :attr:`const_bank`."""
    const_bank: np.ndarray = field(factory=lambda: np.zeros(CONST_BANK_SIZE, np.uint8))
    program: object = None
    """The executor's compiled form of the module (filled in by :mod:`simtc.ptx.executor`)."""


@define(eq=False)
class Device:
    """One simulated device: its :class:`GlobalMemory`, the modules loaded on it (variables, constant banks)
    and a launch counter (``%gridid``). ``simtc.cuda`` keeps one default device."""

    memory: GlobalMemory = field(factory=GlobalMemory)
    _images: dict[int, ModuleImage] = field(init=False, factory=dict)
    launches: int = 0

    def load(self, module) -> ModuleImage:
        """The module's image on this device, allocating and initialising its variables the first time.

        ``.global`` variables get allocations named after them; ``.const`` variables are laid out by alignment
        in the module's 64 KB constant bank. Initialisers are written as their types' bytes; a variable's
        name in an initialiser stands for its generic address (PTX ISA 9.0 §5.4.4, initializers).
        """
        img = self._images.get(id(module))
        if img is not None and img.module is module:
            return img
        img = ModuleImage(module)
        top = 0
        for v in module.variables:
            if v.space == "global":
                img.global_vars[v.name] = self.memory.alloc(max(v.size, 1), align=max(v.align or 1, 256),
                                                            name=v.name)
            elif v.space == "const":
                al = v.align or v.type_size
                top = -(-top // al) * al
                if top + v.size > CONST_BANK_SIZE:
                    raise LaunchError(f".const variable {v.name} does not fit the 64 KB constant bank",
                                      rule="64 KB of constant memory", ref="PTX ISA 9.0 §5.1.3")
                img.const_vars[v.name] = top
                top += v.size
        for v in module.variables:
            if v.init is None or v.space not in ("global", "const"):
                continue
            raw = _init_bytes(v, img)
            if v.space == "global":
                self.memory.view(img.global_vars[v.name], len(raw))[:] = np.frombuffer(raw, np.uint8)
            else:
                o = img.const_vars[v.name]
                img.const_bank[o:o + len(raw)] = np.frombuffer(raw, np.uint8)
        self._images[id(module)] = img
        return img

    def address_of(self, img: ModuleImage, name: str) -> int | None:
        """The generic address of a module-scope ``.global`` or ``.const`` variable (None if neither)."""
        if name in img.global_vars:
            return img.global_vars[name]
        if name in img.const_vars:
            return CONST_WINDOW + img.const_vars[name]
        return None


_NP = {"b": "u", "u": "u", "s": "i", "f": "f"}


def _init_bytes(v, img: ModuleImage) -> bytes:
    """The bytes of a variable's initialiser (missing trailing elements are zero)."""
    t = v.type
    size = v.type_size // (v.vector or 1)
    out = np.zeros(max(v.size, size * len(v.init)), np.uint8)
    for i, x in enumerate(v.init):
        if hasattr(x, "name"):  # a Sym: the generic address of a variable (+ offset)
            base = img.global_vars.get(x.name)
            if base is None and x.name in img.const_vars:
                base = CONST_WINDOW + img.const_vars[x.name]
            if base is None:
                raise LaunchError(f"initializer of {v.name} names {x.name}, which is no module variable",
                                  rule="initializers name module variables", ref="PTX ISA 9.0 §5.4.4")
            val = (base + x.offset) & ((1 << (8 * size)) - 1)
            b = val.to_bytes(size, "little")
        elif hasattr(x, "kind"):  # an Imm: 0f/0d literals keep their exact bits, decimal ones their value
            if x.kind in ("f32", "f64"):
                b = (int(x.value) & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
            elif t in ("f32", "f64", "f16") and isinstance(x.value, float):
                b = np.array(x.value, {"f32": np.float32, "f64": np.float64, "f16": np.float16}[t]).tobytes()
            else:
                b = (int(x.value) & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
        elif t in ("f32", "f64", "f16") and isinstance(x, float):
            b = np.array(x, {"f32": np.float32, "f64": np.float64, "f16": np.float16}[t]).tobytes()
        elif isinstance(x, float):
            b = int(x).to_bytes(size, "little", signed=x < 0)
        else:
            b = (int(x) & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
        out[i * size:(i + 1) * size] = np.frombuffer(b, np.uint8)
    return out[:v.size].tobytes() if v.size else out.tobytes()
