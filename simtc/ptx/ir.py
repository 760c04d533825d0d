"""The parsed form of a PTX module: plain frozen values, no behaviour.

The PTX front end (:mod:`simtc.ptx.parser`) turns PTX text, as nvcc 13 and NVRTC emit it
(PTX ISA up to 9.0), into these values; the executor (:mod:`simtc.ptx.executor`) runs them.
Nothing here knows what an opcode *does*: an :class:`Instruction` is its dotted name, its
guard predicate and its operands, with the PTX line it came from and, when the module was
compiled with ``-lineinfo``, the CUDA source line (from the last ``.loc`` directive).

Scopes are resolved by the parser: a register declared inside a ``{ ... }`` block (the inline-asm
idiom ``{ .reg .u64 t; cvta.to.shared.u64 t, %rd17; ... }``, or a call sequence's ``.param``
declarations) is renamed so that every :class:`Function` has one flat register file
(:attr:`Function.registers`) and one flat instruction list with labels resolved to indices
(:attr:`Function.labels`).

PTX ISA 9.0 references: §4 (syntax), §5 (state spaces, types, variables), §9.7 (instructions).

>>> r = Reg("%r1"); a = Address(r, 8)
>>> str(a)
'[%r1+8]'
>>> Instruction("add.s32", (Reg("%r2"), Reg("%r1"), Imm(4)), line=12).opcode
'add'
>>> Instruction("ld.global.nc.v4.u32", ()).modifiers
('global', 'nc', 'v4', 'u32')
"""

from __future__ import annotations

from attrs import field, frozen

__all__ = [
    "Address",
    "Function",
    "Guard",
    "Imm",
    "Instruction",
    "Loc",
    "Module",
    "Operand",
    "Param",
    "Reg",
    "RegDecl",
    "Sink",
    "Sym",
    "TensorRef",
    "Variable",
    "Vector",
]


@frozen
class Reg:
    """A register operand (``%r1``, ``%rd3``, ``%p2``) or a special register (``%tid.x``, ``%laneid``).

    ``negated`` is PTX's ``!%p`` on a predicate source operand (e.g. ``selp``'s or ``bra``'s guard is
    a :class:`Guard`; ``!`` inside operands appears in ``setp``-family and ``vote`` sources).
    """

    name: str
    negated: bool = False

    def __str__(self) -> str:
        return ("!" if self.negated else "") + self.name


@frozen
class Imm:
    """An immediate. ``value`` is a Python int for integer literals (decimal, hex ``0x``, octal ``0``, binary
    ``0b``, with an optional ``U`` suffix) and for float literals written in PTX's exact hex forms
    (``0fXXXXXXXX`` → ``kind="f32"`` with ``value`` the 32-bit pattern, ``0dXXXXXXXXXXXXXXXX`` → ``kind="f64"``
    with the 64-bit pattern); a decimal float literal (``1.5``) has ``kind="float"`` and a Python float value.
    PTX ISA 9.0 §4.5 (constants)."""

    value: int | float
    kind: str = "int"  # "int" | "f32" | "f64" | "float"

    def __str__(self) -> str:
        if self.kind == "f32":
            return f"0f{self.value:08X}"
        if self.kind == "f64":
            return f"0d{self.value:016X}"
        return str(self.value)


@frozen
class Sym:
    """A name that is not a register: a variable, a kernel parameter, a function, a label; ``offset``
    is a byte offset written as ``name+16`` (in an operand or an initializer)."""

    name: str
    offset: int = 0

    def __str__(self) -> str:
        return self.name + (f"+{self.offset}" if self.offset > 0 else f"{self.offset}" if self.offset else "")


@frozen
class Sink:
    """The bit bucket ``_`` (a destination whose value is dropped)."""

    def __str__(self) -> str:
        return "_"


@frozen
class Address:
    """A memory operand ``[base+offset]``: ``base`` is a :class:`Reg`, a :class:`Sym` (variable or param),
    or ``None`` for an absolute immediate address ``[0x1000]`` (then ``offset`` is that address).
    PTX ISA 9.0 §6.4.1 (addresses as operands)."""

    base: Reg | Sym | None
    offset: int = 0

    def __str__(self) -> str:
        if self.base is None:
            return f"[{self.offset}]"
        off = f"+{self.offset}" if self.offset > 0 else (f"{self.offset}" if self.offset else "")
        return f"[{self.base}{off}]"


@frozen
class Vector:
    """A brace-enclosed operand list ``{%r1, %r2, _, %r4}`` (vector loads/stores, ``mov`` pack/unpack,
    the register lists of ``tcgen05.ld``/``wgmma``)."""

    items: tuple[Operand, ...]

    def __str__(self) -> str:
        return "{" + ", ".join(str(i) for i in self.items) + "}"


@frozen
class TensorRef:
    """A tensor operand ``[tensorMap, {c0, c1, ...}]`` of ``cp.async.bulk.tensor``, ``cp.reduce.async.bulk.tensor``
    and ``cp.async.bulk.prefetch.tensor``: ``tensor`` is the tensor map's address (a register or a parameter's
    name), ``coords`` the tensor coordinates (PTX ISA 9.0 §9.7.9.25.5.2)."""

    tensor: Reg | Sym
    coords: Vector

    def __str__(self) -> str:
        return f"[{self.tensor}, {self.coords}]"


Operand = Reg | Imm | Sym | Sink | Address | Vector | TensorRef | tuple
"""One instruction operand. A ``tuple`` of two :class:`Reg` is PTX's ``p|q`` destination pair
(``setp``'s second predicate, ``shfl.sync``'s validity predicate)."""


@frozen
class Guard:
    """``@%p`` / ``@!%p`` before an instruction (PTX ISA 9.0 §9.3, predicated execution)."""

    reg: str
    negated: bool = False

    def __str__(self) -> str:
        return f"@{'!' if self.negated else ''}{self.reg}"


@frozen
class Loc:
    """A source position from ``.loc file line column`` with the file's path from ``.file``.

    ``function`` and ``inlined_at`` come from ``.loc``'s optional ``function_name`` / ``inlined_at`` attributes
    (``.loc 1 37 5, function_name $L__info_string0, inlined_at 1 46 5``; PTX ISA 9.0 §11.5, debugging
    directives): the function the position lies in (its linkage name, read from the ``.debug_str`` section, or
    the label when that is absent) and the position it was inlined at."""

    file: str
    line: int
    column: int = 0
    function: str | None = None
    inlined_at: Loc | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@frozen
class Instruction:
    """One PTX instruction.

    ``name`` is the whole dotted opcode as written (``ld.global.nc.v4.u32``); :attr:`opcode` is its first
    part and :attr:`modifiers` the rest, in order. ``operands`` are in PTX order (destinations first,
    except for stores and other instructions without a destination). A ``call`` keeps its return
    operands in ``call_returns``, its callee in ``call_target`` (a :class:`Sym`, or a :class:`Reg` for an
    indirect call), its arguments as ``operands`` and the ``.callprototype`` or ``.calltargets`` label of an
    indirect call in ``call_prototype``. ``line`` is the PTX line (1-based), ``loc`` the CUDA
    source position from the last ``.loc`` (``None`` without ``-lineinfo``), ``text`` the statement as
    written (whitespace normalised), for listings and error messages.
    """

    name: str
    operands: tuple = ()
    guard: Guard | None = None
    line: int = 0
    loc: Loc | None = None
    text: str = ""
    call_returns: tuple = ()
    call_target: Sym | Reg | None = None
    call_prototype: Sym | None = None

    @property
    def opcode(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def modifiers(self) -> tuple[str, ...]:
        parts = self.name.split(".")
        return tuple(parts[1:])

    def __str__(self) -> str:
        return self.text or (
            (f"{self.guard} " if self.guard else "") + self.name + " " + ", ".join(str(o) for o in self.operands))


@frozen
class RegDecl:
    """A register declaration after scope resolution: ``.reg .b32 %r<413>;`` is ``RegDecl("%r", "b32", 413)``
    (registers ``%r0`` ... ``%r412``); ``.reg .b64 %SP;`` is ``RegDecl("%SP", "b64", None)``. A register declared
    in an inner block is renamed by the parser (``t`` → ``t$3``) and declared here under its new name.
    ``vector`` is the ``.v2``/``.v4`` count of a vector register declaration, else ``None``."""

    name: str
    type: str
    count: int | None = None
    vector: int | None = None

    def names(self) -> tuple[str, ...]:
        """Every register this declaration creates."""
        if self.count is None:
            return (self.name,)
        return tuple(f"{self.name}{i}" for i in range(self.count))


@frozen
class Variable:
    """A state-space variable: ``.shared .align 1024 .b8 smem[]``, ``.global .align 1 .b8 $str[7] = {...}``,
    ``.const``, ``.local`` (a function's ``__local_depot``), or a ``.param`` declared inside a body (call
    sequences). ``shape`` holds the array dimensions (``()`` for a scalar; ``(0,)`` for an unsized ``[]``,
    e.g. ``extern`` dynamic shared memory); ``init`` is the initializer as a tuple of ints / floats / :class:`Sym`
    (addresses of other variables; ``generic(sym)`` is read as ``sym``), flattened; a float written in PTX's
    exact hex form (``0f3F800000``) stays an :class:`Imm` so its bits are kept. ``linkage`` is
    ``extern``/``visible``/``weak``/``common`` or ``None``. PTX ISA 9.0 §5.4 (variables)."""

    name: str
    space: str  # "shared" | "global" | "const" | "local" | "param"
    type: str  # "b8", "u32", "f32", ...
    shape: tuple[int, ...] = ()
    align: int | None = None
    init: tuple | None = None
    linkage: str | None = None
    vector: int | None = None
    line: int = 0

    @property
    def type_size(self) -> int:
        """Bytes of one element (``.v2``/``.v4`` included)."""
        bits = 8 if self.type == "pred" else int("".join(c for c in self.type if c.isdigit()) or 8)
        return max(1, bits // 8) * (self.vector or 1)

    @property
    def size(self) -> int:
        """Bytes of the whole variable (0 for an unsized ``[]``)."""
        n = 1
        for d in self.shape:
            n *= d
        return n * self.type_size


@frozen
class Param:
    """A kernel or function parameter: ``.param .u64 .ptr .align 1 k_param_0`` or ``.param .align 8 .b8 p[128]``
    (a by-value struct, e.g. a ``CUtensorMap``). ``shape`` as for :class:`Variable`; ``ptr`` marks ``.ptr``
    with its state space (``ptr_space``, ``None`` = generic) and ``align``. PTX ISA 9.0 §5.1.6 (kernel
    parameters)."""

    name: str
    type: str
    shape: tuple[int, ...] = ()
    align: int | None = None
    ptr: bool = False
    ptr_space: str | None = None

    @property
    def size(self) -> int:
        """Bytes this parameter occupies in the parameter space."""
        bits = int("".join(c for c in self.type if c.isdigit()) or 8)
        n = 1
        for d in self.shape:
            n *= d
        return max(1, bits // 8) * n


@frozen
class Function:
    """A ``.entry`` (kernel) or ``.func``: parameters, return parameters (``.func`` only), the flat register
    file, body-scoped variables (``.local``/``.shared``/``.param``), the instruction list, label → index,
    and the performance directives (``.maxntid``, ``.reqntid``, ``.minnctapersm``, ``.maxnreg``,
    ``.explicitcluster``, ``.reqnctapercluster``, ``.maxclusterrank``) as a mapping of name → values.
    ``branch_targets`` maps a ``.branchtargets`` label to its label list (``brx.idx``'s table), ``call_targets``
    a ``.calltargets`` label to its function names, ``prototypes`` a ``.callprototype`` label to its text
    (PTX ISA 9.0 §9.7.12.4 brx.idx, §9.7.12.5 call, §11.3 control flow directives)."""

    name: str
    entry: bool
    params: tuple[Param, ...] = ()
    returns: tuple[Param, ...] = ()
    registers: tuple[RegDecl, ...] = ()
    variables: tuple[Variable, ...] = ()
    body: tuple[Instruction, ...] = ()
    labels: dict[str, int] = field(factory=dict, eq=False, hash=False)
    directives: dict[str, tuple[int, ...]] = field(factory=dict, eq=False, hash=False)
    linkage: str | None = None
    line: int = 0
    branch_targets: dict[str, tuple[str, ...]] = field(factory=dict, eq=False, hash=False)
    call_targets: dict[str, tuple[str, ...]] = field(factory=dict, eq=False, hash=False)
    prototypes: dict[str, str] = field(factory=dict, eq=False, hash=False)

    @property
    def is_declaration(self) -> bool:
        """An ``.extern .func`` prototype without a body (``vprintf``, ``__assertfail``)."""
        return self.linkage == "extern" and not self.body


@frozen
class Module:
    """A whole PTX module: ``.version``, ``.target`` (its list, e.g. ``("sm_100a",)`` or ``("sm_90a", "debug")``),
    ``.address_size``, module-scope variables, functions by name, and the ``.file`` table (index → path)."""

    version: str
    target: tuple[str, ...]
    address_size: int = 64
    variables: tuple[Variable, ...] = ()
    functions: dict[str, Function] = field(factory=dict, eq=False, hash=False)
    files: dict[int, str] = field(factory=dict, eq=False, hash=False)
    source_name: str = "<ptx>"

    def kernels(self) -> tuple[str, ...]:
        """The names of the module's ``.entry`` functions, in order."""
        return tuple(n for n, f in self.functions.items() if f.entry)
