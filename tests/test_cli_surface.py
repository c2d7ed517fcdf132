"""The command line a Python user expects: --version, -h everywhere, help on every
option and argument, the choices of --proposer / --executor / --split shown, one
wording for a run that does not exist."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from conftest import ARITH
from conftest import run_forge as forge

import forge as forge_pkg
from forge.cli import app
from forge.executors import EXECUTORS
from forge.proposers import PROPOSERS
from forge.review import NO_SUCH_RUN


def _commands(command: Any = None, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command and group of the app, as the words that name it."""
    command = command or typer.main.get_command(app)
    yield path
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def _command(path: tuple[str, ...]) -> Any:
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return command


COMMANDS = list(_commands())


@pytest.fixture(autouse=True)
def wide_help(monkeypatch: pytest.MonkeyPatch) -> None:
    # Help is laid out for the terminal; wide, a choice list is never broken mid-word.
    monkeypatch.setenv("COLUMNS", "200")


def test_there_are_commands_to_walk() -> None:
    assert {("eval",), ("search",), ("journal", "list"), ("export", "sft")} <= set(COMMANDS)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = forge(capsys, "--version")
    assert (code, out, err) == (0, f"forge {forge_pkg.__version__}\n", "")


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "forge")
@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_every_command_takes_h_and_help(capsys: pytest.CaptureFixture[str],
                                        path: tuple[str, ...], flag: str) -> None:
    code, out, err = forge(capsys, *path, flag)
    assert code == 0, err
    # In-process the program is named after the test runner; the command words follow.
    assert re.search(r"Usage: .* " + re.escape(" ".join(path)), out), out


def test_every_option_and_argument_has_help() -> None:
    missing = [f"forge {' '.join(path)} {'/'.join(param.opts)}"
               for path in COMMANDS for param in _command(path).params
               if not getattr(param, "help", None)]
    assert missing == []


def _help(capsys: pytest.CaptureFixture[str], *path: str) -> str:
    code, out, err = forge(capsys, *path, "--help")
    assert code == 0, err
    return out


def _option_text(help_text: str, option: str) -> str:
    """The help table's text for one option: its line up to the next option's."""
    match = re.search(rf"{re.escape(option)}\b(.*?)(?=\n\s*│\s*(?:--|-[a-z]\s)|\Z)",
                      help_text, re.S)
    assert match, option
    return match.group(1)


def test_choices_are_shown(capsys: pytest.CaptureFixture[str]) -> None:
    search = _help(capsys, "search")
    assert "[" + "|".join(PROPOSERS.names()) + "]" in _option_text(search, "--proposer")
    executors = "[" + "|".join(EXECUTORS.names()) + "]"
    assert executors in _option_text(search, "--executor")
    evaluate = _help(capsys, "eval")
    assert executors in _option_text(evaluate, "--executor")
    split = _option_text(evaluate, "--split")
    assert all(name in split for name in ("dev", "val", "test"))
    assert "[bench|registry|config]" in _help(capsys, "schema")


def test_export_sft_shows_bench_as_required(capsys: pytest.CaptureFixture[str]) -> None:
    assert "required" in _option_text(_help(capsys, "export", "sft"), "--bench")
    assert _command(("export", "sft")).params[2].required


def test_one_wording_for_no_such_run(capsys: pytest.CaptureFixture[str],
                                     tmp_path: Path) -> None:
    # Every command that takes a run says a missing one the same way, naming the file.
    expected = f"forge: error: {tmp_path / 'nope' / 'run.json'}: no such run (run.json not found)"
    for args in (["journal", "show", "nope"], ["journal", "show", "nope", "--json"],
                 ["report", "nope"], ["promote", "nope"],
                 ["search", ARITH, "--resume", "nope"]):
        code, out, err = forge(capsys, *args, "--journals", tmp_path)
        assert (code, out, err.strip()) == (2, "", expected), args
    assert NO_SUCH_RUN in expected
