"""The failure report of ``forge eval`` and ``forge search``: why attempts went unscored.

A few lines under the result: how many attempts were unscored and what share, then the
most frequent reasons (how the attempts stopped and the normalised message,
:func:`forge.results.failures.reason_key`), each with its count, one example (its task,
attempt, config and message) and, in a search, the configs it was charged to. Above
:data:`~forge.results.failures.FAILURE_WARN_RATE` a warning says the scores rest on the attempts
that finished. Every text a harness wrote goes through :func:`forge._util.show.printable`.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.text import Text

from forge._text import printable
from forge.journal.records import TestRecord, UnscoredCounts
from forge.results.failures import FAILURE_WARN_RATE, TOP_REASONS, FailureReason, FailureTally
from forge.secrets.masking import clip

__all__ = [
    "NAMED_ON_LINE",
    "compared_tasks_text",
    "failure_lines",
    "failure_status",
    "failure_warning",
    "left_out_lines",
    "share_text",
]

#: Tasks without a scored attempt a line names before "and N more".
NAMED_ON_LINE = 5

#: How much of an example message is shown (the whole one is in the attempt store, or
#: in the result ``forge eval --save`` writes).
_EXAMPLE_CHARS = 240
#: How much of a reason's key the live view's one line shows.
_STATUS_KEY_CHARS = 60
#: Configs named per reason, the most charged first.
_CONFIGS_SHOWN = 3


def _share(tally: FailureTally) -> str:
    return f"{tally.unscored:,} of {tally.attempts:,} attempts unscored ({tally.rate or 0:.1%})"


def failure_lines(tally: FailureTally, *, configs: Mapping[str, str] | None = None,
                  top: int = TOP_REASONS, warn: bool = True) -> list[Text]:
    """The report, one :class:`Text` a line; none when every attempt was scored.
    ``configs`` names config fingerprints (a search's start config and candidates):
    given, each reason says which configs it was charged to. ``warn``: end with
    :func:`failure_warning` where it applies."""
    if not tally.unscored:
        return []
    lines = [Text(f"failures: {_share(tally)}, by reason (most frequent first):",
                  style="bold red" if tally.alarming else "bold")]
    for reason in tally.reasons(top):
        lines.extend(_reason_lines(reason, configs))
    more = tally.n_reasons() - top
    if more > 0:
        lines.append(Text(f"  … and {more} more reason{'s' if more > 1 else ''}",
                          style="dim"))
    warning = failure_warning(tally) if warn else None
    if warning is not None:
        lines.append(warning)
    return lines


def _reason_lines(reason: FailureReason, configs: Mapping[str, str] | None) -> list[Text]:
    head = Text(f"  {reason.count:>6,} × ")
    head.append(printable(reason.label), style="bold")
    where = f"task {reason.task_id} attempt {reason.attempt}"
    if configs is not None:
        where += f", {_config_name(reason.config, configs)}"
    example = Text(f"           e.g. {printable(where)}: ", style="dim")
    example.append(printable(clip(reason.message, _EXAMPLE_CHARS)) or "(no message)")
    lines = [head, example]
    if configs is not None and len(reason.configs) > 1:
        charged = ", ".join(f"{_config_name(fp, configs)} {n:,}"
                            for fp, n in reason.configs.most_common(_CONFIGS_SHOWN))
        rest = len(reason.configs) - _CONFIGS_SHOWN
        tail = f", {rest} more" if rest > 0 else ""
        lines.append(Text(f"           in {len(reason.configs)} configs: "
                          f"{printable(charged)}{tail}", style="dim"))
    return lines


def _config_name(fingerprint: str, configs: Mapping[str, str]) -> str:
    return configs.get(fingerprint) or f"config {fingerprint[:12]}"


def failure_warning(tally: FailureTally) -> Text | None:
    """One loud line when more than :data:`FAILURE_WARN_RATE` of the attempts were
    unscored; None otherwise."""
    if not tally.alarming:
        return None
    return Text(f"warning: {tally.rate or 0:.1%} of attempts failed, more than the "
                f"{FAILURE_WARN_RATE:.0%} forge accepts quietly: the scores rest on the "
                "attempts that finished; fix the reasons above before trusting them",
                style="bold red")


def failure_status(tally: FailureTally | None) -> Text | None:
    """The live view's line: the share unscored and the most frequent reason, red above
    :data:`FAILURE_WARN_RATE`; None while every attempt has been scored."""
    if tally is None or not tally.unscored:
        return None
    text = f"failures {_share(tally)}"
    top = tally.reasons(1)
    if tally.alarming:
        text += f", above {FAILURE_WARN_RATE:.0%}"
    if top:
        label = printable(top[0].label)
        if len(label) > _STATUS_KEY_CHARS:
            label = label[:_STATUS_KEY_CHARS - 1] + "…"
        text += f" · most: {label} ({top[0].count:,})"
    return Text(text, style="bold red" if tally.alarming else "yellow")


# -- the test split: what its comparison left out ---------------------------------------------


def share_text(counts: UnscoredCounts) -> str:
    """``140 of 520 (26.9%)``: a config's unscored attempts of its attempts."""
    rate = counts.rate
    shown = f" ({rate:.1%})" if rate else ""
    return f"{counts.n_unscored:,} of {counts.n_attempts:,}{shown}"


def compared_tasks_text(test: TestRecord) -> str:
    """The tasks the test comparison is over: ``19 of 26 tasks × 20 attempts`` when some
    were left out (a config scored none of their attempts), ``26 tasks × 20 attempts``
    when none was (a journal from before the counts: the tasks compared)."""
    total = max((c.n_tasks for c in (test.unscored_start, test.unscored_final)
                 if c is not None), default=test.n_tasks)
    tasks = (f"{test.n_tasks} of {total} tasks" if total > test.n_tasks
             else f"{test.n_tasks} tasks")
    return tasks + ("" if test.k is None else f" × {test.k} attempts")


def left_out_lines(test: TestRecord) -> list[str]:
    """What the test comparison left out, never silently: each config's unscored attempts,
    then (when there are any) the tasks that were left out because a config scored none
    of their attempts, named up to :data:`NAMED_ON_LINE` a config. Plain text with the
    task ids as written: the caller escapes it for where it goes. None of it for a
    journal written before the counts were kept."""
    start, final = test.unscored_start, test.unscored_final
    if start is None or final is None:
        return []
    lines = [f"unscored on test: start {share_text(start)}, final {share_text(final)}"
             + ("" if start.n_unscored or final.n_unscored else ": every attempt scored")]
    left_out = max(start.n_tasks, final.n_tasks) - test.n_tasks
    if start.n_tasks_without_score or final.n_tasks_without_score:
        named = "; ".join(f"{side} {_named_tasks(counts)}"
                          for side, counts in (("start", start), ("final", final)))
        lines.append(f"{left_out} test task{'s' if left_out != 1 else ''} left out of the "
                     f"comparison, with no scored attempt: {named}")
    return lines


def _named_tasks(counts: UnscoredCounts) -> str:
    n = counts.n_tasks_without_score
    if not n:
        return "none"
    shown = counts.tasks_without_score[:NAMED_ON_LINE]
    more = n - len(shown)
    return f"{n} ({', '.join(shown)}{f' and {more} more' if more > 0 else ''})"
