"""``simtc calibrate`` without a GPU: every microbenchmark compiles to the SASS it measures, the fits, the
recording format, the command line, and a whole ``--quick`` run against a fake CuPy that checks every launch
(argument count and types against the kernel's CUDA signature, block size against its launch bounds, cluster
grids, dynamic shared memory). On an sm_90a GPU the last test runs ``--quick`` for real."""

from __future__ import annotations

import collections
import importlib.util
import json
import math
import re
import subprocess
import sys
import types

import numpy as np
import pytest

from simtc.cli import main
from simtc.errors import ShapeError, SimtcError
from simtc.hw import calibrate as cal
from simtc.hw.device import probe

HAVE_NVRTC = importlib.util.find_spec("cuda") is not None and importlib.util.find_spec("cuda.bindings") is not None
NO_COMPILER = "cuda-bindings + nvidia-cuda-nvrtc (dev extra) not installed"
needs_compiler = pytest.mark.skipif(not HAVE_NVRTC, reason=NO_COMPILER)
INFO = probe()
SM90 = INFO.available and INFO.arch == "sm_90a"


@pytest.fixture(scope="module")
def checks():
    if not HAVE_NVRTC:
        pytest.skip(NO_COMPILER)
    from simtc.errors import HardwareUnavailable

    try:
        return cal.sass_checks()
    except HardwareUnavailable as e:
        pytest.skip(str(e))


# ---- SASS -------------------------------------------------------------------------------------------------------

def test_every_benchmark_compiles_to_the_sass_it_measures(checks):
    assert set(checks) == {b.name for b in cal.benches()}
    failed = {k: c.problems for k, c in checks.items() if not c.ok}
    assert not failed, failed


@pytest.mark.parametrize("name, per_step", [
    ("cuda_core/FFMA/throughput", {"FFMA": 1.0}),
    ("cuda_core/MUFU.EX2/latency", {"MUFU.EX2": 1.0}),
    ("cuda_core/F2FP.F16.E4M3.UNPACK_B/latency", {"F2FP.F16.E4M3.UNPACK_B": 1.0}),
    ("cuda_core/HADD2.F32/throughput", {"HADD2.F32": 1.0}),
    ("cuda_core/F2FP.BF16.F32.PACK_AB/throughput", {"F2FP.BF16.F32.PACK_AB": 1.0}),
    ("cuda_core/HFMA2/throughput", {"HFMA2": 0.5, "HFMA2.MMA": 0.5}),       # ptxas splits half-precision ops
    ("cuda_core/HMUL2.BF16_V2/latency", {"HMUL2.BF16_V2": 0.5, "HFMA2.MMA.BF16_V2": 0.5}),
    ("cuda_core/dequant/throughput", {"SHF.R.U32.HI": 2.0, "F2FP.F16.E4M3.UNPACK_B": 4.0, "HADD2.F32": 8.0,
                                      "F2FP.BF16.F32.PACK_AB": 4.0, "HMUL2.BF16_V2": 2.0, "HFMA2.MMA.BF16_V2": 2.0,
                                      "LOP3.LUT": 1.0}),
    ("cuda_core_pairs/HFMA2 + FFMA", {"FFMA": 1.0, "HFMA2": 0.5, "HFMA2.MMA": 0.5}),
    ("shared_memory/STS.128/2-way", {"STS.128": 1.0}),
    ("shared_memory/LDS.32/latency", {"LDS": 1.0}),
    ("sync/bar_sync", {"BAR.SYNC.DEFER_BLOCKING": 1.0}),
    ("sync/fence_proxy_async", {"MEMBAR.ALL.CTA": 1.0, "FENCE.VIEW.ASYNC.S": 1.0}),
    ("memory/latency/ldg.cg", {"LDG.E.64.STRONG.GPU": 1.0}),   # ld.global.cg: L2, not L1
    ("memory/latency/ldg", {"LDG.E.64": 1.0}),                 # plain ld.global: cached in L1
])
def test_one_step_is_exactly_the_measured_sass(checks, name, per_step):
    assert checks[name].per_step == per_step


def test_the_dequant_step_is_flashmla_s(checks):
    """The same SASS as FlashMLA's cvt_fp8x8_bf16x8 compiled from cuda_fp8.h/cuda_bf16.h by nvcc 13.0 for sm_90a
    (2 SHF.R.U32.HI, 4 UNPACK_B, 8 HADD2.F32, 4 PACK_AB, 2+2 HMUL2/HFMA2.MMA per 8 values: 22), plus the one LOP3
    that feeds the outputs back."""
    h = checks["cuda_core/dequant/throughput"].per_step
    assert sum(v for k, v in h.items() if k != "LOP3.LUT") == 22


@needs_compiler
def test_gathers_time_no_address_arithmetic():
    """In every gather kernel the row hash (IMAD.HI.U32 of __umulhi) runs before t0, never between a
    warpgroup's clock read and its closing barrier."""
    from simtc.errors import HardwareUnavailable
    from simtc.hw.compile import compile_cuda, disassemble

    try:
        sass = disassemble(compile_cuda(cal.module_source("memory"), arch="sm_90a", name="m.cu"))
    except HardwareUnavailable as e:
        pytest.skip(str(e))
    for name in cal._GATHER.values():
        body = sass.split(f".text.{name}:")[1].split(".text.")[0]
        ops = [ln.split(";")[0] for ln in body.splitlines() if re.match(r"\s+/\*[0-9a-f]{4}\*/", ln)]
        named = [i for i, op in enumerate(ops) if re.search(r"BAR\.SYNC\.DEFER_BLOCKING R\d+, 0x80", op)]
        assert len(named) == 2, name
        clock = next(i for i in range(named[0], named[1]) if "SR_CLOCKLO" in ops[i])
        timed = ops[clock:named[1]]
        assert not [op for op in timed if "IMAD.HI.U32" in op], name
        assert any(k in op for op in timed for k in ("LDG", "LDGSTS", "UBLKCP")), name


def _timed_ops(sass: str, kernel: str) -> tuple[list[str], list[str]]:
    """(every instruction, the instructions between the kernel's two clock64 reads) of one kernel's SASS."""
    body = sass.split(f".text.{kernel}:")[1].split(".text.")[0]
    ops = [re.sub(r"^\s*/\*[0-9a-f]{4}\*/\s*", "", ln.split(";")[0]).strip() for ln in body.splitlines()
           if re.match(r"\s+/\*[0-9a-f]{4}\*/", ln)]
    clocks = [i for i, op in enumerate(ops) if "SR_CLOCKLO" in op]
    assert len(clocks) == 2, (kernel, clocks)
    return ops, ops[clocks[0] + 1:clocks[1]]


def _mnemonic(op: str) -> str:
    return re.sub(r"^@!?U?P\w+\s+", "", op).split()[0]


@needs_compiler
def test_latency_kernels_time_exactly_the_measured_requests():
    """Between an LDG chase kernel's clock reads: its S dependent loads with the declared modifier and nothing else
    that touches memory but the shared-memory store that waits for the last one; a clock read follows that wait
    at both ends. The bulk chase's timed loop: one arrive.expect_tx, one UBLKCP, its try-wait, the LDS.64 of the
    next address, and no LDG."""
    from simtc.errors import HardwareUnavailable
    from simtc.hw.compile import compile_cuda, disassemble

    try:
        sass = disassemble(compile_cuda(cal.module_source("latency"), arch="sm_90a", name="l.cu"))
    except HardwareUnavailable as e:
        pytest.skip(str(e))
    memory = ("LD", "ST", "RED", "ATOM", "UBLKCP", "SYNCS")
    for key, (_, mnemonic, tag) in cal.LDG_CHASE.items():
        for steps in cal.LDG_CHASE_STEPS:
            ops, timed = _timed_ops(sass, cal._ldg_chase_kernel(tag, steps))
            touching = [_mnemonic(op) for op in timed if _mnemonic(op).startswith(memory)]
            assert touching == [mnemonic] * steps + ["STS.64"], (key, steps, touching)
            clocks = [i for i, op in enumerate(ops) if "SR_CLOCKLO" in op]
            assert all(_mnemonic(ops[i - 1]) == "STS.64" for i in clocks), key
            loads = [_mnemonic(op) for op in ops[:clocks[0]] if _mnemonic(op).startswith("LDG")]
            assert loads == ["LDG.E.64", mnemonic], (key, loads)  # the cursor, the untimed walk
    _, timed = _timed_ops(sass, "simtc_cal_lat_bulk")
    names = collections.Counter(_mnemonic(op) for op in timed)
    for m in ("UBLKCP.S.G", "SYNCS.ARRIVE.TRANS64", "SYNCS.PHASECHK.TRANS64.TRYWAIT", "LDS.64"):
        assert names[m] == 1, (m, names)
    assert not [m for m in names if m.startswith(("LDG", "STG"))], names
    order = [m for m in (_mnemonic(op) for op in timed)
             if m in ("SYNCS.ARRIVE.TRANS64", "UBLKCP.S.G", "SYNCS.PHASECHK.TRANS64.TRYWAIT", "LDS.64")]
    assert order == ["SYNCS.ARRIVE.TRANS64", "UBLKCP.S.G", "SYNCS.PHASECHK.TRANS64.TRYWAIT", "LDS.64"]


def test_the_chase_is_one_random_cycle_through_every_slot():
    """chase_slot is a bijection of [0, 2^bits) for every pool (so element k -> k + 1 is one cycle through all
    slots), its constants are the CUDA source's, and consecutive elements land on the same 2 MiB page no more
    often than chance."""
    src = cal._cu("calibrate_latency.cu")
    assert [int(c, 16) for c in re.findall(r"x \* (0x[0-9A-Fa-f]+)u\)", src)] == list(cal._CHASE_MULS)
    assert f"{cal.LAT_SEED:#x}" == "0x5eed"
    for method, stride in cal.LAT_STRIDE.items():
        for pool, size in cal.LAT_POOLS.items():
            if method == "bulk" and pool == "l1":
                continue
            n = size // stride
            assert n & (n - 1) == 0 and stride >= 128, (method, pool)
            bits = n.bit_length() - 1
            if bits > 21:
                continue  # 2^25 slots: the same function, too large to enumerate here
            slots = cal.chase_slot(np.arange(n, dtype=np.uint64), bits)
            assert np.unique(slots).size == n and slots.max() == n - 1, (method, pool)
            assert int(slots[3]) == cal.chase_slot(3, bits)
            per_page = (2 << 20) // stride
            if per_page < n:
                same = np.mean(slots // per_page == np.roll(slots, -1) // per_page)
                assert same < 2 * per_page / n, (method, pool, same)
            jumps = np.abs(np.diff(slots.astype(np.int64))) / n
            assert 0.25 < np.median(jumps) < 0.34, (method, pool)  # uniform pairs: 1 - 1/sqrt(2) = 0.293


def test_check_bench_names_every_problem():
    b = cal.Bench("cuda_core", "x", "alu", (cal.Variant("k4", 64), cal.Variant("k16", 256)), (("FFMA", 1),), slack=4)
    good = {"k4": {"FFMA": 64, "IADD3": 3}, "k16": {"FFMA": 256, "IADD3": 3}}
    assert cal.check_bench(b, good).ok
    assert cal.check_bench(b, good).per_step == {"FFMA": 1.0}
    assert "not in the cubin" in cal.check_bench(b, {"k4": good["k4"]}).problems[0]
    few = {"k4": {"FFMA": 60}, "k16": good["k16"]}
    assert "60 x FFMA, expected 64..68" in cal.check_bench(b, few).problems[0]
    glue = {"k4": {"FFMA": 64, "PRMT": 0}, "k16": {"FFMA": 256, "PRMT": 192}}
    assert "scales with the steps" in cal.check_bench(b, glue).problems[0]
    swap = {"k4": {"FFMA": 64, "IADD3": 0, "VIADD": 12}, "k16": {"FFMA": 256, "IADD3": 12, "VIADD": 0}}
    assert cal.check_bench(b, swap).ok  # the same set-up code, other mnemonics
    spill = {"k4": {"FFMA": 64, "STL": 2}, "k16": good["k16"]}
    assert "spills" in cal.check_bench(b, spill).problems[0]
    fixed = cal.Bench("memory", "y", "memory", (cal.Variant("g", 0),), counts=(("LDG.E.*", 2, 3),))
    assert cal.check_bench(fixed, {"g": {"LDG.E.128": 1, "LDG.E.64": 1}}).ok
    assert not cal.check_bench(fixed, {"g": {"LDG.E.128": 4}}).ok


@pytest.mark.parametrize("bits", [32, 64, 128])
@pytest.mark.parametrize("ways", [1, 2, 4])
def test_shared_memory_lanes_make_the_stated_conflicts(bits, ways):
    """Lane l at byte (bits/8 x ways) l of a slice: exactly `ways`-way conflicts, by simtc's bank model."""
    from simtc.smem.banks import bank_conflicts

    r = bank_conflicts(np.arange(32) * bits // 8 * ways, width=bits // 8)
    assert r.wavefronts == ways * r.ideal


def test_benchmark_names_are_unique_and_every_section_has_some():
    names = [b.name for b in cal.benches()]
    assert len(names) == len(set(names))
    assert {b.section for b in cal.benches()} == set(cal.SECTIONS)
    kernels = [v.kernel for b in cal.benches() for v in b.variants]
    assert len(kernels) == len(set(kernels)) + 0 * len(kernels)


# ---- fits -------------------------------------------------------------------------------------------------------

def test_fit_recovers_slope_and_intercept_from_noisy_loops():
    rng = np.random.default_rng(1)
    x = np.array([64, 128, 192, 256]) * 32
    y = 4.25 * x + 310 + rng.uniform(-3, 3, x.size)
    slope, intercept = cal.fit_line(x, y)
    assert abs(slope - 4.25) < 0.01 and abs(intercept - 310) < 10


@pytest.mark.parametrize("x, y", [([4], [10.0]), ([4, 4], [1.0, 2.0]), ([1, 2], [1.0]), ([1, 2], [1.0, math.nan])])
def test_fit_refuses_what_cannot_be_fitted(x, y):
    with pytest.raises(ShapeError, match="intercept"):
        cal.fit_line(x, y)


@pytest.mark.parametrize("per_access, intercept", [(812.0, 40.0), (301.5, 25.0), (33.0, 12.0)])
def test_latency_fit_recovers_cycles_per_dependent_access(per_access, intercept):
    rng = np.random.default_rng(7)
    depths = [8 * 32, 16 * 32, 24 * 32, 32 * 32]
    cycles = [intercept + per_access * d + rng.uniform(-20, 20) for d in depths]
    fit = cal._lat_fit(depths, cycles)
    assert fit["depths"] == depths and fit["cycles"] == cycles
    assert abs(fit["slope"] - per_access) < 0.1 and abs(fit["intercept"] - intercept) < 60
    assert 0 <= fit["residual_max"] < 40


def test_latency_fit_refuses_cycles_that_do_not_grow():
    with pytest.raises(cal._Skip, match="do not grow") as e:
        cal._lat_fit([64, 128, 192], [500.0, 500.0, 500.0])
    assert e.value.status == "error"


# ---- a fake CuPy: every launch checked against its kernel's signature ------------------------------------------

class FakeArray(np.ndarray):
    def get(self):
        return np.asarray(self).copy()


def _fa(a) -> FakeArray:
    return np.ascontiguousarray(a).view(FakeArray)


def _signatures() -> dict:
    """name -> (parameter kinds 'ptr'/'u32'/'u64', max threads, cluster size) from every module's source."""
    out = {}
    attr = r'((?:__\w+__\s*\([^)]*\)\s*)*)'
    for module in cal.MODULES:
        src = cal.module_source(module).replace("\\\n", " ")
        for m in re.finditer(r'extern "C" __global__ void\s+' + attr + r'(\w+)\s*\(([^)]*)\)', src):
            attrs, name, params = m.groups()
            kinds = []
            for p in (x.strip() for x in params.split(",") if x.strip()):
                kinds.append("ptr" if "*" in p else "u64" if p.startswith("u64") else "u32")
            bound = re.search(r"__launch_bounds__\((\w+)", attrs)
            cluster = re.search(r"__cluster_dims__\((\d+)", attrs)
            out[name] = (kinds, bound.group(1) if bound else "1024", int(cluster.group(1)) if cluster else 1)
        if "NAME" in out:  # the gather kernels come from a macro
            kinds, _, _ = out.pop("NAME")
            for m in re.finditer(r"SIMTC_GATHER\((\w+), \d+, \d+, (\d+)\)", src):
                out[m.group(1)] = (kinds, m.group(2), 1)
    return out


FAKE_LDG = {25: 800, 16: 300, 9: 40}
"""The fake GPU's cycles per dependent LDG, by the pool's log2(elements): HBM, L2, L1."""
FAKE_BULK = {21: 900, 12: 500}
"""The fake GPU's cycles per dependent bulk copy at 0 bytes (plus bytes / 4), by log2(elements): HBM, L2."""


class _Kernel:
    def __init__(self, name, sig, calls, cluster_forms=True):
        self.name, self.sig, self.calls, self.cluster_forms = name, sig, calls, cluster_forms
        self.max_dynamic_shared_size_bytes = 48 * 1024
        self.steps = {v.kernel: v.steps for b in cal.benches() for v in b.variants}

    def __call__(self, grid, block, args, shared_mem=0, stream=None):
        kinds, bound, cluster = self.sig
        assert len(args) == len(kinds), (self.name, len(args), kinds)
        for a, k in zip(args, kinds, strict=True):
            if k == "ptr":
                assert isinstance(a, FakeArray), (self.name, a)
            else:
                assert type(a) is {"u32": np.uint32, "u64": np.uint64}[k], (self.name, k, type(a))
        threads = block[0]
        assert threads <= int(bound) and threads % 32 == 0, (self.name, threads, bound)
        assert grid[0] % cluster == 0, (self.name, grid)
        assert shared_mem <= 232448 and (shared_mem <= 48 * 1024 or shared_mem <= self.max_dynamic_shared_size_bytes)
        self.calls.append(self.name)
        self._simulate(grid[0], threads, args)

    def _simulate(self, ctas, threads, args):
        n = self.name
        if n == "simtc_cal_lat_fill":  # (pool, bits, stride, seed, cursor): the fake cursor names the pool's bits
            args[4][0] = int(args[1])
        elif n.startswith("simtc_cal_lat_ldg_"):  # (cursor, warm, iters, times): cycles per load by pool
            assert int(args[1]) == (512 if int(args[0][0]) == 9 else 0), "only the L1 pool is walked first"
            args[3][0] = 20 + FAKE_LDG[int(args[0][0])] * int(args[2]) * self.steps[n]
        elif n == "simtc_cal_lat_bulk":  # (cursor, bytes, count, timeout, times, flag)
            args[4][0] = 60 + (FAKE_BULK[int(args[0][0])] + int(args[1]) // 4) * int(args[2])
        elif n.startswith("simtc_cal_wgmma_lds"):  # (image, chunks, a, b, mode, wg_iters, lds_iters, out, sink)
            mode, out = int(args[4]), args[7]
            out[0], out[1] = 0, 50 + int(args[5]) * self.steps[n] * (128 if mode == 1 else 160)
            for w in range(8):
                out[2 + 3 * w: 5 + 3 * w] = (0, 100_000, int(args[6]) if mode == 2 else 1000)
        elif n in self.steps and self.steps[n] > 0:  # step loop: (seed, iters, times, sink)
            iters, times = int(args[1]), args[2]
            cost = 1.5 * max(1.0, threads / 128)
            for w in range(threads // 32):
                times[2 * w] = 1000 + w
                times[2 * w + 1] = 1050 + w + int(iters * self.steps[n] * cost)
            if "barrier_cluster" in n or "bar_sync" in n or "fence" in n:  # the sync_loop template's cluster size
                times[2 * (threads // 32)] = self.sig[2] if self.cluster_forms else 1
        elif n.startswith("simtc_cal_gather_"):
            blocks, f = int(args[2]), threads // 128
            args[7][:] = 900 + 100 * f
            args[8].reshape(ctas, f, 2)[:, :, 1] = blocks * 1000
            args[9][:] = (0, 0, 1_000_000, 1_980_000)
        elif n == "simtc_cal_mbar_pingpong":
            args[2][0] = 200 * int(args[0]) + 30
        elif n == "simtc_cal_st_async_pingpong":
            if not self.cluster_forms:
                args[3][0] |= 2
            args[2][0], args[2][1] = 700 * int(args[0]) + 90, 700 * int(args[0]) + 200
        elif n == "simtc_cal_tma_wake":
            o = args[3].reshape(int(args[1]), 5)
            base = np.arange(o.shape[0]) * 5000
            o[:] = np.stack([base, base + 500, base + 520, base + 1000, base + 1080], axis=1)
        elif n == "simtc_cal_clock_probe":
            args[1][:] = (0, 0, 2_000_000, 3_960_000)


def fake_cupy(calls: list, cluster_forms: bool = True) -> types.ModuleType:
    sigs = _signatures()
    cp = types.ModuleType("cupy")
    cp.__version__ = "0+fake"
    cp.uint8, cp.uint32, cp.uint64 = np.uint8, np.uint32, np.uint64
    cp.zeros = lambda shape, dtype=np.float64: _fa(np.zeros(shape, dtype=dtype))
    cp.empty = lambda shape, dtype=np.float64: _fa(np.zeros(min(int(np.prod(shape)), 1 << 16), dtype=dtype))
    cp.arange = lambda n, dtype=None: _fa(np.arange(n, dtype=dtype))
    cp.asarray = lambda a: _fa(np.array(a))

    class RawModule:
        def __init__(self, path=None, code=None, options=(), backend=None):
            assert path or code

        def get_function(self, name):
            assert name in sigs, f"no kernel {name} in the calibration sources"
            return _Kernel(name, sigs[name], calls, cluster_forms)

    class Event:
        def record(self, stream=None):
            pass

        def synchronize(self):
            pass

    class Stream:
        def __init__(self, non_blocking=False):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def synchronize(self):
            pass

    props = {"name": b"NVIDIA H200 (fake)", "major": 9, "minor": 0, "multiProcessorCount": 132,
             "sharedMemPerBlockOptin": 232448}
    runtime = types.SimpleNamespace(getDeviceCount=lambda: 1, getDeviceProperties=lambda i: props,
                                    driverGetVersion=lambda: 13000, runtimeGetVersion=lambda: 13000,
                                    deviceSynchronize=lambda: None)
    cp.cuda = types.SimpleNamespace(runtime=runtime, Event=Event, Stream=Stream, get_elapsed_time=lambda a, b: 1.25)
    cp.RawModule = RawModule
    cp.get_default_memory_pool = lambda: types.SimpleNamespace(free_all_blocks=lambda: None)
    return cp


@pytest.fixture()
def fake_gpu(monkeypatch):
    if not HAVE_NVRTC:
        pytest.skip(NO_COMPILER)
    calls: list = []
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(calls))
    return calls


def test_quick_run_on_a_fake_gpu_launches_every_kernel_correctly(fake_gpu, tmp_path, capsys):
    out = tmp_path / "cal.json"
    assert main(["calibrate", "--quick", "--json", "--save", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["measured"] and printed["ok"]
    rec = cal.load(out)
    assert rec == printed["recording"] and rec["command"] == f"simtc calibrate --arch sm90 --quick --save {out} --json"
    launched = set(fake_gpu)
    every = {v.kernel for b in cal.benches() for v in b.variants}
    assert every - launched == set(), every - launched
    s = cal.summary(rec)
    assert s["not_measured"] == {} and s["sass_failed"] == []
    assert s["issue_interval"]["FFMA"] == pytest.approx(1.5) and s["latency"]["FFMA"] == pytest.approx(1.5)
    assert s["pairs"]["HFMA2 + FFMA"] == pytest.approx(1.5)
    assert s["smem_bytes_per_cycle"]["LDS.128/1-way"] == pytest.approx(512 * 16 / 6.0)
    assert s["clock_mhz"] == pytest.approx(1980.0)
    assert s["mbarrier_round_trip"] == pytest.approx(200.0) and s["mbarrier_one_way"] == pytest.approx(100.0)
    assert s["st_async_round_trip"] == pytest.approx(700.0)
    assert s["tma_wake"] == {"issue_to_self_wake": 500.0, "issue_to_other_wake": 520.0, "arrive_to_wake": 80.0}
    assert s["bar_sync"] == {"128": 1.5, "256": 3.0, "384": 4.5}
    assert set(s["memory"]) == {f"{m}/{f}" for m in ("ldg", "ldgsts", "bulk") for f in ("v32", "model1")}
    m = s["memory"]["bulk/v32"]
    assert m["unloaded_latency"] == 1000.0 and m["l2_hit_latency"] == 1000.0 and m["at_ctas"] == 132
    assert s["launch_us"]["group_of_3"] == pytest.approx(12.5)
    w = s["wgmma_lds"]
    assert w["wgmma_alone_cycles"] == pytest.approx(128.0) and w["wgmma_together_cycles"] == pytest.approx(160.0)
    assert w["lds_alone_bytes_per_cycle"] == pytest.approx(8 * 128 * 16 * 512 / 100_000)
    assert w["sum_together_bytes_per_cycle"] == pytest.approx(10240 / 160 + 8 * 1000 * 16 * 512 / 100_000)
    # LDG with 8 blocks in flight is skipped with the reason; the quick run asks for 1 and 4 only
    assert {c["inflight"] for c in rec["memory"]["configs"]} == {1, 4}
    assert s["memory_latency"]["ldg"] == {"hbm": 800.0, "l2": 300.0, "l1": 40.0}
    assert s["memory_latency"]["bulk"]["hbm"] == {"64": 916.0, "512": 1028.0, "2048": 1412.0}


def test_memory_latency_alone_runs_only_the_latency_chases(fake_gpu, tmp_path, capsys):
    out = tmp_path / "lat.json"
    assert main(["calibrate", "--only", "memory_latency", "--json", "--save", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["ok"] and set(printed["recording"]["sass"]) == {
        b.name for b in cal.benches() if b.part == "memory_latency"}
    rec = cal.load(out)
    assert rec["sections"] == ["memory_latency"] and rec["command"].endswith("--only memory_latency --save "
                                                                             f"{out} --json")
    assert rec["memory"]["configs"] == [] and all(rec[k] is None for k in cal.SECTIONS if k != "memory")
    lat_kernels = {v.kernel for b in cal.benches() if b.part == "memory_latency" for v in b.variants}
    assert set(fake_gpu) == lat_kernels | {"simtc_cal_clock_probe"}
    chases = rec["memory"]["latency"]["chases"]
    assert list(chases) == ["ldg/hbm", "ldg/l2", "ldg/l1", "bulk/hbm/64", "bulk/hbm/512", "bulk/hbm/2048",
                            "bulk/l2/64", "bulk/l2/512", "bulk/l2/2048"]
    hbm = chases["ldg/hbm"]
    assert hbm["status"] == "ok" and hbm["pool_bytes"] == 4 << 30 and hbm["bytes"] == 8 and hbm["stride"] == 128
    assert hbm["sass"] == "LDG.E.64.STRONG.GPU" and hbm["ptx"] == "ld.global.cg.u64" and hbm["pages"] == "random"
    assert hbm["pool_pages_2mib"] == 2048 and "L2" in hbm["prepare"]
    assert hbm["depths"] == [8 * 32, 16 * 32, 24 * 32, 32 * 32] and hbm["intercept"] == pytest.approx(20.0)
    assert chases["ldg/l1"]["sass"] == "LDG.E.64" and chases["ldg/l1"]["warm_loads"] == 512
    assert "largest L1" in chases["ldg/l1"]["l1_carveout"]
    b = chases["bulk/l2/512"]
    assert b["depths"] == [128, 256, 384, 512] and b["slope"] == pytest.approx(628.0) and b["stride"] == 2048
    s = cal.summary(rec)
    assert s["memory"] == {} and s["not_measured"] == {}
    assert s["memory_latency"] == {
        "ldg": {"hbm": 800.0, "l2": 300.0, "l1": 40.0},
        "bulk": {"hbm": {"64": 916.0, "512": 1028.0, "2048": 1412.0},
                 "l2": {"64": 516.0, "512": 628.0, "2048": 1012.0}},
        "bulk_per_byte": {"hbm": {"cycles_per_byte": 0.25, "cycles_at_0_bytes": 900.0},
                          "l2": {"cycles_per_byte": 0.25, "cycles_at_0_bytes": 500.0}}}


def test_memory_latency_with_its_section_runs_once(fake_gpu):
    assert cal._check_sections(["memory_latency", "memory", "sync"]) == ["memory", "sync"]
    assert cal._check_sections(["sync", "memory_latency", "cuda_core"]) == ["cuda_core", "memory_latency", "sync"]
    rec = cal.run(["memory", "memory_latency"], quick=True)
    assert rec["sections"] == ["memory"] and fake_gpu.count("simtc_cal_lat_bulk") == 2 * 3 * 4 * 4


def test_a_latency_part_that_fails_whole_leaves_the_gathers_running(fake_gpu, monkeypatch):
    def boom(self):
        raise RuntimeError("made up for the test")

    monkeypatch.setattr(cal._Runner, "latency", boom)
    rec = cal.run(["memory"], quick=True)
    assert rec["memory"]["latency"] == {"status": "error", "reason": "RuntimeError: made up for the test"}
    assert rec["memory"]["configs"] and all(c["status"] == "ok" for c in rec["memory"]["configs"]
                                            if not (c["method"] == "ldg" and c["inflight"] > 4))
    s = cal.summary(rec)
    assert s["memory_latency"] is None and s["not_measured"]["memory.latency"] == "error"
    assert cal.run(["memory_latency"], quick=True)["memory"] == {"status": "error",
                                                                 "reason": "RuntimeError: made up for the test"}


def test_latency_without_the_4_gib_pool_measures_the_rest(fake_gpu, monkeypatch):
    cp = sys.modules["cupy"]
    small = cp.empty

    def empty(shape, dtype=None):
        if int(np.prod(shape)) > 1 << 30:
            raise MemoryError("out of memory (made up for the test)")
        return small(shape, dtype=dtype)

    monkeypatch.setattr(cp, "empty", empty)
    rec = cal.run(["memory_latency"], quick=True)
    chases = rec["memory"]["latency"]["chases"]
    for key, m in chases.items():
        if "/hbm" in key:
            assert m["status"] == "error" and "cannot allocate the 4 GiB pool" in m["reason"], key
        else:
            assert m["status"] == "ok", key
    s = cal.summary(rec)
    assert s["memory_latency"]["ldg"] == {"hbm": None, "l2": 300.0, "l1": 40.0}
    assert s["memory_latency"]["bulk_per_byte"]["hbm"] is None
    assert s["not_measured"]["memory.latency.bulk/hbm/512"] == "error"


def test_latency_chases_honour_the_time_budget_and_failed_sass(fake_gpu, monkeypatch):
    import attrs

    quick = cal.Params.make(True)
    monkeypatch.setattr(cal.Params, "make", classmethod(lambda cls, q: attrs.evolve(quick, budget_s=-1.0)))
    rec = cal.run(["memory_latency"], quick=True)
    assert {m["status"] for m in rec["memory"]["latency"]["chases"].values()} == {"skipped"}
    assert not [k for k in fake_gpu if k.startswith("simtc_cal_lat_")]
    monkeypatch.undo()
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(fake_gpu))
    checks = cal.sass_checks(["memory_latency"])
    name = "memory/latency/bulk"
    checks[name] = cal.SassCheck(checks[name].bench, False, ("made up for the test",))
    rec = cal.run(["memory_latency"], quick=True, checks=checks)
    chases = rec["memory"]["latency"]["chases"]
    assert {k for k, m in chases.items() if m["status"] == "sass-failed"} == {k for k in chases if k.startswith("bulk")}
    assert "made up" in chases["bulk/l2/64"]["reason"] and chases["ldg/l2"]["status"] == "ok"


def test_the_summary_prints_as_tables(fake_gpu, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    assert main(["calibrate", "--quick"]) == 0
    out = capsys.readouterr().out
    for text in ("NVIDIA H200 (fake), SM clock 1980 MHz", "CUDA-core classes", "MUFU.EX2", "8 values",
                 "Pairs interleaved", "Shared memory", "LDS.32 latency", "wgmma m64n256k16 SS",
                 "Global-memory gathers", "Global-memory latency, one thread", "cp.async.bulk 2048 B",
                 "hbm 900 + 0.250 cycles/byte",
                 "bulk/model1", "mbarrier round trip", "bar.sync 384 threads", "launch (µs): empty_1cta 12.50"):
        assert text in out, text
    assert "not measured" not in out and "SASS check failed" not in out


def test_full_run_skips_ldg_with_eight_in_flight_and_keeps_going(fake_gpu):
    rec = cal.run(["memory"], quick=False, command="t")
    skipped = [c for c in rec["memory"]["configs"] if c["status"] != "ok"]
    assert skipped and all(c["method"] == "ldg" and c["inflight"] == 8 for c in skipped)
    assert "register" in skipped[0]["reason"]
    assert len(rec["memory"]["configs"]) == 3 * 2 * 2 * 5 * 4
    assert cal.summary(rec)["memory"]["ldg/v32"]["chip_gbps"] is not None


def test_cluster_kernels_that_run_without_a_cluster_are_errors(fake_gpu, monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(fake_gpu, cluster_forms=False))
    rec = cal.run(["sync"], quick=True)
    for key in ("barrier_cluster", "barrier_cluster_relaxed", "st_async_pingpong"):
        assert rec["sync"][key]["status"] == "error" and "cluster" in rec["sync"][key]["reason"], key
    assert rec["sync"]["bar_sync"]["status"] == "ok"


def test_a_section_that_breaks_the_format_is_kept_aside_and_the_run_goes_on(fake_gpu, monkeypatch, tmp_path):
    monkeypatch.setattr(cal._Runner, "launch", lambda self: {"empty_1cta": {"status": "ok", "us": math.nan}})
    rec = cal.run(["sync", "launch"], quick=True)
    assert rec["launch"]["status"] == "error" and "launch.empty_1cta.us: expected a number" in rec["launch"]["reason"]
    assert rec["invalid_launch"]["empty_1cta"]["status"] == "ok" and rec["sync"]["bar_sync"]["status"] == "ok"
    cal.save(rec, tmp_path / "r.json")
    assert cal.load(tmp_path / "r.json")["invalid_launch"]["empty_1cta"]["us"] is None
    assert cal.summary(rec)["not_measured"]["launch"] == "error"


def test_a_failed_sass_check_is_not_run_and_is_reported(fake_gpu):
    checks = cal.sass_checks(["sync"])
    name = "sync/bar_sync"
    checks[name] = cal.SassCheck(checks[name].bench, False, ("made up for the test",))
    rec = cal.run(["sync"], quick=True, checks=checks)
    assert rec["sync"]["bar_sync"]["status"] == "sass-failed" and "made up" in rec["sync"]["bar_sync"]["reason"]
    assert not any(k.startswith("simtc_cal_bar_sync") for k in fake_gpu)
    s = cal.summary(rec)
    assert s["sass_failed"] == [name] and s["not_measured"] == {"sync.bar_sync": "sass-failed"}


# ---- the recording ----------------------------------------------------------------------------------------------

def _recording():
    rec = cal.empty_recording(command="simtc calibrate --arch sm90", sections=["sync"])
    loop = {"status": "ok", "reason": None, "steps": [8, 16], "iters": 32, "warm": 2, "samples": 7,
            "runs": [{"threads": 128, "ctas": 1, "warps_per_sp": 1.0, "cycles": [300.0, 556.0], "slope": 1.0,
                      "intercept": 44.0, "cycles_per_step": 1.0, "cycles_per_step_per_sp": 1.0}]}
    rec["sync"] = {"bar_sync": loop, "mbarrier_pingpong": {"status": "timeout", "reason": "an mbarrier wait timed out"}}
    return rec


def test_recording_round_trips_through_json(tmp_path):
    rec = _recording()
    cal.save(rec, tmp_path / "r.json")
    back = cal.load(tmp_path / "r.json")
    assert back == rec
    s = cal.summary(back)
    assert s["bar_sync"] == {"128": 1.0} and s["not_measured"] == {"sync.mbarrier_pingpong": "timeout"}
    assert s["mbarrier_round_trip"] is None


def _broken(path, edit):
    rec = _recording()
    edit(rec)
    path.write_text(json.dumps(rec))
    return path


@pytest.mark.parametrize("edit, message", [
    (lambda r: r.update(format="simtc-recording"), "format: expected 'simtc-calibration'"),
    (lambda r: r.update(version=2), "version: this simtc reads version 1"),
    (lambda r: r.pop("sass"), "sass: missing"),
    (lambda r: r.update(quick="no"), "quick: expected bool"),
    (lambda r: r["sync"]["bar_sync"]["runs"][0].update(slope="fast"), "sync.bar_sync.runs[0].slope: expected a number"),
    (lambda r: r["sync"]["bar_sync"]["runs"][0].update(cycles=[1.0]), "expected 2 numbers"),
    (lambda r: r["sync"]["bar_sync"].update(status="great"), "'great' is not one of"),
    (lambda r: r["sync"]["mbarrier_pingpong"].pop("reason"), "sync.mbarrier_pingpong.reason: missing"),
    (lambda r: r.update(memory=[1, 2]), "memory: expected dict"),
    (lambda r: r["clock_mhz"].update(median=True), "clock_mhz.median: expected a number"),
])
def test_malformed_recordings_are_refused_naming_the_field(tmp_path, edit, message):
    with pytest.raises(cal.CalibrationFormatError, match=re.escape(message)):
        cal.load(_broken(tmp_path / "r.json", edit))


def _latency_recording():
    rec = cal.empty_recording(command="simtc calibrate --arch sm90 --only memory_latency", sections=["memory_latency"])

    def chase(method, pool, nbytes, slope):
        depths = [256, 512] if method == "ldg" else [128, 256]
        return {"status": "ok", "reason": None, "method": method, "pool": pool, "pool_bytes": cal.LAT_POOLS[pool],
                "bytes": nbytes, "depths": depths, "cycles": [30 + slope * d for d in depths], "slope": slope,
                "intercept": 30.0}

    chases = {"ldg/hbm": chase("ldg", "hbm", 8, 810.0), "ldg/l2": chase("ldg", "l2", 8, 290.0),
              "bulk/l2/512": chase("bulk", "l2", 512, 640.0),
              "ldg/l1": {"status": "timeout", "reason": "made up", "method": "ldg", "pool": "l1",
                         "pool_bytes": 65536, "bytes": 8}}
    rec["memory"] = {"params": {}, "configs": [], "latency": {"params": {"seed": 1}, "chases": chases}}
    return rec


def test_the_recorded_h200_file_has_no_latency_and_still_loads():
    rec = cal.load("tests/data/h200_calibration.json")
    assert "latency" not in rec["memory"] and rec["version"] == cal.VERSION == 1
    s = cal.summary(rec)
    assert s["memory_latency"] is None and s["memory"]["ldg/v32"]["unloaded_latency"] == 2073.0


def test_a_latency_recording_round_trips_and_summarises(tmp_path):
    rec = _latency_recording()
    cal.save(rec, tmp_path / "l.json")
    back = cal.load(tmp_path / "l.json")
    assert back == rec
    s = cal.summary(back)
    assert s["memory_latency"]["ldg"] == {"hbm": 810.0, "l2": 290.0, "l1": None}
    assert s["memory_latency"]["bulk"] == {"hbm": {"64": None, "512": None, "2048": None},
                                           "l2": {"64": None, "512": 640.0, "2048": None}}
    assert s["memory_latency"]["bulk_per_byte"] == {"hbm": None, "l2": None}
    assert s["not_measured"] == {"memory.latency.ldg/l1": "timeout"} and s["memory"] == {}
    rec["memory"]["latency"] = {"status": "error", "reason": "made up"}
    assert cal.summary(rec)["memory_latency"] is None
    assert cal.summary(rec)["not_measured"] == {"memory.latency": "error"}


def _chases(r):
    return r["memory"]["latency"]["chases"]


@pytest.mark.parametrize("edit, message", [
    (lambda r: _chases(r)["ldg/hbm"].update(slope="fast"), "memory.latency.chases.ldg/hbm.slope: expected a number"),
    (lambda r: _chases(r)["ldg/hbm"].update(slope=None), "memory.latency.chases.ldg/hbm.slope: expected a number"),
    (lambda r: _chases(r)["ldg/l2"].pop("intercept"), "memory.latency.chases.ldg/l2.intercept: missing"),
    (lambda r: _chases(r)["ldg/hbm"].update(method="dram"), "memory.latency.chases.ldg/hbm.method: 'dram' is not one"),
    (lambda r: _chases(r)["bulk/l2/512"].update(pool="l1"), "memory.latency.chases.bulk/l2/512.pool: 'l1' is not one"),
    (lambda r: _chases(r)["bulk/l2/512"].update(bytes=2048), "the key does not name its method, pool and bytes "
                                                             "('bulk/l2/2048')"),
    (lambda r: _chases(r)["bulk/l2/512"].update(cycles=[1.0]), "memory.latency.chases.bulk/l2/512.cycles: expected 2"),
    (lambda r: _chases(r)["ldg/l2"].update(depths=[256]), "memory.latency.chases.ldg/l2.depths: expected at least two"),
    (lambda r: _chases(r)["ldg/l2"].update(depths=[256, "512"]), "depths: expected at least two positive integers"),
    (lambda r: _chases(r)["ldg/l1"].pop("reason"), "memory.latency.chases.ldg/l1.reason: missing"),
    (lambda r: _chases(r)["ldg/l1"].update(status="slow"), "memory.latency.chases.ldg/l1.status: 'slow' is not one of"),
    (lambda r: _chases(r)["ldg/l1"].pop("pool_bytes"), "memory.latency.chases.ldg/l1.pool_bytes: missing"),
    (lambda r: r["memory"]["latency"].pop("chases"), "memory.latency.chases: missing"),
    (lambda r: r["memory"].update(latency=[1]), "memory.latency: expected an object, got list"),
    (lambda r: r["memory"].update(latency={"status": "error"}), "memory.latency.reason: missing"),
    (lambda r: r.update(sections=["memory_latency", "cache"]), "sections: unknown section"),
])
def test_malformed_latency_entries_are_refused_naming_the_problem(tmp_path, edit, message):
    rec = _latency_recording()
    edit(rec)
    (tmp_path / "l.json").write_text(json.dumps(rec))
    with pytest.raises(SimtcError, match=re.escape(message)) as e:
        cal.load(tmp_path / "l.json")
    assert isinstance(e.value, cal.CalibrationFormatError)
    with pytest.raises(cal.CalibrationFormatError, match=re.escape(message)):
        cal.save(rec, tmp_path / "again.json")
    assert not (tmp_path / "again.json").exists()


@pytest.mark.parametrize("text, message", [("{not json", "is not JSON"), ("[1, 2]", "expected a JSON object"),
                                           ('{"format": "simtc-calibration", "version": NaN}', "is not JSON")])
def test_files_that_are_not_recordings_are_refused(tmp_path, text, message):
    p = tmp_path / "x.json"
    p.write_text(text)
    with pytest.raises(cal.CalibrationFormatError, match=message):
        cal.load(p)
    with pytest.raises(cal.CalibrationFormatError, match="does not exist"):
        cal.load(tmp_path / "missing.json")


def test_save_refuses_nan(tmp_path):
    rec = _recording()
    rec["sync"]["bar_sync"]["runs"][0]["slope"] = math.nan
    with pytest.raises(cal.CalibrationFormatError, match="slope"):
        cal.save(rec, tmp_path / "r.json")
    assert not (tmp_path / "r.json").exists()


# ---- the command line -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["--arch", "sm100"], "no Blackwell (sm_100a) GPU path"),
    (["--arch", "sm80"], "invalid choice"),
    (["--only", "cuda_core,warp_drive"], "unknown section(s) 'warp_drive'"),
    (["--only", ","], "unknown section(s) (none given)"),
    (["--only", "memory_bandwidth"], "sections are cuda_core, cuda_core_pairs, shared_memory, memory, sync, launch, "
                                     "memory_latency"),
    (["--save", "/no/such/dir/c.json"], "does not exist"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    assert main(["calibrate", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("simtc: error: ") and "[rule: " in err and "\n" not in err, err
    assert message in err


@pytest.mark.skipif(SM90, reason="an sm_90a GPU is here: --save would record")
def test_save_without_a_gpu_is_refused(tmp_path, capsys):
    assert main(["calibrate", "--save", str(tmp_path / "c.json")]) == 2
    assert "no sm_90a GPU" in capsys.readouterr().err
    assert not (tmp_path / "c.json").exists()


@needs_compiler
@pytest.mark.skipif(SM90, reason="an sm_90a GPU is here: the command would measure")
def test_without_a_gpu_it_checks_the_sass_says_so_and_exits_0(capsys, checks):
    assert main(["calibrate", "--only", "sync,launch"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("simtc calibrate: nothing measured (") and "\n" not in out
    assert "SASS checks: 10 of 10 benchmarks passed" in out
    assert main(["calibrate", "--only", "launch", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["measured"] is False and data["ok"] and set(data["sass"]) == {"launch/empty", "launch/clock_probe"}


@needs_compiler
@pytest.mark.skipif(SM90, reason="an sm_90a GPU is here: the command would measure")
def test_memory_latency_alone_checks_only_its_sass_without_a_gpu(capsys, checks):
    assert main(["calibrate", "--only", "memory_latency", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["measured"] is False and data["ok"]
    assert set(data["sass"]) == {"memory/latency/ldg.cg", "memory/latency/ldg", "memory/latency/bulk",
                                 "memory/latency/fill", "memory/latency/touch"}


def test_the_cli_module_imports_no_numpy_or_cupy():
    code = ("import sys, simtc.cli.calibrate, simtc.hw.calibrate\n"
            "print([m for m in ('numpy', 'cupy', 'rich') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ---- on the GPU -------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.skipif(not SM90, reason=f"needs cupy and an sm_90a GPU: "
                                      f"{INFO.reason if not INFO.available else 'the device is ' + INFO.arch}")
def test_quick_calibration_on_the_gpu(tmp_path, capsys):
    out = tmp_path / "cal.json"
    rc = main(["calibrate", "--quick", "--json", "--save", str(out)])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0, data["summary"]["not_measured"]
    s = cal.summary(cal.load(out))
    assert 0.5 <= s["issue_interval"]["FFMA"] <= 4 and 2 <= s["latency"]["FFMA"] <= 8
    assert 500 < s["clock_mhz"] < 2500
    assert s["memory"]["ldg/v32"]["unloaded_latency"] > s["memory"]["ldg/v32"]["l2_hit_latency"] > 0
    lat = s["memory_latency"]
    assert 10 < lat["ldg"]["l1"] < lat["ldg"]["l2"] < lat["ldg"]["hbm"] < 10_000, lat["ldg"]
    assert lat["bulk"]["l2"]["64"] < lat["bulk"]["hbm"]["64"] <= lat["bulk"]["hbm"]["2048"], lat["bulk"]
