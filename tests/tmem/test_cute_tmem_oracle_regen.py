"""The CuTe Tensor Memory oracle data file: sane, and reproducible from CuTe.

``tests/data/cute_tmem.json.gz`` holds, derived by NVIDIA's CuTe C++ (tests/oracle/
cute_tmem_oracle.cpp; schema in tests/data/README_tmem.md):

* every tcgen05.ld / tcgen05.st thread/register -> TMEM (lane, column) map,
* the tcgen05.cp (UTCCP) source row -> TMEM lane/column maps,
* UMMA accumulator (and TS A-operand) TMEM fragment placements.

The always-run tests check the committed file against closed-form formulas written out below (the
tcgen05.ld/st shapes of PTX ISA 9.0 §9.7.16.8.3, the tcgen05.cp shapes of §9.7.16.9.2, the accumulator
layouts of §9.7.16.10.5 and the TS A operand of §9.7.16.10.9; PTX draws these maps as figures, the
formulas are read from them and from the CUTLASS traits) -- two encodings that must agree.  The ``oracle``
test rebuilds the file from the CuTe headers with g++ and asserts nothing changed; it is skipped,
with the reason, when the nvidia-cutlass headers, g++ or the CUDA headers are missing.

These tests deliberately do not import simtc.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
DATA_FILE = TESTS / "data" / "cute_tmem.json.gz"
REGEN_SCRIPT = TESTS / "oracle" / "regen_tmem.py"

LDST_NAME = re.compile(r"^SM100_TMEM_(LOAD|STORE)_(32dp32b|16dp64b|16dp128b|16dp256b|16dp32b)(\d+)x(_16b)?$")
MAX_NUM = {"32dp32b": 128, "16dp64b": 128, "16dp128b": 64, "16dp256b": 32, "16dp32b": 128}
REGS_PER_NUM = {"32dp32b": 1, "16dp64b": 1, "16dp128b": 2, "16dp256b": 4, "16dp32b": 1}


def _load_regen_module():
    name = "_simtc_tests_regen_tmem"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REGEN_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def data() -> dict:
    if not DATA_FILE.exists():
        pytest.skip(f"{DATA_FILE} is absent: run tests/oracle/regen_tmem.py")
    with gzip.open(DATA_FILE, "rt", encoding="utf-8") as fh:
        return json.load(fh)


# --------------------------------------------------------------------------------------------
# File format
# --------------------------------------------------------------------------------------------


def test_file_is_deterministic_gzip_of_sorted_compact_json():
    raw = DATA_FILE.read_bytes()
    assert raw[:2] == b"\x1f\x8b"
    assert raw[4:8] == b"\x00\x00\x00\x00", "gzip mtime must be 0"
    text = gzip.decompress(raw)
    obj = json.loads(text)
    assert json.dumps(obj, sort_keys=True, separators=(",", ":")).encode() == text
    assert len(raw) < 3_000_000


def test_schema_and_counts(data):
    assert data["schema_version"] == 1
    assert data["cutlass_version"].startswith("4.2.0")
    assert data["tmem_dp_b"] == 1 << 21
    assert len(data["ldst"]) == 148
    assert len(data["utccp"]) == 6
    assert len(data["mma_frg"]) >= 20
    assert data["make_tmem_copy_xcheck"], "the make_tmem_copy cross-check must have run"


# --------------------------------------------------------------------------------------------
# tcgen05.ld / tcgen05.st  (PTX ISA 9.0 §9.7.16.8.3)
# --------------------------------------------------------------------------------------------


def _ptx_ldst_map(shape: str, t: int, i: int, imm: int) -> tuple[int, int]:
    """tcgen05.ld/st shapes (PTX ISA 9.0 §9.7.16.8.3): thread t, register i -> (lane offset, logical column
    offset)."""
    if shape == "32dp32b":
        return t, i
    if shape == "16dp64b":
        return t // 4 + 8 * (t % 2), 2 * i + (t // 2) % 2
    if shape == "16dp128b":
        return t // 4 + 8 * (i % 2), 4 * (i // 2) + t % 4
    if shape == "16dp256b":
        return t // 4 + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * (t % 4) + i % 2
    if shape == "16dp32b":
        return t % 16, (i if t < 16 else imm + i)
    raise AssertionError(shape)


def test_every_ldst_form_is_present(data):
    seen = set()
    for e in data["ldst"]:
        m = LDST_NAME.match(e["op"])
        assert m, e["op"]
        d, shape, num, pack = m.group(1), m.group(2), int(m.group(3)), bool(m.group(4))
        assert (e["dir"], e["cute_shape"], e["num"], e["pack16"]) == (d.lower(), shape, num, pack)
        seen.add((d, shape, num, pack))
    want = {
        (d, s, 1 << k, p)
        for d in ("LOAD", "STORE")
        for s, mx in MAX_NUM.items()
        for k in range(mx.bit_length())
        for p in (False, True)
    }
    assert seen == want


def test_ldst_maps_match_the_ptx_formulas(data):
    """All 148 ops, every thread and register: CuTe's traits reproduce ``_ptx_ldst_map``.

    Unpacked: one 32-bit cell per register.  Packed (.pack::16b / .unpack::16b): the table's
    logical column c becomes physical columns 2c (register bits 0-15) and 2c+1 (bits 16-31).
    .16x32bx2: the immediate is num logical columns (CuTe passes num, or 2*num when packed).
    """
    for e in data["ldst"]:
        shape, num, pack = e["cute_shape"], e["num"], e["pack16"]
        assert e["regs_per_thread"] == REGS_PER_NUM[shape] * num <= 128, e["op"]
        assert len(e["map"]) == 32
        for t, regs in enumerate(e["map"]):
            assert len(regs) == e["regs_per_thread"], e["op"]
            for i, pieces in enumerate(regs):
                lane, col = _ptx_ldst_map(shape, t, i, num)
                if pack:
                    assert pieces == [[lane, 2 * col, 0], [lane, 2 * col + 1, 1]], (e["op"], t, i)
                else:
                    assert pieces == [[lane, col, None]], (e["op"], t, i)


def test_worked_example_16x256b_x1(data):
    """PTX ISA 9.0 §9.7.16.8.3: .16x256b.x1 is the mma.sync C fragment: r0, r1 row t/4 at columns 2(t%4), +1;
    r2, r3 row +8."""
    e = next(x for x in data["ldst"] if x["op"] == "SM100_TMEM_LOAD_16dp256b1x")
    assert e["map"][5] == [[[1, 2, None]], [[1, 3, None]], [[9, 2, None]], [[9, 3, None]]]
    e = next(x for x in data["ldst"] if x["op"] == "SM100_TMEM_LOAD_16dp256b1x_16b")
    assert e["cols_spanned"] == 16  # packed x1 spans 16 physical columns


def test_stores_are_loads_reversed(data):
    by = {(e["dir"], e["op"].split("_", 3)[3]): e for e in data["ldst"]}
    for (d, suffix), ld in by.items():
        if d != "load":
            continue
        st = by[("store", suffix)]
        assert st["map"] == ld["map"], suffix
        assert st["cute"]["src_layout"] == ld["cute"]["dst_layout"]
        assert st["cute"]["dst_layout"] == ld["cute"]["src_layout"]
        assert st["cute"]["val_id"] == ld["cute"]["val_id"]


def test_ldst_is_a_bijection_onto_its_cells(data):
    """Within a warp, no TMEM cell (or packed cell) is touched twice; lanes/columns spanned add up."""
    for e in data["ldst"]:
        cells = [tuple(p) for regs in e["map"] for pieces in regs for p in pieces]
        assert len(cells) == len(set(cells)), e["op"]
        lanes = {c[0] for c in cells}
        cols = {c[1] for c in cells}
        assert len(lanes) == e["lanes_spanned"] == (32 if e["cute_shape"] == "32dp32b" else 16)
        assert len(cols) == e["cols_spanned"]
        assert len(cells) == len(lanes) * len(cols), e["op"]  # a full rectangle


def test_ptx_and_immediate_from_headers(data):
    for e in data["ldst"]:
        verb = "ld" if e["dir"] == "load" else "st"
        pk = (".pack::16b" if verb == "ld" else ".unpack::16b") if e["pack16"] else ""
        shape = {
            "32dp32b": "32x32b",
            "16dp64b": "16x64b",
            "16dp128b": "16x128b",
            "16dp256b": "16x256b",
            "16dp32b": "16x32bx2",
        }[e["cute_shape"]]
        assert e["shape"] == shape
        assert e["ptx"] == f"tcgen05.{verb}.sync.aligned.{shape}.x{e['num']}{pk}.b32"
        if e["cute_shape"] == "16dp32b":
            phys = e["num"] * (2 if e["pack16"] else 1)
            assert e["imm_half_splitoff"] == phys
            # threads 16..31 start exactly at the physical immediate
            assert min(p[1] for regs in e["map"][16:] for pieces in regs for p in pieces) == phys
        else:
            assert e["imm_half_splitoff"] is None


# --------------------------------------------------------------------------------------------
# tcgen05.cp  (PTX ISA 9.0 §9.7.16.9.2)
# --------------------------------------------------------------------------------------------

CP_TABLE = {
    # shape: (rows, 32-bit columns per row, row -> lanes)
    "128x256b": (128, 8, lambda r: [r]),
    "128x128b": (128, 4, lambda r: [r]),
    "64x128b.warpx2::02_13": (64, 4, lambda r: [r, r + 64]),
    "64x128b.warpx2::01_23": (64, 4, lambda r: [r, r + 32] if r < 32 else [r + 32, r + 64]),
    "32x128b.warpx4": (32, 4, lambda r: [r, r + 32, r + 64, r + 96]),
    "4x256b": (4, 8, lambda r: [32 * r]),
}


def test_utccp_matches_the_ptx_table(data):
    assert {e["shape"] for e in data["utccp"]} == set(CP_TABLE)
    for e in data["utccp"]:
        rows, cols, lanes = CP_TABLE[e["shape"]]
        assert (e["src_rows"], e["src_chunks_per_row"]) == (rows, cols)
        want = sorted([r, k, lane, k] for r in range(rows) for k in range(cols) for lane in lanes(r))
        assert e["entries"] == want, e["shape"]
        assert e["ptx"] == f"tcgen05.cp.cta_group::1.{e['shape']}"
    refresh = next(e for e in data["utccp"] if e["shape"] == "4x256b")
    assert refresh["src_logical_rows"] == [0, 32, 64, 96]


# --------------------------------------------------------------------------------------------
# UMMA TMEM fragments  (PTX ISA 9.0 §9.7.16.10.5, §9.7.16.10.9)
# --------------------------------------------------------------------------------------------


def _expected_acc(e, m, n):
    """Layouts D-G (PTX ISA 9.0 §9.7.16.10.5), per CTA, at (L0, C0) = (0, 0); returns (cta, lane, col)."""
    big_n, letter = e["n"], e["layout"]
    if letter == "D":
        return 0, m, n
    if letter == "F":
        return 0, 32 * (m // 16) + m % 16, n
    if letter == "E":
        return 0, m + 64 * (n // (big_n // 2)), n % (big_n // 2)
    if letter == "G":
        return 0, m + 32 * (n // (big_n // 4)), n % (big_n // 4)
    if letter == "A":
        cta, ml = divmod(m, 128)
        return cta, ml, n
    if letter == "B":
        cta, ml = divmod(m, 64)
        return cta, ml + 64 * (n // (big_n // 2)), n % (big_n // 2)
    raise AssertionError(letter)


def test_layout_letters_present(data):
    accs = [e for e in data["mma_frg"] if e["kind"] == "acc"]
    assert {e["layout"] for e in accs} == {"A", "B", "D", "E", "F", "G"}
    ws = {(e["m"], e["n"]) for e in accs if e["ws"]}
    assert ws == {(m, n) for m in (32, 64, 128) for n in (64, 128, 256)}
    dense1 = {(e["m"], e["n"]) for e in accs if not e["ws"] and e["cta_group"] == 1 and e["tile_m"] == e["m"]}
    assert {(128, n) for n in (16, 64, 128, 256)} | {(64, n) for n in (8, 16, 64, 128, 256)} <= dense1


def test_accumulator_fragments_match_the_ptx_layouts(data):
    for e in (x for x in data["mma_frg"] if x["kind"] == "acc"):
        assert len(e["map"]) == e["rows"] == e["tile_m"] and len(e["map"][0]) == e["cols"] == e["n"]
        for m in range(e["rows"]):
            block, ml = divmod(m, e["m"])
            for n in range(e["n"]):
                cta, lane, col = _expected_acc(e, ml, n)
                if block:  # several M=64 atoms in one tile (CUTLASS TmemAllocMode)
                    if e["alloc_mode"] == "Interleaved":
                        lane, col = lane + 16 * (block % 2), col + e["n"] * (block // 2)
                    else:
                        col += e["n"] * block
                got = e["map"][m][n]
                want = [cta, lane, col] if e["cta_group"] == 2 else [lane, col]
                assert got == want, (e["layout"], e["m"], e["n"], e["tile_m"], e["alloc_mode"], m, n)


def test_layout_f_interleaving_uses_lane_alignment_16(data):
    e = next(
        x
        for x in data["mma_frg"]
        if x["kind"] == "acc" and x["layout"] == "F" and x["tile_m"] == 256 and x["alloc_mode"] == "Interleaved"
    )
    lanes = {e["map"][m][n][0] for m in range(64, 128) for n in range(e["n"])}
    assert lanes == {q * 32 + 16 + i for q in range(4) for i in range(16)}
    assert {e["map"][m][n][1] for m in range(64, 128) for n in range(e["n"])} == set(range(e["n"]))


def test_a_operand_in_tmem_packs_two_per_column(data):
    """PTX ISA 9.0 §9.7.16.10.9: A[m][k] at column k//2, even k in the low half; lanes as the D layout (D or F)."""
    recs = [x for x in data["mma_frg"] if x["kind"] == "a_operand"]
    assert {x["m"] for x in recs} == {64, 128}
    for e in recs:
        for m in range(e["rows"]):
            lane = m if e["m"] == 128 else 32 * (m // 16) + m % 16
            for k in range(e["cols"]):
                assert e["map"][m][k] == [lane, k // 2, k % 2], (e["m"], m, k)


def test_cross_checks_were_run(data):
    """The C++ compared the cheap traits path with CuTe's user-facing API on a sample."""
    xc = {x["op"] for x in data["make_tmem_copy_xcheck"]}
    shapes = {LDST_NAME.match(o).group(2) for o in xc}
    assert shapes == set(MAX_NUM)
    assert any(o.endswith("_16b") for o in xc) and any(not o.endswith("_16b") for o in xc)
    checked = [x for x in data["mma_frg"] if x["partition_fragment_checked"]]
    assert {(x["kind"], x["cta_group"]) for x in checked} >= {("acc", 1), ("acc", 2), ("a_operand", 1)}


# --------------------------------------------------------------------------------------------
# Regeneration from CuTe
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.oracle
def test_regeneration_matches_committed_file(data):
    """Rebuild from the CuTe headers (g++, three translation units, ~35 CPU-seconds) and compare.

    Same as ``python tests/oracle/regen_tmem.py --check``.
    """
    regen = _load_regen_module()
    try:
        regen.find_cutlass_include()
        regen.find_cuda_include()
        regen.find_cxx()
    except regen.OracleUnavailable as exc:
        pytest.skip(f"cannot rebuild the CuTe TMEM oracle: {exc}")
    fresh = regen.generate()
    diffs = regen.diff_summary(fresh, data)
    assert diffs == [], "\n".join(diffs)
