"""The ``forge`` commands, one module each; :func:`register_all` adds them to the app.

Each module defines ``register(app: typer.Typer) -> None``, which adds its command
(or sub-app). A new command is a module here and a line in :func:`register_all`,
whose order is that of ``forge --help`` (commands first, then the groups of
sub-commands, each in the order added).
"""

from __future__ import annotations

import typer

from forge.commands import (
    diff,
    export,
    gate,
    init,
    journal,
    promote,
    registry,
    report,
    runtime,
    schema,
    search,
)
from forge.commands import eval as eval_

__all__ = ["register_all"]


def register_all(app: typer.Typer) -> None:
    init.register(app)
    eval_.register(app)
    search.register(app)
    diff.register(app)
    registry.register(app)
    runtime.register(app)
    schema.register(app)
    export.register(app)
    gate.register(app)
    journal.register(app)
    promote.register(app)
    report.register(app)
