"""What the commands moved out of ``forge/cli.py`` share: consoles, JSON output, options."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from forge.commands._stdout import document
from forge.errors import OptionError
from forge.executors import EXECUTORS

__all__ = ["ExecutorOption", "RayAddressOption", "WorkersOption", "err", "out", "print_json",
           "write_for_option"]

#: Tables and messages; stderr for what must not mix with ``--json`` on stdout. No emoji
#: codes: rich would print ``tasks.jsonl:100:`` as ``tasks.jsonl💯``.
out = Console(emoji=False)
err = Console(stderr=True, emoji=False)


def print_json(value: Any) -> None:
    """The one document on stdout (scripts parse it whole: DESIGN.md, CLI); under
    :func:`~forge.commands._stdout.json_stdout`, on the descriptor kept for it."""
    stream = document()
    stream.write(json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    stream.flush()


def write_for_option(option: str, path: Path, write: Callable[..., object], *args: Any
                     ) -> None:
    """Call ``write(*args)``, the write of ``path`` that ``option`` asked for; an OS
    error becomes the option's one-line error (exit 2)."""
    try:
        write(*args)
    except OSError as exc:
        raise OptionError(f"cannot write {path}: {exc.strerror or exc}",
                          option=option) from None


# Shared by `eval` and `search`: where attempts run.
ExecutorOption = Annotated[str | None, typer.Option(
    "--executor", metavar="[" + "|".join(EXECUTORS.names()) + "]",
    help="where attempts run (default: the bench's executor, else local)")]
WorkersOption = Annotated[int | None, typer.Option(
    "--workers", min=1, help="worker processes or Ray actors (default: the cores)")]
RayAddressOption = Annotated[str | None, typer.Option(
    "--ray-address", help="join this Ray cluster (default: start a local one)")]
