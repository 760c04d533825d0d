"""Reading the files a user hands to simtc: one rule for a file that is missing, unreadable, damaged or not JSON.

Every reader of a user's file goes through here: a Program JSON (:meth:`simtc.isa.Program.from_json`,
``simtc program FILE``, ``simtc simulate FILE``), a FlashMLA inputs or outputs ``.npz``
(:mod:`simtc.kernels.flashmla.io`), a recorded GPU run (:mod:`simtc.hw.recording`, :mod:`simtc.hw.flashmla`).
It sits in the lowest layer that reads a file (the Program JSON is an isa value), so every layer above uses
the same rule:

* :func:`reading` -- a ``with`` block around the reading code: an ``OSError`` with an errno (missing file,
  a directory, no permission) says the file cannot be read; what a truncated, garbled or foreign file makes
  the standard library and numpy raise (:func:`damaged_errors`: ``zipfile.BadZipFile``, ``zlib.error``,
  ``EOFError``, ``ValueError`` ...) says the file is not a readable one of its kind and may be truncated or
  corrupt. Both are one :class:`~simtc.errors.SimtcError` naming the file and the rule (exit 2 on the command
  line, never "internal error"). A ``SimtcError`` raised inside (a validator's) passes unchanged.
* :func:`loads_json` / :func:`read_json` -- strict JSON: UTF-8, and every key once per object. Python's parser
  keeps the last of two equal keys silently; here a repeated key is refused, naming the key and its JSON path
  (``$.roles.mma``, the notation of the JSON Schema errors of :mod:`simtc.isa.schema`).

>>> def refusal(text):
...     try:
...         loads_json(text, "x.json", rule="Program JSON")
...     except FileFormatError as e:
...         print(e.message, "/", e.rule)
>>> refusal('{"a": 1, "b": {"c": 2, "c": 3}}')
x.json: key 'c' appears twice in the object at $.b (a JSON parser would keep only the last one) / each key appears \
once in a JSON object
>>> refusal('[1, 2')
x.json: not readable JSON: Expecting ',' delimiter at line 1, column 6 (is the file complete?) / Program JSON
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from simtc.errors import SimtcError

__all__ = ["FileFormatError", "damaged_errors", "json_path", "loads_json", "read_json", "reading"]

DUPLICATE_RULE = "each key appears once in a JSON object"


class FileFormatError(SimtcError, ValueError):
    """A file that cannot be read, or is not (a complete) one of the format it should be."""


def damaged_errors() -> tuple[type[BaseException], ...]:
    """What the standard library and numpy raise on a truncated, garbled or foreign file (beside ``OSError``):
    the one list every reader treats as "a damaged file", never as a bug."""
    import struct
    import zipfile
    import zlib

    return (EOFError, ValueError, KeyError, IndexError, TypeError, NotImplementedError, RuntimeError, struct.error,
            zipfile.BadZipFile, zlib.error)


def _why(e: BaseException) -> str:
    text = " ".join(str(e).split())
    if len(text) > 160:
        text = text[:157] + "..."
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


@contextlib.contextmanager
def reading(path: str | os.PathLike, rule: str, *, what: str, ref: str | None = None,
            error: type[SimtcError] = FileFormatError) -> Iterator[None]:
    """Run the ``with`` block that reads ``path`` (a ``what``, e.g. ``"simtc recording (.npz)"``); turn a file
    that cannot be read or is damaged into one ``error(..., rule=rule, ref=ref)`` naming the file."""
    name = os.fspath(path)
    try:
        yield
    except SimtcError:
        raise
    except OSError as e:
        if e.errno is not None:  # the file itself: missing, a directory, no permission, an I/O error
            raise error(f"cannot read {name!r}: {e.strerror or e}", rule=rule, ref=ref) from None
        raise error(f"{name!r} is not a readable {what} ({_why(e)}); it may be truncated or corrupt", rule=rule,
                    ref=ref) from None
    except damaged_errors() as e:
        if "pickle" in str(e):  # numpy's text for a file that is no archive: it is never unpickled here
            raise error(f"{name!r} is not a numpy {what} (not a zip archive of .npy arrays)", rule=rule,
                        ref=ref) from None
        raise error(f"{name!r} is not a readable {what} ({_why(e)}); it may be truncated or corrupt", rule=rule,
                    ref=ref) from None


def json_path(parts) -> str:
    """``$.roles.mma.records[3]``: the JSON path of ``parts`` (keys and list indices), as jsonschema writes it.

    >>> json_path(["roles", "mma", "records", 3])
    '$.roles.mma.records[3]'
    """
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


class _Repeated(Exception):
    def __init__(self, key: str):
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise _Repeated(k)
        out[k] = v
    return out


class _Marked(dict):
    """The first object with a repeated key, in the second pass that finds where it is."""

    key: str = ""


def _where_repeated(text: str) -> tuple[str, str]:
    """(key, JSON path of its object) of the first object with a repeated key (document order)."""
    marked: list[_Marked] = []

    def hook(pairs):
        d = dict(pairs)
        if len(d) != len(pairs):
            m = _Marked(d)
            seen: set = set()
            m.key = next(k for k, _ in pairs if k in seen or seen.add(k))
            marked.append(m)
            return m
        return d

    doc = json.loads(text, object_pairs_hook=hook)

    def walk(node, parts):
        if isinstance(node, _Marked):
            return node.key, json_path(parts)
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in items:
            found = walk(v, [*parts, k])
            if found:
                return found
        return None

    return walk(doc, []) or (marked[0].key, "?")


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def loads_json(data: str | bytes, name: str, rule: str, *, ref: str | None = None, constants: bool = True,
               error: type[SimtcError] = FileFormatError) -> Any:
    """The JSON value of ``data`` (the text of ``name``); every key once per object. ``constants=False`` also
    refuses ``NaN`` / ``Infinity``, which Python writes and reads but JSON does not define (RFC 8259, section 6
    "Numbers"). Refusals are ``error(..., rule=rule)`` naming ``name`` (the repeated key: :data:`DUPLICATE_RULE`)."""
    if isinstance(data, bytes | bytearray):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            raise error(f"{name}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); a JSON file is "
                        "UTF-8", rule=rule, ref=ref) from None
    text = data.removeprefix("\ufeff")
    if not text.strip():
        raise error(f"{name}: the file is empty (a JSON value is expected)", rule=rule, ref=ref)
    kw: dict[str, Any] = {} if constants else {"parse_constant": _no_constant}
    try:
        return json.loads(text, object_pairs_hook=_unique, **kw)
    except _Repeated:
        key, where = _where_repeated(text)
        raise error(f"{name}: key {key!r} appears twice in the object at {where} (a JSON parser would keep only the "
                    "last one)", rule=DUPLICATE_RULE, ref=ref) from None
    except json.JSONDecodeError as e:
        tail = " (is the file complete?)" if e.pos >= len(text.rstrip()) - 1 else ""
        raise error(f"{name}: not readable JSON: {e.msg} at line {e.lineno}, column {e.colno}{tail}", rule=rule,
                    ref=ref) from None
    except RecursionError:
        raise error(f"{name}: JSON nested too deeply to read", rule=rule, ref=ref) from None
    except ValueError as e:  # NaN / Infinity with constants=False; an integer of more than 4300 digits
        raise error(f"{name}: not readable JSON ({' '.join(str(e).split())})", rule=rule, ref=ref) from None


def read_json(path: str | os.PathLike, rule: str, *, what: str = "JSON file", ref: str | None = None,
              constants: bool = True, error: type[SimtcError] = FileFormatError) -> Any:
    """:func:`loads_json` of the file ``path``, read under :func:`reading`."""
    name = os.fspath(path)
    with reading(path, rule, what=what, ref=ref, error=error):
        data = Path(path).read_bytes()
    return loads_json(data, name, rule, ref=ref, constants=constants, error=error)
