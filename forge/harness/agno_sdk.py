"""The ``agno`` package for forge's agno kinds: imported only when a bench uses one.

forge registers its agno harness, scorer and task source at import without importing
agno (``import forge`` and ``forge --help`` never do). A plugin calls
:func:`require_agno` when it is built from a bench, which imports agno then, or ends
the bench's load with one line naming the field and the ``pip install`` to run.
"""

from __future__ import annotations

import importlib

from forge._util.printed import stdout_router
from forge.core.spec import BuildContext

__all__ = ["AGNO_INSTALL", "require_agno"]

#: What a user without agno runs.
AGNO_INSTALL = "pip install 'forge[agno]'"


def require_agno(ctx: BuildContext, *modules: str) -> str:
    """agno's version, once ``agno.agent`` and ``modules`` import; a one-line
    :class:`~forge.errors.BenchError` naming ``ctx``'s field and the install otherwise.
    """
    # Before agno's loggers are built: without a terminal they keep the sys.stdout of
    # their import, which must be forge's router so that what agno logs during an
    # attempt stays with that attempt (forge._util.printed), off a --json command's stdout.
    stdout_router()
    for name in ("agno.agent", *modules):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            missing = exc.name or name
            raise ctx.error(f"the agno kinds need agno 3.1 or later, and {missing!r} cannot "
                            f"be imported: {AGNO_INSTALL}") from None
    from importlib import metadata  # here: most forge runs never ask

    try:
        return metadata.version("agno")
    except metadata.PackageNotFoundError:  # agno on the path without its metadata
        return "unknown"

