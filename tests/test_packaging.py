"""How forge installs: the wheel's files and metadata, and run.py's bootstrap."""

from __future__ import annotations

import email
import importlib.util
import shutil
import subprocess
import sys
import zipfile
from email.message import Message
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import copy_forge_source

import forge

REPO = Path(__file__).resolve().parent.parent
#: What run.py installs for the tests: test tools, Ray, the docs, each agent framework.
TEST_EXTRAS = "a2a,acp,ag2,agno,dev,docs,nlip,ray"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    """A wheel built from a copy of the sources (the checkout gets no build/ folder)."""
    src = copy_forge_source(tmp_path_factory.mktemp("src"))
    dist = src / "dist"
    # The venv's setuptools (the dev extra), not a download: the test runs offline.
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from setuptools import build_meta as b; "
                               "print(b.build_wheel(sys.argv[1]))", str(dist)],
        cwd=src, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return zipfile.ZipFile(dist / done.stdout.strip().splitlines()[-1])


def _metadata(wheel: zipfile.ZipFile) -> Message:
    name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    return email.message_from_bytes(wheel.read(name))


def test_the_wheel_carries_py_typed_and_every_module(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    assert "forge/py.typed" in names  # PEP 561: mypy reads forge's hints
    shipped = {p.relative_to(REPO).as_posix() for p in (REPO / "forge").rglob("*.py")}
    assert shipped <= names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_the_wheel_carries_the_forge_init_templates(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    templates = REPO / "forge" / "scaffold" / "template"
    shipped = {p.relative_to(REPO).as_posix() for p in templates.rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    # Not only the .py files: the YAML, JSONL, Markdown and the CI workflow too.
    assert {"forge/scaffold/template/tasks/dev.jsonl", "forge/scaffold/template/ci/forge.yml",
            "forge/scaffold/template/bench.yaml", "forge/scaffold/template/README.md"} <= shipped
    assert shipped <= names, sorted(shipped - names)


def test_metadata_license_version_and_classifiers(wheel: zipfile.ZipFile) -> None:
    meta = _metadata(wheel)
    assert meta["Version"] == forge.__version__  # one version source
    assert meta["License-Expression"] == "MIT"  # SPDX, not free text
    classifiers = meta.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]  # PEP 639 forbids both
    requires = meta.get_all("Requires-Dist") or []
    assert any(r.startswith("ray[default]") and 'extra == "ray"' in r for r in requires)
    # forge[agno] pulls agno; the base install pulls nothing of it.
    agno = [r for r in requires if r.startswith("agno")]
    assert agno and all('extra == "agno"' in r for r in agno)
    entry_points = next(n for n in wheel.namelist() if n.endswith("entry_points.txt"))
    assert "forge = forge.cli:main" in wheel.read(entry_points).decode()


def test_pyproject_has_no_second_version() -> None:
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert 'dynamic = ["version"]' in text
    assert 'version = { attr = "forge.__version__" }' in text
    assert not [line for line in text.splitlines() if line.startswith('version = "')]


# -- run.py ----------------------------------------------------------------------------


def _run_py(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
            ) -> tuple[ModuleType, list[list[str]]]:
    """run.py loaded as a module, its venv in tmp_path, pip calls recorded, not run."""
    spec = importlib.util.spec_from_file_location("run_py", REPO / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    root = tmp_path / "clone"
    root.mkdir()
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    venv_dir = tmp_path / "venv"
    monkeypatch.setattr(module, "ROOT", root)
    monkeypatch.setattr(module, "VENV", venv_dir)
    monkeypatch.setattr(module, "BIN", venv_dir / "bin")
    monkeypatch.setattr(module, "STAMP", venv_dir / ".forge-install-stamp")
    calls: list[list[str]] = []

    def create(self: Any, path: Path) -> None:
        (Path(path) / "bin").mkdir(parents=True)
        (Path(path) / "bin" / "python").touch()

    def run(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append(args)
        if "-e" in args:  # what pip would leave behind
            (venv_dir / "bin" / "forge").touch()
        return subprocess.CompletedProcess(args, 0)

    monkeypatch.setattr(module.venv.EnvBuilder, "create", create)
    monkeypatch.setattr(module.subprocess, "run", run)
    return module, calls


def _installed(calls: list[list[str]]) -> list[str]:
    return [c[c.index("-e") + 1] for c in calls if "-e" in c]


def test_run_py_installs_what_each_command_needs(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    run_py, calls = _run_py(tmp_path, monkeypatch)
    root = str(run_py.ROOT)
    run_py.ensure_venv("forge")  # the quickstart: forge alone, no test tools, no Ray
    assert _installed(calls) == [root]
    run_py.ensure_venv("forge")
    run_py.ensure_venv("test")  # pytest (dev), Ray, mkdocs (docs), the agent frameworks
    assert _installed(calls) == [root, f"{root}[{TEST_EXTRAS}]"]
    run_py.ensure_venv("lint")
    run_py.ensure_venv("forge")  # nothing taken away, nothing installed again
    assert len(_installed(calls)) == 2
    (run_py.ROOT / "pyproject.toml").write_text("# changed\n", encoding="utf-8")
    run_py.ensure_venv("forge")  # a new pyproject: again, keeping the extras there were
    assert _installed(calls)[-1] == f"{root}[{TEST_EXTRAS}]"


def test_run_py_lint_needs_dev_and_the_acp_sdk(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # mypy reads the acp harness's types from the SDK; the other extras stay out.
    run_py, calls = _run_py(tmp_path, monkeypatch)
    run_py.ensure_venv("lint")
    assert _installed(calls) == [f"{run_py.ROOT}[acp,dev]"]
    assert run_py.main(["nope"]) == 2 and len(calls) == 2  # refused before installing
