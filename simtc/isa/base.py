"""The record protocol: the :class:`Instr` base class, the JSON registry, field codecs and validators.

Every record is an attrs ``@frozen`` subclass of :class:`Instr`, registered with
:func:`register` under its JSON tag ``op``. Field values go to JSON through a per-field codec
(attrs ``metadata={"codec": ...}``): shared-memory descriptors as hex words, TMEM addresses as
integers, tuples as lists; :func:`record_from_json` inverts it exactly.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
from attrs import field, frozen

from simtc.errors import DescriptorError, SimtcError
from simtc.isa.footprint import Footprint, SmemRange, TmemRect
from simtc.smem.desc import SmemDescriptor

__all__ = ["REGISTRY", "Instr", "IsaError", "record_from_json", "register"]


class IsaError(SimtcError, ValueError):
    """A record whose fields break a PTX rule (named by ``rule`` and ``ref``)."""


REGISTRY: dict[str, type[Instr]] = {}
"""JSON tag (``op``) -> record class."""


def register(cls: type[Instr]) -> type[Instr]:
    """Class decorator (put it above ``@frozen``): make ``cls`` loadable by :func:`record_from_json`."""
    op = cls.__dict__.get("op")
    if not op:
        raise TypeError(f"{cls.__name__} has no JSON tag 'op'")
    if op in REGISTRY and REGISTRY[op].__qualname__ != cls.__qualname__:
        raise TypeError(f"JSON tag {op!r} is used by {REGISTRY[op].__name__} and {cls.__name__}")
    REGISTRY[op] = cls
    return cls


# ---- validators / converters ------------------------------------------------------------------------
def fail(message: str, rule: str, ref: str | None = None, error: type[SimtcError] = IsaError) -> None:
    raise error(message, rule=rule, ref=ref)


def as_int(value: Any) -> int:
    """Integers only (numpy integers accepted); bools, floats and strings raise."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise IsaError(f"expected an integer, got {value!r}", rule="integer operand")
    return int(value.__index__())


def as_opt_int(value: Any) -> int | None:
    return None if value is None else as_int(value)


def as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if hasattr(value, "__index__") and int(value.__index__()) in (0, 1):
        return bool(int(value.__index__()))
    raise IsaError(f"expected a bool (or 0/1), got {value!r}", rule="predicate operand")


def as_int_tuple(value: Any) -> tuple[int, ...]:
    return tuple(as_int(v) for v in value)


def as_str_tuple(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value)


def nonneg(inst, attribute, value) -> None:
    if value < 0:
        fail(f"{attribute.name} must be >= 0, got {value}", rule=f"{attribute.name} is non-negative")


def name_str(inst, attribute, value) -> None:
    if not isinstance(value, str) or not value:
        fail(f"{attribute.name} must be a non-empty name, got {value!r}", rule=f"{attribute.name} is a name")


def is_str(inst, attribute, value) -> None:
    if not isinstance(value, str):
        fail(f"{attribute.name} must be a string, got {value!r}", rule=f"{attribute.name} is text")


def desc_field(arch: str = "sm100", **kw):
    """An attrs field holding a :class:`SmemDescriptor` of ``arch`` (an int word is decoded)."""

    def conv(v):
        if isinstance(v, SmemDescriptor):
            return v
        if isinstance(v, (int, str)) and not isinstance(v, bool):
            return SmemDescriptor.from_u64(v, arch)
        raise DescriptorError(f"expected a shared-memory descriptor, got {v!r}", rule="descriptor operand")

    def check(inst, attribute, v):
        if v.arch != arch:
            fail(f"{attribute.name}: a {v.arch} descriptor where {type(inst).__name__} needs {arch}",
                 rule=f"{type(inst).__name__} takes {arch} descriptors",
                 ref="PTX ISA 9.0 §9.7.16.4.1 / §9.7.15.5.1.2.2",
                 error=DescriptorError)

    return field(converter=conv, validator=check, metadata={"codec": ("desc", arch)}, **kw)


# ---- codecs --------------------------------------------------------------------------------------------
def _encode(value: Any, codec: Any) -> Any:
    kind = codec[0] if isinstance(codec, tuple) else codec
    if value is None:
        return None
    if kind == "desc":
        return value.hex()
    if kind == "desc_or_taddr":  # Mma.a: a TMEM address (int) or an sm100 descriptor (hex string)
        return value.hex() if isinstance(value, SmemDescriptor) else int(value)
    if kind == "desc_or_reg":  # wgmma A: {"desc": hex} or {"regs": name}
        return {"desc": value.hex()} if isinstance(value, SmemDescriptor) else {"regs": value}
    if kind == "idesc":
        return value.hex()
    if kind == "tuple":
        return list(value)
    if kind == "pairs":
        return [list(p) for p in value]
    if kind == "ranges":
        return [[r.start, r.stop] for r in value]
    if kind == "rects":
        return [[r.lane0, r.lanes, r.col0, r.cols] for r in value]
    raise SimtcError(f"unknown codec {codec!r}", rule="record field codecs")


def _decode(value: Any, codec: Any) -> Any:
    kind = codec[0] if isinstance(codec, tuple) else codec
    if value is None:
        return None
    if kind == "desc":
        return SmemDescriptor.from_u64(value, codec[1])
    if kind == "desc_or_taddr":
        return SmemDescriptor.from_u64(value, "sm100") if isinstance(value, str) else value
    if kind == "desc_or_reg":
        if "desc" in value:
            return SmemDescriptor.from_u64(value["desc"], "sm90")
        return value["regs"]
    if kind == "idesc":
        return value  # the record's from_json decodes it together with the kind
    if kind == "tuple":
        return tuple(value)
    if kind == "pairs":
        return tuple(tuple(p) for p in value)
    if kind == "ranges":
        return tuple(SmemRange(*r) for r in value)
    if kind == "rects":
        return tuple(TmemRect(*r) for r in value)
    raise SimtcError(f"unknown codec {codec!r}", rule="record field codecs")


# ---- the base class ------------------------------------------------------------------------------------
@frozen
class Instr:
    """Base class of every record: one PTX instruction (or one named block of CUDA-core work).

    Class attributes: ``op`` (unique JSON tag), ``opcode`` (the counting key of
    :meth:`simtc.isa.Program.counts`; an instance property where it depends on fields),
    ``is_async`` (executes on an asynchronous unit: the tensor core, TMEM ld/st, TMA),
    ``elected`` (issued by one elected thread, not by every thread of the warp).
    """

    op: ClassVar[str] = ""
    opcode: ClassVar[str] = ""
    is_async: ClassVar[bool] = False
    elected: ClassVar[bool] = False
    _json_extra: ClassVar[tuple[str, ...]] = ()

    label: str = field(default="", kw_only=True, validator=is_str)
    """Human text (a role's comment, e.g. ``"QK NoPE k=3"``); never part of the semantics."""

    ptx_line: ClassVar[str] = ""
    """The whole PTX line of a record without operands (e.g. ``"tcgen05.wait::ld.sync.aligned;"``)."""

    def ptx(self) -> str:
        """This record's PTX line; records with operands override it."""
        if not self.ptx_line:  # pragma: no cover - every record has a line or an override
            raise NotImplementedError(f"{type(self).__name__} has no PTX line")
        return self.ptx_line

    def footprint(self, warp: int = 0) -> Footprint:
        """What this record reads and writes (default: nothing)."""
        return Footprint()

    def to_json(self) -> dict:
        """A JSON-ready dict with the ``"op"`` tag; :func:`record_from_json` inverts it exactly."""
        out: dict[str, Any] = {"op": self.op}
        for a in attrs.fields(type(self)):
            v = getattr(self, a.name)
            codec = a.metadata.get("codec")
            out[a.name] = _encode(v, codec) if codec else v
        return out

    @classmethod
    def from_json(cls, d: dict) -> Instr:
        """Rebuild a record of this class (or, on :class:`Instr`, of the class the ``"op"`` tag names)."""
        if cls is Instr:
            return record_from_json(d)
        if d.get("op") != cls.op:
            raise IsaError(f"{cls.__name__}.from_json got op {d.get('op')!r}, expected {cls.op!r}",
                           rule="JSON op tag matches the record class")
        kwargs = {}
        names = {a.name: a for a in attrs.fields(cls)}
        for key, value in d.items():
            if key == "op" or key in cls._json_extra:
                continue
            if key not in names:
                raise IsaError(f"{cls.op}: unknown JSON field {key!r}", rule="record JSON fields")
            codec = names[key].metadata.get("codec")
            try:
                kwargs[key] = _decode(value, codec) if codec else value
            except SimtcError as e:
                raise _in_field(e, key) from None
            except (TypeError, ValueError, KeyError, AttributeError) as e:
                raise IsaError(f"field {key!r}: {value!r} is not a {codec} value ({type(e).__name__}: {e})",
                               rule="record JSON fields") from None
        missing = [a.name for a in attrs.fields(cls)
                   if a.default is attrs.NOTHING and a.name not in kwargs and a.name not in cls._json_extra]
        if missing:
            raise IsaError(f"{cls.op}: JSON lacks the field(s) {', '.join(missing)}", rule="record JSON fields")
        try:
            return cls._from_kwargs(d, kwargs)
        except SimtcError as e:
            bad = _failing_field(cls, d, kwargs, e)
            raise (_in_field(e, bad) if bad else e) from None

    @classmethod
    def _from_kwargs(cls, d: dict, kwargs: dict) -> Instr:
        return cls(**kwargs)

    def __str__(self) -> str:
        return self.ptx()


def _in_field(e: SimtcError, key: str) -> SimtcError:
    """``e`` again, its message prefixed with the JSON field it came from (same class, rule and ref)."""
    try:
        out = type(e)(f"field {key!r}: {e.message}", rule=e.rule, ref=e.ref)
    except TypeError:  # pragma: no cover - a subclass with another signature
        out = IsaError(f"field {key!r}: {e.message}", rule=e.rule, ref=e.ref)
    return out


def _failing_field(cls, d: dict, kwargs: dict, error: SimtcError) -> str | None:
    """The first JSON field whose value the field's own converter (or, for ``idesc``, the descriptor decoder with
    the record's kind) refuses, or whose string value ``error`` quotes; None when none does (a rule between fields
    was broken)."""
    for a in attrs.fields(cls):
        if a.name not in kwargs:
            continue
        value = kwargs[a.name]
        try:
            if a.metadata.get("codec") == "idesc":
                from simtc.isa.idesc import InstrDescriptor

                if not isinstance(value, InstrDescriptor):
                    value = InstrDescriptor.from_u32(value, d.get("kind"))
            elif a.converter is not None:
                value = a.converter(value)
        except Exception:  # any refusal names this field
            return a.name
        if a.validator is not None:
            try:
                a.validator(None, a, value)
            except SimtcError:  # this field's own rule
                return a.name
            except Exception:  # a validator that needs the whole record: not this field's alone
                pass
    for key, value in d.items():  # a rule checked after construction that quotes the value
        if key not in ("op", "label") and isinstance(value, str) and repr(value) in str(error):
            return key
    return None


def record_from_json(d: dict) -> Instr:
    """The record a ``to_json`` dict describes (dispatch on ``"op"``)."""
    if not isinstance(d, dict) or "op" not in d:
        raise IsaError(f"a record's JSON is a dict with an 'op' tag, got {d!r}", rule="record JSON has an op tag")
    cls = REGISTRY.get(d["op"])
    if cls is None:
        raise IsaError(f"unknown record op {d['op']!r}; known: {', '.join(sorted(REGISTRY))}",
                       rule="record JSON op tags")
    return cls.from_json(d)
