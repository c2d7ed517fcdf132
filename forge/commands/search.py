"""``forge search BENCH``: search for a better config, or ``--resume`` a run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from forge.bench import load_bench
from forge.commands._common import (
    ExecutorOption,
    RayAddressOption,
    WorkersOption,
    err,
    out,
    print_json,
)
from forge.errors import OptionError
from forge.evaluate import DEFAULT_SEED
from forge.executors import ExecutorSettings, executor_class
from forge.proposers import PROPOSERS
from forge.registry import load_config
from forge.runtime import runtime_first_moves

__all__ = ["register", "search_command"]


def search_command(
    bench_path: Annotated[Path | None, typer.Argument(
        metavar="BENCH", help="bench file or folder with bench.yaml")] = None,
    config_file: Annotated[Path | None, typer.Option("--config", help="start config")] = None,
    max_steps: Annotated[int | None, typer.Option(
        "--max-steps", min=0, help="stop after N steps (default: the bench's search.max_steps)"
    )] = None,
    patience: Annotated[int | None, typer.Option(
        "--patience", min=1,
        help="stop after N steps in a row without a promotion (default: the bench's)")] = None,
    budget_rollouts: Annotated[int | None, typer.Option(
        "--budget-rollouts", min=1,
        help="rollout budget: stop once N are spent, to within one screening chunk "
             "(default: the bench's search.budget)")] = None,
    proposer: Annotated[str, typer.Option(
        "--proposer", metavar="[" + "|".join(PROPOSERS.names()) + "]",
        help="who proposes the moves (default auto); llm: a model proposes one move per "
             "step, needs FORGE_OPENAI_BASE_URL, optionally FORGE_OPENAI_MODEL and "
             "FORGE_OPENAI_API_KEY")] = "auto",
    executor: ExecutorOption = None,
    workers: WorkersOption = None,
    ray_address: RayAddressOption = None,
    k: Annotated[int | None, typer.Option("-k", min=1, help="attempts per task")] = None,
    candidates: Annotated[int | None, typer.Option(
        "--candidates", min=1, help="candidate moves per step")] = None,
    seed: Annotated[int, typer.Option(
        "--seed", help="run seed: the same seed gives the same decisions")] = DEFAULT_SEED,
    run_id: Annotated[str | None, typer.Option(
        "--run-id", help="name the run folder (default: bench name and UTC time)")] = None,
    resume: Annotated[str | None, typer.Option(
        "--resume", metavar="RUN_ID",
        help="continue the run RUN_ID under --journals from where it stopped")] = None,
    journals: Annotated[Path, typer.Option("--journals", help="run folders")] = Path("journals"),
    from_runtime: Annotated[Path | None, typer.Option(
        "--from-runtime", metavar="JOURNAL",
        help="try first the moves the runtime mutator proposed most often")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print only the result object")] = False,
) -> None:
    """Search for a better config: one move at a time, screened, confirmed and gated."""
    from forge.launch import launch_search, resume_search
    from forge.report.live import SearchView, live_progress

    if executor is not None:
        executor_class(executor)  # an unknown name, before anything is read
    if PROPOSERS.get(proposer) is None:
        raise OptionError(f"expected one of {', '.join(PROPOSERS.names())}, got {proposer!r}",
                          option="--proposer")
    view = SearchView(err if as_json else out)
    progress = None if as_json else live_progress(out)  # None off a terminal: lines only
    if resume is not None:
        if from_runtime is not None:
            raise OptionError("a resumed run keeps the first moves it started with; not "
                              "with --resume", option="--from-runtime")
        # The journaled executor, unless the command line names one.
        chosen = (ExecutorSettings(executor, workers, ray_address)
                  if executor is not None else None)
        outcome = resume_search(resume, journals=journals, on_record=view.on_record,
                                executor=chosen, progress=progress)
    else:
        if bench_path is None:
            raise OptionError("give a BENCH, or --resume RUN_ID", option="BENCH")
        bench = load_bench(bench_path)
        start = load_config(config_file, bench.registry) if config_file else None
        first = None
        if from_runtime is not None:
            first = runtime_first_moves(from_runtime, bench.registry, start or bench.defaults)
            (err if as_json else out).print(
                f"runtime journal {from_runtime}: {len(first)} move(s) first in the queue"
                + (": " + ", ".join(str(m) for m in first) if first else ""),
                highlight=False, markup=False, soft_wrap=True)
        outcome = launch_search(bench_path, start=start, max_steps=max_steps, patience=patience,
                                budget_rollouts=budget_rollouts, k=k, seed=seed,
                                proposer=proposer, candidates_per_step=candidates,
                                run_id=run_id, journals=journals, first_moves=first,
                                on_record=view.on_record,
                                executor=bench.executor_settings(executor, workers,
                                                                 ray_address),
                                progress=progress)
    if as_json:
        print_json(outcome.as_json())
    else:
        view.summary(outcome)


def register(app: typer.Typer) -> None:
    """Add ``forge search`` to the app."""
    app.command("search")(search_command)
