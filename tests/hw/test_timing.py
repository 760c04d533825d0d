"""The wgmma timing microbenchmark without a GPU: the fit, the kernel source and build, the model check."""

import importlib.util
import sys

import numpy as np
import pytest

from simtc.errors import ShapeError, SimtcError
from simtc.hw import timing
from simtc.hw.timing import DEPTHS, TimingRow, fit_ii, kernel_source, timing_check, timing_from_json, timing_to_json

HAVE = importlib.util.find_spec("cuda") is not None and importlib.util.find_spec("cuda.bindings") is not None


def test_fit_recovers_ii_and_overhead():
    d = np.array(DEPTHS)
    rng = np.random.default_rng(0)
    total = 64.0 * d + 170.0 + rng.uniform(-0.5, 0.5, d.size)
    a, b = fit_ii(d, total)
    assert abs(a - 64.0) < 0.05 and abs(b - 170.0) < 1.0


@pytest.mark.parametrize("depths, totals", [([4], [10.0]), ([4, 4], [10.0, 10.0]), ([0, 2], [1.0, 2.0]),
                                            ([1, 2], [1.0])])
def test_fit_refuses_what_cannot_be_fitted(depths, totals):
    with pytest.raises(ShapeError, match="CyclesPerMMA"):
        fit_ii(depths, totals)


@pytest.mark.parametrize("operands", ["SS", "RS"])
def test_kernel_source_is_filled(operands):
    src = kernel_source(96, operands)
    assert "{{" not in src and "#include" not in src
    assert "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16" in src
    assert src.count("SIMTC_TIME_CHAIN(") == len(DEPTHS) + 1  # the definition and one per depth
    assert ("{%48, %49, %50, %51}, %52, p, 1, 1, 0;" in src) == (operands == "RS")  # A in 4 registers, trans-b only
    assert ("%48, %49, p, 1, 1, 0, 0;" in src) == (operands == "SS")


@pytest.mark.parametrize("n, operands", [(7, "SS"), (264, "SS"), (64, "TS")])
def test_kernel_source_refuses_bad_shapes(n, operands):
    with pytest.raises(SimtcError):
        kernel_source(n, operands)


@pytest.mark.skipif(not HAVE, reason="cuda-bindings + nvidia-cuda-nvrtc (dev extra) not installed")
@pytest.mark.parametrize("operands", ["SS", "RS"])
def test_chains_are_not_serialized(operands):
    """Every timed region is one WARPGROUP.ARRIVE ... one WARPGROUP.DEPBAR: no wait inside a chain."""
    from simtc.errors import HardwareUnavailable
    from simtc.hw.compile import compile_cuda, disassemble, sass_histogram

    cubin = compile_cuda(kernel_source(8, operands), arch="sm_90a", name="t.cu")
    try:
        full = sass_histogram(disassemble(cubin), full=True)
    except HardwareUnavailable as e:
        pytest.skip(str(e))
    assert full["HGMMA.64x8x16.F32.BF16"] == 512  # 1 (latency) + 1 + 2 + 4 + ... + 256
    assert full["WARPGROUP.ARRIVE"] == 10 and full["WARPGROUP.DEPBAR.LE"] == 10  # latency + 9 chains
    assert full.get("LDL", 0) == 0 and full.get("STL", 0) == 0


def _row(op="SS", n=64, lat=100.0, ii=32.0):
    return TimingRow(op, n, lat, lat - 1, lat + 1, ii, lat - ii, (1, 2), (lat, lat + ii), 2.0)


def test_rows_round_trip_through_json():
    rows = [_row(), _row("RS", 256, 200.0, 128.0)]
    assert timing_from_json(timing_to_json(rows, device="d")) == rows
    with pytest.raises(SimtcError, match="timing"):
        timing_from_json({"rows": [{"n": 1}]})


def test_check_without_model_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "simtc.engine.timing", None)  # import fails as if not written
    r = timing_check([_row()])
    assert r.status == "skipped" and "model not available" in r.detail and "SS N=64" in r.detail


class _P:
    def __init__(self, lat, ii):
        self.latency_cycles, self.ii_cycles = lat, ii


@pytest.mark.parametrize("lat, ii, status", [(109.0, 33.5, "pass"), (112.0, 32.0, "FAIL"), (100.0, 34.0, "FAIL")])
def test_check_compares_within_the_tolerances(monkeypatch, lat, ii, status):
    calls = []

    def predict_mma(**kw):
        calls.append(kw)
        return _P(lat, ii)

    monkeypatch.setattr(timing, "_model", lambda: (predict_mma, ""))
    r = timing_check([_row()])
    assert r.status == status and r.cases == 1
    assert calls == [{"arch": "sm90", "m": 64, "n": 64, "k": 16, "operands": "SS"}]
    assert r.rows == (("SS", 64, 100.0, 32.0, lat, ii),)
