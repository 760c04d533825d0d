"""Microseconds per call of simtc.ptx.alu's compiled operations on one warp (32 lanes).

Run: ``.venv/bin/python benchmarks/bench_ptx_alu.py``. The executor's target is >= 2 M thread-instructions/s,
about 16 us per warp instruction in all; this measures the ALU's share. Each figure is the best of five runs of
``reps`` calls, in process CPU time (a shared machine's load only ever adds time).
"""

from __future__ import annotations

import time

import numpy as np

from simtc.ptx import alu
from simtc.ptx.ir import Imm, Instruction, Reg

OPS = [("add.s32", 2), ("mad.lo.s32", 3), ("mul.wide.u32", 2), ("shl.b32", 2), ("and.b32", 2), ("setp.lt.s32", 2),
       ("selp.b32", 3), ("mov.b32", 1), ("add.f32", 2), ("fma.rn.f32", 3), ("fma.rz.f32", 3), ("mul.rn.f64", 2),
       ("fma.rn.f64", 3), ("div.rn.f32", 2), ("setp.lt.f32", 2), ("max.f32", 2), ("cvt.rn.f32.s32", 1),
       ("cvt.rzi.s32.f32", 1), ("cvt.rn.bf16x2.f32", 2), ("ex2.approx.ftz.f32", 1), ("fma.rn.f16x2", 3),
       ("lop3.b32", 4), ("prmt.b32", 3), ("shf.l.wrap.b32", 3),
       # the directed-rounding f32, half-precision and f64 fma paths
       ("add.rz.f32", 2), ("sub.rm.f32", 2), ("mul.rp.f32", 2), ("fma.rm.f32", 3), ("add.f16", 2), ("mul.rn.f16", 2),
       ("fma.rn.f16", 3), ("add.rz.f16x2", 2), ("add.bf16", 2), ("fma.rn.bf16", 3), ("fma.rn.bf16x2", 3),
       ("fma.rz.f64", 3)]


def bench(name: str, nsrc: int, reps: int = 400) -> float:
    srcs = [Imm(0x96) if name.startswith("lop3") and i == 3 else Reg(f"%r{i}") for i in range(nsrc)]
    op = alu.compile(Instruction(name, (Reg("%d"), *srcs)))
    rng = np.random.default_rng(0)
    args = []
    for t in op.src_types:
        w = alu.type_width(t)
        if w == 1:
            args.append(rng.random(32) < 0.5)
        elif t in ("f32", "f64"):  # ordinary values (random bit patterns are mostly huge or tiny)
            args.append(rng.standard_normal(32).astype(np.float32 if w == 32 else np.float64).view(alu._U[w]))
        else:
            args.append(rng.integers(0, 2**w, 32, dtype=np.uint64).astype(alu._U[w]))
    fn = op.fn
    fn(*args)
    best = float("inf")
    for _ in range(5):
        t0 = time.process_time()
        for _ in range(reps):
            fn(*args)
        best = min(best, (time.process_time() - t0) / reps)
    return best * 1e6


if __name__ == "__main__":
    for name, n in OPS:
        print(f"{name:24s} {bench(name, n):7.1f} us/call")
