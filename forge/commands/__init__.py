"""The ``forge`` commands, one module each, imported only when one of its commands runs.

Each module defines ``register(app: typer.Typer) -> None``, which adds its command
(or sub-app, or both of ``promote`` and ``rollback``). :data:`COMMANDS` names each
command, the module that registers it and the line ``forge --help`` lists it with, in
that listing's order (typer's: commands first, then the groups of sub-commands). A new
command is a module here and a row in :data:`COMMANDS`.

Why lazily: the command modules import what their commands run (the search, the
executors, scipy), seconds of imports that ``forge --version`` and ``forge --help``
never use. :class:`LazyGroup` is the app's root group: it imports a command's module
when that command is asked for (run, its help, the reference docs), and lists the
others from :data:`COMMANDS` without importing them.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any, NamedTuple

from typer.core import TyperCommand, TyperGroup

if TYPE_CHECKING:
    import typer

#: A command as typer builds it (typer ships its own click: no public type to name).
ClickCommand = Any

__all__ = ["COMMANDS", "Command", "LazyGroup", "load_module_commands", "register_all"]


class Command(NamedTuple):
    """One command of ``forge``: its name, its module under ``forge.commands`` and the
    first paragraph of its help (what the root's listing shows)."""

    name: str
    module: str
    summary: str


COMMANDS: tuple[Command, ...] = (
    Command("init", "init",
            "Write a bench that runs at once: a toy agent, its settings, tasks, scorer and CI."),
    Command("eval", "eval", "Evaluate one config on one split: K attempts per task, scored."),
    Command("search", "search",
            "Search for a better config: one move at a time, screened, confirmed and gated."),
    Command("diff", "diff",
            "Compare two saved results task by task (B against A), paired by seed."),
    Command("schema", "schema", "Print the JSON Schema of one kind of input file, for editor "
                                "completion and checks."),
    Command("gate", "gate",
            "Gate a saved result for CI: aggregate, unscored, per-task floor, baseline "
            "regression."),
    Command("promote", "promote",
            "Write a finished run's final config as the new default, with its provenance."),
    Command("rollback", "promote",
            "Restore the default from before the last promotion of F (refuses hand edits)."),
    Command("report", "report",
            "Write one self-contained HTML report of a search run (opens offline)."),
    Command("registry", "registry", "Inspect setting registries."),
    Command("runtime", "runtime", "Read the runtime mutator's journal."),
    Command("export", "export",
            "Export attempts as training data, as an Agno or an AG2 run, and verify exports."),
    Command("journal", "journal", "Review search runs: every step, its gates and its verdict."),
)


def register_all(app: typer.Typer) -> None:
    """Register every command on ``app`` at once, importing every module: for what reads
    typer's registrations rather than the click commands (forge itself never does)."""
    for module in dict.fromkeys(c.module for c in COMMANDS):
        importlib.import_module(f"forge.commands.{module}").register(app)


def load_module_commands(module: str) -> dict[str, ClickCommand]:
    """The commands ``forge.commands.<module>`` registers, by name, as typer builds them."""
    import typer
    import typer.main

    holder = typer.Typer()
    importlib.import_module(f"forge.commands.{module}").register(holder)
    return dict(typer.main.get_group(holder).commands)


class _LazyCommands(MutableMapping[str, ClickCommand]):
    """The root's commands: those of :data:`COMMANDS`, in its order, each module imported
    when one of its commands is first read; any other added as a dict would."""

    def __init__(self, added: MutableMapping[str, ClickCommand]) -> None:
        self.loaded: dict[str, ClickCommand] = dict(added)
        self._modules = {c.name: c.module for c in COMMANDS}

    def __getitem__(self, name: str) -> ClickCommand:
        if name not in self.loaded and name in self._modules:
            self.loaded.update(load_module_commands(self._modules[name]))
        return self.loaded[name]

    def __setitem__(self, name: str, command: ClickCommand) -> None:
        self.loaded[name] = command

    def __delitem__(self, name: str) -> None:
        self._modules.pop(name, None)
        self.loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        yield from self._modules
        yield from (name for name in self.loaded if name not in self._modules)

    def __len__(self) -> int:
        return len(self._modules.keys() | self.loaded.keys())

    def __contains__(self, name: object) -> bool:
        return name in self._modules or name in self.loaded


class LazyGroup(TyperGroup):
    """forge's root group: a command's module is imported when the command is asked
    for; the root's own help lists the others from :data:`COMMANDS` as they are."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _LazyCommands(self.commands)
        self._listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)  # the names alone: typer's reads every command

    def get_command(self, ctx: Any, cmd_name: str) -> ClickCommand | None:
        commands = self.commands
        assert isinstance(commands, _LazyCommands)
        if self._listing and cmd_name not in commands.loaded:
            summary = next((c.summary for c in COMMANDS if c.name == cmd_name), None)
            if summary is not None:  # the listing reads a command's name and summary only
                return TyperCommand(name=cmd_name, help=summary)
        return commands.get(cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False
