"""``simtc run``: a CUDA C++ or PTX kernel on .npy inputs, every array argument written back; bad input is one line,
exit 2; a kernel fault one line, exit 1."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from simtc.cli import main
from simtc.cli.run import cuda_param_names

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
VA = str(EXAMPLES / "vector_add.cu")


@pytest.fixture
def inputs(tmp_path):
    a = np.arange(300, dtype=np.float32)
    b = np.full(300, 0.5, np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    np.save(tmp_path / "c.npy", np.zeros(300, np.float32))
    return tmp_path


def _va(d, *extra, n="300"):
    return [VA, "--grid", "2", "--block", "256", "--arg", f"a={d}/a.npy", "--arg", f"b={d}/b.npy",
            "--arg", f"c={d}/c.npy", "--arg", f"n={n}", "--out", str(d / "out"), *extra]


def test_vector_add_writes_every_array(inputs, capsys):
    assert main(["run", *_va(inputs)]) == 0
    out = inputs / "out"
    np.testing.assert_array_equal(np.load(out / "c.npy"), np.arange(300, dtype=np.float32) + 0.5)
    np.testing.assert_array_equal(np.load(out / "a.npy"), np.arange(300, dtype=np.float32))
    assert sorted(p.name for p in out.iterdir()) == ["a.npy", "b.npy", "c.npy"]
    cap = capsys.readouterr()
    assert "ran vector_add on grid (2, 1, 1), block (256, 1, 1): " in cap.out and "thread-instructions" in cap.out
    assert f"wrote {out / 'c.npy'} (float32, shape (300,))" in cap.err


def test_json_and_names_by_index_and_ptx_name(inputs, capsys):
    argv = [VA, "--grid", "2", "--block", "256", "--arg", f"0={inputs}/a.npy", "--arg",
            f"vector_add_param_1={inputs}/b.npy", "--arg", f"2={inputs}/c.npy", "--arg", "3=0x100",
            "--out", str(inputs / "o"), "--json"]
    assert main(["run", *argv]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kernel"] == "vector_add" and data["grid"] == [2, 1, 1] and data["block"] == [256, 1, 1]
    assert data["outputs"] == {"0": str(inputs / "o" / "0.npy"), "vector_add_param_1": str(
        inputs / "o" / "vector_add_param_1.npy"), "2": str(inputs / "o" / "2.npy")}
    assert isinstance(data["result"], dict)
    c = np.load(inputs / "o" / "2.npy")
    assert (c[:256] == np.arange(256) + 0.5).all() and (c[256:] == 0).all()  # n = 0x100


def test_ptx_file(inputs, capsys):
    from simtc.cuda.compiler import compile_to_ptx

    ptx = inputs / "va.ptx"
    ptx.write_text(compile_to_ptx(Path(VA).read_text())[0])
    argv = [str(ptx), "--grid", "2", "--block", "256", "--arg", f"0={inputs}/a.npy", "--arg", f"1={inputs}/b.npy",
            "--arg", f"2={inputs}/c.npy", "--arg", "3=300", "--out", str(inputs / "p")]
    assert main(["run", *argv]) == 0
    np.testing.assert_array_equal(np.load(inputs / "p" / "2.npy"), np.arange(300, dtype=np.float32) + 0.5)


def test_smem_above_48k_opts_in(tmp_path):
    src = tmp_path / "dyn.cu"
    src.write_text('extern "C" __global__ void dyn(int* out) { extern __shared__ int s[]; s[16383] = 5; '
                   '__syncthreads(); out[threadIdx.x] = s[16383]; }')
    np.save(tmp_path / "o.npy", np.zeros(32, np.int32))
    assert main(["run", str(src), "--grid", "1", "--block", "32", "--smem", str(64 * 1024), "--arg",
                 f"out={tmp_path}/o.npy", "--out", str(tmp_path / "r")]) == 0
    assert (np.load(tmp_path / "r" / "out.npy") == 5).all()


def test_kernel_fault_is_one_line_exit_1(tmp_path, capsys):
    src = tmp_path / "oob.cu"
    src.write_text('extern "C" __global__ void oob(float* p) {\n  p[threadIdx.x + 8] = 1.0f;\n}\n')
    np.save(tmp_path / "p.npy", np.zeros(8, np.float32))
    assert main(["run", str(src), "--grid", "1", "--block", "8", "--arg", f"p={tmp_path}/p.npy", "--out",
                 str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("simtc: error: ") and "[rule:" in err
    assert "0x" in err  # the address


# ---- bad input: one line, exit 2 ----------------------------------------------------------------------------

def _bad(argv, capsys) -> str:
    assert main(["run", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("simtc: error: "), err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize(("mutate", "needle"), [
    (lambda a, d: ["missing.cu", *a[1:]], "'missing.cu': no such file"),
    (lambda a, d: [str(d / "a.npy"), *a[1:]], "a .cu (CUDA C++) or .ptx file is needed"),
    (lambda a, d: [*a, "--kernel", "nope"], "no kernel 'nope' in the module; it has: vector_add"),
    (lambda a, d: [x if x != "2" else "2,x" for x in a], "not an integer: 'x'"),
    (lambda a, d: [x if x != "2" else "-4" for x in a], "must be in 1..2147483647, got -4"),
    (lambda a, d: [x if x != "256" else "0" for x in a], "must be in 1..1024, got 0"),
    (lambda a, d: [x if x != "2" else "1,2,3,4" for x in a], "4 values, at most 3 allowed"),
    (lambda a, d: [x if x != "256" else "" for x in a], "empty list"),
    (lambda a, d: [*a, "--smem", "-1"], "must be >= 0, got -1"),
    (lambda a, d: [*a, "--arg", "zz=1"], "--arg zz: no such parameter; the kernel's parameters are 0/a/"
                                         "vector_add_param_0 (.u64), 1/b/"),
    (lambda a, d: [*a, "--arg", "9=1"], "--arg 9: the kernel has 4 parameters"),
    (lambda a, d: [*a, "--arg", "3=1"], "parameter 3 (vector_add_param_3) is already given as --arg n"),
    (lambda a, d: [*a, "--arg", "oops"], "write NAME=FILE.npy or NAME=NUMBER"),
    (lambda a, d: [x for x in a if not x.startswith("n=")][:-3] + a[-2:], "needs an --arg for every parameter; "
                                                                            "missing: 3/n/vector_add_param_3"),
    (lambda a, d: [x if x != "n=300" else "n=4294967296" for x in a], "does not fit .u32"),
    (lambda a, d: [x if x != "n=300" else "n=1.5" for x in a], "not an integer for .u32 parameter"),
    (lambda a, d: [x if x != "n=300" else f"n={d}/a.npy" for x in a], "is a .u32 scalar, not a pointer"),
    (lambda a, d: [x if x != f"a={d}/a.npy" else f"a={d}/none.npy" for x in a], "no such file"),
    (lambda a, d: [x if x != f"a={d}/a.npy" else f"a={d}/bad.npy" for x in a], "not a readable .npy file"),
    (lambda a, d: [x if x != f"a={d}/a.npy" else "a=1.5" for x in a], "not an integer for .u64 parameter"),
    (lambda a, d: [*a, "--step", "--step-to", "3"], "--step and --step-to do not combine"),
    (lambda a, d: [*a, "--step-to", "3", "--trace", str(d / "t.json")], "--trace does not combine"),
    (lambda a, d: [*a, "--schedules", "4", "--step-to", "3"], "--schedules does not combine"),
    (lambda a, d: [*a, "--cta", "1"], "--cta goes with --timing"),
    (lambda a, d: [*a, "--timing", "--cta", "2"], "--cta 2,0,0 is outside the grid 2,1,1"),
    (lambda a, d: [*a, "--schedules", "0"], "schedules is 1 ... 1024"),
    (lambda a, d: [*a, "--arch", "sm_7"], "not an architecture such as sm_90a"),
    (lambda a, d: [*a, "--option=-arch=sm_100a", "--arch", "sm_90a", "--kernel", "vector_add"], "two targets"),
    (lambda a, d: [x if x != str(d / "out") else str(d / "a.npy") for x in a], "exists and is not a directory"),
    (lambda a, d: [x if x != str(d / "out") else str(d / "no" / "out") for x in a], "does not exist"),
    (lambda a, d: [*a, "--backend", "clang"], "invalid choice: 'clang'"),
])
def test_bad_input(inputs, capsys, mutate, needle):
    (inputs / "bad.npy").write_bytes(b"not an npy file")
    err = _bad(mutate(_va(inputs), inputs), capsys)
    assert needle in err, err
    assert "[rule:" in err


def test_bad_ptx_and_compile_error(tmp_path, capsys):
    bad = tmp_path / "bad.cu"
    bad.write_text('extern "C" __global__ void k() { undeclared(); }')
    err = _bad([str(bad), "--grid", "1", "--block", "1", "--out", str(tmp_path)], capsys)
    assert 'identifier "undeclared" is undefined' in err and "rule: the kernel must compile" in err
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(b"\x7fELF" + bytes(16))
    assert "simtc executes PTX" in _bad([str(cubin), "--grid", "1", "--block", "1", "--out", str(tmp_path)], capsys)
    ptx = tmp_path / "k.ptx"
    ptx.write_text(".version 9.0\n.target sm_90a\n.address_size 64\n.visible .entry k(\n{\n  bogus.op %r1;\n}\n")
    err = _bad([str(ptx), "--grid", "1", "--block", "1", "--out", str(tmp_path)], capsys)
    assert "rule:" in err
    err = _bad([str(ptx), "--grid", "1", "--block", "1", "--out", str(tmp_path), "--arch", "sm_90a"], capsys)
    assert "a PTX file names its own target" in err


def test_two_kernels_need_kernel(tmp_path, capsys):
    src = tmp_path / "two.cu"
    src.write_text('extern "C" __global__ void k1() {}\nextern "C" __global__ void k2() {}\n')
    err = _bad([str(src), "--grid", "1", "--block", "1", "--out", str(tmp_path)], capsys)
    assert "the module has 2 kernels (k1, k2): name one with --kernel" in err


def test_cxx_kernel_by_its_cxx_name(tmp_path, capsys):
    src = tmp_path / "t.cu"
    src.write_text("__global__ void twice(int* p, int n) { if (threadIdx.x < n) p[threadIdx.x] *= 2; }\n")
    np.save(tmp_path / "p.npy", np.arange(4, dtype=np.int32))
    assert main(["run", str(src), "--kernel", "twice", "--grid", "1", "--block", "4", "--arg",
                 f"p={tmp_path}/p.npy", "--arg", "n=3", "--out", str(tmp_path / "o")]) == 0
    assert np.load(tmp_path / "o" / "p.npy").tolist() == [0, 2, 4, 3]


def test_subprocess_prints_one_line_and_no_traceback(tmp_path):
    done = subprocess.run([sys.executable, "-m", "simtc", "run", "missing.cu", "--grid", "1", "--block", "1",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "no such file" in done.stderr


def test_cuda_param_names():
    src = "/* __global__ void f(int a) */\n__global__ void f(float *x, const int* __restrict__ y, unsigned n) {}\n"
    assert cuda_param_names(src, "f", 3) == ("x", "y", "n")
    assert cuda_param_names(src, "f", 2) is None
    assert cuda_param_names("__global__ void g(int a); __global__ void g(int b) {}", "g", 1) is None
    assert cuda_param_names("__global__ void h() {}", "h", 0) == ()
