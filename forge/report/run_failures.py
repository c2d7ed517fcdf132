"""``forge journal show``'s view of a run's unscored attempts, per config.

Under the steps: one row for the start config, one per candidate that had an unscored
attempt (its own or the incumbent's on the same attempts), one for the final config;
each with its attempts, how many went unscored and what share, the tasks it never
scored, and its most frequent reasons. A candidate's row puts its share beside the
incumbent's on the same (stream, task, attempt) keys: the same seeds, so a config that
fails more shows as such. The
data is :mod:`forge.journal.review_failures`'; every text a harness wrote goes through
:func:`forge._util.show.printable`, in :class:`rich.text.Text` cells (no markup).
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from forge._text import printable
from forge.journal.records import CandidateRecord, UnscoredCounts
from forge.journal.review import RunRecords
from forge.journal.review_failures import RunFailures

__all__ = ["REASONS_SHOWN", "unscored_view"]

#: Reasons a row names, the most frequent first.
REASONS_SHOWN = 3
#: How much of a reason's label a row shows.
_LABEL_CHARS = 90


def unscored_view(run: RunRecords, failures: RunFailures) -> list[Table | Text]:
    """What to print: the table, then a line for the candidates it left out (every
    attempt scored, theirs and the incumbent's); one line alone when no attempt of any
    config went unscored, or when the store cannot tell (:attr:`RunFailures.missing`)."""
    if run.start is None:
        return []
    if failures.missing is not None:
        return [Text(f"unscored attempts by config: not known: {failures.missing}; the "
                     "test split's are in the test row above", style="dim")]
    attempts, unscored = failures.total()
    if not unscored:
        return [Text(f"unscored attempts: none of {attempts:,} (every attempt of every "
                     "config was scored)")]
    table = Table(title=f"unscored attempts by config: {unscored:,} of {attempts:,}",
                  title_justify="left")
    table.add_column("config", overflow="fold", ratio=3)
    table.add_column("unscored", overflow="fold", ratio=2)
    table.add_column("incumbent on the same seeds", overflow="fold", ratio=2)
    table.add_column("most frequent reasons", overflow="fold", ratio=5)
    start = run.start.fingerprint
    _config_row(table, Text("start config", style="bold"), failures, start)
    quiet = 0
    for record in run.candidates:
        step = failures.step(record)
        if step is None:
            continue
        cand, inc = step.candidate_counts, step.incumbent_counts
        if not (cand.n_unscored or inc.n_unscored):
            quiet += 1
            continue
        table.add_row(_move(record), _share(cand), _share(inc), _reasons(cand))
    final = run.final_fingerprint
    if final is not None and final != start:
        _config_row(table, Text("final config", style="bold"), failures, final)
    out: list[Table | Text] = [table]
    if quiet:
        out.append(Text(f"{quiet} other candidate{'s' if quiet > 1 else ''}: every attempt "
                        "scored, and every one of the incumbent's on the same seeds"))
    return out


def _config_row(table: Table, name: Text, failures: RunFailures, fingerprint: str) -> None:
    found = failures.config(fingerprint)
    if found is None:
        return
    counts = found.counts
    name.append(f"\n{fingerprint[:12]}, every attempt", style="dim")
    table.add_row(name, _share(counts), Text("—"), _reasons(counts))


def _move(record: CandidateRecord) -> Text:
    move = record.move
    cell = Text(printable(f"step {record.step}: {move.target} {move.before!r} → "
                          f"{move.after!r}"))
    cell.append(f" ({record.verdict})", style="dim")
    return cell


def _share(counts: UnscoredCounts) -> Text:
    rate = counts.rate
    text = Text(f"{counts.n_unscored:,} of {counts.n_attempts:,}",
                style="red" if counts.n_unscored else "")
    if rate:
        text.append(f" ({rate:.1%})")
    if counts.n_tasks_without_score:
        text.append(f"\n{counts.n_tasks_without_score} of {counts.n_tasks} tasks never "
                    "scored", style="bold red")
    return text


def _reasons(counts: UnscoredCounts) -> Text:
    """The most frequent reasons of the row's unscored attempts (the candidate's, on the
    attempts its share is over), each with its count."""
    if not counts.n_unscored:
        return Text("—")
    ranked = list(counts.unscored_by_reason.items())
    lines = []
    for label, n in ranked[:REASONS_SHOWN]:
        shown = printable(label)
        if len(shown) > _LABEL_CHARS:
            shown = shown[:_LABEL_CHARS - 1] + "…"
        lines.append(f"{n:,} × {shown}")
    rest = sum(n for _, n in ranked[REASONS_SHOWN:])
    if rest:
        lines.append(f"{rest:,} × for other reasons")
    return Text("\n".join(lines))
