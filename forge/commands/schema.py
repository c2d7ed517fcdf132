"""``forge schema [bench|registry|config]``: the JSON Schema of one kind of input file.

Each is printed alone, ready to save and point an editor at (see the README's
"Editor support"); see :mod:`forge.bench.schemas` for what they check.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from forge.bench.schemas import KINDS, bench_schema, config_schema, registry_schema
from forge.commands.common import print_json
from forge.config.registry import load_registry
from forge.errors import OptionError

__all__ = ["register", "schema_command"]


def schema_command(
    kind: Annotated[str, typer.Argument(
        metavar="[" + "|".join(KINDS) + "]",
        help="which file: a bench file, a registry, or a config / defaults file of the "
             "registry given with --registry")] = "bench",
    registry: Annotated[Path | None, typer.Option(
        "--registry", metavar="REGISTRY",
        help="the registry whose config files the schema describes (config only)")] = None,
) -> None:
    """Print the JSON Schema of one kind of input file, for editor completion and checks."""
    if kind not in KINDS:
        raise OptionError(f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}",
                          option="KIND")
    if kind == "config":
        if registry is None:
            raise OptionError("a config schema lists one registry's settings: give "
                              "--registry REGISTRY", option="--registry")
        print_json(config_schema(load_registry(registry)))
        return
    if registry is not None:
        raise OptionError(f"only a config schema depends on a registry, not a {kind} schema",
                          option="--registry")
    print_json(bench_schema() if kind == "bench" else registry_schema())


def register(app: typer.Typer) -> None:
    """Add ``forge schema`` to the app."""
    app.command("schema")(schema_command)
