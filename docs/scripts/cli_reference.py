"""The ``simtc`` command reference, generated from the command line's own argparse definitions.

:func:`commands` walks :func:`simtc.cli.build_parser` (so every command that exists is listed,
including ones added later) and :func:`markdown` renders the page the documentation site shows.

    python docs/scripts/cli_reference.py      # print the page
"""

from __future__ import annotations

import argparse
import sys


def commands(parser: argparse.ArgumentParser | None = None, path: tuple[str, ...] = ("simtc",)):
    """``[(path, parser), ...]`` for the top-level parser and every subcommand, depth first.

    >>> [" ".join(p) for p, _ in commands()][:2]
    ['simtc', 'simtc tour']
    """
    if parser is None:
        from simtc.cli import build_parser

        parser = build_parser()
    out = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.extend(commands(sub, (*path, name)))
    return out


def leaf_commands() -> list[str]:
    """Every runnable command line prefix (commands without subcommands), e.g. ``simtc smem layout``."""
    out = []
    for path, parser in commands():
        if not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions):
            out.append(" ".join(path))
    return out


def _escape(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _option_row(action: argparse.Action) -> str | None:
    if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
        return None
    names = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.metavar or action.dest}`"
    if action.option_strings and action.nargs != 0:
        metavar = action.metavar or action.dest.upper()
        names += f" `{' '.join(metavar) if isinstance(metavar, tuple) else metavar}`"
    extra = []
    if action.choices is not None and not isinstance(action.choices, dict):
        extra.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
    help_text = (action.help or "") % {"default": action.default, "prog": "simtc"} if action.help else ""
    if action.required and action.option_strings and "required" not in help_text:
        extra.append("required")
    if (action.default not in (None, argparse.SUPPRESS, False) and action.option_strings
            and "default" not in help_text):
        extra.append(f"default: `{action.default}`")
    return f"| {names} | {_escape(help_text)}{' (' + '; '.join(extra) + ')' if extra else ''} |"


def markdown() -> str:
    """The command reference page (Markdown)."""
    lines = ["# Command reference", "",
             "Generated from the `simtc` command's own argparse definitions (`simtc.cli.build_parser`) each time "
             "the site is built, so it lists every command. Every command takes `--help`; picture commands take "
             "`--json` (machine-readable output) and `--svg FILE`. Errors are one line naming the rule broken "
             "(exit status 2 for a bad command line, 1 when a check ran and failed).", ""]
    for path, parser in commands():
        depth = len(path)
        title = " ".join(path)
        lines += [f"{'#' * min(depth + 1, 4)} `{title}`", ""]
        if parser.description:
            lines += [_escape(parser.description), ""]
        usage = parser.format_usage().strip()
        if usage.startswith("usage: "):
            usage = usage[len("usage: "):]
        lines += ["```text", usage, "```", ""]
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        for action in subs:
            lines += ["| command | what it does |", "|---|---|"]
            helps = {ca.dest: ca.help for ca in action._choices_actions}
            for name in action.choices:
                lines.append(f"| `{title} {name}` | {_escape(helps.get(name) or '')} |")
            lines.append("")
        rows = [r for r in (_option_row(a) for a in parser._actions) if r]
        if rows:
            lines += ["| argument | meaning |", "|---|---|", *rows, ""]
        if parser.epilog:
            lines += [_escape(parser.epilog), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(markdown())
