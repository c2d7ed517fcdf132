"""Console views of one search run for ``forge journal show`` (the list of runs is in
:mod:`forge.report.console`).

Everything read from a journal (reasons, gate texts, setting values) goes into
:class:`rich.text.Text` cells, never into markup strings: a proposer's reason may
well contain ``[brackets]`` that rich would otherwise read as styles; and through
:func:`forge._util.show.printable` (:func:`_t`), so that no control character, escape
sequence or bidi override a harness or a model wrote reaches the terminal.
"""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from forge._text import printable
from forge.journal import RunOptions
from forge.journal.records import CandidateRecord, ProposalInvalidRecord
from forge.journal.review import (
    UNFINISHED,
    Delta,
    RunRecords,
    aux_changes,
    dev_delta,
    failing_gates,
    val_delta,
)
from forge.report.console import STATUS_STYLE, utc_text
from forge.report.failures import compared_tasks_text, left_out_lines

__all__ = ["run_footer", "run_header", "steps_table"]

VERDICT_STYLE = {"promoted": "bold green", "rejected": "red", "skipped": "yellow",
                 "invalid": "magenta"}


def _t(text: str, style: str = "") -> Text:
    """A cell of journal text, every unprintable character escaped."""
    return Text(printable(text), style=style)


def _f(x: float | None, fmt: str = "+.3f") -> str:
    return "—" if x is None else format(x, fmt)


def _values(values: dict[str, Any]) -> str:
    return " ".join(f"{k}={v!r}" for k, v in values.items()) or "—"


def _options(options: RunOptions) -> str:
    """``run.json`` options on one line; an unset budget and no first moves say nothing."""
    parts = []
    for key, value in options.model_dump(mode="json").items():
        if key == "budget":
            set_ = options.budget.model_dump(exclude_none=True)
            parts.append("budget " + (" ".join(f"{k}={v}" for k, v in set_.items())
                                      or "unlimited"))
        elif key == "first_moves":
            if options.first_moves:
                parts.append(f"first_moves={len(options.first_moves)}")
        else:
            parts.append(f"{key}={value}")
    return " · ".join(parts) or "—"


def run_header(run: RunRecords) -> Table:
    """What was searched, from where, how, and how it ended (test result with its CI)."""
    info = run.info
    table = Table(title=escape(printable(f"run {info.run_id} · {info.bench}")),
                  show_header=False, title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("bench", _t(f"{info.bench} ({info.bench_path})"))
    table.add_row("started", utc_text(info.created_at))
    table.add_row("seed", str(info.seed))
    table.add_row("start config", _t(f"{_values(info.start_config)} · "
                                     f"{info.start_fingerprint[:12]}"))
    table.add_row("options", _t(_options(info.options)))
    if run.start is not None:
        table.add_row("start scores", f"dev {_f(run.start.dev_mean, '.3f')} · "
                                      f"val {_f(run.start.val_mean, '.3f')}")
    if run.stop is not None:
        stop = _t(f"{run.stop.reason} after {run.stop.step} steps: {run.stop.text}")
        failure = run.stop.failure
        if failure is not None:
            stop.append("\nfirst failure: ", style="bold red")
            stop.append_text(_t(f"task {failure.task_id} attempt {failure.attempt}: "
                                f"{failure.stop}" + (f": {failure.error}" if failure.error
                                                     else "")))
    elif run.stop_reason is not None:
        stop = _t(run.stop_reason)
    else:
        stop = Text(f"{UNFINISHED}: no stop record yet", style=STATUS_STYLE[UNFINISHED])
    table.add_row("stop", stop)
    table.add_row("test", _test_row(run))
    return table


def _test_row(run: RunRecords) -> Text:
    t = run.test
    if t is None:
        why = ("not run" if run.finished else
               "not yet: the test split is evaluated once, after the search stops")
        return Text(why, style="dim")
    text = Text(f"{_f(t.start, '.3f')} → {_f(t.final, '.3f')}, Δ {_f(t.delta)} "
                f"({t.confidence:.0%} CI {_f(t.ci_low)} .. {_f(t.ci_high)}, "
                f"{compared_tasks_text(t)}, two-sided p={t.p_value_two_sided:.3g})")
    for i, line in enumerate(left_out_lines(t)):  # the second: tasks left out
        text.append("\n" + printable(line), style="bold red" if i else "")
    for gate in t.aux:
        # Version 2 grades the check (within / unclear / beyond); version 1 passed or not.
        status = str(gate.details.get("status", "within" if gate.passed else "beyond"))
        style = {"within": "green", "unclear": "yellow"}.get(status, "bold red")
        word = "BEYOND" if status == "beyond" else status
        text.append(f"\n{word} tolerance vs start: ", style=style)
        text.append(printable(gate.reason))
    return text


def _delta_cell(d: Delta | None) -> Text:
    """The effect over its lower bound, two short lines so that the column stays narrow."""
    if d is None:
        return Text("—")
    cell = Text(f"{d.effect:+.3f}\nlb {_f(d.ci_low)}")
    if d.stage == "screen":
        # A screening effect is selection on reused seeds, not the tested one: marked.
        cell.append("\nscreen", style="dim italic")
    return cell


def _val_cell(record: CandidateRecord) -> Text:
    d = val_delta(record)
    if d is not None:
        return _delta_cell(d)
    if "val" in record.gates_not_run:
        return Text("not run", style="dim")  # a dev-side gate failed first
    return Text("—")


def _aux_cell(record: CandidateRecord) -> Text:
    lines = []
    for change in aux_changes(record):
        rel = change.relative
        shown = f"{100 * rel:+.1f}%" if rel is not None else f"{change.change:+.4g}"
        lines.append(f"{change.metric} {shown}")
    return Text("\n".join(lines) or "—")


def _move_cell(record: CandidateRecord) -> Text:
    move = record.move
    cell = _t(f"{move.target} {move.before!r} → {move.after!r}", style="bold")
    cell.append("\n" + printable(f"{record.proposer}: {record.reason}"))
    return cell


def _verdict_cell(record: CandidateRecord) -> Text:
    """The verdict, then each failing gate with its reason, then the search's ``why``."""
    cell = Text(record.verdict, style=VERDICT_STYLE[record.verdict])
    for gate in failing_gates(record):
        cell.append("\n")
        cell.append(printable(gate.name), style="bold red")
        cell.append(f": {printable(gate.reason)}")
    if record.deferred:
        cell.append(f"\ndeferred: {printable(record.deferred)}", style="dim")
    if record.why:
        cell.append(f"\n{printable(record.why)}", style="dim")
    if record.verdict == "promoted":
        cell.append(f"\nall {len(record.gates)} gates passed", style="green")
    return cell


def _invalid_row(record: ProposalInvalidRecord) -> list[str | Text]:
    """A proposal the proposer refused (an LLM's unusable reply): its reply and why."""
    move = Text("no move", style="dim")
    move.append("\n" + printable(f"{record.proposer} replied: "
                                  + (repr(record.reply) if record.reply else "—")))
    verdict = Text("invalid", style=VERDICT_STYLE["invalid"])
    verdict.append(f"\n{printable(record.category)}: ", style="bold")
    verdict.append(printable(record.reason))
    return [str(record.step), move, Text("—"), Text("—"), Text("—"), verdict]


def steps_table(run: RunRecords) -> Table:
    """One row per candidate record: the move, who proposed it and why, dev and val
    deltas with their lower bounds, auxiliary changes, the verdict and what refused it.
    Invalid proposals get a row of their own, before their step's candidates (as in
    the journal)."""
    title = f"{len(run.candidates)} candidates over {run.steps} steps"
    if run.invalid:
        title += f", {len(run.invalid)} invalid proposals"
    table = Table(title=title, title_justify="left", show_lines=True)
    table.add_column("step", justify="right", no_wrap=True)
    table.add_column("move · proposer: reason", ratio=4, overflow="fold")
    table.add_column("dev Δ", no_wrap=True)
    table.add_column("val Δ", no_wrap=True)
    table.add_column("aux Δ", overflow="fold")
    table.add_column("verdict · failing gate: why", ratio=5, overflow="fold")

    # A stable sort by step keeps journal order: a step's refusals come before its moves.
    rows: list[CandidateRecord | ProposalInvalidRecord] = sorted(
        [*run.invalid, *run.candidates],
        key=lambda r: (r.step, isinstance(r, CandidateRecord)))
    for r in rows:
        if isinstance(r, ProposalInvalidRecord):
            table.add_row(*_invalid_row(r))
            continue
        table.add_row(str(r.step), _move_cell(r), _delta_cell(dev_delta(r)),
                      _val_cell(r), _aux_cell(r), _verdict_cell(r))
    return table


def run_footer(run: RunRecords) -> list[Text]:
    """The promotions chain, the rollouts spent and what racing saved, one line each."""
    lines = []
    chain = ", ".join(f"{p.target} {p.before!r} → {p.after!r} (step {p.step})"
                      for p in run.promotions)
    lines.append(Text("promoted: " + (chain or "nothing (the start config stands)")))
    used = run.rollouts_used
    spent = "—" if used is None else str(used)
    scope = " (test split included)" if run.finished else " so far"
    lines.append(Text(f"rollouts: {spent} used{scope if used is not None else ''}; "
                      f"{run.saved_by_racing} saved by racing"))
    if not run.finished:
        # Resume finds a run as <journals>/<folder name>: name both, for a copied folder too.
        lines.append(Text(f"unfinished: no end record; if the run was interrupted, "
                          f"`forge search --resume {run.folder.name} --journals "
                          f"{run.folder.parent}` continues it", style="yellow"))
    return lines
