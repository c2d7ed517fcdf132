"""The forge line of a new bench's requirements.txt: the source of the forge that ran
``forge init``, as pip can install it again (a checkout's path, a VCS URL at its commit,
an archive, a version for an index)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import pytest
from conftest import REPO, copy_forge_source, offline_venv

import forge
from forge.scaffold import init_bench
from forge.scaffold.source import ForgeSource, find_forge_source, source_from_direct_url


def _forge_line(bench: Path) -> str:
    """The one line of the bench's requirements.txt that is not a comment."""
    lines = [line for line in (bench / "requirements.txt").read_text().splitlines()
             if line and not line.startswith("#")]
    assert len(lines) == 1, lines
    return lines[0]


def test_a_checkout_outside_the_benchs_repository_is_named_by_its_absolute_path(
        tmp_path: Path) -> None:
    # These tests run forge from its checkout; tmp_path is in no git repository.
    made = init_bench(tmp_path / "b")
    line = _forge_line(made.folder)
    assert line == f"forge @ {REPO.resolve().as_uri()}"
    target = Path(url2pathname(urlparse(line.removeprefix("forge @ ")).path))
    assert (target / "pyproject.toml").is_file() and (target / "forge" / "__init__.py").is_file()
    text = (made.folder / "requirements.txt").read_text()
    assert "from its source on this machine" in text
    assert "# runner can fetch, e.g. forge @ git+https://github.com/YOUR-ORG/forge@v" in text
    assert find_forge_source(tmp_path / "b").kind == "path"


def test_a_source_in_the_benchs_repository_is_named_relative_to_the_bench(
        tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    source = repo / "vendor" / "forge"
    source.mkdir(parents=True)
    direct = {"url": source.as_uri(), "dir_info": {}}
    assert source_from_direct_url(direct, repo / "benches" / "b") == ForgeSource(
        "../../vendor/forge", "repository")
    # A path pip would misread ("#" starts a comment, a space ends the line's path)
    # goes as a URL.
    odd = repo / "my forge#2"
    odd.mkdir()
    found = source_from_direct_url({"url": odd.as_uri(), "dir_info": {}}, repo / "b")
    assert found == ForgeSource(f"forge @ {odd.as_uri()}", "path")
    assert "%20" in found.requirement and "%232" in found.requirement
    # A source in another repository (a submodule has its own .git) is not relative.
    (source / ".git").write_text("gitdir: ../../.git/modules/forge\n")
    assert source_from_direct_url(direct, repo / "b") == ForgeSource(
        f"forge @ {source.as_uri()}", "path")


def test_direct_urls_of_each_kind() -> None:
    here = Path("/nonexistent/bench")
    vcs = {"url": "https://github.com/acme/forge.git", "subdirectory": "py",
           "vcs_info": {"vcs": "git", "commit_id": "a" * 40, "requested_revision": "v0.1.0"}}
    assert source_from_direct_url(vcs, here) == ForgeSource(
        f"forge @ git+https://github.com/acme/forge.git@{'a' * 40}#subdirectory=py", "vcs")
    archive = {"url": "https://files.example.com/forge-0.1.0-py3-none-any.whl",
               "archive_info": {"hashes": {"sha256": "f" * 64}}}
    assert source_from_direct_url(archive, here) == ForgeSource(
        f"forge @ https://files.example.com/forge-0.1.0-py3-none-any.whl#sha256={'f' * 64}",
        "url")
    # A local folder or wheel that is gone names nothing: the caller falls back.
    assert source_from_direct_url({"url": "file:///nonexistent/forge", "dir_info": {}},
                                  here) is None
    assert source_from_direct_url({"dir_info": {}}, here) is None


def test_each_kind_says_in_comments_where_forge_comes_from() -> None:
    text = ForgeSource("forge==0.1.0", "version").text("0.1.0")
    lines = text.splitlines()
    assert lines[-1] == "forge==0.1.0" and all(line.startswith("# ") for line in lines[:-1])
    assert "--index-url" in text and 'The PyPI project called "forge" is another one' in text
    assert "from the repository and commit" in ForgeSource("forge @ git+x", "vcs").text("1")
    assert "in this repository" in ForgeSource("..", "repository").text("1")


@pytest.mark.slow
def test_a_forge_installed_from_git_names_its_repository_and_commit(tmp_path: Path) -> None:
    """Real: forge installed by pip from a git repository (offline, a local one), then
    that installed forge runs ``forge init``."""
    source = copy_forge_source(tmp_path / "forge-src")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com",
           "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "forge"]):
        subprocess.run([*git, *args], cwd=source, check=True, timeout=60)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=source, capture_output=True,
                            text=True, check=True).stdout.strip()
    env = offline_venv(tmp_path / "venv")
    url = f"git+{source.as_uri()}"
    done = subprocess.run(["python", "-m", "pip", "install", "-q", f"forge @ {url}"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    made = subprocess.run(["forge", "init", "b"], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, check=False)
    assert made.returncode == 0, made.stderr
    assert _forge_line(tmp_path / "b") == f"forge @ {url}@{commit}"
    assert forge.__version__ in (tmp_path / "b" / "requirements.txt").read_text()
