"""Kernels as data: instruction records and builders (FlashMLA's SM100 head64 decode step)."""

from simtc.kernels.instructions import Tcgen05Cp, Tcgen05Mma

__all__ = ["Tcgen05Cp", "Tcgen05Mma"]
