"""What the search takes from a custom proposer that fails: refusals on record, no crash.

A proposer is a plug-in like a harness: one that raises, returns the wrong shape or
offers NaN must not end the search, nor leave a journal line JSON cannot hold.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from conftest import COIN_HARNESS, search_tasks, write_search_bench
from proposer_helpers import mixed_registry, view

from forge.bench.loader import BudgetSettings, load_bench
from forge.config.moves import Move
from forge.config.registry import Config
from forge.journal.run_store import RunStore
from forge.proposers import Proposal, Proposer, SearchView
from forge.proposers.vet import offered
from forge.search.loop import Search
from forge.search.options import SearchOptions


class Scripted(Proposer):
    """Returns ``reply(view)`` from ``propose``, whatever it is."""

    name = "scripted"

    def __init__(self, reply: Any) -> None:
        self.reply = reply

    def propose(self, view: SearchView, n: int) -> list[Proposal]:
        out: list[Proposal] = self.reply(view)
        return out

    def observe(self, config: Config, dev_mean: float,
                constraints: Mapping[str, float] | None = None) -> None:
        """Nothing to learn."""


def temperature(after: float) -> Proposal:
    return Proposal(move=Move(target="temperature", before=0.5, after=after),
                    proposer="scripted", reason="scripted")


def boom(view: SearchView) -> list[Proposal]:
    raise RuntimeError("the model file is missing")


def test_each_unusable_offer_is_refused_with_its_reason_and_the_rest_kept() -> None:
    v = view(mixed_registry())
    huge = Proposal(move=Move(target="x", before=5, after=10 ** 5000), proposer="scripted",
                    reason="scripted")
    kept, refused = offered(Scripted(lambda _: [temperature(math.nan), temperature(0.7),
                                                temperature(math.inf), "x=3", huge]), v, 4)
    assert kept == [temperature(0.7)]
    assert refused == [
        {"category": "illegal_value", "reason": "temperature: nan is not a finite number"},
        {"category": "illegal_value", "reason": "temperature: inf is not a finite number"},
        {"category": "bad_shape", "reason": "propose returned a str, not a Proposal"},
        {"category": "illegal_value", "reason": "x: an integer of more than 1000 digits"}]


def test_a_proposer_that_raises_or_returns_no_list_offers_nothing() -> None:
    v = view(mixed_registry())
    assert offered(Scripted(boom), v, 4) == ([], [{
        "category": "proposer_error",
        "reason": "propose raised RuntimeError: the model file is missing"}])
    assert offered(Scripted(lambda _: None), v, 4) == ([], [{
        "category": "bad_shape", "reason": "propose returned NoneType, not a list of "
                                           "proposals"}])


REGISTRY = """\
name: temp
settings:
  temperature: {type: float, min: 0.0, max: 1.0, default: 0.5}
  flag: {type: bool, default: false}
"""



def test_a_search_goes_on_past_a_proposer_offering_nan_raising_or_a_huge_number(
        tmp_path: Path) -> None:
    path = write_search_bench(tmp_path / "bench", COIN_HARNESS, registry=REGISTRY, k=3,
                              tasks=search_tasks(12, 6, 2))
    bench = load_bench(path)
    replies = {1: lambda v: [temperature(math.nan)], 2: boom,
               3: lambda v: [Proposal(move=Move(target="temperature", before=0.5,
                                                after=10 ** 5000), proposer="scripted",
                                      reason="scripted")]}
    proposer = Scripted(lambda v: replies.get(v.step, lambda _: [])(v))
    folder = tmp_path / "run"
    folder.mkdir()
    outcome = Search(bench, bench.defaults, proposer, SearchOptions(
        max_steps=3, patience=3, budget=BudgetSettings(), k=3, seed=1, concurrency=2,
        timeout_s=10.0, run_test=False), run_id="run", store=RunStore.open(folder)).run()
    refusals = [(r["step"], r["category"]) for r in outcome.records
                if r["kind"] == "proposal_invalid"]
    assert refusals == [(1, "illegal_value"), (2, "proposer_error"), (3, "illegal_value")]
    # Each step went on with the sweep's moves; every line of the journal is JSON.
    steps = {r["step"] for r in outcome.records if r["kind"] == "candidate"}
    assert steps == {1, 2, 3} or outcome.stop_reason == "local_optimum"
    assert {1, 2} <= steps
    lines = (folder / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["kind"] for line in lines][-1] == "end"
