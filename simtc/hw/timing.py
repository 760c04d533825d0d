"""``wgmma`` timing on an sm_90a GPU: latency and initiation interval of m64nNk16 bf16, SS and RS.

The method is the one SemiAnalysisAI/microbench-blackwell ``umma_latency`` uses for B200
``tcgen05.mma``, on Hopper's ``wgmma``
(kernel: ``cuda/wgmma_timing.cu``; one CTA of one warpgroup, all times in SM clock cycles, ``clock64``
read by the issuing warpgroup's thread 0):

* **latency** = one ``wgmma.mma_async`` + ``wgmma.commit_group`` + ``wgmma.wait_group 0``, timed
  around the three; the median of many samples (warm-up samples dropped).
* **II** (initiation interval): chains of D back-to-back ``wgmma`` on the same accumulator (no wait
  between them; one commit + wait at the end), D over several depths; the fit
  CyclesPerMMA(D) = a + b / D by least squares gives **II = a** (the asymptotic cost per instruction
  of a long chain) and b = latency + overhead - II.

Both are measured with A and B in shared memory (``SS``: a K-major 64 x 16 / N x 16 bf16 tile, no
swizzle, built by :mod:`simtc.smem`) and with A from registers (``RS``). The cost of the two
``clock64`` reads (an empty timed region) is recorded beside them, not subtracted.

:func:`measure` runs it (needs cupy and an sm_90a GPU); :func:`fit_ii` and :func:`timing_check`
need no GPU. The check compares the measurements with ``simtc.engine.timing.predict_mma`` (imported
when called; "model not available" while that module does not exist).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from importlib import resources

import numpy as np
from attrs import frozen

from simtc.errors import ShapeError, SimtcError

__all__ = ["DEPTHS", "NS", "OPERANDS", "TimingRow", "fit_ii", "kernel_name", "kernel_source", "measure",
           "timing_check", "timing_from_json", "timing_to_json"]

NS = (8, 16, 24, 32, 48, 64, 96, 128, 192, 256)
"""N of the measured m64nNk16 shapes."""
OPERANDS = ("SS", "RS")
DEPTHS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
"""Chain depths D of the II fit."""
LATENCY_TOLERANCE = 0.10
"""|model - GPU| / GPU allowed for latency (issue target: within 10 %)."""
II_TOLERANCE = 0.05
"""|model - GPU| / GPU allowed for II (issue target: within 5 %)."""
CHECK_NAME = "wgmma timing: model vs GPU"


@frozen
class TimingRow:
    """The measurements of one instruction shape (cycles, ``clock64`` on the issuing warpgroup)."""

    operands: str
    n: int
    latency_cycles: float
    """Median of the latency samples."""
    latency_p10: float
    latency_p90: float
    ii_cycles: float
    """a of the fit CyclesPerMMA = a + b / D."""
    fit_b: float
    depths: tuple[int, ...]
    chain_cycles: tuple[float, ...]
    """Median cycles of each whole chain (commit and wait included), per depth."""
    clock_overhead: float
    """Median cycles of an empty timed region (two ``clock64`` reads)."""
    m: int = 64
    k: int = 16
    dtype: str = "bf16"

    def as_dict(self) -> dict:
        return {"operands": self.operands, "m": self.m, "n": self.n, "k": self.k, "dtype": self.dtype,
                "latency_cycles": self.latency_cycles, "latency_p10": self.latency_p10,
                "latency_p90": self.latency_p90, "ii_cycles": self.ii_cycles, "fit_b": self.fit_b,
                "depths": list(self.depths), "chain_cycles": list(self.chain_cycles),
                "clock_overhead": self.clock_overhead}

    @classmethod
    def from_dict(cls, d: dict) -> TimingRow:
        try:
            return cls(operands=str(d["operands"]), n=int(d["n"]), latency_cycles=float(d["latency_cycles"]),
                       latency_p10=float(d["latency_p10"]), latency_p90=float(d["latency_p90"]),
                       ii_cycles=float(d["ii_cycles"]), fit_b=float(d["fit_b"]),
                       depths=tuple(int(x) for x in d["depths"]),
                       chain_cycles=tuple(float(x) for x in d["chain_cycles"]),
                       clock_overhead=float(d["clock_overhead"]), m=int(d.get("m", 64)), k=int(d.get("k", 16)),
                       dtype=str(d.get("dtype", "bf16")))
        except (KeyError, TypeError, ValueError) as e:
            raise SimtcError(f"a wgmma timing row cannot be read ({type(e).__name__}: {e})",
                             rule="timing rows as simtc.hw.timing writes them") from None


def fit_ii(depths: Sequence[int], chain_cycles: Sequence[float]) -> tuple[float, float]:
    """Least-squares fit of CyclesPerMMA(D) = chain_cycles / D = a + b / D; returns (a, b) = (II, b).

    >>> a, b = fit_ii([1, 2, 4, 8, 64], [16 * d + 100 for d in (1, 2, 4, 8, 64)])
    >>> round(a, 6), round(b, 6)
    (16.0, 100.0)
    """
    d = np.asarray(depths, dtype=np.float64)
    t = np.asarray(chain_cycles, dtype=np.float64)
    if d.ndim != 1 or d.shape != t.shape or d.size < 2 or np.unique(d).size < 2 or np.any(d <= 0):
        raise ShapeError("the II fit needs at least two distinct positive depths, one chain time each",
                         rule="CyclesPerMMA = a + b/D over several depths",
                         ref="SemiAnalysisAI/microbench-blackwell umma_latency")
    x = np.stack([np.ones_like(d), 1.0 / d], axis=1)
    (a, b), *_ = np.linalg.lstsq(x, t / d, rcond=None)
    return float(a), float(b)


def kernel_name(n: int, operands: str) -> str:
    return f"simtc_wgmma_timing_m64n{n}k16_bf16_{operands}"



def kernel_source(n: int, operands: str, depths: Sequence[int] = DEPTHS) -> str:
    """CUDA source of the timing kernel for m64n``n``k16 bf16 with ``operands`` ``SS`` or ``RS``."""
    _check_shape(n, operands)
    if not depths or any(int(d) < 1 or int(d) > 1024 for d in depths):
        raise ShapeError(f"chain depths {list(depths)}: each 1..1024", rule="timed chains of 1 to 1024 wgmmas")
    text = resources.files("simtc.hw.cuda").joinpath("wgmma_timing.cu").read_text()
    nreg = n // 2
    if operands == "SS":
        a_bind, a_operand, n_a, trans = '"l"(a_desc), ', f"%{nreg}", 1, ", 0, 0"
    else:
        a_bind = '"r"(a0), "r"(a1), "r"(a2), "r"(a3), '
        a_operand, n_a, trans = "{" + ", ".join(f"%{nreg + i}" for i in range(4)) + "}", 4, ", 0"
    fill = {
        "NAME": kernel_name(n, operands), "N": str(n), "NREG": str(nreg),
        "OPERANDS_TEXT": "shared memory (SS)" if operands == "SS" else "registers (RS)",
        "ACC_LIST": ", ".join(f"%{i}" for i in range(nreg)),
        "ACC_BIND": ", ".join(f'"+f"(ACC[{i}])' for i in range(nreg)),
        "A_BIND": a_bind, "A_OPERAND": a_operand, "TRANS": trans,
        "B_IDX": str(nreg + n_a), "SD_IDX": str(nreg + n_a + 1),
        "DEPTHS": ", ".join(str(int(d)) for d in depths),
        "CHAINS": "\n".join(f"    SIMTC_TIME_CHAIN({j}, {int(d)});" for j, d in enumerate(depths)),
    }
    for key, value in fill.items():
        text = text.replace("{{" + key + "}}", value)
    return text


def _check_shape(n: int, operands: str) -> None:
    if n not in range(8, 257, 8):
        raise ShapeError(f"N = {n}: wgmma N is a multiple of 8 up to 256", rule="m64nNk16 shapes",
                         ref="PTX ISA 9.0 §9.7.15.5")
    if operands not in OPERANDS:
        raise SimtcError(f"operands {operands!r}: wgmma reads A from shared memory (SS) or registers (RS)",
                         rule="wgmma operand sources", ref="PTX ISA 9.0 §9.7.15.5")


def timing_image(n: int) -> tuple[np.ndarray, int, int]:
    """(image, A descriptor, B descriptor): K-major 64 x 16 and ``n`` x 16 bf16 tiles, no swizzle."""
    from simtc.numerics.cases import mma_operands
    from simtc.smem import CanonicalLayout, SharedMemory

    a, b, _ = mma_operands("normal", 64, n, 16, seed=n)
    sm = SharedMemory(arch="sm90", size=16 * 1024)
    ta, tb = CanonicalLayout("bf16", "K", "INTERLEAVE", 64, 16), CanonicalLayout("bf16", "K", "INTERLEAVE", n, 16)
    sm.write_tile(ta, a, 0)
    sm.write_tile(tb, b, 4096)
    return (sm.data.copy(), ta.descriptor(arch="sm90", start=0).encode(),
            tb.descriptor(arch="sm90", start=4096).encode())


def measure(ns: Sequence[int] = NS, operands: Sequence[str] = OPERANDS, *, depths: Sequence[int] = DEPTHS,
            samples: int = 101, warmup: int = 5, progress: Callable[[int], None] | None = None) -> list[TimingRow]:
    """Run the microbenchmark on an sm_90a GPU; one :class:`TimingRow` per (operands, N)."""
    import cupy

    from simtc.hw.compile import load_kernel
    from simtc.hw.device import require

    require("sm_90a")
    progress = progress or (lambda k: None)
    rows = []
    for op in operands:
        for n in ns:
            image, a_desc, b_desc = timing_image(n)
            fn = load_kernel(kernel_source(n, op, depths), kernel_name(n, op), arch="sm_90a")
            smem = image.size + 1024
            fn.max_dynamic_shared_size_bytes = smem
            lat = cupy.zeros(samples, dtype=cupy.uint64)
            chains = cupy.zeros(len(depths) * samples, dtype=cupy.uint64)
            empty = cupy.zeros(samples, dtype=cupy.uint64)
            sink = cupy.zeros(128, dtype=cupy.float32)
            fn((1,), (128,), (cupy.asarray(image.view(np.uint32)), np.uint32(image.size // 16), np.uint64(a_desc),
                              np.uint64(b_desc), np.uint32(warmup),
                              np.uint32(samples), lat, chains, empty, sink), shared_mem=smem)
            cupy.cuda.runtime.deviceSynchronize()
            lat_h = lat.get().astype(np.float64)
            chain_med = np.median(chains.get().astype(np.float64).reshape(len(depths), samples), axis=1)
            a, b = fit_ii(depths, chain_med)
            rows.append(TimingRow(op, n, float(np.median(lat_h)), float(np.percentile(lat_h, 10)),
                                  float(np.percentile(lat_h, 90)), a, b, tuple(int(d) for d in depths),
                                  tuple(float(c) for c in chain_med), float(np.median(empty.get()))))
            progress(1)
    return rows


def timing_to_json(rows: Sequence[TimingRow], *, device: str, samples: int | None = None,
                   command: str | None = None) -> dict:
    """The measurements as a JSON-ready dict (what ``tests/data/h200_wgmma_timing.json`` holds)."""
    return {"what": "wgmma.mma_async m64nNk16 bf16 latency and II on one warpgroup (clock64 cycles)",
            "method": "latency: median of one wgmma + commit_group + wait_group 0; II: a of CyclesPerMMA = "
                      "a + b/D fitted over chains of D back-to-back wgmmas on one accumulator (the method of "
                      "SemiAnalysisAI/microbench-blackwell umma_latency); clock_overhead: an empty timed region, "
                      "not subtracted",
            "device": device, "date": time.strftime("%Y-%m-%d"), "samples": samples, "command": command,
            "rows": [r.as_dict() for r in rows]}


def timing_from_json(data: dict) -> list[TimingRow]:
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise SimtcError("not a wgmma timing record (no 'rows' list)", rule="timing records as simtc.hw.timing "
                                                                          "writes them")
    return [TimingRow.from_dict(r) for r in data["rows"]]


def _model():
    """``simtc.engine.timing.predict_mma``, or the reason it is not available."""
    try:
        from simtc.engine.timing import predict_mma
    except ImportError as e:
        return None, f"model not available ({e})"
    return predict_mma, ""


def timing_check(rows: Sequence[TimingRow], *, source: str = "measured on the GPU"):
    """The cross-check row: each measured (operands, N) against the model's latency and II."""
    from simtc.hw.results import CheckResult

    if not rows:
        return CheckResult(CHECK_NAME, "skipped", detail="no measurements")
    predict_mma, why = _model()
    if predict_mma is None:
        return CheckResult(CHECK_NAME, "skipped", len(rows), 0, detail=f"{why}; {source}: " + _summary(rows),
                           rows=tuple((r.operands, r.n, r.latency_cycles, r.ii_cycles, None, None) for r in rows))
    table, good, worst, first = [], 0, 0.0, None
    for r in rows:
        try:
            p = predict_mma(arch="sm90", m=r.m, n=r.n, k=r.k, operands=r.operands)
            lat, ii = float(p.latency_cycles), float(p.ii_cycles)
        except SimtcError as e:
            table.append((r.operands, r.n, r.latency_cycles, r.ii_cycles, None, None))
            first = first or f"{r.operands} N={r.n}: the model refused ({e})"
            continue
        e_lat, e_ii = abs(lat - r.latency_cycles) / r.latency_cycles, abs(ii - r.ii_cycles) / r.ii_cycles
        ok = e_lat <= LATENCY_TOLERANCE and e_ii <= II_TOLERANCE
        good += ok
        worst = max(worst, e_lat, e_ii)
        table.append((r.operands, r.n, r.latency_cycles, r.ii_cycles, lat, ii))
        if not ok and first is None:
            first = (f"{r.operands} m64n{r.n}k16: GPU latency {r.latency_cycles:.0f}, II {r.ii_cycles:.1f}; "
                     f"model {lat:.0f}, {ii:.1f}")
    return CheckResult(CHECK_NAME, "pass" if good == len(rows) else "FAIL", len(rows), good,
                       detail=f"{source}; tolerance latency {LATENCY_TOLERANCE:.0%}, II {II_TOLERANCE:.0%}; "
                              f"largest relative difference {worst:.1%}",
                       first_mismatch=first, rows=tuple(table))


def _summary(rows: Sequence[TimingRow]) -> str:
    return "; ".join(f"{r.operands} N={r.n}: latency {r.latency_cycles:.0f}, II {r.ii_cycles:.1f}" for r in rows)
