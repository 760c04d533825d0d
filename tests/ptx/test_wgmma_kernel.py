"""``wgmma`` in the PTX executor: simtc's own ``cuda/wgmma_exec.cu`` executed against an H200's recorded registers.

The recording (tests/data/h200_crosscheck_seed0.npz, read as tests/hw/test_h200_replay.py reads it) holds what an
H200 computed for every cross-check case of seed 0: the registers of 124 cases and a SHA-256 digest of all 284.
Here each case's executor kernel (filled in by :func:`simtc.hw.wgmma.kernel_source`) is compiled by NVRTC for
sm_90a and launched through simtc.cuda with :func:`simtc.hw.wgmma.run`'s arguments; its 128 x N/2 accumulator
registers must equal the H200's bit for bit. The quick test runs the first case of each (check, N, type, majors);
the slow one every recorded case.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import simtc.cuda as xp
from simtc.hw import wgmma as hw
from simtc.hw.crosscheck import all_gpu_cases
from simtc.hw.recording import digest, read_recording
from simtc.hw.suite import case_key

DATA = Path(__file__).parents[1] / "data" / "h200_crosscheck_seed0.npz"


def run_program(xp, image: np.ndarray, program: hw.WgmmaProgram) -> np.ndarray:
    """:func:`simtc.hw.wgmma.run`'s launch with ``xp`` for cupy: the (128, N/2) float32 registers."""
    size = image.size
    name = hw.kernel_name(program.n, program.dtype, program.a_major, program.b_major)
    fn = xp.RawKernel(hw.kernel_source(program.n, program.dtype, program.a_major, program.b_major), name,
                      options=("-arch=sm_90a",))
    mmas, ends = program.mmas, program.group_ends
    prog = np.zeros(len(mmas), dtype=[("a", "<u8"), ("b", "<u8"), ("sd", "<u4"), ("ge", "<u4")])
    for i, (r, end) in enumerate(zip(mmas, ends, strict=True)):
        prog[i] = (r.a.encode(), r.b_desc.encode(), int(r.scale_d), int(end))
    d_image = xp.asarray(image.view(np.uint32))
    d_prog = xp.asarray(prog.view(np.uint8))
    d_out = xp.zeros(128 * program.n // 2, dtype=xp.float32)
    d_stamps = xp.zeros(max(1, sum(ends)), dtype=xp.uint64)
    fn.max_dynamic_shared_size_bytes = size + 1024
    fn((1,), (128,), (d_image, np.uint32(size // 16), d_prog, np.uint32(len(mmas)), d_out, d_stamps),
       shared_mem=size + 1024)
    return d_out.get().reshape(128, program.n // 2)


@pytest.fixture(scope="module")
def recorded():
    rec = read_recording(DATA)
    return rec, [c for c in all_gpu_cases(rec.seed) if case_key(c) in rec.digests]


def _check(rec, case) -> None:
    got = run_program(xp, case.image, case.program)
    key = case_key(case)
    if key in rec.registers:
        np.testing.assert_array_equal(got.view(np.uint32), rec.registers[key].view(np.uint32), err_msg=case.label)
    else:
        assert digest(got) == rec.digests[key], case.label


def test_one_case_per_form_equals_the_h200(recorded):
    rec, cases = recorded
    first = {}
    for c in cases:
        p = c.program
        first.setdefault((c.check, p.n, p.dtype, p.a_major, p.b_major), c)
    assert len(first) == 24
    assert any(case_key(c) in rec.registers for c in first.values())
    for c in first.values():
        _check(rec, c)


@pytest.mark.slow
def test_every_recorded_case_equals_the_h200(recorded):
    rec, cases = recorded
    assert len(cases) == 284
    for c in cases:
        _check(rec, c)
