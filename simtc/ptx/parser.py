"""PTX text into :class:`simtc.ptx.ir.Module`: the front end of simtc's PTX executor.

:func:`parse` reads PTX as nvcc 13 and NVRTC emit it (PTX ISA up to 9.0): the module directives, ``.file``/``.loc``
(``-lineinfo``), ``.entry``/``.func`` with their parameters, return parameters, linkage and performance directives,
register and variable declarations, nested ``{ ... }`` blocks (inline asm, call sequences) whose names are renamed
so each function has one flat register file, labels, ``.section .debug_*`` blocks (skipped; ``.debug_str`` is read
for ``.loc``'s function names), and every instruction with its guard and operands.

>>> m = parse('''
... .version 9.0
... .target sm_90a
... .address_size 64
... .visible .entry k(.param .u64 k_param_0)
... {
...     .reg .b32 %r<3>;
...     .reg .pred %p<2>;
...     mov.u32 %r1, %tid.x;
...     setp.eq.s32 %p1, %r1, 0;
...     @!%p1 bra $L__BB0_2;
...     { .reg .b32 t; add.s32 t, %r1, 0x10; mov.b32 %r2, t; }
... $L__BB0_2:
...     ret;
... }
... ''')
>>> f = m.functions["k"]
>>> [str(i) for i in f.body]
['mov.u32 %r1, %tid.x;', 'setp.eq.s32 %p1, %r1, 0;', '@!%p1 bra $L__BB0_2;', 'add.s32 t, %r1, 0x10;', \
'mov.b32 %r2, t;', 'ret;']
>>> f.body[3].operands, f.labels
((Reg(name='t$1', negated=False), Reg(name='%r1', negated=False), Imm(value=16, kind='int')), {'$L__BB0_2': 5})

Anything it cannot read raises :class:`~simtc.ptx.errors.PtxSyntaxError` naming the line, the statement and what
was expected; valid PTX simtc does not represent (texture/surface operands, ``.alias``) raises
:class:`~simtc.ptx.errors.PtxUnsupported`. The parser is a regex tokenizer and a small statement parser (no
grammar library): one scan per line finds the statement boundaries (``;``, ``{``, ``}``, labels' ``:``, strings,
comments), and operands, which repeat a lot, are parsed once per distinct text (``benchmarks/bench_ptx_parse.py``).

PTX ISA 9.0 references: §4 (syntax: comments, statements, identifiers, constants), §5.1 and §5.4 (state spaces and
variables), §6.4 (operands and addresses), §10 (special registers), §11 (directives).
"""

from __future__ import annotations

import gc
import re
from collections.abc import Collection

import attrs

from simtc.errors import SimtcError
from simtc.ptx.errors import PtxSyntaxError, PtxUnsupported
from simtc.ptx.ir import (
    Address,
    Function,
    Guard,
    Imm,
    Instruction,
    Loc,
    Module,
    Param,
    Reg,
    RegDecl,
    Sink,
    Sym,
    TensorRef,
    Variable,
    Vector,
)

__all__ = ["OPCODES", "is_special_register", "parse", "parse_instruction"]

REF_SYNTAX = "PTX ISA 9.0 §4"
REF_VARIABLES = "PTX ISA 9.0 §5.4"
REF_OPERANDS = "PTX ISA 9.0 §6.4"
REF_DIRECTIVES = "PTX ISA 9.0 §11"

_OPCODE_NAMES = """
abs activemask add addc alloca and applypriority atom bar barrier bfe bfi bfind bmsk bra brev brkpt brx call
clusterlaunchcontrol clz cnot copysign cos cp createpolicy cvt cvta discard div dp2a dp4a elect ex2 exit fence fma
fns getctarank griddepcontrol isspacep istypep ld ldmatrix ldu lg2 lop3 mad mad24 madc mapa match max mbarrier membar
min mma mov movmatrix multimem mul mul24 nanosleep neg not or pmevent popc prefetch prefetchu prmt rcp red redux rem
ret rsqrt sad selp set setmaxnreg setp shf shfl shl shr sin slct sqrt st stackrestore stacksave stmatrix sub subc suld
suq sured sust szext tanh tcgen05 tensormap testp tex tld4 trap txq vabsdiff vabsdiff2 vabsdiff4 vadd vadd2 vadd4
vavrg2 vavrg4 vmad vmax vmax2 vmax4 vmin vmin2 vmin4 vote vset vset2 vset4 vshl vshr vsub vsub2 vsub4 wgmma wmma xor
"""
OPCODES = frozenset(_OPCODE_NAMES.split())
"""The first dotted part of every PTX ISA 9.0 instruction (§9.7); anything else is refused as a syntax error."""

_TYPE_NAMES = """
b8 b16 b32 b64 b128 u8 u16 u32 u64 s8 s16 s32 s64 f16 f16x2 bf16 bf16x2 f32 f64 pred tf32 e4m3 e5m2 e4m3x2 e5m2x2
e2m1x2 e3m2x2 e2m3x2 ue8m0x2
"""
_TYPES = frozenset(_TYPE_NAMES.split())
_SPACES = frozenset(("global", "shared", "const", "local", "param"))
_LINKAGE = frozenset(("visible", "extern", "weak", "common"))
_LINE_DIRECTIVES = (".loc", ".file", ".version", ".target", ".address_size", ".section", "@@dwarf", "@@DWARF")

_SCAN = re.compile(r'"(?:[^"\\\n]|\\.)*"|//|/\*|[;{}]|(?<!:):(?!:)')
_IDENT = re.compile(r"[A-Za-z_$%][\w$]*")
_LABEL = re.compile(r"[A-Za-z_$][\w$]*")
_REG = re.compile(r"%[\w$]+(?:\.[xyzw])?")
_INSTR = re.compile(r"(?:@\s*(!?)\s*([%A-Za-z_$][\w$]*)\s+)?([A-Za-z_]\w*(?:\.[\w:$]+)*)\s*(.*)", re.S)
_F32 = re.compile(r"0[fF]([0-9a-fA-F]{8})")
_F64 = re.compile(r"0[dD]([0-9a-fA-F]{16})")
_INT = re.compile(r"([-+]?)(0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)U?")
_FLOAT = re.compile(r"[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?[0-9]+[eE][-+]?[0-9]+")
_SYM_OFF = re.compile(r"([A-Za-z_$][\w$]*)\s*(?:([+-])\s*([-+]?\s*\w+))?")
_ADDR = re.compile(r"([%A-Za-z_$][\w$]*(?:\.[xyz])?)\s*(?:([+-])\s*([-+]?\s*\w+))?")
_GENERIC = re.compile(r"generic\s*\(\s*([A-Za-z_$][\w$]*)\s*(?:([+-])\s*(\w+))?\s*\)\s*(?:([+-])\s*(\w+))?")
_LOC = re.compile(r"\.loc\s+(\d+)\s+(\d+)(?:\s+(\d+))?"
                  r"(?:\s*,\s*function_name\s+([A-Za-z_$][\w$]*)(?:\s*\+\s*(\d+))?)?"
                  r"(?:\s*,\s*inlined_at\s+(\d+)\s+(\d+)(?:\s+(\d+))?)?\s*")
_FILE = re.compile(r'\.file\s+(\d+)\s+"((?:[^"\\]|\\.)*)"(?:\s*,\s*\d+\s*,\s*\d+)?\s*')
_FILE_SCAN = re.compile(r'^[ \t]*\.file\s+(\d+)\s+"((?:[^"\\\n]|\\.)*)"', re.M)
_DEBUG_STR = re.compile(r"\.section\s+\.debug_str\s*\{(.*?)\}", re.S)
_DIRECTIVE = re.compile(r"\.(\w+)\s*((?:[0-9]+\s*,\s*)*[0-9]+)?\s*")
_REG_DECL = re.compile(r"\.reg\s+(?:\.v(\d+)\s+)?\.(\w+)\s+(.+)", re.S)
_REG_NAME = re.compile(r"([%A-Za-z_$][\w$]*)\s*(?:<\s*(\d+)\s*>)?")
_HEAD_TOKEN = re.compile(r"\s*(\.[\w:]+)")
_DECLARATOR = re.compile(r"([A-Za-z_$%][\w$]*)\s*((?:\[\s*[0-9xXa-fA-F]*\s*\]\s*)*)(?:=\s*(.*))?", re.S)
_NORM_SPACE = re.compile(r"\s*,\s*|\s*\|\s*|(?<=[\[({])\s+|\s+(?=[\])}])")

_SPECIAL = re.compile(
    r"%(?:tid|ntid|ctaid|nctaid|clusterid|nclusterid|cluster_ctaid|cluster_nctaid)(?:\.[xyzw])?"
    r"|%(?:laneid|warpid|nwarpid|smid|nsmid|gridid|is_explicit_cluster|cluster_ctarank|cluster_nctarank"
    r"|lanemask_(?:eq|le|lt|ge|gt)|clock|clock_hi|clock64|pm[0-7](?:_64)?|envreg(?:[12]?[0-9]|3[01])"
    r"|globaltimer(?:_lo|_hi)?|reserved_smem_offset_(?:begin|end|cap|[01])|total_smem_size|aggr_smem_size"
    r"|dynamic_smem_size|current_graph_exec)")


def is_special_register(name: str) -> bool:
    """Whether ``name`` is one of PTX's predefined read-only registers (PTX ISA 9.0 §10: ``%tid.x``, ``%laneid``,
    ``%clock64``, ``%envreg3``, ``%dynamic_smem_size``, ``%cluster_ctarank``, ...).

    >>> is_special_register("%ctaid.y"), is_special_register("%envreg31"), is_special_register("%r1")
    (True, True, False)
    """
    return _SPECIAL.fullmatch(name) is not None


def parse(text: str, *, name: str = "<ptx>") -> Module:
    """Parse a whole PTX module. ``name`` names the source in error messages and :attr:`Module.source_name`.

    Raises :class:`~simtc.ptx.errors.PtxSyntaxError` (line, statement, what was expected) for text that is not
    PTX, :class:`~simtc.ptx.errors.PtxUnsupported` for valid PTX simtc does not represent.
    """
    p = _Parser(text, name)
    # The parse allocates many small acyclic objects; the cyclic collector's passes over them cost a third of the
    # time on large modules (benchmarks/bench_ptx_parse.py), so it is paused meanwhile.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return p.run()
    except SimtcError:
        raise
    except (ValueError, IndexError, KeyError, TypeError, AttributeError, OverflowError, RecursionError) as e:
        raise PtxSyntaxError(f"{name}:{p.line}: cannot read this line ({type(e).__name__}: {e})",
                             rule="PTX syntax", ref=REF_SYNTAX, line=p.line, text=p.line_text()) from e
    finally:
        if collecting:
            gc.enable()


def parse_instruction(text: str, *, line: int = 0, registers: Collection[str] = ()) -> Instruction:
    """Parse one instruction statement on its own (``;`` optional), with names exactly as written: no scope,
    no declaration checks. A name without ``%`` is a :class:`~simtc.ptx.ir.Sym` unless ``registers`` names it
    (a block's ``.reg .pred p``). ``parse_instruction(i.text)`` gives back ``i`` for an instruction ``i`` of a
    parsed function, except for its ``loc`` and for names the function's blocks renamed.

    >>> i = parse_instruction("@%p1 ld.global.nc.v2.u32 {%r1, _}, [%rd2+-8];")
    >>> i.guard, i.operands
    (Guard(reg='%p1', negated=False), (Vector(items=(Reg(name='%r1', negated=False), Sink())), \
Address(base=Reg(name='%rd2', negated=False), offset=-8)))
    """
    p = _Parser("", "<instruction>")
    p.line = line
    p.fn = _FunctionBuilder("<instruction>", True, line)
    names = {n: n for n in registers}
    p.fn.scopes.append(_Scope("", 0, names, set(names)))
    p.fn.active.update(names)
    stmt = text.strip()
    if stmt.endswith(";"):
        stmt = stmt[:-1]
    p._instruction(stmt, line)
    return p.fn.body[0]


# --------------------------------------------------------------------------------------------------------------
# internals


@attrs.define
class _Scope:
    """One ``{ ... }`` block of a function: the names it declares (old -> new) and which new names are registers."""

    suffix: str
    start: int
    names: dict[str, str] = attrs.field(factory=dict)
    regs: set[str] = attrs.field(factory=set)
    labels: dict[str, str] = attrs.field(factory=dict)


@attrs.define
class _FunctionBuilder:
    name: str
    entry: bool
    line: int
    linkage: str | None = None
    params: tuple = ()
    returns: tuple = ()
    directives: dict = attrs.field(factory=dict)
    registers: list = attrs.field(factory=list)
    variables: list = attrs.field(factory=list)
    body: list = attrs.field(factory=list)
    labels: dict = attrs.field(factory=dict)
    branch_targets: dict = attrs.field(factory=dict)
    call_targets: dict = attrs.field(factory=dict)
    prototypes: dict = attrs.field(factory=dict)
    scopes: list = attrs.field(factory=list)
    active: set = attrs.field(factory=set)  # every name some open block renames (or a bare-named register)
    blocks: int = 0
    decl_names: set = attrs.field(factory=set)
    used_regs: dict = attrs.field(factory=dict)  # register name -> first PTX line using it
    used_syms: dict = attrs.field(factory=dict)  # symbol name -> indices of the instructions using it
    table_syms: dict = attrs.field(factory=dict)  # names in .branchtargets/.calltargets -> PTX line


def _parse_int(s: str) -> int | None:
    m = _INT.fullmatch(s)
    if m is None:
        return None
    sign, digits = m.groups()
    if digits[:2] in ("0x", "0X"):
        v = int(digits[2:], 16)
    elif digits[:2] in ("0b", "0B"):
        v = int(digits[2:], 2)
    elif len(digits) > 1 and digits[0] == "0":
        v = int(digits[1:], 8)
    else:
        v = int(digits)
    return -v if sign == "-" else v


def _parse_imm(s: str) -> Imm | None:
    if len(s) > 2 and s[0] == "0":
        m = _F32.fullmatch(s)
        if m:
            return Imm(int(m.group(1), 16), "f32")
        m = _F64.fullmatch(s)
        if m:
            return Imm(int(m.group(1), 16), "f64")
    v = _parse_int(s)
    if v is not None:
        return Imm(v)
    if _FLOAT.fullmatch(s):
        return Imm(float(s), "float")
    return None


def _split_top(s: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` outside brackets, braces and parentheses."""
    if "{" not in s and "(" not in s and "[" not in s:
        return s.split(sep)
    parts, depth, start = [], 0, 0
    for i, c in enumerate(s):
        if c in "{[(":
            depth += 1
        elif c in "}])":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(s[start:i])
            start = i + 1
    parts.append(s[start:])
    return parts


def _normalise(s: str) -> str:
    """One space between words, ``", "`` between operands, none inside brackets: the statement's canonical text."""
    s = " ".join(s.split())
    if (s.count(",") == s.count(", ") and " ," not in s and "|" not in s and "[ " not in s and " ]" not in s
            and "{ " not in s and " }" not in s and "( " not in s and " )" not in s):
        return s
    return _NORM_SPACE.sub(_norm_piece, s)


def _norm_piece(m: re.Match) -> str:
    g = m.group()
    return ", " if "," in g else ("|" if "|" in g else "")


def _walk_names(op, regs: list, syms: list) -> None:
    t = type(op)
    if t is Reg:
        regs.append(op.name)
    elif t is Sym:
        syms.append(op.name)
    elif t is Address:
        if op.base is not None:
            _walk_names(op.base, regs, syms)
    elif t is Vector or t is tuple:
        for x in (op.items if t is Vector else op):
            _walk_names(x, regs, syms)
    elif t is TensorRef:
        _walk_names(op.tensor, regs, syms)
        _walk_names(op.coords, regs, syms)


class _Parser:
    def __init__(self, text: str, name: str):
        self.text = text
        self.name = name
        self.line = 0
        self.version: str | None = None
        self.target: tuple[str, ...] | None = None
        self.address_size = 64
        self.variables: list[Variable] = []
        self.functions: dict[str, Function] = {}
        self.defined: set[str] = set()
        self.fn: _FunctionBuilder | None = None
        self.loc: Loc | None = None
        self.loc_cache: dict[str, Loc] = {}
        self.op_cache: dict[str, tuple] = {}
        self.files: dict[int, str] = {}
        self.debug_str: dict[str, bytes] = {}
        self.last_label: str | None = None
        self.pending_section: str | None = None
        self.fn_order: list[tuple[Function, dict, int]] = []

    # ---- errors ----------------------------------------------------------------------------------------------

    def line_text(self) -> str:
        lines = self.text.split("\n")
        return lines[self.line - 1].strip() if 0 < self.line <= len(lines) else ""

    def fail(self, line: int, text: str, what: str, *, rule: str = "PTX syntax", ref: str = REF_SYNTAX,
             unsupported: bool = False) -> None:
        shown = " ".join(text.split())
        if len(shown) > 200:
            shown = shown[:200] + " ..."
        msg = f"{self.name}:{line}: {what}: `{shown}`"
        if unsupported:
            raise PtxUnsupported(msg, rule=rule, ref=ref)
        raise PtxSyntaxError(msg, rule=rule, ref=ref, line=line, text=shown)

    # ---- the scan --------------------------------------------------------------------------------------------

    def run(self) -> Module:
        text = self.text
        for m in _FILE_SCAN.finditer(text):
            self.files[int(m.group(1))] = m.group(2)
        if "function_name" in text:
            self._read_debug_str()
        pending: list[str] = []
        pline = 0  # line of the pending statement's first non-blank text (0: none yet)
        sdepth = 0  # braces open inside the pending statement (vector operands, initializers)
        in_comment = False
        comment_line = 0
        section_depth = 0
        scan = _SCAN.search
        for ln, raw in enumerate(text.split("\n"), 1):
            self.line = ln
            pos = 0
            if pline and not sdepth and not in_comment and raw.lstrip().startswith(_LINE_DIRECTIVES):
                self.fail(pline, "".join(pending), "expected ';' at the end of this statement",
                          rule="statements end with ';'")
            if section_depth:
                section_depth += raw.count("{") - raw.count("}")
                if section_depth <= 0:
                    section_depth = 0
                continue
            if in_comment:
                end = raw.find("*/")
                if end < 0:
                    continue
                pos, in_comment = end + 2, False
            while True:
                m = scan(raw, pos)
                if m is None:
                    chunk = raw[pos:]
                    if chunk and not chunk.isspace():
                        pending.append(chunk)
                        pline = pline or ln
                    break
                start = m.start()
                if start > pos:
                    chunk = raw[pos:start]
                    pending.append(chunk)
                    if not pline and not chunk.isspace():
                        pline = ln
                pos = m.end()
                tok = m.group()
                c = tok[0]
                if c == ";":
                    if sdepth:
                        self.fail(pline or ln, "".join(pending), "unbalanced '{' in this statement",
                                  rule="braces balance inside a statement")
                    stmt = "".join(pending).strip()
                    pending.clear()
                    sl, pline = pline or ln, 0
                    if stmt:
                        self._statement(stmt, sl)
                elif c == "{":
                    if sdepth:
                        sdepth += 1
                        pending.append("{")
                        continue
                    head = "".join(pending).strip()
                    if not head:
                        if self.pending_section is not None:
                            self.pending_section = None
                            section_depth = 1 + raw.count("{", pos) - raw.count("}", pos)
                            pending.clear()
                            pline = 0
                            break
                        if self.fn is None:
                            self.fail(ln, raw, "a '{' block outside a function",
                                      rule="blocks belong to a function body")
                        self._open_scope()
                        pending.clear()
                        pline = 0
                    elif self.fn is None and head.startswith(".section"):
                        section_depth = 1 + raw.count("{", pos) - raw.count("}", pos)
                        pending.clear()
                        pline = 0
                        break
                    elif self.fn is None and not head.endswith("=") and self._is_header(head):
                        self._open_function(head, pline or ln)
                        pending.clear()
                        pline = 0
                    else:
                        sdepth = 1
                        pending.append("{")
                elif c == "}":
                    if sdepth:
                        sdepth -= 1
                        pending.append("}")
                        continue
                    stmt = "".join(pending).strip()
                    if stmt:
                        self.fail(pline, stmt, "expected ';' at the end of this statement before '}'",
                                  rule="statements end with ';'")
                    pending.clear()
                    pline = 0
                    if self.fn is None:
                        self.fail(ln, raw, "'}' without an open block", rule="braces balance")
                    self._close_scope(ln)
                elif c == ":":
                    label = "".join(pending).strip()
                    if sdepth or not _LABEL.fullmatch(label):
                        self.fail(pline or ln, label + ":", "expected a label name before ':'",
                                  rule="a label is an identifier followed by ':'")
                    self._label(label, pline or ln)
                    pending.clear()
                    pline = 0
                elif c == '"':
                    pending.append(tok)
                    pline = pline or ln
                elif tok == "//":
                    break
                else:  # "/*"
                    end = raw.find("*/", pos)
                    if end < 0:
                        in_comment, comment_line = True, ln
                        break
                    pending.append(" ")
                    pos = end + 2
            if pline and not sdepth:
                stmt = "".join(pending).strip()
                if stmt.startswith(_LINE_DIRECTIVES):
                    pending.clear()
                    sl, pline = pline, 0
                    self._line_directive(stmt, sl)
                    continue
            if pending:
                pending.append("\n")
        if in_comment:
            self.fail(comment_line, "/*", "a comment opened with '/*' is never closed with '*/'",
                      rule="comments", ref="PTX ISA 9.0 §4.2")
        stmt = "".join(pending).strip()
        if stmt:
            self.fail(pline, stmt, "expected ';' at the end of this statement", rule="statements end with ';'")
        if self.fn is not None:
            self.fail(self.fn.line, self.fn.name, "the body of this function is not closed (missing '}')",
                      rule="braces balance")
        return self._module()

    def _read_debug_str(self) -> None:
        m = _DEBUG_STR.search(self.text)
        if m is None:
            return
        label, buf = None, bytearray()
        for tok in re.finditer(r"([A-Za-z_$][\w$]*)\s*:|\.b8\s+([0-9,\s]+)", m.group(1)):
            if tok.group(1):
                if label is not None:
                    self.debug_str[label] = bytes(buf)
                label, buf = tok.group(1), bytearray()
            else:
                buf.extend(int(x) & 0xFF for x in tok.group(2).replace(",", " ").split())
        if label is not None:
            self.debug_str[label] = bytes(buf)

    # ---- module level ----------------------------------------------------------------------------------------

    def _line_directive(self, stmt: str, line: int) -> None:
        if stmt.startswith(".loc"):
            loc = self.loc_cache.get(stmt)
            if loc is None:
                loc = self.loc_cache[stmt] = self._parse_loc(stmt, line)
            self.loc = loc
            return
        if stmt.startswith(".file"):
            m = _FILE.fullmatch(stmt)
            if m is None:
                self.fail(line, stmt, 'expected .file INDEX "PATH" [, TIMESTAMP, SIZE]',
                          rule=".file syntax", ref=REF_DIRECTIVES)
            self.files[int(m.group(1))] = m.group(2)
            return
        if stmt.startswith(("@@dwarf", "@@DWARF")):
            return
        if self.fn is not None:
            self.fail(line, stmt, "a module directive inside a function body", rule="module directives",
                      ref=REF_DIRECTIVES)
        words = stmt.split(None, 1)
        arg = words[1].strip() if len(words) > 1 else ""
        if words[0] == ".version":
            if not re.fullmatch(r"\d+\.\d+", arg):
                self.fail(line, stmt, "expected .version MAJOR.MINOR", rule=".version syntax", ref=REF_DIRECTIVES)
            if self.version is not None:
                self.fail(line, stmt, "a second .version directive", rule="one .version per module",
                          ref=REF_DIRECTIVES)
            self.version = arg
        elif words[0] == ".target":
            parts = tuple(p.strip() for p in arg.split(","))
            if not arg or not all(re.fullmatch(r"\w+", p) for p in parts):
                self.fail(line, stmt, "expected .target followed by a comma-separated list (sm_90a, debug)",
                          rule=".target syntax", ref=REF_DIRECTIVES)
            self.target = parts
        elif words[0] == ".address_size":
            if arg not in ("32", "64"):
                self.fail(line, stmt, "expected .address_size 32 or 64", rule=".address_size syntax",
                          ref=REF_DIRECTIVES)
            self.address_size = int(arg)
        elif words[0] == ".section":
            if not re.fullmatch(r"\.[\w.$]+", arg):
                self.fail(line, stmt, "expected .section .NAME", rule=".section syntax", ref=REF_DIRECTIVES)
            self.pending_section = arg
        else:
            self.fail(line, stmt, "unknown directive", rule="module directives", ref=REF_DIRECTIVES)

    def _parse_loc(self, stmt: str, line: int) -> Loc:
        m = _LOC.fullmatch(stmt)
        if m is None:
            self.fail(line, stmt, "expected .loc FILE LINE COLUMN [, function_name LABEL] [, inlined_at FILE LINE "
                      "COLUMN]", rule=".loc syntax", ref=REF_DIRECTIVES)
        f, ln, col, fname, foff, ifile, iline, icol = m.groups()
        function = None
        if fname is not None:
            blob = self.debug_str.get(fname)
            if blob is None:
                function = fname if not foff else f"{fname}+{foff}"
            else:
                function = blob[int(foff or 0):].split(b"\0", 1)[0].decode("utf-8", "replace")
        inlined = None
        if ifile is not None:
            inlined = Loc(self._file(int(ifile)), int(iline), int(icol or 0))
        return Loc(self._file(int(f)), int(ln), int(col or 0), function, inlined)

    def _file(self, index: int) -> str:
        return self.files.get(index, f"<file {index}>")

    def _statement(self, stmt: str, line: int) -> None:
        last_label, self.last_label = self.last_label, None
        if self.fn is not None:
            if stmt[0] == ".":
                self._body_directive(stmt, line, last_label)
            else:
                self._instruction(stmt, line)
            return
        if stmt.startswith(_LINE_DIRECTIVES):
            self.fail(line, stmt, "this directive takes no ';'", rule="module directives", ref=REF_DIRECTIVES)
        if stmt.startswith(".pragma"):
            return
        if stmt.startswith(".alias"):
            self.fail(line, stmt, ".alias is not supported by simtc", rule=".alias", ref=REF_DIRECTIVES,
                      unsupported=True)
        if self._is_header(stmt):
            self._declare_function(stmt, line)
            return
        if stmt[0] == ".":
            self.variables.extend(self._variables(stmt, line, module=True))
            return
        self.fail(line, stmt, "expected a directive, a variable or a function at module scope",
                  rule="module scope holds directives, variables and functions", ref=REF_SYNTAX)

    @staticmethod
    def _is_header(head: str) -> bool:
        for w in head.split(None, 4):
            if w in (".entry", ".func") or w.startswith((".entry(", ".func(")):
                return True
            if w[1:] not in _LINKAGE:
                return False
        return False

    def _parse_header(self, head: str, line: int) -> _FunctionBuilder:
        words = []
        rest = head
        while True:
            m = re.match(r"\.(\w+)\s*", rest)
            if m is None:
                self.fail(line, head, "expected .entry or .func", rule="function declarations", ref=REF_DIRECTIVES)
            rest = rest[m.end():]
            if m.group(1) in ("entry", "func"):
                kind = m.group(1)
                break
            words.append(m.group(1))
        linkage = words[-1] if words else None
        returns: tuple = ()
        if rest.startswith("("):
            if kind != "func":
                self.fail(line, head, "a kernel (.entry) has no return parameters", rule="function declarations",
                          ref=REF_DIRECTIVES)
            end = rest.find(")")
            if end < 0:
                self.fail(line, head, "expected ')' after the return parameters", rule="function declarations",
                          ref=REF_DIRECTIVES)
            returns = self._params(rest[1:end], line, head)
            rest = rest[end + 1:].lstrip()
        m = _LABEL.match(rest)
        if m is None:
            self.fail(line, head, "expected the function's name", rule="function declarations", ref=REF_DIRECTIVES)
        name = m.group()
        rest = rest[m.end():].lstrip()
        params: tuple = ()
        if rest.startswith("("):
            end = rest.find(")")
            if end < 0:
                self.fail(line, head, "expected ')' after the parameters", rule="function declarations",
                          ref=REF_DIRECTIVES)
            params = self._params(rest[1:end], line, head)
            rest = rest[end + 1:].lstrip()
        fb = _FunctionBuilder(name, kind == "entry", line, linkage=linkage, params=params, returns=returns)
        pos = 0
        while pos < len(rest):
            m = _DIRECTIVE.match(rest, pos)
            if m is None or m.end() == pos:
                self.fail(line, head, f"expected a performance directive (.maxntid 128, 1, 1) at {rest[pos:]!r}",
                          rule="function directives", ref=REF_DIRECTIVES)
            vals = tuple(int(x) for x in m.group(2).split(",")) if m.group(2) else ()
            fb.directives[m.group(1)] = vals
            pos = m.end()
        return fb

    def _params(self, text: str, line: int, head: str) -> tuple:
        if not text.strip():
            return ()
        out = []
        for p in text.split(","):
            p = p.strip()
            m = re.match(r"\.(param|reg)\b", p)
            if m is None:
                self.fail(line, p, "expected a parameter (.param .u64 name)", rule="function parameters",
                          ref="PTX ISA 9.0 §5.1.6")
            tokens, rest = self._head_tokens(p[m.end():], line, p)
            d = _DECLARATOR.fullmatch(rest)
            if d is None or d.group(3) is not None:
                self.fail(line, p, "expected the parameter's name", rule="function parameters",
                          ref="PTX ISA 9.0 §5.1.6")
            typ, align, vec, ptr, ptr_space = None, None, None, False, None
            for tok, val in tokens:
                if tok in _TYPES:
                    typ = tok
                elif tok == "align":
                    align = val
                elif tok == "ptr":
                    ptr = True
                elif ptr and tok in _SPACES:
                    ptr_space = tok
                elif tok.startswith("v") and tok[1:].isdigit():
                    vec = int(tok[1:])
                else:
                    self.fail(line, p, f"unexpected .{tok} in a parameter", rule="function parameters",
                              ref="PTX ISA 9.0 §5.1.6")
            if typ is None:
                self.fail(line, p, "expected the parameter's type (.u64, .b32, .align 8 .b8 ...)",
                          rule="function parameters", ref="PTX ISA 9.0 §5.1.6")
            shape = self._shape(d.group(2), line, p)
            if vec:
                shape = (*shape, vec) if shape else (vec,)
            out.append(Param(d.group(1), typ, shape, align, ptr, ptr_space))
        return tuple(out)

    def _head_tokens(self, text: str, line: int, stmt: str) -> tuple[list[tuple[str, int | None]], str]:
        """The leading ``.word`` tokens of a declaration (``.align N`` with its value), and the rest."""
        tokens: list[tuple[str, int | None]] = []
        pos = 0
        while True:
            m = _HEAD_TOKEN.match(text, pos)
            if m is None:
                break
            tok = m.group(1)[1:]
            pos = m.end()
            val = None
            if tok == "align":
                a = re.match(r"\s*(\w+)", text[pos:])
                val = _parse_int(a.group(1)) if a else None
                if val is None or val <= 0 or val & (val - 1):
                    self.fail(line, stmt, "expected .align followed by a power of two", rule="alignment",
                              ref=REF_VARIABLES)
                pos += a.end()
            elif tok == "attribute":
                a = re.match(r"\s*\([^)]*\)", text[pos:])
                if a is None:
                    self.fail(line, stmt, "expected .attribute(...)", rule="variable attributes",
                              ref=REF_VARIABLES)
                pos += a.end()
                continue
            tokens.append((tok, val))
        return tokens, text[pos:].strip()

    def _shape(self, dims: str, line: int, stmt: str) -> tuple[int, ...]:
        if not dims:
            return ()
        out = []
        for d in re.findall(r"\[\s*([^\]]*?)\s*\]", dims):
            if d == "":
                out.append(0)
                continue
            v = _parse_int(d)
            if v is None or v < 0:
                self.fail(line, stmt, f"expected an array size, got {d!r}", rule="array declarations",
                          ref=REF_VARIABLES)
            out.append(v)
        return tuple(out)

    def _declare_function(self, stmt: str, line: int) -> None:
        fb = self._parse_header(stmt, line)
        if fb.name in self.functions:
            return  # a second prototype, or a prototype after the definition: the first one stands
        self.functions[fb.name] = Function(fb.name, fb.entry, fb.params, fb.returns, directives=fb.directives,
                                           linkage=fb.linkage, line=line)

    def _open_function(self, head: str, line: int) -> None:
        fb = self._parse_header(head, line)
        if fb.name in self.defined:
            self.fail(line, head, f"function {fb.name} is defined twice", rule="one definition per function",
                      ref=REF_DIRECTIVES)
        self.fn = fb
        self.loc = None
        fb.scopes.append(_Scope("", 0))

    def _open_scope(self) -> None:
        fb = self.fn
        fb.blocks += 1
        fb.scopes.append(_Scope(f"${fb.blocks}", len(fb.body)))

    def _close_scope(self, line: int) -> None:
        fb = self.fn
        scope = fb.scopes.pop()
        if scope.labels:
            self._rename_labels(scope)
        if scope.names:
            fb.active = set().union(*(sc.names for sc in fb.scopes))
        if fb.scopes:
            return
        self._finish_function(line)

    def _rename_labels(self, scope: _Scope) -> None:
        """Labels are local to their block: rename those the block's instructions (and inner blocks') refer to."""
        fb = self.fn
        ren = scope.labels

        def fix(op):
            t = type(op)
            if t is Sym and op.name in ren:
                return Sym(ren[op.name], op.offset)
            if t is Vector:
                return Vector(tuple(fix(x) for x in op.items))
            return op

        touched: set[int] = set()
        for old, new in ren.items():
            uses = fb.used_syms.get(old)
            if not uses:
                continue
            inside = [i for i in uses if i >= scope.start]
            outside = [i for i in uses if i < scope.start]
            if outside:
                fb.used_syms[old] = outside
            else:
                del fb.used_syms[old]
            if inside:
                fb.used_syms.setdefault(new, []).extend(inside)
                touched.update(inside)
        for k in sorted(touched):
            ins = fb.body[k]
            tgt = fix(ins.call_target) if ins.call_target is not None else None
            proto = fix(ins.call_prototype) if ins.call_prototype is not None else None
            fb.body[k] = attrs.evolve(ins, operands=tuple(fix(o) for o in ins.operands), call_target=tgt,
                                      call_prototype=proto)

    def _finish_function(self, line: int) -> None:
        fb = self.fn
        self.fn = None
        declared: set[str] = set()
        for d in fb.registers:
            declared.update(d.names())
        for name, where in fb.used_regs.items():
            if name not in declared and not (name[0] == "%" and _SPECIAL.fullmatch(name)):
                self.fail(where, self._text_at(fb, where), f"register {name} is not declared",
                          rule="registers are declared with .reg before use", ref="PTX ISA 9.0 §5.1.1")
        f = Function(fb.name, fb.entry, fb.params, fb.returns, tuple(fb.registers), tuple(fb.variables),
                     tuple(fb.body), fb.labels, fb.directives, fb.linkage, fb.line, fb.branch_targets,
                     fb.call_targets, fb.prototypes)
        self.functions[fb.name] = f  # a prototype declared earlier keeps its place in the order
        self.defined.add(fb.name)
        uses = {name: f.body[idx[0]].line for name, idx in fb.used_syms.items()}
        for name, where in fb.table_syms.items():
            uses.setdefault(name, where)
        self.fn_order.append((f, uses, line))

    @staticmethod
    def _text_at(fb: _FunctionBuilder, line: int) -> str:
        for ins in fb.body:
            if ins.line == line:
                return ins.text
        return ""

    def _module(self) -> Module:
        if self.version is None:
            self.fail(1, self.text.strip().split("\n", 1)[0] if self.text.strip() else "",
                      "a PTX module starts with .version", rule="a module declares .version", ref=REF_DIRECTIVES)
        if self.target is None:
            self.fail(1, "", "the module has no .target directive", rule="a module declares .target",
                      ref=REF_DIRECTIVES)
        module_names = {v.name for v in self.variables} | set(self.functions)
        for f, used, _ in self.fn_order:
            known = (module_names | {p.name for p in f.params} | {p.name for p in f.returns}
                     | {v.name for v in f.variables} | set(f.labels) | set(f.branch_targets) | set(f.call_targets)
                     | set(f.prototypes))
            for name, where in used.items():
                if name not in known:
                    text = next((i.text for i in f.body if i.line == where), "")
                    self.fail(where, text, f"{name} is not declared (no variable, parameter, function or label of "
                              "that name)", rule="names are declared", ref=REF_SYNTAX)
        return Module(self.version, self.target, self.address_size, tuple(self.variables), self.functions,
                      dict(sorted(self.files.items())), self.name)

    # ---- declarations ----------------------------------------------------------------------------------------

    def _variables(self, stmt: str, line: int, *, module: bool) -> list[Variable]:
        tokens, rest = self._head_tokens(stmt, line, stmt)
        linkage, space, typ, align, vec = None, None, None, None, None
        for tok, val in tokens:
            if tok in _LINKAGE and space is None:
                linkage = tok
            elif tok in _SPACES or tok.startswith("shared::"):
                space = tok.split("::")[0]
            elif tok in _TYPES:
                typ = tok
            elif tok == "align":
                align = val
            elif tok.startswith("v") and tok[1:].isdigit():
                vec = int(tok[1:])
            elif tok in ("texref", "samplerref", "surfref", "tex"):
                self.fail(line, stmt, f".{tok} variables are not supported by simtc", rule="texture and surface "
                          "state", ref="PTX ISA 9.0 §5.3", unsupported=True)
            else:
                self.fail(line, stmt, f"unexpected .{tok} in a variable declaration", rule="variable declarations",
                          ref=REF_VARIABLES)
        if space is None:
            self.fail(line, stmt, "expected a state space (.global, .shared, .const, .local, .param)",
                      rule="variable declarations", ref=REF_VARIABLES)
        if typ is None:
            self.fail(line, stmt, "expected the variable's type (.b8, .u32, .f32 ...)", rule="variable declarations",
                      ref=REF_VARIABLES)
        if not rest:
            self.fail(line, stmt, "expected the variable's name", rule="variable declarations", ref=REF_VARIABLES)
        out = []
        for decl in _split_top(rest):
            d = _DECLARATOR.fullmatch(decl.strip())
            if d is None:
                self.fail(line, stmt, f"expected NAME[SIZE] [= INITIALIZER], got {decl.strip()!r}",
                          rule="variable declarations", ref=REF_VARIABLES)
            shape = self._shape(d.group(2), line, stmt)
            init = None
            if d.group(3) is not None:
                init = tuple(self._initializer(d.group(3).strip(), line, stmt))
            out.append(Variable(d.group(1), space, typ, shape, align, init, linkage, vec, line))
        return out

    def _initializer(self, text: str, line: int, stmt: str) -> list:
        if text.startswith("{"):
            if not text.endswith("}"):
                self.fail(line, stmt, "expected '}' closing the initializer", rule="initializers", ref=REF_VARIABLES)
            inner = text[1:-1].strip()
            out: list = []
            if inner:
                for part in _split_top(inner):
                    out.extend(self._initializer(part.strip(), line, stmt))
            return out
        imm = _parse_imm(text)
        if imm is not None:
            return [imm.value if imm.kind in ("int", "float") else imm]
        m = _GENERIC.fullmatch(text)
        if m:
            off = 0
            for sign, val in ((m.group(2), m.group(3)), (m.group(4), m.group(5))):
                if sign:
                    v = _parse_int(val)
                    if v is None:
                        self.fail(line, stmt, f"expected an integer offset, got {val!r}", rule="initializers",
                                  ref=REF_VARIABLES)
                    off += -v if sign == "-" else v
            return [Sym(m.group(1), off)]
        m = _SYM_OFF.fullmatch(text)
        if m:
            off = 0
            if m.group(2):
                v = _parse_int(m.group(3).replace(" ", ""))
                if v is None:
                    self.fail(line, stmt, f"expected an integer offset, got {m.group(3)!r}", rule="initializers",
                              ref=REF_VARIABLES)
                off = -v if m.group(2) == "-" else v
            return [Sym(m.group(1), off)]
        self.fail(line, stmt, f"expected a constant, a name or name+offset in the initializer, got {text!r}",
                  rule="initializers", ref=REF_VARIABLES)
        return []

    def _body_directive(self, stmt: str, line: int, last_label: str | None) -> None:
        fb = self.fn
        scope = fb.scopes[-1]
        if stmt.startswith(".reg"):
            m = _REG_DECL.fullmatch(stmt)
            if m is None or m.group(2) not in _TYPES:
                self.fail(line, stmt, "expected .reg [.v2|.v4] .TYPE NAME[<N>] [, NAME ...]",
                          rule="register declarations", ref="PTX ISA 9.0 §5.1.1")
            vec = int(m.group(1)) if m.group(1) else None
            for part in m.group(3).split(","):
                r = _REG_NAME.fullmatch(part.strip())
                if r is None:
                    self.fail(line, stmt, f"expected a register name, got {part.strip()!r}",
                              rule="register declarations", ref="PTX ISA 9.0 §5.1.1")
                self._declare_reg(r.group(1), int(r.group(2)) if r.group(2) else None, m.group(2), vec, line, stmt)
            return
        if stmt.startswith(".pragma"):
            return
        if stmt.startswith((".branchtargets", ".calltargets", ".callprototype")):
            word = stmt.split(None, 1)[0]
            if last_label is None:
                self.fail(line, stmt, f"expected a label before {word} (NAME: {word} ...)",
                          rule=f"{word} is labelled", ref="PTX ISA 9.0 §11.3")
            key = scope.labels.get(last_label, last_label)  # a block's table is renamed like its labels
            fb.labels.pop(key, None)
            body = stmt[len(word):].strip()
            if word == ".callprototype":
                fb.prototypes[key] = _normalise(stmt)
                return
            names = tuple(n.strip() for n in body.split(","))
            if not body or not all(_LABEL.fullmatch(n) for n in names):
                self.fail(line, stmt, f"expected {word} followed by a comma-separated list of names",
                          rule=f"{word} syntax", ref="PTX ISA 9.0 §11.3")
            (fb.branch_targets if word == ".branchtargets" else fb.call_targets)[key] = names
            for n in names:
                fb.table_syms.setdefault(n, line)
            return
        if stmt.startswith((".param", ".local", ".shared", ".global", ".const", ".extern")):
            for v in self._variables(stmt, line, module=False):
                if scope.suffix:
                    if v.name in scope.names:
                        self.fail(line, stmt, f"{v.name} is declared twice in this block", rule="one declaration "
                                  "per name and block", ref=REF_VARIABLES)
                    new = v.name + scope.suffix
                    scope.names[v.name] = new
                    fb.active.add(v.name)
                    v = attrs.evolve(v, name=new)
                fb.variables.append(v)
            return
        self.fail(line, stmt, "unknown directive in a function body", rule="function bodies", ref=REF_DIRECTIVES)

    def _declare_reg(self, name: str, count: int | None, typ: str, vec: int | None, line: int, stmt: str) -> None:
        fb = self.fn
        scope = fb.scopes[-1]
        if not scope.suffix:
            if name in fb.decl_names:
                self.fail(line, stmt, f"{name} is declared twice", rule="one declaration per name and block",
                          ref="PTX ISA 9.0 §5.1.1")
            fb.decl_names.add(name)
            if name[0] != "%":
                scope.names[name] = name
                scope.regs.add(name)
                fb.active.add(name)
            fb.registers.append(RegDecl(name, typ, count, vec))
            return
        if count is None:
            if name in scope.names:
                self.fail(line, stmt, f"{name} is declared twice in this block",
                          rule="one declaration per name and block", ref="PTX ISA 9.0 §5.1.1")
            new = name + scope.suffix
            scope.names[name] = new
            scope.regs.add(new)
            fb.active.add(name)
            fb.registers.append(RegDecl(new, typ, None, vec))
            return
        prefix = f"{name}{scope.suffix}_"
        for i in range(count):
            scope.names[f"{name}{i}"] = f"{prefix}{i}"
            scope.regs.add(f"{prefix}{i}")
            fb.active.add(f"{name}{i}")
        fb.registers.append(RegDecl(prefix, typ, count, vec))

    def _label(self, label: str, line: int) -> None:
        fb = self.fn
        if fb is None:
            self.fail(line, label + ":", "a label outside a function body", rule="labels belong to a function body",
                      ref=REF_SYNTAX)
        scope = fb.scopes[-1]
        new = label + scope.suffix
        if new in fb.labels or label in scope.labels:
            self.fail(line, label + ":", f"label {label} is defined twice", rule="one definition per label",
                      ref=REF_SYNTAX)
        if scope.suffix:
            scope.labels[label] = new
        fb.labels[new] = len(fb.body)
        self.last_label = label

    # ---- instructions ----------------------------------------------------------------------------------------

    def _instruction(self, stmt: str, line: int) -> None:
        m = _INSTR.fullmatch(stmt)
        if m is None:
            self.fail(line, stmt, "expected an instruction ([@[!]PRED] OPCODE OPERANDS;)", rule="instruction syntax",
                      ref="PTX ISA 9.0 §4.3")
        neg, gname, name, rest = m.groups()
        opcode = name.split(".", 1)[0]
        if opcode not in OPCODES:
            self.fail(line, stmt, f"{opcode!r} is not a PTX ISA 9.0 instruction", rule="instruction names",
                      ref="PTX ISA 9.0 §9.7")
        fb = self.fn
        active = fb.active
        regs: list[str] = []
        syms: list[str] = []
        guard = None
        if gname is not None:
            if gname in active:
                gname = self._lookup(gname)[0]
            guard = Guard(gname, neg == "!")
            regs.append(gname)
        rest = rest.strip()
        returns: tuple = ()
        target = proto = None
        if opcode == "call":
            operands, returns, target, proto = self._call(rest, line, stmt, regs, syms)
        elif not rest:
            operands = ()
        else:
            ops = []
            cache = self.op_cache
            for part in _split_top(rest):
                part = part.strip()
                hit = cache.get(part)
                if hit is None:
                    hit = cache[part] = self._operand(part, line, stmt)
                if active and not active.isdisjoint(hit[3]):
                    op = self._resolve(hit[0], line, stmt)
                    _walk_names(op, regs, syms)
                else:
                    op = hit[0]
                    regs.extend(hit[1])
                    syms.extend(hit[2])
                ops.append(op)
            operands = tuple(ops)
        ins = Instruction(name, operands, guard, line, self.loc, _normalise(stmt) + ";", returns, target, proto)
        idx = len(fb.body)
        fb.body.append(ins)
        used = fb.used_regs
        for r in regs:
            if r not in used:
                used[r] = line
        if syms:
            used = fb.used_syms
            for s in syms:
                lst = used.get(s)
                if lst is None:
                    used[s] = [idx]
                else:
                    lst.append(idx)

    def _call(self, rest: str, line: int, stmt: str, regs: list, syms: list):
        parts = [p.strip() for p in _split_top(rest)]
        returns: tuple = ()
        if parts and parts[0].startswith("("):
            returns = self._paren_list(parts.pop(0), line, stmt, regs, syms)
        if not parts or not parts[0] or parts[0].startswith("("):
            self.fail(line, stmt, "expected the called function after call", rule="call syntax",
                      ref="PTX ISA 9.0 §9.7.12.5")
        target = self._one(parts.pop(0), line, stmt, regs, syms)
        if type(target) not in (Sym, Reg) or (type(target) is Sym and target.offset):
            self.fail(line, stmt, "expected a function name or a register as the call target", rule="call syntax",
                      ref="PTX ISA 9.0 §9.7.12.5")
        args: tuple = ()
        if parts and parts[0].startswith("("):
            args = self._paren_list(parts.pop(0), line, stmt, regs, syms)
        proto = None
        if parts:
            p = self._one(parts.pop(0), line, stmt, regs, syms)
            if type(p) is not Sym or p.offset:
                self.fail(line, stmt, "expected a .callprototype or .calltargets label after the arguments",
                          rule="call syntax", ref="PTX ISA 9.0 §9.7.12.5")
            proto = p
        if parts:
            self.fail(line, stmt, "unexpected operands after the call's arguments", rule="call syntax",
                      ref="PTX ISA 9.0 §9.7.12.5")
        return args, returns, target, proto

    def _paren_list(self, text: str, line: int, stmt: str, regs: list, syms: list) -> tuple:
        if not text.endswith(")"):
            self.fail(line, stmt, "expected ')'", rule="call syntax", ref="PTX ISA 9.0 §9.7.12.5")
        inner = text[1:-1].strip()
        if not inner:
            return ()
        return tuple(self._one(p.strip(), line, stmt, regs, syms) for p in _split_top(inner))

    def _one(self, part: str, line: int, stmt: str, regs: list, syms: list):
        hit = self.op_cache.get(part)
        if hit is None:
            hit = self.op_cache[part] = self._operand(part, line, stmt)
        active = self.fn.active
        if active and not active.isdisjoint(hit[3]):
            op = self._resolve(hit[0], line, stmt)
            _walk_names(op, regs, syms)
            return op
        regs.extend(hit[1])
        syms.extend(hit[2])
        return hit[0]

    def _operand(self, s: str, line: int, stmt: str) -> tuple:
        """(operand, register names, symbol names, all names) for one operand's text, names as written."""
        op = self._operand_value(s, line, stmt)
        regs: list[str] = []
        syms: list[str] = []
        _walk_names(op, regs, syms)
        return op, tuple(regs), tuple(syms), frozenset(regs) | frozenset(syms)

    def _operand_value(self, s: str, line: int, stmt: str):
        if not s:
            self.fail(line, stmt, "expected an operand (two commas in a row, or a trailing comma)",
                      rule="operand syntax", ref=REF_OPERANDS)
        c = s[0]
        if c == "%":
            if "|" in s:
                return self._pair(s, line, stmt)
            if _REG.fullmatch(s):
                return Reg(s)
            self.fail(line, stmt, f"expected a register name, got {s!r}", rule="operand syntax", ref=REF_OPERANDS)
        if c == "[":
            return self._address(s, line, stmt)
        if c == "{":
            if not s.endswith("}"):
                self.fail(line, stmt, f"expected '}}' closing the vector operand {s!r}", rule="operand syntax",
                          ref=REF_OPERANDS)
            inner = s[1:-1].strip()
            if not inner:
                self.fail(line, stmt, "an empty vector operand {}", rule="operand syntax", ref=REF_OPERANDS)
            return Vector(tuple(self._operand_value(p.strip(), line, stmt) for p in _split_top(inner)))
        if c == "!":
            inner = s[1:].strip()
            if _REG.fullmatch(inner) or _LABEL.fullmatch(inner):
                return Reg(inner, True)
            self.fail(line, stmt, f"expected a predicate after '!', got {s!r}", rule="operand syntax",
                      ref=REF_OPERANDS)
        if "|" in s:
            return self._pair(s, line, stmt)
        if s == "_":
            return Sink()
        if c.isdigit() or c in "-+.":
            imm = _parse_imm(s)
            if imm is None:
                self.fail(line, stmt, f"expected a number, got {s!r}", rule="constants", ref="PTX ISA 9.0 §4.5")
            return imm
        m = _SYM_OFF.fullmatch(s)
        if m is not None:
            off = 0
            if m.group(2):
                v = _parse_int(m.group(3).replace(" ", ""))
                if v is None:
                    self.fail(line, stmt, f"expected an integer offset, got {m.group(3)!r}", rule="operand syntax",
                              ref=REF_OPERANDS)
                off = -v if m.group(2) == "-" else v
            return Sym(m.group(1), off)
        self.fail(line, stmt, f"expected an operand (register, constant, name, [address], {{vector}}), got {s!r}",
                  rule="operand syntax", ref=REF_OPERANDS)
        return None

    def _pair(self, s: str, line: int, stmt: str) -> tuple:
        parts = [p.strip() for p in s.split("|")]
        if len(parts) != 2:
            self.fail(line, stmt, f"expected a destination pair p|q, got {s!r}", rule="operand syntax",
                      ref=REF_OPERANDS)
        out = []
        for p in parts:
            if p == "_":
                out.append(Sink())
            elif _REG.fullmatch(p) or _LABEL.fullmatch(p):
                out.append(Reg(p))
            else:
                self.fail(line, stmt, f"expected a register in the pair {s!r}, got {p!r}", rule="operand syntax",
                          ref=REF_OPERANDS)
        return tuple(out)

    def _address(self, s: str, line: int, stmt: str) -> Address:
        if not s.endswith("]"):
            self.fail(line, stmt, f"expected ']' closing the address {s!r}", rule="address syntax", ref=REF_OPERANDS)
        inner = s[1:-1].strip()
        if "," in inner and "bulk.tensor" in stmt:  # [tensorMap, {coords}] (PTX ISA 9.0 §9.7.9.25.5.2)
            head, _, rest = inner.partition(",")
            tensor = self._operand_value(head.strip(), line, stmt)
            coords = self._operand_value(rest.strip(), line, stmt)
            if not isinstance(tensor, Reg | Sym) or not isinstance(coords, Vector):
                self.fail(line, stmt, f"expected [tensorMap, {{coordinates}}], got {s!r}", rule="tensor operands",
                          ref="PTX ISA 9.0 §9.7.9.25.5.2")
            return TensorRef(tensor, coords)
        if "," in inner:
            self.fail(line, stmt, f"texture and surface operands ({s}) are not supported by simtc",
                      rule="texture and surface instructions", ref="PTX ISA 9.0 §9.7.10", unsupported=True)
        if not inner:
            self.fail(line, stmt, "an empty address []", rule="address syntax", ref=REF_OPERANDS)
        c = inner[0]
        if c.isdigit() or c in "-+":
            v = _parse_int(inner.replace(" ", ""))
            if v is None:
                self.fail(line, stmt, f"expected [register+offset], [name+offset] or [address], got {s!r}",
                          rule="address syntax", ref=REF_OPERANDS)
            return Address(None, v)
        m = _ADDR.fullmatch(inner)
        if m is None:
            self.fail(line, stmt, f"expected [register+offset], [name+offset] or [address], got {s!r}",
                      rule="address syntax", ref=REF_OPERANDS)
        base_s, sign, off_s = m.groups()
        off = 0
        if sign:
            v = _parse_int(off_s.replace(" ", ""))
            if v is None:
                self.fail(line, stmt, f"expected an integer offset in {s!r}, got {off_s!r}", rule="address syntax",
                          ref=REF_OPERANDS)
            off = -v if sign == "-" else v
        if base_s[0] == "%":
            if not _REG.fullmatch(base_s):
                self.fail(line, stmt, f"expected a register in {s!r}", rule="address syntax", ref=REF_OPERANDS)
            return Address(Reg(base_s), off)
        if "." in base_s:
            self.fail(line, stmt, f"expected a register or a name in {s!r}", rule="address syntax",
                      ref=REF_OPERANDS)
        return Address(Sym(base_s), off)

    def _lookup(self, name: str) -> tuple[str, bool]:
        """``name`` as the innermost enclosing block declares it: (new name, whether it is a register)."""
        for scope in reversed(self.fn.scopes):
            new = scope.names.get(name)
            if new is not None:
                return new, new in scope.regs
        return name, name[0] == "%"

    def _resolve(self, op, line: int, stmt: str):
        t = type(op)
        if t is Reg:
            new, _ = self._lookup(op.name)
            return op if new == op.name else Reg(new, op.negated)
        if t is Sym:
            new, is_reg = self._lookup(op.name)
            if is_reg:
                if op.offset:
                    self.fail(line, stmt, f"a register with an offset ({op}) outside an address",
                              rule="operand syntax", ref=REF_OPERANDS)
                return Reg(new)
            return op if new == op.name else Sym(new, op.offset)
        if t is Address:
            if op.base is None:
                return op
            base = self._resolve(op.base, line, stmt)
            return op if base is op.base else Address(base, op.offset)
        if t is Vector:
            return Vector(tuple(self._resolve(x, line, stmt) for x in op.items))
        if t is TensorRef:
            return TensorRef(self._resolve(op.tensor, line, stmt), self._resolve(op.coords, line, stmt))
        if t is tuple:
            return tuple(self._resolve(x, line, stmt) for x in op)
        return op

