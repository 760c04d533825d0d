"""nvcc's route compiles a user's FILE.cu from a copy: the user's file is never written (it may be read-only or
not UTF-8), and its folder stays on the include path for its ``#include "..."`` lines."""

from __future__ import annotations

import shutil
import stat

import pytest

from simtc.hw.compile import _nvcc_compile

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")


def test_a_source_named_by_its_path_is_left_alone(tmp_path):
    user = tmp_path / "user.cu"
    user.write_bytes(b"// the user's own text \xff\n")
    user.chmod(stat.S_IRUSR)
    (tmp_path / "inc.h").write_text("#define VALUE 1234567\n")
    src = '#include "inc.h"\nextern "C" __global__ void k(int* p) { *p = VALUE; }\n'
    ptx = _nvcc_compile(src, str(user), "sm_90a", [], "ptx").decode()
    assert "1234567" in ptx
    assert user.read_bytes() == b"// the user's own text \xff\n"
