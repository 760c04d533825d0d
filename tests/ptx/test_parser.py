"""The PTX front end (simtc.ptx.parser): real PTX compiled here from CUDA C++ and simtc's own kernels, the
properties every parse keeps (statement count, labels, declared registers, text round trip), .loc mapping to
CUDA lines, hand-written PTX for the forms compilers emit rarely, and malformed PTX refused with its line."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from simtc.errors import SimtcError
from simtc.ptx.errors import PtxSyntaxError, PtxUnsupported
from simtc.ptx.ir import Address, Guard, Imm, Instruction, Reg, Sink, Sym, Vector
from simtc.ptx.parser import OPCODES, is_special_register, parse, parse_instruction

HAVE_NVRTC = importlib.util.find_spec("cuda") is not None and importlib.util.find_spec("cuda.bindings") is not None
needs_compiler = pytest.mark.skipif(not HAVE_NVRTC,
                                    reason="cuda-bindings + nvidia-cuda-nvrtc (dev extra) not installed")

# A kernel with printf, assert (__assertfail), shfl, vote, atomics, a local array, a __noinline__ device function,
# constant and global memory with initializers, a by-value struct parameter, dynamic shared memory and clock64.
FEATURES_CU = r"""
extern "C" __device__ void __assertfail(const char*, const char*, unsigned, const char*, unsigned long);
struct Params { float scale; int n; float bias[4]; };
__constant__ float coeffs[16];
__constant__ int table[3] = {37, 100, 32};
__device__ float gbuf[8] = {1.5f, 2.0f};
__device__ __noinline__ float helper(float x, int k) { return x * coeffs[k & 15] + (float)table[k % 3]; }
extern "C" __global__ void __launch_bounds__(128, 1) kern(const float* __restrict__ a, float* out, int* cnt,
                                                          Params p) {
  __shared__ float s[128];
  extern __shared__ float dyn[];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float loc[32];
  for (int j = 0; j < 32; ++j) loc[j] = a[(i + j) % p.n];
  float v = loc[i & 31] * p.scale + p.bias[i & 3];
  v += __shfl_xor_sync(0xffffffff, v, 1);
  s[threadIdx.x] = v; dyn[threadIdx.x] = v;
  __syncthreads();
  v = helper(s[(threadIdx.x + 1) % 128], i) + dyn[0];
  if (v > 100.0f) atomicAdd(cnt, 1);
  if (i == 0) printf("v=%f i=%d\n", v, i);
  unsigned b = __ballot_sync(0xffffffff, v > 0.f);
  atomicMax(cnt + 1, (int)b);
  long long c = clock64();
  out[i] = v + (float)(c & 1) + gbuf[i & 7];
  if (i < 0) __assertfail("i >= 0", "k.cu", 27, "kern", 1);
}
"""
FEATURES_LINES = {"shfl": 16, "bar": 18, "atom.global.add": 20, "vote": 22, "atom.global.max": 23}
"""CUDA source line (in FEATURES_CU) of the first instruction of each opcode prefix."""

# Inlining (.loc's function_name / inlined_at), cluster directives, a 128-byte by-value parameter (CUtensorMap-
# sized, __grid_constant__) and a switch.
CLUSTER_CU = r"""
__device__ __forceinline__ float sq(float x) { return x * x; }
__device__ inline float f2(float x) { return sq(x) + 1.0f; }
struct __align__(64) TM { unsigned long long d[16]; };
extern "C" __global__ void __cluster_dims__(2,1,1) k2(float* out, const __grid_constant__ TM tm) {
  out[threadIdx.x] = f2(out[threadIdx.x]) + (float)tm.d[threadIdx.x & 15];
  int x = threadIdx.x;
  switch (x & 7) { case 0: x += 3; break; case 1: x *= 5; break; case 2: x ^= 9; break; case 3: x -= 11; break;
  case 4: x <<= 2; break; case 5: x = ~x; break; case 6: x = x/3; break; default: x = 0; }
  out[x & 63] = 1.0f;
}
"""

# Module variables nvcc writes with scalar hex-float and generic() initializers.
GLOBALS_CU = r"""
__device__ float gs = 1.5f;
__device__ double gd = 2.25;
__constant__ float cf[3] = {1.0f, 2.0f, 3.0f};
__device__ float* gp = &gs;
__device__ int* gpa[2] = {nullptr, (int*)&gd};
extern "C" __global__ void k3(float* o) {
  o[threadIdx.x] = gs + (float)gd + cf[threadIdx.x % 3] + *gp + (float)(long long)gpa[1];
}
"""


def _compile(src: str, arch: str, *, options=("-lineinfo",)) -> str:
    from simtc.hw.compile import compile_cuda

    return compile_cuda(src, arch=arch, output="ptx", options=options).decode()


def _sources() -> dict[str, tuple[str, str]]:
    from simtc.hw import tcgen05, timing, wgmma
    from simtc.hw.calibrate import sources

    out = {
        "features_sm90a": (FEATURES_CU, "sm_90a"),
        "features_sm100a": (FEATURES_CU, "sm_100a"),
        "cluster_sm100a": (CLUSTER_CU, "sm_100a"),
        "globals_sm90a": (GLOBALS_CU, "sm_90a"),
        "tcgen05_dual_qk": (tcgen05.kernel_source(), "sm_100a"),
        "wgmma_exec": (wgmma.kernel_source(64, "bf16", "K", "MN"), "sm_90a"),
        "wgmma_timing": (timing.kernel_source(64, "RS", depths=(1, 4)), "sm_90a"),
    }
    for module in ("sync", "sync_loop", "memory", "latency", "launch", "wgmma"):
        out[f"calibrate_{module}"] = (sources.module_source(module), sources.ARCH)
    return out


SOURCES = ("features_sm90a", "features_sm100a", "cluster_sm100a", "globals_sm90a", "tcgen05_dual_qk", "wgmma_exec",
           "wgmma_timing", "calibrate_sync", "calibrate_sync_loop", "calibrate_memory", "calibrate_latency",
           "calibrate_launch", "calibrate_wgmma")


@pytest.fixture(scope="module")
def compiled() -> dict[str, str]:
    if not HAVE_NVRTC:
        pytest.skip("cuda-bindings + nvidia-cuda-nvrtc (dev extra) not installed")
    return {k: _compile(src, arch) for k, (src, arch) in _sources().items()}


@pytest.fixture(scope="module")
def parsed(compiled):
    return {k: parse(text, name=f"{k}.ptx") for k, text in compiled.items()}


# ---- independent readings of the text, for the properties ----------------------------------------------------

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_SECTIONS = re.compile(r"\.section\s+\.\w+\s*\{.*?\}", re.S)
_STATEMENT_START = re.compile(r"(?:^|[;{}]|(?<!:):(?!:))[ \t]*(?:@!?[%\w$]+[ \t]+)?([a-z][a-z0-9]*)(?=[.\s;])", re.M)


def _instruction_starts(text: str) -> list[int]:
    """Line numbers of the instruction statements, read by one regex: an opcode at a line start or after ';', '{',
    '}' or a label's ':' (comments and debug sections removed first, line numbers kept)."""
    text = _COMMENTS.sub(lambda m: "\n" * m.group().count("\n"), text)
    text = _SECTIONS.sub(lambda m: "\n" * m.group().count("\n"), text)
    return [text.count("\n", 0, m.start(1)) + 1 for m in _STATEMENT_START.finditer(text) if m.group(1) in OPCODES]


def _names(op, out: list) -> None:
    if isinstance(op, Reg):
        out.append(op.name)
    elif isinstance(op, Address) and op.base is not None:
        _names(op.base, out)
    elif isinstance(op, Vector):
        for x in op.items:
            _names(x, out)
    elif isinstance(op, tuple):
        for x in op:
            _names(x, out)


def _registers(ins: Instruction) -> list[str]:
    out: list[str] = [ins.guard.reg] if ins.guard else []
    for op in (*ins.operands, *ins.call_returns, *((ins.call_target,) if ins.call_target is not None else ())):
        _names(op, out)
    return out


def _unrenamed_name(name: str, renamed: set[str]) -> str:
    if name not in renamed:
        return name
    m = re.fullmatch(r"(.*)\$\d+_(\d+)", name)
    return m.group(1) + m.group(2) if m else re.sub(r"\$\d+$", "", name)


def _unrenamed(ins: Instruction, renamed: set[str]) -> Instruction:
    """``ins`` with the names its blocks renamed (``t$3``, ``%x$2_1``, ``param0$1``) written back as in the text."""

    def back(name: str) -> str:
        return _unrenamed_name(name, renamed)

    def fix(op):
        if isinstance(op, Reg):
            return Reg(back(op.name), op.negated) if op.name in renamed else op
        if isinstance(op, Sym):
            new = back(op.name)
            if new != op.name:
                return Sym(new, op.offset)
            return op
        if isinstance(op, Address) and op.base is not None:
            return Address(fix(op.base), op.offset)
        if isinstance(op, Vector):
            return Vector(tuple(fix(x) for x in op.items))
        if isinstance(op, tuple):
            return tuple(fix(x) for x in op)
        return op

    guard = Guard(back(ins.guard.reg), ins.guard.negated) if ins.guard else None
    return attrs.evolve(ins, operands=tuple(fix(o) for o in ins.operands), guard=guard,
                        call_returns=tuple(fix(o) for o in ins.call_returns),
                        call_target=fix(ins.call_target) if ins.call_target is not None else None,
                        call_prototype=fix(ins.call_prototype) if ins.call_prototype is not None else None)


def _check_module(text: str, m) -> None:
    bodies = [f for f in m.functions.values() if not f.is_declaration]
    # one Instruction per instruction statement, in order, on the statement's first line
    lines = [i.line for f in bodies for i in f.body]
    assert lines == _instruction_starts(text)
    src_lines = text.split("\n")
    label_lines: dict[str, int] = {}
    for n, s in enumerate(src_lines, 1):
        lm = re.match(r"\s*([A-Za-z_$][\w$]*)\s*:(?!:)", s)
        if lm:
            label_lines.setdefault(lm.group(1), n)
    module_names = {v.name for v in m.variables} | set(m.functions)
    for f in bodies:
        declared = {n for d in f.registers for n in d.names()}
        renamed = ({n for d in f.registers for n in d.names() if re.search(r"\$\d+(_\d+)?$", n)}
                   | {v.name for v in f.variables if re.search(r"\$\d+$", v.name)}
                   | {n for n in f.labels if re.search(r"\$\d+$", n)}) - module_names
        bare = {n for d in f.registers for n in d.names() if n[0] != "%"}
        bare = {_unrenamed_name(n, renamed) for n in bare}
        for ins in f.body:
            # every register used is declared (or is a special register)
            for r in _registers(ins):
                assert r in declared or is_special_register(r), (f.name, ins.line, r)
            # the text re-parses to the same instruction
            again = parse_instruction(ins.text, line=ins.line, registers=bare)
            assert attrs.evolve(again, loc=ins.loc) == _unrenamed(ins, renamed), ins.text
            # the text is the statement as written, whitespace aside
            first = " ".join(src_lines[ins.line - 1].split())
            assert ins.text.split(" ", 1)[0] in first, (ins.line, ins.text, first)
        # each label names the first instruction after it
        for label, idx in f.labels.items():
            if label in renamed:
                continue
            at = label_lines[label]
            if idx < len(f.body):
                assert f.body[idx].line >= at, (label, idx)
            if idx > 0:
                assert f.body[idx - 1].line <= at, (label, idx)


@needs_compiler
@pytest.mark.parametrize("key", SOURCES)
def test_compiled_ptx_parses_with_its_properties(compiled, parsed, key):
    _check_module(compiled[key], parsed[key])


@needs_compiler
@pytest.mark.slow
@pytest.mark.parametrize("module", ["alu", "pairs", "smem"])
def test_large_calibration_modules_parse(module):
    from simtc.hw.calibrate import sources

    text = _compile(sources.module_source(module), sources.ARCH)
    _check_module(text, parse(text))


def _bench():
    """benchmarks/bench_ptx_parse.py, whose builders compile CuTe's tutorial and FlashMLA's kernel (cached)."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_ptx_parse.py"
    spec = importlib.util.spec_from_file_location("bench_ptx_parse", path)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(path.parent))
    return mod


@pytest.mark.slow
@pytest.mark.parametrize("which", ["cute02", "cute02_lineinfo", "flashmla_head64"])
def test_cutlass_and_flashmla_ptx_parse(which):
    bench = _bench()
    get = {"cute02": lambda: bench.cute_tutorial_02(lineinfo=False),
           "cute02_lineinfo": lambda: bench.cute_tutorial_02(lineinfo=True), "flashmla_head64": bench.flashmla_head64}
    try:
        text = get[which]()
    except (RuntimeError, SimtcError) as e:  # no nvcc, no CUTLASS wheel, or SIMTC_FLASHMLA_DIR unset
        pytest.skip(str(e))
    m = parse(text)
    _check_module(text, m)
    ops = {i.opcode for f in m.functions.values() for i in f.body}
    assert {"tcgen05", "mbarrier", "elect"} <= ops


@needs_compiler
def test_debug_build_with_sections_parses(compiled):
    text = _compile(CLUSTER_CU, "sm_100a", options=("-G",))
    m = parse(text)
    assert m.target == ("sm_100a", "debug")
    assert ".section" in text and "$L__info_string0" not in {v.name for v in m.variables}
    _check_module(text, m)
    assert m.functions["_Z2f2f"].linkage == "weak"


@needs_compiler
def test_features_kernel_structure(parsed):
    m = parsed["features_sm90a"]
    assert m.version == "9.0" and m.target == ("sm_90a",) and m.address_size == 64
    assert m.kernels() == ("kern",)
    assert m.functions["vprintf"].is_declaration and m.functions["__assertfail"].is_declaration
    assert [p.name for p in m.functions["vprintf"].returns] == ["func_retval0"]
    k = m.functions["kern"]
    assert k.entry and k.linkage == "visible"
    assert k.directives == {"maxntid": (128, 1, 1), "minnctapersm": (1,)}
    struct = k.params[3]
    assert (struct.type, struct.shape, struct.size, struct.align) == ("b8", (24,), 24, 4)
    var = {v.name: v for v in m.variables}
    assert var["table"].space == "const" and var["table"].init[:5] == (37, 0, 0, 0, 100)
    assert var["gbuf"].init[:4] == (0, 0, 0xC0, 0x3F)  # 1.5f, little-endian bytes
    assert var["dyn"].linkage == "extern" and var["dyn"].shape == (0,) and var["dyn"].size == 0
    assert bytes(var["$str"].init).startswith(b"v=%f i=%d\n")
    local = {v.name: v for v in k.variables}
    assert local["__local_depot1"].space == "local" and local["__local_depot1"].size >= 128
    # call sequences: their .param variables renamed per block, arguments and returns in order
    calls = [i for i in k.body if i.opcode == "call"]
    assert [c.call_target for c in calls] == [Sym("_Z6helperfi"), Sym("vprintf"), Sym("__assertfail")]
    assert calls[0].call_returns == (Sym("retval0$1"),) and calls[0].operands == (Sym("param0$1"), Sym("param1$1"))
    assert calls[2].call_returns == () and len(calls[2].operands) == 5
    assert {"param0$1", "retval0$1", "param4$3"} <= set(local)
    st = next(i for i in k.body if i.name.startswith("st.param") and i.line > calls[0].line - 8)
    assert st.operands[0] == Address(Sym("param0$1"), 0)
    shfl = next(i for i in k.body if i.opcode == "shfl")
    assert isinstance(shfl.operands[0], tuple) and all(isinstance(r, Reg) for r in shfl.operands[0])
    helper = m.functions["_Z6helperfi"]
    assert not helper.entry and [p.name for p in helper.returns] == ["func_retval0"]


@needs_compiler
@pytest.mark.parametrize("key", ["features_sm90a", "features_sm100a"])
def test_loc_maps_instructions_to_cuda_lines(parsed, key):
    k = parsed[key].functions["kern"]
    for prefix, line in FEATURES_LINES.items():
        ins = next(i for i in k.body if i.name.startswith(prefix))
        assert ins.loc is not None and ins.loc.line == line, (prefix, ins.loc)
        assert ins.loc.file.endswith("kernel.cu")
    printf = next(i for i in k.body if i.call_target == Sym("vprintf"))
    assert printf.loc.line == 21


@needs_compiler
def test_loc_function_name_and_inlined_at(parsed):
    m = parsed["cluster_sm100a"]
    k = m.functions["k2"]
    assert k.directives == {"explicitcluster": (), "reqnctapercluster": (2, 1, 1)}
    assert (k.params[0].ptr, k.params[0].align) == (True, 1)
    assert (k.params[1].shape, k.params[1].align, k.params[1].size) == ((128,), 64, 128)
    inlined = [i for i in k.body if i.loc is not None and i.loc.inlined_at is not None]
    assert inlined and inlined[0].loc.function == "_Z2f2f"  # read from the .debug_str section
    assert (inlined[0].loc.line, inlined[0].loc.inlined_at.line) == (3, 6)


@needs_compiler
def test_module_variable_initializers_as_nvcc_writes_them(parsed):
    v = {x.name: x for x in parsed["globals_sm90a"].variables}
    assert v["gs"].init == (Imm(0x3FC00000, "f32"),) and v["gs"].shape == ()  # 1.5f, bits kept
    assert v["gd"].init == (Imm(0x4002000000000000, "f64"),)  # 2.25
    assert v["cf"].init[:4] == (0, 0, 0x80, 0x3F)
    assert v["gp"].init == (Sym("gs"),) and v["gpa"].init == (0, Sym("gd"))  # generic(gs), generic(gd)


@needs_compiler
def test_tcgen05_inline_asm_blocks_are_flattened(parsed):
    f = parsed["tcgen05_dual_qk"].functions["simtc_tcgen05_dual_qk"]
    inner = [d for d in f.registers if "$" in d.name]
    assert inner and all(d.count is None for d in inner)
    mma = [i for i in f.body if i.opcode == "tcgen05" and ".mma" in i.name]
    assert mma and all(isinstance(i.operands[-1], Reg) and "$" in i.operands[-1].name for i in mma)
    assert len({i.operands[-1].name for i in mma}) == len(mma)  # each block's `p` is its own register
    assert any(isinstance(i.operands[0], Address) and i.operands[0].offset == -4096 for i in f.body)


def test_import_simtc_does_not_import_the_parser():
    code = "import sys, simtc; assert 'simtc.ptx.parser' not in sys.modules and 'simtc.ptx' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- hand-written PTX ----------------------------------------------------------------------------------------

HEAD = ".version 9.0\n.target sm_100a\n.address_size 64\n"


def _body(text: str, *, regs: str = ".reg .b32 %r<10>;\n.reg .b64 %rd<10>;\n.reg .pred %p<4>;\n.reg .f32 %f<4>;\n",
          prelude: str = ""):
    m = parse(HEAD + prelude + ".visible .entry k(.param .u64 k_param_0)\n{\n" + regs + text + "\n}\n")
    return m.functions["k"]


@pytest.mark.parametrize(("text", "value"), [
    ("42", Imm(42)), ("-4096", Imm(-4096)), ("0x1F", Imm(31)), ("0XfF", Imm(255)), ("017", Imm(15)),
    ("0b101", Imm(5)), ("32U", Imm(32)), ("0xFFFFFFFFU", Imm(0xFFFFFFFF)), ("-0x10", Imm(-16)), ("0", Imm(0)),
    ("0f3F800000", Imm(0x3F800000, "f32")), ("0FBF800000", Imm(0xBF800000, "f32")),
    ("0d3FF0000000000000", Imm(0x3FF0000000000000, "f64")), ("1.5", Imm(1.5, "float")),
    ("-2.5e-3", Imm(-2.5e-3, "float")), ("1e10", Imm(1e10, "float")),
])
def test_immediates(text, value):
    assert parse_instruction(f"add.s32 %r1, %r2, {text};").operands[2] == value


@pytest.mark.parametrize(("text", "value"), [
    ("[%rd1+-4096]", Address(Reg("%rd1"), -4096)), ("[%rd1-8]", Address(Reg("%rd1"), -8)),
    ("[%rd1 + 16]", Address(Reg("%rd1"), 16)), ("[sym+8]", Address(Sym("sym"), 8)), ("[%r1]", Address(Reg("%r1"))),
    ("[0x100]", Address(None, 256)), ("[k_param_0]", Address(Sym("k_param_0"))),
])
def test_addresses(text, value):
    assert parse_instruction(f"ld.global.u32 %r1, {text};").operands[1] == value


def test_operand_forms():
    i = parse_instruction("@!%p1 ld.global.v4.u32 {%r1, %r2, _, %r4}, [%rd1];")
    assert i.guard == Guard("%p1", True)
    assert i.operands[0] == Vector((Reg("%r1"), Reg("%r2"), Sink(), Reg("%r4")))
    i = parse_instruction("setp.lt.and.s32 %p1|%p2, %r1, %r2, !%p3;")
    assert i.operands[0] == (Reg("%p1"), Reg("%p2")) and i.operands[-1] == Reg("%p3", negated=True)
    i = parse_instruction("mov.u32 %r1, %cluster_ctarank;")
    assert i.operands[1] == Reg("%cluster_ctarank")
    assert parse_instruction("mov.u64 %rd1, gvar+8;").operands[1] == Sym("gvar", 8)
    i = parse_instruction("tcgen05.mma.cta_group::1.kind::f16 [%r1], %rd1, %rd2, %r2, %p1;")
    assert i.name == "tcgen05.mma.cta_group::1.kind::f16" and i.modifiers[:2] == ("mma", "cta_group::1")
    assert parse_instruction("ret;").operands == () and parse_instruction("exit").name == "exit"


@pytest.mark.parametrize("name", ["%tid.x", "%ntid.z", "%ctaid.y", "%nctaid.x", "%laneid", "%warpid", "%clock",
                                  "%clock64", "%globaltimer", "%globaltimer_lo", "%envreg0", "%envreg31",
                                  "%dynamic_smem_size", "%cluster_ctarank", "%cluster_ctaid.x", "%lanemask_lt",
                                  "%smid", "%pm3", "%total_smem_size", "%is_explicit_cluster"])
def test_special_registers_need_no_declaration(name):
    f = _body(f"mov.u32 %r1, {name};")
    assert f.body[0].operands[1] == Reg(name)


def test_blocks_scope_registers_params_and_labels():
    f = _body("""
    { .reg .u64 t; cvta.to.shared.u64 t, %rd1; cvt.u32.u64 %r1, t; }
    { .reg .u64 t; .reg .b32 %x<2>; mov.u64 t, 1; mov.b32 %x1, 2; }
    {
      .reg .pred P1;
    LAB_WAIT:
      mbarrier.try_wait.parity.shared::cta.b64 P1, [%r1], %r2;
      @P1 bra DONE;
      bra LAB_WAIT;
    DONE:
    }
    {
      .reg .pred P1;
    LAB_WAIT:
      mbarrier.try_wait.parity.shared::cta.b64 P1, [%r1], %r2;
      @!P1 bra LAB_WAIT;
    }
    { // callseq 0, 0
    .param .b64 param0;
    st.param.b64 [param0+0], %rd1;
    .param .b32 retval0;
    call.uni (retval0),
    g,
    (
    param0
    );
    ld.param.b32 %r3, [retval0+0];
    } // callseq 0
    ret;
    """, prelude=".extern .func (.param .b32 r) g(.param .b64 a);\n")
    b = f.body
    assert b[0].operands[0] == Reg("t$1") and b[1].operands[1] == Reg("t$1")
    assert b[2].operands[0] == Reg("t$2") and b[3].operands[0] == Reg("%x$2_1")
    assert {d.name for d in f.registers} >= {"t$1", "t$2", "%x$2_", "P1$3", "P1$4"}
    assert f.labels["LAB_WAIT$3"] == 4 and f.labels["DONE$3"] == 7 and f.labels["LAB_WAIT$4"] == 7
    assert b[5] .guard == Guard("P1$3") and b[5].operands == (Sym("DONE$3"),) and b[6].operands == (Sym("LAB_WAIT$3"),)
    assert b[8].guard == Guard("P1$4", True) and b[8].operands == (Sym("LAB_WAIT$4"),)
    call = b[10]
    assert call.text == "call.uni (retval0), g, (param0);"
    assert (call.call_returns, call.call_target, call.operands) == ((Sym("retval0$5"),), Sym("g"), (Sym("param0$5"),))
    assert b[11].operands[1] == Address(Sym("retval0$5"))
    assert call.line == b[9].line + 2


def test_brx_idx_branchtargets_and_indirect_call_prototype():
    m = parse(HEAD + """
.func (.param .b32 r) f(.param .b32 a) { .reg .b32 %q; ld.param.b32 %q, [a]; st.param.b32 [r], %q; ret; }
.visible .entry k()
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<2>;
    ts: .branchtargets L0, L1;
    brx.idx %r1, ts;
L0:
    mov.u64 %rd1, f;
    {
    .param .b32 p0;
    .param .b32 r0;
    st.param.b32 [p0], %r1;
    proto_0 : .callprototype (.param .b32 _) _ (.param .b32 _);
    call (r0), %rd1, (p0), proto_0;
    ld.param.b32 %r2, [r0];
    }
L1:
    ret;
}
""")
    k = m.functions["k"]
    assert k.branch_targets == {"ts": ("L0", "L1")} and "ts" not in k.labels
    assert k.labels == {"L0": 1, "L1": 5}
    assert k.body[0].operands == (Reg("%r1"), Sym("ts"))
    call = k.body[3]
    assert call.call_target == Reg("%rd1") and call.call_prototype == Sym("proto_0$1")  # block-local, renamed
    assert k.prototypes == {"proto_0$1": ".callprototype (.param .b32 _) _ (.param .b32 _)"}
    assert not m.functions["f"].entry and m.functions["f"].body[0].operands[1] == Address(Sym("a"))


def test_module_variables_initializers_and_linkage():
    m = parse(HEAD + """
.global .align 4 .u32 counts[3] = {37, 100, 32};
.global .align 8 .u64 ptrs[3] = {counts, counts+8, generic(counts)+4};
.const .align 4 .f32 w[2] = {0f3F800000, 1.5};
.global .align 4 .b8 grid2[2][2] = {{1, 2}, {3, 4}};
.weak .global .align 4 .u32 wk;
.common .global .align 4 .u32 cm;
.extern .shared .align 1024 .b8 smem[];
.shared .align 16 .v4 .f32 vec4;
.global .u32 a, b = 5;
/* a block comment
   over lines */ .pragma "nounroll";
.extern .func (.param .b32 func_retval0) vprintf(.param .b64 vprintf_param_0, .param .b64 vprintf_param_1);
""")
    v = {x.name: x for x in m.variables}
    assert v["counts"].init == (37, 100, 32) and v["counts"].size == 12 and v["counts"].align == 4
    assert v["ptrs"].init == (Sym("counts"), Sym("counts", 8), Sym("counts", 4))
    assert v["w"].init == (Imm(0x3F800000, "f32"), 1.5)
    assert v["grid2"].shape == (2, 2) and v["grid2"].init == (1, 2, 3, 4)
    assert (v["wk"].linkage, v["cm"].linkage, v["smem"].linkage) == ("weak", "common", "extern")
    assert v["smem"].shape == (0,) and v["smem"].align == 1024
    assert v["vec4"].vector == 4 and v["vec4"].size == 16
    assert v["a"].init is None and v["b"].init == (5,)
    assert m.functions["vprintf"].is_declaration and m.kernels() == ()


def test_perf_directives_and_param_attributes():
    m = parse(HEAD + """
.visible .entry k(.param .u64 .ptr .global .align 16 k_p0, .param .align 64 .b8 k_tmap[128], .param .u32 k_n)
.maxntid 128, 1, 1
.reqntid 128
.minnctapersm 1
.maxnreg 168
.maxclusterrank 8
{
    ret;
}
""")
    k = m.functions["k"]
    assert k.directives == {"maxntid": (128, 1, 1), "reqntid": (128,), "minnctapersm": (1,), "maxnreg": (168,),
                            "maxclusterrank": (8,)}
    p0, tmap, n = k.params
    assert (p0.ptr, p0.ptr_space, p0.align, p0.size) == (True, "global", 16, 8)
    assert (tmap.shape, tmap.align, tmap.size) == ((128,), 64, 128)
    assert (n.type, n.size) == ("u32", 4)


def test_text_is_normalised_and_loc_follows_the_last_directive():
    m = parse(HEAD + """
.file 1 "/src/k.cu", 1700000000, 1234
.visible .entry k()
{
    .reg .b32 %r<4>;
    .loc 1 7 5
    add.s32   %r1,%r2 ,  %r3;   // comment
    .loc 1 0 5
    st.shared.v2.u32 [ %r1 + 4 ],
        { %r2 , %r3 };
}
""")
    a, b = m.functions["k"].body
    assert a.text == "add.s32 %r1, %r2, %r3;" and str(a.loc) == "/src/k.cu:7" and a.loc.column == 5
    assert b.text == "st.shared.v2.u32 [%r1 + 4], {%r2, %r3};" and b.loc.line == 0
    assert m.files == {1: "/src/k.cu"}


# ---- malformed PTX --------------------------------------------------------------------------------------------

BAD = [
    # (snippet inside a kernel body starting at line 7, line of the error, words in the message)
    ("add.s32 %r1, %r2 %r3;", 7, "register"),
    ("add.s32 %r1, %r2, ;", 7, "operand"),
    ("frobnicate.s32 %r1, %r2;", 7, "not a PTX ISA 9.0 instruction"),
    ("add.s32 %r1, %r2, 0x;", 7, "number"),
    ("add.s32 %r1, %r2, 08;", 7, "number"),
    ("ld.global.u32 %r1, [%rd1+];", 7, "address"),
    ("ld.global.u32 %r1, [%rd1;", 7, "']'"),
    ("mov.u32 %r1, %r99;", 7, "%r99 is not declared"),
    ("\nmov.u32 %r1, %bogus;", 8, "%bogus is not declared"),
    ("bra $L__nowhere;", 7, "$L__nowhere is not declared"),
    ("ld.param.u64 %rd1, [no_such_param];", 7, "no_such_param is not declared"),
    ("L1:\nL1:\nret;", 8, "defined twice"),
    (".reg .b32 %r<3>;", 7, "declared twice"),
    (".reg .q32 %z;", 7, ".reg"),
    (".frob 1;", 7, "unknown directive"),
    ("mov.u32 %r1, 1\n.loc 1 2 3\nret;", 7, "';'"),
    ("st.global.v2.u32 [%rd1], {%r1, %r2;", 7, "'{'"),
    ("add.s32 %r1, %r2, 1;\n}\n}", 9, "'}' without an open block"),
    ("a b: ret;", 7, "label"),
    ("call.uni (r0), ;", 7, "call"),
    (".loc x 1 2", 7, ".loc"),
    ("@%p1 add.s32 %r1 %r2;", 7, "register"),
    ("mov.u32 %r1, {};", 7, "empty vector"),
]


@pytest.mark.parametrize(("snippet", "line", "words"), BAD)
def test_malformed_ptx_names_its_line(snippet, line, words):
    text = HEAD + ".visible .entry k()\n{\n.reg .b32 %r<3>; .reg .b64 %rd<3>; .reg .pred %p<2>;\n" + snippet + "\n}\n"
    assert text.split("\n")[6].startswith(snippet.split("\n")[0])
    with pytest.raises(PtxSyntaxError) as e:
        parse(text, name="bad.ptx")
    assert e.value.line == line, str(e.value)
    assert words in str(e.value), str(e.value)
    assert str(e.value).startswith(f"bad.ptx:{line}: ")
    assert isinstance(e.value, ValueError) and e.value.rule


@pytest.mark.parametrize(("text", "line", "words"), [
    (".target sm_90a\n.visible .entry k() { ret; }\n", 1, ".version"),
    (".version 9.0\n.visible .entry k() { ret; }\n", 1, ".target"),
    (HEAD + ".version 9.0\n", 4, "second .version"),
    (HEAD + ".address_size 48\n", 4, ".address_size"),
    (HEAD + "add.s32 %r1, %r2, %r3;\n", 4, "module scope"),
    (HEAD + ".visible .entry k()\n{\n.reg .b32 %r1;\nret;\n", 4, "not closed"),
    (HEAD + ".global .u32 x = {1, 2;\n", 4, "'{'"),
    (HEAD + ".global .align 3 .u32 x;\n", 4, "power of two"),
    (HEAD + ".global .u32 x[abc];\n", 4, "array size"),
    (HEAD + ".visible .entry k(.param k_param_0)\n{\nret;\n}\n", 4, "type"),
    (HEAD + ".visible .entry k()\n.maxntid 128, x\n{\nret;\n}\n", 4, "performance directive"),
    (HEAD + ".visible .entry k()\n{\nret;\n}\n.visible .entry k()\n{\nret;\n}\n", 8, "defined twice"),
    (HEAD + "{\n}\n", 4, "outside a function"),
    (HEAD + ".global .u32 x\n", 4, "';'"),
    (HEAD + ".visible .entry k()\n{\nret;\n/* never closed\n}\n", 7, "never closed"),
])
def test_malformed_modules_name_their_line(text, line, words):
    with pytest.raises(PtxSyntaxError) as e:
        parse(text)
    assert e.value.line == line, str(e.value)
    assert words in str(e.value), str(e.value)


def test_valid_but_unsupported_ptx_is_named():
    with pytest.raises(PtxUnsupported, match="texture"):
        _body("tex.2d.v4.f32.f32 {%f0, %f1, %f2, %f3}, [tex0, {%f1, %f2}];")
    with pytest.raises(PtxUnsupported, match="alias"):
        parse(HEAD + ".alias fa, fb;\n")


@needs_compiler
def test_mutated_ptx_raises_only_ptx_errors(compiled):
    """Characters deleted, inserted or replaced in real PTX: the parse succeeds or raises a PtxError naming a
    line, never another exception."""
    import random

    from simtc.ptx.errors import PtxError

    base = compiled["features_sm90a"]
    rng = random.Random(26)
    pieces = [*";{}[](),:|!@%._-+\"/*\n ", "//", "/*", "*/", "0f", "::", "<", ">", "="]
    for _ in range(150):
        t = list(base)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(t))
            r = rng.random()
            if r < 0.4:
                del t[i]
            elif r < 0.8:
                t.insert(i, rng.choice(pieces))
            else:
                t[i] = rng.choice(pieces)
        try:
            parse("".join(t))
        except PtxSyntaxError as e:
            assert e.line is not None and e.line >= 1
        except PtxError:
            pass
