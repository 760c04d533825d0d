"""simtc.ptx.alu's cvt.pack and half-precision ``set`` against an H200, bit for bit: the second recording set of
simtc/hw/ptx_alu.py (:data:`~simtc.hw.ptx_alu.GAP_CASES`, tests/data/h200_ptx_alu_gaps.npz).

Record it on an sm_90a GPU from the repository root::

    python -m simtc.hw.ptx_alu prepare build/h4_alu_gaps gaps
    nvcc -arch=sm_90a -cubin -o build/h4_alu_gaps/kernels.cubin build/h4_alu_gaps/kernels.cu
    python3 -P simtc/hw/ptx_alu.py run build/h4_alu_gaps tests/data/h200_ptx_alu_gaps.npz

Recorded 2026-12-03 on one NVIDIA H200 (driver 580.159.04, CUDA 13.0): all 42 cases, 2048 inputs each (edge
values first: signed zeros, subnormals, Inf, NaNs with payloads, integer extremes; then random patterns), equal
simtc's ALU bit for bit. The comparison is skipped while the recording is absent; the case table itself is
checked here always.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from simtc.hw import ptx_alu as h
from simtc.ptx import alu

DATA = Path(__file__).parents[1] / "data" / "h200_ptx_alu_gaps.npz"


def test_gap_cases_compile_in_the_alu_and_are_new():
    assert not set(h.GAP_CASES) & set(h.CASES)
    for c in h.GAP_CASES:
        op = alu.compile(h._build(c))
        assert not op.approx, c
        ins = h.case_inputs(c)
        assert len(ins) == len(op.src_types) and all(a.size == h.N for a in ins)


def test_gap_kernels_assemble_for_sm_90a(tmp_path):
    """Every case's inline-asm kernel is PTX that ptxas accepts (nvcc 13 here; skipped without it)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    h.prepare(tmp_path, h.GAP_CASES)
    r = subprocess.run([nvcc, "-arch=sm_90a", "-cubin", "-o", str(tmp_path / "k.cubin"), str(tmp_path / "kernels.cu")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]


@pytest.fixture(scope="module")
def rec():
    if not DATA.exists():
        pytest.skip(f"{DATA.name} is not recorded yet (see this module's docstring for the command)")
    z = np.load(DATA)
    return {k: z[k] for k in z.files}


@pytest.mark.parametrize(("i", "case"), list(enumerate(h.GAP_CASES)), ids=list(h.GAP_CASES))
def test_same_bits_as_the_h200(rec, i, case):
    assert [str(c) for c in rec["cases"]] == list(h.GAP_CASES)
    o = alu.compile(h._build(case))
    srcs = [rec[f"in{i}_{j}"].astype(bool) if t == "pred" else rec[f"in{i}_{j}"].astype(alu._U[alu.type_width(t)])
            for j, t in enumerate(o.src_types)]
    got = o.fn(*srcs)
    for k, g in enumerate(got):
        w = rec[f"out{i}_{k}"]
        g64 = g.astype(np.uint64)
        bad = np.flatnonzero(g64 != w)
        assert bad.size == 0, [(case, [hex(int(x[b])) for x in srcs], hex(int(g64[b])), hex(int(w[b])))
                               for b in bad[:4]]
