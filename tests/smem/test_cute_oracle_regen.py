"""The CuTe shared-memory oracle data file: sane, and reproducible from CuTe.

``tests/data/cute_smem_layouts.json.gz`` holds byte offsets and matrix
descriptors computed by NVIDIA's CuTe C++ (see tests/data/README.md).  The
first tests check the committed file against golden values worked out by
hand from PTX ISA 9.0 §9.7.16.4.1 Table 40 / §9.7.15.5.1.2.2 (descriptor
fields) and CuTe's byte swizzle (CUTLASS include/cute/swizzle.hpp);
they need nothing but the file.  The last test rebuilds the file from CuTe
with g++ and asserts the data is unchanged; it is skipped, with the reason,
when the nvidia-cutlass headers, g++ or the CUDA headers are missing.

These tests deliberately do not import simtc.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
DATA_FILE = TESTS / "data" / "cute_smem_layouts.json.gz"
REGEN_SCRIPT = TESTS / "oracle" / "regen_smem.py"


def _load_regen_module():
    name = "_simtc_tests_regen_smem"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REGEN_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses need the module registered
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def data() -> dict:
    with gzip.open(DATA_FILE, "rt") as fh:
        return json.load(fh)


def _case(data, dtype, major, swizzle, rows, cols, k_slice=0):
    found = [
        c
        for c in data["cases"]
        if (c["dtype"], c["major"], c["swizzle"], c["rows"], c["cols"], c["k_slice"])
        == (dtype, major, swizzle, rows, cols, k_slice)
    ]
    assert len(found) == 1, f"expected one {dtype} {major} {swizzle} {rows}x{cols} k_slice={k_slice} case"
    return found[0]


def test_schema_and_size(data):
    assert data["cutlass_version"].startswith("4.2.0")
    assert len(data["cases"]) >= 150
    assert DATA_FILE.stat().st_size < 3_000_000
    dtypes = {c["dtype"] for c in data["cases"]}
    assert dtypes == {"e4m3", "bf16", "fp16", "tf32"}
    for c in data["cases"]:
        n = c["rows"] * c["cols"]
        eb = c["elem_bytes"]
        # a dense tile: every element at a distinct multiple of the element size
        assert sorted(c["offsets"]) == list(range(0, n * eb, eb)), c["cute_layout"]
        for api in ("umma", "gmma"):
            desc, rejected = c[f"{api}_desc"], c[f"{api}_desc_rejected"]
            if c["desc_skipped"] is not None:
                assert desc is None and rejected is None
            else:
                assert (desc is None) == (rejected is not None)


def test_bf16_k_sw128_row1_offsets(data):
    """CuTe C++ golden: bf16 K-major SW128, row 1, columns 0, 8, ..., 56."""
    c = _case(data, "bf16", "K", "SW128", 64, 64)
    row1 = [c["offsets"][1 * c["cols"] + k] for k in range(0, 64, 8)]
    assert [b // 2 for b in row1] == [72, 64, 88, 80, 104, 96, 120, 112]
    assert row1 == [144, 128, 176, 160, 208, 192, 240, 224]


@pytest.mark.parametrize(
    ("swizzle", "umma", "gmma"),
    [
        ("SW128", "0x4000404000010000", "0x4000004000010000"),
        ("SW64", "0x8000402000010000", "0x8000002000010000"),
        ("SW32", "0xc000401000010000", "0xc000001000010000"),
    ],
)
def test_bf16_k_major_64x64_descriptors(data, swizzle, umma, gmma):
    c = _case(data, "bf16", "K", swizzle, 64, 64)
    assert c["umma_desc"] == umma
    assert c["gmma_desc"] == gmma


def test_sm100_is_sm90_plus_version_bit(data):
    """An SM90 descriptor plus bit 46 is the SM100 one (no 32B-atomic mode): PTX ISA 9.0 §9.7.16.4.1 Table 40
    (bits 46-48 fixed 0b001; layout codes 2/4/6 at bits 61-63) against §9.7.15.5.1.2.2 (codes 1/2/3 at 62-63)."""
    both = [c for c in data["cases"] if c["umma_desc"] and c["gmma_desc"]]
    assert len(both) > 100
    for c in both:
        assert int(c["umma_desc"], 16) == int(c["gmma_desc"], 16) | (1 << 46), c


def test_gmma_rejects_sw128_32b(data):
    rows = [c for c in data["cases"] if c["swizzle"] == "SW128_32B" and c["desc_skipped"] is None]
    assert rows
    for c in rows:
        assert c["gmma_desc"] is None
        assert "static_assert" in c["gmma_desc_rejected"]
        assert c["umma_desc"] is not None
        assert (int(c["umma_desc"], 16) >> 61) == 1  # SWIZZLE_128B_BASE32B


def test_k_stepping_bf16_sw128(data):
    """Slice 1 is 32 B further (+2 in the 16-byte start field); slice 4 the next K atom (+16 rows x 128 B)."""
    base = int(_case(data, "bf16", "K", "SW128", 16, 128, 0)["umma_desc"], 16)
    assert int(_case(data, "bf16", "K", "SW128", 16, 128, 1)["umma_desc"], 16) == base + 2
    assert int(_case(data, "bf16", "K", "SW128", 16, 128, 4)["umma_desc"], 16) == base + 16 * 128 // 16


@pytest.mark.slow
@pytest.mark.oracle
def test_regeneration_matches_committed_file(data):
    """Rebuild from CuTe and compare.

    A full rebuild costs g++ about 50 CPU-seconds, so by default every 3rd
    case is rebuilt (all dtypes and layouts still appear);
    SIMTC_ORACLE_FULL=1 rebuilds everything, as does
    ``python tests/oracle/regen_smem.py --check``.
    """
    regen = _load_regen_module()
    try:
        toolchain = regen.Toolchain.locate()
    except regen.ToolchainMissing as exc:
        pytest.skip(f"cannot rebuild the CuTe oracle: {exc}")
    step = 1 if os.environ.get("SIMTC_ORACLE_FULL") == "1" else 3
    fresh = regen.generate(toolchain, sample_every=step)
    assert len(fresh["cases"]) == len(data["cases"][::step])
    data_diffs, _meta_diffs = regen.compare(fresh, data)
    assert data_diffs == [], "\n".join(data_diffs[:20])
