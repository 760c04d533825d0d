"""Executed kernels on simtc's engine (simtc.ptx.recording): one CTA recorded warp by warp as a Program and timed.

A two-warp mbarrier hand-off through shared memory (CUDA C++ with inline PTX, compiled by NVRTC for sm_100a with
-lineinfo) gets a Program whose records are what each warp executed, in order; its cycles grow with the rounds;
the checker finds it clean, and the variant that drops the consumer's wait shows the race. ``simtc run`` steps
through it (each event naming its PTX line and CUDA line), writes its Perfetto trace and runs schedules. The
dual-QK tcgen05 kernel (simtc/hw/cuda/tcgen05_dual_qk.cu) runs on the engine with its 18 copies and 18 MMAs, and
its PTX without the wait on the commit's mbarrier shows the TMEM read before the MMAs complete.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import simtc.cuda as xp
from simtc.cli import main
from simtc.isa import BarSync, CudaCoreBlock, MbarrierArrive, MbarrierInit, MbarrierTryWait
from simtc.ptx import async_ops
from simtc.ptx.ir import Instruction
from simtc.ptx.recording import Recorder, sass_classes

ARCH = ("-arch=sm_100a", "-lineinfo")

HANDOFF = r"""
typedef unsigned int u32;
typedef unsigned long long u64;
__device__ __forceinline__ u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void bar_init(u32 bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void bar_arrive(u32 bar) {
    asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void bar_wait(u32 bar, u32 parity) {
    asm volatile("{\n .reg .pred done;\n WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 " @!done bra WAIT;\n}\n" :: "r"(bar), "r"(parity) : "memory");
}
extern "C" __global__ void handoff(float* out, int rounds, int wait) {
    __shared__ __align__(8) u64 bars[2];     // full, empty: 32 arrivals each
    __shared__ float buf[32];
    const u32 full = smem_u32(&bars[0]), empty = smem_u32(&bars[1]);
    const u32 warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (threadIdx.x == 0) { bar_init(full, 32); bar_init(empty, 32); }
    __syncthreads();
    for (int i = 0; i < rounds; ++i) {
        if (warp == 0) {                     // producer: a value per lane into buf, then full
            if (i > 0) bar_wait(empty, (i - 1) & 1);
            float x = lane;
            for (int j = 0; j < 8; ++j) x = x * 1.5f + (float)i;
            buf[lane] = x;
            bar_arrive(full);
        } else {                             // consumer: wait for full, read buf reversed, free it
            if (wait) bar_wait(full, i & 1);
            out[i * 32 + lane] = buf[31 - lane];
            bar_arrive(empty);
        }
    }
}
"""


def _want(rounds: int) -> np.ndarray:
    x = np.tile(np.arange(32, dtype=np.float32), (rounds, 1))
    for i in range(rounds):
        for _ in range(8):
            x[i] = x[i] * np.float32(1.5) + np.float32(i)
    return x[:, ::-1]


def _handoff(rounds: int, wait: int = 1, timing=True):
    k = xp.RawKernel(HANDOFF, "handoff", options=ARCH)
    k.timing = timing
    out = xp.zeros(rounds * 32, dtype=xp.float32)
    k((1,), (64,), (out, np.int32(rounds), np.int32(wait)))
    return k, out


def _sync(role):
    return [r for r in role.records if not isinstance(r, CudaCoreBlock)]


def test_handoff_program_is_what_each_warp_executed_in_order():
    with async_ops.issued() as log:
        k, out = _handoff(3)
    np.testing.assert_array_equal(out.get().reshape(3, 32), _want(3))
    res = k.last_result
    prog, run = res.program, res.timing
    assert [(r.name, r.warps) for r in prog.roles] == [("warp0", (0,)), ("warp1", (1,))]
    full, empty = async_ops.mbarrier_name(0), async_ops.mbarrier_name(8)
    ops = lambda role: [attrs_free(r) for r in _sync(role)]  # noqa: E731
    assert ops(prog.role("warp0")) == [MbarrierInit(full, 32), MbarrierInit(empty, 32), BarSync(0, 64),
                                       MbarrierArrive(full),
                                       MbarrierTryWait(empty, 0), MbarrierArrive(full),
                                       MbarrierTryWait(empty, 1), MbarrierArrive(full)]
    assert ops(prog.role("warp1")) == [BarSync(0, 64)] + [x for i in range(3) for x in
                                                          (MbarrierTryWait(full, i & 1), MbarrierArrive(empty))]
    # the same order as the handlers applied them (32 lanes' arrivals are one warp-wide record)
    mine = [r for _, w, _, r in log if w == 1 and type(r) is MbarrierArrive]
    assert len(mine) == 3 * 32 and set(mine) == {MbarrierArrive(empty)}
    assert [(b.name, b.kind, b.count, b.addr, b.id) for b in prog.barriers] == [
        (full, "mbarrier", 32, 0, None), (empty, "mbarrier", 32, 8, None), ("named[0]", "named", 64, None, 0)]
    # the CUDA-core work between them is priced from the PTX: the producer's FFMA chain, the consumer's LDS/STG
    blocks = [r for r in prog.role("warp0").records if isinstance(r, CudaCoreBlock)]
    assert any(dict(b.counts).get("FFMA", 0) >= 7 and dict(b.chain).get("FFMA", 0) >= 7 for b in blocks)
    cons = [r for r in prog.role("warp1").records if isinstance(r, CudaCoreBlock)]
    reads = [b for b in cons if b.smem_reads]
    assert len(reads) == 3 and all(dict(b.counts).get("LDS.32") == 1 and "STG.E.32" in dict(b.counts) for b in reads)
    assert {(r.start, r.stop) for b in reads for r in b.smem_reads} == {(16, 144)}
    assert dict(prog.meta)["cuda_core_costs"].startswith("PTX-derived")
    # every record names its PTX line(s) and CUDA line(s); the side table has the same
    waits = {i.line for i in k.function.body if i.name.startswith("mbarrier.try_wait")}
    for role in prog.roles:
        for i, rec in enumerate(role.records):
            src = run.recorded.source(role.name, i)
            assert rec.label.startswith(f"PTX {src.ptx_first}") and "kernel.cu:" in rec.label, rec.label
            if isinstance(rec, MbarrierTryWait):
                assert src.ptx_first in waits and "mbarrier.try_wait" in rec.label
    assert run.cycles > 0 and run.clean and run.hazards == []


def attrs_free(rec):
    import attrs

    return attrs.evolve(rec, label="")


def test_cycles_grow_with_the_work():
    c2 = _handoff(2)[0].last_result.timing.cycles
    c6 = _handoff(6)[0].last_result.timing.cycles
    assert 0 < c2 < c6
    assert c6 > 2 * c2  # the rounds are serialised by the hand-off


def test_dropping_the_consumers_wait_is_a_race_the_checker_reports():
    ok = _handoff(1, wait=1)[0].last_result.timing
    bad = _handoff(1, wait=0)[0].last_result.timing
    assert ok.clean
    rules = {h.rule for h in bad.hazards}
    assert "smem-write-after-read" in rules, rules


def test_recording_another_cta_and_plain_launches_stay_unrecorded():
    k = xp.RawKernel(HANDOFF, "handoff", options=ARCH)
    out = xp.zeros(64, dtype=xp.float32)
    k((2,), (64,), (out, np.int32(2), np.int32(1)))
    assert k.last_result.program is None and k.last_result.timing is None
    k.timing = (1, 0, 0)
    k((2,), (64,), (out, np.int32(2), np.int32(1)))
    assert dict(k.last_result.program.meta)["cta"] == "1,0,0"
    assert k.last_result.timing.cycles > 0


def test_a_cta_the_launch_did_not_run_has_no_program():
    from simtc.errors import SimtcError

    with pytest.raises(SimtcError, match="not executed by the launch"):
        Recorder((5, 0, 0)).program()


@pytest.mark.parametrize(("ptx", "classes"), [
    ("fma.rn.f32", ("FFMA",)), ("mad.lo.s32", ("IMAD",)), ("add.s64", ("IADD3", "IADD3.X")),
    ("fma.rn.f64", ("DFMA",)), ("ex2.approx.ftz.f32", ("MUFU.EX2",)), ("cvt.rn.f16.f32", ("F2FP.BF16.F32.PACK_AB",)),
    ("cvt.rn.f32.s32", ("I2F",)), ("ld.shared.v4.f32", ("LDS.128",)), ("st.global.u8", ("STG.E.U8",)),
    ("setp.lt.s32", ("ISETP",)), ("shfl.sync.bfly.b32", ("SHFL.BFLY",)), ("ld.param.u64", ("LDC",)),
    ("cvta.to.global.u64", ()), ("cvt.u32.s32", ()), ("cvt.u32.u64", ()), ("cvt.u64.u32", ()),
    ("cvt.s64.s32", ("SHF",)), ("cvt.s32.s8", ("PRMT",)), ("cvt.sat.u8.s32", ("I2I",)), ("mul.f32x2", ("FMUL2",)),
    ("fma.rn.f32x2", ("FFMA2",)), ("add.f32x2", ("FADD2",)),
])
def test_sass_classes(ptx, classes):
    assert sass_classes(Instruction(ptx)) == classes


@pytest.mark.parametrize(("text", "classes"), [
    ("mov.b32 %r1, %r2;", ()), ("mov.b64 %rd1, {%r1, %r2};", ()), ("mov.b64 {%r1, %r2}, %rd1;", ()),
    ("mov.b32 %r1, {%h1, %h2};", ()), ("mov.u32 %r1, %tid.x;", ("S2R",)), ("mov.b32 %r1, 7;", ("MOV",)),
])
def test_moves_are_priced_as_ptxas_compiles_them(text, classes):
    """A move between registers (or of a register's halves) is a register-allocation choice, no SASS; a special
    register is read by S2R, an immediate materialised by MOV (simtc.ptx.recording.MOVES: the evidence)."""
    from simtc.ptx.parser import parse_instruction

    ins = parse_instruction(text, registers=("%r1", "%r2", "%rd1", "%h1", "%h2"))
    assert sass_classes(ins) == classes


# ---- simtc run ------------------------------------------------------------------------------------------------

@pytest.fixture
def handoff_cu(tmp_path):
    src = tmp_path / "handoff.cu"
    src.write_text(HANDOFF)
    np.save(tmp_path / "out.npy", np.zeros(64, np.float32))
    return src


def _run_argv(src, *extra):
    d = src.parent
    return ["run", str(src), "--arch", "sm_100a", "-O=-lineinfo", "--grid", "1", "--block", "64", "--arg",
            f"out={d}/out.npy", "--arg", "rounds=2", "--arg", "wait=1", "--out", str(d / "o"), *extra]


def test_simtc_run_timing_prints_cycles(handoff_cu, capsys):
    assert main(_run_argv(handoff_cu, "--timing")) == 0
    out = capsys.readouterr().out
    assert re.search(r"engine \(sm100\): block \(0,0,0\) takes \d+ cycles", out) and "hazard checker: clean" in out
    assert main(_run_argv(handoff_cu, "--timing", "--json")) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["timing"]["cycles"] > 0 and data["timing"]["hazards"] == []
    assert data["timing"]["roles"] == {"warp0": [0], "warp1": [1]}


def test_simtc_run_step_to_json_shows_the_ptx_and_cuda_line(handoff_cu, capsys):
    k, _ = _handoff(2)
    st = k.last_result.timing.stepper()
    n = next(e.step for e in st if e.kind == "issue" and (e.ptx or "").startswith("mbarrier.try_wait"))
    assert main(_run_argv(handoff_cu, "--step-to", str(n), "--json")) == 0
    ev = json.loads(capsys.readouterr().out)["event"]
    assert ev["ptx"].startswith("mbarrier.try_wait.parity")
    waits = {i.line for i in k.function.body if i.name.startswith("mbarrier.try_wait")}
    m = re.match(r"PTX (\d+) `mbarrier\.try_wait\.parity[^`]*` \| handoff\.cu:(\d+)", ev["label"])
    assert m and int(m.group(1)) in waits, ev["label"]
    assert main(_run_argv(handoff_cu, "--step", "5")) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len([x for x in lines if "issue" in x]) >= 3


def test_simtc_run_trace_and_schedules(handoff_cu, tmp_path, capsys):
    path = tmp_path / "t.json"
    assert main(_run_argv(handoff_cu, "--trace", str(path))) == 0
    trace = json.loads(path.read_text())
    names = {e.get("name") for e in trace["traceEvents"]}
    assert "mbarrier.try_wait" in names and any(e.get("ph") == "X" for e in trace["traceEvents"])
    capsys.readouterr()
    assert main(_run_argv(handoff_cu, "--schedules", "3")) == 0
    assert "3 schedule(s)" in (out := capsys.readouterr().out) and "all clean" in out


# ---- the tcgen05 kernel ---------------------------------------------------------------------------------------

def _dual_qk(module=None):
    from simtc.hw import tcgen05 as hw
    from simtc.hw.suite import qk_operands

    smem = hw.IMAGE_BYTES + 16 + 1024
    image, params = hw.dual_qk_inputs(*qk_operands(0))
    mod = module or xp.RawModule(code=hw.kernel_source(), options=ARCH)
    fn = mod.get_function("simtc_tcgen05_dual_qk")
    fn.max_dynamic_shared_size_bytes = smem
    fn.timing = True
    out = xp.zeros(128 * len(hw.DUMP_COLUMNS), dtype=xp.uint32)
    fn((1,), (128,), (xp.asarray(image.view(np.uint32)), xp.asarray(np.frombuffer(params, dtype=np.uint8)), out),
       shared_mem=smem)
    return fn.last_result


def test_dual_qk_kernel_runs_on_the_engine():
    res = _dual_qk()
    counts = res.program.counts()
    assert counts["tcgen05.cp"] == 18 and counts["tcgen05.mma.ws"] == 18 and counts["tcgen05.commit"] == 1
    assert counts["tcgen05.ld"] == 4 * 13 and counts["tcgen05.alloc"] == 1 and counts["tcgen05.dealloc"] == 1
    assert [r.name for r in res.program.roles] == ["warp0", "warp1", "warp2", "warp3"]
    run = res.timing
    assert run.clean and run.cycles > 0
    assert run.engine.unit_busy["tensor_pipe"] > 0 and run.engine.unit_busy["tmem_path"] > 0


def test_dual_qk_without_the_wait_on_the_commit_reads_tmem_too_early(tmp_path):
    from simtc.hw import tcgen05 as hw
    from simtc.hw.compile import compile_cuda

    ptx = compile_cuda(hw.kernel_source(), arch="sm_100a", output="ptx", options=("-lineinfo",))
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    bad, n = re.subn(r"mbarrier\.try_wait\.parity\.shared::cta\.b64 (\w+), \[[^\]]+\], [^;]+;", r"mov.pred \1, 1;",
                     ptx)
    assert n == 1
    path = tmp_path / "nowait.ptx"
    path.write_text(bad)
    res = _dual_qk(xp.RawModule(path=str(path)))
    assert "tmem-read-before-commit" in {h.rule for h in res.timing.hazards}
