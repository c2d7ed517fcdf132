"""Agent servers for the a2a and nlip harness tests: real SDK servers in processes of their own.

Imported as a top-level module (pytest puts this folder on ``sys.path``).

:func:`need_sdk` imports a protocol SDK or skips the test, except under CI, where a
missing SDK fails it (CI installs the extras: these tests must run there).
:class:`AgentProcess` starts a server script on a free port of 127.0.0.1, waits
until it accepts connections and stops it at the end; :func:`log_of` reads what the
scripted agent saw (its ``/_test/log`` route).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent


def need_sdk(module: str, extra: str) -> ModuleType:
    """``module``, or a skip (a failure under CI) naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
            pytest.fail(f"CI is set but {module} is not installed; run.py test installs "
                        f"forge[{extra}]")
        pytest.skip(f"{module} is not installed (pip install 'forge[{extra}]'); CI runs this")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class AgentProcess:
    """``with AgentProcess("a2a_agent.py", "--no-streaming") as agent:``; ``agent.url``."""

    def __init__(self, script: str, *args: str, path: str = "/") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}{path}"
        self.base = f"http://127.0.0.1:{self.port}"
        self._argv = [sys.executable, str(HERE / script), "--port", str(self.port), *args]
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> AgentProcess:
        self.proc = subprocess.Popen(self._argv, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     start_new_session=True)
        until = time.monotonic() + 30
        while time.monotonic() < until:
            if self.proc.poll() is not None:
                said = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise RuntimeError(f"{self._argv} exited: {said}")
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", self.port), timeout=0.5):
                return self
            time.sleep(0.05)
        self.__exit__(None, None, None)
        raise RuntimeError(f"{self._argv} did not listen within 30 s")

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()

    def log(self) -> dict[str, Any]:
        """What the scripted agent saw (its ``/_test/log``)."""
        with urllib.request.urlopen(f"{self.base}/_test/log", timeout=10) as response:
            data: dict[str, Any] = json.loads(response.read())
            return data
