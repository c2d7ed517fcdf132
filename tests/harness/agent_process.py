"""Agent servers for the a2a and nlip harness tests: real SDK servers in processes of their own,
and the benches the tests write for them.

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
from conftest import MINI_REGISTRY, REPO, run_forge, write_jsonl

from forge.bench.loader import load_bench
from forge.evaluation.evaluate import evaluate
from forge.results.model import AttemptResult

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


# -- benches on a protocol harness ---------------------------------------------------------


def write_protocol_bench(root: Path, harness: dict[str, Any], tasks: list[dict[str, Any]], *,
                         timeout_s: float = 5.0, k: int = 1, extra: str = "",
                         more: dict[str, list[dict[str, Any]]] | None = None) -> Path:
    """A bench with ``harness`` (``{kind: arguments}``) on the mini registry (effort
    1..5, mode fast/careful) whose dev split is ``tasks``; ``more`` adds splits (by
    default a val split of one task); ``extra`` is appended to the bench file."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "registry.yaml").write_text(MINI_REGISTRY, encoding="utf-8")
    splits = {"dev": tasks, **(more or {"val": [{"id": "v", "input": "q 9",
                                                 "expected": "9 fast"}]})}
    for split, rows in splits.items():
        write_jsonl(root / "tasks" / f"{split}.jsonl", rows)
    split_map = ", ".join(f"{s}: tasks/{s}.jsonl" for s in splits)
    bench = root / "bench.yaml"
    bench.write_text(
        "name: protocol-test\n"
        f"harness: {json.dumps(harness)}\n"
        "registry: registry.yaml\n"
        f"splits: {{{split_map}}}\n"
        f"rollouts: {json.dumps({'k': k, 'concurrency': 4, 'timeout_s': timeout_s})}\n"
        "scorer: exact\n" + extra, encoding="utf-8")
    return bench


def questions(*ns: int, effort: int = 1, mode: str = "fast", prefix: str = "q"
              ) -> list[dict[str, Any]]:
    """Tasks ``q N`` (``prefix`` for ``q``) that the scripted agents answer ``N*effort mode``
    at the config's ``effort`` and ``mode``."""
    return [{"id": f"{prefix}{n}", "input": f"{prefix} {n}", "expected": f"{n * effort} {mode}"}
            for n in ns]


def hostile(*names: str) -> list[dict[str, Any]]:
    """Tasks whose text names what the scripted agent is to do instead of answering."""
    return [{"id": name, "input": f"please {name}", "expected": "never"} for name in names]


def run_eval(bench: Path, **options: Any) -> dict[str, AttemptResult]:
    """The attempts of an evaluation of the bench's defaults, by task id (k=1)."""
    loaded = load_bench(bench)
    result = evaluate(loaded, loaded.defaults, **options)
    return {a.task_id: a for t in result.tasks for a in t.attempts}


def search_through_failures(root: Path, harness: dict[str, Any], failing: list[str],
                            capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """``forge search --json`` on a bench whose agent answers right only at effort 2
    and whose dev split holds, beside 10 questions, one task of each ``failing`` kind;
    its JSON outcome."""
    dev = questions(*range(1, 11), effort=2, prefix="d") + hostile(*failing)
    more = {"val": questions(*range(1, 9), effort=2, prefix="v"),
            "test": questions(*range(1, 5), effort=2, prefix="t")}
    bench = write_protocol_bench(root / "b", harness, dev, k=2, timeout_s=1.0, more=more,
                                 extra="gates: {alpha: 0.1, val_margin: 0.2}\n"
                                       "search: {max_steps: 2, patience: 2}\n")
    code, out, err = run_forge(capsys, "search", bench, "--journals", root / "j", "--json",
                               "--candidates", "8")
    assert code == 0, err
    outcome: dict[str, Any] = json.loads(out)
    return outcome


_HIDE = """
import sys
for name in {names!r}:
    sys.modules[name] = None  # an import of it raises ImportError, as when not installed
from forge.cli import main
sys.exit(main(["eval", {bench!r}]))
"""


def eval_without(modules: list[str], bench: Path) -> tuple[int, str]:
    """``forge eval BENCH`` in a process where ``modules`` cannot be imported: its exit
    code and stderr."""
    proc = subprocess.run([sys.executable, "-c", _HIDE.format(names=modules, bench=str(bench))],
                          capture_output=True, text=True, timeout=60, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    return proc.returncode, proc.stderr
