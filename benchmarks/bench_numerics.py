"""Tensor-core numerics speed (python benchmarks/bench_numerics.py).

Targets (issue: numerics): one 64x128x16 instruction with exact numerics well under a
millisecond, at most 150x numpy's plain float32 ``a @ b.T + c`` of the same shape, and at least
10x faster than MMA-Sim on the same instructions, measured side by side. MMA-Sim is measured
only where ``mmasim`` (and torch) are importable; see tests/data/README_mmasim.md.

The last line times the instruction of CUTLASS's ``wgmma_sm90`` tutorial on its recorded inputs (m64n64k16, fp16
inputs and accumulator, values (i - 8) / 8): operands of few significant bits, where no term reaches below the
alignment window and :func:`simtc.numerics.fused_dot_add` takes the exact sum (``fdpa._untruncated``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "oracle"))
from _timing import best_of, fmt

from simtc.numerics import tensor_core_mma
from simtc.numerics.cases import mma_operands


def main() -> None:
    a, b, c = mma_operands("normal", 64, 128, 16, dtype="bf16", seed=1)
    t_simtc = best_of(lambda: tensor_core_mma(a, b, c))
    t_numpy = best_of(lambda: a @ b.T + c)
    print(f"{'simtc tensor_core_mma 64x128x16 bf16':45s} {fmt(t_simtc)}")
    print(f"{'numpy float32 a @ b.T + c (floor)':45s} {fmt(t_numpy)}")
    print(f"{'ratio to the numpy floor':45s} {t_simtc / t_numpy:8.1f} x")
    rng = np.random.default_rng(0)
    a16, b16 = (((rng.integers(0, 17, (r, 16)) - 8) / 8).astype(np.float16).astype(np.float32) for r in (64, 64))
    c16 = (rng.integers(-64, 65, (64, 64)) / 8).astype(np.float16).astype(np.float32)
    t_tut = best_of(lambda: tensor_core_mma(a16, b16, c16, dtype="fp16", arch="sm90", d_dtype="fp16"))
    print(f"{'64x64x16 fp16 -> fp16, few-bit (wgmma_sm90)':45s} {fmt(t_tut)}")
    a4, b4, _ = mma_operands("wide", 64, 576, 576, seed=2)
    print(f"{'64x576x576 chain (36 instructions)':45s} {fmt(best_of(lambda: tensor_core_mma(a4, b4), repeat=3))}")
    try:
        from regen_mmasim import mmasim_tcgen05_bf16

        d_ref = mmasim_tcgen05_bf16(a, b, c)
    except Exception as e:  # mmasim/torch missing, or the wrapper not present
        print(f"MMA-Sim: not measured ({type(e).__name__}: {e})")
        return
    same = bool(np.array_equal(d_ref.view(np.uint32), tensor_core_mma(a, b, c).view(np.uint32)))
    t_ref = best_of(lambda: mmasim_tcgen05_bf16(a, b, c), repeat=3, number=1)
    print(f"{'MMA-Sim tcgen05 64x128x16 bf16':45s} {fmt(t_ref)}   (bit-identical to simtc: {same})")
    print(f"{'simtc speed-up over MMA-Sim':45s} {t_ref / t_simtc:8.1f} x")


if __name__ == "__main__":
    main()
