"""The confirmation (forge/search/confirm.py) through whole searches: its improvement
gate pools the val tasks with dev's, its tolerances, their extension block, its floors.

The improvement gate's power is bounded by the tasks it pairs, not by the attempts a
task: between-task spread dominates. A move whose gain dev's few tasks cannot show at
its level must be shown on dev and val together.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import search_tasks, stored_rows, write_search_bench
from scipy.stats import binom

from forge.bench.loader import BudgetSettings, load_bench
from forge.journal.run_store import RunStore
from forge.proposers import SweepProposer
from forge.search.confirm import EXTENSION_SHARE
from forge.search.loop import Search
from forge.search.options import SearchOptions
from forge.search.outcome import SearchOutcome

# Outcomes fixed by the task, not the seed: the incumbent passes the even tasks; boost
# passes these too and 3 of every 8 odd ones. On 8 dev tasks that is +0.375 with p =
# 0.040 (t, 7 df) on every fresh block alike: past the 0.0304 of a first confirmation
# whatever the attempts. On dev and val together (8 + 16 tasks) it is p = 0.0006.
FIXED_GAIN = """
def run(config, task, ctx):
    record(config, task, ctx)
    i = int(task.id.split("-")[1])
    ok = i % 2 == 0 or (config["boost"] and i % 8 in (1, 3, 5))
    return {"output": task.expected if ok else "wrong"}
"""

REGISTRY = """\
name: s
settings:
  boost: {type: bool, default: false}
"""


def search(tmp_path: Path, name: str, **options: Any) -> SearchOutcome:
    path = tmp_path / "bench"
    if not path.exists():
        write_search_bench(path, FIXED_GAIN, registry=REGISTRY, k=2,
                           tasks=search_tasks(8, 16, 2))
    bench = load_bench(path)
    folder = tmp_path / name
    folder.mkdir()
    settings: dict[str, Any] = {"max_steps": 1, "patience": 1, "budget": BudgetSettings(),
                                "k": 2, "seed": 1, "concurrency": 2, "timeout_s": 10.0,
                                "run_test": False, **options}
    return Search(bench, bench.defaults, SweepProposer(), SearchOptions(**settings),
                  run_id=name, store=RunStore.open(folder)).run()


def boost_record(outcome: SearchOutcome) -> dict[str, Any]:
    """boost's last record: a hasty race may have paused it first (8 dev tasks cannot
    show its gain as it stands), and its race went on in the same step."""
    *paused, record = [r for r in outcome.records
                       if r["kind"] == "candidate" and r["move"]["target"] == "boost"]
    assert all(r["dev"]["screen"]["status"] == "paused" for r in paused)
    return record


def test_a_gain_too_few_dev_tasks_cannot_show_is_shown_on_dev_and_val_together(
        tmp_path: Path) -> None:
    pooled = boost_record(search(tmp_path, "pooled"))
    assert pooled["verdict"] == "promoted"
    confirm = pooled["dev"]["confirm"]
    assert confirm["splits"] == ["dev", "val"]
    assert confirm["n_tasks"] > 8  # val's tasks are in the test
    assert confirm["p_value"] < confirm["level"] == 0.05 * 6 / 3.141592653589793 ** 2
    dev_gate = next(g for g in pooled["gates"] if g["name"] == "dev")
    assert dev_gate["passed"] and dev_gate["reason"].startswith("dev+val +0.")
    # val keeps its own gate, on val alone.
    val_gate = next(g for g in pooled["gates"] if g["name"] == "val")
    assert val_gate["passed"] and pooled["val"]["n_tasks"] <= 16


# -- the tolerances: an intersection-union test, each metric at alpha -------------------------

TOLERANCE_REGISTRY = """\
name: s
settings:
  boost: {type: bool, default: false}
"""

#: boost passes every task (a gain no gate can miss) and costs the start's 1.0 plus a
#: ``lift`` and ``spread`` the test sets: ``spread`` alternates by task (fixed, not
#: seeded) or, with ``noisy``, is drawn per attempt. Three more metrics are unchanged.
TOLERANCE_HARNESS = """
LIFT, SPREAD, NOISY = {lift}, {spread}, {noisy}

def run(config, task, ctx):
    record(config, task, ctx)
    rng = random.Random(ctx.seed)
    i = int(task.id.split("-")[1])
    ok = config["boost"] or rng.random() < 0.5
    if not config["boost"]:
        extra = 0.0
    elif NOISY:
        extra = LIFT + rng.gauss(0.0, SPREAD)
    else:
        extra = LIFT + (SPREAD if i % 2 else -SPREAD)
    return {{"output": task.expected if ok else "wrong", "cost": 1.0 + extra,
             "metrics": {{"wait_ms": 100.0, "harm": 0.0, "steps": 2.0}}}}
"""

FOUR_TOLERANCES = {"cost": {"direction": "lower", "max_increase": 0.10, "relative": True},
                   "wait_ms": {"direction": "lower", "max_increase": 0.25, "relative": True},
                   "harm": {"direction": "lower", "max_increase": 0.01},
                   "steps": {"direction": "lower", "max_increase": 0.25, "relative": True}}


def boost_outcomes(tmp_path: Path, *, lift: float, spread: float, noisy: bool,
                   seeds: range) -> list[dict[str, Any]]:
    """boost's first candidate record in one single-step search per seed."""
    path = write_search_bench(
        tmp_path / "bench", TOLERANCE_HARNESS.format(lift=lift, spread=spread, noisy=noisy),
        registry=TOLERANCE_REGISTRY, k=4, metrics=FOUR_TOLERANCES)
    bench = load_bench(path)
    out = []
    for seed in seeds:
        folder = tmp_path / f"run-{seed}"
        folder.mkdir()
        options = SearchOptions(max_steps=1, patience=1, budget=BudgetSettings(), k=4,
                                seed=seed, concurrency=4, timeout_s=10.0, run_test=False)
        outcome = Search(bench, bench.defaults, SweepProposer(), options, run_id=folder.name,
                         store=RunStore.open(folder)).run()
        out.append(boost_record(outcome))
    return out


def boost_step(tmp_path: Path, harness: str, *, k: int, seed: int, concurrency: int = 4,
               **bench: Any) -> dict[str, Any]:
    """boost's record in a single-step search of a bench of ``harness`` (``bench``: the
    rest of ``write_search_bench``'s arguments)."""
    bench.setdefault("registry", REGISTRY)
    path = write_search_bench(tmp_path / "bench", harness, k=k, **bench)
    loaded = load_bench(path)
    folder = tmp_path / "run"
    folder.mkdir()
    options = SearchOptions(max_steps=1, patience=1, budget=BudgetSettings(), k=k, seed=seed,
                            concurrency=concurrency, timeout_s=10.0, run_test=False)
    return boost_record(Search(loaded, loaded.defaults, SweepProposer(), options,
                               run_id="run", store=RunStore.open(folder)).run())


def test_each_tolerance_is_held_at_alpha_not_at_a_share_of_it(tmp_path: Path) -> None:
    # cost +7.5% with a per-task spread of 10 points: on the 70 confirmation tasks its
    # upper bound at the last look is +9.9%, within +10% at the 0.8 alpha its looks spend
    # (the rest is the extension's); at alpha / 4, a Bonferroni share among the four
    # metrics, it would be +10.5% and refused. A move
    # must be refused only if some tolerance may be broken; each one tested at alpha
    # already keeps that to alpha (see forge/confirm.py).
    [record] = boost_outcomes(tmp_path, lift=0.075, spread=0.1, noisy=False, seeds=range(7, 8))
    assert record["verdict"] == "promoted"
    gates = {g["name"]: g for g in record["gates"]}
    assert set(gates) >= {f"aux:{m}" for m in FOUR_TOLERANCES}
    cost = gates["aux:cost"]
    assert cost["passed"]
    assert cost["reason"].startswith("cost +7.5% (upper bound of regression +9.9%")


def test_a_move_at_the_edge_of_a_tolerance_is_promoted_in_at_most_alpha_of_searches(
        tmp_path: Path) -> None:
    # cost exactly +10% in expectation, noisy per attempt: a promotion would break the
    # promise "at most 10% more than the start" as often as not. Each of the other gates
    # passes, so only the cost gate stands between the move and a promotion.
    seeds = range(60)
    records = boost_outcomes(tmp_path, lift=0.10, spread=0.3, noisy=True, seeds=seeds)
    promoted = [r for r in records if r["verdict"] == "promoted"]
    refused_by_cost = [r for r in records
                       if [g["name"] for g in r["gates"] if not g["passed"]] == ["aux:cost"]]
    assert len(promoted) + len(refused_by_cost) == len(seeds)
    # At most alpha = 5% in expectation: 3 of 60. Binomial(60, 0.05) exceeds 7 with
    # probability 0.9%; the seeds are fixed, so the test is deterministic.
    assert len(promoted) <= 7


#: boost passes every task but reports no cost: nothing can show its cost is within.
SILENT_COST = """
def run(config, task, ctx):
    record(config, task, ctx)
    if config["boost"]:
        return {"output": task.expected, "metrics": {"wait_ms": 100.0, "harm": 0.0,
                                                     "steps": 2.0}}
    return {"output": task.expected if random.Random(ctx.seed).random() < 0.5 else "wrong",
            "cost": 1.0, "metrics": {"wait_ms": 100.0, "harm": 0.0, "steps": 2.0}}
"""


def test_a_candidate_that_reports_no_value_of_a_metric_is_refused_by_its_tolerance(
        tmp_path: Path) -> None:
    record = boost_step(tmp_path, SILENT_COST, k=4, seed=1, registry=TOLERANCE_REGISTRY,
                        metrics=FOUR_TOLERANCES)
    assert record["verdict"] == "rejected"
    failed = {g["name"]: g["reason"] for g in record["gates"] if not g["passed"]}
    # The other gates passed: only the metric it never reported stands in its way, and
    # the reason says why in the gate's own words, its name not repeated.
    assert failed == {"aux:cost": "cost: on no task did both report it: not shown within "
                                  "the allowance (vs the start config)"}


# -- identical deltas: half the tasks, or enough paired attempts ------------------------------

#: boost wins on most tasks; cost and harm are the same on every attempt of both configs.
UNCHANGED_METRICS = """
def run(config, task, ctx):
    record(config, task, ctx)
    ok = random.Random(ctx.seed).random() < (0.9 if config["boost"] else 0.5)
    return {"output": task.expected if ok else "wrong", "cost": 1.0,
            "metrics": {"harm": 0.0}}
"""


def test_unchanged_metrics_decide_on_enough_paired_attempts_before_half_the_tasks(
        tmp_path: Path) -> None:
    # 600 dev and 300 val tasks at 20 attempts: half the tasks is 9,000 paired attempts,
    # where the first look's 100 dev tasks already hold 2,000 and two looks 3,000
    # (IDENTICAL_PAIRS): no attempt differing among them bounds the rate of attempts that
    # differ at all below 0.1%. The tolerances waited for half the tasks before.
    metrics = {"cost": {"direction": "lower", "max_increase": 0.10, "relative": True},
               "harm": {"direction": "lower", "max_increase": 0.01}}
    record = boost_step(tmp_path, UNCHANGED_METRICS, k=20, seed=3, concurrency=8,
                        tasks=search_tasks(600, 300, 2), metrics=metrics)
    assert record["verdict"] == "promoted"
    assert {g["name"] for g in record["gates"] if g["name"].startswith("aux:")} == {
        "aux:cost", "aux:harm"}
    for metric in ("cost", "harm"):
        assert record["aux"][metric]["bound"] == 0.0
        # Decided on far fewer than the 450 tasks half of dev and val would have taken.
        assert record["aux"][metric]["n_tasks"] <= 200
    assert record["looks"] <= 3


#: boost wins on most tasks; on one attempt in twenty both configs act harmfully, the
#: same attempts and the same amount (HARM): boost never changes it.
UNCHANGED_HARM = """
def run(config, task, ctx):
    record(config, task, ctx)
    ok = random.Random(ctx.seed).random() < (0.9 if config["boost"] else 0.5)
    harm = HARM if random.Random(f"harm-{ctx.seed}").random() < 0.05 else 0.0
    return {"output": task.expected if ok else "wrong", "metrics": {"harm": harm}}
"""


def unchanged_harm_step(tmp_path: Path, harm: float) -> dict[str, Any]:
    # 200 dev and 100 val tasks at 5 attempts: half the tasks is 750 paired attempts.
    return boost_step(tmp_path, UNCHANGED_HARM.replace("HARM", repr(harm)), k=5, seed=3,
                      tasks=search_tasks(200, 100, 2),
                      metrics={"harm": {"direction": "lower", "max_increase": 0.01}})


def test_a_metric_no_attempt_changed_passes_on_the_exact_test_before_half_the_tasks(
        tmp_path: Path) -> None:
    # Harm 0 or 1 an attempt, the same on every paired attempt: none worse among n
    # attempts is read by the exact test of a rare change (a rate of 1% of changed
    # attempts, each adding at most 1, would show none in 299 with a chance below 0.05):
    # within +0.01 on 60 to 100 tasks, not 150.
    record = unchanged_harm_step(tmp_path, 1.0)
    assert record["verdict"] == "promoted"
    [harm] = [g for g in record["gates"] if g["name"] == "aux:harm"]
    assert harm["passed"]
    assert "worse on 0 of" in harm["reason"]
    assert "exact test of a rare change" in harm["reason"]
    assert record["aux"]["harm"]["regressed"] == 0 and record["aux"]["harm"]["size"] == 1.0
    assert 60 <= record["aux"]["harm"]["n_tasks"] <= 100


def test_a_metric_no_attempt_changed_waits_when_a_change_could_be_large(
        tmp_path: Path) -> None:
    # The same, but a harmful attempt counts 50: a change on one attempt in 5,000 would
    # break +0.01, which no 750 attempts can rule out. It waits for half the tasks.
    record = unchanged_harm_step(tmp_path, 50.0)
    [harm] = [g for g in record["gates"] if g["name"] == "aux:harm"]
    assert harm["passed"]
    assert "exact test" not in harm["reason"]
    assert record["aux"]["harm"]["n_tasks"] >= 150


#: boost adds a harmful action on a share RATE of the attempts, the same attempts on
#: every run; the start never acts harmfully.
RARE_HARM = """
def run(config, task, ctx):
    record(config, task, ctx)
    ok = random.Random(ctx.seed).random() < (0.9 if config["boost"] else 0.5)
    rare = random.Random(f"harm-{ctx.seed}").random() < RATE
    return {"output": task.expected if ok else "wrong",
            "metrics": {"harm": 1.0 if config["boost"] and rare else 0.0}}
"""


def rare_harm_step(tmp_path: Path, rate: float, seed: int) -> dict[str, Any]:
    return boost_step(tmp_path, RARE_HARM.replace("RATE", repr(rate)), k=5, seed=seed,
                      tasks=search_tasks(200, 100, 2),
                      metrics={"harm": {"direction": "lower", "max_increase": 0.01}})


@pytest.mark.parametrize("seed", [2, 6])
def test_a_rare_regression_past_its_allowance_is_not_passed_by_the_t_test(
        tmp_path: Path, seed: int) -> None:
    # +0.012 harmful actions an attempt against +0.01 allowed, on a few tasks. With these
    # seeds the t-test passed it (its bound on a handful of events far too narrow); only
    # the exact test may pass a change on so few tasks.
    record = rare_harm_step(tmp_path, 0.012, seed)
    assert record["verdict"] == "rejected"
    [harm] = [g for g in record["gates"] if g["name"] == "aux:harm"]
    assert not harm["passed"]


def test_a_rare_regression_well_within_its_allowance_passes_on_the_exact_test(
        tmp_path: Path) -> None:
    # +0.002 an attempt: a few harmful attempts, within +0.01 by the exact test.
    record = rare_harm_step(tmp_path, 0.002, 3)
    assert record["verdict"] == "promoted"
    [harm] = [g for g in record["gates"] if g["name"] == "aux:harm"]
    assert "paired attempts, each by at most 1: few enough for the exact test" in harm["reason"]
    aux = record["aux"]["harm"]
    assert 0 < aux["regressed"] <= aux["most"] and aux["attempts"] >= 299


# -- the extension: a tolerance left open tested once more on fresh attempts ----------------------

#: boost gains on most tasks; both configs act harmfully on 1% of the attempts, each on
#: draws of its own: no change in truth, which 800 paired attempts leave unresolved
#: against +0.01 (a bound of about +0.01 at the last look) and 1,600 resolve.
EVEN_HARM = """
def run(config, task, ctx):
    record(config, task, ctx)
    ok = random.Random(ctx.seed).random() < (0.9 if config["boost"] else 0.5)
    harm = random.Random(f"harm-{config['boost']}-{ctx.seed}").random() < 0.01
    return {"output": task.expected if ok else "wrong",
            "metrics": {"harm": 1.0 if harm else 0.0}}
"""

EVEN_HARM_K = 5


def even_harm_search(tmp_path: Path, seed: int, **options: Any) -> tuple[SearchOutcome, Path]:
    """A single-step search of boost on EVEN_HARM's bench, and its run folder."""
    path = tmp_path / "bench"
    if not path.exists():
        write_search_bench(path, EVEN_HARM, registry=REGISTRY, k=EVEN_HARM_K,
                           tasks=search_tasks(100, 60, 2),
                           metrics={"harm": {"direction": "lower", "max_increase": 0.01}})
    bench = load_bench(path)
    folder = tmp_path / f"run-{len(list(tmp_path.glob('run-*')))}"
    folder.mkdir()
    settings: dict[str, Any] = {"max_steps": 1, "patience": 1, "budget": BudgetSettings(),
                                "k": EVEN_HARM_K, "seed": seed, "concurrency": 4,
                                "timeout_s": 10.0, "run_test": False, **options}
    outcome = Search(bench, bench.defaults, SweepProposer(), SearchOptions(**settings),
                     run_id=folder.name, store=RunStore.open(folder)).run()
    return outcome, folder


def harm_gate(record: dict[str, Any]) -> dict[str, Any]:
    [gate] = [g for g in record["gates"] if g["name"] == "aux:harm"]
    return gate


def attempt_indices(folder: Path) -> set[int]:
    return {row["result"]["attempt"] for row in stored_rows(folder)}


@pytest.mark.parametrize("seed", [2, 3])
def test_a_tolerance_the_tasks_leave_open_is_shown_on_a_block_of_fresh_attempts(
        tmp_path: Path, seed: int) -> None:
    outcome, folder = even_harm_search(tmp_path, seed)
    record = boost_record(outcome)
    assert record["verdict"] == "promoted"
    harm = harm_gate(record)
    assert harm["passed"]
    # The looks alone left it open; the block of fresh attempts showed it.
    assert "<= allowed at level 0.01 on the extension too (5 fresh attempts a task, " \
           "1600 paired attempts; vs the start config)" in harm["reason"]
    # Both configs ran the block on every dev and val task, on attempts past any that a
    # selection reads (k << PRECISION_ROUNDS = 20 onwards), and the record counts them.
    extension = range(EVEN_HARM_K << 2, (EVEN_HARM_K << 2) + EVEN_HARM_K)
    block = [row for row in stored_rows(folder) if row["result"]["attempt"] in extension]
    assert len(block) == 2 * 160 * EVEN_HARM_K
    assert record["rollouts"] >= record["screening_rollouts"] + len(block)


def test_no_extension_runs_without_the_budget_for_all_of_it(tmp_path: Path) -> None:
    full, _ = even_harm_search(tmp_path, 2)
    # What the search spends before the block (1,600 rollouts): room for most of the
    # block, not all of it.
    looks_only = full.rollouts_used - 2 * 160 * EVEN_HARM_K
    budget = BudgetSettings(rollouts=looks_only + 1200)
    outcome, folder = even_harm_search(tmp_path, 2, budget=budget)
    record = boost_record(outcome)
    assert record["verdict"] == "rejected"
    # Refused on the looks alone, as without the extension (at 0.8 alpha: the rest was
    # the extension's, and the level of a test is fixed before its data come in).
    assert harm_gate(record)["reason"].endswith("not shown within the allowance (vs the "
                                                "start config)")
    assert max(attempt_indices(folder)) < EVEN_HARM_K << 2
    assert outcome.rollouts_used == looks_only


#: Both configs act harmfully on half the attempts of six tasks, each on draws of its
#: own: no change in truth, but on a quarter of those attempts boost is the worse, and
#: the exact test that reads a change on so few tasks counts those (about 1% of the
#: paired attempts, against +0.01 allowed): no block of fresh attempts could pass it.
SAME_FEW_TASKS_HARM = """
def run(config, task, ctx):
    record(config, task, ctx)
    ok = random.Random(ctx.seed).random() < (0.9 if config["boost"] else 0.5)
    harm = (task.id in ("dev-00", "dev-01", "dev-02", "val-00", "val-01", "val-02")
            and random.Random(f"harm-{config['boost']}-{ctx.seed}").random() < 0.5)
    # Not quite a 0/1 metric (the start's harm weighs a little less), so the netted
    # test, which reads attempts made better too, does not read it: the exact test does.
    return {"output": task.expected if ok else "wrong",
            "metrics": {"harm": (1.0 if config["boost"] else 0.999) if harm else 0.0}}
"""


def test_no_extension_runs_where_its_exact_test_could_not_plausibly_pass(
        tmp_path: Path) -> None:
    path = tmp_path / "bench"
    write_search_bench(path, SAME_FEW_TASKS_HARM, registry=REGISTRY, k=EVEN_HARM_K,
                       tasks=search_tasks(100, 60, 2),
                       metrics={"harm": {"direction": "lower", "max_increase": 0.01}})
    bench = load_bench(path)
    folder = tmp_path / "run"
    folder.mkdir()
    options = SearchOptions(max_steps=1, patience=1, budget=BudgetSettings(),
                            k=EVEN_HARM_K, seed=2, concurrency=4, timeout_s=10.0,
                            run_test=False)
    outcome = Search(bench, bench.defaults, SweepProposer(), options,
                     run_id=folder.name, store=RunStore.open(folder)).run()
    record = boost_record(outcome)
    assert record["verdict"] == "rejected"
    harm = harm_gate(record)
    assert harm["reason"].endswith("not shown within the allowance (vs the start config; a "
                                   "block of fresh attempts could not plausibly show it)")
    aux = record["aux"]["harm"]
    # Worse on some 1% of the paired attempts, where the block's look allows at most
    # a few in 1,600: at that rate, the block would pass it with a chance under 10%.
    # No block was run, and no rollout spent on one.
    regressed, seen = aux["regressed"], aux["attempts"]
    assert binom.cdf(aux["extension_most"] - regressed, 1600 - seen, regressed / seen) < 0.1
    assert max(attempt_indices(folder)) < EVEN_HARM_K << 2


#: boost gains on most tasks; each config acts harmfully on half the attempts of three
#: tasks of its own (the start on dev-00, dev-01, val-00; boost on dev-02, dev-03,
#: val-01): boost moves harm between tasks, net +0 in truth, but makes some 0.9% of the
#: paired attempts worse, against +0.01 allowed. With a task more of boost's in each
#: split (``EXTRA``: dev-04, val-02), it adds some +0.0125: past the tolerance. ``BOOST``:
#: boost's own three tasks (none: it only removes harm).
MOVED_TO = ["dev-02", "dev-03", "val-01"]
MOVED_HARM = """
BOOST, EXTRA = {boost}, {extra}
def run(config, task, ctx):
    record(config, task, ctx)
    ok = random.Random(ctx.seed).random() < (0.9 if config["boost"] else 0.5)
    mine = (BOOST + [f"dev-{{4 + i:02d}}" for i in range(EXTRA)]
            + [f"val-{{2 + i:02d}}" for i in range(EXTRA)]
            if config["boost"] else ["dev-00", "dev-01", "val-00"])
    harm = (task.id in mine
            and random.Random(f"harm-{{config['boost']}}-{{ctx.seed}}").random() < 0.5)
    return {{"output": task.expected if ok else "wrong",
            "metrics": {{"harm": 1.0 if harm else 0.0}}}}
"""


@pytest.mark.parametrize(("extra", "promoted"), [(0, True), (1, False)])
def test_harm_moved_between_tasks_is_read_by_its_net_rate(tmp_path: Path, extra: int,
                                                          promoted: bool) -> None:
    path = tmp_path / "bench"
    write_search_bench(path, MOVED_HARM.format(boost=MOVED_TO, extra=extra),
                       registry=REGISTRY, k=10,
                       tasks=search_tasks(100, 60, 2),
                       metrics={"harm": {"direction": "lower", "max_increase": 0.01}})
    bench = load_bench(path)
    folder = tmp_path / "run"
    folder.mkdir()
    options = SearchOptions(max_steps=1, patience=1, budget=BudgetSettings(), k=10,
                            seed=2, concurrency=4, timeout_s=10.0, run_test=False)
    record = boost_record(Search(bench, bench.defaults, SweepProposer(), options,
                                 run_id=folder.name, store=RunStore.open(folder)).run())
    harm = harm_gate(record)
    aux = record["aux"]["harm"]
    assert aux["improved"] > 0 and aux["regressed"] > 0 and aux["size"] == 1
    # Worse on some 1% of the paired attempts, as many as +0.01 allows; better on some.
    assert aux["regressed"] > aux["attempts"] * 0.006
    if promoted:
        assert record["verdict"] == "promoted"
        assert harm["passed"] and "the netted test of a rare change" in harm["reason"]
        assert aux["net_p"] < 0.05
        assert aux["attempts"] == 1600  # 160 tasks, 10 attempts each: no block needed
    else:
        # Past the tolerance, on 8 tasks (still sparse): refused by the same test, after
        # the block of fresh attempts, which it always runs (it has no futility rule).
        assert record["verdict"] == "rejected"
        assert not harm["passed"] and "not shown within the allowance" in harm["reason"]
        assert "on the extension too" in harm["reason"] and aux["attempts"] == 3200
        assert aux["net_p"] > 0.05 * EXTENSION_SHARE  # alpha's share for the block


def test_a_change_that_made_no_attempt_worse_passes_on_the_exact_count(
        tmp_path: Path) -> None:
    # boost removes the start's harm on its three tasks and adds none: attempts made
    # better and none worse. Nothing to net; the exact test's count of none passes it at
    # an early look, where the netted test's level is still almost all ahead of it.
    path = tmp_path / "bench"
    write_search_bench(path, MOVED_HARM.format(boost=[], extra=0), registry=REGISTRY, k=10,
        tasks=search_tasks(100, 60, 2),
        metrics={"harm": {"direction": "lower", "max_increase": 0.01}})
    bench = load_bench(path)
    folder = tmp_path / "run"
    folder.mkdir()
    options = SearchOptions(max_steps=1, patience=1, budget=BudgetSettings(), k=10, seed=2,
                            concurrency=4, timeout_s=10.0, run_test=False)
    record = boost_record(Search(bench, bench.defaults, SweepProposer(), options,
                                 run_id=folder.name, store=RunStore.open(folder)).run())
    assert record["verdict"] == "promoted"
    harm, aux = harm_gate(record), record["aux"]["harm"]
    assert "few enough for the exact test of a rare change" in harm["reason"]
    assert aux["regressed"] == 0 and "net_p" not in aux
    assert aux["after"] < aux["before"]


# -- floors: every tagged task, not the ones an early decision reached -------------------------

#: boost passes every task but the critical ones, which it always fails.
DROPS_CRITICAL = """
def run(config, task, ctx):
    record(config, task, ctx)
    if config["boost"]:
        ok = "critical" not in task.tags
    else:
        ok = random.Random(ctx.seed).random() < 0.5
    return {"output": task.expected if ok else "wrong"}
"""


@pytest.mark.parametrize("seed", [3, 8])
def test_a_floor_is_checked_on_every_tagged_task_when_the_looks_stop_early(
        tmp_path: Path, seed: int) -> None:
    # Two critical tasks in dev and two in val, of 60 and 30. With these seeds the looks
    # decided before reaching any of them, and boost, which fails every one, was promoted
    # on "all 0 critical task checks". The floor now runs them first.
    record = boost_step(tmp_path, DROPS_CRITICAL, k=4, seed=seed,
                        tasks=search_tasks(60, 30, 2, critical=2),
                        gates={"alpha": 0.05, "min_effect": 0.0, "val_margin": 0.02,
                               "task_floors": {"critical": 0.5}})
    assert record["verdict"] == "rejected"
    [floor] = [g for g in record["gates"] if g["name"] == "floor:critical"]
    assert not floor["passed"]
    assert floor["reason"].startswith("4 critical task(s) below floor 50%")
    for task in ("dev/dev-00", "dev/dev-01", "val/val-00", "val/val-01"):
        assert f"{task} 0%" in floor["reason"]
    # Every other gate had passed: the floor alone refused it.
    assert all(g["passed"] for g in record["gates"] if g["name"] != "floor:critical")


# -- floors ahead: once dev and val have passed, before a tolerance's further chunks ----------

#: boost passes every task (``DROPS`` set: every task but the critical ones); the
#: incumbent half its attempts. No attempt reports harm, so the tolerance waits for half
#: the tasks, chunks after dev and val have passed.
FLOORS_AHEAD = """
DROPS = {drops}

def run(config, task, ctx):
    record(config, task, ctx)
    if config["boost"]:
        ok = not (DROPS and "critical" in task.tags)
    else:
        ok = random.Random(ctx.seed).random() < 0.5
    return {{"output": task.expected if ok else "wrong", "metrics": {{"harm": 0.0}}}}
"""

FLOORS_K = 4


def floors_ahead_step(tmp_path: Path, *, drops: bool, seed: int, floors: bool = True,
                      budget: BudgetSettings | None = None) -> SearchOutcome:
    path = tmp_path / f"bench-{drops}-{floors}"
    if not path.exists():
        write_search_bench(path, FLOORS_AHEAD.format(drops=drops), registry=REGISTRY,
                           k=FLOORS_K, tasks=search_tasks(60, 30, 2, critical=2),
                           metrics={"harm": {"direction": "lower", "max_increase": 0.01}},
                           gates={"alpha": 0.05, "min_effect": 0.0, "val_margin": 0.02,
                                  "task_floors": {"critical": 0.5} if floors else {}})
    bench = load_bench(path)
    folder = tmp_path / f"run-{len(list(tmp_path.glob('run-*')))}"
    folder.mkdir()
    options = SearchOptions(max_steps=1, patience=1, budget=budget or BudgetSettings(),
                            k=FLOORS_K, seed=seed, concurrency=4, timeout_s=10.0,
                            run_test=False)
    return Search(bench, bench.defaults, SweepProposer(), options, run_id=folder.name,
                  store=RunStore.open(folder)).run()


@pytest.mark.parametrize("seed", [1, 2])
def test_a_floor_refuses_before_a_tolerance_spends_its_chunks(tmp_path: Path,
                                                              seed: int) -> None:
    record = boost_record(floors_ahead_step(tmp_path, drops=True, seed=seed))
    assert record["verdict"] == "rejected"
    gates = {g["name"]: g for g in record["gates"]}
    assert gates["dev"]["passed"] and gates["val"]["passed"]
    assert not gates["floor:critical"]["passed"]
    # Refused when dev and val passed: the tolerance, waiting for half the tasks, was
    # still open and never bought its chunks (before, it passed and the floor came last).
    assert "aux:harm" not in gates
    passing = boost_record(floors_ahead_step(tmp_path, drops=False, seed=seed))
    assert passing["verdict"] == "promoted"
    assert record["rollouts"] < passing["rollouts"]
    # The tagged tasks run ahead are kept from the tolerance's test, which reads the
    # tasks its own looks reached: the same as on the bench without a floor.
    unfloored = boost_record(floors_ahead_step(tmp_path, drops=False, seed=seed,
                                               floors=False))
    assert unfloored["verdict"] == "promoted"
    assert passing["aux"]["harm"] == unfloored["aux"]["harm"]
    assert passing["looks"] == unfloored["looks"]


@pytest.mark.parametrize("seed", [1, 2])
def test_the_floors_are_not_what_the_budget_lacks_at_the_end(tmp_path: Path,
                                                            seed: int) -> None:
    unlimited = floors_ahead_step(tmp_path, drops=False, seed=seed)
    assert boost_record(unlimited)["verdict"] == "promoted"
    # Short by the most the floors can cost (both configs on the four critical tasks):
    # run last, they found the budget spent by the tolerance's chunks and the candidate,
    # through every gate, was journaled as cut by the budget. Run when dev and val pass,
    # they fit, and the last chunk runs within the budget's slack.
    short = unlimited.rollouts_used - 2 * 4 * FLOORS_K
    outcome = floors_ahead_step(tmp_path, drops=False, seed=seed,
                                budget=BudgetSettings(rollouts=short))
    record = boost_record(outcome)
    assert record["verdict"] == "promoted"
    assert record["rollouts"] == boost_record(unlimited)["rollouts"]
    assert outcome.rollouts_used == unlimited.rollouts_used
