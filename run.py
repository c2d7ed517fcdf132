#!/usr/bin/env python3
"""Bootstrap: run forge or its tests from a fresh clone with nothing but python3.

    python3 run.py forge eval tests/benches/arith   # any forge command
    python3 run.py test                             # the whole test suite
    python3 run.py lint                             # ruff and mypy
    python3 run.py docs                             # the user guide, into site/

Creates ``.venv`` beside this file on first use (or reuses it) and installs forge
into it with what the command needs: forge alone for ``forge``, the ``dev`` extra
for ``lint``, ``dev``, ``ray``, ``docs`` and each agent framework's and protocol's extra
(``agno``, ``ag2``, ``acp``, ``a2a``, ``nlip``) for ``test`` (the Ray executor's tests
start a local Ray instance; the docs' tests build the guide; the framework and protocol
harnesses' tests run real agents and SDK servers), ``docs`` for ``docs``
(mkdocs with the material theme; ``mkdocs build --strict``, so a broken link or a
page missing from the nav fails it). Reinstalls when pyproject.toml changes or a
command needs an extra not installed yet. Standard library only, since nothing else
is installed yet.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("FORGE_VENV", ROOT / ".venv"))
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".forge-install-stamp"

#: The extras each command needs; a command not listed needs none.
EXTRAS = {"test": ("dev", "ray", "docs", "agno", "ag2", "acp", "a2a", "nlip"),
          "lint": ("dev", "acp"), "docs": ("docs",)}


def _digest() -> str:
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    return f"{digest} {sys.version_info[:2]}"


def _stamp() -> tuple[bool, set[str]]:
    """Whether the install is current (same pyproject.toml and Python, script there),
    and the extras installed last time (kept when forge is installed anew)."""
    if not STAMP.is_file():
        return False, set()
    digest, _, extras = STAMP.read_text().partition("\n")
    current = digest == _digest() and (BIN / "forge").exists()
    return current, {e for e in extras.split(",") if e}


def ensure_venv(command: str) -> None:
    wanted = set(EXTRAS.get(command, ()))
    current, have = _stamp()
    if current and wanted <= have:
        return
    if sys.version_info < (3, 11):  # noqa: UP036 - run.py may be started by any python3
        sys.exit(f"run.py: forge needs Python >= 3.11; this is {sys.version.split()[0]}")
    if not (BIN / "python").exists():
        print(f"run.py: creating {VENV}", file=sys.stderr)
        try:
            venv.EnvBuilder(with_pip=True).create(VENV)
        except Exception as exc:  # Debian without python3-venv lands here
            sys.exit(f"run.py: cannot create a virtualenv ({exc}); install python3-venv")
    # What is there stays: `run.py forge` after `run.py test` must not uninstall pytest.
    extras = sorted(wanted | have)
    print(f"run.py: installing forge{' with ' + ', '.join(extras) if extras else ''} into "
          "the virtualenv", file=sys.stderr)
    pip = [str(BIN / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    target = f"{ROOT}[{','.join(extras)}]" if extras else str(ROOT)
    subprocess.run([*pip, "-e", target], check=True)
    STAMP.write_text(f"{_digest()}\n{','.join(extras)}")


def main(argv: list[str]) -> int:
    if not argv or argv[0] in {"-h", "--help"}:
        print(__doc__)
        return 0
    command, rest = argv[0], argv[1:]
    if command not in {"test", "lint", "docs", "forge"}:
        print(f"run.py: unknown command {command!r}; expected forge, test, lint or docs",
              file=sys.stderr)
        return 2
    ensure_venv(command)
    if command == "test":
        return subprocess.call([str(BIN / "python"), "-m", "pytest", "-q", *rest], cwd=ROOT)
    if command == "lint":
        os.chdir(ROOT)
        ruff = subprocess.call([str(BIN / "ruff"), "check", "forge", "tests", "benchmarks",
                                "run.py"])
        mypy = subprocess.call([str(BIN / "mypy")])
        return ruff or mypy
    if command == "docs":
        # The CLI reference is rendered from forge's own app (docs/hooks/), so the
        # build imports forge: the virtualenv's, installed from this checkout.
        # The theme's notice about mkdocs' successor says nothing about this guide.
        env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
        return subprocess.call([str(BIN / "mkdocs"), "build", "--strict", "--site-dir",
                                str(ROOT / "site"), *rest], cwd=ROOT, env=env)
    return subprocess.call([str(BIN / "forge"), *rest])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
