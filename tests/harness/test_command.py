"""The command harness: a program per attempt (or a pool of workers) speaking JSON.

Every child here is a real Python script run with ``sys.executable``; most of them
start a grandchild that sleeps for ten minutes and write both pids to ``pids/``, so
each test can check that nothing it started is left running.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import sys
import textwrap
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import MINI_REGISTRY, assert_user_error, run_forge, stored_text, write_jsonl

from forge.bench.loader import load_bench
from forge.core.spec import BuildContext
from forge.core.task import Task
from forge.evaluation.evaluate import evaluate
from forge.harness import HARNESSES, AttemptContext, CommandHarness
from forge.results.model import AttemptResult, EvalResult

#: Put at the top of every child script: ``leave_grandchild()`` starts a process in the
#: child's group that sleeps for 600 s (ignoring SIGTERM if asked) and records both pids.
PRELUDE = """\
import json, os, signal, subprocess, sys, time
from pathlib import Path

PIDS = Path(__file__).resolve().with_name("pids")


def leave_grandchild(ignore_term=False):
    code = "import signal, time\\n"
    if ignore_term:
        code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
    g = subprocess.Popen([sys.executable, "-c", code + "time.sleep(600)"])
    PIDS.mkdir(exist_ok=True)
    (PIDS / str(os.getpid())).write_text(f"{os.getpid()} {g.pid}")
"""

#: One agent, one behaviour per task id (the prefix before ``-``).
MIXED_AGENT = PRELUDE + """
req = json.load(sys.stdin)
kind = req["task"]["id"].split("-")[0]
leave_grandchild(ignore_term=kind == "stubborn")
print(f"agent starts {kind}", file=sys.stderr, flush=True)
if kind == "ok":
    json.dump({"output": req["task"]["expected"]}, sys.stdout)
elif kind == "garbage":
    print("this is not json {")
elif kind == "exit":
    print("boom: something broke", file=sys.stderr)
    sys.exit(3)
elif kind == "crash":
    os.abort()
elif kind == "stubborn":
    signal.signal(signal.SIGTERM, lambda *_: print("SIGTERM ignored", file=sys.stderr, flush=True))
    while True:
        time.sleep(0.05)
else:  # hang
    time.sleep(600)
"""


def tasks_of(kinds: Mapping[str, Sequence[str]]) -> dict[str, list[dict[str, Any]]]:
    """Split -> tasks with ids ``<kind>-<split>-<i>``; inputs distinct across splits."""
    return {split: [{"id": f"{kind}-{split}-{i}", "input": f"{split} {kind} {i}",
                     "expected": f"answer {split} {i}"} for i, kind in enumerate(ks)]
            for split, ks in kinds.items()}


def write_command_bench(root: Path, agent: str, *, harness: Mapping[str, Any] | None = None,
                        tasks: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
                        rollouts: Mapping[str, Any] | None = None, extra: str = "") -> Path:
    """A bench whose harness is ``{command: {argv: [python, agent.py], ...harness}}``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "registry.yaml").write_text(MINI_REGISTRY, encoding="utf-8")
    (root / "agent.py").write_text(textwrap.dedent(agent), encoding="utf-8")
    splits = tasks or tasks_of({"dev": ["ok", "ok"], "val": ["ok"], "test": ["ok"]})
    for split, rows in splits.items():
        write_jsonl(root / "tasks" / f"{split}.jsonl", rows)
    spec = {"argv": [sys.executable, "agent.py"], "cancel_timeout_s": 0.3, **(harness or {})}
    settings = {"k": 1, "concurrency": 8, "timeout_s": 2.0, **(rollouts or {})}
    bench = root / "bench.yaml"
    bench.write_text(
        "name: cmd\n"
        f"harness: {json.dumps({'command': spec})}\n"
        "registry: registry.yaml\n"
        f"splits: {json.dumps({s: f'tasks/{s}.jsonl' for s in splits})}\n"
        f"rollouts: {json.dumps(settings)}\n"
        "scorer: exact\n" + extra, encoding="utf-8")
    return bench


def run_eval(bench_file: Path, **options: Any) -> EvalResult:
    bench = load_bench(bench_file)
    return evaluate(bench, bench.defaults, **options)


def attempts(result: EvalResult) -> dict[str, list[AttemptResult]]:
    return {t.task_id: t.attempts for t in result.tasks}


def only(result: EvalResult, prefix: str) -> list[AttemptResult]:
    return [a for t in result.tasks if t.task_id.startswith(prefix) for a in t.attempts]


# -- processes ------------------------------------------------------------------------------

def _state(pid: int) -> str | None:
    """The process state letter, or None when the pid does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def alive(pid: int) -> bool:
    return _state(pid) not in (None, "Z", "X")  # a zombie is dead, waiting to be reaped


def recorded_pids(folder: Path) -> list[int]:
    pids_dir = folder / "pids"
    if not pids_dir.exists():
        return []
    return [int(p) for f in pids_dir.iterdir() for p in f.read_text().split()]


def assert_all_gone(pids: Sequence[int], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"still running: {left}"


@pytest.fixture(autouse=True)
def no_leftovers(tmp_path: Path) -> Iterator[None]:
    """A failing test must not leave sleepers behind either."""
    yield
    for folder in [tmp_path, *tmp_path.iterdir()]:
        if folder.is_dir():
            for pid in recorded_pids(folder):
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)


def build(folder: Path, spec: Any) -> CommandHarness:
    ctx = BuildContext(base_dir=folder, file=folder / "bench.yaml", field="harness")
    harness = HARNESSES.build(HARNESSES.parse({"command": spec}, ctx), ctx)
    assert isinstance(harness, CommandHarness)
    return harness


def attempt_ctx(timeout_s: float) -> AttemptContext:
    return AttemptContext(seed=1, attempt=0, split="dev", timeout_s=timeout_s,
                          deadline=time.monotonic() + timeout_s)


TASK = Task(id="t", input="question", expected="answer")


# -- (a-d) failures are data, in an evaluation and in a search --------------------------------

def test_failures_are_attempts_with_reasons_and_nothing_is_left_running(tmp_path: Path) -> None:
    kinds = ["ok", "ok", "garbage", "exit", "crash", "hang", "stubborn"]
    bench = write_command_bench(tmp_path / "b", MIXED_AGENT,
                                tasks=tasks_of({"dev": kinds, "val": ["ok"], "test": ["ok"]}))
    t0 = time.monotonic()
    result = run_eval(bench, k=2)
    assert time.monotonic() - t0 < 8
    assert result.summary()["n_attempts"] == 14
    for a in only(result, "ok"):
        assert a.stop_reason == "completed" and a.score is not None and a.score.passed
        assert a.output is not None and a.output.trace == {"stderr": "agent starts ok"}
    for a in only(result, "garbage"):
        assert a.stop_reason == "error" and a.error is not None
        assert "stdout is not JSON: 'this is not json {'" in a.error
        assert "agent starts garbage" in a.error  # the stderr tail
    for a in only(result, "exit"):
        assert a.stop_reason == "error" and a.error is not None
        assert "exited with code 3" in a.error and "boom: something broke" in a.error
    for a in only(result, "crash"):
        assert a.stop_reason == "error" and a.error is not None
        assert "was killed by SIGABRT" in a.error and "agent starts crash" in a.error
    for kind in ("hang", "stubborn"):
        for a in only(result, kind):
            # Normally the harness answers first, with the stderr; under heavy load the
            # engine's own deadline may win the race: a timeout either way.
            assert a.stop_reason == "timeout", a
            assert a.error is not None and "no result within 2 s" in a.error
            if a.error.startswith("CommandTimeout: "):
                assert f"agent starts {kind}" in a.error
    assert result.summary()["n_scored"] == 4
    pids = recorded_pids(tmp_path / "b")
    assert len(pids) == 28  # 14 children and their grandchildren
    assert_all_gone(pids)


def test_a_search_over_failing_attempts_completes_and_journals(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kinds = tasks_of({"dev": ["ok", "ok", "garbage", "exit", "hang", "stubborn"],
                      "val": ["ok", "garbage", "ok"], "test": ["ok", "exit"]})
    bench = write_command_bench(tmp_path / "b", MIXED_AGENT, tasks=kinds,
                                rollouts={"timeout_s": 1.0},
                                extra='search: {"max_steps": 1, "patience": 1}\n')
    code, out, err = run_forge(capsys, "search", bench, "--journals", tmp_path / "j",
                               "--run-id", "r", "--proposer", "sweep", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["run_id"] == "r" and summary["steps"] == 1
    assert summary["rollouts_used"] > 0
    folder = tmp_path / "j" / "r"
    records = [json.loads(line) for line in (folder / "journal.jsonl").read_text().splitlines()]
    assert records[-1]["stop_reason"] == summary["stop_reason"]
    assert any(r.get("step") == 1 for r in records)
    stored = stored_text(folder)
    assert "stdout is not JSON" in stored and "exited with code 3" in stored
    assert "no result within 1 s" in stored
    assert_all_gone(recorded_pids(tmp_path / "b"))


# -- cancellation and timeouts, on the harness itself ------------------------------------------

STUBBORN = PRELUDE + """
signal.signal(signal.SIGTERM, lambda *_: print("SIGTERM ignored", file=sys.stderr, flush=True))
leave_grandchild(ignore_term=True)
json.load(sys.stdin)
print("working", file=sys.stderr, flush=True)
while True:
    time.sleep(0.05)
"""


def _children(folder: Path) -> list[tuple[int, int]]:
    pids_dir = folder / "pids"
    deadline = time.monotonic() + 10
    while not (pids_dir.exists() and any(pids_dir.iterdir())):
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.02)
    time.sleep(0.05)  # written in one call; let it land
    pairs = [f.read_text().split() for f in pids_dir.iterdir()]
    return [(int(a), int(b)) for a, b in pairs]


def test_a_child_that_ignores_sigterm_is_killed_after_cancel_timeout(tmp_path: Path) -> None:
    (tmp_path / "stubborn.py").write_text(STUBBORN)
    harness = build(tmp_path, {"argv": [sys.executable, "stubborn.py"], "cancel_timeout_s": 0.5})

    async def main() -> tuple[str, float, bool]:
        with pytest.raises(TimeoutError) as caught:
            await harness.run({}, TASK, attempt_ctx(1.5))
        raised = time.monotonic()
        (child, grandchild), = _children(tmp_path)
        still = alive(child) and alive(grandchild)  # SIGTERM alone did not end them
        await asyncio.sleep(1.5)
        assert not alive(child) and not alive(grandchild)
        await harness.aclose()
        return str(caught.value), raised, still

    message, _, still_alive_after_term = asyncio.run(main())
    assert still_alive_after_term
    assert "no result within 1.5 s" in message
    assert "working" in message and "SIGTERM ignored" in message


def test_a_cancelled_attempt_stops_its_process_group(tmp_path: Path) -> None:
    (tmp_path / "stubborn.py").write_text(STUBBORN)
    harness = build(tmp_path, {"argv": [sys.executable, "stubborn.py"], "cancel_timeout_s": 0.3})

    async def main() -> None:
        call = asyncio.ensure_future(harness.run({}, TASK, attempt_ctx(30)))
        (child, grandchild), = await asyncio.to_thread(_children, tmp_path)
        call.cancel()  # what the engine does at its deadline or on Ctrl-C
        with pytest.raises(asyncio.CancelledError):
            await call
        assert alive(child)  # in its grace period
        await asyncio.sleep(1.0)
        assert not alive(child) and not alive(grandchild)
        await harness.aclose()

    asyncio.run(main())


def test_aclose_kills_what_is_still_running(tmp_path: Path) -> None:
    (tmp_path / "stubborn.py").write_text(STUBBORN)
    harness = build(tmp_path, {"argv": [sys.executable, "stubborn.py"], "cancel_timeout_s": 0.3})

    async def main() -> str:
        call = asyncio.ensure_future(harness.run({}, TASK, attempt_ctx(60)))
        pids = await asyncio.to_thread(_children, tmp_path)
        t0 = time.monotonic()
        await harness.aclose()  # with the attempt still in flight
        assert time.monotonic() - t0 < 2
        assert_all_gone([p for pair in pids for p in pair], within=0.5)
        with pytest.raises(RuntimeError) as caught:
            await call
        return str(caught.value)

    assert "was killed by SIGKILL" in asyncio.run(main())


# -- success path, stderr, env and cwd ---------------------------------------------------------

def test_stdout_json_is_the_output_and_stderr_is_bounded(tmp_path: Path) -> None:
    agent = PRELUDE + textwrap.dedent("""
    req = json.load(sys.stdin)
    leave_grandchild()  # holds our stdout open after we exit: must not hold the attempt
    sys.stderr.write("x" * 100_000 + "\\nTHE END\\n")
    if req["task"]["id"].startswith("bad"):
        print("not json")
    else:
        print(json.dumps({"output": req["task"]["expected"], "metrics": {"m": 1.5},
                          "usage": {"input_tokens": 3}, "signals": ["s"]}))
    """)
    bench = write_command_bench(tmp_path / "b", agent, harness={"max_stderr_bytes": 1000},
                                tasks=tasks_of({"dev": ["ok", "bad"], "val": ["ok"],
                                                "test": ["ok"]}))
    result = run_eval(bench)
    (good,), (bad,) = attempts(result).values()
    assert good.stop_reason == "completed" and good.score is not None and good.score.passed
    # The grandchild holds the stdout pipe; the attempt ends with the child, not after
    # the 1 s allowed for pipes held outside the group.
    assert good.duration_s < 0.95
    assert good.output is not None and good.metrics["m"] == 1.5
    assert good.output.usage.input_tokens == 3 and good.output.signals == ["s"]
    kept = good.output.trace["stderr"]
    assert kept.startswith("[99009 earlier bytes dropped]\n") and kept.endswith("THE END")
    assert len(kept) < 1100
    assert bad.stop_reason == "error" and bad.error is not None
    assert "stdout is not JSON: 'not json'" in bad.error and bad.error.endswith("THE END")
    assert "earlier bytes dropped" in bad.error and len(bad.error) < 1500
    assert_all_gone(recorded_pids(tmp_path / "b"))


def test_a_descendant_that_leaves_the_group_holds_the_attempt_only_briefly(
        tmp_path: Path) -> None:
    # It holds the attempt's stdout open; it is ended with the attempt, which then ends.
    agent = PRELUDE + textwrap.dedent("""
    req = json.load(sys.stdin)
    g = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                         start_new_session=True)
    PIDS.mkdir(exist_ok=True)
    (PIDS / "escaped").write_text(str(g.pid))
    print(json.dumps({"output": req["task"]["expected"]}))
    """)
    bench = write_command_bench(tmp_path / "b", agent,
                                tasks=tasks_of({"dev": ["ok"], "val": ["ok"], "test": ["ok"]}))
    result = run_eval(bench)
    a = result.tasks[0].attempts[0]
    assert a.scored and a.score is not None and a.score.passed
    assert a.duration_s < 2.0
    # Out of the group, it is still found (tests/harness/test_supervisor_descendants.py).
    (escaped,) = recorded_pids(tmp_path / "b")
    assert_all_gone([escaped])


def test_the_child_gets_the_attempt_env_and_cwd(tmp_path: Path) -> None:
    agent = """
    import json, os, sys
    req = json.load(sys.stdin)
    print(json.dumps({"output": req["task"]["expected"], "trace": {
        "cwd": os.getcwd(), "var": os.environ.get("FORGE_CMD_VAR"),
        "num": os.environ.get("FORGE_CMD_NUM"), "home": os.environ.get("HOME"),
        "request": req}}))
    """
    root = tmp_path / "b"
    (root / "work").mkdir(parents=True)
    bench = write_command_bench(root, agent, harness={
        "argv": [sys.executable, "../agent.py"], "cwd": "work",
        "env": {"FORGE_CMD_VAR": "hello", "FORGE_CMD_NUM": 7}}, rollouts={"timeout_s": 5.0})
    result = run_eval(bench)
    a = result.tasks[0].attempts[0]
    assert a.score is not None and a.score.passed
    assert a.output is not None
    trace = a.output.trace
    assert trace["cwd"] == str((root / "work").resolve())
    assert (trace["var"], trace["num"]) == ("hello", "7")
    assert trace["home"] == os.environ.get("HOME")  # inherited
    request = trace["request"]
    assert set(request) == {"config", "task", "ctx"}
    assert request["config"] == {"effort": 1, "mode": "fast"}
    assert request["task"] == {"id": "ok-dev-0", "input": "dev ok 0",
                               "expected": "answer dev 0", "tags": [], "metadata": {},
                               "expected_tools": None}
    ctx = request["ctx"]
    assert set(ctx) == {"seed", "attempt", "split", "timeout_s", "remaining_s"}
    assert (ctx["seed"], ctx["attempt"], ctx["split"], ctx["timeout_s"]) == (
        a.seed, 0, "dev", 5.0)
    assert 3.0 < ctx["remaining_s"] < 5.0


# -- worker mode ---------------------------------------------------------------------------------

WORKER = PRELUDE + """
leave_grandchild()
print("worker up", file=sys.stderr, flush=True)
for line in sys.stdin:
    req = json.loads(line)
    kind = req["task"]["id"].split("-")[0]
    if kind == "die":
        print("dying", file=sys.stderr, flush=True)
        sys.exit(4)
    if kind == "garbage":
        print("garbage line", flush=True)
        continue
    if kind == "hang":
        time.sleep(600)
    print(f"answering {req['task']['id']}", file=sys.stderr, flush=True)
    print(json.dumps({"id": req["id"], "output": req["task"]["expected"],
                      "metrics": {"pid": os.getpid()}}), flush=True)
"""


def test_a_worker_answers_many_attempts(tmp_path: Path) -> None:
    bench = write_command_bench(tmp_path / "b", WORKER, harness={"worker": True},
                                rollouts={"concurrency": 1})
    result = run_eval(bench, k=3)
    done = [a for t in result.tasks for a in t.attempts]
    assert len(done) == 6 and all(a.score is not None and a.score.passed for a in done)
    assert len({a.metrics["pid"] for a in done}) == 1  # one worker took all six
    first = done[0].output
    assert first is not None and first.trace == {"stderr": "worker up\nanswering ok-dev-0"}
    second = done[1].output
    assert second is not None and second.trace == {"stderr": "answering ok-dev-0"}
    pids = recorded_pids(tmp_path / "b")
    assert len(pids) == 2
    assert_all_gone(pids)  # aclose closed its stdin, and the group went with it


def test_a_failing_worker_is_replaced_and_its_attempt_says_why(tmp_path: Path) -> None:
    kinds = {"dev": ["ok", "die", "ok", "garbage", "ok", "hang", "ok"], "val": ["ok"],
             "test": ["ok"]}
    bench = write_command_bench(tmp_path / "b", WORKER, harness={"worker": True},
                                tasks=tasks_of(kinds),
                                rollouts={"concurrency": 1, "timeout_s": 1.5})
    result = run_eval(bench)
    by_kind = {t.task_id.split("-")[0] + t.task_id[-1]: t.attempts[0] for t in result.tasks}
    assert by_kind["die1"].stop_reason == "error"
    assert "worker exited with code 4 before answering" in str(by_kind["die1"].error)
    assert "dying" in str(by_kind["die1"].error)
    assert by_kind["garbage3"].stop_reason == "error"
    assert "stdout is not JSON: 'garbage line'" in str(by_kind["garbage3"].error)
    assert by_kind["hang5"].stop_reason == "timeout"
    assert "no result within 1.5 s" in str(by_kind["hang5"].error)
    pids = [by_kind[f"ok{i}"].metrics["pid"] for i in (0, 2, 4, 6)]
    assert len(set(pids)) == 4  # a new worker after each failure
    assert all(by_kind[f"ok{i}"].scored for i in (0, 2, 4, 6))
    assert_all_gone(recorded_pids(tmp_path / "b"))


# -- worker mode: each reply tied to its request ---------------------------------------------

#: A worker whose reply names the attempt it answers (``output``: "<task id>:<attempt>"),
#: misbehaving as the task's kind says. ``late``, ``double`` and ``dies`` misbehave only
#: on attempt 0, so a misbehaving worker is followed by attempts of the same kind.
OUT_OF_STEP = PRELUDE + """
leave_grandchild()
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a late reply still comes out


def reply(req, id_=None):
    own = req["task"]["id"] + ":" + str(req["ctx"]["attempt"])
    return json.dumps({"id": req["id"] if id_ is None else id_, "output": own,
                       "metrics": {"pid": os.getpid()}}) + "\\n"


for line in sys.stdin:
    req = json.loads(line)
    kind = req["task"]["id"].split("-")[0]
    first = req["ctx"]["attempt"] == 0
    if kind == "late" and first:
        time.sleep(0.8)  # past the attempt's timeout, within the SIGTERM grace
        sys.stdout.write(reply(req))
    elif kind == "double" and first:
        sys.stdout.write(reply(req))
        sys.stdout.flush()
        time.sleep(0.05)  # the second reply comes while the next request is out
        sys.stdout.write(reply(req))
    elif kind == "twice" and first:
        sys.stdout.write(reply(req) + reply(req))  # both replies in one write
    elif kind == "wrong":
        sys.stdout.write(reply(req, "x" + req["id"]))
    elif kind == "noid":
        sys.stdout.write(json.dumps({"output": "an old-style reply"}) + "\\n")
    else:
        sys.stdout.write(reply(req))
    sys.stdout.flush()
    if kind == "dies" and first:
        sys.exit(0)  # between attempts: after its reply, before the next request
"""


def replies(result: EvalResult) -> collections.Counter[str]:
    """Each attempt as 'own' (scored on its own reply), 'other' (on another attempt's
    reply), or its stop reason when it carries a failure."""
    kinds: collections.Counter[str] = collections.Counter()
    for a in (a for t in result.tasks for a in t.attempts):
        if a.stop_reason != "completed":
            kinds[a.stop_reason] += 1
        else:
            assert a.output is not None
            kinds["own" if a.output.output == f"{a.task_id}:{a.attempt}" else "other"] += 1
    return kinds


@pytest.mark.parametrize(("kind", "failures"), [
    ("late", {"timeout": 2}),   # the attempt that overran carries its timeout
    ("double", {}),             # an extra reply charges nobody
    ("twice", {}),
    ("dies", {}),               # neither does an exit between attempts
    ("wrong", {"error": 6}),    # a wrong id: the attempt it answered, each time
    ("noid", {"error": 6}),
])
def test_every_attempt_is_scored_on_its_own_reply_or_carries_its_own_failure(
        tmp_path: Path, kind: str, failures: dict[str, int]) -> None:
    kinds = {"dev": ["ok", kind, "ok", kind, "ok"], "val": ["ok"], "test": ["ok"]}
    bench = write_command_bench(tmp_path / "b", OUT_OF_STEP, harness={
        "worker": True, "cancel_timeout_s": 1.0}, tasks=tasks_of(kinds),
        rollouts={"concurrency": 1, "timeout_s": 0.6})
    result = run_eval(bench, k=3)
    assert replies(result) == {"own": 15 - sum(failures.values()), **failures}
    for a in only(result, kind):
        if kind == "late" and a.attempt == 0:
            assert a.error is not None and "no result within 0.6 s" in a.error
        elif kind == "wrong":
            assert a.error is not None
            assert "worker replied out of step: the reply's id is" in a.error
        elif kind == "noid":
            assert a.error is not None and 'the reply has no "id"' in a.error
    # Whatever was out of step, its worker was replaced: the next attempt had a new one.
    if kind in ("late", "double", "twice", "dies"):
        for t in result.tasks:
            if t.task_id.startswith(kind):
                first, second = t.attempts[0], t.attempts[1]
                assert second.metrics["pid"] != first.metrics.get("pid", -1)
    assert_all_gone(recorded_pids(tmp_path / "b"))


def test_the_protocol_and_its_example_in_the_readme_and_the_docstring(tmp_path: Path) -> None:
    """The minimal worker documented for harness authors answers every attempt."""
    import re

    from forge.harness import command

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    in_readme = re.search(r"```python\n(# worker\.py\n.*?)```", readme, re.S)
    in_doc = re.search(r"\n( +# worker\.py\n.*?)\n\n(?=\S)", command.__doc__ or "", re.S)
    assert in_readme and in_doc
    for where, found in (("readme", in_readme), ("docstring", in_doc)):
        bench = write_command_bench(tmp_path / where, textwrap.dedent(found.group(1)),
                                    harness={"worker": True}, rollouts={"concurrency": 2})
        result = run_eval(bench, k=3)
        assert [a.output.output if a.output else a.error for t in result.tasks
                for a in t.attempts] == [f"dev ok {i}" for i in (0, 1) for _ in range(3)]


# -- identity --------------------------------------------------------------------------------------

def test_identity_follows_the_script_and_the_env_but_never_shows_env_values(
        tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text("print('{}')\n")
    spec = {"argv": [sys.executable, "agent.py", "--flag"], "env": {"TOKEN": "s3cr3t-value"}}
    first = build(tmp_path, spec).identity
    assert first == build(tmp_path, spec).identity
    assert first.startswith("command:")
    assert "s3cr3t-value" not in first and "agent.py" in first
    (tmp_path / "agent.py").write_text("print('{ }')\n")
    edited = build(tmp_path, spec).identity
    assert edited != first
    other_env = build(tmp_path, {**spec, "env": {"TOKEN": "another-value"}}).identity
    assert other_env != edited
    assert build(tmp_path, {**spec, "worker": True}).identity != edited
    # How it is stopped or how much stderr is kept does not change what it does.
    assert build(tmp_path, {**spec, "cancel_timeout_s": 9, "max_stderr_bytes": 5}
                 ).identity == edited


# -- bad specs: one line, exit 2 ----------------------------------------------------------------

@pytest.mark.parametrize(("harness", "fragment"), [
    ({"argv": []}, "argv: expected a non-empty list of strings"),
    ({"argv": "python3 agent.py"}, "argv: expected a non-empty list of strings"),
    ({"argv": ["python3", 3]}, "argv: expected a non-empty list of strings"),
    ({"argv": ["no-such-program-forge-test"]}, "not found on PATH"),
    ({"argv": ["./missing.sh"]}, "is not an executable file"),
    ({"cwd": "nowhere"}, "cwd: 'nowhere' is not a folder"),
    ({"shell": True}, "unknown argument(s) ['shell']"),
    ({"worker": "yes"}, "worker: expected true or false"),
    ({"cancel_timeout_s": -1}, "cancel_timeout_s: expected a number >= 0"),
    ({"max_stderr_bytes": 1.5}, "max_stderr_bytes: expected an integer >= 0"),
    ({"env": ["A=1"]}, "env: expected a mapping"),
    ({"env": {"A": ["secret"]}}, "env: A: expected a string or a number"),
])
def test_a_bad_spec_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           harness: dict[str, Any], fragment: str) -> None:
    bench = write_command_bench(tmp_path / "b", "print('{}')\n", harness=harness)
    code, out, err = run_forge(capsys, "eval", bench)
    line = assert_user_error(code, out, err, "bench.yaml", "harness.command", fragment)
    assert "secret" not in line


def test_the_shorthand_list_is_argv(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text("print('{}')\n")
    harness = build(tmp_path, [sys.executable, "agent.py"])
    assert harness.argv == [sys.executable, "agent.py"] and harness.cwd == tmp_path.resolve()


def test_the_process_executor_refuses_a_command_bench_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A command child is already its own process; the process executor re-imports
    # python harnesses only and says so.
    bench = write_command_bench(tmp_path / "b", MIXED_AGENT)
    code, out, err = run_forge(capsys, "eval", bench, "--executor", "process")
    assert_user_error(code, out, err, "only the 'python' harness")
