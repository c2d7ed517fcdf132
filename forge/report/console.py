"""Console tables for the CLI. Only the CLI imports rich; the library logs."""

from __future__ import annotations

from rich.table import Table

from forge.compare import ResultDiff
from forge.registry import Registry
from forge.results import EvalResult
from forge.stats import mean_interval

__all__ = ["diff_table", "registry_table", "summary_table", "task_table"]


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None) -> str:
    return "—" if x is None else f"{x:.4g}"


def summary_table(result: EvalResult) -> Table:
    table = Table(title=f"{result.bench} · {result.split} · k={result.k} · seed={result.seed}",
                  show_header=False, title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value")
    rates = [t.pass_rate for t in result.tasks if t.pass_rate is not None]
    means = [t.mean_score for t in result.tasks if t.mean_score is not None]
    for label, values, point in (("pass rate", rates, result.pass_rate),
                                 ("mean score", means, result.mean_score)):
        ci = mean_interval(values)
        text = _pct(point) if label == "pass rate" else _num(point)
        if ci is not None and ci.n > 1:
            fmt = _pct if label == "pass rate" else _num
            text += f"  (95% CI {fmt(max(ci.low, 0.0))} – {fmt(min(ci.high, 1.0))}, {ci.n} tasks)"
        table.add_row(label, text)
    n_attempts = result.n_attempts
    table.add_row("tasks", str(len(result.tasks)))
    table.add_row("attempts", f"{n_attempts}: {result.n_scored} scored, "
                              f"{n_attempts - result.n_scored} unscored")
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(result.stop_reasons().items()))
    table.add_row("stop reasons", reasons or "—")
    scorer_failures = sum(1 for a in result.attempts
                          if a.stop_reason == "completed" and a.score is None)
    if scorer_failures:
        table.add_row("scorer failures", str(scorer_failures))
    lz = sum(1 for t in result.tasks if t.learning_zone)
    table.add_row("learning zone", f"{lz} tasks")
    for name, value in result.metrics.items():
        table.add_row(name, _num(value))
    table.add_row("config", result.config_fingerprint[:16])
    table.add_row("env", (result.env_fingerprint or "none")[:16])
    return table


def task_table(result: EvalResult) -> Table:
    table = Table(title="per task", title_justify="left")
    for col in ("task", "tags", "pass rate", "mean score", "scored", "unscored", "zone",
                "first error"):
        table.add_column(col)
    for t in result.tasks:
        error = next((a.error for a in t.attempts if a.error), None) or ""
        table.add_row(t.task_id, ",".join(t.tags), _pct(t.pass_rate), _num(t.mean_score),
                      str(t.n_scored), str(t.n_unscored), "●" if t.learning_zone else "",
                      error[:60])
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
        table.add_row(t.task_id, str(t.n_pairs), _num(t.score_a), _num(t.score_b), delta,
                      pdelta, style=style)
    return table


def registry_table(registry: Registry) -> Table:
    table = Table(title=f"registry {registry.name} · digest {registry.digest[:12]}",
                  title_justify="left")
    for col in ("setting", "type", "bounds", "default", "description"):
        table.add_column(col)
    for name, s in registry.settings.items():
        table.add_row(name, s.type, s.bounds_text(), repr(s.default), s.description)
    return table
