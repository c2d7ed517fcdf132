"""The command line a Python user expects: --version, -h everywhere, help on every
option and argument, the choices of --proposer / --executor / --split shown, one
wording for a run that does not exist."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
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
from forge.journal.review import NO_SUCH_RUN
from forge.proposers import PROPOSERS


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


# -- lazy commands: `forge --version` and `forge --help` import none of them -------------------

#: What a command imports and the root's version and help must not: the statistics, the
#: search, the executors and harnesses (each seconds of imports, see forge.commands).
HEAVY = ("scipy", "numpy", "optuna", "forge.harness", "forge.executors", "forge.search",
         "forge.stats", "forge.evaluation.evaluate")

_IMPORTED = """
import sys
from forge.cli import main
{call}
heavy = {heavy!r}
print(sorted(m for m in sys.modules if m.startswith(heavy)
             or (m.startswith("forge.commands.") and m != "forge.commands.common")))
"""


@pytest.mark.parametrize("call", ["pass", "main(['--version'])", "main(['--help'])"],
                         ids=["import", "version", "help"])
def test_version_and_help_import_no_command(call: str) -> None:
    # In a process of its own: this one has imported everything already.
    proc = subprocess.run([sys.executable, "-c", _IMPORTED.format(call=call, heavy=HEAVY)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "[]"


def test_the_root_listing_is_each_commands_own_help() -> None:
    from forge.commands import COMMANDS, load_module_commands

    # Each row of the lazy listing is the first paragraph of the command's own help.
    for row in COMMANDS:
        command = load_module_commands(row.module)[row.name]
        assert inspect.cleandoc(command.help).split("\n\n")[0].replace("\n", " ") == \
            row.summary, row.name
    # ... and every command the modules register has a row.
    registered = {name for module in {c.module for c in COMMANDS}
                  for name in load_module_commands(module)}
    assert registered == {c.name for c in COMMANDS}


def test_the_lazy_help_is_the_loaded_help(capsys: pytest.CaptureFixture[str]) -> None:
    def root_help(command: Any) -> str:
        command.get_help(command.make_context("forge", [], resilient_parsing=True))
        return capsys.readouterr().out  # typer prints help, rather than returning it

    lazy = root_help(typer.main.get_command(app))
    loaded = typer.main.get_command(app)
    assert len(dict(loaded.commands.items())) == 13  # every module imported
    assert "init      Write a bench" in lazy
    assert lazy == root_help(loaded)
