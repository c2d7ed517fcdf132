"""``forge promote`` and ``forge rollback``: real runs on purpose-built benches.

One module-scoped fixture runs the searches once (a few seconds): a bench where
``boost`` really helps (run ``win``), the same bench with no step allowed (``none``,
promotes nothing) and cut short (``cut``, no end record), and a bench where
``boost`` wins on dev and val but loses on test (``loss``). Tests promote into
copies of the bench's defaults file in their own ``tmp_path``; the few that edit
the bench itself put its bytes back when they end.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import run_forge as forge
from conftest import write_search_bench

import forge.promotion.promote as promote_module
from forge._util.digest import file_digest
from forge._util.files import atomic_write_text
from forge.bench.loader import load_bench
from forge.cli import main
from forge.config.moves import Move, apply_move
from forge.config.registry import load_config
from forge.journal import load_run, read_records
from forge.journal.records import AnyRecord
from forge.promotion.provenance import Provenance, sidecar_path
from forge.search.launch import launch_search

#: boost raises the success probability from 0.5 to 0.8 on every split; knob does nothing.
BOOST = """
def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.8 if config["boost"] else 0.5
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong"}
"""

#: boost wins on dev and val (0.5 -> 0.8) and loses on the test split (0.5 -> 0.2).
TEST_LOSS = """
def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.5
    if config["boost"]:
        p = 0.2 if ctx.split == "test" else 0.8
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong"}
"""

#: boost and knob = 3 both help; a run of one step promotes one of them, the next run
#: (started from the promoted defaults) the other.
TWO_GAINS = """
def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.3 + (0.3 if config["boost"] else 0.0) + (0.3 if config["knob"] == 3 else 0.0)
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong"}
"""

#: The hand-written defaults file each bench starts from (a comment forge must keep).
DEFAULTS = "# hand-written defaults: kept byte for byte by a rollback\nknob: 2\nboost: false\n"


class _Stop(Exception):
    """Raised from ``on_record`` to cut a search short, as a kill would."""


def _bench(root: Path, harness: str) -> Path:
    bench = write_search_bench(root, harness, k=4)
    (root / "defaults.yaml").write_text(DEFAULTS, encoding="utf-8")
    with bench.open("a", encoding="utf-8") as fh:
        fh.write("defaults: defaults.yaml\n")
    return bench


@dataclass(frozen=True)
class Runs:
    bench: Path
    loss_bench: Path
    journals: Path

    @property
    def defaults(self) -> Path:
        return self.bench.parent / "defaults.yaml"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    root = tmp_path_factory.mktemp("promote")
    journals = root / "journals"
    bench = _bench(root / "boost", BOOST)
    outcome = launch_search(bench, journals=journals, run_id="win", seed=7, proposer="sweep")
    assert [p["target"] for p in outcome.promotions] == ["boost"]
    assert outcome.test["delta"] is not None and outcome.test["delta"] > 0
    assert launch_search(bench, journals=journals, run_id="none", seed=7,
                         max_steps=0).promotions == []

    def stop_at_first_candidate(record: AnyRecord) -> None:
        if record.kind == "candidate":
            raise _Stop

    with pytest.raises(_Stop):
        launch_search(bench, journals=journals, run_id="cut", seed=7, proposer="sweep",
                      on_record=stop_at_first_candidate)
    loss_bench = _bench(root / "loss", TEST_LOSS)
    loss = launch_search(loss_bench, journals=journals, run_id="loss", seed=7, proposer="sweep")
    assert loss.promotions and loss.test["delta"] is not None and loss.test["delta"] < 0
    return Runs(bench=bench, loss_bench=loss_bench, journals=journals)


# -- helpers -------------------------------------------------------------------------------

def ok(capsys: pytest.CaptureFixture[str], *args: object) -> str:
    code, out, err = forge(capsys, *args)
    assert code == 0, err
    return out


def one_error_line(code: int, out: str, err: str, *fragments: str) -> str:
    """Exit 2, nothing on stdout, exactly one ``forge: error:`` line naming ``fragments``."""
    assert code == 2, (out, err)
    assert "Traceback" not in err
    lines = err.strip("\n").splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("forge: error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert out == ""
    return lines[0]


def copy_defaults(runs: Runs, tmp_path: Path, bench: Path | None = None) -> Path:
    target = tmp_path / "deploy" / "defaults.yaml"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile((bench or runs.bench).parent / "defaults.yaml", target)
    return target


def snapshot(*paths: Path) -> dict[Path, bytes | None]:
    return {p: p.read_bytes() if p.exists() else None for p in paths}


def stack(target: Path) -> list[str]:
    """Run ids of the promotions recorded for ``target``, oldest first."""
    data = json.loads(sidecar_path(target).read_text(encoding="utf-8"))
    return [p.run_id for p in Provenance.model_validate(data).promotions]


def end_record(runs: Runs, run_id: str) -> dict[str, Any]:
    return next(r.journal_json() for r in read_records(runs.journals / run_id)
                if r.kind == "end")


@contextmanager
def edited(path: Path, text: str) -> Iterator[None]:
    """``path`` holds ``text`` inside the block and its old bytes again after it."""
    old = path.read_bytes()
    path.write_text(text, encoding="utf-8")
    try:
        yield
    finally:
        path.write_bytes(old)


# -- promote -----------------------------------------------------------------------------------

def test_promote_writes_the_final_config_with_provenance(
        runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = copy_defaults(runs, tmp_path)
    original = target.read_bytes()
    out = ok(capsys, "promote", "win", "--journals", runs.journals, "--to", target)
    assert "promoted run win (bench s)" in out
    assert "boost: false -> true" in out
    assert "forge rollback" in out

    bench = load_bench(runs.bench)
    end = end_record(runs, "win")
    # The file is a plain mapping load_config reads: the final config, in the old key order.
    assert load_config(target, bench.registry).values == end["final_config"]
    text = target.read_text(encoding="utf-8")
    assert [line for line in text.splitlines() if not line.startswith("#")] == [
        "knob: 2", "boost: true"]
    assert "run win (bench s)" in text and "step 1: boost: false -> true" in text
    assert f"95% CI {end['test']['ci_low']:+.3f}" in text

    entry = json.loads(sidecar_path(target).read_text(encoding="utf-8"))["promotions"][-1]
    info = load_run(runs.journals / "win")
    assert entry["run_id"] == "win"
    assert entry["journal_sha256"] == file_digest(runs.journals / "win" / "journal.jsonl")
    assert entry["run_json_sha256"] == file_digest(runs.journals / "win" / "run.json")
    assert entry["bench_digest"] == info.bench_digest == bench.digest
    assert entry["registry_digest"] == info.registry_digest == bench.registry.digest
    assert entry["test"] == {k: end["test"][k]
                             for k in ("start", "final", "delta", "ci_low", "ci_high")}
    assert entry["moves"] == end["promotions"]
    assert entry["inverses"] == [{"target": "boost", "before": True, "after": False}]
    assert entry["previous"] == info.start_config == {"boost": False, "knob": 2}
    assert entry["promoted"] == end["final_config"]
    assert entry["final_fingerprint"] == end["final_fingerprint"]
    assert entry["previous_existed"] is True
    assert entry["previous_text"].encode() == original
    assert entry["previous_sha256"] == hashlib.sha256(original).hexdigest()
    assert entry["written_sha256"] == hashlib.sha256(target.read_bytes()).hexdigest()
    # The bench's own defaults file was not touched: --to wrote elsewhere.
    assert runs.defaults.read_text(encoding="utf-8") == DEFAULTS


def test_promote_json_output(runs: Runs, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    target = copy_defaults(runs, tmp_path)
    result = json.loads(ok(capsys, "promote", "win", "--journals", runs.journals,
                           "--to", target, "--json"))
    assert result["action"] == "promote" and result["run_id"] == "win"
    assert result["target"] == str(target) and result["notes"] == []
    assert "previous_text" not in result
    assert result["promoted"] == {"boost": True, "knob": 2}


def test_promote_into_the_bench_defaults_then_rollback_restores_the_bytes(
        runs: Runs, capsys: pytest.CaptureFixture[str]) -> None:
    sidecar = sidecar_path(runs.defaults)
    try:
        ok(capsys, "promote", "win", "--journals", runs.journals)  # no --to: the bench's file
        assert load_bench(runs.bench).defaults.values == {"knob": 2, "boost": True}
        # Promoting changes no digest a later resume or promotion checks.
        assert load_bench(runs.bench).digest == load_run(runs.journals / "win").bench_digest
        out = ok(capsys, "rollback", runs.defaults)
        assert "rolled back run win" in out and "boost: true -> false" in out
        assert runs.defaults.read_text(encoding="utf-8") == DEFAULTS
        assert stack(runs.defaults) == []
    finally:
        runs.defaults.write_text(DEFAULTS, encoding="utf-8")
        sidecar.unlink(missing_ok=True)


def test_promote_to_a_new_file(runs: Runs, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    """With no file at the target, the run's start config is the previous default."""
    target = tmp_path / "new" / "prod.yaml"
    ok(capsys, "promote", "win", "--journals", runs.journals, "--to", target)
    registry = load_bench(runs.bench).registry
    assert load_config(target, registry).values == {"boost": True, "knob": 2}
    ok(capsys, "rollback", target)
    assert load_config(target, registry).values == {"boost": False, "knob": 2}
    assert stack(target) == []
    # And the file forge wrote for the previous default can take the promotion again.
    ok(capsys, "promote", "win", "--journals", runs.journals, "--to", target)
    assert stack(target) == ["win"]


@pytest.mark.parametrize(("run_id", "fragments"), [
    ("loss", ["promote loss: refused", "shows a loss", "delta -", "95% CI"]),
    ("cut", ["promote cut: refused", "not finished", "forge search --resume cut"]),
    ("none", ["promote none: refused", "nothing to promote"]),
    ("missing", ["run.json not found"]),
])
def test_promote_refuses_a_run_that_proves_nothing(
        runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str], run_id: str,
        fragments: list[str]) -> None:
    target = copy_defaults(runs, tmp_path, runs.loss_bench if run_id == "loss" else None)
    before = snapshot(target, sidecar_path(target))
    one_error_line(*forge(capsys, "promote", run_id, "--journals", runs.journals,
                          "--to", target), *fragments)
    assert snapshot(target, sidecar_path(target)) == before


def test_promote_refuses_a_changed_bench(runs: Runs, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    target = copy_defaults(runs, tmp_path)
    before = snapshot(target, sidecar_path(target))
    bench_text = runs.bench.read_text(encoding="utf-8")
    with edited(runs.bench, bench_text + 'description: "now with more tasks"\n'):
        one_error_line(*forge(capsys, "promote", "win", "--journals", runs.journals,
                              "--to", target),
                       "refused", "the bench", "changed since the run")
    tasks = runs.bench.parent / "tasks" / "dev.jsonl"
    with edited(tasks, "\n".join(tasks.read_text(encoding="utf-8").splitlines()[:-1]) + "\n"):
        one_error_line(*forge(capsys, "promote", "win", "--journals", runs.journals,
                              "--to", target), "the bench", "changed since the run")
    assert snapshot(target, sidecar_path(target)) == before
    ok(capsys, "promote", "win", "--journals", runs.journals, "--to", target)  # restored


def test_promote_refuses_a_changed_registry(runs: Runs, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    target = copy_defaults(runs, tmp_path)
    before = snapshot(target, sidecar_path(target))
    registry = runs.bench.parent / "registry.yaml"
    text = registry.read_text(encoding="utf-8")
    with edited(registry, text.replace("max: 3", "max: 4")):
        one_error_line(*forge(capsys, "promote", "win", "--journals", runs.journals,
                              "--to", target),
                       "refused", "the registry of", "changed since the run")
    assert snapshot(target, sidecar_path(target)) == before


def test_promote_refuses_a_target_edited_since_the_run_started(
        runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = copy_defaults(runs, tmp_path)
    target.write_text("knob: 3\nboost: false\n", encoding="utf-8")
    before = snapshot(target, sidecar_path(target))
    one_error_line(*forge(capsys, "promote", "win", "--journals", runs.journals, "--to", target),
                   "refused", "was edited since the run started", "knob is 3 there",
                   "started from 2")
    assert snapshot(target, sidecar_path(target)) == before
    # A change that leaves the values alone (a comment, the key order) is no edit of the config.
    target.write_text("boost: false  # still the start\nknob: 2\n", encoding="utf-8")
    ok(capsys, "promote", "win", "--journals", runs.journals, "--to", target)


def test_promote_refuses_the_same_run_twice(runs: Runs, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    target = copy_defaults(runs, tmp_path)
    ok(capsys, "promote", "win", "--journals", runs.journals, "--to", target)
    before = snapshot(target, sidecar_path(target))
    one_error_line(*forge(capsys, "promote", "win", "--journals", runs.journals, "--to", target),
                   "already promoted", "forge rollback")
    assert snapshot(target, sidecar_path(target)) == before


def test_promote_refuses_a_journal_that_does_not_add_up(
        runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    journals = tmp_path / "journals"
    shutil.copytree(runs.journals / "win", journals / "win")
    path = journals / "win" / "journal.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for record in records:
        if record["kind"] == "end":
            record["final_config"] = {**record["final_config"], "knob": 3}
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    target = copy_defaults(runs, tmp_path)
    before = snapshot(target, sidecar_path(target))
    one_error_line(*forge(capsys, "promote", "win", "--journals", journals, "--to", target),
                   "journal does not add up")
    assert snapshot(target, sidecar_path(target)) == before


# -- rollback ----------------------------------------------------------------------------------

def test_promote_or_rollback_onto_a_read_only_file_is_refused(
        runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The atomic write renames a new file over the old one, which a read-only mode
    does not stop: forge checks the mode itself (these tests may run as root)."""
    target = copy_defaults(runs, tmp_path)
    target.chmod(0o444)
    before = snapshot(target, sidecar_path(target))
    one_error_line(*forge(capsys, "promote", "win", "--journals", runs.journals, "--to",
                          target), str(target), "is read-only", "nothing was written")
    assert snapshot(target, sidecar_path(target)) == before
    target.chmod(0o644)
    ok(capsys, "promote", "win", "--journals", runs.journals, "--to", target)
    target.chmod(0o444)
    before = snapshot(target, sidecar_path(target))
    one_error_line(*forge(capsys, "rollback", target), "is read-only")
    assert snapshot(target, sidecar_path(target)) == before
    assert sorted(p.name for p in target.parent.iterdir()) == sorted(
        [target.name, sidecar_path(target).name])


def test_rollback_restores_exactly_the_old_file(runs: Runs, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    target = copy_defaults(runs, tmp_path)
    original = target.read_bytes()
    ok(capsys, "promote", "win", "--journals", runs.journals, "--to", target)
    assert target.read_bytes() != original
    out = ok(capsys, "rollback", target)
    assert "1 inverse(s) applied" in out and "0 earlier promotion(s)" in out
    assert target.read_bytes() == original  # values, comment and key order
    assert load_config(target, load_bench(runs.bench).registry).values == {"boost": False,
                                                                            "knob": 2}
    assert stack(target) == []
    one_error_line(*forge(capsys, "rollback", target), "nothing to roll back")


def test_rollback_refuses_a_file_edited_by_hand(runs: Runs, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    target = copy_defaults(runs, tmp_path)
    ok(capsys, "promote", "win", "--journals", runs.journals, "--to", target)
    target.write_text(target.read_text(encoding="utf-8").replace("knob: 2", "knob: 3"),
                      encoding="utf-8")
    before = snapshot(target, sidecar_path(target))
    one_error_line(*forge(capsys, "rollback", target), "refused", "edited by hand since run win")
    assert snapshot(target, sidecar_path(target)) == before


def test_rollback_of_a_file_never_promoted(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "defaults.yaml"
    target.write_text(DEFAULTS, encoding="utf-8")
    one_error_line(*forge(capsys, "rollback", target), "no promotion is recorded")
    assert target.read_text(encoding="utf-8") == DEFAULTS


def test_rollback_refuses_a_stale_inverse(runs: Runs, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A sidecar whose inverses do not fit the file (edited along with its hash) is caught
    by ``apply_move``: nothing is written."""
    target = copy_defaults(runs, tmp_path)
    ok(capsys, "promote", "win", "--journals", runs.journals, "--to", target)
    sidecar = sidecar_path(target)
    data = json.loads(sidecar.read_text(encoding="utf-8"))
    data["promotions"][-1]["inverses"] = [{"target": "knob", "before": 3, "after": 2}]
    sidecar.write_text(json.dumps(data), encoding="utf-8")
    before = snapshot(target, sidecar)
    one_error_line(*forge(capsys, "rollback", target), "refused", "is stale")
    assert snapshot(target, sidecar) == before


def test_promote_rollback_promote_again(runs: Runs, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    target = copy_defaults(runs, tmp_path)
    ok(capsys, "promote", "win", "--journals", runs.journals, "--to", target)
    promoted = target.read_text(encoding="utf-8")
    ok(capsys, "rollback", target)
    ok(capsys, "promote", "win", "--journals", runs.journals, "--to", target)
    assert stack(target) == ["win"]
    strip = [line for line in promoted.splitlines() if not line.startswith("# Written")]
    assert [line for line in target.read_text(encoding="utf-8").splitlines()
            if not line.startswith("# Written")] == strip


def test_two_promotions_stack_and_roll_back_in_order(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Run A promotes one move into the defaults; run B, started from A's promoted
    defaults, promotes another; two rollbacks undo B, then A."""
    bench = _bench(tmp_path / "two", TWO_GAINS)
    defaults = bench.parent / "defaults.yaml"
    journals = tmp_path / "journals"
    a = launch_search(bench, journals=journals, run_id="a", seed=7, proposer="sweep",
                      max_steps=1)
    assert len(a.promotions) == 1
    ok(capsys, "promote", "a", "--journals", journals)
    after_a = defaults.read_bytes()
    b = launch_search(bench, journals=journals, run_id="b", seed=7, proposer="sweep")
    assert b.start_config == a.final_config and b.promotions
    # B's journal names the config A left, so B is promoted on top of A; A cannot be again.
    one_error_line(*forge(capsys, "promote", "a", "--journals", journals), "refused")
    ok(capsys, "promote", "b", "--journals", journals)
    assert stack(defaults) == ["a", "b"]
    assert load_bench(bench).defaults.values == {"knob": 3, "boost": True}
    ok(capsys, "rollback", defaults)
    assert defaults.read_bytes() == after_a
    ok(capsys, "rollback", defaults)
    assert defaults.read_text(encoding="utf-8") == DEFAULTS
    assert stack(defaults) == []


# -- atomicity and crashes ------------------------------------------------------------------

def test_a_failed_write_leaves_both_files_as_they_were(
        runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    target = copy_defaults(runs, tmp_path)
    before = snapshot(target, sidecar_path(target))
    real_replace = os.replace

    def replace_fails_for_the_target(src: Any, dst: Any) -> None:
        if Path(dst) == target:
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_fails_for_the_target)
    one_error_line(*forge(capsys, "promote", "win", "--journals", runs.journals, "--to", target),
                   f"{target}: cannot write", "No space left", "left as they were")
    assert snapshot(target, sidecar_path(target)) == before  # the sidecar was taken back
    assert sorted(p.name for p in target.parent.iterdir()) == ["defaults.yaml"]  # no temp files

    def replace_always_fails(src: Any, dst: Any) -> None:
        raise OSError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", replace_always_fails)
    one_error_line(*forge(capsys, "promote", "win", "--journals", runs.journals, "--to", target),
                   "cannot write", "Permission denied")
    assert snapshot(target, sidecar_path(target)) == before

    # A rollback that cannot write leaves the promoted file and its record in place.
    monkeypatch.setattr(os, "replace", real_replace)
    ok(capsys, "promote", "win", "--journals", runs.journals, "--to", target)
    promoted = snapshot(target, sidecar_path(target))
    monkeypatch.setattr(os, "replace", replace_fails_for_the_target)
    one_error_line(*forge(capsys, "rollback", target), "cannot write")
    assert snapshot(target, sidecar_path(target)) == promoted


class _Crash(BaseException):
    """The process dies: nothing after this point runs, not even clean-up."""


def _crash_on(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """Kill "the process" when it replaces ``path``; its clean-up never runs."""
    real = atomic_write_text

    def write(p: str | Path, text: str) -> None:
        if Path(p) == path:
            raise _Crash
        real(p, text)

    monkeypatch.setattr(promote_module, "atomic_write_text", write)
    monkeypatch.setattr(promote_module, "_restore", lambda *a: None)


def test_a_promote_killed_between_its_two_writes(
        runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    target = copy_defaults(runs, tmp_path)
    original = target.read_bytes()
    with monkeypatch.context() as m:
        _crash_on(m, target)
        with pytest.raises(_Crash):
            main(["promote", "win", "--journals", str(runs.journals), "--to", str(target)])
    capsys.readouterr()
    # The sidecar (written first) names a promotion the file (written last) never got.
    assert target.read_bytes() == original and stack(target) == ["win"]
    out = ok(capsys, "rollback", target)
    assert "nothing to undo" in out and "dropped" in out
    assert target.read_bytes() == original and stack(target) == []
    # And a promote after the crash simply works (it would drop the record itself, too).
    with monkeypatch.context() as m:
        _crash_on(m, target)
        with pytest.raises(_Crash):
            main(["promote", "win", "--journals", str(runs.journals), "--to", str(target)])
    capsys.readouterr()
    out = ok(capsys, "promote", "win", "--journals", runs.journals, "--to", target)
    assert "dropped the record of run win's promotion" in out
    assert stack(target) == ["win"]


def test_a_rollback_killed_between_its_two_writes(
        runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    target = copy_defaults(runs, tmp_path)
    original = target.read_bytes()
    ok(capsys, "promote", "win", "--journals", runs.journals, "--to", target)
    with monkeypatch.context() as m:
        _crash_on(m, sidecar_path(target))
        with pytest.raises(_Crash):
            main(["rollback", str(target)])
    capsys.readouterr()
    # The file (written first) is back; the sidecar still lists the promotion.
    assert target.read_bytes() == original and stack(target) == ["win"]
    assert "nothing to undo" in ok(capsys, "rollback", target)
    assert stack(target) == []
    ok(capsys, "promote", "win", "--journals", runs.journals, "--to", target)


# -- issue 14: jumps, and tolerances from the start to the final config ----------------------

#: level's best value (7) is far from its default (1): no step shows anything, a jump does.
JUMP_REGISTRY = """\
name: jumps
settings:
  level: {type: int, min: 0, max: 10, step: 1, default: 1}
  boost: {type: bool, default: false}
"""
JUMP_HARNESS = """
def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.8 if config["level"] == 7 else 0.4
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong"}
"""
JUMP_DEFAULTS = "# hand-written defaults\nlevel: 1\nboost: false\n"


def test_a_jump_is_journaled_as_one_promoted_and_rolled_back_exactly(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "jumps"
    bench = write_search_bench(root, JUMP_HARNESS, registry=JUMP_REGISTRY, k=4,
                               search={"max_steps": 2, "patience": 1})
    (root / "defaults.yaml").write_text(JUMP_DEFAULTS, encoding="utf-8")
    with bench.open("a", encoding="utf-8") as fh:
        fh.write("defaults: defaults.yaml\n")
    jump = Move(target="level", before=1, after=7)
    journals = tmp_path / "journals"
    outcome = launch_search(bench, journals=journals, run_id="jump", seed=7, proposer="sweep",
                            first_moves=[jump])
    assert outcome.promotions == [{"step": 1, "target": "level", "before": 1, "after": 7}]
    [record] = [r for r in outcome.records if r.get("verdict") == "promoted"]
    assert record["move_kind"] == "jump" and record["move"] == jump.model_dump()
    assert record["inverse"] == {"target": "level", "before": 7, "after": 1}
    # Its inverse undoes it exactly, as a step's does.
    registry = load_bench(bench).registry
    start = registry.validate_config(outcome.start_config)
    moved = apply_move(registry, start, jump)
    assert moved.values == outcome.final_config
    assert apply_move(registry, moved, jump.inverse()) == start
    # The other candidates say which kind of move they were, too.
    others = [r for r in outcome.records if r["kind"] == "candidate" and r is not record]
    assert others
    for r in others:
        move = r["move"]
        step = move["target"] == "boost" or abs(move["after"] - move["before"]) == 1
        assert r["move_kind"] == ("step" if step else "jump"), move

    target = tmp_path / "deploy" / "defaults.yaml"
    target.parent.mkdir()
    shutil.copyfile(root / "defaults.yaml", target)
    ok(capsys, "promote", "jump", "--journals", journals, "--to", target)
    assert load_config(target, registry).values == {"level": 7, "boost": False}
    entry = json.loads(sidecar_path(target).read_text(encoding="utf-8"))["promotions"][-1]
    assert entry["inverses"] == [{"target": "level", "before": 7, "after": 1}]
    out = ok(capsys, "rollback", target)
    assert "level: 7 -> 1" in out
    assert target.read_text(encoding="utf-8") == JUMP_DEFAULTS
    assert stack(target) == []


#: boost wins on every split and costs the same on dev and val, but twice as much on test.
COST_ON_TEST = """
def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.8 if config["boost"] else 0.5
    ok = random.Random(ctx.seed).random() < p
    cost = 2.0 if config["boost"] and ctx.split == "test" else 1.0
    return {"output": task.expected if ok else "wrong", "cost": cost}
"""
COST = {"cost": {"direction": "lower", "max_increase": 0.10, "relative": True}}


@pytest.fixture(scope="module")
def beyond(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A finished run whose start-to-final check on test puts cost beyond its tolerance:
    (the bench file, the journals folder); the run is ``beyond``."""
    root = tmp_path_factory.mktemp("beyond")
    bench = write_search_bench(root / "bench", COST_ON_TEST, k=4, metrics=COST)
    (root / "bench" / "defaults.yaml").write_text(DEFAULTS, encoding="utf-8")
    with bench.open("a", encoding="utf-8") as fh:
        fh.write("defaults: defaults.yaml\n")
    outcome = launch_search(bench, journals=root / "journals", run_id="beyond", seed=7,
                            proposer="sweep")
    assert [p["target"] for p in outcome.promotions] == ["boost"]
    return bench, root / "journals"


def test_a_tolerance_beyond_its_allowance_on_test_is_journaled_and_shown(
        beyond: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _, journals = beyond
    [test] = [r for r in read_records(journals / "beyond") if r.kind == "test"]
    [cost, unscored] = test.journal_json()["aux"]
    assert unscored["name"] == "unscored" and unscored["passed"]
    assert cost["name"] == "aux:cost" and not cost["passed"]
    assert cost["details"]["status"] == "beyond"
    assert cost["reason"].startswith("cost +100.0%") and "BEYOND the allowance" in cost["reason"]
    out = ok(capsys, "journal", "show", "beyond", "--journals", journals)
    assert "BEYOND tolerance vs start: cost +100.0%" in " ".join(out.split())


def test_promote_refuses_a_run_beyond_a_tolerance_unless_told_to_accept_it(
        beyond: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench, journals = beyond
    target = tmp_path / "deploy" / "defaults.yaml"
    target.parent.mkdir()
    shutil.copyfile(bench.parent / "defaults.yaml", target)
    before = snapshot(target, sidecar_path(target))
    line = one_error_line(*forge(capsys, "promote", "beyond", "--journals", journals,
                                 "--to", target), "promote beyond: refused", "cost",
                          "--accept-beyond-tolerance")
    assert "aux:cost" in line or "cost +100.0%" in line
    assert snapshot(target, sidecar_path(target)) == before
    ok(capsys, "promote", "beyond", "--journals", journals, "--to", target,
       "--accept-beyond-tolerance")
    assert load_config(target, load_bench(bench).registry).values == {"knob": 2, "boost": True}
    entry = json.loads(sidecar_path(target).read_text(encoding="utf-8"))["promotions"][-1]
    accepted = {k: v for k, v in entry.items() if "accept" in k}
    assert accepted and "cost" in json.dumps(accepted), entry


# -- one writer per target --------------------------------------------------------------------

#: ``forge ARGS`` whose commit (promote's or rollback's two writes) waits for a go-ahead:
#: it writes argv[1] when it gets there, then waits until argv[2] exists. A slow disk,
#: made deterministic.
SLOW_COMMIT = """
import sys, time
from pathlib import Path
import forge.promotion.promote as promote
from forge.cli import main

ready, go = Path(sys.argv[1]), Path(sys.argv[2])
real = promote._commit

def slow_commit(*args, **kwargs):
    ready.write_text("ready")
    deadline = time.monotonic() + 120
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return real(*args, **kwargs)

promote._commit = slow_commit
sys.exit(main(sys.argv[3:]))
"""

#: ``forge ARGS`` killed (SIGKILL) as it renames the temp file of argv[1] into place.
KILLED_AT_RENAME = """
import os, signal, sys
from pathlib import Path
from forge.cli import main

victim = Path(sys.argv[1]).resolve()
real = os.replace

def replace(src, dst):
    if Path(dst).resolve() == victim:
        os.kill(os.getpid(), signal.SIGKILL)
    real(src, dst)

os.replace = replace
sys.exit(main(sys.argv[2:]))
"""


def _slow(tmp_path: Path, *args: object) -> tuple[subprocess.Popen[str], Path]:
    ready, go = tmp_path / "ready", tmp_path / "go"
    proc = subprocess.Popen([sys.executable, "-c", SLOW_COMMIT, str(ready), str(go),
                             *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the first command never reached its commit"
        time.sleep(0.01)
    return proc, go


def test_two_promotions_onto_one_target_at_once_the_second_is_refused(
        runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = copy_defaults(runs, tmp_path)
    before = snapshot(target, sidecar_path(target))
    first, go = _slow(tmp_path, "promote", "win", "--journals", runs.journals, "--to", target)
    try:
        # The first has checked everything and is about to write: the second comes now.
        line = one_error_line(*forge(capsys, "promote", "win", "--journals", runs.journals,
                                     "--to", target),
                              f"{target}: promote win: refused: another forge promote or "
                              f"rollback of {target} is running", "nothing was written")
        assert f"pid {first.pid}" in line
        assert snapshot(target, sidecar_path(target)) == before  # the second wrote nothing
        one_error_line(*forge(capsys, "rollback", target), "another forge promote or rollback")
    finally:
        go.write_text("go")
        _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert stack(target) == ["win"]  # the first one's promotion, recorded once, not lost
    assert load_config(target, load_bench(runs.bench).registry).values["boost"] is True
    assert sorted(p.name for p in target.parent.iterdir()) == [
        "defaults.yaml", "defaults.yaml.forge.json"]  # no lock file, no temp file left


def test_a_rollback_in_progress_refuses_a_promote(
        runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = copy_defaults(runs, tmp_path)
    ok(capsys, "promote", "win", "--journals", runs.journals, "--to", target)
    first, go = _slow(tmp_path, "rollback", target)
    try:
        one_error_line(*forge(capsys, "promote", "win", "--journals", runs.journals,
                              "--to", target), "another forge promote or rollback")
    finally:
        go.write_text("go")
        _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert target.read_text(encoding="utf-8") == DEFAULTS and stack(target) == []


@pytest.mark.parametrize("command", ["promote", "rollback"])
def test_temp_files_of_a_killed_promote_are_removed_by_the_next_one(
        runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    target = copy_defaults(runs, tmp_path)
    killed = subprocess.run([sys.executable, "-c", KILLED_AT_RENAME, str(target), "promote",
                             "win", "--journals", str(runs.journals), "--to", str(target)],
                            capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    leftovers = [p.name for p in target.parent.iterdir() if p.name.endswith(".tmp")]
    assert len(leftovers) == 1 and leftovers[0].startswith(".defaults.yaml."), leftovers
    unrelated = target.parent / ".other.yaml.0123456789abcdef.tmp"
    unrelated.write_text("not ours")
    if command == "promote":
        out = ok(capsys, "promote", "win", "--journals", runs.journals, "--to", target)
    else:
        out = ok(capsys, "rollback", target)
    assert "removed 1 temporary file(s) left beside defaults.yaml" in out
    assert sorted(p.name for p in target.parent.iterdir() if p.name.endswith(".tmp")) == [
        unrelated.name]
