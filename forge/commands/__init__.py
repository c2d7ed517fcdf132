"""CLI commands that live in their own modules.

Each module here defines ``register(app: typer.Typer) -> None`` and adds its
commands (or a sub-app) to the ``forge`` app; :func:`register_all` calls them in
module-name order, so a new command needs no edit to ``forge/cli.py``.
"""

from __future__ import annotations

import importlib
import pkgutil

import typer

__all__ = ["register_all"]


def register_all(app: typer.Typer) -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if callable(register):
            register(app)
