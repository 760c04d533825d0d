"""The replay's checks say exactly what they check: the LSE tolerance sits near what the replay reaches, the
duplicated-Q refusal comes from the TMEM allocator, the TFLOP/s figure is pinned with the parameters it rests on,
and the SASS counts are compared with a recorded build."""

import json
from pathlib import Path

import pytest

from simtc.kernels.flashmla import replay as rp

DATA = Path(__file__).parents[1] / "data"


@pytest.mark.parametrize("model_name, blocks, seed", [("v32", 1, 0), ("v32", 4, 1), ("v32", 16, 2), ("model1", 2, 0),
                                                      ("model1", 4, 3), ("model1", 16, 1)])
def test_lse_error_is_well_inside_the_tolerance_and_the_tolerance_is_tight(model_name, blocks, seed):
    """Measured: at most 6e-6 for 1-64 blocks (7.7e-6 at 256, 9.2e-6 at 1,024); LSE_TOL 2e-5 -- was 1e-3."""
    r = rp.replay(model_name, blocks, seed)
    assert r.ok and 0 < r.lse_max_abs_error <= 6.5e-6
    assert rp.LSE_TOL <= 2e-5 and r.lse_max_abs_error > rp.LSE_TOL / 100  # near what is reached


def test_an_lse_off_by_more_than_the_tolerance_fails_the_replay():
    import attrs

    r = rp.replay("v32", 2, 0)
    assert r.ok
    assert not attrs.evolve(r, lse_max_abs_error=3e-5).ok  # would have passed the old 1e-3
    assert attrs.evolve(r, lse_max_abs_error=1.5e-5).ok


def test_duplicated_q_is_refused_by_the_tmem_allocator():
    from simtc.errors import TmemWouldBlock
    from simtc.kernels.flashmla.alternatives import dup_q_allocation, dup_q_regions
    from simtc.tmem.memory import TensorMemory

    for name, regions in (("v32", (256, 288, 32)), ("model1", (256, 256, 32))):
        assert tuple(n for _, n in dup_q_regions(name)) == regions
        chunks, refusal = dup_q_allocation(name)
        placed = [(n, c) for _, n, c in chunks if c is not None]
        assert placed == [(256, 0), (256, 256)] and chunks[-1][2] is None
        assert refusal is not None and "would block" in refusal and "free columns: 0 of 512" in refusal
    # the refusal is the allocator's own: the same request on a fresh TensorMemory raises TmemWouldBlock
    tm = TensorMemory()
    tm.alloc(256)
    tm.alloc(256)
    with pytest.raises(TmemWouldBlock):
        tm.alloc(32)
    # and the dual GEMM's regions (O 256 + Q 144 + P 64 = 464) are what the replay touches
    assert rp.replay("v32", 2, 0).tmem_columns == 464


def test_the_compare_row_reports_the_allocators_refusal():
    from simtc.kernels.flashmla.alternatives import compare

    rows = {v.name: v for v in compare("v32", 2, 0)}
    dup = rows["duplicated-q"]
    assert not dup.fits and dup.tmem_columns == 576
    assert "The TMEM allocator, region by region: O 256 at 0-255" in dup.why and "would block" in dup.why
    m1 = {v.name: v for v in compare("model1", 2, 0)}["duplicated-q"]
    assert m1.tmem_columns == 544 and "accepted" not in m1.why  # no refusal that did not happen


# The model's TFLOP/s for a 32-block V32 timing-only request on a 148-SM B200 at 1.965 GHz, and the parameters
# it rests on most (simtc timing sensitivity flashmla-head64, top 8). A change of any of these moves the figure:
# the test says which.
PINNED_PARAMETERS = {"smem_port_bytes_per_cycle": 128, "sm_count": 148, "hbm_bytes_per_cycle": 3674,
                     "tma_issue_gap": 32, "mma_flop_per_cycle_per_k": 512, "sub_partitions": 4, "alu_lanes": 64,
                     "smem_ld_latency": 23, "l1_line_cycles": 1.78, "l1_wavefronts_per_row": 0.407,
                     "l1_wavefronts_per_conflict": 0.601, "mbarrier_try_wait": 44, "l2_hit_latency": 250}
PINNED = {"cycles": 116344, "tflops_whole": 712.93, "tflops_steady": 793.94}


def test_the_tflops_figure_is_pinned_with_its_parameters():
    from simtc.engine.parameters import PARAMETERS

    table = PARAMETERS["sm100"]
    changed = {k: (v, table[k].value) for k, v in PINNED_PARAMETERS.items() if table[k].value != v}
    assert not changed, f"timing parameters changed (pinned, now): {changed}; re-pin PINNED"
    assert rp.B200_CLOCK_GHZ == 1.965 and rp.B200_SMS == 148
    r = rp.replay("v32", 32, timing_only=True)
    assert r.cycles == PINNED["cycles"]
    assert r.tflops_whole == pytest.approx(PINNED["tflops_whole"], abs=0.01)
    assert r.tflops_steady == pytest.approx(PINNED["tflops_steady"], abs=0.01)
    # the figure is FlashMLA's FLOP count over the cycles, nothing else
    assert r.tflops_whole == pytest.approx(rp.tflops(32 * rp.block_flops(rp.model("v32")), r.cycles), rel=1e-12)
    # the README's "about 710 ... about 790" is this run
    assert round(r.tflops_whole, -1) == 710 and round(r.tflops_steady, -1) == 790


def test_the_recorded_sass_counts_in_simtc_equal_the_recording():
    from simtc.hw.flashmla import RECORDED_SM100_SASS, SASS_ROWS

    d = json.loads((DATA / "flashmla_sm100_sass.json").read_text())
    assert RECORDED_SM100_SASS["flashmla_commit"] == d["flashmla_commit"]
    assert RECORDED_SM100_SASS["arch"] == d["arch"] and d["nvcc"].startswith(RECORDED_SM100_SASS["nvcc"])
    for name in ("v32", "model1"):
        assert RECORDED_SM100_SASS[name] == {k: d["sass"][name][k] for k in SASS_ROWS}


def test_the_sass_agreement_is_recomputed_and_can_fail(monkeypatch):
    from simtc.hw import flashmla as fm

    for name in ("v32", "model1"):
        rows = fm.recorded_sass_agreement(name)
        assert all(x["explained"] for x in rows)
        assert {x["instruction"] for x in rows if x["difference"]} == {"UBLKCP.G.S", "LDTM.x32", "LDTM.x64"}
    # a Program that lost one MMA per block would no longer agree
    real = fm.program_static_counts

    def one_mma_less(model_name):
        out = real(model_name)
        out["static"] = {**out["static"], "UTCHMMA.WS": out["static"]["UTCHMMA.WS"] - 1}
        return out

    monkeypatch.setattr(fm, "program_static_counts", one_mma_less)
    bad = {x["instruction"]: x for x in fm.recorded_sass_agreement("v32")}
    assert bad["UTCHMMA.WS"]["difference"] == 1 and not bad["UTCHMMA.WS"]["explained"]
