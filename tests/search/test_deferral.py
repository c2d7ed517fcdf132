"""A candidate the budget left cannot prove waits while other moves are screened.

:mod:`forge.search.deferral`: a candidate that passed screening is confirmed at once unless
the budget left is less than its confirmation projects to need at its screening effect;
then it waits, journaled with why, until the incumbent has no other move, and it is
journaled as skipped, with its rollouts, when another is promoted or the search stops
first.

The harnesses are test doubles as in test_search.py: success is
``random.Random(ctx.seed)`` below a probability the settings decide.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    TWO_REGISTRY,
    run_forge,
    search_tasks,
    two_sizes_harness,
    write_search_bench,
)
from rich.console import Console

from forge.bench.loader import BudgetSettings, load_bench
from forge.config.moves import Move
from forge.config.registry import Config
from forge.journal.records import CandidateRecord, parse_record
from forge.journal.run_store import RunStore
from forge.proposers import Proposal, Proposer
from forge.proposers import SearchView as ProposerView
from forge.report.live import LiveView
from forge.search.deferral import Deferrals, confirmation_cost
from forge.search.launch import launch_search, resume_search
from forge.search.loop import Search
from forge.search.options import SearchOptions
from forge.search.outcome import SearchOutcome
from forge.search.racing import RaceOutcome
from forge.search.screening import Screen
from forge.stats.paired import paired_test

K = 4

#: ``small`` gains +0.08, too little to prove on 400 rollouts; ``big`` +0.45.
SIZES = two_sizes_harness(0.3, 0.08, 0.45)

#: Only ``small`` gains; ``big`` changes nothing.
SMALL_ONLY = SIZES.replace("0.45 *", "0.0 *")


class SmallFirst(Proposer):
    """Offers ``small`` first, then the rest: the candidate worth less is screened first."""

    name = "small-first"

    def propose(self, view: ProposerView, n: int) -> list[Proposal]:
        ordered = sorted(view.untried, key=lambda m: m.target != "small")
        return [Proposal(move=m, proposer=self.name, reason="small first") for m in ordered]

    def observe(self, config: Config, dev_mean: float,
                constraints: Mapping[str, float] | None = None) -> None:
        pass


def two_bench(tmp_path: Path, harness: str) -> Path:
    return write_search_bench(tmp_path / "bench", harness, registry=TWO_REGISTRY, k=K,
                              tasks=search_tasks(40, 30, 2))


def search(path: Path, folder: Path, *, seed: int, budget: int) -> SearchOutcome:
    bench = load_bench(path)
    folder.mkdir(parents=True)
    options = SearchOptions(max_steps=30, patience=30, budget=BudgetSettings(rollouts=budget),
                            k=K, seed=seed, concurrency=4, timeout_s=10.0, run_test=False)
    return Search(bench, bench.defaults, SmallFirst(), options, run_id=folder.name,
                  store=RunStore.open(folder)).run()


def candidates(outcome: SearchOutcome, step: int | None = None) -> list[dict[str, Any]]:
    return [r for r in outcome.records
            if r["kind"] == "candidate" and (step is None or r["step"] == step)]


def assert_every_rollout_journaled(outcome: SearchOutcome) -> None:
    start = next(r for r in outcome.records if r["kind"] == "start")
    stop = next(r for r in outcome.records if r["kind"] == "stop")
    assert start["rollouts_total"] + sum(r.get("rollouts") or 0
                                         for r in candidates(outcome)) == stop["rollouts_total"]


# -- the projection ----------------------------------------------------------------------------

def _screen(deltas: list[float]) -> Screen:
    move = Move(target="small", before=False, after=True)
    config = Config(values={"small": True}, registry_digest="c" * 64)
    test = paired_test(deltas, alpha=0.05)
    return Screen(Proposal(move=move, proposer="t", reason="t"), config,
                  RaceOutcome("pass", test, len(deltas), 0, 0))


def test_the_projected_cost_grows_as_the_inverse_square_of_the_effect() -> None:
    deltas = [0.2, 0.0, 0.4, 0.1, 0.3, 0.2, 0.0, 0.4]  # effect +0.2
    whole = confirmation_cost(_screen(deltas), level=0.03, min_effect=0.0, attempts=K)
    # The same spread at half the effect: four times the tasks.
    half = confirmation_cost(_screen([d - 0.1 for d in deltas]), level=0.03,
                             min_effect=0.0, attempts=K)
    assert half == pytest.approx(4 * whole)
    # The incumbent's attempts already run cost nothing: all run, half the rollouts.
    cached = confirmation_cost(_screen(deltas), level=0.03, min_effect=0.0, attempts=K,
                               unrun=0.0)
    assert cached == pytest.approx(whole / 2)
    # A stricter level needs more tasks; an effect at the floor can never be shown.
    assert confirmation_cost(_screen(deltas), level=0.001, min_effect=0.0,
                             attempts=K) > whole
    assert math.isinf(confirmation_cost(_screen(deltas), level=0.03, min_effect=0.2,
                                        attempts=K))


def test_a_held_candidate_is_due_once_one_more_chunk_would_leave_too_little_for_it(
        ) -> None:
    cheap, dear = _screen([0.3, 0.1, 0.2, 0.2]), _screen([0.1, 0.0, 0.1, 0.0])
    needs = {id(cheap): 300.0, id(dear): 900.0}

    def cost(screen: Screen) -> float:
        return needs[id(screen)]

    queue = Deferrals()
    assert queue.hold(cheap, cost, left=400) is None  # it fits: confirmed at once
    assert queue.hold(cheap, cost, left=None) is None  # no rollout budget: never held
    why = queue.hold(cheap, cost, left=250)
    assert why == ("its confirmation projects to need 300 rollouts at its screening "
                   "effect (+0.200) and 250 are left: the incumbent's other moves are "
                   "screened first")
    move = Move(target="small", before=False, after=True)
    head = partial(CandidateRecord, step=1, move=move, inverse=move.inverse(),
                   proposer="t", reason="t", incumbent="i" * 64, verdict="skipped")
    for screen in (cheap, dear):
        queue.add(screen, head, why)
    # While one more chunk still leaves what each needs, or neither fits, none is due.
    assert queue.due(cost, left=2000, chunk=100) == []
    assert queue.due(cost, left=250, chunk=100) == []
    # One more chunk would leave dear too little: it is due; cheap, which fits
    # with room to spare, is confirmed with it; the record says why they waited.
    [(first, held), (second, _)] = queue.due(cost, left=950, chunk=100)
    assert {id(first), id(second)} == {id(cheap), id(dear)} and not queue
    assert held().deferred == why


# -- in a search -------------------------------------------------------------------------------

def test_a_candidate_the_budget_cannot_prove_waits_while_a_larger_one_is_proven(
        tmp_path: Path) -> None:
    path = two_bench(tmp_path, SIZES)
    held = 0
    for seed in range(6):
        on = search(path, tmp_path / f"on{seed}", seed=seed, budget=400)
        assert_every_rollout_journaled(on)
        waited = [r for r in candidates(on, 1) if "deferred" in r]
        if not waited:
            continue
        held += 1
        # small passed screening first and waited; big, screened after it, was proven.
        [small] = waited
        [big] = [r for r in candidates(on, 1) if r["move"]["target"] == "big"]
        assert small["move"]["target"] == "small" and small["dev"]["screen"]["status"] == "pass"
        assert small["deferred"].startswith("its confirmation projects to need ")
        assert big["verdict"] == "promoted" and "deferred" not in big
        assert small["verdict"] == "skipped" and small["why"].endswith(
            "not confirmed: this incumbent promoted another candidate first")
        assert small["rollouts"] == small["screening_rollouts"] > 0
        assert on.final_config["big"] is True
        # The reviewer sees that it waited, and why, beside what became of it.
        console = Console(record=True, width=300, file=io.StringIO())
        view = LiveView(console)
        for line, record in enumerate(on.records, 1):
            view.on_record(parse_record(record, file=Path("journal.jsonl"), line=line))
        assert f"· deferred: {small['deferred']}" in console.export_text()
    assert held >= 2


def test_a_deferred_candidate_is_confirmed_once_no_other_move_is_left(
        tmp_path: Path) -> None:
    path = two_bench(tmp_path, SMALL_ONLY)
    held = 0
    for seed in range(6):
        outcome = search(path, tmp_path / f"r{seed}", seed=seed, budget=400)
        assert_every_rollout_journaled(outcome)
        for r in candidates(outcome):
            if "deferred" not in r:
                continue
            held += 1
            assert r["move"]["target"] == "small"
            # big screened (futile) meanwhile, then small confirmed: a decision, not a drop.
            assert (r["looks"] and r["verdict"] in {"promoted", "rejected"}) or r["why"] == (
                "budget spent during confirmation")
            [big] = [c for c in candidates(outcome, r["step"]) if c["move"]["target"] == "big"]
            assert big["verdict"] == "rejected"
            assert outcome.records.index(big) < outcome.records.index(r)
    assert held >= 2


def test_a_run_cut_after_a_deferral_resumes_to_the_same_decisions(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = two_bench(tmp_path, SIZES)
    journals = tmp_path / "journals"
    for seed in range(10):
        launch_search(path, journals=journals, run_id=f"full{seed}", seed=seed,
                      proposer="sweep", budget_rollouts=400)
        full = (journals / f"full{seed}" / "journal.jsonl").read_text(
            encoding="utf-8").splitlines()
        rows = [json.loads(line) for line in full]
        waited = [i for i, r in enumerate(rows) if "deferred" in r]
        if waited:
            break
    else:
        pytest.fail("no sweep search of seeds 0-9 deferred a candidate")
    # `forge journal show` says why it waited.
    code, out, _ = run_forge(capsys, "journal", "show", f"full{seed}", "--journals", journals)
    assert code == 0 and "deferred:" in out
    # Cut just before the deferred candidate's record, as a kill -9 there would leave
    # the run: the resume must hold it back again, from the replay alone.
    cut_at = waited[0]
    cut = journals / "cut"
    cut.mkdir()
    for f in (journals / f"full{seed}").iterdir():
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
