"""``forge journal list`` and ``forge journal show RUN``: review search runs.

The reading is in :mod:`forge.review` and the tables in
:mod:`forge.report.journal_view`; this module only wires options to them. Errors
are raised as :class:`forge.errors.UserError` subclasses, which ``forge.cli.main``
prints as one line with exit 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from forge.errors import OptionError
from forge.report.console import run_lines, run_problems, runs_table
from forge.report.journal_view import run_footer, run_header, steps_table
from forge.review import list_runs, load_run_records, resolve_run, step_records

__all__ = ["journal_app", "register"]

journal_app = typer.Typer(no_args_is_help=True,
                          help="Review search runs: every step, its gates and its verdict.")



def _console() -> Console:
    # Made per command, not at import: the width then follows the terminal (or
    # COLUMNS) at the time the command runs.
    return Console(emoji=False)  # a run id or path like ``x:100:`` stays as it is

JournalsOption = Annotated[Path, typer.Option(
    "--journals", help="the folder holding the run folders")]


def _print_json(value: Any) -> None:
    # Only the document on stdout: scripts parse it whole (DESIGN.md, CLI).
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False) + "\n")


def _check_journals(journals: Path) -> None:
    if journals.exists() and not journals.is_dir():
        raise OptionError(f"{journals} is not a folder", option="--journals")


@journal_app.command("list")
def list_command(
    journals: JournalsOption = Path("journals"),
    as_json: Annotated[bool, typer.Option("--json", help="print only a JSON list")] = False,
) -> None:
    """Every run under --journals, oldest first: bench, start, steps, promotions, stop, test Δ."""
    _check_journals(journals)
    runs = list_runs(journals)
    if as_json:
        _print_json([r.as_json() for r in runs])
        return
    out = _console()
    if not runs:
        where = journals if journals.is_dir() else f"{journals} (no such folder)"
        out.print(f"no runs in {where}", highlight=False, markup=False)
        return
    title = f"runs in {escape(str(journals))}"
    table = runs_table(runs, title, out.width)
    if table is not None:
        out.print(table)
    else:
        # Too narrow for the table with every id whole: a block per run instead.
        out.print(title, highlight=False)
        for i, line in enumerate(run_lines(runs)):
            # The id lines (even ones) are never broken by forge; the rest may wrap.
            out.print(line, highlight=False, soft_wrap=i % 2 == 0)
    for line in run_problems(runs):
        out.print(line, highlight=False, soft_wrap=True)


@journal_app.command("show")
def show_command(
    run: Annotated[str, typer.Argument(metavar="RUN", help="run id under --journals, or a "
                                                           "path to a run folder")],
    journals: JournalsOption = Path("journals"),
    as_json: Annotated[bool, typer.Option("--json", help="print only the step records "
                                                         "as a JSON list")] = False,
) -> None:
    """One run step by step: each move, its deltas and bounds, its gates and verdict."""
    _check_journals(journals)
    records = load_run_records(resolve_run(run, journals))
    if as_json:
        _print_json(step_records(records))
        return
    out = _console()
    out.print(run_header(records))
    out.print(steps_table(records))
    for line in run_footer(records):
        out.print(line, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add ``forge journal`` to the ``forge`` app (called by forge.commands.register_all)."""
    app.add_typer(journal_app, name="journal")
