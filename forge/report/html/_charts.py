"""The report's charts, each an inline SVG string: incumbent scores per step, the forest
plot of every decision, the budget spent, and the start-to-final deltas per split.

Each chart is drawn from :class:`~forge.report.html._data.RunReport` only; hovering a
mark shows its numbers (SVG ``<title>``), so the page stays readable without script.
"""

from __future__ import annotations

import math

from forge.config.moves import Move
from forge.journal.records import CandidateRecord, PairedStats, SplitDelta, TestRecord
from forge.report.html._data import Incumbent, RunReport, number
from forge.report.html._svg import (
    COLORS,
    Scale,
    fmt,
    nice_ticks,
    num,
    padded,
    svg_close,
    svg_open,
    text,
    tooltip,
)
from forge.stats.paired import Interval

__all__ = ["budget_chart", "forest_plot", "move_text", "score_chart", "split_chart"]

WIDTH = 1100
_VERDICTS = ("promoted", "rejected", "skipped")


def move_text(move: Move) -> str:
    """``target: before → after`` with Python reprs, as the console shows moves."""
    return f"{move.target}: {move.before!r} → {move.after!r}"


def _hline(x0: float, x1: float, y: float, color: str, extra: str = "") -> str:
    return (f'<line x1="{num(x0)}" y1="{num(y)}" x2="{num(x1)}" y2="{num(y)}" '
            f'stroke="{color}"{extra}/>')


def _vline(x: float, y0: float, y1: float, color: str, extra: str = "") -> str:
    return (f'<line x1="{num(x)}" y1="{num(y0)}" x2="{num(x)}" y2="{num(y1)}" '
            f'stroke="{color}"{extra}/>')


def _y_grid(scale: Scale, x0: float, x1: float, ticks: list[float], spec: str) -> list[str]:
    out = []
    for tick in ticks:
        y = scale(tick)
        out.append(_hline(x0, x1, y, COLORS["grid"]))
        out.append(text(x0 - 6, y + 4, format(tick, spec), anchor="end", cls="tick"))
    return out


def _empty(chart_id: str, label: str, message: str) -> str:
    """A chart with nothing to plot still renders (a framed message), so the page's
    self-check can tell "no data" from "failed to draw"."""
    return (svg_open(chart_id, WIDTH, 60, label)
            + f'<rect x="0.5" y="0.5" width="{WIDTH - 1}" height="59" fill="#f6f8fa" '
              f'stroke="{COLORS["grid"]}"/>'
            + text(WIDTH / 2, 35, message, anchor="middle", cls="note") + svg_close())


# -- incumbent scores per step ------------------------------------------------------------

def _finite(iv: Interval | None) -> bool:
    return iv is not None and math.isfinite(iv.low) and math.isfinite(iv.high)


def _interval_lines(iv: Interval) -> str:
    if not _finite(iv):
        return f"{iv.mean:.3f} ({iv.n} task{'s' if iv.n != 1 else ''}: no interval)"
    return f"{iv.mean:.3f}  (95% CI {iv.low:.3f} .. {iv.high:.3f}, {iv.n} tasks)"


def score_chart(report: RunReport) -> str:
    """The incumbent's mean dev and val score per step, each with its 95% band."""
    label = "incumbent dev and val score per step with 95% confidence bands"
    incs = report.incumbents
    values = [v for inc in incs for iv in (inc.dev, inc.val) if iv is not None
              for v in (iv.mean, iv.low, iv.high) if math.isfinite(v)]
    if not values:
        why = ("no attempt store in the run folder" if not report.has_attempts
               else "no scored attempts of the incumbents")
        return _empty("chart-scores", label, f"no per-step scores: {why}")
    height, left, right, top, bottom = 340, 64, 24, 40, 46
    last = max(report.last_step, 1)
    xs = Scale(0, last, left, WIDTH - right)
    lo, hi = padded(values)
    ys = Scale(lo, hi, height - bottom, top)
    parts = [svg_open("chart-scores", WIDTH, height, label)]
    parts += _y_grid(ys, left, WIDTH - right, nice_ticks(lo, hi, 5), ".2f")
    every = max(1, math.ceil(last / 25))  # at most ~25 step labels
    for step in range(0, last + 1, every):
        parts.append(text(xs(step), height - bottom + 18, step, anchor="middle", cls="tick"))
    parts.append(text((left + WIDTH - right) / 2, height - 8, "step", anchor="middle",
                      cls="axis-label"))
    middle = num((top + height - bottom) / 2)
    parts.append(f'<text class="axis-label" transform="translate(16 {middle}) rotate(-90)" '
                 'text-anchor="middle">mean score</text>')
    for index, inc in enumerate(incs[1:], start=1):
        x = xs(inc.step)
        parts.append(_vline(x, top - 6, height - bottom, COLORS["promoted"],
                            ' stroke-dasharray="4 3" opacity="0.7"'))
        moved = "" if inc.move is None else move_text(inc.move)  # only the start has none
        tip = tooltip([f"P{index}: promoted at step {inc.step}", moved])
        parts.append(f"<g>{tip}" + text(x, top - 10, f"P{index}", anchor="middle", cls="tick",
                                         fill=COLORS["promoted"], weight="bold") + "</g>")
    for series, offset in (("dev", -3.0), ("val", 3.0)):
        parts += _series(report, incs, series, offset, xs, ys, last)
    parts += _legend(left + 8, 16, [("dev", "dev (screening seeds)", "line"),
                                    ("val", "val", "line")],
                     note="bands: 95% t-interval of the mean over tasks")
    parts.append(svg_close())
    return "".join(parts)


def _series(report: RunReport, incs: list[Incumbent], series: str, offset: float,
            xs: Scale, ys: Scale, last: int) -> list[str]:
    color = COLORS[series]
    out: list[str] = []
    path: list[str] = []
    for index, inc in enumerate(incs):
        iv: Interval | None = getattr(inc, series)
        end = incs[index + 1].step if index + 1 < len(incs) else last
        if iv is None:
            path.append("")  # a gap: this incumbent has no attempts on the stream
            continue
        x0, x1, y = xs(inc.step), xs(end), ys(iv.mean)
        if _finite(iv):
            out.append(f'<rect x="{num(x0)}" y="{num(ys(iv.high))}" width="{num(x1 - x0)}" '
                       f'height="{num(ys(iv.low) - ys(iv.high))}" fill="{color}" '
                       'fill-opacity="0.14"/>')
        joined = path and path[-1]
        path.append(f"{'L' if joined else 'M'}{num(x0)} {num(y)} H{num(x1)}")
        mark = [f"{series} after step {inc.step}" if inc.step else f"{series} at the start",
                _interval_lines(iv), f"config {inc.fingerprint[:12]}"]
        if inc.move is not None:
            mark.insert(1, f"promoted {move_text(inc.move)}")
        bar = (_vline(x0 + offset, ys(iv.high), ys(iv.low), color, ' stroke-width="2"')
               if _finite(iv) else "")
        out.append(f'<g class="mark">{tooltip(mark)}{bar}<circle cx="{num(x0 + offset)}" '
                   f'cy="{num(y)}" r="4.5" fill="{color}" stroke="#fff"/></g>')
    segments = " ".join(p for p in path if p)
    if segments:
        out.insert(0, f'<path d="{segments}" fill="none" stroke="{color}" stroke-width="2.5"/>')
    return out


def _legend(x: float, y: float, items: list[tuple[str, str, str]], note: str = "") -> list[str]:
    out = []
    for key, label, kind in items:
        color = COLORS[key]
        if kind == "line":
            out.append(_hline(x, x + 18, y - 4, color, ' stroke-width="3"'))
        else:
            out.append(f'<circle cx="{num(x + 9)}" cy="{num(y - 4)}" r="5" fill="{color}"/>')
        out.append(text(x + 24, y, label, cls="legend"))
        x += 34 + 7 * len(label)
    if note:
        out.append(text(x + 10, y, note, cls="note"))
    return out


# -- forest plot --------------------------------------------------------------------------

def _bounds(block: PairedStats | None) -> tuple[float | None, float | None, float | None]:
    if block is None:
        return None, None, None
    return number(block.effect), number(block.ci_low), number(block.ci_high)


def _dev_blocks(d: CandidateRecord) -> list[tuple[str, PairedStats | None]]:
    """The screening and confirmation blocks of a decision (None where it has none)."""
    if d.dev is None:
        return [("screen", None), ("confirm", None)]
    return [("screen", d.dev.screen), ("confirm", d.dev.confirm)]


def _decision_tooltip(d: CandidateRecord) -> list[str]:
    lines = [f"step {d.step}: {move_text(d.move)}  [{d.verdict}]",
             f"proposed by {d.proposer}: {d.reason}"]
    for name, block in _dev_blocks(d):
        effect, low, high = _bounds(block)
        if effect is not None and block is not None:
            lines.append(f"{name}: {effect:+.3f} [{fmt(low, '+.3f')} .. {fmt(high, '+.3f')}], "
                         f"p={fmt(number(block.p_value), '.3g')}, {block.n_tasks} tasks")
    for gate in d.gates:
        lines.append(f"{'✓' if gate.passed else '✗'} {gate.name}: {gate.reason}")
    if d.why:
        lines.append(f"· {d.why}")
    return lines


def forest_plot(report: RunReport) -> str:
    """One row per decision: screening and confirmation effect with its interval."""
    label = "forest plot of every candidate's dev effect with its interval"
    rows = report.decisions
    if not rows:
        return _empty("chart-forest", label, "no candidate was tried")
    marks: list[float] = [0.0]
    for d in rows:
        for _, block in _dev_blocks(d):
            marks += [v for v in _bounds(block) if v is not None]
    lo, hi = padded(marks, 0.04)
    row_h, top, bottom, left, right = 22, 44, 36, 380, 215
    height = top + row_h * len(rows) + bottom
    xs = Scale(lo, hi, left, WIDTH - right)
    parts = [svg_open("chart-forest", WIDTH, height, label)]
    for tick in nice_ticks(lo, hi, 6):
        x = xs(tick)
        parts.append(_vline(x, top, height - bottom, COLORS["grid"]))
        parts.append(text(x, height - bottom + 16, format(tick, "+.2f"), anchor="middle",
                          cls="tick"))
    parts.append(text((left + WIDTH - right) / 2, height - 4,
                      "dev effect (mean per-task score difference, candidate − incumbent)",
                      anchor="middle", cls="axis-label"))
    for index, d in enumerate(rows):
        parts.append(_forest_row(d, top + index * row_h, row_h, xs, left, right,
                                 stripe=d.step % 2 == 1))
    parts.append(_vline(xs(0.0), top - 4, height - bottom, COLORS["zero"], ' stroke-width="1.2"'))
    parts += _legend(8, 16, [("promoted", "promoted", "dot"), ("rejected", "rejected", "dot"),
                             ("skipped", "skipped", "dot")],
                     note="● screening   ◆ confirmation (fresh seeds)   "
                          "lines: intervals as journaled (1 − 2α)")
    parts.append(text(8, top - 8, "step · move", cls="axis-label"))
    parts.append(text(WIDTH - right + 8, top - 8, "verdict · effect", cls="axis-label"))
    parts.append(svg_close())
    return "".join(parts)


def _forest_row(d: CandidateRecord, y0: float, row_h: float, xs: Scale, left: float,
                right: float, *, stripe: bool) -> str:
    verdict = kind = d.verdict  # one of three words (forge.journal.records): safe in a class
    color = COLORS[kind]
    mid = y0 + row_h / 2
    out = [f'<g class="decision {kind}">', tooltip(_decision_tooltip(d))]
    if verdict == "promoted" or stripe:
        fill = "#dafbe1" if verdict == "promoted" else "#f6f8fa"
        out.append(f'<rect x="0" y="{num(y0)}" width="{WIDTH}" height="{num(row_h)}" '
                   f'fill="{fill}"/>')
    name = f"{d.step} · {move_text(d.move)}"
    if len(name) > 54:
        name = name[:53] + "…"
    out.append(text(8, mid + 4, name, cls="row-label",
                    weight="bold" if verdict == "promoted" else None))
    marks, shown = _effect_marks(d, xs, mid, color)
    out += marks
    if not shown:
        out.append(text(xs.start + 4, mid + 4, "not measured", cls="note"))
    mark = "★ promoted" if verdict == "promoted" else verdict
    out.append(text(WIDTH - right + 8, mid + 4, mark, fill=color, cls="row-label",
                    weight="bold" if verdict == "promoted" else None))
    out.append(text(WIDTH - 8, mid + 4, " / ".join(shown), anchor="end", cls="tick"))
    out.append("</g>")
    return "".join(out)


def _effect_marks(d: CandidateRecord, xs: Scale, mid: float, color: str
                  ) -> tuple[list[str], list[str]]:
    """The interval and point of each dev block measured (screening a circle,
    confirmation a diamond below it), and each block's effect as text."""
    out: list[str] = []
    shown: list[str] = []
    confirmed = d.dev is not None and d.dev.confirm is not None
    for (name, block), dy, width in zip(_dev_blocks(d), (-3.0, 4.0), (2.0, 3.5), strict=True):
        effect, low, high = _bounds(block)
        if effect is None:
            continue
        shown.append(f"{effect:+.3f}")
        y = mid + (dy if confirmed else 0.0)
        # An unknown bound (fewer than two tasks) runs to the edge, dashed.
        x_lo = xs.clamp(low) if low is not None else xs.start
        x_hi = xs.clamp(high) if high is not None else xs.end
        dash = ' stroke-dasharray="3 2"' if low is None or high is None else ""
        out.append(_hline(x_lo, x_hi, y, color, f' stroke-width="{width}"{dash}'))
        x = xs.clamp(effect)
        if name == "screen":
            out.append(f'<circle cx="{num(x)}" cy="{num(y)}" r="4" fill="{color}"/>')
        else:
            out.append(f'<path d="M{num(x)} {num(y - 5.5)} l5.5 5.5 l-5.5 5.5 l-5.5 -5.5 z" '
                       f'fill="{color}" stroke="#fff" stroke-width="0.8"/>')
    return out, shown


# -- budget ---------------------------------------------------------------------------------

def budget_chart(report: RunReport) -> str:
    """Rollouts spent after each decision; promotions marked, the budget drawn if near."""
    label = "rollouts spent over the run"
    points = _budget_points(report)
    rollouts = report.info.options.budget.rollouts
    limit = None if rollouts is None else float(rollouts)
    top_value = max(p[1] for p in points)
    show_limit = limit is not None and limit <= 1.25 * max(top_value, 1.0)
    height, left, right, top, bottom = 280, 72, 24, 40, 46
    ys_hi = max(top_value, limit if show_limit and limit else 0.0, 1.0) * 1.06
    xs = Scale(0, max(len(points) - 1, 1), left, WIDTH - right)
    ys = Scale(0, ys_hi, height - bottom, top)
    parts = [svg_open("chart-budget", WIDTH, height, label)]
    parts += _y_grid(ys, left, WIDTH - right, nice_ticks(0, ys_hi, 5), ",.0f")
    every = max(1, math.ceil(report.last_step / 20))
    parts += _step_ticks(points, xs, top, height - bottom, every)
    parts.append(text((left + WIDTH - right) / 2, height - 8, "decisions in journal order "
                      "(tick: first decision of a step)", anchor="middle", cls="axis-label"))
    line = " ".join(f"{'M' if i == 0 else 'L'}{num(xs(i))} {num(ys(v))}"
                    for i, (_, v, _) in enumerate(points))
    base = f"L{num(xs(len(points) - 1))} {num(ys(0))} L{num(xs(0))} {num(ys(0))} Z"
    parts.append(f'<path d="{line} {base}" fill="{COLORS["budget"]}" fill-opacity="0.12"/>')
    parts.append(f'<path d="{line}" fill="none" stroke="{COLORS["budget"]}" '
                 'stroke-width="2.5"/>')
    parts += _budget_marks(points, xs, ys)
    if show_limit and limit is not None:
        parts.append(_hline(left, WIDTH - right, ys(limit), COLORS["rejected"],
                            ' stroke-dasharray="6 4" stroke-width="1.5"'))
        parts.append(text(WIDTH - right - 4, ys(limit) - 6, f"budget {limit:,.0f} rollouts",
                          anchor="end", cls="tick", fill=COLORS["rejected"]))
    parts += _legend(left + 8, 16, [("budget", "rollouts spent", "line"),
                                    ("promoted", "promotion", "dot")])
    parts.append(svg_close())
    return "".join(parts)


#: A point of the budget chart: what it is, rollouts spent by then, its decision if any.
_BudgetPoint = tuple[str, float, CandidateRecord | None]


def _budget_points(report: RunReport) -> list[_BudgetPoint]:
    """Rollouts spent after the start config, each decision and the test split."""
    points: list[_BudgetPoint] = []
    spent = float(report.start.rollouts_total)
    points.append(("start config evaluated", spent, None))
    for d in report.decisions:
        if d.rollouts_total is not None:  # illegal proposals carry no totals
            spent = float(d.rollouts_total)
        points.append((f"step {d.step}: {move_text(d.move)} [{d.verdict}]", spent, d))
    if report.end is not None:
        points.append(("after the test split", float(report.end.rollouts_used), None))
    return points


def _step_ticks(points: list[_BudgetPoint], xs: Scale, top: float, axis_y: float,
                every: int) -> list[str]:
    """A grid line and label at the first decision of every ``every``-th step."""
    parts: list[str] = []
    seen: set[int] = set()
    for index, (_, _, rec) in enumerate(points):
        if rec is not None and rec.step not in seen:
            seen.add(rec.step)
            if (rec.step - 1) % every == 0:
                parts.append(_vline(xs(index), top, axis_y, COLORS["grid"]))
                parts.append(text(xs(index), axis_y + 18, rec.step,
                                  anchor="middle", cls="tick"))
    return parts


def _budget_marks(points: list[_BudgetPoint], xs: Scale, ys: Scale) -> list[str]:
    """A dot per point with its tooltip; promotions larger, in their colour."""
    parts: list[str] = []
    for index, (what, value, rec) in enumerate(points):
        promoted = rec is not None and rec.verdict == "promoted"
        cost = number(rec.cost_total) if rec is not None else None
        tip = tooltip([what, f"{value:,.0f} rollouts spent",
                       *([f"cost so far {cost:,.4g}"] if cost is not None else [])])
        fill = COLORS["promoted"] if promoted else COLORS["budget"]
        radius = 5 if promoted else 2.5
        parts.append(f'<g class="mark">{tip}<circle cx="{num(xs(index))}" '
                     f'cy="{num(ys(value))}" r="{radius}" fill="{fill}"/></g>')
    return parts


# -- start -> final per split ------------------------------------------------------------

def split_chart(blocks: list[tuple[str, SplitDelta | TestRecord]], chart_id: str) -> str:
    """Final − start delta with its 95% interval, one row per split (test highlighted)."""
    label = "start to final delta with 95% interval per split"
    rows = [(name, b, delta) for name, b in blocks if (delta := number(b.delta)) is not None]
    if not rows:
        return _empty(chart_id, label, "no start-to-final comparison was recorded")
    values = [0.0] + [v for _, b, delta in rows for v in (delta, number(b.ci_low),
                                                          number(b.ci_high))
                      if v is not None]
    lo, hi = padded(values, 0.08)
    row_h, top, bottom, left, right = 30, 12, 40, 90, 330
    height = top + row_h * len(rows) + bottom
    xs = Scale(lo, hi, left, WIDTH - right)
    parts = [svg_open(chart_id, WIDTH, height, label)]
    for tick in nice_ticks(lo, hi, 6):
        parts.append(_vline(xs(tick), top, height - bottom, COLORS["grid"]))
        parts.append(text(xs(tick), height - bottom + 16, format(tick, "+.2f"),
                          anchor="middle", cls="tick"))
    parts.append(text((left + WIDTH - right) / 2, height - 6, "final − start (mean score)",
                      anchor="middle", cls="axis-label"))
    for index, (name, b, delta) in enumerate(rows):
        mid = top + index * row_h + row_h / 2
        color = COLORS["promoted"] if name == "test" else COLORS["axis"]
        low, high = number(b.ci_low), number(b.ci_high)
        summary = (f"{fmt(number(b.start))} → {fmt(number(b.final))}   "
                   f"Δ {delta:+.3f} [{fmt(low, '+.3f')} .. {fmt(high, '+.3f')}]")
        parts.append(f'<g class="mark">{tooltip([name, summary])}')
        parts.append(text(left - 10, mid + 5, name, anchor="end", cls="row-label",
                          weight="bold" if name == "test" else None))
        if low is not None and high is not None:
            parts.append(_hline(xs(low), xs(high), mid, color, ' stroke-width="4"'))
        parts.append(f'<circle cx="{num(xs(delta))}" cy="{num(mid)}" r="6" fill="{color}" '
                     'stroke="#fff"/>')
        parts.append(text(WIDTH - right + 12, mid + 5, summary, cls="row-label") + "</g>")
    parts.append(_vline(xs(0.0), top, height - bottom, COLORS["zero"], ' stroke-width="1.2"'))
    parts.append(svg_close())
    return "".join(parts)
