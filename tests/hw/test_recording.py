"""Recordings (simtc.hw.recording): plain arrays and JSON, readable by numpy and by simtc, bad files refused."""

import json
import struct
import zipfile

import numpy as np
import pytest

from simtc.hw.recording import FORMAT, RecordingError, digest, keeps_registers, read_recording, write_recording


def _outputs():
    rng = np.random.default_rng(1)
    return {"wgmma layouts | small": rng.standard_normal((128, 32)).astype(np.float32),
            "wgmma layouts | large": rng.standard_normal((128, 128)).astype(np.float32),
            "special values | large": np.full((128, 64), np.nan, np.float32)}


def test_round_trip_keeps_bits_digests_and_order(tmp_path):
    path = tmp_path / "r.npz"
    outs = _outputs()
    assert write_recording(path, outs, seed=3, device="dev", cycles={"x": 5.0}, timing={"rows": []}) == 3
    rec = read_recording(path)
    assert rec.keys == list(outs) and rec.seed == 3 and rec.meta["format"] == FORMAT
    assert set(rec.registers) == {"wgmma layouts | small", "special values | large"}
    for k, v in rec.registers.items():
        assert np.array_equal(v.view(np.uint32), outs[k].view(np.uint32)) and not v.flags.writeable
    assert rec.digests == {k: digest(v) for k, v in outs.items()}
    assert rec.meta["cycles_per_group_median"] == {"x": 5.0} and rec.meta["wgmma_timing"] == {"rows": []}


def test_members_are_plain_npy_that_numpy_reads(tmp_path):
    path = tmp_path / "r.npz"
    outs = _outputs()
    write_recording(path, outs, seed=0, device="dev")
    z = np.load(path, allow_pickle=False)
    meta = json.loads(z["meta.json"])  # a non-.npy member comes back as bytes
    for c in meta["cases"]:
        if c["registers"]:
            arr = z[c["registers"][:-4]]
            assert arr.dtype == np.dtype("<f4") and np.array_equal(arr.view(np.uint32), outs[c["key"]].view(np.uint32))


def test_nul_padded_headers_are_read(tmp_path):
    """A header padded with NULs instead of spaces (as seen from one numpy build) still reads."""
    src, dst = tmp_path / "a.npz", tmp_path / "b.npz"
    write_recording(src, _outputs(), seed=0, device="dev")
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for name in zin.namelist():
            data = zin.read(name)
            if name.endswith(".npy"):
                (hlen,) = struct.unpack("<H", data[8:10])
                header = data[10:10 + hlen].rstrip(b" \n")
                data = data[:10] + header + b"\x00" * (hlen - len(header) - 1) + b"\n" + data[10 + hlen:]
            zout.writestr(name, data)
    assert read_recording(dst).registers.keys() == read_recording(src).registers.keys()


def test_rule_for_kept_registers():
    assert keeps_registers("wgmma layouts | x", np.zeros((128, 32), np.float32))
    assert not keeps_registers("wgmma layouts | x", np.zeros((128, 64), np.float32))
    assert keeps_registers("wrong descriptors | x", np.zeros((128, 128), np.float32))


def _text(path, text):
    path.write_text(text)
    return path


def _zip(path, members):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


@pytest.mark.parametrize("make, message", [
    (lambda p: p / "missing.npz", "does not exist"),
    (lambda p: p, "is not a file"),
    (lambda p: _text(p / "t.npz", "hello"), "not an .npz"),
    (lambda p: _zip(p / "o.npz", {"meta.npy": b"x"}), "older simtc format"),
    (lambda p: _zip(p / "j.npz", {"meta.json": "{"}), "not readable JSON"),
    (lambda p: _zip(p / "f.npz", {"meta.json": json.dumps({"format": "other"})}), "not a simtc recording"),
    (lambda p: _zip(p / "v.npz", {"meta.json": json.dumps({"format": FORMAT, "version": 1})}), "version 1"),
    (lambda p: _zip(p / "m.npz", {"meta.json": json.dumps({"format": FORMAT, "version": 2})}),
     "incomplete metadata"),
])
def test_bad_files_are_refused_with_the_rule(tmp_path, make, message):
    with pytest.raises(RecordingError, match=message) as e:
        read_recording(make(tmp_path))
    assert "simtc crosscheck --save" in str(e.value)


def test_an_empty_run_is_not_written(tmp_path):
    with pytest.raises(RecordingError, match="no GPU outputs"):
        write_recording(tmp_path / "e.npz", {}, seed=0, device="dev")
    assert not (tmp_path / "e.npz").exists()
