"""``forge registry show REGISTRY``: a registry's settings, bounds, defaults and hints."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from forge.commands.common import out, print_json
from forge.config.registry import load_registry
from forge.report import registry_table

__all__ = ["register", "registry_app"]

registry_app = typer.Typer(no_args_is_help=True, help="Inspect setting registries.")


@registry_app.command("show")
def registry_show(
    path: Annotated[Path, typer.Argument(metavar="REGISTRY", help="a registry YAML file")],
    as_json: Annotated[bool, typer.Option(
        "--json", help="print only the registry as a JSON object, with its digest")] = False,
) -> None:
    """Print a registry's settings, bounds and defaults."""
    registry = load_registry(path)
    if as_json:
        print_json({**registry.model_dump(mode="json"), "digest": registry.digest})
        return
    out.print(registry_table(registry))
    for signal, moves in registry.hints.items():
        out.print(f"hint  {signal}: " + ", ".join(f"{t} {d}" for t, d in moves.items()))
    if registry.runtime is not None:
        rt = registry.runtime
        out.print(f"runtime  allow: {', '.join(rt.allow) or 'nothing'}; "
                  f"max {rt.max_moves_per_run} moves per run")
        for rule in rt.rules:
            out.print(f"  on {rule.on}: {rule.target} {rule.direction}")


def register(app: typer.Typer) -> None:
    """Add ``forge registry`` to the app."""
    app.add_typer(registry_app, name="registry")
