"""FlashMLA's own input/output formats (simtc.kernels.flashmla.io): layouts, quantization, the round trip
make -> replay -> save-outputs -> load, and every bad-file rule."""

import math

import numpy as np
import pytest

from simtc.kernels.flashmla import io, replay
from simtc.numerics.formats import decode_bits, encode_bits

# FlashMLA csrc/api/sparse_decode.h: bytes_per_token = 512 + 64*2 + (512/128)*4 (V32), 448 + 64*2 + 448/64 + 1 (MODEL1)
V32_TOKEN, MODEL1_TOKEN = 656, 584


def test_layouts_are_flashmlas_byte_counts():
    v = io.kv_layout("v32", 64)
    assert (v.token_bytes, v.scale_offset, v.min_block_stride, v.tma_k_stride) == (656, 512, 64 * V32_TOKEN, 656)
    m = io.kv_layout("model1", 64)
    assert (m.token_bytes, m.scale_offset, m.min_block_stride, m.tma_k_stride) == (576, 64 * 576, 64 * 584, 576)
    # tests/quant.py: size_per_block_padded = (block_size*bytes_per_token + 576-1) // 576 * 576
    for pbs in (1, 16, 64, 65):
        k = encode_bits(np.zeros((1, pbs, 512), np.float32), "bf16")
        assert io.quantize_kv(k, "model1").shape == (1, (pbs * MODEL1_TOKEN + 575) // 576 * 576)
        assert io.quantize_kv(encode_bits(np.zeros((1, pbs, 576), np.float32), "bf16"), "v32").shape == \
            (1, pbs * V32_TOKEN)


def _kbits(x):
    return encode_bits(np.asarray(x, np.float32), "bf16")


def test_quantization_golden_values_v32():
    x = np.zeros((1, 2, 576), np.float32)
    x[0, 0, :128] = np.linspace(-3.0, 2.0, 128)  # amax 3: 3/448 -> 2^ceil(log2 0.0067) = 2^-7
    x[0, 0, 128:256] = 448.0  # amax 448 -> 2^0
    x[0, 0, 256:384] = 0.0  # the 1e-4 floor: 2^ceil(log2 1e-4) = 2^-13
    x[0, 0, 384:512] = 0.5
    x[0, 0, 512:] = np.arange(64) / 8
    x[0, 1] = 1.0
    kv = io.quantize_kv(_kbits(x), "v32")
    rec = kv[0, :656]
    assert rec[512:528].view("<f4").tolist() == [2.0 ** -7, 1.0, 2.0 ** -13, 2.0 ** -9]
    assert rec[528:656].view("<u2").tolist() == _kbits(np.arange(64) / 8).tolist()
    assert decode_bits(rec[128:256], "e4m3").tolist() == [448.0] * 128
    assert decode_bits(rec[384:512], "e4m3").tolist() == [256.0] * 128  # 0.5 / 2^-9
    nope = decode_bits(rec[:128], "e4m3")
    assert np.abs(nope).max() == 384.0  # 3 / 2^-7
    assert kv[0, 656:1312][512:528].view("<f4").tolist() == [2.0 ** -8] * 4  # amax 1: 1/448 -> 2^-8


@pytest.mark.parametrize("name", ["v32", "model1"])
def test_quantization_bound_and_dequant_against_flashmlas_reference_rule(name):
    """Every scale is a power of two with amax/scale in (224, 448] (the ceil) unless the 1e-4 floor applies; K
    dequantized by io (the kernel's chain) equals FlashMLA's dequantize_k_cache rule (fp8 x scale) and is within
    half an e4m3 step of the bf16 K."""
    rng = np.random.default_rng(5)
    m = replay.model(name)
    x = (rng.normal(size=(3, 64, m.d_q)) * np.exp2(rng.integers(-12, 8, size=(3, 64, 1)))).astype(np.float32)
    x[0, 0, :m.quant_tile] = 0.0
    kbits = _kbits(x)
    kv = io.quantize_kv(kbits, name)
    inp = io.FlashMLAInputs(m, np.zeros((1, 1, 64, m.d_q), np.uint16), kv, np.zeros((1, 1, 64), np.int32), 64,
                            0.1)
    toks = np.arange(3 * 64)
    nope, scales, _ = io._token_bytes(inp, toks)
    s = scales.view(np.float32) if m.v32 else np.exp2(scales.astype(np.float64) - 127)
    assert np.all(np.log2(s) == np.round(np.log2(s)))
    xv = decode_bits(kbits, "bf16").reshape(-1, m.d_q)
    amax = np.abs(xv[:, :m.d_nope]).reshape(len(toks), -1, m.quant_tile).max(axis=2)
    ratio = amax / s
    floor = amax / 448 < 1e-4
    assert np.all(ratio <= 448) and np.all((ratio > 224) | floor) and floor[0, 0]
    flashmla = decode_bits(nope, "e4m3").astype(np.float64) * np.repeat(s, m.quant_tile, axis=1)
    k = io.dequant_tokens(inp, toks)
    assert np.array_equal(k[:, :m.d_nope], flashmla)
    assert np.array_equal(k[:, m.d_nope:], xv[:, m.d_nope:])
    # e4m3 round to nearest: error <= half a step = 2^(floor(log2|v|) - 4) <= |v| / 16 (normal), 2^-10 (subnormal)
    sr = np.repeat(s, m.quant_tile, axis=1)
    err = np.abs(k[:, :m.d_nope].astype(np.float64) - xv[:, :m.d_nope])
    assert np.all(err <= np.maximum(np.abs(xv[:, :m.d_nope]) / 16, sr / 1024))


@pytest.mark.parametrize("name", ["v32", "model1"])
def test_request_reproduces_the_replays_own_seeded_cache(name):
    """The replay's make_inputs writes the kernel's token records by its own code: reading them back through the
    file format gives the same Q, indices, validity and dequantized K."""
    seeded = replay.make_inputs(name, 3, seed=2)
    kv = seeded.kv.reshape(seeded.num_pages, -1)
    arrays = {"q": encode_bits(seeded.q, "bf16")[None, None], "kv": kv, "indices": seeded.indices[None, None],
              "page_block_size": 64, "sm_scale": np.float32(seeded.sm_scale), "model": name,
              "attn_sink": seeded.attn_sink, "topk_length": np.array([seeded.topk_length], np.int32)}
    r = io.request(io.validate_inputs(arrays), 0, 0)
    assert r.blocks == seeded.blocks and r.rows_per_page == seeded.rows_per_page and r.topk_length == 187
    assert np.array_equal(r.valid, seeded.valid) and np.array_equal(r.indices, seeded.indices)
    assert np.array_equal(r.q, seeded.q) and np.array_equal(r.k, seeded.k_rows(0, 64 * seeded.blocks))


@pytest.mark.parametrize("name, pbs, stride", [("v32", 64, None), ("model1", 64, None), ("v32", 32, 33 * 656),
                                               ("model1", 48, 52 * 576)])
def test_round_trip_make_replay_save_load(tmp_path, name, pbs, stride):
    inp = io.make_inputs(name, b=1, s_q=2, topk=128, seed=7, attn_sink=True, empty_rows=1, page_block_size=pbs,
                         block_stride=stride)
    f_in, f_out = tmp_path / "in.npz", tmp_path / "out.npz"
    io.save_inputs(f_in, inp)
    back = io.load_inputs(f_in)
    for k, v in inp.arrays().items():
        assert np.array_equal(back.arrays()[k], v), k
    res = io.replay_file(f_in, f_out)
    assert res.ok and [(i, j) for i, j, _ in res.rows] == [(0, 0), (0, 1)]
    outs = io.load_outputs(f_out, back)
    assert np.array_equal(outs.out, res.outputs.out) and np.array_equal(outs.lse, res.outputs.lse)
    assert outs.out.dtype == np.uint16 and outs.lse.dtype == np.float32
    # row (0, 0): against the float64 reference on the same dequantized inputs
    o_ref, lse_ref = replay.reference_attention(io.request(back, 0, 0))
    o = outs.o_values()[0, 0]
    assert np.linalg.norm(o - o_ref) / np.linalg.norm(o_ref) <= replay.O_TOL
    assert np.abs(outs.lse[0, 0] - lse_ref).max() <= replay.LSE_TOL
    assert np.all(np.isfinite(outs.lse[0, 0]))
    # row (0, 1) has no valid token: LSE +inf and O exactly 0 (kernel.cuh)
    assert not back.valid()[0, 1].any()
    assert np.all(outs.lse[0, 1] == np.inf) and not outs.out[0, 1].any()


def test_hot_tokens_force_the_lazy_rescale_and_topk_length_cuts_blocks():
    hot = io.replay_inputs(io.make_inputs("v32", topk=192, seed=4, hot_scale=3, invalid_frac=0.0))
    cold = io.replay_inputs(io.make_inputs("v32", topk=192, seed=4, hot_scale=0, invalid_frac=0.0))
    assert hot.ok and cold.ok
    assert hot.rows[0][2].rescale_blocks == [1] and cold.rows[0][2].rescale_blocks == []
    inp = io.make_inputs("model1", b=2, topk=192, seed=1, topk_length=[70, 0], invalid_frac=0.0)
    r0, r1 = io.request(inp, 0, 0), io.request(inp, 1, 0)
    assert (r0.blocks, int(r0.valid.sum()), r1.blocks, int(r1.valid.sum())) == (2, 70, 1, 0)
    res = io.replay_inputs(inp)
    assert res.ok and np.all(res.outputs.lse[1] == np.inf) and np.all(np.isfinite(res.outputs.lse[0]))


def test_without_attn_sink_the_sink_term_is_absent():
    inp = io.make_inputs("v32", topk=64, seed=3, invalid_frac=0.0)
    assert inp.attn_sink is None and np.all(io.request(inp, 0, 0).attn_sink == -np.inf)
    res = io.replay_inputs(inp)
    r = io.request(inp, 0, 0)
    # no sink: O rows are convex combinations of V, and LSE = log sum exp(scores) (checked against numpy directly)
    s = r.q.astype(np.float64) @ r.k.T.astype(np.float64) * inp.sm_scale
    lse = np.log(np.exp(s - s.max(1, keepdims=True)).sum(1)) + s.max(1)
    assert res.ok and np.abs(res.outputs.lse[0, 0] - lse).max() < 1e-3
    assert math.isclose(float(res.outputs.o_values()[0, 0].sum()), float((np.exp(s - lse[:, None]) @ r.k[:, :512])
                                                                        .sum()), rel_tol=1e-2)


# ---- bad files ----------------------------------------------------------------------------------------------
def _good(name="v32"):
    return io.make_inputs(name, topk=64, seed=11, invalid_frac=0.2, attn_sink=True, topk_length=[64]).arrays()


def _first_valid_token(a, pbs=64):
    idx = a["indices"][0, 0]
    t = int(idx[idx >= 0][0])
    return t // pbs, t % pbs


def _v32_scale(a, value):
    blk, row = _first_valid_token(a)
    a["kv"] = a["kv"].copy()
    a["kv"][blk, row * 656 + 512:row * 656 + 516] = np.array([value], "<f4").view(np.uint8)


def _nope_nan(a, code):
    blk, row = _first_valid_token(a)
    a["kv"] = a["kv"].copy()
    a["kv"][blk, row * 656 + 7] = code


def _model1_scale(a, code):
    blk, row = _first_valid_token(a)
    a["kv"] = a["kv"].copy()
    a["kv"][blk, 64 * 576 + 8 * row + 3] = code


def _rope_inf(a):
    blk, row = _first_valid_token(a)
    a["kv"] = a["kv"].copy()
    a["kv"][blk, row * 656 + 528:row * 656 + 530] = np.array([0x7F80], "<u2").view(np.uint8)


def _set(key, value):
    def f(a):
        a[key] = value(a) if callable(value) else value
    return f


def _drop(key):
    def f(a):
        del a[key]
    return f


BAD = [
    ("missing key", _drop("indices"), "file holds q, kv, indices, page_block_size, sm_scale, model"),
    ("unknown key", _set("attn_sinks", np.zeros(64, np.float32)), "only the format's keys"),
    ("model unknown", _set("model", np.array("v4")), "model is 'v32' or 'model1'"),
    ("model not a string", _set("model", np.int64(3)), "model is a single string"),
    ("q dtype", _set("q", lambda a: a["q"].astype(np.float32)), "q is uint16"),
    ("q 3-D", _set("q", lambda a: a["q"][0]), "q is 4-D"),
    ("q 128 heads", _set("q", lambda a: np.concatenate([a["q"], a["q"]], axis=2)), "h_q = 64"),
    ("q d_qk", _set("q", lambda a: a["q"][..., :512]), "d_qk is 576 for V32"),
    ("q NaN code", _set("q", lambda a: np.where(np.arange(576) == 9, np.uint16(0x7FC0), a["q"])), "finite bf16"),
    ("kv dtype", _set("kv", lambda a: a["kv"].view(np.int8)), "kv is uint8"),
    ("kv stride", _set("kv", lambda a: a["kv"][:, :-16]), "multiple of TMA_K_STRIDE"),
    ("pbs vs stride", _set("page_block_size", np.int64(65)), "page_block_size x bytes per token fits"),
    ("pbs zero", _set("page_block_size", np.int64(0)), "page_block_size >= 1"),
    ("pbs float", _set("page_block_size", np.float64(64)), "page_block_size is a single integer"),
    ("sm_scale negative", _set("sm_scale", np.float32(-0.1)), "sm_scale is a finite positive"),
    ("sm_scale NaN", _set("sm_scale", np.float32(np.nan)), "sm_scale is a finite positive"),
    ("indices int64", _set("indices", lambda a: a["indices"].astype(np.int64)), "indices is int32"),
    ("indices shape", _set("indices", lambda a: np.concatenate([a["indices"]] * 2)), "[b, s_q, topk] with q's"),
    ("topk 96", _set("indices", lambda a: np.concatenate([a["indices"], a["indices"][..., :32]], axis=2)),
     "topk is a positive multiple of B_TOPK = 64"),
    ("index -2", _set("indices", lambda a: np.where(np.arange(64) == 5, np.int32(-2), a["indices"])),
     "an index is -1 (invalid) or a token"),
    ("index too large", _set("indices", lambda a: np.where(np.arange(64) == 5, np.int32(a["kv"].shape[0] * 64),
                                                           a["indices"])), "0 <= index < num_blocks x page_block_size"),
    ("attn_sink shape", _set("attn_sink", np.zeros(128, np.float32)), "attn_sink is float32 [64]"),
    ("attn_sink dtype", _set("attn_sink", np.zeros(64, np.float64)), "attn_sink is float32"),
    ("attn_sink NaN", _set("attn_sink", np.full(64, np.nan, np.float32)), "attn_sink holds no NaN"),
    ("topk_length > topk", _set("topk_length", np.array([65], np.int32)), "0 <= topk_length <= topk"),
    ("topk_length shape", _set("topk_length", np.array([64, 64], np.int32)), "topk_length is int32 [b]"),
    ("e4m3 NaN 0x7F", lambda a: _nope_nan(a, 0x7F), "0x7F and 0xFF are NaN"),
    ("e4m3 NaN 0xFF", lambda a: _nope_nan(a, 0xFF), "0x7F and 0xFF are NaN"),
    ("V32 scale 1.5", lambda a: _v32_scale(a, 1.5), "V32 scales are finite positive powers of two"),
    ("V32 scale 0", lambda a: _v32_scale(a, 0.0), "V32 scales are finite positive powers of two"),
    ("V32 scale -1", lambda a: _v32_scale(a, -1.0), "V32 scales are finite positive powers of two"),
    ("V32 scale inf", lambda a: _v32_scale(a, np.inf), "V32 scales are finite positive powers of two"),
    ("V32 scale NaN", lambda a: _v32_scale(a, np.nan), "V32 scales are finite positive powers of two"),
    ("RoPE Inf", _rope_inf, "RoPE holds finite bf16"),
]


@pytest.mark.parametrize("case, mutate, rule", BAD, ids=[c[0] for c in BAD])
def test_bad_inputs_file_is_refused_naming_the_rule(tmp_path, case, mutate, rule):
    a = _good()
    mutate(a)
    path = tmp_path / "bad.npz"
    np.savez(path, **a)
    with pytest.raises(io.FlashMLAFormatError) as e:
        io.load_inputs(path)
    assert rule in str(e.value) and e.value.rule


def test_model1_scale_nan_and_the_pad_byte(tmp_path):
    a = _good("model1")
    blk, row = _first_valid_token(a)
    a["kv"] = a["kv"].copy()
    a["kv"][blk, 64 * 576 + 8 * row + 7] = 0xFF  # the pad byte: never read
    io.validate_inputs(a)
    _model1_scale(a, 0xFF)
    with pytest.raises(io.FlashMLAFormatError, match="0xFF is NaN"):
        io.validate_inputs(a)


def test_forbidden_codes_in_unreferenced_tokens_are_allowed():
    """Only tokens a valid index references are read: an invalid (-1) or cut-off position's token may hold any bytes
    (FlashMLA's cache comes from torch.empty)."""
    a = _good()
    idx = a["indices"][0, 0]
    used = set(idx[idx >= 0].tolist())
    t = next(x for x in range(a["kv"].shape[0] * 64) if x not in used)
    a["kv"] = a["kv"].copy()
    a["kv"][t // 64, (t % 64) * 656:(t % 64) * 656 + 656] = 0xFF
    io.validate_inputs(a)
    a["topk_length"] = np.array([0], np.int32)
    _nope_nan(a, 0x7F)
    assert not io.validate_inputs(a).valid().any()


def test_not_an_npz_pickle_and_object_arrays(tmp_path):
    text = tmp_path / "x.npz"
    text.write_text("not a zip")
    with pytest.raises(io.FlashMLAFormatError, match=r"is an \.npz archive"):
        io.load_inputs(text)
    one = tmp_path / "one.npy"
    np.save(one, np.zeros(3))
    with pytest.raises(io.FlashMLAFormatError, match=r"single \.npy array"):
        io.load_inputs(one)
    a = _good()
    a["model"] = np.array(["v32"], dtype=object)
    obj = tmp_path / "obj.npz"
    np.savez(obj, **a)
    with pytest.raises(io.FlashMLAFormatError, match="no pickled or object arrays"):
        io.load_inputs(obj)
    with pytest.raises(FileNotFoundError):
        io.load_inputs(tmp_path / "missing.npz")


def test_bad_outputs_file(tmp_path):
    inp = io.FlashMLAInputs(replay.model("v32"), np.zeros((2, 1, 64, 576), np.uint16), np.zeros((1, 656 * 64),
                            np.uint8), np.zeros((2, 1, 64), np.int32), 64, 0.1)
    good = {"out": np.zeros((2, 1, 64, 512), np.uint16), "lse": np.zeros((2, 1, 64), np.float32)}
    p = tmp_path / "o.npz"
    for change, rule in ((lambda a: a.pop("lse"), "holds out, lse"),
                         (lambda a: a.__setitem__("lse", np.zeros((2, 1, 64))), "lse is float32"),
                         (lambda a: a.__setitem__("out", np.zeros((2, 1, 64, 576), np.uint16)), "out is [b, s_q, 64, "
                                                                                                   "512]"),
                         (lambda a: a.__setitem__("x", np.zeros(1)), "only the format's keys")):
        a = dict(good)
        change(a)
        np.savez(p, **a)
        with pytest.raises(io.FlashMLAFormatError, match=rule.replace("[", r"\[")):
            io.load_outputs(p)
    np.savez(p, out=good["out"][:1], lse=good["lse"][:1])
    with pytest.raises(io.FlashMLAFormatError, match="same \\[b, s_q\\]"):
        io.load_outputs(p, inp)
    io.save_outputs(p, io.validate_outputs(good, inp))
    assert io.load_outputs(p, inp).out.shape == (2, 1, 64, 512)


def test_make_refuses_bad_arguments():
    with pytest.raises(io.FlashMLAFormatError, match="multiple of B_TOPK"):
        io.make_inputs("v32", topk=100)
    with pytest.raises(io.FlashMLAFormatError, match="empty_rows"):
        io.make_inputs("v32", b=1, empty_rows=2)
    with pytest.raises(io.FlashMLAFormatError, match="at least topk distinct tokens"):
        io.make_inputs("v32", topk=128, num_blocks=1)
    with pytest.raises(io.FlashMLAFormatError, match="row \\(1, 0\\)"):
        io.request(io.make_inputs("v32", topk=64), 1, 0)


# ---- command line ---------------------------------------------------------------------------------------------
@pytest.fixture
def cli(monkeypatch, capsys):
    """``simtc.cli.main`` with the ``inputs`` command registered; returns (exit status, stdout, stderr)."""
    import simtc.cli as cli_mod

    if "inputs" not in cli_mod.COMMAND_MODULES:
        monkeypatch.setattr(cli_mod, "COMMAND_MODULES", (*cli_mod.COMMAND_MODULES, "inputs"))

    def run(*argv):
        rc = cli_mod.main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return rc, out, err
    return run


def test_cli_make_check_replay_save_outputs(cli, tmp_path):
    import json

    f_in, f_out = tmp_path / "in.npz", tmp_path / "out.npz"
    rc, out, _ = cli("inputs", "make", "--model", "model1", "--b", "1", "--s-q", "2", "--topk", "128",
                     "--attn-sink", "--empty-rows", "1", "--seed", "3", f_in)
    assert rc == 0 and "wrote" in out and "rows with no valid token: (0, 1)" in out
    rc, out, _ = cli("inputs", "check", "--json", f_in)
    d = json.loads(out)
    assert rc == 0 and (d["model"], d["b"], d["s_q"], d["topk"], d["attn_sink"], d["empty_rows"]) == \
        ("model1", 1, 2, 128, True, [[0, 1]])
    rc, out, _ = cli("replay", "flashmla-head64", "--inputs", f_in, "--save-outputs", f_out, "--json")
    d = json.loads(out)
    assert rc == 0 and d["ok"] and [r["batch"] for r in d["rows"]] == [0, 0] and d["outputs_file"] == str(f_out)
    assert d["rows"][1]["o_rel_error"] == 0.0 and d["rows"][0]["o_rel_error"] <= 4e-3
    outs = io.load_outputs(f_out, io.load_inputs(f_in))
    assert np.all(outs.lse[0, 1] == np.inf) and np.all(np.isfinite(outs.lse[0, 0]))
    assert np.array_equal(outs.out, io.replay_file(f_in).outputs.out)
    rc, out, _ = cli("replay", "flashmla-head64", "--inputs", f_in)
    assert rc == 0 and "row (0, 1): OK" in out and "no valid token: LSE +inf, O = 0" in out


def test_cli_refuses_bad_files_and_flags(cli, tmp_path):
    bad = tmp_path / "bad.npz"
    a = _good()
    a["indices"] = a["indices"].astype(np.int64)
    np.savez(bad, **a)
    for argv in (("inputs", "check", bad), ("replay", "flashmla-head64", "--inputs", bad)):
        rc, out, err = cli(*argv)
        assert rc == 2 and out == "" and err.count("\n") == 1 and "rule: indices is int32" in err
    good = tmp_path / "good.npz"
    assert cli("inputs", "make", "--topk", "64", "--seed", "1", good)[0] == 0
    for argv, text in ((("inputs", "make", "--topk", "96", "--seed", "1", good), "multiple of B_TOPK = 64"),
                       (("inputs", "make", "--topk", "64", good), "required: --seed"),
                       (("inputs", "make", "--invalid-frac", "2", "--seed", "1", good), "fraction"),
                       (("inputs", "make", "--empty-rows", "2", "--seed", "1", good), "at most b x s_q"),
                       (("inputs", "make", "--topk-length", "200", "--seed", "1", good), "topk_length <= topk"),
                       (("replay", "flashmla-head64", "--inputs", good, "--step", "5"), "cannot be combined"),
                       (("replay", "flashmla-head64", "--inputs", good, "--timing-only"), "cannot be combined"),
                       (("replay", "flashmla-head64", "--save-outputs", tmp_path / "o.npz"), "needs --inputs"),
                       (("inputs",), "a subcommand is required")):
        rc, _, err = cli(*argv)
        assert rc == 2 and text in err, (argv, err)


def test_cli_mutation_on_a_file_is_caught(cli, tmp_path):
    f = tmp_path / "in.npz"
    assert cli("inputs", "make", "--topk", "64", "--seed", "2", f)[0] == 0
    rc, out, _ = cli("replay", "flashmla-head64", "--inputs", f, "--mutate", "wrong-k-slice")
    assert rc == 1 and "mutation wrong-k-slice: caught" in out and "FAILED" in out
