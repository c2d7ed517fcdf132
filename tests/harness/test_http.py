"""http: each attempt one stateless POST; failures are data; retries bounded and recorded."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_user_error, run_forge
from http_service import Behaviour, HarnessService, write_http_bench

from forge.bench.loader import load_bench
from forge.evaluation.evaluate import evaluate
from forge.harness import HARNESSES, HttpHarness
from forge.results.model import AttemptResult, EvalResult, load_result
from forge.secrets.masking import clear_secrets

TOKEN_ENV = "FORGE_TEST_HTTP_TOKEN"


@pytest.fixture(autouse=True)
def _forget_secrets() -> Iterator[None]:
    yield
    clear_secrets()


@pytest.fixture
def service() -> Iterator[HarnessService]:
    with HarnessService() as running:
        yield running


def tasks(n: int) -> dict[str, list[dict[str, Any]]]:
    return {"dev": [{"id": f"dev-{i}", "input": {"q": f"question {i}"},
                     "expected": f"answer {i}"} for i in range(n)],
            "val": [{"id": "val-0", "input": {"q": "v"}, "expected": "v"}]}


def run_eval(bench: Path, **options: Any) -> EvalResult:
    loaded = load_bench(bench)
    return evaluate(loaded, loaded.defaults, **options)


def by_task(result: EvalResult) -> dict[str, list[AttemptResult]]:
    return {t.task_id: t.attempts for t in result.tasks}


# -- the success path ----------------------------------------------------------------------


def test_forge_eval_posts_each_attempt_and_scores_the_answers(
        tmp_path: Path, service: HarnessService, capsys: pytest.CaptureFixture[str]) -> None:
    bench = write_http_bench(tmp_path / "b", service.url, rollouts={"k": 3})
    code, out, err = run_forge(capsys, "eval", bench, "--json", "--set", "effort=5",
                               "--save", tmp_path / "r.json")
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["n_attempts"], summary["n_scored"], summary["pass_rate"]) == (9, 9, 1.0)
    assert summary["metrics"]["http_retries"] == 0
    assert summary["metrics"]["request_bytes"] > 0
    assert summary["metrics"]["response_bytes"] > 0

    result = load_result(tmp_path / "r.json")
    seen = {(s.body["task"]["id"], s.body["ctx"]["attempt"]): s for s in service.seen}
    assert len(seen) == len(service.seen) == 9
    for attempt in result.attempts:
        body = seen[(attempt.task_id, attempt.attempt)].body
        assert set(body) == {"config", "task", "ctx"}
        assert body["config"] == {"effort": 5, "mode": "fast"}
        assert body["task"]["id"] == attempt.task_id
        assert body["task"]["expected"] == f"dev answer {attempt.task_id[-1]}"
        ctx = body["ctx"]
        assert (ctx["seed"], ctx["attempt"], ctx["split"]) == (attempt.seed, attempt.attempt,
                                                              "dev")
        assert ctx["timeout_s"] == 5.0 and 0 < ctx["deadline_s"] <= 5.0
        assert attempt.metrics["request_bytes"] == seen[(attempt.task_id, attempt.attempt)].size
        assert attempt.metrics["http_retries"] == 0
    # The service set a cookie on every answer; none came back.
    assert service.cookies_sent() == []


def test_evaluate_pairs_configs_seed_by_seed(tmp_path: Path, service: HarnessService) -> None:
    bench = write_http_bench(tmp_path / "b", {"url": service.url}, tasks=tasks(6),
                             rollouts={"k": 5})
    loaded = load_bench(bench)
    low = evaluate(loaded, loaded.defaults)
    high = evaluate(loaded, loaded.registry.with_values(loaded.defaults, {"effort": 5}))
    assert high.pass_rate == 1.0
    # effort 1: right exactly when seed % 5 == 0, the service's rule, attempt by attempt.
    for a in low.attempts:
        assert a.stop_reason == "completed"
        assert a.passed == (a.seed % 5 == 0)
    assert [a.seed for a in low.attempts] == [a.seed for a in high.attempts]


def test_service_metric_of_the_same_name_is_kept(tmp_path: Path,
                                                  service: HarnessService) -> None:
    service.default = Behaviour(metrics={"http_retries": 7.0})
    bench = write_http_bench(tmp_path / "b", service.url, rollouts={"k": 1})
    for a in run_eval(bench).attempts:
        assert a.metrics["http_retries"] == 7.0
        assert a.metrics["response_bytes"] > 0


# -- failures are data ---------------------------------------------------------------------


def test_each_failure_is_recorded_with_its_reason_and_the_evaluation_goes_on(
        tmp_path: Path, service: HarnessService) -> None:
    service.by_task = {
        "dev-1": Behaviour(mode="close"),
        "dev-2": Behaviour(mode="not_json"),
        "dev-3": Behaviour(mode="status", status=404),
        "dev-4": Behaviour(mode="sleep", sleep_s=3.0),
        "dev-5": Behaviour(mode="list"),
        "dev-6": Behaviour(mode="status", status=503),
    }
    # A client timeout of 1 s, not less: on a loaded 2-core CI machine a scripted 404
    # once took longer than 0.3 s to come back and read as a timeout.
    bench = write_http_bench(tmp_path / "b", {"url": service.url, "timeout_s": 1.0},
                             tasks=tasks(7), rollouts={"k": 2, "timeout_s": 5})
    attempts = by_task(run_eval(bench))
    assert all(a.stop_reason == "completed" for a in attempts["dev-0"])
    expected = {
        "dev-1": "connection dropped: Server disconnected",
        "dev-2": "HTTP 200 with a body that is not JSON: <html><body>upstream proxy error",
        "dev-3": "HTTP 404: internal error while handling the attempt",
        "dev-4": "no answer within 1 s",
        "dev-5": "HTTP 200 with a JSON list, not a RunOutput object",
        "dev-6": "HTTP 503: internal error while handling the attempt",
    }
    for task_id, reason in expected.items():
        for a in attempts[task_id]:
            assert a.stop_reason == "error", (task_id, a)
            assert a.error is not None and a.error.startswith("HttpAttemptError: POST ")
            assert "failed after 1 try: [1] " in a.error
            assert reason in a.error, a.error
            assert "\n" not in a.error
            assert a.output is None


def test_a_body_that_is_not_a_run_output_names_the_field(tmp_path: Path,
                                                           service: HarnessService) -> None:
    service.default = Behaviour(metrics={"bad": "high"})  # type: ignore[dict-item]
    bench = write_http_bench(tmp_path / "b", service.url, rollouts={"k": 1})
    for a in run_eval(bench).attempts:
        assert a.stop_reason == "error"
        assert "not a RunOutput: metrics.bad:" in (a.error or "")


def test_past_the_attempt_timeout_is_a_timeout(tmp_path: Path, service: HarnessService) -> None:
    service.default = Behaviour(mode="sleep", sleep_s=2.0)
    bench = write_http_bench(tmp_path / "b", service.url, tasks=tasks(2),
                             rollouts={"k": 1, "timeout_s": 0.3})
    loaded = load_bench(bench)
    t0 = time.monotonic()
    result = evaluate(loaded, loaded.defaults)
    assert time.monotonic() - t0 < 1.5  # not the service's 2 s
    assert [a.stop_reason for a in result.attempts] == ["timeout", "timeout"]


def test_service_down_every_attempt_is_an_error(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as sock:  # a port nobody listens on once this closes
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    bench = write_http_bench(tmp_path / "b", f"http://127.0.0.1:{port}/run")
    code, out, err = run_forge(capsys, "eval", bench, "--json", "--save", tmp_path / "r.json")
    # As for any harness whose attempts all fail: the evaluation completes, says so in
    # its summary (nothing scored) and exits 1 with one line; failures are data, not a
    # crash of forge.
    assert code == 1, err
    assert err.startswith("forge: eval failed: no attempt was scored: all 6 attempts")
    summary = json.loads(out)
    assert (summary["n_attempts"], summary["n_scored"], summary["pass_rate"]) == (6, 0, None)
    for a in load_result(tmp_path / "r.json").attempts:
        assert a.stop_reason == "error"
        assert "failed after 1 try: [1] cannot connect:" in (a.error or "")


# -- retries -------------------------------------------------------------------------------


def test_retries_then_success_are_recorded(tmp_path: Path, service: HarnessService) -> None:
    service.default = Behaviour(fail_first=2)
    bench = write_http_bench(tmp_path / "b", {"url": service.url, "retries": {
        "max": 2, "backoff_s": 0.01, "on": ["5xx"]}}, rollouts={"k": 2})
    result = run_eval(bench)
    assert all(a.stop_reason == "completed" for a in result.attempts)
    assert all(a.metrics["http_retries"] == 2 for a in result.attempts)
    assert set(service.tries.values()) == {3}


def test_retries_are_bounded_and_each_reason_is_in_the_error(tmp_path: Path,
                                                             service: HarnessService) -> None:
    service.default = Behaviour(fail_first=10, fail_status=502)
    service.by_task["dev-1"] = Behaviour(mode="close")  # disconnect: not in `on`
    service.by_task["dev-2"] = Behaviour(fail_first=10, fail_status=400)  # 4xx: never
    bench = write_http_bench(tmp_path / "b", {"url": service.url, "retries": {
        "max": 2, "backoff_s": 0.01, "on": ["connect", "5xx"]}}, rollouts={"k": 1})
    attempts = by_task(run_eval(bench))
    (a,) = attempts["dev-0"]
    assert a.stop_reason == "error"
    assert "failed after 3 tries: [1] HTTP 502: internal error" in (a.error or "")
    assert "; [2] HTTP 502: " in (a.error or "") and "; [3] HTTP 502: " in (a.error or "")
    assert (a.error or "").endswith("; retries exhausted (max 2)")
    (b,) = attempts["dev-1"]
    assert "failed after 1 try" in (b.error or "")
    assert (b.error or "").endswith("disconnect failures are not retried")
    (c,) = attempts["dev-2"]
    assert "failed after 1 try: [1] HTTP 400:" in (c.error or "")
    counts = {key[0]: n for key, n in service.tries.items()}
    assert counts == {"dev-0": 3, "dev-1": 1, "dev-2": 1}


def test_no_retry_starts_past_the_deadline(tmp_path: Path, service: HarnessService) -> None:
    service.default = Behaviour(fail_first=10)
    bench = write_http_bench(tmp_path / "b", {"url": service.url, "retries": {
        "max": 5, "backoff_s": 0.8, "on": ["5xx"]}}, tasks=tasks(1),
        rollouts={"k": 1, "timeout_s": 2.0})
    (a,) = run_eval(bench).attempts
    # Waits of 0.8 then 1.6 s: the second would end past the 2 s deadline, so the
    # harness gives up before it (an error), not the engine at it (a timeout). The
    # margins leave a loaded machine over a second for the two requests.
    assert a.stop_reason == "error" and a.duration_s < 2.0
    assert "failed after 2 tries" in (a.error or "")
    assert "no time left for a retry after 1.6 s" in (a.error or "")


def test_429_waits_for_retry_after_within_the_deadline(tmp_path: Path,
                                                       service: HarnessService) -> None:
    service.by_task["dev-0"] = Behaviour(fail_first=1, fail_status=429, retry_after="0.3")
    service.by_task["dev-1"] = Behaviour(fail_first=1, fail_status=429, retry_after="60")
    bench = write_http_bench(tmp_path / "b", {"url": service.url, "retries": {
        "max": 1, "backoff_s": 0.0, "on": ["429"]}}, tasks=tasks(2),
        rollouts={"k": 1, "timeout_s": 2})
    attempts = by_task(run_eval(bench))
    (a,) = attempts["dev-0"]
    assert a.stop_reason == "completed" and a.metrics["http_retries"] == 1
    assert a.duration_s >= 0.3
    (b,) = attempts["dev-1"]
    assert b.stop_reason == "error" and b.duration_s < 1.0
    assert "[1] HTTP 429:" in (b.error or "") and "no time left for a retry after 60 s" in (
        b.error or "")


def test_a_request_timeout_is_retried_when_declared(tmp_path: Path,
                                                    service: HarnessService) -> None:
    service.default = Behaviour(mode="sleep", sleep_s=0.6)
    bench = write_http_bench(tmp_path / "b", {"url": service.url, "timeout_s": 0.1, "retries": {
        "max": 1, "backoff_s": 0.0, "on": ["timeout"]}}, tasks=tasks(1),
        rollouts={"k": 1, "timeout_s": 3})
    (a,) = run_eval(bench).attempts
    assert a.stop_reason == "error"
    assert "failed after 2 tries: [1] no answer within 0.1 s; [2] no answer within 0.1 s" in (
        a.error or "")


# -- the bench file ------------------------------------------------------------------------


def test_missing_env_var_is_one_line_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    bench = write_http_bench(tmp_path / "b", {"url": "http://127.0.0.1:9/run",
                                              "headers_from_env": {"Authorization": TOKEN_ENV}})
    line = assert_user_error(*run_forge(capsys, "eval", bench),
                             str(bench), "harness.http.headers_from_env.Authorization",
                             TOKEN_ENV, "not set")
    assert line.startswith(f"forge: error: {bench}:2: ")


@pytest.mark.parametrize(("spec", "fragment"), [
    ("127.0.0.1:8123/run", "expected an http:// or https:// url"),
    ("http://user:pw@127.0.0.1/run", "credentials in the url"),
    ({"url": "http://h/run", "nope": 1}, "harness.http.nope"),
    ({"url": "http://h/run", "retries": {"on": ["4xx"]}}, "harness.http.retries.on"),
    ({"url": "http://h/run", "retries": {"max": -1}}, "harness.http.retries.max"),
    ({"url": "http://h/run", "headers_from_env": {"Bad Header": "X"}}, "not an HTTP header"),
    ({"url": "http://h/run", "timeout_s": 0}, "harness.http.timeout_s"),
])
def test_bad_http_specs_are_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   spec: Any, fragment: str) -> None:
    bench = write_http_bench(tmp_path / "b", spec)
    assert_user_error(*run_forge(capsys, "eval", bench), str(bench), fragment)


def test_identity_names_headers_and_variables_never_values(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "Bearer s3cr3t-value-that-must-not-show"
    monkeypatch.setenv(TOKEN_ENV, secret)
    spec = {"url": "http://127.0.0.1:9/run", "headers_from_env": {"Authorization": TOKEN_ENV}}
    bench = load_bench(write_http_bench(tmp_path / "b", spec))
    identity = bench.harness_identity
    assert identity.startswith("http:http://127.0.0.1:9/run ")
    assert "Authorization" in identity and TOKEN_ENV in identity
    assert "s3cr3t" not in identity
    monkeypatch.setenv(TOKEN_ENV, "Bearer another-value-entirely-here")
    assert load_bench(write_http_bench(tmp_path / "c", spec)).harness_identity == identity
    other = load_bench(write_http_bench(tmp_path / "d", {**spec, "url": "http://127.0.0.1:10/run"}))
    assert other.harness_identity != identity


def test_registered_with_url_shorthand() -> None:
    assert "http" in HARNESSES.names()
    from forge.core.spec import BuildContext

    ctx = BuildContext(base_dir=Path.cwd(), field="harness")
    spec = HARNESSES.parse({"http": "http://127.0.0.1:9/run"}, ctx)
    assert spec.args == {"url": "http://127.0.0.1:9/run"}
    assert isinstance(HARNESSES.build(spec, ctx), HttpHarness)
