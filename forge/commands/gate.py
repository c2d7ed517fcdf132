"""``forge gate``: the CI gates on a saved result (see :mod:`forge.ci.baseline`), rendered
by :mod:`forge.report.ci`.

Exit 0 when every gate passes, 1 when one fails (a current result with nothing
scored is a failed gate), 2 on bad input: a missing or
unreadable result, another ``format_version``, an option out of range, a
baseline from another environment, or one with no task scored in both (one line,
no traceback).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from forge.ci.baseline import DEFAULT_MAX_UNSCORED_RISE, CheckOptions, run_checks
from forge.commands.common import write_for_option
from forge.errors import OptionError
from forge.report.ci import append_step_summary, markdown_summary, write_junit
from forge.results.model import load_result

__all__ = ["register"]


def gate_command(
    current: Annotated[Path, typer.Argument(metavar="CURRENT.json",
                                            help="the result to gate (forge eval --save)")],
    baseline: Annotated[Path | None, typer.Option(
        "--baseline", metavar="B.json",
        help="a result of the same environment; turns on the regression gate")] = None,
    min_pass_rate: Annotated[float, typer.Option(
        "--min-pass-rate", metavar="X",
        help="aggregate gate: overall pass rate must be at least X (0..1)")] = 0.0,
    task_floor: Annotated[float | None, typer.Option(
        "--task-floor", metavar="X", help="every task's pass rate must be at least X")] = None,
    max_drop: Annotated[float | None, typer.Option(
        "--max-drop", metavar="X",
        help="regression gate: largest allowed per-task pass-rate drop (default 0)")] = None,
    max_unscored: Annotated[int | None, typer.Option(
        "--max-unscored", metavar="N", help="at most N unscored attempts in all")] = None,
    max_unscored_rise: Annotated[float | None, typer.Option(
        "--max-unscored-rise", metavar="X",
        help="unscored gate: how far the share of unscored attempts may rise over the "
             "baseline's before a rise beyond chance fails (0..1, default 0.02)")] = None,
    alpha: Annotated[float | None, typer.Option(
        "--alpha", metavar="A",
        help="error level of the unscored share's test, and of the regression gate for "
             "tasks with no seed in common with the baseline (default 0.05)")] = None,
    junit: Annotated[Path | None, typer.Option(
        "--junit", metavar="F", help="also write JUnit XML to F")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="print the report as JSON instead of Markdown")] = False,
) -> None:
    """Gate a saved result for CI: aggregate, unscored, per-task floor, baseline regression.

    With a baseline, also fails when the share of unscored attempts (errors,
    timeouts) rose beyond --max-unscored-rise and beyond chance. Prints a Markdown
    summary (also appended to $GITHUB_STEP_SUMMARY when set). Exit 0 pass, 1 a gate
    failed, 2 bad input or incomparable results (including a baseline with no task
    scored in both).
    """
    options = _gate_options(baseline=baseline, min_pass_rate=min_pass_rate,
                            task_floor=task_floor, max_drop=max_drop,
                            max_unscored=max_unscored, alpha=alpha,
                            max_unscored_rise=max_unscored_rise)
    if junit is not None and junit.is_dir():  # found before any output, not after
        raise OptionError(f"{junit} is a folder; expected a file path", option="--junit")
    result = load_result(current)
    base = load_result(baseline) if baseline is not None else None
    report = run_checks(result, options=options, baseline=base, current_name=str(current),
                       baseline_name=str(baseline) if baseline is not None else "baseline")
    if junit is not None:
        write_for_option("--junit", junit, write_junit, report, junit)
    markdown = markdown_summary(report)
    if as_json:
        _print_json(report.as_json())
    else:
        sys.stdout.write(markdown)
    _append_summary(markdown)
    if not report.passed:
        raise typer.Exit(report.exit_code)


def _gate_options(*, baseline: Path | None, min_pass_rate: float, task_floor: float | None,
                  max_drop: float | None, max_unscored: int | None,
                  alpha: float | None, max_unscored_rise: float | None) -> CheckOptions:
    """The gates' options; an option of a comparison without a baseline is refused."""
    for option, value in (("--max-drop", max_drop), ("--alpha", alpha),
                          ("--max-unscored-rise", max_unscored_rise)):
        if value is not None and baseline is None:
            # Silently ignoring it would let a CI job believe it guards against something.
            raise OptionError("needs --baseline B.json to compare against", option=option)
    return CheckOptions(min_pass_rate=min_pass_rate, task_floor=task_floor,
                       max_drop=0.0 if max_drop is None else max_drop,
                       max_unscored=max_unscored, alpha=0.05 if alpha is None else alpha,
                       max_unscored_rise=(DEFAULT_MAX_UNSCORED_RISE if max_unscored_rise is None
                                          else max_unscored_rise))


def _append_summary(markdown: str) -> None:
    try:
        append_step_summary(markdown)
    except OSError as exc:
        # The verdict is already printed; a summary file CI cannot offer must not turn a
        # passing gate into a failure, so this is a warning and the exit code stands.
        typer.echo(f"forge: warning: cannot append to $GITHUB_STEP_SUMMARY: "
                   f"{exc.strerror or exc}", err=True)


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False) + "\n")


def register(app: typer.Typer) -> None:
    """Add ``forge gate`` to the app."""
    app.command("gate")(gate_command)
