"""``forge report RUN [--html F]``: write a run's HTML report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from forge.errors import UserError

__all__ = ["register", "resolve_run"]


def resolve_run(run: str, journals: Path) -> Path:
    """The run folder of ``run``: a run id under ``journals``, else a folder path.

    The id is tried first so that a run named like a relative path in the current
    folder still means the journal's run, as in ``forge search --resume``.
    """
    by_id = journals / run
    if (by_id / "run.json").is_file():
        return by_id
    as_path = Path(run)
    if as_path.is_dir():
        return as_path  # load_run names what is missing inside it
    raise UserError(f"report: no run {run!r} in {journals} (and no such run folder)")


def register(app: typer.Typer) -> None:
    """Add ``forge report`` to the CLI."""

    @app.command("report")
    def report_command(
        run: Annotated[str, typer.Argument(metavar="RUN",
                                           help="run id under --journals, or a run folder")],
        html: Annotated[Path | None, typer.Option(
            "--html", metavar="F", help="HTML file to write (default: <run folder>/report.html)"
        )] = None,
        journals: Annotated[Path, typer.Option("--journals", help="run folders")] = Path(
            "journals"),
    ) -> None:
        """Write one self-contained HTML report of a search run (opens offline)."""
        # Imported here: the CLI starts without loading the report's modules.
        from forge.report.html import write_html

        folder = resolve_run(run, journals)
        if html is not None and html.is_dir():
            raise UserError(f"--html: {html} is a folder; expected a file path")
        try:
            written = write_html(folder, html)
        except OSError as exc:
            target = html if html is not None else folder / "report.html"
            raise UserError(f"--html: cannot write {target}: {exc.strerror or exc}") from None
        typer.echo(f"report: {written}")
