"""What forge's AG2 plugins share: importing AG2 on demand, and a task in AG2's terms.

AG2 is the optional extra ``forge[ag2]``. forge never imports it at its own import:
the ``ag2`` harness, scorer and task source, and ``forge export ag2``, call
:func:`require` when a bench names them (or the export runs), and a missing package
is then one line naming the ``pip install`` to run. The modules are loaded with
:func:`importlib.import_module`, so forge's type checks read the same whether AG2 is
installed or not.

A forge task and an AG2 task (``ag2.eval.Task``) map onto each other one to one:

- AG2's ``inputs`` is forge's ``input`` when that is a mapping with an ``input`` key
  (what ``ag2.eval.run_agent`` asks the agent), else ``{"input": <forge input>}``;
- AG2's ``reference_outputs`` is forge's ``expected`` when that is a mapping or null,
  else ``{"answer": <expected>}`` (the field ``final_answer_matches`` reads);
- ids, tags and metadata are the same.

A task read from an AG2 suite (the ``ag2`` task source) keeps ``inputs`` and
``reference_outputs`` as they are, so an export of its attempts lines up with a run of
AG2's own runner on that suite task by task.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from forge.core.task import Task
from forge.errors import InputFileError

__all__ = ["EXTRA", "INSTALL", "MIN_VERSION", "inputs_of", "module", "reference_of", "require",
           "version"]

#: The extra that installs AG2, and the command a missing-package message names.
EXTRA = "ag2"
INSTALL = "pip install 'forge[ag2]'"
MIN_VERSION = (1, 2)


def module(name: str = "ag2") -> ModuleType:
    """An AG2 module, once :func:`require` has said AG2 is there."""
    return importlib.import_module(name)


def version() -> str:
    return str(getattr(module(), "__version__", "unknown"))


def require(what: str, error: Callable[[str], InputFileError]) -> ModuleType:
    """The ``ag2`` package, or ``error(message)`` raised: not installed (the message names
    ``pip install 'forge[ag2]'``), older than 1.2, or failing at its own import."""
    try:
        ag2 = importlib.import_module("ag2")
        importlib.import_module("ag2.eval")
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] != "ag2":
            raise error(f"{what} needs the ag2 package, whose import failed: "
                        f"{type(exc).__name__}: {exc}") from None
        raise error(f"{what} needs the ag2 package, which is not installed: "
                    f"{INSTALL}") from None
    except Exception as exc:  # a broken install is bad input too, not a traceback
        raise error(f"{what} needs the ag2 package, whose import failed: "
                    f"{type(exc).__name__}: {exc}") from None
    found = str(getattr(ag2, "__version__", "0"))
    if _release(found) < MIN_VERSION:
        raise error(f"{what} needs ag2 >= {'.'.join(map(str, MIN_VERSION))}, found {found}: "
                    f"pip install -U 'forge[{EXTRA}]'")
    return ag2


def _release(text: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in text.split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def inputs_of(task: Task) -> dict[str, Any]:
    """AG2's ``inputs`` for a forge task (see the module docstring)."""
    if isinstance(task.input, Mapping) and "input" in task.input:
        return dict(task.input)
    return {"input": task.input}


def reference_of(task: Task) -> dict[str, Any] | None:
    """AG2's ``reference_outputs`` for a forge task (see the module docstring)."""
    if task.expected is None:
        return None
    if isinstance(task.expected, Mapping):
        return dict(task.expected)
    return {"answer": task.expected}

