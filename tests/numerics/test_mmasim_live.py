"""simtc's tensor-core numerics against MMA-Sim, live (optional oracle; skipped without it).

MMA-Sim (PyPI ``mmasim``, microsoft/MMA-Sim) is a bit-accurate reference model of NVIDIA
tensor cores. It needs torch, so it is not a simtc dependency: these tests skip unless
both ``torch`` and ``mmasim`` import (see tests/data/README_mmasim.md for the setup).
They run fresh cases (seeds disjoint from the committed golden file) through MMA-Sim and
through ``simtc.numerics.tensor_core_mma`` and compare every output bit pattern; NaN
matches NaN whatever the payload. A sample of the golden file is also recomputed, to show
that it still reproduces with the installed MMA-Sim.
"""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="torch is not installed; MMA-Sim needs it (optional oracle, see "
                                    "tests/data/README_mmasim.md)")
pytest.importorskip("mmasim", reason="mmasim (MMA-Sim) is not installed (optional oracle, see "
                                     "tests/data/README_mmasim.md)")
try:  # compiles a small C++ extension (torch.utils.cpp_extension) on its first import
    import mmasim.nv_ptx  # noqa: F401
except Exception as exc:  # pragma: no cover - depends on the machine
    pytest.skip(f"mmasim is installed but mmasim.nv_ptx does not import: {exc!r}", allow_module_level=True)

from simtc.numerics.cases import DISTRIBUTIONS
from simtc.numerics.formats import encode_bits

_REGEN = Path(__file__).resolve().parents[1] / "oracle" / "regen_mmasim.py"
_spec = importlib.util.spec_from_file_location("simtc_tests_regen_mmasim", _REGEN)
regen = sys.modules.get(_spec.name)
if regen is None:
    regen = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = regen  # dataclasses look their module up there
    _spec.loader.exec_module(regen)

ARCHS = ("sm100", "sm90")
DTYPES = ("bf16", "fp16")
LIVE_SEED = 9_000_000  # the golden file uses 1e6..3.2e6
N_SINGLE = 6  # per (arch, dtype, dist): 6 m64n8k16 + 1 other shape + 2 chains = 9 cases, 324 in all
OTHER_SHAPE = {"sm100": (128, 16), "sm90": (64, 24)}


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny instructions: threads only add overhead on a shared machine
    yield
    torch.set_num_threads(before)


def _simtc_mma():
    import simtc.numerics as nx

    fn = getattr(nx, "tensor_core_mma", None)
    if fn is None:
        pytest.skip("simtc.numerics.tensor_core_mma does not exist yet")
    return fn


def _hex_row(x: np.ndarray, dtype: str) -> str:
    width = 8 if dtype == "fp32" else 4
    return " ".join(f"{int(v):0{width}x}" for v in np.atleast_1d(encode_bits(x, dtype)))


def _first_mismatch(want: np.ndarray, got: np.ndarray) -> tuple[int, tuple[int, int]] | None:
    w, g = want.view(np.uint32), got.view(np.uint32)
    bad = (w != g) & ~(np.isnan(want) & np.isnan(got))
    if not bad.any():
        return None
    i, j = (int(x) for x in np.argwhere(bad)[0])
    return int(bad.sum()), (i, j)


def _check(case: str, a, b, c, *, dtype: str, arch: str):
    want = regen.mmasim_mma(a, b, c, dtype=dtype, arch=arch)
    got = np.asarray(_simtc_mma()(a, b, c, dtype=dtype, instr_k=16, arch=arch))
    assert got.shape == want.shape, f"{case}: simtc D has shape {got.shape}, MMA-Sim {want.shape}"
    got = got.astype(np.float32, copy=False)
    mm = _first_mismatch(want, got)
    if mm is not None:
        count, (i, j) = mm
        pytest.fail(
            f"{case}: {count} of {want.size} outputs differ from MMA-Sim; first D[{i},{j}]:\n"
            f"  simtc   0x{int(got.view(np.uint32)[i, j]):08x} ({got[i, j]!r})\n"
            f"  MMA-Sim 0x{int(want.view(np.uint32)[i, j]):08x} ({want[i, j]!r})\n"
            f"  A[{i},:] ({dtype} bits) {_hex_row(a[i, :], dtype)}\n"
            f"  B[{j},:] ({dtype} bits) {_hex_row(b[j, :], dtype)}\n"
            f"  C[{i},{j}] (fp32 bits)  {_hex_row(c[i, j], 'fp32')}",
            pytrace=False,
        )


@pytest.mark.parametrize("dist", (*DISTRIBUTIONS, "edge"))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("arch", ARCHS)
def test_simtc_matches_mmasim(arch, dtype, dist):
    seed0 = LIVE_SEED + 1000 * ARCHS.index(arch)
    shapes = [(64, 8, 16)] * N_SINGLE + [(*OTHER_SHAPE[arch], 16), (64, 8, 64), (64, 8, 32)]
    for t, (m, n, k) in enumerate(shapes):
        seed = seed0 + t
        c_zero = t == len(shapes) - 1  # a chain started with enable-input-d = false
        case = regen.GoldenCase("live", t, arch, dtype, dist, seed, m, n, k, c_zero)
        a, b, c = regen.case_operands(case)  # mma_operands, or regen_mmasim.edge_operands for "edge"
        source = "regen_mmasim.edge_operands" if dist == "edge" else "mma_operands"
        what = (f"{source}: {case.describe()}, instr_k=16")
        _check(what, a, b, c, dtype=dtype, arch=arch)


def test_golden_file_reproduces_with_installed_mmasim():
    if not regen.DATA_FILE.exists():
        pytest.skip(f"{regen.DATA_FILE} is missing")
    cases = list(regen.golden_cases())
    sample = cases[::97]  # about 130 records spread over every kind, arch, dtype and distribution
    for case in sample:
        a, b, c = regen.case_operands(case)
        d = regen.mmasim_mma(a, b, c, dtype=case.dtype, arch=case.arch)
        msg = regen.compare(case, d)
        assert msg is None, msg + " (MMA-Sim no longer reproduces the golden file: regenerate or pin mmasim)"
