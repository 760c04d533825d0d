"""Header-free CUDA sources shipped with simtc (filled in by the modules of simtc.hw)."""
