"""The ``command`` harness: a program that takes an attempt as JSON on stdin.

Bench syntax (a list is the shorthand for ``argv``)::

    harness: {command: [python3, agent.py]}
    harness: {command: {argv: [python3, agent.py], cwd: ".", env: {NAME: value},
                        worker: false, cancel_timeout_s: 2, max_stderr_bytes: 65536}}

One process per attempt (the default): the child reads one JSON object
``{"config", "task", "ctx": {"seed", "attempt", "split", "timeout_s", "remaining_s"}}``
from stdin (then EOF), prints one RunOutput JSON object on stdout and exits 0.
``remaining_s`` is how long the child has before it is stopped.

With ``worker: true`` a pool of long-lived children each takes one attempt at a time.
A request is one JSON line on stdin, the same object plus ``"id"`` (a string, new for
every request); the reply is one JSON line on stdout, a RunOutput object plus the
same ``"id"``, flushed. The id ties the reply to its attempt, so nothing a worker
prints late or twice can become another attempt's answer:

- a reply with the request's id is that attempt's answer; more lines after it, or
  any output between attempts, and the worker is replaced (the answer stands);
- a reply with an earlier request's id (a late or second reply) while a request is
  out: the worker is replaced and the request goes to a new worker, uncharged;
- a reply without an id or with another one, a line that is not a JSON object, an
  exit before answering the request it read, or no reply in time: the attempt in
  flight is charged with it, and the worker is replaced;
- an exit after a reply and before reading the next request (a worker that ends
  between attempts): the request goes to a new worker, uncharged.

An exit is charged to a request the worker had read, begun or not. Minimal worker::

    # worker.py
    import json, sys

    for line in sys.stdin:                      # one request per line
        request = json.loads(line)
        answer = str(request["task"]["input"])  # the agent's work goes here
        reply = {"id": request["id"], "output": answer}
        print(json.dumps(reply), flush=True)    # one line per request, flushed

How children are started, stopped and reaped (a process group each, SIGTERM then
SIGKILL after ``cancel_timeout_s``) is :mod:`forge.harness.supervisor`'s part.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import os
import shlex
import shutil
import signal
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from forge._util.digest import digest_of, file_digest
from forge._util.files import validation_problem
from forge.core.spec import BuildContext
from forge.core.task import Task
from forge.harness.base import HARNESSES, AttemptContext, AttemptTimeout, Harness, RunOutput
from forge.harness.supervisor import MAX_STDOUT_BYTES, Child, Supervisor

__all__ = ["CommandError", "CommandHarness", "CommandOptions", "CommandTimeout"]

log = logging.getLogger(__name__)

#: The engine keeps the first 2000 characters of an error; the stderr tail must fit.
_ERROR_STDERR_CHARS = 1200
_EXCERPT_CHARS = 200


class CommandError(RuntimeError):
    """The child failed its attempt; the message says how, with the tail of its stderr."""


class CommandTimeout(AttemptTimeout):
    """The child gave no answer before the attempt's deadline."""


class _NotThisAttempt(Exception):
    """A worker failed, but for an earlier exchange: the attempt in flight is not to blame."""

    def __init__(self, pgid: int, what: str) -> None:
        super().__init__(what)
        self.pgid = pgid


class CommandOptions(BaseModel):
    """The ``command:`` arguments of a bench's harness, each refused in its own words."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    argv: list[str]
    cwd: str = "."
    env: dict[str, str] = Field(default_factory=dict)
    worker: bool = False
    cancel_timeout_s: float = 2.0
    max_stderr_bytes: int = 65536

    @model_validator(mode="before")
    @classmethod
    def _known(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(cls.model_fields))
            if unknown:
                raise ValueError(f"unknown argument(s) {unknown}; expected some of "
                                 f"{list(cls.model_fields)}")
            # A missing argv is refused in the words of a wrong one, by its validator.
            return {"argv": None, **data}
        return data

    @field_validator("argv", mode="before")
    @classmethod
    def _argv(cls, argv: Any) -> Any:
        if (not isinstance(argv, list) or not argv
                or not all(isinstance(a, str) for a in argv) or not argv[0]):
            raise ValueError(f"expected a non-empty list of strings such as "
                             f"[python3, agent.py], got {argv!r}")
        return argv

    @field_validator("cwd", mode="before")
    @classmethod
    def _cwd(cls, label: Any) -> Any:
        if not isinstance(label, str) or not label:
            raise ValueError(f"expected a folder, got {label!r}")
        return label

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, raw: Any) -> Any:
        if not isinstance(raw, dict):
            raise ValueError(f"expected a mapping NAME: value, got {raw!r}")
        env: dict[str, str] = {}
        for name, value in raw.items():
            if not isinstance(name, str) or not name or "=" in name:
                raise ValueError(f"{name!r} is not a variable name")
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                # Never echo the value: it may be a secret.
                raise ValueError(f"{name}: expected a string or a number "
                                 f"(quote true/false), got {type(value).__name__}")
            env[name] = str(value)
        return env

    @field_validator("worker", mode="before")
    @classmethod
    def _worker(cls, worker: Any) -> Any:
        if not isinstance(worker, bool):
            raise ValueError(f"expected true or false, got {worker!r}")
        return worker

    @field_validator("cancel_timeout_s", mode="before")
    @classmethod
    def _grace(cls, grace: Any) -> Any:
        if (isinstance(grace, bool) or not isinstance(grace, (int, float))
                or not math.isfinite(grace) or grace < 0):
            raise ValueError(f"expected a number >= 0, got {grace!r}")
        return grace

    @field_validator("max_stderr_bytes", mode="before")
    @classmethod
    def _max_stderr(cls, size: Any) -> Any:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"expected an integer >= 0, got {size!r}")
        return size


@HARNESSES.register("command", shorthand="argv")
class CommandHarness(Harness):
    """Runs a program per attempt, or keeps a pool of worker programs (``worker``)."""

    options_model = CommandOptions

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str] | None = None,
                 worker: bool = False, cancel_timeout_s: float = 2.0,
                 max_stderr_bytes: int = 65536, cwd_label: str | None = None) -> None:
        self.argv = list(argv)
        self.cwd = cwd
        self.env = dict(env or {})
        self.worker = worker
        self.cancel_timeout_s = cancel_timeout_s
        self.max_stderr_bytes = max_stderr_bytes
        self._identity = _identity(self.argv, cwd, cwd_label or str(cwd), self.env, worker)
        self._children = Supervisor(self.argv, cwd=cwd, env=self.env, grace=cancel_timeout_s,
                                    max_stderr=max_stderr_bytes, line_mode=worker)
        self._ids = itertools.count(1)  # the ids of worker requests, unique per harness

    @property
    def identity(self) -> str:
        return self._identity

    async def run(self, config: dict[str, Any], task: Task, ctx: AttemptContext) -> RunOutput:
        # Answer a little before the engine's own deadline, so that the attempt's
        # error can carry the child's stderr instead of a bare "no result".
        margin = min(0.25, 0.1 * ctx.timeout_s)
        until = ctx.deadline - margin
        payload: dict[str, Any] = {
            "config": config, "task": task.model_dump(mode="json"),
            "ctx": {"seed": ctx.seed, "attempt": ctx.attempt, "split": ctx.split,
                    "timeout_s": ctx.timeout_s}}
        hard = ctx.deadline - margin / 2
        if self.worker:
            return await self._run_worker(payload, until, hard, ctx.timeout_s)
        return await self._run_once(payload, until, hard, ctx.timeout_s)

    async def _run_once(self, payload: dict[str, Any], until: float, hard: float,
                        timeout_s: float) -> RunOutput:
        child = await self._start(self._children.spawn())
        try:
            child.send(_encode(payload, until), eof=True)
            if not await child.wait(lambda: not child.alive or child.overflow, until):
                raise await self._timed_out(child, hard, timeout_s)
            if child.overflow:
                raise CommandError(_message(f"stdout exceeds {MAX_STDOUT_BYTES} bytes", child))
            await child.drain()
            if child.returncode != 0:
                raise CommandError(_message(_exit_reason(child.returncode), child))
            return _output(_object(bytes(child.stdout), child), child)
        finally:
            self._children.stop(child)

    async def _run_worker(self, payload: dict[str, Any], until: float, hard: float,
                          timeout_s: float) -> RunOutput:
        try:
            worker = await self._start(self._children.take_worker())
            return await self._exchange(worker, payload, until, hard, timeout_s)
        except _NotThisAttempt as fault:
            log.warning("command worker %s %s; the attempt goes to a new worker",
                        fault.pgid, fault)
        # A new worker has no earlier exchange to blame (it never raises _NotThisAttempt):
        # whatever it does is this attempt's, so the attempt is sent again at most once.
        worker = await self._start(self._children.spawn())
        return await self._exchange(worker, payload, until, hard, timeout_s)

    async def _exchange(self, worker: Child, payload: dict[str, Any], until: float,
                        hard: float, timeout_s: float) -> RunOutput:
        """One request and the reply that echoes its id. Raises :class:`_NotThisAttempt`
        when the worker failed for an earlier exchange (a stale reply, an exit before it
        read the request), :class:`CommandError` when it failed this one."""
        exchange = str(next(self._ids))
        earlier = list(worker.exchanges)
        worker.exchanges.append(exchange)
        reusable = False
        try:
            worker.send(_encode({"id": exchange, **payload}, until) + b"\n", eof=False)
            if not await worker.wait(
                    lambda: bool(worker.lines) or not worker.alive or worker.overflow, until):
                raise await self._timed_out(worker, hard, timeout_s)
            if not worker.lines and not worker.alive:
                await worker.drain_stdout()  # its exit can be seen before its last output
            line = worker.next_line()
            if line is None:
                raise _no_reply(worker, earlier, exchange)
            reply = _object(line, worker)
            _check_echo(reply.pop("id", None), worker, earlier, exchange)
            output = _output(reply, worker)
            if worker.lines:
                log.warning("command worker %s replied more than once to request %s; "
                            "replacing it", worker.pgid, exchange)
            else:
                reusable = True
            return output
        finally:
            if reusable and worker.alive:
                self._children.keep(worker)
            else:
                self._children.stop(worker)

    async def _start(self, starting: Awaitable[Child]) -> Child:
        try:
            child = await starting
        except Exception as exc:  # a missing program, a full process table, ...
            raise CommandError(f"cannot start {self.argv[0]!r}: {exc}") from None
        return child

    async def _timed_out(self, child: Child, hard: float, timeout_s: float) -> CommandTimeout:
        child.terminate(self.cancel_timeout_s)
        # A moment to exit and say why on stderr, still before the engine's deadline.
        exited = await child.wait_exit(min(time.monotonic() + self.cancel_timeout_s, hard))
        then = ("it exited" if exited else
                f"SIGKILL follows in {self.cancel_timeout_s:g} s unless it exits")
        return CommandTimeout(_message(
            f"gave no result within {timeout_s:g} s; sent SIGTERM to its process group, {then}",
            child))

    async def aclose(self) -> None:
        await self._children.aclose()

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> CommandHarness:
        options = CommandOptions.model_validate(args)
        cwd = (ctx.base_dir / options.cwd).resolve()
        if not cwd.is_dir():
            raise ctx.error(f"{options.cwd!r} is not a folder ({cwd})", "command", "cwd")
        _check_program(options.argv[0], cwd, options.env, ctx.at("command", "argv"))
        return cls(options.argv, cwd=cwd, env=options.env, worker=options.worker,
                   cancel_timeout_s=float(options.cancel_timeout_s),
                   max_stderr_bytes=options.max_stderr_bytes,
                   cwd_label=os.path.normpath(options.cwd))


def _check_program(program: str, cwd: Path, env: dict[str, str], where: BuildContext) -> None:
    """Fail at load, not on every attempt, when the program cannot be found."""
    if os.sep in program:
        path = cwd / program
        if not path.is_file() or not os.access(path, os.X_OK):
            raise where.error(f"{program!r} is not an executable file (from {cwd})")
    elif shutil.which(program, path=env.get("PATH", os.environ.get("PATH"))) is None:
        raise where.error(f"program {program!r} not found on PATH")


def _identity(argv: list[str], cwd: Path, cwd_label: str, env: dict[str, str],
              worker: bool, kind: str = "command") -> str:
    """Command, cwd as written (portable), digests of the env and of the files that argv
    names relative to cwd (the agent script). Env values may be secrets: digest only.
    The program itself is left out when found through PATH, as are absolute paths
    (an interpreter's binary: machine-specific and large)."""
    files: dict[str, str] = {}
    for i, arg in enumerate(argv):
        if not arg or os.path.isabs(arg) or (i == 0 and os.sep not in arg):
            continue
        path = cwd / arg
        if path.is_file():
            files[arg] = file_digest(path)
    parts = [kind, shlex.join(argv), f"cwd={cwd_label}"]
    if env:
        parts.append("env=" + digest_of(env)[:16])
    if files:
        parts.append("files=" + digest_of(files)[:16])
    if worker:
        parts.append("worker")
    return ":".join(parts)


def _encode(payload: dict[str, Any], until: float) -> bytes:
    payload["ctx"]["remaining_s"] = round(max(0.0, until - time.monotonic()), 3)
    try:
        return json.dumps(payload).encode()
    except (TypeError, ValueError) as exc:
        raise CommandError(f"the attempt cannot be sent as JSON: {exc}") from None


def _object(raw: bytes, child: Child) -> dict[str, Any]:
    """The JSON object a child printed; anything else is a :class:`CommandError`."""
    try:
        value = json.loads(raw)
    except ValueError:
        text = raw.decode("utf-8", "replace").strip()
        raise CommandError(_message(f"stdout is not JSON: "
                                    f"{_excerpt(text) if text else '(empty)'}",
                                    child)) from None
    if not isinstance(value, dict):
        raise CommandError(_message(f"stdout is JSON but not an object: "
                                    f"{type(value).__name__}", child))
    return value


def _excerpt(text: str) -> str:
    excerpt = repr(text[:_EXCERPT_CHARS])  # repr: one line, control bytes visible
    if len(text) > _EXCERPT_CHARS or len(excerpt) > _EXCERPT_CHARS + 2:
        excerpt = excerpt[:_EXCERPT_CHARS] + "..."
    return excerpt


def _output(value: dict[str, Any], child: Child) -> RunOutput:
    try:
        output = RunOutput.model_validate(value)
    except ValidationError as exc:
        problem = validation_problem(exc)
        raise CommandError(_message(f"gave invalid output: {problem.field}: {problem.message}",
                                    child)) from None
    stderr = child.stderr.text()
    if stderr:
        # RunOutput has no place for logs; ``trace`` is the agent's own, so it is only
        # filled when the child left it empty.
        if output.trace is None:
            output.trace = {"stderr": stderr}
        else:
            log.debug("stderr of a command attempt that set its own trace:\n%s", stderr)
    return output


def _message(reason: str, child: Child) -> str:
    tail = child.stderr.text(_ERROR_STDERR_CHARS)
    return f"command {reason}; " + (f"stderr:\n{tail}" if tail else "stderr: (empty)")


def _exit_reason(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with code {returncode}"


def _no_reply(worker: Child, earlier: list[str], exchange: str) -> Exception:
    """Why ``worker`` gave no reply line to request ``exchange``: too long a reply, an
    exit before it read the request (an earlier exchange's fault), or an exit."""
    if worker.overflow:
        return CommandError(_message(f"reply exceeds {MAX_STDOUT_BYTES} bytes", worker))
    if earlier and worker.unread_at_exit:
        return _NotThisAttempt(
            worker.pgid, f"{_exit_reason(worker.returncode)} after its reply to "
                         f"request {earlier[-1]}, before it read request {exchange}")
    return CommandError(_message(
        f"worker {_exit_reason(worker.returncode)} before answering", worker))


def _check_echo(echoed: Any, worker: Child, earlier: list[str], exchange: str) -> None:
    """Refuse a reply whose id is not request ``exchange``'s; one that answers an
    earlier request is that exchange's fault, not this attempt's."""
    if echoed == exchange:
        return
    if isinstance(echoed, str) and echoed in earlier:
        raise _NotThisAttempt(
            worker.pgid, f"replied out of step: a reply to request {echoed} "
                         f"came while request {exchange} was waiting")
    raise CommandError(_message(
        "worker replied out of step: "
        + (f"the reply has no \"id\" (request {exchange})" if echoed is None else
           f"the reply's id is {_excerpt(json.dumps(echoed))}, the request's "
           f"{exchange}"), worker))
