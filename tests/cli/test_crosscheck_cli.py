"""``simtc crosscheck`` refuses bad input with one line naming the rule (exit 2), before doing any work."""

import zipfile

import pytest

from simtc.cli import main
from simtc.hw.device import probe

NO_SM90 = not (probe().available and probe().arch == "sm_90a")


def _zip(path):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("something.npy", b"x")
    return path


@pytest.mark.parametrize("argv, message", [
    (lambda p: ["--replay", str(p / "missing.npz")], "does not exist"),
    (lambda p: ["--replay", str(p)], "is not a file"),
    (lambda p: ["--replay", str(p / "x.txt") if (p / "x.txt").write_text("x") else ""], "not an .npz"),
    (lambda p: ["--replay", str(_zip(p / "z.npz"))], "not a simtc recording"),
    (lambda p: ["--replay", str(p / "a.npz"), "--save", str(p / "b.npz")], "cannot be combined"),
    (lambda p: ["--replay", str(p / "a.npz"), "--save-timing", str(p / "b.json")], "cannot be combined"),
    (lambda p: ["--save", str(p / "no" / "such" / "dir.npz")], "does not exist"),
    (lambda p: ["--save", str(p)], "is a directory"),
    (lambda p: ["--save-timing", str(p / "no" / "t.json")], "does not exist"),
    (lambda p: ["--save-timing", str(p / "t.json"), "--no-timing"], "nothing would be measured"),
    (lambda p: ["--seed", "-1"], "0..2147483647"),
    (lambda p: ["--arch", "sm80"], "invalid choice"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    assert main(["crosscheck", *argv(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("simtc: error: ") and "[rule: " in err and "\n" not in err, err
    assert message in err and "Traceback" not in err


@pytest.mark.skipif(not NO_SM90, reason="an sm_90a GPU is here: --save would record")
@pytest.mark.parametrize("option, name", [("--save", "out.npz"), ("--save-timing", "t.json")])
def test_save_without_a_gpu_is_refused_and_writes_nothing(tmp_path, capsys, option, name):
    assert main(["crosscheck", option, str(tmp_path / name)]) == 2
    err = capsys.readouterr().err
    assert "no sm_90a GPU" in err and "[rule: " in err
    assert not (tmp_path / name).exists()
