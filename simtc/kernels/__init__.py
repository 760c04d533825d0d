"""Kernels as data: :mod:`simtc.isa` Programs and their builders (FlashMLA's SM100 head64 decode step).

* :mod:`simtc.kernels.flashmla` -- FlashMLA's constants, plans, Q split and programs.
* :mod:`simtc.kernels.registry` -- name -> (description, builder), for ``simtc program``.
"""
