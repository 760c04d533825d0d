"""The JSON Schema of Program files, derived from the record classes, and the check every load runs.

A Program file (``simtc program NAME --json``, :meth:`simtc.isa.Program.to_json`) is described by
``simtc/isa/program.schema.json`` (JSON Schema draft 2020-12; ``simtc program --schema`` prints it). The file is
generated, never edited: :func:`simtc.isa.program.program_schema` builds it from the classes -- each registered
record (:data:`simtc.isa.base.REGISTRY`) becomes the schema of its ``op`` with one property per attrs field,
typed from the field's annotation and JSON codec (:func:`record_schema`), required where the field has no
default -- and ``tests/isa/test_program_schema.py`` checks that the shipped file equals the generated one, so
the two cannot drift. Regenerate it with ``python -m simtc.isa.program`` after changing a record class.

The schema says what a file holds (keys, types, which op a record is); the values' rules (an mbarrier count is
1 ... 2**20 - 1, a descriptor's reserved bits are 0 ...) stay with the classes, which check them when the records
are built, each naming its rule and PTX section.

:func:`validate` runs the shipped schema with ``jsonschema`` (imported only then) and turns its first error into
one :class:`~simtc.isa.base.IsaError` naming the JSON path and the rule; an unknown key is told with the key it
most likely meant (``difflib``): ``unknown key 'barrier' at $ (did you mean 'barriers'?)``.
"""

from __future__ import annotations

import difflib
import functools
import json
from pathlib import Path
from typing import Any

import attrs

from simtc.isa.base import REGISTRY, Instr, IsaError
from simtc.isa.files import json_path

__all__ = ["SCHEMA_FILE", "field_schema", "record_context", "record_defs", "record_schema", "shipped", "validate"]

SCHEMA_FILE = Path(__file__).with_name("program.schema.json")
"""The shipped schema (package data)."""
SCHEMA_RULE = "Program JSON schema (simtc program --schema)"
DIALECT = "https://json-schema.org/draft/2020-12/schema"

INT_MIN, INT_MAX = -(1 << 31), (1 << 32) - 1
"""The range of an integer in a Program file: 32 bits, signed or unsigned. Every integer operand of the records is
a 32-bit PTX operand (.shared::cta and TMEM addresses, ``.u32`` sizes and counts, ``.s32`` tensor coordinates:
PTX ISA 9.0 §9.7.9.25, §9.7.13.15, §9.7.16.1.1); descriptor words, 64-bit, are the exception."""
INT_RULE = (f"an integer of a Program file is a 32-bit value, {INT_MIN} ... {INT_MAX} (descriptor words: 64-bit, "
            "0 ... 2**64 - 1)")
_SCALAR = {"str": "string", "int": "integer", "bool": "boolean", "float": "number", "None": "null"}
_DESC_WORD = {"type": ["string", "integer"], "minimum": 0, "maximum": (1 << 64) - 1}
_EXTRA = {"kind": {"type": "string", "description": "the instruction kind (f16, tf32, f8f6f4, i8): the idesc word "
                                                    "does not encode it"}}
"""Schemas of the keys a record writes beside its fields (``Instr._json_extra``)."""


def _scalars(annotation: str) -> dict | None:
    parts = [p.strip() for p in annotation.split("|")]
    if all(p in _SCALAR for p in parts):
        types = [_SCALAR[p] for p in parts]
        if "boolean" in types:  # predicates are also read as 0 / 1 (simtc.isa.base.as_bool)
            types.insert(types.index("boolean") + 1, "integer")
        out: dict[str, Any] = {"type": types[0] if len(types) == 1 else types}
        if "integer" in types:  # (minimum / maximum apply to numbers only: null, strings and booleans pass)
            out.update(minimum=INT_MIN, maximum=INT_MAX)
        return out
    return None


def _items(annotation: str) -> str:
    """``T`` of ``tuple[T, ...]``."""
    if not (annotation.startswith("tuple[") and annotation.endswith(", ...]")):
        raise TypeError(f"not a homogeneous tuple annotation: {annotation!r}")
    return annotation[len("tuple["):-len(", ...]")]


def _fixed(types: list[dict]) -> dict:
    return {"type": "array", "prefixItems": types, "minItems": len(types), "maxItems": len(types)}


def _value_class_row(name: str) -> dict:
    """A footprint value (``SmemRange``, ``TmemRect``) as a fixed-length list of its fields."""
    from simtc.isa import footprint

    cls = getattr(footprint, name)
    return _fixed([field_schema(a) for a in attrs.fields(cls)])


def field_schema(a: attrs.Attribute) -> dict:
    """The JSON Schema of one attrs field, from its annotation and ``metadata["codec"]`` (what
    :meth:`Instr.to_json` writes and :meth:`Instr.from_json` reads); ``TypeError`` for a type it does not know,
    so a new kind of field cannot go undescribed."""
    ann = a.type if isinstance(a.type, str) else getattr(a.type, "__name__", str(a.type))
    codec = a.metadata.get("codec")
    kind = codec[0] if isinstance(codec, tuple) else codec
    if kind == "desc":
        return dict(_DESC_WORD, description=f"a 64-bit {codec[1]} shared-memory descriptor word: a hex string "
                                            "(\"0x4000404000010000\", as written) or an integer")
    if kind == "idesc":
        return dict(_DESC_WORD, description="the 32-bit instruction descriptor word: a hex string (\"0x04200490\", "
                                            "as written) or an integer")
    if kind == "desc_or_taddr":
        return dict(_DESC_WORD, description="a TMEM address (integer: the TS form) or a 64-bit sm100 descriptor "
                                            "word (hex string: the SS form)")
    if kind == "desc_or_reg":
        return {"type": "object", "minProperties": 1, "maxProperties": 1, "additionalProperties": False,
                "properties": {"desc": dict(_DESC_WORD, description="a 64-bit sm90 descriptor word"),
                               "regs": {"type": "string", "description": "a register fragment's name"}},
                "description": "{\"desc\": word} (A in shared memory) or {\"regs\": name} (A in registers)"}
    if kind == "pairs":  # tuple[tuple[str, int], ...]
        inner = _items(ann)
        if not (inner.startswith("tuple[") and inner.endswith("]")):
            raise TypeError(f"field {a.name}: pairs of {inner!r}")
        parts = [_scalars(t) for t in inner[len("tuple["):-1].split(",")]
        if any(p is None for p in parts):
            raise TypeError(f"field {a.name}: pairs of {inner!r}")
        return {"type": "array", "items": _fixed(parts)}  # type: ignore[arg-type]
    if kind in ("ranges", "rects"):
        return {"type": "array", "items": _value_class_row(_items(ann))}
    if kind == "tuple" or (kind is None and ann.startswith("tuple[")):
        item = _scalars(_items(ann))
        if item is None:
            raise TypeError(f"field {a.name}: a tuple of {_items(ann)!r}")
        return {"type": "array", "items": item}
    if kind is None:
        s = _scalars(ann)
        if s is not None:
            return s
    raise TypeError(f"field {a.name}: no JSON schema for type {ann!r} with codec {codec!r}")


def record_schema(cls: type[Instr]) -> dict:
    """The schema of one record class: ``op`` (its tag) and one property per field, required where the field has
    no default."""
    props: dict[str, Any] = {"op": {"const": cls.op}}
    required = ["op"]
    for a in attrs.fields(cls):
        props[a.name] = field_schema(a)
        if a.default is attrs.NOTHING:
            required.append(a.name)
    for extra in cls._json_extra:
        if extra not in _EXTRA:
            raise TypeError(f"{cls.__name__}: no JSON schema for the extra key {extra!r}")
        props[extra] = _EXTRA[extra]
    doc = (cls.__doc__ or "").strip().split("\n\n")[0]
    return {"title": f"{cls.op} record ({cls.__name__})", "description": " ".join(doc.split()), "type": "object",
            "required": required, "additionalProperties": False, "properties": props}


def record_defs() -> dict[str, dict]:
    """``{"record.<op>": schema}`` for every registered record, and ``"record"``: an object whose ``op`` is one
    of them, checked against that op's schema."""
    ops = sorted(REGISTRY)
    out: dict[str, dict] = {
        "record": {"title": "record", "description": "one instruction record: its \"op\" names the record kind",
                   "type": "object", "required": ["op"], "properties": {"op": {"enum": ops}},
                   "allOf": [{"if": {"properties": {"op": {"const": op}}, "required": ["op"]},
                              "then": {"$ref": f"#/$defs/record.{op}"}} for op in ops]}}
    for op in ops:
        out[f"record.{op}"] = record_schema(REGISTRY[op])
    return out


@functools.cache
def _shipped_text() -> str:
    return SCHEMA_FILE.read_text(encoding="utf-8")


def shipped() -> dict:
    """The shipped schema file's content (a fresh copy)."""
    return json.loads(_shipped_text())


@functools.cache
def _validators() -> tuple[Any, dict[str, Any]]:
    """(a validator of the whole file whose records are checked for their op only, {op: a validator of that op's
    record}). The shipped schema dispatches a record to its op with ``allOf`` / ``if`` / ``then``, which jsonschema
    evaluates op by op for every record (about ten times slower); the same subschemas are applied here through
    one validator per op."""
    import copy

    import jsonschema

    full = shipped()
    cls = jsonschema.validators.validator_for(full)
    top = copy.deepcopy(full)
    top["$defs"]["record"].pop("allOf")
    per = {k.removeprefix("record."): cls(v) for k, v in full["$defs"].items() if k.startswith("record.")}
    return cls(top), per


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _title(root: dict, path) -> str:
    """The title of the innermost titled schema on the way to the failing keyword (a ``$defs`` entry)."""
    node: Any = root
    title = "Program"
    for part in path:
        if isinstance(node, dict) and "$ref" in node and part not in node:
            node = root["$defs"][node["$ref"].removeprefix("#/$defs/")]
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            break
        if isinstance(node, dict) and "$ref" in node:
            node = root["$defs"][node["$ref"].removeprefix("#/$defs/")]
        if isinstance(node, dict) and isinstance(node.get("title"), str):
            title = node["title"]
    return title


_WHAT = {"object": "a JSON object", "array": "a JSON list", "string": "a string", "integer": "an integer",
         "number": "a number", "boolean": "true or false", "null": "null"}
_PROGRAM = ("a Program's JSON is an object with a \"name\" string and a \"roles\" object (role -> {warps, threads, "
            "records})")


def _at(root: Any, parts: list) -> Any:
    node = root
    for p in parts:
        try:
            node = node[p]
        except (KeyError, IndexError, TypeError):
            return None
    return node


def record_context(role: str, index: int, d: Any) -> str:
    """``role 'mma' record 3 (tcgen05.mma 'QK k=0')``: where a record is, its op and label."""
    what = ""
    if isinstance(d, dict):
        label = d.get("label")
        what = f" ({d.get('op', '?')}" + (f" {label!r}" if isinstance(label, str) and label else "") + ")"
    return f"role {role!r} record {index}{what}"


def _context(root: Any, parts: list) -> tuple[str, list]:
    """(the record, role or barrier the path is in, the rest of the path)."""
    if len(parts) >= 4 and parts[0] == "roles" and parts[2] == "records" and isinstance(parts[3], int):
        return record_context(str(parts[1]), parts[3], _at(root, parts[:4])), parts[4:]
    if len(parts) >= 2 and parts[0] == "roles":
        return f"role {parts[1]!r}", parts[2:]
    if len(parts) >= 2 and parts[0] == "barriers" and isinstance(parts[1], int):
        b = _at(root, parts[:2])
        name = f" ({b['name']!r})" if isinstance(b, dict) and isinstance(b.get("name"), str) else ""
        return f"barrier {parts[1]}{name}", parts[2:]
    return "", parts


def _message(e, root: Any, prefix: list, title: str) -> tuple[str, str]:
    """(message, rule) of one jsonschema ValidationError found at ``prefix`` (JSON path parts) of ``root`` under a
    schema titled ``title``: where (the role, record or barrier, and the JSON path), then what."""
    parts = [*prefix, *e.absolute_path]
    where = json_path(parts)
    ctx, rest = _context(root, parts)
    inst = e.instance
    sch = e.schema if isinstance(e.schema, dict) else {}
    rule = f"{SCHEMA_RULE}: {title}"
    in_record = ctx.startswith("role ") and " record " in ctx
    name = next((p for p in reversed(rest) if isinstance(p, str)), None)
    key = None if name is None else f"field {name!r}" if in_record and rest[0] == name else f'"{name}"'

    def out(what: str, r: str = rule) -> tuple[str, str]:
        return (f"{ctx}: {what} (at {where})" if ctx else f"{where}: {what}"), r

    field = "JSON field" if title.endswith(")") else "key"  # a record's title ends in its class name
    if e.validator == "additionalProperties" and isinstance(inst, dict):
        known = list(sch.get("properties", {}))
        k = next(k for k in inst if k not in known)
        near = difflib.get_close_matches(k, known, n=1, cutoff=0.6)
        hint = f"did you mean {near[0]!r}?" if near else f"known: {', '.join(known)}"
        return out(f"unknown {field} {k!r} ({hint})")
    if e.validator == "required":
        k = next(k for k in e.validator_value if not (isinstance(inst, dict) and k in inst))
        extra = [x for x in inst if x not in sch.get("properties", {})] if isinstance(inst, dict) else []
        near = difflib.get_close_matches(k, extra, n=1, cutoff=0.6)
        if near:  # a misspelt required key: say so, not only that the key is missing
            return out(f"unknown {field} {near[0]!r} (did you mean {k!r}?)")
        return out(f"the {title} lacks the key {k!r}" + (f"; {_PROGRAM}" if not parts else ""))
    if e.validator == "enum" and parts and parts[-1] == "op":
        near = difflib.get_close_matches(str(inst), e.validator_value, n=1, cutoff=0.6)
        hint = f"did you mean {near[0]!r}?" if near else "simtc program --schema lists them"
        return out(f"unknown record op {_short(inst)} ({hint})", f"{SCHEMA_RULE}: record op tags")
    if e.validator == "type":
        want = e.validator_value if isinstance(e.validator_value, list) else [e.validator_value]
        what = " or ".join(_WHAT.get(t, t) for t in want)
        if not parts:
            return out(f"{_PROGRAM}, got {_short(inst)}")
        if not rest and in_record:
            return out(f"a record's JSON is an object with an 'op' tag, got {_short(inst)}")
        return out(f"{key or 'the value'} must be {what}, got {_short(inst)}")
    if e.validator in ("minimum", "maximum") and isinstance(inst, int):
        return out(f"{key or 'the value'} is {_short(inst)}, outside {sch.get('minimum')} ... {sch.get('maximum')}",
                   f"{SCHEMA_RULE}: {INT_RULE}")
    text = " ".join(e.message.split())
    if len(text) > 160:
        text = text[:157] + "..."
    desc = sch.get("description")
    return out(text, f"{rule}; {desc}" if isinstance(desc, str) else rule)


def validate(instance: Any) -> None:
    """Check ``instance`` (a parsed Program file) against the shipped schema; the first error (jsonschema's
    ``best_match``: the whole file's, then each record's in order) becomes an :class:`IsaError` naming its JSON
    path and the rule."""
    from jsonschema.exceptions import best_match

    top, per = _validators()
    err = best_match(top.iter_errors(instance))
    if err is not None:
        message, rule = _message(err, instance, [], _title(top.schema, list(err.absolute_schema_path)[:-1]))
        raise IsaError(message, rule=rule)
    valid: set[str] = set()  # records a kernel repeats (block after block) are checked once
    for name, role in instance["roles"].items():
        for i, rec in enumerate(role["records"]):
            text = json.dumps(rec, sort_keys=True)
            if text in valid:
                continue
            v = per[rec["op"]]
            err = best_match(v.iter_errors(rec))
            valid.add(text)
            if err is not None:
                message, rule = _message(err, instance, ["roles", name, "records", i], v.schema["title"])
                raise IsaError(message, rule=rule)
