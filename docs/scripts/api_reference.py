"""The API reference, generated from the code's own docstrings and signatures (``inspect``).

One page per top-level subpackage of ``simtc``; each lists its modules, and in each module the
public names (``__all__``, else the public names defined there) with their signature and
docstring. Docstrings are shown verbatim (they are reStructuredText-flavoured plain text with
doctest examples, which the test suite runs), so nothing is lost or reinterpreted.

    python docs/scripts/api_reference.py simtc.smem     # print one page
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys


def modules(package: str) -> list[str]:
    """``package`` and every module below it (``__main__`` and private modules left out), sorted.

    >>> modules("simtc.numerics")[:2]
    ['simtc.numerics', 'simtc.numerics.cases']
    """
    mod = importlib.import_module(package)
    out = [package]
    if hasattr(mod, "__path__"):
        for info in pkgutil.walk_packages(mod.__path__, package + "."):
            leaf = info.name.rsplit(".", 1)[-1]
            if not leaf.startswith("_") and not any(p.startswith("_") for p in info.name.split(".")[1:]):
                out.append(info.name)
    return sorted(out)


def public_names(mod) -> list[str]:
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [n for n, v in vars(mod).items() if not n.startswith("_")
                 and (inspect.isclass(v) or inspect.isfunction(v)) and getattr(v, "__module__", None) == mod.__name__]
    return list(names)


def _fence(text: str, lang: str = "text") -> list[str]:
    ticks = "````" if "```" in text else "```"
    return [f"{ticks}{lang}", text.rstrip(), ticks, ""]


def _signature(name: str, obj) -> str | None:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    prefix = "class " if inspect.isclass(obj) else "def "
    return f"{prefix}{name}{sig}"


def _members(cls) -> list[tuple[str, object]]:
    out = []
    for n, v in vars(cls).items():
        if n.startswith("_"):
            continue
        func = v.fget if isinstance(v, property) else getattr(v, "__func__", v)
        if (inspect.isfunction(func) or isinstance(v, property)) and inspect.getdoc(v):
            out.append((n, v))
    return out


def module_markdown(name: str, level: int = 2) -> list[str]:
    mod = importlib.import_module(name)
    h = "#" * level
    lines = [f"{h} `{name}`", ""]
    doc = inspect.getdoc(mod)
    if doc:
        lines += _fence(doc)
    for attr in public_names(mod):
        obj = getattr(mod, attr, None)
        owner = getattr(obj, "__module__", None)
        if owner and owner != name and (inspect.isclass(obj) or inspect.isfunction(obj)):
            lines += [f"{h}# `{attr}`", "", f"Defined in `{owner}` (see there).", ""]
            continue
        lines += [f"{h}# `{attr}`", ""]
        if inspect.isclass(obj) or callable(obj):
            sig = _signature(attr, obj)
            if sig:
                lines += _fence(sig, "python")
            doc = inspect.getdoc(obj)
            if doc:
                lines += _fence(doc)
            if inspect.isclass(obj):
                for mname, member in _members(obj):
                    kind = "property" if isinstance(member, property) else "method"
                    lines.append(f"**`{attr}.{mname}`** ({kind})")
                    lines.append("")
                    lines += _fence(inspect.getdoc(member))
        else:
            lines += _fence(f"{attr} = {obj!r}"[:400], "python")
    return lines


def markdown(package: str) -> str:
    """The reference page of ``package`` (all its modules)."""
    mods = modules(package)
    lines = [f"# `{package}`", "",
             "Generated from the docstrings and signatures when the site is built (`docs/scripts/api_reference.py`). "
             "Docstrings are shown as written; their `>>>` examples are run by the test suite. Source tags "
             "([doc], [cutlass], [hw], [inferred], ...) are explained in [Sources](../sources.md).", ""]
    if len(mods) > 1:
        lines += ["Modules: " + ", ".join(f"`{m}`" for m in mods), ""]
    for m in mods:
        lines += module_markdown(m)
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(markdown(sys.argv[1] if len(sys.argv) > 1 else "simtc"))
