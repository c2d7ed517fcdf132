"""``forge schema [registry|bench|all]``: JSON Schemas of the input files, for editors."""

from __future__ import annotations

from typing import Annotated

import typer

from forge.bench import BenchFile
from forge.commands._common import print_json
from forge.errors import OptionError
from forge.registry import Registry

__all__ = ["register", "schema_command"]


def schema_command(
    which: Annotated[str, typer.Argument(help="registry, bench, or all")] = "all",
) -> None:
    """Print JSON Schemas of registry and bench files, for editor validation."""
    schemas = {"registry": Registry.model_json_schema(), "bench": BenchFile.model_json_schema()}
    if which == "all":
        print_json(schemas)
    elif which in schemas:
        print_json(schemas[which])
    else:
        raise OptionError(f"unknown kind {which!r}; expected registry, bench or all",
                          option="WHICH")


def register(app: typer.Typer) -> None:
    """Add ``forge schema`` to the app."""
    app.command("schema")(schema_command)
