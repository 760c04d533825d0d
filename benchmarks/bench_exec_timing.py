"""An executed kernel's predicted cycles against an H200's: dependent global loads that hit L1 and that do not.

Run here: ``.venv/bin/python benchmarks/bench_exec_timing.py`` prints what simtc's engine predicts (a recorded CTA,
:mod:`simtc.ptx.recording`, whose loads are looked up in :class:`simtc.engine.l1.GlobalCaches`) for

* ``chase``: one thread walking a table ``i = table[i]``, over a 64-byte table (two sectors: after two misses every
  load is an L1 hit) and over a table whose every entry sits on its own 128-byte line (every load a new line), 20 and
  100 steps: the slope per step is the dependent load's latency plus its address arithmetic;
* ``gather8``: 32 threads summing 8 independent lines (one latency, not eight);
* the dual-QK tcgen05 kernel of ``simtc/hw/cuda/tcgen05_dual_qk.cu`` (sm_100a): its cycles and where they go.

On an H200 (sm_90a; CuPy, no simtc needed): ``python3 -P benchmarks/bench_exec_timing.py --gpu --out
"$OUT/exec_timing_h200.json"`` runs the same chase and gather kernels with ``clock64()`` around the loads, each case
with the table just copied from the host and after a 256 MiB write has pushed it out of L2 (the memory-latency
calibration's flush), 7 launches each, and writes the cycles. ``--compare FILE`` prints simtc's slopes beside a
file written so (``tests/data/h200_exec_timing.json`` is one).

Measured 2026-12-03 (H200 recording beside simtc, per chase step): the 64-byte table 39.5 cycles on the H200, 40.0
in simtc (48.0 while PTX's ``mul.wide`` + ``add.s64`` counted as three SASS instructions instead of ptxas' one
IMAD.WIDE.U32); distinct lines just copied (L2 hits) 337.8 vs 335.0; after an L2 flush (HBM) 655.2 vs 703.0.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

STEPS = (20, 100)

KERNELS = r"""
extern "C" __global__ void chase(const unsigned* table, unsigned* out, int steps) {
    unsigned i = 0;
    for (int s = 0; s < steps; ++s) i = table[i];
    out[threadIdx.x] = i;
}
extern "C" __global__ void gather8(const unsigned* table, unsigned* out) {
    unsigned acc = 0;
#pragma unroll
    for (int s = 0; s < 8; ++s) acc += table[s * 32 + threadIdx.x];
    out[threadIdx.x] = acc;
}
extern "C" __global__ void chase_timed(const unsigned* table, unsigned* out, int steps, long long* cycles) {
    unsigned i = 0;
    long long t0 = clock64();
    for (int s = 0; s < steps; ++s) i = table[i];
    out[threadIdx.x] = i;            // needs the last load: the loop is done when t1 is read
    long long t1 = clock64();
    cycles[threadIdx.x] = t1 - t0;
}
extern "C" __global__ void gather8_timed(const unsigned* table, unsigned* out, long long* cycles) {
    unsigned acc = 0;
    long long t0 = clock64();
#pragma unroll
    for (int s = 0; s < 8; ++s) acc += table[s * 32 + threadIdx.x];
    out[threadIdx.x] = acc;
    long long t1 = clock64();
    cycles[threadIdx.x] = t1 - t0;
}
"""


def tables(n: int = max(STEPS)) -> dict[str, np.ndarray]:
    """``same``: 16 entries (64 bytes) in a cycle; ``distinct``: entry ``32 k`` points at ``32 (k + 1)``."""
    distinct = np.zeros(32 * (n + 1), np.uint32)
    distinct[np.arange(n) * 32] = (np.arange(n) + 1) * 32
    return {"same": ((np.arange(16) + 1) % 16).astype(np.uint32), "distinct": distinct}


def simtc_cycles() -> dict:
    import simtc.cuda as xp
    from simtc.ptx.recording import EngineRun

    mod = xp.RawModule(code=KERNELS, options=("-arch=sm_90a", "-lineinfo"))
    out: dict = {"chase": {}}
    for name, table in tables().items():
        row = {}
        for steps in STEPS:
            k = mod.get_function("chase")
            k.timing = True
            k((1,), (1,), (xp.asarray(table), xp.zeros(1, dtype=xp.uint32), np.int32(steps)))
            run = k.last_result.timing
            cold = EngineRun(run.recorded, run.recorded.engine(inputs_in_l2=False).run())
            row[steps] = {"cycles": run.cycles, "loads": run.engine.l1.levels, "cold_cycles": cold.cycles,
                          "cold_loads": cold.engine.l1.levels}
        span = STEPS[1] - STEPS[0]
        row["per_step"] = (row[STEPS[1]]["cycles"] - row[STEPS[0]]["cycles"]) / span
        row["cold_per_step"] = (row[STEPS[1]]["cold_cycles"] - row[STEPS[0]]["cold_cycles"]) / span
        out["chase"][name] = row
    k = mod.get_function("gather8")
    k.timing = True
    k((1,), (32,), (xp.asarray(np.arange(8 * 32, dtype=np.uint32)), xp.zeros(32, dtype=xp.uint32)))
    out["gather8"] = {"cycles": k.last_result.timing.cycles, "loads": k.last_result.timing.engine.l1.levels}
    out["dual_qk"] = dual_qk()
    return out


def dual_qk() -> dict:
    import simtc.cuda as xp
    from simtc.hw import tcgen05 as hw
    from simtc.hw.suite import qk_operands
    from simtc.ptx.recording import EngineRun

    smem = hw.IMAGE_BYTES + 16 + 1024
    image, params = hw.dual_qk_inputs(*qk_operands(0))
    fn = xp.RawModule(code=hw.kernel_source(), options=("-arch=sm_100a", "-lineinfo")).get_function(
        "simtc_tcgen05_dual_qk")
    fn.max_dynamic_shared_size_bytes = smem
    fn.timing = True
    t0 = time.perf_counter()
    fn((1,), (128,), (xp.asarray(image.view(np.uint32)), xp.asarray(np.frombuffer(params, dtype=np.uint8)),
                      xp.zeros(128 * len(hw.DUMP_COLUMNS), dtype=xp.uint32)), shared_mem=smem)
    wall = time.perf_counter() - t0
    run = fn.last_result.timing
    cold = EngineRun(run.recorded, run.recorded.engine(inputs_in_l2=False).run())
    return {"cycles": run.cycles, "cold_cycles": cold.cycles, "breakdown": run.breakdown(),
            "launch_recording_engine_s": round(wall, 2)}


def gpu(path: str, reps: int = 7) -> None:
    import cupy as cp

    mod = cp.RawModule(code=KERNELS)
    chase, gather = mod.get_function("chase_timed"), mod.get_function("gather8_timed")
    flush = cp.empty(256 << 20, dtype=cp.uint8)
    props = cp.cuda.runtime.getDeviceProperties(0)
    rows = []
    for name, table in tables().items():
        for l2 in ("just copied", "flushed"):
            for steps in STEPS:
                got = []
                for r in range(reps):
                    t = cp.asarray(table)
                    if l2 == "flushed":
                        flush.fill(r + 1)
                    cyc = cp.zeros(1, cp.int64)
                    out = cp.zeros(1, cp.uint32)
                    cp.cuda.runtime.deviceSynchronize()
                    chase((1,), (1,), (t, out, np.int32(steps), cyc))
                    got.append(int(cyc.get()[0]))
                rows.append({"kernel": "chase", "table": name, "l2": l2, "steps": steps, "cycles": got,
                             "median": float(np.median(got))})
    for l2 in ("just copied", "flushed"):
        got = []
        for r in range(reps):
            t = cp.asarray(np.arange(8 * 32, dtype=np.uint32))
            if l2 == "flushed":
                flush.fill(r + 1)
            cyc = cp.zeros(32, cp.int64)
            cp.cuda.runtime.deviceSynchronize()
            gather((1,), (32,), (t, cp.zeros(32, cp.uint32), cyc))
            got.append(int(cyc.get()[0]))
        rows.append({"kernel": "gather8", "l2": l2, "cycles": got, "median": float(np.median(got))})
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    doc = {"format": "simtc-exec-timing", "version": 1, "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
           "device": name, "clock_khz": int(props["clockRate"]), "cupy": cp.__version__, "reps": reps,
           "command": "python3 -P benchmarks/bench_exec_timing.py --gpu --out FILE", "kernels": KERNELS, "rows": rows}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {path}: {len(rows)} rows on {name}")


def slopes(doc: dict) -> dict:
    """Per-step cycles of the H200's chases, by table and L2 state (median of the launches)."""
    med = {(r["table"], r["l2"], r["steps"]): r["median"] for r in doc["rows"] if r["kernel"] == "chase"}
    return {(t, l2): (med[(t, l2, STEPS[1])] - med[(t, l2, STEPS[0])]) / (STEPS[1] - STEPS[0])
            for (t, l2, s) in med if s == STEPS[0]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", action="store_true", help="run the timed kernels on this machine's GPU (CuPy)")
    ap.add_argument("--out", default="exec_timing_h200.json", help="where --gpu writes its JSON")
    ap.add_argument("--compare", help="an H200 file written by --gpu, printed beside simtc's slopes")
    a = ap.parse_args(argv)
    if a.gpu:
        gpu(a.out)
        return 0
    res = simtc_cycles()
    print("simtc (engine sm90 for chase/gather8, sm100 for dual-QK):")
    for name, row in res["chase"].items():
        c0, c1 = row[STEPS[0]]["cycles"], row[STEPS[1]]["cycles"]
        print(f"  chase {name:8s}: {c0:6d} cycles ({STEPS[0]} steps), {c1:6d} ({STEPS[1]}), {row['per_step']:6.1f} "
              f"per step; loads {row[STEPS[1]]['loads']}; with nothing in L2 at launch {row['cold_per_step']:6.1f} "
              f"per step")
    print(f"  gather8       : {res['gather8']['cycles']} cycles; loads {res['gather8']['loads']}")
    d = res["dual_qk"]
    print(f"  dual-QK       : {d['cycles']} cycles (nothing in L2 at launch: {d['cold_cycles']}); "
          f"recording + engine {d['launch_recording_engine_s']} s")
    for k, v in d["breakdown"].items():
        print(f"    {k}: {v}")
    if a.compare:
        with open(a.compare) as f:
            doc = json.load(f)
        print(f"H200 ({doc['device']}, {doc['date']}): per-step cycles of the chase")
        for (t, l2), s in sorted(slopes(doc).items()):
            ours = res["chase"][t]["per_step" if l2 == "just copied" else "cold_per_step"]
            print(f"  {t:8s} {l2:12s}: {s:6.1f} (simtc {ours:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
