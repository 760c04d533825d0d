"""``simtc run flashmla-sm90`` without a FlashMLA checkout (as in CI): the recorded results of the executed kernel
(``tests/data/flashmla_sm90_executed.json``) hold together with the H200 recording they were compared with; the
launch parameters land where the compiled structs have their fields; the MUFU perturbation moves exactly the MUFU
results; the command's usage errors; ``--arg`` with a file that is not ``.npy``."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from simtc.cli import main
from simtc.kernels.flashmla import executed as ex

DATA = Path(__file__).resolve().parents[1] / "data"
RESULTS = DATA / "flashmla_sm90_executed.json"
RECORDING = DATA / "flashmla_h200_sm90.npz"


@pytest.fixture(scope="module")
def results():
    return json.loads(RESULTS.read_text())


@pytest.fixture(scope="module")
def recording():
    from simtc.hw.flashmla import load_recording

    return load_recording(RECORDING)


def _digest(a) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


# ---- the recorded results against the recording -------------------------------------------------------------

def test_results_name_the_recording_they_were_compared_with(results):
    assert results["format"] == "simtc-flashmla-sm90-executed"
    assert results["recording_sha256"] == hashlib.sha256(RECORDING.read_bytes()).hexdigest()
    assert results["flashmla_commit"].startswith("9241ae3")
    assert results["arch"] == "sm_90a" and "--use_fast_math" in results["nvcc_flags"]


def test_num_sm_parts_is_flashmlas_choice_on_the_recorded_h200(recording):
    """``Decode_Sm90_Impl::get_meta`` on the SMs of the device the recording ran on (its meta.json)."""
    import re

    sms = int(re.search(r"(\d+) SMs", recording[0]["device"]).group(1))
    assert sms == ex.H200_SMS
    assert [ex.num_sm_parts(s) for s in (1, 2, 3, 4)] == [132, 66, 44, 33]


def test_results_cover_every_recorded_set_with_its_shapes(results, recording):
    meta, sets = recording
    rows = {r["name"]: r for r in results["sets"]}
    assert list(rows) == meta["sets"]
    for name, inp, (out, lse) in sets:
        r = rows[name]
        assert (r["model"], r["b"], r["s_q"], r["topk"]) == (inp.model.name, inp.b, inp.s_q, inp.topk)
        assert r["o"]["values"] == out.size and r["lse"]["values"] == lse.size
        parts = ex.num_sm_parts(inp.s_q)
        assert r["num_sm_parts"] == parts and np.array(r["sched_meta"]).shape == (parts, 8)
        assert len(r["num_splits"]) == inp.b + 1 and r["num_splits"][0] == 0
        grids = [tuple(x["grid"]) for x in r["launches"]]
        plan = ex.launch_plan(inp)
        assert grids == [plan.sched_grid, plan.splitkv_grid, plan.combine_grid]
        assert r["thread_instructions"] == sum(x["thread_instructions"] for x in r["launches"]) > 0


def test_results_schedule_is_simtcs_schedule_model(results, recording):
    """The scheduler metadata the executed get_mla_metadata_kernel wrote equals simtc's own model of it
    (:func:`simtc.kernels.flashmla.schedule.sched_meta`) on every part that has work; an idle part (begin_req_idx =
    b) returns at once in the split-KV kernel (splitkv_mla.cuh line 144), whatever else it holds."""
    from simtc.kernels.flashmla.schedule import sched_meta

    rows = {r["name"]: r for r in results["sets"]}
    for name, inp, _ in recording[1]:
        got = np.array(rows[name]["sched_meta"])
        tl = None if inp.topk_length is None else inp.topk_length.tolist()
        model = sched_meta(inp.b, inp.topk, ex.num_sm_parts(inp.s_q), tl)
        want = np.array([[m.begin_req, m.end_req, m.begin_block, m.end_block, m.begin_split, int(m.first_split),
                          int(m.last_split)] for m in model])
        busy = want[:, 0] < inp.b
        assert busy.any() and (got[:, 0] == want[:, 0]).all(), name
        assert (got[busy, :7] == want[busy]).all(), name


def test_differences_from_the_h200_are_counted_bounded_and_probed(results, recording):
    """The claims, set by set: identical counts within the values; every differing value counted once, as reached
    by a MUFU perturbation within the H200's measured MUFU error bounds or not; the differences within 2 ulps; a set
    whose every value is identical has the recording's digest; the summary is the sum of the sets."""
    sets = {name: (out, lse) for name, _, (out, lse) in recording[1]}
    total = {}
    for r in results["sets"]:
        out, lse = sets[r["name"]]
        for key, rec in (("o", out), ("lse", lse)):
            c = r[key]
            assert 0 <= c["identical"] <= c["values"]
            differing = c["values"] - c["identical"]
            assert c["differing_mufu_reached"] + c["differing_not_reached"] == differing, (r["name"], key)
            assert c["differing_mufu_reached"] <= c["mufu_reached"] <= c["values"], (r["name"], key)
            assert 0 <= c["max_ulp"] <= 2, (r["name"], key)  # MUFU.EX2/LG2 2 ulps, rcp 1 (tests/ptx/test_alu.py)
            assert (c["max_ulp"] == 0) == (differing == 0)
            digest = r["out_sha256" if key == "o" else "lse_sha256"]
            assert (digest == _digest(rec)) == (differing == 0), (r["name"], key)
            for k in ("values", "identical", "mufu_reached", "differing_mufu_reached", "differing_not_reached"):
                total[f"{key}_{k}"] = total.get(f"{key}_{k}", 0) + c[k]
        assert r["o"]["identical"] >= 0.999 * r["o"]["values"]
        if r["o"]["differing_not_reached"]:
            assert r["o"]["max_ulp"] == 1  # what no perturbation reached is one bf16 ulp
    assert results["summary"] == total


# ---- parameters where the compiled structs have their fields -------------------------------------------------

def _layouts() -> ex.Layouts:
    """A layout as the probe prints it, with offsets chosen here (not FlashMLA's): the packing must follow them."""
    names = {"DecodingSchedMeta": ["begin_req_idx"],
             "GetDecodeSchedMetaParams": ["b", "s_q", "block_size_n", "fixed_overhead_num_blocks", "topk",
                                          "extra_topk", "topk_length", "extra_topk_length", "seqlens_k_ptr",
                                          "tile_scheduler_metadata_ptr", "num_splits_ptr", "num_sm_parts", "stream"],
             "SparseAttnDecodeParams": [], "CombineParams": []}
    structs = {}
    for s, fields in names.items():
        off, table = 8, {}
        for f in reversed(fields):  # reversed order and a gap: nothing may rely on declaration order
            table[f] = off
            off += 8
        structs[s] = {"sizeof": off, "alignof": 8, "fields": table}
    tma = {"sizeof": 512, "alignof": 128, "tma_Q_descriptor": 128, "tensor_map_o": 384, "bytes": "ab" * 512}
    text = json.dumps({**structs, "TmaParams": tma, "tma_Q_encode": {"calls": 1}, "ModelType": {"V32": 0,
                                                                                                  "MODEL1": 1},
                       "SharedMemoryPlan": {"sizeof": 1}})
    return ex.Layouts.from_json(text)


def test_params_are_packed_at_the_compiled_offsets(recording):
    lay = _layouts()
    _, inp, _ = recording[1][1]
    raw = ex.sched_params(lay, inp, topk_length=0, meta=0x7F00_0000_1000, splits=0x7F00_0000_2000, parts=66)
    f = lay.structs["GetDecodeSchedMetaParams"]["fields"]
    assert len(raw) == lay.size("GetDecodeSchedMetaParams")
    assert struct.unpack_from("<i", raw, f["b"])[0] == inp.b and struct.unpack_from("<i", raw, f["topk"])[0] == 128
    assert struct.unpack_from("<i", raw, f["block_size_n"])[0] == 64
    assert struct.unpack_from("<i", raw, f["fixed_overhead_num_blocks"])[0] == 5
    assert struct.unpack_from("<Q", raw, f["tile_scheduler_metadata_ptr"])[0] == 0x7F00_0000_1000
    assert struct.unpack_from("<i", raw, f["num_sm_parts"])[0] == 66
    assert raw[:8] == bytes(8)  # the gap the layout left
    q, o = b"q" * 128, b"o" * 128
    tp = ex.tma_params(lay, q, o)
    assert tp[128:256] == q and tp[384:512] == o and tp[:128] == bytes.fromhex("ab" * 128)


def test_o_tensor_map_is_one_the_driver_rules_accept(recording):
    from simtc.ptx.tensor_map import decode, tensor_map

    _, inp, _ = recording[1][1]
    tm = decode(tensor_map(**ex.o_tensor_map_args(inp, 0x7F00_0000_0000)))
    assert tm.rank == 5 and tm.box == (64, 64, 8, 1, 1) and tm.swizzle == "128B"
    assert tm.dims == (64, 64, 8, inp.s_q, inp.b) and tm.strides == (1024, 128, 64 * 1024, inp.s_q * 64 * 1024)


def test_combine_instance_is_the_switch():
    assert [ex.combine_instance(n) for n in (1, 32, 33, 66, 132, 160)] == [32, 32, 64, 96, 160, 160]
    with pytest.raises(Exception, match="160"):
        ex.combine_instance(161)


def test_ulp_distance_crosses_zero():
    pos = np.array([0x0001], np.uint16)
    neg = np.array([0x8001], np.uint16)
    assert int(ex.ulp_distance(pos, neg, 16)[0]) == 2
    c = ex.compare_bits(np.array([0x3F80, 0x3F80], np.uint16), np.array([1.0, np.inf], np.float32),
                        np.array([0x3F80, 0x3F82], np.uint16), np.array([1.0, np.inf], np.float32))
    assert (c.o_identical, c.o_max_ulp, c.lse_identical, c.lse_max_ulp) == (1, 2, 2, 0)


# ---- the MUFU perturbation moves MUFU results, by whole ulps, and nothing else ----------------------------------

_PTX = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 p_in, .param .u64 p_out)
{
  .reg .b32 %r<4>;
  .reg .f32 %f<6>;
  .reg .b64 %rd<8>;
  .reg .pred %p<2>;
  ld.param.u64 %rd1, [p_in];
  ld.param.u64 %rd2, [p_out];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.f32 %f1, [%rd4];
  setp.lt.u32 %p1, %r1, 16;
  mov.f32 %f2, 0f40000000;
  @%p1 ex2.approx.ftz.f32 %f2, %f1;
  add.f32 %f3, %f1, %f1;
  mul.wide.u32 %rd5, %r1, 8;
  add.s64 %rd6, %rd2, %rd5;
  st.global.v2.f32 [%rd6], {%f2, %f3};
  ret;
}
"""


def _run_ptx(tmp_path, text: str, x: np.ndarray) -> np.ndarray:
    import simtc.cuda as xp

    path = tmp_path / f"k{hashlib.sha256(text.encode()).hexdigest()[:8]}.ptx"
    path.write_text(text)
    k = xp.RawModule(path=str(path)).get_function("k")
    dx, dy = xp.asarray(x), xp.zeros((32, 2), xp.float32)
    k((1,), (32,), (dx, dy))
    return dy.get()


@pytest.mark.parametrize("ulps", [1, -1, 2])
def test_perturbation_moves_each_mufu_result_by_ulps(tmp_path, ulps):
    x = np.linspace(-3, 3, 32).astype(np.float32)
    x[3] = -np.inf  # ex2(-inf) = 0: not a finite normal, stays
    text, n = ex.perturb_mufu(_PTX, ulps)
    assert n == 1
    base, moved = _run_ptx(tmp_path, _PTX, x), _run_ptx(tmp_path, text, x)
    bits0, bits1 = base[:, 0].view(np.uint32).astype(np.int64), moved[:, 0].view(np.uint32).astype(np.int64)
    lanes = np.arange(32)
    mufu = (lanes < 16) & (lanes != 3)
    sign = np.where(bits0 & 2, 1, -1)  # the step's sign: bit 1 of the unperturbed result
    assert (bits1[mufu] - bits0[mufu] == sign[mufu] * ulps).all()
    assert (sign[mufu] == 1).any() and (sign[mufu] == -1).any()
    assert (bits1[~mufu] == bits0[~mufu]).all()  # the guard's false lanes keep 2.0; ex2(-inf) keeps 0
    assert (moved[:, 1] == base[:, 1]).all()  # an instruction that is no MUFU is untouched


_LG2 = _PTX.replace("ex2.approx.ftz.f32 %f2, %f1;", "lg2.approx.ftz.f32 %f2, %f1;")


@pytest.mark.parametrize("ulps", [1, -2])
def test_lg2_below_one_moves_by_its_absolute_error(tmp_path, ulps):
    """lg2's error is absolute below 1 in magnitude (2**-22, tests/ptx/test_alu.py): there the step is ulps * 2**-22,
    above it ulps in the last place."""
    x = np.concatenate([np.linspace(1.1, 1.9, 8), np.linspace(3, 100, 8), np.ones(16)]).astype(np.float32)
    text, n = ex.perturb_mufu(_LG2, ulps)
    assert n == 1
    base, moved = _run_ptx(tmp_path, _LG2, x), _run_ptx(tmp_path, text, x)
    r0, r1 = base[:, 0], moved[:, 0]
    bits0 = r0.view(np.uint32).astype(np.int64)
    sign = np.where(bits0 & 2, 1, -1)
    small = np.arange(32) < 8
    large = (np.arange(32) >= 8) & (np.arange(32) < 16)
    assert np.allclose(r1[small].astype(np.float64) - r0[small], sign[small] * ulps * 2.0**-22, rtol=1e-6, atol=0)
    assert (r1[large].view(np.uint32).astype(np.int64) - bits0[large] == sign[large] * ulps).all()
    assert (r1[16:] == r0[16:]).all()  # lg2(1) = 0 is no normal number: it stays; the guard's false lanes keep 2


# ---- the command's usage --------------------------------------------------------------------------------------

def _err(argv, capsys) -> str:
    assert main(["run", *argv]) == 2
    return capsys.readouterr().err


def test_flashmla_sm90_needs_a_checkout_and_inputs(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("SIMTC_FLASHMLA_DIR", raising=False)
    assert "needs a FlashMLA checkout" in _err(["flashmla-sm90", "--inputs", "x.npz"], capsys)
    assert "needs --inputs" in _err(["flashmla-sm90", "--flashmla", str(tmp_path)], capsys)
    err = _err(["flashmla-sm90", "--flashmla", str(tmp_path), "--inputs", "x.npz", "--grid", "1"], capsys)
    assert "--grid" in err and "not for flashmla-sm90" in err


def test_a_file_run_refuses_flashmla_options_and_needs_its_own(capsys, tmp_path):
    va = str(Path(__file__).resolve().parents[2] / "examples" / "vector_add.cu")
    err = _err([va, "--grid", "1", "--block", "32", "--out", str(tmp_path), "--inputs", "x.npz"], capsys)
    assert "--inputs go with simtc run flashmla-sm90" in err
    err = _err([va, "--block", "32"], capsys)
    assert "--grid, --out are required" in err and "[rule:" in err


def test_arg_with_a_file_that_is_not_npy_names_the_rule(capsys, tmp_path):
    va = str(Path(__file__).resolve().parents[2] / "examples" / "vector_add.cu")
    raw = tmp_path / "a.bin"
    raw.write_bytes(bytes(16))
    np.savez(tmp_path / "b.npz", x=np.zeros(3))
    for value, what in ((str(raw), "a file that is not .npy"), (str(tmp_path / "b.npz"), "a file that is not .npy"),
                        ("missing.dat", "not a number"), (str(tmp_path), "a directory")):
        err = _err([va, "--grid", "1", "--block", "32", "--out", str(tmp_path), "--arg", f"a={value}"], capsys)
        assert what in err and "VALUE is a .npy array file" in err and "or a scalar number" in err, err
