"""``forge eval``: the --json summary, --set / --config / --split / --task, --save, and
every bad input as one line with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ARITH, MakeBench, assert_user_error
from conftest import run_forge as forge
from conftest import run_forge_json as forge_json

from forge.results.model import SUMMARY_KEYS, load_result

BENCH = str(ARITH)


def test_eval_json_prints_only_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = forge(capsys, "eval", BENCH, "--json", "-k", "2")
    assert code == 0, err
    summary = json.loads(out)  # the whole of stdout is one JSON document
    assert tuple(summary) == (*SUMMARY_KEYS, "power")  # the frozen keys, then power
    assert (summary["bench"], summary["split"], summary["k"]) == ("arith", "dev", 2)
    assert summary["n_tasks"] == 12
    assert summary["n_attempts"] == 24
    assert summary["n_unscored"] == 0 and summary["unscored_by_reason"] == {}
    assert err == ""


def test_eval_is_reproducible_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    a = forge_json(capsys, "eval", BENCH, "--json", "-k", "2")
    b = forge_json(capsys, "eval", BENCH, "--json", "-k", "2")
    assert a["tasks"] == b["tasks"]
    c = forge_json(capsys, "eval", BENCH, "--json", "-k", "2", "--seed", "1")
    assert c["env_fingerprint"] == a["env_fingerprint"]


def test_set_changes_the_config_fingerprint_only(capsys: pytest.CaptureFixture[str]) -> None:
    base = forge_json(capsys, "eval", BENCH, "--json", "-k", "1")
    changed = forge_json(capsys, "eval", BENCH, "--json", "-k", "1", "--set", "effort=3")
    assert changed["config_fingerprint"] != base["config_fingerprint"]
    assert changed["env_fingerprint"] == base["env_fingerprint"]
    explicit = forge_json(capsys, "eval", BENCH, "--json", "-k", "1", "--set", "effort=1")
    assert explicit["config_fingerprint"] == base["config_fingerprint"]


def test_config_file_and_set_combine(capsys: pytest.CaptureFixture[str],
                                     tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("effort: 3\ntemperature: 0.7\nwidth: 2\nmode: fast\nverify: false\n",
                      encoding="utf-8")
    from_file = forge_json(capsys, "eval", BENCH, "--json", "-k", "1", "--config", config)
    from_set = forge_json(capsys, "eval", BENCH, "--json", "-k", "1", "--set", "effort=3")
    assert from_file["config_fingerprint"] == from_set["config_fingerprint"]


def test_save_writes_a_loadable_result(capsys: pytest.CaptureFixture[str],
                                       tmp_path: Path) -> None:
    path = tmp_path / "out" / "result.json"
    summary = forge_json(capsys, "eval", BENCH, "--json", "-k", "2", "--save", path)
    summary.pop("power")  # told of the bench, not kept with the result
    assert load_result(path).summary() == summary


def test_split_option(capsys: pytest.CaptureFixture[str]) -> None:
    summary = forge_json(capsys, "eval", BENCH, "--json", "-k", "1", "--split", "val")
    assert summary["split"] == "val"
    assert [t["id"] for t in summary["tasks"]] == [f"val-0{i}" for i in range(8)]


def test_task_option_selects_tasks(capsys: pytest.CaptureFixture[str]) -> None:
    summary = forge_json(capsys, "eval", BENCH, "--json", "-k", "1", "--task", "dev-03",
                         "--task", "dev-01")
    assert [t["id"] for t in summary["tasks"]] == ["dev-03", "dev-01"]


def test_eval_table_output(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    code, out, err = forge(capsys, "eval", BENCH, "-k", "1", "--per-task", "--save", path)
    assert code == 0, err
    assert "arith" in out and "pass rate" in out
    assert "dev-11" in out  # the per-task table
    assert f"saved {path}" in out.replace("\n", "")
    assert path.is_file()


@pytest.mark.parametrize(("args", "fragments"), [
    (["--set", "nope=1"], ["--set", "nope", "unknown setting"]),
    (["--set", "effort=9"], ["effort", "[1, 5]"]),
    (["--set", "temperature=-0.5"], ["temperature", "[0.0, 1.0]"]),
    (["--set", "mode=slow"], ["mode", "slow"]),
    (["--set", "effort"], ["expected key=value"]),
    (["--split", "nope"], ["no split 'nope'", "dev, val, test"]),
    (["--task", "dev-99"], ["dev-99"]),
])
def test_bad_eval_options_are_one_line_and_exit_2(capsys: pytest.CaptureFixture[str],
                                                  args: list[str],
                                                  fragments: list[str]) -> None:
    assert_user_error(*forge(capsys, "eval", BENCH, "--json", *args), *fragments)


def test_a_missing_bench_path(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "no-such-bench"
    assert_user_error(*forge(capsys, "eval", missing), str(missing))


def test_a_bench_whose_harness_cannot_be_imported(capsys: pytest.CaptureFixture[str],
                                                  make_bench: MakeBench) -> None:
    path = make_bench("import forge_no_such_module_xyz\n")
    assert_user_error(*forge(capsys, "eval", path), str(path), "harness",
                      "ModuleNotFoundError")


def test_a_malformed_config_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("effort: 1\ntemperature: [0.7\n", encoding="utf-8")
    line = assert_user_error(*forge(capsys, "eval", BENCH, "--config", config), str(config),
                             "malformed YAML")
    assert line.startswith(f"forge: error: {config}:")


def test_a_config_file_with_a_missing_key(capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("effort: 1\ntemperature: 0.7\nwidth: 2\nmode: fast\n", encoding="utf-8")
    assert_user_error(*forge(capsys, "eval", BENCH, "--config", config), str(config),
                      "verify", "missing")


def test_a_config_file_with_an_unknown_key_names_its_line(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("effort: 1\ntemperature: 0.7\nwidth: 2\nmode: fast\nverify: false\n"
                      "colour: red\n", encoding="utf-8")
    assert_user_error(*forge(capsys, "eval", BENCH, "--config", config),
                      f"{config}:6: colour")


def test_a_missing_config_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert_user_error(*forge(capsys, "eval", BENCH, "--config", tmp_path / "nope.yaml"),
                      "nope.yaml", "not found")


def test_bad_input_leaves_an_existing_save_file_untouched(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    path.write_text("precious", encoding="utf-8")
    assert_user_error(*forge(capsys, "eval", BENCH, "--save", path, "--set", "effort=0"))
    assert path.read_text(encoding="utf-8") == "precious"


def test_save_to_a_folder_is_refused_before_evaluating(capsys: pytest.CaptureFixture[str],
                                                       tmp_path: Path) -> None:
    assert_user_error(*forge(capsys, "eval", BENCH, "--json", "--save", tmp_path),
                      "--save", str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_save_where_nothing_can_be_written(capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    target = blocker / "sub" / "r.json"  # its "folder" is a file
    assert_user_error(*forge(capsys, "eval", BENCH, "-k", "1", "--json", "--save", target),
                      "--save", str(target))


# -- attempts that fail ------------------------------------------------------------------

#: Of each task's three attempts, the first raises naming its task, the second raises
#: with escape sequences, a NUL and a bidi override in its message, the third passes
#: with a metric whose name holds an escape sequence.
FAILING = '''
import time


def run(config, task, ctx):
    if ctx.attempt % 3 == 0:
        raise KeyError(f"no cached answer for {task.id} (shard 0x{ctx.seed % 4096:x})")
    if ctx.attempt == 1:
        raise ValueError("model said: \\x1b[31mI refuse\\x1b[0m\\x00 \\u202edetalpmet")
    return {"output": task.expected, "metrics": {"\\x1b[2Jhits": 1.0}}
'''


def test_eval_shows_each_failure_reason_with_its_count_and_an_example(
        capsys: pytest.CaptureFixture[str], make_bench: MakeBench) -> None:
    bench = make_bench(FAILING, rollouts={"k": 3})
    code, out, err = forge(capsys, "eval", bench, "--per-task")
    assert code == 0, err
    lines = out.splitlines()
    head = lines.index(next(line for line in lines if line.startswith("failures: ")))
    assert lines[head] == ("failures: 6 of 9 attempts unscored (66.7%), by reason (most "
                           "frequent first):")
    assert lines[head + 1].strip() == ("3 × error: KeyError: 'no cached answer for <task> "
                                       "(shard <hex>)'")
    assert lines[head + 2].strip().startswith("e.g. task dev-0 attempt 0: KeyError: "
                                              "'no cached answer for dev-0 (shard 0x")
    assert lines[head + 3].strip() == (
        "3 × error: ValueError: model said: \\x1b[#mI refuse\\x1b[#m\\x00 \\u202edetalpmet")
    assert lines[head + 4].strip() == ("e.g. task dev-0 attempt 1: ValueError: model said: "
                                       "\\x1b[31mI refuse\\x1b[0m\\x00 \\u202edetalpmet")
    assert lines[head + 5].startswith("warning: 66.7% of attempts failed, more than the 5%")
    # Nothing a harness wrote acts on the terminal: the summary's metric names, the
    # examples, the per-task table's first errors.
    for raw in ("\x1b", "\x00", "\u202e"):
        assert raw not in out
    assert "\\x1b[2Jhits" in out


def test_eval_json_keeps_its_summary_and_warns_on_stderr(
        capsys: pytest.CaptureFixture[str], make_bench: MakeBench) -> None:
    bench = make_bench(FAILING, rollouts={"k": 3})
    code, out, err = forge(capsys, "eval", bench, "--json")
    assert code == 0
    summary = json.loads(out)  # stdout is the summary, its frozen keys and power
    assert tuple(summary) == (*SUMMARY_KEYS, "power")
    assert (summary["n_attempts"], summary["n_unscored"]) == (9, 6)
    # Why, counted by reason (the same normalised reasons the table shows), adding up.
    assert summary["unscored_by_reason"] == {
        "error: KeyError: 'no cached answer for <task> (shard <hex>)'": 3,
        "error: ValueError: model said: \x1b[#mI refuse\x1b[#m\x00 \u202edetalpmet": 3}
    assert sum(summary["unscored_by_reason"].values()) == summary["n_unscored"]
    assert err.splitlines() == [
        "forge: warning: 66.7% of attempts failed, more than the 5% forge accepts quietly: "
        "the scores rest on the attempts that finished; fix the reasons above before "
        "trusting them"]


def test_eval_without_failures_says_nothing_of_them(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = forge(capsys, "eval", BENCH, "-k", "1")
    assert code == 0 and "failures:" not in out and "attempts failed" not in out + err


#: A harness whose every attempt raises: nothing can be scored.
DEAD = """
def run(config, task, ctx):
    raise ConnectionError(f"model endpoint refused the connection ({task.id})")
"""


def test_eval_with_nothing_scored_exits_1_and_says_so_in_one_line(
        capsys: pytest.CaptureFixture[str], make_bench: MakeBench, tmp_path: Path) -> None:
    bench = make_bench(DEAD, rollouts={"k": 3})
    saved = tmp_path / "r.json"
    code, out, err = forge(capsys, "eval", bench, "--save", saved)
    assert code == 1
    assert err.splitlines() == [
        "forge: eval failed: no attempt was scored: all 9 attempts on dev ended unscored "
        "(9 × error: ConnectionError: model endpoint refused the connection (<task>))"]
    # The usual output is all there, the reasons included, without the warning that
    # "the scores rest on the attempts that finished": none did.
    assert "attempts      │ 9: 0 scored, 9 unscored" in out
    assert "failures: 9 of 9 attempts unscored (100.0%)" in out
    assert "warning" not in out and f"saved {saved}" in out
    assert load_result(saved).n_scored == 0  # kept, for forge gate or a look at the errors


def test_eval_json_with_nothing_scored_keeps_its_summary_and_exits_1(
        capsys: pytest.CaptureFixture[str], make_bench: MakeBench) -> None:
    code, out, err = forge(capsys, "eval", make_bench(DEAD), "--json")
    assert code == 1
    summary = json.loads(out)
    assert tuple(summary) == (*SUMMARY_KEYS, "power")
    assert summary["n_unscored"] == summary["n_attempts"]
    [line] = err.splitlines()
    assert line.startswith("forge: eval failed: no attempt was scored: all 6 attempts")


def test_one_scored_attempt_is_enough_for_exit_0(capsys: pytest.CaptureFixture[str],
                                                 make_bench: MakeBench) -> None:
    bench = make_bench("""
def run(config, task, ctx):
    if task.id != "dev-0" or ctx.attempt:
        raise ConnectionError("refused")
    return {"output": task.expected}
""")
    code, _, err = forge(capsys, "eval", bench, "--json")
    assert code == 0 and "eval failed" not in err


# -- power: what a comparison on these tasks would detect ---------------------------------

#: Each task passes on a share of its attempts set by its input (seeded, so repeatable).
RATE_HARNESS = """
import random

def run(config, task, ctx):
    right = random.Random(ctx.seed).random() < task.input["p"]
    return {"output": task.expected if right else "wrong"}
"""


def _rate_tasks(n: int) -> list[dict[str, object]]:
    return [{"id": f"dev-{i}", "input": {"p": 0.3 + 0.4 * (i % 3) / 2}, "expected": "yes"}
            for i in range(n)]


def test_eval_tells_the_smallest_gain_these_tasks_detect_and_warns_when_large(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from forge.stats.power import estimate_power

    save = tmp_path / "r.json"
    code, out, err = forge(capsys, "eval", BENCH, "-k", "2", "--save", save)
    assert code == 0, err
    result = load_result(save)
    power = estimate_power([[a.score.value for a in t.scored_attempts if a.score]
                            for t in result.tasks], n_tasks=12, k=2, alpha=0.05)
    assert power.mde is not None and power.large and power.tasks_needed is not None
    lines = [" ".join(line.split()) for line in out.splitlines()]
    assert (f"power: detects a gain of {power.mde:.3f} or more on the mean score 90% of the "
            "time (one-sided α 0.05, 12 dev tasks at K 2; spread from these tasks)") in lines
    warning = next(line for line in lines if line.startswith("warning: this bench"))
    assert f"miss gains under {power.mde:.3f}" in warning
    assert f"about {power.tasks_needed:,} dev tasks would bring that to 0.10" in warning
    assert "a larger K" in warning

    summary = forge_json(capsys, "eval", BENCH, "--json", "-k", "2")
    assert summary["power"] == power.model_dump(mode="json")


def test_eval_on_enough_tasks_does_not_warn(make_bench: MakeBench,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    bench = make_bench(RATE_HARNESS, tasks={"dev": _rate_tasks(600)}, rollouts={"k": 4})
    summary = forge_json(capsys, "eval", bench, "--json")
    power = summary["power"]
    assert (power["n_tasks"], power["k"], power["power"]) == (600, 4, 0.9)
    assert power["mde"] < 0.10 and power["tasks_needed"] < 600
    code, out, _ = forge(capsys, "eval", bench)
    assert code == 0 and "power: detects a gain of" in out and "warning" not in out
