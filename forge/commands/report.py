"""``forge report RUN [--html F]``: write a run's HTML report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from forge.errors import OptionError
from forge.journal.review import resolve_run

__all__ = ["register"]


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
            raise OptionError(f"{html} is a folder; expected a file path", option="--html")
        try:
            written = write_html(folder, html)
        except OSError as exc:
            target = html if html is not None else folder / "report.html"
            raise OptionError(f"cannot write {target}: {exc.strerror or exc}",
                              option="--html") from None
        typer.echo(f"report: {written}")
