# %% [markdown]
# # 04 · One block through the pipeline: timeline, waits, critical path, hazards
#
# `tcgen05.mma`, `tcgen05.cp`, `tcgen05.ld` and TMA loads are **asynchronous**: the issuing warp
# moves on, and the result is there only once a completion mechanism says so (a `tcgen05.commit`
# arriving on an mbarrier, `tcgen05.wait::ld`, a TMA's complete-tx). FlashMLA's head64 kernel keeps
# six warp roles busy with this machinery, synchronised by 25 mbarriers and named barriers
# (`flashmla_head64.md` §2, §5, §6). This notebook runs one KV block of it on simtc's engine and asks:
#
# 1. what does one block's timeline look like (the Gantt view)?
# 2. who waits on what — stepping the simulation and taking snapshots;
# 3. where does the time go — barrier waits by role, the critical path, busy cycles per role and unit;
# 4. which timing parameters produced those cycles, and how sure are we of each (measured / derived / assumed)?
# 5. what does the hazard checker say when a fence is removed — and about the fixed twin?
#
# The engine (`simtc.engine.Engine`) runs each warp as a SimPy process over the kernel's instruction
# records and models the tensor pipe, TMA, the TMEM load/store path and the shared-memory port as
# units. Its cycles are a **model**: no Blackwell GPU has checked them, and most parameters are
# assumed (section 4). The replay is the one notebook 03 uses (`simtc replay flashmla-head64` in a shell).

# %%
from collections import defaultdict

from IPython.display import display
from rich.table import Table

from simtc.engine import Engine, timing
from simtc.engine.costs import mma_spec_of
from simtc.engine.hazards import RULES
from simtc.kernels import hazards as catalogue
from simtc.kernels.flashmla.mutations import CATALOGUE as MUTATIONS
from simtc.kernels.flashmla.replay import replay

# %% [markdown]
# ## 1. One block's timeline
#
# A request of one KV block (64 tokens), replayed with real data (semantics mode: every record also
# acts on shared memory and TMEM, and P, O and LSE are checked). One row per warp (█ busy, ░ waiting,
# ▲ an arrival it made), one per unit (█ occupied) and one per barrier (· arrivals, │ phase
# complete); the critical path is drawn in the highlight colour.

# %%
run = replay("v32", blocks=1, seed=0, keep_engine=True)
eng = run.engine
print(run.summary())
eng.timeline(width=100)

# %% [markdown]
# Reading it left to right (§6.8): the MMA warp loads Q by TMA (`q_tma`) and copies it into TMEM
# (`q_utccp`); the index warp publishes coordinates and scales (`valid_coord_scale_ready`); the raw and
# RoPE producers then gather the block's 64 token rows by TMA (`raw_ready`, `rope_ready`); the dequant
# warpgroup turns fp8 into bf16 K (`nope_ready`); the MMA warp issues 18 QK MMAs (`qk_done`); the softmax
# warpgroup reads P, exchanges the halves (named barriers 10, 11), writes S (`so_ready`); 8 PV MMAs
# (`sv_done`); and the epilogue stores O by TMA. With one block nothing overlaps: most of the time is
# TMA latency from global memory (a fixed latency fitted to public measurements; no L2/HBM simulation).

# %% [markdown]
# ## 2. Who waits on what: step and snapshot
#
# A fresh engine on the same Program can be stepped one event at a time (`step()`), run to a cycle
# (`run(until=...)`) and inspected (`snapshot()`): each warp's program counter and what it waits on,
# every mbarrier's phase and pending arrivals, what is in flight. The first events:

# %%
stepper = Engine(eng.program, mode="timing")
steps = 0
while len(stepper.trace) < 16:
    stepper.step()
    steps += 1
for ev in stepper.trace:
    print(f"cycle {ev.cycle:>5}  {ev.role:>8}[w{ev.warp}] #{ev.index:<3} {ev.kind:<7} {ev.detail}")
print(f"({steps} steps; a step is one SimPy event, which may record several trace events or none)")

# %% [markdown]
# Now stop just before three phases of the block complete — P ready (`qk_done[0]`), S ready
# (`so_ready[0]`), PV done (`sv_done[0]`) — and ask every warp what it is waiting for. The cycles come
# from the finished run's trace (`phase` events):

# %%
phase_at = {e.detail.split(" phase")[0]: e.cycle for e in eng.trace if e.kind == "phase"}
snapshots = {}
for bar in ("qk_done[0]", "so_ready[0]", "sv_done[0]"):
    stepper.run(until=phase_at[bar])
    snapshots[bar] = stepper.snapshot()
    table = Table(title=f"cycle {stepper.now}: just before {bar} completes")
    for col in ("role", "warps", "record (pc)", "waits on"):
        table.add_column(col)
    by_role = defaultdict(list)
    for w in snapshots[bar]["warps"]:
        by_role[(w["role"], w["pc"], w["record"], w["waits_on"])].append(w["warp"])
    for (role, pc, rec, waits), warps in by_role.items():
        table.add_row(role, ",".join(map(str, warps)), "done" if rec is None else f"{rec} ({pc})",
                      waits or ("—" if rec is None else "running"))
    display(table)
mb = snapshots["so_ready[0]"]["mbarriers"]["so_ready[0]"]
print(f"so_ready[0] then: phase {mb['phase']}, {mb['pending']} of {mb['expected']} arrivals pending")

# %% [markdown]
# ## 3. Where the time goes
#
# **Barrier waits by role**, from the trace: each `wait` event until the warp's next `resume`
# (mean over the role's warps). mbarrier waits are named by barrier, named barriers by id
# (9 = `wg0_sync`, 10/11 = the exchange's pair barriers, 8 + value per CUTLASS's reserved ids),
# `wait::ld` is the wait for `tcgen05.ld`:

# %%
waits: dict[tuple[str, str], list[int]] = defaultdict(list)
open_wait: dict[tuple[str, int], tuple[str, int]] = {}
warps_of = defaultdict(set)
for e in eng.trace:
    warps_of[e.role].add(e.warp)
    if e.kind == "wait":
        what = " ".join(e.detail.split(" ")[:2]) if e.detail.startswith("bar ") else e.detail.split(" ")[0]
        open_wait[e.role, e.warp] = (what, e.cycle)
    elif e.kind == "resume" and (e.role, e.warp) in open_wait:
        what, since = open_wait.pop((e.role, e.warp))
        waits[e.role, what].append(e.cycle - since)
wait_table = Table(title="Waiting cycles per warp, by role and barrier (one block)")
for col, just in (("role", "left"), ("waits on", "left"), ("waits", "right"), ("cycles", "right")):
    wait_table.add_column(col, justify=just)
wait_cycles = {}
for (role, what), ds in sorted(waits.items(), key=lambda kv: -sum(kv[1])):
    n = len(warps_of[role])
    wait_cycles[role, what] = round(sum(ds) / n)
    wait_table.add_row(role, what, f"{len(ds) / n:g}", f"{wait_cycles[role, what]:,}")
display(wait_table)

# %% [markdown]
# **The critical path**: from the last event, follow each event's cause (`dep`: the warp's previous
# event, the unit's previous operation, the arrival that completed a phase) back to the start.
# Consecutive events of one role are merged into one segment:

# %%
path = eng.critical_path()
segments: list[list] = []
for i in path:
    e = eng.trace[i]
    who = e.role or "(barrier)"
    if segments and segments[-1][0] == who:
        segments[-1][2], segments[-1][3] = e.cycle, segments[-1][3] + 1
    else:
        segments.append([who, e.cycle, e.cycle, 1, e.detail or e.kind])
crit_table = Table(title=f"Critical path: {len(path)} events, cycle {eng.trace[path[0]].cycle:,} to {eng.cycles:,}")
for col in ("from", "to", "role", "events", "starts with"):
    crit_table.add_column(col, justify="right" if col in ("from", "to", "events") else "left")
for who, c0, c1, n, what in segments:
    crit_table.add_row(f"{c0:,}", f"{c1:,}", who, str(n), what[:60])
display(crit_table)

# %% [markdown]
# With a single block the path is latency: the TMA gathers from global memory (the model's fixed
# DRAM latency), the QK and PV MMAs, then the softmax warps' epilogue ending in the O store by TMA.
# With more blocks the producers run up to two blocks ahead (the KV ring has two buffers) and the
# steady-state loop is softmax(i) → PV(i) + QK(i+1) on the tensor pipe → softmax(i+1): QK(i+1) waits
# for `so_ready(i)` because P has one buffer (§6.8). Four blocks of the same request (timing only: no
# data, so the data-dependent O rescale is assumed not to fire in any block):

# %%
run4 = replay("v32", blocks=4, seed=0, timing_only=True, keep_engine=True)
print(f"{run4.cycles:,} cycles for 4 blocks, {run4.cycles_per_block:.0f} per block in the steady state "
      f"(one block alone: {run.cycles:,})")
run4.engine.timeline(width=100, barriers=False)

# %% [markdown]
# **Busy and waiting cycles per role** (mean over the role's warps; busy = issuing or holding an issue
# slot) and **busy cycles per unit**:

# %%
per_role, units = eng.per_role(), eng.units()
role_table = Table(title=f"Per role, {eng.cycles:,} cycles in all")
for col in ("role", "busy", "waiting", "idle or done"):
    role_table.add_column(col, justify="left" if col == "role" else "right")
for role, v in per_role.items():
    rest = eng.cycles - v["busy_cycles"] - v["waiting_cycles"]
    role_table.add_row(role, f"{v['busy_cycles']:,}", f"{v['waiting_cycles']:,}", f"{rest:,}")
display(role_table)
for unit, v in units.items():
    print(f"{unit:<12} busy {v['busy_cycles']:>6,} cycles ({v['busy_cycles'] / eng.cycles:.0%} of the run)")

# %% [markdown]
# ## 4. The timing model behind those cycles
#
# Every cycle count comes from one labelled table (`simtc.engine.timing.PARAMETERS`): **measured**
# (our own hardware runs), **derived** (computed from public measurements, the formula stated), or
# **assumed** (no measurement exists; a documented guess). The parameters this run used — those the
# cost model read, plus the tensor-pipe model's parameters for the QK and PV instructions:

# %%
used = {p["name"]: timing.parameter("sm100", p["name"]) for p in eng.costs.parameters()}
mma_role = next(r for r in eng.program.roles if r.name == "mma")
for rec in {type(r).__name__ + str(r.idesc): r for r in mma_role.records if hasattr(r, "idesc")}.values():
    spec = mma_spec_of(rec)
    for prm in timing.predict_mma("sm100", spec.m, spec.n, operands=spec.operands, ws=spec.ws).parameters:
        used[prm.name] = prm
param_table = Table(title=f"{len(used)} sm100 parameters used by this run")
for col in ("parameter", "value", "unit", "label", "source"):
    param_table.add_column(col, overflow="fold", max_width=70 if col == "source" else None)
for prm in sorted(used.values(), key=lambda p: (p.label, p.name)):
    src = prm.source if len(prm.source) <= 120 else prm.source[:119] + "…"
    param_table.add_row(prm.name, f"{prm.value:g}", prm.unit, prm.label, src)
display(param_table)
labels = {lab: sum(p.label == lab for p in used.values()) for lab in timing.LABELS}
print("labels:", labels, "| the sm90 table has measured parameters (our H200 runs); sm100 has none")

# %% [markdown]
# ## 5. Remove a fence: what the hazard checker says
#
# The checker is a happens-before analysis over the run (`simtc.engine.hazards`): every warp carries
# what it *knows* to have completed, and a `tcgen05` operation may rely only on knowledge that
# crossed a thread sync between `tcgen05.fence::before_thread_sync` and `fence::after_thread_sync`
# [doc] §9.7.16.6.4. A missing fence is flagged however the timing happened to fall.
#
# **A catalogue program** (`simtc.kernels.hazards`): an MMA warp and an epilogue warpgroup sharing one
# accumulator; the buggy one reads TMEM after the mbarrier wait *without* `fence::after_thread_sync`,
# its twin `-fixed` has the fence:

# %%
for name in ("hazard/missing-after-fence", "hazard/missing-after-fence-fixed"):
    program = catalogue.build(name)
    checked = Engine(program).run()
    print(f"{name}: expected {catalogue.EXPECTED[name]}; {len(checked.hazards)} hazard(s), "
          f"{checked.cycles} cycles")
    for h in checked.hazards[:2]:
        print("   ", h)
bug, fixed = Engine(catalogue.build("hazard/missing-after-fence")).run(), \
    Engine(catalogue.build("hazard/missing-after-fence-fixed")).run()
print("rule:", RULES[bug.hazards[0].rule].text, f"({bug.hazards[0].ref})")

# %% [markdown]
# **The same bug in the whole kernel**: the mutation catalogue (`simtc.kernels.flashmla.mutations`;
# `simtc replay flashmla-head64 --mutate NAME` in a shell) removes the softmax warps'
# `fence::after_thread_sync` after their `qk_done` wait. The replay runs it on the same inputs:

# %%
mutation = MUTATIONS["softmax-no-after-fence"]
mutated = replay("v32", blocks=1, seed=0, transform=mutation.fn)
print(f"{mutation.name}: {mutation.text}\n  expected to be caught by: {mutation.caught_by} ({mutation.ref})")
for h in mutated.hazards[:2]:
    print(f"  {h['rule']} at cycle {h['cycle']}: {h['message'][:150]}")
print(f"  replay ok: {mutated.ok}; P still bit-exact: {mutated.p_bit_exact} (this run's timing happened to "
      "deliver the data; the ordering is not guaranteed, and that is what the checker reports)")
print(f"the unmutated replay: {len(run.hazards)} hazards, ok = {run.ok}")

# %% [markdown]
# ## What this notebook showed (checked)

# %%
assert run.ok and not run.hazards and run.p_bit_exact and eng.cycles == run.cycles
assert all(phase_at[b] <= eng.cycles for b in ("qk_done[0]", "so_ready[0]", "sv_done[0]"))
assert phase_at["qk_done[0]"] < phase_at["so_ready[0]"] < phase_at["sv_done[0]"]   # P -> S -> PV, in order
# who waits on what, from snapshots of a stepped engine
before_p = {w["role"]: w["waits_on"] for w in snapshots["qk_done[0]"]["warps"]}
assert before_p["softmax"].startswith("qk_done[0]") and before_p["mma"].startswith("so_ready[0]")
assert {w["waits_on"].split(" ")[0] for w in snapshots["sv_done[0]"]["warps"] if w["role"] == "softmax"} == {
    "sv_done[0]"}
assert 0 < mb["pending"] <= mb["expected"] == 128                       # 128 softmax threads arrive on so_ready
assert stepper.finished is False and len(stepper.trace) < len(eng.trace)
# where the time goes
assert wait_cycles["softmax", "qk_done[0]"] == max(v for (r, _), v in wait_cycles.items() if r == "softmax")
cycles_on_path = [eng.trace[i].cycle for i in path]
assert cycles_on_path == sorted(cycles_on_path) and cycles_on_path[-1] == eng.cycles
assert segments[-1][0] == "softmax" and any(s[0] == "mma" for s in segments)
assert all(v["busy_cycles"] + v["waiting_cycles"] <= eng.cycles for v in per_role.values())
assert max(units, key=lambda u: units[u]["busy_cycles"]) == "tma" and units["tensor_pipe"]["busy_cycles"] > 0
assert run4.cycles_per_block < run.cycles                                # blocks overlap in the pipeline
# every parameter is labelled; the B200 table has no measured one
assert set(labels) == set(timing.LABELS) and sum(labels.values()) == len(used) and labels["measured"] == 0
assert all(p.source for p in used.values())
# the hazard checker: a missing fence is flagged with its rule, the fixed twin is clean
assert {h.rule for h in bug.hazards} == {"missing-after-thread-sync-fence"} and fixed.clean
assert mutation.caught_by in {h["rule"] for h in mutated.hazards} and not mutated.ok and run.ok
print("all facts of notebook 04 hold")
