"""The report page: summary, test result, charts and tables, in one HTML string.

The page is self-contained: styles and the one small script are inline, charts are
inline SVG, and a Content-Security-Policy forbids every network load, so it opens
offline and cannot phone home even if a journal's text tried to. The script checks
that each chart was laid out with content and records the outcome on
``<html data-render="ok">``, with each chart's box in ``data-boxes`` (what the
browser test reads to find the charts in its screenshot); and it runs the viewer's
filter (the tasks that changed alone, or every task).
"""

from __future__ import annotations

from collections import Counter

from forge.journal.records import SplitDelta, TestRecord
from forge.report.failures import compared_tasks_text
from forge.report.html._charts import (
    budget_chart,
    forest_plot,
    move_text,
    score_chart,
    split_chart,
)
from forge.report.html._data import RunReport, number
from forge.report.html._failures import failures_section, left_out_html
from forge.report.html._svg import esc, fmt
from forge.report.html._tables import decisions_table, tolerance_status, tolerance_table
from forge.report.html._viewer import viewer_section

__all__ = ["render_page"]

_CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
        "img-src data:; base-uri 'none'; form-action 'none'")

_CSS = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: #24292f; background: #fff; margin: 0; }
main { max-width: 1140px; margin: 0 auto; padding: 20px 24px 48px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 30px 0 6px; border-bottom: 1px solid #d8dee4;
     padding-bottom: 4px; }
p.sub, p.caption { color: #57606a; margin: 2px 0 8px; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 14px 0; }
.card { border: 1px solid #d8dee4; border-radius: 6px; padding: 8px 12px; min-width: 130px; }
.card b { display: block; font-size: 18px; }
.card span { color: #57606a; font-size: 12px; }
.headline { font-size: 16px; padding: 10px 14px; border-radius: 6px; background: #f6f8fa;
            border-left: 5px solid #8c959f; }
.headline.good { border-left-color: #1a7f37; }
.headline.bad { border-left-color: #cf222e; }
svg.chart { width: 100%; height: auto; display: block; margin: 6px 0; }
svg text { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
svg .tick { font-size: 11px; fill: #57606a; }
svg .axis-label, svg .legend, svg .row-label { font-size: 12px; fill: #24292f; }
svg .note { font-size: 11.5px; fill: #57606a; font-style: italic; }
svg .mark:hover circle, svg .decision:hover circle { stroke: #24292f; stroke-width: 1.5; }
svg .decision:hover > rect:first-of-type { fill-opacity: 0.8; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
th, td { border-bottom: 1px solid #d8dee4; padding: 4px 10px; text-align: left;
         vertical-align: top; }
th { background: #f6f8fa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.pass { color: #116329; } td.fail { color: #a40e26; } td.warn { color: #9a6700; }
td.verdict-promoted { color: #116329; } td.verdict-rejected { color: #a40e26; }
td.verdict-skipped { color: #57606a; }
tr.promoted td { background: #dafbe1; }
ul.reasons { margin: 0; padding-left: 16px; max-width: 520px; }
h3 { font-size: 15px; margin: 16px 0 4px; }
.headline.warn { border-left-color: #bf8700; }
td small { color: #57606a; display: block; max-width: 300px; }
tr.changed td { background: #dafbe1; }
.bar { display: inline-block; height: 10px; background: #1f6feb; vertical-align: middle; }
.bar-bg { display: inline-block; width: 160px; height: 10px; background: #eaeef2;
          vertical-align: middle; margin-right: 8px; }
code { font-size: 12.5px; background: #f6f8fa; padding: 0 3px; border-radius: 3px; }
td.unscored small { max-width: 180px; }
p.left-out { color: #a40e26; font-weight: 600; }
table.viewer { width: 100%; table-layout: fixed; }
table.viewer th:first-child, table.viewer td:first-child { width: 140px; }
table.viewer tr.task-head td { background: #f6f8fa; border-top: 2px solid #d8dee4; }
table.viewer tbody[hidden] { display: none; }
td.answer pre { white-space: pre-wrap; word-break: break-word; margin: 2px 0 0;
                font-size: 12px; max-height: 180px; overflow: auto; }
td.answer .outcome { font-size: 12px; font-weight: 600; }
td.answer.passed .outcome { color: #116329; } td.answer.failed .outcome { color: #a40e26; }
td.answer.unscored { background: #fff8c5; } td.answer.unscored .outcome { color: #9a6700; }
footer { color: #57606a; font-size: 12px; margin-top: 36px; }
"""

# Collects uncaught errors from the first moment, so the self-check can report them.
_HEAD_SCRIPT = ("window.forgeErrors = []; window.addEventListener('error', function (e) "
                "{ window.forgeErrors.push(String(e.message)); });")

_CHECK_SCRIPT = """
(function () {
  var charts = document.querySelectorAll("svg.chart"), bad = [], boxes = [];
  charts.forEach(function (svg) {
    var box = svg.getBoundingClientRect();
    var shapes = svg.querySelectorAll("path, rect, circle, line").length;
    if (!shapes || box.width < 100 || box.height < 20) { bad.push("empty chart " + svg.id); }
    boxes.push([svg.id, Math.round(box.left + window.scrollX), Math.round(box.top + window.scrollY),
                Math.round(box.width), Math.round(box.height)].join(","));
  });
  var problems = bad.concat(window.forgeErrors || []);
  var root = document.documentElement;
  root.setAttribute("data-charts", String(charts.length));
  root.setAttribute("data-boxes", boxes.join(";"));  // page pixels: a test crops these
  root.setAttribute("data-render", problems.length ? "failed: " + problems.join("; ") : "ok");
})();
(function () {
  // The viewer's filter: the tasks that changed alone, or every task.
  var box = document.getElementById("viewer-changed");
  if (!box) { return; }
  var tasks = document.querySelectorAll("tbody.viewer-task");
  var count = document.getElementById("viewer-count");
  function apply() {
    var shown = 0;
    tasks.forEach(function (t) {
      var hide = box.checked && t.getAttribute("data-changed") !== "1";
      t.hidden = hide;
      if (!hide) { shown += 1; }
    });
    count.textContent = shown + " of " + tasks.length + " tasks shown";
  }
  box.addEventListener("change", apply);
  apply();
})();
"""


def _card(value: str, label: str) -> str:
    return f'<div class="card"><b>{esc(value)}</b><span>{esc(label)}</span></div>'


def _summary(report: RunReport) -> str:
    verdicts = Counter(d.verdict for d in report.decisions)
    stop, end = report.stop, report.end
    rollouts = (end.rollouts_used if end is not None
                else None if stop is None else stop.rollouts_total)
    cost = number(end.cost_total if end is not None
                  else None if stop is None else stop.cost_total)
    cards = [
        _card(stop.reason if stop is not None else "unfinished", "stop reason"),
        _card(str(stop.step if stop is not None else report.last_step), "steps"),
        _card(f"{len(report.decisions)}", f"decisions: {verdicts['promoted']} promoted, "
                                           f"{verdicts['rejected']} rejected, "
                                           f"{verdicts['skipped']} skipped"),
        _card(fmt(rollouts, ",.0f"), "rollouts spent" + (" (with test)" if end else "")),
        _card(fmt(cost, ",.4g"), "cost spent"),
    ]
    if report.invalid:  # replies the proposer refused (see forge journal show for each)
        cards.append(_card(str(len(report.invalid)), "invalid proposals (no move)"))
    why = (f"Stopped after {stop.step} steps: {stop.text}." if stop is not None
           else "The run has not finished: no stop record (it can be resumed).")
    return f'<div class="cards">{"".join(cards)}</div><p class="caption">{esc(why)}</p>'


def _test_section(report: RunReport) -> str:
    out = ["<h2>Test split</h2>"]
    test = report.test
    if test is None:
        out.append('<p class="headline" id="test-result">The test split was not opened: the '
                   "run has not finished, or its bench has no test split.</p>")
    else:
        delta, low, high = number(test.delta), number(test.ci_low), number(test.ci_high)
        if low is not None and low > 0:
            tone, words = "good", "the final config is better on test (the interval excludes 0)"
        elif high is not None and high < 0:
            tone, words = "bad", "the final config is worse on test (the interval excludes 0)"
        else:
            tone, words = "", "no change shown on test (the interval includes 0)"
        # A better score never reads as all good while a tolerance is broken or unshown.
        statuses = [tolerance_status(check) for check in test.aux]
        if "beyond" in statuses:
            tone = "bad"
            words += (f"; but {statuses.count('beyond')} auxiliary tolerance(s) BEYOND "
                      "the allowance from start to final (below)")
        elif "unclear" in statuses:
            tone = "warn" if tone == "good" else tone
            words += (f"; {statuses.count('unclear')} auxiliary tolerance(s) unclear from "
                      "start to final (below)")
        p = number(test.p_value_two_sided)
        out.append(
            f'<p class="headline {tone}" id="test-result"><b>test</b> '
            f"{esc(fmt(number(test.start)))} → {esc(fmt(number(test.final)))}, "
            f"Δ {esc(fmt(delta, '+.3f'))} (95% CI {esc(fmt(low, '+.3f'))} .. "
            f"{esc(fmt(high, '+.3f'))}), p = {esc(fmt(p, '.3g'))} two-sided, "
            f"{esc(compared_tasks_text(test))}: {esc(words)}.</p>")
        out.append(left_out_html(test))
        out.append(tolerance_table(test))
    blocks: list[tuple[str, SplitDelta | TestRecord]] = []
    if report.end is not None:
        blocks += [("dev", report.end.dev), ("val", report.end.val)]  # empty: not drawn
    if test is not None:
        blocks.append(("test", test))
    if blocks:
        out.append(split_chart(blocks, "chart-test"))
        out.append('<p class="caption">Start config against final config on each split, '
                   "paired task by task. The test split was opened once, after every decision; "
                   "dev and val chose the promotions, so only test is an unbiased estimate.</p>")
    return "".join(out)


def _promotionsequence(report: RunReport) -> str:
    if not report.promoted:
        return '<p class="caption">No promotion: the start config stands.</p>'
    items = []
    for index, d in enumerate(report.promoted, start=1):
        confirm = None if d.dev is None or d.dev.confirm is None else d.dev.confirm.effect
        val = None if d.val is None else d.val.effect
        items.append(f"<li><b>P{index}</b> step {esc(d.step)}: <code>"
                     f"{esc(move_text(d.move))}</code> · dev confirm "
                     f"{esc(fmt(number(confirm), '+.3f'))} · val "
                     f"{esc(fmt(number(val), '+.3f'))} · proposed by "
                     f"{esc(d.proposer)}</li>")
    return f'<ol class="promotions">{"".join(items)}</ol>'


def _aux_table(report: RunReport) -> str:
    if not report.promoted:
        return '<p class="caption">No promotion, so no auxiliary metrics to compare.</p>'
    metrics: list[str] = []
    for d in report.promoted:
        for name in d.aux:
            if name not in metrics:
                metrics.append(name)
    if not metrics:
        return '<p class="caption">The bench declares no auxiliary metrics.</p>'
    head = "".join(f"<th>{esc(m)}</th>" for m in metrics)
    rows = []
    for d in report.promoted:
        gates = {g.name: g for g in d.gates}
        cells = []
        for metric in metrics:
            info = d.aux.get(metric)
            gate = gates.get(f"aux:{metric}")
            if info is None:
                cells.append("<td>—</td>")
                continue
            tone = "pass" if gate is not None and gate.passed else "fail"
            cells.append(f'<td class="{tone}">{esc(fmt(number(info.before), ".4g"))} → '
                         f'{esc(fmt(number(info.after), ".4g"))}'
                         f"<small>{esc(gate.reason if gate is not None else '')}</small></td>")
        rows.append(f"<tr><td>{esc(d.step)}</td><td><code>{esc(move_text(d.move))}"
                    f"</code></td>{''.join(cells)}</tr>")
    return (f'<table id="aux-table"><tr><th>step</th><th>move</th>{head}</tr>'
            f'{"".join(rows)}</table><p class="caption">Incumbent → candidate on the '
            "confirmation seeds; each metric is its own gate, never averaged.</p>")


def _zone_table(report: RunReport) -> str:
    if not report.has_attempts:
        return '<p class="caption">No attempt store in the run folder: nothing to show.</p>'
    k = f"the first {report.k} attempts" if report.k else "its attempts"
    lead = (f'<p class="caption">{len(report.zone)} of {report.dev_tasks_final} dev tasks are '
            f"in the learning zone of the final config ({esc(report.final_fingerprint[:12])}): "
            f"it passes them sometimes but not always ({esc(k)} on the dev screening seeds). "
            "These are where the next change can still show.</p>")
    if not report.zone:
        return lead
    rows = "".join(
        f"<tr><td><code>{esc(z.task_id)}</code></td><td class=\"num\">{z.passed}/{z.scored}"
        f'</td><td><span class="bar-bg"><span class="bar" style="width:'
        f'{100 * z.passed / z.scored:.0f}%"></span></span>{z.passed / z.scored:.0%}</td></tr>'
        for z in report.zone)
    return (lead + '<table id="zone-table"><tr><th>task</th><th>passed</th><th>pass rate</th>'
            f"</tr>{rows}</table>")


def _config_table(report: RunReport) -> str:
    start = report.info.start_config
    if report.end is not None:
        final = dict(report.end.final_config)
    else:
        final = dict(start)
        for d in report.promoted:
            final[d.move.target] = d.move.after
    rows = []
    for key in [*start, *(k for k in final if k not in start)]:
        before, after = start.get(key), final.get(key)
        cls = ' class="changed"' if before != after else ""
        rows.append(f"<tr{cls}><td>{esc(key)}</td><td><code>{esc(repr(before))}</code></td>"
                    f"<td><code>{esc(repr(after))}</code></td></tr>")
    return ('<table id="config-table"><tr><th>setting</th><th>start</th><th>final</th></tr>'
            f'{"".join(rows)}</table>')


def render_page(report: RunReport) -> str:
    """The whole page as one string."""
    info = report.info
    proposer = info.options.proposer
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f'<meta http-equiv="Content-Security-Policy" content="{esc(_CSP)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>forge report · {esc(info.run_id)}</title>",
        f"<style>{_CSS}</style><script>{_HEAD_SCRIPT}</script></head><body><main>",
        f"<h1>forge report · run <code>{esc(info.run_id)}</code></h1>",
        f'<p class="sub">bench <b>{esc(info.bench)}</b> · started '
        f"{esc(info.created_at.strftime('%Y-%m-%d %H:%M:%S %Z'))} · seed {esc(info.seed)} · "
        f"proposer {esc(proposer)} · k {esc(report.k or '?')}</p>",
        _summary(report),
        _test_section(report),
        "<h2>Incumbent score per step</h2>",
        '<p class="caption">Mean score of the incumbent over tasks on the dev screening seeds '
        "and on val (the seeds every config shares), with 95% t-intervals; dashed lines mark "
        "promotions.</p>",
        score_chart(report),
        _promotionsequence(report),
        "<h2>Every candidate</h2>",
        '<p class="caption">One row per decision in journal order: the screening effect (dot) '
        "and, for the one candidate per step that was confirmed, the confirmation effect on "
        "fresh seeds (diamond). The table below it says where each was decided, which "
        "gate refused it and why.</p>",
        forest_plot(report),
        decisions_table(report),
        "<h2>Budget spent</h2>",
        budget_chart(report),
        "<h2>Auxiliary metrics at each promotion</h2>",
        _aux_table(report),
        "<h2>Learning-zone tasks</h2>",
        _zone_table(report),
        "<h2>Unscored attempts by config</h2>",
        failures_section(report),
        "<h2>What the agent did: start and final, task by task</h2>",
        viewer_section(report.viewer, None if report.has_attempts
                       else "no attempt store in the run folder"),
        "<h2>Config: start → final</h2>",
        _config_table(report),
        f"<footer>forge report of <code>{esc(report.folder)}</code>. Self-contained: it "
        "loads nothing from the network.</footer>",
        f"</main><script>{_CHECK_SCRIPT}</script></body></html>\n",
    ])

