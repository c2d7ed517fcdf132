"""``forge init DIR``: write a runnable bench skeleton (see :mod:`forge.scaffold`)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer

from forge.commands.common import out
from forge.scaffold import SCAFFOLD_FILES, init_bench

__all__ = ["init_command", "register"]


def init_command(
    folder: Annotated[Path, typer.Argument(
        metavar="DIR", help="where to write the bench: a new or empty folder")],
    name: Annotated[str | None, typer.Option(
        "--name", help="the bench's name (default: DIR's name)")] = None,
) -> None:
    """Write a bench that runs at once: a toy agent, its settings, tasks, scorer and CI.

    Refuses a DIR that holds anything (exit 2, nothing touched). Then edit the files
    its README names, starting with harness.py, where your agent goes.
    """
    scaffold = init_bench(folder, name=name)
    width = max(len(entry) for entry in SCAFFOLD_FILES) + 2
    lines = [f"created bench {scaffold.name} in {scaffold.folder}"]
    lines += [f"  {entry + ('/' if '.' not in entry else ''):<{width}}{about}"
              for entry, about in SCAFFOLD_FILES.items()]
    bench = shlex.quote(str(scaffold.folder))
    lines += ["", f"next: forge search {bench}    (a first search, a few seconds)",
              f"      then edit {scaffold.folder / 'harness.py'}, where your agent goes"]
    out.print("\n".join(lines), highlight=False, markup=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add ``forge init`` to the app."""
    app.command("init")(init_command)
