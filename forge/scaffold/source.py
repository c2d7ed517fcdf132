"""Where the running forge came from, as the ``requirements.txt`` line that installs it.

A new bench's CI workflow installs forge with ``pip install -r requirements.txt``, run
in the bench's folder. forge is not on PyPI under its name (the project called
"forge" there is another one), so no version pin alone can install it; what can is the
source of the forge that ran ``forge init``, the one the user already has:

1. A source tree (a checkout run from its folder or installed editable): its path.
   Relative to the bench when both lie in one git repository, so a CI runner that
   checks the repository out finds it too; absolute otherwise, which works on this
   machine only (the file says so, and what to write for a hosted runner).
2. Installed from a version-control URL (``direct_url.json``, PEP 610): that URL at
   the commit installed, ``forge @ git+https://...@<commit>``, which any runner with
   access to the repository can fetch.
3. Installed from a local folder or archive: its path, as in 1, while it exists; from
   a remote archive, its URL.
4. Otherwise (from a package index): ``forge==VERSION``, for that index.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

from forge._version import __version__

__all__ = ["ForgeSource", "find_forge_source", "source_from_direct_url"]

Kind = Literal["repository", "path", "vcs", "url", "version"]


@dataclass(frozen=True)
class ForgeSource:
    """The requirement line that installs this forge, and what kind of source it names.

    ``kind``: ``repository`` a path inside the bench's own git repository, ``path`` a
    path on this machine only, ``vcs`` a version-control URL at a commit, ``url`` an
    archive's URL, ``version`` a version pin for a package index."""

    requirement: str
    kind: Kind

    def comment(self, version: str) -> list[str]:
        """The lines of ``requirements.txt`` that say where the requirement comes from."""
        head = f"forge {version}, the forge that wrote this bench,"
        if self.kind == "repository":
            return [f"{head} from its source in this repository."]
        if self.kind == "vcs":
            return [f"{head} from the repository and commit it was installed from."]
        if self.kind == "url":
            return [f"{head} from the archive it was installed from."]
        if self.kind == "path":
            return [f"{head} from its source on this machine.",
                    "A hosted CI runner does not have this path: replace it with a source the",
                    f"runner can fetch, e.g. forge @ git+https://github.com/YOUR-ORG/forge@v{version}"]
        return [f"{head} as installed from a package index.",
                'The PyPI project called "forge" is another one: name your index above this',
                "line, e.g. --index-url https://pypi.example.com/simple"]

    def text(self, version: str) -> str:
        """The comment and the requirement, as lines of ``requirements.txt``."""
        return "\n".join([*(f"# {line}" for line in self.comment(version)), self.requirement])


def find_forge_source(bench: Path) -> ForgeSource:
    """The source of the forge running this code, for a bench to be written at ``bench``."""
    package = Path(__file__).resolve().parents[1]  # this file is forge/scaffold/source.py
    if _is_forge_tree(package.parent):
        return _path_source(package.parent, bench)
    for dist in metadata.distributions(name="forge"):
        # Another forge's metadata may come first on sys.path (an editable install
        # elsewhere): only the one holding the running files says where they came from.
        if Path(str(dist.locate_file("forge/__init__.py"))).resolve() != package / "__init__.py":
            continue
        text = dist.read_text("direct_url.json")
        try:
            direct = json.loads(text) if text else None
        except ValueError:
            direct = None
        found = source_from_direct_url(direct, bench) if isinstance(direct, dict) else None
        if found is not None:
            return found
        break
    return ForgeSource(f"forge=={__version__}", "version")


def source_from_direct_url(direct: dict[str, Any], bench: Path) -> ForgeSource | None:
    """The source a PEP 610 ``direct_url.json`` records, or None when it names nothing
    that can be installed again (a local folder or file that is gone)."""
    url = direct.get("url")
    if not isinstance(url, str):
        return None
    vcs = direct.get("vcs_info")
    if isinstance(vcs, dict) and isinstance(vcs.get("vcs"), str):
        commit = vcs.get("commit_id") or vcs.get("requested_revision")
        requirement = f"forge @ {vcs['vcs']}+{url}" + (f"@{commit}" if commit else "")
        if isinstance(direct.get("subdirectory"), str):
            requirement += f"#subdirectory={direct['subdirectory']}"
        return ForgeSource(requirement, "vcs")
    parsed = urlparse(url)
    if parsed.scheme == "file":
        local = Path(url2pathname(unquote(parsed.path)))
        return _path_source(local, bench) if local.exists() else None
    if "archive_info" in direct:
        hashes = direct["archive_info"].get("hashes") if isinstance(
            direct["archive_info"], dict) else None
        fragment = "".join(f"#{name}={value}" for name, value in
                           sorted(hashes.items())[:1]) if isinstance(hashes, dict) else ""
        return ForgeSource(f"forge @ {url}{fragment}", "url")
    return None


def _is_forge_tree(folder: Path) -> bool:
    """Whether ``folder`` is forge's source: its ``pyproject.toml`` names forge."""
    try:
        with (folder / "pyproject.toml").open("rb") as fh:
            project = tomllib.load(fh).get("project")
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return isinstance(project, dict) and project.get("name") == "forge"


def _path_source(source: Path, bench: Path) -> ForgeSource:
    """``source`` relative to the bench's folder when both are in one git repository
    (pip reads a relative path from the folder it runs in: the workflow runs it in the
    bench's), else as an absolute ``file:`` URL."""
    source, bench = source.resolve(), bench.resolve()
    repository = _repository(bench)
    if repository is not None and _repository(source) == repository:
        relative = os.path.relpath(source, bench)
        # pip takes a line for a path only when it looks like one; "#" starts a
        # comment and a space ends the requirement: such a path goes as a URL.
        if not any(ch.isspace() or ch == "#" for ch in relative):
            return ForgeSource(relative if relative.startswith(".") else f"./{relative}",
                               "repository")
    return ForgeSource(f"forge @ {source.as_uri()}", "path")


def _repository(path: Path) -> Path | None:
    """The top of the git work tree holding ``path`` (a folder with ``.git``), if any."""
    for folder in (path, *path.parents):
        if (folder / ".git").exists():
            return folder
    return None
