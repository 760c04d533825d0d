"""simtc's PTX front end and executor: real CUDA kernels, executed warp by warp on simtc's models.

* :mod:`simtc.ptx.ir` -- the parsed module as frozen values (no behaviour).
* :mod:`simtc.ptx.parser` -- PTX text (nvcc 13 / NVRTC, ISA up to 9.0) into :class:`~simtc.ptx.ir.Module`.
* :mod:`simtc.ptx.alu` -- what each per-lane arithmetic, logic, comparison and conversion opcode computes,
  bit for bit, over a warp's lanes as numpy arrays.
* :mod:`simtc.ptx.executor` -- warps as 32-lane SIMT units, memory spaces, control flow, barriers, the
  launch.

Nothing heavy is imported here; import the submodules you need.
"""
