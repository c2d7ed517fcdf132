"""``forge runtime report JOURNAL``: how often each runtime rule fired, and its moves."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from forge.commands.common import out, print_json
from forge.runtime import RuntimeReport, summarize_runtime_journal

__all__ = ["register", "runtime_app"]

runtime_app = typer.Typer(no_args_is_help=True, help="Read the runtime mutator's journal.")


@runtime_app.command("report")
def runtime_report(
    journal: Annotated[Path, typer.Argument(metavar="JOURNAL", help="runtime journal (JSONL)")],
    as_json: Annotated[bool, typer.Option(
        "--json", help="print only the report as a JSON object")] = False,
) -> None:
    """How often each runtime rule fired: observed, applied, refused, and its moves."""
    report = summarize_runtime_journal(journal)
    if as_json:
        print_json(report.as_json())
        return
    out.print(_runtime_table(report))
    modes = ", ".join(f"{m} {n}" for m, n in report.modes.items()) or "none ended"
    registries = ", ".join(f"{n} ({d[:12]})" for d, n in report.registries.items()) or "—"
    out.print(f"{report.records} records, {report.runs} runs ({modes}), "
              f"{report.runs_with_moves} with moves; registry {registries}",
              highlight=False, markup=False, soft_wrap=True)
    if report.restore_failures:
        out.print(f"[red]{report.restore_failures} run(s) did not restore their config[/red]")


def _runtime_table(report: RuntimeReport) -> Table:
    """One row per (signal, rule): counts, refusal reasons, and the most frequent moves."""
    def moves(counter: Counter[tuple[str, Any, Any]], mark: str = "") -> list[str]:
        return [f"{mark}{t} {b!r}→{a!r} ×{n}" for (t, b, a), n in counter.most_common(3)]

    table = Table(title=f"runtime journal {escape(report.path)}", title_justify="left")
    table.add_column("signal → rule")
    for name in ("fired", "observed", "applied", "refused"):
        table.add_column(name, justify="right")
    table.add_column("refused because")
    table.add_column("moves (made or would-be; ✗ refused)")
    for row in report.rows:
        if row.target is None:
            table.add_row(f"{row.signal} → no rule", f"{row.no_rule}", "", "", "", "", "")
            continue
        table.add_row(f"{row.signal} → {row.target} {row.direction}", str(row.fired),
                      str(row.observed), str(row.applied), str(row.refused),
                      "\n".join(f"{r} ×{n}" for r, n in row.reasons.most_common()),
                      "\n".join(moves(row.moves) + moves(row.refused_moves, "✗ ")))
    return table


def register(app: typer.Typer) -> None:
    """Add ``forge runtime`` to the app."""
    app.add_typer(runtime_app, name="runtime")
