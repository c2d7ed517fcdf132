"""The report's tables of what was refused and why, as text a printout keeps.

The charts carry the same facts in tooltips, which neither a printout nor a screen
reader shows: a val refusal, a tolerance refusal and a screening drop must read
differently on paper, so each decision's stage, failing gate and reason is a table
cell here, and so is every start-to-final tolerance check of the test split, and
each decision's unscored attempts (the candidate's beside the incumbent's).
"""

from __future__ import annotations

from forge.journal.records import AuxCheck, CandidateRecord, TestRecord
from forge.report.html._charts import move_text
from forge.report.html._data import RunReport
from forge.report.html._failures import unscored_cell
from forge.report.html._svg import esc

__all__ = ["decisions_table", "tolerance_status", "tolerance_table"]

#: How a screening ended, in words (``forge.journal.records`` ScreenBlock.status).
_SCREEN_WORDS = {
    "futile": "dropped at screening: futility",
    "weak": "dropped at screening: no clear dev improvement",
    "fail": "dropped at screening: not significant",
    "aux": "dropped at screening: past a tolerance",
    "held": "held back by the memory of an earlier refusal",
    "worse": "dropped at screening: below the nearer value of its setting on an attempt",
    "budget": "cut short: budget spent during screening",
    "paused": "paused at screening: raced on only if nothing else is left to screen",
}

#: Status word shown per tolerance check, and the cell's tone.
_STATUS = {"within": ("within", "pass"), "unclear": ("unclear", "warn"),
           "beyond": ("BEYOND", "fail"), "absent": ("absent", "")}


def tolerance_status(check: AuxCheck) -> str:
    """``within`` / ``unclear`` / ``beyond`` / ``absent``; a version-1 journal, which
    kept only passed or not, reads as within or beyond."""
    status = check.details.get("status")
    if isinstance(status, str) and status in _STATUS:
        return status
    return "within" if check.passed else "beyond"


def tolerance_table(test: TestRecord) -> str:
    """One row per auxiliary metric: its start-to-final check on the test split."""
    if not test.aux:
        return ('<p class="caption" id="tolerance-none">The bench declares no auxiliary '
                "metrics: no tolerance to check from start to final.</p>")
    rows = []
    for check in test.aux:
        word, tone = _STATUS[tolerance_status(check)]
        metric = check.name.removeprefix("aux:")
        tasks = check.details.get("n_tasks")
        rows.append(f'<tr><td><code>{esc(metric)}</code></td><td class="{tone}"><b>'
                    f"{esc(word)}</b></td><td>{esc(check.reason)}</td>"
                    f'<td class="num">{esc("—" if tasks is None else tasks)}</td></tr>')
    return ('<h3>Auxiliary tolerances, start → final on test</h3>'
            '<table id="tolerance-table"><tr><th>metric</th><th>status</th>'
            "<th>regression against the start config</th><th>tasks</th></tr>"
            f'{"".join(rows)}</table><p class="caption">Each promotion was held to the '
            "tolerances against the start config on dev and val; this is the check of the "
            "whole chain on the held-out test tasks. <b>within</b>: the one-sided upper "
            "bound of the regression over these test tasks (from their paired attempts) is "
            "within the allowance; <b>unclear</b>: the estimate is, the bound is not; "
            "<b>BEYOND</b>: the estimate is past the allowance (<code>forge promote</code> "
            "refuses it unless told to accept it). The bound over tasks like these is shown "
            "beside it. <code>unscored</code> is the share of attempts that failed (an "
            "error, a timeout, an output not judged), on the same (task, seed) pairs: "
            "<b>BEYOND</b> there means an increase shown past its allowance at the gates' "
            "alpha.</p>")


def _stage(d: CandidateRecord) -> str:
    """Where the decision was made: screening (and how it ended) or confirmation."""
    if d.verdict == "promoted":
        return "confirmed: every gate passed"
    if any(g.name == "legal" for g in d.gates):
        return "illegal proposal, never applied"
    screen = None if d.dev is None else d.dev.screen
    if (d.dev is not None and d.dev.confirm is not None) or d.looks:
        return ("refused at confirmation" if d.verdict == "rejected"
                else "cut short during confirmation")
    if screen is not None and screen.status in _SCREEN_WORDS:
        return _SCREEN_WORDS[screen.status]
    if d.verdict == "skipped":
        return "not screened"
    return "refused at confirmation" if d.val is not None else "refused"


def _reasons(d: CandidateRecord) -> str:
    """Each failing gate with its reason, then the search's own ``why``."""
    items = [f"<li><b>{esc(g.name)}</b>: {esc(g.reason)}</li>" for g in d.gates if not g.passed]
    if d.gates_not_run:
        items.append(f"<li>not run: {esc(', '.join(d.gates_not_run))}</li>")
    if d.deferred:
        items.append(f"<li>deferred: {esc(d.deferred)}</li>")
    if d.why:
        items.append(f"<li>{esc(d.why)}</li>")
    if d.verdict == "promoted":
        items.append(f"<li>all {len(d.gates)} gates passed</li>")
    return f'<ul class="reasons">{"".join(items)}</ul>' if items else "—"


def decisions_table(report: RunReport) -> str:
    """One row per candidate decision: step, move, verdict, stage, failing gate, why, and
    the candidate's unscored attempts beside the incumbent's on the same seeds."""
    if not report.decisions:
        return ""
    rows = []
    for d in report.decisions:
        failing = next((g.name for g in d.gates if not g.passed), "—")
        kind = f" ({d.move_kind})" if d.move_kind == "jump" else ""
        if d.precision_round:
            kind += f" (precision round {d.precision_round})"
        rows.append(f'<tr class="{d.verdict}"><td class="num">{esc(d.step)}</td>'
                    f"<td><code>{esc(move_text(d.move))}</code>{esc(kind)}"
                    f"<small>{esc(d.proposer)}</small></td>"
                    f'<td class="verdict-{d.verdict}"><b>{esc(d.verdict)}</b></td>'
                    f"<td>{esc(_stage(d))}</td><td><code>{esc(failing)}</code></td>"
                    f"<td>{_reasons(d)}</td>{unscored_cell(report, d)}</tr>")
    return ('<table id="decisions-table"><tr><th>step</th><th>move · proposer</th>'
            "<th>verdict</th><th>decided at</th><th>failing gate</th><th>why</th>"
            f'<th>unscored</th></tr>{"".join(rows)}</table>')
