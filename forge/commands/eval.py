"""``forge eval BENCH``: evaluate one config on one split, K attempts per task, scored.

Exit 0 when the evaluation ran and scored at least one attempt, even with failures
(the report says which); 1 when no attempt was scored at all, with one line on stderr
saying so after the usual output (a result with no score cannot pass for a green CI
step); 2 on bad input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from forge._util.bounds import MAX_K
from forge.bench.loader import Bench, check_attempts, load_bench
from forge.ci.unscored import ShareSide, reasons_text
from forge.commands._stdout import json_stdout
from forge.commands.common import (
    ExecutorFlags,
    ExecutorOption,
    RayAddressOption,
    RayConnectTimeoutOption,
    WorkersOption,
    err,
    out,
    print_json,
    write_for_option,
)
from forge.config.registry import Config, load_config, parse_assignment
from forge.errors import OptionError
from forge.evaluation.evaluate import DEFAULT_SEED, evaluate
from forge.executors import check_executor
from forge.report import summary_table, task_table
from forge.report.failures import failure_lines, failure_warning
from forge.report.power import power_lines
from forge.results.failures import FailureTally
from forge.results.model import AttemptResult, EvalResult, save_result
from forge.stats.power import Power, estimate_power

__all__ = ["eval_command", "register"]


def eval_command(
    bench_path: Annotated[Path, typer.Argument(metavar="BENCH",
                                               help="bench file or folder with bench.yaml")],
    split: Annotated[str, typer.Option(
        "--split", metavar="SPLIT",
        help="which of the bench's splits to evaluate: dev, val, test, or another the "
             "bench file names under splits")] = "dev",
    config_file: Annotated[Path | None, typer.Option("--config", help="config YAML")] = None,
    assignments: Annotated[list[str] | None, typer.Option(
        "--set", help="override one setting: key=value (repeatable)")] = None,
    k: Annotated[int | None, typer.Option("-k", min=1, max=MAX_K,
                                          help="attempts per task")] = None,
    seed: Annotated[int, typer.Option("--seed", help="run seed")] = DEFAULT_SEED,
    concurrency: Annotated[int | None, typer.Option(
        "--concurrency", min=1,
        help="attempts in flight at once (default: the bench's rollouts.concurrency)")] = None,
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
    ray_connect_timeout: RayConnectTimeoutOption = None,
) -> None:
    """Evaluate one config on one split: K attempts per task, scored."""
    # A harness that prints cannot break the JSON: stdout is the document's from the
    # first line on (the bench's harness is imported, and its attempts run, within).
    with json_stdout(as_json):
        bench = load_bench(bench_path)
        config = _config(bench, config_file, assignments)
        tasks = bench.tasks(split)  # a missing split is bad input before any progress bar appears
        check_attempts(k or bench.spec.rollouts.k, len(set(task_ids)) if task_ids else len(tasks),
                       split, option="-k")
        if save is not None and save.is_dir():  # found now, not after the whole evaluation
            raise OptionError(f"{save} is a folder; expected a file path", option="--save")
        flags = ExecutorFlags(executor, workers, ray_address, ray_connect_timeout)
        settings = flags.over(bench.executor_settings(), whose="the bench's executor")
        check_executor(settings, bench.harness_spec)
        with flags.joining():
            result = _run_with_progress(bench, config, split=split, k=k, seed=seed,
                                        concurrency=concurrency, timeout_s=timeout_s,
                                        task_ids=task_ids, executor=settings, show=err.is_terminal)
        if save is not None:
            write_for_option("--save", save, save_result, result, save)
        _printed_note(result, save)
        failures = FailureTally.of(result.attempts, result.config_fingerprint)
        power = _power(bench, result)
        if as_json:
            _print_json_summary(result, failures, power)
        else:
            out.print(summary_table(result))
            for line in power_lines(power, tasks=f"{split} tasks", source="these tasks"):
                out.print(line, highlight=False, soft_wrap=True)
            # With nothing scored, the line below says more than "the scores rest on...".
            for line in failure_lines(failures, warn=bool(result.n_scored)):
                out.print(line, highlight=False, soft_wrap=True)
            if per_task:
                out.print(task_table(result))
            if save is not None:
                out.print(f"saved {save}")
        _fail_if_nothing_scored(result)


def _fail_if_nothing_scored(result: EvalResult) -> None:
    """Exit 1 with one line when no attempt was scored: there is no pass rate at all,
    and a script or CI step that only reads the exit code must not see a success."""
    if result.n_scored:
        return
    why = reasons_text(ShareSide.of(result.attempts).reasons)
    err.print(f"forge: eval failed: no attempt was scored: all {result.n_attempts} attempts "
              f"on {result.split} ended unscored ({why})", highlight=False, markup=False,
              soft_wrap=True)
    raise typer.Exit(1)


def _config(bench: Bench, config_file: Path | None, assignments: list[str] | None) -> Config:
    """The config to evaluate: the file's or the bench's defaults, with the --set ones."""
    config = load_config(config_file, bench.registry) if config_file else bench.defaults
    if assignments:
        config = bench.registry.with_values(config, dict(parse_assignment(a)
                                                         for a in assignments))
    return config


def _printed_note(result: EvalResult, save: Path | None) -> None:
    """On stderr: how many attempts printed on stdout, and where what they printed is."""
    printed = sum(1 for a in result.attempts if a.stdout is not None)
    if not printed:
        return
    where = (f"what each printed is in {save}" if save is not None
             else "--save FILE keeps what each printed")
    err.print(f"forge: {printed} of {result.n_attempts} attempts printed on stdout; {where} "
              "(the attempt's \"stdout\")", highlight=False, markup=False, soft_wrap=True)


def _power(bench: Bench, result: EvalResult) -> Power:
    """What a comparison of two configs on these tasks would detect (forge.stats.power),
    at the bench's alpha, from this config's scored attempts."""
    scores = [[a.score.value for a in t.scored_attempts if a.score is not None]
              for t in result.tasks]
    return estimate_power(scores, n_tasks=len(result.tasks), k=result.k,
                          alpha=bench.spec.gates.alpha)


def _print_json_summary(result: EvalResult, failures: FailureTally, power: Power) -> None:
    # The frozen contract's keys first (the reasons are not in it), then what was added.
    print_json({**result.summary(), "power": power.model_dump(mode="json")})
    warning = failure_warning(failures) if result.n_scored else None
    if warning is not None:  # stdout holds the summary alone; this goes to stderr
        err.print(Text("forge: ").append_text(warning), highlight=False, soft_wrap=True)


def _run_with_progress(bench: Bench, config: Config, *, show: bool, **options: Any
                       ) -> EvalResult:
    if not show:
        return evaluate(bench, config, **options)
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                        MofNCompleteColumn(), TaskProgressColumn(),
                        TextColumn("pass {task.fields[rate]}"), TimeElapsedColumn(),
                        TimeRemainingColumn(), console=err, transient=True)
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


def register(app: typer.Typer) -> None:
    """Add ``forge eval`` to the app."""
    app.command("eval")(eval_command)
