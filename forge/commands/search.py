"""``forge search BENCH``: search for a better config, or ``--resume`` a run."""

from __future__ import annotations

import contextlib
import shlex
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from annotated_types import Ge
from pydantic.fields import FieldInfo

from forge._util.interrupt import received
from forge.bench.loader import BudgetSettings, load_bench
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
)
from forge.config.registry import load_config
from forge.errors import ClusterUnreachable, ExecutorLost, OptionError, RunInterrupted, StartFailed
from forge.executors import ExecutorSettings, executor_class
from forge.journal import load_run, new_run_id
from forge.journal.run import DEFAULT_JOURNALS
from forge.proposers import PROPOSERS
from forge.runtime import runtime_first_moves
from forge.search.launch import launch_search, resume_search, search_options
from forge.search.options import SearchOptions
from forge.search.outcome import SearchOutcome
from forge.search.progress import SearchProgress

if TYPE_CHECKING:
    from forge.report.live import LiveView

__all__ = ["register", "search_command"]

#: SearchOptions' fields as pydantic declares them (it sets this on its dataclasses).
_FIELDS: dict[str, FieldInfo] = SearchOptions.__pydantic_fields__  # type: ignore[attr-defined]


def _flag(name: str, *decls: str) -> Any:
    """The typer option of :class:`SearchOptions`' field ``name``: its help and lower
    bound are the field's, declared there once."""
    return typer.Option(*decls, min=_lower(_FIELDS[name]), help=_FIELDS[name].description)


def _lower(field: FieldInfo) -> Any:
    return next((m.ge for m in field.metadata if isinstance(m, Ge)), None)


def _default(name: str) -> Any:
    """What the field ``name`` is when its flag is not given."""
    return _FIELDS[name].default


#: ``--budget-rollouts`` sets the rollouts of the budget: their bound, the budget's help.
_BUDGET_ROLLOUTS = typer.Option(
    "--budget-rollouts", min=_lower(BudgetSettings.model_fields["rollouts"]),
    help=_FIELDS["budget"].description)


def search_command(
    bench_path: Annotated[Path | None, typer.Argument(
        metavar="BENCH", help="bench file or folder with bench.yaml")] = None,
    config_file: Annotated[Path | None, typer.Option("--config", help="start config")] = None,
    # Not given (None): the bench's, or the field's default (search_options).
    max_steps: Annotated[int | None, _flag("max_steps", "--max-steps")] = None,
    patience: Annotated[int | None, _flag("patience", "--patience")] = None,
    budget_rollouts: Annotated[int | None, _BUDGET_ROLLOUTS] = None,
    proposer: Annotated[str, typer.Option(
        "--proposer", metavar="[" + "|".join(PROPOSERS.names()) + "]",
        help="who proposes the moves (default auto); llm: a model proposes one move per "
             "step, needs FORGE_OPENAI_BASE_URL, optionally FORGE_OPENAI_MODEL and "
             "FORGE_OPENAI_API_KEY")] = "auto",
    executor: ExecutorOption = None,
    workers: WorkersOption = None,
    ray_address: RayAddressOption = None,
    ray_connect_timeout: RayConnectTimeoutOption = None,
    k: Annotated[int | None, _flag("k", "-k")] = None,
    candidates_per_step: Annotated[int | None, _flag("candidates_per_step",
                                                     "--candidates")] = None,
    seed: Annotated[int, _flag("seed", "--seed")] = _default("seed"),
    run_id: Annotated[str | None, typer.Option(
        "--run-id", help="name the run folder (default: bench name and UTC time)")] = None,
    resume: Annotated[str | None, typer.Option(
        "--resume", metavar="RUN_ID",
        help="continue the run RUN_ID under --journals from where it stopped")] = None,
    journals: Annotated[Path, typer.Option("--journals", help="run folders")] = DEFAULT_JOURNALS,
    from_runtime: Annotated[Path | None, typer.Option(
        "--from-runtime", metavar="JOURNAL",
        help="try first the moves the runtime mutator proposed most often")] = None,
    no_test: Annotated[bool, _flag("run_test", "--no-test")] = not _default("run_test"),
    as_json: Annotated[bool, typer.Option("--json", help="print only the result object")] = False,
) -> None:
    """Search for a better config: one move at a time, screened, confirmed and gated."""
    # A harness that prints cannot break the JSON: stdout is the document's from the
    # first line on (the bench's harness is imported, and its attempts run, within).
    with json_stdout(as_json):
        from forge.report.live import LiveView, live_progress

        if executor is not None:
            executor_class(executor)  # an unknown name, before anything is read
        if PROPOSERS.get(proposer) is None:
            raise OptionError(f"expected one of {', '.join(PROPOSERS.names())}, got {proposer!r}",
                              option="--proposer")
        flags = ExecutorFlags(executor, workers, ray_address, ray_connect_timeout)
        view = LiveView(err if as_json else out)
        progress = None if as_json else live_progress(out, SearchProgress())  # None off a terminal
        if resume is not None:
            if from_runtime is not None:
                raise OptionError("a resumed run keeps the first moves it started with; not "
                                  "with --resume", option="--from-runtime")
            if no_test:
                raise OptionError("a resumed run ends as it was started (with or without the "
                                  "test split); not with --resume", option="--no-test")
            with flags.joining():
                outcome = _resume(resume, journals, view, progress, flags)
        else:
            if bench_path is None:
                raise OptionError("give a BENCH, or --resume RUN_ID", option="BENCH")
            choices = {"max_steps": max_steps, "patience": patience,
                       "budget_rollouts": budget_rollouts, "k": k, "seed": seed,
                       "candidates_per_step": candidates_per_step, "run_test": not no_test}
            with flags.joining():
                outcome = _launch(bench_path, choices, _NewRun(
                    config_file=config_file, from_runtime=from_runtime, proposer=proposer,
                    executor=flags, run_id=run_id, journals=journals, as_json=as_json),
                    view, progress)
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
class _NewRun:
    """What a new run is besides its search options: where it starts and is kept."""

    config_file: Path | None
    from_runtime: Path | None
    proposer: str
    executor: ExecutorFlags
    run_id: str | None
    journals: Path
    as_json: bool


def _resume(run_id: str, journals: Path, view: LiveView, progress: SearchProgress | None,
            flags: ExecutorFlags) -> SearchOutcome:
    """``--resume RUN_ID``: the run continued with its journaled options; the executor
    flags given replace the journaled executor's parts (said, and kept in run.json)."""
    executor = None
    if flags != ExecutorFlags():
        journaled = load_run(journals / run_id).options.executor
        executor = flags.resumed(journaled)
        if executor != journaled:
            view.console.print(f"resuming {run_id} on {_where(executor)} (journaled: "
                               f"{_where(journaled)}); run.json will say so",
                               highlight=False, markup=False, soft_wrap=True)
    if progress is not None:
        progress.resume = _command("search --resume", run_id, journals)
    with _resumable(run_id, journals):
        return resume_search(run_id, journals=journals, on_record=view.on_record,
                             executor=executor, progress=progress)


def _where(settings: ExecutorSettings) -> str:
    """Where attempts run, as a line says it: ``ray at 10.0.0.1:6379, 4 workers``."""
    return (f"the {settings.name} executor"
            + (f" at {settings.ray_address}" if settings.ray_address else "")
            + (f", {settings.workers} workers" if settings.workers else ""))


def _launch(bench_path: Path, choices: dict[str, Any], run: _NewRun, view: LiveView,
            progress: SearchProgress | None) -> SearchOutcome:
    """A new search of ``bench_path``: its options are the flags ``choices`` holds (None:
    not given) over the bench's."""
    bench = load_bench(bench_path)
    start = load_config(run.config_file, bench.registry) if run.config_file else None
    first = None
    if run.from_runtime is not None:
        first = runtime_first_moves(run.from_runtime, bench.registry, start or bench.defaults)
        (err if run.as_json else out).print(
            f"runtime journal {run.from_runtime}: {len(first)} move(s) first in the queue"
            + (": " + ", ".join(str(m) for m in first) if first else ""),
            highlight=False, markup=False, soft_wrap=True)
    # Chosen here, so that an interruption can name the run to resume.
    run_id = run.run_id or new_run_id(bench.name)
    if progress is not None:
        progress.resume = _command("search --resume", run_id, run.journals)
    with _resumable(run_id, run.journals):
        options = search_options(bench, executor=run.executor.over(
            bench.executor_settings(), whose="the bench's executor"), **choices)
        return launch_search(bench, options=options, start=start, proposer=run.proposer,
                             run_id=run_id, journals=run.journals, first_moves=first,
                             on_record=view.on_record, progress=progress)


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
    except ClusterUnreachable:
        raise  # before anything ran: its line says what to give instead
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
