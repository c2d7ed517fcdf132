"""The ``forge`` command line. Bad input: one line on stderr, exit 2, no traceback."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from forge.bench import BenchFile, load_bench
from forge.commands import register_all
from forge.compare import diff_results
from forge.errors import EvaluationInterrupted, ForgeError, UserError
from forge.evaluate import DEFAULT_SEED, evaluate
from forge.executors import EXECUTORS, ExecutorSettings, check_executor
from forge.registry import Registry, load_config, load_registry, parse_assignment
from forge.report import diff_table, registry_table, summary_table, task_table
from forge.results import AttemptResult, EvalResult, load_result, save_result
from forge.runtime import RuntimeReport, runtime_first_moves, summarize_runtime_journal

__all__ = ["app", "main"]

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Find a better configuration for an agent harness, one setting at a "
                       "time, and prove it before it ships.")
registry_app = typer.Typer(no_args_is_help=True, help="Inspect setting registries.")
app.add_typer(registry_app, name="registry")
runtime_app = typer.Typer(no_args_is_help=True, help="Read the runtime mutator's journal.")
app.add_typer(runtime_app, name="runtime")

_out = Console()
_err = Console(stderr=True)


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False) + "\n")


# Shared by `eval` and `search`: where attempts run.
ExecutorOption = Annotated[str | None, typer.Option(
    "--executor", help="where attempts run: local | process | ray (default: the bench's)")]
WorkersOption = Annotated[int | None, typer.Option(
    "--workers", min=1, help="worker processes or Ray actors (default: the cores)")]
RayAddressOption = Annotated[str | None, typer.Option(
    "--ray-address", help="join this Ray cluster (default: start a local one)")]


@app.command("eval")
def eval_command(
    bench_path: Annotated[Path, typer.Argument(metavar="BENCH",
                                               help="bench file or folder with bench.yaml")],
    split: Annotated[str, typer.Option("--split", help="split to evaluate")] = "dev",
    config_file: Annotated[Path | None, typer.Option("--config", help="config YAML")] = None,
    assignments: Annotated[list[str] | None, typer.Option(
        "--set", help="override one setting: key=value (repeatable)")] = None,
    k: Annotated[int | None, typer.Option("-k", min=1, help="attempts per task")] = None,
    seed: Annotated[int, typer.Option("--seed", help="run seed")] = DEFAULT_SEED,
    concurrency: Annotated[int | None, typer.Option("--concurrency", min=1)] = None,
    timeout_s: Annotated[float | None, typer.Option("--timeout", min=0.001,
                                                    help="per-attempt timeout (s)")] = None,
    task_ids: Annotated[list[str] | None, typer.Option(
        "--task", help="evaluate only this task (repeatable)")] = None,
    save: Annotated[Path | None, typer.Option("--save", help="write the full result")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print only the summary JSON")] = False,
    per_task: Annotated[bool, typer.Option("--per-task", help="show a row per task")] = False,
    executor: ExecutorOption = None,
    workers: WorkersOption = None,
    ray_address: RayAddressOption = None,
) -> None:
    """Evaluate one config on one split: K attempts per task, scored."""
    bench = load_bench(bench_path)
    config = load_config(config_file, bench.registry) if config_file else bench.defaults
    if assignments:
        config = bench.registry.with_values(config, dict(parse_assignment(a)
                                                         for a in assignments))
    bench.tasks(split)  # a missing split is bad input before any progress bar appears
    if save is not None and save.is_dir():  # found now, not after the whole evaluation
        raise UserError(f"--save: {save} is a folder; expected a file path")
    settings = bench.executor_settings(executor, workers, ray_address)
    check_executor(settings, bench.harness_spec)
    result = _run_with_progress(bench, config, split=split, k=k, seed=seed,
                                concurrency=concurrency, timeout_s=timeout_s, task_ids=task_ids,
                                executor=settings, show=_err.is_terminal)
    if save is not None:
        try:
            save_result(result, save)
        except OSError as exc:
            raise UserError(f"--save: cannot write {save}: {exc.strerror or exc}") from None
    if as_json:
        _print_json(result.summary())
        return
    _out.print(summary_table(result))
    if per_task:
        _out.print(task_table(result))
    if save is not None:
        _out.print(f"saved {save}")


def _run_with_progress(bench: Any, config: Any, *, show: bool, **options: Any) -> EvalResult:
    if not show:
        return evaluate(bench, config, **options)
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                        MofNCompleteColumn(), TaskProgressColumn(),
                        TextColumn("pass {task.fields[rate]}"), TimeElapsedColumn(),
                        TimeRemainingColumn(), console=_err, transient=True)
    counts = {"scored": 0, "passed": 0}
    with progress:
        total = len(bench.tasks(options["split"]) if not options.get("task_ids")
                    else dict.fromkeys(options["task_ids"]))
        bar = progress.add_task(options["split"], total=total * (options.get("k")
                                                                 or bench.spec.rollouts.k),
                                rate="—")

        def on_attempt(a: AttemptResult) -> None:
            if a.scored:
                counts["scored"] += 1
                counts["passed"] += int(a.passed)
            rate = (f"{100 * counts['passed'] / counts['scored']:.1f}%"
                    if counts["scored"] else "—")
            progress.update(bar, advance=1, rate=rate)

        return evaluate(bench, config, on_attempt=on_attempt, **options)


@app.command("search")
def search_command(
    bench_path: Annotated[Path | None, typer.Argument(
        metavar="BENCH", help="bench file or folder with bench.yaml")] = None,
    config_file: Annotated[Path | None, typer.Option("--config", help="start config")] = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps", min=0)] = None,
    patience: Annotated[int | None, typer.Option("--patience", min=1)] = None,
    budget_rollouts: Annotated[int | None, typer.Option("--budget-rollouts", min=1)] = None,
    proposer: Annotated[str, typer.Option(
        "--proposer", help="auto | sweep | optuna | reflect | llm (a model proposes one "
                           "move per step; needs FORGE_OPENAI_BASE_URL, optionally "
                           "FORGE_OPENAI_MODEL and FORGE_OPENAI_API_KEY)")] = "auto",
    executor: ExecutorOption = None,
    workers: WorkersOption = None,
    ray_address: RayAddressOption = None,
    k: Annotated[int | None, typer.Option("-k", min=1, help="attempts per task")] = None,
    candidates: Annotated[int | None, typer.Option(
        "--candidates", min=1, help="candidate moves per step")] = None,
    seed: Annotated[int, typer.Option("--seed")] = DEFAULT_SEED,
    run_id: Annotated[str | None, typer.Option("--run-id")] = None,
    resume: Annotated[str | None, typer.Option("--resume", metavar="RUN_ID")] = None,
    journals: Annotated[Path, typer.Option("--journals", help="run folders")] = Path("journals"),
    from_runtime: Annotated[Path | None, typer.Option(
        "--from-runtime", metavar="JOURNAL",
        help="try first the moves the runtime mutator proposed most often")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print only the result object")] = False,
) -> None:
    """Search for a better config: one move at a time, screened, confirmed and gated."""
    from forge.launch import launch_search, resume_search
    from forge.proposers import PROPOSERS
    from forge.report.live import SearchView

    if executor is not None and executor not in EXECUTORS:
        raise UserError(f"--executor {executor!r}: expected one of {', '.join(EXECUTORS)}")
    if proposer not in PROPOSERS.names():
        raise UserError(f"--proposer {proposer!r}: expected one of {', '.join(PROPOSERS.names())}")
    view = SearchView(_err if as_json else _out)
    if resume is not None:
        if from_runtime is not None:
            raise UserError("--from-runtime: a resumed run keeps the first moves it started "
                            "with; not with --resume")
        # The journaled executor, unless the command line names one.
        chosen = (ExecutorSettings(executor, workers, ray_address)
                  if executor is not None else None)
        outcome = resume_search(resume, journals=journals, on_record=view.on_record,
                                executor=chosen)
    else:
        if bench_path is None:
            raise UserError("search: give a BENCH, or --resume RUN_ID")
        bench = load_bench(bench_path)
        start = load_config(config_file, bench.registry) if config_file else None
        first = None
        if from_runtime is not None:
            first = runtime_first_moves(from_runtime, bench.registry, start or bench.defaults)
            (_err if as_json else _out).print(
                f"runtime journal {from_runtime}: {len(first)} move(s) first in the queue"
                + (": " + ", ".join(str(m) for m in first) if first else ""),
                highlight=False, markup=False, soft_wrap=True)
        outcome = launch_search(bench_path, start=start, max_steps=max_steps, patience=patience,
                                budget_rollouts=budget_rollouts, k=k, seed=seed,
                                proposer=proposer, candidates_per_step=candidates,
                                run_id=run_id, journals=journals, first_moves=first,
                                on_record=view.on_record,
                                executor=bench.executor_settings(executor, workers,
                                                                 ray_address))
    if as_json:
        _print_json(outcome.as_json())
    else:
        view.summary(outcome)


@app.command("diff")
def diff_command(
    a: Annotated[Path, typer.Argument(metavar="A.json")],
    b: Annotated[Path, typer.Argument(metavar="B.json")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Compare two saved results task by task (B against A), paired by seed."""
    ra, rb = load_result(a), load_result(b)
    names = (str(a), str(b))
    diff = diff_results(ra, rb, names=names)
    if as_json:
        _print_json({
            "mean_delta": diff.mean_delta,
            "tasks": [{"id": t.task_id, "pairs": t.n_pairs, "score_a": t.score_a,
                       "score_b": t.score_b, "delta": t.delta, "pass_a": t.pass_a,
                       "pass_b": t.pass_b} for t in diff.tasks],
            "only_in_a": diff.only_in_a, "only_in_b": diff.only_in_b,
        })
        return
    _out.print(diff_table(diff, names))
    mean = "—" if diff.mean_delta is None else f"{diff.mean_delta:+.4f}"
    _out.print(f"mean Δ score over {len(diff.paired)} paired tasks: {mean}; "
               f"{len(diff.improved)} improved, {len(diff.regressed)} regressed")
    if diff.only_in_a or diff.only_in_b:
        _out.print(f"unmatched tasks: only in {a}: {', '.join(diff.only_in_a) or 'none'}; "
                   f"only in {b}: {', '.join(diff.only_in_b) or 'none'}")


@registry_app.command("show")
def registry_show(
    path: Annotated[Path, typer.Argument(metavar="REGISTRY")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Print a registry's settings, bounds and defaults."""
    registry = load_registry(path)
    if as_json:
        _print_json({**registry.model_dump(mode="json"), "digest": registry.digest})
        return
    _out.print(registry_table(registry))
    for signal, moves in registry.hints.items():
        _out.print(f"hint  {signal}: " + ", ".join(f"{t} {d}" for t, d in moves.items()))
    if registry.runtime is not None:
        rt = registry.runtime
        _out.print(f"runtime  allow: {', '.join(rt.allow) or 'nothing'}; "
                   f"max {rt.max_moves_per_run} moves per run")
        for rule in rt.rules:
            _out.print(f"  on {rule.on}: {rule.target} {rule.direction}")


@runtime_app.command("report")
def runtime_report(
    journal: Annotated[Path, typer.Argument(metavar="JOURNAL", help="runtime journal (JSONL)")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """How often each runtime rule fired: observed, applied, refused, and its moves."""
    report = summarize_runtime_journal(journal)
    if as_json:
        _print_json(report.as_json())
        return
    _out.print(_runtime_table(report))
    modes = ", ".join(f"{m} {n}" for m, n in report.modes.items()) or "none ended"
    registries = ", ".join(f"{n} ({d[:12]})" for d, n in report.registries.items()) or "—"
    _out.print(f"{report.records} records, {report.runs} runs ({modes}), "
               f"{report.runs_with_moves} with moves; registry {registries}",
               highlight=False, markup=False, soft_wrap=True)
    if report.restore_failures:
        _out.print(f"[red]{report.restore_failures} run(s) did not restore their config[/red]")


def _runtime_table(report: RuntimeReport) -> Table:
    """One row per (signal, rule): counts, refusal reasons, and the most frequent moves."""
    def moves(counter: Counter[tuple[str, Any, Any]], mark: str = "") -> list[str]:
        return [f"{mark}{t} {b!r}→{a!r} ×{n}" for (t, b, a), n in counter.most_common(3)]

    table = Table(title=f"runtime journal {escape(report.path)}", title_justify="left")
    table.add_column("signal → rule")
    for name in ("fired", "observed", "applied", "refused"):
        table.add_column(name, justify="right")
    table.add_column("refused because")
    table.add_column("moves (made or would-be; ✗ refused)")
    for row in report.rows:
        if row.target is None:
            table.add_row(f"{row.signal} → no rule", f"{row.no_rule}", "", "", "", "", "")
            continue
        table.add_row(f"{row.signal} → {row.target} {row.direction}", str(row.fired),
                      str(row.observed), str(row.applied), str(row.refused),
                      "\n".join(f"{r} ×{n}" for r, n in row.reasons.most_common()),
                      "\n".join(moves(row.moves) + moves(row.refused_moves, "✗ ")))
    return table


@app.command("schema")
def schema_command(
    which: Annotated[str, typer.Argument(help="registry, bench, or all")] = "all",
) -> None:
    """Print JSON Schemas of registry and bench files, for editor validation."""
    schemas = {"registry": Registry.model_json_schema(), "bench": BenchFile.model_json_schema()}
    if which == "all":
        _print_json(schemas)
    elif which in schemas:
        _print_json(schemas[which])
    else:
        raise UserError(f"schema: unknown kind {which!r}; expected registry, bench or all")


register_all(app)


def _usage_error(exc: BaseException) -> bool:
    """Typer's parser errors (bad option, missing argument) expose these two members;
    matching on them keeps us off typer's private exception module."""
    return hasattr(exc, "format_message") and isinstance(getattr(exc, "exit_code", None), int)


def main(argv: list[str] | None = None) -> int:
    """Entry point: bad input is one line and exit 2; Ctrl-C exits 130."""
    try:
        result = app(args=argv, standalone_mode=False)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt, EvaluationInterrupted):
        _err.print("forge: interrupted; nothing was saved", highlight=False)
        return 130
    except UserError as exc:
        _err.print(f"forge: error: {exc}", highlight=False, markup=False, soft_wrap=True)
        return 2
    except ForgeError as exc:
        _err.print(f"forge: {exc}", highlight=False, markup=False, soft_wrap=True)
        return 1
    except Exception as exc:
        if not _usage_error(exc):
            raise
        if type(exc).__name__ == "NoArgsIsHelpError":
            pass  # typer has printed the help already
        else:
            _err.print(f"forge: error: {exc.format_message()}",  # type: ignore[attr-defined]
                       highlight=False, markup=False, soft_wrap=True)
        return 2
    return result if isinstance(result, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
