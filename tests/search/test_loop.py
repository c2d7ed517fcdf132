"""Whole searches on purpose-built benches: each gate refuses what it should, a real
improvement is promoted, the search stops for the reason it says, and never peeks.

The harnesses are deterministic test doubles: success is ``random.Random(ctx.seed)``
below a probability that the test's settings decide, so two configs see the same
random numbers on the same seeds (paired), and effects are large enough (0.5 -> 0.8
over 40 dev tasks x 4 attempts) to be found every time. Every harness logs its
calls (``calls.log``) so tests can count rollouts and see their order.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import read_calls, search_tasks, write_search_bench

from forge.bench.loader import BudgetSettings, load_bench
from forge.cli import main
from forge.config.moves import Move
from forge.config.registry import Config
from forge.journal.records import AnyRecord
from forge.journal.run_store import RunStore
from forge.proposers import Proposal, Proposer, SearchView
from forge.search.launch import launch_search
from forge.search.loop import Search
from forge.search.options import SearchOptions
from forge.search.outcome import STOP_TEXT, SearchOutcome
from forge.stats.paired import spent_alpha

K = 4
N_DEV, N_VAL, N_TEST = 40, 30, 30
#: Tasks in a screening chunk and in each confirmation look: a sixth of dev.
CHUNK_TASKS = -(-N_DEV // 6)  # the search cuts dev into six chunks, rounding up

#: boost raises the success probability from 0.5 to 0.8 everywhere; knob does nothing.
BOOST = """
def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.8 if config["boost"] else 0.5
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong", "cost": 1.0}
"""

#: boost wins on dev (0.5 -> 0.8) but loses on val (0.5 -> 0.3).
VAL_LOSS = """
def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.5
    if config["boost"]:
        p = 0.3 if ctx.split == "val" else 0.8
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong"}
"""

#: boost wins on pass rate and doubles the cost.
COSTLY = """
def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.8 if config["boost"] else 0.5
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong",
            "cost": 2.0 if config["boost"] else 1.0}
"""

#: boost wins on ordinary tasks (0.5 -> 0.9) and breaks the critical ones (1.0 -> 0.0).
BREAKS_CRITICAL = """
def run(config, task, ctx):
    record(config, task, ctx)
    if "critical" in task.tags:
        p = 0.0 if config["boost"] else 1.0
    else:
        p = 0.9 if config["boost"] else 0.5
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong"}
"""

#: Settings change the outcome of every attempt, but never its probability (0.5).
NOISE = """
def run(config, task, ctx):
    record(config, task, ctx)
    rng = random.Random(f"{ctx.seed}:{_json.dumps(config, sort_keys=True)}")
    ok = rng.random() < 0.5
    return {"output": task.expected if ok else "wrong"}
"""

NOISE_REGISTRY = """\
name: noise
settings:
  boost: {type: bool, default: false}
  knob:  {type: int, min: 1, max: 5, step: 1, default: 3}
  mode:  {type: enum, choices: [a, b, c], default: a}
"""

#: A knob != 2 is "lucky" on the attempts the search screens with (block 0 of the tasks
#: in ``lucky.json``, the first chunk of the run's dev order), 0.5 -> 0.95 there, the
#: way a change can look good on one sample of seeds; boost is a real gain.
LUCKY = """
def lucky():
    return set(_json.loads(_Path(__file__).with_name("lucky.json").read_text()))


def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.8 if config["boost"] else 0.5
    if config["knob"] != 2 and task.id in lucky() and ctx.attempt < 4:
        p = 0.95
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong"}
"""


#: boost and knob 2 -> 3 each win on pass rate and each add 8% to the cost: within a
#: 10% tolerance move by move, 16.6% from the start after both.
TWO_SMALL_COSTS = """
def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.3 + 0.3 * config["boost"] + 0.3 * (config["knob"] == 3)
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong",
            "cost": 1.08 ** (config["boost"] + (config["knob"] == 3))}
"""


@pytest.fixture
def bench_factory(tmp_path: Path) -> Callable[..., Path]:
    counter = iter(range(1000))

    def make(harness: str, **kwargs: Any) -> Path:
        return write_search_bench(tmp_path / f"bench{next(counter)}", harness, k=K, **kwargs)

    return make


class Marks:
    """``on_record`` hook: how many harness calls had happened when each record was
    journaled (records and calls are both in order)."""

    def __init__(self, bench: Path) -> None:
        self.bench = bench
        self.at: list[tuple[dict[str, Any], int]] = []

    def __call__(self, record: AnyRecord) -> None:
        self.at.append((record.journal_json(), len(read_calls(self.bench))))


def search(bench: Path, tmp_path: Path, run_id: str = "r", *, seed: int = 7,
           proposer: str = "sweep", marks: Marks | None = None, **kw: Any) -> SearchOutcome:
    return launch_search(bench, journals=tmp_path / "journals", run_id=run_id, seed=seed,
                         proposer=proposer, on_record=marks, **kw)


def candidates(outcome: SearchOutcome) -> list[dict[str, Any]]:
    return [r for r in outcome.records if r["kind"] == "candidate"]


def only(records: list[dict[str, Any]], target: str, after: Any) -> dict[str, Any]:
    """The one confirmed record of ``target -> after`` (a gate beyond dev was run)."""
    found = [r for r in records if r["move"]["target"] == target and r["move"]["after"] == after
             and "confirm" in (r.get("dev") or {})]
    assert len(found) == 1, [(r["move"], r["verdict"]) for r in records]
    return found[0]


def gates(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["name"]: g for g in record["gates"]}


def failing(record: dict[str, Any]) -> list[str]:
    return [g["name"] for g in record["gates"] if not g["passed"]]


def key(config: dict[str, Any]) -> str:
    return json.dumps(config, sort_keys=True)


def candidate_configs(outcome: SearchOutcome) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(record, candidate config values) for every candidate record, in order."""
    incumbent = dict(outcome.start_config)
    for r in candidates(outcome):
        move = r["move"]
        yield r, {**incumbent, move["target"]: move["after"]}
        if r["verdict"] == "promoted":
            incumbent = {**incumbent, move["target"]: move["after"]}


def assert_no_peeking(outcome: SearchOutcome, marks: Marks) -> None:
    """val: only inside a confirmation, for the candidate being confirmed, its
    incumbent and the start config (the reference of every tolerance), never while
    screening; test: only after the last decision, once each for start and final."""
    calls = read_calls(marks.bench)
    last_decision = max(n for r, n in marks.at if r["kind"] in ("start", "candidate", "stop"))
    configs = {id(r): values for r, values in candidate_configs(outcome)}
    incumbents: dict[int, dict[str, Any]] = {}
    incumbent = dict(outcome.start_config)
    for r in candidates(outcome):
        incumbents[id(r)] = incumbent
        if r["verdict"] == "promoted":
            incumbent = configs[id(r)]
    by_json = {json.dumps(r, sort_keys=True): r for r in candidates(outcome)}
    for i, call in enumerate(calls):
        if call["split"] == "val":
            # The record journaled next after this call is the decision that read it.
            record = next(r for r, n in marks.at if n > i)
            assert record["kind"] == "candidate" and record.get("looks") is not None, call
            r = by_json[json.dumps(record, sort_keys=True)]
            allowed = {key(configs[id(r)]), key(incumbents[id(r)]), key(outcome.start_config)}
            assert key(call["config"]) in allowed, call
        if call["split"] == "test":
            assert i >= last_decision, "the test split was opened before the search ended"
    test_calls = Counter(key(c["config"]) for c in calls if c["split"] == "test")
    expected = {key(outcome.start_config), key(outcome.final_config)}
    assert set(test_calls) == expected
    # TEST_K (20) attempts a test task, each config: more than the search's k.
    assert all(n == N_TEST * 20 for n in test_calls.values())
    assert sum(r["kind"] == "test" for r, _ in marks.at) == 1


# -- (a) a real improvement ----------------------------------------------------------------

def test_a_real_improvement_is_promoted_and_holds_on_test(
        bench_factory: Callable[..., Path], tmp_path: Path) -> None:
    bench = bench_factory(BOOST)
    marks = Marks(bench)
    outcome = search(bench, tmp_path, proposer="auto", marks=marks)
    assert outcome.promotions == [{"step": 1, "target": "boost", "before": False, "after": True}]
    assert outcome.final_config == {"boost": True, "knob": 2}
    record = only(candidates(outcome), "boost", True)
    assert record["verdict"] == "promoted"
    assert [g["name"] for g in record["gates"]] == ["dev", "val", "unscored"]
    assert all(g["passed"] for g in record["gates"])
    assert record["inverse"] == {"target": "boost", "before": True, "after": False}
    # Confirmed on the dev stream's attempts its screening did not read, at the first
    # level of the spending sequence.
    assert record["dev"]["confirm"]["stream"] == "dev"
    assert record["dev"]["confirm"]["level"] == pytest.approx(spent_alpha(1, 0.05))
    assert record["move_kind"] == "step"
    # It holds out of sample: the test split, opened once at the end, shows the gain.
    assert outcome.test["delta"] is not None and outcome.test["delta"] > 0.15
    assert outcome.test["ci_low"] is not None and outcome.test["ci_low"] > 0
    assert outcome.val["delta"] is not None and outcome.val["delta"] > 0.15
    test_record = next(r for r in outcome.records if r["kind"] == "test")
    assert test_record["p_value_two_sided"] < 0.001
    assert_no_peeking(outcome, marks)
    # After the promotion every neighbour is refused, so the search ends there.
    assert outcome.stop_reason == "local_optimum"


def test_rollouts_are_reused_and_no_attempt_runs_twice(
        bench_factory: Callable[..., Path], tmp_path: Path) -> None:
    bench = bench_factory(BOOST)
    outcome = search(bench, tmp_path)
    calls = read_calls(bench)
    attempts = Counter((key(c["config"]), c["seed"]) for c in calls)
    # The incumbent's attempts served every candidate, and a config met again (the
    # start config, as the inverse of the promotion) was not run again.
    assert max(attempts.values()) == 1
    assert len(calls) == outcome.rollouts_used
    assert len(candidates(outcome)) >= 4
    # The start config is evaluated lazily: its first screening chunk before the first
    # step, the rest only as far as the decisions against it needed.
    start = next(r for r in outcome.records if r["kind"] == "start")
    assert start["dev_tasks"] == CHUNK_TASKS and start["rollouts_total"] == CHUNK_TASKS * K
    start_dev = [c for c in calls if key(c["config"]) == key(outcome.start_config)
                 and c["split"] == "dev"]
    assert len(start_dev) < N_DEV * K
    back = [r for r in candidates(outcome) if r["move"] == {"target": "boost", "before": True,
                                                            "after": False}]
    assert len(back) == 1 and back[0]["verdict"] == "rejected"
    assert back[0]["rollouts"] == 0  # both sides were already on file
    assert back[0]["reused"] > 0


def test_racing_stops_a_clearly_worse_candidate_early(
        bench_factory: Callable[..., Path], tmp_path: Path) -> None:
    bench = bench_factory(BOOST)
    outcome = search(bench, tmp_path, start=_config(bench, boost=True))
    worse = only_screened(candidates(outcome), "boost", False)
    assert worse["verdict"] == "rejected"
    assert worse["dev"]["screen"]["status"] == "futile"
    assert worse["tasks_screened"] == CHUNK_TASKS < N_DEV
    # What racing saved: the candidate ran the first chunk of tasks and nothing else.
    assert worse["rollouts"] + worse["reused"] == 2 * CHUNK_TASKS * K
    assert worse["rollouts"] == CHUNK_TASKS * K  # the start's first chunk was on file
    assert sum(not c["config"]["boost"] for c in read_calls(bench)) == CHUNK_TASKS * K
    assert "futility" in worse["gates"][0]["reason"]


def only_screened(records: list[dict[str, Any]], target: str, after: Any) -> dict[str, Any]:
    found = [r for r in records if r["move"]["target"] == target and r["move"]["after"] == after]
    assert len(found) == 1
    return found[0]


def _config(bench: Path, **values: Any) -> Config:
    loaded = load_bench(bench)
    return loaded.registry.with_values(loaded.defaults, values)


# -- (b)-(d) each gate refuses what it should ---------------------------------------------

def test_a_dev_win_that_loses_on_val_is_refused_by_the_val_gate(
        bench_factory: Callable[..., Path], tmp_path: Path) -> None:
    bench = bench_factory(VAL_LOSS)
    marks = Marks(bench)
    outcome = search(bench, tmp_path, marks=marks)
    record = only(candidates(outcome), "boost", True)
    assert record["verdict"] == "rejected"
    assert failing(record) == ["val"]
    # A val chunk comes right after the first dev chunk (the improvement test pools val's
    # tasks, so val's chunks keep pace with dev's), so a dev-only win shows on val before
    # the whole dev confirmation is paid for: it is refused by val within the first
    # looks, whatever the improvement gate had decided by then.
    assert record["val"]["looks"] <= 2 and record["looks"] <= 4
    assert record["dev"]["confirm"]["splits"] == ["dev", "val"]
    # Clearly better on dev's own tasks (the pooled test's effect is diluted by val's).
    assert record["dev"]["after"] - record["dev"]["before"] > 0.15
    reason = gates(record)["val"]["reason"]
    assert reason.startswith("val -") and "margin" in reason
    assert record["val"]["after"] < record["val"]["before"]
    assert outcome.promotions == []
    assert outcome.final_config == outcome.start_config
    test_record = next(r for r in outcome.records if r["kind"] == "test")
    assert test_record["delta"] == 0.0
    assert test_record["p_value_two_sided"] == 1.0  # no change is no evidence of one
    assert_no_peeking(outcome, marks)


def test_a_pass_rate_win_that_breaks_the_cost_tolerance_is_refused(
        bench_factory: Callable[..., Path], tmp_path: Path) -> None:
    metrics = {"cost": {"direction": "lower", "max_increase": 0.05, "relative": True}}
    bench = bench_factory(COSTLY, metrics=metrics)
    marks = Marks(bench)
    outcome = search(bench, tmp_path, marks=marks)
    [record] = [r for r in candidates(outcome)
                if r["move"]["target"] == "boost" and r["move"]["after"] is True]
    assert record["verdict"] == "rejected"
    assert failing(record) == ["aux:cost"]
    # A dev win on the screening tasks, refused there: its screening data against the
    # start config put the cost past the tolerance...
    assert record["dev"]["screen"]["status"] == "aux"
    assert record["dev"]["screen"]["effect"] > 0.1
    reason = gates(record)["aux:cost"]["reason"]
    assert reason.startswith("cost +100.0%") and "allowed +5.0%" in reason
    assert "vs the start config" in reason
    assert "not worth a confirmation" in record["why"]
    # ...before a confirmation spent a level of the error budget on it, and before val
    # was opened for it.
    assert "confirm" not in record["dev"] and record.get("looks") is None
    assert not any(c["split"] == "val" and c["config"]["boost"] for c in read_calls(bench))
    assert outcome.promotions == []
    assert_no_peeking(outcome, marks)


def test_a_win_that_drops_a_critical_task_below_its_floor_is_refused(
        bench_factory: Callable[..., Path], tmp_path: Path) -> None:
    bench = bench_factory(BREAKS_CRITICAL, tasks=search_tasks(critical=3),
                          gates={"task_floors": {"critical": 0.8}})
    marks = Marks(bench)
    outcome = search(bench, tmp_path, marks=marks)
    record = only(candidates(outcome), "boost", True)
    assert record["verdict"] == "rejected"
    assert failing(record) == ["floor:critical"]
    assert gates(record)["dev"]["passed"] and gates(record)["val"]["passed"]
    # Floors are checked once the other gates have passed, on the confirmation's dev
    # and val data: every critical dev task, and the critical val tasks it reached.
    reason = gates(record)["floor:critical"]["reason"]
    assert "critical task(s) below floor 80%" in reason
    for task in ("dev/dev-00", "dev/dev-01", "dev/dev-02"):
        assert f"{task} 0% (was 100%)" in reason
    assert "val/val-0" in reason
    assert outcome.promotions == []
    assert_no_peeking(outcome, marks)


def test_an_old_floor_debt_does_not_block_a_real_improvement(
        bench_factory: Callable[..., Path], tmp_path: Path) -> None:
    # The critical tasks sit below the floor before and after: not a regression.
    harness = BOOST.replace('p = 0.8 if config["boost"] else 0.5',
                            'p = 0.8 if config["boost"] else 0.5\n'
                            '    if "critical" in task.tags:\n'
                            '        p = 0.3')
    bench = bench_factory(harness, tasks=search_tasks(critical=3),
                          gates={"task_floors": {"critical": 0.8}})
    outcome = search(bench, tmp_path)
    record = only(candidates(outcome), "boost", True)
    assert record["verdict"] == "promoted", record["gates"]
    assert gates(record)["floor:critical"]["passed"]


def test_noise_is_never_promoted(bench_factory: Callable[..., Path], tmp_path: Path) -> None:
    bench = bench_factory(NOISE, registry=NOISE_REGISTRY, search={"max_steps": 8,
                                                                  "patience": 4})
    screened = 0
    for seed in range(5):
        outcome = search(bench, tmp_path, f"noise{seed}", seed=seed)
        assert outcome.promotions == [], seed
        assert outcome.final_config == outcome.start_config
        screened += len(candidates(outcome))
        for r in candidates(outcome):
            confirm = r.get("dev", {}).get("confirm")
            if confirm:  # a screening fluke gets a test on data it was not chosen on
                assert confirm["stream"] == "dev"
                assert confirm["level"] == pytest.approx(spent_alpha(confirm["index"], 0.05))
    assert screened >= 5 * 5  # every neighbour of the start config was tried each time


def test_a_screening_fluke_is_refused_on_data_it_was_not_chosen_on_at_spent_levels(
        bench_factory: Callable[..., Path], tmp_path: Path) -> None:
    path = bench_factory(LUCKY)
    bench = load_bench(path)
    folder = tmp_path / "run"
    folder.mkdir()
    options = SearchOptions(max_steps=10, patience=3, budget=BudgetSettings(), k=K, seed=7,
                            concurrency=4, timeout_s=10.0)
    # The knob moves are lucky on exactly the attempts screening races on.
    run = Search(bench, bench.defaults, ScriptedProposer([]), options, run_id="lucky",
                 store=RunStore.open(folder),
                 first_moves=[Move(target="knob", before=2, after=3),
                              Move(target="knob", before=2, after=1)])
    state = run.state  # the run's task orders: built once, with the search
    (path.parent / "lucky.json").write_text(
        json.dumps([t.id for t in state.dev_order[:state.chunk]]))
    outcome = run.run()
    confirmed = [r for r in candidates(outcome) if "confirm" in (r.get("dev") or {})]
    seq = [(r["step"], r["move"]["target"], r["move"]["after"], r["verdict"],
            r["dev"]["confirm"]["index"]) for r in confirmed]
    # Each lucky knob move passes screening and is confirmed at once (first improvement),
    # on the other dev tasks and on a fresh block of the screened ones: refused there;
    # the step goes on and boost is promoted at the next level of the sequence. After
    # the promotion the sequence restarts at its first level (one knob move a step).
    # With no untried move left at the new incumbent, knob 3 (refused by the dev gate
    # with a positive screening effect) is close: precision round 1 screens it on 2K
    # attempts a task, which the luck still carries, and confirms it at the next level
    # on attempts 2K..4K-1, where it is refused again.
    assert seq == [(1, "knob", 3, "rejected", 1), (1, "boost", True, "promoted", 2),
                   (2, "knob", 3, "rejected", 1), (3, "knob", 1, "rejected", 2),
                   (4, "knob", 3, "rejected", 3)]
    assert [r.get("precision_round") for r in confirmed] == [None] * 4 + [1]
    for r in confirmed:
        confirm = r["dev"]["confirm"]
        assert confirm["level"] == pytest.approx(spent_alpha(confirm["index"], 0.05))
        if r["move"]["target"] == "knob":
            assert r["dev"]["screen"]["status"] == "pass"
            assert r["dev"]["screen"]["p_value"] < 0.05 and r["tasks_screened"] == state.chunk
            assert failing(r) == ["dev"] and confirm["effect"] < r["dev"]["screen"]["effect"]
    lucky = {(t.id, a) for t in state.dev_order[:state.chunk] for a in range(K)}
    raced = {t.id for t in state.dev_order[:confirmed[-1]["tasks_screened"]]}
    # Not one attempt a knob candidate was chosen on went into its confirmation: a
    # round-0 confirmation ran the screened tasks again on attempts K..2K-1 only (the
    # round-1 race read those of the tasks it raced), the round-1 confirmation every
    # dev task on attempts 2K..4K-1, which no race read.
    fresh = set()
    for call in read_calls(path):
        if call["split"] == "dev" and call["config"]["knob"] != 2:
            if K <= call["attempt"] < 2 * K:
                assert (call["task"], call["attempt"] - K) in lucky or call["task"] in raced
            assert call["attempt"] < 4 * K
            if call["attempt"] >= 2 * K:
                fresh.add(call["task"])
    assert len(fresh) >= state.chunk
    assert outcome.promotions == [{"step": 1, "target": "boost", "before": False,
                                   "after": True}]


# -- proposals ----------------------------------------------------------------------------

class ScriptedProposer(Proposer):
    """Proposes a fixed list of moves each step (some illegal) and records what it saw."""

    name = "scripted"

    def __init__(self, moves: list[Move]) -> None:
        self.moves = moves
        self.seen_tasks: set[str] = set()
        self.observed: list[dict[str, Any]] = []

    def propose(self, view: SearchView, n: int) -> list[Proposal]:
        self.seen_tasks.update(a.task_id for a in view.dev_attempts)
        return [Proposal(move=m, proposer=self.name, reason="scripted") for m in self.moves]

    def observe(self, config: Config, dev_mean: float,
                constraints: Mapping[str, float] | None = None) -> None:
        self.observed.append(dict(config.values))


def test_an_illegal_proposal_is_journaled_as_rejected_and_never_applied(
        bench_factory: Callable[..., Path], tmp_path: Path) -> None:
    path = bench_factory(BOOST, registry=NOISE_REGISTRY)
    bench = load_bench(path)
    out_of_bounds = Move(target="knob", before=3, after=99)
    unknown = Move(target="turbo", before=False, after=True)
    stale = Move(target="mode", before="b", after="c")
    # A step takes one move per setting: each illegal move names another one.
    proposer = ScriptedProposer([out_of_bounds, unknown, stale,
                                 Move(target="boost", before=False, after=True)])
    options = SearchOptions(max_steps=1, patience=3, budget=BudgetSettings(), k=K, seed=7,
                            concurrency=4, timeout_s=10.0)
    folder = tmp_path / "run"
    folder.mkdir()
    outcome = Search(bench, bench.defaults, proposer, options, run_id="s",
                     store=RunStore.open(folder)).run()
    records = candidates(outcome)
    assert [r["move"]["target"] for r in records] == ["knob", "turbo", "mode", "boost"]
    for r in records[:3]:
        assert r["verdict"] == "rejected"
        assert [g["name"] for g in r["gates"]] == ["legal"]
        assert not r["gates"][0]["passed"]
        assert r["proposer"] == "scripted"
    assert "99" in records[0]["gates"][0]["reason"]
    assert "turbo" in records[1]["gates"][0]["reason"]
    assert "stale" in records[2]["gates"][0]["reason"]
    assert records[3]["verdict"] == "promoted"
    configs = {key(c["config"]) for c in read_calls(path)}
    start = dict(bench.defaults.values)
    assert configs == {key(start), key({**start, "boost": True})}
    # The proposer saw dev attempts only, and was told about legal configs only.
    assert proposer.seen_tasks and all(t.startswith("dev-") for t in proposer.seen_tasks)
    assert all(c["knob"] in range(1, 6) for c in proposer.observed)


# -- (f) stop reasons, and what the CLI prints --------------------------------------------

def test_stop_reasons_are_journaled(bench_factory: Callable[..., Path], tmp_path: Path) -> None:
    boost = bench_factory(BOOST)
    noise = bench_factory(NOISE, registry=NOISE_REGISTRY)
    cases: list[tuple[Path, dict[str, Any], str, int]] = [
             (boost, {"max_steps": 1}, "max_steps", 1),
             (noise, {"patience": 1}, "patience", 1),
             # Step 1's promotion leaves some of the 300 for step 2, which the budget cuts.
             (boost, {"budget_rollouts": 300}, "budget_rollouts", 2),
             (boost, {}, "local_optimum", 3)]
    for i, (bench, options, reason, steps) in enumerate(cases):
        outcome = launch_search(bench, journals=tmp_path / "journals", run_id=f"stop{i}",
                                seed=7, proposer="sweep", **options)
        assert outcome.stop_reason == reason
        assert outcome.steps == steps
        stops = [r for r in outcome.records if r["kind"] == "stop"]
        assert len(stops) == 1
        assert stops[0]["reason"] == reason and stops[0]["text"] == STOP_TEXT[reason]
        assert outcome.records[-1]["kind"] == "end"
        assert outcome.records[-1]["stop_reason"] == reason
        on_disk = [json.loads(line) for line in (tmp_path / "journals" / f"stop{i}"
                                                 / "journal.jsonl").read_text().splitlines()]
        assert on_disk == outcome.records


def test_a_search_on_one_task_a_split_runs_to_its_end_and_journals_its_test_check(
        bench_factory: Callable[..., Path], tmp_path: Path) -> None:
    # With one test task the bound over tasks like it is infinite: it died writing that.
    bench = bench_factory(BOOST, tasks=search_tasks(1, 1, 1),
                          metrics={"cost": {"direction": "lower", "max_increase": 0.1,
                                            "relative": True}})
    outcome = launch_search(bench, journals=tmp_path / "journals", run_id="one", seed=7,
                            proposer="sweep")
    [test] = [r for r in outcome.records if r["kind"] == "test"]
    [cost, unscored] = test["aux"]
    assert unscored["name"] == "unscored" and unscored["details"]["status"] == "within"
    assert test["n_tasks"] == 1 and cost["details"]["bound_new_tasks"] is None
    assert "none on tasks like them from one task" in cost["reason"]
    assert outcome.records[-1]["kind"] == "end"


@pytest.mark.parametrize(("options", "text"), [
    (["--max-steps", "1"], "stopped after 1 steps: reached max_steps"),
    ([], "stopped after 3 steps: no untried move (step or jump) of the incumbent is left"),
])
def test_the_stop_reason_is_printed(bench_factory: Callable[..., Path], tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str], options: list[str],
                                    text: str) -> None:
    bench = bench_factory(BOOST)
    code = main(["search", str(bench), "--journals", str(tmp_path / "j"), "--run-id", "p",
                 "--proposer", "sweep", *options])
    out = capsys.readouterr().out
    assert code == 0
    assert text in " ".join(out.split())
    assert "promoted: boost False->True" in out


def test_the_live_view_says_nothing_of_racing_savings_it_does_not_know(
        bench_factory: Callable[..., Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    bench = bench_factory(BOOST)
    code = main(["search", str(bench), "--journals", str(tmp_path / "j"), "--run-id", "p",
                 "--proposer", "sweep", "--max-steps", "1"])
    out = capsys.readouterr().out
    assert code == 0 and "rollouts" in out
    assert "None saved by racing" not in out


# -- (g) the --json contract ------------------------------------------------------------------

def test_search_json_prints_only_the_result_object(
        bench_factory: Callable[..., Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    bench = bench_factory(BOOST)
    code = main(["search", str(bench), "--journals", str(tmp_path / "j"), "--run-id", "js",
                 "--json", "--seed", "7"])
    out, err = capsys.readouterr()
    assert code == 0
    result = json.loads(out)  # the whole of stdout is one JSON document
    assert set(result) == {"run_id", "stop_reason", "steps", "promotions", "start_config",
                           "final_config", "rollouts_used", "dev", "val", "test", "unscored",
                           "power"}
    assert result["run_id"] == "js"
    assert result["stop_reason"] == "local_optimum"
    assert result["promotions"] == [{"step": 1, "target": "boost", "before": False,
                                     "after": True}]
    assert result["start_config"] == {"boost": False, "knob": 2}
    assert result["final_config"] == {"boost": True, "knob": 2}
    assert isinstance(result["steps"], int) and isinstance(result["rollouts_used"], int)
    for split in ("dev", "val", "test"):
        block = result[split]
        assert set(block) == {"start", "final", "delta", "ci_low", "ci_high"}
        assert block["ci_low"] < block["delta"] < block["ci_high"]
        assert block["delta"] == pytest.approx(block["final"] - block["start"])
        # Every attempt of this harness is scored: counted, and none unscored.
        for side in ("start", "final"):
            counts = result["unscored"][split][side]
            assert counts["n_attempts"] > 0 and counts["n_unscored"] == 0
            assert counts["unscored_by_reason"] == {} and counts["tasks_without_score"] == []
    assert "step" in err  # the live view went to stderr
    lines = (tmp_path / "j" / "js" / "journal.jsonl").read_text().splitlines()
    end = json.loads(lines[-1])
    power = result.pop("power")  # the start record's, not the end's
    assert {k: end[k] for k in result if k != "unscored"} == \
        {k: v for k, v in result.items() if k != "unscored"}
    assert power == json.loads(lines[0])["power"] and power["n_tasks"] > 0


# -- (h) the rollout budget --------------------------------------------------------------------

CHUNK = 2 * K * CHUNK_TASKS  # a chunk of tasks x K, incumbent and candidate


@pytest.mark.parametrize("budget", [100, 200, 300, 450])
def test_the_rollout_budget_is_honoured_within_one_chunk(
        bench_factory: Callable[..., Path], tmp_path: Path, budget: int) -> None:
    bench = bench_factory(BOOST)
    outcome = search(bench, tmp_path, f"b{budget}", budget_rollouts=budget)
    assert outcome.stop_reason == "budget_rollouts"
    stop = next(r for r in outcome.records if r["kind"] == "stop")
    total = stop["rollouts_total"]
    assert total <= budget + CHUNK
    last = candidates(outcome)[-1]
    if last["verdict"] != "skipped":
        # The budget ran out with a decision, and the search stopped before the next step.
        assert total >= budget
    else:
        # Cut short where the next chunk or look did not fit, or held back for want of
        # the budget its confirmation needs (forge.search.deferral), and journaled with why.
        assert (last["why"] == "budget spent during confirmation"
                or last["why"].startswith("budget spent during screening")
                or ("deferred" in last and last["why"].endswith(
                    "the search stopped first (budget_rollouts)"))), last["why"]
    # Every harness call before the stop was asked for by the search (the test split,
    # opened after it, is outside the search's budget).
    calls = read_calls(bench)
    assert sum(c["split"] != "test" for c in calls) == total
    assert outcome.rollouts_used == len(calls)


def test_tolerances_do_not_add_up_across_moves_and_the_test_check_agrees(
        bench_factory: Callable[..., Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    metrics = {"cost": {"direction": "lower", "max_increase": 0.10, "relative": True}}
    bench = bench_factory(TWO_SMALL_COSTS, metrics=metrics)
    code = main(["search", str(bench), "--journals", str(tmp_path / "j"), "--run-id", "r",
                 "--proposer", "sweep", "--seed", "7"])
    out = capsys.readouterr().out
    assert code == 0
    records = [json.loads(line) for line in
               (tmp_path / "j" / "r" / "journal.jsonl").read_text().splitlines()]
    promoted = [r for r in records if r.get("verdict") == "promoted"]
    assert [(r["move"]["target"], r["move"]["after"]) for r in promoted] == [("boost", True)]
    [first] = promoted
    assert gates(first)["aux:cost"]["passed"] and "+8.0%" in gates(first)["aux:cost"]["reason"]
    assert first["aux"]["cost"]["vs"] == "start"
    # knob 2 -> 3 would add 8% to the new incumbent's cost, within 10% of it, but 16.6%
    # to the start's: refused, against the start config.
    [second] = [r for r in records if r.get("move") == {"target": "knob", "before": 2,
                                                        "after": 3}]
    assert second["verdict"] == "rejected" and failing(second) == ["aux:cost"]
    reason = gates(second)["aux:cost"]["reason"]
    assert reason.startswith("cost +16.6%") and "vs the start config" in reason
    # The end check on test, start to final, shows what the gates promised.
    [test] = [r for r in records if r["kind"] == "test"]
    [cost, unscored] = test["aux"]
    assert unscored["name"] == "unscored" and unscored["passed"]
    assert cost["name"] == "aux:cost" and cost["passed"]
    assert cost["details"]["status"] == "within" and cost["reason"].startswith("cost +8.0%")
    assert "start -> final on test, within: cost +8.0%" in " ".join(out.split())
    # The test split ran 20 attempts a task (TEST_K), not the search's k, both configs.
    assert test["k"] == 20 and K < 20
    n_test = len(load_bench(bench).tasks("test"))
    assert sum(c["split"] == "test" for c in read_calls(bench)) == 2 * 20 * n_test
    run = json.loads((tmp_path / "j" / "r" / "run.json").read_text())
    assert "test_k" not in run["options"]  # the search's constant, not an option
    capsys.readouterr()
    assert main(["journal", "show", "r", "--journals", str(tmp_path / "j")]) == 0
    assert "within tolerance vs start: cost +8.0%" in " ".join(capsys.readouterr().out.split())


class _TooManyFingerprints(Exception):
    pass


def test_a_search_of_2000_settings_fingerprints_the_configs_it_screens_not_each_move(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each candidate move was keyed by its moved config's fingerprint (a hash of every
    # setting), and the proposer checked each suggestion the same way: a step cost the
    # square of the settings (39.5 s to a first candidate at 1,000 settings, none in
    # 600 s at 10,000). A fingerprint is now computed for the configs a search runs;
    # counted here (every config fingerprint and registry digest goes through
    # registry.digest_of), and stopped at once past the count, so a regression fails
    # in seconds rather than running for minutes.
    import forge.config.registry

    n = 2000
    kinds = ["{type: int, min: 0, max: 10, default: 5}",
             "{type: float, min: 0.0, max: 1.0, step: 0.1, default: 0.5}",
             "{type: bool, default: false}", "{type: enum, choices: [a, b, c], default: a}"]
    registry = "name: wide\nsettings:\n  boost: {type: bool, default: false}\n" + "".join(
        f"  s{i:04d}: {kinds[i % 4]}\n" for i in range(n - 1))
    bench = write_search_bench(tmp_path / "wide", """
def run(config, task, ctx):
    p = 0.8 if config["boost"] else 0.5
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong"}
""", registry=registry, tasks=search_tasks(12, 6, 6), k=2)
    limit = 100
    counted = 0
    digest_of = forge.config.registry.digest_of

    def counting(value: Any) -> str:
        nonlocal counted
        counted += 1
        if counted > limit:
            raise _TooManyFingerprints(f"more than {limit} fingerprints")
        return digest_of(value)

    monkeypatch.setattr(forge.config.registry, "digest_of", counting)
    outcome = search(bench, tmp_path, proposer="auto", max_steps=1)
    screened = {r["candidate"] for r in candidates(outcome) if r.get("candidate")}
    assert len(screened) >= 4  # the step's candidates, each run on its first chunk
    assert counted <= len(screened) + 5  # those, the start config and the registry
