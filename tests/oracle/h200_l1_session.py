"""One GPU session that records what the engine's L1 global-load model is calibrated on (see
tests/data/README_h200.md, "h200_l1_probe.json" and "ncu/l1_*.csv"):

1. the L1 probe's wall-clock sweep (``python -m simtc.hw.l1_probe``);
2. Nsight Compute's L1 counts for the probe's configs (data-pipe wavefronts, tag requests, sectors per
   instruction);
3. the same counts for FlashMLA's split-KV kernel at two shapes (needs a ``--flashmla`` build in BUILD).

Usage (repository root, on an sm_90a machine with ncu): ``python tests/oracle/h200_l1_session.py OUTDIR [BUILD]``.
"""

import os
import subprocess
import sys
from pathlib import Path

WANT = [
    "l1tex__data_pipe_lsu_wavefronts.sum", "l1tex__data_pipe_lsu_wavefronts.sum.peak_sustained",
    "l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_miss.sum", "l1tex__data_bank_reads.sum",
    "l1tex__data_bank_writes.sum", "l1tex__m_xbar2l1tex_read_sectors.sum", "l1tex__lsu_writeback_active.sum",
    "l1tex__lsuin_requests.sum", "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "smsp__inst_executed_op_global_ld.sum", "smsp__inst_executed_op_shared_ld.sum",
    "smsp__inst_executed_op_shared_st.sum", "smsp__inst_executed_op_ldsm.sum", "smsp__inst_executed_op_stsm.sum",
    "sm__cycles_elapsed.max", "sm__cycles_active.avg", "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "l1tex__data_pipe_lsu_wavefronts_mem_lg.sum", "l1tex__data_pipe_lsu_wavefronts_mem_lg_cmd_read.sum",
    "smsp__sass_inst_executed_op_global_ld.sum", "smsp__sass_inst_executed_op_shared_st.sum",
    "smsp__sass_inst_executed_op_shared_ld.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum.peak_sustained",
    "l1tex__m_xbar2l1tex_read_sectors.sum.peak_sustained", "l1tex__lsu_writeback_active.sum.peak_sustained",
    "gpc__cycles_elapsed.avg.per_second",
]


def main():
    out = sys.argv[1]
    build = sys.argv[2] if len(sys.argv) > 2 else None
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ)
    py = sys.executable
    r = subprocess.run([py, "-m", "simtc.hw.l1_probe", "--out", f"{out}/h200_l1_probe.json"], env=env,
                       capture_output=True, text=True)
    print(r.stdout[-6000:], r.stderr[-3000:])
    q = subprocess.run(["ncu", "--query-metrics", "--chip", "gh100"], capture_output=True, text=True)
    Path(f"{out}/ncu_query_metrics.txt").write_text(q.stdout)
    skip = ("-", "Device", "Metric")
    have = {line.split()[0] for line in q.stdout.splitlines() if line.strip() and not line.startswith(skip)}
    metrics = [m for m in WANT if m.split(".")[0] in have] if len(have) > 100 else list(WANT)
    print("metrics missing:", [m for m in WANT if m not in metrics])
    ncu = ["ncu", "--clock-control", "none", "--csv", "--page", "raw", "--metrics", ",".join(metrics)]
    r = subprocess.run([*ncu, "--kernel-name", "regex:simtc_l1_probe_(nc|plain|rows)", "--launch-skip", "0",
                        py, "-m", "simtc.hw.l1_probe", "--out", f"{out}/probe_under_ncu.json", "--repeats", "1"],
                       env=env, capture_output=True, text=True)
    Path(f"{out}/ncu_l1_probe.csv").write_text(r.stdout)
    print("probe ncu rc", r.returncode, r.stderr[-2000:])
    if build:
        for shape in ("v32-b148-sq2-topk16384", "model1-b16-sq4-topk8192", "v32-b64-sq2-topk2048"):
            code = f"from simtc.hw.flashmla_timing import profile_call; profile_call({build!r}, {shape!r})"
            r = subprocess.run([*ncu, "--kernel-name", "regex:splitkv", "--launch-skip", "1", "--launch-count", "1",
                                py, "-c", code], env=env, capture_output=True, text=True)
            Path(f"{out}/ncu_l1_flashmla_{shape}.csv").write_text(r.stdout)
            print(shape, "ncu rc", r.returncode, r.stderr[-1500:])


if __name__ == "__main__":
    main()
