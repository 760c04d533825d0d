"""Two CUDA C++ kernels run from Python with CuPy's raw-kernel API: on a laptop through simtc, on a GPU through CuPy.

    python examples/cuda_kernels.py            # simtc.cuda: executed warp by warp by simtc, no GPU needed
    python examples/cuda_kernels.py --cupy     # the same lines with CuPy on a GPU

Only the import differs: ``xp`` is ``simtc.cuda`` or ``cupy``; everything below it is CuPy's API. The kernels are
the files beside this script: ``vector_add.cu`` (one thread per element) and ``block_sum.cu`` (a shared-memory
tree, then warp shuffles). Each result is compared with numpy; with simtc the instruction counts of each launch
are printed too.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def vector_add(xp, n: int):
    """c = a + b on the device; returns (a, b, c) as numpy arrays."""
    kernel = xp.RawKernel((HERE / "vector_add.cu").read_text(), "vector_add")
    rng = np.random.default_rng(0)
    a = xp.asarray(rng.standard_normal(n, dtype=np.float32))
    b = xp.asarray(rng.standard_normal(n, dtype=np.float32))
    c = xp.zeros(n, dtype=xp.float32)
    threads = 256
    kernel(((n + threads - 1) // threads,), (threads,), (a, b, c, np.int32(n)))  # numpy scalars for scalars
    xp.cuda.Device(0).synchronize()
    return a.get(), b.get(), c.get()


def block_sum(xp, blocks: int, threads: int):
    """Per-block sums of x on the device; returns (x, out) as numpy arrays."""
    module = xp.RawModule(code=(HERE / "block_sum.cu").read_text())
    kernel = module.get_function("block_sum")
    x = xp.asarray((np.arange(blocks * threads * 2) % 101).astype(np.float32))  # small integers: exact sums
    out = xp.zeros(blocks, dtype=xp.float32)
    kernel((blocks,), (threads,), (x, out, np.uint32(x.size)), shared_mem=threads * 4)
    xp.cuda.runtime.deviceSynchronize()
    return x.get(), out.get()


def _counts(xp) -> None:
    last = getattr(xp, "last_launch", None)  # simtc.cuda only: the executor's result of the last launch
    if last is None or last() is None:
        return
    res = last()
    counts = getattr(res, "thread_instructions", None) or getattr(res, "counts", None)
    if isinstance(counts, dict) and counts:
        total = sum(counts.values())
        top = ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])[:6])
        print(f"  executed {total} thread-instructions ({top}, ...)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--cupy", action="store_true", help="run with CuPy on a GPU instead of simtc.cuda")
    p.add_argument("--n", type=int, default=1000, help="vector_add's length")
    p.add_argument("--blocks", type=int, default=4, help="block_sum's grid")
    p.add_argument("--threads", type=int, default=128, help="block_sum's block (a power of two, >= 64)")
    args = p.parse_args(argv)
    xp = importlib.import_module("cupy" if args.cupy else "simtc.cuda")
    a, b, c = vector_add(xp, args.n)
    ok_add = bool(np.array_equal(c, a + b))
    print(f"vector_add, n = {args.n}: c == a + b bit for bit: {ok_add}")
    _counts(xp)
    x, out = block_sum(xp, args.blocks, args.threads)
    ok_sum = bool(np.array_equal(out, x.reshape(args.blocks, -1).sum(axis=1)))
    print(f"block_sum, {args.blocks} blocks of {args.threads} threads: per-block sums equal numpy's: {ok_sum}")
    _counts(xp)
    return 0 if ok_add and ok_sum else 1

if __name__ == "__main__":
    raise SystemExit(main())
