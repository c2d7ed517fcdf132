"""Starting and resuming searches: run folders, run.json, and the checks on resume."""

from __future__ import annotations

import dataclasses
import errno
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from forge._util.bounds import MAX_K
from forge.bench.loader import Bench, BudgetSettings, check_attempts, load_bench
from forge.config.moves import Move
from forge.config.registry import Config
from forge.errors import JournalError, OptionError
from forge.evaluation.session import Session
from forge.executors import ExecutorSettings, check_executor
from forge.journal import (
    JOURNAL_FORMAT_VERSION,
    JournalWriter,
    RunInfo,
    load_run,
    lock_run,
    new_run_id,
    write_error,
    write_run,
)
from forge.journal.prune import PRUNED_FILE, load_pruned
from forge.journal.records import AnyRecord
from forge.journal.run import DEFAULT_JOURNALS, RUN_FORMAT_VERSION
from forge.journal.run_store import RunStore
from forge.journal.store import AttemptStore, store_file
from forge.proposers import build_proposer
from forge.report.dashboard import DashboardStudy
from forge.search.loop import Search, open_session
from forge.search.options import SearchOptions, check_flags
from forge.search.outcome import SearchOutcome
from forge.search.progress import SearchProgress

__all__ = ["DEFAULT_JOURNALS", "launch_search", "resume_search", "search_options"]

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_DISK_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM,
                          errno.EFBIG, errno.EIO})


def search_options(bench: Bench, *, budget_rollouts: int | None = None,
                   **given: Any) -> SearchOptions:
    """The options of a new search of ``bench``: each :class:`SearchOptions` field given
    (by its name; None: not given) over the bench's settings (``search``, ``rollouts``,
    ``executor``) or the field's default. ``budget_rollouts`` replaces the rollouts of
    the bench's budget. A value out of the field's bounds is an :class:`OptionError`."""
    unknown = sorted(set(given) - {f.name for f in dataclasses.fields(SearchOptions)})
    if unknown:
        raise TypeError(f"no search option {unknown[0]!r}")
    chosen = {name: value for name, value in given.items() if value is not None}
    s, r = bench.spec.search, bench.spec.rollouts
    budget = s.budget if budget_rollouts is None else BudgetSettings(
        rollouts=budget_rollouts, cost=s.budget.cost, wall_time_s=s.budget.wall_time_s)
    fields: dict[str, Any] = {
        "max_steps": s.max_steps, "patience": s.patience, "budget": budget, "k": r.k,
        "concurrency": r.concurrency, "timeout_s": r.timeout_s,
        "executor": bench.executor_settings(), **chosen}
    try:
        return SearchOptions(**fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise OptionError(f"{first['msg']}, got {first['input']!r}",
                          option=str(first["loc"][0])) from None


def launch_search(bench_path: str | Path | Bench, *, options: SearchOptions | None = None,
                  start: Config | None = None, proposer: str = "auto",
                  run_id: str | None = None, journals: Path = DEFAULT_JOURNALS,
                  first_moves: list[Move] | None = None,
                  on_record: Callable[[AnyRecord], None] | None = None,
                  progress: SearchProgress | None = None,
                  **choices: Any) -> SearchOutcome:
    """A new search run in ``journals/<run-id>/``; ``progress``, if given, is kept
    current while it runs (for a live view).

    ``options`` are how it searches (what ``forge search`` builds from its flags); or
    give them as keywords, each a field of :class:`SearchOptions` (``max_steps``,
    ``patience``, ``k``, ``seed``, ``candidates_per_step``, ``concurrency``, ``executor``,
    ``run_test``, ...) or ``budget_rollouts``, and the bench's settings fill in the rest
    (:func:`search_options`). ``run_test=False`` ends it without the test
    split (a run without its test comparison cannot be promoted). The executor
    (default: the bench's ``executor`` field) is journaled in run.json's options, and a
    resume uses it again unless told otherwise. ``bench_path`` may be a bench loaded
    already (the command has: loading a registry of many settings once more cost as
    long as a step).
    """
    bench = bench_path if isinstance(bench_path, Bench) else load_bench(bench_path)
    if options is None:
        options = search_options(bench, **choices)
    elif choices:
        raise TypeError(f"options given, and {', '.join(choices)} besides: give one or the "
                        "other")
    start = start or bench.defaults
    run_id = run_id or new_run_id(bench.name)
    if not _RUN_ID.match(run_id):
        raise OptionError(f"{run_id!r}: use letters, digits, '.', '_' and '-'",
                          option="--run-id")
    folder = journals / run_id
    if (folder / "run.json").exists():
        raise JournalError(f"run {run_id!r} exists; resume it with --resume {run_id}",
                           file=folder)
    for split in ("dev", "val", "test"):
        bench.tasks(split)  # a search needs all three; refuse before writing anything
    # An executor that cannot start (Ray missing, a non-python harness) is refused
    # before the run folder exists.
    check_executor(options.executor, bench.harness_spec)
    # Built once before the run folder exists: an unknown proposer, a bad option, or one
    # that cannot start (llm without an endpoint) writes nothing. No I/O without run_dir.
    probe = build_proposer(proposer, registry=bench.registry, run_dir=None, seed=options.seed)
    proposer_info = probe.journal_form()
    _check_k(bench, options.k)
    # The executor opens first (a Ray cluster joined, within its bound): one that cannot
    # leaves no run folder behind.
    with open_session(bench, options) as session:
        # The run's header is made where it is written: the options go from here to the
        # journal once, then to the search.
        info = RunInfo(run_id=run_id, bench=bench.name, bench_path=str(bench.path),
                       bench_digest=bench.digest, registry_digest=bench.registry.digest,
                       seed=options.seed,
                       start_config=start.values, start_fingerprint=start.fingerprint,
                       options=options.journal_form(
                           proposer=proposer, proposer_info=proposer_info,
                           first_moves=list(first_moves or [])),
                       created_at=datetime.now(UTC))
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise JournalError(f"cannot make the run folder: {exc.strerror or exc}",
                               file=folder) from None
        with lock_run(folder):
            if (folder / "run.json").exists():  # another launch of this id came first
                raise JournalError(f"run {run_id!r} exists; resume it with --resume {run_id}",
                                   file=folder)
            write_run(folder, info)
            return _run(bench, info, options, folder, on_record, progress, session)


def _check_k(bench: Bench, k: int) -> None:
    """Refuse attempts a task past :data:`MAX_K`, or more than a split's tasks allow."""
    if k > MAX_K:
        raise OptionError(f"{k:,} attempts per task; at most {MAX_K:,}", option="-k")
    for split in bench.splits:
        check_attempts(k, len(bench.tasks(split)), split, option="-k")


def resume_search(run_id: str, *, journals: Path = DEFAULT_JOURNALS,
                  on_record: Callable[[AnyRecord], None] | None = None,
                  executor: ExecutorSettings | None = None,
                  progress: SearchProgress | None = None) -> SearchOutcome:
    """Continue a run with the options it was started with; refuses a changed bench.

    The run's journaled executor is used unless ``executor`` names another: results do
    not depend on it, so changing machines mid-run is allowed. Another is written to
    run.json's ``options.executor`` once it is open (a Ray cluster joined), so that
    the next resume goes there too; nothing in the run folder changes before.
    """
    folder = journals / run_id
    info = load_run(folder)
    pruned = load_pruned(folder)
    if pruned is not None:
        # Its replay would run again every attempt pruning removed.
        raise JournalError(f"cannot resume {run_id}: it was pruned on "
                           f"{pruned.pruned_at:%Y-%m-%d %H:%M} UTC (forge journal prune), "
                           "which keeps only what review reads; start a new search instead",
                           file=folder / PRUNED_FILE)
    if info.format_version not in (JOURNAL_FORMAT_VERSION, RUN_FORMAT_VERSION):
        # Its decisions came from the search before confirmations were sequential: a
        # replay by this search would diverge from the first record on.
        raise JournalError(f"cannot resume {run_id}: it was written by an earlier forge "
                           f"(format_version {info.format_version}, whose search this forge "
                           "no longer runs); review, report or promote it as it is",
                           file=folder / "run.json", field="format_version")
    # A run.json of version 2 journaled each search behaviour: resumed only as today's.
    check_flags(info.flags, k=info.options.k, file=folder / "run.json", run_id=run_id)
    bench = load_bench(info.bench_path)
    # The bench digest covers the registry too: check the registry first, to name it.
    if bench.registry.digest != info.registry_digest:
        raise JournalError(f"cannot resume {run_id}: the registry of {bench.path} changed "
                           "since the run started", file=folder / "run.json",
                           field="registry_digest")
    if bench.digest != info.bench_digest:
        raise JournalError(f"cannot resume {run_id}: the bench {bench.path} (its file, tasks, "
                           "harness or scorer code) changed since the run started",
                           file=folder / "run.json", field="bench_digest")
    options = SearchOptions.from_journal(info.options, seed=info.seed,
                                         concurrency=bench.spec.rollouts.concurrency,
                                         timeout_s=bench.spec.rollouts.timeout_s,
                                         executor=executor)
    for split in bench.splits:
        check_attempts(info.options.k, len(bench.tasks(split)), split,
                       file=folder / "run.json", field="options.k")
    with lock_run(folder), open_session(bench, options) as session:
        if options.executor != info.options.executor:
            info = info.model_copy(update={"options": info.options.model_copy(
                update={"executor": options.executor})})
            write_run(folder, info)
        return _run(bench, info, options, folder, on_record, progress, session)


def _run(bench: Bench, info: RunInfo, options: SearchOptions, folder: Path,
         on_record: Callable[[AnyRecord], None] | None,
         progress: SearchProgress | None, session: Session) -> SearchOutcome:
    start = bench.registry.validate_config(info.start_config, file=folder / "run.json")
    try:
        proposer = build_proposer(info.options.proposer, registry=bench.registry,
                                  run_dir=folder, seed=info.seed)
        journal = JournalWriter(folder)
        dashboard = DashboardStudy(folder, bench.registry)  # the study optuna-dashboard opens
        store = RunStore(journal, AttemptStore(store_file(folder)),
                         [dashboard.on_record, *([on_record] if on_record else [])])
        search = Search(bench, start, proposer, options, run_id=info.run_id, store=store,
                        first_moves=list(info.options.first_moves), progress=progress)
        return search.run(session)
    except OSError as exc:
        # A full or read-only disk under a writer that does not say so itself (the
        # dashboard's study): one line, and the run resumes once it can be written.
        if exc.errno not in _DISK_ERRORS:
            raise
        raise write_error(exc, folder / "journal.jsonl") from None
