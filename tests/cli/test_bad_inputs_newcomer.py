"""What a second new user hit, and bad inputs of the same families: every file-taking command refuses a damaged or
wrong file in one ``simtc: error: ... [rule: ...]`` line (exit 2, never "internal error"); Program files are
checked against their schema and structure; the rich listing keeps bracketed operands; descriptor words say how
they were read; ``--factors -1,2`` says how to write it."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from simtc.cli import main
from simtc.kernels import registry

DATA = Path(__file__).resolve().parents[1] / "data"


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def one_error(rc, out, err, *pieces):
    lines = err.strip().splitlines()
    assert rc == 2 and out == "", (rc, out[:200], err)
    assert len(lines) == 1 and lines[0].startswith("simtc: error: ") and "[rule: " in lines[0], err
    assert "internal error" not in err and "Traceback" not in err
    for p in pieces:
        assert p in lines[0], (p, lines[0])
    return lines[0]


# ---- damaged files, for every command that reads one -----------------------------------------------------------
@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """One good file of each kind, and truncated / garbage / empty / foreign versions of it."""
    from simtc.hw.recording import write_recording
    from simtc.kernels.flashmla import io

    d = tmp_path_factory.mktemp("files")
    good = {}
    good["program"] = d / "prog.json"
    good["program"].write_text(json.dumps(registry.build("hazard/ring-parity-alias").to_json()))
    good["inputs"] = d / "inputs.npz"
    io.save_inputs(good["inputs"], io.make_inputs("v32", b=1, s_q=1, topk=64, seed=0))
    good["recording"] = d / "rec.npz"
    write_recording(good["recording"], {"wgmma layouts | tiny": np.arange(128 * 8, dtype=np.float32).reshape(128, 8)},
                    seed=0, device="test")
    good["flashmla"] = d / "fm.npz"
    shutil.copy(DATA / "flashmla_h200_sm90.npz", good["flashmla"])
    out = {}
    for kind, path in good.items():
        data = path.read_bytes()
        for name, content in (("truncated", data[:len(data) // 2]), ("head", data[:300]),
                              ("garbage", b"\x00garbage\xff"), ("empty", b"")):
            p = d / f"{kind}-{name}{path.suffix}"
            p.write_bytes(content)
            out[kind, name] = p
    return good, out


READERS = {
    "program": [("program", "{}"), ("simulate", "{}"), ("timing", "sensitivity", "{}")],
    "inputs": [("inputs", "check", "{}"), ("replay", "flashmla-head64", "--inputs", "{}")],
    "recording": [("crosscheck", "--replay", "{}")],
    "flashmla": [("crosscheck", "--replay-flashmla", "{}")],
}


@pytest.mark.parametrize("kind", list(READERS))
@pytest.mark.parametrize("damage", ["truncated", "head", "garbage", "empty"])
def test_a_damaged_file_is_one_line_for_every_reader(capsys, files, kind, damage):
    _, bad = files
    path = bad[kind, damage]
    for argv in READERS[kind]:
        line = one_error(*run(capsys, *(a.format(path) for a in argv)))
        assert path.name in line, (argv, line)


@pytest.mark.parametrize("kind, other", [("inputs", "program"), ("recording", "inputs"), ("flashmla", "recording"),
                                         ("recording", "program"), ("flashmla", "program")])
def test_a_file_of_another_kind_is_one_line(capsys, files, kind, other):
    good, _ = files
    for argv in READERS[kind]:
        one_error(*run(capsys, *(a.format(good[other]) for a in argv)))


def test_the_good_files_are_read(capsys, files):
    good, _ = files
    rc, out, _ = run(capsys, "inputs", "check", good["inputs"], "--json")
    assert rc == 0 and json.loads(out)["topk"] == 64
    rc, out, _ = run(capsys, "program", good["program"], "--json")
    assert rc == 0 and json.loads(out)["name"] == "hazard/ring-parity-alias"


def test_a_recording_with_bad_metadata_is_refused_when_read(capsys, tmp_path, files):
    import zipfile

    good, _ = files
    with zipfile.ZipFile(good["recording"]) as z:
        members = {n: z.read(n) for n in z.namelist()}
    meta = json.loads(members["meta.json"])
    for edit, piece in ((lambda m: m.update(seed="x"), "seed 'x' is not an integer"),
                        (lambda m: m.update(cases=5), "'cases' is not a list"),
                        (lambda m: m.update(wgmma_timing={"rows": 3}), "not a wgmma timing record"),
                        (lambda m: m.update(cycles_per_group_median=[1]), "not an object of numbers")):
        m = json.loads(json.dumps(meta))
        edit(m)
        p = tmp_path / "r.npz"
        with zipfile.ZipFile(p, "w") as z:
            for n, data in members.items():
                z.writestr(n, json.dumps(m) if n == "meta.json" else data)
        one_error(*run(capsys, "crosscheck", "--replay", p), piece)
    p = tmp_path / "dup.npz"
    with zipfile.ZipFile(p, "w") as z:
        for n, data in members.items():
            z.writestr(n, data.replace(b'"seed": 0', b'"seed": 0, "seed": 1') if n == "meta.json" else data)
    one_error(*run(capsys, "crosscheck", "--replay", p), "key 'seed' appears twice")


def test_a_flashmla_recording_with_wrong_arrays_is_refused(capsys, tmp_path, files):
    good, _ = files
    with np.load(good["flashmla"], allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    first = json.loads(bytes(arrays["meta.json"]))["sets"][0]
    cases = [
        ({k: v for k, v in arrays.items() if k != "meta.json"}, "no meta.json"),
        ({**arrays, "meta.json": np.zeros(3)}, "not bytes"),
        ({**arrays, "meta.json": np.frombuffer(b'{"format": 1', np.uint8)}, "not readable JSON"),
        ({k: v for k, v in arrays.items() if k != f"{first}/lse"}, f"set {first!r} has no lse array"),
        ({**arrays, f"{first}/out": arrays[f"{first}/out"].astype(np.float32)}, "dtype float32"),
        ({**arrays, f"{first}/q": arrays[f"{first}/q"][..., :7]}, f"set {first!r}"),
    ]
    for content, piece in cases:
        p = tmp_path / "bad.npz"
        with open(p, "wb") as f:
            np.savez(f, **content)
        one_error(*run(capsys, "crosscheck", "--replay-flashmla", p), piece)


def test_a_damaged_flashmla_build_manifest_is_one_line(capsys, tmp_path):
    for text, piece in (("{", "not readable JSON"), ("[1]", "not an object"), ("", "the file is empty")):
        (tmp_path / "build.json").write_text(text)
        one_error(*run(capsys, "crosscheck", "--flashmla", tmp_path), piece)


def test_a_damaged_tensor_file_is_one_line(capsys, files):
    _, bad = files
    for damage in ("truncated", "head", "garbage", "empty"):
        one_error(*run(capsys, "simulate", "flashmla-head64", "--tensor", f"kv_nope={bad['inputs', damage]}"),
                  "--tensor kv_nope=")


# ---- Program files: the schema and the structure -------------------------------------------------------------
@pytest.fixture
def ring():
    d = registry.build("hazard/ring-parity-alias").to_json()
    d.pop("counts")
    return d


def _write(tmp_path, d, name="p.json"):
    p = tmp_path / name
    p.write_text(d if isinstance(d, str) else json.dumps(d))
    return p


@pytest.mark.parametrize("edit, pieces", [
    (lambda d: d["roles"]["producer"].update(warps=[40]),
     ["role 'producer': warp 40: a CTA has at most 32 warps", "CTA warp indices are 0-31", "threads per block"]),
    (lambda d: d["roles"]["consumer_a"].update(warps=[5]),
     ["warp 5 is in roles 'producer' and 'consumer_a'", "a warp's roles share its 32 lanes"]),
    (lambda d: d.update(barrier=d.pop("barriers")), ["unknown key 'barrier'", "did you mean 'barriers'?"]),
    (lambda d: d["roles"]["producer"].update(wraps=d["roles"]["producer"].pop("warps")),
     ["role 'producer'", "unknown key 'wraps'", "did you mean 'warps'?"]),
    (lambda d: d["roles"]["producer"]["records"][0].update(op="mbarrier.inti"),
     ["unknown record op 'mbarrier.inti'", "did you mean 'mbarrier.init'?", "$.roles.producer.records[0].op"]),
    (lambda d: d["roles"]["producer"]["records"][0].update(op="no.such.op"), ["unknown record op 'no.such.op'"]),
    (lambda d: d["barriers"][0].update(count=3),
     ["the barrier table gives 'full' count 3", "initialises it with count 1", "table count equals"]),
    (lambda d: d["barriers"][0].update(count=-1), ["barrier 0 ('full')", "count -1"]),
    (lambda d: d["roles"]["producer"]["records"][1].update(count=-64), ["mbarrier.init count = -64"]),
    (lambda d: d["roles"]["producer"].update(warps=[]), ["role 'producer': a role runs on at least one warp"]),
    (lambda d: d["roles"]["producer"].update(warps=[5.5]), ["\"warps\" must be an integer, got 5.5"]),
    (lambda d: d["roles"]["producer"].update(warps="5"), ["\"warps\" must be a JSON list"]),
    (lambda d: d["roles"]["producer"].update(warps=[10**40]), ["outside", "32-bit"]),
    (lambda d: d["roles"]["producer"]["records"][0].update(count=2**64), ["field 'count'", "outside", "32-bit"]),
    (lambda d: d.update(roles={}), ["a program has at least one role"]),
    (lambda d: d["roles"]["producer"]["records"].append([]), ["role 'producer' record 12:", "'op' tag"]),
])
def test_a_bad_program_file_is_one_line_for_every_program_reader(capsys, tmp_path, ring, edit, pieces):
    edit(ring)
    p = _write(tmp_path, ring)
    for argv in (("program", p), ("simulate", p), ("timing", "sensitivity", p)):
        one_error(*run(capsys, *argv), p.name, *pieces)


@pytest.mark.parametrize("text, pieces", [
    ("", ["the file is empty"]),
    ("[1, 2, 3]", ["a Program's JSON is an object"]),
    ('"flashmla-qk"', ["a Program's JSON is an object"]),
    ("{\"name\": \"x\", \"roles\": {}, \"roles\": {}}", ["key 'roles' appears twice in the object at $"]),
    ('{"name": "x", "meta": [["a", NaN]], "roles": {}}', ["NaN is not a JSON number"]),
    ('{"name": "x", "roles": {"r": {"warps": [1], "records": [], "warps": [2]}}}',
     ["key 'warps' appears twice in the object at $.roles.r"]),
    ("[" * 50000 + "]" * 50000, ["nested too deeply"]),
])
def test_bad_json_text_is_one_line(capsys, tmp_path, text, pieces):
    p = _write(tmp_path, text)
    one_error(*run(capsys, "program", p), *pieces)


def test_a_directory_or_missing_file_is_one_line(capsys, tmp_path):
    (tmp_path / "dir.json").mkdir()
    one_error(*run(capsys, "simulate", tmp_path / "dir.json"), "cannot read", "dir.json")
    one_error(*run(capsys, "simulate", tmp_path / "none.json"), "no such file")
    (tmp_path / "latin.json").write_bytes('{"name": "caf\xe9"}'.encode("latin-1"))
    one_error(*run(capsys, "program", tmp_path / "latin.json"), "not UTF-8 text")


def test_schema_is_printed_and_takes_nothing_else(capsys):
    rc, out, _ = run(capsys, "program", "--schema")
    schema = json.loads(out)
    assert rc == 0 and schema["title"] == "simtc Program" and "record.tcgen05.mma" in schema["$defs"]
    one_error(*run(capsys, "program", "--schema", "flashmla-qk"), "--schema")
    one_error(*run(capsys, "program", "--schema", "--json"), "--schema")


# ---- the listing keeps bracketed PTX operands -------------------------------------------------------------------
@pytest.mark.parametrize("name, operands", [("hazard/ring-parity-alias", ["[full]", "[empty]"]),
                                            ("hazard/ld-before-commit", ["[mma_done]"])])
def test_the_listing_shows_barrier_operands(capsys, name, operands):
    rc, ptx, _ = run(capsys, "program", name, "--ptx")
    assert rc == 0 and all(o in ptx for o in operands)
    rc, listing, _ = run(capsys, "program", name, "--term-width", "200")
    assert rc == 0
    for o in operands:
        assert listing.count(o) == ptx.count(o), o


# ---- descriptor words typed without 0x ---------------------------------------------------------------------------
def test_a_bare_word_with_a_leading_zero_is_hex_and_says_so(capsys):
    rc, out, err = run(capsys, "decode", "idesc", "04200490", "--json")
    d = json.loads(out)
    assert rc == 0 and d["value"] == "0x04200490" and d["base"] == 16 and d["input"] == "04200490" and err == ""
    rc, out, err = run(capsys, "decode", "idesc", "04200490")
    assert rc == 0 and "note: read 04200490 as hex 0x04200490" in err and "M = 64" in out
    rc, out, err = run(capsys, "decode", "smem-desc", "40004040000100a0", "--json")  # a-f: hex
    assert rc == 0 and json.loads(out)["base"] == 16 and json.loads(out)["start"] == 0xA0 << 4


def test_a_bare_decimal_word_says_it_was_read_as_decimal(capsys):
    line = one_error(*run(capsys, "decode", "smem-desc", "4000404000010000"))
    assert "read 4000404000010000 as decimal = 0x000E3658A360EF10" in line
    assert "write 0x4000404000010000" in line
    line = one_error(*run(capsys, "decode", "idesc", "4200490"))
    assert "read 4200490 as decimal" in line and "write 0x4200490" in line
    rc, out, err = run(capsys, "decode", "idesc", "69207184")  # 0x04200490 in decimal
    assert rc == 0 and "read 69207184 as decimal = 0x04200490" in err and "M = 64" in out


@pytest.mark.parametrize("word", ["0x4000404000010000", "0X4000404000010000"])
def test_a_prefixed_word_gets_no_note(capsys, word):
    rc, out, err = run(capsys, "decode", "smem-desc", word)
    assert rc == 0 and err == ""
    rc, out, _ = run(capsys, "decode", "smem-desc", word, "--json")
    assert json.loads(out)["base"] == 16 and json.loads(out)["lbo"] == 16


@pytest.mark.parametrize("argv, piece", [
    (["decode", "idesc", "ffffffffff"], "read ffffffffff as hex"),
    (["decode", "idesc", "99999999999"], "as decimal"),
    (["decode", "smem-desc", "--", "-1"], "does not fit in 64 unsigned bits"),
    (["decode", "idesc", "0x"], "not an integer"),
    (["decode", "idesc", "0g12"], "not an integer"),
    (["decode", "idesc", ""], "not an integer"),
])
def test_bad_words_are_one_line(capsys, argv, piece):
    one_error(*run(capsys, *argv), piece)


# ---- --factors with a minus sign ---------------------------------------------------------------------------------
def test_a_detached_negative_factor_list_says_how_to_write_it(capsys):
    one_error(*run(capsys, "timing", "sensitivity", "flashmla-qk", "--factors", "-1,2"), "--factors=-1,2",
              "sensitivity factors are distinct positive numbers")
    one_error(*run(capsys, "timing", "sensitivity", "flashmla-qk", "--factors"), "--factors needs a value")


@pytest.mark.parametrize("value, piece", [("-1,2", "factor -1 is not positive"), ("0,2", "factor 0 is not positive"),
                                          ("nan", "factor nan is not positive"), ("-0.5", "factor -0.5")])
def test_attached_zero_or_negative_factors_are_refused_naming_the_rule(capsys, value, piece):
    one_error(*run(capsys, "timing", "sensitivity", "flashmla-qk", f"--factors={value}"), piece,
              "a parameter scaled by zero or a negative number")


def test_the_attached_form_works(capsys):
    rc, out, _ = run(capsys, "timing", "sensitivity", "flashmla-qk", "--factors=0.25,4", "--top", "2", "--json")
    assert rc == 0 and json.loads(out)["factors"] == [0.25, 4.0]
