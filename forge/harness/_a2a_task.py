"""Following one A2A task to its end: its events streamed, or its state polled.

:class:`TaskFollower` sends the attempt's message and keeps the task as the agent
reports it: the first event (a ``Task``, or a ``Message`` that answers at once), then
status and artifact updates (``append`` extends an artifact's parts, otherwise an
artifact replaces the one of the same id), until the task reaches a final state
(completed, failed, canceled, rejected) or stops for input (input-required,
auth-required). Without streaming the message is sent with ``return_immediately``
and the task is read back (``tasks/get``) at a growing interval until then.

Every SDK type is imported where it is used: this module is imported only when a
bench uses the ``a2a`` harness.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from a2a.client import Client
    from a2a.types import Message, SendMessageRequest, StreamResponse, Task

__all__ = ["A2AProtocolError", "TaskFollower", "state_name"]

#: States after which a task changes no more.
FINAL = frozenset({"completed", "failed", "canceled", "rejected"})
#: States in which a task waits for what forge does not send (a second message,
#: credentials): the attempt ends there.
WAITING = frozenset({"input-required", "auth-required"})
#: States a trace lists at most (a chatty agent sends hundreds of "working").
_MAX_STATES = 64
#: The poll interval grows by this factor up to this many seconds.
_POLL_GROWTH, _POLL_MAX_S = 1.5, 1.0


class A2AProtocolError(Exception):
    """The agent broke the protocol: an event of another task, a stream cut short."""


def state_name(state: int) -> str:
    """A task state as A2A writes it: ``completed``, ``input-required``."""
    from a2a.types import TaskState

    try:
        name: str = TaskState.Name(state)
    except ValueError:
        return f"unknown state {state}"
    return name.removeprefix("TASK_STATE_").lower().replace("_", "-")


class TaskFollower:
    """One attempt's task, as far as the agent has told it."""

    def __init__(self, client: Client, *, streaming: bool, poll_interval_s: float) -> None:
        self.client = client
        self.streaming = streaming
        self.poll_interval_s = poll_interval_s
        self.task: Task | None = None
        self.message: Message | None = None  # an answer without a task
        self.events = 0
        self.states: list[str] = []

    @property
    def state(self) -> str | None:
        return state_name(self.task.status.state) if self.task is not None else None

    @property
    def done(self) -> bool:
        """Whether the agent has answered, ended the task or stopped it for input."""
        return self.message is not None or self.state in FINAL | WAITING

    @property
    def open_task(self) -> str | None:
        """The id of a task that is not final yet (what a cancel would end), or None."""
        if self.task is None or not self.task.id or self.state in FINAL:
            return None
        task_id: str = self.task.id
        return task_id

    async def run(self, request: SendMessageRequest) -> None:
        """Send the message and follow its task until :attr:`done`."""
        # Closed when left early: the stream's connection is released at once.
        stream = cast("AsyncGenerator[StreamResponse, None]", self.client.send_message(request))
        async with contextlib.aclosing(stream) as events:
            async for event in events:
                self.apply(event)
                if self.done:
                    return
        if self.streaming and not self.done:
            raise A2AProtocolError(
                "the event stream ended before the task did "
                f"(its state: {self.state or 'no task yet'})")
        await self._poll()

    async def _poll(self) -> None:
        from a2a.types import GetTaskRequest

        wait = self.poll_interval_s
        while not self.done:
            if self.task is None:
                raise A2AProtocolError("the agent's answer holds neither a task nor a message")
            await asyncio.sleep(wait)
            wait = min(wait * _POLL_GROWTH, max(_POLL_MAX_S, self.poll_interval_s))
            task = await self.client.get_task(GetTaskRequest(id=self.task.id,
                                                             history_length=0))
            self._check_id(task.id)
            self.events += 1
            self.task.CopyFrom(task)
            self._note_state()

    def apply(self, event: StreamResponse) -> None:
        """One event of the agent's, into the task as known."""
        from a2a.types import Task

        self.events += 1
        kind = event.WhichOneof("payload")
        if kind == "message":
            self.message = event.message
            return
        if kind == "task":
            if self.task is not None:
                self._check_id(event.task.id)
            self.task = Task()
            self.task.CopyFrom(event.task)
        elif kind == "status_update":
            update = event.status_update
            task = self._task_of(update.task_id, update.context_id)
            task.status.CopyFrom(update.status)
            task.metadata.MergeFrom(update.metadata)
        elif kind == "artifact_update":
            change = event.artifact_update
            self._add_artifact(self._task_of(change.task_id, change.context_id), change)
        else:
            raise A2AProtocolError(f"an event of no known kind ({kind or 'empty'})")
        self._note_state()

    def _task_of(self, task_id: str, context_id: str) -> Task:
        """The task an update is about: the one known, or one begun by the update."""
        from a2a.types import Task

        if self.task is None:
            self.task = Task(id=task_id, context_id=context_id)
        else:
            self._check_id(task_id)
        return self.task

    def _check_id(self, task_id: str) -> None:
        assert self.task is not None
        if task_id and self.task.id and task_id != self.task.id:
            raise A2AProtocolError(f"an event of another task ({task_id!r}) came in the "
                                   f"stream of task {self.task.id!r}")

    @staticmethod
    def _add_artifact(task: Task, change: Any) -> None:
        new = change.artifact
        for artifact in task.artifacts:
            if artifact.artifact_id == new.artifact_id:
                if change.append:
                    artifact.parts.extend(new.parts)
                else:
                    artifact.CopyFrom(new)
                return
        task.artifacts.append(new)

    def _note_state(self) -> None:
        state = self.state
        new = state is not None and (not self.states or self.states[-1] != state)
        if new and state is not None and len(self.states) < _MAX_STATES:
            self.states.append(state)

    def trace(self) -> dict[str, Any]:
        """What the journal keeps of the exchange: ids, the states in order, the
        artifacts' names, how many events came."""
        task = self.task
        return {
            "task_id": task.id if task is not None else None,
            "context_id": task.context_id if task is not None else None,
            "states": list(self.states),
            "artifacts": [a.name or a.artifact_id for a in task.artifacts] if task else [],
            "answered_with": "message" if self.message is not None else "task",
            "streaming": self.streaming,
            "events": self.events,
        }
