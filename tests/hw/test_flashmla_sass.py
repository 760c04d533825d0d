"""FlashMLA's SM100 head64 SASS (recorded offline from a FlashMLA build) vs the replay Program's counts.

``tests/data/flashmla_sm100_sass.json`` holds the code-site counts of the V32 and MODEL1 instantiations
built for sm_100a and disassembled (tests/data/README_flashmla.md). The Program's counts are recomputed here
from :func:`simtc.kernels.flashmla.head64.head64_program`; no build needed. With ``SIMTC_FLASHMLA_DIR`` set to
a FlashMLA checkout (and nvcc, nvdisasm present) the build itself is checked too.
"""

import json
import os
from pathlib import Path

import pytest

from simtc.cli import main
from simtc.errors import SimtcError
from simtc.hw import flashmla as fm

DATA = Path(__file__).parents[1] / "data" / "flashmla_sm100_sass.json"


@pytest.fixture(scope="module")
def recorded():
    return json.loads(DATA.read_text())


def test_recorded_table_is_the_programs_table(recorded):
    assert recorded["flashmla_commit"] == "9241ae3ef9bac614dd25e45e507e089f888280e0"
    assert recorded["arch"] == "sm_100a"
    assert recorded["rows"] == fm.sass_table(recorded["sass"])  # Program counts recomputed from the builders


def test_per_block_tensor_core_and_tma_counts_agree(recorded):
    for name in ("v32", "model1"):
        prog = fm.program_static_counts(name)
        sass = recorded["sass"][name]
        for k in ("UTCHMMA.WS", "UTCCP.T.S", "UTCBAR", "UTMALDG.2D.GATHER4", "UTMALDG.4D+5D", "UTMASTG.4D",
                  "STTM.x64", "FENCE.VIEW.ASYNC.T", "MUFU.EX2"):
            assert sass[k] == prog["static"][k], (name, k)
    # one code site per MMA of a block: the block loop is not unrolled (kernel.cuh lines 530-584: 18 + 8, 16 + 8)
    assert fm.program_static_counts("v32")["per_block"]["UTCHMMA.WS"] == 26
    assert fm.program_static_counts("model1")["per_block"]["UTCHMMA.WS"] == 24


def test_every_difference_is_explained(recorded):
    diffs = {(r["model"], r["instruction"]): r["difference"] for r in recorded["rows"] if r["difference"]}
    assert diffs == {(m, k): d for m in ("v32", "model1")
                     for k, d in (("UBLKCP.G.S", 16), ("LDTM.x32", 2), ("LDTM.x64", 4))}
    for r in recorded["rows"]:
        assert (r["note"] != "") == (r["difference"] != 0)


def test_v32_counts_match_an_earlier_disassembly(recorded):
    # the counts of an earlier, independent disassembly of the V32 instantiation (sm_100a, CUDA 13.0)
    v = recorded["sass"]["v32"]
    got = (v["UTCHMMA.WS"], v["UTCCP.T.S"], v["UTCBAR"], v["UTMALDG.2D.GATHER4"], v["LDTM.x32"] + v["LDTM.x64"],
           v["STTM.x64"], v["UTMASTG.4D"], v["UBLKCP.G.S"], v["FENCE.VIEW.ASYNC.T"])
    assert got == (26, 18, 3, 48, 16, 4, 8, 16, 4)


def test_checkout_errors(tmp_path):
    with pytest.raises(SimtcError, match="no such directory"):
        fm.find_checkout(tmp_path / "missing")
    with pytest.raises(SimtcError, match="not a FlashMLA checkout") as e:
        fm.find_checkout(tmp_path)
    assert "csrc/sm90/decode/sparse_fp8/instantiations/v32_persistent_h64.cu" in str(e.value)
    for rel in (*fm.SM90_SOURCES.values(), *fm.SM100_SOURCES.values(), "csrc/params.h"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    with pytest.raises(SimtcError, match="no CUTLASS/CuTe headers"):
        fm.find_checkout(tmp_path, cutlass=tmp_path / "nowhere")
    with pytest.raises(SimtcError, match="not a simtc FlashMLA build folder"):
        fm.load_build(tmp_path)


def test_cli_refuses_misuse(tmp_path, capsys):
    assert main(["crosscheck", "--cutlass", str(tmp_path)]) == 2
    assert "--cutlass needs --flashmla" in capsys.readouterr().err
    assert main(["crosscheck", "--flashmla", str(tmp_path / "nope")]) == 2
    assert "no such directory" in capsys.readouterr().err


@pytest.mark.skipif(not os.environ.get("SIMTC_FLASHMLA_DIR"), reason="set SIMTC_FLASHMLA_DIR to a FlashMLA checkout")
def test_build_from_a_checkout(tmp_path, recorded):
    co = fm.find_checkout(os.environ["SIMTC_FLASHMLA_DIR"])
    b = fm.build(co, tmp_path)
    rep = fm.build_report(b)
    assert rep["build_ok"] and rep["sass_ok"]
    if co.commit == recorded["flashmla_commit"]:
        assert rep["sass_table"] == recorded["rows"]
