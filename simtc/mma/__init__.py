"""Tensor-core instructions: the tcgen05 instruction descriptor, legal shapes, MMA semantics."""

from simtc.mma.idesc import FORMAT_CODES, KINDS, InstrDescriptor

__all__ = ["FORMAT_CODES", "KINDS", "InstrDescriptor"]
