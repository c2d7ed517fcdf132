"""Secret hygiene: a secret read from the environment is in no file forge writes, no log."""

from __future__ import annotations

import html
import importlib
import io
import json
import logging
import secrets
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
from conftest import MakeBench, readable_bytes, run_forge, stored_text

from forge.harness import RunOutput
from forge.journal import JournalWriter
from forge.journal.records import StopRecord
from forge.journal.store import AttemptStore
from forge.results.model import AttemptResult, load_result
from forge.runtime import RuntimeEndRecord, RuntimeJournal
from forge.secrets.masking import (
    MASK,
    RedactingFilter,
    clear_secrets,
    redact,
    register_secret,
    secret_from_env,
)

ENV = "FORGE_HARNESS_TOKEN"


@pytest.fixture(autouse=True)
def _forget_secrets() -> Iterator[None]:
    clear_secrets()
    yield
    clear_secrets()


@pytest.fixture
def token() -> str:
    """A random 32-character credential."""
    value = secrets.token_urlsafe(24)
    assert len(value) == 32
    return value


def http_service() -> ModuleType:
    """The harness service of the HTTP harness tests (``tests/harness/http_service.py``)."""
    folder = str(Path(__file__).resolve().parents[1] / "harness")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module("http_service")


def assert_clean(data: bytes | str, token: str, where: str) -> None:
    raw = data if isinstance(data, bytes) else data.encode()
    assert token.encode() not in raw, where
    # Nor a clipped piece of it: redaction runs before any clip.
    assert token[:12].encode() not in raw, where


# -- redact --------------------------------------------------------------------------------


def test_without_secrets_redact_returns_its_argument() -> None:
    text = "nothing to hide " * 100
    assert redact(text) is text


def test_every_form_of_a_secret_is_replaced() -> None:
    value = 'p@ss/wörd"x+y <z> 42'
    assert register_secret(value)
    forms = [value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1],
             repr(value)[1:-1], html.escape(value), quote(value, safe=""), quote_plus(value)]
    for form in forms:
        assert redact(f"before {form} after") == f"before {MASK} after", form
    document = json.dumps({"error": f"token {value}", "n": 12345678901234})
    cleaned = json.loads(redact(document))  # still valid JSON
    assert cleaned == {"error": f"token {MASK}", "n": 12345678901234}
    assert redact(redact(document)) == redact(document)


def test_two_secrets_and_a_longer_one_containing_a_shorter(token: str) -> None:
    assert register_secret(token)
    assert register_secret(f"Bearer {token}")
    assert redact(f"a Bearer {token} b {token} c") == f"a {MASK} b {MASK} c"


@pytest.mark.parametrize(("value", "why"), [
    ("k3y!", "shorter than 8"), ("", "shorter than 8"), ("12345678901", "looks like a number"),
    ("1.5e+300", "looks like a number"),
])
def test_values_that_cannot_be_redacted_safely_are_refused_with_a_warning(
        caplog: pytest.LogCaptureFixture, value: str, why: str) -> None:
    with caplog.at_level(logging.WARNING, logger="forge.secrets.masking"):
        assert register_secret(value, name="MY_KEY") is False
    (record,) = caplog.records
    assert "MY_KEY" in record.getMessage() and why in record.getMessage()
    if value:
        assert value not in record.getMessage()
    assert redact(f"seed {value} and more") == f"seed {value} and more"


def test_secret_from_env(monkeypatch: pytest.MonkeyPatch, token: str) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert secret_from_env(ENV) is None
    monkeypatch.setenv(ENV, "")
    assert secret_from_env(ENV) is None
    monkeypatch.setenv(ENV, token)
    assert secret_from_env(ENV) == token
    assert redact(f"x{token}x") == f"x{MASK}x"


def test_log_records_are_redacted_whatever_their_logger(token: str) -> None:
    register_secret(token)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        logging.getLogger("forge.anything").warning("sent %s", {"Authorization": token})
        logging.getLogger("someone.else").warning(f"inline {token}")
        try:
            raise RuntimeError(f"service said {token}")
        except RuntimeError:
            logging.getLogger("forge.other").exception("attempt failed")
    finally:
        root.removeHandler(handler)
    text = stream.getvalue()
    assert_clean(text, token, "log output")
    assert text.count(MASK) == 3 and "RuntimeError: service said ***" in text


def test_redacting_filter_on_a_record_made_without_the_factory(token: str) -> None:
    register_secret(token)
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "key %s", (token,), None)
    assert RedactingFilter().filter(record) is True
    assert record.getMessage() == f"key {MASK}"


# -- the writers ---------------------------------------------------------------------------


def test_store_journal_runtime_journal_and_replay_are_redacted(tmp_path: Path,
                                                               token: str) -> None:
    register_secret(token)
    attempt = AttemptResult(task_id="t", attempt=0, seed=1, stop_reason="completed",
                            duration_s=0.1, output=RunOutput(output=f"echo {token}",
                                                             trace={"auth": token}))
    for name in ("attempts.jsonl", "attempts.jsonl.gz"):  # either format of the store
        AttemptStore(tmp_path / name).add("cfg", "dev", [attempt])
        assert AttemptStore(tmp_path / name).get("cfg", "dev", "t", 0) is not None

    record = StopRecord(reason="max_steps", text=f"the trace shows {token}", step=0,
                        rollouts_total=0, cost_total=0.0)
    stored = JournalWriter(tmp_path).write(record)
    assert stored.text == f"the trace shows {MASK}"
    # A resumed run writes the same record again, secret and all: no divergence.
    assert JournalWriter(tmp_path).write(record).text == stored.text

    with RuntimeJournal(tmp_path / "runtime.jsonl") as journal:
        journal.write(RuntimeEndRecord(at=datetime.now(UTC), run_id="r", mode="observe",
                                       registry="reg", registry_digest="d", counts={},
                                       restored_ok=True, error=f"restore saw {token}"))
    for name in ("attempts.jsonl", "attempts.jsonl.gz", "journal.jsonl", "runtime.jsonl"):
        data = readable_bytes(tmp_path / name)
        assert_clean(data, token, name)
        assert MASK.encode() in data, name


def test_an_attempt_error_echoing_a_secret_is_redacted_before_its_clip(
        make_bench: MakeBench, tmp_path: Path, token: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, token)
    secret_from_env(ENV)  # as a plugin reading its credential through forge would
    # The secret straddles the 2000-character clip of error texts: clipped first, its
    # first 15 characters would be written.
    bench = make_bench(textwrap.dedent(f"""
        import os

        def run(config, task, ctx):
            raise RuntimeError("x" * 1970 + " " + os.environ["{ENV}"] + " and more")
        """))
    code, _, err = run_forge(capsys, "eval", bench, "--json", "--save", tmp_path / "r.json")
    assert code == 1, err  # nothing scored; the line saying so names the reason, redacted
    assert "no attempt was scored" in err and token not in err
    data = (tmp_path / "r.json").read_bytes()
    assert_clean(data, token, "result")
    for a in load_result(tmp_path / "r.json").attempts:
        assert a.stop_reason == "error" and (a.error or "").endswith(" *** and more")


# -- the "done when": a search against an echoing HTTP service ---------------------


def test_search_over_an_echoing_http_service_writes_no_secret(
        tmp_path: Path, token: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    svc = http_service()
    monkeypatch.setenv(ENV, f"Bearer {token}")
    journals = tmp_path / "journals"
    stderr_log = logging.StreamHandler(sys.stderr)  # capsys's stderr: logs are checked too
    logging.getLogger().addHandler(stderr_log)
    caplog.set_level(logging.INFO)
    try:
        with svc.HarnessService() as service:
            # Every answer, error body and service log line echoes the Authorization
            # header and the bare token; dev-2 always fails with such a 500.
            service.default = svc.Behaviour(echo=True)
            service.by_task["dev-2"] = svc.Behaviour(echo=True, fail_first=1000)
            bench = svc.write_http_bench(tmp_path / "bench", {
                "url": service.url, "headers_from_env": {"Authorization": ENV},
                "retries": {"max": 1, "backoff_s": 0.01, "on": ["5xx"]}})
            code, out, err = run_forge(capsys, "search", bench, "--journals", journals,
                                       "--run-id", "r1", "--max-steps", "2", "-k", "2",
                                       "--budget-rollouts", "60")
            assert code == 0, err
            assert {s.headers["authorization"] for s in service.seen} == {f"Bearer {token}"}
            code2, out2, err2 = run_forge(capsys, "eval", bench, "--json",
                                          "--save", tmp_path / "result.json")
            assert code2 == 0, err2
        code3, out3, err3 = run_forge(capsys, "report", "r1", "--journals", journals,
                                      "--html", journals / "r1" / "report.html")
        assert code3 == 0, err3
    finally:
        logging.getLogger().removeHandler(stderr_log)

    files = [p for p in journals.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"run.json", "journal.jsonl", "attempts.jsonl.gz",
                                       "report.html"}
    for path in files:
        assert_clean(readable_bytes(path), token, str(path))
    attempts = stored_text(journals / "r1")
    assert "(auth ***)" in attempts  # the echo was there, and was redacted
    assert '"credential": "***"' in attempts and "credential ***" in attempts

    result = (tmp_path / "result.json").read_bytes()
    assert_clean(result, token, "result.json")
    assert b"***" in result

    for text, where in ((out, "search stdout"), (err, "search stderr"), (out2, "eval stdout"),
                        (err2, "eval stderr"), (out3, "report stdout"), (err3, "report stderr")):
        assert_clean(text, token, where)
    assert "request for dev-0 with headers" in err and MASK in err  # the service's log
    messages = "\n".join(r.getMessage() for r in caplog.records)
    assert_clean(messages, token, "log records")
    assert "retrying in" in messages  # forge's own retry log, from dev-2's 500s



# -- a key straddling every clip -----------------------------------------------------------

#: A fixed key, so that a failure is reproducible; its pieces occur in no message forge
#: writes around it (checked below with the key left out).
STRADDLER = "ZqXvKjWzQyPxVuTw9Z8Q7X6V5K4J3W2z"
FILLER = "#"


def _child() -> Any:
    from forge.harness.supervisor import Child

    return Child(65536, lambda child: None, line_mode=False)


def _command_stdout(text: str) -> str:
    """A command harness whose stdout is not JSON, as the attempt's error stores it."""
    from forge.evaluation.rollout import _clip
    from forge.harness.command import _object

    try:
        _object(text.encode(), _child())
    except Exception as exc:
        return _clip(f"{type(exc).__name__}: {exc}") or ""
    raise AssertionError("not JSON, yet accepted")


def _command_stderr(text: str, limit: int) -> str:
    """The stderr tail of a command harness (its front dropped), as a trace stores it."""
    from forge.harness.supervisor import Tail

    tail = Tail(limit)
    data = text.encode()
    for i in range(0, len(data), 7):  # as a stream arrives: in pieces
        tail.add(data[i:i + 7])
    return redact(json.dumps({"stderr": tail.text()}))


def _validation(text: str) -> str:
    from forge._util.files import validation_problem
    from forge.harness import RunOutput

    try:
        RunOutput.model_validate({"usage": {"input_tokens": [text]}})
    except Exception as exc:
        return validation_problem(exc).message  # type: ignore[arg-type]
    raise AssertionError("accepted")


def _judge_not_json(text: str) -> str:
    from forge.scorers.judge import parse_reply

    try:
        parse_reply("not json " + text, "binary", 7)
    except ValueError as exc:
        return str(exc)
    raise AssertionError("accepted")


def _judge_reason(text: str) -> str:
    from forge.scorers.judge import parse_reply

    return parse_reply(json.dumps({"verdict": "pass", "reason": text}), "binary",
                       7).explanation or ""


def _exact(text: str) -> str:
    from forge.core.spec import BuildContext
    from forge.core.task import Task
    from forge.scorers import SCORERS

    scorer = SCORERS.build(SCORERS.parse("exact", BuildContext(base_dir=Path("."))),
                           BuildContext(base_dir=Path(".")))
    score = scorer.score(Task(id="t", input="i", expected="e"), RunOutput(output=text))
    return score.explanation or ""  # type: ignore[union-attr]


def _short(value: Any) -> str:
    from forge._util.show import short

    return short(value)


def _clip(text: str, limit: int) -> str:
    from forge.secrets.masking import clip

    return clip(text, limit)


def _places() -> list[tuple[str, int, Any]]:
    """Every place that clips text forge may write: (name, where it cuts, render)."""
    from forge.evaluation.rollout import _clip as error_clip
    from forge.harness._endpoint import excerpt as http_excerpt
    from forge.llm.client import _excerpt as llm_excerpt
    from forge.proposers._llm_prompt import clip as prompt_clip
    from forge.scorers._values import quote

    places: list[tuple[str, int, Any]] = [
        ("secrets.clip", 60, lambda t: _clip(t, 60)),
        ("_show.short of a string", 60, _short),
        ("_show.short of a structure", 60, lambda t: _short({"key": [t]})),
        ("a value quoted in a validation error", 60, _validation),
        ("scorer explanation (exact)", 80, _exact),
        ("judge reply that is not JSON", 120, _judge_not_json),
        ("judge reason", 160, _judge_reason),
        ("LLM client error excerpt", 200, llm_excerpt),
        ("HTTP harness error excerpt", 160, lambda t: http_excerpt(t.encode())),
        ("command harness stdout excerpt", 200, _command_stdout),
        ("attempt error text", 2000, error_clip),
        ("llm proposer prompt", 120, lambda t: prompt_clip(t, 120)),
        ("command harness stderr tail", 500, lambda t: _command_stderr(t, 500)),
    ]
    places += [(f"quote({limit})", limit, lambda t, n=limit: quote(t, n))
               for limit in (40, 60, 80, 120, 160)]
    return places


@pytest.mark.parametrize("place", _places(), ids=lambda p: p[0])
def test_a_key_straddling_every_clip_leaves_no_piece_of_it(place: tuple[str, int, Any]) -> None:
    """Redaction runs before the clip at every place that clips: wherever the cut falls
    in the key, no three characters of it in a row are written."""
    name, cut, render = place
    pieces = {STRADDLER[i:i + 3] for i in range(len(STRADDLER) - 2)}
    tail = name == "command harness stderr tail"  # the start is cut, not the end
    texts = []
    for offset in range(max(0, cut - len(STRADDLER) - 4), cut + 5):
        if tail:
            texts.append(FILLER * 700 + STRADDLER + FILLER * offset)
        else:
            texts.append(FILLER * offset + STRADDLER + FILLER * (cut + 400))
    # The check itself: with nothing registered, pieces of the key show at most cuts,
    # and a text without the key shows none.
    assert sum(any(p in render(text) for p in pieces) for text in texts) > len(texts) / 2
    assert not [p for p in pieces if p in render(FILLER * (cut + 800))]
    register_secret(STRADDLER)
    for text in texts:
        shown = render(text)
        assert not [p for p in pieces if p in shown], (name, text.index(STRADDLER), shown)
        assert MASK in shown or any(m in shown for m in ("...", "…", "dropped")), shown


def test_explanations_quoting_a_key_at_every_cut_reach_no_file(
        make_bench: MakeBench, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The exact scorer quotes the output in 80 characters; each task puts the key one
    # character further along, so that the cut falls at every place in it.
    monkeypatch.setenv(ENV, STRADDLER)
    tasks = {"dev": [{"id": f"d{n}", "input": {"offset": n}, "expected": "right"}
                     for n in range(40, 84)]}
    bench = make_bench(textwrap.dedent(f"""
        import os

        def run(config, task, ctx):
            return {{"output": "#" * task.input["offset"] + os.environ["{ENV}"] + "#" * 100}}
        """), tasks=tasks)
    secret_from_env(ENV)
    code, _, err = run_forge(capsys, "eval", bench, "-k", "1", "--save", tmp_path / "r.json")
    assert code == 0, err
    data = (tmp_path / "r.json").read_text(encoding="utf-8")
    assert data.count("got '") == len(tasks["dev"])  # every output was quoted
    assert not [STRADDLER[i:i + 3] for i in range(len(STRADDLER) - 2)
                if STRADDLER[i:i + 3] in data]
