"""The live view of a search: one line per decision as it is journaled, then a summary;
on a terminal, below them, what the search is doing now (:func:`live_progress`).

The view subscribes to the run's records (:meth:`LiveView.on_record`) and reads the rest
through what it declares here, not through the search: :class:`ProgressState`, the
panel's reading of a running search (:class:`forge.search.progress.SearchProgress` is
one), and :class:`Finished`, the end a summary shows
(:class:`forge.search.outcome.SearchOutcome` is one)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from forge._text import printable
from forge.journal.records import (
    AnyRecord,
    CandidateRecord,
    EndRecord,
    ProposalInvalidRecord,
    StartRecord,
    StopRecord,
    TestRecord,
)
from forge.report.failures import (
    compared_tasks_text,
    failure_lines,
    failure_status,
    left_out_lines,
)
from forge.report.power import power_lines
from forge.results.failures import FailureTally
from forge.stats.paired import Interval
from forge.stats.power import Power

__all__ = ["Drawn", "Finished", "LiveView", "ProgressState", "clock", "live_progress",
           "phrase_lines", "render_progress"]

_VERDICT_STYLE = {"promoted": "bold green", "rejected": "red", "skipped": "yellow"}
#: The start-to-final tolerance check on test, by its status (version 1: passed or not).
_TOLERANCE_MARK = {"within": "[green]within[/]", "unclear": "[yellow]unclear[/]",
                   "beyond": "[red]BEYOND[/]", "absent": "[dim]absent[/]"}


def _f(x: Any, fmt: str = "+.3f") -> str:
    return "—" if x is None else format(x, fmt)


def _safe(text: str) -> str:
    """Journal or harness text inside a markup line: escaped for the terminal
    (:func:`forge._util.show.printable`), then for rich's markup."""
    return escape(printable(text))


class Finished(Protocol):
    """What a summary reads of a finished search."""

    @property
    def end(self) -> EndRecord: ...

    @property
    def failures(self) -> FailureTally: ...

    @property
    def stop_reason(self) -> str: ...


class ProgressState(Protocol):
    """What the panel reads of a running search, written by the search's thread."""

    @property
    def phase(self) -> str: ...
    @property
    def step(self) -> int: ...
    @property
    def move(self) -> str | None: ...
    @property
    def index(self) -> int: ...
    @property
    def of(self) -> int: ...
    @property
    def extra(self) -> str | None: ...
    @property
    def dev_looks(self) -> int: ...
    @property
    def val_looks(self) -> int: ...
    @property
    def on_val(self) -> bool: ...
    @property
    def promotions(self) -> int: ...
    @property
    def incumbent(self) -> Interval | None: ...
    @property
    def ending(self) -> str | None: ...
    @property
    def stop_reason(self) -> str | None: ...
    @property
    def resume(self) -> str | None: ...
    @property
    def budget_rollouts(self) -> int | None: ...
    @property
    def test_rollouts(self) -> int: ...
    @property
    def failures(self) -> FailureTally | None: ...
    @property
    def elapsed_s(self) -> float: ...
    @property
    def spent(self) -> int: ...
    @property
    def rate(self) -> float | None: ...
    @property
    def rollouts_left(self) -> int | None: ...
    @property
    def eta_s(self) -> float | None: ...


class Drawn(ProgressState, Protocol):
    """A progress a view can draw as it changes: the hooks the search calls when it
    starts and ends running attempts, and when the phase, the move or a look changes."""

    on_begin: Callable[[], None] | None
    on_end: Callable[[], None] | None
    on_change: Callable[[], None] | None


_P = TypeVar("_P", bound=Drawn)


class LiveView:
    """Renders journal records on a console as the search writes them."""

    def __init__(self, console: Console) -> None:
        self.console = console
        #: Config fingerprint -> what it is (the start config, a candidate's move), for
        #: charging failures to the config that had them.
        self.names: dict[str, str] = {}

    def _line(self, text: str | Text) -> None:
        # One decision per line, never folded: people grep these.
        self.console.print(text, highlight=False, soft_wrap=True)

    def on_record(self, record: AnyRecord) -> None:
        if isinstance(record, StartRecord):
            self.names.setdefault(record.fingerprint, "start config")
            self._start(record)
        elif isinstance(record, CandidateRecord):
            self._candidate(record)
        elif isinstance(record, ProposalInvalidRecord):
            self._line(f"step {record.step:>2} " + _safe(
                f"[{record.proposer}] no move: {record.category}: {record.reason}")
                + "  [magenta]INVALID[/]")
        elif isinstance(record, StopRecord):
            where = ("" if record.reason == "start_failed"
                     else " before the test split")
            self._line(f"[bold]stopped[/] after {record.step} steps: {escape(record.text)} · "
                       f"{record.rollouts_total} rollouts{where}")
        elif isinstance(record, TestRecord):
            self._line(f"[bold]test[/] {_f(record.start, '.3f')} -> {_f(record.final, '.3f')}, "
                       f"Δ {_f(record.delta)} (95% CI {_f(record.ci_low)} .. "
                       f"{_f(record.ci_high)}) · {compared_tasks_text(record)}")
            for line in left_out_lines(record):  # task ids are the bench's text
                self._line("  " + _safe(line))
            for gate in record.aux:
                status = gate.details.get("status")
                mark = _TOLERANCE_MARK.get(str(status), "[green]within[/]" if gate.passed
                                           else "[red]BEYOND[/]")
                self._line(f"  start -> final on test, {mark}: " + _safe(gate.reason))

    def _start(self, r: StartRecord) -> None:
        """The start's mean on the first dev chunk, said to be on those tasks: the final
        table compares start and final on every task both ran, a mean of other tasks;
        then what the bench can detect."""
        if r.dev_tasks is None:  # a version-1 journal: the start's whole dev and val
            where = ""
        elif r.dev_split_tasks is None:
            where = f" ({r.dev_tasks} tasks)"
        else:
            where = f" on the first {r.dev_tasks} of {r.dev_split_tasks} dev tasks"
        val = "" if r.val_mean is None and r.dev_tasks is not None else (
            f" · val {_f(r.val_mean, '.3f')}")
        self._line(f"[bold]start[/] dev {_f(r.dev_mean, '.3f')}{where}{val} · "
                   f"config {r.fingerprint[:12]}")
        if r.power is not None and r.dev_mean is not None:  # not of a start scoring nothing
            power = Power.model_validate(r.power)
            for line in power_lines(power, tasks="dev+val tasks",
                                    source=f"the start's first {r.dev_tasks} dev tasks"):
                self._line(line)

    def _candidate(self, r: CandidateRecord) -> None:
        move = r.move
        style = _VERDICT_STYLE[r.verdict]
        kind = f" ({r.move_kind})" if r.move_kind == "jump" else ""
        if r.precision_round:
            kind += f" (precision round {r.precision_round})"
        if r.candidate is not None:
            self.names.setdefault(r.candidate, f"{move.target} {move.before!r} -> {move.after!r}")
        what = _safe(f"[{r.proposer}] {move.target}: {move.before!r} -> {move.after!r}{kind}")
        head = f"step {r.step:>2} {what}  [{style}]{r.verdict.upper()}[/]"
        if r.rollouts is not None:  # a move that ran nothing says nothing of it
            if r.looks:
                spent = (f"{r.rollouts} rollouts: {r.screening_rollouts} screening, "
                         f"{r.rollouts - (r.screening_rollouts or 0)} confirming over "
                         f"{r.looks} looks")
            elif r.saved_by_racing is not None:  # a version-1 journal
                spent = f"{r.rollouts} rollouts, {r.saved_by_racing} saved by racing"
            else:
                spent = f"{r.rollouts} rollouts screening {r.tasks_screened} tasks"
            head += f"  ({spent}, total {r.rollouts_total})"
        self._line(head)
        for gate in r.gates:
            mark = "[green]✓[/]" if gate.passed else "[red]✗[/]"
            self._line(f"        {mark} {_safe(gate.name)}: {_safe(gate.reason)}")
        if r.deferred:
            self._line(f"        · deferred: {_safe(r.deferred)}")
        if r.why:
            self._line(f"        · {_safe(r.why)}")

    def summary(self, outcome: Finished,
                next_steps: Sequence[tuple[str, str]] = ()) -> None:
        """The end of a search: start against final on each split compared, the
        promotions and the final config (none of it when the start failed: nothing was
        compared), why attempts failed if any did, and ``next_steps``: (command, what it
        does) for the run."""
        end = outcome.end
        if end.stop_reason != "start_failed":
            # The title above the table, not in it: a table's title wraps at the table's
            # width (about 55 columns), mid-phrase; here it breaks between phrases only.
            for line in phrase_lines(_title_phrases(end), self.console.width):
                self.console.print(Text(line, style="table.title"), soft_wrap=True)
            self.console.print(_result_table(end))
            # Why the start's dev mean differs from the first line's (its first chunk).
            self.console.print(Text("dev, val: the tasks both configs ran; test: every test "
                                    "task", style="table.caption"))
            if end.promotions:
                chain = ", ".join(f"{p.target} {p.before!r}->{p.after!r}"
                                  for p in end.promotions)
                self._line(f"promoted: {_safe(chain)}")
            else:
                self._line("promoted: nothing (the start config stands)")
            changed = {k: v for k, v in end.final_config.items()
                       if end.start_config.get(k) != v}
            self._line(f"final config: {_safe(str(changed or 'unchanged'))}")
        self.failures(outcome)
        if next_steps:
            self._line(Text(f"run {end.run_id}; next:", style="bold"))
            width = max(len(command) for command, _ in next_steps)
            for command, what in next_steps:
                self._line(Text(f"  {printable(command):<{width}}  # {what}"))

    def failures(self, outcome: Finished) -> None:
        """Why attempts failed, each reason charged to the configs that had it (nothing
        when every attempt was scored)."""
        # A start that failed has scores on nothing: the stop says so, not a warning.
        for line in failure_lines(outcome.failures, configs=self.names,
                                  warn=outcome.stop_reason != "start_failed"):
            self._line(line)


def _title_phrases(end: EndRecord) -> list[str]:
    return [f"search {end.run_id}", end.stop_reason, f"{end.steps} steps",
            f"{end.rollouts_used} rollouts"]


def phrase_lines(phrases: Sequence[str], width: int, separator: str = " · ") -> list[str]:
    """``phrases`` joined by ``separator`` in lines of at most ``width`` characters,
    broken between phrases only (a phrase longer than a line has a line of its own)."""
    lines: list[str] = []
    for phrase in phrases:
        if lines and len(lines[-1]) + len(separator) + len(phrase) <= width:
            lines[-1] += separator + phrase
        else:
            lines.append(phrase)
    return lines


def _result_table(end: EndRecord) -> Table:
    """Start against final on each split compared: on dev and val the tasks both ran,
    a mean of other tasks than the start line's first chunk."""
    table = Table()
    for col in ("split", "start", "final", "Δ", "95% CI"):
        table.add_column(col)
    for split, block in (("dev", end.dev), ("val", end.val), ("test", end.test)):
        if block.compared:
            table.add_row(split, _f(block.start, ".3f"), _f(block.final, ".3f"),
                          _f(block.delta), f"{_f(block.ci_low)} .. {_f(block.ci_high)}")
    return table


# -- what the search is doing now ----------------------------------------------------------

def clock(seconds: float | None) -> str:
    """``h:mm:ss`` (``—`` when unknown)."""
    if seconds is None:
        return "—"
    whole = max(0, round(seconds))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


#: How the panel names a move that is not among its step's proposals.
_EXTRA = {"expansion": "an expansion", "deferred move": "a deferred move",
          "further move": "a further move"}


def _which(p: ProgressState) -> str:
    """``move M of N`` (M never past N), or what a move beyond the step's proposals is."""
    if p.index:
        return f"move {p.index} of {p.of}"
    return _EXTRA.get(p.extra or "", "a move")


def _phase(p: ProgressState) -> str:
    move = "" if p.move is None else f": {p.move}"
    if p.phase == "starting":
        return "opening the bench's executor"
    if p.phase == "start":
        return "start evaluation: the start config's first dev chunk"
    if p.phase == "screening":
        return f"step {p.step} · screening {_which(p)}{move}"
    if p.phase == "confirming":
        looks = (f"val look {p.val_looks} (dev {p.dev_looks})" if p.on_val
                 else f"dev look {p.dev_looks}")
        return f"step {p.step} · confirming {_which(p)}{move} · {looks}"
    if p.phase == "test":
        return f"test split: start and final config, once, {p.test_rollouts:,} rollouts"
    if p.ending == "interrupted":
        return "interrupted" + (f"; resume with: {p.resume}" if p.resume else "")
    if p.ending == "failed":
        return "stopped by an error (below)"
    if p.stop_reason == "start_failed":
        return "stopped: every attempt of the start config's first evaluation failed"
    return "finished"


def render_progress(p: ProgressState) -> RenderableType:
    """What the search does now, four lines: phase; rollouts of the budget; the
    incumbent's dev score with its 95% interval; elapsed and ETA; and, once an attempt
    has failed, a fifth before the last: the share unscored and the most frequent
    reason, red above :data:`forge.results.failures.FAILURE_WARN_RATE`. The ETA is the
    rollouts left (the budget's rest plus the test split's) over the pace so far
    (attempts run per second since the start): an upper bound when the search stops
    sooner on patience, max_steps or no move left."""
    spent = p.spent
    lines: list[RenderableType] = [Text(printable(_phase(p)), style="bold")]
    budget = p.budget_rollouts
    if budget is not None:
        bar = Table.grid(padding=(0, 1))
        bar.add_column(no_wrap=True)
        bar.add_column(width=24)
        bar.add_row(f"rollouts {spent:,} of {budget:,} ({min(spent / budget, 9.99):.0%})",
                    ProgressBar(total=budget, completed=min(spent, budget), width=24))
        lines.append(bar)
    else:
        lines.append(Text(f"rollouts {spent:,} (no rollout budget)"))
    inc = p.incumbent
    if inc is not None:
        shown = (f" ± {inc.half_width:.3f}" if inc.n > 1 and math.isfinite(inc.half_width)
                 else "")
        lines.append(Text(f"incumbent dev {inc.mean:.3f}{shown} (95% CI, {inc.n} tasks) · "
                          f"{p.promotions} promoted"))
    failing = failure_status(p.failures)
    if failing is not None:
        lines.append(failing)
    rate = p.rate
    if p.phase == "done":
        eta = {"interrupted": "interrupted", "failed": "stopped"}.get(p.ending or "", "done")
    elif p.eta_s is None:
        eta = "ETA — (no rollout budget)" if budget is None else "ETA — (no pace yet)"
    else:
        assert rate is not None  # an ETA needs a pace
        # Only the test split's length is known for sure: before it, an upper bound.
        bound = "ETA" if p.phase == "test" else "ETA ≤"
        eta = (f"{bound} {clock(p.eta_s)}: {p.rollouts_left or 0:,} rollouts left "
               f"(with test) at {rate:,.0f}/s")
    lines.append(Text(f"elapsed {clock(p.elapsed_s)} · {eta}"))
    return Group(*lines)


def live_progress(console: Console, progress: _P) -> _P | None:
    """``progress`` (a fresh one), drawing itself on ``console`` below the decision
    lines while the search runs (a rich ``Live``, redrawn four times a second; the last
    frame stays); None when ``console`` is not a terminal: a log or a pipe gets the
    lines only."""
    if not console.is_terminal:
        return None
    live = Live(_Renderable(progress), console=console, refresh_per_second=4,
                transient=False, redirect_stdout=False, redirect_stderr=False)
    progress.on_begin, progress.on_end = live.start, live.stop
    progress.on_change = live.refresh
    return progress


class _Renderable:
    """Rendered afresh at each refresh: the panel of the progress as it is now."""

    def __init__(self, progress: ProgressState) -> None:
        self.progress = progress

    def __rich__(self) -> RenderableType:
        return render_progress(self.progress)
