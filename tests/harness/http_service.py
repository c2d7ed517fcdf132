"""A real harness service for the HTTP harness tests: stdlib HTTP on 127.0.0.1, any port.

Imported as a top-level module (pytest puts this folder on ``sys.path``); the name
is unique so it clashes with no other test helper.

The service answers a POSTed attempt the way a remote harness would: the answer
is right when ``ctx.seed % 5 < config.effort``, so a bigger ``effort`` passes more
often and the same seed always gives the same answer. What it does instead can be
scripted per task id (:attr:`HarnessService.by_task`) or for all tasks
(:attr:`HarnessService.default`): fail with a status N times then answer, drop the
connection, sleep, answer something that is not JSON, echo the request's headers
into the answer, the error body and its log. It sets a cookie on every answer and
records every request, so a test can see that no cookie or other state comes back.
"""

from __future__ import annotations

import json
import logging
import textwrap
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from conftest import write_bench

log = logging.getLogger("http_service")

Mode = Literal["ok", "close", "sleep", "not_json", "status", "list"]


@dataclass
class Behaviour:
    """What the service does with a request.

    ``fail_first`` requests of each attempt (task, attempt index, seed) get
    ``fail_status`` before the service answers with ``mode``. ``echo`` puts the
    request's ``Authorization`` header (and the credential without its scheme) into
    the answer's output, trace and tool call, into any error body, and into the log.
    """

    mode: Mode = "ok"
    fail_first: int = 0
    fail_status: int = 500
    status: int = 404  # for mode "status"
    retry_after: str | None = None  # sent with every failure status when set
    sleep_s: float = 0.0
    echo: bool = False
    metrics: dict[str, float] = field(default_factory=dict)  # added to the answer's


@dataclass
class Seen:
    """One request as the service received it."""

    headers: dict[str, str]
    body: dict[str, Any]
    size: int  # bytes of the body
    at: float = field(default_factory=time.monotonic)


class HarnessService:
    """Start with ``with HarnessService() as service:``; ``service.url`` is the endpoint."""

    def __init__(self) -> None:
        self.default = Behaviour()
        self.by_task: dict[str, Behaviour] = {}
        self.seen: list[Seen] = []
        self.tries: Counter[tuple[str, int, int]] = Counter()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        # A short poll interval: shutdown() waits for it at the end of every test.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        daemon=True, name="http-service")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/run"

    def cookies_sent(self) -> list[str]:
        """Cookie headers any request carried (the service set one on every answer)."""
        return [s.headers["cookie"] for s in self.seen if "cookie" in s.headers]

    def __enter__(self) -> HarnessService:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()

    def behaviour(self, task_id: str) -> Behaviour:
        return self.by_task.get(task_id, self.default)

    def record(self, headers: dict[str, str], body: dict[str, Any], size: int) -> int:
        """Keep the request; returns which try of its attempt it is (1 for the first)."""
        key = (str(body["task"]["id"]), int(body["ctx"]["attempt"]), int(body["ctx"]["seed"]))
        with self._lock:
            self.seen.append(Seen(headers, body, size))
            self.tries[key] += 1
            return self.tries[key]


def answer(body: dict[str, Any], how: Behaviour) -> dict[str, Any]:
    """The right answer when ``seed % 5 < effort``, a wrong one otherwise."""
    task, config, ctx = body["task"], body["config"], body["ctx"]
    right = ctx["seed"] % 5 < int(config.get("effort", 1))
    return {"output": task["expected"] if right else f"wrong answer to {task['id']}",
            "usage": {"input_tokens": 10, "output_tokens": 3},
            "metrics": {"service_ms": 1.0, **how.metrics}}


def _handler_for(service: HarnessService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as a real service would
        disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms stall

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            headers = {k.lower(): v for k, v in self.headers.items()}
            body = json.loads(raw)
            try_number = service.record(headers, body, len(raw))
            how = service.behaviour(str(body["task"]["id"]))
            auth = headers.get("authorization", "")
            echo = {"authorization": auth, "credential": auth.partition(" ")[2]}
            if how.echo:
                log.warning("request for %s with headers %s", body["task"]["id"], echo)
            if try_number <= how.fail_first:
                self._send(how.fail_status, _error_body(how, echo), how.retry_after)
            elif how.mode == "close":
                self.close_connection = True  # no answer at all: the socket just closes
            elif how.mode == "sleep":
                time.sleep(how.sleep_s)
                self._send_json(answer(body, how))
            elif how.mode == "not_json":
                self._send(200, b"<html><body>upstream proxy error</body></html>")
            elif how.mode == "status":
                self._send(how.status, _error_body(how, echo), how.retry_after)
            elif how.mode == "list":
                self._send_json([1, 2, 3])
            else:
                out = answer(body, how)
                if how.echo:
                    out["output"] = f"{out['output']} (auth {auth})"
                    out["trace"] = {"headers": echo}
                    out["tool_calls"] = [{"name": "whoami", "args": echo,
                                          "result": echo["credential"]}]
                self._send_json(out)

        def _send_json(self, value: Any) -> None:
            self._send(200, json.dumps(value).encode(), content_type="application/json")

        def _send(self, status: int, payload: bytes, retry_after: str | None = None,
                  content_type: str = "text/plain") -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                # State the client must not keep: a cookie tying attempts together.
                self.send_header("Set-Cookie", f"session={len(service.seen)}; Path=/")
                if retry_after is not None:
                    self.send_header("Retry-After", retry_after)
                self.end_headers()
                self.wfile.write(payload)
            except OSError:  # the client gave up (a timeout test): nothing to tell
                self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:
            pass  # no request log on stderr: the tests read stderr

    return Handler


def _error_body(how: Behaviour, echo: dict[str, str]) -> bytes:
    text = "internal error\n  while handling the attempt"
    if how.echo:
        text += f"\nheaders: {json.dumps(echo)}\ncredential {echo['credential']}"
    return text.encode()


def write_http_bench(root: Path, spec: Any, **options: Any) -> Path:
    """A ``make_bench`` bench (mini registry, three dev tasks) whose harness is
    ``{http: spec}``; ``options`` go to :func:`conftest.write_bench`."""
    bench = write_bench(root, textwrap.dedent("""
        def run(config, task, ctx):
            raise AssertionError("the http harness is used, not this one")
        """), **options)
    text = bench.read_text(encoding="utf-8")
    python_line = 'harness: {python: "harness:run"}'
    assert python_line in text
    bench.write_text(text.replace(python_line, "harness: " + json.dumps({"http": spec})),
                     encoding="utf-8")
    return bench
