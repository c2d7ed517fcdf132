"""The a2a-orders agent: a real A2A server (a2a-sdk, uvicorn) around the scripted brain.

    python agent.py --port 8123

forge starts it itself for `forge eval` and `forge search` (the bench's ``serve``), on
a free port of 127.0.0.1, and stops it at the end. Run by hand, it serves until
Ctrl-C; point a bench at it with ``harness: {a2a: "http://127.0.0.1:8123/"}``.

Each message is one task: the agent reads the question (the text part) and the
config (``metadata.forge.config``), streams a ``working`` status, the answer as an
artifact, and completes with its tool calls, usage and cost under ``forge`` in the
task's metadata. A question it cannot answer ends the task ``failed``.
"""

from __future__ import annotations

import argparse

import uvicorn
from a2a.helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, TaskState
from brain import respond
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette


class OrderDesk(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        task = context.current_task or new_task_from_user_message(message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        forge = MessageToDict(message.metadata).get("forge", {})
        try:
            reply = respond(context.get_user_input(), forge.get("config", {}),
                            int(forge.get("seed", 0)))
        except (ValueError, KeyError) as exc:
            await updater.failed(updater.new_agent_message([new_text_part(str(exc))]))
            return
        await updater.add_artifact([new_text_part(reply["answer"])], name="answer")
        await updater.update_status(TaskState.TASK_STATE_COMPLETED,
                                    metadata={"forge": reply["report"]})

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8123)
    port = parser.parse_args().port
    card = AgentCard(
        name="order-desk", version="1.0",
        description="answers questions about a shop's orders with its order tools",
        supported_interfaces=[AgentInterface(url=f"http://127.0.0.1:{port}/",
                                             protocol_binding="JSONRPC",
                                             protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"], default_output_modes=["text/plain"],
        skills=[AgentSkill(id="orders", name="orders", tags=["orders"],
                           description="status, totals and comparisons of orders")])
    handler = DefaultRequestHandler(agent_executor=OrderDesk(),
                                    task_store=InMemoryTaskStore(), agent_card=card)
    app = Starlette(routes=[*create_agent_card_routes(card),
                            *create_jsonrpc_routes(handler, rpc_url="/")])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning",
                timeout_graceful_shutdown=2)


if __name__ == "__main__":
    main()
