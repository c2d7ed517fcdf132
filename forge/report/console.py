"""Console tables for the CLI. Only the CLI imports rich; the library logs."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from forge._text import printable
from forge.config.registry import Registry
from forge.journal.records import SplitDelta
from forge.journal.review import UNFINISHED, RunSummary
from forge.results.compare import ResultDiff
from forge.results.model import EvalResult
from forge.stats.paired import mean_interval

__all__ = ["STATUS_STYLE", "diff_table", "registry_table", "run_lines", "run_problems",
           "runs_table", "summary_table", "task_table", "utc_text"]

#: How a run's status is shown, in the list of runs and in one run's header.
STATUS_STYLE = {"finished": "", UNFINISHED: "yellow", "damaged": "bold red"}


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None) -> str:
    return "—" if x is None else f"{x:.4g}"


def summary_table(result: EvalResult) -> Table:
    table = Table(title=f"{result.bench} · {result.split} · k={result.k} · seed={result.seed}",
                  show_header=False, title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value")
    for label, text in _headline_rows(result):
        table.add_row(label, text)
    for label, text in _attempt_rows(result):
        table.add_row(label, text)
    for name, value in result.metrics.items():  # a harness names its own metrics
        table.add_row(Text(printable(name)), _num(value))
    table.add_row("config", result.config_fingerprint[:16])
    table.add_row("env", (result.env_fingerprint or "none")[:16])
    return table


def _headline_rows(result: EvalResult) -> list[tuple[str, str]]:
    """The pass rate and the mean score, each with its interval over tasks."""
    rates = [t.pass_rate for t in result.tasks if t.pass_rate is not None]
    means = [t.mean_score for t in result.tasks if t.mean_score is not None]
    rows = []
    for label, values, point in (("pass rate", rates, result.pass_rate),
                                 ("mean score", means, result.mean_score)):
        ci = mean_interval(values)
        text = _pct(point) if label == "pass rate" else _num(point)
        if ci is not None and ci.n > 1:
            fmt = _pct if label == "pass rate" else _num
            text += f"  (95% CI {fmt(max(ci.low, 0.0))} – {fmt(min(ci.high, 1.0))}, {ci.n} tasks)"
        rows.append((label, text))
    return rows


def _attempt_rows(result: EvalResult) -> list[tuple[str, str]]:
    """Counts of tasks and attempts, why attempts stopped, and the learning zone."""
    n_attempts = result.n_attempts
    rows = [("tasks", str(len(result.tasks))),
            ("attempts", f"{n_attempts}: {result.n_scored} scored, "
                         f"{n_attempts - result.n_scored} unscored")]
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(result.stop_reasons().items()))
    rows.append(("stop reasons", reasons or "—"))
    scorer_failures = sum(1 for a in result.attempts
                          if a.stop_reason == "completed" and a.score is None)
    if scorer_failures:
        rows.append(("scorer failures", str(scorer_failures)))
    lz = sum(1 for t in result.tasks if t.learning_zone)
    rows.append(("learning zone", f"{lz} tasks"))
    return rows


def task_table(result: EvalResult) -> Table:
    table = Table(title="per task", title_justify="left")
    for col in ("task", "tags", "pass rate", "mean score", "scored", "unscored", "zone",
                "first error"):
        table.add_column(col)
    for t in result.tasks:
        error = next((a.error for a in t.attempts if a.error), None) or ""
        # Harness and task-file text: Text cells (no markup), every control escaped.
        table.add_row(Text(printable(t.task_id)), Text(printable(",".join(t.tags))),
                      _pct(t.pass_rate), _num(t.mean_score), str(t.n_scored),
                      str(t.n_unscored), "●" if t.learning_zone else "",
                      Text(printable(error)[:60]))
    return table


def diff_table(diff: ResultDiff, names: tuple[str, str]) -> Table:
    table = Table(title=f"{names[1]} vs {names[0]} (paired by seed)", title_justify="left")
    for col in ("task", "pairs", f"score {names[0]}", f"score {names[1]}", "Δ score",
                "Δ pass"):
        table.add_column(col)
    for t in sorted(diff.tasks, key=lambda t: t.delta or 0.0):
        delta = "—" if t.delta is None else f"{t.delta:+.3f}"
        pdelta = "—" if t.pass_delta is None else f"{100 * t.pass_delta:+.1f} pts"
        style = "red" if (t.delta or 0) < 0 else "green" if (t.delta or 0) > 0 else None
        table.add_row(Text(printable(t.task_id)), str(t.n_pairs), _num(t.score_a),
                      _num(t.score_b), delta, pdelta, style=style)
    return table


def registry_table(registry: Registry) -> Table:
    table = Table(title=f"registry {registry.name} · digest {registry.digest[:12]}",
                  title_justify="left")
    for col in ("setting", "type", "bounds", "default", "description"):
        table.add_column(col)
    for name, s in registry.settings.items():
        table.add_row(name, s.type, s.bounds_text(), repr(s.default), s.description)
    return table


# -- forge journal list --------------------------------------------------------------


#: The columns of ``forge journal list``; the cells of a row are made by _run_cells.
_RUN_HEADERS = ("run", "bench, started (UTC)", "steps (prom.)", "stop", "test Δ (95% CI)")
# Which columns get the width left over first: the test interval on one line, then the
# start time beside the bench, then the rest.
_SPARE_ORDER = (4, 1, 3, 2)


def runs_table(runs: list[RunSummary], title: str, width: int) -> Table | None:
    """One row per run: id, bench and start time, steps (promotions), stop reason, test Δ;
    or None when ``width`` columns cannot hold it.

    The run id never wraps (it is what ``journal show``, ``report`` and ``--resume``
    take, so it must copy whole) and no other word is cut in two: each column is at
    least as wide as its longest word. rich would narrow columns below that, and crop
    a table that is still too wide, so the widths are set here: the minimum each, then
    what is left, in :data:`_SPARE_ORDER`. A damaged run's row says only "damaged": the
    problem is a whole sentence naming a file, which :func:`run_problems` prints
    under the table.
    """
    rows = [_run_cells(run) for run in runs]
    lowest, highest = _width_bounds(rows)
    room = width - _overhead(title)
    if sum(lowest) > room:
        return None
    widths = list(lowest)
    for i in _SPARE_ORDER:
        widths[i] += min(highest[i] - widths[i], room - sum(widths))
    table = _runs_frame(title, widths)
    for row in rows:
        table.add_row(*row)
    return table


def _width_bounds(rows: list[tuple[Text, ...]]) -> tuple[list[int], list[int]]:
    """Each column's narrowest width that cuts no word (the run id: no wrap at all) and
    its widest line, headers included."""
    columns = [[header, *(row[i].plain for row in rows)] for i, header in enumerate(_RUN_HEADERS)]
    lowest = [max(len(w) for text in col for w in text.split()) for col in columns]
    lowest[0] = max(len(text) for text in columns[0])
    highest = [max(len(line) for text in col for line in text.split("\n")) for col in columns]
    return lowest, highest


def _runs_frame(title: str, widths: list[int]) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)
    for i, (header, w) in enumerate(zip(_RUN_HEADERS, widths, strict=True)):
        table.add_column(header, width=w, no_wrap=i == 0, justify="right" if i == 2 else "left")
    return table


def _overhead(title: str) -> int:
    """Columns a runs table spends on padding and rules, measured on an empty one."""
    ones = [1] * len(_RUN_HEADERS)
    console = Console(file=io.StringIO(), width=10_000, color_system=None)
    return console.measure(_runs_frame(title, ones)).maximum - sum(ones)


def _run_cells(run: RunSummary) -> tuple[Text, ...]:
    stop = _stop(run)
    # "running/interrupted" would be the longest word of a row: on two lines, the
    # column can be as narrow as "local_optimum".
    stop.plain = stop.plain.replace("/", "/\n", 1)
    return (Text(run.run_id), Text(f"{run.bench or '—'}\n{_minute(run.created_at)}"),
            Text(f"{_count(run.steps)} ({_count(run.promotions)})"), stop, _test(run.test))


def run_lines(runs: list[RunSummary]) -> list[Text]:
    """The runs one block each, for a console too narrow for :func:`runs_table`: the run
    id alone on its line (printed with ``soft_wrap``, so never broken by forge), then
    what the table's row would say."""
    lines: list[Text] = []
    for run in runs:
        lines.append(Text(run.run_id, style="bold"))
        detail = Text("  ")
        detail.append(f"{run.bench or '—'} · started {_minute(run.created_at)} · "
                      f"{_count(run.steps)} steps, {_count(run.promotions)} promoted · ")
        detail.append_text(_stop(run))
        if run.test is not None and run.test.delta is not None:
            effect, interval = _test(run.test).plain.split("\n")
            detail.append(f" · test Δ {effect} ({interval})")
        lines.append(detail)
    return lines


def run_problems(runs: list[RunSummary]) -> list[Text]:
    """One line per damaged run: its id and what is wrong with it."""
    return [Text(f"{run.run_id}: {run.problem}", style=STATUS_STYLE["damaged"])
            for run in runs if run.problem]


def utc_text(at: datetime | None, *, seconds: bool = True) -> str:
    """A time in UTC, as journals write it, so two people see the same text."""
    if at is None:
        return "—"
    if at.tzinfo is not None:
        at = at.astimezone(UTC)
    return at.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M") + "Z"


def _minute(at: datetime | None) -> str:
    return utc_text(at, seconds=False)


def _count(n: int | None) -> str:
    return "—" if n is None else str(n)


def _stop(run: RunSummary) -> Text:
    if run.status == "finished":
        return Text(run.stop_reason or "—")
    # The stop reason is known once the stop record is written, even if the run was
    # then killed while the test split was being evaluated.
    text = run.status + (f" (stopped: {run.stop_reason})" if run.stop_reason else "")
    return Text(text, style=STATUS_STYLE.get(run.status, ""))


def _test(test: SplitDelta | None) -> Text:
    if test is None or test.delta is None:
        return Text("—")
    low = "—" if test.ci_low is None else f"{test.ci_low:+.3f}"
    high = "—" if test.ci_high is None else f"{test.ci_high:+.3f}"
    return Text(f"{test.delta:+.3f}\n{low} .. {high}")
