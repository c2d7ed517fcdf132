"""ag2: an ``ag2.eval`` scorer judges forge's attempts, its Feedback read as forge's Score."""

from __future__ import annotations

from pathlib import Path

import pytest
from ag2_support import require_ag2, tasks, write_ag2_bench

from forge.bench.loader import load_bench
from forge.core.task import Task
from forge.errors import BenchError
from forge.evaluation.evaluate import evaluate
from forge.harness import RunOutput, ToolCall, Usage
from forge.scorers import Ag2Scorer

from ._helpers import Build, WriteModule, judge, out

SCORERS = """
from ag2.eval import Feedback, scorer
from ag2.eval.scorers import (final_answer_matches, no_tool_errors, threshold, token_budget,
                              tool_called)
from ag2.events import ModelResponse, ToolCallEvent

ANSWER = final_answer_matches("answer")
LOOKUP = tool_called("lookup")
LOOKUP_TWICE = tool_called("lookup", exactly=2)
CLEAN = no_tool_errors()
BUDGET = token_budget(40)


@scorer
def closeness(outputs, reference_outputs):
    return 0.8 if outputs.get("body") == reference_outputs["answer"] else 0.1


@scorer
def raw_count(trace):
    return len(trace.events_of(ToolCallEvent)) * 3


@scorer
def label(outputs):
    return "polite" if "please" in outputs.get("body", "") else "curt"


@scorer
def raises(outputs):
    raise RuntimeError("the judge fell over")


@scorer
def two_keys(outputs):
    return [Feedback(key="a", score=True, comment="fine"), Feedback(key="b", score=False)]


@scorer
def silent(outputs):
    return None


@scorer
def sees(inputs, outputs, reference_outputs, trace, task):
    turns = trace.events_of(ModelResponse)
    return Feedback(key="sees", score=True, comment=(
        f"{inputs['input']}|{task.task_id}|{task.tags}|{reference_outputs}|"
        f"{len(turns)}|{trace.tokens.input}|{outputs['content']}"))


def plain(outputs):
    return outputs.get("body") == "sunny"


def bad_params(outputs, config):
    return True
"""


@pytest.fixture(autouse=True)
def _ag2(write_module: WriteModule) -> None:
    require_ag2()
    write_module("ag2_scorers", SCORERS)


def weather_task(answer: object = "sunny", tags: list[str] | None = None) -> Task:
    return Task(id="t1", input="weather in Lima?", expected=answer, tags=tags or [])


LOOKED_UP = RunOutput(output="sunny", usage=Usage(input_tokens=30, output_tokens=4),
                      tool_calls=[ToolCall(name="lookup", args={"city": "Lima"},
                                           result={"sky": "sunny"})])


def test_final_answer_matches_reads_the_reference_and_the_answer(build: Build) -> None:
    scorer = build({"ag2": "ag2_scorers:ANSWER"})
    assert isinstance(scorer, Ag2Scorer)
    passed = judge(scorer, weather_task(), out("Sunny"))
    assert (passed.value, passed.passed) == (1.0, True)
    assert passed.details == {"ag2_feedback": [
        {"key": "final_answer_matches", "score": True, "value": None, "comment": None,
         "detail": None}]}
    assert not judge(scorer, weather_task(), out("rain")).passed
    # A reference that is a mapping is AG2's reference_outputs as it is.
    assert judge(scorer, weather_task({"answer": "rain"}), out("rain")).passed


def test_trace_scorers_see_the_attempt_s_tool_calls_and_tokens(build: Build) -> None:
    assert judge(build({"ag2": "ag2_scorers:LOOKUP"}), weather_task(), LOOKED_UP).passed
    assert not judge(build({"ag2": "ag2_scorers:LOOKUP_TWICE"}), weather_task(),
                     LOOKED_UP).passed
    assert not judge(build({"ag2": "ag2_scorers:LOOKUP"}), weather_task(), out("sunny")).passed
    failed = RunOutput(output="?", tool_calls=[ToolCall(name="lookup", ok=False,
                                                        error="KeyError: 'x'")])
    assert judge(build({"ag2": "ag2_scorers:CLEAN"}), weather_task(), LOOKED_UP).passed
    assert not judge(build({"ag2": "ag2_scorers:CLEAN"}), weather_task(), failed).passed
    assert judge(build({"ag2": "ag2_scorers:BUDGET"}), weather_task(), LOOKED_UP).passed
    heavy = LOOKED_UP.model_copy(update={"usage": Usage(input_tokens=40, output_tokens=1)})
    assert not judge(build({"ag2": "ag2_scorers:BUDGET"}), weather_task(), heavy).passed


def test_the_scorer_gets_what_ag2_s_runner_gives_it(build: Build) -> None:
    verdict = judge(build({"ag2": "ag2_scorers:sees"}),
                    weather_task({"answer": "sunny"}, tags=["city"]),
                    RunOutput(output={"sky": "sunny"}, usage=Usage(input_tokens=5)))
    assert verdict.explanation == ("weather in Lima?|t1|('city',)|{'answer': 'sunny'}|1|5|"
                                   "{'sky': 'sunny'}")


def test_a_numeric_score_passes_at_the_threshold(build: Build) -> None:
    close = judge(build({"ag2": "ag2_scorers:closeness"}), weather_task(), out("sunny"))
    assert (close.value, close.passed) == (0.8, True)
    strict = build({"ag2": {"target": "ag2_scorers:closeness", "threshold": 0.9}})
    assert not judge(strict, weather_task(), out("sunny")).passed


def test_a_label_passes_when_it_is_one_of_pass_values(build: Build) -> None:
    polite = build({"ag2": {"target": "ag2_scorers:label", "pass_values": ["polite"]}})
    assert judge(polite, weather_task(), out("sunny, please")).passed
    assert not judge(polite, weather_task(), out("sunny")).passed


@pytest.mark.parametrize(("target", "reason"), [
    ("ag2_scorers:raises", "has no score: scorer raised: RuntimeError: the judge fell over"),
    ("ag2_scorers:raw_count", "scored 3, outside [0, 1]"),
    ("ag2_scorers:label", "set pass_values"),
    ("ag2_scorers:two_keys", "several keys ('a', 'b'); name the one"),
    ("ag2_scorers:silent", "gave no feedback"),
])
def test_a_verdict_forge_cannot_read_leaves_the_attempt_unscored_with_why(
        build: Build, target: str, reason: str) -> None:
    with pytest.raises(ValueError) as err:
        judge(build({"ag2": target}), weather_task(), LOOKED_UP)
    assert reason in str(err.value)


def test_key_picks_one_feedback_and_all_are_kept(build: Build) -> None:
    picked = judge(build({"ag2": {"target": "ag2_scorers:two_keys", "key": "b"}}),
                   weather_task(), out("x"))
    assert not picked.passed
    assert [r["key"] for r in picked.details["ag2_feedback"]] == ["a", "b"]
    with pytest.raises(ValueError, match="no feedback under key 'c'"):
        judge(build({"ag2": {"target": "ag2_scorers:two_keys", "key": "c"}}), weather_task(),
              out("x"))


def test_a_plain_function_is_wrapped_as_scorer_wraps_it(build: Build) -> None:
    assert judge(build({"ag2": "ag2_scorers:plain"}), weather_task(), out("sunny")).passed
    with pytest.raises(BenchError) as err:
        build({"ag2": "ag2_scorers:bad_params"})
    assert err.value.field == "scorer.ag2" and "'config' is not injectable" in str(err.value)


def test_the_digest_follows_the_scorer_s_source(build: Build, write_module: WriteModule
                                                ) -> None:
    before = build({"ag2": "ag2_scorers:ANSWER"}).digest
    assert build({"ag2": {"target": "ag2_scorers:ANSWER", "threshold": 0.9}}).digest != before
    write_module("ag2_scorers", SCORERS + "\n# edited\n")
    assert build({"ag2": "ag2_scorers:ANSWER"}).digest != before


def test_ag2_scorers_judge_an_ag2_agent_s_attempts_end_to_end(tmp_path: Path) -> None:
    bench_dir = tmp_path / "bench"
    bench_dir.mkdir()
    (bench_dir / "ag2_scorers.py").write_text(SCORERS, encoding="utf-8")
    bench = write_ag2_bench(
        bench_dir, {"dev": tasks("weather in Lima?", "weather in both?", "just guess",
                                 "model fails",
                                 expected={"weather in Lima?": "sunny", "just guess": "sunny",
                                           "weather in both?": "sunny, rain"})},
        scorer='{all: [{ag2: "ag2_scorers:ANSWER"}, {ag2: "ag2_scorers:LOOKUP"}]}')
    loaded = load_bench(bench)
    result = evaluate(loaded, loaded.defaults, split="dev")
    verdicts = {t.task_id: t.attempts[0] for t in result.tasks}
    assert verdicts["dev-0"].passed and verdicts["dev-1"].passed
    assert verdicts["dev-2"].scored and not verdicts["dev-2"].passed  # no lookup
    assert verdicts["dev-3"].stop_reason == "error"  # never judged, never a zero
    assert result.n_scored == 3

    bench.write_text(bench.read_text().replace(
        'scorer: {all: [{ag2: "ag2_scorers:ANSWER"}, {ag2: "ag2_scorers:LOOKUP"}]}',
        'scorer: {ag2: "ag2_scorers:raises"}'), encoding="utf-8")
    loaded = load_bench(bench)
    broken = evaluate(loaded, loaded.defaults, split="dev")
    assert broken.n_scored == 0
    assert broken.summary()["unscored_by_reason"] == {
        "scorer_failed: scorer failed: ValueError: feedback 'raises' has no score: "
        "scorer raised: "
        "RuntimeError: the judge fell over": 3, "error: RuntimeError: model endpoint down": 1}
