"""What issue 14's search promises a user, each shown on a tiny deterministic bench:

- tolerances are anchored at the start config, so they do not add up along a path;
- a refusal by val is remembered across incumbents and not confirmed again for nothing;
  one by a tolerance is offered again first once a promotion has made room under it;
- a confirmation is sequential: a strong effect stops it early and cheaply;
- on a bench where nothing has an effect, searches promote nothing, but for at most
  ``alpha`` of them (the error guarantee);
- every rollout the search counts belongs to a journaled record, also when the budget
  cuts a screening or a confirmation short;
- once no untried move is left, a close decision is screened again on more attempts a
  task and confirmed on attempts its selection never read.

The harnesses are test doubles as in test_search.py: success is
``random.Random(ctx.seed)`` below a probability the settings decide, so two configs
see the same random numbers on the same seeds.
"""

from __future__ import annotations

import functools
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import COSTLY_BOOST, read_calls, search_tasks, write_search_bench
from rich.console import Console
from scipy import stats as st

from forge.bench.loader import Bench, BudgetSettings, load_bench
from forge.config.moves import Move, candidate_moves
from forge.config.registry import Config
from forge.evaluation.evaluate import evaluate
from forge.journal.records import parse_record
from forge.journal.run_store import RunStore
from forge.proposers import Proposal, Proposer, SweepProposer
from forge.proposers import SearchView as ProposerView
from forge.report.live import LiveView
from forge.search.launch import launch_search
from forge.search.loop import Search
from forge.search.options import SearchOptions
from forge.search.outcome import SearchOutcome

K = 4


def candidates(outcome: SearchOutcome) -> list[dict[str, Any]]:
    return [r for r in outcome.records if r["kind"] == "candidate"]


def failing(record: dict[str, Any]) -> list[str]:
    return [g["name"] for g in record["gates"] if not g["passed"]]


def run_search(bench: Bench, folder: Path, *, seed: int = 7, **options: Any) -> SearchOutcome:
    """A search with the sweep proposer and ``options`` beyond the CLI's (run_test)."""
    folder.mkdir(parents=True)
    settings: dict[str, Any] = {"max_steps": 10, "patience": 3, "budget": BudgetSettings(),
                                "k": K, "seed": seed, "concurrency": 4, "timeout_s": 10.0,
                                **options}
    return Search(bench, bench.defaults, SweepProposer(), SearchOptions(**settings),
                  run_id=folder.name, store=RunStore.open(folder)).run()


# -- (a) tolerances anchored at the start ------------------------------------------------------

COMPOUND_REGISTRY = """\
name: compound
settings:
  level: {type: int, min: 0, max: 6, step: 1, default: 0}
"""

#: Each step of level adds 0.12 to the success probability and 4.5% to the cost.
COMPOUND = """
def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.2 + 0.12 * config["level"]
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong", "cost": 1.045 ** config["level"]}
"""
TEN_PERCENT = {"cost": {"direction": "lower", "max_increase": 0.10, "relative": True}}


def test_a_start_anchored_tolerance_refuses_the_step_that_would_take_the_path_past_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_search_bench(tmp_path / "bench", COMPOUND, registry=COMPOUND_REGISTRY, k=K,
                              metrics=TEN_PERCENT)
    bench = load_bench(path)
    # Steps only, so that the path is level 0 -> 1 -> 2 -> 3 and nothing else.
    monkeypatch.setattr("forge.search.proposals.candidate_moves",
                        functools.partial(candidate_moves, jumps=False))
    outcome = run_search(bench, tmp_path / "run")
    assert outcome.promotions == [{"step": s, "target": "level", "before": s - 1, "after": s}
                                  for s in (1, 2)]
    assert outcome.final_config == {"level": 2}
    for r in candidates(outcome):
        if r["verdict"] == "promoted":  # each within 10% of the start: +4.5%, then +9.2%
            assert r["aux"]["cost"]["vs"] == "start"
            assert r["aux"]["cost"]["after"] / r["aux"]["cost"]["before"] < 1.10
    # The third step wins on dev, and costs 4.5% more than its incumbent, well within 10%
    # of it; but 14.1% more than the start: refused.
    [third] = [r for r in candidates(outcome) if r["move"] == {"target": "level", "before": 2,
                                                               "after": 3}]
    assert third["verdict"] == "rejected" and failing(third) == ["aux:cost"]
    reason = next(g["reason"] for g in third["gates"] if g["name"] == "aux:cost")
    assert reason.startswith("cost +14.1%") and "vs the start config" in reason
    two, three = (evaluate(bench, bench.registry.with_values(bench.defaults, {"level": v}),
                           k=2).summary() for v in (2, 3))
    assert three["mean_score"] > two["mean_score"]  # a dev win, as each step before it
    per_move = three["metrics"]["cost"] / two["metrics"]["cost"]
    assert per_move == pytest.approx(1.045) and per_move < 1.10
    # The end check on test agrees with what the gates promised: within, start to final.
    [test] = [r for r in outcome.records if r["kind"] == "test"]
    [cost, _] = test["aux"]
    assert cost["details"]["status"] == "within" and cost["reason"].startswith("cost +9.2%")


def test_with_jumps_the_path_stays_within_the_tolerance_too(tmp_path: Path) -> None:
    # Jumps to level 3 and beyond, from the start or later, are refused just the same:
    # no path, of steps or jumps, ends past +10% of the start's cost.
    path = write_search_bench(tmp_path / "bench", COMPOUND, registry=COMPOUND_REGISTRY, k=K,
                              metrics=TEN_PERCENT)
    outcome = launch_search(path, journals=tmp_path / "journals", run_id="j", seed=7,
                            proposer="sweep")
    assert outcome.promotions and outcome.final_config["level"] <= 2
    refused = [r for r in candidates(outcome) if r["move"]["after"] >= 3]
    assert {r["move_kind"] for r in refused} == {"jump"}
    assert all(failing(r) == ["aux:cost"] for r in refused)
    [test] = [r for r in outcome.records if r["kind"] == "test"]
    assert [a["details"]["status"] for a in test["aux"]] == ["within", "within"]


# -- (c) a refusal remembered across incumbents ------------------------------------------------

MEMORY_REGISTRY = """\
name: memory
settings:
  boost: {type: bool, default: false}
  overfit: {type: bool, default: false}
"""

#: boost is a real gain; overfit wins on dev (+0.25) and loses on val (-0.2), at any
#: incumbent.
DEV_ONLY = """
def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.4 + 0.25 * config["boost"]
    if config["overfit"]:
        p += 0.25 if ctx.split == "dev" else -0.2
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong"}
"""


def test_a_val_refusal_is_not_confirmed_again_after_a_later_promotion(tmp_path: Path) -> None:
    path = write_search_bench(tmp_path / "bench", DEV_ONLY, registry=MEMORY_REGISTRY, k=K,
                              search={"max_steps": 3})
    overfit = Move(target="overfit", before=False, after=True)
    # Both queued first at every step they are untried (as the runtime mutator's
    # first moves are): overfit, then boost.
    outcome = launch_search(path, journals=tmp_path / "journals", run_id="m", seed=7,
                            proposer="sweep",
                            first_moves=[overfit, Move(target="boost", before=False,
                                                       after=True)])
    assert outcome.promotions == [{"step": 1, "target": "boost", "before": False,
                                   "after": True}]
    tries = [r for r in candidates(outcome) if r["move"] == overfit.model_dump()]
    first, again = tries[0], tries[1]
    # Step 1: confirmed, and refused by val (a dev-only win).
    assert (first["step"], first["verdict"], failing(first)) == (1, "rejected", ["val"])
    # Step 2, against the new incumbent: it passes screening as strongly as before, and
    # is held back, not confirmed again: no new evidence.
    assert again["step"] == 2 and again["incumbent"] != first["incumbent"]
    assert again["verdict"] == "rejected" and again["dev"]["screen"]["status"] == "held"
    assert again["why"] == ("refused by val at step 1, and its screening here brings no "
                            "new evidence: not confirmed again")
    assert "confirm" not in again["dev"] and again.get("looks") is None
    assert again["rollouts"] == again["tasks_screened"] * K  # its screening only
    both = {"boost": True, "overfit": True}
    assert not any(c["split"] == "val" and c["config"] == both for c in read_calls(path))


ROOM_REGISTRY = """\
name: room
settings:
  wide:  {type: bool, default: false}
  lean:  {type: bool, default: false}
  other: {type: bool, default: false}
"""

#: wide and lean each add 0.3 to the success probability, other 0.1; wide costs 20%
#: more (past a 10% tolerance from the start), lean 20% less: after lean, wide is within.
ROOM = """
def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.2 + 0.3 * config["wide"] + 0.3 * config["lean"] + 0.1 * config["other"]
    ok = random.Random(ctx.seed).random() < p
    cost = (1.2 if config["wide"] else 1.0) * (0.8 if config["lean"] else 1.0)
    return {"output": task.expected if ok else "wrong", "cost": cost}
"""


class InOrder(Proposer):
    """Proposes the untried moves in the order of settings ``orders`` gives for the
    step (a scripted proposer: the memory's offers are what is under test)."""

    name = "in-order"

    def __init__(self, orders: dict[int, list[str]]) -> None:
        self.orders = orders

    def propose(self, view: ProposerView, n: int) -> list[Proposal]:
        order = self.orders[view.step]
        moves = sorted(view.untried, key=lambda m: order.index(m.target))
        return [Proposal(move=m, proposer=self.name, reason="scripted") for m in moves[:n]]

    def observe(self, config: Config, dev_mean: float,
                constraints: Mapping[str, float] | None = None) -> None:
        """Nothing to learn."""


def test_a_tolerance_refusal_is_offered_again_once_a_promotion_made_room(
        tmp_path: Path) -> None:
    path = write_search_bench(tmp_path / "bench", ROOM, registry=ROOM_REGISTRY, k=K,
                              metrics=TEN_PERCENT)
    bench = load_bench(path)
    folder = tmp_path / "run"
    folder.mkdir()
    options = SearchOptions(max_steps=3, patience=3, budget=BudgetSettings(), k=K, seed=7,
                            concurrency=4, timeout_s=10.0, candidates_per_step=1)
    # From step 3 the proposer would try other before wide.
    proposer = InOrder({1: ["wide", "lean", "other"], 2: ["lean", "other", "wide"],
                        3: ["other", "wide", "lean"]})
    outcome = Search(bench, bench.defaults, proposer, options, run_id="room",
                     store=RunStore.open(folder)).run()
    steps = {r["step"]: r for r in candidates(outcome)}
    # Step 1: wide wins on dev and costs 20% more than the start: refused at screening.
    assert steps[1]["move"]["target"] == "wide" and failing(steps[1]) == ["aux:cost"]
    # Step 2: lean, 20% cheaper, promoted: the incumbent now has room under the tolerance.
    assert steps[2]["move"]["target"] == "lean" and steps[2]["verdict"] == "promoted"
    third = steps[3]
    # The memory offers wide first, saying why, and it is promoted: 0.96 of the start's
    # cost, within the tolerance, which the end check on test agrees with.
    assert (third["move"]["target"], third["proposer"]) == ("wide", "memory")
    assert third["reason"].startswith("screened +") and third["reason"].endswith(
        "refused there by the cost tolerance; this incumbent has brought cost down against "
        "the start since: room under it now")
    assert third["verdict"] == "promoted"
    assert third["aux"]["cost"]["after"] / third["aux"]["cost"]["before"] == pytest.approx(0.96)
    assert outcome.final_config == {"wide": True, "lean": True, "other": False}
    [test] = [r for r in outcome.records if r["kind"] == "test"]
    assert [a["details"]["status"] for a in test["aux"]] == ["within", "within"]


# -- (d) a sequential confirmation stops early ---------------------------------------------------

#: boost lifts the success probability from 0.3 to 0.9: a strong effect.
STRONG = """
def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.9 if config["boost"] else 0.3
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong"}
"""


def test_a_strong_effect_stops_its_confirmation_early(tmp_path: Path) -> None:
    n_dev, n_val, chunks = 40, 30, 6
    path = write_search_bench(tmp_path / "bench", STRONG, k=K,
                              tasks=search_tasks(n_dev, n_val, 10))
    outcome = launch_search(path, journals=tmp_path / "journals", run_id="d", seed=7,
                            proposer="sweep", first_moves=[Move(target="boost", before=False,
                                                                after=True)])
    [record] = [r for r in candidates(outcome) if r["verdict"] == "promoted"]
    confirm = record["dev"]["confirm"]
    # A look per chunk of dev tasks; the dev gate crossed its boundary before the last.
    assert confirm["looks"] < chunks and record["looks"] < 2 * chunks
    assert confirm["n_tasks"] < n_dev
    assert f"look {confirm['looks']})" in record["gates"][0]["reason"]
    assert confirm["p_value"] < confirm["nominal"] < confirm["level"]
    assert record["val"]["looks"] < chunks and record["val"]["n_tasks"] < n_val
    # Cheaper than a full confirmation: both configs on every dev and val task again.
    spent = record["rollouts"] - record["screening_rollouts"]
    assert 0 < spent < 2 * K * (n_dev + n_val) / 2


# -- (e) the error guarantee on a bench where nothing has an effect -----------------------------

NULL_REGISTRY = """\
name: noeffect
settings:
  boost: {type: bool, default: false}
  flag:  {type: bool, default: false}
  knob:  {type: int, min: 1, max: 9, step: 1, default: 5}
  level: {type: int, min: 0, max: 4, step: 1, default: 2}
  mode:  {type: enum, choices: [a, b, c, d], default: a}
"""

#: Every setting changes the outcome of every attempt, none its probability (0.5):
#: as benchmarks/benches/noeffect.
NO_EFFECT = """
def run(config, task, ctx):
    rng = random.Random(f"{ctx.seed}:{_json.dumps(config, sort_keys=True)}")
    ok = rng.random() < 0.5
    return {"output": task.expected if ok else "wrong"}
"""

SEARCHES, ALPHA = 40, 0.05
#: Under the guarantee each search promotes with probability <= ALPHA, independently
#: across seeds, so the searches that promote are at most Binomial(40, 0.05): more than
#: MAX_PROMOTING happens with probability 0.0034 if the guarantee holds. A search that
#: promoted falsely one time in four (repeated looks at a fixed level, say) would pass
#: this test with probability below 0.1.
MAX_PROMOTING = 6


@pytest.mark.slow
def test_searches_on_a_no_effect_bench_promote_nothing_but_for_alpha_of_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert st.binom.sf(MAX_PROMOTING, SEARCHES, ALPHA) < 0.005
    # A val margin this wide passes any non-loss: the dev confirmation alone stands
    # between noise and a promotion. Screening at 0.5 selects many candidates for it:
    # selection spends none of the error budget, so the guarantee must hold regardless.
    path = write_search_bench(tmp_path / "bench", NO_EFFECT, registry=NULL_REGISTRY, k=2,
                              tasks=search_tasks(20, 10, 2), gates={"val_margin": 0.5})
    bench = load_bench(path)
    monkeypatch.setattr("forge.search.loop.SCREEN_ALPHA", 0.5)
    promoting = confirmations = precise = 0
    for seed in range(SEARCHES):
        # Steps enough to try every move and then the precision rounds: the close moves
        # screened again on 2K and 4K attempts a task and confirmed on fresh ones.
        outcome = run_search(bench, tmp_path / f"run{seed}", seed=seed, k=2, max_steps=12,
                             patience=12, run_test=False)
        confirmed = [r for r in candidates(outcome) if r.get("looks") is not None]
        confirmations += len(confirmed)
        precise += sum(r.get("precision_round") is not None for r in confirmed)
        promoting += bool(outcome.promotions)
    assert confirmations >= 2 * SEARCHES  # the guarantee was put to the test
    assert precise >= SEARCHES // 2  # and so were the precision rounds'
    assert promoting <= MAX_PROMOTING


# -- (f) every rollout belongs to a journaled record ---------------------------------------------

#: boost and knob 3 are each a real gain, at 2% more cost each (a 10% tolerance).
TWO_GAINS = """
def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.3 + 0.3 * config["boost"] + 0.3 * (config["knob"] == 3)
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong",
            "cost": 1.02 ** (config["boost"] + (config["knob"] == 3))}
"""


def test_every_rollout_counted_belongs_to_a_journaled_record_when_the_budget_cuts_in(
        tmp_path: Path) -> None:
    path = write_search_bench(tmp_path / "bench", TWO_GAINS, k=K, metrics=TEN_PERCENT,
                              tasks=search_tasks(20, 15, 4))
    cuts: set[str] = set()
    after_promotion = 0
    for budget in range(60, 460, 40):
        outcome = launch_search(path, journals=tmp_path / "journals", run_id=f"b{budget}",
                                seed=7, proposer="sweep", budget_rollouts=budget)
        start = next(r for r in outcome.records if r["kind"] == "start")
        stop = next(r for r in outcome.records if r["kind"] == "stop")
        journaled = start["rollouts_total"] + sum(r.get("rollouts") or 0
                                                  for r in candidates(outcome))
        assert journaled == stop["rollouts_total"], budget
        calls = read_calls(path)
        assert sum(c["split"] != "test" for c in calls) == stop["rollouts_total"]
        (path.parent / "calls.log").unlink()
        last = candidates(outcome)[-1]
        if stop["reason"] == "budget_rollouts" and last["verdict"] == "skipped":
            why = last["why"]
            cuts.add(why.split(" (")[0])
            if why == "budget spent during confirmation":
                # Passed screening, started its confirmation: both journaled with it.
                assert last["dev"]["screen"]["status"] == "pass"
                assert last["rollouts"] >= last["screening_rollouts"] > 0
            if why.startswith("passed screening"):
                # Held back for want of the budget its confirmation needs (forge.search.deferral)
                # and the search stopped first: journaled with its screening.
                assert "deferred" in last
                assert why.endswith("not confirmed: the search stopped first (budget_rollouts)")
                assert last["rollouts"] == last["screening_rollouts"] > 0
            if outcome.promotions:
                after_promotion += 1
    assert cuts == {"budget spent during screening", "budget spent during confirmation",
                    "passed screening"}
    assert after_promotion  # also where the start config is no longer the incumbent


# -- a step is not spent on a move tried before (a forge bug this file found, fixed) ---------



def test_a_step_is_not_spent_on_a_move_tried_before(tmp_path: Path) -> None:
    path = write_search_bench(tmp_path / "bench", COSTLY_BOOST, tasks=search_tasks(24, 20, 20),
                              metrics={"cost": {"direction": "lower", "max_increase": 0.25,
                                                "relative": True}})
    outcome = launch_search(path, run_id="r1", journals=tmp_path / "journals")
    # Today: steps 3 and 4 each propose knob 2 -> 1 again (TPE's suggestion), which is
    # skipped as already tried and takes knob's one place in the step; knob 2 -> 3 is
    # never screened at the new incumbent and the search stops on patience.
    wasted = [(r["step"], r["proposer"], json.dumps(r["move"])) for r in candidates(outcome)
              if r.get("why") == "already tried against this incumbent"]
    assert wasted == []
    assert any(r["move"] == {"target": "knob", "before": 2, "after": 3}
               and r["incumbent"] == outcome.end.final_fingerprint
               for r in candidates(outcome)) or outcome.stop_reason != "patience"


# -- (g) close decisions get more precision once no untried move is left ----------------------

SMALL_REGISTRY = """\
name: small
settings:
  boost: {type: bool, default: false}
  knob:  {type: int, min: 1, max: 3, step: 1, default: 2}
"""

#: boost adds 1.5 points: too little for K = 4 attempts a task on 40 dev and 30 val tasks
#: (the improvement test pairs both) to prove as a rule, enough for 8 or 16.
SMALL_GAIN = """
def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.5 + 0.015 * config["boost"]
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong"}
"""


def test_a_close_decision_is_screened_again_on_more_attempts_and_confirmed_on_fresh_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    promoted: dict[int, list[dict[str, Any]]] = {0: [], 2: []}
    for seed in range(6):
        for rounds in (0, 2):
            path = write_search_bench(tmp_path / f"b{seed}-{rounds}", SMALL_GAIN,
                                      registry=SMALL_REGISTRY, tasks=search_tasks(40, 30, 2))
            monkeypatch.setattr("forge.search.loop.PRECISION_ROUNDS", rounds)
            outcome = run_search(load_bench(path), tmp_path / f"run{seed}-{rounds}",
                                 seed=seed, max_steps=12, patience=12, run_test=False)
            assert outcome.stop_reason == "local_optimum"
            won = [r for r in candidates(outcome) if r["verdict"] == "promoted"]
            promoted[rounds] += won
            for r in won:
                if rounds == 0:
                    assert "precision_round" not in r
                    continue
                if "precision_round" not in r:
                    continue  # proven at K attempts already
                m = 2 ** r["precision_round"]
                assert r["proposer"] == "memory" and "precision round" in r["reason"]
                # Chosen on attempts 0..mK-1 of the dev tasks, confirmed on mK..2mK-1
                # of every dev and val task: never on an attempt its selection read.
                late = [c for c in read_calls(path) if c["config"]["boost"]
                        and c["split"] in {"dev", "val"} and c["attempt"] >= m * K]
                assert late and all(c["attempt"] < 2 * m * K for c in late)
                assert {c["split"] for c in late} == {"dev", "val"}
                # The reviewer sees which decision had the extra precision.
                mark = f"(precision round {r['precision_round']})"
                console = Console(record=True, width=200, file=io.StringIO())
                view = LiveView(console)
                for line, record in enumerate(outcome.records, 1):
                    view.on_record(parse_record(record, file=Path("journal.jsonl"), line=line))
                assert mark in console.export_text()
    # Without precision rounds the gain is found in at most two of six searches; with
    # them in all six, some of them in the second round (16 attempts a task).
    assert len(promoted[0]) <= 2
    assert len(promoted[2]) == 6
    assert {r.get("precision_round") for r in promoted[2]} >= {1, 2}
