"""The report's unscored attempts: a share per decision, a table of reasons per config,
and what the test comparison left out.

An unscored attempt is left out of every mean (never a zero), so a config that fails
on its hard tasks can look better than one that answers them wrongly: the page shows
beside each decision how many of the candidate's attempts went unscored and how many
of the incumbent's on the same seeds, lists each config's reasons with a count and an
example (task, attempt, message), and names the test tasks a config never scored.
The data is :mod:`forge.journal.review_failures`' and the test record's; everything a harness
wrote is redacted and cut (:func:`forge.secrets.masking.clip`) and HTML-escaped.
"""

from __future__ import annotations

from forge._text import printable
from forge.journal.records import CandidateRecord, TestRecord, UnscoredCounts
from forge.journal.review_failures import ConfigFailures
from forge.report.failures import left_out_lines
from forge.report.html._charts import move_text
from forge.report.html._data import RunReport
from forge.report.html._svg import esc
from forge.secrets.masking import clip

__all__ = ["failures_section", "left_out_html", "unscored_cell"]

#: Characters of an example message shown.
_EXAMPLE_CHARS = 240


def share(counts: UnscoredCounts) -> str:
    """``138 of 320 (43.1%)``, and the tasks never scored when there are any."""
    rate = counts.rate
    text = f"{counts.n_unscored:,} of {counts.n_attempts:,}" + (f" ({rate:.1%})" if rate else "")
    if counts.n_tasks_without_score:
        text += f", {counts.n_tasks_without_score} of {counts.n_tasks} tasks never scored"
    return text


def unscored_cell(report: RunReport, d: CandidateRecord) -> str:
    """The decisions table's cell: the candidate's unscored attempts and the incumbent's on
    the same seeds, red where the candidate failed more."""
    step = report.failures.step(d)
    if step is None:
        return '<td class="num">—</td>'
    cand, inc = step.candidate_counts, step.incumbent_counts
    tone = " fail" if cand.n_unscored > inc.n_unscored else ""
    return (f'<td class="num unscored{tone}">{esc(share(cand))}'
            f"<small>incumbent, same seeds: {esc(share(inc))}</small></td>")


def _configs(report: RunReport) -> list[tuple[str, str]]:
    """(fingerprint, name) of the start, each candidate config in order of its first step,
    and the final config (named so where it is a candidate)."""
    start, final = report.start.fingerprint, report.final_fingerprint
    names: dict[str, str] = {start: "start config"}
    for d in report.decisions:
        if d.candidate is None:
            continue
        step = f"step {d.step}: {move_text(d.move)} ({d.verdict})"
        names[d.candidate] = (names[d.candidate] + "; " + step if d.candidate in names
                              else step)
    names[final] = "final config" + (f" = {names[final]}" if final in names else "")
    return list(names.items())


def failures_section(report: RunReport) -> str:
    """Each config's unscored attempts over every attempt it ran: its share, then its
    reasons, the most frequent first, each with a count and an example."""
    failures = report.failures
    if failures.missing is not None:
        return (f'<p class="caption" id="failures-none">Unscored attempts per config: not '
                f"known: {esc(failures.missing)}. The test split's are above.</p>")
    attempts, unscored = failures.total()
    if not unscored:
        return (f'<p class="caption" id="failures-none">Every one of the {attempts:,} '
                "attempts of every config was scored.</p>")
    rows, clean = [], 0
    for fingerprint, name in _configs(report):
        found = failures.config(fingerprint)
        if found is None:
            continue
        if not found.counts.n_unscored:
            clean += 1
            continue
        rows.append(_config_rows(name, fingerprint, found))
    note = (f'<p class="caption">{clean} other config{"s" if clean > 1 else ""}: every '
            "attempt scored.</p>" if clean else "")
    return (f'<p class="caption">{unscored:,} of {attempts:,} attempts were not scored. '
            "Unscored attempts are left out of every mean, never counted as zeros: a "
            "config that fails where it would be wrong looks better than it is. Each "
            "config's attempts over every stream it ran; the most frequent reasons first, "
            "each with the first attempt it was seen on.</p>"
            '<table id="failures-table"><tr><th>config</th><th>unscored</th><th>reason</th>'
            f'<th>count</th><th>example</th></tr>{"".join(rows)}</table>{note}')


def _config_rows(name: str, fingerprint: str, found: ConfigFailures) -> str:
    reasons = found.reasons
    more = found.n_reasons - len(reasons)
    span = len(reasons) + (1 if more > 0 else 0)
    head = (f'<td rowspan="{span}">{esc(name)}<small><code>{esc(fingerprint[:12])}</code>'
            f'</small></td><td rowspan="{span}" class="num fail">{esc(share(found.counts))}'
            "</td>")
    rows = []
    for i, reason in enumerate(reasons):
        example = (f"task {printable(reason.task_id)} attempt {reason.attempt}: "
                   + (printable(clip(reason.message, _EXAMPLE_CHARS)) or "(no message)"))
        rows.append(f"<tr>{head if i == 0 else ''}<td><code>{esc(printable(reason.label))}"
                    f'</code></td><td class="num">{reason.count:,}</td>'
                    f"<td><small>{esc(example)}</small></td></tr>")
    if more > 0:
        rows.append(f'<tr><td colspan="3">… and {more} more reason{"s" if more > 1 else ""}'
                    "</td></tr>")
    return "".join(rows)


def left_out_html(test: TestRecord) -> str:
    """What the test comparison left out, one paragraph a line (nothing for a journal
    written before the counts were kept)."""
    lines = left_out_lines(test)
    return "".join(f'<p class="caption{" left-out" if i else ""}" id="test-unscored-{i}">'
                   f"{esc(printable(line))}</p>" for i, line in enumerate(lines))
