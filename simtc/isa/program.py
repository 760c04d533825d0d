"""``Program``: a kernel as a frozen value -- roles (warps) with ordered records, and a barrier table.

* :class:`Role` -- a name, the CTA warps that run it, its records in issue order, and how many
  threads execute it (default ``32 * len(warps)``; an elected single thread: ``threads=1``).
* :class:`Barrier` -- an mbarrier (expected-arrival count, optional shared-memory address) or a
  named barrier (hardware id 0-15, thread count).
* :class:`Program` -- :meth:`~Program.counts` keyed by PTX opcode, exact JSON round trip,
  :meth:`~Program.diff`, :meth:`~Program.ptx`, and rich / Jupyter renderings (rich is imported
  inside the rendering method only).

>>> from simtc.isa.tcgen05 import Commit, FenceAfterThreadSync
>>> p = Program("tiny", (Role("mma", (4,), (FenceAfterThreadSync(), Commit("done")), threads=1),),
...             barriers=(Barrier("done", "mbarrier", 1),))
>>> p.counts()
{'tcgen05.fence': 1, 'tcgen05.commit': 1}
>>> Program.from_json(p.to_json()) == p
True
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from typing import Any

from attrs import Factory, field, frozen

from simtc.errors import SimtcError
from simtc.isa import schema
from simtc.isa.base import Instr, IsaError, as_int, as_int_tuple, as_opt_int, fail, is_str, name_str, record_from_json
from simtc.isa.mbarrier import MAX_COUNT, MbarrierInit
from simtc.isa.sync import NAMED_BARRIERS

__all__ = ["MAX_WARPS", "OPCODES", "Barrier", "Program", "Role", "program_schema", "write_schema"]

MAX_WARPS = 32
"""Warps a CTA can have: at most 1024 threads per block, 32 warps of 32 (CUDA C++ Programming Guide, "Compute
Capabilities", table "Technical Specifications per Compute Capability": maximum number of threads per block 1024),
so a role's CTA warp indices are 0 ... 31 (the same fact as :data:`simtc.tmem.memory.CTA_WARPS`, which isa cannot
import; a test holds them equal)."""
_WARPS_REF = "CUDA C++ Programming Guide, Compute Capabilities: maximum number of threads per block (1024)"

OPCODES = (
    "tcgen05.mma.ws", "tcgen05.mma", "tcgen05.cp", "tcgen05.commit", "tcgen05.ld", "tcgen05.st", "tcgen05.alloc",
    "tcgen05.dealloc", "tcgen05.relinquish_alloc_permit", "tcgen05.wait", "tcgen05.fence", "mbarrier.init",
    "mbarrier.arrive", "mbarrier.arrive.expect_tx", "mbarrier.try_wait", "cp.async.bulk.tensor", "cp.async.bulk",
    "cp.async.bulk.commit_group", "cp.async.bulk.wait_group.read", "bar.sync", "bar.arrive", "fence.proxy.async",
    "ld.shared", "st.shared", "wgmma.fence", "wgmma.mma_async", "wgmma.commit_group", "wgmma.wait_group",
    "cuda_core", "mbarrier.inval", "elect.sync", "tcgen05.shift",
)
"""Every counting key a record can have (:attr:`Instr.opcode`), in a stable order."""


_JSON_RULE = "Program JSON (simtc program NAME --json)"
BARRIER_KINDS = ("mbarrier", "named")
"""A barrier table entry's ``kind``."""


def _in_record(e: SimtcError, role: str, index: int, d: Any) -> SimtcError:
    """``e`` again (same class, rule, ref), its message prefixed with where it is: role, record index, op, label."""
    msg = f"{schema.record_context(role, index, d)}: {e.message}"
    try:
        return type(e)(msg, rule=e.rule, ref=e.ref)
    except TypeError:  # pragma: no cover - a subclass with another signature
        return IsaError(msg, rule=e.rule, ref=e.ref)


def _records(value) -> tuple[Instr, ...]:
    out = tuple(value)
    for r in out:
        if not isinstance(r, Instr):
            fail(f"a role's records are isa records, got {r!r}", rule="roles hold Instr records")
    return out


def _warps(inst, attribute, value) -> None:
    if not value:
        fail("a role runs on at least one warp, got none", rule="a role has warps")
    if len(set(value)) != len(value) or min(value) < 0:
        fail(f"role warps must be distinct non-negative CTA warp indices, got {list(value)}", rule="role warps")
    if max(value) >= MAX_WARPS:
        fail(f"warp {max(value)}: a CTA has at most {MAX_WARPS} warps (1024 threads), CTA warp indices are "
             f"0-{MAX_WARPS - 1}", rule=f"CTA warp indices are 0-{MAX_WARPS - 1}", ref=_WARPS_REF)


def _default_threads(self) -> int:
    return 32 * len(self.warps)


@frozen
class Role:
    """One warp role: ``records`` run in order by each of ``threads`` threads of ``warps``."""

    name: str = field(validator=name_str)
    warps: tuple[int, ...] = field(converter=as_int_tuple, validator=_warps)
    records: tuple[Instr, ...] = field(converter=_records)
    threads: int = field(default=Factory(_default_threads, takes_self=True), converter=as_int)

    def __attrs_post_init__(self) -> None:
        if not 1 <= self.threads <= 32 * len(self.warps):
            fail(f"role {self.name!r}: {self.threads} threads do not fit {len(self.warps)} warp(s)",
                 rule="a role's threads are 1 ... 32 x warps")

    def __len__(self) -> int:
        return len(self.records)

    def to_json(self) -> dict:
        return {"warps": list(self.warps), "threads": self.threads, "records": [r.to_json() for r in self.records]}

    @classmethod
    def from_json(cls, name: str, d: dict) -> Role:
        """Inverse of :meth:`to_json`; a refused record names the role, its index, its op and the field."""
        warps, records = d["warps"], d["records"]
        if not isinstance(warps, list) or not isinstance(records, list):
            raise IsaError(f"role {name!r}: \"warps\" and \"records\" are JSON lists, got "
                           f"{type(warps).__name__} and {type(records).__name__}", rule=_JSON_RULE)
        recs = []
        for i, r in enumerate(records):
            try:
                recs.append(record_from_json(r))
            except SimtcError as e:
                raise _in_record(e, name, i, r) from None
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                raise _in_record(IsaError(f"{type(e).__name__}: {e}", rule=_JSON_RULE), name, i, r) from None
        extra = {"threads": d["threads"]} if "threads" in d else {}
        try:
            return cls(name, tuple(warps), tuple(recs), **extra)
        except SimtcError as e:
            if e.message.startswith(f"role {name!r}"):  # Role's own rules name the role
                raise
            raise type(e)(f"role {name!r}: {e.message}", rule=e.rule, ref=e.ref) from None


@frozen
class Barrier:
    """A barrier of the program: ``kind`` ``"mbarrier"`` (count = expected arrivals) or ``"named"``
    (``id`` 0-15, count = participating threads, a multiple of 32)."""

    name: str = field(validator=name_str)
    kind: str = field()
    count: int = field(converter=as_int)
    addr: int | None = field(default=None, converter=as_opt_int)
    id: int | None = field(default=None, converter=as_opt_int)

    def __attrs_post_init__(self) -> None:
        if self.kind == "mbarrier":
            if not 1 <= self.count <= MAX_COUNT:
                fail(f"mbarrier {self.name!r}: count {self.count} must be 1 ... 2**20 - 1",
                     rule="mbarrier counts are 1 ... 2**20 - 1", ref="PTX ISA 9.0 §9.7.13.15.2")
            if self.id is not None:
                fail(f"mbarrier {self.name!r} has no named-barrier id", rule="only named barriers have ids")
            if self.addr is not None and (self.addr < 0 or self.addr % 8):
                fail(f"mbarrier {self.name!r} at {self.addr}: an mbarrier is an 8-byte aligned shared-memory object",
                     rule="mbarrier objects are 8-byte aligned .b64", ref="PTX ISA 9.0 §9.7.13.15.1")
        elif self.kind == "named":
            if self.id is None or not 0 <= self.id < NAMED_BARRIERS:
                fail(f"named barrier {self.name!r}: id {self.id!r} must be 0-15", rule="named barrier ids are 0-15",
                     ref="PTX ISA 9.0 §9.7.13.1")
            if self.count <= 0 or self.count % 32:
                fail(f"named barrier {self.name!r}: thread count {self.count} must be a positive multiple of 32",
                     rule="bar thread count is a multiple of the warp size", ref="PTX ISA 9.0 §9.7.13.1")
            if self.addr is not None:
                fail(f"named barrier {self.name!r} has no shared-memory address", rule="named barriers are hardware")
        else:
            fail(f"barrier kind {self.kind!r}: {' or '.join(map(repr, BARRIER_KINDS))}", rule="barrier kinds")

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "count": self.count, "addr": self.addr, "id": self.id}

    @classmethod
    def from_json(cls, d: dict) -> Barrier:
        return cls(d["name"], d["kind"], d["count"], addr=d.get("addr"), id=d.get("id"))


def _meta(value) -> tuple[tuple[str, Any], ...]:
    items = value.items() if isinstance(value, dict) else value
    out = []
    for k, v in items:
        if not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, (str, int, float)):
            fail(f"meta entry {(k, v)!r}: a name and a str/int/float value", rule="program meta")
        out.append((k, v))
    return tuple(out)


def _roles(value) -> tuple[Role, ...]:
    out = tuple(value)
    if not out:
        fail("a program has at least one role", rule="a program has roles")
    names = [r.name for r in out]
    if len(set(names)) != len(names):
        fail(f"role names must be unique: {names}", rule="unique role names")
    return out


def _barriers(value) -> tuple[Barrier, ...]:
    out = tuple(value)
    names = [b.name for b in out]
    if len(set(names)) != len(names):
        fail(f"barrier names must be unique: {names}", rule="unique barrier names")
    return out


def _check_warps(p: Program) -> None:
    """A warp's 32 lanes run one role, or several *partial-warp* roles whose lanes add up to at most 32 (a role of
    one warp with ``threads < 32``: the lanes a branch on the lane index keeps); a one-thread role (``threads=1``:
    the warp's elected lane, e.g. flashmla-sm90's ``q_load``, which inits the barriers and loads Q beside WG0's
    warp 0, or an ``elect.sync`` branch) may run beside them, its lane being one of theirs."""
    lanes: dict[int, list[str]] = {}
    used: dict[int, int] = {}
    for r in p.roles:
        if r.threads == 1:
            continue
        per_warp = max(1, r.threads // len(r.warps))
        for w in r.warps:
            lanes.setdefault(w, []).append(r.name)
            used[w] = used.get(w, 0) + per_warp
            if used[w] > 32:
                names = lanes[w]
                fail(f"program {p.name!r}: warp {w} is in roles {' and '.join(map(repr, names))} with {used[w]} "
                     "lanes in all; a warp has 32 lanes (partial-warp roles share them; only a one-thread role, "
                     "threads=1, its elected lane, may run beside them)", rule="a warp's roles share its 32 lanes")


def _check_tokens(p: Program) -> None:
    """A ``try_wait`` on a state token names the ``state`` of an earlier arrive of its role on the same mbarrier
    (the token is that arrive's result, PTX ISA 9.0 §9.7.13.15.13, §9.7.13.15.16)."""
    from simtc.isa.mbarrier import MbarrierTryWait

    for r in p.roles:
        written: dict[str, str] = {}
        for i, rec in enumerate(r.records):
            state = getattr(rec, "state", "")
            if state and hasattr(rec, "bar"):
                written[state] = rec.bar
            if isinstance(rec, MbarrierTryWait) and rec.token and written.get(rec.token) != rec.bar:
                fail(f"program {p.name!r}: role {r.name!r} record {i} ({rec.ptx()}) waits on token {rec.token!r}, "
                     f"which no earlier arrive of the role on {rec.bar!r} wrote",
                     rule="a try_wait token is the state of an earlier arrive on the same mbarrier",
                     ref="PTX ISA 9.0 §9.7.13.15.13, §9.7.13.15.16")


def _check_inits(p: Program) -> None:
    """Every ``mbarrier.init`` of a barrier in the table gives the table's count (the engine and the semantics
    initialise the table's barriers with its count, and an init sets the expected count anew: they would run
    with two different counts)."""
    table = {b.name: b for b in p.barriers}
    for role, i, rec in p.records():
        if not isinstance(rec, MbarrierInit) or rec.bar not in table:
            continue
        b = table[rec.bar]
        where = f"role {role.name!r} record {i} ({rec.ptx()})"
        if b.kind != "mbarrier":
            fail(f"program {p.name!r}: {where} initialises {rec.bar!r}, which the barrier table declares a named "
                 "barrier", rule="mbarrier.init initialises an mbarrier", ref="PTX ISA 9.0 §9.7.13.15.9")
        if b.count != rec.count:
            fail(f"program {p.name!r}: the barrier table gives {rec.bar!r} count {b.count} but {where} initialises "
                 f"it with count {rec.count}; make them agree",
                 rule="a barrier's table count equals its mbarrier.init count",
                 ref="PTX ISA 9.0 §9.7.13.15.9 (mbarrier.init sets the expected arrival count)")


@frozen
class Program:
    """A kernel (or one step of it) as data: roles -> ordered records, plus a barrier table."""

    name: str = field(validator=name_str)
    roles: tuple[Role, ...] = field(converter=_roles)
    barriers: tuple[Barrier, ...] = field(default=(), converter=_barriers)
    description: str = field(default="", validator=is_str)
    meta: tuple[tuple[str, str | int | float], ...] = field(default=(), converter=_meta)

    def __attrs_post_init__(self) -> None:
        _check_warps(self)
        _check_inits(self)
        _check_tokens(self)

    # ---- access ----------------------------------------------------------------------------------------
    def role(self, name: str) -> Role:
        for r in self.roles:
            if r.name == name:
                return r
        raise IsaError(f"program {self.name!r} has no role {name!r} (roles: {', '.join(self.role_names)})",
                       rule="role names")

    @property
    def role_names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.roles)

    def barrier(self, name: str) -> Barrier:
        for b in self.barriers:
            if b.name == name:
                return b
        raise IsaError(f"program {self.name!r} declares no barrier {name!r}", rule="barrier names")

    def records(self) -> Iterator[tuple[Role, int, Instr]]:
        """Every (role, index in the role, record), role by role."""
        for r in self.roles:
            for i, rec in enumerate(r.records):
                yield r, i, rec

    def __len__(self) -> int:
        return sum(len(r) for r in self.roles)

    # ---- counting --------------------------------------------------------------------------------------
    def counts(self, per_warp: bool = False) -> dict[str, int]:
        """Records by PTX opcode (:data:`OPCODES`), in first-appearance order.

        Default: each role's stream counted once (what one thread / warp of the role issues).
        ``per_warp=True``: records that every warp issues (not :attr:`Instr.elected`) count once per
        warp of the role (the dynamic warp-instruction count).
        """
        out: dict[str, int] = {}
        for role, _, rec in self.records():
            n = len(role.warps) if per_warp and not rec.elected else 1
            out[rec.opcode] = out.get(rec.opcode, 0) + n
        return out

    # ---- JSON ------------------------------------------------------------------------------------------
    def to_json(self) -> dict:
        """``{"name", "description", "meta", "roles": {role: {...}}, "barriers": [...], "counts": {...}}``."""
        return {
            "name": self.name,
            "description": self.description,
            "meta": [[k, v] for k, v in self.meta],
            "roles": {r.name: r.to_json() for r in self.roles},
            "barriers": [b.to_json() for b in self.barriers],
            "counts": self.counts(),
        }

    @classmethod
    def from_json(cls, d: dict) -> Program:
        """Inverse of :meth:`to_json` (``"counts"`` is derived, so it is checked, not read). ``d`` is first checked
        against the Program JSON Schema (:func:`program_schema`, shipped as ``simtc/isa/program.schema.json``):
        keys, types and record ops, each refusal naming its JSON path; then every record, role, barrier and the
        program are built, and their classes check the values' rules."""
        schema.validate(d)
        roles = tuple(Role.from_json(n, r) for n, r in d["roles"].items())
        bars = []
        for i, b in enumerate(d.get("barriers", ())):
            try:
                bars.append(Barrier.from_json(b))
            except SimtcError as e:
                raise type(e)(f"barrier {i} ({b['name']!r}): {e.message}", rule=e.rule, ref=e.ref) from None
        meta = tuple(tuple(m) for m in d.get("meta", ()))
        p = cls(d["name"], roles, barriers=tuple(bars), description=d.get("description", ""), meta=meta)
        if "counts" in d and dict(d["counts"]) != p.counts():
            raise IsaError(f"program {p.name!r}: the JSON's counts {d['counts']} disagree with its records "
                           f"{p.counts()}", rule="counts are derived from the records")
        return p

    # ---- comparison ------------------------------------------------------------------------------------
    def diff(self, other: Program) -> list[str]:
        """Human-readable differences from ``self`` to ``other`` (empty when equal)."""
        out: list[str] = []
        for attr in ("name", "description", "meta"):
            if getattr(self, attr) != getattr(other, attr):
                out.append(f"{attr}: {getattr(self, attr)!r} -> {getattr(other, attr)!r}")
        mine, theirs = {r.name: r for r in self.roles}, {r.name: r for r in other.roles}
        for name in sorted(mine.keys() - theirs.keys()):
            out.append(f"role {name!r} removed")
        for name in sorted(theirs.keys() - mine.keys()):
            out.append(f"role {name!r} added")
        for name in [n for n in mine if n in theirs]:
            a, b = mine[name], theirs[name]
            if a.warps != b.warps:
                out.append(f"role {name!r}: warps {a.warps} -> {b.warps}")
            if a.threads != b.threads:
                out.append(f"role {name!r}: threads {a.threads} -> {b.threads}")
            for i in range(max(len(a.records), len(b.records))):
                ra = a.records[i] if i < len(a.records) else None
                rb = b.records[i] if i < len(b.records) else None
                if ra == rb:
                    continue
                if ra is None:
                    out.append(f"role {name!r} record {i} added: {rb.ptx()}")
                elif rb is None:
                    out.append(f"role {name!r} record {i} removed: {ra.ptx()}")
                elif ra.ptx() == rb.ptx():
                    out.append(f"role {name!r} record {i} changed ({ra.label!r} -> {rb.label!r}): {ra.ptx()}")
                else:
                    out.append(f"role {name!r} record {i} changed: {ra.ptx()} -> {rb.ptx()}")
        bm, bt = {b.name: b for b in self.barriers}, {b.name: b for b in other.barriers}
        for name in sorted(bm.keys() - bt.keys()):
            out.append(f"barrier {name!r} removed")
        for name in sorted(bt.keys() - bm.keys()):
            out.append(f"barrier {name!r} added")
        for name in sorted(bm.keys() & bt.keys()):
            if bm[name] != bt[name]:
                out.append(f"barrier {name!r}: {bm[name]} -> {bt[name]}")
        return out

    # ---- text and pictures -----------------------------------------------------------------------------
    def ptx(self) -> str:
        """One listing: per role a comment header, then one PTX line per record (label as a comment)."""
        lines = [f"// program {self.name}" + (f": {self.description}" if self.description else "")]
        for r in self.roles:
            lines.append(f"// role {r.name} (warps {', '.join(map(str, r.warps))}; {r.threads} threads)")
            for rec in r.records:
                lines.append(rec.ptx() + (f"  // {rec.label}" if rec.label else ""))
        return "\n".join(lines)

    def _summary(self) -> str:
        counts = ", ".join(f"{n} {k}" for k, n in self.counts().items())
        return f"program {self.name}: {len(self.roles)} roles, {len(self)} records ({counts})"

    def __rich_console__(self, console, options):
        """The listing: a table per role. Every piece of text is a ``rich.text.Text`` (never console markup): PTX
        operands such as ``[full]`` or ``[mma_done]`` would otherwise be read as markup tags and vanish."""
        from rich.table import Table
        from rich.text import Text

        yield Text(self._summary(), style="bold")
        if self.description:
            yield Text(self.description)
        for r in self.roles:
            t = Table(title=Text(f"role {r.name} - warps {', '.join(map(str, r.warps))}, {r.threads} threads"),
                      title_justify="left")
            t.add_column("#", justify="right")
            t.add_column("opcode", style="cyan")
            t.add_column("PTX", overflow="fold")
            t.add_column("label", style="dim")
            for i, rec in enumerate(r.records):
                t.add_row(Text(str(i)), Text(rec.opcode), Text(rec.ptx()), Text(rec.label))
            yield t

    def _repr_html_(self) -> str:
        esc = html.escape
        parts = [f"<div><b>{esc(self._summary())}</b>"]
        if self.description:
            parts.append(f"<p>{esc(self.description)}</p>")
        for r in self.roles:
            parts.append(f"<p><b>role {esc(r.name)}</b> - warps {esc(', '.join(map(str, r.warps)))}, "
                         f"{r.threads} threads</p><table><tr><th>#</th><th>opcode</th><th>PTX</th><th>label</th></tr>")
            for i, rec in enumerate(r.records):
                parts.append(f"<tr><td>{i}</td><td>{esc(rec.opcode)}</td><td><code>{esc(rec.ptx())}</code></td>"
                             f"<td>{esc(rec.label)}</td></tr>")
            parts.append("</table>")
        parts.append("</div>")
        return "".join(parts)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        return {"text/plain": self._summary() + "\n" + self.ptx(), "text/html": self._repr_html_()}


# ---- the JSON Schema ---------------------------------------------------------------------------------------
def program_schema() -> dict:
    """The JSON Schema (draft 2020-12) of :meth:`Program.to_json`, built from the classes: the Program, role and
    barrier objects from their fields, every record from its class (:func:`simtc.isa.schema.record_defs`). The
    shipped ``simtc/isa/program.schema.json`` is this (:func:`write_schema`; a test holds them equal)."""
    import attrs

    fields = {a.name: a for a in attrs.fields(Role)}
    role = {"title": "role", "description": "a warp role (the key is its name): the CTA warps that run it, the "
                                            "threads that execute it (default 32 per warp; 1 = an elected lane) "
                                            "and its records in issue order",
            "type": "object", "required": ["warps", "records"], "additionalProperties": False,
            "properties": {"warps": schema.field_schema(fields["warps"]),
                           "threads": schema.field_schema(fields["threads"]),
                           "records": {"type": "array", "items": {"$ref": "#/$defs/record"}}}}
    bfields = attrs.fields(Barrier)
    bprops = {a.name: schema.field_schema(a) for a in bfields}
    bprops["kind"] = dict(bprops["kind"], enum=list(BARRIER_KINDS))
    barrier = {"title": "barrier", "description": "a barrier of the table: an mbarrier (count = expected arrivals, "
                                                  "optional shared-memory addr) or a named barrier (id 0-15, count "
                                                  "= threads)",
               "type": "object", "required": [a.name for a in bfields if a.default is attrs.NOTHING],
               "additionalProperties": False, "properties": bprops}
    pfields = {a.name: a for a in attrs.fields(Program)}
    return {
        "$schema": schema.DIALECT,
        "title": "simtc Program",
        "description": "A kernel as data (simtc program NAME --json; simtc.isa.Program.to_json). Generated from the "
                       "record classes by simtc.isa.program.program_schema; the values' rules are checked by the "
                       "classes when the Program is built.",
        "type": "object",
        "required": ["name", "roles"],
        "additionalProperties": False,
        "properties": {
            "name": schema.field_schema(pfields["name"]),
            "description": schema.field_schema(pfields["description"]),
            "meta": {"type": "array", "items": {"type": "array", "prefixItems": [{"type": "string"},
                                                                                 {"type": ["string", "number"]}],
                                                "minItems": 2, "maxItems": 2},
                     "description": "[name, value] pairs (value a string or a number)"},
            "roles": {"type": "object", "additionalProperties": {"$ref": "#/$defs/role"}},
            "barriers": {"type": "array", "items": {"$ref": "#/$defs/barrier"}},
            "counts": {"type": "object", "propertyNames": {"enum": list(OPCODES)},
                       "additionalProperties": {"type": "integer"},
                       "description": "records by PTX opcode, derived: checked against the records when read"},
        },
        "$defs": {"role": role, "barrier": barrier, **schema.record_defs()},
    }


def write_schema(path=None) -> None:
    """Write :func:`program_schema` to ``path`` (default the shipped :data:`simtc.isa.schema.SCHEMA_FILE`)."""
    import json
    from pathlib import Path

    Path(path or schema.SCHEMA_FILE).write_text(json.dumps(program_schema(), indent=1) + "\n", encoding="utf-8")
