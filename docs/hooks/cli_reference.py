"""mkdocs hook: the CLI reference (``docs/cli.md``) rendered from forge's own command line.

``docs/cli.md`` holds the line ``<!-- forge-cli-reference -->``; at build time
:func:`on_page_markdown` replaces it with a section per command and sub-command of
``forge.cli.app``, each with its usage, its help text and a table of its arguments and
options, as ``forge COMMAND --help`` prints them. The page is never edited by hand:
a command added to the app (a row of ``COMMANDS`` in ``forge/commands/__init__.py``)
appears in the reference at the next build.

The walk uses only the click interface that typer's commands keep (``list_commands``,
``get_command``, ``get_params``, ``get_help_record``, ``collect_usage_pieces``):
typer 0.29 ships its own copy of click, so ``isinstance(command, click.Command)`` is
false and tools that test for it (mkdocs-click's option tables) render no options.
"""

from __future__ import annotations

import html
import inspect
import re
from typing import Any, NamedTuple

__all__ = ["MARKER", "Entry", "commands", "forge_command", "on_page_markdown", "render"]

#: The line of ``docs/cli.md`` that the reference replaces.
MARKER = "<!-- forge-cli-reference -->"
#: The page that holds the marker (its path under ``docs/``).
PAGE = "cli.md"

_ESCAPE = re.compile(r"([\\`*_{}\[\]|#])")


class Entry(NamedTuple):
    """One command of the tree: its words (``("journal", "show")``), the command and
    the context it runs in (which carries its parents, for its usage line)."""

    path: tuple[str, ...]
    command: Any
    ctx: Any

    @property
    def title(self) -> str:
        return " ".join(("forge", *self.path))

    @property
    def anchor(self) -> str:
        # The id mkdocs' toc extension gives the heading "forge journal show".
        return re.sub(r"[^a-z0-9]+", "-", self.title.lower()).strip("-")


def forge_command() -> Any:
    """forge's command line as typer builds it for ``forge`` itself."""
    import typer.main

    import forge.cli

    return typer.main.get_command(forge.cli.app)


def commands(root: Any, prog: str = "forge") -> list[Entry]:
    """The root and every command under it, depth first, each group before its
    sub-commands, in the order ``--help`` lists them; hidden commands left out."""
    out: list[Entry] = []

    def walk(command: Any, ctx: Any, path: tuple[str, ...]) -> None:
        out.append(Entry(path, command, ctx))
        if not hasattr(command, "list_commands"):
            return
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is None or getattr(sub, "hidden", False):
                continue
            walk(sub, sub.context_class(sub, info_name=name, parent=ctx), (*path, name))

    walk(root, root.context_class(root, info_name=prog), ())
    return out


def render(root: Any, prog: str = "forge") -> str:
    """The reference as Markdown: a heading per command (``## forge eval``,
    ``### forge journal show``), its usage, help, sub-commands and parameters."""
    parts: list[str] = []
    for entry in commands(root, prog):
        parts.append(_section(entry))
    return "\n".join(parts)


def _section(entry: Entry) -> str:
    command, ctx = entry.command, entry.ctx
    level = "#" * min(2 + max(len(entry.path) - 1, 0), 6)
    usage = " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)])
    lines = [f"{level} {entry.title}", "", "```text", usage, "```", ""]
    help_text = inspect.cleandoc(command.help or "").split("\f")[0].strip()
    for paragraph in re.split(r"\n\s*\n", help_text):
        if paragraph.strip():
            lines += [_escape(" ".join(paragraph.split())), ""]
    if hasattr(command, "list_commands"):
        rows = []
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is None or getattr(sub, "hidden", False):
                continue
            anchor = Entry((*entry.path, name), sub, None).anchor
            rows.append(f"| [`{name}`](#{anchor}) | {_escape(_short(sub))} |")
        if rows:
            lines += ["| command | what it does |", "|---|---|", *rows, ""]
    rows = []
    for param in command.get_params(ctx):
        if param.name == "help" or getattr(param, "hidden", False):
            continue  # -h / --help: every command has it (said once, on the page)
        record = param.get_help_record(ctx)
        if record is None:
            continue
        names, text = record
        rows.append(f"| `{names}` | {_escape(' '.join(text.split()))} |")
    if rows:
        lines += ["| argument or option | meaning |", "|---|---|", *rows, ""]
    return "\n".join(lines)


def _short(command: Any) -> str:
    text = command.short_help or inspect.cleandoc(command.help or "").split("\f")[0]
    return " ".join(text.strip().split("\n\n")[0].split())


def _escape(text: str) -> str:
    """Help text as Markdown that shows it literally (``<run folder>``, ``a|b``)."""
    return _ESCAPE.sub(r"\\\1", html.escape(text, quote=False))


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        from mkdocs.exceptions import PluginError

        raise PluginError(f"docs/{PAGE} has lost its marker line {MARKER}: the CLI "
                          "reference has nowhere to go")
    return markdown.replace(MARKER, render(forge_command()))
