"""simtc predict's band and utilizations held against the H200: the model's own error on the measured calls (two
timing recordings, never fitted on), the band's coverage, and Nsight Compute's utilizations at 13 shapes."""

import json
import math
from pathlib import Path

import pytest

from simtc.kernels.flashmla.predict import MODEL_ERRORS, ModelErrors, model_errors, predict, t_quantile

DATA = Path(__file__).resolve().parents[1] / "data"
RECORDINGS = ("flashmla_h200_sm90_timing.json", "flashmla_h200_sm90_timing_held_out.json")


def _rows():
    return [r for name in RECORDINGS for r in json.loads((DATA / name).read_text())["rows"]]


def test_t_quantile_against_the_table():
    # Student's t, two-sided 80% / 90% / 95% (one-sided 0.9 / 0.95 / 0.975), from any statistics table
    for p, df, want in ((0.9, 10, 1.372), (0.95, 13, 1.771), (0.95, 25, 1.708), (0.975, 25, 2.060), (0.9, 40, 1.303)):
        assert t_quantile(p, df) == pytest.approx(want, abs=4e-3), (p, df)


@pytest.mark.slow
def test_the_error_table_is_the_models_own():
    """MODEL_ERRORS holds log(predicted / measured) of every call of both recordings, as the model stands: the
    table cannot go stale (a change to the model changes this test's answer)."""
    got = model_errors(_rows())
    assert [g[0] for g in got] == [r[0] for r in MODEL_ERRORS["flashmla-sm90"].rows]
    for (n, v, k), (_, w, j) in zip(got, MODEL_ERRORS["flashmla-sm90"].rows, strict=True):
        assert v == pytest.approx(w, abs=3e-4) and k == pytest.approx(j, abs=2e-3), n


def test_the_band_covers_calls_it_was_not_made_from():
    """Two held-out checks of the procedure (the band's model-error part; the parameters only widen it): every call
    against the interval made from the other 25 (leave-one-out), and the 12 calls of the second recording against
    the interval made from the 14 of the first one alone. Stated coverage 90%; measured 88% (23 of 26) and 12 of
    12."""
    e = MODEL_ERRORS["flashmla-sm90"]
    assert e.coverage == 0.9 and len(e.rows) == 26
    assert e.leave_one_out() >= 0.8
    first = ModelErrors(e.rows[:14], "the first recording")
    later = []
    for _, v, k in e.rows[14:]:
        b = first.band(share=k)
        later.append(abs(-v - b.center) <= b.half_width)
    assert sum(later) / len(later) >= 0.8
    # the interval is not a fit to the rows: its half width is the t quantile of the stated coverage times the spread,
    # scaled by the kernel's share of the call (a launch-bound call's band is narrow)
    full = e.band(share=0.5)
    assert full.half_width == pytest.approx(0.5 * t_quantile(0.95, 25) * full.sd * math.sqrt(1 + 1 / 26))
    assert e.band(share=0.25).half_width == pytest.approx(full.half_width / 2)
    # and the model's bias is in it, not in the prediction: the calls measure slower than predicted on average
    # (by about 10% of the split-KV kernel since the L1's window of misses in flight; 16% before)
    assert e.band(share=1.0).center > 0.05


def test_a_narrower_stated_coverage_covers_fewer():
    e = MODEL_ERRORS["flashmla-sm90"]
    cov = [ModelErrors(e.rows, "", c).leave_one_out() for c in (0.5, 0.8, 0.95)]
    assert cov[0] < cov[1] <= cov[2] and cov[0] < 0.8


@pytest.mark.slow
def test_a_recorded_calls_band_leaves_the_call_out_and_holds_it():
    r = next(x for x in _rows() if x["name"] == "v32-b8-sq1-topk2048")
    p = predict("flashmla-sm90", "v32", 8, 1, 2048, s_k=32768)
    assert p["band"]["coverage"] == 0.9 and p["band"]["model_error"]["n"] == 25
    assert p["seconds_low"] <= r["call_ms"] * 1e-3 <= p["seconds_high"]
    assert p["seconds_low"] < p["seconds_high"] and p["tflops_low"] < p["tflops_high"]
    # the parameters widen the model-error interval on each side
    me = p["band"]["model_error"]
    assert me["center"] > 0  # the calls run slower than predicted: the band lies above the prediction
    assert math.log(p["seconds_high"] / p["seconds"]) >= me["center"] + me["half_width"]


def test_head64_has_no_measured_calls_and_says_so():
    p = predict("flashmla-head64", "v32", 4, 1, 512)
    assert p["band"]["coverage"] is None and "no call" in p["band"]["procedure"]
    assert p["seconds_low"] < p["seconds"] < p["seconds_high"]


# ---- utilizations at each shape --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def profiles():
    from simtc.hw.flashmla_timing import PROFILE_SHAPES, ncu_summaries, ncu_summary, shape_named

    out = list(zip(PROFILE_SHAPES, ncu_summaries(DATA / "ncu" / "profiles_flashmla_h200_sm90_held_out.csv",
                                                 every=2, keep=1), strict=True))
    out += [(p.stem.replace("flashmla_h200_sm90_", ""), ncu_summary(p))
            for p in sorted((DATA / "ncu").glob("flashmla_h200_sm90_*.csv"))]
    rows = []
    for name, s in out:
        sh = shape_named(name)
        p = predict("flashmla-sm90", sh.model, sh.b, sh.s_q, sh.topk, s_k=sh.s_k, band=False)
        rows.append((sh, s, p))
    return rows


@pytest.mark.slow
def test_utilizations_within_12_points_of_nsight_compute(profiles):
    """13 shapes (b = 1 to 200, seven of them b <= 8): issue slots, the tensor pipe and DRAM within 12 points of
    Nsight Compute everywhere (today within 5, 5 and 9); L1/TEX at all but the smallest (model1-b1-sq2-topk512,
    one block per CTA: +13)."""
    assert len(profiles) == 13
    ok_all = 0
    small_ok = 0
    for sh, s, p in profiles:
        d = {k: abs(p["utilization"][k] - s["utilization"][k]) for k in s["utilization"]}
        for k in ("issue", "tensor_pipe", "dram"):
            assert d[k] < 0.12, (sh.name, k, d[k])
        assert d["l1tex"] < 0.15, sh.name
        ok_all += all(v < 0.12 for v in d.values())
        small_ok += sh.b <= 8 and all(v < 0.12 for v in d.values())
    assert ok_all >= 12 and small_ok >= 5


@pytest.mark.slow
def test_utilizations_follow_the_shape(profiles):
    """Small calls leave the pipes idle (prologues, epilogues, idle SMs): issue and the tensor pipe rise with the
    work per CTA as Nsight Compute shows, and the predicted figures differ from shape to shape."""
    by = {sh.name: (s, p) for sh, s, p in profiles}
    small, big = by["model1-b1-sq2-topk512"], by["v32-b148-sq2-topk16384"]
    for k in ("issue", "tensor_pipe", "l1tex"):
        assert small[0]["utilization"][k] < big[0]["utilization"][k] - 0.1
        assert small[1]["utilization"][k] < big[1]["utilization"][k] - 0.1
    assert len({p["utilization"]["issue"] for _, _, p in profiles}) >= 10
    # the SM-time split: at b = 1, most SMs have no work; at b = 148 nearly none idle
    assert small[1]["time"]["sm_idle"] > 0.5 and big[1]["time"]["sm_idle"] < 0.05
    t = big[1]["time"]
    assert t["sm_idle"] + t["ramps"] + t["blocks"] == pytest.approx(1.0, abs=1e-3)


@pytest.mark.slow
def test_tensor_pipe_is_the_mmas_datapath_cycles(profiles):
    """Nsight Compute's tensor-pipe cycles per block are the block's wgmma datapath cycles (36 x 32 + 8 x 128 =
    2,176 for V32, 32 x 32 + 8 x 128 = 2,048 for MODEL1), not the engine's busy time (which includes waits on the
    shared-memory port): the active cycles per block times the utilization, at the large shapes."""
    from simtc.engine.parameters import Timing
    from simtc.kernels.flashmla.predict import cta_line

    want = {"v32": 2176, "model1": 2048}
    for m in want:
        assert cta_line("flashmla-sm90", m, Timing("sm90"), 132).units["tensor_compute"][1] == want[m]
    for sh, s, _ in profiles:
        c = s["counters"]
        if "sm__cycles_active.sum" not in c or sh.b * sh.s_q < 64:
            continue
        blocks = sh.b * sh.s_q * sh.topk // 64
        per_block = c["sm__cycles_active.sum"] / blocks * s["utilization"]["tensor_pipe"]
        assert per_block == pytest.approx(want[sh.model], rel=0.03), sh.name


# ---- the gather in the kernel's regime ----------------------------------------------------------------------------
def test_the_gather_regime_recording():
    """FlashMLA's producer loads timed on the H200 the way the kernel runs them (tests/data/h200_gather_regime.json):
    the kernel's small L1 costs the HBM gather 20-25% at 132 CTAs; with it the gather takes 3,400-4,300 cycles a block
    whatever the CTA count; L2 reuse of 1 to 4 queries barely moves it (< 5%)."""
    rec = json.loads((DATA / "h200_gather_regime.json").read_text())
    by = {r["name"]: r["cycles_per_block"] for r in rec["configs"]}
    assert rec["device"]["sms"] == 132 and len(by) == 20
    for f in ("v32", "model1"):
        assert 1.18 < by[f"{f}-c132-s200-hbm"] / by[f"{f}-c132-s0-hbm"] < 1.3
        small_l1 = [by[f"{f}-c{c}-s200-hbm"] for c in (1, 8, 33, 66, 132)]
        assert min(small_l1) > 3300 and max(small_l1) < 4400
        assert by[f"{f}-c132-s200-l2"] < 0.65 * by[f"{f}-c132-s200-hbm"]
        reuse = [by[f"{f}-c132-s200-hbm-t{32768 * n}"] for n in (132, 66, 33)]
        assert max(reuse) / min(reuse) < 1.05


def _gather_engine(fmt: str, ctas: int, timing=None, *, small_l1: bool = True, l2: bool = False) -> float:
    from simtc.engine import Engine
    from simtc.engine.l1 import l1_capacity
    from simtc.engine.parameters import Timing
    from simtc.kernels.gathers import gather_program

    t = timing or Timing("sm90")
    eng = Engine(gather_program(fmt, 12), timing=t, active_sms=ctas, check=False, l2_resident=("",) if l2 else ())
    if small_l1:
        eng.memory.use_l1(l1_capacity("sm90", 200 * 1024, t))
    return eng.run().cycles / 12


def test_the_small_l1s_window_of_misses_on_the_gather():
    """The engine's run of the same loop (simtc.kernels.gathers.gather_program, no address arithmetic between blocks:
    held against the H200's block latency, first load to barrier) with the kernel's 28 KiB L1: the window of misses
    in flight (l1_miss_window) and a warp's loaded HBM round trip (ldg_dram_latency), both derived from
    microbenchmark rows, put it within 6% at 8 to 66 CTAs for both formats, where without the window it is 14-19%
    fast. Where it is not (stated, not hidden): one SM is 13% (V32) and 15% (MODEL1) fast (the engine gives a lone SM
    the lone chase's round trip, 691 cycles; this recording's one-SM rows are also the least repeatable: the
    in-flight set's session read 2,262 / 2,380 cycles for the same configuration), 132 CTAs 27% and 13% slow (the
    SM's fixed share of HBM: the H200's SMs take one another's share while they wait), the L2 rows 3-9% fast."""
    from simtc.engine.parameters import Timing

    rec = json.loads((DATA / "h200_gather_regime.json").read_text())
    lat = {r["name"]: r["latency_median"] for r in rec["configs"]}
    t = Timing("sm90")
    for f in ("v32", "model1"):
        for c in (8, 33, 66):
            err = _gather_engine(f, c, t) / lat[f"{f}-c{c}-s200-hbm"] - 1
            assert abs(err) < 0.06, (f, c, err)
            # the window is what closes it: unbounded, the engine is too fast
            assert _gather_engine(f, c, t, small_l1=False) / lat[f"{f}-c{c}-s200-hbm"] - 1 < -0.12, (f, c)
        assert abs(_gather_engine(f, 132, t, l2=True) / lat[f"{f}-c132-s200-l2"] - 1) < 0.10, f
        assert -0.2 < _gather_engine(f, 1, t) / lat[f"{f}-c1-s200-hbm"] - 1 < -0.1, f
    assert 0.2 < _gather_engine("v32", 132, t) / lat["v32-c132-s200-hbm"] - 1 < 0.32
    assert 0.08 < _gather_engine("model1", 132, t) / lat["model1-c132-s200-hbm"] - 1 < 0.18


def _inflight_program(fmt: str, warpgroups: int, blocks: int = 8):
    """The in-flight set's loop: ``warpgroups`` warpgroups each gathering its own blocks (named barrier 1 + g), the
    records of :func:`simtc.kernels.gathers.gather_program`."""
    from simtc.isa.cuda_core import CudaCoreBlock
    from simtc.isa.program import Program, Role
    from simtc.isa.sync import BarSync
    from simtc.kernels.gathers import GATHER_LOADS

    pitch = {"v32": 656, "model1": 576}[fmt]
    roles = []
    for g in range(warpgroups):
        recs: list = []
        for b in range(blocks):
            recs += [CudaCoreBlock(f"loads {b}", GATHER_LOADS[fmt], gmem_rows=8, gmem_pitch=pitch,
                                   gmem_lanes="interleaved", regs_written=(f"rows{b}",)),
                     CudaCoreBlock(f"fold {b}", (("STS", 1),), regs_read=(f"rows{b}",)), BarSync(1 + g, 128)]
        roles.append(Role(f"wg{g}", tuple(range(4 * g, 4 * g + 4)), tuple(recs)))
    return Program(f"gather-{fmt}-w{warpgroups}", tuple(roles))


@pytest.mark.slow
def test_the_window_on_the_in_flight_recording():
    """tests/data/h200_gather_inflight.json (not fitted on): 2 to 4 warpgroups a CTA, the small L1 and the L1 free,
    from HBM and L2, on 1, 8 and 132 SMs. The H200's small L1 caps one SM at 17-20 B/cycle from HBM however many
    warpgroups issue (the L1 free: 26-27), which is the window's doing in the engine too: the engine's rate is
    within 13% wherever more than one SM shares HBM, and from L2 (the L1-free rows from L2 are the farthest, 9-12%
    slow); on one SM from HBM with 3-4 warpgroups the engine reaches 22 B/cycle where the H200 falls to 17 (V32:
    the lone-SM round trip again), so those rows are left out here."""
    from simtc.engine import Engine
    from simtc.engine.l1 import l1_capacity
    from simtc.engine.parameters import Timing

    rec = json.loads((DATA / "h200_gather_inflight.json").read_text())
    assert rec["device"]["name"] == "NVIDIA H200" and len(rec["configs"]) == 46
    t = Timing("sm90")
    by = {c["name"]: c for c in rec["configs"]}
    for f in ("v32", "model1"):
        row = 64 * (704 if f == "v32" else 608)
        hw = {w: w * row / by[f"{f}-c1-s200-hbm-w{w}"]["cycles_per_block"] for w in (2, 3, 4)}
        free = {w: w * row / by[f"{f}-c1-s0-hbm-w{w}"]["cycles_per_block"] for w in (2, 3, 4)}
        assert max(hw.values()) < 21 and min(free.values()) > 20 and all(free[w] > 1.15 * hw[w] for w in hw)
    checked = 0
    for c in rec["configs"]:
        w = c["warpgroups"]
        if w == 1 or (c["ctas"] == 1 and c["pool"] == "hbm"):
            continue
        eng = Engine(_inflight_program(c["format"], w), timing=t, active_sms=c["ctas"], check=False,
                     l2_resident=("",) if c["pool"] == "l2" else ())
        eng.memory.use_l1(l1_capacity("sm90", c["smem_kib"] * 1024, t))
        eng.run()
        row = 64 * (704 if c["format"] == "v32" else 608)
        got, want = w * 8 * row / eng.cycles, w * row / c["cycles_per_block"]
        assert abs(got / want - 1) < 0.13, (c["name"], got, want)
        checked += 1
    assert checked == 20
