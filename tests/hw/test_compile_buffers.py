"""NVRTC's output buffers: compiling must not write into Python's shared bytes objects.

NVRTC fills the buffer it is handed. ``b" " * 1`` is CPython's one cached one-byte ``b" "``, so handing it to
``nvrtcGetProgramLog`` for an empty log (one NUL byte) once turned every ``b" "`` of the process into ``b"\\x00"``
(a kernel's printf then printed NULs for spaces). The buffers are fresh ``bytearray`` objects now.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

from simtc.hw import compile as compile_mod

pytestmark = pytest.mark.skipif(importlib.util.find_spec("cuda") is None,
                                reason="cuda-bindings (dev extra) not installed: no NVRTC")


def test_an_uncached_compile_leaves_the_one_byte_bytes_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMTC_CACHE", str(tmp_path))  # a cold cache: NVRTC really runs
    src = 'extern "C" __global__ void k(int* p) { p[threadIdx.x] = ' + str(os.getpid()) + '; }'
    ptx = compile_mod.compile_cuda(src, arch="sm_90a", output="ptx")
    assert b".entry k" in ptx
    # bytes([32]) is the same cached object, so compare the byte's value, not two bytes objects
    assert b" "[0] == 32 and b"a b"[1:2][0] == 32 and bytes(bytearray(b"x y"))[1] == 32
