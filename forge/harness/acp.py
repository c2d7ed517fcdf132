"""The ``acp`` harness: forge as the client of an Agent Client Protocol agent over stdio.

Bench syntax (a list is the shorthand for ``argv``)::

    harness:
      acp:
        argv: [npx, some-acp-agent]      # the agent; files it names resolve against cwd
        python: false                    # true: argv is a Python script (and its arguments)
                                         # run by the interpreter that runs forge
        cwd: "."                         # where argv's files are (the bench folder)
        env: {NAME: value}               # added to forge's environment (not secrets)
        secrets: [ANTHROPIC_API_KEY]     # variables the agent needs: must be set; redacted
        worker: false                    # true: keep agent processes between attempts
        files: {AGENTS.md: templates/agents.md}   # rendered into each working directory
        permission: reject_once          # the policy when the config sets none
        settings: {mode: mode, model: model, permission: permission, options: {}}
        meta_key: forge                  # session/new's _meta key for the config (null: none)
        tool_name: title                 # or kind: what names a tool call in forge
        cancel_timeout_s: 2              # after session/cancel; after SIGTERM
        max_output_bytes: 16777216       # what the agent may send in one attempt
        max_stderr_bytes: 65536
        watch_bench: true                # an attempt that changed the bench folder fails

One attempt: a fresh working directory (a temporary folder of its own, removed after)
gets the rendered ``files``; the agent process (a new one in that folder, or with
``worker`` an idle one) gets ``initialize`` once, then ``session/new`` with that
folder as ``cwd`` and ``_meta: {forge: {config, seed, attempt, split, task_id}}``; the
session's mode, model and config options are set from the config where the agent
offers them; the task's input is the prompt. The streamed message text is the output,
the tool calls (with their updates) are forge's tool calls, the stop reason and usage
are kept. See docs/guide/acp.md for the whole contract, the failure cases and what
forge can and cannot enforce about where an agent writes.

The SDK (``agent-client-protocol``, ``pip install 'forge[acp]'``) is imported when a
bench that uses this harness loads, never with forge.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from forge._util.bounds import MAX_OUTPUT_BYTES
from forge._util.digest import digest_of
from forge.core.spec import BuildContext
from forge.core.task import Task
from forge.harness._acp_common import POLICIES, POLICY_NAMES, AcpError, AcpTimeout, Policy
from forge.harness._acp_files import BenchWatch, Templates
from forge.harness.base import HARNESSES, AttemptContext, Harness, RunOutput
from forge.harness.command import CommandOptions, _check_program, _identity
from forge.harness.openai import render_input
from forge.secrets.masking import secret_from_env

if TYPE_CHECKING:
    from forge.harness._acp_session import Plan
    from forge.harness._acp_wire import AgentPool

__all__ = ["POLICIES", "POLICY_NAMES", "AcpError", "AcpHarness", "AcpOptions", "AcpSettings",
           "AcpTimeout"]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SDK = "agent-client-protocol"
_SDK_MIN = (0, 12)
_INSTALL = "pip install 'forge[acp]'"


class AcpSettings(BaseModel):
    """Which config keys reach the session (null: none): the session mode, the model
    (the agent's select option of category ``model``), the permission policy, and
    session config options by id."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    mode: str | None = "mode"
    model: str | None = "model"
    permission: str | None = "permission"
    options: dict[str, str] = Field(default_factory=dict)


class AcpOptions(CommandOptions):
    """The ``acp:`` arguments of a bench's harness (``argv``, ``cwd``, ``env``,
    ``worker``, ``cancel_timeout_s``, ``max_stderr_bytes`` as the command harness's)."""

    python: bool = False
    secrets: list[str] = Field(default_factory=list)
    files: dict[str, str] = Field(default_factory=dict)
    permission: Policy = "reject_once"
    settings: AcpSettings = Field(default_factory=AcpSettings)
    meta_key: str | None = "forge"
    tool_name: Literal["title", "kind"] = "title"
    max_output_bytes: int = Field(default=MAX_OUTPUT_BYTES, ge=1024, le=4 * MAX_OUTPUT_BYTES)
    watch_bench: bool = True

    @field_validator("secrets")
    @classmethod
    def _secrets(cls, names: list[str]) -> list[str]:
        for name in names:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not an environment variable name")
        return names


@HARNESSES.register("acp", shorthand="argv")
class AcpHarness(Harness):
    """Drives an ACP agent: a session per attempt, in a working directory of its own."""

    options_model = AcpOptions

    def __init__(self, options: AcpOptions, *, cwd: Path, templates: Templates,
                 bench_dir: Path, cwd_label: str | None = None) -> None:
        self.options = options
        self.cwd = cwd
        self.templates = templates
        self.bench_dir = bench_dir
        # forge's own interpreter: the one the SDK was installed into with forge[acp].
        self.argv = ([sys.executable] if options.python else []) + _absolute(
            options.argv, cwd, script=options.python)
        self._identity = "|".join([
            _identity((["python"] if options.python else []) + list(options.argv), cwd,
                      cwd_label or str(cwd), dict(options.env),
                      options.worker, kind="acp"),
            digest_of(options.model_dump(mode="json", exclude={
                "argv", "cwd", "env", "max_stderr_bytes"}))[:16],
            "files=" + templates.digest[:16]])
        self._watch = BenchWatch(bench_dir) if options.watch_bench else None
        self._started = False
        self._pool: AgentPool | None = None  # made at the first attempt, in its loop
        self._root: Path | None = None

    @property
    def identity(self) -> str:
        return self._identity

    def secret_envs(self) -> tuple[str, ...]:
        return tuple(self.options.secrets)

    async def run(self, config: dict[str, Any], task: Task, ctx: AttemptContext) -> RunOutput:
        from forge.harness import _acp_session as session
        from forge.harness._acp_turn import Turn

        if not self._started:
            self._started = True
            if self._watch is not None:
                self._watch.changes()  # the first look, before any agent ran
        # The cancel goes out a little before the engine's deadline, so that the agent
        # can end its turn and the error carry its stderr.
        margin = min(0.5, 0.2 * ctx.timeout_s)
        clock = session.Clock(until=ctx.deadline - margin, hard=ctx.deadline - margin / 4,
                              timeout_s=ctx.timeout_s, grace=self.options.cancel_timeout_s)
        plan = self._plan(config, task, ctx)
        turn_policy = self._policy(config)
        workdir = Path(tempfile.mkdtemp(prefix="attempt-", dir=self._root_dir()))
        try:
            self.templates.render(config, workdir)
            turn = Turn(workdir, policy=turn_policy, tool_name=self.options.tool_name)
            output = await session.attempt(self._pool_now(), turn, plan, clock,
                                           self._cwd_for(workdir))
        except asyncio.CancelledError:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        except Exception as exc:
            self._finish(workdir, exc)
            raise
        self._finish(workdir, None)
        return output

    def _plan(self, config: dict[str, Any], task: Task, ctx: AttemptContext) -> Plan:
        from forge.harness._acp_session import Plan

        keys = self.options.settings
        options: dict[str, str | bool] = {}
        for option_id, key in keys.options.items():
            if key in config:
                value = config[key]
                if not isinstance(value, (str, bool)):
                    raise ValueError(f"setting {key}: session config option {option_id!r} "
                                     f"takes a string or true/false, got {value!r}")
                options[option_id] = value
        meta = {}
        if self.options.meta_key:
            meta[self.options.meta_key] = {
                "config": config, "seed": ctx.seed, "attempt": ctx.attempt,
                "split": ctx.split, "task_id": task.id}
        return Plan(prompt=render_input(task.input), meta=meta,
                    mode=_text_setting(config, keys.mode, "a mode id"),
                    model=_text_setting(config, keys.model, "a model id"), options=options)

    def _policy(self, config: dict[str, Any]) -> str:
        key = self.options.settings.permission
        if key is None or key not in config:
            return self.options.permission
        value = config[key]
        if value not in POLICY_NAMES:
            raise ValueError(f"setting {key}: expected a permission policy, one of "
                             f"{', '.join(POLICY_NAMES)}; got {value!r}")
        return str(value)

    def _root_dir(self) -> Path:
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="forge-acp-"))
        return self._root

    def _cwd_for(self, workdir: Path) -> Callable[[], Path]:
        """Where a new agent process starts: the attempt's folder, or for a worker (which
        outlives it) a folder of its own."""
        if not self.options.worker:
            return lambda: workdir
        return lambda: Path(tempfile.mkdtemp(prefix="worker-", dir=self._root_dir()))

    def _pool_now(self) -> AgentPool:
        from forge.harness._acp_wire import AgentPool
        from forge.harness.supervisor import Supervisor

        if self._pool is None:
            o = self.options
            supervisor = Supervisor(self.argv, cwd=self.cwd, env=dict(o.env),
                                    grace=o.cancel_timeout_s, max_stderr=o.max_stderr_bytes,
                                    line_mode=True)
            self._pool = AgentPool(supervisor, limit=o.max_output_bytes, worker=o.worker)
        return self._pool

    def _finish(self, workdir: Path, failure: Exception | None) -> None:
        """Remove the working directory; fail the attempt that changed the bench folder."""
        shutil.rmtree(workdir, ignore_errors=True)
        changes = self._watch.changes() if self._watch is not None else []
        if changes:
            shown = ", ".join(changes[:10]) + (f" and {len(changes) - 10} more"
                                                if len(changes) > 10 else "")
            also = f"; the attempt also failed: {failure}" if failure is not None else ""
            raise AcpError(f"the agent changed the bench folder {self.bench_dir}: {shown}"
                           f"{also}") from None

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> AcpHarness:
        _require_sdk(ctx)
        options = AcpOptions.model_validate(args)
        cwd = (ctx.base_dir / options.cwd).resolve()
        if not cwd.is_dir():
            raise ctx.error(f"{options.cwd!r} is not a folder ({cwd})", "acp", "cwd")
        if options.python:
            if not (cwd / options.argv[0]).is_file():
                raise ctx.error(f"{options.argv[0]!r} is not a file (from {cwd})", "acp",
                                "argv")
        else:
            _check_program(options.argv[0], cwd, dict(options.env), ctx.at("acp", "argv"))
        for name in options.secrets:
            if secret_from_env(name) is None:
                raise ctx.error(f"environment variable {name} is not set (the agent's "
                                "secrets come from the environment only)", "acp", "secrets")
        templates = Templates.load(options.files, ctx)
        return cls(options, cwd=cwd, templates=templates, bench_dir=ctx.base_dir.resolve(),
                   cwd_label=os.path.normpath(options.cwd))


def _require_sdk(ctx: BuildContext) -> None:
    """One line naming the install when the SDK is missing or too old."""
    try:
        import acp  # noqa: F401
    except ImportError:
        raise ctx.error(f"the acp harness needs the {_SDK} package: {_INSTALL}",
                        "acp") from None
    try:
        version = metadata.version(_SDK)
    except metadata.PackageNotFoundError:  # imported from a source tree: trust it
        return
    found = tuple(int(p) for p in re.findall(r"\d+", version)[:2])
    if found < _SDK_MIN:
        raise ctx.error(f"the acp harness needs {_SDK} >= {'.'.join(map(str, _SDK_MIN))}, "
                        f"found {version}: {_INSTALL.replace('install', 'install -U')}", "acp")


def _text_setting(config: dict[str, Any], key: str | None, what: str) -> str | None:
    if key is None or key not in config:
        return None
    value = config[key]
    if not isinstance(value, str):
        raise ValueError(f"setting {key}: expected {what} (a string), got {value!r}")
    return value


def _absolute(argv: list[str], cwd: Path, *, script: bool) -> list[str]:
    """argv with each file it names relative to ``cwd`` made absolute: the agent starts
    in another folder (the attempt's), and must still find its script. A program named
    without a folder (``npx``) is found on PATH, unless it is a ``script``."""
    out = []
    for i, arg in enumerate(argv):
        relative = arg and not os.path.isabs(arg) and (i > 0 or script or os.sep in arg)
        out.append(str((cwd / arg).resolve()) if relative and (cwd / arg).is_file() else arg)
    return out
