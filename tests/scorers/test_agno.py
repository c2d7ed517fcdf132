"""The agno scorer: a real agno.scorer scorer (or an Environment's) judges forge's attempts."""

from __future__ import annotations

from pathlib import Path

import pytest
from agno_needed import need_agno

need_agno()

from agno_scripted import write_agno_bench  # noqa: E402

from forge.bench.loader import load_bench  # noqa: E402
from forge.core.task import Task  # noqa: E402
from forge.errors import BenchError  # noqa: E402
from forge.evaluation.evaluate import evaluate  # noqa: E402
from forge.harness import RunOutput, ToolCall, Usage  # noqa: E402
from forge.scorers.agno import AgnoScorer  # noqa: E402

from ._helpers import Build, WriteModule, judge  # noqa: E402

SCORERS = '''
from agno.environments import Environment, Task
from agno.scorer import CodeScorer, Score, ToolCallScorer

ADD = ToolCallScorer(["add"], arguments={"add": {"a": 2}})
SUB = ToolCallScorer(["sub"])


def graded(run, expected):
    seen = [(t.tool_name, t.tool_call_error) for t in run.tools or []]
    return Score(value=0.5, passed=run.content == expected, reason=f"saw {seen}",
                 detail={"content": run.content, "tokens": run.metrics.input_tokens})


GRADED = CodeScorer(graded)


def transcript(run, expected):
    roles = [m.role for m in run.messages or []]
    return Score(value=1.0, passed=True, detail={"roles": roles, "model": run.model})


TRANSCRIPT = CodeScorer(transcript)


class Raises:
    async def ascore(self, run, expected=None):
        raise LookupError("no verdict today")


class Number:
    async def ascore(self, run, expected=None):
        return 0.7


RAISES, NUMBER = Raises(), Number()
ENV = Environment(name="e", tasks=(Task(input="x"),), scorer=GRADED, agent=lambda: None)
NOTHING = "a string"
'''


@pytest.fixture
def scorers(write_module: WriteModule) -> None:
    write_module("agno_scorers", SCORERS)


def output(*calls: ToolCall, text: str = "5") -> RunOutput:
    return RunOutput(output=text, tool_calls=list(calls),
                     usage=Usage(input_tokens=12, output_tokens=3), cost=0.5)


TASK = Task(id="t", input="What is 2 + 3?", expected="5")
AGENT = '''
from agno.agent import Agent
from agno_scripted import ScriptedModel, answer, call


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def make_agent(config):
    return Agent(model=ScriptedModel(script=[call("add", a=2, b=3), answer("5")]), tools=[add])
'''


def test_an_agno_tool_call_scorer_judges_a_forge_record(scorers: None, build: Build) -> None:
    """Under a harness that is not Agno, the run is built from forge's record: each
    tool call an execution, a failed one with tool_call_error."""
    scorer = build({"agno": "agno_scorers:ADD"})
    ok = judge(scorer, TASK, output(ToolCall(name="add", args={"a": 2, "b": 3}, result=5)))
    assert (ok.value, ok.passed, ok.explanation) == (1.0, True, None)
    failed = judge(scorer, TASK, output(
        ToolCall(name="add", args={"a": 2}, ok=False, error="boom")))
    assert (failed.value, failed.passed) == (0.0, False)
    assert failed.explanation is not None
    assert "expected tool 'add' has no clean execution" in failed.explanation


def test_the_score_s_value_passed_reason_and_detail_are_kept(scorers: None,
                                                              build: Build) -> None:
    score = judge(build({"agno": "agno_scorers:GRADED"}), TASK, output(
        ToolCall(name="add", args={}, ok=False, error="no")))
    assert (score.value, score.passed) == (0.5, True)
    assert score.explanation == "saw [('add', True)]"
    assert score.details == {"content": "5", "tokens": 12}


def test_an_environment_lends_its_scorer(scorers: None, build: Build) -> None:
    scorer = build({"agno": "agno_scorers:ENV"})
    assert isinstance(scorer, AgnoScorer) and scorer.env is not None
    assert scorer.scorer is scorer.env.scorer
    assert judge(scorer, TASK, output(text="4")).passed is False


@pytest.mark.parametrize(("target", "message"), [
    ("RAISES", "no verdict today"),
    ("NUMBER", "the agno scorer returned float, not a Score"),
])
def test_a_scorer_that_raises_or_gives_no_score_leaves_the_attempt_unscored(
        scorers: None, tmp_path: Path, target: str, message: str) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "agno_scorers.py").write_text(SCORERS, encoding="utf-8")
    bench = write_agno_bench(tmp_path / "b", AGENT, scorer=f'{{agno: "agno_scorers:{target}"}}')
    loaded = load_bench(bench)
    result = evaluate(loaded, loaded.defaults, k=1)
    assert result.n_scored == 0
    assert all(a.stop_reason == "completed" and a.error and message in a.error
               for a in result.attempts)


def test_under_the_agno_harness_the_scorer_reads_the_agent_s_own_run(
        scorers: None, tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "agno_scorers.py").write_text(SCORERS, encoding="utf-8")
    bench = write_agno_bench(tmp_path / "b", AGENT, scorer='{agno: "agno_scorers:TRANSCRIPT"}')
    loaded = load_bench(bench)
    attempt = evaluate(loaded, loaded.defaults, k=1).attempts[0]
    assert attempt.score is not None
    assert attempt.score.details == {"roles": ["user", "assistant", "tool", "assistant"],
                                     "model": "scripted-test"}


def test_the_digest_follows_the_agno_scorer_s_own(scorers: None, build: Build) -> None:
    add, sub = build({"agno": "agno_scorers:ADD"}), build({"agno": "agno_scorers:SUB"})
    assert add.digest != sub.digest
    assert add.digest == build({"agno": {"target": "agno_scorers:ADD"}}).digest


def test_something_that_does_not_score_is_refused(scorers: None, build: Build) -> None:
    with pytest.raises(BenchError) as err:
        build({"agno": "agno_scorers:NOTHING"})
    assert err.value.field == "scorer.agno.target"
    assert "expected an agno scorer (an object with ascore(run, expected))" in str(err.value)
