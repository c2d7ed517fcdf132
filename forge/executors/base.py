"""The executor protocol: where the attempts of one batch run.

The rollout engine hands an executor a :class:`Batch`: the attempts of one config
to run, and the engine's own steps for each of them (prepare it, judge what the
harness returned, record the result). An executor decides only *where* and *in
what order* the harness is called: ``local`` on this process's event loop or thread
lanes, ``process`` and ``ray`` in workers elsewhere. Judging stays with the engine
(the scorer is built in this process), so a result depends only on the harness's
output, never on where it ran: every executor gives the same seeds, scores and
decisions.

The executor plugins register here, each next to its class (``@EXECUTORS.register``).
One settings model, :class:`ExecutorSettings`, is the bench's ``executor:`` field,
the CLI's ``--executor`` / ``--workers`` / ``--ray-address``, and run.json's
``options.executor``.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from forge._util.files import validation_problem
from forge._util.printed import Printed
from forge.core.spec import BuildContext, Plugin, PluginRegistry, Spec
from forge.core.task import Task
from forge.errors import OptionError
from forge.harness.base import AttemptContext, Harness, RunOutput

if TYPE_CHECKING:
    from forge.results.model import AttemptResult, StopReason

__all__ = [
    "EXECUTORS",
    "MAX_RAY_CONNECT_TIMEOUT_S",
    "RAY_CONNECT_TIMEOUT_S",
    "AttemptKey",
    "Batch",
    "Executor",
    "ExecutorContext",
    "ExecutorOptions",
    "ExecutorSettings",
    "Prepared",
]


@dataclass(frozen=True)
class AttemptKey:
    """Which attempt to run: a task of the split and the attempt's index."""

    task: Task
    attempt: int


@dataclass
class Prepared:
    """One attempt as the engine prepared it: its seed, private copies of the config and
    the task, the harness's context, and when it started (monotonic clock)."""

    key: AttemptKey
    seed: int
    start: float
    config: dict[str, Any]
    task: Task
    ctx: AttemptContext
    end: float | None = None  # when the harness call ended; judging comes after
    overran: bool = False  # not done when its wait ended: timed out, or cancelled
    #: What the harness printed on stdout: an executor running it here captures into
    #: it (:func:`forge._util.printed.capture`); one running it elsewhere replaces it with
    #: what its worker kept (:meth:`forge._util.printed.Printed.told`).
    printed: Printed = field(default_factory=Printed)


class Batch(Protocol):
    """The attempts of one engine run, as an executor sees them.

    ``prepare(i)`` makes attempt ``i`` (of ``size``) ready to run; ``judge`` turns what
    the harness returned (or raised) into its result (``judge_here`` on a thread that
    is not ``loop``'s, waiting there for an async scorer), ``score`` does the same for an
    output already checked elsewhere (a remote worker), ``finish`` records an attempt
    that produced nothing to judge; each result goes to ``record(i, result)``. Once
    ``cancelled``, start nothing more; ``on_cancel`` says whom to wake when that
    happens (None: nobody), ``cancel`` is the executor's way to stop the batch itself.
    """

    harness: Harness
    size: int
    split: str
    concurrency: int
    timeout_s: float

    @property
    def cancelled(self) -> bool: ...

    def cancel(self) -> None: ...

    def on_cancel(self, wake: Callable[[], None] | None) -> None: ...

    def prepare(self, i: int) -> Prepared: ...

    def judge(self, p: Prepared, raw: Any, exc: BaseException | None
              ) -> AttemptResult | Coroutine[Any, Any, AttemptResult]: ...

    def judge_here(self, p: Prepared, raw: Any, exc: BaseException | None,
                   loop: asyncio.AbstractEventLoop) -> AttemptResult: ...

    def score(self, p: Prepared, output: RunOutput
              ) -> AttemptResult | Coroutine[Any, Any, AttemptResult]: ...

    def finish(self, p: Prepared, stop: StopReason, error: str | None = None
               ) -> AttemptResult: ...

    def record(self, i: int, result: AttemptResult) -> None: ...

    def task_text(self, p: Prepared) -> str: ...


#: How long joining a Ray cluster may take when nothing says otherwise (s): a cluster
#: that answers is joined in a few seconds; this is also how long Ray itself waits for
#: a GCS that went away under a driver before it gives up, so a head restarting (GCS
#: fault tolerance) is given the same time at the start as in the middle of a run.
RAY_CONNECT_TIMEOUT_S = 60.0
#: The longest bound on joining a Ray cluster one may set (s): longer is a typo.
MAX_RAY_CONNECT_TIMEOUT_S = 3600.0


class ExecutorOptions(BaseModel):
    """How big an executor is. ``workers``: processes or actors (None: the cores);
    ``ray_address``: the Ray cluster to join (None: start a local one);
    ``ray_connect_timeout_s``: how long joining it may take (None:
    :data:`RAY_CONNECT_TIMEOUT_S`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    workers: int | None = Field(default=None, ge=1,
                                description="worker processes or Ray actors (default: the cores)")
    ray_address: str | None = Field(default=None,
                                    description="join this Ray cluster (default: a local one)")
    ray_connect_timeout_s: float | None = Field(
        default=None, gt=0, le=MAX_RAY_CONNECT_TIMEOUT_S,
        description=f"seconds joining the Ray cluster may take before forge gives up "
                    f"(default: {RAY_CONNECT_TIMEOUT_S:g})")


def _name_choices(schema: dict[str, Any]) -> None:
    # In the JSON Schema (``forge schema``) the name lists the registered executors,
    # read when the schema is made: every executor has registered by then.
    schema["properties"]["name"]["enum"] = EXECUTORS.names()


class _SettingError(OptionError, ValueError):
    """A bad executor setting: an option on the command line; a ValueError too, so that
    validating a file's ``executor`` (run.json, bench.yaml) reports it as that file's
    field, not as an option nobody typed."""


class ExecutorSettings(ExecutorOptions):
    """Which executor and how big: ``executor: process`` or ``{name: process, workers: 2}``
    in a bench, ``--executor`` / ``--workers`` / ``--ray-address`` on the command line
    (which override the bench, part by part), ``options.executor`` in run.json (so a
    resume uses the same). Results do not depend on it: not in the env fingerprint."""

    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra=_name_choices)
    name: str = "local"

    def __init__(self, name: str = "local", workers: int | None = None,
                 ray_address: str | None = None, *, ray_connect_timeout_s: float | None = None,
                 **unknown: Any) -> None:
        # Validation from a file (run.json, bench.yaml) calls this with the file's keys:
        # one it does not know must fail as a bad input, not as a TypeError.
        try:
            BaseModel.__init__(self, name=name, workers=workers, ray_address=ray_address,
                               ray_connect_timeout_s=ray_connect_timeout_s, **unknown)
        except ValidationError as exc:
            problem = validation_problem(exc)
            raise _SettingError(problem.message,
                                option="--" + problem.field.replace("_", "-")) from None

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

    @model_serializer(mode="wrap")
    def _without_default_bound(self, handler: SerializerFunctionWrapHandler
                               ) -> dict[str, Any]:
        # Absent unless set: a run.json written before the bound existed, and one that
        # leaves it at its default, read the same.
        out: dict[str, Any] = handler(self)
        if out.get("ray_connect_timeout_s") is None:
            out.pop("ray_connect_timeout_s", None)
        return out

    def override(self, name: str | None = None, workers: int | None = None,
                 ray_address: str | None = None, *,
                 ray_connect_timeout_s: float | None = None) -> ExecutorSettings:
        """These settings with each part given replaced."""
        return ExecutorSettings(name or self.name, workers or self.workers,
                                ray_address or self.ray_address,
                                ray_connect_timeout_s=(ray_connect_timeout_s
                                                       or self.ray_connect_timeout_s))

    @property
    def spec(self) -> Spec:
        return Spec(name=self.name, args={"workers": self.workers,
                                          "ray_address": self.ray_address,
                                          "ray_connect_timeout_s": self.ray_connect_timeout_s})

    def journal_form(self) -> dict[str, Any]:
        return self.model_dump()


@dataclass(frozen=True, kw_only=True)
class ExecutorContext(BuildContext):
    """A build context that also names the harness the executor will run."""

    harness: Spec

    @staticmethod
    def of(ctx: BuildContext) -> ExecutorContext:
        """``ctx`` itself; ``TypeError`` unless it is an executor context."""
        if not isinstance(ctx, ExecutorContext):
            raise TypeError("an executor is built with an ExecutorContext (the harness spec)")
        return ctx


class Executor(Plugin, ABC):
    """Runs the batches of one evaluation or search, then is closed. The contract:

    - ``run_batch`` runs every attempt of the batch it is not cancelled before, and
      hands each result to ``batch.record``; a failing worker never raises out of it
      (its attempts come back as errors, with the reason). A failure is charged to the
      attempt that caused it: an attempt lost with the machine under it (a cluster's
      node) is run again elsewhere, not recorded as the config's error.
    - ``check`` (a class method) refuses, before anything starts, settings or a harness
      the executor cannot serve; by default it serves any.
    - ``close`` releases what the executor holds (workers, a cluster); by default nothing.
    - ``broken`` says why the executor can run no more attempts (its cluster is gone,
      or no live node of it can run one), once it cannot; the session then ends the
      run (:class:`forge.errors.ExecutorLost`). Waiting for room is bounded, and said.
    """

    name: ClassVar[str]
    options_model = ExecutorOptions
    broken: str | None = None

    @classmethod
    def check(cls, settings: ExecutorSettings, harness: Spec) -> None:
        """Any harness, any size: nothing to refuse."""

    @abstractmethod
    async def run_batch(self, batch: Batch) -> None: ...

    def close(self) -> None:
        """Nothing to release."""


#: Every executor by name; see :class:`ExecutorSettings` for how one is chosen.
EXECUTORS: PluginRegistry[Executor] = PluginRegistry("executor", Executor)
