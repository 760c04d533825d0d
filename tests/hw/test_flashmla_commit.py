"""``crosscheck --flashmla DIR`` reports DIR's own commit only: a folder inside another repository (not the top
level of a checkout) has no commit of its own, and the enclosing repository's would be a wrong claim."""

import shutil
import subprocess

import pytest

from simtc.hw import flashmla as fm

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(cwd, *args):
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True).stdout.strip()


def _fake_checkout(root):
    for rel in (*fm.SM90_SOURCES.values(), *fm.SM100_SOURCES.values(), "csrc/params.h"):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("// placeholder\n")
    inc = root / "csrc" / "cutlass" / "include"
    for rel in ("cute/tensor.hpp", "cutlass/cutlass.h"):
        (inc / rel).parent.mkdir(parents=True, exist_ok=True)
        (inc / rel).write_text("// placeholder\n")


@pytest.fixture
def outer(tmp_path):
    repo = tmp_path / "project"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "-c", "user.email=a@b", "-c", "user.name=n", "commit", "-q", "--allow-empty", "-m", "x")
    return repo


def test_a_folder_inside_another_repository_has_no_commit(outer):
    inner = outer / "vendor" / "FlashMLA"
    _fake_checkout(inner)
    enclosing = _git(outer, "rev-parse", "HEAD")
    assert fm._git(inner, "rev-parse", "HEAD") == enclosing  # what plain git reports
    co = fm.find_checkout(inner)
    assert co.commit == "unknown (not a git checkout)" and enclosing not in co.commit
    assert co.cutlass_commit == "unknown" and not co.dirty


def test_a_checkouts_own_top_level_reports_its_commit(outer):
    _fake_checkout(outer)
    _git(outer, "add", "-A")
    _git(outer, "-c", "user.email=a@b", "-c", "user.name=n", "commit", "-q", "-m", "files")
    co = fm.find_checkout(outer)
    assert co.commit == _git(outer, "rev-parse", "HEAD") and not co.dirty
