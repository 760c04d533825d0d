"""The errors of simtc's PTX front end, executor and launch (one small hierarchy under :class:`PtxError`).

Each names the rule it breaks (``rule=``) and, where there is one, the PTX ISA section (``ref=``).

* :class:`PtxSyntaxError` -- PTX text the parser cannot read (names the line and its text).
* :class:`PtxUnsupported` -- an opcode, modifier or state space simtc does not model (names it).
* :class:`LaunchError` -- a launch that does not fit the kernel or the device: grid, block, shared memory,
  arguments (names the parameter or the limit). A usage error: the command line exits 2.
* :class:`KernelFault` -- a fault while the kernel runs (out-of-bounds or misaligned access, ``trap``, deadlock):
  the thread, the PTX line and, for memory faults, the address, the access size and the allocation it missed, as
  compute-sanitizer's memcheck reports them. The command line exits 1.

>>> e = KernelFault("invalid global read of size 4", rule="accesses stay inside an allocation",
...                 thread=((0, 0, 0), (33, 0, 0)), line=42)
>>> e.exit_code, e.thread, str(e)
(1, ((0, 0, 0), (33, 0, 0)), 'invalid global read of size 4 [rule: accesses stay inside an allocation]')
"""

from __future__ import annotations

from simtc.errors import SimtcError

__all__ = ["KernelFault", "LaunchError", "PtxError", "PtxSyntaxError", "PtxUnsupported"]


class PtxError(SimtcError):
    """Base class of every PTX front-end, executor and launch error."""


class PtxSyntaxError(PtxError, ValueError):
    """PTX text the parser cannot read. ``line`` is the PTX line (1-based) and ``text`` the statement (or the
    line) the parser stopped at, when known."""

    def __init__(self, message: str, *, rule: str | None = None, ref: str | None = None,
                 line: int | None = None, text: str | None = None):
        super().__init__(message, rule=rule, ref=ref)
        self.line = line
        self.text = text


class PtxUnsupported(PtxError, NotImplementedError):
    """An opcode, modifier combination or state space that simtc does not model."""


class LaunchError(PtxError, ValueError):
    """A launch whose grid, block, shared memory or arguments do not fit the kernel or the device."""


class KernelFault(PtxError, RuntimeError):
    """A fault while a kernel runs. ``thread`` is ``(ctaid, tid)`` (each an ``(x, y, z)`` tuple) or ``None``;
    ``pc`` the instruction index, ``line`` the PTX line, ``loc`` the CUDA source position (``file:line``) when
    compiled with ``-lineinfo``; for memory faults ``address``, ``size`` and ``allocation`` (a short description
    of the nearest allocation: base, size, name)."""

    exit_code = 1

    def __init__(self, message: str, *, rule: str | None = None, ref: str | None = None,
                 thread: tuple | None = None, pc: int | None = None, line: int | None = None,
                 loc: str | None = None, address: int | None = None, size: int | None = None,
                 allocation: str | None = None):
        super().__init__(message, rule=rule, ref=ref)
        self.thread = thread
        self.pc = pc
        self.line = line
        self.loc = loc
        self.address = address
        self.size = size
        self.allocation = allocation
