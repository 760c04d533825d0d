"""The simtc error hierarchy.

Every error a user can trigger is a :class:`SimtcError`. Each one names the rule it
breaks (``rule``) and, where there is one, the source of that rule (``ref``: a PTX ISA
section, a CUTLASS file, ...). Where it reads naturally an error also subclasses the
matching builtin (``ValueError``, ``TypeError``, ``MemoryError``) so generic handlers keep
working.

>>> try:
...     raise DescriptorError("start address must be 16-byte aligned", rule="16-byte alignment",
...                           ref="PTX ISA 9.0 §9.7.16.4.1")
... except SimtcError as e:
...     print(e)
start address must be 16-byte aligned [rule: 16-byte alignment; PTX ISA 9.0 §9.7.16.4.1]
"""

from __future__ import annotations

__all__ = [
    "AllocationError",
    "BankError",
    "DescriptorError",
    "DtypeError",
    "HardwareUnavailable",
    "LaneQuadrantError",
    "LayoutError",
    "ShapeError",
    "SimtcError",
    "SmemError",
    "SwizzleError",
    "TmemAccessError",
    "TmemAllocError",
    "TmemError",
    "TmemShapeError",
    "TmemWouldBlock",
]


class SimtcError(Exception):
    """Base class of every error simtc raises on purpose.

    Parameters
    ----------
    message:
        What went wrong, in words.
    rule:
        The rule that was broken, short (e.g. ``"16-byte alignment"``).
    ref:
        Where the rule comes from (e.g. ``"PTX ISA 9.0 §9.7.16.4.1"``), or ``None``.
    """

    def __init__(self, message: str, *, rule: str | None = None, ref: str | None = None):
        self.message = message
        self.rule = rule
        self.ref = ref
        super().__init__(message)

    def __str__(self) -> str:
        tail = "; ".join(x for x in (f"rule: {self.rule}" if self.rule else None, self.ref) if x)
        return f"{self.message} [{tail}]" if tail else self.message


class DtypeError(SimtcError, ValueError):
    """An unknown element type, or one not allowed where it was used."""


class SwizzleError(SimtcError, ValueError):
    """An unknown swizzle mode, or one not allowed where it was used."""


class LayoutError(SimtcError, ValueError):
    """A shared-memory layout that breaks a canonical-layout rule (shape, atom, major)."""


class ShapeError(SimtcError, ValueError):
    """An array or instruction shape that is not allowed."""


class DescriptorError(SimtcError, ValueError):
    """A matrix or instruction descriptor that cannot be encoded or is illegal."""


class SmemError(SimtcError, ValueError):
    """An illegal shared-memory access (out of bounds, misaligned, over capacity)."""


class AllocationError(SmemError, MemoryError):
    """A shared-memory allocation that does not fit."""


class BankError(SimtcError, ValueError):
    """An access pattern the bank-conflict analyzer cannot take."""


class TmemError(SimtcError, ValueError):
    """Base class for Tensor Memory errors."""


class TmemAllocError(TmemError):
    """A Tensor Memory allocation rule was broken."""


class TmemAccessError(TmemError):
    """A Tensor Memory access outside the allocation or otherwise illegal."""


class LaneQuadrantError(TmemAccessError):
    """A warp touched Tensor Memory lanes outside its 32-lane quadrant."""


class TmemWouldBlock(TmemAllocError):
    """``tcgen05.alloc`` cannot be satisfied now: on hardware the warp would block until columns are freed."""


class TmemShapeError(TmemError, ShapeError):
    """An illegal ``tcgen05.ld/st/cp`` shape, ``.num``, qualifier, or data-path layout case."""


class HardwareUnavailable(SimtcError, RuntimeError):
    """The hardware path cannot run here (no cupy, no GPU, or the wrong architecture)."""
