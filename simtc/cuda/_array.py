"""``simtc.cuda.ndarray``: CuPy's device array over simtc's device memory, and the functions that make one.

An :class:`ndarray` is a shape, a dtype and strides over a :class:`~simtc.cuda._memory.MemoryPointer` into the
default device's global memory, the memory the executor's loads and stores check. Host code reaches the bytes through
a numpy view of the allocation, so everything CuPy does on the host side of a raw-kernel script is numpy here:
``get``/``set``, ``copy``, ``fill``, indexing (a view wherever CuPy returns one: basic slices, integer indices,
``reshape`` of a contiguous array, ``view``, ``T``), ``astype``, the arithmetic operators and the reductions
``sum``/``min``/``max``/``all``/``any``/``mean`` (each result a new device array, as in CuPy). As in CuPy, an
ndarray never converts to a numpy array implicitly (``numpy.asarray(a)`` raises ``TypeError``): use ``a.get()`` or
``simtc.cuda.asnumpy(a)``.

>>> import numpy as np
>>> a = asarray(np.arange(6, dtype=np.float32)).reshape(2, 3)
>>> a.shape, a.dtype, a.strides, a.nbytes
((2, 3), dtype('float32'), (12, 4), 24)
>>> b = a[:, 1]                      # a view: same allocation, 4 bytes further
>>> b.data.ptr - a.data.ptr, b.get()
(4, array([1., 4.], dtype=float32))
>>> b.fill(9); a.get()
array([[0., 9., 2.],
       [3., 9., 5.]], dtype=float32)
>>> bool((a + 1 == asarray(a.get() + 1)).all())
True
"""

from __future__ import annotations

import numbers
import operator
from typing import Any

import numpy as np

from simtc.cuda._memory import Memory, MemoryPointer

__all__ = ["allclose", "arange", "array", "array_equal", "asarray", "asnumpy", "empty", "empty_like", "full",
           "full_like", "ndarray", "ones", "ones_like", "zeros", "zeros_like"]


def _shape(shape) -> tuple[int, ...]:
    if isinstance(shape, numbers.Integral):
        shape = (int(shape),)
    shape = tuple(int(operator.index(s)) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"negative dimensions are not allowed: {shape}")
    return shape


class ndarray:
    """A device array (``cupy.ndarray(shape, dtype=float, memptr=None, strides=None, order='C')``)."""

    __slots__ = ("__weakref__", "_data", "_dtype", "_shape", "_strides")

    def __init__(self, shape, dtype=float, memptr: MemoryPointer | None = None, strides=None, order: str = "C"):
        shape = _shape(shape)
        dt = np.dtype(dtype)
        if order not in ("C", "F"):
            raise ValueError(f"order must be 'C' or 'F', got {order!r}")
        if strides is None:
            strides = _contiguous_strides(shape, dt.itemsize, order)
        self._shape, self._dtype, self._strides = shape, dt, tuple(int(s) for s in strides)
        if memptr is None:
            memptr = MemoryPointer(Memory(int(np.prod(shape, dtype=np.int64)) * dt.itemsize))
        self._data = memptr

    # ---- the numpy view of the device bytes -------------------------------------------------------
    @property
    def _np(self) -> np.ndarray:
        """A numpy view of this array's elements in device memory (reads and writes reach the device)."""
        buf = self._data.mem.view()
        return np.ndarray(self._shape, self._dtype, buffer=buf, offset=self._data.ptr - self._data.mem.ptr,
                          strides=self._strides)

    def _view_of(self, arr: np.ndarray) -> ndarray:
        """An ndarray for ``arr``, a numpy view into this array's allocation."""
        base = self._data.mem.view()
        offset = arr.__array_interface__["data"][0] - base.__array_interface__["data"][0]
        return ndarray(arr.shape, arr.dtype, MemoryPointer(self._data.mem, offset), arr.strides)

    # ---- attributes ------------------------------------------------------------------------------
    shape = property(lambda self: self._shape)
    dtype = property(lambda self: self._dtype)
    strides = property(lambda self: self._strides)
    ndim = property(lambda self: len(self._shape))
    size = property(lambda self: int(np.prod(self._shape, dtype=np.int64)))
    itemsize = property(lambda self: self._dtype.itemsize)
    nbytes = property(lambda self: self.size * self._dtype.itemsize)
    data = property(lambda self: self._data, doc="The :class:`MemoryPointer` of the first element.")
    flags = property(lambda self: self._np.flags)

    @property
    def device(self):
        from simtc.cuda._runtime import Device

        return Device(0)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """The CUDA Array Interface (version 3): shape, typestr, data (address, read-only flag), strides."""
        contiguous = self._np.flags.c_contiguous
        return {"shape": self._shape, "typestr": self._dtype.str, "descr": self._dtype.descr,
                "data": (self._data.ptr if self.size else 0, False),
                "strides": None if contiguous else self._strides, "version": 3}

    @property
    def T(self) -> ndarray:
        return self._view_of(self._np.T)

    # ---- host transfers --------------------------------------------------------------------------
    def get(self, stream=None, order: str = "C", out: np.ndarray | None = None, blocking: bool = True) -> np.ndarray:
        """A numpy copy of the array (``cupy.ndarray.get``)."""
        if out is not None:
            if out.shape != self._shape or out.dtype != self._dtype:
                raise ValueError(f"out has shape {out.shape} and dtype {out.dtype}; the array has {self._shape} "
                                 f"and {self._dtype}")
            out[...] = self._np
            return out
        return np.array(self._np, order=order, copy=True)

    def set(self, arr, stream=None) -> None:
        """Copy a numpy array of the same shape and dtype into the array (``cupy.ndarray.set``)."""
        arr = np.asarray(arr)
        if arr.shape != self._shape:
            raise ValueError(f"shape mismatch: the array is {self._shape}, the host array {arr.shape}")
        if arr.dtype != self._dtype:
            raise TypeError(f"dtype mismatch: the array is {self._dtype}, the host array {arr.dtype}")
        self._np[...] = arr

    def copy(self, order: str = "C") -> ndarray:
        return _from_host(self._np, order=order)

    def fill(self, value) -> None:
        self._np.fill(value)

    def tolist(self):
        return self._np.tolist()

    def item(self, *args):
        return self._np.item(*args)

    # ---- shape and type --------------------------------------------------------------------------
    def reshape(self, *shape, order: str = "C") -> ndarray:
        if len(shape) == 1 and not isinstance(shape[0], numbers.Integral):
            shape = tuple(shape[0])
        view = self._np.reshape(shape, order=order)
        return self._view_of(view) if np.shares_memory(view, self._np) or not view.size else _from_host(view)

    def ravel(self, order: str = "C") -> ndarray:
        return self.reshape(-1, order=order)

    def flatten(self, order: str = "C") -> ndarray:
        return _from_host(self._np.flatten(order=order))

    def view(self, dtype=None) -> ndarray:
        return self._view_of(self._np if dtype is None else self._np.view(dtype))

    def astype(self, dtype, order: str = "K", casting=None, subok=None, copy: bool = True) -> ndarray:
        if not copy and np.dtype(dtype) == self._dtype:
            return self
        return _from_host(self._np.astype(dtype, order=order))

    def transpose(self, *axes) -> ndarray:
        return self._view_of(self._np.transpose(*axes))

    def swapaxes(self, a: int, b: int) -> ndarray:
        return self._view_of(self._np.swapaxes(a, b))

    def squeeze(self, axis=None) -> ndarray:
        return self._view_of(self._np.squeeze(axis))

    # ---- indexing --------------------------------------------------------------------------------
    def __getitem__(self, key) -> ndarray:
        arr = self._np
        if isinstance(key, ndarray):
            key = key._np
        elif isinstance(key, tuple):
            key = tuple(k._np if isinstance(k, ndarray) else k for k in key)
        out = arr[key]
        if not isinstance(out, np.ndarray):  # every axis indexed by an integer: CuPy returns a 0-d view
            out = arr[(*key, Ellipsis) if isinstance(key, tuple) else (key, Ellipsis)]
        if out.size and np.shares_memory(out, arr):
            return self._view_of(out)
        return _from_host(out)

    def __setitem__(self, key, value) -> None:
        if isinstance(key, ndarray):
            key = key._np
        elif isinstance(key, tuple):
            key = tuple(k._np if isinstance(k, ndarray) else k for k in key)
        self._np[key] = value._np if isinstance(value, ndarray) else value

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of unsized object")
        return self._shape[0]

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self._shape[0]))

    # ---- conversions: never implicitly to numpy (as CuPy) -----------------------------------------
    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a "
                        "NumPy array explicitly (as CuPy).")

    def __bool__(self) -> bool:
        return bool(self._np)

    def __int__(self) -> int:
        return int(self._np)

    def __float__(self) -> float:
        return float(self._np)

    def __index__(self) -> int:
        return operator.index(self._np[()]) if not self._shape else operator.index(self._np)

    def __repr__(self) -> str:
        return repr(self._np)

    def __str__(self) -> str:
        return str(self._np)

    def __format__(self, spec: str) -> str:
        return format(self._np[()] if not self._shape else self._np, spec)

    # ---- reductions (each result a new device array) ----------------------------------------------
    def sum(self, axis=None, dtype=None, out=None, keepdims: bool = False) -> ndarray:
        return _result(self._np.sum(axis=axis, dtype=dtype, keepdims=keepdims), out)

    def mean(self, axis=None, dtype=None, out=None, keepdims: bool = False) -> ndarray:
        return _result(self._np.mean(axis=axis, dtype=dtype, keepdims=keepdims), out)

    def max(self, axis=None, out=None, keepdims: bool = False) -> ndarray:
        return _result(self._np.max(axis=axis, keepdims=keepdims), out)

    def min(self, axis=None, out=None, keepdims: bool = False) -> ndarray:
        return _result(self._np.min(axis=axis, keepdims=keepdims), out)

    def all(self, axis=None, out=None, keepdims: bool = False) -> ndarray:
        return _result(self._np.all(axis=axis, keepdims=keepdims), out)

    def any(self, axis=None, out=None, keepdims: bool = False) -> ndarray:
        return _result(self._np.any(axis=axis, keepdims=keepdims), out)


def _operand(x):
    if isinstance(x, ndarray):
        return x._np
    if isinstance(x, np.ndarray) and x.ndim:
        raise TypeError("Unsupported type <class 'numpy.ndarray'>: move it to the device first (simtc.cuda.asarray), "
                        "as CuPy requires")
    return x


def _binary(op):
    def method(self, other):
        return _result(op(self._np, _operand(other)))

    def reflected(self, other):
        return _result(op(_operand(other), self._np))

    def inplace(self, other):
        arr = self._np
        arr[...] = op(arr, _operand(other))
        return self

    return method, reflected, inplace


for _name, _op in {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
                   "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow, "and": operator.and_,
                   "or": operator.or_, "xor": operator.xor, "lshift": operator.lshift, "rshift": operator.rshift,
                   "matmul": operator.matmul}.items():
    _m, _r, _i = _binary(_op)
    setattr(ndarray, f"__{_name}__", _m)
    setattr(ndarray, f"__r{_name}__", _r)
    setattr(ndarray, f"__i{_name}__", _i)
for _name, _op in {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
                   "ge": operator.ge}.items():
    setattr(ndarray, f"__{_name}__", _binary(_op)[0])
for _name, _op in {"neg": operator.neg, "pos": operator.pos, "abs": operator.abs, "invert": operator.invert}.items():
    setattr(ndarray, f"__{_name}__", (lambda op: lambda self: _result(op(self._np)))(_op))
ndarray.__hash__ = None  # type: ignore[assignment]  # mutable, compares elementwise (as numpy and CuPy)


def _contiguous_strides(shape: tuple[int, ...], itemsize: int, order: str) -> tuple[int, ...]:
    strides, step = [], itemsize
    dims = reversed(shape) if order == "C" else shape
    for d in dims:
        strides.append(step)
        step *= max(d, 1)
    return tuple(reversed(strides)) if order == "C" else tuple(strides)


def _from_host(arr, dtype=None, order: str = "C") -> ndarray:
    """A new device array holding a copy of host data ``arr``."""
    host = np.asarray(arr, dtype=dtype)
    if host.dtype.hasobject:
        raise TypeError(f"dtype {host.dtype} cannot live in device memory")
    order = "F" if order == "F" or (order in ("A", "K") and host.flags.f_contiguous and not host.flags.c_contiguous) \
        else "C"
    out = ndarray(host.shape, host.dtype, order=order)
    out._np[...] = host
    return out


def _result(value, out: ndarray | None = None) -> ndarray:
    if out is not None:
        out._np[...] = value
        return out
    return _from_host(value)


# ---- creation -------------------------------------------------------------------------------------

def asarray(a, dtype=None, order=None, *, blocking: bool = False) -> ndarray:
    """``a`` as a device array: ``a`` itself when it already is one of ``dtype`` (as ``cupy.asarray``)."""
    if isinstance(a, ndarray):
        return a if dtype is None or np.dtype(dtype) == a.dtype else a.astype(dtype)
    return _from_host(a, dtype=dtype, order=order or "K")


def array(obj, dtype=None, copy: bool = True, order: str = "K", subok: bool = False, ndmin: int = 0,
          *, blocking: bool = False) -> ndarray:
    """A device array copied from ``obj`` (host data or a device array)."""
    if isinstance(obj, ndarray):
        if not copy and (dtype is None or np.dtype(dtype) == obj.dtype) and obj.ndim >= ndmin:
            return obj
        obj = obj._np
    host = np.array(obj, dtype=dtype, ndmin=ndmin)
    return _from_host(host, order=order)


def empty(shape, dtype=float, order: str = "C") -> ndarray:
    """A device array whose contents are whatever the allocation holds (as ``cupy.empty``)."""
    return ndarray(shape, dtype, order=order)


def zeros(shape, dtype=float, order: str = "C") -> ndarray:
    out = ndarray(shape, dtype, order=order)
    out._np[...] = 0
    return out


def ones(shape, dtype=float, order: str = "C") -> ndarray:
    return full(shape, 1, dtype, order)


def full(shape, fill_value, dtype=None, order: str = "C") -> ndarray:
    dt = np.array(fill_value).dtype if dtype is None else dtype
    out = ndarray(shape, dt, order=order)
    out._np[...] = fill_value
    return out


def _like_args(a, dtype, shape):
    return (a.shape if shape is None else shape), (a.dtype if dtype is None else dtype)


def empty_like(a, dtype=None, order: str = "K", subok=None, shape=None) -> ndarray:
    shape, dtype = _like_args(a, dtype, shape)
    return empty(shape, dtype, "C" if order in ("K", "A") else order)


def zeros_like(a, dtype=None, order: str = "K", subok=None, shape=None) -> ndarray:
    shape, dtype = _like_args(a, dtype, shape)
    return zeros(shape, dtype, "C" if order in ("K", "A") else order)


def ones_like(a, dtype=None, order: str = "K", subok=None, shape=None) -> ndarray:
    shape, dtype = _like_args(a, dtype, shape)
    return ones(shape, dtype, "C" if order in ("K", "A") else order)


def full_like(a, fill_value, dtype=None, order: str = "K", subok=None, shape=None) -> ndarray:
    shape, dtype = _like_args(a, dtype, shape)
    return full(shape, fill_value, dtype, "C" if order in ("K", "A") else order)


def arange(start, stop=None, step=1, dtype=None) -> ndarray:
    return _from_host(np.arange(start, stop, step, dtype=dtype) if stop is not None
                      else np.arange(start, step=step, dtype=dtype))


def asnumpy(a, stream=None, order: str = "C", out=None, blocking: bool = True) -> np.ndarray:
    """A numpy array of ``a``: ``a.get()`` for a device array, ``numpy.asarray(a)`` otherwise (as CuPy)."""
    if isinstance(a, ndarray):
        return a.get(order=order, out=out)
    arr = np.asarray(a, order=order)
    if out is not None:
        out[...] = arr
        return out
    return arr


def allclose(a, b, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> ndarray:
    """A 0-d boolean device array: are ``a`` and ``b`` equal within tolerance (``cupy.allclose``)."""
    return _result(np.allclose(_operand(a), _operand(b), rtol=rtol, atol=atol, equal_nan=equal_nan))


def array_equal(a1, a2, equal_nan: bool = False) -> ndarray:
    """A 0-d boolean device array: same shape and elements (``cupy.array_equal``)."""
    return _result(np.array_equal(_operand(a1), _operand(a2), equal_nan=equal_nan))
