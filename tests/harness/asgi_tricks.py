"""An ASGI app in front of a protocol SDK's app that breaks the protocol on request.

Imported by the scripted agents (``a2a_agent.py``, ``nlip_agent.py``), which run as
scripts with this folder on their import path.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

#: Given a POST's scope and body: a responder that answers it in the SDK's place
#: (called with ASGI's ``send``), or None to let the SDK's app answer.
Picker = Callable[[dict[str, Any], bytes], Callable[[Any], Awaitable[None]] | None]


class Tricky:
    """Reads each POST's body whole; answers it itself when ``pick`` says so, else passes
    it on to ``app`` with the body replayed."""

    def __init__(self, app: Any, pick: Picker) -> None:
        self.app = app
        self.pick = pick

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = b""
        more = True
        while more:
            event = await receive()
            body += event.get("body", b"")
            more = event.get("more_body", False)
        respond = self.pick(scope, body)
        if respond is not None:
            await respond(send)
            return
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
