"""One attempt of the ``acp`` harness, on the wire: the handshake (once a process), a new
session in the attempt's working directory, the config applied to it (mode, model,
session config options), the prompt, and the end: answered, failed (with the reason), or
cancelled at the timeout (``session/cancel``, then the process stopped).

Imports the ``acp`` SDK: only the ``acp`` harness imports this module, once the SDK
was found.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, text_block
from acp.schema import (
    ClientCapabilities,
    FileSystemCapabilities,
    Implementation,
    NewSessionResponse,
    PromptResponse,
    SessionConfigOptionBoolean,
    SessionConfigOptionSelect,
    SessionConfigSelectGroup,
)
from pydantic import ValidationError

from forge._util.files import validation_problem
from forge._version import __version__
from forge.harness._acp_common import AcpError, AcpTimeout
from forge.harness._acp_turn import Turn
from forge.harness._acp_wire import AgentPool, AgentProcess
from forge.harness.base import RunOutput
from forge.harness.command import _exit_reason
from forge.harness.supervisor import DRAIN_S, Child

__all__ = ["Clock", "Plan", "attempt"]

log = logging.getLogger(__name__)

#: The engine keeps the first 2000 characters of an error; the stderr tail must fit.
_ERROR_STDERR_CHARS = 1200
_CAPABILITIES = ClientCapabilities(
    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=False)


@dataclass(frozen=True)
class Plan:
    """What the attempt sends: the prompt, ``_meta`` of session/new, the session's mode,
    model and config options (None: the config does not set it)."""

    prompt: str
    meta: dict[str, Any]
    mode: str | None
    model: str | None
    options: dict[str, str | bool]


@dataclass(frozen=True)
class Clock:
    """``until``: when the prompt is cancelled; ``hard``: a little before the engine's own
    deadline (monotonic clock); ``grace``: how long a cancelled agent has to end its turn,
    and a stopped one to exit before SIGKILL."""

    until: float
    hard: float
    timeout_s: float
    grace: float


class _Stale(Exception):
    """A reused process failed before the attempt's session opened: not the attempt's doing."""


async def attempt(pool: AgentPool, turn: Turn, plan: Plan, clock: Clock,
                  new_cwd: Callable[[], Path]) -> RunOutput:
    """Run one attempt on a process from ``pool``; one that served an attempt before and
    fails before the session opens is replaced, and the attempt goes to a new one."""
    proc, reused = await _take(pool, new_cwd)
    try:
        return await _drive(pool, proc, turn, plan, clock, reused=reused)
    except _Stale as stale:
        log.warning("acp agent %s %s; the attempt goes to a new process", proc.child.pgid,
                    stale)
    proc, _ = await _take(pool, new_cwd, fresh=True)
    turn = Turn(turn.workdir, policy=turn.policy, tool_name=turn.tool_name)
    return await _drive(pool, proc, turn, plan, clock, reused=False)


async def _take(pool: AgentPool, new_cwd: Callable[[], Path], *,
                fresh: bool = False) -> tuple[AgentProcess, bool]:
    try:
        return await pool.take(new_cwd, fresh=fresh)
    except Exception as exc:  # a missing program, a full process table, ...
        raise AcpError(f"cannot start the agent: {exc}") from None


async def _drive(pool: AgentPool, proc: AgentProcess, turn: Turn, plan: Plan, clock: Clock,
                 *, reused: bool) -> RunOutput:
    proc.client.begin(turn)
    proc.transport.reset()
    clean = False
    work = asyncio.ensure_future(_converse(proc, turn, plan))
    try:
        done, _ = await asyncio.wait({work}, timeout=max(0.0, clock.until - time.monotonic()))
        if not done:
            raise await _timed_out(proc, turn, work, clock)
        exc = work.exception()
        if exc is not None:
            failure = await _failure(proc, turn, exc, clock)
            if reused and turn.session_id is None and isinstance(exc, ConnectionError):
                raise _Stale(str(failure)) from None
            raise failure
        response = work.result()
        if response.stop_reason == "cancelled":
            raise AcpError(_message("ended its turn as cancelled, though forge did not cancel "
                                    "it", proc.child))
        output = turn.output(response, proc.child.stderr.text())
        clean = True
        return output
    finally:
        if not work.done():
            work.cancel()
            work.add_done_callback(lambda f: f.cancelled() or f.exception())
        await _end(pool, proc, turn, clean=clean, clock=clock)


async def _converse(proc: AgentProcess, turn: Turn, plan: Plan) -> PromptResponse:
    conn = proc.conn
    if proc.init is None:
        turn.step = "initialize"
        proc.init = await conn.initialize(
            protocol_version=PROTOCOL_VERSION, client_capabilities=_CAPABILITIES,
            client_info=Implementation(name="forge", version=__version__))
        if proc.init.protocol_version != PROTOCOL_VERSION:
            raise AcpError(f"the agent speaks ACP version {proc.init.protocol_version}; forge "
                           f"speaks version {PROTOCOL_VERSION}")
    if proc.init.agent_info is not None:
        turn.session["agent"] = f"{proc.init.agent_info.name} {proc.init.agent_info.version}"
    turn.step = "session/new"
    session = await conn.new_session(cwd=str(turn.workdir), mcp_servers=[], **plan.meta)
    proc.client.opened(session.session_id)
    turn.session["session_id"] = session.session_id
    await _apply(proc, turn, session, plan)
    turn.step = "session/prompt"
    return await conn.prompt(session_id=session.session_id, prompt=[text_block(plan.prompt)])


async def _apply(proc: AgentProcess, turn: Turn, session: NewSessionResponse,
                 plan: Plan) -> None:
    """Set the session's mode, model and config options to the config's, where the agent
    offers them; a value it does not offer is the attempt's error."""
    options = {o.id: o for o in session.config_options or []}
    modes = session.modes
    if modes is not None:
        turn.session["modes"] = [m.id for m in modes.available_modes]
    if plan.mode is not None:
        if modes is not None and modes.available_modes:
            offered = [m.id for m in modes.available_modes]
            if plan.mode not in offered:
                raise AcpError(f"mode {plan.mode!r} is not one the agent offers: "
                               f"{', '.join(offered)}")
            if plan.mode != modes.current_mode_id:
                turn.step = "session/set_mode"
                await proc.conn.set_session_mode(session_id=session.session_id,
                                                 mode_id=plan.mode)
            turn.session["mode"] = plan.mode
        else:
            await _by_category(proc, turn, session.session_id, options, "mode", plan.mode)
    if plan.model is not None:
        await _by_category(proc, turn, session.session_id, options, "model", plan.model)
    for option_id, value in plan.options.items():
        option = options.get(option_id)
        if option is None:
            raise AcpError(f"the agent offers no session config option {option_id!r}"
                           f" (it offers: {', '.join(options) or 'none'})")
        await _set_option(proc, turn, session.session_id, option, value)


async def _by_category(proc: AgentProcess, turn: Turn, session_id: str,
                       options: dict[str, Any], category: str, value: str) -> None:
    option = next((o for o in options.values() if isinstance(o, SessionConfigOptionSelect)
                   and o.category == category), None)
    if option is None:
        # The value still reaches the agent in _meta; the trace says it set nothing.
        turn.session[f"{category}_not_offered"] = value
        return
    await _set_option(proc, turn, session_id, option, value)
    turn.session[category] = value


async def _set_option(proc: AgentProcess, turn: Turn, session_id: str,
                      option: SessionConfigOptionSelect | SessionConfigOptionBoolean,
                      value: str | bool) -> None:
    if isinstance(option, SessionConfigOptionBoolean):
        if not isinstance(value, bool):
            raise AcpError(f"session config option {option.id!r} takes true or false, the "
                           f"config gives {value!r}")
    else:
        offered = [o.value for item in option.options for o in (
            item.options if isinstance(item, SessionConfigSelectGroup) else [item])]
        if value not in offered:
            raise AcpError(f"{value!r} is not a value the agent offers for session config "
                           f"option {option.id!r}: {', '.join(offered)}")
    if value != option.current_value:
        turn.step = "session/set_config_option"
        await proc.conn.set_config_option(config_id=option.id, session_id=session_id,
                                          value=value)
    turn.session.setdefault("options", {})[option.id] = value


async def _timed_out(proc: AgentProcess, turn: Turn, work: asyncio.Future[PromptResponse],
                     clock: Clock) -> AcpTimeout:
    """Cancel the prompt in flight and give the agent ``grace`` to end its turn; the
    process is stopped after, whatever it did."""
    how = f"it was in {turn.step}"
    if turn.step == "session/prompt" and turn.session_id and proc.child.alive:
        with contextlib.suppress(Exception):
            await proc.conn.cancel(session_id=turn.session_id)
        end = min(time.monotonic() + clock.grace, clock.hard)
        done, _ = await asyncio.wait({work}, timeout=max(0.0, end - time.monotonic()))
        ended = (done and not work.cancelled() and work.exception() is None
                 and work.result().stop_reason == "cancelled")
        how = ("sent session/cancel and the agent ended its turn as cancelled" if ended else
               "sent session/cancel and the agent did not end its turn")
    return AcpTimeout(_message(
        f"gave no answer within {clock.timeout_s:g} s; {how}; its process group is "
        f"stopped (SIGTERM, SIGKILL after {clock.grace:g} s)", proc.child))


async def _failure(proc: AgentProcess, turn: Turn, exc: BaseException,
                   clock: Clock) -> AcpError:
    """The attempt's error for what ended its conversation early."""
    if isinstance(exc, AcpError):
        return AcpError(_message(str(exc), proc.child, who="acp session:"))
    if isinstance(exc, RequestError):
        data = f" ({exc.data})" if exc.data else ""
        return AcpError(_message(f"answered {turn.step} with error {exc.code}: {exc}{data}",
                                 proc.child))
    if isinstance(exc, ValidationError):
        problem = validation_problem(exc)
        return AcpError(_message(f"answered {turn.step} with what the protocol refuses: "
                                 f"{problem.field}: {problem.message}", proc.child))
    if isinstance(exc, ConnectionError):
        fault = proc.transport.fault
        if fault is not None:
            return AcpError(_message(f"{fault} (during {turn.step})", proc.child))
        await proc.child.wait_exit(min(time.monotonic() + DRAIN_S, clock.hard))
        how = (_exit_reason(proc.child.returncode) if not proc.child.alive
               else "closed its output")
        return AcpError(_message(f"{how} during {turn.step}", proc.child))
    return AcpError(_message(f"failed during {turn.step}: {type(exc).__name__}: {exc}",
                             proc.child))


async def _end(pool: AgentPool, proc: AgentProcess, turn: Turn, *, clean: bool,
               clock: Clock) -> None:
    """End the attempt's session: closed where the agent can close sessions; the process
    kept for the next attempt (``worker``) only after a clean one, else stopped."""
    proc.client.end()
    if clean and proc.can_close and turn.session_id is not None:
        left = min(clock.grace, clock.hard - time.monotonic())
        try:
            await asyncio.wait_for(proc.conn.close_session(session_id=turn.session_id),
                                   max(0.05, left))
        except Exception as exc:  # the answer stands; the process is not reused
            log.info("acp agent %s did not close session %s: %s", proc.child.pgid,
                     turn.session_id, exc)
            clean = False
    if clean and pool.worker and proc.clean and proc.can_close:
        pool.keep(proc)
    else:
        if clean and pool.worker and not proc.can_close:
            pool.no_close_warning()
        await pool.stop(proc)


def _message(reason: str, child: Child, *, who: str = "acp agent") -> str:
    tail = child.stderr.text(_ERROR_STDERR_CHARS)
    return f"{who} {reason}; " + (f"stderr:\n{tail}" if tail else "stderr: (empty)")
