"""A real A2A agent for the a2a harness tests: a2a-sdk's server on 127.0.0.1, run with uvicorn.

    python a2a_agent.py --port 8123 [--no-streaming] [--card-url URL]

The agent (an ``AgentExecutor`` with a scripted brain, no model) reads the config
forge sends in the message's metadata (``forge``) and answers by the task's text:

- ``q N``: completes with the artifact ``N*effort mode`` (the config's ``effort`` and
  ``mode``), reports a tool call ``multiply`` and token usage under ``forge`` in the
  task's metadata, after a status update ``working``;
- ``fail``: the task ends ``failed`` with the status message ``the tool backend is down``;
- ``reject`` / ``ask``: the task ends ``rejected`` / stops for ``input-required``;
- ``hang``: the task never ends (until it is cancelled);
- ``big``: one artifact of 17 MiB of text;
- ``message``: answers with a ``Message`` instead of a task;
- ``echo-auth``: answers with the request's ``Authorization`` header;
- ``crash``: the process exits at once (a served agent that dies).

A wrapper in front of the SDK's routes breaks the protocol where the text asks it to:
``garbage`` (a body that is not JSON), ``bad-result`` (JSON-RPC with a result that is
not a task), ``rpc-error`` (a JSON-RPC error), ``cut-stream`` (one event, then the
stream ends), ``bad-event`` (one event, then an event that is not JSON), ``error-event``
(one event, then an SSE ``error`` event), ``other-task`` (an event of another task).

``GET /_test/log`` returns what the agent saw: the metadata of each message, the ids
of the tasks it was asked to cancel, and how many executions are running now.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import sys
from typing import Any

import uvicorn
from a2a.helpers import new_task_from_user_message, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, TaskState
from asgi_tricks import Tricky
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

LOG: dict[str, Any] = {"metadata": [], "cancelled": [], "running": 0, "headers": []}


class ScriptedAgent(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        text = context.get_user_input()
        meta = MessageToDict(message.metadata).get("forge", {})
        LOG["metadata"].append(meta)
        LOG["headers"].append(context.call_context.state.get("headers", {}))
        if "crash" in text:
            os._exit(3)
        if "message" in text:
            await event_queue.enqueue_event(new_text_message("a direct answer",
                                                             context_id=message.context_id))
            return
        task = context.current_task or new_task_from_user_message(message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        LOG["running"] += 1
        try:
            await self._work(text, meta, updater, context)
        finally:
            LOG["running"] -= 1

    async def _work(self, text: str, meta: dict[str, Any], updater: TaskUpdater,
                    context: RequestContext) -> None:
        say = updater.new_agent_message
        if "hang" in text:
            await updater.start_work()
            await asyncio.sleep(3600)
        if "fail" in text:
            await updater.failed(say([new_text_part("the tool backend is down")]))
            return
        if "reject" in text:
            await updater.reject(say([new_text_part("not my kind of question")]))
            return
        if "ask" in text:
            await updater.requires_input(say([new_text_part("which one?")]))
            return
        if "big" in text:
            await updater.add_artifact([new_text_part("x" * (17 * 2**20))], name="big")
            await updater.complete()
            return
        if "echo-auth" in text:
            headers = context.call_context.state.get("headers", {})
            await updater.add_artifact([new_text_part(headers.get("authorization", "none"))])
            await updater.complete()
            return
        config = meta.get("config", {})
        n = int(text.split()[-1])
        effort = int(config.get("effort", 1))
        await updater.start_work()
        await updater.add_artifact([new_text_part(f"{n * effort} {config.get('mode')}")],
                                   name="answer")
        report = {"usage": {"input_tokens": 10 * effort, "output_tokens": 2},
                  "tool_calls": [{"name": "multiply", "args": {"a": n, "b": effort},
                                  "result": n * effort}],
                  "metrics": {"effort_seen": effort}, "signals": ["thought_hard"]}
        await updater.update_status(TaskState.TASK_STATE_COMPLETED, metadata={"forge": report})

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        LOG["cancelled"].append(context.task_id)
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


TRICKS = ("garbage", "bad-result", "rpc-error", "cut-stream", "bad-event", "error-event",
          "other-task")


def pick(scope: dict[str, Any], body: bytes) -> Any:
    """The trick a request's text names, as a responder (None: the SDK answers)."""
    request = json.loads(body)
    text = json.dumps(request.get("params", {}).get("message", {}).get("parts", []))
    trick = next((t for t in TRICKS if t in text), None)
    return None if trick is None else functools.partial(_trick, trick, request)


async def _trick(trick: str, request: dict[str, Any], send: Any) -> None:
    rid = request.get("id")
    task = {"id": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_WORKING"}}
    if trick in ("garbage", "bad-result", "rpc-error"):
        body = {"garbage": b"this is not JSON {",
                "bad-result": json.dumps({"jsonrpc": "2.0", "id": rid,
                                          "result": {"task": {"id": {"not": "a string"}}}}
                                         ).encode(),
                "rpc-error": json.dumps({"jsonrpc": "2.0", "id": rid, "error": {
                    "code": -32603, "message": "the agent's database is locked"}}).encode()
                }[trick]
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})
        return
    first = json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"task": task}})
    second = {"cut-stream": "",
              "bad-event": "data: {not json\n\n",
              "error-event": "event: error\ndata: " + json.dumps(
                  {"jsonrpc": "2.0", "id": rid, "error": {"code": -32603,
                                                          "message": "stream broke"}}) + "\n\n",
              "other-task": "data: " + json.dumps(
                  {"jsonrpc": "2.0", "id": rid, "result": {"statusUpdate": {
                      "taskId": "t-2", "contextId": "c-1",
                      "status": {"state": "TASK_STATE_COMPLETED"}}}}) + "\n\n"}[trick]
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream")]})
    await send({"type": "http.response.body", "body": f"data: {first}\n\n".encode(),
                "more_body": True})
    await send({"type": "http.response.body", "body": second.encode(), "more_body": False})


def card(port: int, streaming: bool, url: str | None = None) -> AgentCard:
    return AgentCard(
        name="scripted", description="a scripted agent for forge's tests", version="1.0",
        supported_interfaces=[AgentInterface(url=url or f"http://127.0.0.1:{port}/",
                                             protocol_binding="JSONRPC",
                                             protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"], default_output_modes=["text/plain"],
        skills=[AgentSkill(id="answer", name="answer", description="answers", tags=["test"])])


async def show_log(request: Request) -> JSONResponse:
    return JSONResponse(LOG)


def app(port: int, streaming: bool, url: str | None = None) -> Any:
    agent_card = card(port, streaming, url)
    handler = DefaultRequestHandler(agent_executor=ScriptedAgent(),
                                    task_store=InMemoryTaskStore(), agent_card=agent_card)
    inner = Starlette(routes=[Route("/_test/log", show_log),
                              *create_agent_card_routes(agent_card),
                              *create_jsonrpc_routes(handler, rpc_url="/")])
    return Tricky(inner, pick)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--no-streaming", action="store_true")
    parser.add_argument("--card-url")
    args = parser.parse_args()
    if os.environ.get("AGENT_PID_FILE"):  # a served agent tells the tests who it is
        with open(os.environ["AGENT_PID_FILE"], "a", encoding="utf-8") as pids:
            pids.write(f"{os.getpid()}\n")
    print(f"scripted A2A agent on 127.0.0.1:{args.port}", file=sys.stderr, flush=True)
    uvicorn.run(app(args.port, not args.no_streaming, args.card_url), host="127.0.0.1",
                port=args.port, log_level="warning", timeout_graceful_shutdown=1)


if __name__ == "__main__":
    main()
