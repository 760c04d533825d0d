"""CUDA's device ``printf``: the format string and the argument buffer ``vprintf`` receives, formatted as the
CUDA runtime prints them.

A ``printf(fmt, ...)`` in CUDA C++ compiles to ``call vprintf, (fmt, args)``: ``fmt`` is the generic address of
the format string (a ``.global`` ``$str`` variable), ``args`` the generic address of a buffer in the thread's
local memory that holds the arguments one after the other, each aligned to its own size, with C's default
argument promotions (``char``/``short`` to ``int``, ``float`` to ``double``); CUDA C++ Programming Guide,
"Formatted Output" (format specifiers follow C's ``printf``; ``%ld`` is 8 bytes on 64-bit Linux). ``vprintf``
returns the number of arguments it consumed.

>>> import struct
>>> format_printf(b"x=%d y=%5.2f s=%s\\n", struct.pack("<iid", 7, 0, 2.5) + struct.pack("<Q", 99),
...               lambda addr: b"hi")
('x=7 y= 2.50 s=hi\\n', 3)
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable

__all__ = ["format_printf"]

_SPEC = re.compile(rb"%([-+ #0]*)(\*|\d+)?(?:\.(\*|\d+))?(hh|h|ll|l|j|z|t|L)?([diouxXcsfFeEgGaAp%n])")


def format_printf(fmt: bytes, args: bytes, read_string: Callable[[int], bytes]) -> tuple[str, int]:
    """The text ``printf(fmt, ...)`` prints, given the packed argument bytes, and the number of arguments used.

    ``read_string(address)`` returns the NUL-terminated bytes at a generic address (for ``%s``).
    """
    out = []
    pos = 0
    off = 0
    used = 0

    def take(size: int, kind: str):
        nonlocal off, used
        off = -(-off // size) * size
        raw = args[off:off + size]
        off += size
        used += 1
        if len(raw) < size:
            raw = raw + bytes(size - len(raw))
        return struct.unpack("<" + kind, raw)[0]

    for m in _SPEC.finditer(fmt):
        out.append(fmt[pos:m.start()].decode("utf-8", "replace"))
        pos = m.end()
        flags, width, prec, length, conv = (g.decode() if g else "" for g in m.groups())
        if conv == "%":
            out.append("%")
            continue
        if width == "*":
            width = str(take(4, "i"))
        if prec == "*":
            prec = str(take(4, "i"))
        spec = "%" + flags + width + (("." + prec) if prec else "")
        wide = length in ("l", "ll", "j", "z", "t")
        if conv in "di":
            v = take(8, "q") if wide else take(4, "i")
            out.append((spec + "d") % v)
        elif conv in "ouxX":
            v = take(8, "Q") if wide else take(4, "I")
            if length == "hh":
                v &= 0xFF
            elif length == "h":
                v &= 0xFFFF
            out.append((spec + conv) % v)
        elif conv == "c":
            v = take(4, "i")
            out.append((spec + "c") % chr(v & 0xFF))
        elif conv in "fFeEgGaA":
            v = take(8, "d")
            if conv in "aA":
                out.append(float.hex(v) if conv == "a" else float.hex(v).upper())
            else:
                out.append((spec + conv.replace("F", "f")) % v)
        elif conv == "s":
            a = take(8, "Q")
            s = "(null)" if a == 0 else read_string(a).decode("utf-8", "replace")
            out.append((spec + "s") % s)
        elif conv == "p":
            a = take(8, "Q")
            out.append(((spec + "s") % f"{a:#x}") if a else (spec + "s") % "(nil)")
        else:  # %n writes nothing on the device
            used += 0
    out.append(fmt[pos:].decode("utf-8", "replace"))
    return "".join(out), used
