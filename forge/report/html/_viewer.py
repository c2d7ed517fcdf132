"""The report's viewer of what the agent did: per task, the start config's answers beside
the final config's, each with its score or the reason it went unscored.

Read from the attempt store in the report's one pass over it (:meth:`ViewerData.add`):
the start and the final config's attempts on the streams whose seeds both share (the
test split's, then dev's and val's screening seeds), so that attempt *i* of the two
configs is the same seed, side by side. Per task the page shows a bounded sample,
:data:`SAMPLE` attempts: first those whose outcome differs between the two configs
(passed, failed, unscored), then the lowest indices; each answer cut to
:data:`ANSWER_CHARS` characters after its secrets are redacted
(:func:`forge.secrets.masking.clip`), every control character shown as its escape
(:func:`forge._util.show.printable`) and the whole HTML-escaped: whatever a harness wrote
is text on this page, never markup. A task *changed* when its pass rate or its count
of unscored attempts differs between the two; a checkbox (the page's small script)
shows those alone. At most :data:`MAX_TASKS` tasks a split are shown, the changed
first.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from forge._text import printable
from forge._util.show import preview
from forge.journal.store import StoredAttempt
from forge.report.html._svg import esc
from forge.results.failures import unscored_label
from forge.results.model import AttemptResult
from forge.secrets.masking import clip

__all__ = ["ANSWER_CHARS", "MAX_TASKS", "SAMPLE", "Answer", "TaskView", "ViewerData",
           "viewer_section"]

#: Attempts shown a task, each config.
SAMPLE = 3
#: Characters of an answer (or an error message) shown.
ANSWER_CHARS = 600
#: Tasks shown a split, the changed ones first.
MAX_TASKS = 300
#: The streams shown, in order: each split's seeds that every config shares.
STREAMS = ("test", "dev", "val")


@dataclass(frozen=True)
class Answer:
    """One attempt as the viewer shows it (its text already redacted and cut)."""

    attempt: int
    #: ``passed``, ``failed`` or ``unscored``.
    outcome: str
    score: float | None
    #: Why it went unscored (:func:`forge.results.failures.unscored_label`); None when scored.
    reason: str | None
    text: str


@dataclass
class TaskView:
    """One task of one stream: each config's answers by attempt index."""

    task_id: str
    answers: dict[str, dict[int, Answer]] = field(default_factory=dict)

    def counts(self, config: str) -> tuple[int, int, int]:
        """(passed, scored, unscored) of ``config``'s attempts here."""
        mine = self.answers.get(config, {}).values()
        scored = [a for a in mine if a.outcome != "unscored"]
        return (sum(a.outcome == "passed" for a in scored), len(scored),
                len(mine) - len(scored))

    def pass_rate(self, config: str) -> float | None:
        passed, scored, _ = self.counts(config)
        return passed / scored if scored else None

    def changed(self, start: str, final: str) -> bool:
        """The pass rate or the count of unscored attempts differs between the two."""
        return (self.pass_rate(start) != self.pass_rate(final)
                or self.counts(start)[2] != self.counts(final)[2])

    def sample(self, start: str, final: str) -> list[int]:
        """The attempt indices shown: those whose outcome differs first, then the lowest,
        at most :data:`SAMPLE`."""
        a, b = self.answers.get(start, {}), self.answers.get(final, {})
        indices = sorted(set(a) | set(b))

        def differs(i: int) -> bool:
            return (i in a) != (i in b) or a[i].outcome != b[i].outcome

        return sorted(sorted(indices, key=lambda i: (not differs(i), i))[:SAMPLE])


class ViewerData:
    """The start's and the final config's attempts, by stream and task (see the module)."""

    def __init__(self, start: str, final: str, limits: dict[str, int]) -> None:
        self.start = start
        self.final = final
        #: Per stream, the attempt indices read (below it): k, or the test split's.
        self.limits = limits
        self.streams: dict[str, dict[str, TaskView]] = defaultdict(dict)

    def add(self, row: StoredAttempt) -> None:
        a = row.result
        limit = self.limits.get(row.stream, 0)
        if row.config not in (self.start, self.final) or a.attempt >= limit:
            return
        tasks = self.streams[row.stream]
        view = tasks.get(a.task_id) or tasks.setdefault(a.task_id, TaskView(a.task_id))
        # Later lines win, as in the store itself.
        view.answers.setdefault(row.config, {})[a.attempt] = _answer(a)

    def shown_streams(self) -> list[str]:
        """The streams with attempts of both configs (of the one, when they are the same),
        in :data:`STREAMS` order."""
        configs = {self.start, self.final}
        return [s for s in STREAMS if s in self.streams and all(
            any(c in t.answers for t in self.streams[s].values()) for c in configs)]

    def tasks(self, stream: str) -> list[TaskView]:
        """The tasks of ``stream``, the changed first (the largest change of pass rate
        first), then by id."""
        def order(t: TaskView) -> tuple[bool, float, str]:
            changed = t.changed(self.start, self.final)
            a, b = t.pass_rate(self.start), t.pass_rate(self.final)
            size = abs(a - b) if a is not None and b is not None else 1.0
            return (not changed, -size if changed else 0.0, t.task_id)

        return sorted(self.streams.get(stream, {}).values(), key=order)


def _answer(a: AttemptResult) -> Answer:
    reason = unscored_label(a)
    if reason is not None:
        outcome, text = "unscored", a.error or "(no message)"
    else:
        outcome = "passed" if a.passed else "failed"
        value = None if a.output is None else a.output.output
        text = value if isinstance(value, str) else preview(value, ANSWER_CHARS + 1)
    score = a.score.value if a.score is not None and a.scored else None
    return Answer(attempt=a.attempt, outcome=outcome, score=score, reason=reason,
                  text=_shown(text))


def _shown(text: str) -> str:
    """Redacted, then cut (:func:`forge.secrets.masking.clip`), every control character but the
    line breaks shown as its escape."""
    cut = clip(text, ANSWER_CHARS)
    return "\n".join(printable(line) for line in cut.split("\n"))


# -- the page's section ---------------------------------------------------------------------

_WHERE = {"test": "the test split (opened once, at the end)",
          "dev": "dev, on the screening seeds every config shares",
          "val": "val, on the seeds every config shares"}


def viewer_section(data: ViewerData | None, missing: str | None) -> str:
    """The section's HTML: a filter and, per stream shown, a table of tasks; a line
    saying why there is nothing to show otherwise."""
    if data is None or missing is not None:
        return f'<p class="caption" id="viewer-none">Nothing to show: {esc(missing)}.</p>'
    streams = data.shown_streams()
    if not streams:
        return ('<p class="caption" id="viewer-none">Nothing to show: the attempt store '
                "holds no attempt of the start or the final config on shared seeds.</p>")
    same = data.start == data.final
    configs = [data.start] if same else [data.start, data.final]
    total = sum(min(len(data.streams[s]), MAX_TASKS) for s in streams)
    changed = sum(t.changed(data.start, data.final) for s in streams
                  for t in data.tasks(s)[:MAX_TASKS])
    lead = ("No promotion: the final config is the start config, shown alone."
            if same else
            f"The start config's answers beside the final config's, task by task, on the "
            f"same seeds (attempt i of each is the same seed): {SAMPLE} attempts a task at "
            "most, those whose outcome differs first. A task <b>changed</b> when its pass "
            "rate or its count of unscored attempts differs between the two.")
    out = [f'<p class="caption">{lead} Answers are cut to {ANSWER_CHARS} characters, '
           "secrets redacted.</p>",
           '<p class="viewer-filter"><label><input type="checkbox" id="viewer-changed"> '
           f"show only the tasks that changed</label> · <span id=\"viewer-count\">"
           f"{total} of {total} tasks shown</span> ({changed} changed)</p>"]
    for stream in streams:
        out.append(_stream_table(data, stream, configs))
    return "".join(out)


def _stream_table(data: ViewerData, stream: str, configs: list[str]) -> str:
    tasks = data.tasks(stream)
    names = ["start", "final"] if len(configs) == 2 else ["start = final"]
    head = "".join(f"<th>{n} <code>{esc(c[:12])}</code></th>"
                   for n, c in zip(names, configs, strict=True))
    body = [_task_rows(data, t, configs) for t in tasks[:MAX_TASKS]]
    more = len(tasks) - MAX_TASKS
    note = (f'<p class="caption">{more} more tasks not shown (unchanged or changed least).'
            "</p>" if more > 0 else "")
    return (f"<h3>{esc(stream)}: {esc(_WHERE.get(stream, stream))}</h3>"
            f'<table class="viewer" id="viewer-{esc(stream)}"><thead><tr><th>task · attempt'
            f'</th>{head}</tr></thead>{"".join(body)}</table>{note}')


def _task_rows(data: ViewerData, task: TaskView, configs: list[str]) -> str:
    changed = task.changed(data.start, data.final)
    cells = "".join(f'<td class="summary">{esc(_summary(task, c))}</td>' for c in configs)
    rows = [f'<tr class="task-head"><td><code>{esc(printable(task.task_id))}</code>'
            f'{" <b>changed</b>" if changed else ""}</td>{cells}</tr>']
    for i in task.sample(data.start, data.final):
        answers = "".join(_answer_cell(task.answers.get(c, {}).get(i)) for c in configs)
        rows.append(f'<tr class="attempt"><td class="num">attempt {i}</td>{answers}</tr>')
    flag = "1" if changed else "0"
    return f'<tbody class="viewer-task" data-changed="{flag}">{"".join(rows)}</tbody>'


def _summary(task: TaskView, config: str) -> str:
    passed, scored, unscored = task.counts(config)
    rate = f"{passed / scored:.0%}" if scored else "—"
    return (f"passed {passed} of {scored} scored ({rate}), {unscored} unscored")


def _answer_cell(answer: Answer | None) -> str:
    if answer is None:
        return '<td class="answer">—</td>'
    if answer.outcome == "unscored":
        head = f"unscored: {answer.reason}"
    else:
        score = "—" if answer.score is None else format(answer.score, ".3g")
        head = f"{answer.outcome}, score {score}"
    return (f'<td class="answer {answer.outcome}"><span class="outcome">{esc(printable(head))}'
            f"</span><pre>{esc(answer.text)}</pre></td>")
