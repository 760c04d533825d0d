"""By-value CuTe objects as kernel arguments: the bytes a CuTe kernel's host code passes, tensor maps included.

A CuTe kernel takes its objects by value: tensors (a layout and an iterator), tilers, a ``TiledMMA``, TMA copy atoms.
nvcc declares each as an aggregate parameter ``.param .align A .b8 name[N]`` (PTX ISA 9.0 §5.1.6); the kernel reads
the dynamic members with ``ld.param`` at fixed offsets, and a TMA load names its descriptor by the generic address of
the parameter (``cvta.param``), so the descriptor's 128 bytes must sit at their offset inside the parameter. Static
members (``Int<128>``, ``_1`` strides, ``ArithmeticTuple<_0,_0>``) occupy no bytes; an empty object is one byte.

:class:`StructArg` builds such a parameter from its PTX declaration (:meth:`StructArg.of`: size and alignment) and
the host object's members at their byte offsets: integers, floats and device pointers with :meth:`StructArg.put`,
and a tensor map -- simtc's encoding of ``cuTensorMapEncodeTiled`` (:func:`simtc.ptx.tensor_map.tensor_map`, the
same arguments as the driver's) -- with :meth:`StructArg.put_tensor_map`, which checks that the descriptor is
64-byte aligned inside a parameter aligned to at least 64 (the driver's rule: "tensorMap address must be aligned to
64 bytes", CUDA 13.0 ``cuda.h``, ``cuTensorMapEncodeTiled``). :meth:`StructArg.value` is the argument for
:class:`simtc.cuda.RawKernel` (a numpy ``void`` of the parameter's size).

Where CuTe puts the descriptor (CUTLASS at 7107b05): ``Copy_Atom<Copy_Traits<...>, T>`` derives from its traits
(``include/cute/atom/copy_atom.hpp:51-53``); ``Copy_Traits<SM90_TMA_LOAD, NumBitsPerTMA, AuxParams_>`` holds
``TmaDescriptor tma_desc_`` first and ``AuxParams aux_params_`` after it
(``include/cute/atom/copy_traits_sm90_tma.hpp:102-116``); ``TmaDescriptor`` is ``CUtensorMap``
(``include/cute/arch/copy_sm90_desc.hpp:292``), 128 bytes aligned to 128 in CUDA 13.0's ``cuda.h``
(``CUtensorMap_st``: ``alignas(128) cuuint64_t opaque[CU_TENSOR_MAP_NUM_QWORDS]``). So the descriptor is at offset
0 of a TMA atom parameter, and ``AuxTmaParams::g_stride_`` (``copy_traits_sm90_tma.hpp:52-54``) follows at 128 --
empty when the strides of the TMA tensor are static (``ScaledBasis<_1, i>``), as in the Blackwell tutorials, so the
atom is ``.align 128 .b8 [256]``. What the descriptor holds is what ``detail::make_tma_copy_desc``
(``copy_traits_sm90_tma.hpp:929-1130``) passes to ``cuTensorMapEncodeTiled``: the tensor's address, the TMA modes'
extents and byte strides (``fill_tma_gmem_shape_stride``, lines 858-901; dimension 0's stride is the element),
the box (the sizes of the TMA basis's modes, lines 992-995), element strides 1, ``INTERLEAVE_NONE``,
``L2_PROMOTION_L2_128B``, ``FLOAT_OOB_FILL_NONE`` (lines 1039-1041) and the swizzle of the shared-memory layout
(lines 1044-1046).

>>> a = StructArg(24, align=8).put(0, np.int32(256)).put(4, np.int32(128)).put(8, np.int32(128))
>>> bytes(a.value())[:12] == np.array([256, 128, 128], np.int32).tobytes(), len(bytes(a.value()))
(True, 24)
>>> StructArg(256, align=128).put_tensor_map(192, "FLOAT16", 2, 0x7F0000000000, (64, 128), (128,), (64, 128),
...                                          (1, 1), swizzle="SWIZZLE_128B")
Traceback (most recent call last):
...
simtc.ptx.errors.LaunchError: a tensor map at byte 192 of a 256-byte parameter runs past its end [rule: a tensor \
map is 128 bytes at a 64-byte aligned offset of a parameter aligned to >= 64; CUDA Driver API, \
cuTensorMapEncodeTiled (CUDA 13.0 cuda.h): tensorMap address must be aligned to 64 bytes]
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from simtc.ptx.errors import LaunchError

__all__ = ["StructArg"]

_RULE = "a by-value struct argument's members lie inside its parameter, each at an offset aligned to its size"
_REF = "PTX ISA 9.0 §5.1.6 (kernel parameters)"
_TM_RULE = "a tensor map is 128 bytes at a 64-byte aligned offset of a parameter aligned to >= 64"
_TM_REF = ("CUDA Driver API, cuTensorMapEncodeTiled (CUDA 13.0 cuda.h): tensorMap address must be aligned to 64 "
           "bytes")


class StructArg:
    """The bytes of one aggregate kernel parameter (``.param .align A .b8 name[N]``), built member by member.

    Bytes not written stay zero (the empty members of a CuTe object and its padding)."""

    def __init__(self, size: int, *, align: int = 1, name: str = "parameter"):
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            raise LaunchError(f"{name}: a struct argument of {size!r} bytes", rule=_RULE, ref=_REF)
        self.size = int(size)
        self.align = int(align or 1)
        self.name = name
        self._buf = bytearray(self.size)
        self._written = np.zeros(self.size, bool)

    @classmethod
    def of(cls, kernel, index: int) -> StructArg:
        """An empty argument for parameter ``index`` of ``kernel`` (a :class:`simtc.cuda.RawKernel` or a
        :class:`simtc.ptx.ir.Function`), sized and aligned as its PTX declaration says."""
        fn = getattr(kernel, "function", kernel)
        params = fn.params
        if not 0 <= index < len(params):
            raise LaunchError(f"{fn.name} has {len(params)} parameters; there is no parameter {index}", rule=_RULE,
                              ref=_REF)
        p = params[index]
        if not p.shape:
            raise LaunchError(f"parameter {index} ({p.name}: .{p.type}) is a scalar, not a by-value struct "
                              "(.b8 name[N]); pass a numpy scalar", rule=_RULE, ref=_REF)
        return cls(p.size, align=p.align or 1, name=f"parameter {index} ({p.name}: .align {p.align or 1} .b8"
                                                     f"[{p.size}])")

    def _place(self, offset: int, raw: bytes, what: str, align: int) -> StructArg:
        if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or offset < 0:
            raise LaunchError(f"{what} at offset {offset!r} of {self.name}", rule=_RULE, ref=_REF)
        offset = int(offset)
        if offset + len(raw) > self.size:
            raise LaunchError(f"{what} ({len(raw)} bytes) at byte {offset} runs past the end of {self.name} "
                              f"({self.size} bytes)", rule=_RULE, ref=_REF)
        if offset % align:
            raise LaunchError(f"{what} at byte {offset} of {self.name} is not {align}-byte aligned", rule=_RULE,
                              ref=_REF)
        if self._written[offset:offset + len(raw)].any():
            raise LaunchError(f"{what} at byte {offset} of {self.name} overlaps a member written before",
                              rule=_RULE, ref=_REF)
        self._buf[offset:offset + len(raw)] = raw
        self._written[offset:offset + len(raw)] = True
        return self

    def put(self, offset: int, value: Any) -> StructArg:
        """Write a member at byte ``offset``: a numpy scalar (its own bytes: ``np.int32(k)``, ``np.float32(x)``), a
        device array or pointer (its 8-byte address), or ``None`` (a null pointer). Returns ``self``."""
        from simtc.cuda._array import ndarray
        from simtc.cuda._memory import MemoryPointer

        if value is None or isinstance(value, (ndarray, MemoryPointer)):
            ptr = 0 if value is None else value.data.ptr if isinstance(value, ndarray) else value.ptr
            return self._place(offset, struct.pack("<Q", ptr), "a pointer", 8)
        if isinstance(value, np.generic) and value.dtype.kind in "biuf":
            return self._place(offset, value.tobytes(), f"numpy.{value.dtype.name}", value.dtype.itemsize)
        raise LaunchError(f"{type(value).__name__} {value!r} as a member of {self.name}: pass a numpy scalar of the "
                          "member's type (numpy.int32(k), numpy.float32(x)), a device array or None", rule=_RULE,
                          ref=_REF)

    def put_tensor_map(self, offset: int, *args, **kwargs) -> StructArg:
        """Write a tensor map at byte ``offset``: the 128 bytes of :func:`simtc.ptx.tensor_map.tensor_map` called
        with ``args``/``kwargs`` (``cuTensorMapEncodeTiled``'s arguments, each checked by the driver's rules), or
        ``args`` = one 128-byte ``bytes`` already made by it. Returns ``self``."""
        from simtc.ptx.tensor_map import SIZE, tensor_map

        if len(args) == 1 and not kwargs and isinstance(args[0], (bytes, bytearray)):
            raw = bytes(args[0])
            if len(raw) != SIZE:
                raise LaunchError(f"a tensor map of {len(raw)} bytes for {self.name}: one is {SIZE}", rule=_TM_RULE,
                                  ref=_TM_REF)
        else:
            raw = tensor_map(*args, **kwargs)
        if isinstance(offset, (int, np.integer)) and not isinstance(offset, bool) and int(offset) + SIZE > self.size:
            raise LaunchError(f"a tensor map at byte {offset} of a {self.size}-byte parameter runs past its end",
                              rule=_TM_RULE, ref=_TM_REF)
        if self.align < 64:
            raise LaunchError(f"a tensor map in {self.name}, whose alignment is {self.align}: the kernel cannot see "
                              "it 64-byte aligned", rule=_TM_RULE, ref=_TM_REF)
        return self._place(offset, raw, "a tensor map", 64)

    def value(self) -> np.void:
        """The argument: a numpy ``void`` scalar of the parameter's size (what :class:`simtc.cuda.RawKernel`
        passes by value)."""
        return np.frombuffer(bytes(self._buf), np.dtype((np.void, self.size)))[0]

    def __bytes__(self) -> bytes:
        return bytes(self._buf)

    def __repr__(self) -> str:
        return f"<StructArg {self.name}: {int(self._written.sum())} of {self.size} bytes written>"
