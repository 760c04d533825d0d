#!/usr/bin/env python3
"""Regenerate ``tests/data/mmasim_golden.npz``: tensor-core outputs computed by MMA-Sim.

MMA-Sim (``microsoft/MMA-Sim``, PyPI ``mmasim``; Xie et al., arXiv 2511.10909) is a
bit-accurate reference model of NVIDIA tensor cores. This script runs it over simtc's
deterministic operand generator (:func:`simtc.numerics.cases.mma_operands`) and stores
the outputs, so that simtc's own numerics can be checked bit for bit *without* mmasim or
torch installed. The inputs are not stored: ``mma_operands(dist, m, n, k, dtype=, seed=)``
reproduces them bit for bit from the recorded parameters.

Instructions (one MMA-Sim object per shape, created with exactly these strings):

* ``sm100``: ``mmasim.nv_ptx.TCGen05MMA("Blackwell", "m{M}n{N}k16.kind::f16.f32.{T}.{T}")``
* ``sm90``:  ``mmasim.nv_ptx.WGMMA("Hopper", "m{M}n{N}k16.f32.{T}.{T}")``

with ``T`` = ``bf16`` or ``f16``. Convention: D[M,N] = A[M,K] · B[N,K]ᵀ + C (fp32 C and D);
MMA-Sim itself takes B as K×N, so it is called with ``B.T``.

The file holds three kinds of records (``<kind>_*`` arrays, one row per instruction):

``full``    m64n8k16, the complete D bit pattern (``full_d``, uint32 [n, 64, 8])
``digest``  m64n8k16 and a few larger shapes, only an 8-byte digest of D (``digest_sha8``)
``chain``   m64n8, K = 64 = 4 chained k16 instructions (D of one is C of the next);
            ``chain_c_zero`` marks chains whose first C is +0 (enable-input-d = false);
            the final D bits in ``chain_d``
``edge``    m64n8k16 built from special values (signed zeros, subnormals, powers of two,
            the largest finite values, Inf, NaN) by :func:`edge_operands`; the inputs are
            stored too (``edge_a``, ``edge_b``: uint16 bits; ``edge_c``: uint32 bits), D in
            ``edge_d``

Every kind has ``<kind>_arch`` (index into ``archs``), ``<kind>_dtype`` (into ``dtypes``),
``<kind>_seed``, ``<kind>_m``, ``<kind>_n``, ``<kind>_k``, and all but ``edge`` have
``<kind>_dist`` (index into ``distributions``). The digest is :func:`d_digest`: the first 8 bytes of SHA-256 over D's
float32 bit patterns, little-endian, row-major (M×N), after every NaN was replaced by
0x7FFFFFFF.

Usage::

    python tests/oracle/regen_mmasim.py            # rewrite the data file (1-2 minutes)
    python tests/oracle/regen_mmasim.py --check    # recompute; exit 1 if any record differs
    python tests/oracle/regen_mmasim.py --bench    # only time MMA-Sim (m64n128k16 bf16 tcgen05)

Running it needs torch and mmasim (see tests/data/README_mmasim.md); importing it needs
only numpy and simtc, so tests can use :func:`golden_cases`, :func:`case_operands` and
:func:`d_digest` to replay the data against simtc.

>>> d = np.zeros((2, 2), dtype=np.float32)
>>> d_digest(d).hex()
'374708fff7719dd5'
>>> d_digest(np.full((2, 2), np.nan, dtype=np.float32)) == d_digest(np.full((2, 2), -np.nan, dtype=np.float32))
True
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DATA_FILE = HERE.parent / "data" / "mmasim_golden.npz"
FORMAT_VERSION = 1

ARCHS = ("sm100", "sm90")
DTYPES = ("bf16", "fp16")
KINDS = ("full", "digest", "chain", "edge")
INSTR_K = 16
CHAIN_STEPS = 4  # chain K = 64

# Records per (arch, dtype, distribution); 2 archs x 2 dtypes x 8 distributions = 32 groups.
N_FULL = 64
N_DIGEST = 320
N_CHAIN = 16
N_EDGE = 64  # per (arch, dtype): hand-made special values, inputs stored in the file
BASE_SHAPE = (64, 8)
# Every 16th digest record uses one of these shapes instead (shape-handling coverage).
EXTRA_SHAPES = {
    "sm100": ((128, 8), (64, 32), (128, 64), (64, 256)),
    "sm90": ((64, 16), (64, 32), (64, 64), (64, 256)),
}
# Seeds: SEED_BASE[kind] + ARCH_SEED_STRIDE * arch index + record number in its group.
SEED_BASE = {"full": 1_000_000, "digest": 2_000_000, "chain": 3_000_000, "edge": 4_000_000}
DTYPE_SEED_STRIDE = 10_000  # edge records only (mma_operands already separates the dtypes)
ARCH_SEED_STRIDE = 100_000

MMASIM_CLASSES = {
    "sm100": 'mmasim.nv_ptx.TCGen05MMA("Blackwell", "m{M}n{N}k16.kind::f16.f32.{T}.{T}")',
    "sm90": 'mmasim.nv_ptx.WGMMA("Hopper", "m{M}n{N}k16.f32.{T}.{T}")',
}
PTX_TYPE = {"bf16": "bf16", "fp16": "f16"}

CANONICAL_NAN = np.uint32(0x7FFFFFFF)


# --------------------------------------------------------------------------------------
# Digest and data access (numpy + simtc only)
# --------------------------------------------------------------------------------------


def canonical_bits(d) -> np.ndarray:
    """D's float32 bit patterns as little-endian uint32, every NaN replaced by 0x7FFFFFFF."""
    d = np.ascontiguousarray(np.asarray(d, dtype=np.float32))
    bits = d.view(np.uint32).copy()
    bits[np.isnan(d)] = CANONICAL_NAN
    return bits.astype("<u4")


def d_digest(d) -> bytes:
    """First 8 bytes of SHA-256 over ``canonical_bits(d)`` in row-major order."""
    return hashlib.sha256(canonical_bits(d).tobytes(order="C")).digest()[:8]


@dataclass(frozen=True)
class GoldenCase:
    """One recorded instruction (or chain) and its expected result."""

    kind: str
    index: int
    arch: str
    dtype: str
    dist: str
    seed: int
    m: int
    n: int
    k: int
    c_zero: bool = False
    d_bits: np.ndarray | None = None  # uint32 [m, n] for "full", "chain" and "edge"
    sha8: bytes | None = None  # for "digest"
    a_bits: np.ndarray | None = None  # "edge": stored inputs (uint16 [m, k], uint16 [n, k], uint32 [m, n])
    b_bits: np.ndarray | None = None
    c_bits: np.ndarray | None = None

    def describe(self) -> str:
        z = ", C=+0" if self.c_zero else ""
        return (f"{self.kind}[{self.index}] arch={self.arch} dtype={self.dtype} dist={self.dist} "
                f"seed={self.seed} m={self.m} n={self.n} k={self.k}{z}")


def load_golden(path: Path | str = DATA_FILE) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {name: z[name] for name in z.files}


def golden_cases(path: Path | str = DATA_FILE, kinds=KINDS) -> Iterator[GoldenCase]:
    """Every record of the golden file, as :class:`GoldenCase` objects."""
    data = load_golden(path)
    archs = [str(x) for x in data["archs"]]
    dtypes = [str(x) for x in data["dtypes"]]
    dists = [str(x) for x in data["distributions"]]
    for kind in kinds:
        for i in range(len(data[f"{kind}_seed"])):
            yield GoldenCase(
                kind=kind, index=i,
                arch=archs[int(data[f"{kind}_arch"][i])],
                dtype=dtypes[int(data[f"{kind}_dtype"][i])],
                dist="edge" if kind == "edge" else dists[int(data[f"{kind}_dist"][i])],
                seed=int(data[f"{kind}_seed"][i]),
                m=int(data[f"{kind}_m"][i]), n=int(data[f"{kind}_n"][i]), k=int(data[f"{kind}_k"][i]),
                c_zero=bool(data["chain_c_zero"][i]) if kind == "chain" else False,
                d_bits=data[f"{kind}_d"][i] if kind != "digest" else None,
                sha8=bytes(data["digest_sha8"][i]) if kind == "digest" else None,
                a_bits=data["edge_a"][i] if kind == "edge" else None,
                b_bits=data["edge_b"][i] if kind == "edge" else None,
                c_bits=data["edge_c"][i] if kind == "edge" else None,
            )


def case_operands(case: GoldenCase):
    """The case's float32 operands a [m,k], b [n,k], c [m,n].

    From simtc's generator, except "edge" records: their stored bits (or, when a case has
    none, :func:`edge_operands` from its seed).
    """
    from simtc.numerics.cases import mma_operands
    from simtc.numerics.formats import decode_bits

    if case.dist == "edge":
        if case.a_bits is not None:
            bits = case.a_bits, case.b_bits, case.c_bits
        else:
            bits = edge_operands(case.dtype, case.seed, case.m, case.n, case.k)
        return decode_bits(bits[0], case.dtype), decode_bits(bits[1], case.dtype), decode_bits(bits[2], "fp32")
    a, b, c = mma_operands(case.dist, case.m, case.n, case.k, dtype=case.dtype, seed=case.seed)
    if case.c_zero:
        c = np.zeros_like(c)
    return a, b, c


def compare(case: GoldenCase, d) -> str | None:
    """None if ``d`` matches the record (any NaN matches any NaN), else a description."""
    d = np.asarray(d, dtype=np.float32)
    if d.shape != (case.m, case.n):
        return f"{case.describe()}: D has shape {d.shape}, expected {(case.m, case.n)}"
    got = canonical_bits(d)
    if case.sha8 is not None:
        if d_digest(d) == case.sha8:
            return None
        return f"{case.describe()}: digest {d_digest(d).hex()} != golden {case.sha8.hex()}"
    want = case.d_bits.astype(np.uint32).copy()
    want[((want & 0x7F800000) == 0x7F800000) & ((want & 0x007FFFFF) != 0)] = CANONICAL_NAN
    bad = np.argwhere(got != want)
    if len(bad) == 0:
        return None
    i, j = (int(x) for x in bad[0])
    return (f"{case.describe()}: {len(bad)} of {got.size} outputs differ; first D[{i},{j}] = "
            f"0x{int(got[i, j]):08x}, golden 0x{int(want[i, j]):08x}")


# --------------------------------------------------------------------------------------
# The case plan
# --------------------------------------------------------------------------------------


def plan() -> dict[str, list[tuple]]:
    """(arch, dtype, dist, seed, m, n, k, c_zero) for every record, in file order."""
    from simtc.numerics.cases import DISTRIBUTIONS

    out: dict[str, list[tuple]] = {kind: [] for kind in KINDS}
    for ai, arch in enumerate(ARCHS):
        for dtype in DTYPES:
            for dist in DISTRIBUTIONS:
                def seed(kind, i, ai=ai):
                    return SEED_BASE[kind] + ARCH_SEED_STRIDE * ai + i

                m, n = BASE_SHAPE
                for i in range(N_FULL):
                    out["full"].append((arch, dtype, dist, seed("full", i), m, n, INSTR_K, False))
                for i in range(N_DIGEST):
                    mm, nn = EXTRA_SHAPES[arch][(i // 16) % 4] if i % 16 == 15 else BASE_SHAPE
                    out["digest"].append((arch, dtype, dist, seed("digest", i), mm, nn, INSTR_K, False))
                for i in range(N_CHAIN):
                    out["chain"].append((arch, dtype, dist, seed("chain", i), m, n,
                                         INSTR_K * CHAIN_STEPS, i % 2 == 1))
            for i in range(N_EDGE):
                sd = SEED_BASE["edge"] + ARCH_SEED_STRIDE * ai + DTYPE_SEED_STRIDE * DTYPES.index(dtype) + i
                out["edge"].append((arch, dtype, "edge", sd, *BASE_SHAPE, INSTR_K, False))
    return out


# Special values for "edge" records (bit patterns; a random sign is added to each).
_EDGE_INPUTS = {
    #        min sub max sub min nrm  1      1.5    2      2^64   2^-64  2^127  max    | inf    NaN
    "bf16": (0x0001, 0x007F, 0x0080, 0x3F80, 0x3FC0, 0x4000, 0x5F80, 0x1F80, 0x7F00, 0x7F7F, 0x7F80, 0x7FC0),
    #        min sub max sub min nrm  1      1.5    2      2^-12  2^-8   2^15   65504  | inf    NaN
    "fp16": (0x0001, 0x03FF, 0x0400, 0x3C00, 0x3E00, 0x4000, 0x0C00, 0x1C00, 0x7800, 0x7BFF, 0x7C00, 0x7E00),
}
#                min sub     max sub     min nrm     1           1.5         2^32        2^-64       2^127
_EDGE_C = (0x00000001, 0x007FFFFF, 0x00800000, 0x3F800000, 0x3FC00000, 0x4F800000, 0x1F800000, 0x7F000000,
           0x7F7FFFFE, 0x7F7FFFFF, 0x7F800000, 0x7FC00000)
#          max - ulp   max         inf         NaN
_EDGE_ZERO_PROB = (0.5, 0.75, 0.9, 0.97)  # by record number mod 4: many all-zero / one-term sums


def edge_operands(dtype: str, seed: int, m: int = 64, n: int = 8, k: int = 16):
    """Bit patterns (a uint16 [m,k], b uint16 [n,k], c uint32 [m,n]) of one "edge" record.

    Each element is a signed zero (probability 0.5 to 0.97, by ``seed`` mod 4) or a random-signed
    value from a small palette of special values (subnormals, 1, powers of two, the largest
    finite values, Inf and NaN; Inf and NaN come up 4x less often than the others). Rows 0 and
    1 of A and B and the top-left 2x2 of C are signed zeros (see the code).
    """
    from simtc.numerics.cases import Stream

    st = Stream(seed)
    pz = _EDGE_ZERO_PROB[seed % 4]

    def draw(shape, palette, sign_bit, dt):
        pal = np.array(palette, dtype=np.uint64)
        weights = np.array([4] * (len(pal) - 2) + [1, 1])
        pick = np.searchsorted(np.cumsum(weights), st.integers(0, int(weights.sum()), shape), side="right")
        vals = pal[pick]
        vals[st.uniform(shape) < pz] = 0
        signs = st.integers(0, 2, shape).astype(np.uint64) * np.uint64(sign_bit)
        return (vals | signs).astype(dt)

    a = draw((m, k), _EDGE_INPUTS[dtype], 0x8000, np.uint16)
    b = draw((n, k), _EDGE_INPUTS[dtype], 0x8000, np.uint16)
    c = draw((m, n), _EDGE_C, 0x80000000, np.uint32)
    # Signed-zero sums: A rows 0 / 1 are +0 / -0, B rows 0 / 1 are -0 / +0, so D[0,0] and D[1,1]
    # sum sixteen -0 products and C = -0 (IEEE: -0), D[0,1] and D[1,0] sixteen +0 products.
    a[0, :], a[1, :] = 0x0000, 0x8000
    b[0, :], b[1, :] = 0x8000, 0x0000
    c[0, 0] = c[1, 1] = c[0, 1] = c[1, 0] = 0x80000000
    return a, b, c


# --------------------------------------------------------------------------------------
# MMA-Sim calls (torch and mmasim imported lazily)
# --------------------------------------------------------------------------------------

_OPS: dict = {}


def mmasim_op(arch: str, dtype: str, m: int, n: int):
    """The MMA-Sim instruction object for one k16 shape (cached)."""
    key = (arch, dtype, m, n)
    if key not in _OPS:
        import mmasim.nv_ptx as nv

        t = PTX_TYPE[dtype]
        if arch == "sm100":
            _OPS[key] = nv.TCGen05MMA("Blackwell", f"m{m}n{n}k16.kind::f16.f32.{t}.{t}")
        elif arch == "sm90":
            _OPS[key] = nv.WGMMA("Hopper", f"m{m}n{n}k16.f32.{t}.{t}")
        else:
            raise ValueError(f"unknown arch {arch!r}; known: {ARCHS}")
    return _OPS[key]


def _to_torch16(x: np.ndarray, dtype: str):
    import torch

    from simtc.numerics.formats import encode_bits

    bits = np.ascontiguousarray(encode_bits(x, dtype)).view(np.int16)  # exact for representable values
    return torch.from_numpy(bits.copy()).view(torch.bfloat16 if dtype == "bf16" else torch.float16)


def mmasim_mma(a: np.ndarray, b: np.ndarray, c: np.ndarray, *, dtype: str, arch: str) -> np.ndarray:
    """D = A·Bᵀ + C through MMA-Sim, K consumed as chained k16 instructions in order.

    a: [M, K], b: [N, K] (values representable in ``dtype``), c: [M, N] float32 -> D float32.
    """
    import torch

    m, k = a.shape
    n = b.shape[0]
    if k % INSTR_K:
        raise ValueError(f"K = {k} is not a multiple of {INSTR_K}")
    op = mmasim_op(arch, dtype, m, n)
    at, bt = _to_torch16(a, dtype), _to_torch16(b, dtype)
    d = torch.from_numpy(np.ascontiguousarray(c, dtype=np.float32).copy())
    for k0 in range(0, k, INSTR_K):
        d = op(at[:, k0:k0 + INSTR_K], bt[:, k0:k0 + INSTR_K].T, d)
    return d.numpy().astype(np.float32, copy=True)


def mmasim_tcgen05_bf16(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """One ``tcgen05.mma.kind::f16`` bf16 -> f32 instruction through MMA-Sim (for benchmarks).

    a: [M, 16], b: [N, 16] float32 holding bf16 values, c: [M, N] float32 -> D [M, N] float32.
    """
    return mmasim_mma(a, b, c, dtype="bf16", arch="sm100")


# --------------------------------------------------------------------------------------
# Sanity check against float64
# --------------------------------------------------------------------------------------

_FLT_LIMIT = 2.0**128


class Sanity:
    """Checks each result against float64 A·Bᵀ + C and collects statistics per distribution."""

    def __init__(self):
        self.stats: dict[str, dict] = {}
        self.failures: list[str] = []

    @staticmethod
    def _exponents(x64: np.ndarray, min_exp: int) -> np.ndarray:
        """MMA-Sim's exponents (``mmasim/simulator/arithmetic.py``): floor(log2|x|), subnormals at ``min_exp``,
        zeros at -133."""
        _, e = np.frexp(np.where(np.isfinite(x64), x64, 1.0))
        e = np.maximum(e.astype(np.int64) - 1, min_exp)
        return np.where(x64 == 0, -133, e)

    def check(self, what: str, dist: str, dtype: str, a, b, c, d, steps: int):
        st = self.stats.setdefault(dist, dict(outputs=0, checked=0, overflow_range=0, nan=0, inf=0, zero=0,
                                              max_err_over_s=0.0, max_rel_big=0.0, rel_gt_1e5=0, rel_n=0,
                                              max_rel=0.0, noncanonical_nan=0, neg_zero=0, ieee_neg_zero=0,
                                              ieee_neg_zero_as_pos=0))
        with np.errstate(all="ignore"):
            a64, b64, c64 = a.astype(np.float64), b.astype(np.float64), c.astype(np.float64)
            ref = a64 @ b64.T + c64
            s = np.abs(a64) @ np.abs(b64).T + np.abs(c64)
            fa, fb, fc = (np.where(np.isfinite(x), np.abs(x), 0.0) for x in (a64, b64, c64))
            s_fin = fa @ fb.T + fc  # sum of |finite terms|: bounds every partial sum of a chain
            d64 = d.astype(np.float64)
            err = np.abs(d64 - ref)
            if steps == 1:  # sums whose IEEE value is -0: every product and C a zero, all of them -0
                prods = a64[:, None, :] * b64[None, :, :]
                ieee_neg0 = ((prods == 0) & np.signbit(prods)).all(axis=-1) & (c64 == 0) & np.signbit(c64)
                st["ieee_neg_zero"] += int(ieee_neg0.sum())
                st["ieee_neg_zero_as_pos"] += int((ieee_neg0 & (d.view(np.uint32) == 0)).sum())
        bits = d.view(np.uint32)
        st["outputs"] += d.size
        st["nan"] += int(np.isnan(d).sum())
        st["inf"] += int(np.isinf(d).sum())
        st["zero"] += int((bits == 0).sum())
        st["neg_zero"] += int((bits == 0x80000000).sum())
        st["noncanonical_nan"] += int((np.isnan(d) & (bits != CANONICAL_NAN)).sum())
        # One k16 step: 17 terms, each truncated by < 2^(E-25), E the largest term exponent of the
        # recipe (a product with a subnormal factor can have E far above its magnitude), then RZ
        # (< 2^-23 |V|, or 2^-149 for subnormal results). Chains: E also covers the running C.
        min_exp = -14 if dtype == "fp16" else -126
        ea, eb = self._exponents(a64, min_exp), self._exponents(b64, min_exp)
        ep = np.where((a64[:, None, :] == 0) | (b64[None, :, :] == 0), -133, ea[:, None, :] + eb[None, :, :])
        big_e = np.maximum(ep.max(axis=-1), self._exponents(c64, -126))
        if steps > 1:
            with np.errstate(all="ignore"):
                big_e = np.maximum(big_e, np.floor(np.log2(np.where(s_fin > 0, s_fin, 1.0))).astype(np.int64) + 1)
        tol = steps * (17.0 * np.exp2((big_e - 25).astype(np.float64)) + 2.0**-23 * 1.001 * s + 2.0**-149)
        over = s_fin * (1 + 1e-5) >= _FLT_LIMIT  # fp32 overflow possible somewhere
        st["overflow_range"] += int(over.sum())
        strict = ~over if steps > 1 else np.ones(d.shape, dtype=bool)  # chains: inf, then inf - inf
        bad = strict & np.isnan(ref) & ~np.isnan(d)
        bad |= strict & np.isinf(ref) & (d64 != ref)
        fin = np.isfinite(ref)
        close = fin & (err <= tol)
        overflowed = fin & over & np.isinf(d) & (np.sign(d64) == np.sign(ref)) & (np.abs(ref) + tol >= _FLT_LIMIT)
        bad |= fin & ~over & ~close
        if steps == 1:
            bad |= fin & over & ~close & ~overflowed
        checked = fin & close
        st["checked"] += int(checked.sum())
        if checked.any():
            nz = checked & (s > 0)
            if nz.any():
                st["max_err_over_s"] = max(st["max_err_over_s"], float((err[nz] / s[nz]).max()))
            rz = checked & (ref != 0)
            if rz.any():
                rel = err[rz] / np.abs(ref[rz])
                st["rel_n"] += int(rz.sum())
                st["rel_gt_1e5"] += int((rel > 1e-5).sum())
                st["max_rel"] = max(st["max_rel"], float(rel.max()))
            big = checked & (np.abs(ref) >= 0.1 * s) & (ref != 0)
            if big.any():
                st["max_rel_big"] = max(st["max_rel_big"], float((err[big] / np.abs(ref[big])).max()))
        if bad.any():
            i, j = (int(x) for x in np.argwhere(bad)[0])
            self.failures.append(f"{what}: D[{i},{j}] = {d[i, j]!r} but float64 gives {ref[i, j]!r} "
                                 f"(sum |terms| {s[i, j]!r}); {int(bad.sum())} outputs out of bounds")

    def report(self):
        print("\nSanity check against float64 A·Bᵀ + C: |D - ref| <= steps·(17·2^(E-25) + 2^-23·Σ|terms| + 2^-149)")
        print("(E: the recipe's largest term exponent, subnormals at the format's minimum exponent, zeros at -133;")
        print(" chains: E also covers the running accumulator;")
        print(" 'rel(big)' is the max relative error where |ref| >= Σ|terms|/10; 'ovf-rng': Σ|terms| near 2^128)")
        hdr = (f"  {'dist':9s} {'outputs':>8s} {'checked':>8s} {'ovf-rng':>7s} {'NaN':>6s} {'Inf':>6s} "
               f"{'+0':>6s} {'-0':>3s} {'max err/Σ|t|':>12s} {'rel(big)':>9s} {'max rel':>9s} {'rel>1e-5':>14s}")
        print(hdr)
        for dist, st in self.stats.items():
            print(f"  {dist:9s} {st['outputs']:8d} {st['checked']:8d} {st['overflow_range']:7d} {st['nan']:6d} "
                  f"{st['inf']:6d} {st['zero']:6d} {st['neg_zero']:3d} {st['max_err_over_s']:12.3g} "
                  f"{st['max_rel_big']:9.3g} {st['max_rel']:9.3g} {st['rel_gt_1e5']:4d}/{st['rel_n']:<6d}")
        nn = sum(st["noncanonical_nan"] for st in self.stats.values())
        nz = sum(st["neg_zero"] for st in self.stats.values())
        print(f"  NaN outputs other than 0x7FFFFFFF: {nn}; -0 outputs: {nz}")
        n0 = sum(st["ieee_neg_zero"] for st in self.stats.values())
        p0 = sum(st["ieee_neg_zero_as_pos"] for st in self.stats.values())
        print(f"  single-instruction outputs whose IEEE sum is -0 (all terms -0): {n0}; MMA-Sim gave +0 for {p0}")
        if self.failures:
            print(f"  {len(self.failures)} records FAILED the sanity check, e.g.:")
            for f in self.failures[:10]:
                print("   ", f)
        else:
            print("  all records within bounds")


# --------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------


def _versions() -> dict:
    import importlib.metadata as md

    import torch

    return {"mmasim": md.version("mmasim"), "torch": torch.__version__, "numpy": np.__version__,
            "python": sys.version.split()[0]}


def generate(verbose: bool = True) -> tuple[dict[str, np.ndarray], Sanity, dict]:
    from simtc.numerics.cases import DISTRIBUTIONS

    cases = plan()
    sanity = Sanity()
    arrays: dict[str, np.ndarray] = {
        "format_version": np.array(FORMAT_VERSION, dtype=np.int64),
        "archs": np.array(ARCHS),
        "dtypes": np.array(DTYPES),
        "distributions": np.array(DISTRIBUTIONS),
    }
    timing = {"calls": 0, "seconds": 0.0, "by_shape": {}}
    cross = {"compared": 0, "identical": 0, "chain_direct_identical": 0, "chain_compared": 0}

    def timed(a, b, c, dtype, arch):
        t0 = time.perf_counter()
        d = mmasim_mma(a, b, c, dtype=dtype, arch=arch)
        dt = time.perf_counter() - t0
        calls = a.shape[1] // INSTR_K
        timing["calls"] += calls
        timing["seconds"] += dt
        sh = timing["by_shape"].setdefault(f"m{a.shape[0]}n{b.shape[0]}k16", [0, 0.0])
        sh[0] += calls
        sh[1] += dt
        return d

    for kind in KINDS:
        rows = cases[kind]
        t_kind = time.perf_counter()
        outs = []
        for arch, dtype, dist, seed, m, n, k, c_zero in rows:
            case = GoldenCase(kind, 0, arch, dtype, dist, seed, m, n, k, c_zero)
            a, b, c = case_operands(case)
            d = timed(a, b, c, dtype, arch)
            sanity.check(case.describe(), dist, dtype, a, b, c, d, k // INSTR_K)
            if kind in ("full", "edge"):  # the other architecture's class on the same inputs
                other = ARCHS[1 - ARCHS.index(arch)]
                d2 = mmasim_mma(a, b, c, dtype=dtype, arch=other)
                cross["compared"] += 1
                cross["identical"] += int(np.array_equal(d.view(np.uint32), d2.view(np.uint32)))
            if kind == "chain":  # one MMA-Sim call with K = 64 (it splits K itself) gives the same
                import torch

                op = mmasim_op(arch, dtype, m, n)
                dd = op(_to_torch16(a, dtype), _to_torch16(b, dtype).T, torch.from_numpy(c.copy())).numpy()
                cross["chain_compared"] += 1
                cross["chain_direct_identical"] += int(np.array_equal(d.view(np.uint32), dd.view(np.uint32)))
            outs.append(d)
        arrays[f"{kind}_arch"] = np.array([ARCHS.index(r[0]) for r in rows], dtype=np.uint8)
        arrays[f"{kind}_dtype"] = np.array([DTYPES.index(r[1]) for r in rows], dtype=np.uint8)
        if kind != "edge":
            arrays[f"{kind}_dist"] = np.array([DISTRIBUTIONS.index(r[2]) for r in rows], dtype=np.uint8)
        arrays[f"{kind}_seed"] = np.array([r[3] for r in rows], dtype=np.int64)
        arrays[f"{kind}_m"] = np.array([r[4] for r in rows], dtype=np.uint16)
        arrays[f"{kind}_n"] = np.array([r[5] for r in rows], dtype=np.uint16)
        arrays[f"{kind}_k"] = np.array([r[6] for r in rows], dtype=np.uint16)
        if kind == "digest":
            arrays["digest_sha8"] = np.array([list(d_digest(d)) for d in outs], dtype=np.uint8)
        else:
            arrays[f"{kind}_d"] = np.stack([d.view(np.uint32) for d in outs]).astype("<u4")
        if kind == "edge":
            bits = [edge_operands(r[1], r[3], r[4], r[5], r[6]) for r in rows]
            arrays["edge_a"] = np.stack([x[0] for x in bits]).astype("<u2")
            arrays["edge_b"] = np.stack([x[1] for x in bits]).astype("<u2")
            arrays["edge_c"] = np.stack([x[2] for x in bits]).astype("<u4")
        if kind == "chain":
            arrays["chain_c_zero"] = np.array([r[7] for r in rows], dtype=bool)
        if verbose:
            print(f"{kind:7s}: {len(rows):6d} records in {time.perf_counter() - t_kind:6.1f} s", flush=True)
    info = {"timing": timing, "cross": cross}
    return arrays, sanity, info


def meta_json(versions: dict) -> str:
    from simtc.numerics.cases import DISTRIBUTIONS

    meta = {
        "generator": "tests/oracle/regen_mmasim.py",
        "format_version": FORMAT_VERSION,
        "versions": versions,
        "mmasim_classes": MMASIM_CLASSES,
        "convention": "D[M,N] = A[M,K] * B[N,K]^T + C; MMA-Sim called with B.T (K x N); K in chained k16 steps",
        "inputs": "simtc.numerics.cases.mma_operands(dist, m, n, k, dtype=dtype, seed=seed); chain_c_zero -> C = +0; "
                  "edge: stored bits edge_a (uint16 [records,M,K]), edge_b (uint16 [records,N,K]), "
                  "edge_c (uint32 [records,M,N]), "
                  "made by regen_mmasim.edge_operands(dtype, seed)",
        "digest": "sha256(D with NaN -> 0x7FFFFFFF, as '<u4', row-major).digest()[:8]",
        "distributions": list(DISTRIBUTIONS),
        "counts_per_group": {"full": N_FULL, "digest": N_DIGEST, "chain": N_CHAIN, "edge (per arch x dtype)": N_EDGE},
        "seed_base": SEED_BASE,
        "arch_seed_stride": ARCH_SEED_STRIDE,
        "edge_dtype_seed_stride": DTYPE_SEED_STRIDE,
        "extra_shapes": {k: [list(s) for s in v] for k, v in EXTRA_SHAPES.items()},
    }
    return json.dumps(meta, sort_keys=True)


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """An .npz (zip of .npy) with sorted members and fixed timestamps: same arrays -> same bytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name in sorted(arrays):
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asarray(arrays[name], order="C"), allow_pickle=False)
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, member.getvalue(), compresslevel=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf.getvalue())


def bench(reps: int = 10, rounds: int = 5) -> dict[str, tuple[float, float]]:
    """(best, median) milliseconds per bf16 tcgen05 instruction through MMA-Sim, per shape.

    ``rounds`` rounds of ``reps`` calls each; the machine may be shared, so the best round is
    the better estimate of MMA-Sim's own cost.
    """
    from simtc.numerics.cases import mma_operands

    out = {}
    for m, n in ((64, 128), (64, 8), (128, 256)):
        a, b, c = mma_operands("normal", m, n, 16, dtype="bf16", seed=12345)
        mmasim_tcgen05_bf16(a, b, c)  # warm-up
        per = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(reps):
                mmasim_tcgen05_bf16(a, b, c)
            per.append((time.perf_counter() - t0) / reps * 1e3)
        out[f"m{m}n{n}k16"] = (min(per), float(np.median(per)))
    return out


def _print_bench(result: dict) -> None:
    for shape, (best, med) in result.items():
        print(f"MMA-Sim tcgen05 bf16 {shape:12s}: {best:8.2f} ms per instruction (best round), {med:8.2f} (median)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="recompute and compare with the data file; exit 1 on a difference")
    ap.add_argument("--bench", action="store_true", help="only time MMA-Sim")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    ap.add_argument("--out", type=Path, default=DATA_FILE, help="data file (default tests/data/mmasim_golden.npz)")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    versions = _versions()
    print(f"mmasim {versions['mmasim']}, torch {versions['torch']} ({torch.get_num_threads()} thread(s)), "
          f"numpy {versions['numpy']}")
    for arch, cls in MMASIM_CLASSES.items():
        print(f"  {arch}: {cls}")

    if args.bench:
        _print_bench(bench())
        return 0

    t0 = time.perf_counter()
    arrays, sanity, info = generate()
    arrays["meta_json"] = np.array(meta_json(versions))
    wall = time.perf_counter() - t0
    tm, cross = info["timing"], info["cross"]
    print(f"\nMMA-Sim: {tm['calls']} k16 instructions, {tm['seconds']:.1f} s in MMA-Sim "
          f"({tm['seconds'] / tm['calls'] * 1e3:.2f} ms per instruction on average); total {wall:.1f} s")
    for shape, (calls, sec) in sorted(info["timing"]["by_shape"].items()):
        print(f"  {shape:12s} {calls:6d} instructions  {sec / calls * 1e3:7.2f} ms each")
    print(f"sm90 vs sm100 classes on the same inputs ({cross['compared']} full records): "
          f"{cross['identical']} bit-identical")
    print(f"chains: 4 chained k16 calls vs one K=64 call ({cross['chain_compared']} records): "
          f"{cross['chain_direct_identical']} bit-identical")
    sanity.report()
    _print_bench(bench(reps=5, rounds=3))
    counts = {k: len(arrays[f"{k}_seed"]) for k in KINDS}
    print(f"records: {counts} (total {sum(counts.values())})")

    ok = not sanity.failures and cross["identical"] == cross["compared"] \
        and cross["chain_direct_identical"] == cross["chain_compared"]
    if not ok:
        print("sanity or consistency check failed: data file NOT written/compared", file=sys.stderr)
        return 2

    if args.check:
        if not args.out.exists():
            print(f"{args.out} does not exist", file=sys.stderr)
            return 1
        old = load_golden(args.out)
        diffs = []
        for name in sorted(set(old) | set(arrays)):
            if name == "meta_json":
                continue
            if name not in old or name not in arrays:
                diffs.append(f"{name}: present in only one of file / recomputation")
            elif old[name].dtype != arrays[name].dtype or old[name].shape != arrays[name].shape:
                diffs.append(f"{name}: dtype/shape {old[name].dtype}{old[name].shape} in the file, "
                             f"{arrays[name].dtype}{arrays[name].shape} recomputed")
            elif not np.array_equal(old[name], arrays[name]):
                rows = np.argwhere((old[name] != arrays[name]).reshape(len(old[name]), -1).any(axis=1)).ravel()
                kind = name.split("_")[0]
                where = ""
                if kind in KINDS:
                    arch, dtype, dist, seed, m, n, k, cz = plan()[kind][int(rows[0])]
                    first = GoldenCase(kind, int(rows[0]), arch, dtype, dist, seed, m, n, k, cz)
                    where = "; first: " + first.describe()
                diffs.append(f"{name}: {len(rows)} records differ{where}")
        old_versions = json.loads(old["meta_json"].item())["versions"] if "meta_json" in old else {}
        if old_versions != versions:
            print(f"note: file made with {old_versions}, recomputed with {versions}")
        if diffs:
            print(f"{args.out}: {len(diffs)} arrays differ:", file=sys.stderr)
            for d in diffs[:20]:
                print("  ", d, file=sys.stderr)
            return 1
        print(f"{args.out}: all records reproduced bit for bit")
        return 0

    write_npz(args.out, arrays)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
