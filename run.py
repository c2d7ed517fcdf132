#!/usr/bin/env python3
"""Bootstrap: run forge or its tests from a fresh clone with nothing but python3.

    python3 run.py forge eval tests/benches/arith   # any forge command
    python3 run.py test                             # the whole test suite
    python3 run.py lint                             # ruff and mypy

Creates ``.venv`` beside this file on first use (or reuses it) and installs forge
with its dev and ray extras into it; reinstalls when pyproject.toml changes. Standard
library only, since nothing else is installed yet.
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


def _wanted_stamp() -> str:
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    return f"{digest} {sys.version_info[:2]}"


def ensure_venv() -> None:
    if STAMP.is_file() and STAMP.read_text() == _wanted_stamp() and (BIN / "forge").exists():
        return
    if sys.version_info < (3, 11):  # noqa: UP036 - run.py may be started by any python3
        sys.exit(f"run.py: forge needs Python >= 3.11; this is {sys.version.split()[0]}")
    if not (BIN / "python").exists():
        print(f"run.py: creating {VENV}", file=sys.stderr)
        try:
            venv.EnvBuilder(with_pip=True).create(VENV)
        except Exception as exc:  # Debian without python3-venv lands here
            sys.exit(f"run.py: cannot create a virtualenv ({exc}); install python3-venv")
    print("run.py: installing forge and its dev tools into the virtualenv", file=sys.stderr)
    pip = [str(BIN / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    # With Ray (the ``ray`` extra): its tests start a local Ray instance, and CI runs
    # them. It installs in seconds from wheels.
    subprocess.run([*pip, "-e", f"{ROOT}[dev,ray]"], check=True)
    STAMP.write_text(_wanted_stamp())


def main(argv: list[str]) -> int:
    if not argv or argv[0] in {"-h", "--help"}:
        print(__doc__)
        return 0
    ensure_venv()
    command, rest = argv[0], argv[1:]
    if command == "test":
        return subprocess.call([str(BIN / "python"), "-m", "pytest", "-q", *rest], cwd=ROOT)
    if command == "lint":
        os.chdir(ROOT)
        ruff = subprocess.call([str(BIN / "ruff"), "check", "forge", "tests", "benchmarks",
                                "run.py"])
        mypy = subprocess.call([str(BIN / "mypy")])
        return ruff or mypy
    if command == "forge":
        return subprocess.call([str(BIN / "forge"), *rest])
    print(f"run.py: unknown command {command!r}; expected forge, test or lint", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
