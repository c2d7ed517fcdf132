"""What a python harness prints during an attempt is kept with that attempt, bounded and
redacted, whichever lane or coroutine ran it (forge._util.printed); forge's own stdout gets
none of it."""

from __future__ import annotations

import io
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import MakeBench

from forge._util.bounds import MAX_PRINTED_CHARS
from forge._util.printed import Printed, StdoutRouter, capture, release, stdout_router
from forge.bench.loader import load_bench
from forge.evaluation.evaluate import evaluate
from forge.results.model import AttemptResult, EvalResult
from forge.secrets.masking import clear_secrets, register_secret


@pytest.fixture(autouse=True)
def _no_secrets() -> Iterator[None]:
    clear_secrets()
    yield
    clear_secrets()


def by_attempt(result: EvalResult) -> dict[tuple[str, int], AttemptResult]:
    return {(a.task_id, a.attempt): a for a in result.attempts}


# -- the buffer -------------------------------------------------------------------------


def test_nothing_printed_is_none_and_a_little_is_kept_whole() -> None:
    printed = Printed()
    assert printed.text() is None
    printed.write("")
    assert printed.text() is None
    printed.write("debug: one\n")
    printed.write("debug: two\n")
    assert printed.text() == "debug: one\ndebug: two\n"


def test_more_than_the_bound_keeps_the_tail_and_says_how_many_bytes_came_before() -> None:
    printed = Printed()
    head = "é" * 1000  # two bytes each in UTF-8: the count is of bytes, as it says
    tail = "".join(f"line {i}\n" for i in range(5000))
    printed.write(head)
    for line in tail.splitlines(keepends=True):
        printed.write(line)
    text = printed.text()
    assert text is not None
    mark, kept = text.split("\n", 1)
    assert kept == tail[-MAX_PRINTED_CHARS:]
    dropped = (head + tail)[:-MAX_PRINTED_CHARS]
    assert mark == f"[{len(dropped.encode())} earlier bytes dropped]"
    # Bounded while it is written, not only when it is read.
    printed.write("x" * (10 * MAX_PRINTED_CHARS))
    assert printed._size <= 2 * MAX_PRINTED_CHARS


def test_what_a_worker_kept_is_told_as_it_is() -> None:
    text = "[12 earlier bytes dropped]\n" + "y" * MAX_PRINTED_CHARS
    assert Printed.told(text).text() == text
    assert Printed.told(None).text() is None


# -- the router -------------------------------------------------------------------------


def test_the_router_sends_each_write_to_the_attempt_whose_context_made_it() -> None:
    outside = io.StringIO()
    router = StdoutRouter(outside)
    mine, theirs = Printed(), Printed()

    def attempt(printed: Printed, word: str) -> None:
        token = capture(printed)
        try:
            for _ in range(200):
                router.write(word + "\n")
        finally:
            release(token)

    threads = [threading.Thread(target=attempt, args=(p, w))
               for p, w in ((mine, "mine"), (theirs, "theirs"))]
    for t in threads:
        t.start()
    router.write("forge's own\n")
    for t in threads:
        t.join()
    assert mine.text() == "mine\n" * 200
    assert theirs.text() == "theirs\n" * 200
    assert outside.getvalue() == "forge's own\n"
    with router.diverted(err := io.StringIO()):
        router.write("diverted\n")
    router.write("back\n")
    assert (err.getvalue(), outside.getvalue()) == ("diverted\n", "forge's own\nback\n")
    with pytest.raises(TypeError, match="must be str"):
        router.write(b"bytes")  # type: ignore[arg-type]
    router.close()  # a harness closing sys.stdout does not take it from the others
    router.write("still open\n")
    assert outside.getvalue().endswith("still open\n") and not router.closed
    # Closed is the stream's state (at exit): a library that kept sys.stdout asks it.
    outside.close()
    assert router.closed


def test_the_router_is_installed_once_and_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    outside = io.StringIO()
    monkeypatch.setattr(sys, "stdout", outside)
    router = stdout_router()
    assert sys.stdout is router and router.stream is outside
    assert stdout_router() is router
    print("outside any attempt")
    assert outside.getvalue() == "outside any attempt\n"


# -- through the engine -----------------------------------------------------------------

#: Each attempt prints its own name between sleeps, so that at concurrency 4 the
#: attempts' writes interleave in time.
SYNC_PRINTER = """
import time

def run(config, task, ctx):
    for i in range(5):
        print(f"{task.id}/{ctx.attempt} line {i}")
        time.sleep(0.01)
    return {"output": task.expected}
"""

ASYNC_PRINTER = """
import asyncio
import sys

async def run(config, task, ctx):
    for i in range(5):
        print(f"{task.id}/{ctx.attempt} line {i}")
        await asyncio.sleep(0.01)
    # A thread that copies the attempt's context prints to the attempt too.
    await asyncio.to_thread(print, f"{task.id}/{ctx.attempt} from a thread")
    sys.stdout.write(f"{task.id}/{ctx.attempt} written\\n")
    return {"output": task.expected}
"""


@pytest.mark.parametrize("source", [SYNC_PRINTER, ASYNC_PRINTER], ids=["sync", "async"])
def test_concurrent_attempts_each_keep_what_they_printed(
        make_bench: MakeBench, capsys: pytest.CaptureFixture[str], source: str) -> None:
    bench = load_bench(make_bench(source, rollouts={"k": 3, "concurrency": 4}))
    result = evaluate(bench, bench.defaults)
    assert result.n_scored == result.n_attempts == 9
    for (task_id, attempt), a in by_attempt(result).items():
        assert a.stdout is not None
        lines = a.stdout.splitlines()
        assert lines[:5] == [f"{task_id}/{attempt} line {i}" for i in range(5)]
        assert all(line.startswith(f"{task_id}/{attempt} ") for line in lines)
    assert capsys.readouterr().out == ""  # none of it on forge's stdout


ERRING_PRINTER = """
import time

def run(config, task, ctx):
    print("about to fail on", task.id)
    if task.id == "dev-0":
        raise RuntimeError("boom")
    if task.id == "dev-1":
        time.sleep(5)
        return {"output": task.expected}  # long after its attempt timed out
    print("x" * 20000)
    return {"output": task.expected}
"""


def test_failed_and_timed_out_attempts_keep_what_they_printed_and_it_is_bounded(
        make_bench: MakeBench) -> None:
    bench = load_bench(make_bench(ERRING_PRINTER, rollouts={"k": 1, "timeout_s": 0.5}))
    result = evaluate(bench, bench.defaults)
    attempts = by_attempt(result)
    erred, stuck, done = attempts["dev-0", 0], attempts["dev-1", 0], attempts["dev-2", 0]
    assert (erred.stop_reason, erred.stdout) == ("error", "about to fail on dev-0\n")
    assert (stuck.stop_reason, stuck.stdout) == ("timeout", "about to fail on dev-1\n")
    assert done.scored and done.stdout is not None
    whole = "about to fail on dev-2\n" + "x" * 20000 + "\n"
    assert done.stdout == (f"[{len(whole) - MAX_PRINTED_CHARS} earlier bytes dropped]\n"
                           + whole[-MAX_PRINTED_CHARS:])


SECRET = "sk-live-0123456789abcdefABCDEF"

#: Long enough that the cut to the bound falls 15 characters into the first secret:
#: the piece of it left after the mark is masked too.
FILLER = MAX_PRINTED_CHARS + len("calling with key ") + 15 - len(
    f"calling with key {SECRET}\n\nkey again {SECRET}\n")

SECRET_PRINTER = f"""
def run(config, task, ctx):
    print("calling with key {SECRET}")
    print("-" * {FILLER})
    print("key again {SECRET}")
    return {{"output": task.expected}}
"""


def test_what_is_printed_is_redacted(make_bench: MakeBench) -> None:
    assert register_secret(SECRET)
    bench = load_bench(make_bench(SECRET_PRINTER, rollouts={"k": 1}))
    result = evaluate(bench, bench.defaults)
    for a in result.attempts:
        assert a.stdout is not None
        mark, kept = a.stdout.split("\n", 1)
        assert mark.endswith("earlier bytes dropped]")
        assert kept.startswith("***\n---")  # was the secret's last 15 characters
        assert kept.endswith("-\nkey again ***\n")


def test_an_attempt_that_prints_nothing_has_no_stdout_in_its_json(make_bench: MakeBench
                                                                   ) -> None:
    bench = load_bench(make_bench())
    result = evaluate(bench, bench.defaults)
    assert all(a.stdout is None for a in result.attempts)
    dumped: dict[str, Any] = result.attempts[0].model_dump(mode="json")
    assert "stdout" not in dumped  # files written as before it was kept
    printed = result.attempts[0].model_copy(update={"stdout": "hi\n"})
    assert printed.model_dump(mode="json")["stdout"] == "hi\n"
    assert AttemptResult.model_validate_json(printed.model_dump_json()) == printed
