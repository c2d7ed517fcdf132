"""Bench: a harness, its registry and defaults, task splits, a scorer, gates and budget.

``load_bench`` validates everything a run will need before any rollout starts: the
registry and default config, every split file (ids unique, no id or input shared
between splits), the scorer and the harness (imported now, so a broken import is
one clear line and not a thousand failed attempts). The credentials the scorer and the
harness name (:meth:`~forge.core.spec.Plugin.secret_envs`) are registered as secrets
here, so they are masked from the first byte any run writes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from forge._util.bounds import MAX_ATTEMPTS, MAX_CONCURRENCY, MAX_K, MAX_TASKS, MAX_TIMEOUT_S
from forge._util.digest import canonical_json, digest_of, sha256_hex
from forge._util.files import YamlDocument, load_yaml, raise_validation_error, read_jsonl
from forge.config.registry import Config, Registry, load_config, load_registry
from forge.core.spec import BuildContext, Spec
from forge.core.task import Task
from forge.errors import BenchError, OptionError
from forge.executors import EXECUTORS, Executor, ExecutorSettings, open_executor
from forge.harness import HARNESSES, Harness
from forge.scorers import SCORERS, Scorer
from forge.secrets.masking import register_secret_envs
from forge.sources import SOURCES

__all__ = [
    "Bench",
    "BenchFile",
    "BudgetSettings",
    "GateSettings",
    "MetricSpec",
    "RolloutSettings",
    "SearchSettings",
    "check_attempts",
    "load_bench",
    "resolve_bench_path",
]

SPLIT_NAMES = ("dev", "val", "test")


class _Strict(BaseModel):
    # allow_inf_nan=False: a timeout, tolerance or budget of .inf or .nan is never meant
    # (and an infinite one cannot be journaled as JSON).
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class RolloutSettings(_Strict):
    k: int = Field(default=5, ge=1, le=MAX_K, description="attempts per task")
    concurrency: int = Field(default=8, ge=1, le=MAX_CONCURRENCY,
                             description="attempts in flight at once")
    timeout_s: float = Field(default=30.0, gt=0, le=MAX_TIMEOUT_S,
                             description="per-attempt timeout")


class MetricSpec(_Strict):
    """An auxiliary metric and how much it may regress before a candidate is refused."""

    direction: Literal["lower", "higher"] = "lower"
    max_increase: float = Field(default=0.0, ge=0,
                                description="allowed regression (in the bad direction)")
    relative: bool = Field(default=False, description="max_increase is a fraction of the base")


class UnscoredTolerance(_Strict):
    """How much more often than the start config a candidate may fail (end unscored),
    as a share of attempts: 0 refuses any increase the data show beyond noise."""

    max_increase: float = Field(default=0.0, ge=0, le=1,
                                description="allowed increase of the unscored share of "
                                            "attempts over the start config's")


class GateSettings(_Strict):
    alpha: float = Field(default=0.05, gt=0, lt=1)
    min_effect: float = Field(default=0.0, ge=0)
    val_margin: float = Field(default=0.02, ge=0)
    task_floors: dict[str, float] = Field(default_factory=dict)
    unscored: UnscoredTolerance = Field(
        default_factory=UnscoredTolerance,
        description="how much more often than the start config a candidate may fail")

    @field_validator("task_floors")
    @classmethod
    def _floors_in_unit_interval(cls, v: dict[str, float]) -> dict[str, float]:
        for tag, floor in v.items():
            if not 0.0 <= floor <= 1.0:
                raise ValueError(f"floor for {tag!r} must be in [0, 1], got {floor}")
        return v


class BudgetSettings(_Strict):
    rollouts: int | None = Field(default=None, ge=1)
    cost: float | None = Field(default=None, gt=0)
    wall_time_s: float | None = Field(default=None, gt=0)


class SearchSettings(_Strict):
    max_steps: int = Field(default=30, ge=0)
    patience: int = Field(default=5, ge=1)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)


class BenchFile(_Strict):
    """The bench YAML as written (paths still relative to the file)."""

    name: str = Field(min_length=1)
    description: str = ""
    harness: Any
    registry: str
    defaults: str | None = None
    #: Each split's tasks: a JSONL file, or a task source spec (``{agno: "envs:x"}``).
    splits: dict[str, str | dict[str, Any]] = Field(min_length=1)
    rollouts: RolloutSettings = Field(default_factory=RolloutSettings)
    scorer: Any = "exact"
    metrics: dict[str, MetricSpec] = Field(default_factory=dict)
    gates: GateSettings = Field(default_factory=GateSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    executor: ExecutorSettings = Field(default_factory=ExecutorSettings)

    @field_validator("splits", mode="before")
    @classmethod
    def _paths_or_sources(cls, v: Any) -> Any:
        # Said here in the bench's words: pydantic would name the union's arms.
        if isinstance(v, dict):
            for split, where in v.items():
                if not isinstance(where, str | dict):
                    raise ValueError(f"split {split!r}: expected a JSONL file path or a task "
                                     f"source such as {{agno: 'envs:support'}}, got {where!r}")
        return v

    @field_validator("splits")
    @classmethod
    def _needs_dev(cls, v: dict[str, str | dict[str, Any]]
                   ) -> dict[str, str | dict[str, Any]]:
        if "dev" not in v:
            raise ValueError("a 'dev' split is required")
        return v


@dataclass(frozen=True)
class Bench:
    """A loaded, validated bench. Build fresh harness and scorer objects per evaluation."""

    path: Path
    spec: BenchFile
    registry: Registry
    defaults: Config
    splits: dict[str, list[Task]]
    harness_spec: Spec
    scorer_spec: Spec
    _scorer: Scorer = field(repr=False)
    _harness_identity: str = field(repr=False)
    _doc: YamlDocument | None = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def folder(self) -> Path:
        return self.path.parent

    def context(self, field: str) -> BuildContext:
        return BuildContext(base_dir=self.folder, file=self.path, field=field, doc=self._doc)

    def build_harness(self) -> Harness:
        return HARNESSES.build(self.harness_spec, self.context("harness"))

    def executor_settings(self, name: str | None = None, workers: int | None = None,
                          ray_address: str | None = None) -> ExecutorSettings:
        """The bench's ``executor`` field, each part overridden when given."""
        return self.spec.executor.override(name, workers, ray_address)

    def open_executor(self, settings: ExecutorSettings) -> Executor:
        """The executor ``settings`` name, for this bench's harness."""
        return open_executor(settings, self.harness_spec, self.folder)

    @property
    def scorer(self) -> Scorer:
        return self._scorer

    @property
    def harness_identity(self) -> str:
        return self._harness_identity

    def tasks(self, split: str) -> list[Task]:
        if split not in self.splits:
            raise BenchError(f"no split {split!r}; the bench has {', '.join(self.splits)}",
                             file=self.path, field="splits")
        return self.splits[split]

    def _spec_for_digest(self) -> dict[str, object]:
        # The failure-share tolerance at its default leaves the digest as it was before
        # the setting existed, so runs journaled then still resume.
        unscored = self.spec.gates.unscored
        skip = {"gates": {"unscored"}} if unscored == UnscoredTolerance() else None
        dumped: dict[str, object] = self.spec.model_dump(mode="json", exclude=skip)
        return dumped

    def split_digest(self, split: str) -> str:
        return digest_of([t.model_dump(mode="json") for t in self.tasks(split)])

    @cached_property
    def digest(self) -> str:
        """Changes when anything that decides outcomes changes: the file, tasks, code."""
        return digest_of({
            "bench": self._spec_for_digest(),
            "registry": self.registry.digest,
            "splits": {s: self.split_digest(s) for s in self.splits},
            "harness": self._harness_identity,
            "scorer": self._scorer.digest,
        })


def resolve_bench_path(path: str | Path) -> Path:
    """``BENCH`` on the command line: a bench file, or a folder holding ``bench.yaml``."""
    p = Path(path)
    if p.is_dir():
        p = p / "bench.yaml"
    if not p.is_file():
        raise BenchError("no bench here: expected a bench YAML file or a folder with bench.yaml",
                         file=p)
    return p.resolve()


def load_bench(path: str | Path) -> Bench:
    bench_path = resolve_bench_path(path)
    doc = load_yaml(bench_path, BenchError)
    if not isinstance(doc.data, dict):
        raise BenchError("expected a mapping with name, harness, registry and splits",
                         file=bench_path)
    try:
        spec = BenchFile.model_validate(doc.data)
    except ValidationError as exc:
        raise_validation_error(exc, error=BenchError, file=bench_path, doc=doc)
        raise
    folder = bench_path.parent

    registry = load_registry(_resolve(folder, spec.registry, doc, "registry"))
    defaults = (load_config(_resolve(folder, spec.defaults, doc, "defaults"), registry)
                if spec.defaults else registry.defaults())
    splits = _load_splits(folder, spec, doc)
    for tag in spec.gates.task_floors:
        # A floor no task carries would pass every confirmation having checked nothing.
        if not any(tag in task.tags for split in ("dev", "val")
                   for task in splits.get(split, ())):
            raise BenchError(f"no dev or val task is tagged {tag!r}: its floor would check "
                             "nothing", file=bench_path, field=f"gates.task_floors.{tag}",
                             line=doc.line_of(["gates", "task_floors", tag]))

    ctx = BuildContext(base_dir=folder, file=bench_path, doc=doc)
    EXECUTORS.plugin(spec.executor.name, ctx.at("executor"))  # an unknown name, with its line
    harness_spec = HARNESSES.parse(spec.harness, ctx.at("harness"))
    scorer_spec = SCORERS.parse(spec.scorer, ctx.at("scorer"))
    scorer = SCORERS.build(scorer_spec, ctx.at("scorer"))
    harness = HARNESSES.build(harness_spec, ctx.at("harness"))
    # Now, before anything runs: a judge reads its key at its first call, after the
    # first attempts (whose errors may echo that key) have been written.
    register_secret_envs((*scorer.secret_envs(), *harness.secret_envs()))
    return Bench(path=bench_path, spec=spec, registry=registry, defaults=defaults, splits=splits,
                 harness_spec=harness_spec, scorer_spec=scorer_spec, _scorer=scorer,
                 _harness_identity=harness.identity, _doc=doc)


def check_attempts(k: int, n_tasks: int, split: str, *, file: str | Path | None = None,
                   field: str | None = None, line: int | None = None,
                   option: str | None = None) -> None:
    """Refuse an evaluation of more than MAX_ATTEMPTS attempts (K times the tasks of the
    split), naming the file and field or the command-line ``option`` that set K."""
    if k * n_tasks <= MAX_ATTEMPTS:
        return
    message = (f"k {k:,} times the {n_tasks:,} tasks of split {split!r} is {k * n_tasks:,} "
               f"attempts per evaluation; at most {MAX_ATTEMPTS:,}")
    if option is not None:
        raise OptionError(message, option=option)
    raise BenchError(message, file=file, field=field, line=line)


def _resolve(folder: Path, relative: str, doc: YamlDocument, field: str) -> Path:
    p = (folder / relative).resolve()
    if not p.is_file():
        raise BenchError(f"file not found: {p}", file=doc.path, field=field,
                         line=doc.line_of(field.split(".")))  # "splits.val": two keys
    return p


def _split_lines(folder: Path, split: str, where: str | dict[str, Any], doc: YamlDocument
                 ) -> tuple[Path, Iterable[tuple[int | None, Any]]]:
    """A split's task lines with their line numbers: a JSONL file's, or a task source's
    (numbered None: errors name the bench file's field instead)."""
    if isinstance(where, str):
        path = _resolve(folder, where, doc, f"splits.{split}")
        return path, read_jsonl(path, BenchError)
    ctx = BuildContext(base_dir=folder, file=doc.path, doc=doc).at("splits", split)
    source = SOURCES.build(SOURCES.parse(where, ctx), ctx)
    return doc.path, ((None, dict(task)) for task in source.tasks(split))


def _load_splits(folder: Path, spec: BenchFile, doc: YamlDocument) -> dict[str, list[Task]]:
    splits: dict[str, list[Task]] = {}
    id_owner: dict[str, str] = {}
    input_owner: dict[str, tuple[str, str]] = {}
    for split, where in spec.splits.items():
        path, lines = _split_lines(folder, split, where, doc)
        tasks: list[Task] = []
        seen: set[str] = set()
        for line, value in lines:
            if len(tasks) >= MAX_TASKS:
                raise BenchError(f"split {split!r} has more than {MAX_TASKS:,} tasks",
                                 file=path, line=line)
            if not isinstance(value, dict):
                raise BenchError("expected a JSON object per line", file=path, line=line)
            try:
                task = Task.model_validate(value)
            except ValidationError as exc:
                raise_validation_error(exc, error=BenchError, file=path, line=line)
                raise
            if task.id in seen:
                raise BenchError(f"duplicate task id {task.id!r} in split {split!r}",
                                 file=path, line=line, field="id")
            seen.add(task.id)
            if task.id in id_owner:
                raise BenchError(f"task id {task.id!r} is also in split {id_owner[task.id]!r}",
                                 file=path, line=line, field="id")
            key = sha256_hex(canonical_json(task.input))
            if key in input_owner:
                other_split, other_id = input_owner[key]
                raise BenchError(f"the input of task {task.id!r} is also the input of "
                                 f"{other_id!r} in split {other_split!r}",
                                 file=path, line=line, field="input")
            tasks.append(task)
        if not tasks:
            raise BenchError(f"split {split!r} has no tasks", file=path)
        check_attempts(spec.rollouts.k, len(tasks), split, file=doc.path, field="rollouts.k",
                       line=doc.line_of(["rollouts", "k"]))
        for task in tasks:
            id_owner[task.id] = split
            input_owner[sha256_hex(canonical_json(task.input))] = (split, task.id)
        splits[split] = tasks
    return splits
