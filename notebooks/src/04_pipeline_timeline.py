# %% [markdown]
# # 04 · One block through the pipeline: timeline, waits, critical path, hazards
#
# `tcgen05.mma`, `tcgen05.cp`, `tcgen05.ld` and TMA loads are **asynchronous**: the issuing warp
# moves on, and the result is there only once a completion mechanism says so (a `tcgen05.commit`
# arriving on an mbarrier, `tcgen05.wait::ld`, a TMA's complete-tx). FlashMLA's head64 kernel keeps
# six warp roles busy with this machinery, synchronised by 25 mbarriers and four named barriers (FlashMLA
# `csrc/sm100/decode/head64/kernel.cuh` lines 134-747 for the roles, `config.h` lines 187-193 and 22-28 for the
# barriers, at commit `9241ae3`). This notebook runs one KV block of it on simtc's engine and asks:
#
# 1. what does one block's timeline look like (the Gantt view)?
# 2. what happens at each step — the stepping widget, the stepper's queries, who waits on what;
# 3. where does the time go — barrier waits by role, the critical path, busy cycles per role and unit,
#    the whole kernel's time and what binds the steady state;
# 4. which timing parameters produced those cycles, how sure are we of each (measured / documented / derived /
#    assumed), and which of them the answer rests on?
# 5. what does the hazard checker say when a fence is removed — and about the fixed twin?
#
# The engine (`simtc.engine.Engine`) runs each warp as a SimPy process over the kernel's instruction
# records, beside small mechanism modules: the tensor pipe, the copy engine (TMA), the TMEM load/store
# path, the one shared-memory port every reader and writer draws from, the CUDA cores' issue slots and
# pipes, and L2/HBM (a per-SM share of the chip's bandwidth, latency growing with the bytes queued).
# Its cycles are a **model**: no Blackwell GPU has checked them; every number it reads is a labelled
# parameter (section 4). The replay is the one notebook 03 uses (`simtc replay flashmla-head64` in a shell).

# %%
from collections import Counter, defaultdict
from itertools import islice

from IPython.display import display
from rich.table import Table

from simtc.engine import Engine, timing
from simtc.engine.handlers import parameters_of
from simtc.engine.hazards import RULES
from simtc.engine.parameters import PARAMETERS, Timing
from simtc.engine.sensitivity import sensitivity
from simtc.engine.tensor_pipe import mma_spec_of
from simtc.kernels import hazards as catalogue
from simtc.kernels.flashmla.mutations import CATALOGUE as MUTATIONS
from simtc.kernels.flashmla.replay import B200_CLOCK_GHZ, PUBLISHED_TFLOPS, replay, steady_cycles_per_block, stepper
from simtc.kernels.flashmla.story import hazard_counts, hazard_lines, throughput_basis
from simtc.render.timeline import TimelineView
from simtc.render.widget import StepperWidget, show_steps

# %% [markdown]
# ## 1. One block's timeline
#
# A request of one KV block (64 tokens), replayed with real data (semantics mode: every record also
# acts on shared memory and TMEM, and P, O and LSE are checked). One row per warp (█ busy, ░ waiting,
# ▲ an arrival it made), one per unit (█ occupied) and one per barrier (· arrivals, │ phase
# complete); the critical path is drawn in the highlight colour. Under it, the hazard checker's findings
# (section 5): the one it reports on the faithful kernel is FlashMLA's own known race, a formal write-after-read
# on `rowwise_max_buf` after the last block (`kernel.cuh` lines 229 and 309 at `9241ae3`; `docs/engine.md`), listed
# apart from any hazard the Program would have introduced.

# %%
run = replay("v32", blocks=1, seed=0, keep_engine=True)
eng = run.engine
print(run.summary())
display(TimelineView(eng, width=100, hazards=False))
print("\n".join(hazard_lines(run)))

# %% [markdown]
# Reading it left to right (FlashMLA `kernel.cuh` lines 431-843 at `9241ae3`): the MMA warp loads Q by TMA
# (`q_tma`) and copies it into TMEM (`q_utccp`); the index warp publishes coordinates and scales
# (`valid_coord_scale_ready`); the raw and RoPE producers then gather the block's 64 token rows by TMA
# (`raw_ready`, `rope_ready`); the dequant warpgroup turns fp8 into bf16 K (`nope_ready`); the MMA warp
# issues 18 QK MMAs (`qk_done`); the softmax warpgroup reads P, exchanges the halves (named barriers 10,
# 11), writes S (`so_ready`); 8 PV MMAs (`sv_done`); and the epilogue stores O by TMA. With one block
# nothing overlaps: most of the time is the gathers from global memory. The memory model
# (`simtc.engine.memory`) gives each request the DRAM round trip (`dram_latency`, measured by a pointer
# chase on our H200, `tests/data/h200_memory_latency.json`, assumed equal on the B200) after its bytes
# have crossed the SM's share of the chip's HBM bandwidth (`hbm_bytes_per_cycle / sm_count`, derived from
# a published B200 measurement), queued behind the bytes booked before them.

# %% [markdown]
# ## 2. Step through the block
#
# `simtc.kernels.flashmla.replay.stepper` builds a `Stepper` (`simtc.engine.stepper`) over the same
# replay: it runs the engine one trace event at a time and keeps, for every step, what the event changed,
# so it can go forward and back, jump to any step, and show the state there — each warp's program
# counter and PTX line and what it waits on, every barrier's phase and pending arrivals, Tensor Memory by
# the instruction that last wrote each cell, the shared-memory buffers and their last writer, the units'
# operations in flight. Step `n` is the state after the first `n` events.
#
# **The stepping widget** (`simtc.render.widget.StepperWidget`) puts it behind a slider and buttons: one
# event back or forward, the next barrier completion, the next MMA issue, and the next event of a role or
# barrier chosen in the list. Under the controls, the step's picture: the event with its PTX line, what it
# read and wrote and whom it released, then the state and the whole run's timeline with a cursor at the
# step's cycle. It opens at the block's first QK MMA. (In JupyterLab it is live; a page built without a
# kernel, like this site's, shows the picture of the step it opened at, and the pictures of four chosen
# steps below.)

# %%
widget = StepperWidget(stepper("v32", blocks=1, seed=0))
widget.goto(widget.stepper.find(opcode="tcgen05.mma", start=0))
display(widget)

# %% [markdown]
# The same moves in code, on a stepper of its own (so the widget above stays where you leave it):
# `find(...)` returns the step of the next event matching its conditions (a role, a warp, a barrier, a
# PTX opcode, an event kind, a cycle, a label), `to_next(...)` goes there, `forward`/`back`/`goto` move.
# The run's first events:

# %%
steps = stepper("v32", blocks=1, seed=0)
for e in islice(steps, 12):
    print(e.line())
print(f"... {len(steps)} events in all, the last at cycle {steps.event(len(steps)).cycle:,} (the replay's "
      f"{eng.cycles:,} cycles)")

# %% [markdown]
# Four moments of the block, found by asking for them (FlashMLA `kernel.cuh` at `9241ae3`: the QK MMAs
# and their commit to `qk_done` at lines 542-573, the softmax's wait and P loads at 163-175, the exchange
# at 184-190, the PV MMAs and their commit to `sv_done` at 580-581):
#
# 1. the **first QK MMA** issued: it reads Q from TMEM and K from shared memory, and its P lands in TMEM
#    columns 400-463 only when it completes;
# 2. **`qk_done[0]` completes** (the commit after the last QK MMA): it releases the four softmax warps;
# 3. **the P exchange**: each softmax warp holds half of every P sum (the dual GEMM splits the dimensions
#    between the lane halves, notebook 03), stores the half its partner needs into `p_exchange_buf` and
#    meets it at a 64-thread pair barrier — bar 10 for warps 0 and 2, bar 11 for warps 1 and 3;
# 4. **`sv_done[0]` completes**: the PV MMAs have written O (TMEM columns 0-255), the softmax warps go on
#    to the epilogue.

# %%
first_qk = steps.find(opcode="tcgen05.mma", start=0)
p_ready = steps.find(barrier="qk_done[0]", kind="phase", start=0)
p_exchange = steps.find(barrier="bar 10", kind="phase", start=0)
pv_done = steps.find(barrier="sv_done[0]", kind="phase", start=0)
for n in (first_qk, p_ready, p_exchange, pv_done):
    print(f"step {n:>4}: {steps.event(n).line()}")
show_steps(steps, [(first_qk, "the first QK MMA"), (p_ready, "qk_done[0] completes: P is in TMEM"),
                   (p_exchange, "the P exchange: bar 10 releases warps 0 and 2"),
                   (pv_done, "sv_done[0] completes: O is in TMEM")], timeline=False)

# %% [markdown]
# Follow one warp from there: after `qk_done[0]`, softmax warp 0's next `tcgen05.ld` reads P from TMEM —
# and the state says which instruction last wrote the cells it reads (the last QK MMA, at its completion).
# The widget above can be driven the same way: moved to `qk_done[0]`'s completion, its next MMA
# (`widget.next_mma()`) is the block's first PV MMA, issued only after the softmax has written S and
# arrived on `so_ready[0]`:

# %%
steps.goto(p_ready)
p_load = steps.to_next(role="softmax", warp=0, opcode="tcgen05.ld")
read = p_load.reads["tmem"][0]
(l0, l1), (c0, c1) = read["lanes"], read["columns"]
p_writers = {steps.event(int(n)).label for n in set(steps.state().tmem_writer[l0:l1 + 1, c0:c1 + 1].ravel())}
print(f"step {p_load.step}: {p_load.line()}\n  reads TMEM lanes {l0}-{l1}, columns {c0}-{c1}, "
      f"last written by {p_writers}")
widget.goto(p_ready)
first_pv = widget.next_mma()
so_ready_done = steps.find(barrier="so_ready[0]", kind="phase", start=0)
print(f"the widget's next MMA: step {widget.step} ({first_pv.label}), after so_ready[0] completed at step "
      f"{so_ready_done}")

# %% [markdown]
# **Who waits on what**, just before three phases of the block complete — P ready (`qk_done[0]`), S ready
# (`so_ready[0]`), PV done (`sv_done[0]`): the state at the last step before the cycle each completes at.

# %%
phase_at = {bar: steps.event(steps.find(barrier=bar, kind="phase", start=0)).cycle
            for bar in ("qk_done[0]", "so_ready[0]", "sv_done[0]")}
snapshots = {}
for bar, cycle in phase_at.items():
    snapshots[bar] = state = steps.goto(steps.find(cycle=cycle, start=0) - 1)
    table = Table(title=f"step {state.step}, cycle {state.cycle}: just before {bar} completes (cycle {cycle})")
    for col in ("role", "warps", "record (pc)", "waits on"):
        table.add_column(col)
    by_role = defaultdict(list)
    for w in state.warps:
        by_role[(w["role"], w["pc"], w["label"] or w["ptx"], w["waiting_on"], w["status"])].append(w["warp"])
    for (role, pc, rec, waits, status), warps in by_role.items():
        table.add_row(role, ",".join(map(str, warps)), "done" if status == "done" else f"{(rec or '')[:50]} ({pc})",
                      waits or ("—" if status == "done" else "running"))
    display(table)
mb = next(m for m in snapshots["so_ready[0]"].mbarriers if m["name"] == "so_ready[0]")
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
# With a single block the path is latency: it starts at the MMA warp's Q copies into TMEM (which waited
# for Q's own TMA load from global memory), runs through the MMA warp to the block's `sv_done`, then
# through the softmax warps' epilogue (three `wg0_sync` barriers, bar 9) ending in the O store by TMA.
# With more blocks the producers run up to two blocks ahead (the KV ring has two buffers) and the
# steady-state loop is softmax(i) → PV(i) + QK(i+1) on the tensor pipe → softmax(i+1): QK(i+1) waits
# for `so_ready(i)` because P has one buffer (`kernel.cuh` lines 573-581: the QK commit, then PV after
# `bar_so_ready`, in one loop; `config.h` line 79: one P region). Four blocks of the same request, timing only:
# no data, so the data-dependent O rescale is assumed not to fire in any block. The **whole kernel** first — the
# request's FLOPs over all its cycles, Q load, first block and epilogue included, as if every SM of a B200 ran such
# a request — then the steady state, the time between consecutive blocks' `sv_done`. Each figure says what it
# includes; beside them the same request with its data, which rescales O in one block (the figure `simtc tour` and
# notebook 03 give):

# %%
run4 = replay("v32", blocks=4, seed=0, timing_only=True, keep_engine=True)
run4_data = replay("v32", blocks=4, seed=0)
b200 = f"{run4.sm_count}-SM B200 at {B200_CLOCK_GHZ} GHz"
for r in (run4, run4_data):
    print(f"{throughput_basis(r)}: whole kernel {r.cycles_whole:,} cycles -> {r.tflops_whole:.0f} TFLOP/s; steady "
          f"state {r.cycles_per_block_steady:,.0f} cycles per block (blocks 1-3) -> {r.tflops_steady:.0f} TFLOP/s")
rescale_cost = 3 * (run4_data.cycles_per_block_steady - run4.cycles_per_block_steady)
print(f"on a {b200}, every SM running such a request (FlashMLA publishes up to {PUBLISHED_TFLOPS} for its own "
      f"benchmark shapes); one block alone: {run.cycles_whole:,} cycles. The two differ by the O rescale: with the "
      f"data block {run4_data.rescale_blocks[0]} rescales O, and the three steady-state intervals take "
      f"{rescale_cost:,.0f} cycles more in all")
display(TimelineView(run4.engine, width=100, barriers=False, hazards=False))
print("\n".join(hazard_lines(run4)))

# %% [markdown]
# **Busy and waiting cycles per role** (mean over the role's warps; busy = issuing or holding an issue
# slot) and **busy cycles per unit** of the one-block run (`issue`: the four sub-partitions' issue slots
# together):

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
# **Busy units with four blocks.** The units now overlap. Their busy cycles per block
# (`units_per_block`: the run's busy cycles over its blocks; `issue` is per sub-partition here, the four
# issue slots' sum divided by four; `tma` counts cycles with at least one copy in flight, latency
# included) set against the whole run's cycles per block show which are close to full. A busy unit need
# not be the one that binds — section 4 scales each parameter to find out.

# %%
sub_partitions = Timing("sm100")["sub_partitions"]
whole_per_block = run4.cycles_whole / run4.blocks
busy4 = {u: v / (sub_partitions if u == "issue" else 1) for u, v in run4.units_per_block.items()}
for unit, busy in sorted(busy4.items(), key=lambda kv: -kv[1]):
    print(f"{unit:<12} {busy:>7,.0f} busy cycles per block ({busy / whole_per_block:.0%} of the whole run's "
          f"{whole_per_block:,.0f} cycles per block)")

# %% [markdown]
# ## 4. The timing model behind those cycles
#
# Every cycle count comes from one labelled table (`simtc.engine.parameters.PARAMETERS`): **measured**
# (read off real hardware: a third party's published data or a recording in this repository),
# **documented** (a vendor document), **derived** (arithmetic on measured or documented figures, the
# source says whose), or **assumed** (no measurement and no document; the rationale stated). The
# parameters this run read — those each record's handler reads (`simtc.engine.handlers.parameters_of`),
# plus the tensor-pipe model's parameters for the QK and PV instructions:

# %%
used = {n: PARAMETERS["sm100"][n] for role in eng.program.roles for r in role.records for n in parameters_of(r)}
mma_role = eng.program.role("mma")
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
from_h200 = sorted(p.name for p in used.values() if p.label == "assumed" and "measured on the H200" in p.source)
print("labels:", labels)
print(f"no sm100 parameter is measured on a Blackwell GPU; {len(from_h200)} of the assumed ones were measured on our "
      "H200 (simtc calibrate, tests/data/h200_calibration.json) and are assumed equal on the B200, e.g. "
      f"{', '.join(from_h200[:4])}")
print("sm90 labels:", dict(Counter(p.label for p in PARAMETERS["sm90"].values())))

# %% [markdown]
# **Which of them the answer rests on** (`simtc timing sensitivity flashmla-head64` in a shell): the
# steady-state cycles per block of a 12-block request, with each parameter in turn halved and doubled.
# The parameters that move it most come first, with their labels — an answer that moves with an
# *assumed* parameter is only as good as that assumption:

# %%
def steady(t):
    return steady_cycles_per_block("v32", 12, timing=t)


base = steady(Timing("sm100"))
rests_on = sensitivity(steady, Timing("sm100"), base=base)
sens_table = Table(title=f"steady-state cycles per block, 12 blocks: {base:,.0f} at the table's values")
for col in ("parameter", "label", "value", "x0.5", "x2"):
    sens_table.add_column(col, justify="left" if col in ("parameter", "label") else "right")
for row in rests_on[:10]:
    sens_table.add_row(row.name, row.label, f"{row.value:g}", f"{row.down:+.1%}", f"{row.up:+.1%}")
display(sens_table)
print(f"what binds first: {rests_on[0].name} [{rests_on[0].label}]; "
      f"{sum(r.effect == 0 for r in rests_on)} of {len(rests_on)} parameters do not move this answer")

# %% [markdown]
# A unit can be busy and still have **slack**: halving its rate then changes nothing, because another
# unit binds. The dequant warps' fp8 → bf16 conversions are an example — scale their pipe's rate
# (`cvt_lanes`) further to see where the slack runs out:

# %%
cvt = sensitivity(steady, Timing("sm100"), names=["cvt_lanes"], factors=(0.25, 0.5, 2, 4), base=base)[0]
print(f"cvt_lanes [{cvt.label}] = {cvt.value:g} {cvt.unit}: " + ", ".join(f"x{f:g} {c:+.1%}" for f, c in cvt.changes))

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
other, known = hazard_counts(mutated)
print(f"  the mutated replay: {other} hazard(s) the mutation introduced, besides the kernel's known race "
      f"({known} x {mutated.known_races[0]['rule']}, listed apart)")
print(f"the unmutated replay: {hazard_counts(run)[0]} hazards besides the kernel's known race "
      f"({hazard_counts(run)[1]} x {run.known_races[0]['rule']}), ok = {run.ok}")

# %% [markdown]
# ## What this notebook showed (checked)

# %%
assert run.ok and not run.hazards and run.p_bit_exact and eng.cycles == run.cycles
assert all(phase_at[b] <= eng.cycles for b in ("qk_done[0]", "so_ready[0]", "sv_done[0]"))
assert phase_at["qk_done[0]"] < phase_at["so_ready[0]"] < phase_at["sv_done[0]"]   # P -> S -> PV, in order
# stepping: the stepper replays the same run, event for event
assert len(steps) == len(eng.trace) and steps.event(len(steps)).cycle == eng.cycles
qk = steps.event(first_qk)
assert qk.ptx.startswith("tcgen05.mma") and qk.role == "mma" and qk.label.startswith("QK") and qk.lands == "completion"
assert qk.writes["tmem"] == [{"lanes": [0, 127], "columns": [400, 463]}]   # P: 64 columns, all 128 lanes
assert steps.find(opcode="tcgen05.mma", kind="complete", start=0) > first_qk  # it lands later
assert sorted(steps.event(p_ready).released) == [("softmax", w) for w in range(4)]   # qk_done releases the softmax
assert {w for _, w in steps.event(p_exchange).released} == {0, 2}              # the pair barriers: warps 0+2 ...
assert {w for _, w in steps.event(steps.find(barrier="bar 11", kind="phase", start=0)).released} == {1, 3}  # 1+3
exchanged = next(b for b in steps.goto(p_exchange).smem if b["buffer"] == "p_exchange_buf")
assert exchanged["writer"].startswith("softmax") and "p_peer" in exchanged["writer"]   # P halves went through smem
assert sorted(steps.event(pv_done).released) == [("softmax", w) for w in range(4)]
o_writers = {steps.event(int(n)).label for n in set(steps.goto(pv_done).tmem_writer[:, 0:256].ravel())}
assert o_writers and all(lab.startswith("PV") for lab in o_writers)          # O: written by the PV MMAs
assert p_load.reads["tmem"] == [{"lanes": [0, 31], "columns": [400, 431]}] and p_writers == {"QK k=15"}
assert first_pv.label.startswith("PV") and widget.step > so_ready_done > p_ready   # PV waits for S
assert widget.slider is None or widget.slider.value == widget.step             # the slider follows the model
steps.goto(p_ready)
here = steps.state()
steps.back(5)
steps.forward(5)
assert steps.state() == here                                                  # back then forward: the same state
# who waits on what, from the stepper's state
before_p = {w["role"]: w["waiting_on"] for w in snapshots["qk_done[0]"].warps}
assert before_p["softmax"].startswith("qk_done[0]") and before_p["mma"].startswith("so_ready[0]")
assert {w["waiting_on"].split(" ")[0] for w in snapshots["sv_done[0]"].warps if w["role"] == "softmax"} == {
    "sv_done[0]"}
assert 0 < mb["pending"] <= mb["expected"] == 128                       # 128 softmax threads arrive on so_ready
# where the time goes
assert wait_cycles["softmax", "qk_done[0]"] == max(v for (r, _), v in wait_cycles.items() if r == "softmax")
cycles_on_path = [eng.trace[i].cycle for i in path]
assert cycles_on_path == sorted(cycles_on_path) and cycles_on_path[-1] == eng.cycles
assert segments[-1][0] == "softmax" and any(s[0] == "mma" for s in segments)
assert all(v["busy_cycles"] + v["waiting_cycles"] <= eng.cycles for v in per_role.values())
assert max(units, key=lambda u: units[u]["busy_cycles"]) == "tma" and units["tensor_pipe"]["busy_cycles"] > 0
assert run4.cycles_per_block < run.cycles                                # blocks overlap in the pipeline
# the whole kernel (ramp and epilogue included) is slower per block than the steady state
assert run4.cycles_whole > 4 * run4.cycles_per_block_steady and run4.tflops_whole < run4.tflops_steady
# the figures say what they include: timing only assumes no O rescale; the data rescales O in one block, slower
assert run4.rescale_blocks == [] and run4.rescale_source == "assumed" and len(run4_data.rescale_blocks) == 1
assert run4_data.tflops_steady < run4.tflops_steady and "timing only" in throughput_basis(run4)
# the hazards printed under the timelines: the kernel's known race, labelled, and nothing else
assert hazard_counts(run) == (0, 4) and "FlashMLA's own known race" in hazard_lines(run)[0]
# every parameter is labelled; the B200 table has no measured one
assert set(labels) == set(timing.LABELS) and sum(labels.values()) == len(used) and labels["measured"] == 0
assert all(p.source for p in used.values()) and from_h200
# what the answer rests on: sorted by effect; something binds; the conversions have slack at x0.5, not at x0.25
assert [r.effect for r in rests_on] == sorted((r.effect for r in rests_on), reverse=True) and rests_on[0].effect > 0.05
assert all(r.label in timing.LABELS for r in rests_on) and abs(cvt.change(0.5)) < abs(cvt.change(0.25))
# the hazard checker: a missing fence is flagged with its rule, the fixed twin is clean
assert {h.rule for h in bug.hazards} == {"missing-after-thread-sync-fence"} and fixed.clean
assert mutation.caught_by in {h["rule"] for h in mutated.hazards} and not mutated.ok and run.ok
print("all facts of notebook 04 hold")
