"""One row of the cross-check table, and the bit-for-bit comparison of GPU registers with simtc's.

Kept apart from :mod:`simtc.hw.crosscheck` so that the modules producing rows (experiments, the
tcgen05 kernel, the timing benchmark) need not import the runner.
"""

from __future__ import annotations

import numpy as np
from attrs import field, frozen

__all__ = ["CheckResult", "compare", "describe_mismatch"]


@frozen
class CheckResult:
    """One row of the cross-check table."""

    check: str
    status: str
    """``pass``, ``FAIL`` or ``skipped``."""
    cases: int = 0
    bit_exact: int = 0
    """Cases whose every output matched simtc bit for bit."""
    elements: int = 0
    elements_exact: int = 0
    max_abs_diff: float = 0.0
    cycles: float | None = None
    """Median clock64 cycles per instruction group on the GPU, when measured."""
    detail: str = ""
    first_mismatch: str | None = None
    rows: tuple = field(factory=tuple)

    def as_dict(self) -> dict:
        return {"check": self.check, "status": self.status, "cases": self.cases, "bit_exact": self.bit_exact,
                "elements": self.elements, "elements_exact": self.elements_exact,
                "max_abs_diff": self.max_abs_diff, "cycles": self.cycles, "detail": self.detail,
                "first_mismatch": self.first_mismatch, "rows": [list(r) for r in self.rows]}


def compare(got: np.ndarray, want: np.ndarray) -> tuple[np.ndarray, float]:
    """(element-wise bit equality, NaN = NaN; largest |difference| among finite mismatches)."""
    g, w = got.view(np.uint32), want.view(np.uint32)
    nan_both = np.isnan(got) & np.isnan(want)
    same = (g == w) | nan_both
    with np.errstate(invalid="ignore"):
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    finite = np.isfinite(diff)
    return same, float(diff[finite & ~same].max()) if np.any(finite & ~same) else 0.0


def describe_mismatch(case, got_regs, want_regs) -> str:
    """The first mismatching register of a wgmma case: D[m][n], both values and where A and B were read."""
    from simtc.mma.wgmma import wgmma_fragment
    from simtc.smem import descriptor_addresses

    same, _ = compare(got_regs, want_regs)
    t, i = (int(v) for v in np.argwhere(~same)[0])
    rows, cols = wgmma_fragment(case.program.n)
    m, n = int(rows[t, i]), int(cols[t, i])
    ins = case.program.mmas[0]
    a = descriptor_addresses(ins.a, major=ins.a_major, dtype=ins.dtype, rows=64)
    b = descriptor_addresses(ins.b_desc, major=ins.b_major, dtype=ins.dtype, rows=ins.n)
    return (f"{case.label}: D[{m}][{n}] (thread {t}, register {i}) GPU {float(got_regs[t, i])!r} "
            f"(0x{int(got_regs.view(np.uint32)[t, i]):08x}) vs simtc {float(want_regs[t, i])!r} "
            f"(0x{int(want_regs.view(np.uint32)[t, i]):08x}); first instruction reads A[{m}][0..15] at smem "
            f"{a[m, 0]:#x}.. and B[{n}][0..15] at {b[n, 0]:#x}..")
