"""``forge search BENCH``: search for a better config, or ``--resume`` a run."""

from __future__ import annotations

import contextlib
import shlex
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from forge._util.interrupt import RunInterrupted, received
from forge.bench.loader import load_bench
from forge.commands._stdout import stdout_for_json
from forge.commands.common import (
    ExecutorOption,
    RayAddressOption,
    WorkersOption,
    err,
    out,
    print_json,
)
from forge.config.registry import load_config
from forge.errors import ExecutorLost, OptionError, StartFailed
from forge.evaluation.evaluate import DEFAULT_SEED
from forge.executors import ExecutorSettings, executor_class
from forge.journal import new_run_id
from forge.proposers import PROPOSERS
from forge.runtime import runtime_first_moves
from forge.search.outcome import SearchOutcome
from forge.search.progress import SearchProgress

if TYPE_CHECKING:
    from forge.report.live import LiveView

__all__ = ["register", "search_command"]

#: Where run folders go (as ``forge.search.launch.DEFAULT_JOURNALS``, which is imported late).
DEFAULT_JOURNALS = Path("journals")


@stdout_for_json  # a harness that prints cannot break the JSON
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
        "--candidates", min=1,
        help="moves of different settings per step (an enum among them brings its other "
             "choices too)")] = None,
    seed: Annotated[int, typer.Option(
        "--seed", help="run seed: the same seed gives the same decisions")] = DEFAULT_SEED,
    run_id: Annotated[str | None, typer.Option(
        "--run-id", help="name the run folder (default: bench name and UTC time)")] = None,
    resume: Annotated[str | None, typer.Option(
        "--resume", metavar="RUN_ID",
        help="continue the run RUN_ID under --journals from where it stopped")] = None,
    journals: Annotated[Path, typer.Option("--journals", help="run folders")] = DEFAULT_JOURNALS,
    from_runtime: Annotated[Path | None, typer.Option(
        "--from-runtime", metavar="JOURNAL",
        help="try first the moves the runtime mutator proposed most often")] = None,
    no_test: Annotated[bool, typer.Option(
        "--no-test", help="end without the test split: quicker, but the run cannot be "
                          "promoted")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print only the result object")] = False,
) -> None:
    """Search for a better config: one move at a time, screened, confirmed and gated."""
    from forge.report.live import LiveView, live_progress

    if executor is not None:
        executor_class(executor)  # an unknown name, before anything is read
    if PROPOSERS.get(proposer) is None:
        raise OptionError(f"expected one of {', '.join(PROPOSERS.names())}, got {proposer!r}",
                          option="--proposer")
    view = LiveView(err if as_json else out)
    progress = None if as_json else live_progress(out, SearchProgress())  # None off a terminal
    if resume is not None:
        if from_runtime is not None:
            raise OptionError("a resumed run keeps the first moves it started with; not "
                              "with --resume", option="--from-runtime")
        if no_test:
            raise OptionError("a resumed run ends as it was started (with or without the "
                              "test split); not with --resume", option="--no-test")
        # The journaled executor, unless the command line names one.
        chosen = (ExecutorSettings(executor, workers, ray_address)
                  if executor is not None else None)
        outcome = _resume(resume, journals, view, progress, chosen)
    else:
        if bench_path is None:
            raise OptionError("give a BENCH, or --resume RUN_ID", option="BENCH")
        outcome = _launch(_Launch(
            bench_path=bench_path, config_file=config_file, max_steps=max_steps,
            patience=patience, budget_rollouts=budget_rollouts, proposer=proposer,
            executor=executor, workers=workers, ray_address=ray_address, k=k,
            candidates=candidates, seed=seed, run_id=run_id, journals=journals,
            from_runtime=from_runtime, run_test=not no_test, as_json=as_json), view,
            progress)
    if as_json:
        view.failures(outcome)  # on stderr, with the decisions
        print_json(outcome.as_json())
    else:
        view.summary(outcome, _next_steps(outcome, journals))
    failed = outcome.first_failure
    if failed is not None:
        # The search journaled its stop; the exit says it could not start.
        raise StartFailed(outcome.run_id, task_id=failed.task_id, attempt=failed.attempt,
                          stop=failed.stop, error=failed.error, unscored=failed.unscored)


@dataclass(frozen=True)
class _Launch:
    """The command line of a new search."""

    bench_path: Path
    config_file: Path | None
    max_steps: int | None
    patience: int | None
    budget_rollouts: int | None
    proposer: str
    executor: str | None
    workers: int | None
    ray_address: str | None
    k: int | None
    candidates: int | None
    seed: int
    run_id: str | None
    journals: Path
    from_runtime: Path | None
    run_test: bool
    as_json: bool


def _resume(run_id: str, journals: Path, view: LiveView, progress: SearchProgress | None,
            executor: ExecutorSettings | None) -> SearchOutcome:
    """``--resume RUN_ID``: the run continued with its journaled options."""
    from forge.search.launch import resume_search

    if progress is not None:
        progress.resume = _command("search --resume", run_id, journals)
    with _resumable(run_id, journals):
        return resume_search(run_id, journals=journals, on_record=view.on_record,
                             executor=executor, progress=progress)


def _launch(line: _Launch, view: LiveView, progress: SearchProgress | None) -> SearchOutcome:
    """A new search of ``line.bench_path``."""
    from forge.search.launch import launch_search

    bench = load_bench(line.bench_path)
    start = load_config(line.config_file, bench.registry) if line.config_file else None
    first = None
    if line.from_runtime is not None:
        first = runtime_first_moves(line.from_runtime, bench.registry,
                                    start or bench.defaults)
        (err if line.as_json else out).print(
            f"runtime journal {line.from_runtime}: {len(first)} move(s) first in the queue"
            + (": " + ", ".join(str(m) for m in first) if first else ""),
            highlight=False, markup=False, soft_wrap=True)
    # Chosen here, so that an interruption can name the run to resume.
    run_id = line.run_id or new_run_id(bench.name)
    if progress is not None:
        progress.resume = _command("search --resume", run_id, line.journals)
    with _resumable(run_id, line.journals):
        return launch_search(bench, start=start, max_steps=line.max_steps,
                             patience=line.patience, budget_rollouts=line.budget_rollouts,
                             k=line.k, seed=line.seed, proposer=line.proposer,
                             candidates_per_step=line.candidates, run_id=run_id,
                             journals=line.journals, first_moves=first,
                             on_record=view.on_record,
                             executor=bench.executor_settings(line.executor, line.workers,
                                                              line.ray_address),
                             progress=progress, run_test=line.run_test)


def _next_steps(outcome: SearchOutcome, journals: Path) -> list[tuple[str, str]]:
    """The commands that take a finished run further, with what each does."""
    run_id = outcome.run_id
    steps = [(_command("journal show", run_id, journals),
              "every step: its move, gates and verdict")]
    if outcome.stop_reason != "start_failed":
        steps.insert(0, (_command("report", run_id, journals),
                         "the run's HTML report"))
    # Promotion needs the test comparison: a run ended without it (--no-test) is not
    # offered one it would refuse.
    if outcome.promotions and outcome.end.test.delta is not None:
        steps.append((_command("promote", run_id, journals),
                      "make the final config the default (after review)"))
    return steps


def _command(verb: str, run_id: str, journals: Path) -> str:
    """``forge VERB RUN``, with ``--journals`` when the run is not under the default."""
    command = f"forge {verb} {shlex.quote(run_id)}"
    if journals != DEFAULT_JOURNALS:
        command += f" --journals {shlex.quote(str(journals))}"
    return command


@contextlib.contextmanager
def _resumable(run_id: str, journals: Path) -> Iterator[None]:
    """A signal (:mod:`forge._util.interrupt`), or an executor that can run nothing more, ends
    the search with the command that resumes it, once the run folder exists; before,
    nothing was saved."""
    try:
        yield
    except KeyboardInterrupt:
        raise RunInterrupted(received() or signal.SIGINT, _resume_command(run_id, journals)
                             ) from None
    except ExecutorLost as exc:
        command = _resume_command(run_id, journals)
        raise ExecutorLost(f"{exc}; " + (f"resume with: {command}" if command
                                         else "nothing was saved")) from None


def _resume_command(run_id: str, journals: Path) -> str | None:
    if not (journals / run_id / "run.json").is_file():
        return None
    return _command("search --resume", run_id, journals)


def register(app: typer.Typer) -> None:
    """Add ``forge search`` to the app."""
    app.command("search")(search_command)
