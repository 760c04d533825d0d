"""FlashMLA's dual GEMM, step by step: one KV block's QK product on a simulated Blackwell SM.

Run: ``python examples/dual_gemm_qk.py [--seed N] [--width COLUMNS]``; it prints these steps as it runs
them, at the terminal's width.

1. Q (64 heads x 576 dims) and one block of K (64 tokens x 576) are stored in shared memory the
   way the kernel stores them (SW128 NoPE tiles, SW64 RoPE tiles).
2. 18 ``tcgen05.cp.128x256b`` put Q into TMEM columns 256-399: even 64-dim chunks in lanes 0-63,
   odd chunks in lanes 64-127.
3. 18 ``tcgen05.mma.ws`` (A from TMEM, M=64, N=128) accumulate into column 400. With Layout E,
   lanes 0-63 hold P_lo (even chunks) and lanes 64-127 hold P_hi (odd chunks): two GEMMs per
   instruction.
4. The softmax warps read P_lo and P_hi back with ``tcgen05.ld`` and add them: P = Q Kᵀ.

Checks: P_lo and P_hi are each bit-exact against the tensor-core model (``tensor_core_mma``) applied
to their half of the dimensions; their sum equals Q Kᵀ only within fp32 accumulation error (two
fp32 partial sums rounded separately, then added), and the measured error is printed.
"""

from __future__ import annotations

import argparse
import shutil

import numpy as np
from rich.console import Console
from rich.table import Table

from simtc.kernels.flashmla import q_copies, qk_mmas, read_p, replay_qk
from simtc.numerics import tensor_core_mma
from simtc.numerics.cases import mma_operands
from simtc.render.theme import SIMTC_THEME
from simtc.render.tmem import TmemMapView


def _step(console: Console, n: int, text: str) -> None:
    console.print()
    console.print(f"[bold]Step {n}.[/] {text}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the random Q and K (normal bf16 values) (default: 0)")
    parser.add_argument("--width", type=int, default=None,
                        help="output width in columns (default: the terminal's width, "
                             f"{shutil.get_terminal_size().columns} here)")
    args = parser.parse_args(argv)
    console = Console(theme=SIMTC_THEME, width=args.width or shutil.get_terminal_size().columns)
    console.print(f"[bold]{__doc__.splitlines()[0]}[/]")

    q = mma_operands("normal", 64, 64, 576, seed=args.seed + 1)[0]
    k = mma_operands("normal", 64, 64, 576, seed=args.seed + 2)[0]
    copies, mmas = q_copies(), qk_mmas(1)
    _step(console, 1, f"Shared memory. Q ({q.shape[0]} heads x {q.shape[1]} dims, bf16) and one block of K "
                      f"({k.shape[0]} tokens x {k.shape[1]} dims) are stored as the kernel stores them: "
                      "SW128 K-major tiles for the 512 NoPE dims, SW64 tiles for the 64 RoPE dims "
                      f"(seed {args.seed}).")
    tm, _ = replay_qk(q, k)
    nope = sum("NoPE" in c.label for c in copies)
    _step(console, 2, f"Copy Q into TMEM. {len(copies)} tcgen05.cp.128x256b ({nope} NoPE, {len(copies) - nope} "
                      "RoPE) put Q into TMEM columns 256-399: even 64-dim chunks in lanes 0-63, odd chunks in lanes "
                      "64-127, so each half of TMEM holds half of Q's dimensions.")
    rope = sum("RoPE" in m.label for m in mmas)
    _step(console, 3, f"Multiply. {len(mmas)} tcgen05.mma.ws ({rope} RoPE, {len(mmas) - rope} NoPE; A from TMEM, "
                      "B = K from shared memory, M=64, N=128) accumulate into column 400; the first overwrites P "
                      "(enable_input_d = 0). With Layout E each instruction is two GEMMs: lanes 0-63 add the even "
                      "half of the dimensions into P_lo, lanes 64-127 the odd half into P_hi.")
    table = Table(title="the instruction stream of the MMA thread (one request, one block)", show_edge=False)
    table.add_column("#", justify="right")
    table.add_column("instruction")
    table.add_column("what it does")
    for i, cp in enumerate(copies):
        table.add_row(str(i + 1), cp.ptx(), cp.label)
    for i, mma in enumerate(mmas):
        table.add_row(str(len(copies) + 1 + i), mma.ptx(),
                      mma.label + (" (overwrites P)" if not mma.enable_input_d else ""))
    console.print(table)
    console.print(TmemMapView(tm, by="writer", lanes_per_row=8, columns_per_char=8,
                              title="TMEM after the QK step, coloured by the instruction that last wrote each cell"))

    _step(console, 4, "Read back and check. The softmax warps read P_lo and P_hi with tcgen05.ld and add them.")
    p_lo, p_hi = read_p(tm)
    exact = q.astype(np.float64) @ k.T.astype(np.float64)
    p = p_lo + p_hi
    even = np.concatenate([np.arange(512, 544)] + [np.arange(128 * t, 128 * t + 64) for t in range(4)])
    odd = np.concatenate([np.arange(544, 576)] + [np.arange(128 * t + 64, 128 * t + 128) for t in range(4)])
    lo_ok = np.array_equal(p_lo.view(np.uint32), tensor_core_mma(q[:, even], k[:, even]).view(np.uint32))
    hi_ok = np.array_equal(p_hi.view(np.uint32), tensor_core_mma(q[:, odd], k[:, odd]).view(np.uint32))
    console.print(f"P_lo (lanes 0-63)   = Q[:, even chunks + RoPE 0-31]  · K[...]ᵀ vs the model's tensor_core_mma, "
                  f"bit-exact: {lo_ok}")
    console.print(f"P_hi (lanes 64-127) = Q[:, odd chunks + RoPE 32-63] · K[...]ᵀ vs the model's tensor_core_mma, "
                  f"bit-exact: {hi_ok}")
    err = float(np.abs(p - exact).max())
    console.print(f"P_lo + P_hi vs Q·Kᵀ in float64: equal within fp32 accumulation error, not bit for bit: "
                  f"max |P_lo + P_hi - Q·Kᵀ| = {err:.3e} (|Q·Kᵀ| up to {np.abs(exact).max():.1f})")
    console.print("[italic]Layout E's per-half A read is inferred (CUTLASS, FlashMLA); the arithmetic is the "
                  "tensor-core model verified on an H200 for wgmma, assumed for tcgen05.[/]")
    return 0 if lo_ok and hi_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
