"""``simtc crosscheck FILE.cu --kernel NAME ...``: argument errors, the diff of two result sets (a bit flipped on
simtc's side through the ``_gpu_run`` seam), the no-GPU line; on a GPU the examples' kernels and a float-math kernel
both ways (``gpu``); and tests/data/h200_crosscheck_kernel.json (that run on an H200) against simtc today."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from simtc.cli import crosscheck_kernel as ck
from simtc.cli import main
from simtc.hw.device import DeviceInfo

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "tests" / "data" / "h200_crosscheck_kernel.json"

FLOAT_MATH = r'''
extern "C" __global__ void float_math(const float* __restrict__ x, const float* __restrict__ y, float* f,
                                      float* e, float* r, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    float a = i < n ? x[i] : 0.0f, b = i < n ? y[i] : 0.0f;
    if (i < n) { f[i] = fmaf(a, b, 1.0f); e[i] = __expf(a); }
    float v = a * b;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31u) == 0u) { r[i / 32u] = v; printf("warp %u: %f\n", i / 32u, v); }
}
'''


def cases(d: Path) -> dict[str, list[str]]:
    """The three recorded launches (seeded inputs written to ``d``) as ``simtc crosscheck`` argument lists."""
    rng = np.random.default_rng(26)
    x = rng.standard_normal(1000, dtype=np.float32)
    np.save(d / "a.npy", x)
    np.save(d / "b.npy", rng.standard_normal(1000, dtype=np.float32))
    np.save(d / "c.npy", np.zeros(1000, np.float32))
    np.save(d / "x.npy", rng.standard_normal(512, dtype=np.float32))
    np.save(d / "s.npy", np.zeros(4, np.float32))
    np.save(d / "fx.npy", rng.uniform(-8, 8, 256).astype(np.float32))
    np.save(d / "fy.npy", rng.standard_normal(256, dtype=np.float32))
    for name, n in (("f", 256), ("e", 256), ("r", 8)):
        np.save(d / f"{name}.npy", np.zeros(n, np.float32))
    (d / "float_math.cu").write_text(FLOAT_MATH)
    return {
        "vector_add": [str(ROOT / "examples" / "vector_add.cu"), "--grid", "4", "--block", "256",
                       "--arg", f"a={d}/a.npy", "--arg", f"b={d}/b.npy", "--arg", f"c={d}/c.npy", "--arg", "n=1000"],
        "block_sum": [str(ROOT / "examples" / "block_sum.cu"), "--grid", "4", "--block", "64", "--smem", "256",
                      "--arg", f"x={d}/x.npy", "--arg", f"out={d}/s.npy", "--arg", "n=512"],
        "float_math": [str(d / "float_math.cu"), "--kernel", "float_math", "--grid", "2", "--block", "128",
                       "--arg", f"x={d}/fx.npy", "--arg", f"y={d}/fy.npy", "--arg", f"f={d}/f.npy",
                       "--arg", f"e={d}/e.npy", "--arg", f"r={d}/r.npy", "--arg", "n=256"],
    }


def _err(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("simtc: error: ") and "[rule: " in err[0], err
    return err[0]


# ---- argument errors (no GPU needed: they come before the GPU is looked for) -------------------------------

@pytest.mark.parametrize(("argv", "words"), [
    (["--kernel", "examples/vector_add.cu"], "give the file first"),
    (["--grid", "4"], "give its FILE.cu or FILE.ptx"),
    (["examples/vector_add.cu", "--block", "32"], "needs --grid and --block"),
    (["examples/vector_add.cu", "--grid", "1", "--block", "32", "--seed", "3"], "--seed: options of the built-in"),
    (["examples/vector_add.cu", "--grid", "1", "--block", "32", "--tolerance", "bits=2"], "write ulp=N"),
    (["examples/vector_add.cu", "--grid", "1", "--block", "32", "--arg", "a=nothing.npy", "--arg", "1=0",
      "--arg", "2=0", "--arg", "n=1"], "a=nothing.npy: no such file"),
    (["examples/vector_add.cu", "--grid", "1", "--block", "32"], "missing: 0/a/vector_add_param_0"),
    (["examples/vector_add.cu", "--kernel", "nope", "--grid", "1", "--block", "32"], "nope"),
    (["missing.cu", "--grid", "1", "--block", "32"], "no such file"),
])
def test_argument_errors(argv, words, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["crosscheck", *argv]) == 2
    assert words in _err(capsys)


def test_no_gpu_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    import simtc.hw.device

    monkeypatch.setattr(simtc.hw.device, "probe", lambda: DeviceInfo(False, "cupy is not installed"))
    assert main(["crosscheck", *cases(tmp_path)["vector_add"]]) == 2
    line = _err(capsys)
    assert "needs CuPy and a CUDA GPU" in line and "cupy is not installed" in line and "nothing was compared" in line


# ---- the diff, simtc against itself with one bit flipped on one side ----------------------------------------

def _fake_gpu(monkeypatch, flip=None):
    """The GPU side replaced by simtc's own run of the same inputs, ``flip(outputs)`` applied to it."""
    from simtc.cli.run import simtc_arguments

    monkeypatch.setattr(ck, "_device", lambda: DeviceInfo(True, "ok", name="stand-in", arch="sm_90a", sms=1))

    def gpu_run(kernel, inputs, grid, block, smem, options, backend):
        launch, arrays = simtc_arguments(inputs)
        kernel(grid, block, tuple(launch), shared_mem=smem)
        outs = {k: v.get() for k, v in arrays.items()}
        if flip is not None:
            flip(outs)
        return ck.KernelRun("gpu", outs, tuple(kernel.last_result.printf))

    monkeypatch.setattr(ck, "_gpu_run", gpu_run)


def test_identical_runs_exit_0(tmp_path, monkeypatch, capsys):
    _fake_gpu(monkeypatch)
    assert main(["crosscheck", *cases(tmp_path)["vector_add"], "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] and [o["status"] for o in data["outputs"]] == ["identical"] * 3
    assert [o["written"] for o in data["outputs"]] == [False, False, True]


def test_flipped_bit_is_found_and_located(tmp_path, monkeypatch, capsys):
    def flip(outs):
        outs["c"].view(np.uint32)[517] ^= 1

    _fake_gpu(monkeypatch, flip)
    out = tmp_path / "out"
    assert main(["crosscheck", *cases(tmp_path)["vector_add"], "--json", "--out", str(out)]) == 1
    data = json.loads(capsys.readouterr().out)
    c = next(o for o in data["outputs"] if o["name"] == "c")
    assert c["status"] == "differs" and c["differing"] == 1 and c["max_ulp"] == 1
    d = c["first"][0]
    assert d["index"] == [517] and d["ulp"] == 1
    assert int(d["gpu_hex"], 16) ^ int(d["simtc_hex"], 16) == 1
    assert np.load(out / "gpu" / "c.npy").view(np.uint32)[517] ^ np.load(out / "simtc" / "c.npy").view(
        np.uint32)[517] == 1
    # accepted explicitly with a tolerance of one ULP
    assert main(["crosscheck", *cases(tmp_path)["vector_add"], "--tolerance", "ulp=1"]) == 0
    assert "within 1 ulp" in capsys.readouterr().out


def test_compare_cases():
    f = np.float32
    g = ck.KernelRun("gpu", {"a": np.array([1, 2, 3], np.int32), "n": np.array([np.nan, 1], f),
                             "z": np.array([0.0], f), "s": np.zeros(2, f)}, ("x\n", "y\n"))
    s = ck.KernelRun("simtc", {"a": np.array([1, 2, -3], np.int32), "n": np.array([np.nan, 1], f),
                               "z": np.array([-0.0], f), "s": np.zeros(3, f)}, ("y\n", "x\n"))
    r = ck.compare(g, s, tolerance_ulp=5)
    by = {o.name: o for o in r.outputs}
    assert by["a"].status == "differs" and by["a"].first[0].index == (2,) and by["a"].max_abs == 6.0
    assert by["a"].first[0].simtc_hex == "0xfffffffd" and by["a"].first[0].ulp is None
    assert by["n"].status == "identical"
    assert by["z"].differing == 1 and by["z"].max_ulp == 0 and by["z"].status == "within"  # +0 vs -0: 0 apart
    assert by["s"].status == "differs" and "float32 (2,)" in by["s"].why
    assert r.printf == "reordered" and not r.ok
    assert ck.compare(g, ck.KernelRun("simtc", {}, ("x\n",))).printf == "differs"


def test_approx_instructions_listed(tmp_path):
    from simtc.cli.run import launch_inputs, load_kernel, simtc_arguments

    argv = cases(tmp_path)["float_math"]
    kernel, names = load_kernel(argv[0], "float_math")
    items = [argv[i + 1] for i, a in enumerate(argv) if a == "--arg"]
    launch, _ = simtc_arguments(launch_inputs(kernel, names, items))
    kernel((2,), (128,), tuple(launch))
    approx = ck.approx_instructions(kernel, kernel.last_result)
    assert [a["instruction"] for a in approx] == ["ex2.approx.ftz.f32"]
    assert approx[0]["warp_instructions"] == 8  # every warp of the 2 x 128 threads


# ---- on a GPU ------------------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_on_gpu_both_ways(tmp_path, capsys):
    from simtc.hw.device import probe

    info = probe()
    if not info.available:
        pytest.skip(f"needs a CUDA GPU and CuPy: {info.reason}")
    got = {}
    for name, argv in cases(tmp_path).items():
        out = tmp_path / f"out_{name}"
        rc = main(["crosscheck", *argv, "--json", "--out", str(out)])
        data = json.loads(capsys.readouterr().out)
        assert rc == (0 if data["ok"] else 1)
        for o in data["outputs"]:
            o["gpu_sha256"] = hashlib.sha256(np.load(out / "gpu" / f"{o['name']}.npy").tobytes()).hexdigest()
        got[name] = data
    for name in ("vector_add", "block_sum"):
        assert got[name]["ok"], got[name]
    fm = {o["name"]: o for o in got["float_math"]["outputs"]}
    assert fm["f"]["status"] == fm["r"]["status"] == "identical"  # fma and the shuffle tree: IEEE, bit for bit
    assert [a["instruction"] for a in got["float_math"]["approx"]] == ["ex2.approx.ftz.f32"]
    assert got["float_math"]["printf"] in ("identical", "reordered")
    record = os.environ.get("SIMTC_RECORD_CROSSCHECK")
    if record:
        Path(record).write_text(json.dumps(got, indent=1) + "\n")


# ---- the H200 recording against simtc today -------------------------------------------------------------------

def test_h200_record_matches_simtc_today(tmp_path):
    """Each output tests/data/h200_crosscheck_kernel.json records: simtc's bits today equal the GPU's recorded
    bits (sha256) exactly where the recording says identical."""
    from simtc.cli.run import launch_inputs, load_kernel, simtc_arguments

    rec = json.loads(RECORD.read_text())
    for name, argv in cases(tmp_path).items():
        kernel, names = load_kernel(argv[0], argv[argv.index("--kernel") + 1] if "--kernel" in argv else None)
        items = [argv[i + 1] for i, a in enumerate(argv) if a == "--arg"]
        launch, arrays = simtc_arguments(launch_inputs(kernel, names, items))
        grid, block = int(argv[argv.index("--grid") + 1]), int(argv[argv.index("--block") + 1])
        smem = int(argv[argv.index("--smem") + 1]) if "--smem" in argv else 0
        kernel((grid,), (block,), tuple(launch), shared_mem=smem)
        assert {o["name"] for o in rec[name]["outputs"]} == set(arrays)
        differing = [o for o in rec[name]["outputs"] if o["status"] != "identical"]
        assert not differing or rec[name]["approx"], name  # a difference only where an approximation ran
        assert all(o["written"] and o["max_ulp"] is not None and o["max_ulp"] <= 2 for o in differing), name
        for o in rec[name]["outputs"]:
            mine = hashlib.sha256(arrays[o["name"]].get().tobytes()).hexdigest()
            assert (mine == o["gpu_sha256"]) == (o["status"] == "identical"), (name, o["name"])
