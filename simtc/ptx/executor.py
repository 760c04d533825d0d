"""Executing a PTX kernel: the launch, the warp scheduler, and each instruction compiled once into a closure.

:func:`launch` runs a grid one CTA at a time (in ``%ctaid`` order, x fastest); within a CTA its warps take
turns round-robin, ``quantum`` warp instructions each (default 1), until a warp blocks at a barrier; when every
warp that has not finished is blocked, the launch stops with a :class:`~simtc.ptx.errors.KernelFault` naming
each warp, its PTX line and what it waits on. The state (warps, frames, the reconvergence stack, the CTA) is
:mod:`simtc.ptx.warp`'s; memories are :mod:`simtc.ptx.memory`'s and, for shared memory, the
:class:`simtc.semantics.Cta`'s :class:`~simtc.smem.SharedMemory` (one access API for the asynchronous
instructions that will act on it).

**One table of opcodes** (GPGPU-Sim's ``opcodes.def``): :data:`HANDLERS` maps each opcode the executor owns to
the function that compiles one instruction of it into a closure, filled by the :func:`handler` decorator; the
per-lane opcodes (:data:`simtc.ptx.alu.OPCODES`) go through :func:`simtc.ptx.alu.compile`; :data:`REFUSED`
names what comes in a later step (``mbarrier``, ``cp.async``, ``tcgen05``, ``wgmma``, clusters), refused by
name when executed. Each closure takes ``(warp, frame, entry)`` with its operand readers and writers resolved
when the module is compiled (register slots, immediates encoded to their types, symbols to addresses).

**What simtc does not model here, and says so** (each a note in :class:`LaunchResult` when executed):
``membar``/``fence`` (execution is sequential, so every store is visible to every later load: fences order
nothing more for values; ``fence.proxy.async`` will matter to the hazard checker), ``setmaxnreg``,
``griddepcontrol``, ``prefetch``/``prefetchu``, ``nanosleep``, ``pmevent``, cache hints and ``createpolicy``;
``%clock``/``%clock64`` count the warp instructions the CTA has issued (not cycles, until the engine times
executed kernels), ``%globaltimer`` likewise.

**Control flow and data.** ``bra``, ``brx.idx`` through a ``.branchtargets`` list (a multi-way branch: the warp
splits by target and reconverges at the immediate post-dominator), direct calls and indirect ones through a
register (``mov.u64 %rd, func``) with a ``.callprototype`` or ``.calltargets`` label (lanes with different
callees run one callee at a time), ``ret``/``exit``; ``.b128`` registers (two 64-bit words, the low one first)
in ``ld``/``st``/``mov`` and their split/join with ``mov.b128 {lo, hi}``; ``atom``/``red`` of 16-bit ``cas``,
32/64-bit operations, ``.b128`` ``exch``/``cas`` and the sm_90 vector forms (``.v2``/``.v4`` ``.f32`` add,
``.v2``-``.v8`` ``.f16``/``.bf16`` and ``.v2``/``.v4`` ``.f16x2``/``.bf16x2`` add/min/max), element by element.

**Lane order.** Where PTX leaves the order of a warp's lanes open (atomics on one address, stores of several
lanes to one address, printf), lanes go in ascending ``%laneid`` order: for an atomic, lane 0's operation
comes first and every lane gets the value its own operation saw; for a store, the highest lane's value stays.

Speed: ``benchmarks/bench_ptx_exec.py`` (a tiled SGEMM) measures thread-instructions per second.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np
from attrs import field, frozen

from simtc.ptx import alu, async_ops, async_tma
from simtc.ptx.cfg import reconvergence
from simtc.ptx.errors import KernelFault, LaunchError, PtxError, PtxSyntaxError, PtxUnsupported
from simtc.ptx.ir import Address, Function, Imm, Instruction, Module, Reg, Sink, Sym, Vector
from simtc.ptx.memory import CONST_BANK_SIZE, GLOBAL_BASE, WINDOWS, Device, ModuleImage
from simtc.ptx.printf import format_printf
from simtc.ptx.warp import LANES, BarrierState, CtaState, Frame, Warp, bits_of

__all__ = ["HANDLERS", "REFUSED", "LaunchOptions", "LaunchResult", "handler", "launch"]

JUMP = 1
"""A closure's return value: it set the pc itself."""
BLOCK = 2
"""A closure's return value: the warp waits (the pc stays)."""

MAX_THREADS = 1024
MAX_BLOCK = (1024, 1024, 64)
MAX_GRID = (2**31 - 1, 65535, 65535)
_LIMITS_REF = "CUDA C++ Programming Guide, technical specifications per compute capability (9.0, 10.0)"
_BAR_REF = "PTX ISA 9.0 §9.7.13.1"
_SPECIAL_REF = "PTX ISA 9.0 §10"
_FUNC_BASE = 0x7A00_0000_0000
"""Where simtc puts function addresses (``mov.u64 %rd, func`` for an indirect ``call``): simtc's own choice."""

_U = {1: np.bool_, 8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_S = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
_SPACES = ("global", "shared", "local", "const", "param")


def _width(t: str) -> int:
    return 128 if t == "b128" else alu.type_width(t)


def _dtype(t: str):
    return _U[_width(t)] if t != "b128" else np.uint64


# ------------------------------------------------------------------------------------------------------------
# results and options
# ------------------------------------------------------------------------------------------------------------

@frozen
class LaunchOptions:
    """How to run a launch.

    ``quantum``: warp instructions a warp runs before the next takes its turn; ``max_instructions``: warp
    instructions after which the launch stops with a fault (a kernel that never ends), None for no limit;
    ``trace``: keep per-CTA traces (each executed warp instruction as ``(warp, function, pc, lane bits)``);
    ``echo_printf``: also print device printf output as it happens (the GPU's stdout).
    """

    quantum: int = 1
    max_instructions: int | None = 100_000_000
    trace: bool = False
    echo_printf: bool = False
    recorder: object = None
    """An observer of each CTA's execution (:class:`simtc.ptx.recording.Recorder`): ``recorder.cta(cta_state,
    trace)`` gives the list each executed warp instruction ``(warp, function, pc, lane bits)`` of that CTA is
    appended to before it runs (``trace``: the list ``trace=True`` keeps, else None; return it to skip the CTA);
    None: nothing is recorded."""


@frozen
class LaunchResult:
    """What a launch did: instruction counts per opcode (warp instructions and thread instructions: the lanes
    active in each), warp instructions per PTX line, printf output (one string per ``printf`` call, in
    execution order, lanes in order within a warp), notes on what simtc accepted without modelling, per-CTA
    traces when asked, and the wall time."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_static: int
    shared_dynamic: int
    warp_instructions: dict = field(eq=False)
    thread_instructions: dict = field(eq=False)
    by_line: dict = field(eq=False)
    printf: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    traces: tuple | None = field(default=None, eq=False, repr=False)
    seconds: float = 0.0
    program: object = field(default=None, eq=False, repr=False)
    """The recorded CTA as a :class:`simtc.isa.Program` when the launch was recorded (simtc.ptx.recording)."""
    timing: object = field(default=None, eq=False, repr=False)
    """That Program run on simtc's engine (:class:`simtc.ptx.recording.EngineRun`: cycles, hazards, stepper)."""

    @property
    def output(self) -> str:
        """Everything the kernel printed."""
        return "".join(self.printf)

    @property
    def total_warp_instructions(self) -> int:
        return sum(self.warp_instructions.values())

    @property
    def total_thread_instructions(self) -> int:
        return sum(self.thread_instructions.values())


# ------------------------------------------------------------------------------------------------------------
# the opcode table
# ------------------------------------------------------------------------------------------------------------

HANDLERS: dict[str, Callable] = {}
"""opcode -> ``compile(instruction, ctx) -> body``; a body is ``body(warp, frame, entry, mask, full)`` returning
None (go on to the next instruction), :data:`JUMP` (it set the pc) or :data:`BLOCK` (the warp waits). A handler
whose body takes the guard itself has ``own_guard`` set and is called as ``body(warp, frame, entry)``."""

REFUSED: dict[str, str] = {
    "mbarrier": "mbarrier.* (asynchronous barriers)",
    "cp": "cp.async* and cp.reduce.async.bulk* (asynchronous copies, TMA)",
    "tcgen05": "tcgen05.* (the Blackwell tensor core and Tensor Memory)",
    "wgmma": "wgmma.* (Hopper warpgroup MMA)",
    "mma": "mma.sync (warp-level MMA)",
    "wmma": "wmma.* (warp-level MMA)",
    "mapa": "mapa (cluster shared-memory addresses: clusters of more than one CTA)",
    "getctarank": "getctarank (clusters)",
    "multimem": "multimem.* (multicast memory)",
    "tensormap": "tensormap.* (tensor-map edits)",
    "clusterlaunchcontrol": "clusterlaunchcontrol.* (clusters)",
    "st.async": "st.async (cluster shared memory)",
    "red.async": "red.async (cluster shared memory)",
}
"""Opcodes simtc executes in a later step, through its existing models: refused by name when executed."""


def handler(*opcodes: str):
    """Register the decorated function as the compiler of ``opcodes`` in :data:`HANDLERS`."""
    def deco(fn):
        for op in opcodes:
            HANDLERS[op] = fn
        return fn
    return deco


def _refuse(what: str, ins: Instruction) -> PtxUnsupported:
    return PtxUnsupported(f"{ins.name} (PTX line {ins.line}): {what} is not executed yet; it comes in a later step "
                          "of simtc's executor, through simtc's semantics and engine",
                          rule="opcodes the executor models", ref="PTX ISA 9.0 §9.7")


# ------------------------------------------------------------------------------------------------------------
# compiled code
# ------------------------------------------------------------------------------------------------------------

class FnCode:
    """A function compiled for one kernel: a closure per instruction, its registers, layouts and counters."""

    def __init__(self, fn: Function):
        self.fn = fn
        self.exit_pc = len(fn.body)
        self.code: list[Callable] = []
        self.reg_index: dict[str, int] = {}
        self.reg_types: list[str] = []
        self.template: list = []
        self.special_slots: list[tuple[int, str]] = []
        self.params: dict[str, tuple[int, int]] = {}
        self.param_bytes = 0
        self.local: dict[str, int] = {}
        self.local_bytes = 0
        self.ipdom: dict[int, int] = {}
        self.exits = frozenset(pc for pc, ins in enumerate(fn.body) if ins.guard is None and (
            ins.opcode == "exit" or (ins.opcode == "ret" and fn.entry)))
        """pcs of the unguarded instructions that end a thread (``exit``; ``ret`` in a kernel)."""
        self.notes: dict[int, str] = {}
        self.wc = [0] * len(fn.body)
        self.tc = [0] * len(fn.body)

    def new_frame(self, w: Warp, params: np.ndarray, local_base: int, call=None) -> Frame:
        regs = list(self.template)
        for slot, name in self.special_slots:
            regs[slot] = _special(w, name)
        return Frame(self, regs, params, local_base, call=call, warp=w)


class KernelCode:
    """A kernel and every function it calls, compiled; its shared-memory layout and parameter buffer layout."""

    def __init__(self, module: Module, kernel: str):
        self.module = module
        self.kernel = kernel
        self.functions: dict[str, FnCode] = {}
        self.shared: dict[str, int] = {}
        self.shared_vars: list[tuple[str, int, int, int]] = []
        self.static_shared = 0
        self.dynamic_align = 16
        self.dynamic_names: list[str] = []
        self.func_ids: dict[str, int] = {}


def _align(x: int, a: int) -> int:
    return -(-x // a) * a


def _refs(fn: Function) -> set[str]:
    out = set()

    def walk(o):
        if isinstance(o, Sym):
            out.add(o.name)
        elif isinstance(o, Address) and isinstance(o.base, Sym):
            out.add(o.base.name)
        elif isinstance(o, Vector):
            for i in o.items:
                walk(i)
        elif isinstance(o, tuple):
            for i in o:
                walk(i)

    for ins in fn.body:
        for o in ins.operands:
            walk(o)
        for o in ins.call_returns:
            walk(o)
        if isinstance(ins.call_target, Sym):
            out.add(ins.call_target.name)
    return out


def compile_kernel(module: Module, kernel: str, device: Device, img: ModuleImage) -> KernelCode:
    """Compile ``kernel`` and every function reachable from it (once per module, device and kernel)."""
    kc = KernelCode(module, kernel)
    reach = [kernel]
    refs: set[str] = set()
    i = 0
    while i < len(reach):
        fn = module.functions[reach[i]]
        r = _refs(fn)
        refs |= r
        for name in sorted(r):
            g = module.functions.get(name)
            if g is not None and not g.is_declaration and name not in reach:
                reach.append(name)
        i += 1
    kc.func_ids = {n: k for k, n in enumerate(module.functions)}
    top = 0
    shared_decl = [v for v in module.variables if v.space == "shared" and v.name in refs]
    for name in reach:
        shared_decl += [v for v in module.functions[name].variables if v.space == "shared"]
    dynamic = []
    for v in shared_decl:
        if v.shape == (0,) or (v.linkage == "extern" and v.size == 0):
            dynamic.append(v)
            continue
        a = v.align or v.type_size
        top = _align(top, a)
        kc.shared[v.name] = top
        kc.shared_vars.append((v.name, top, v.size, a))
        top += v.size
    kc.static_shared = top
    kc.dynamic_align = max([v.align or v.type_size for v in dynamic] + [16])
    kc.dynamic_names = [v.name for v in dynamic]
    for v in dynamic:
        kc.shared[v.name] = _align(top, kc.dynamic_align)
    for name in reach:
        kc.functions[name] = FnCode(module.functions[name])
    compilers = [_Compiler(kc, kc.functions[name], device, img) for name in reach]  # layouts first (calls)
    for c in compilers:
        c.run()
    return kc


# ------------------------------------------------------------------------------------------------------------
# operand readers and writers
# ------------------------------------------------------------------------------------------------------------

def _conv(src_t: str, dst_t: str, signed_from: str) -> Callable | None:
    """Bits of type ``src_t``'s width to ``dst_t``'s width: truncated, or zero-/sign-extended (sign when
    ``signed_from`` is a signed type): PTX ISA 9.0 §9.4.1 (operand size exceeding the instruction type)."""
    ws, wd = _width(src_t), _width(dst_t)
    if ws == wd or 1 in (ws, wd) or 128 in (ws, wd):
        return None
    du = _U[wd]
    if wd < ws:
        return lambda a: a.astype(du)
    if signed_from.startswith("s"):
        ss, sd = _S[ws], _S[wd]
        return lambda a: a.view(ss).astype(sd).view(du)
    return lambda a: a.astype(du)


def _imm_bits(imm: Imm, t: str) -> int | bool:
    """An immediate's raw bits in type ``t`` (PTX ISA 9.0 §4.5.2: ``0f``/``0d`` literals are bit patterns)."""
    if t == "pred":
        return bool(imm.value)
    w = _width(t)
    fl = {"f32": np.float32, "f64": np.float64, "f16": np.float16}
    if t in fl or t == "bf16":
        if imm.kind == "f32":
            v = float(np.uint32(imm.value).view(np.float32))
        elif imm.kind == "f64":
            v = float(np.uint64(imm.value).view(np.float64))
        else:
            v = float(imm.value)
        if imm.kind == ("f32" if t == "f32" else "f64" if t == "f64" else "-"):
            return int(imm.value)
        if t == "bf16":
            b = int(np.float32(v).view(np.uint32))
            return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF if (b & 0x7F800000) != 0x7F800000 else b >> 16
        return int(np.array(v, fl[t]).view(_U[w]))
    if imm.kind == "float":
        return int(imm.value) & ((1 << w) - 1)
    return int(imm.value) & ((1 << w) - 1)


def _const(value, t: str) -> np.ndarray:
    a = np.full(32, value, dtype=bool if t == "pred" else _dtype(t))
    a.flags.writeable = False
    return a


_STATIC_SPECIALS_U64 = {"%gridid", "%current_graph_exec"}
_DYNAMIC_SPECIALS = {"%clock": "u32", "%clock_hi": "u32", "%clock64": "u64", "%globaltimer": "u64",
                     "%globaltimer_lo": "u32", "%globaltimer_hi": "u32"}


def _is_special(name: str) -> bool:
    base = name.split(".")[0]
    return base in _SPECIAL_NAMES or base.startswith(("%envreg", "%pm"))


_SPECIAL_NAMES = {
    "%tid", "%ntid", "%ctaid", "%nctaid", "%laneid", "%warpid", "%nwarpid", "%smid", "%nsmid", "%gridid",
    "%lanemask_eq", "%lanemask_le", "%lanemask_lt", "%lanemask_ge", "%lanemask_gt", "%dynamic_smem_size",
    "%total_smem_size", "%aggr_smem_size", "%clusterid", "%nclusterid", "%cluster_ctaid", "%cluster_nctaid",
    "%cluster_ctarank", "%cluster_nctarank", "%is_explicit_cluster", "%current_graph_exec", *_DYNAMIC_SPECIALS,
}


def _special(w: Warp, name: str) -> np.ndarray:
    """A static special register's value in warp ``w`` (PTX ISA 9.0 §10), cached per warp."""
    v = w.specials.get(name)
    if v is not None:
        return v
    run = w.cta.launch
    base, _, comp = name.partition(".")
    axis = "xyz".index(comp) if comp in ("x", "y", "z") else 0
    u32 = np.uint32
    if base == "%tid":
        v = w.tid[:, axis].astype(u32) if comp != "w" else np.zeros(32, u32)
    elif base in ("%ntid", "%nctaid", "%ctaid", "%clusterid", "%nclusterid", "%cluster_ctaid", "%cluster_nctaid"):
        vals = {"%ntid": run.block, "%nctaid": run.grid, "%ctaid": w.cta.ctaid, "%clusterid": w.cta.ctaid,
                "%nclusterid": run.grid, "%cluster_ctaid": (0, 0, 0), "%cluster_nctaid": (1, 1, 1)}[base]
        v = np.full(32, vals[axis] if comp != "w" else 0, u32)
    elif base == "%laneid":
        v = LANES.copy()
    elif base == "%warpid":
        v = np.full(32, w.wid, u32)
    elif base == "%nwarpid":
        v = np.full(32, 64, u32)  # maximum resident warps per SM, cc 9.0/10.0 (technical specifications)
    elif base in ("%smid", "%cluster_ctarank", "%current_graph_exec") or base.startswith(("%envreg", "%pm")):
        v = np.zeros(32, np.uint64 if base == "%current_graph_exec" else u32)
    elif base in ("%nsmid", "%cluster_nctarank"):
        v = np.ones(32, u32)
    elif base == "%gridid":
        v = np.full(32, run.gridid, np.uint64)
    elif base.startswith("%lanemask_"):
        lane = LANES.astype(np.uint64)
        one = np.uint64(1)
        m = {"eq": one << lane, "lt": (one << lane) - one, "le": ((one << lane) << one) - one}
        m["ge"] = ~m["lt"]
        m["gt"] = ~m["le"]
        v = (m[base[len("%lanemask_"):]] & np.uint64(0xFFFFFFFF)).astype(u32)
    elif base == "%dynamic_smem_size":
        v = np.full(32, run.shared_dynamic, u32)
    elif base == "%total_smem_size":
        v = np.full(32, run.shared_total, u32)
    elif base == "%aggr_smem_size":  # + the 1 KB the system reserves per block (CUDA C++ Programming Guide)
        v = np.full(32, run.shared_total + 1024, u32)
    elif base == "%is_explicit_cluster":
        v = np.zeros(32, bool)
    else:
        raise PtxUnsupported(f"special register {name} is not modelled", rule="special registers",
                             ref=_SPECIAL_REF)
    v.flags.writeable = False
    w.specials[name] = v
    return v


def _dynamic_special(name: str) -> Callable:
    """A reader of ``%clock``/``%clock64``/``%globaltimer``: the warp instructions issued so far in the launch."""
    if name in ("%clock", "%clock_hi", "%globaltimer_lo", "%globaltimer_hi"):
        shift = 32 if name.endswith("hi") else 0
        return lambda w: np.full(32, (w.cta.launch.issued >> shift) & 0xFFFFFFFF, np.uint32)
    return lambda w: np.full(32, w.cta.launch.issued, np.uint64)


class _Compiler:
    """Compiles one function's instructions (for one kernel): operand readers, writers, addresses, closures."""

    def __init__(self, kc: KernelCode, code: FnCode, device: Device, img: ModuleImage):
        self.kc, self.code, self.device, self.img = kc, code, device, img
        self.fn = code.fn
        fn = code.fn
        zeros: dict[str, np.ndarray] = {}
        for d in fn.registers:
            for n in d.names():
                code.reg_index[n] = len(code.reg_types)
                code.reg_types.append(d.type)
                z = zeros.get(d.type)
                if z is None:
                    shape = (32, 2) if d.type == "b128" else (32,)
                    z = np.zeros(shape, _dtype(d.type) if d.type != "pred" else bool)
                    z.flags.writeable = False
                    zeros[d.type] = z
                code.template.append(z)
        # the .param space: parameters, return values, body .param variables
        top = 0
        for p in (*fn.params, *fn.returns):
            a = p.align or min(max(p.size, 1), 8)
            top = _align(top, a)
            code.params[p.name] = (top, p.size)
            top += p.size
        for v in fn.variables:
            if v.space == "param":
                top = _align(top, v.align or v.type_size)
                code.params[v.name] = (top, v.size)
                top += v.size
        code.param_bytes = max(top, 8)
        top = 0
        for v in fn.variables:
            if v.space == "local":
                top = _align(top, v.align or v.type_size)
                code.local[v.name] = top
                top += v.size
        code.local_bytes = _align(top, 16)
        code.ipdom = reconvergence(fn.body, fn.labels, fn.branch_targets)

    # ---- registers ------------------------------------------------------------------------------------------
    def reg(self, name: str) -> tuple[int, str]:
        i = self.code.reg_index.get(name)
        if i is not None:
            return i, self.code.reg_types[i]
        if _is_special(name):
            if name in _DYNAMIC_SPECIALS:
                raise KeyError(name)
            t = "u64" if name in _STATIC_SPECIALS_U64 else "pred" if name == "%is_explicit_cluster" else "u32"
            i = len(self.code.reg_types)
            self.code.reg_index[name] = i
            self.code.reg_types.append(t)
            self.code.template.append(None)
            self.code.special_slots.append((i, name))
            return i, t
        raise PtxSyntaxError(f"{self.fn.name}: register {name} is not declared", rule="registers are declared",
                             ref="PTX ISA 9.0 §5.1.1")

    def reader(self, op, t: str) -> Callable[[Frame], np.ndarray]:
        """A function of the frame giving operand ``op`` read as type ``t``."""
        if isinstance(op, Reg):
            if op.name in _DYNAMIC_SPECIALS:
                dyn = _dynamic_special(op.name)
                conv = _conv(_DYNAMIC_SPECIALS[op.name], t, t)
                return (lambda f: conv(dyn(f.warp))) if conv else (lambda f: dyn(f.warp))
            i, rt = self.reg(op.name)
            if t == "pred" or rt == "pred":
                if op.negated:
                    return lambda f: ~f.regs[i]
                return lambda f: f.regs[i]
            conv = _conv(rt, t, t)
            if conv is None:
                return lambda f: f.regs[i]
            return lambda f: conv(f.regs[i])
        if isinstance(op, Imm):
            c = _const(_imm_bits(op, t), t)
            return lambda f: c
        if isinstance(op, Sym):
            space, value = self.symbol(op.name)
            dt = _dtype(t)
            if space in ("local",):
                off = value + op.offset
                return lambda f: np.full(32, f.local_base + off, dt)
            c = _const((value + op.offset) & ((1 << _width(t)) - 1), t)
            return lambda f: c
        raise PtxUnsupported(f"operand {op} cannot be read as .{t}", rule="operand kinds", ref="PTX ISA 9.0 §6.4")

    def writer(self, op, t: str) -> Callable:
        """``write(frame, value, mask, full)``: operand ``op`` gets ``value`` (type ``t``) in the lanes of ``mask``."""
        if op is None or isinstance(op, Sink):
            return lambda f, v, m, full: None
        if not isinstance(op, Reg):
            raise PtxUnsupported(f"destination {op} is not a register", rule="destinations are registers",
                                 ref="PTX ISA 9.0 §6.4")
        i, rt = self.reg(op.name)
        conv = None if rt == "pred" else _conv(t, rt, t)
        where = np.where
        if rt == "b128":
            def wr128(f, v, m, full):
                f.regs[i] = v if full else where(m[:, None], v, f.regs[i])
            return wr128
        if conv is None:
            def wr(f, v, m, full):
                f.regs[i] = v if full else where(m, v, f.regs[i])
            return wr

        def wrc(f, v, m, full):
            v = conv(v)
            f.regs[i] = v if full else where(m, v, f.regs[i])
        return wrc

    def putter(self, op, t: str) -> Callable:
        """``put(frame, values, mask)``: the active lanes' values (one per lane of ``mask``, in order)."""
        if op is None or isinstance(op, Sink):
            return lambda f, v, m: None
        i, rt = self.reg(op.name)
        conv = _conv(t, rt, t)

        def put(f, v, m):
            if conv is not None:
                v = conv(v)
            if v.shape[0] == 32:
                f.regs[i] = np.ascontiguousarray(v)
            else:
                new = f.regs[i].copy()
                new[m] = v
                f.regs[i] = new
        return put

    # ---- symbols and addresses ------------------------------------------------------------------------------
    def symbol(self, name: str) -> tuple[str, int]:
        """(state space, address in that space) of a variable, parameter or function."""
        code, kc = self.code, self.kc
        if name in code.params:
            return "param", code.params[name][0]
        if name in code.local:
            return "local", code.local[name]
        if name in kc.shared:
            return "shared", kc.shared[name]
        if name in self.img.global_vars:
            return "global", self.img.global_vars[name]
        if name in self.img.const_vars:
            return "const", self.img.const_vars[name]
        if name in kc.module.functions:
            return "func", _FUNC_BASE + 16 * kc.func_ids[name]
        raise PtxSyntaxError(f"{self.fn.name}: {name} is no variable, parameter or function in scope",
                             rule="symbols are declared", ref="PTX ISA 9.0 §5.4")

    def address(self, op, space: str) -> Callable[[Frame], np.ndarray]:
        """The uint64 address of a memory operand in ``space`` (``"generic"`` for none), per lane."""
        if not isinstance(op, Address):
            raise PtxUnsupported(f"{op} is not an address operand", rule="memory operands", ref="PTX ISA 9.0 §6.4.1")
        off = op.offset
        u64 = np.uint64
        if op.base is None:
            c = _const(off & (2**64 - 1), "u64")
            return lambda f: c
        if isinstance(op.base, Reg):
            rd = self.reader(Reg(op.base.name), "u64")
            if off == 0:
                return rd
            o = u64(off & (2**64 - 1))
            return lambda f: rd(f) + o
        sp, value = self.symbol(op.base.name)
        if space == "generic" and sp in WINDOWS and sp != "global":
            base = WINDOWS[sp]
            if sp == "local":
                return lambda f: np.full(32, base + f.local_base + value + off, u64)
            if sp == "param" and not self.fn.entry:
                raise PtxUnsupported(f"generic address of a function's .param {op.base.name}",
                                     rule="param space", ref="PTX ISA 9.0 §5.1.6")
            c = _const(base + value + off, "u64")
            return lambda f: c
        if sp == "local":
            return lambda f: np.full(32, f.local_base + value + off, u64)
        c = _const((value + off) & (2**64 - 1), "u64")
        return lambda f: c

    # ---- the closures -----------------------------------------------------------------------------------------
    def run(self) -> None:
        code = self.code
        for pc, ins in enumerate(self.fn.body):
            code.code.append(self.compile(ins, pc))

    def compile(self, ins: Instruction, pc: int) -> Callable:
        self.pc = pc
        op = ins.opcode
        try:
            refused = REFUSED.get(op) or REFUSED.get(".".join(ins.name.split(".")[:2]))
            if refused:
                raise _refuse(refused, ins)
            if op == "mov" and any(isinstance(o, Sym | Vector) for o in ins.operands):
                body = HANDLERS["mov"](ins, self)
            elif op in HANDLERS:
                body = HANDLERS[op](ins, self)
            elif op in alu.OPCODES:
                body = _alu_body(ins, self)
            else:
                raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): opcode {op} is not modelled",
                                     rule="opcodes the executor models", ref="PTX ISA 9.0 §9.7")
        except PtxError as err:
            fault = err

            def failing(w, f, e):
                raise fault
            return failing
        return _step(body, ins, pc, self)

    def note(self, text: str) -> None:
        self.code.notes[self.pc] = text


def _step(body: Callable, ins: Instruction, pc: int, c: _Compiler) -> Callable:
    nxt = pc + 1
    if getattr(body, "own_guard", False):
        return body
    g = ins.guard
    if g is None:
        def step(w, f, e):
            r = body(w, f, e, e[2], e[4])
            if r is None:
                e[0] = nxt
            return r
        return step
    gi, _ = c.reg(g.reg)
    if g.negated:
        def step_not(w, f, e):
            m = e[2] & ~f.regs[gi]
            if not m.any():
                e[0] = nxt
                return None
            r = body(w, f, e, m, False)
            if r is None:
                e[0] = nxt
            return r
        return step_not

    def step_if(w, f, e):
        m = e[2] & f.regs[gi]
        if not m.any():
            e[0] = nxt
            return None
        r = body(w, f, e, m, False)
        if r is None:
            e[0] = nxt
        return r
    return step_if


def _split(ins: Instruction) -> tuple[list, list]:
    ops = list(ins.operands)
    if not ops:
        return [], []
    d = ops[0]
    return (list(d) if isinstance(d, tuple) else [d]), ops[1:]


def _alu_body(ins: Instruction, c: _Compiler) -> Callable:
    op = alu.compile(ins)
    dsts, srcs = _split(ins)
    if not op.dst_types:
        dsts, srcs = [], list(ins.operands)
    rds = [c.reader(o, t) for o, t in zip(srcs, op.src_types, strict=False)]
    wrs = [c.writer(o, t) for o, t in zip(dsts, op.dst_types, strict=False)]
    fn = op.fn
    if op.approx:
        c.note(f"{ins.opcode}.approx: modelled by the correctly rounded value of the exact function (within "
               "PTX's stated error; the hardware's bits may differ)")
    if op.cc_in or op.cc_out:
        cc_in, cc_out = op.cc_in, op.cc_out

        def body_cc(w, f, e, m, full):
            args = [r(f) for r in rds]
            if cc_in:
                args.append(f.cc)
            outs = fn(*args)
            for wr, v in zip(wrs, outs, strict=False):
                wr(f, v, m, full)
            if cc_out:
                f.cc = np.where(m, outs[-1], f.cc)
        return body_cc
    if len(wrs) == 1:
        w0 = wrs[0]
        if len(rds) == 1:
            r0 = rds[0]

            def body1(w, f, e, m, full):
                w0(f, fn(r0(f))[0], m, full)
            return body1
        if len(rds) == 2:
            r0, r1 = rds

            def body2(w, f, e, m, full):
                w0(f, fn(r0(f), r1(f))[0], m, full)
            return body2
        if len(rds) == 3:
            r0, r1, r2 = rds

            def body3(w, f, e, m, full):
                w0(f, fn(r0(f), r1(f), r2(f))[0], m, full)
            return body3

    def body(w, f, e, m, full):
        outs = fn(*[r(f) for r in rds])
        for wr, v in zip(wrs, outs, strict=False):
            wr(f, v, m, full)
    return body


# ------------------------------------------------------------------------------------------------------------
# memory spaces
# ------------------------------------------------------------------------------------------------------------

def _mem_fault(kind: str, space: str, size: int, lane: int, addr: int, why: str, rule: str, ref: str):
    e = KernelFault(f"invalid {space} {kind} of size {size} bytes by lane {lane}: address {addr:#x} {why}",
                    rule=rule, ref=ref, address=addr, size=size)
    e.lane = lane
    return e


def _check(a: np.ndarray, lanes: np.ndarray, size: int, limit: int, space: str, kind: str, what: str) -> None:
    """Alignment and bounds of a window's accesses (offsets ``a`` of the active ``lanes``)."""
    if not a.size:
        return
    pow2 = size & (size - 1) == 0
    if pow2 and not int(_OR(a)) & (size - 1) and int(a.max()) + size <= limit:  # the common case: two reductions
        return
    bad = (a % np.uint64(size)) != 0
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise _mem_fault(kind, space, size, int(lanes[j]), int(a[j]), f"is misaligned (not a multiple of {size})",
                         "natural alignment of accesses", "PTX ISA 9.0 §6.4.1")
    over = a > np.uint64(max(limit - size, 0)) if limit >= size else np.ones(a.shape, bool)
    if over.any():
        j = int(np.flatnonzero(over)[0])
        raise _mem_fault(kind, space, size, int(lanes[j]), int(a[j]), f"is out of bounds of {what}",
                         f"accesses stay inside {space} memory", "PTX ISA 9.0 §5.1")


_OR = np.bitwise_or.reduce
_WORDS = {1: (np.uint8, 1), 2: (np.uint16, 1), 4: (np.uint32, 1), 8: (np.uint64, 1), 16: (np.uint64, 2)}


def _smem_gather(smem, a: np.ndarray, size: int) -> np.ndarray:
    """Shared-memory bytes at checked, aligned offsets: SharedMemory's own unobserved fast path (whole aligned
    words), or its observed :meth:`~simtc.smem.SharedMemory.gather` when the Cta has observers."""
    wk = _WORDS.get(size)
    if smem.on_access is None and wk is not None and smem.size % size == 0:
        return smem.data.view(wk[0]).reshape(-1, wk[1])[a // size].view(np.uint8).reshape(-1, size)
    return smem.gather(a, size)


def _rows2d(arr: np.ndarray, lanes: np.ndarray, a: np.ndarray, size: int) -> np.ndarray:
    return arr[lanes[:, None], a.astype(np.int64)[:, None] + np.arange(size)]


def _shared_what(w: Warp) -> str:
    run = w.cta.launch
    return (f"the CTA's {w.cta.shared_size} bytes of shared memory ({run.shared_static} static + "
            f"{run.shared_dynamic} dynamic)")


def _load_space(space: str, w: Warp, f: Frame, a: np.ndarray, m: np.ndarray, size: int) -> np.ndarray:
    """(active lanes, size) uint8: the bytes each active lane reads at its address ``a`` in ``space``."""
    if space == "global":
        return w.cta.launch.device.memory.load(a, size, m)
    lanes = m.nonzero()[0]
    aa = a[lanes]
    if space == "shared":
        _check(aa, lanes, size, w.cta.shared_size, "shared", "read", _shared_what(w))
        return _smem_gather(w.cta.cta.smem, aa.astype(np.int64), size)
    if space == "local":
        _check(aa, lanes, size, w.local_top, "local", "read", f"the thread's {w.local_top} bytes of local memory")
        return _rows2d(w.local, lanes, aa, size)
    if space == "const":
        _check(aa, lanes, size, CONST_BANK_SIZE, "const", "read", "the 64 KB constant bank")
        return w.cta.launch.image.const_bank[aa.astype(np.int64)[:, None] + np.arange(size)]
    if space == "param":
        _check(aa, lanes, size, f.params.shape[1], "param", "read", "the parameter space")
        return _rows2d(f.params, lanes, aa, size)
    if space == "kparam":
        p = w.frames[0].params
        _check(aa, lanes, size, p.shape[1], "param", "read", "the kernel's parameters")
        return _rows2d(p, lanes, aa, size)
    raise PtxUnsupported(f"loads from .{space}", rule="state spaces", ref="PTX ISA 9.0 §5.1")


def _store_space(space: str, w: Warp, f: Frame, a: np.ndarray, m: np.ndarray, rows: np.ndarray) -> None:
    size = rows.shape[1]
    if space == "global":
        w.cta.launch.device.memory.store(a, rows, size, m)
        return
    lanes = m.nonzero()[0]
    aa = a[lanes]
    if space == "shared":
        _check(aa, lanes, size, w.cta.shared_size, "shared", "write", _shared_what(w))
        smem = w.cta.cta.smem
        wk = _WORDS.get(size)
        if smem.on_access is None and smem.last_writer is None and wk is not None and smem.size % size == 0:
            smem.data.view(wk[0]).reshape(-1, wk[1])[aa.astype(np.int64) // size] = \
                np.ascontiguousarray(rows).view(wk[0]).reshape(-1, wk[1])  # SharedMemory's unobserved fast path
        else:
            smem.scatter(aa.astype(np.int64), rows)
    elif space == "local":
        _check(aa, lanes, size, w.local_top, "local", "write", f"the thread's {w.local_top} bytes of local memory")
        w.local[lanes[:, None], aa.astype(np.int64)[:, None] + np.arange(size)] = rows
    elif space == "param":
        _check(aa, lanes, size, f.params.shape[1], "param", "write", "the parameter space")
        f.params[lanes[:, None], aa.astype(np.int64)[:, None] + np.arange(size)] = rows
    else:
        lane = int(lanes[0]) if lanes.size else 0
        raise _mem_fault("write", space, size, lane, int(a[lane]), f"is in the read-only {space} space",
                         "const and kernel parameters are read-only", "PTX ISA 9.0 §5.1")


_TAGS = {v >> 40: k for k, v in WINDOWS.items()}


def _generic_parts(a: np.ndarray, m: np.ndarray) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(space, addresses in it, lanes) of each window a generic access touches."""
    tags = a >> np.uint64(40)
    act = tags[m]
    if act.size == 0:
        return []
    t0 = int(act[0])
    if (act == act[0]).all():
        sp = _TAGS.get(t0, "global")
        sub = a if sp == "global" else a - np.uint64(WINDOWS[sp])
        return [("kparam" if sp == "param" else sp, sub, m)]
    out = []
    for t in sorted(set(act.tolist())):
        sp = _TAGS.get(t, "global")
        mm = m & (tags == t)
        sub = a if sp == "global" else a - np.uint64(WINDOWS[sp])
        out.append(("kparam" if sp == "param" else sp, sub, mm))
    return out


def _load(space: str, w: Warp, f: Frame, a: np.ndarray, m: np.ndarray, size: int) -> np.ndarray:
    if space != "generic":
        return _load_space(space, w, f, a, m, size)
    parts = _generic_parts(a, m)
    if len(parts) == 1:
        return _load_space(parts[0][0], w, f, parts[0][1], parts[0][2], size)
    out = np.zeros((int(np.count_nonzero(m)), size), np.uint8)
    pos = np.cumsum(m) - 1
    for sp, sub, mm in parts:
        out[pos[mm]] = _load_space(sp, w, f, sub, mm, size)
    return out


def _store(space: str, w: Warp, f: Frame, a: np.ndarray, m: np.ndarray, rows: np.ndarray) -> None:
    if space != "generic":
        _store_space(space, w, f, a, m, rows)
        return
    pos = np.cumsum(m) - 1
    for sp, sub, mm in _generic_parts(a, m):
        _store_space(sp, w, f, sub, mm, rows if mm is m else rows[pos[mm]])


def _mem_mods(ins: Instruction) -> tuple[str, int, str]:
    """(state space or "generic", vector count, element type) of a ld/st/atom/red."""
    mods = ins.modifiers
    space = "generic"
    vec = 1
    for md in mods:
        base = md.split("::")[0]
        if base in _SPACES:
            if md in ("shared::cluster",):
                raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): .shared::cluster accesses other CTAs' "
                                     "shared memory; clusters come in a later step",
                                     rule="clusters of one CTA", ref="PTX ISA 9.0 §5.1.7")
            space = base
        elif md in ("v2", "v4", "v8"):
            vec = int(md[1:])
    return space, vec, mods[-1]


# ------------------------------------------------------------------------------------------------------------
# data movement: ld st ldu mov cvta isspacep prefetch
# ------------------------------------------------------------------------------------------------------------

@handler("ld", "ldu")
def _ld(ins: Instruction, c: _Compiler):
    space, vec, t = _mem_mods(ins)
    dst = ins.operands[0]
    items = list(dst.items) if isinstance(dst, Vector) else [dst]
    if len(items) != vec:
        raise PtxUnsupported(f"{ins.name}: {len(items)} destinations for .v{vec}", rule="vector operands",
                             ref="PTX ISA 9.0 §9.7.9.8")
    addr = c.address(ins.operands[1], space)
    w8 = _width(t)
    size = w8 // 8 * vec
    puts = [c.putter(d, t) for d in items]
    if w8 == 128:  # .b128 (PTX ISA 8.3, sm_70+): a register of two 64-bit words, the low word first
        def body128(w, f, e, m, full):
            vals = _load(space, w, f, addr(f), m, size).view(np.uint64).reshape(-1, vec, 2)
            for j, put in enumerate(puts):
                put(f, np.ascontiguousarray(vals[:, j]), m)
        return body128
    et = _U[w8]

    def body(w, f, e, m, full):
        rows = _load(space, w, f, addr(f), m, size)
        vals = rows.view(et)
        for j, put in enumerate(puts):
            put(f, vals[:, j], m)
    return body


@handler("st")
def _st(ins: Instruction, c: _Compiler):
    space, _, t = _mem_mods(ins)
    src = ins.operands[1]
    items = list(src.items) if isinstance(src, Vector) else [src]
    addr = c.address(ins.operands[0], space)
    w8 = _width(t)
    a0 = ins.operands[0]
    if space == "param" and c.fn.entry and not (isinstance(a0, Address) and isinstance(a0.base, Sym)
                                                 and a0.base.name not in {p.name for p in c.fn.params}):
        raise PtxUnsupported(f"{ins.name}: st.param to a kernel parameter (kernel parameters are read-only)",
                             rule="kernel parameters are read-only", ref="PTX ISA 9.0 §5.1.6")
    rds = [c.reader(s, t) for s in items]
    if w8 == 128:
        def body128(w, f, e, m, full):
            rows = np.concatenate([np.asarray(r(f))[m].reshape(-1, 2) for r in rds], axis=1)
            _store(space, w, f, addr(f), m, np.ascontiguousarray(rows.astype(np.uint64, copy=False)).view(np.uint8))
        return body128
    et = _U[w8]

    def body(w, f, e, m, full):
        if len(rds) == 1:
            col = rds[0](f)[m]
            rows = np.ascontiguousarray(col.astype(et, copy=False)).reshape(-1, 1)
        else:
            rows = np.stack([r(f)[m] for r in rds], axis=1).astype(et, copy=False)
        _store(space, w, f, addr(f), m, np.ascontiguousarray(rows).view(np.uint8))
    return body


@handler("mov")
def _mov(ins: Instruction, c: _Compiler):
    """``mov`` of a variable's address, or a vector pack/unpack (PTX ISA 9.0 §9.7.9.3, §9.7.9.4, mov)."""
    t = ins.modifiers[-1]
    d, s = ins.operands
    if isinstance(s, Vector):  # pack {a, b, ...} into d, lowest item in the low bits
        wd = _width(t)
        k = len(s.items)
        wi = wd // k
        rds = [c.reader(x, f"b{wi}") for x in s.items]
        wr = c.writer(d, t)
        if wd == 128:
            def pack128(w, f, e, m, full):
                parts = np.stack([r(f) for r in rds], axis=1)
                wr(f, np.ascontiguousarray(parts).view(np.uint64).reshape(32, 2), m, full)
            return pack128

        def pack(w, f, e, m, full):
            parts = np.stack([r(f) for r in rds], axis=1)
            wr(f, np.ascontiguousarray(parts).view(_U[wd]).reshape(32), m, full)
        return pack
    if isinstance(d, Vector):  # unpack
        wd = _width(t)
        k = len(d.items)
        wi = wd // k
        rd = c.reader(s, t)
        wrs = [c.writer(x, f"b{wi}") for x in d.items]

        def unpack(w, f, e, m, full):
            v = np.ascontiguousarray(rd(f)).reshape(32, -1).view(_U[wi]).reshape(32, k)
            for j, wr in enumerate(wrs):
                wr(f, v[:, j].copy(), m, full)
        return unpack
    rd = c.reader(s, t)
    wr = c.writer(d, t)

    def movsym(w, f, e, m, full):
        wr(f, rd(f), m, full)
    return movsym


@handler("cvta")
def _cvta(ins: Instruction, c: _Compiler):
    """``cvta.space`` (to generic) and ``cvta.to.space`` (from generic); PTX ISA 9.0 §9.7.9.20 (cvta)."""
    mods = ins.modifiers
    to = "to" in mods
    space = next((m.split("::")[0] for m in mods if m.split("::")[0] in _SPACES), None)
    if space is None:
        raise PtxUnsupported(f"{ins.name}: no state space", rule="cvta spaces", ref="PTX ISA 9.0 §9.7.9.20")
    t = mods[-1]
    d, s = ins.operands
    rd = c.reader(s, t) if not isinstance(s, Sym) else None
    if isinstance(s, Sym):
        sp, value = c.symbol(s.name)
        v0 = value + s.offset
        if sp == "local":
            base = WINDOWS["local"]

            def rd(f):
                return np.full(32, base + f.local_base + v0, _dtype(t))
        else:
            cst = _const((v0 + (0 if to or sp == "global" else WINDOWS.get(sp, 0))) & ((1 << _width(t)) - 1), t)

            def rd(f):
                return cst
            space = "global"  # already converted
    wr = c.writer(d, t)
    base = np.uint64(0 if space == "global" else WINDOWS[space])
    dt = _dtype(t)

    if to:
        def body_to(w, f, e, m, full):
            wr(f, (rd(f).astype(np.uint64) - base).astype(dt), m, full)
        return body_to

    def body(w, f, e, m, full):
        wr(f, (rd(f).astype(np.uint64) + base).astype(dt), m, full)
    return body


@handler("isspacep")
def _isspacep(ins: Instruction, c: _Compiler):
    space = ins.modifiers[0].split("::")[0]
    d, s = ins.operands
    rd = c.reader(s, "u64")
    wr = c.writer(d, "pred")
    others = np.array([v >> 40 for k, v in WINDOWS.items() if k != "global"], np.uint64)
    tag = np.uint64(WINDOWS.get(space, GLOBAL_BASE) >> 40)

    def body(w, f, e, m, full):
        t = rd(f) >> np.uint64(40)
        wr(f, ~np.isin(t, others) if space == "global" else t == tag, m, full)
    return body


def _noop(text: str):
    def compile_noop(ins: Instruction, c: _Compiler):
        c.note(f"{ins.opcode}: {text}")

        def body(w, f, e, m, full):
            return None
        return body
    return compile_noop


handler("prefetch", "prefetchu", "applypriority", "discard")(
    _noop("accepted: a cache hint with no effect on values in simtc (no caches are modelled)"))
handler("membar", "fence")(
    _noop("accepted: simtc executes one instruction at a time, so every store is visible to every later load; "
          "fences order nothing further for values (the hazard checker will look at fence.proxy.async)"))
handler("nanosleep")(_noop("accepted: no time passes (instructions are not timed yet)"))
handler("pmevent")(_noop("accepted: no performance-monitor events are counted"))
handler("setmaxnreg")(_noop("accepted: no effect on simtc's register file (registers are not allocated)"))
handler("griddepcontrol")(_noop("accepted: grids run one after another, so there is nothing to wait for or launch"))
handler("brkpt")(_noop("accepted: no debugger; the breakpoint does nothing"))


@handler("createpolicy")
def _createpolicy(ins: Instruction, c: _Compiler):
    c.note("createpolicy: accepted; the cache policy is opaque and simtc ignores L2 cache hints (writes 0)")
    wr = c.writer(ins.operands[0], ins.modifiers[-1])
    zero = _const(0, "b64")

    def body(w, f, e, m, full):
        wr(f, zero, m, full)
    return body


# ------------------------------------------------------------------------------------------------------------
# control flow: bra call ret exit trap
# ------------------------------------------------------------------------------------------------------------

def _diverge(w: Warp, f: Frame, e: list, pc: int, target: int, t: np.ndarray, nt: int, nxt: int) -> None:
    """Split entry ``e`` at a branch: lanes ``t`` go to ``target``, the others to ``nxt``; both meet at the
    branch's immediate post-dominator (the SIMT stack, see :mod:`simtc.ptx.warp`)."""
    st = f.stack
    r = f.code.ipdom.get(pc, f.code.exit_pc)
    nm = e[2] & ~t
    nn = e[3] - nt
    ex = f.code.exits
    if target in ex or nxt in ex:
        # Lanes bound for an unguarded exit (or a kernel's ret) would do nothing else: they exit now. So the
        # idiom `if (i >= n) return; ... __syncthreads();` behaves as on sm_70+, where the returning threads
        # exit and the barrier waits for the others only (PTX ISA 9.0 §9.7.13.1: "non-exited threads").
        w.kill(t if target in ex else nm)
        e[0] = nxt if target in ex else target
        return
    if r == e[1] and len(st) > 1:
        st.pop()
    else:
        e[0] = r
    live = w.live
    nlive = int(np.count_nonzero(live))
    sides = sorted(((target, t, nt), (nxt, nm, nn)), key=lambda s: -s[0])
    for p, mk, n in sides:
        if p != r:
            st.append([p, r, mk, n, n == nlive])


@handler("bra")
def _bra(ins: Instruction, c: _Compiler):
    target = c.fn.labels.get(getattr(ins.operands[-1], "name", None)) if ins.operands else None
    if target is None:
        raise PtxSyntaxError(f"line {ins.line}: branch target {ins.operands} is no label", rule="branch targets",
                             ref="PTX ISA 9.0 §9.7.12.3")
    pc = c.pc
    nxt = pc + 1
    g = ins.guard
    if g is None:
        def jump(w, f, e):
            e[0] = target
            return JUMP
        jump.own_guard = True
        return jump
    gi, _ = c.reg(g.reg)
    neg = g.negated

    def branch(w, f, e):
        p = f.regs[gi]
        t = e[2] & ~p if neg else e[2] & p
        nt = int(np.count_nonzero(t))
        if nt == e[3]:
            e[0] = target
        elif nt == 0:
            e[0] = nxt
        else:
            _diverge(w, f, e, pc, target, t, nt, nxt)
        return JUMP
    branch.own_guard = True
    return branch


def _diverge_many(w: Warp, f: Frame, e: list, pc: int, groups: list[tuple[int, np.ndarray, int]]) -> None:
    """Split entry ``e`` at a multi-way branch (``brx.idx``): each ``(target, lanes, count)`` group goes to its
    target, all meeting at the branch's immediate post-dominator, as :func:`_diverge` does for two ways."""
    st = f.stack
    r = f.code.ipdom.get(pc, f.code.exit_pc)
    ex = f.code.exits
    dead = [mk for p, mk, _ in groups if p in ex]
    for mk in dead:
        w.kill(mk)
    keep = [(p, mk, n) for p, mk, n in groups if p not in ex]
    if not keep:
        return
    if len(keep) == 1:
        e[0] = keep[0][0]
        return
    if r == e[1] and len(st) > 1:
        st.pop()
    else:
        e[0] = r
    nlive = int(np.count_nonzero(w.live))
    for p, mk, n in sorted(keep, key=lambda s: -s[0]):
        if p != r:
            st.append([p, r, mk, n, n == nlive])


@handler("brx")
def _brx(ins: Instruction, c: _Compiler):
    """``brx.idx{.uni} index, tlist``: a jump to label ``tlist[index]`` of a ``.branchtargets`` list (PTX ISA 9.0
    §9.7.12.4, §11.3.1); an index past the list is a fault (PTX: undefined). Lanes with different indices
    diverge and reconverge at the branch's immediate post-dominator."""
    if ins.modifiers[:1] != ("idx",) or len(ins.operands) != 2:
        raise PtxUnsupported(f"{ins.name}: brx.idx{{.uni}} index, tlist", rule="brx forms", ref="PTX ISA 9.0 §9.7.12.4")
    idx_op, tbl = ins.operands
    names = c.fn.branch_targets.get(getattr(tbl, "name", None))
    if names is None:
        raise PtxSyntaxError(f"line {ins.line}: brx.idx needs a .branchtargets list, got {tbl}",
                             rule="brx.idx targets", ref="PTX ISA 9.0 §9.7.12.4")
    missing = [n for n in names if n not in c.fn.labels]
    if missing:
        raise PtxSyntaxError(f"line {ins.line}: .branchtargets {tbl.name} names {missing}, not labels of "
                             f"{c.fn.name}", rule="brx.idx targets", ref="PTX ISA 9.0 §11.3.1")
    pcs = np.array([c.fn.labels[n] for n in names], np.int64)
    rd = c.reader(idx_op, "u32")
    pc = c.pc
    nxt = pc + 1
    g = ins.guard
    gi = c.reg(g.reg)[0] if g is not None else None
    neg = g.negated if g is not None else False

    def brx(w, f, e):
        m = e[2]
        if gi is not None:
            m = m & ~f.regs[gi] if neg else m & f.regs[gi]
        lanes = m.nonzero()[0]
        if lanes.size == 0:
            e[0] = nxt
            return JUMP
        iv = rd(f)[lanes]
        bad = iv >= np.uint32(pcs.size)
        if bad.any():
            lane = int(lanes[np.flatnonzero(bad)[0]])
            err = KernelFault(f"brx.idx by lane {lane}: index {int(rd(f)[lane])} is past the {pcs.size} labels of "
                              f"{tbl.name}", rule="brx.idx indices stay inside the list", ref="PTX ISA 9.0 §9.7.12.4")
            err.lane = lane
            raise err
        tg = pcs[iv.astype(np.int64)]
        first = int(tg[0])
        if lanes.size == e[3] and (tg == first).all():
            e[0] = first
            return JUMP
        tall = np.full(32, -1, np.int64)
        tall[lanes] = tg
        groups = []
        for p in np.unique(tg).tolist():
            mk = tall == p
            groups.append((int(p), mk, int(np.count_nonzero(mk))))
        rest = e[2] & ~m
        nrest = int(np.count_nonzero(rest))
        if nrest:
            groups.append((nxt, rest, nrest))
        _diverge_many(w, f, e, pc, groups)
        return JUMP
    brx.own_guard = True
    return brx


@handler("exit")
def _exit(ins: Instruction, c: _Compiler):
    def body(w, f, e, m, full):
        w.kill(m)  # the other lanes (a guarded exit) go on with the next instruction
    return body


@handler("ret")
def _ret(ins: Instruction, c: _Compiler):
    if c.fn.entry:  # ret from a kernel ends its threads, like exit (PTX ISA 9.0 §9.7.12.6, ret)
        return _exit(ins, c)
    end = c.code.exit_pc
    pc = c.pc
    g = ins.guard
    gi = c.reg(g.reg)[0] if g is not None else None
    neg = g.negated if g is not None else False

    def ret(w, f, e):
        if gi is None:
            e[0] = end
            return JUMP
        p = f.regs[gi]
        t = e[2] & ~p if neg else e[2] & p
        nt = int(np.count_nonzero(t))
        if nt == e[3]:
            e[0] = end
        elif nt == 0:
            e[0] = pc + 1
        else:
            _diverge(w, f, e, pc, end, t, nt, pc + 1)
        return JUMP
    ret.own_guard = True
    return ret


@handler("trap")
def _trap(ins: Instruction, c: _Compiler):
    def body(w, f, e, m, full):
        lane = int(m.nonzero()[0][0])
        err = KernelFault("trap: the kernel aborted (trap instruction)", rule="trap aborts the kernel",
                          ref="PTX ISA 9.0 §9.7.19.4")
        err.lane = lane
        raise err
    return body


def _return(w: Warp, f: Frame) -> None:
    """The frame's bottom entry reached the function's end: copy return values to the caller, pop the frame."""
    w.frames.pop()
    if f.call is None:
        w.live = np.zeros(32, bool)
        w.done = True
        return
    caller, copies, m = f.call
    for co, ce, size in copies:
        caller.params[m, co:co + size] = f.params[m, ce:ce + size]
    w.local_top = f.local_base
    if not w.frames:
        w.done = True


@handler("call")
def _call(ins: Instruction, c: _Compiler):
    target = ins.call_target
    if isinstance(target, Reg):
        return _call_indirect(ins, c)
    if not isinstance(target, Sym):
        raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): call through {target}",
                             rule="call targets", ref="PTX ISA 9.0 §9.7.12.5")
    name = target.name
    callee_fn = c.kc.module.functions.get(name)
    if callee_fn is None:
        raise PtxSyntaxError(f"line {ins.line}: call of {name}, which is not declared", rule="callees are declared",
                             ref="PTX ISA 9.0 §9.7.12.5")
    if name == "vprintf":
        return _vprintf(ins, c)
    if name == "__assertfail":
        return _assertfail(ins, c)
    if callee_fn.is_declaration:
        raise PtxUnsupported(f"call of {name}: an external function without a body (simtc links no device "
                             "libraries)", rule="callees have bodies", ref="PTX ISA 9.0 §9.7.12.5")
    return _call_body(ins, c, name)


def _call_body(ins: Instruction, c: _Compiler, name: str) -> Callable:
    """The body of a call of function ``name`` (with a body): arguments into a new frame's .param space, the
    frame pushed; :func:`_return` copies the return values back."""
    callee_fn = c.kc.module.functions[name]
    callee = c.kc.functions[name]
    args = list(ins.operands)
    if len(args) != len(callee_fn.params) or len(ins.call_returns) > len(callee_fn.returns):
        raise PtxSyntaxError(f"line {ins.line}: call of {name} with {len(args)} arguments; it takes "
                             f"{len(callee_fn.params)}", rule="call arguments match the prototype",
                             ref="PTX ISA 9.0 §9.7.12.5")
    in_copies = []  # (caller param offset or reader, callee offset, size)
    for a, p in zip(args, callee_fn.params, strict=True):
        off, size = callee.params[p.name]
        if isinstance(a, Sym) and a.name in c.code.params:
            in_copies.append((c.code.params[a.name][0] + a.offset, off, size, None))
        else:
            in_copies.append((None, off, size, c.reader(a, p.type if p.type != "pred" else "u32")))
    out_copies = []
    for r, p in zip(ins.call_returns, callee_fn.returns, strict=False):
        if not (isinstance(r, Sym) and r.name in c.code.params):
            raise PtxUnsupported(f"line {ins.line}: return value into {r} (not a .param variable)",
                                 rule="return values through .param", ref="PTX ISA 9.0 §9.7.12.5")
        out_copies.append((c.code.params[r.name][0] + r.offset, callee.params[p.name][0], callee.params[p.name][1]))
    nxt = c.pc + 1

    def call(w, f, e, m, full):
        params = np.zeros((32, callee.param_bytes), np.uint8)
        for co, ce, size, rd in in_copies:
            if rd is None:
                params[:, ce:ce + size] = f.params[:, co:co + size]
            else:
                params[:, ce:ce + size] = np.ascontiguousarray(rd(f)).view(np.uint8).reshape(32, -1)[:, :size]
        base = _align(w.local_top, 16)
        w.grow_local(base + callee.local_bytes)
        nf = callee.new_frame(w, params, base, call=(f, out_copies, m))
        nlive = int(np.count_nonzero(w.live))
        n = int(np.count_nonzero(m))
        nf.stack.append([0, callee.exit_pc, m, n, n == nlive])
        e[0] = nxt
        w.frames.append(nf)
        return JUMP
    return call


def _call_indirect(ins: Instruction, c: _Compiler) -> Callable:
    """``call (r), %rd, (args), label;`` through a function address (``mov.u64 %rd, func``; simtc's addresses,
    :data:`_FUNC_BASE`). The label is a ``.calltargets`` list (the only callees allowed) or a
    ``.callprototype`` (any function whose parameters and returns match it: PTX ISA 9.0 §9.7.12.5, §11.3.2,
    §11.3.3). Lanes calling different functions run one function at a time (SIMT: the warp diverges at the call
    and reconverges after it), in the functions' address order; an address that is no such function is a
    fault."""
    label = ins.call_prototype.name if ins.call_prototype is not None else None
    fn = c.fn
    if label in fn.call_targets:
        names = list(fn.call_targets[label])
    elif label in fn.prototypes:
        names = [n for n, g in c.kc.module.functions.items() if n in c.kc.functions
                 and len(g.params) == len(ins.operands) and len(g.returns) >= len(ins.call_returns)]
    else:
        raise PtxSyntaxError(f"line {ins.line}: an indirect call needs a .callprototype or .calltargets label "
                             f"(got {label})", rule="indirect calls name a prototype", ref="PTX ISA 9.0 §9.7.12.5")
    bodies: dict[int, tuple[str, Callable]] = {}
    for n in names:
        g = c.kc.module.functions.get(n)
        if g is None or g.is_declaration or n not in c.kc.functions:
            continue
        try:
            bodies[_FUNC_BASE + 16 * c.kc.func_ids[n]] = (n, _call_body(ins, c, n))
        except PtxSyntaxError:
            if label in fn.call_targets:
                raise
    rd = c.reader(ins.call_target, "u64")
    pc = c.pc
    nxt = pc + 1
    shown = str(label).split("$")[0]  # the label as written (the parser renames block-local labels)

    def icall(w, f, e, m, full):
        a = rd(f)
        lanes = m.nonzero()[0]
        targets = np.unique(a[lanes])
        for t in targets.tolist():
            if t not in bodies:
                lane = int(lanes[np.flatnonzero(a[lanes] == np.uint64(t))[0]])
                err = KernelFault(f"indirect call through {ins.call_target.name} by lane {lane}: address {t:#x} is "
                                  f"no function that {shown} allows", rule="indirect calls reach a matching function",
                                  ref="PTX ISA 9.0 §9.7.12.5", address=t)
                err.lane = lane
                raise err
        if targets.size == 1:
            return bodies[int(targets[0])][1](w, f, e, m, full)
        # diverge: the lowest address's lanes call now; one entry per other callee re-issues this call with its
        # lanes (one warp instruction per callee), and all meet at the next instruction
        nlive = int(np.count_nonzero(w.live))
        for t in sorted(targets.tolist()[1:], reverse=True):
            mk = m & (a == np.uint64(t))
            k = int(np.count_nonzero(mk))
            f.stack.append([pc, nxt, mk, k, k == nlive])
        return bodies[int(targets[0])][1](w, f, e, m & (a == targets[0]), False)
    return icall


def _read_cstring(w: Warp, lane: int, addr: int) -> bytes:
    """The NUL-terminated bytes at a generic address (global, const, local or shared)."""
    space = _TAGS.get(addr >> 40, "global")
    if space == "global":
        mem = w.cta.launch.device.memory
        a = mem.allocation_of(addr)
        if a is None:
            raise KernelFault(f"printf string at {addr:#x} is in no allocation", rule="strings lie in memory",
                              address=addr)
        data = a.data[addr - a.base:a.size]
    else:
        off = addr - WINDOWS[space]
        data = {"const": w.cta.launch.image.const_bank, "local": w.local[lane, :w.local_top],
                "shared": w.cta.cta.smem.data[:w.cta.shared_size]}.get(space, np.zeros(0, np.uint8))[off:]
    raw = data.tobytes()
    return raw.split(b"\0", 1)[0]


def _read_bytes(w: Warp, lane: int, addr: int) -> bytes:
    space = _TAGS.get(addr >> 40, "global")
    if addr == 0:
        return b""
    if space == "global":
        a = w.cta.launch.device.memory.allocation_of(addr)
        return b"" if a is None else a.data[addr - a.base:a.size].tobytes()
    off = addr - WINDOWS[space]
    if space == "local":
        return w.local[lane, off:w.local_top].tobytes()
    if space == "shared":
        return w.cta.cta.smem.data[off:w.cta.shared_size].tobytes()
    return b""


def _vprintf(ins: Instruction, c: _Compiler):
    """``call vprintf, (fmt, args)``: format each active lane's printf (CUDA C++ Programming Guide,
    "Formatted Output"), lanes in order."""
    if len(ins.operands) != 2:
        raise PtxSyntaxError(f"line {ins.line}: vprintf takes 2 arguments", rule="vprintf(fmt, args)")
    rfmt = c.reader(ins.operands[0], "u64") if not (isinstance(ins.operands[0], Sym) and ins.operands[0].name in
                                                    c.code.params) else None
    rarg = c.reader(ins.operands[1], "u64") if not (isinstance(ins.operands[1], Sym) and ins.operands[1].name in
                                                    c.code.params) else None
    po = [c.code.params[o.name][0] + o.offset if isinstance(o, Sym) and o.name in c.code.params else None
          for o in ins.operands]
    ret = ins.call_returns[0] if ins.call_returns else None
    ro = c.code.params[ret.name][0] if isinstance(ret, Sym) and ret.name in c.code.params else None

    def value(f, k, rd):
        if rd is not None:
            return rd(f)
        return np.ascontiguousarray(f.params[:, po[k]:po[k] + 8]).view(np.uint64).reshape(32)

    def body(w, f, e, m, full):
        fmts = value(f, 0, rfmt)
        argv = value(f, 1, rarg)
        run = w.cta.launch
        used = np.zeros(32, np.int32)
        for lane in m.nonzero()[0].tolist():
            text, n = format_printf(_read_cstring(w, lane, int(fmts[lane])), _read_bytes(w, lane, int(argv[lane])),
                                    lambda a, lane=lane: _read_cstring(w, lane, a))
            used[lane] = n
            run.printf.append(text)
            if run.options.echo_printf:
                print(text, end="")
        if ro is not None:
            f.params[m, ro:ro + 4] = used.view(np.uint8).reshape(32, 4)[m]
    return body


def _assertfail(ins: Instruction, c: _Compiler):
    rds = [c.reader(o, "u64") if not (isinstance(o, Sym) and o.name in c.code.params) else o for o in ins.operands]

    def val(f, k):
        r = rds[k]
        if callable(r):
            return r(f)
        o = c.code.params[r.name][0]
        return np.ascontiguousarray(f.params[:, o:o + 8]).view(np.uint64).reshape(32)

    def body(w, f, e, m, full):
        lane = int(m.nonzero()[0][0])
        msg = _read_cstring(w, lane, int(val(f, 0)[lane])).decode(errors="replace")
        file = _read_cstring(w, lane, int(val(f, 1)[lane])).decode(errors="replace")
        line = int(val(f, 2)[lane]) & 0xFFFFFFFF
        func = _read_cstring(w, lane, int(val(f, 3)[lane])).decode(errors="replace")
        err = KernelFault(f"{file}:{line}: {func}: Assertion `{msg}` failed.", rule="device-side assert")
        err.lane = lane
        raise err
    return body


# ------------------------------------------------------------------------------------------------------------
# CTA barriers: bar / barrier (PTX ISA 9.0 §9.7.13.1), bar.warp.sync
# ------------------------------------------------------------------------------------------------------------

def _release(cs: CtaState, bid: int, b: BarrierState) -> None:
    """Barrier ``bid`` completed: every waiting warp goes on past it (with its ``.red`` result)."""
    vals = [v for (_, _, _, v) in b.arrived if v is not None]
    red = None
    if vals:
        op, _ = vals[0]
        cat = np.concatenate([x for _, x in vals])
        red = int(np.count_nonzero(cat)) if op == "popc" else bool(cat.all()) if op == "and" else bool(cat.any())
    for w, e, deliver, _ in b.arrived:
        if deliver is not None:
            deliver(red)
        if e is not None:
            for one in (e if isinstance(e[0], list) else [e]):
                one[0] += 1
            w.blocked = None
            w.blocked_at = None
    del cs.barriers[bid]


def _barrier_threads_ready(cs: CtaState, b: BarrierState) -> bool:
    if b.expected is None:
        return len(b.arrived) >= cs.live_warps()
    return b.threads() >= b.expected


@handler("bar", "barrier")
def _bar(ins: Instruction, c: _Compiler):
    mods = [m for m in ins.modifiers if m not in ("cta", "aligned")]
    if "cluster" in ins.modifiers:
        return _bar_cluster(ins, c)
    if ins.opcode == "bar" and mods and mods[0] == "warp":
        return _bar_warp(ins, c)
    kind = mods[0] if mods else "sync"
    aligned = ins.opcode == "bar" or "aligned" in ins.modifiers
    if kind not in ("sync", "arrive", "red"):
        raise PtxUnsupported(f"{ins.name}: barrier kind .{kind}", rule="barrier kinds", ref=_BAR_REF)
    ops = list(ins.operands)
    red_op = None
    wr = None
    pred = None
    if kind == "red":
        red_op = mods[1]
        dt = mods[2] if len(mods) > 2 else "pred"
        wr = c.writer(ops[0], "u32" if red_op == "popc" else "pred")
        pred = c.reader(ops[-1], "pred")
        ops = ops[1:-1]
        if red_op != "popc" and dt != "pred":
            raise PtxUnsupported(f"{ins.name}: bar.red on .{dt}", rule="bar.red reduces predicates", ref=_BAR_REF)
    rid = c.reader(ops[0], "u32") if ops else (lambda f: np.zeros(32, np.uint32))
    rcount = c.reader(ops[1], "u32") if len(ops) > 1 else None
    if kind == "arrive" and rcount is None:
        raise PtxSyntaxError(f"line {ins.line}: bar.arrive needs a thread count", rule="bar.arrive takes a count",
                             ref=_BAR_REF)
    line = ins.line
    text = ins.text or ins.name

    def body(w, f, e, m, full):
        lanes = m.nonzero()[0]
        ids = rid(f)[lanes]
        bid = int(ids[0])
        if (ids != bid).any() or not 0 <= bid <= 15:
            raise KernelFault(f"{ins.opcode}: barrier id {ids.tolist()} must be one value in 0..15",
                              rule="barrier ids 0..15, uniform in the warp", ref=_BAR_REF)
        count = None
        if rcount is not None:
            cv = rcount(f)[lanes]
            count = int(cv[0])
            if (cv != count).any() or count % 32 or count <= 0:
                raise KernelFault(f"{ins.opcode}: thread count {cv.tolist()} must be one positive multiple of 32",
                                  rule="barrier thread counts are multiples of the warp size", ref=_BAR_REF)
        if np.count_nonzero(m) != np.count_nonzero(w.live):
            if aligned:
                raise KernelFault(f"{text}: executed by {np.count_nonzero(m)} of the warp's "
                                  f"{np.count_nonzero(w.live)} live threads; an .aligned barrier must be executed "
                                  "by every thread of the warp", rule="aligned barriers need a converged warp",
                                  ref=_BAR_REF)
            parked = w.parked.setdefault(bid, [])
            if any(pf is not f for pf, _, _ in parked):
                raise PtxUnsupported(f"{text}: paths of one warp wait at barrier {bid} in different function frames",
                                     rule="independent thread scheduling within one frame", ref=_BAR_REF)
            parked.append((f, e, m.copy()))
            lanes = np.logical_or.reduce([pm for _, _, pm in parked])
            if np.count_nonzero(lanes & w.live) != np.count_nonzero(w.live):
                # this path waits aside for the rest of its warp; the warp runs its other paths up to the barrier
                del f.stack[next(i for i, x in enumerate(f.stack) if x is e)]
                return BLOCK
            del w.parked[bid]
            others = [pe for _, pe, _ in parked[:-1]]
            for pe in reversed(others):
                f.stack.append(pe)  # back on the stack, the first path to arrive on top
        else:
            others = []
        cs = w.cta
        b = cs.barriers.get(bid)
        if b is None:
            b = cs.barriers[bid] = BarrierState(count)
        elif b.expected != count:
            raise KernelFault(f"{text}: warp {w.wid} expects {count or 'all'} threads at barrier {bid}, other warps "
                              f"{b.expected or 'all'}", rule="every warp at a barrier names the same thread count",
                              ref=_BAR_REF)
        if kind == "arrive":
            for pe in others:
                pe[0] += 1
            b.arrived.append((w, None, None, None))
            if _barrier_threads_ready(cs, b):
                _release(cs, bid, b)
            return None
        deliver = None
        vals = None
        if kind == "red":
            vals = (red_op, pred(f)[m])
            frame = f

            def deliver(res, frame=frame, m=m):
                v = np.full(32, res, np.uint32 if red_op == "popc" else bool)
                wr(frame, v, m, False)
        b.arrived.append((w, [e, *others] if others else e, deliver, vals))
        if _barrier_threads_ready(cs, b):
            b.arrived[-1] = (w, others or None, deliver, vals)
            _release(cs, bid, b)
            return None
        exp = f"{b.expected} threads" if b.expected is not None else f"all {cs.live_warps() * 32} threads"
        w.blocked = f"barrier {bid} ({exp}; {b.threads()} arrived so far)"
        w.blocked_at = (f.code, e[0], line, text)
        return BLOCK
    return body


_CLUSTER_BAR_REF = "PTX ISA 9.0 §9.7.13.3"


def _cluster_barrier_ready(cs: CtaState) -> bool:
    """Every warp that has not exited arrived in the current phase (exited threads do not hold it up: PTX ISA 9.0
    §9.7.12.7, exit)."""
    cb = cs.cluster_barrier
    return cb.count > 0 and all(cb.arrived.get(w.wid) == cb.phase for w in cs.warps if not w.done)


def _cluster_release(cs: CtaState) -> None:
    cb = cs.cluster_barrier
    done = cb.phase
    cb.phase += 1
    cb.count = 0
    still = []
    for w, e in cb.waiting:
        if cb.arrived.get(w.wid) == done:
            del cb.arrived[w.wid]
            e[0] += 1
            w.blocked = None
            w.blocked_at = None
        else:
            still.append((w, e))
    cb.waiting = still


def _bar_cluster(ins: Instruction, c: _Compiler):
    """``barrier.cluster.arrive{.release|.relaxed}{.aligned}`` and ``barrier.cluster.wait{.acquire}{.aligned}``
    (PTX ISA 9.0 §9.7.13.3): a split barrier over every non-exited thread of the cluster; a wait returns once all of
    them have arrived in the phase the waiting thread arrived in. simtc executes a launch as clusters of one CTA
    (the cluster a launch without cluster dimensions has; a launch that asks for more is refused before it runs),
    so the cluster's threads are this CTA's. Memory ordering (.release/.acquire/.relaxed) needs no action in a
    sequentially executed CTA. simtc counts arrivals per warp: every live thread of a warp executes it together
    (the .aligned form requires it; the other form with part of a warp is refused, as for ``bar``)."""
    kind = next((m for m in ins.modifiers if m in ("arrive", "wait")), None)
    if kind is None or ins.operands:
        raise PtxSyntaxError(f"line {ins.line}: barrier.cluster is .arrive or .wait and takes no operands",
                             rule="barrier.cluster forms", ref=_CLUSTER_BAR_REF)
    aligned = "aligned" in ins.modifiers
    line = ins.line
    text = ins.text or ins.name

    def body(w, f, e, m, full):
        if np.count_nonzero(m) != np.count_nonzero(w.live):
            if aligned:
                raise KernelFault(f"{text}: executed by {np.count_nonzero(m)} of the warp's "
                                  f"{np.count_nonzero(w.live)} live threads; an .aligned barrier must be executed "
                                  "by every thread of the warp", rule="aligned barriers need a converged warp",
                                  ref=_CLUSTER_BAR_REF)
            raise PtxUnsupported(f"{text}: part of a warp at barrier.cluster (independent thread scheduling), which "
                                 "simtc's SIMT stack does not model", rule="independent thread scheduling",
                                 ref=_CLUSTER_BAR_REF)
        cs = w.cta
        cb = cs.cluster_barrier
        if kind == "arrive":
            if w.wid in cb.arrived:
                raise KernelFault(f"{text}: warp {w.wid} arrives at barrier.cluster again before its "
                                  "barrier.cluster.wait", rule="barrier.cluster.arrive and .wait alternate in "
                                  "each thread", ref=_CLUSTER_BAR_REF)
            cb.arrived[w.wid] = cb.phase
            cb.count += 1
            if _cluster_barrier_ready(cs):
                _cluster_release(cs)
            return None
        arrived = cb.arrived.get(w.wid)
        if arrived is None:
            raise KernelFault(f"{text}: warp {w.wid} waits at barrier.cluster without having arrived",
                              rule="barrier.cluster.wait follows the thread's barrier.cluster.arrive",
                              ref=_CLUSTER_BAR_REF)
        if arrived < cb.phase:  # its phase already completed
            del cb.arrived[w.wid]
            return None
        cb.waiting.append((w, e))
        live = [x.wid for x in cs.warps if not x.done and cb.arrived.get(x.wid) != cb.phase]
        w.blocked = f"barrier.cluster phase {cb.phase} (warps {live} have not arrived)"
        w.blocked_at = (f.code, e[0], line, text)
        return BLOCK
    return body


def _membermask(c: _Compiler, op) -> Callable:
    return c.reader(op, "b32")


def _check_members(w: Warp, m: np.ndarray, mm: int, text: str, ref: str) -> None:
    """PTX's membermask rules for ``.sync`` warp instructions: every executing lane is in ``membermask``, and every
    live lane it names executes the same instruction (simtc's warps do not model independent thread scheduling)."""
    act = bits_of(m)
    if act & ~mm & 0xFFFFFFFF:
        raise KernelFault(f"{text}: lanes {_lanes(act & ~mm)} execute it but are not in membermask {mm:#010x}",
                          rule="the executing thread is in membermask (else undefined)", ref=ref)
    missing = mm & bits_of(w.live) & ~act
    if missing:
        raise KernelFault(f"{text}: membermask {mm:#010x} names lanes {_lanes(missing)}, which are live but not "
                          "executing this instruction (diverged)", rule="all threads named in membermask execute "
                          "the same .sync instruction", ref=ref)


def _lanes(bits: int) -> str:
    return ",".join(str(i) for i in range(32) if bits >> i & 1)


def _uniform_mask(rd, f, m) -> int:
    v = rd(f)[m]
    return int(v[0]) if v.size else 0


def _bar_warp(ins: Instruction, c: _Compiler):
    rd = _membermask(c, ins.operands[0])
    text = ins.text or ins.name

    def body(w, f, e, m, full):
        _check_members(w, m, _uniform_mask(rd, f, m), text, "PTX ISA 9.0 §9.7.13.2")
    return body


# ------------------------------------------------------------------------------------------------------------
# warp-level: shfl vote activemask match elect redux (PTX ISA 9.0 §9.7.9, §9.7.13)
# ------------------------------------------------------------------------------------------------------------

_LANE64 = np.arange(32, dtype=np.int64)


@handler("shfl")
def _shfl(ins: Instruction, c: _Compiler):
    """``shfl.sync.mode.b32 d[|p], a, b, c, membermask`` (PTX ISA 9.0 §9.7.9.6, shfl.sync): the lane index ``j``
    from ``b``, the clamp ``c[4:0]`` and the segment mask ``c[12:8]``; ``p`` is whether ``j`` was in range."""
    mods = [m for m in ins.modifiers if m != "sync"]
    mode = mods[0]
    if mode not in ("up", "down", "bfly", "idx"):
        raise PtxUnsupported(f"{ins.name}: mode .{mode}", rule="shfl modes", ref="PTX ISA 9.0 §9.7.9.6")
    dsts, srcs = _split(ins)
    wd = c.writer(dsts[0], "b32")
    wp = c.writer(dsts[1], "pred") if len(dsts) > 1 else None
    ra, rb, rc = (c.reader(s, "b32") for s in srcs[:3])
    rm = _membermask(c, srcs[3]) if len(srcs) > 3 else None
    text = ins.text or ins.name

    def body(w, f, e, m, full):
        if rm is not None:
            _check_members(w, m, _uniform_mask(rm, f, m), text, "PTX ISA 9.0 §9.7.9.6")
        a = ra(f)
        b = rb(f).astype(np.int64) & 31
        cv = rc(f).astype(np.int64)
        seg = (cv >> 8) & 31
        clamp = cv & 31
        lane = _LANE64
        max_lane = (lane & seg) | (clamp & ~seg)
        min_lane = lane & seg
        if mode == "up":
            j = lane - b
            p = j >= max_lane
        elif mode == "down":
            j = lane + b
            p = j <= max_lane
        elif mode == "bfly":
            j = lane ^ b
            p = j <= max_lane
        else:
            j = min_lane | (b & ~seg)
            p = j <= max_lane
        j = np.where(p, j, lane)
        wd(f, a[j], m, full)
        if wp is not None:
            wp(f, p, m, full)
    return body


@handler("vote")
def _vote(ins: Instruction, c: _Compiler):
    mods = [m for m in ins.modifiers if m != "sync"]
    mode = mods[0]
    d, *srcs = ins.operands
    rp = c.reader(srcs[0], "pred")
    rm = _membermask(c, srcs[1]) if len(srcs) > 1 else None
    text = ins.text or ins.name
    wr = c.writer(d, "b32" if mode == "ballot" else "pred")

    def body(w, f, e, m, full):
        if rm is not None:
            mm = _uniform_mask(rm, f, m)
            _check_members(w, m, mm, text, "PTX ISA 9.0 §9.7.13.9")
        p = rp(f) & m
        if mode == "ballot":
            wr(f, np.full(32, bits_of(p), np.uint32), m, full)
            return None
        act = p[m]
        if mode == "all":
            r = bool(act.all())
        elif mode == "any":
            r = bool(act.any())
        elif mode == "uni":
            r = bool(act.all() or not act.any())
        else:
            raise PtxUnsupported(f"{ins.name}: vote mode .{mode}", rule="vote modes", ref="PTX ISA 9.0 §9.7.13.9")
        wr(f, np.full(32, r), m, full)
    return body


@handler("activemask")
def _activemask(ins: Instruction, c: _Compiler):
    wr = c.writer(ins.operands[0], "b32")

    def body(w, f, e, m, full):
        wr(f, np.full(32, bits_of(m), np.uint32), m, full)
    return body


@handler("match")
def _match(ins: Instruction, c: _Compiler):
    mods = [m for m in ins.modifiers if m != "sync"]
    mode, t = mods[0], mods[-1]
    dsts, srcs = _split(ins)
    wd = c.writer(dsts[0], "b32")
    wp = c.writer(dsts[1], "pred") if len(dsts) > 1 else None
    ra = c.reader(srcs[0], t)
    rm = _membermask(c, srcs[1])
    text = ins.text or ins.name

    def body(w, f, e, m, full):
        mm = _uniform_mask(rm, f, m)
        _check_members(w, m, mm, text, "PTX ISA 9.0 §9.7.13.10")
        a = ra(f)
        eq = (a[:, None] == a[None, :]) & m[None, :]
        if mode == "any":
            res = np.packbits(eq, axis=1, bitorder="little").view("<u4").reshape(32).astype(np.uint32)
            wd(f, res, m, full)
        else:
            same = bool((a[m] == a[m][0]).all())
            wd(f, np.full(32, bits_of(m) if same else 0, np.uint32), m, full)
            if wp is not None:
                wp(f, np.full(32, same), m, full)
    return body


@handler("elect")
def _elect(ins: Instruction, c: _Compiler):
    dsts, srcs = _split(ins)
    wd = c.writer(dsts[0], "b32")
    wp = c.writer(dsts[1], "pred") if len(dsts) > 1 else None
    rm = _membermask(c, srcs[0])
    text = ins.text or ins.name

    def body(w, f, e, m, full):
        mm = _uniform_mask(rm, f, m)
        _check_members(w, m, mm, text, "PTX ISA 9.0 §9.7.13.14")
        leader = int(m.nonzero()[0][0])
        wd(f, np.full(32, leader, np.uint32), m, full)
        if wp is not None:
            wp(f, leader == LANES, m, full)
    return body


@handler("redux")
def _redux(ins: Instruction, c: _Compiler):
    mods = [m for m in ins.modifiers if m != "sync"]
    op, t = mods[0], mods[-1]
    d, a, mmo = ins.operands
    ra = c.reader(a, t)
    rm = _membermask(c, mmo)
    wr = c.writer(d, t)
    text = ins.text or ins.name
    dt = {"u32": np.uint32, "s32": np.int32, "b32": np.uint32, "f32": np.float32}.get(t)
    if dt is None or op not in ("add", "min", "max", "and", "or", "xor"):
        raise PtxUnsupported(f"{ins.name}: redux.{op}.{t}", rule="redux operations", ref="PTX ISA 9.0 §9.7.13.12")

    def body(w, f, e, m, full):
        mm = _uniform_mask(rm, f, m)
        _check_members(w, m, mm, text, "PTX ISA 9.0 §9.7.13.12")
        v = ra(f).view(dt)[m]
        if op == "add":
            r = np.array(v.astype(np.int64).sum() & 0xFFFFFFFF, np.uint32)
        elif op == "min":
            r = np.array(v.min(), dt)
        elif op == "max":
            r = np.array(v.max(), dt)
        else:
            fn = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
            r = np.array(fn.reduce(v), dt)
        wr(f, np.full(32, r.view(np.uint32)), m, full)
    return body


# ------------------------------------------------------------------------------------------------------------
# ldmatrix / stmatrix: warp-wide 8x8 b16 matrices between shared memory and registers
# (PTX ISA 9.0 §9.7.14.5.15, §9.7.14.5.16)
# ------------------------------------------------------------------------------------------------------------

_FRAG_ROW = (np.arange(32) // 4)
_FRAG_COL = 2 * (np.arange(32) % 4)


def _matrix_mods(ins: Instruction) -> tuple[int, bool, str]:
    mods = ins.modifiers
    if "m8n8" not in mods or mods[-1] != "b16":
        raise PtxUnsupported(f"{ins.name}: only the .m8n8 .b16 shapes are modelled (not .m16n16/.m8n16 with b8 "
                             "or b6x16/b4x16 elements)", rule="ldmatrix/stmatrix shapes",
                             ref="PTX ISA 9.0 §9.7.14.5.15")
    num = next((int(m[1:]) for m in mods if m in ("x1", "x2", "x4")), None)
    if num is None:
        raise PtxUnsupported(f"{ins.name}: needs .x1, .x2 or .x4", rule="ldmatrix/stmatrix .num",
                             ref="PTX ISA 9.0 §9.7.14.5.15")
    space = next((m.split("::")[0] for m in mods if m.split("::")[0] == "shared"), "generic")
    return num, "trans" in mods, space


def _whole_warp(w: Warp, m: np.ndarray, ins: Instruction) -> None:
    if np.count_nonzero(m) != 32:
        raise KernelFault(f"{ins.opcode}: executed by {np.count_nonzero(m)} lanes; .sync.aligned matrix loads and "
                          "stores need all 32 lanes of the warp", rule="ldmatrix/stmatrix are warp-wide",
                          ref="PTX ISA 9.0 §9.7.14.5.15")


@handler("ldmatrix")
def _ldmatrix(ins: Instruction, c: _Compiler):
    """Matrix i's row r comes from the 16 bytes at lane 8i+r's address; lane t receives row t/4, columns
    2(t%4) and 2(t%4)+1 (with ``.trans``, column t/4 of rows 2(t%4) and 2(t%4)+1), the lower column in the low half."""
    num, trans, space = _matrix_mods(ins)
    d = ins.operands[0]
    items = list(d.items) if isinstance(d, Vector) else [d]
    if len(items) != num:
        raise PtxSyntaxError(f"line {ins.line}: {ins.name} takes {num} destination registers",
                             rule="one register per matrix", ref="PTX ISA 9.0 §9.7.14.5.15")
    addr = c.address(ins.operands[1], space)
    wrs = [c.writer(x, "b32") for x in items]
    rows_mask = np.arange(32) < 8 * num

    def body(w, f, e, m, full):
        _whole_warp(w, m, ins)
        mats = _load(space, w, f, addr(f), rows_mask, 16).view(np.uint16).reshape(num, 8, 8)
        for i, wr in enumerate(wrs):
            mt = mats[i].T if trans else mats[i]
            lo = mt[_FRAG_ROW, _FRAG_COL].astype(np.uint32)
            hi = mt[_FRAG_ROW, _FRAG_COL + 1].astype(np.uint32)
            wr(f, lo | (hi << np.uint32(16)), m, full)
    return body


@handler("stmatrix")
def _stmatrix(ins: Instruction, c: _Compiler):
    """The inverse of ``ldmatrix``: lane t's register i holds matrix i's row t/4, columns 2(t%4) and 2(t%4)+1; row r
    of matrix i goes to the 16 bytes at lane 8i+r's address."""
    num, trans, space = _matrix_mods(ins)
    s_ = ins.operands[1]
    items = list(s_.items) if isinstance(s_, Vector) else [s_]
    if len(items) != num:
        raise PtxSyntaxError(f"line {ins.line}: {ins.name} takes {num} source registers",
                             rule="one register per matrix", ref="PTX ISA 9.0 §9.7.14.5.16")
    addr = c.address(ins.operands[0], space)
    rds = [c.reader(x, "b32") for x in items]
    rows_mask = np.arange(32) < 8 * num

    def body(w, f, e, m, full):
        _whole_warp(w, m, ins)
        mats = np.zeros((num, 8, 8), np.uint16)
        for i, rd in enumerate(rds):
            v = rd(f)
            mt = mats[i].T if trans else mats[i]
            mt[_FRAG_ROW, _FRAG_COL] = (v & np.uint32(0xFFFF)).astype(np.uint16)
            mt[_FRAG_ROW, _FRAG_COL + 1] = (v >> np.uint32(16)).astype(np.uint16)
        _store(space, w, f, addr(f), rows_mask, mats.reshape(8 * num, 8).view(np.uint8).reshape(8 * num, 16))
    return body


# ------------------------------------------------------------------------------------------------------------
# atomics: atom, red (PTX ISA 9.0 §9.7.13.5, §9.7.13.6)
# ------------------------------------------------------------------------------------------------------------

def _alu_fn(name: str, nsrc: int = 2) -> Callable:
    """The per-lane function simtc.ptx.alu gives instruction ``name`` (one source of truth for the arithmetic)."""
    return alu.compile(Instruction(name, (Reg("%d"), *(Reg(f"%s{i}") for i in range(nsrc))))).fn


_ATOM_HALF = ("f16", "bf16", "f16x2", "bf16x2")


def _atom_fn(op: str, t: str, ins: Instruction) -> Callable:
    """The operation of ``atom.op.t`` on raw bits: ``new(old, b[, c])`` over arrays of one lane each or many
    (b128: (n, 2) uint64 arrays, low word first).

    Floating-point add rounds to nearest even (PTX ISA 9.0 §9.7.13.5) with simtc.ptx.alu's exact arithmetic;
    ``atom.add.f32`` on global memory flushes subnormal inputs and results (this function's ``ftz`` variant, see
    :func:`_atom`), on shared memory it does not; the f16/bf16 forms (``.noftz``) keep subnormals; min/max of
    f16/bf16 values are the ALU's ``min``/``max``."""
    w = _width(t)
    u = _U[w] if w <= 64 else np.uint64
    if op == "add":
        if t == "f32":
            add = _alu_fn("add.rn.f32")
            addz = _alu_fn("add.rn.ftz.f32")

            def add32(o, b, ftz=True):
                return (addz if ftz else add)(o, b)[0]
            return add32
        if t == "f64":
            return lambda o, b: (o.view(np.float64) + b.view(np.float64)).view(u)
        if t in _ATOM_HALF:
            f = _alu_fn(f"add.rn.{t}")
            return lambda o, b: f(o, b)[0]
        return lambda o, b: (o + b).astype(u)
    if op in ("min", "max"):
        if t in _ATOM_HALF:
            f = _alu_fn(f"{op}.{t}")
            return lambda o, b: f(o, b)[0]
        pick = np.minimum if op == "min" else np.maximum
        if t.startswith("s"):
            s = _S[w]
            return lambda o, b: pick(o.view(s), b.view(s)).view(u)
        if t.startswith("f"):
            fdt = {32: np.float32, 64: np.float64}[w]
            return lambda o, b: pick(o.view(fdt), b.view(fdt)).view(u)
        return lambda o, b: pick(o, b)
    if op == "inc":
        return lambda o, b: np.where(o >= b, 0, o + 1).astype(u)
    if op == "dec":
        return lambda o, b: np.where((o == 0) | (o > b), b, o - 1).astype(u)
    if op == "and":
        return lambda o, b: o & b
    if op == "or":
        return lambda o, b: o | b
    if op == "xor":
        return lambda o, b: o ^ b
    if op == "exch":
        return lambda o, b: b
    if op == "cas":
        if w == 128:  # both 64-bit words compared
            return lambda o, b, cc: np.where((o == b).all(axis=1)[:, None], cc, o)
        return lambda o, b, cc: np.where(o == b, cc, o).astype(u)
    raise PtxUnsupported(f"{ins.name}: atomic operation .{op}", rule="atomic operations", ref="PTX ISA 9.0 §9.7.13.5")


_ATOM_OPS = ("add", "min", "max", "inc", "dec", "and", "or", "xor", "exch", "cas")
_REF_ATOM = "PTX ISA 9.0 §9.7.13.5"


def _atom_check(ins: Instruction, op: str, t: str, vec: int, space: str) -> None:
    """The forms of atom/red simtc executes: scalar atomics of 16 (cas), 32, 64 and 128 (exch, cas) bits and
    the sm_90 vector forms (add of .v2/.v4 f32; add/min/max of .v2-.v8 f16/bf16 and .v2/.v4 f16x2/bf16x2,
    global memory only)."""
    w = _width(t)
    if vec != 1:
        ok = ((t == "f32" and op == "add" and vec in (2, 4)) or (t in ("f16", "bf16") and op in ("add", "min", "max")
              and vec in (2, 4, 8)) or (t in ("f16x2", "bf16x2") and op in ("add", "min", "max") and vec in (2, 4)))
        if not ok or space not in ("global", "generic"):
            raise PtxUnsupported(f"{ins.name}: not a vector atomic form (.add .v2/.v4 .f32; .add/.min/.max .v2-.v8 "
                                 ".f16/.bf16 or .v2/.v4 .f16x2/.bf16x2; global memory)", rule="atomic operand kinds",
                                 ref=_REF_ATOM)
    if w == 128 and op not in ("exch", "cas"):
        raise PtxUnsupported(f"{ins.name}: .b128 atomics are exch and cas", rule="atomic operations", ref=_REF_ATOM)
    if w == 16 and t in ("b16", "u16", "s16") and op != "cas":
        raise PtxUnsupported(f"{ins.name}: 16-bit integer atomics are cas only", rule="atomic operations",
                             ref=_REF_ATOM)


@handler("atom", "red")
def _atom(ins: Instruction, c: _Compiler):
    space, vec, t = _mem_mods(ins)
    op = next((m for m in ins.modifiers if m in _ATOM_OPS), None)
    if op is None:
        raise PtxUnsupported(f"{ins.name}: no atomic operation", rule="atomic operations", ref=_REF_ATOM)
    _atom_check(ins, op, t, vec, space)
    ops = list(ins.operands)
    if ins.opcode == "atom":
        d = ops[0]
        puts = [c.putter(x, t) for x in (d.items if isinstance(d, Vector) else [d])]
        ops = ops[1:]
    else:
        puts = []
    addr = c.address(ops[0], space)
    b = ops[1]
    rbs = [c.reader(x, t) for x in (b.items if isinstance(b, Vector) else [b])]
    if len(rbs) != vec or (puts and len(puts) != vec):
        raise PtxUnsupported(f"{ins.name}: .v{vec} takes {vec}-element vectors", rule="vector operands",
                             ref=_REF_ATOM)
    rc = c.reader(ops[2], t) if op == "cas" else None
    fn = _atom_fn(op, t, ins)
    w8 = _width(t)
    esize = w8 // 8
    size = esize * vec
    u = _U[w8] if w8 <= 64 else np.uint64
    ftz_f32 = op == "add" and t == "f32"
    shared_tag = WINDOWS["shared"] >> 40

    def apply(old, bv, cv, a):
        if cv is not None:
            return fn(old, bv, cv)
        if vec != 1:  # element by element (each element is its own atomic access, PTX ISA 9.0 §9.7.13.5)
            o, bb = old.reshape(-1), bv.reshape(-1)
        else:
            o, bb = old, bv
        if ftz_f32:  # flushed on global memory only
            if space == "shared":
                r = fn(o, bb, False)
            elif space == "generic":
                sh = np.repeat((a >> np.uint64(40)) == np.uint64(shared_tag), vec)
                r = np.where(sh, fn(o, bb, False), fn(o, bb, True))
            else:
                r = fn(o, bb, True)
        else:
            r = fn(o, bb)
        return np.asarray(r).reshape(old.shape)

    def body(w, f, e, m, full):
        a = addr(f)
        lanes = m.nonzero()[0]
        bv = rbs[0](f)[lanes] if len(rbs) == 1 else np.stack([r(f)[lanes] for r in rbs], axis=1)
        cv = rc(f)[lanes] if rc is not None else None
        aa = a[lanes]
        if np.unique(aa).size == aa.size:  # one lane per address: all at once
            old = _load(space, w, f, a, m, size).view(u).reshape(bv.shape)
            new = apply(old, bv, cv, aa)
            _store(space, w, f, a, m, np.ascontiguousarray(new.astype(u)).view(np.uint8).reshape(-1, size))
        else:  # lanes in order (simtc's order; PTX leaves it unspecified)
            old = np.empty(bv.shape, u)
            one_shape = (1, *bv.shape[1:])
            for k, lane in enumerate(lanes.tolist()):
                one = np.zeros(32, bool)
                one[lane] = True
                ok = _load(space, w, f, a, one, size).view(u).reshape(one_shape)
                n = apply(ok, bv[k:k + 1], cv[k:k + 1] if cv is not None else None, aa[k:k + 1])
                _store(space, w, f, a, one, np.ascontiguousarray(n.astype(u)).view(np.uint8).reshape(1, size))
                old[k] = ok[0]
        if puts:
            if len(puts) == 1:
                puts[0](f, old, m)
            else:
                for j, put in enumerate(puts):
                    put(f, np.ascontiguousarray(old[:, j]), m)
    return body


# ------------------------------------------------------------------------------------------------------------
# the scheduler and the launch
# ------------------------------------------------------------------------------------------------------------

class _Run:
    """A launch's state shared by its CTAs."""

    def __init__(self, device, image, grid, block, shared_static, shared_dynamic, options):
        self.device = device
        self.image = image
        self.grid = grid
        self.block = block
        self.shared_static = shared_static
        self.shared_dynamic = shared_dynamic
        self.shared_total = 0
        self.options = options
        self.printf: list[str] = []
        self.issued = 0
        self.gridid = device.launches
        self.traces: list = []


def _enrich(err: KernelFault, w: Warp, f: Frame, pc: int, kernel: str) -> KernelFault:
    """The fault with the thread, the PTX line and source position filled in (memcheck's report)."""
    e = f.stack[-1] if f.stack else None
    lane = getattr(err, "lane", None)
    if lane is None:
        mask = e[2] if e is not None else w.live
        nz = np.flatnonzero(mask)
        lane = int(nz[0]) if nz.size else 0
    ctaid, tid = w.thread_of(lane)
    ins = f.code.fn.body[pc]
    loc = ins.loc
    src = None
    if loc is not None:
        src = f"{loc.file}:{loc.line}"
    where = (f"thread ({tid[0]},{tid[1]},{tid[2]}) in block ({ctaid[0]},{ctaid[1]},{ctaid[2]}), "
             f"{f.code.fn.name} PTX line {ins.line} `{ins.text or ins.name}`" + (f" ({src})" if src else ""))
    msg = err.message.replace(f"by lane {lane}", f"by thread ({tid[0]},{tid[1]},{tid[2]}) in block "
                              f"({ctaid[0]},{ctaid[1]},{ctaid[2]})")
    if "by thread" not in msg:
        msg = f"{msg}; {where}"
    else:
        msg = f"{msg}; at {f.code.fn.name} PTX line {ins.line} `{ins.text or ins.name}`" + (f" ({src})" if src else "")
    out = KernelFault(f"{kernel}: {msg}", rule=err.rule, ref=err.ref, thread=(ctaid, tid), pc=pc, line=ins.line,
                      loc=src, address=err.address, size=err.size, allocation=err.allocation)
    return out


def _run_warp(w: Warp, budget: int, run: _Run, kernel: str, trace) -> int | None:
    frames = w.frames
    while budget > 0:
        f = frames[-1]
        st = f.stack
        e = st[-1]
        pc = e[0]
        if pc == e[1] or not e[3]:
            st.pop()
            if not st:
                _return(w, f)
                if w.done:
                    return None
            continue
        code = f.code
        n = e[3]
        if trace is not None:
            trace.append((w.wid, code.fn.name, pc, bits_of(e[2])))
        try:
            r = code.code[pc](w, f, e)
        except KernelFault as err:
            if err.thread is not None:
                raise
            raise _enrich(err, w, f, pc, kernel) from None
        except PtxError as err:
            if isinstance(err, PtxUnsupported) and "PTX line" not in err.message:
                ins = code.fn.body[pc]
                raise PtxUnsupported(f"{err.message} (PTX line {ins.line}: `{ins.text or ins.name}`)",
                                     rule=err.rule, ref=err.ref) from None
            raise
        code.wc[pc] += 1
        code.tc[pc] += n
        run.issued += 1
        budget -= 1
        if r == BLOCK or w.done:
            return r
    return None


def _deadlock(cs: CtaState, kernel: str) -> KernelFault:
    lines = []
    for w in cs.warps:
        if w.done:
            continue
        code, _, line, text = w.blocked_at
        lines.append(f"warp {w.wid} (threads {w.wid * 32}..{w.wid * 32 + 31}) waits at {code.fn.name} PTX line "
                     f"{line} `{text}` for {w.blocked}")
    done = [w.wid for w in cs.warps if w.done]
    tail = f"; warps {done} have exited" if done else ""
    c = cs.ctaid
    return KernelFault(f"{kernel}: deadlock in block ({c[0]},{c[1]},{c[2]}): every warp that has not exited waits: "
                       + "; ".join(lines) + tail, rule="every barrier a warp waits at completes", ref=_BAR_REF,
                       thread=(cs.ctaid, tuple(int(v) for v in cs.warps[0].tid[0])))


def _run_cta(cs: CtaState, run: _Run, kernel: str) -> None:
    opts = run.options
    q = max(1, opts.quantum)
    trace = [] if opts.trace else None
    if opts.recorder is not None:
        trace = opts.recorder.cta(cs, trace)
    limit = opts.max_instructions
    warps = cs.warps
    while True:
        ran = alive = False
        for w in warps:
            if w.done:
                continue
            alive = True
            if w.blocked is not None:
                continue
            ran = True
            _run_warp(w, q, run, kernel, trace)
            if w.done:
                for bid, b in list(cs.barriers.items()):
                    b.arrived = [a for a in b.arrived if a[0] is not w or a[1] is None]
                    if b.expected is None and b.arrived and _barrier_threads_ready(cs, b):
                        _release(cs, bid, b)
                if _cluster_barrier_ready(cs):
                    _cluster_release(cs)
        if not alive:
            break
        if not ran:
            raise _deadlock(cs, kernel)
        if limit is not None and run.issued > limit:
            raise KernelFault(f"{kernel}: more than {limit} warp instructions (LaunchOptions.max_instructions); "
                              "the kernel may never end", rule="instruction limit")
    if opts.trace and trace is not None:
        run.traces.append((cs.ctaid, tuple(trace)))


def _dims(v, what: str) -> tuple[int, int, int]:
    if isinstance(v, int | np.integer):
        v = (int(v),)
    v = tuple(int(x) for x in v)
    if not 1 <= len(v) <= 3 or any(x < 1 for x in v):
        raise LaunchError(f"{what} {v} must be 1 to 3 positive sizes", rule=f"{what} dimensions")
    return (*v, *(1,) * (3 - len(v)))


def _pack_args(fn: Function, args: Sequence) -> bytes:
    """The kernel's parameter buffer: each argument checked against its parameter and placed at its offset."""
    if len(args) != len(fn.params):
        raise LaunchError(f"{fn.name} takes {len(fn.params)} arguments ({', '.join(p.name for p in fn.params)}), "
                          f"got {len(args)}", rule="one argument per kernel parameter", ref="PTX ISA 9.0 §5.1.6")
    out = bytearray()
    for p, a in zip(fn.params, args, strict=True):
        al = p.align or min(max(p.size, 1), 8)
        out.extend(bytes(_align(len(out), al) - len(out)))
        if isinstance(a, bytes | bytearray | memoryview):
            raw = bytes(a)
        elif (isinstance(a, np.ndarray) and a.ndim == 0) or isinstance(a, np.generic):
            raw = np.asarray(a).tobytes()
        elif isinstance(a, bool | int):
            bits = 8 * p.size
            if p.shape or p.type.startswith("f") or not -(1 << (bits - 1)) <= int(a) < (1 << bits):
                raise LaunchError(f"argument {p.name} ({p.type}{list(p.shape) if p.shape else ''}, {p.size} bytes) "
                                  f"cannot take the Python int {a}", rule="arguments fit their parameters",
                                  ref="PTX ISA 9.0 §5.1.6")
            raw = (int(a) & ((1 << bits) - 1)).to_bytes(p.size, "little")
        elif isinstance(a, float):
            fdt = {"f32": np.float32, "f64": np.float64, "f16": np.float16}.get(p.type)
            if fdt is None or p.shape:
                raise LaunchError(f"argument {p.name} (.{p.type}) cannot take the float {a}",
                                  rule="arguments fit their parameters", ref="PTX ISA 9.0 §5.1.6")
            raw = np.array(a, fdt).tobytes()
        else:
            raise LaunchError(f"argument {p.name}: {type(a).__name__} is no bytes, int, float or numpy scalar",
                              rule="arguments are bytes or scalars")
        if len(raw) != p.size:
            raise LaunchError(f"argument {p.name} has {len(raw)} bytes; the parameter ({p.type}"
                              f"{list(p.shape) if p.shape else ''}) has {p.size}", rule="argument sizes match "
                              "their parameters", ref="PTX ISA 9.0 §5.1.6")
        out.extend(raw)
    return bytes(out)


def _smem_capacity(module: Module) -> int:
    from simtc.smem.desc import arch_name
    from simtc.smem.memory import SMEM_CAPACITY

    try:
        return SMEM_CAPACITY[arch_name(module.target[0] if module.target else "sm_100a")]
    except Exception:  # an architecture simtc's shared-memory model does not name: the sm_90/sm_100 limit
        return SMEM_CAPACITY["sm100"]


def launch(module: Module, kernel: str, *, grid, block, args: Sequence, shared_mem: int = 0,
           device: Device, options: LaunchOptions | None = None) -> LaunchResult:
    """Run ``kernel`` of ``module`` over ``grid`` × ``block`` threads on ``device``; CTAs one after another.

    ``args``: one per kernel parameter, as its bytes or a scalar (Python int/float, numpy scalar; pointers as
    device addresses). ``shared_mem``: bytes of dynamic shared memory (``extern .shared``). Raises
    :class:`~simtc.ptx.errors.LaunchError` for a launch that does not fit, and
    :class:`~simtc.ptx.errors.KernelFault` for a fault while running.
    """
    t0 = time.perf_counter()
    options = options or LaunchOptions()
    fn = module.functions.get(kernel)
    if fn is None or not fn.entry:
        raise LaunchError(f"no kernel {kernel!r} in the module; kernels: {', '.join(module.kernels()) or 'none'}",
                          rule="launch a .entry of the module")
    grid, block = _dims(grid, "grid"), _dims(block, "block")
    nthreads = block[0] * block[1] * block[2]
    if nthreads > MAX_THREADS or any(b > m for b, m in zip(block, MAX_BLOCK, strict=True)):
        raise LaunchError(f"block {block} has {nthreads} threads; at most {MAX_THREADS} threads and "
                          f"{MAX_BLOCK} per dimension", rule="1024 threads per block", ref=_LIMITS_REF)
    if any(g > m for g, m in zip(grid, MAX_GRID, strict=True)):
        raise LaunchError(f"grid {grid} is larger than {MAX_GRID}", rule="grid dimensions", ref=_LIMITS_REF)
    d = fn.directives
    for key in ("reqntid", "maxntid"):
        if key in d:
            want = (*d[key], *(1,) * (3 - len(d[key])))
            n_want = want[0] * want[1] * want[2]
            if (key == "reqntid" and tuple(want) != block) or (key == "maxntid" and nthreads > n_want):
                raise LaunchError(f"block {block} does not fit .{key} {tuple(d[key])} of {kernel}",
                                  rule=f".{key}", ref="PTX ISA 9.0 §11.4")
    for key in ("reqnctapercluster", "explicitcluster"):
        if key in d and (key == "explicitcluster" or int(np.prod(d[key])) > 1):
            raise PtxUnsupported(f"{kernel}: .{key} {tuple(d[key])}: clusters of more than one CTA come in a later "
                                 "step", rule="clusters of one CTA", ref="PTX ISA 9.0 §11.7")
    if not isinstance(shared_mem, int | np.integer) or shared_mem < 0:
        raise LaunchError(f"shared_mem {shared_mem!r} must be a non-negative int", rule="dynamic shared memory size")
    params = np.frombuffer(_pack_args(fn, args), np.uint8)
    img = device.load(module)
    if img.program is None:
        img.program = {}
    kc = img.program.get(kernel)
    if kc is None:
        kc = img.program[kernel] = compile_kernel(module, kernel, device, img)
    cap = _smem_capacity(module)
    dyn_at = _align(kc.static_shared, kc.dynamic_align) if shared_mem else kc.static_shared
    total = dyn_at + int(shared_mem)
    if total > cap:
        raise LaunchError(f"{kernel} needs {kc.static_shared} bytes of static and {shared_mem} of dynamic shared "
                          f"memory ({total} bytes); a block may use at most {cap}", rule="227 KiB of shared memory "
                          "per block", ref=_LIMITS_REF)
    run = _Run(device, img, grid, block, kc.static_shared, int(shared_mem), options)
    run.shared_total = total
    device.launches += 1
    for fc in kc.functions.values():
        fc.wc = [0] * len(fc.fn.body)
        fc.tc = [0] * len(fc.fn.body)
    kcode = kc.functions[kernel]
    from simtc.semantics.cta import Cta
    from simtc.smem.desc import arch_name
    from simtc.smem.memory import SharedMemory

    try:
        arch = arch_name(module.target[0]) if module.target else "sm100"
    except Exception:  # an architecture the shared-memory model does not name
        arch = "sm100"
    nwarps = -(-nthreads // 32)
    for z in range(grid[2]):
        for y in range(grid[1]):
            for x in range(grid[0]):
                smem = SharedMemory(arch=arch, size=_align(max(total, 16), 16))
                for name, off, size, a in kc.shared_vars:
                    if size:
                        smem.alloc(name, size, align=min(a, 1024) if off % min(a, 1024) == 0 else 1, at=off)
                if shared_mem:
                    smem.alloc(kc.dynamic_names[0] if kc.dynamic_names else "dynamic_smem", int(shared_mem),
                               align=1, at=dyn_at)
                cs = CtaState((x, y, z), Cta(smem=smem), total, launch=run)
                for wi in range(nwarps):
                    t = np.arange(wi * 32, wi * 32 + 32)
                    tid = np.stack([t % block[0], (t // block[0]) % block[1], t // (block[0] * block[1])], axis=1)
                    live = t < nthreads
                    w = Warp(cs, wi, tid, live)
                    w.grow_local(kcode.local_bytes)
                    pbuf = np.zeros((32, max(kcode.param_bytes, params.size)), np.uint8)
                    pbuf[:, :params.size] = params
                    fr = kcode.new_frame(w, pbuf, 0)
                    n = int(np.count_nonzero(live))
                    fr.stack.append([0, kcode.exit_pc, live, n, True])
                    w.frames.append(fr)
                    cs.warps.append(w)
                with np.errstate(all="ignore"):
                    _run_cta(cs, run, kernel)
    wcount: dict[str, int] = {}
    tcount: dict[str, int] = {}
    by_line: dict[int, int] = {}
    notes: dict[str, None] = {}
    for fc in kc.functions.values():
        for pc, ins in enumerate(fc.fn.body):
            if fc.wc[pc]:
                wcount[ins.opcode] = wcount.get(ins.opcode, 0) + fc.wc[pc]
                tcount[ins.opcode] = tcount.get(ins.opcode, 0) + fc.tc[pc]
                by_line[ins.line] = by_line.get(ins.line, 0) + fc.wc[pc]
                if pc in fc.notes:
                    notes[fc.notes[pc]] = None
                for o in ins.operands:
                    if isinstance(o, Reg) and o.name.split(".")[0] in _DYNAMIC_SPECIALS:
                        notes[f"{o.name}: counts the warp instructions issued so far in the launch (not cycles: the "
                              "engine will time executed kernels)"] = None
    return LaunchResult(kernel, grid, block, kc.static_shared, int(shared_mem), wcount, tcount, by_line,
                        tuple(run.printf), tuple(notes), tuple(run.traces) if options.trace else None,
                        time.perf_counter() - t0)


# mbarrier, tcgen05 and their fences: simtc.ptx.async_ops, through simtc's semantics (takes them off REFUSED)
async_ops.install(HANDLERS, REFUSED, block=BLOCK)
# TMA, bulk copies and cp.async: simtc.ptx.async_tma, through simtc.smem.tma (takes cp off REFUSED)
async_tma.install(HANDLERS, REFUSED)
