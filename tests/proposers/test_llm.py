"""The llm proposer against a real scripted OpenAI-compatible server (tests/openai_server.py).

Whole searches run in-process through the CLI (``run_forge``); the model's replies are
scripted per step (the prompt says "Step N."), so a run and its resume see the same
replies. forge's own code is never mocked: the client talks HTTP to a local socket.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    assert_user_error,
    run_forge,
    run_forge_json,
    search_tasks,
    write_search_bench,
)
from openai_server import Reply, ScriptedOpenAI, malformed, reply, status, tool_call
from proposer_helpers import attempt, make_registry, mixed_registry, view

from forge.journal.records import AnyRecord
from forge.proposers import EvaluatedConfig, LLMProposer, build_proposer
from forge.proposers.llm import CACHE_FILE
from forge.results.model import AttemptResult
from forge.scorers.base import Score
from forge.search.launch import launch_search
from forge.secrets.masking import clear_secrets

MODEL = "scripted-model"
SEED = 7

#: boost raises the success rate from 0.5 to 0.8; a failure echoes the task's input.
BOOST = """
def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.8 if config["boost"] else 0.5
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong answer to " + task.input["q"]}
"""

#: Any change from the defaults hurts, so nothing is ever promoted and every step runs.
FLAT = """
DEFAULTS = {"boost": False, "knob": 5, "mode": "a", "width": 5}


def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.5 if config == DEFAULTS else 0.3
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong"}
"""

FLAT_REGISTRY = """\
name: flat
settings:
  boost: {type: bool, default: false}
  knob:  {type: int, min: 1, max: 9, step: 1, default: 5}
  mode:  {type: enum, choices: [a, b, c, d, e, f], default: a}
  width: {type: int, min: 1, max: 9, step: 1, default: 5}
"""


def move(setting: str, value: Any, reason: str = "the failures point there") -> str:
    return json.dumps({"setting": setting, "value": value, "reason": reason})


def step_of(body: dict[str, Any]) -> int:
    found = re.search(r"Step (\d+)\.", body["messages"][1]["content"])
    assert found is not None
    return int(found.group(1))


def by_step(replies: dict[int, list[Reply]]) -> Callable[[dict[str, Any]], Reply]:
    """Answer each step's request from its own list (retries take the next item)."""
    left = {step: list(items) for step, items in replies.items()}

    def answer(body: dict[str, Any]) -> Reply:
        queue = left.get(step_of(body), [])
        return queue.pop(0) if queue else reply(move("knob", 1, "fallback script"))
    return answer


def records(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in
            (folder / "journal.jsonl").read_text(encoding="utf-8").splitlines()]


def stable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in {"at", "elapsed_s", "run_id"}}
            for r in rows]


@pytest.fixture
def llm(openai_server: ScriptedOpenAI, monkeypatch: pytest.MonkeyPatch
        ) -> Iterator[ScriptedOpenAI]:
    """The scripted server, named by the environment as a user would."""
    monkeypatch.setenv("FORGE_OPENAI_BASE_URL", openai_server.url)
    monkeypatch.setenv("FORGE_OPENAI_MODEL", MODEL)
    monkeypatch.delenv("FORGE_OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("COLUMNS", "300")
    yield openai_server
    clear_secrets()


def search(capsys: pytest.CaptureFixture[str], bench: Path, journals: Path, run_id: str,
           *extra: object) -> Any:
    return run_forge_json(capsys, "search", bench, "--proposer", "llm", "--journals", journals,
                          "--run-id", run_id, "--seed", SEED, "--json", *extra)


# -- whole searches ---------------------------------------------------------------------


def test_a_valid_reply_is_screened_journaled_and_promoted(
        llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = write_search_bench(tmp_path / "bench", BOOST, search={"max_steps": 3})
    reason = "most failures are plain misses; boosting should lift the pass rate"
    llm.answer_with(by_step({1: [reply(f"Sure.\n```json\n{move('boost', True, reason)}\n```")],
                             2: [reply(move("knob", 1))], 3: [reply(move("knob", 1))]}))
    result = search(capsys, bench, tmp_path / "j", "run")
    assert result["promotions"] == [{"step": 1, "target": "boost", "before": False,
                                     "after": True}]
    rows = records(tmp_path / "j" / "run")
    first = next(r for r in rows if r["kind"] == "candidate" and r["proposer"] == "llm")
    assert (first["step"], first["proposer"], first["reason"], first["verdict"]) == (
        1, "llm", reason, "promoted")
    # Step 1 screens the sweep's fallback too before it confirms the model's move (the
    # passing candidate of largest screening effect), whose record comes after. Step 2
    # screens the model's knob move and, when it is refused, goes on with the sweep
    # fallback; step 3's reply repeats the knob move, which is refused as already
    # tried, and the fallback takes the step.
    assert [(r["step"], r["proposer"]) for r in rows if r["kind"] == "candidate"] == [
        (1, "sweep"), (1, "llm"), (2, "llm"), (2, "sweep"), (3, "sweep")]
    invalid = [r for r in rows if r["kind"] == "proposal_invalid"]
    assert [(r["step"], r["category"]) for r in invalid] == [(3, "already_tried")]
    info = json.loads((tmp_path / "j" / "run" / "run.json").read_text())
    assert info["options"]["proposer"] == "llm"
    assert info["options"]["proposer_info"]["endpoint"] == f"openai:{llm.url}:{MODEL}"
    assert invalid[0]["endpoint"] == f"openai:{llm.url}:{MODEL}"
    # One request per step, to the configured model, with dev failures and no val/test.
    assert len(llm.requests) == 3
    for request in llm.requests:
        assert request.body is not None and request.body["model"] == MODEL
        text = request.raw.decode()
        assert "dev question" in text and "dev answer" in text
        for leak in ("val-", "test-", "val question", "test question", "val answer",
                     "test answer"):
            assert leak not in text
    # A reviewer sees the refusal in `forge journal show` and in the HTML report.
    code, out, err = run_forge(capsys, "journal", "show", "run", "--journals", tmp_path / "j")
    assert code == 0, err
    assert "1 invalid proposals" in out and "already_tried" in out and "invalid" in out
    code, _, err = run_forge(capsys, "report", "run", "--journals", tmp_path / "j",
                             "--html", tmp_path / "r.html")
    assert code == 0, err
    assert "invalid proposals" in (tmp_path / "r.html").read_text()


INVALID_STEPS: dict[int, tuple[list[Reply], str]] = {
    2: ([reply(move("knob", 6))], "already_tried"),
    3: ([reply("I would raise the knob a little; it seems too low.")], "not_json"),
    4: ([reply(move("turbo", True))], "unknown_setting"),
    5: ([reply(move("knob", 99))], "illegal_value"),
    6: ([reply(json.dumps([{"setting": "knob", "value": 4},
                           {"setting": "boost", "value": True}]))], "not_single_move"),
    7: ([reply(move("knob", 2.5))], "illegal_value"),
    8: ([status(500), status(500), status(500)], "endpoint"),
    9: ([malformed()], "endpoint"),
}


def test_each_invalid_reply_is_journaled_and_the_search_goes_on(
        llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = write_search_bench(tmp_path / "bench", FLAT, registry=FLAT_REGISTRY,
                               tasks=search_tasks(24, 8, 8),
                               search={"max_steps": 9, "patience": 20})
    script = {1: [reply(move("knob", 6))], **{s: r for s, (r, _) in INVALID_STEPS.items()}}
    llm.answer_with(by_step(script))
    result = search(capsys, bench, tmp_path / "j", "run", "--candidates", "1")
    assert (result["stop_reason"], result["steps"], result["promotions"]) == (
        "max_steps", 9, [])
    rows = records(tmp_path / "j" / "run")
    invalid = [r for r in rows if r["kind"] == "proposal_invalid"]
    assert [(r["step"], r["category"]) for r in invalid] == [
        (s, c) for s, (_, c) in INVALID_STEPS.items()]
    for r in invalid:
        assert r["proposer"] == "llm" and r["reason"] and r["incumbent"]
        # Each refusal is followed by the sweep fallback's candidate for that step.
        after = rows[rows.index(r) + 1]
        assert (after["kind"], after["step"], after["proposer"]) == ("candidate", r["step"],
                                                                     "sweep")
    reasons = {r["category"] + str(r["step"]): r for r in invalid}
    assert reasons["not_json3"]["reply"].startswith("I would raise the knob")
    assert "turbo" in reasons["unknown_setting4"]["reason"]
    assert "99 is outside [1, 9]" in reasons["illegal_value5"]["reason"]
    assert "2 moves in one reply" in reasons["not_single_move6"]["reason"]
    assert "2.5" in reasons["illegal_value7"]["reason"]
    assert "HTTP 500" in reasons["endpoint8"]["reason"]
    assert "malformed reply" in reasons["endpoint9"]["reason"]
    assert reasons["endpoint8"]["reply"] is None
    assert rows[-1]["kind"] == "end"
    assert len(llm.requests) == 11  # one per step, the 500s retried within the policy
    code, out, err = run_forge(capsys, "journal", "show", "run", "--journals", tmp_path / "j")
    assert code == 0, err
    assert "8 invalid proposals" in out


def test_a_missing_endpoint_stops_before_any_run_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FORGE_OPENAI_BASE_URL", raising=False)
    bench = write_search_bench(tmp_path / "bench", BOOST)
    code, out, err = run_forge(capsys, "search", bench, "--proposer", "llm",
                               "--journals", tmp_path / "j", "--run-id", "nope")
    assert_user_error(code, out, err, "--proposer llm", "FORGE_OPENAI_BASE_URL")
    assert not (tmp_path / "j").exists()


def test_resume_replays_cached_replies_and_matches_an_uninterrupted_run(
        llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # boost matters and nothing else does; ten neighbours keep all four steps going.
    bench = write_search_bench(tmp_path / "bench", BOOST, registry=FLAT_REGISTRY,
                               tasks=search_tasks(24, 16, 16),
                               search={"max_steps": 4, "patience": 10})
    script = {1: [reply(move("boost", True))], 2: [reply("no idea")],
              3: [reply(move("knob", 6))], 4: [reply(move("width", 4))]}
    llm.answer_with(by_step(script))
    journals = tmp_path / "j"
    base = search(capsys, bench, journals, "base")
    asked = len(llm.requests)
    assert asked == 4

    class Killed(Exception):
        pass

    def kill_at_step_2(record: AnyRecord) -> None:
        if record.journal_json().get("step") == 2:
            raise Killed

    llm.answer_with(by_step(script))
    with pytest.raises(Killed):
        launch_search(bench, seed=SEED, proposer="llm", run_id="r", journals=journals,
                      on_record=kill_at_step_2)
    folder = journals / "r"
    # As if killed after step 2's reply was cached but before it was journaled; and a
    # torn line at the cache's end, as a kill mid-write leaves it.
    kept = (folder / "journal.jsonl").read_text().splitlines()[:-1]
    (folder / "journal.jsonl").write_text("".join(line + "\n" for line in kept))
    with (folder / CACHE_FILE).open("a", encoding="utf-8") as fh:
        fh.write('{"step": 3, "incumb')
    assert len(llm.requests) == asked + 2
    resumed = run_forge_json(capsys, "search", "--resume", "r", "--journals", journals,
                             "--json")
    assert len(llm.requests) == asked + 4  # steps 1 and 2 replayed from the cache
    assert {**resumed, "run_id": "base"} == base
    assert stable(records(folder)) == stable(records(journals / "base"))
    assert next((r["step"], r["category"]) for r in records(folder)
                if r["kind"] == "proposal_invalid") == (2, "not_json")
    cache = [json.loads(line) for line in (folder / CACHE_FILE).read_text().splitlines()]
    assert [c["step"] for c in cache] == [1, 2, 3, 4]
    # A finished run resumes without a single request.
    run_forge_json(capsys, "search", "--resume", "r", "--journals", journals, "--json")
    assert len(llm.requests) == asked + 4


def test_the_api_key_reaches_the_server_and_no_file(
        llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-forge-Zq8pX2mW9tR4vL7nB3"
    monkeypatch.setenv("FORGE_OPENAI_API_KEY", key)
    bench = write_search_bench(tmp_path / "bench", BOOST, search={"max_steps": 2})
    llm.answer_with(by_step({1: [reply(move("boost", True, f"my key is {key}, by the way"))],
                             2: [reply(f"I cannot decide ({key})")]}))
    search(capsys, bench, tmp_path / "j", "run")
    assert all(r.headers.get("authorization") == f"Bearer {key}" for r in llm.requests)
    files = [p for p in (tmp_path / "j").rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"run.json", "journal.jsonl", CACHE_FILE}
    for path in files:
        assert key.encode() not in path.read_bytes(), path
    rows = records(tmp_path / "j" / "run")
    assert any("***" in str(r.get("reason")) for r in rows if r["kind"] == "candidate")
    assert any("***" in str(r.get("reply")) for r in rows if r["kind"] == "proposal_invalid")


# -- one proposal at a time -------------------------------------------------------------


@pytest.fixture
def proposer(openai_server: ScriptedOpenAI) -> LLMProposer:
    return LLMProposer(mixed_registry(), openai_server.endpoint(model=MODEL, retries=0))


@pytest.mark.parametrize(("content", "expected"), [
    ('```json\n{"setting": "x", "value": 6, "reason": "r"}\n```', ("x", 5, 6)),
    ('{"setting": "flag", "value": "true", "reason": "r"}', ("flag", False, True)),
    ('{"setting": "x", "value": 4.0}', ("x", 5, 4)),
    ('{"setting": "width", "value": 8}', ("width", 4, 8)),
    ('{"setting": "temperature", "value": 0.6}', ("temperature", 0.5, 0.6)),
    ('{"mode": "c", "reason": "r"}', ("mode", "a", "c")),
    ('[{"setting": "mode", "value": "b"}]', ("mode", "a", "b")),
    ('{"setting": "x", "value": 7, "reason": "r"}', ("x", 5, 7)),
], ids=["fence", "bool-text", "int-float", "log-step", "float", "named-key", "one-item-list",
        "jump"])
def test_a_valid_reply_becomes_the_untried_move(
        proposer: LLMProposer, openai_server: ScriptedOpenAI, content: str,
        expected: tuple[str, Any, Any]) -> None:
    openai_server.script(reply(content))
    v = view(proposer.registry)
    proposals = proposer.propose(v, 4)
    assert [(p.move.target, p.move.before, p.move.after) for p in proposals] == [expected]
    assert proposals[0].move in v.untried and proposals[0].proposer == "llm"
    assert proposer.drain_rejections() == []


@pytest.mark.parametrize(("answer", "category", "words"), [
    (reply("Raise x."), "not_json", "not JSON"),
    (reply('{"setting": "x", "value": 6, "flag": true}'), "not_single_move", "2 settings"),
    (reply('{"setting": ["x", "flag"], "value": 6}'), "not_single_move", "2 settings"),
    (reply('{"x": 6, "flag": true}'), "not_single_move", "2 settings"),
    (reply("42"), "bad_shape", "got int"),
    (reply('{"setting": "x"}'), "bad_shape", "got keys setting"),
    (reply('{"setting": "x", "value": 5}'), "no_change", "changes nothing"),
    (reply('{"setting": "mode", "value": "z"}'), "illegal_value", "expected one of"),
    (tool_call("set", {"x": 6}), "no_content", "no text"),
    (status(400, "bad request"), "endpoint", "HTTP 400"),
], ids=["prose", "extra-setting", "list-setting", "two-named", "number", "no-value",
        "no-change", "enum", "tool-call", "http-400"])
def test_an_invalid_reply_is_a_rejection_and_no_proposal(
        proposer: LLMProposer, openai_server: ScriptedOpenAI, answer: Reply, category: str,
        words: str) -> None:
    openai_server.script(answer)
    assert proposer.propose(view(proposer.registry, step=3), 4) == []
    [rejection] = proposer.drain_rejections()
    assert rejection["category"] == category and words in rejection["reason"]
    assert rejection["proposer"] == "llm"
    assert proposer.drain_rejections() == []


def test_a_move_already_tried_is_refused(proposer: LLMProposer,
                                         openai_server: ScriptedOpenAI) -> None:
    openai_server.script(reply('{"setting": "x", "value": 6}'))
    registry = proposer.registry
    v = view(registry, untried=[m for m in view(registry).untried if m.target != "x"])
    assert proposer.propose(v, 1) == []
    assert proposer.drain_rejections()[0]["category"] == "already_tried"


def test_the_prompt_is_bounded_whatever_the_run(openai_server: ScriptedOpenAI) -> None:
    settings = {f"setting_{i:03d}": {"type": "enum", "default": "c0",
                                     "choices": [f"c{j}" for j in range(30)],
                                     "description": "a long description " * 40}
                for i in range(120)}
    hints = {f"signal_{i}": {"setting_000": "c1"} for i in range(100)}
    registry = make_registry(settings, hints)
    big = "y" * 10_000
    failing = [AttemptResult.model_validate({
        **attempt(f"signal_{i % 100}", task_id=f"dev-{i:03d}").model_dump(),
        "output": {"output": big, "signals": [f"signal_{i % 100}"] * 50},
        "error": big, "score": Score(value=0.0, passed=False, explanation=big)})
        for i in range(500)]
    history = [EvaluatedConfig({**registry.defaults().values, f"setting_{i % 120:03d}": "c2"},
                               f"fp{i}", 0.5, 40) for i in range(300)]
    openai_server.script(reply(move("setting_000", "c1")))
    llm = LLMProposer(registry, openai_server.endpoint(model=MODEL))
    [proposal] = llm.propose(view(registry, attempts=failing, history=history), 4)
    assert proposal.move.after == "c1"
    raw = openai_server.requests[0].raw
    assert len(raw) < 16_000, len(raw)
    prompt = openai_server.requests[0].body["messages"][1]["content"]  # type: ignore[index]
    assert prompt.count("\n- dev-") <= 12 and "more not shown" in prompt
    assert "500 failing attempts over 500 tasks" in prompt


def test_build_by_name_reads_the_endpoint_from_the_environment(
        llm: ScriptedOpenAI, tmp_path: Path) -> None:
    built = build_proposer("llm", registry=mixed_registry(), run_dir=tmp_path, seed=1,
                           options={"temperature": 0.3})
    assert isinstance(built, LLMProposer)
    assert built.journal_form()["endpoint"] == f"openai:{llm.url}:{MODEL}"
    assert built.journal_form()["temperature"] == 0.3
    assert built.cache_path == tmp_path / CACHE_FILE
