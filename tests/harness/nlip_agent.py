"""A real NLIP agent for the nlip harness tests: nlip-server's FastAPI app on 127.0.0.1.

    python nlip_agent.py --port 8123

The session (an ``NLIP_Session`` with a scripted brain, no model) reads the config
forge sends in the structured submessage labelled ``forge`` and answers by the text:

- ``q N``: the text ``N*effort mode`` (the config's ``effort`` and ``mode``) and a
  structured ``forge`` submessage reporting a tool call and token usage;
- ``json``: a structured JSON reply without text;
- ``oops``: a reply of format ``error``;
- ``raise``: the session raises (nlip-server answers HTTP 400 with the message);
- ``hang``: no answer for an hour;
- ``big``: 17 MiB of text;
- ``echo-auth``: the NLIP authorization token and the HTTP ``Authorization`` header.

A wrapper in front of the app breaks the protocol where the text asks it to:
``garbage`` (a body that is not JSON), ``not-nlip`` (JSON that is no NLIP message),
``cut-body`` (half of the declared body, then the connection closes), ``status-503``.

``GET /_test/log`` returns the forge submessages received and how many answers are
being worked on now.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
from typing import Any

import uvicorn
from asgi_tricks import Tricky
from nlip_sdk.nlip import NLIP_Factory, NLIP_Message
from nlip_server.server import NLIP_Session, SafeApplication, setup_server

LOG: dict[str, Any] = {"forge": [], "running": 0, "tokens": [], "conversations": []}
HEADERS: dict[str, str] = {}


class ScriptedSession(NLIP_Session):
    async def execute(self, msg: NLIP_Message) -> NLIP_Message:
        text = msg.extract_text(language=None) or ""
        forge = next((s.content for s in msg.submessages or [] if s.label == "forge"), {})
        LOG["forge"].append(forge)
        LOG["tokens"].append(msg.extract_authentication_token())
        LOG["conversations"].append(msg.extract_conversation_token())
        LOG["running"] += 1
        try:
            return await self._answer(text, forge, msg)
        finally:
            LOG["running"] -= 1

    async def _answer(self, text: str, forge: dict[str, Any], msg: NLIP_Message
                      ) -> NLIP_Message:
        if "hang" in text:
            await asyncio.sleep(3600)
        if "raise" in text:
            raise RuntimeError("the model server is down")
        if "oops" in text:
            return NLIP_Factory.create_error_code("cannot parse the question")
        if "json" in text:
            return NLIP_Factory.create_json({"answer": 42, "unit": "apples"})
        if "big" in text:
            return NLIP_Factory.create_text("x" * (17 * 2**20))
        if "echo-auth" in text:
            return NLIP_Factory.create_text(
                f"{msg.extract_authentication_token()} {HEADERS.get('authorization')}")
        config = forge.get("config", {})
        n = int(text.split()[-1])
        effort = int(config.get("effort", 1))
        reply = NLIP_Factory.create_text(f"{n * effort} {config.get('mode')}")
        reply.add_json({"usage": {"input_tokens": 10 * effort, "output_tokens": 2},
                        "tool_calls": [{"name": "multiply", "args": {"a": n, "b": effort},
                                        "result": n * effort}],
                        "signals": ["thought_hard"]}, label="forge")
        return reply


class ScriptedApp(SafeApplication):
    def create_session(self) -> NLIP_Session:
        return ScriptedSession()


TRICKS = ("garbage", "not-nlip", "cut-body", "status-503")


def pick(scope: dict[str, Any], body: bytes) -> Any:
    """The trick a request's text names, as a responder (None: the app answers); the
    request's headers are kept for ``echo-auth``."""
    HEADERS.clear()
    HEADERS.update({k.decode().lower(): v.decode() for k, v in scope["headers"]})
    text = str(json.loads(body).get("content", ""))
    trick = next((t for t in TRICKS if t in text), None)
    return None if trick is None else functools.partial(_trick, trick)


async def _trick(trick: str, send: Any) -> None:
    status, body = {"garbage": (200, b"<html>this is not JSON"),
                    "not-nlip": (200, b'{"answer": "no format, no content"}'),
                    "status-503": (503, b'{"detail": "overloaded, try later"}'),
                    "cut-body": (200, b'{"format": "text", "subformat": "english", "con')
                    }[trick]
    length = len(body) * (2 if trick == "cut-body" else 1)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(length).encode())]})
    await send({"type": "http.response.body", "body": body})


def app() -> Any:
    inner = setup_server(ScriptedApp())

    @inner.get("/_test/log")
    async def show_log() -> dict[str, Any]:
        return LOG

    return Tricky(inner, pick)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    if os.environ.get("AGENT_PID_FILE"):  # a served agent tells the tests who it is
        with open(os.environ["AGENT_PID_FILE"], "a", encoding="utf-8") as pids:
            pids.write(f"{os.getpid()}\n")
    uvicorn.run(app(), host="127.0.0.1", port=args.port, log_level="warning",
                timeout_graceful_shutdown=1)


if __name__ == "__main__":
    main()
