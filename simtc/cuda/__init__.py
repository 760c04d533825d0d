"""``simtc.cuda``: CuPy's raw-kernel API over simtc's PTX executor, so one script runs on a GPU and on a laptop.

Write the script against CuPy's names and pick the module at the top::

    import cupy as xp          # on a GPU
    import simtc.cuda as xp    # anywhere: the kernel runs warp by warp in simtc's executor

What is here (CuPy's subset for raw kernels):

* :class:`RawModule` (``code=`` CUDA C++ or ``path=`` a ``.ptx`` file; ``options``, ``backend="nvrtc"|"nvcc"``,
  ``name_expressions``; ``get_function``, ``get_global``) and :class:`RawKernel` (``code, name, options, backend``),
  launched as ``kernel(grid, block, args, shared_mem=N)``; ``kernel.attributes``,
  ``kernel.max_dynamic_shared_size_bytes`` (settable, CUDA's 48 KiB opt-in rule), ``kernel.last_result`` and
  :func:`last_launch` (the executor's :class:`~simtc.ptx.executor.LaunchResult`: instruction counts, ``printf``
  lines, notes). Compilation: :mod:`simtc.cuda.compiler` (NVRTC or nvcc to PTX, CuPy's default options, cached).
* :class:`ndarray` in simtc's device memory (``shape``, ``dtype``, ``strides``, ``size``, ``nbytes``, ``data.ptr``,
  ``get``, ``set``, ``copy``, ``fill``, ``reshape``, ``view``, ``astype``, views on indexing, arithmetic and
  reductions on the host side), :func:`asarray`, :func:`array`, :func:`zeros`, :func:`empty`, :func:`ones`,
  :func:`full`, the ``*_like`` forms, :func:`arange`, :func:`asnumpy`, :func:`allclose`, :func:`array_equal`, and
  numpy's dtype names (``xp.float32``).
* simtc's own additions for TMA kernels: :func:`tensor_map` (``cuTensorMapEncodeTiled``'s arguments in, the
  128-byte ``__grid_constant__ CUtensorMap`` argument out) and :class:`simtc.cuda.cute_params.StructArg` (a by-value
  struct argument built member by member from the PTX declaration: CuTe's tensors, ``TiledMMA`` and TMA atoms with
  their tensor map inside). A kernel that needs a cluster of several CTAs is refused at launch (no cluster
  dimension here, as in CuPy).
* ``cuda``: ``Device(0).synchronize()``, ``runtime.deviceSynchronize()``, ``Stream.null.synchronize()`` and the
  like, which have nothing to wait for (every launch has finished when it returns).

Errors are :class:`simtc.errors.SimtcError`\\ s naming the rule: a compile error (:class:`CompileException`, with
the compiler's log), a launch that does not fit the kernel (:class:`simtc.ptx.errors.LaunchError`, naming the
parameter or the limit), a fault while the kernel runs (:class:`simtc.ptx.errors.KernelFault`, naming the thread,
the PTX line and the CUDA source line).
"""

from __future__ import annotations

from numpy import (
    bool_,
    complex64,
    complex128,
    dtype,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    intp,
    uint8,
    uint16,
    uint32,
    uint64,
    uintp,
)

from simtc.cuda import _runtime as cuda
from simtc.cuda._array import (
    allclose,
    arange,
    array,
    array_equal,
    asarray,
    asnumpy,
    empty,
    empty_like,
    full,
    full_like,
    ndarray,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from simtc.cuda._kernel import RawKernel, RawModule, last_launch
from simtc.cuda.compiler import CompileException
from simtc.ptx.tensor_map import tensor_map

__all__ = [
    "CompileException",
    "RawKernel",
    "RawModule",
    "allclose",
    "arange",
    "array",
    "array_equal",
    "asarray",
    "asnumpy",
    "bool_",
    "complex64",
    "complex128",
    "cuda",
    "dtype",
    "empty",
    "empty_like",
    "float16",
    "float32",
    "float64",
    "full",
    "full_like",
    "int8",
    "int16",
    "int32",
    "int64",
    "intp",
    "last_launch",
    "ndarray",
    "ones",
    "ones_like",
    "tensor_map",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "uintp",
    "zeros",
    "zeros_like",
]
