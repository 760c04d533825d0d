"""The Chrome / Perfetto trace export (simtc.render.perfetto): the Trace Event Format's rules, the head64 replay's
tracks (the tensor pipe's own track, every issued record with its PTX, the barrier flows), hazards, the clock,
the limits, and the --trace flag of replay and simulate."""

from __future__ import annotations

import json
import math
import os
from collections import Counter, defaultdict

import pytest

from simtc.cli import main
from simtc.engine import Engine
from simtc.engine.calendar import Spans
from simtc.engine.hazards import RULES
from simtc.kernels import hazards, registry
from simtc.kernels.flashmla.replay import replay
from simtc.render import perfetto
from simtc.render.perfetto import TraceExportError, chrome_trace, write_chrome_trace

PHASES = {"X", "M", "i", "s", "f"}


# ---- a reader of the format ------------------------------------------------------------------------------------
def check_format(obj: dict) -> dict:
    """Check a trace object against the Trace Event Format (JSON Object Format) and Perfetto's import rules;
    returns the thread names by tid."""
    assert set(obj) == {"traceEvents", "displayTimeUnit", "otherData"}
    assert obj["displayTimeUnit"] in ("ms", "ns")
    assert isinstance(obj["otherData"], dict)
    events = obj["traceEvents"]
    assert json.loads(json.dumps(obj)) == obj  # plain JSON values only
    names: dict[int, str] = {}
    sort_index: dict[int, int] = {}
    used: set[int] = set()
    slices = defaultdict(list)
    flows = defaultdict(list)

    def number(x):
        return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)

    for e in events:
        assert {"ph", "pid", "tid"} <= set(e), e
        assert e["ph"] in PHASES, e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "process_sort_index", "thread_name", "thread_sort_index")
            if e["name"] == "thread_name":
                assert e["tid"] not in names, f"tid {e['tid']} named twice"
                names[e["tid"]] = e["args"]["name"]
            elif e["name"] == "thread_sort_index":
                sort_index[e["tid"]] = e["args"]["sort_index"]
            continue
        used.add(e["tid"])
        assert number(e["ts"]), e
        assert isinstance(e["name"], str) and e["name"]
        if e["ph"] == "X":
            assert number(e["dur"]) and e["dur"] >= 0, e
            slices[e["tid"]].append(e)
        elif e["ph"] == "i":
            assert e["s"] in ("g", "p", "t")
        else:
            assert isinstance(e["id"], int) and e["cat"]
            flows[e["id"], e["cat"], e["name"]].append(e)
    assert used <= set(names), f"tids without a thread_name: {sorted(used - set(names))}"
    assert set(sort_index) == set(names)
    # slices of one thread nest (Perfetto and chrome://tracing refuse partial overlaps)
    for tid, xs in slices.items():
        stack: list[float] = []
        for x in sorted(xs, key=lambda x: (x["ts"], -x["dur"])):
            while stack and stack[-1] <= x["ts"]:
                stack.pop()
            end = x["ts"] + x["dur"]
            assert not stack or end <= stack[-1], f"{names[tid]}: {x['name']} at {x['ts']} overlaps its parent"
            stack.append(end)

    def inside(tid, t):
        return any(x["ts"] <= t < x["ts"] + x["dur"] for x in slices[tid])

    # flows: one start and one end per id, the end not before the start, each inside a slice of its thread
    for key, pair in flows.items():
        assert sorted(e["ph"] for e in pair) == ["f", "s"], key
        s, f = sorted(pair, key=lambda e: e["ph"], reverse=True)
        assert f["ts"] >= s["ts"], key
        assert f.get("bp") == "e"
        assert inside(s["tid"], s["ts"]), f"flow {key} starts outside a slice of {names[s['tid']]}"
        assert inside(f["tid"], f["ts"]), f"flow {key} ends outside a slice of {names[f['tid']]}"
    return names


def by_name(names: dict[int, str], prefix: str) -> set[int]:
    return {t for t, n in names.items() if n == prefix or n.startswith(prefix + " (")}


# ---- the head64 replay -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def head64():
    r = replay("v32", 2, 0, keep_engine=True)
    trace = chrome_trace(r.engine)
    return r, trace, check_format(trace)


def test_head64_trace_follows_the_format(head64, tmp_path):
    r, trace, names = head64
    assert trace["otherData"]["time_unit"] == "1 us in the viewer = 1 SM cycle"
    assert trace["otherData"]["cycles"] == r.cycles and trace["otherData"]["engine_events"] == r.events
    # the file is the same object, streamed
    path = tmp_path / "t.json"
    n = write_chrome_trace(r.engine, path)
    assert json.loads(path.read_text()) == trace and n == len(trace["traceEvents"])
    warps = [f"{w.role} [w{w.warp}]" for w in r.engine.warps]
    assert [names[t] for t in sorted(names) if t][:len(warps)] == warps
    assert "mma [w4]" in warps and {"tensor pipe", "TMA", "TMEM ld/st", "smem port", "mbarrier sv_done[1]",
                                     "bar 9"} <= set(names.values())


def test_tensor_pipe_track_holds_exactly_the_mma_and_cp_work(head64):
    r, trace, names = head64
    eng = r.engine
    pipe = by_name(names, "tensor pipe")
    assert pipe
    on_pipe = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] in pipe]
    counts = Counter(e["name"] for e in on_pipe)
    program = Counter(type(rec).__name__ for role in eng.program.roles for w in role.warps for rec in role.records)
    assert counts == {"tcgen05.mma.ws": program["Mma"], "tcgen05.cp": program["Cp"]}
    assert counts["tcgen05.mma.ws"] == 2 * r.per_block["tcgen05.mma.ws"] == r.instructions["tcgen05.mma.ws"] == 52
    assert counts["tcgen05.cp"] == r.instructions["tcgen05.cp"] == 18
    # every MMA and cp is there and nowhere else
    elsewhere = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] not in pipe
                 and e.get("cat") not in ("instruction",) and e["name"] in counts]
    assert elsewhere == []
    for e in on_pipe:
        a = e["args"]
        assert a["issue_cycle"] < a["start_cycle"] <= a["unit_free_cycle"] <= a["complete_cycle"]
        assert (e["ts"], e["dur"]) == (a["start_cycle"], a["complete_cycle"] - a["start_cycle"])


@pytest.mark.parametrize("unit", ["tensor_pipe", "tmem_path"])
def test_rebuilt_unit_occupancy_is_the_engines(head64, unit):
    """The in-order units' start cycles are rebuilt from the issue order: their busy time adds up to the engine's
    count, span for span."""
    r, trace, names = head64
    label = {"tensor_pipe": "tensor pipe", "tmem_path": "TMEM ld/st"}[unit]
    tids = by_name(names, label)
    spans = Spans()
    busy = 0
    for e in trace["traceEvents"]:
        if e["ph"] == "X" and e["tid"] in tids:
            spans.add(e["args"]["start_cycle"], e["args"]["unit_free_cycle"])
            busy += e["args"]["unit_free_cycle"] - e["args"]["start_cycle"]
    assert busy == r.engine.unit_busy[unit] > 0
    assert [s[:2] for s in spans] == [s[:2] for s in r.engine.unit_spans[unit]]


@pytest.mark.parametrize(("name", "arch"), [("flashmla-qk", "sm100"), ("flashmla-sm90", "sm90")])
def test_other_kernels_rebuild_their_pipe_too(name, arch):
    """The SM100 QK product (tcgen05.cp and tcgen05.mma.ws) and the SM90 kernel (wgmma, one per warpgroup)."""
    eng = Engine(registry.build(name), mode="timing", arch=arch).run()
    trace = chrome_trace(eng)
    names = check_format(trace)
    pipe = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] in by_name(names, "tensor pipe")]
    assert sum(e["args"]["unit_free_cycle"] - e["args"]["start_cycle"] for e in pipe) == eng.unit_busy["tensor_pipe"]
    ops = Counter(type(r).__name__ for role in eng.program.roles for w in role.warps for r in role.records)
    if arch == "sm90":  # the warps of a warpgroup issue each wgmma together: the pipe runs it once
        assert len(pipe) == sum(len(role.warps) // 4 * sum(type(r).__name__ == "WgmmaMmaAsync" for r in role.records)
                                for role in eng.program.roles) == ops["WgmmaMmaAsync"] // 4 > 0
        assert {e["name"] for e in pipe} == {"wgmma.mma_async"}
    else:
        assert Counter(e["name"] for e in pipe) == {"tcgen05.mma.ws": ops["Mma"], "tcgen05.cp": ops["Cp"]}


def test_every_issued_record_appears_with_its_ptx(head64):
    r, trace, names = head64
    eng = r.engine
    tid = {(w.role, w.warp): t for t, n in names.items() for w in eng.warps if n == f"{w.role} [w{w.warp}]"}
    records = {(e["tid"], e["args"]["index"]): e for e in trace["traceEvents"]
               if e["ph"] == "X" and e.get("cat") == "instruction"}
    issues = [e for e in eng.trace if e.kind == "issue"]
    assert len(records) == len(issues) > 900
    warp = {(w.role, w.warp): w for w in eng.warps}
    for e in issues:
        x = records[tid[e.role, e.warp], e.index]
        assert x["ts"] == x["args"]["issue_cycle"] == e.cycle
        assert x["args"]["ptx"] == warp[e.role, e.warp].ops[e.index].rec.ptx()
        assert x["args"]["record"] == f"{e.role}[w{e.warp}]#{e.index}"


def test_waits_nest_in_their_record_and_name_what_they_wait_on(head64):
    r, trace, _names = head64
    waits = [e for e in trace["traceEvents"] if e.get("cat") == "wait"]
    assert len(waits) == sum(1 for e in r.engine.trace if e.kind == "wait")
    recs = {(e["tid"], e["args"]["index"]): e for e in trace["traceEvents"] if e.get("cat") == "instruction"}
    for w in waits:
        assert w["name"] == f"wait: {w['args']['waits_on']}"
        rec = recs.get((w["tid"], w["args"]["index"]))
        if w["args"]["waits_on"].startswith("registers"):
            assert rec["ts"] >= w["ts"] + w["dur"]  # a scoreboard wait comes before its record's issue
        else:
            assert rec["ts"] <= w["ts"] and w["ts"] + w["dur"] <= rec["ts"] + rec["dur"]
    assert any(w["name"].startswith("wait: sv_done[1] parity 0") for w in waits)


def test_barrier_flows_link_each_phase_to_its_waiting_warps(head64):
    r, trace, names = head64
    eng = r.engine
    tr = eng.trace
    flows = defaultdict(dict)
    for e in trace["traceEvents"]:
        if e["ph"] in "sf":
            flows[e["id"]][e["ph"]] = e
    # one flow per resume that a barrier phase caused, from that phase's track to the warp's, and one per phase
    # from the record whose arrival completed it
    caused = [j for j, e in enumerate(tr) if e.kind == "resume" and e.dep >= 0 and tr[e.dep].kind == "phase"]
    phases = [j for j, e in enumerate(tr) if e.kind == "phase"]
    assert sorted(flows) == sorted(caused + phases) and caused
    for j in phases:
        s, f = flows[j]["s"], flows[j]["f"]
        arrival = tr[tr[j].dep]
        assert names[s["tid"]] == f"{arrival.role} [w{arrival.warp}]" and f["ts"] == tr[j].cycle + 0.5
        issue = next(e for e in tr if e.kind == "issue" and e.record == arrival.record)
        assert s["ts"] == issue.cycle + 0.5 <= f["ts"]
    for j in caused:
        s, f = flows[j]["s"], flows[j]["f"]
        phase = tr[tr[j].dep]
        assert s["ts"] == phase.cycle + 0.5 and f["ts"] == tr[j].cycle + 0.5
        assert names[f["tid"]] == f"{tr[j].role} [w{tr[j].warp}]"
        bar = names[s["tid"]]
        assert bar in (s["name"], f"mbarrier {s['name']}") and phase.detail.startswith(s["name"] + " ")
    # the MMA warp's commit that completes sv_done[1] releases the four softmax warps
    sv = [flows[j] for j in caused if flows[j]["s"]["name"] == "sv_done[1]"]
    assert sorted(names[x["f"]["tid"]] for x in sv) == [f"softmax [w{i}]" for i in range(4)]
    phase_slice = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] == sv[0]["s"]["tid"]]
    assert [e["name"] for e in phase_slice] == ["phase 0 complete"]
    assert phase_slice[0]["args"]["completed_by"].startswith("mma[w4]#") and \
        phase_slice[0]["args"]["completed_by"].endswith("(sv_done[1] commit)")
    into = [x for x in flows.values() if x["f"]["tid"] == sv[0]["s"]["tid"]]
    assert [names[x["s"]["tid"]] for x in into] == ["mma [w4]"]  # the commit's arrow into the phase
    # a named barrier's release reaches each warp that waited in its bar.sync
    assert {names[x["f"]["tid"]] for x in flows.values() if names[x["s"]["tid"]] == "bar 9"} == \
        {f"softmax [w{i}]" for i in range(4)}


def test_arrivals_are_instants_on_their_barrier(head64):
    r, trace, names = head64
    arrivals = [e for e in trace["traceEvents"] if e.get("cat") == "arrival"]
    assert len(arrivals) == sum(1 for e in r.engine.trace if e.kind == "arrive")
    commits = [e for e in arrivals if names[e["tid"]] == "mbarrier sv_done[1]"]
    assert [e["name"] for e in commits] == ["commit"] and commits[0]["args"]["by"].startswith("mma[w4]#")


# ---- small programs: hazards, stopped runs, the clock ------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(hazards.PROGRAMS))
@pytest.mark.parametrize("mode", ["timing", "semantics"])
def test_catalogue_traces_follow_the_format(name, mode):
    eng = Engine(hazards.build(name), mode=mode).run()
    trace = chrome_trace(eng)
    names = check_format(trace)
    instants = [e for e in trace["traceEvents"] if e["ph"] == "i" and e["s"] == "g"]
    assert [(e["name"], e["ts"], e["args"]["message"]) for e in instants] == \
        [(h.rule, h.cycle, h.message) for h in eng.hazards]
    assert ("hazards" in names.values()) == bool(eng.hazards)
    assert trace["otherData"]["deadlock"] == (eng.deadlock is not None)


def test_hazard_is_a_global_instant_with_rule_and_reference():
    eng = Engine(hazards.build("hazard/ld-before-commit"), mode="timing").run()
    found = [e for e in chrome_trace(eng)["traceEvents"] if e["ph"] == "i" and e["s"] == "g"]
    assert [e["args"] for e in found] == [h.to_json() for h in eng.hazards]
    (h,) = [e for e in found if e["name"] == "tmem-read-before-commit"]
    assert h["args"]["rule"] == h["name"] and h["ts"] == 30
    assert h["args"]["ref"] == RULES[h["name"]].ref and "§9.7.16.12.1" in h["args"]["ref"]  # tcgen05.commit
    assert h["args"]["second"]["role"] == "epilogue" and h["args"]["first"]["role"] == "mma"


def test_a_deadlocked_run_keeps_its_waits_open_to_the_end():
    eng = Engine(hazards.build("hazard/deadlock-missing-arrive"), mode="timing").run()
    assert eng.deadlock is not None
    trace = chrome_trace(eng)
    check_format(trace)
    open_waits = [e for e in trace["traceEvents"] if e.get("cat") == "wait" and e["ts"] + e["dur"] == eng.cycles]
    assert {(w["role"], w["warp"]) for w in eng.deadlock["waiting"]} == \
        {(e["args"]["record"].split("[w")[0], int(e["args"]["record"].split("[w")[1].split("]")[0]))
         for e in open_waits}


def test_a_stopped_run_ends_its_open_slices_at_the_stop():
    eng = Engine(hazards.build("hazard/ld-before-commit-fixed"), mode="timing").run(until=40)
    trace = chrome_trace(eng)
    check_format(trace)
    ends = [e["ts"] + e["dur"] for e in trace["traceEvents"] if e.get("cat") in ("instruction", "wait")]
    assert not eng.finished and max(ends) == eng.now == 31  # the last event before the stop
    waiting = [e for e in trace["traceEvents"] if e.get("cat") == "wait" and e["ts"] + e["dur"] == eng.now]
    assert sorted(e["args"]["record"] for e in waiting) == sorted(f"{w.name}#{w.pc}" for w in eng.warps)
    assert not [e for e in trace["traceEvents"] if e.get("cat") == "exit"]


def test_clock_converts_times_and_keeps_cycles_in_args():
    eng = Engine(hazards.build("hazard/ld-before-commit"), mode="timing").run()
    plain, fast = chrome_trace(eng), chrome_trace(eng, clock_ghz=2.0)
    assert fast["otherData"]["time_unit"] == "1 us in the viewer = 1 us at 2 GHz" and fast["displayTimeUnit"] == "ns"
    assert len(plain["traceEvents"]) == len(fast["traceEvents"])
    for a, b in zip(plain["traceEvents"], fast["traceEvents"], strict=True):
        assert a.get("args") == b.get("args")
        if "ts" in a:
            assert b["ts"] == pytest.approx(a["ts"] / 2000, abs=1e-6)
        if "dur" in a:
            assert b["dur"] == pytest.approx(a["dur"] / 2000, abs=2e-6)
    check_format(fast)
    for bad in (0, -1.0, float("nan"), "fast"):
        with pytest.raises(TraceExportError, match="clock_ghz") as e:
            chrome_trace(eng, clock_ghz=bad)
        assert e.value.rule


def test_output_is_deterministic(tmp_path):
    texts = []
    for i in range(2):
        eng = Engine(hazards.build("hazard/missing-proxy-fence"), mode="semantics").run()
        write_chrome_trace(eng, tmp_path / f"{i}.json")
        texts.append((tmp_path / f"{i}.json").read_bytes())
    assert texts[0] == texts[1]


def test_a_run_over_the_limit_is_refused_before_the_file_is_made(tmp_path, monkeypatch):
    eng = Engine(hazards.build("hazard/ld-before-commit"), mode="timing").run()
    monkeypatch.setattr(perfetto, "TRACE_EVENT_LIMIT", len(eng.trace) - 1)
    path = tmp_path / "big.json"
    with pytest.raises(TraceExportError, match="trace events") as e:
        write_chrome_trace(eng, path)
    assert "at most" in e.value.rule and not path.exists()
    with pytest.raises(TraceExportError):
        chrome_trace(eng)


def test_only_an_engine_is_exported():
    with pytest.raises(TraceExportError, match="got Program"):
        chrome_trace(hazards.build("hazard/ld-before-commit"))


def test_an_unwritable_path_is_an_error_naming_the_file(tmp_path):
    eng = Engine(hazards.build("hazard/ld-before-commit"), mode="timing").run()
    with pytest.raises(TraceExportError, match="no-such-dir") as e:
        write_chrome_trace(eng, tmp_path / "no-such-dir" / "t.json")
    assert e.value.rule


def test_trace_processor_reads_the_trace(tmp_path):
    """An independent reader: Perfetto's trace processor (the ``perfetto`` package, with a trace_processor_shell
    binary named by SIMTC_TRACE_PROCESSOR; the package would otherwise download one)."""
    shell = os.environ.get("SIMTC_TRACE_PROCESSOR")
    if not shell or not os.path.exists(shell):
        pytest.skip("set SIMTC_TRACE_PROCESSOR to a trace_processor_shell binary to check with Perfetto's reader")
    tp_mod = pytest.importorskip("perfetto.trace_processor")
    r = replay("v32", 2, 0, timing_only=True, keep_engine=True)
    path = tmp_path / "t.json"
    write_chrome_trace(r.engine, path)
    trace = json.loads(path.read_text())
    tp = tp_mod.TraceProcessor(trace=str(path), config=tp_mod.TraceProcessorConfig(bin_path=shell))
    try:
        n_slices = next(iter(tp.query("select count(*) as n from slice"))).n
        n_flows = next(iter(tp.query("select count(*) as n from flow"))).n
        threads = {row.name for row in tp.query("select name from thread where name is not null")}
    finally:
        tp.close()
    events = trace["traceEvents"]
    assert n_slices == sum(1 for e in events if e["ph"] in ("X", "i"))
    assert n_flows == sum(1 for e in events if e["ph"] == "s")
    assert {"mma [w4]", "tensor pipe"} <= threads


# ---- the command line ------------------------------------------------------------------------------------------
def run_cli(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_replay_writes_the_trace(capsys, tmp_path):
    path = tmp_path / "t.json"
    rc, out, err = run_cli(capsys, "replay", "flashmla-head64", "--blocks", 2, "--trace", path)
    assert err.strip().splitlines()[-1].startswith(f"wrote {path} (")
    trace = json.loads(path.read_text())
    names = check_format(trace)
    assert rc == 0 and "hazards 0," in out  # the kernel's known races aside (simtc.kernels.flashmla.replay)
    assert sum(1 for e in trace["traceEvents"] if e["ph"] == "i" and e["s"] == "g") == trace["otherData"]["hazards"]
    assert trace["otherData"]["program"] == "flashmla-head64-v32" and trace["otherData"]["mode"] == "semantics"
    assert sum(1 for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] in by_name(names, "tensor pipe")) == 70


def test_simulate_writes_the_trace_of_a_hazardous_run(capsys, tmp_path):
    path = tmp_path / "t.json"
    rc, out, _err = run_cli(capsys, "simulate", "hazard/ld-before-commit", "--trace", path, "--json")
    rules = [h["rule"] for h in json.loads(out)["hazards"]]
    assert rc == 1 and "tmem-read-before-commit" in rules
    trace = json.loads(path.read_text())
    check_format(trace)
    assert [e["name"] for e in trace["traceEvents"] if e["ph"] == "i" and e["s"] == "g"] == rules


@pytest.mark.parametrize("argv", [
    ("simulate", "hazard/ld-before-commit", "--schedules", "2"),
    ("simulate", "hazard/ld-before-commit", "--step-to", "3"),
    ("replay", "flashmla-head64", "--blocks", "2", "--schedules", "2"),
    ("replay", "flashmla-head64", "--blocks", "2", "--step-to", "3"),
])
def test_trace_refuses_runs_it_cannot_show(capsys, tmp_path, argv):
    path = tmp_path / "t.json"
    rc, _out, err = run_cli(capsys, *argv, "--trace", path)
    assert rc == 2 and "--trace does not combine" in err and not path.exists()


@pytest.mark.parametrize("command", [("simulate", "hazard/ld-before-commit"), ("replay", "flashmla-head64")])
def test_trace_to_an_unwritable_path_names_the_file(capsys, tmp_path, command):
    path = tmp_path / "missing" / "t.json"
    rc, _out, err = run_cli(capsys, *command, "--trace", path)
    assert rc == 2 and str(path) in err and "does not exist" in err
