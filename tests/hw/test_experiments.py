"""The base-offset experiment can tell its hypotheses apart (so a GPU run decides between them)."""

import numpy as np
import pytest

from simtc.errors import DescriptorError
from simtc.hw.experiments import base_offset_cases, predict_base_offset
from simtc.smem import SmemDescriptor, SwizzleMode, descriptor_addresses
from simtc.smem.read import BASE_OFFSET_HYPOTHESES, swizzle_with_base


def test_hypotheses_agree_when_aligned_and_base_offset_is_zero():
    off = np.arange(0, 8192, 16)
    for mode in (SwizzleMode.SW32, SwizzleMode.SW64, SwizzleMode.SW128):
        outs = [swizzle_with_base(4096, off, mode, 0, h) for h in BASE_OFFSET_HYPOTHESES]
        assert all(np.array_equal(outs[0], o) for o in outs[1:])


def test_every_pair_of_hypotheses_is_separated_by_some_run():
    cases = base_offset_cases()
    assert len(cases) == 12
    separated = set()
    for case in cases:
        preds = {h: predict_base_offset(case, h) for h in BASE_OFFSET_HYPOTHESES}
        for h1 in preds:
            for h2 in preds:
                if h1 < h2 and not np.array_equal(preds[h1], preds[h2]):
                    separated.add((h1, h2))
    assert len(separated) == 3


def test_default_reading_is_the_measured_hypothesis():
    d = SmemDescriptor(start=1280, lbo=16, sbo=1024, layout_type="SW128", base_offset=2, arch="sm90")
    assert np.array_equal(descriptor_addresses(d, major="K", dtype="bf16", rows=8),
                          descriptor_addresses(d, major="K", dtype="bf16", rows=8, base_offset_hypothesis="subtract"))
    with pytest.raises(DescriptorError, match="unknown base-offset hypothesis"):
        descriptor_addresses(d, major="K", dtype="bf16", rows=8, base_offset_hypothesis="guess")
