"""Which screened candidate a step confirms, and which moves count as tried.

- every candidate of a step is screened before one is confirmed, the largest screening
  effect first; the others are journaled as skipped, with their screening and their
  rollouts;
- near values: a proposer's value off the incumbent's candidate moves is tried in
  the place of the nearest one, so a proposer that keeps suggesting new values of one
  setting cannot keep that setting's moves untried and the search from its end.

The harnesses are test doubles as in test_search.py: success is
``random.Random(ctx.seed)`` below a probability the settings decide.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import COIN_HARNESS, TWO_REGISTRY, TWO_SIZES, search_tasks, write_search_bench

from forge.bench.loader import BudgetSettings, load_bench
from forge.config.moves import Move
from forge.config.registry import Config
from forge.journal.run_store import RunStore
from forge.proposers import Proposal, Proposer, ReflectProposer, SearchView, SweepProposer
from forge.search.launch import launch_search, resume_search
from forge.search.loop import Search
from forge.search.options import SearchOptions
from forge.search.outcome import SearchOutcome

K = 4


def search(path: Path, folder: Path, proposer: Proposer, *, seed: int = 1,
           **options: Any) -> SearchOutcome:
    bench = load_bench(path)
    folder.mkdir(parents=True)
    settings: dict[str, Any] = {"max_steps": 30, "patience": 30, "budget": BudgetSettings(),
                                "k": K, "seed": seed, "concurrency": 4, "timeout_s": 10.0,
                                "run_test": False, **options}
    return Search(bench, bench.defaults, proposer, SearchOptions(**settings),
                  run_id=folder.name, store=RunStore.open(folder)).run()


def step_one(outcome: SearchOutcome) -> list[dict[str, Any]]:
    return [r for r in outcome.records if r["kind"] == "candidate" and r["step"] == 1]


def test_a_step_confirms_its_passing_candidate_of_largest_screening_effect(
        tmp_path: Path) -> None:
    path = write_search_bench(tmp_path / "bench", TWO_SIZES, registry=TWO_REGISTRY, k=K,
                              tasks=search_tasks(40, 30, 2))
    for seed in range(4):
        best = search(path, tmp_path / f"best{seed}", SweepProposer(), seed=seed)
        records = step_one(best)
        # Both screened at step 1, whatever order the sweep drew; big is promoted.
        assert {r["move"]["target"] for r in records} == {"small", "big"}
        [won] = [r for r in records if r["verdict"] == "promoted"]
        assert won["move"]["target"] == "big"
        [other] = [r for r in records if r["move"]["target"] == "small"]
        assert other["verdict"] == "skipped" and other["why"].startswith("passed screening (+")
        assert other["why"].endswith("this step promoted a candidate of larger screening "
                                     "effect")
        assert other["dev"]["screen"]["status"] == "pass"
        assert other["rollouts"] == other["screening_rollouts"] > 0
        # Its rollouts are journaled with it: the records add up to the search's count.
        start = next(r for r in best.records if r["kind"] == "start")
        stop = next(r for r in best.records if r["kind"] == "stop")
        assert start["rollouts_total"] + sum(
            r.get("rollouts") or 0 for r in best.records if r["kind"] == "candidate"
        ) == stop["rollouts_total"]
        assert best.final_config == {"small": True, "big": True}


def test_with_little_budget_left_the_first_to_pass_is_confirmed_at_once(
        tmp_path: Path) -> None:
    # 70 dev and val tasks x K attempts x 2 configs x 2 = 1,120 rollouts: below that
    # left, screening the rest of the step first would crowd out its confirmation.
    path = write_search_bench(tmp_path / "bench", TWO_SIZES, registry=TWO_REGISTRY, k=K,
                              tasks=search_tasks(40, 30, 2))
    for seed in range(4):
        outcome = search(path, tmp_path / f"r{seed}", SweepProposer(), seed=seed,
                         budget=BudgetSettings(rollouts=900))
        records = step_one(outcome)
        assert not any((r.get("why") or "").startswith("passed screening") for r in records)
        # The one that passed was confirmed (or cut by the budget in its confirmation).
        passed = [r for r in records if (r.get("dev") or {}).get("screen", {}).get("status")
                  == "pass"]
        assert len(passed) == 1 and passed[0] is records[-1]
        assert passed[0]["verdict"] == "promoted" or passed[0]["why"] == (
            "budget spent during confirmation")


# -- enum choices ------------------------------------------------------------------------------

PICK_REGISTRY = """\
name: pick
settings:
  pick: {type: enum, choices: [a, b, c, d], default: a}
"""

#: Only ``d`` helps; ``b`` is what the scripted proposer offers.
PICK_D = """
def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.8 if config["pick"] == "d" else 0.2
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong"}
"""


class PickB(Proposer):
    """``pick`` -> ``b`` from wherever it is, and nothing else."""

    name = "pick-b"

    def propose(self, view: SearchView, n: int) -> list[Proposal]:
        current = view.incumbent.values["pick"]
        if current == "b":
            return []
        return [Proposal(move=Move(target="pick", before=current, after="b"),
                         proposer=self.name, reason="scripted")]

    def observe(self, config: Config, dev_mean: float,
                constraints: Mapping[str, float] | None = None) -> None:
        """Nothing to learn."""


def test_a_step_screens_every_other_choice_of_an_enum_it_covers(tmp_path: Path) -> None:
    path = write_search_bench(tmp_path / "bench", PICK_D, registry=PICK_REGISTRY, k=K,
                              tasks=search_tasks(40, 30, 2))
    outcome = search(path, tmp_path / "all", PickB(), max_steps=1)
    records = step_one(outcome)
    # The proposer's b first, then the choices it left, in the registry's order.
    assert [(r["move"]["after"], r["proposer"]) for r in records] == [
        ("b", "pick-b"), ("c", "sweep"), ("d", "sweep")]
    assert [r["move"]["after"] for r in records if r["verdict"] == "promoted"] == ["d"]
    assert outcome.final_config["pick"] == "d"


HINT_REGISTRY = """\
name: hinted
settings:
  tries: {type: int, min: 1, max: 9, step: 1, default: 1}
hints:
  gave_up: {tries: up}
"""

#: Every attempt says it gave up; more tries help, most at 5 and above.
GAVE_UP = """
def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.85 if config["tries"] >= 5 else 0.3
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong", "signals": ["gave_up"]}
"""


def test_a_search_follows_a_hint_with_its_jump_first(tmp_path: Path) -> None:
    path = write_search_bench(tmp_path / "bench", GAVE_UP, registry=HINT_REGISTRY, k=K,
                              tasks=search_tasks(40, 30, 2))
    jumped = step_one(search(path, tmp_path / "jump", ReflectProposer(), max_steps=1))
    # tries 1 .. 9: the jump halfway is 5, proposed by reflection (before its step 2);
    # it or its expansion (9, as good as 5 here, screened and journaled first) is promoted.
    first = next(r for r in jumped if r["proposer"] == "reflect")
    assert (first["move"]["after"], first["proposer"], first["move_kind"]) == (
        5, "reflect", "jump")
    assert [r["move"]["after"] for r in jumped if r["verdict"] == "promoted"] in ([5], [9])


#: More tries help up to 5; beyond, by ``PAST``, they help no further (a cap the tasks
#: never reach), help more, or hurt (an interior optimum).
CAPPED = """
PAST = {past!r}
def run(config, task, ctx):
    record(config, task, ctx)
    tries = config["tries"]
    beyond = {{"same": 0.85, "better": 0.95, "worse": 0.25}}[PAST]
    p = 0.3 if tries < 5 else 0.85 if tries == 5 else beyond
    ok = random.Random(ctx.seed).random() < p
    return {{"output": task.expected if ok else "wrong", "signals": ["gave_up"]}}
"""


@pytest.mark.parametrize("past", ["same", "better"])
def test_a_passing_move_has_its_expansion_promoted_when_no_worse_on_any_attempt(
        tmp_path: Path, past: str) -> None:
    path = write_search_bench(tmp_path / "bench", CAPPED.format(past=past),
                              registry=HINT_REGISTRY, k=K, tasks=search_tasks(40, 30, 2))
    records = step_one(search(path, tmp_path / past, ReflectProposer(), max_steps=1))
    by_after = {r["move"]["after"]: r for r in records}
    # The hint's jump to 5 passes; 9, the farthest the same way, is run next on 5's
    # screening attempts and scores at least as well on every one (seeded alike, the
    # same chance or a higher one), so it goes first and is promoted; 5 is journaled
    # after it as skipped.
    assert [r["move"]["after"] for r in records][:2] == [9, 5]
    farthest = by_after[9]
    assert (farthest["proposer"], farthest["move"]["before"], farthest["verdict"]) == (
        "expansion", 1, "promoted")
    assert farthest["reason"].startswith("tries 1 -> 5 passed screening (+")
    assert by_after[5]["verdict"] == "skipped"
    assert by_after[5]["why"].endswith("not confirmed: this step promoted tries 9, farther "
                                       "the same way and no worse on any screening attempt")
    screens = by_after[5]["dev"]["screen"], farthest["dev"]["screen"]
    if past == "same":
        assert screens[0] == screens[1]
    else:
        assert screens[1]["effect"] > screens[0]["effect"]


def test_an_expansion_that_dev_tells_apart_competes_on_its_screening_alone(
        tmp_path: Path) -> None:
    path = write_search_bench(tmp_path / "bench", CAPPED.format(past="worse"),
                              registry=HINT_REGISTRY, k=K, tasks=search_tasks(40, 30, 2))
    records = step_one(search(path, tmp_path / "worse", ReflectProposer(), max_steps=1))
    by_after = {r["move"]["after"]: r for r in records}
    # 9 is run on 5's screening attempts and dropped at the first task where it scores
    # below 5 on an attempt; 5 is promoted.
    farthest = by_after[9]
    assert (farthest["proposer"], farthest["verdict"]) == ("expansion", "rejected")
    assert farthest["dev"]["screen"]["status"] == "worse"
    assert farthest["why"].startswith("scored below tries 5 on a screening attempt")
    # Its first task showed it: K rollouts, on the candidate's side alone.
    assert farthest["tasks_screened"] == 1
    assert farthest["rollouts"] == farthest["tasks_screened"] * K
    assert by_after[5]["verdict"] == "promoted"


def test_a_run_cut_after_its_expansion_resumes_to_the_same_decisions(tmp_path: Path) -> None:
    path = write_search_bench(tmp_path / "bench", CAPPED.format(past="same"),
                              registry=HINT_REGISTRY, k=K, tasks=search_tasks(40, 30, 2))
    journals = tmp_path / "journals"
    launch_search(path, journals=journals, run_id="full", seed=3, proposer="reflect",
                  max_steps=2)
    full = (journals / "full" / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in full]
    # Cut just after the expansion's record, as a kill -9 there would leave the run.
    cut_at = next(i for i, r in enumerate(rows) if r.get("proposer") == "expansion") + 1
    assert rows[cut_at - 1]["verdict"] == "promoted"
    cut = journals / "cut"
    cut.mkdir()
    for f in (journals / "full").iterdir():
        if f.is_file() and not f.name.startswith("."):
            (cut / f.name).write_bytes(f.read_bytes())
    (cut / "journal.jsonl").write_text("".join(f"{line}\n" for line in full[:cut_at]),
                                       encoding="utf-8")
    resume_search("cut", journals=journals)
    resumed = (cut / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    volatile = {"at", "elapsed_s", "run_id"}

    def stable(lines: list[str]) -> list[dict[str, Any]]:
        return [{k: v for k, v in json.loads(line).items() if k not in volatile}
                for line in lines]

    assert stable(resumed) == stable(full)


# -- near values -------------------------------------------------------------------------------

WIDE_REGISTRY = """\
name: wide
settings:
  width: {type: int, min: 1, max: 4096, default: 64, scale: log}
  flag:  {type: bool, default: false}
"""


class WidthValues(Proposer):
    """Each step one value of ``width``, ``value(step, current)``, and nothing else."""

    name = "width-values"

    def __init__(self, value: Callable[[int, int], int]) -> None:
        self.value = value

    def propose(self, view: SearchView, n: int) -> list[Proposal]:
        current = view.incumbent.values["width"]
        assert isinstance(current, int)
        move = Move(target="width", before=current, after=self.value(view.step, current))
        return [Proposal(move=move, proposer=self.name, reason="scripted")]

    def observe(self, config: Config, dev_mean: float,
                constraints: Mapping[str, float] | None = None) -> None:
        """Nothing to learn."""


def new_value(step: int, current: int) -> int:
    """A fresh value no candidate move has, as TPE's suggestions of an int setting are."""
    rng = random.Random(step)
    while True:
        value = rng.randrange(2, 4096)
        if value & (value - 1) and value != current:
            return value  # not a power of two: off the grid of candidate moves


def test_new_values_of_one_setting_do_not_keep_its_moves_untried(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_search_bench(tmp_path / "bench", COIN_HARNESS, registry=WIDE_REGISTRY, k=K,
                              tasks=search_tasks(24, 12, 2))
    monkeypatch.setattr("forge.search.loop.PRECISION_ROUNDS", 0)
    near = search(path, tmp_path / "near", WidthValues(new_value))
    # Each step the proposer's new value takes width's one place in the step (tried by
    # exact value, width's own moves would never be tried). In the place of the nearest
    # candidate move, each new value uses one of them up, and the search ends when they
    # are all gone.
    assert near.stop_reason == "local_optimum" and near.steps < 30
    widths = [r["move"]["after"] for r in near.records
              if r["kind"] == "candidate" and r["move"]["target"] == "width"]
    assert any(w & (w - 1) for w in widths)  # the proposer's values were tried too


def test_an_illegal_value_of_a_log_setting_is_refused_as_illegal(tmp_path: Path) -> None:
    path = write_search_bench(tmp_path / "bench", COIN_HARNESS, registry=WIDE_REGISTRY, k=K,
                              tasks=search_tasks(24, 12, 2))
    # 0 and -3 on its log scale (min 1), then 5,000 (max 4,096): refused with their
    # reason, not tripped over.
    values = WidthValues(lambda step, current: {1: 0, 2: -3}.get(step, 5000))
    outcome = search(path, tmp_path / "run", values, max_steps=3)
    illegal = [r for r in outcome.records if r["kind"] == "candidate"
               and r["proposer"] == "width-values"]
    assert [r["step"] for r in illegal] == [1, 2, 3]
    assert all(r["verdict"] == "rejected" and r["gates"][0]["name"] == "legal"
               for r in illegal)


def test_a_proposers_copy_of_a_tried_place_is_journaled_as_it_is_dropped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_search_bench(tmp_path / "bench", COIN_HARNESS, registry=WIDE_REGISTRY, k=K,
                              tasks=search_tasks(24, 12, 2))
    # 100 at step 1, off the grid but within a factor sqrt(2) of 128: tried in 128's
    # place; then 128 itself, then 97, whose place is 128's too.
    script = {1: 100, 2: 128, 3: 97}

    class Twice(WidthValues):
        """Offers its move twice: a copy offered twice is one record."""

        def propose(self, view: SearchView, n: int) -> list[Proposal]:
            return 2 * super().propose(view, n)

    values = Twice(lambda step, current: script.get(step, 100))
    monkeypatch.setattr("forge.search.loop.PRECISION_ROUNDS", 0)
    outcome = search(path, tmp_path / "run", values, max_steps=3)
    widths = [(r["step"], r["move"]["after"]) for r in outcome.records
              if r["kind"] == "candidate" and r["proposer"] == "width-values"]
    assert widths == [(1, 100)]
    dropped = [r for r in outcome.records if r["kind"] == "proposal_invalid"]
    assert [(r["step"], r["category"], r["proposer"]) for r in dropped] == [
        (2, "already_tried", "width-values"), (3, "already_tried", "width-values")]
    assert dropped[0]["reason"] == "width 64 -> 128: tried against this incumbent already"
    assert dropped[1]["reason"] == ("width 64 -> 97: tried in the place of 128 (within half "
                                    "a step of it) against this incumbent already")
