"""``forge init DIR``: a runnable bench skeleton, written whole or not at all.

The files are package data under ``template/`` beside this module (in the wheel
too): a toy agent whose score truly depends on its settings, its registry, start
config, scorer, disjoint task splits, a README and a GitHub Actions workflow.
Placeholders ``__UPPER_CASE__`` in them are filled with the bench's name and paths,
each quoted for the file it lands in, and ``requirements.txt`` with the source of the
forge that runs ``forge init`` (:mod:`forge.scaffold.source`), so that the workflow's
install step installs forge on its first run.

Nothing is written into a folder that holds anything: the refusal is one line and
nothing is touched. The files are rendered in memory, written into a staging folder
and moved into place by renames (one for a new folder; one per entry for an
existing empty one, so a shell sitting in it keeps its folder), so a failure leaves
no half-written bench behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shlex
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path, PurePosixPath

from forge.errors import OptionError
from forge.scaffold.source import ForgeSource, find_forge_source

__all__ = ["SCAFFOLD_FILES", "Scaffold", "check_bench_name", "init_bench"]

#: What each top-level entry of a new bench is for, in the order ``forge init`` lists them.
SCAFFOLD_FILES: dict[str, str] = {
    "bench.yaml": "the bench: harness, splits, scorer, auxiliary metrics, gates, budget",
    "registry.yaml": "the settings forge may change, with their types and bounds",
    "defaults.yaml": "the start config (forge promote writes the proven one here)",
    "harness.py": "a toy agent: replace it with a call to yours",
    "scorer.py": "how an answer is judged",
    "tasks": "dev, val and test splits, one JSON task a line",
    "ci": "forge.yml, a GitHub Actions workflow gating on a saved baseline",
    "requirements.txt": "what CI installs: forge and what harness.py imports",
    "README.md": "what to edit first",
}

# A bench's name starts its run ids (``NAME-YYYYmmdd-...``), which are folder names.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_PLACEHOLDER = re.compile(r"__[A-Z][A-Z_]*__")
_TEMPLATE = "template"
_SKIPPED = {"__pycache__"}


@dataclass(frozen=True)
class Scaffold:
    """A bench ``forge init`` wrote: its folder, name and files (relative, POSIX)."""

    folder: Path
    name: str
    files: tuple[str, ...]


def check_bench_name(name: str, *, option: str = "--name", what: str = "") -> str:
    """``name`` if it can name a bench (letters, digits, ``.``, ``_``, ``-``); ``what``
    says where it came from, when not from ``option`` itself."""
    if not _NAME.fullmatch(name):
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._")[:64] or "my-bench"
        raise OptionError(f"{what}{name!r} cannot name a bench: expected up to 64 letters, "
                          f"digits, '.', '_' or '-', starting with a letter or digit; give "
                          f"one with --name, e.g. --name {shlex.quote(slug)}", option=option)
    return name


def init_bench(folder: str | Path, *, name: str | None = None,
               ci_bench: str | None = None) -> Scaffold:
    """Write a new bench into ``folder`` (absent or empty) and return what was written.

    ``name`` defaults to the folder's name. ``ci_bench`` is the bench folder as the CI
    workflow names it, from the repository's root; by default ``folder`` relative to
    the working directory, or its name when it lies elsewhere. Bad input (a folder that
    holds anything, a bad name) and a failed write are an :class:`OptionError`; either
    way nothing is left behind.
    """
    target = Path(folder)
    if not str(target).isprintable():
        raise OptionError(f"{str(target)!r}: a folder name with a control character",
                          option="DIR")
    _check_free(target)
    if name is None:
        name = check_bench_name(target.resolve().name, option="DIR",
                                what="the folder's name ")
    else:
        check_bench_name(name)
    files = _render(name, bench=str(target), ci_bench=ci_bench or _ci_path(target),
                    forge_source=find_forge_source(target))
    try:
        _write_whole(target, files)
    except OSError as exc:
        raise OptionError(f"cannot write {target}: {exc.strerror or exc}; nothing was written",
                          option="DIR") from None
    return Scaffold(folder=target, name=name, files=tuple(sorted(files)))


def _check_free(target: Path) -> None:
    """Refuse a ``target`` that is a file or a folder holding anything (hidden or not)."""
    try:
        if not (target.exists() or target.is_symlink()):
            return
        if not target.is_dir():
            raise OptionError(f"{target} exists and is not a folder; forge init writes a new "
                              "bench into a new or empty folder", option="DIR")
        if any(target.iterdir()):
            raise OptionError(f"{target} is not empty; forge init writes only into a new or "
                              "empty folder, and wrote nothing", option="DIR")
    except OSError as exc:
        raise OptionError(f"cannot read {target}: {exc.strerror or exc}", option="DIR") from None


def _ci_path(target: Path) -> str:
    try:
        relative = target.resolve().relative_to(Path.cwd().resolve())
    except ValueError:  # outside the working directory: the workflow's BENCH is to edit
        return target.resolve().name
    return relative.as_posix() or "."


def _templates(node: Traversable, prefix: PurePosixPath = PurePosixPath()
               ) -> Iterator[tuple[str, Traversable]]:
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        if child.name in _SKIPPED or child.name.startswith(".") or child.name.endswith(".pyc"):
            continue
        if child.is_dir():
            yield from _templates(child, prefix / child.name)
        else:
            yield (prefix / child.name).as_posix(), child


def _render(name: str, *, bench: str, ci_bench: str, forge_source: ForgeSource
            ) -> dict[str, str]:
    """Every file's text, placeholders filled (a YAML value JSON-quoted, a shell word
    shell-quoted); an unknown placeholder is a bug of the templates, raised here,
    before anything is written."""
    from forge._version import __version__

    values = {
        "__NAME__": name,
        "__BENCH_SHELL__": shlex.quote(bench),
        "__CI_BENCH_YAML__": json.dumps(ci_bench, ensure_ascii=False),
        "__CI_BENCH_SHELL__": shlex.quote(ci_bench),
        "__CI_BASELINE_SHELL__": shlex.quote(f"{ci_bench}/baseline.json"),
        "__FORGE_VERSION__": __version__,
        "__FORGE_REQUIREMENT__": forge_source.text(__version__),
    }
    rendered: dict[str, str] = {}
    for relative, source in _templates(resources.files(__name__) / _TEMPLATE):
        text = source.read_text("utf-8")
        unknown = set(_PLACEHOLDER.findall(text)) - set(values)
        if unknown:
            raise RuntimeError(f"template {relative} has unknown placeholders {sorted(unknown)}")
        rendered[relative] = _PLACEHOLDER.sub(lambda m: values[m.group(0)], text)
    return rendered


def _write_whole(target: Path, files: dict[str, str]) -> None:
    """Write ``files`` under ``target`` (absent or empty) by staging and renaming."""
    created = _missing_parents(target)
    existing = target.is_dir()
    # Staged inside an existing folder (its parent may not be ours to write), beside a
    # new one; on the same file system either way, so the renames are atomic.
    staging = (target / f".forge-init-{secrets.token_hex(4)}" if existing
               else target.parent / f".{target.name}.forge-init-{secrets.token_hex(4)}")
    moved: list[Path] = []
    try:
        for parent in reversed(created):
            parent.mkdir()
        staging.mkdir()  # the umask's mode, as the folder itself will have
        for relative, text in files.items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("x", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
        if not existing:
            staging.rename(target)  # refused if something appeared there meanwhile
            return
        for entry in sorted(staging.iterdir()):
            destination = target / entry.name
            if destination.exists() or destination.is_symlink():
                raise FileExistsError(17, "appeared while forge init wrote", str(destination))
            entry.rename(destination)
            moved.append(destination)
        staging.rmdir()
    except BaseException:
        for path in moved:
            _remove(path)
        _remove(staging)
        for parent in created:  # deepest first; only if still empty
            with contextlib.suppress(OSError):
                parent.rmdir()
        raise


def _missing_parents(target: Path) -> list[Path]:
    """The folders above ``target`` that do not exist yet, deepest first."""
    missing = []
    parent = target.absolute().parent
    while not parent.exists() and parent != parent.parent:
        missing.append(parent)
        parent = parent.parent
    return missing


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
