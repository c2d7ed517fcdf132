"""``forge report RUN --html F``: one self-contained HTML page about a search run.

The page shows the incumbent's dev and val score per step with 95% bands, a forest
plot of every candidate decision, the rollout budget spent, the auxiliary metrics
at each promotion, the final config's learning-zone tasks, the test result, each
config's unscored attempts with their reasons, and the start's and the final config's
answers side by side. Charts are inline SVG generated here; the page loads nothing
from the network.

Modules: ``_data`` reads the run folder, ``_svg`` holds drawing primitives,
``_charts`` draws, ``_tables`` and ``_failures`` tabulate, ``_viewer`` shows the
answers, ``_page`` assembles the page.
"""

from __future__ import annotations

from pathlib import Path

from forge._util.files import atomic_write_text
from forge.report.html._data import Incumbent, RunReport, ZoneTask, load_report
from forge.report.html._page import render_page
from forge.secrets.masking import redact

__all__ = ["Incumbent", "RunReport", "ZoneTask", "load_report", "render_html", "write_html"]


def render_html(folder: Path) -> str:
    """The report page of the run in ``folder``; raises ``JournalError`` on a bad run."""
    return render_page(load_report(folder))


def write_html(folder: Path, out: Path | None = None) -> Path:
    """Write the report of the run in ``folder`` to ``out`` (default
    ``<folder>/report.html``), all or nothing; returns the path written."""
    target = out if out is not None else folder / "report.html"
    atomic_write_text(target, redact(render_html(folder)))
    return target
