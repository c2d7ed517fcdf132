"""A real OpenAI-compatible HTTP server on 127.0.0.1 whose replies a test scripts.

The boundary double for every test of forge's model-calling pieces (the ``openai``
harness, the ``judge`` scorer, the ``llm`` proposer): forge's own client talks to it
over a real socket, so timeouts, retries, status codes and malformed bodies are
exercised for real, and nothing leaves the machine.

    with ScriptedOpenAI() as server:               # or the ``openai_server`` fixture
        server.script(reply("42"), status(500), tool_call("add", {"a": 1}))
        endpoint = server.endpoint()               # an forge.llm.Endpoint to it
        ...
        server.requests                            # every request body and headers

Replies are served in order; when the script runs out, ``default`` (a function of the
request body) answers, or an HTTP 500 says the script was exhausted. A ``default``
that needs more than the body (the headers it was sent) calls :func:`current_request`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Reply", "Request", "ScriptedOpenAI", "current_request", "malformed", "reply",
           "status", "tool_call", "tool_calls"]


@dataclass(frozen=True)
class Reply:
    """One scripted answer: an HTTP status and body, after ``delay_s``."""

    status: int = 200
    body: bytes = b""
    delay_s: float = 0.0
    drop: bool = False  # close the connection without answering

    def after(self, delay_s: float) -> Reply:
        return Reply(self.status, self.body, delay_s, self.drop)


def _completion(message: dict[str, Any], *, finish: str, prompt_tokens: int,
                completion_tokens: int, usage: bool = True) -> bytes:
    data: dict[str, Any] = {
        "id": "chatcmpl-test", "object": "chat.completion", "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
    if usage:
        data["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                         "total_tokens": prompt_tokens + completion_tokens}
    return json.dumps(data).encode()


def reply(content: str, *, prompt_tokens: int = 10, completion_tokens: int = 5,
          usage: bool = True) -> Reply:
    """An assistant message with text content."""
    return Reply(body=_completion({"role": "assistant", "content": content}, finish="stop",
                                  prompt_tokens=prompt_tokens,
                                  completion_tokens=completion_tokens, usage=usage))


def tool_calls(*calls: tuple[str, dict[str, Any] | str], prompt_tokens: int = 10,
               completion_tokens: int = 5) -> Reply:
    """An assistant message asking for tools; a ``str`` argument is sent verbatim (so a
    test can send malformed JSON arguments)."""
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{i}", "type": "function",
         "function": {"name": name, "arguments": args if isinstance(args, str)
                      else json.dumps(args)}}
        for i, (name, args) in enumerate(calls)]}
    return Reply(body=_completion(message, finish="tool_calls", prompt_tokens=prompt_tokens,
                                  completion_tokens=completion_tokens))


def tool_call(name: str, args: dict[str, Any] | str, **usage: int) -> Reply:
    return tool_calls((name, args), **usage)


def status(code: int, text: str = "scripted failure") -> Reply:
    return Reply(status=code, body=json.dumps({"error": {"message": text}}).encode())


def malformed(text: str = '{"choices": [') -> Reply:
    """A 200 whose body is not a completion."""
    return Reply(body=text.encode())


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    raw: bytes
    received_at: float


_answering = threading.local()  # the request a handler thread is answering


def current_request() -> Request:
    """The request being answered, for a ``default`` function called by the server."""
    request: Request | None = getattr(_answering, "request", None)
    if request is None:
        raise RuntimeError("current_request() is for a default answering a request")
    return request


@dataclass
class _State:
    queue: list[Reply] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    default: Callable[[dict[str, Any]], Reply] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class ScriptedOpenAI:
    """The server. Start with ``with`` (or :meth:`start`); ``url`` is its ``/v1`` base."""

    def __init__(self, default: Callable[[dict[str, Any]], Reply] | None = None) -> None:
        self._state = _State(default=default)
        state = self._state

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes; with Nagle on, the body waits for
            # the client's delayed ACK (~40 ms) on every reused keep-alive connection.
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep pytest output clean

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                request = Request(self.path, {k.lower(): v for k, v in self.headers.items()},
                                  body, raw, time.monotonic())
                _answering.request = request
                with state.lock:
                    state.requests.append(request)
                    if state.queue:
                        answer = state.queue.pop(0)
                    elif state.default is not None and body is not None:
                        answer = state.default(body)
                    else:
                        answer = status(500, "script exhausted")
                if answer.delay_s:
                    time.sleep(answer.delay_s)
                if answer.drop:
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                try:
                    self.send_response(answer.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(answer.body)))
                    self.end_headers()
                    self.wfile.write(answer.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test): nothing to answer

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # A short poll: shutdown() waits for it, and every test stops a server.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,),
                                        daemon=True, name="scripted-openai")

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def requests(self) -> list[Request]:
        with self._state.lock:
            return list(self._state.requests)

    def script(self, *replies: Reply) -> None:
        """Append replies to the queue, served in order."""
        with self._state.lock:
            self._state.queue.extend(replies)

    def answer_with(self, default: Callable[[dict[str, Any]], Reply] | None) -> None:
        """Answer with ``default(request_body)`` once the queue is empty."""
        with self._state.lock:
            self._state.default = default

    def endpoint(self, **overrides: Any) -> Any:
        from forge.llm import Endpoint
        args: dict[str, Any] = {"base_url": self.url, "model": "scripted", "timeout_s": 5.0,
                                "retries": 2, "backoff_s": 0.01}
        args.update(overrides)
        return Endpoint(**args)

    def start(self) -> ScriptedOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> ScriptedOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
