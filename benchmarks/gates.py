"""Benchmark of forge's promotion gates: false promotions, power, and rollouts spent.

    python benchmarks/gates.py              # 100 seeds per bench and method; writes
                                            # benchmarks/results/gates.json and gates.md
    python benchmarks/gates.py --quick      # 20 seeds, prints the table only
    python benchmarks/gates.py --seeds 50 --workers 2 --keep-journals /tmp/gj
    python benchmarks/gates.py --methods forge,forge-chunks7 --tag variants
    python benchmarks/gates.py --rerender benchmarks/results/gates.json   # table only

Two benches (``benchmarks/benches/``), 100 dev / 100 val / 100 test tasks, k 5,
default gates (alpha 0.05, min_effect 0, val_margin 0.02), max_steps 30,
patience 5, a 20000-rollout budget, no task floors:

- ``noeffect``: five settings (int, float, log int, enum, bool; nine neighbours)
  that change the harness's outcomes (its randomness is seeded by the attempt seed
  *and* the config) but not their probability of success. Any promotion is false.
- ``effect``: the same plus ``boost`` (bool, default false), which adds +0.10 to
  every task's success probability. Power = the final config has boost=true.

Methods, each on the same benches and seeds:

- ``forge``: ``launch_search`` with its defaults (proposer auto; the dev and val splits
  cut into 6 chunks: screening races over the dev chunks, each confirmation look is a
  chunk; jumps on).
- ``forge-chunks5`` / ``forge-chunks7``: the same search built through
  ``forge.search.loop.Search`` with ``CHUNKS`` 5 / 7 (coarser or finer races and
  looks). The test split is not run by these variants (it decides nothing).
- ``forge-noracing``: ``CHUNKS`` 1: one chunk is the whole split, so a candidate is
  screened on all dev tasks at once (no early futility or pass) and each confirmation
  is one look at all its dev tasks on fresh attempts and one at all val tasks (a
  fixed-sample test, not a sequential one). What the chunks buy.
- ``naive``: the rule forge replaces (SelfForge), implemented here. Each step the
  same proposer (auto) ranks the untried ``±step`` neighbours and the first four are
  evaluated once on dev with k attempts per task on the same seeds as forge's
  screening; one qualifies if its dev mean exceeds the incumbent's by more than 1e-9
  and its val mean (k attempts, the same val seeds) is not below the incumbent's; the
  qualifying candidate with the highest dev mean is promoted. Same max_steps,
  patience, budget and local-optimum stop as forge.

Reported per method and bench: the fraction of searches promoting anything on
``noeffect`` (false-promotion rate, target <= 5%) with a 95% Wilson interval; on
``effect`` the fraction whose final config has boost=true (power, target >= 80%)
and the fraction promoting any neutral move; rollouts per search (up to the stop
record, so the final test evaluation is left out); rollouts per decision as the issue
counts it (the candidate records' ``rollouts`` over their number: a screening refusal
is a decision too, an expansion's record is not, though its rollouts count; naive:
attempts run for the candidate) and per confirmation (every
candidate's rollouts over the number of confirmations: the price of one gate decision
with the screening that selected it), which a search of many cheap screening
refusals does not flatter; on ``effect``, the rollouts of the record that promoted
boost (the price of one proven promotion, screening included).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import multiprocessing as mp
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BENCHES = {"noeffect": HERE / "benches" / "noeffect", "effect": HERE / "benches" / "effect"}
# Variants of forge, built through forge.search.loop.Search: the search's CHUNKS (6,
# forge.search.options) changed, as the search module reads it.
VARIANTS: dict[str, int] = {
    "forge-chunks5": 5,
    "forge-chunks7": 7,
    "forge-noracing": 1,  # one chunk: the whole split, one look
}
ALL_METHODS = ("forge", *VARIANTS, "naive")
METHODS = ALL_METHODS
TARGET = "boost"
IMPROVED = 1e-9  # the naive rule's "improved"


# -- one search per method ------------------------------------------------------------------


def _screen(r: dict[str, Any]) -> dict[str, Any]:
    screen: dict[str, Any] = (r.get("dev") or {}).get("screen") or {}
    return screen


def _passed(r: dict[str, Any], gate: str) -> bool:
    return any(g["name"] == gate and g["passed"] for g in r.get("gates", []))


def _summarise_forge(outcome: Any, records: list[dict[str, Any]]) -> dict[str, Any]:
    start = next(r for r in records if r.get("kind") == "start")
    stop = next(r for r in records if r.get("kind") == "stop")
    candidates = [r for r in records if r.get("kind") == "candidate"
                  and r.get("rollouts") is not None]
    confirmed = [r for r in candidates if (r.get("dev") or {}).get("confirm")]
    detail = []
    for r in confirmed:
        conf = r["dev"]["confirm"]
        scr = _screen(r)
        detail.append({
            "step": r["step"], "target": r["move"]["target"], "after": r["move"]["after"],
            "verdict": r["verdict"], "screen_p": scr.get("p_value"),
            "screen_effect": scr.get("effect"), "confirm_p": conf.get("p_value"),
            "confirm_effect": conf.get("effect"), "level": conf.get("level"),
            "nominal": conf.get("nominal"), "index": conf.get("index"),
            "looks": r.get("looks"), "rollouts": r["rollouts"],
            "val_low": (r.get("val") or {}).get("ci_low"),
            "failed": [g["name"] for g in r.get("gates", []) if not g["passed"]]})
    boost_records = [{"step": r["step"], "before": r["move"]["before"],
                      "after": r["move"]["after"], "verdict": r["verdict"],
                      "screen": _screen(r).get("status"), "screen_p": _screen(r).get("p_value"),
                      "rollouts": r["rollouts"],
                      "why": r.get("why") or "; ".join(
                          g["reason"] for g in r.get("gates", []) if not g["passed"])}
                     for r in candidates if r["move"]["target"] == TARGET]
    promoted_at = [p["step"] for p in outcome.promotions]
    trace = [{"segment": sum(1 for st in promoted_at if st < r["step"]),
              "target": r["move"]["target"], "after": r["move"]["after"],
              "proposer": r.get("proposer"),
              "kind": r.get("move_kind"), "verdict": r["verdict"],
              "status": _screen(r).get("status"), "screen_effect": _screen(r).get("effect"),
              "rollouts": r["rollouts"], "screening": r.get("screening_rollouts"),
              "looks": r.get("looks"), "confirmed": bool((r.get("dev") or {}).get("confirm")),
              "val_ran": r.get("val") is not None, "val_passed": _passed(r, "val"),
              "dev_passed": _passed(r, "dev")}
             for r in candidates]
    spent = sum(r["rollouts"] for r in candidates)
    return {
        "promotions": outcome.promotions, "final_config": outcome.final_config,
        "stop_reason": outcome.stop_reason, "steps": outcome.steps,
        "dev_delta": outcome.dev.get("delta"), "val_delta": outcome.val.get("delta"),
        "test_delta": outcome.test.get("delta") if outcome.test else None,
        "candidates": trace,
        "rollouts_search": stop["rollouts_total"],
        "rollouts_start": start["rollouts_total"],
        # Every rollout belongs to a record (issue 14, item 5): the start's first chunk
        # to the start record, the rest to the candidate that asked for it.
        "rollouts_unattributed": stop["rollouts_total"] - start["rollouts_total"] - spent,
        # An expansion's record (forge.search.loop: the farthest value of a passing move's
        # setting) is not a decision of its own: its rollouts count, it does not, so
        # its cheap drops do not flatter the rollouts a decision costs.
        "decisions": sum(r.get("proposer") != "expansion" for r in candidates),
        "expansions": sum(r.get("proposer") == "expansion" for r in candidates),
        "decision_rollouts": spent,
        "confirmations": len(confirmed),
        "screen_status": dict(Counter(_screen(r).get("status", "none") for r in candidates)),
        "confirmation_detail": detail, "boost_records": boost_records,
    }


def run_forge(bench_name: str, seed: int, *, method: str, keep: Path | None) -> dict[str, Any]:
    from forge.search.launch import launch_search

    run_id = f"{method}-{bench_name}-s{seed}"
    with tempfile.TemporaryDirectory(prefix="forge-gates-") as tmp:
        journals = Path(tmp)
        t0 = time.perf_counter()
        if method == "forge":
            outcome = launch_search(BENCHES[bench_name], seed=seed, journals=journals,
                                    run_id=run_id, proposer="auto")
        else:
            outcome = _search_variant(BENCHES[bench_name], seed, journals, run_id,
                                      VARIANTS[method])
        wall = time.perf_counter() - t0
        summary = _summarise_forge(outcome, outcome.records)
        if keep is not None:
            dest = keep / run_id
            dest.mkdir(parents=True, exist_ok=True)
            for name in ("run.json", "journal.jsonl"):
                if (journals / run_id / name).exists():
                    shutil.copy2(journals / run_id / name, dest / name)
    return {"method": method, "bench": bench_name, "seed": seed, "wall_s": wall, **summary}


def _search_variant(bench_path: Path, seed: int, journals: Path, run_id: str,
                    chunks: int) -> Any:
    """``launch_search``'s defaults cut into ``chunks`` chunks (test split not run)."""
    from unittest import mock

    from forge.bench.loader import load_bench
    from forge.journal import RunInfo, write_run
    from forge.journal.run_store import RunStore
    from forge.proposers import build_proposer
    from forge.report.dashboard import DashboardStudy
    from forge.search.loop import Search
    from forge.search.options import SearchOptions

    bench = load_bench(bench_path)
    s, r = bench.spec.search, bench.spec.rollouts
    options = SearchOptions(max_steps=s.max_steps, patience=s.patience, budget=s.budget,
                            k=r.k, seed=seed, concurrency=r.concurrency, timeout_s=r.timeout_s,
                            candidates_per_step=4)
    options = replace(options, run_test=False)
    folder = journals / run_id
    start = bench.defaults
    write_run(folder, RunInfo(
        run_id=run_id, bench=bench.name, bench_path=str(bench.path), bench_digest=bench.digest,
        registry_digest=bench.registry.digest, seed=seed, start_config=start.values,
        start_fingerprint=start.fingerprint,
        options=options.journal_form(proposer="auto", proposer_info=None, first_moves=[]),
        created_at=datetime.now(UTC)))
    proposer = build_proposer("auto", registry=bench.registry, run_dir=folder, seed=seed)
    store = RunStore.open(folder)
    store.subscribe(DashboardStudy(folder, bench.registry).on_record)  # as launch_search
    with mock.patch("forge.search.loop.CHUNKS", chunks):
        return Search(bench, start, proposer, options, run_id=run_id, store=store).run()


def run_naive(bench_name: str, seed: int, path: Path | None = None) -> dict[str, Any]:
    """The naive rule on the same bench (``path``: another than the two here), seeds,
    proposer, K and stop rules as forge. An attempt whose harness raises is left out of
    its task's mean, as forge's means leave it (a task with none scored is left out)."""
    import random

    from forge.bench.loader import load_bench
    from forge.config.moves import apply_move, neighbourhood
    from forge.evaluation.rollout import derive_seed
    from forge.harness import AttemptContext
    from forge.harness.base import RunOutput
    from forge.proposers import EvaluatedConfig, Proposal, SearchView, build_proposer

    t0 = time.perf_counter()
    bench = load_bench(path or BENCHES[bench_name])
    fn = bench.build_harness().sync_callable
    assert fn is not None, "the gate benches have sync python harnesses"
    scorer = bench.scorer
    k = bench.spec.rollouts.k
    s = bench.spec.search
    budget = s.budget.rollouts
    registry = bench.registry
    proposer = build_proposer("auto", registry=registry, run_dir=None, seed=seed)
    seeds = {split: {t.id: [derive_seed(seed, split, t.id, i) for i in range(k)]
                     for t in bench.tasks(split)} for split in ("dev", "val")}
    used = 0

    def evaluate(values: dict[str, Any], split: str) -> float:
        nonlocal used
        means = []
        for task in bench.tasks(split):
            scores = []
            for i, attempt_seed in enumerate(seeds[split][task.id]):
                ctx = AttemptContext(seed=attempt_seed, attempt=i, split=split,
                                     timeout_s=bench.spec.rollouts.timeout_s, deadline=0.0)
                try:
                    out = RunOutput.model_validate(fn(dict(values), task, ctx))
                except Exception:  # a failed attempt: unscored, left out of the mean
                    continue
                scores.append(scorer.score(task, out).value)  # type: ignore[union-attr]
            if scores:
                means.append(sum(scores) / len(scores))
            used += k
        return sum(means) / len(means)

    def rng(*parts: object) -> random.Random:
        import hashlib
        text = "\x1f".join(str(p) for p in (seed, *parts))
        return random.Random(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big"))

    incumbent = bench.defaults
    inc_dev = evaluate(incumbent.values, "dev")
    inc_val = evaluate(incumbent.values, "val")
    history = [EvaluatedConfig(incumbent.values, incumbent.fingerprint, inc_dev,
                               len(bench.tasks("dev")))]
    proposer.observe(incumbent, inc_dev)
    tried: set[tuple[str, str]] = set()
    promotions: list[dict[str, Any]] = []
    step = since = decisions = decision_rollouts = 0
    while True:
        if step >= s.max_steps:
            stop = "max_steps"
        elif since >= s.patience:
            stop = "patience"
        elif budget is not None and used >= budget:
            stop = "budget_rollouts"
        else:
            stop = ""
        untried = [m for m in neighbourhood(registry, incumbent)
                   if (incumbent.fingerprint,
                       apply_move(registry, incumbent, m).fingerprint) not in tried]
        if not stop and not untried:
            stop = "local_optimum"
        if stop:
            break
        step += 1
        view = SearchView(registry=registry, incumbent=incumbent, untried=untried,
                          history=list(history), dev_attempts=[], step=step,
                          rng=rng("propose", step))
        # The proposer ranks every untried move and may add jumps, which this rule
        # does not take: the first four neighbours it ranks are evaluated.
        proposals = [p for p in proposer.propose(view, len(untried)) if p.move in untried]
        if not proposals:
            rest = untried[:]
            rng("fallback", step).shuffle(rest)
            proposals = [Proposal(move=m, proposer="sweep", reason="fallback") for m in rest]
        best: tuple[float, float, Any, Any] | None = None
        for proposal in proposals[:4]:
            if budget is not None and used >= budget:
                break
            candidate = apply_move(registry, incumbent, proposal.move)
            before = used
            dev = evaluate(candidate.values, "dev")
            history.append(EvaluatedConfig(candidate.values, candidate.fingerprint, dev,
                                           len(bench.tasks("dev"))))
            proposer.observe(candidate, dev)
            tried.add((incumbent.fingerprint, candidate.fingerprint))
            if dev > inc_dev + IMPROVED:
                val = evaluate(candidate.values, "val")
                if val >= inc_val and (best is None or dev > best[0]):
                    best = (dev, val, proposal.move, candidate)
            decisions += 1
            decision_rollouts += used - before
        if best is not None:
            inc_dev, inc_val, move, incumbent = best
            promotions.append({"step": step, "target": move.target, "before": move.before,
                               "after": move.after})
            since = 0
        else:
            since += 1
    return {"method": "naive", "bench": bench_name, "seed": seed,
            "wall_s": time.perf_counter() - t0, "promotions": promotions,
            "final_config": incumbent.values, "stop_reason": stop, "steps": step,
            "rollouts_search": used, "decisions": decisions,
            "decision_rollouts": decision_rollouts, "confirmations": None,
            "screen_status": {}, "confirmation_detail": [], "boost_records": [],
            "candidates": [], "dev_delta": None, "val_delta": None, "test_delta": None}


def _job(args: tuple[str, str, int, str | None]) -> dict[str, Any]:
    method, bench, seed, keep = args
    import logging
    logging.disable(logging.WARNING)
    keep_path = Path(keep) if keep else None
    if method == "naive":
        return run_naive(bench, seed)
    return run_forge(bench, seed, method=method, keep=keep_path)


# -- statistics and the table ----------------------------------------------------------------


def wilson(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def _rate(runs: list[dict[str, Any]], pred: Any) -> dict[str, Any]:
    hits = sum(1 for r in runs if pred(r))
    low, high = wilson(hits, len(runs))
    return {"hits": hits, "n": len(runs), "rate": hits / len(runs) if runs else None,
            "ci95": [low, high]}


def aggregate(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for method in ALL_METHODS:
        for bench in BENCHES:
            rs = [r for r in runs if r["method"] == method and r["bench"] == bench]
            if not rs:
                continue
            decisions = sum(r["decisions"] for r in rs)
            spent = sum(r["decision_rollouts"] for r in rs)
            row: dict[str, Any] = {
                "searches": len(rs),
                "promoted_any": _rate(rs, lambda r: bool(r["promotions"])),
                "rollouts_per_search": statistics.fmean(r["rollouts_search"] for r in rs),
                "rollouts_per_search_sd": statistics.pstdev(r["rollouts_search"] for r in rs),
                "decisions_per_search": decisions / len(rs),
                "rollouts_per_decision": spent / decisions if decisions else None,
                "promotions_per_search": statistics.fmean(len(r["promotions"]) for r in rs),
                "steps_per_search": statistics.fmean(r["steps"] for r in rs),
                "stop_reasons": dict(Counter(r["stop_reason"] for r in rs)),
                "wall_s_per_search": statistics.fmean(r["wall_s"] for r in rs),
            }
            if bench == "effect":
                row["power"] = _rate(rs, lambda r: r["final_config"].get(TARGET) is True)
                row["neutral_promoted"] = _rate(
                    rs, lambda r: any(p["target"] != TARGET for p in r["promotions"]))
            if method != "naive":
                confirmations = sum(r["confirmations"] for r in rs)
                row["confirmations_per_search"] = confirmations / len(rs)
                row["rollouts_per_confirmation"] = (spent / confirmations if confirmations
                                                    else None)
                row["screen_status"] = dict(sum((Counter(r["screen_status"]) for r in rs),
                                                Counter()))
                row["rollouts_unattributed"] = sum(r["rollouts_unattributed"] for r in rs)
                row["rollouts_start_per_search"] = statistics.fmean(
                    r["rollouts_start"] for r in rs)
                boost = [b["rollouts"] for r in rs for b in r["boost_records"]
                         if b["verdict"] == "promoted"]
                row["rollouts_per_boost_promotion"] = _mean(boost)
            out[f"{method}/{bench}"] = row
    return out


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def diagnostics(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Where forge's rollouts go, and how the gates behave on neutral and real moves."""
    out: dict[str, Any] = {}
    for method in ALL_METHODS[:-1]:
        for bench in BENCHES:
            rs = [r for r in runs if r["method"] == method and r["bench"] == bench]
            if not rs:
                continue
            cands = [c for r in rs for c in r["candidates"]]
            neutral = [c for c in cands if c["target"] != TARGET]
            confirmed = [c for c in cands if c["confirmed"]]
            boost_up = [c for c in cands if c["target"] == TARGET and c["after"] is True
                        and c["screen_effect"] is not None]
            to_val = [c for c in neutral if c["val_ran"]]
            boost_val = [c for c in boost_up if c["val_ran"]]
            won = [r for r in rs if r["final_config"].get(TARGET) is True
                   and len(r["promotions"]) == 1]
            out[f"{method}/{bench}"] = {
                "candidates": len(cands),
                "jumps": sum(c["kind"] == "jump" for c in cands),
                "status": dict(Counter(c["status"] for c in cands)),
                "screen_pass_rate_neutral": (sum(c["status"] == "pass" for c in neutral)
                                             / len(neutral) if neutral else None),
                "screening_rollouts_per_candidate": _mean(
                    [c["screening"] if c["screening"] is not None else c["rollouts"]
                     for c in cands]),
                "confirmations": len(confirmed),
                "looks_per_confirmation": _mean([c["looks"] for c in confirmed
                                                 if c["looks"] is not None]),
                "confirmation_rollouts": _mean([c["rollouts"] - (c["screening"] or 0)
                                                for c in confirmed]),
                "neutral_reaching_val": len(to_val),
                "neutral_val_pass_rate": (sum(c["val_passed"] for c in to_val) / len(to_val)
                                          if to_val else None),
                "boost_val_pass_rate": (sum(c["val_passed"] for c in boost_val) / len(boost_val)
                                        if boost_val else None),
                "boost_screen_effect_mean": _mean([c["screen_effect"] for c in boost_up]),
                "boost_only_runs": len(won),
                "boost_only_reported_dev_delta": _mean([r["dev_delta"] for r in won
                                                        if r["dev_delta"] is not None]),
                "boost_only_val_delta": _mean([r["val_delta"] for r in won
                                               if r["val_delta"] is not None]),
                "boost_only_test_delta": _mean([r["test_delta"] for r in won
                                                if r["test_delta"] is not None]),
                "rollouts_unattributed": sum(r["rollouts_unattributed"] for r in rs),
            }
    return out


def diagnostics_text(diag: dict[str, Any]) -> str:
    def f(x: Any, fmt: str = "+.3f") -> str:
        return "—" if x is None else format(x, fmt)

    lines = ["| forge run / bench | candidates (jumps) | screen statuses | neutral screen pass | "
             "screening rollouts / candidate | confirmations: looks, rollouts each | "
             "neutral → val gate (passed) | boost val pass | boost screen effect | "
             "boost-only runs: dev / val / test Δ | rollouts in no record |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for key, d in diag.items():
        nv = d["neutral_val_pass_rate"]
        status = ", ".join(f"{k} {v}" for k, v in sorted(d["status"].items(), key=str))
        lines.append(
            f"| {key} | {d['candidates']} ({d['jumps']}) | {status} | "
            f"{f(d['screen_pass_rate_neutral'], '.1%')} | "
            f"{f(d['screening_rollouts_per_candidate'], ',.0f')} | "
            f"{d['confirmations']}: {f(d['looks_per_confirmation'], '.1f')}, "
            f"{f(d['confirmation_rollouts'], ',.0f')} | "
            f"{d['neutral_reaching_val']} ({f(nv, '.0%')}) | {f(d['boost_val_pass_rate'], '.0%')}"
            f" | {f(d['boost_screen_effect_mean'])} | "
            f"{f(d['boost_only_reported_dev_delta'])} / {f(d['boost_only_val_delta'])} / "
            f"{f(d['boost_only_test_delta'])} (n={d['boost_only_runs']}) | "
            f"{d['rollouts_unattributed']:,} |")
    return "\n".join(lines)


def _pct(rate: dict[str, Any] | None) -> str:
    if rate is None:
        return "—"
    lo, hi = rate["ci95"]
    return f"{100 * rate['rate']:.1f}% ({rate['hits']}/{rate['n']}; {100 * lo:.1f}–{100 * hi:.1f})"


# The baseline (the search before issue 14, results/gates.md of 2026-11-30):
# rollouts per decision on noeffect / effect, and the target: a 30% cut.
BASELINE_PER_DECISION = {"noeffect": 364, "effect": 401}
TARGET_CUT = 0.30


def table(agg: dict[str, Any]) -> str:
    def num(row: dict[str, Any] | None, key: str) -> str:
        return "—" if row is None or row.get(key) is None else f"{row[key]:,.0f}"

    lines = [
        "| method | false promotions on noeffect (≤ 5%) | power on effect: final boost=true "
        "(≥ 80%) | effect: any neutral move promoted | rollouts / search noeffect / effect | "
        "rollouts / decision noeffect / effect (≤ 255 / 281) | "
        "rollouts / confirmation noeffect / effect | rollouts / boost promotion |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for method in ALL_METHODS:
        n, e = agg.get(f"{method}/noeffect"), agg.get(f"{method}/effect")
        if n is None and e is None:
            continue
        lines.append(
            f"| {method} | {_pct(n['promoted_any']) if n else '—'} | "
            f"{_pct(e['power']) if e else '—'} | {_pct(e['neutral_promoted']) if e else '—'} | "
            f"{num(n, 'rollouts_per_search')} / {num(e, 'rollouts_per_search')} | "
            f"{num(n, 'rollouts_per_decision')} / {num(e, 'rollouts_per_decision')} | "
            f"{num(n, 'rollouts_per_confirmation')} / {num(e, 'rollouts_per_confirmation')} | "
            f"{num(e, 'rollouts_per_boost_promotion')} |")
    lines += ["", "| method / bench | decisions / search | steps / search | promotions / search "
              "| confirmations / search | stop reasons | s / search |",
              "|---|---|---|---|---|---|---|"]
    for key, row in agg.items():
        stops = ", ".join(f"{k} {v}" for k, v in sorted(row["stop_reasons"].items()))
        conf = row.get("confirmations_per_search")
        lines.append(f"| {key} | {row['decisions_per_search']:.1f} | "
                     f"{row['steps_per_search']:.1f} | {row['promotions_per_search']:.2f} | "
                     f"{'—' if conf is None else f'{conf:.2f}'} | {stops} | "
                     f"{row['wall_s_per_search']:.2f} |")
    return "\n".join(lines)


def verdict(agg: dict[str, Any]) -> str:
    """The issue's gate targets for forge with its defaults, one line each."""
    n, e = agg.get("forge/noeffect"), agg.get("forge/effect")
    if n is None or e is None:
        return ""
    lines = []
    fp, power = n["promoted_any"], e["power"]
    lines.append(f"false promotions {100 * fp['rate']:.1f}% (target ≤ 5%: "
                 f"{'met' if fp['rate'] <= 0.05 else 'missed'}); power {100 * power['rate']:.1f}% "
                 f"(target ≥ 80%: {'met' if power['rate'] >= 0.8 else 'missed'})")
    for bench, row in (("noeffect", n), ("effect", e)):
        base = BASELINE_PER_DECISION[bench]
        per = row["rollouts_per_decision"]
        target = base * (1 - TARGET_CUT)
        lines.append(f"rollouts per decision on {bench}: {per:,.0f} vs {base} before "
                     f"({100 * (per / base - 1):+.0f}%; target ≤ {target:.0f}: "
                     f"{'met' if per <= target else 'missed'})")
    return "\n".join(lines)


def _g(x: float | None) -> str:
    return "—" if x is None else f"{x:.3g}"


def details(runs: list[dict[str, Any]]) -> str:
    """The confirmations behind forge's promotions of no-effect moves, and its misses."""
    lines: list[str] = []
    for method in ALL_METHODS[:-1]:
        false = [(r["seed"], r["bench"], c) for r in runs if r["method"] == method
                 for c in r["confirmation_detail"]
                 if c["verdict"] == "promoted" and c["target"] != TARGET]
        if false:
            lines.append(f"{method}: neutral promotions (seed, bench, move, screen p, "
                         "confirm p [nominal at the last look] / level [index], looks, "
                         "val lower bound):")
            for seed, bench, c in false:
                lines.append(f"  s{seed} {bench} step {c['step']} {c['target']}->{c['after']}: "
                             f"screen p={_g(c['screen_p'])}, confirm p={_g(c['confirm_p'])} "
                             f"[{_g(c['nominal'])}] / {_g(c['level'])} [{c['index']}], "
                             f"{c['looks']} looks, val low={_g(c['val_low'])}")
        misses = [r for r in runs if r["method"] == method and r["bench"] == "effect"
                  and r["final_config"].get(TARGET) is not True]
        if misses:
            lines.append(f"{method}: effect searches ending without boost=true:")
            for r in misses:
                recs = "; ".join(f"step {b['step']} {b['before']}->{b['after']} {b['verdict']} "
                                 f"(screen {b['screen']}, p={_g(b['screen_p'])}) {b['why'][:140]}"
                                 for b in r["boost_records"]) or "boost never proposed"
                lines.append(f"  s{r['seed']} stop={r['stop_reason']} steps={r['steps']} "
                             f"promotions={[p['target'] for p in r['promotions']]}: {recs}")
    return "\n".join(lines)


def machine() -> str:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{platform.machine()} {cpu}, {os.cpu_count()} cpus, python "
            f"{sys.version.split()[0]}, {platform.system()} {platform.release()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20 seeds; print only")
    parser.add_argument("--seeds", type=int, default=None, help="searches per bench and method")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--keep-journals", type=Path, default=None,
                        help="copy each forge run's run.json and journal.jsonl here")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--tag", default="", help="write results/gates-TAG.{json,md} instead")
    parser.add_argument("--rerender", type=Path, default=None,
                        help="rewrite a results JSON's .md from its runs, running nothing")
    args = parser.parse_args()
    if args.rerender is not None:
        rerender(args.rerender)
        return
    n = args.seeds or (20 if args.quick else 100)
    methods = [m for m in args.methods.split(",") if m]
    for m in methods:
        if m not in ALL_METHODS:
            parser.error(f"unknown method {m!r}")
    keep = str(args.keep_journals.resolve()) if args.keep_journals else None
    # Import forge (scipy, optuna) once here; forked workers inherit it.
    importlib.import_module("forge.search.launch")
    # Slow jobs first so that the pool does not end on one long straggler.
    order = {m: i for i, m in enumerate(ALL_METHODS)}
    jobs = sorted(((m, b, s, keep) for m in methods for b in BENCHES for s in range(1, n + 1)),
                  key=lambda j: (order[j[0]], j[2], j[1]))
    t0 = time.perf_counter()
    runs: list[dict[str, Any]] = []
    ctx = mp.get_context("fork")
    with ctx.Pool(args.workers, maxtasksperchild=100) as pool:
        for i, run in enumerate(pool.imap_unordered(_job, jobs), 1):
            runs.append(run)
            if i % 25 == 0 or i == len(jobs):
                print(f"[{time.perf_counter() - t0:6.0f} s] {i}/{len(jobs)} searches",
                      file=sys.stderr, flush=True)
    wall = time.perf_counter() - t0
    runs.sort(key=lambda r: (r["method"], r["bench"], r["seed"]))
    agg = aggregate(runs)
    text = table(agg)
    print(text)
    print()
    print(verdict(agg))
    print()
    print(diagnostics_text(diagnostics(runs)))
    extra = details(runs)
    if extra:
        print()
        print(extra)
    print(f"\n{len(runs)} searches in {wall:.0f} s with {args.workers} workers")
    if args.quick or args.no_write:
        return
    meta = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "machine": machine(),
            "command": ("python benchmarks/gates.py " + " ".join(sys.argv[1:])).strip(),
            "seeds_per_bench": n, "workers": args.workers, "wall_s": wall}
    write(HERE / "results", f"gates-{args.tag}" if args.tag else "gates", meta, runs)


SETTINGS = {"tasks": {"dev": 100, "val": 100, "test": 100}, "k": 5, "alpha": 0.05,
            "min_effect": 0.0, "val_margin": 0.02, "max_steps": 30, "patience": 5,
            "budget_rollouts": 20000, "candidates_per_step": 4, "chunks": 6,
            "effect": "+0.10 success probability from boost=true"}


def write(out: Path, stem: str, meta: dict[str, Any], runs: list[dict[str, Any]],
          diag: dict[str, Any] | None = None) -> None:
    """results/STEM.json (one line per search, without the per-candidate trace) and .md."""
    agg = aggregate(runs)
    if diag is None:
        diag = diagnostics(runs)
    extra = details(runs)
    out.mkdir(exist_ok=True)
    head = json.dumps({**meta, "settings": SETTINGS, "summary": agg, "diagnostics": diag},
                      indent=1, default=str)
    lines = [json.dumps({k: v for k, v in r.items() if k != "candidates"}, default=str)
             for r in runs]
    (out / f"{stem}.json").write_text(head[:-2] + ',\n "runs": [\n' + ",\n".join(lines)
                                      + "\n ]\n}\n")
    (out / f"{stem}.md").write_text(
        f"# Gate benchmark\n\n{meta['date']} · {meta['machine']} · {meta['seeds_per_bench']} "
        f"seeds per bench and method · {meta['workers']} workers · {meta['wall_s']:.0f} s\n\n"
        f"`{meta['command']}`\n\n"
        "Rates are fractions of searches with 95% Wilson intervals. Rollouts per search "
        "count every attempt up to the stop record (start config included, final test "
        "evaluation left out). Per decision (the issue's measure): the candidate "
        "records' `rollouts` over their number (screening, confirmation and val for "
        "forge, a screening refusal being a decision too, an expansion's record not, "
        "though its rollouts count; dev and val for naive); the target is a "
        "30% cut from the 364 / 401 of the search before issue 14. Per confirmation: "
        "every candidate's rollouts over the number of confirmations (what one gate "
        "decision costs with the screening that selected it: cheap screening refusals do "
        "not dilute it). Per boost promotion: the rollouts of the record that promoted "
        "boost on effect (its screening and confirmation).\n\n"
        f"{table(agg)}\n\n```\n{verdict(agg)}\n```\n\n"
        "## Diagnostics (forge runs)\n\n"
        "Screen statuses per candidate record (pass: went on to a confirmation; futile / "
        "weak: the race stopped it; aux: its screening put a tolerance out of reach; held: "
        "the memory held it back; none: skipped before screening). Rollouts in no record: "
        "the stop record's total minus the start record's and every candidate's (0 when "
        "every rollout belongs to a journaled record).\n\n"
        f"{diagnostics_text(diag)}\n"
        + (f"\n```\n{extra}\n```\n" if extra else ""))
    print(f"wrote {(out / stem).relative_to(HERE.parent)}.json and .md")


def rerender(path: Path) -> None:
    """Rewrite a results file and its table from the runs it holds (no search is run)."""
    path = path.resolve()
    data = json.loads(path.read_text())
    runs = data.pop("runs")
    meta = {k: data[k] for k in ("date", "machine", "command", "seeds_per_bench", "workers",
                                 "wall_s")}
    has_trace = all("candidates" in r for r in runs)
    write(path.parent, path.stem, meta, runs, None if has_trace else data["diagnostics"])


if __name__ == "__main__":
    main()
