"""``forge journal list``, ``forge journal show RUN`` and ``forge journal prune``: review
search runs, and free the disk space of finished ones.

The reading is in :mod:`forge.journal.review` (and
:mod:`forge.journal.review_failures`, the unscored attempts per config), the tables in
:mod:`forge.report.journal_view` and the pruning in :mod:`forge.journal.prune`; this
module only wires options to them. Errors are raised as :class:`forge.errors.UserError`
subclasses, which ``forge.cli.main`` prints as one line with exit 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from forge.errors import OptionError
from forge.journal.review import list_runs, load_run_records, resolve_run
from forge.journal.review_failures import load_run_failures, step_records_with_unscored
from forge.report.console import run_lines, run_problems, runs_table
from forge.report.journal_view import run_footer, run_header, steps_table
from forge.report.run_failures import unscored_view

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
    """One run step by step: each move, its deltas and bounds, its gates and verdict, and
    each config's unscored attempts with their reasons."""
    _check_journals(journals)
    folder = resolve_run(run, journals)
    records = load_run_records(folder)
    failures = load_run_failures(folder, records)
    if as_json:
        _print_json(step_records_with_unscored(records, failures))
        return
    out = _console()
    out.print(run_header(records))
    out.print(steps_table(records))
    for item in unscored_view(records, failures):
        out.print(item, highlight=False, soft_wrap=isinstance(item, Text))
    for line in run_footer(records):
        out.print(line, highlight=False, soft_wrap=True)


@journal_app.command("prune")
def prune_command(
    runs: Annotated[list[str] | None, typer.Argument(
        metavar="RUN", help="run ids under --journals, or run folders (default: every "
                                 "run under --journals)", show_default=False)] = None,
    journals: JournalsOption = Path("journals"),
    keep: Annotated[int, typer.Option(
        "--keep", min=0, metavar="N",
        help="leave whole the N newest of the runs it would prune")] = 0,
    yes: Annotated[bool, typer.Option(
        "--yes", help="prune; without it, only say what would be pruned")] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="prune runs that have not finished too (they can no longer be "
                        "resumed)")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print only a JSON list, one "
                                                         "object per run")] = False,
) -> None:
    """Free disk space: cut finished runs' attempt stores down to what review reads.

    Without --yes nothing is changed: it says what would be pruned and the bytes freed.
    """
    from forge.journal.prune import prune_runs

    _check_journals(journals)
    named = bool(runs)
    folders = ([resolve_run(r, journals) for r in runs or []] if named
               else [s.folder for s in list_runs(journals)])
    outcomes = prune_runs(folders, dry_run=not yes, force=force, keep=keep, named=named)
    if as_json:
        _print_json([o.as_json() for o in outcomes])
        return
    out = _console()
    for o in outcomes:
        if o.action == "skipped":
            line = f"{o.run_id}: skipped: {o.reason}"
        else:
            line = (f"{o.run_id}: {'pruned' if yes else 'would prune'} the attempt store, "
                    f"{_size(o.bytes_before)} -> {_size(o.bytes_after)}: keeps "
                    f"{o.attempts_kept:,} of {o.attempts_before:,} attempts (the incumbents' "
                    "dev and val attempts and the test split's, which the report reads)")
        out.print(line, highlight=False, markup=False, soft_wrap=True)
    done = [o for o in outcomes if o.action != "skipped"]
    freed = _size(sum(o.freed for o in done))
    if not outcomes:
        out.print(f"no runs in {journals}", highlight=False, markup=False)
    elif yes:
        out.print(f"freed {freed} in {len(done)} run(s)", highlight=False, markup=False)
    else:
        out.print(f"would free {freed} in {len(done)} run(s); nothing was changed: add --yes "
                  "to prune", highlight=False, markup=False)


def _size(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1e6:.1f} MB"
    return f"{n / 1e3:.1f} kB" if n >= 1_000 else f"{n} bytes"


def register(app: typer.Typer) -> None:
    """Add ``forge journal`` to the ``forge`` app (called by forge.commands.register_all)."""
    app.add_typer(journal_app, name="journal")
