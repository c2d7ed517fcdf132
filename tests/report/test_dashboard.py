"""The study optuna-dashboard opens tells the truth: its best trial is the config the
search promoted last, the refused configs are not "best", and a resume adds no trial
twice. Read through Optuna's own API, as the dashboard reads it.

The bench: ``good`` is a real gain; ``costly`` a larger one that costs 10% against a 5%
tolerance, screened out by ``aux:cost``; ``overfit`` the largest on dev and a loss on
val, refused by its confirmation; ``knob`` does nothing. On a few dev tasks, a refused
config scores highest.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import optuna
import pytest
from conftest import search_tasks, write_search_bench
from optuna.storages.journal import JournalFileBackend, JournalStorage
from optuna.trial import FrozenTrial, TrialState

from forge.search.launch import launch_search, resume_search

REGISTRY = """\
name: d
settings:
  good:   {type: bool, default: false}
  costly: {type: bool, default: false}
  overfit: {type: bool, default: false}
  knob:   {type: int, min: 1, max: 3, step: 1, default: 2}
"""

HARNESS = """
def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.4 + 0.25 * config["good"] + 0.35 * config["costly"]
    if config["overfit"]:
        p = 0.95 if ctx.split == "dev" else 0.1
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong",
            "cost": 1.1 if config["costly"] else 1.0}
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished search's folder (the default proposer, as ``forge search`` runs)."""
    root = tmp_path_factory.mktemp("dashboard")
    bench = write_search_bench(root / "bench", HARNESS, registry=REGISTRY,
                               tasks=search_tasks(24, 20, 20),
                               metrics={"cost": {"direction": "lower", "max_increase": 0.05,
                                                 "relative": True}})
    launch_search(bench, run_id="r1", journals=root / "journals", seed=3)
    return root / "journals" / "r1"


def records(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in
            (folder / "journal.jsonl").read_text(encoding="utf-8").splitlines()]


def load(folder: Path) -> optuna.Study:
    storage = JournalStorage(JournalFileBackend(str(folder / "optuna.journal")))
    return optuna.load_study(study_name="forge", storage=storage)


def evaluated(rows: list[dict[str, Any]]) -> list[int]:
    """The journal lines of the start and of every candidate that ran something."""
    return [i for i, r in enumerate(rows, start=1) if r["kind"] == "start" or (
        r["kind"] == "candidate" and r.get("candidate") and r.get("dev"))]


def shape(trial: FrozenTrial) -> tuple[Any, ...]:
    return (trial.number, trial.state, trial.value, trial.params,
            json.dumps(trial.user_attrs, sort_keys=True))


def test_the_best_trial_is_the_final_config(run: Path) -> None:
    rows = records(run)
    end = rows[-1]
    assert end["kind"] == "end" and end["final_config"] != end["start_config"]
    study = load(run)
    best = study.best_trial
    assert best.params == end["final_config"]
    assert best.user_attrs["fingerprint"] == end["final_fingerprint"]
    assert study.direction == optuna.study.StudyDirection.MAXIMIZE
    assert study.metric_names == ["gain over start"]
    assert study.user_attrs["final_trial"] == best.number
    assert study.user_attrs["final_config"] == end["final_config"]


def test_the_start_and_each_promotion_are_complete_with_the_confirmed_gain(run: Path) -> None:
    rows = records(run)
    trials = load(run).get_trials()
    start = trials[0]
    assert start.state == TrialState.COMPLETE and start.value == 0.0
    assert start.params == rows[0]["config"]
    assert start.user_attrs["verdict"] == "start"
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    promoted = [r for r in rows if r["kind"] == "candidate" and r["verdict"] == "promoted"]
    assert [t.user_attrs["journal_line"] for t in complete[1:]] == [
        rows.index(r) + 1 for r in promoted]
    assert len(promoted) == len(rows[-1]["promotions"]) >= 1
    # Each value is the one before plus the gain its confirmation measured (> 0).
    for before, after, record in zip(complete, complete[1:], promoted, strict=False):
        gain = record["dev"]["confirm"]["effect"]
        assert gain > 0
        assert after.value == pytest.approx(before.value + gain)
        assert after.user_attrs["incumbent_trial"] == before.number


def test_refused_configs_are_failed_or_pruned_with_the_reason(run: Path) -> None:
    rows = records(run)
    trials = load(run).get_trials()
    # One trial per evaluated config, in journal order, numbered as the dashboard lists.
    assert [t.user_attrs["journal_line"] for t in trials] == evaluated(rows)
    assert [t.number for t in trials] == list(range(len(trials)))
    for trial in trials[1:]:
        record = rows[trial.user_attrs["journal_line"] - 1]
        attrs = trial.user_attrs
        assert attrs["verdict"] == record["verdict"] and attrs["step"] == record["step"]
        move = record["move"]
        assert attrs["move"] == f"{move['target']}: {move['before']!r} -> {move['after']!r}"
        assert attrs["screen"] == record["dev"]["screen"]["status"]
        failed = [g for g in record["gates"] if not g["passed"]]
        assert attrs.get("failing_gate") == (failed[0]["name"] if failed else None)
        if record["verdict"] == "promoted":
            assert trial.state == TrialState.COMPLETE
        elif record["verdict"] == "rejected" and record["dev"]["screen"]["status"] == "pass":
            assert trial.state == TrialState.FAIL and trial.value is None
            assert "confirm_p" in attrs or "val_p" in attrs
        else:
            assert trial.state == TrialState.PRUNED and trial.value is None
    def moved(name: str) -> list[FrozenTrial]:
        return [t for t in trials[1:] if t.user_attrs["move"] == f"{name}: False -> True"]

    costly, overfit = moved("costly"), moved("overfit")
    assert costly and all(t.state == TrialState.PRUNED for t in costly)
    assert all(t.user_attrs["failing_gate"] == "aux:cost" for t in costly)
    assert "cost" in costly[0].user_attrs["failing_reason"]
    assert any(t.state == TrialState.FAIL for t in overfit)
    assert all(t.state != TrialState.COMPLETE for t in overfit)


def _truncate(run: Path, folder: Path, *, keep_records: int, keep_trials: int) -> None:
    """``run`` as a search killed after its ``keep_records``-th record, its study holding
    the first ``keep_trials`` trials (killed between a record and its trial)."""
    shutil.copytree(run, folder)
    rows = (run / "journal.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (folder / "journal.jsonl").write_text("".join(rows[:keep_records]), encoding="utf-8")
    ops = (run / "optuna.journal").read_text(encoding="utf-8").splitlines(keepends=True)
    kept: list[str] = []
    trials = 0
    for op in ops:
        is_trial = json.loads(op)["op_code"] == 4  # JournalOperation.CREATE_TRIAL
        if is_trial and trials == keep_trials:
            break
        trials += is_trial
        kept.append(op)
    (folder / "optuna.journal").write_text("".join(kept), encoding="utf-8")


def test_a_resumed_run_writes_each_trial_once(run: Path, tmp_path: Path) -> None:
    whole = [shape(t) for t in load(run).get_trials()]
    rows = records(run)
    lines = evaluated(rows)
    # Killed after the 4th evaluated config's record, before its trial was written;
    # the study's last line torn.
    cut = lines[3]
    folder = tmp_path / "journals" / "r1"
    _truncate(run, folder, keep_records=cut, keep_trials=3)
    with (folder / "optuna.journal").open("a", encoding="utf-8") as fh:
        fh.write('{"op_code": 4, "worker_id": "x", "study_id": 0, "datetime_st')
    resume_search("r1", journals=folder.parent)
    assert [shape(t) for t in load(folder).get_trials()] == whole
    # Resuming the finished run replays everything and writes nothing.
    before = (folder / "optuna.journal").read_bytes()
    resume_search("r1", journals=folder.parent)
    assert (folder / "optuna.journal").read_bytes() == before


def test_a_study_of_an_earlier_forge_is_replaced_on_resume(run: Path, tmp_path: Path) -> None:
    whole = [shape(t) for t in load(run).get_trials()]
    folder = tmp_path / "journals" / "r1"
    _truncate(run, folder, keep_records=3, keep_trials=0)
    (folder / "optuna.journal").unlink()
    # What an earlier forge wrote: every screened config COMPLETE at its first chunk's
    # mean, no format_version; its best trial could be a refused config.
    storage = JournalStorage(JournalFileBackend(str(folder / "optuna.journal")))
    old = optuna.create_study(storage=storage, study_name="forge", direction="maximize")
    old.add_trial(optuna.trial.create_trial(
        params={"costly": True}, value=0.95, user_attrs={"verdict": "rejected"},
        distributions={"costly": optuna.distributions.CategoricalDistribution([False, True])}))
    resume_search("r1", journals=folder.parent)
    study = load(folder)
    assert study.user_attrs["format_version"] == 2
    assert [shape(t) for t in study.get_trials()] == whole
