"""Timings of the Tensor Memory model and its views (run: python benchmarks/bench_tmem.py).

Prints the best of several repetitions for: rendering the full 128 x 512 TMEM map (text and
SVG, compressed and one character per cell), every tcgen05.ld/st form on a warp, the 18
tcgen05.cp of FlashMLA's Q, and the data-path layout maps.
"""

from __future__ import annotations

import time

import numpy as np

from simtc.kernels.flashmla import P_COLUMN, TMEM_V32, load_qk, q_copies
from simtc.render import to_svg, to_text
from simtc.render.tmem import LayoutView, TmemMapView
from simtc.semantics import Cta, execute
from simtc.tmem import all_ops, datapath_layout


def best(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def flashmla_tmem() -> Cta:
    """512 columns allocated, Q copied in with the 16 + 2 tcgen05.cp.128x256b, a P load/store per warp."""
    q = np.random.default_rng(0).standard_normal((64, 576)).astype(np.float32)
    cta = Cta()
    load_qk(q, q, smem=cta.smem)
    cta.tmem.alloc(512)
    copy_q(cta)
    for w in range(4):
        cta.tmem.st((32 * w) << 16 | P_COLUMN, np.zeros((32, 64), np.uint32), "32x32b", 64, warp=w)
    return cta


Q_COPIES = tuple(q_copies())
"""FlashMLA's 16 + 2 tcgen05.cp.128x256b of Q (the package's records), issued by the MMA warp's elected lane."""


def copy_q(cta: Cta) -> None:
    for c in Q_COPIES:
        execute(c, cta, warp=4, threads=1)


def main() -> None:
    cta = flashmla_tmem()
    tm = cta.tmem
    rows = []
    for by, kw in (("allocation", {}), ("writer", {}), ("region", {"regions": TMEM_V32})):
        v = TmemMapView(tm, by=by, **kw)
        rows.append((f"TMEM map by {by}, 4x8 cells/char: text", best(lambda v=v: to_text(v, width=120))))
        rows.append((f"TMEM map by {by}, 4x8 cells/char: SVG", best(lambda v=v: to_svg(v, width=120))))
    full = TmemMapView(tm, by="writer", lanes_per_row=1, columns_per_char=1)
    rows.append(("TMEM map, 1 char per cell (128 x 512): text", best(lambda: to_text(full, width=540))))
    rows.append(("TMEM map, 1 char per cell (128 x 512): SVG", best(lambda: to_svg(full, width=540))))
    lay = LayoutView(datapath_layout(64, 256, ws=True))
    rows.append(("layout view E, M=64 N=256: text", best(lambda: to_text(lay, width=120))))

    ops = all_ops()
    regs = {op: np.zeros((32, op.nregs), np.uint32) for op in ops}

    def ldst_all() -> None:
        for op in ops:
            tm.st(0, regs[op], op, warp=0)
            tm.ld(0, op, warp=0)

    rows.append((f"st + ld of all {len(ops)} forms, one warp", best(ldst_all)))
    rows.append(("18 tcgen05.cp.128x256b (FlashMLA Q)", best(lambda: copy_q(cta))))
    rows.append(("full maps of 7 layout cases (A-G, N=256)", best(lambda: [datapath_layout(**c).full_map() for c in (
        dict(m=128, n=256), dict(m=64, n=256), dict(m=64, n=256, ws=True), dict(m=32, n=256, ws=True),
        dict(m=256, n=256, cta_group=2), dict(m=128, n=256, cta_group=2),
        dict(m=128, n=256, cta_group=2, sparse=True))])))
    width = max(len(name) for name, _ in rows)
    print(f"{'what':<{width}}  best of 5")
    for name, t in rows:
        print(f"{name:<{width}}  {t * 1e3:8.2f} ms")


if __name__ == "__main__":
    main()
