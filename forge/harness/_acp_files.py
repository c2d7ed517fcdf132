"""Files of the ``acp`` harness: the templates it renders into each attempt's working
directory, and the watch that tells whether an agent changed the bench folder.

Templates are :class:`string.Template` text: ``$name`` or ``${name}`` is the config's
value of setting ``name`` (a string as is, anything else as JSON: ``true``, ``0.5``),
``$$`` a dollar sign. Nothing else is evaluated: a template cannot run code, loop or
read files, so a bench's templates are as safe to render as its YAML is to read.
"""

from __future__ import annotations

import json
import logging
import os
import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from forge._util.digest import digest_of
from forge.core.spec import BuildContext

__all__ = ["MAX_TEMPLATE_BYTES", "MAX_WATCHED", "BenchWatch", "Templates"]

log = logging.getLogger(__name__)

#: Bytes of one template: an instructions or settings file, never a data set.
MAX_TEMPLATE_BYTES = 2**20
#: Entries of the bench folder the watch compares; a larger folder is not watched.
MAX_WATCHED = 10_000
#: Folders the watch leaves out: Python's bytecode caches (an agent script importing a
#: module of the bench folder writes one there), forge's journals when a search runs
#: from the bench folder, and hidden folders (.git, a virtualenv's .venv).
_UNWATCHED = frozenset({"__pycache__", "journals"})
#: A folder holding both is a search run's (``--journals`` in the bench folder).
_RUN_FILES = frozenset({"run.json", "journal.jsonl"})


@dataclass(frozen=True)
class _Template:
    source: str  # as the bench names it
    text: str


class Templates:
    """The bench's ``files``: a destination in the working directory -> its template."""

    def __init__(self, files: Mapping[str, _Template]) -> None:
        self._files = dict(files)

    @property
    def digest(self) -> str:
        return digest_of({dest: t.text for dest, t in sorted(self._files.items())})

    @classmethod
    def load(cls, files: Mapping[str, str], ctx: BuildContext) -> Templates:
        """Read and check every template at load: a bad one is a :class:`BenchError`."""
        loaded: dict[str, _Template] = {}
        for dest, source in files.items():
            where = ctx.at("acp", "files", dest)
            _check_destination(dest, where)
            path = (ctx.base_dir / source).resolve()
            if not path.is_file():
                raise where.error(f"template {source!r} is not a file ({path})")
            if path.stat().st_size > MAX_TEMPLATE_BYTES:
                raise where.error(f"template {source!r} is over {MAX_TEMPLATE_BYTES} bytes")
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise where.error(f"template {source!r} cannot be read as UTF-8: {exc}"
                                  ) from None
            if not string.Template(text).is_valid():
                raise where.error(f"template {source!r} has a '$' that names nothing; write "
                                  "$name or ${name} for a setting, $$ for a dollar sign")
            loaded[dest] = _Template(source, text)
        return cls(loaded)

    def render(self, config: Mapping[str, Any], workdir: Path) -> list[str]:
        """Write each template, rendered with ``config``, into ``workdir``; the files
        written. ``ValueError`` names a placeholder that is not a setting."""
        values = {name: _text(value) for name, value in config.items()}
        for dest, template in self._files.items():
            try:
                text = string.Template(template.text).substitute(values)
            except KeyError as exc:
                raise ValueError(f"template {template.source!r} names ${exc.args[0]}, which "
                                 f"is not a setting of the config") from None
            target = workdir.joinpath(*PurePosixPath(dest).parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        return list(self._files)


def _check_destination(dest: str, where: BuildContext) -> None:
    path = PurePosixPath(dest)
    if (not path.parts or path.is_absolute() or ".." in path.parts or "\\" in dest
            or dest.endswith("/")):
        raise where.error(f"expected a file path inside the working directory such as "
                          f"AGENTS.md or .agent/settings.json, got {dest!r}")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


class BenchWatch:
    """Whether anything in the bench folder changed since the last look.

    forge confines the files an agent asks *it* to write (``fs/write_text_file``); an
    agent process writing to disk itself cannot be stopped from here. This watch finds
    what such a write did to the bench folder: a file created, changed or removed
    (compared by size and modification time), outside :data:`_UNWATCHED` folders,
    hidden ones and search run folders. A folder of more than :data:`MAX_WATCHED`
    entries is not watched.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._seen: dict[str, tuple[int, int]] | None = None
        self._off = False

    def changes(self) -> list[str]:
        """What changed since the last call (the first call only takes a look)."""
        if self._off:
            return []
        now = _look(self.folder)
        if now is None:
            self._off = True
            log.warning("the bench folder %s has more than %d entries; the acp harness "
                        "does not watch it for writes by the agent", self.folder, MAX_WATCHED)
            return []
        before, self._seen = self._seen, now
        if before is None:
            return []
        changed = [f"{name} created" for name in sorted(now.keys() - before.keys())]
        changed += [f"{name} removed" for name in sorted(before.keys() - now.keys())]
        changed += [f"{name} changed" for name in sorted(now.keys() & before.keys())
                    if now[name] != before[name]]
        return changed


def _look(folder: Path) -> dict[str, tuple[int, int]] | None:
    """Relative path -> (size, mtime_ns) of every file under ``folder``; None past the bound."""
    seen: dict[str, tuple[int, int]] = {}
    for top, dirs, files in os.walk(folder):
        if set(files) >= _RUN_FILES:  # a search run's folder: forge writes there
            dirs.clear()
            continue
        dirs[:] = [d for d in dirs if d not in _UNWATCHED and not d.startswith(".")]
        for name in files:
            path = os.path.join(top, name)
            try:
                info = os.lstat(path)
            except OSError:  # gone between the listing and the look
                continue
            seen[os.path.relpath(path, folder)] = (info.st_size, info.st_mtime_ns)
            if len(seen) > MAX_WATCHED:
                return None
    return seen
