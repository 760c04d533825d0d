"""The hardware path: header-free CUDA kernels fed with simtc-built images and descriptors.

Kernels here are thin executors: they copy a shared-memory byte image built by
:mod:`simtc.smem` verbatim, run the instructions named by simtc-built descriptors, and dump
raw results. simtc then compares them with its own models, bit for bit.

Nothing here imports cupy at module level; :func:`simtc.hw.device.probe` says whether a GPU
path is available and why not.
"""

__all__: list[str] = []
