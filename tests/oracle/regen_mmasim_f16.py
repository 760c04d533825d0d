"""Golden data for fp16 accumulators (kind::f16 with an f16 D) from MMA-Sim.

Writes ``tests/data/mmasim_golden_f16.npz``: for each arch (sm100 = ``TCGen05MMA("Blackwell",
"m64n8k16.kind::f16.f16.f16.f16")``, sm90 = ``WGMMA("Hopper", "m64n8k16.f16.f16.f16")``) and each
distribution of :func:`simtc.numerics.cases.mma_operands` (fp16 inputs; C rounded to fp16),
64 single instructions and 8 chains of four (K = 64), the D bit patterns as uint16. Inputs are
regenerated from (dist, seed), so they are not stored.

Needs ``torch`` and ``mmasim`` (see README_mmasim.md); ``--check`` compares with the committed
file. Run: ``python tests/oracle/regen_mmasim_f16.py [--check]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

DATA_FILE = Path(__file__).parents[1] / "data" / "mmasim_golden_f16.npz"
ARCHS = ("sm100", "sm90")
N_SINGLE, N_CHAIN = 64, 8
M, N = 64, 8


def cases():
    """(arch, dist, seed, k) for every record, in file order."""
    from simtc.numerics.cases import DISTRIBUTIONS

    out = []
    for ai, arch in enumerate(ARCHS):
        for di, dist in enumerate(DISTRIBUTIONS):
            base = 700_000 + 10_000 * ai + 1_000 * di
            out += [(arch, dist, base + i, 16) for i in range(N_SINGLE)]
            out += [(arch, dist, base + 500 + i, 64) for i in range(N_CHAIN)]
    return out


def operands(dist: str, seed: int, k: int):
    from simtc.numerics.cases import mma_operands
    from simtc.numerics.formats import decode_bits, encode_bits

    a, b, c = mma_operands(dist, M, N, k, dtype="fp16", seed=seed)
    with np.errstate(over="ignore"):
        return a, b, decode_bits(encode_bits(c, "fp16"), "fp16")


def mmasim_f16(a, b, c, arch: str) -> np.ndarray:
    import torch
    from mmasim.nv_ptx import WGMMA, TCGen05MMA

    torch.set_num_threads(1)
    op = (TCGen05MMA("Blackwell", f"m{M}n{N}k16.kind::f16.f16.f16.f16") if arch == "sm100"
          else WGMMA("Hopper", f"m{M}n{N}k16.f16.f16.f16"))
    d = torch.from_numpy(c).half()
    for k0 in range(0, a.shape[1], 16):
        d = op(torch.from_numpy(a[:, k0:k0 + 16].copy()).half(), torch.from_numpy(b[:, k0:k0 + 16].T.copy()).half(), d)
    return d.numpy().view(np.uint16)


def generate() -> dict[str, np.ndarray]:
    rows = cases()
    d = np.stack([mmasim_f16(*operands(dist, seed, k), arch) for arch, dist, seed, k in rows])
    return {"d": d, "arch": np.array([r[0] for r in rows]), "dist": np.array([r[1] for r in rows]),
            "seed": np.array([r[2] for r in rows], dtype=np.int64), "k": np.array([r[3] for r in rows], dtype=np.int64)}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    data = generate()
    if "--check" in argv:
        with np.load(DATA_FILE) as z:
            same = all(np.array_equal(z[key], data[key]) for key in data)
        print("identical" if same else "DIFFERENT")
        return 0 if same else 1
    np.savez_compressed(DATA_FILE, **data)
    print(f"wrote {DATA_FILE} ({len(data['seed'])} records)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
