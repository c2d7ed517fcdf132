"""Benchmark of the tolerance gates' error: how often is a move past a tolerance promoted?

    python benchmarks/tolerance_edge.py     # 1000 searches a case; writes
                                             # benchmarks/results/tolerance-edge.{json,md}
    python benchmarks/tolerance_edge.py --searches 100 --no-write   # a quick look

The confirmation tests each auxiliary tolerance, group-sequentially over its looks,
at the full ``alpha`` (a move is promoted only if every tolerance is shown: an
intersection-union test needs no share per metric). The promise: a move whose true
regression of some metric is at or past its allowance is promoted in at most
``alpha`` (5%) of confirmations. That holds only if each metric's sequential t-test
holds its level; at the edge a test's error is its level, so the rate there is the
number to read. Beside the searches, the same sequential t-test is simulated alone on
normal deltas at the looks those confirmations take (:func:`sequential_t_error`), so
the share the t approximation adds is read without the searches' sampling error.

Each case is a bench of 40 dev / 30 val tasks, K = 4, four declared metrics as on
triage (cost +10% relative, two more relative, one absolute), and one setting,
``boost``, that passes every task (so the dev and val gates always pass and only the
tolerances stand between it and a promotion) and moves cost, and in one case a
second metric, by a known amount with Gaussian noise per attempt; the last case (100
dev / 100 val tasks, K = 5) moves no cost but adds a harmful action on 1% of the
attempts: the rare-event edge, where the t-test's reading of a few events is too
narrow (the exact test for a rare change reads it), and the same at 0.2%, well within,
for that test's power; the last two put harm on a few tasks for both configs, as on
triage, the move taking it off some tasks and onto others, at net +0 (within: the
netted test's power, where the exact test's count of attempts made worse alone refused
most) and +0.01 (the netted test's edge). One single-step search per seed; reported:
the share of searches that promote ``boost``, with its 95% Wilson interval, against
the truth of each case (error where a tolerance is at or past its edge, power where all
are within).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from forge.bench.loader import BudgetSettings, load_bench  # noqa: E402
from forge.journal.run_store import RunStore  # noqa: E402
from forge.proposers import SweepProposer  # noqa: E402
from forge.search.loop import Search  # noqa: E402
from forge.search.options import SearchOptions  # noqa: E402
from forge.stats.paired import wilson_interval  # noqa: E402
from forge.stats.sequential import nominal_level  # noqa: E402

ALPHA = 0.05
METRICS = {"cost": {"direction": "lower", "max_increase": 0.10, "relative": True},
           "wait_ms": {"direction": "lower", "max_increase": 0.25, "relative": True},
           "harm": {"direction": "lower", "max_increase": 0.01},
           "steps": {"direction": "lower", "max_increase": 0.25, "relative": True}}


@dataclass(frozen=True)
class Case:
    """``boost``'s cost and wait_ms lifts with their per-attempt noise sd; ``harm``: the
    share of attempts on which it adds a harmful action (1 in 20 have one for both
    configs, the same attempts: the rest of the attempts leave harm exactly unchanged);
    ``moved``: instead, harm as on triage, on a few tasks of each split for both configs,
    on attempts of their own: the start on tasks 0-4 at 0.2, ``boost`` on tasks 5-6 at
    0.5 (each 1% of the attempts at 100 tasks a split), plus ``moved`` of the attempts
    on tasks 7-8 (the rate there derived from the split's size); the bench's dev / val
    tasks and attempts a task; what the truth is."""

    cost: float
    wait: float
    sd: float
    truth: str
    harm: float | None = None
    moved: float | None = None
    dev: int = 40
    val: int = 30
    k: int = 4


CASES: dict[str, Case] = {
    "cost at its edge (+10%)": Case(0.10, 0.0, 0.3, "edge"),
    "cost and wait_ms both at their edges": Case(0.10, 0.25, 0.3, "edge"),
    "cost past its edge (+12%)": Case(0.12, 0.0, 0.3, "past"),
    "cost well within (+4%)": Case(0.04, 0.0, 0.3, "within"),
    # A rare change: harm +1 on 1% of attempts, +0.01 in all, its allowance. Changed on
    # a few tasks, it is read by the exact test for a rare change, not by the t-test,
    # whose reading of a handful of events promoted it in 12.5% of searches (stop 32).
    "harm changed on 1% of attempts (at its edge, +0.01)": Case(
        0.0, 0.0, 0.0, "edge", harm=0.01, dev=100, val=100, k=5),
    # The price of that exactness: a fifth of the allowance (+0.002) is promoted in
    # what share of searches.
    "harm changed on 0.2% of attempts (within, +0.002)": Case(
        0.0, 0.0, 0.0, "within", harm=0.002, dev=100, val=100, k=5),
    # Harm as on triage (benches/triage: the start acts harmfully on 5 of 110 dev
    # tasks, on 15-25% of their attempts, and a move can take it off some and onto
    # others): the exact test counts the attempts made worse, none of those made
    # better, so a move that only moves harm (net +0) was often not shown within its
    # allowance (320 of 1,000); the netted test (forge.stats.net_regression_p) reads
    # the net rate; the same moved at +0.01 is its edge.
    "harm moved to other tasks (net +0, within)": Case(
        0.0, 0.0, 0.0, "within", moved=0.0, dev=100, val=100, k=5),
    "harm moved to other tasks, +0.01 (at its edge)": Case(
        0.0, 0.0, 0.0, "edge", moved=0.01, dev=100, val=100, k=5),
}

#: The paired tasks at each look of the cost gate in these confirmations (70 at most:
#: 40 dev + 30 val), as their journaled gate details show (``looks``, ``n_tasks``).
LOOKS = (7, 12, 17, 22, 27, 32, 37, 44, 51, 58, 63, 70)

HARNESS = """
import random

COST, WAIT, SD, HARM, MOVED_RATE = {cost}, {wait}, {sd}, {harm}, {moved_rate}

def run(config, task, ctx):
    rng = random.Random(ctx.seed)
    ok = config["boost"] or rng.random() < 0.5
    cost, wait, harm = 1.0, 1.0, 0.0
    if config["boost"]:
        cost += COST + rng.gauss(0.0, SD)
        wait += WAIT + (rng.gauss(0.0, SD) if WAIT else 0.0)
    if HARM is not None:
        u = random.Random(f"harm-{{ctx.seed}}").random()
        harm = 1.0 if u < 0.05 + (HARM if config["boost"] else 0.0) else 0.0
    if MOVED_RATE is not None:
        i = int(task.input["q"].split()[1])
        if config["boost"]:
            rate = 0.5 if i in (5, 6) else MOVED_RATE if i in (7, 8) else 0.0
        else:
            rate = 0.2 if i < 5 else 0.0
        u = random.Random(f"moved-{{ctx.seed}}-{{config['boost']}}").random()
        harm = 1.0 if u < rate else 0.0
    return {{"output": task.expected if ok else "wrong", "cost": cost,
             "metrics": {{"wait_ms": 100.0 * wait, "harm": harm, "steps": 2.0}}}}
"""


def write_bench(root: Path, case: Case) -> Path:
    moved_rate = None
    if case.moved is not None:
        # The same share of each split's attempts: spread on its tasks 7 and 8.
        assert case.dev == case.val, "a moved-harm case needs splits of one size"
        moved_rate = case.moved * case.dev / 2
    root.mkdir(parents=True, exist_ok=True)
    (root / "registry.yaml").write_text(
        "name: edge\nsettings:\n  boost: {type: bool, default: false}\n", encoding="utf-8")
    (root / "harness.py").write_text(textwrap.dedent(
        HARNESS.format(cost=case.cost, wait=case.wait, sd=case.sd, harm=case.harm,
                       moved_rate=moved_rate)),
        encoding="utf-8")
    (root / "tasks").mkdir(exist_ok=True)
    for split, n in (("dev", case.dev), ("val", case.val), ("test", 10)):
        rows = [json.dumps({"id": f"{split}-{i:02d}", "input": {"q": f"{split} {i}"},
                            "expected": f"{split} answer {i}"}) for i in range(n)]
        (root / "tasks" / f"{split}.jsonl").write_text("\n".join(rows) + "\n",
                                                       encoding="utf-8")
    bench = root / "bench.yaml"
    bench.write_text(
        "name: edge\nharness: {python: \"harness:run\"}\nregistry: registry.yaml\n"
        "splits: {dev: tasks/dev.jsonl, val: tasks/val.jsonl, test: tasks/test.jsonl}\n"
        f"rollouts: {{k: {case.k}, concurrency: 4, timeout_s: 10}}\nscorer: exact\n"
        f"metrics: {json.dumps(METRICS)}\n"
        f"gates: {{alpha: {ALPHA}, min_effect: 0.0, val_margin: 0.02}}\n"
        "search: {max_steps: 1, patience: 1}\n", encoding="utf-8")
    return bench


def one(args: tuple[str, int]) -> tuple[str, int, bool, list[str]]:
    case, seed = args
    logging.disable(logging.WARNING)
    spec = CASES[case]
    with tempfile.TemporaryDirectory(prefix="forge-edge-") as tmp:
        bench = load_bench(write_bench(Path(tmp) / "bench", spec))
        folder = Path(tmp) / "run"
        folder.mkdir()
        options = SearchOptions(max_steps=1, patience=1, budget=BudgetSettings(), k=spec.k,
                                seed=seed, concurrency=4, timeout_s=10.0, run_test=False)
        outcome = Search(bench, bench.defaults, SweepProposer(), options, run_id="edge",
                         store=RunStore.open(folder)).run()
    [record] = [r for r in outcome.records
                if r["kind"] == "candidate" and r["move"]["target"] == "boost"]
    return (case, seed, record["verdict"] == "promoted",
            [g["name"] for g in record["gates"] if not g["passed"]])


def sequential_t_error(reps: int, seed: int = 0) -> dict[str, float]:
    """How often the gate's sequential test passes at the edge, from normal per-task
    deltas: with a t-test at each look (what the gate does, the variance estimated)
    and with a z-test of known variance (what the boundaries are exact for)."""
    rng = np.random.default_rng(seed)
    n_max = LOOKS[-1]
    levels = [nominal_level([n / n_max for n in LOOKS[:i + 1]], ALPHA)
              for i in range(len(LOOKS))]
    out = {}
    for mode in ("t", "z"):
        hits = 0
        for start in range(0, reps, 50_000):
            d = rng.normal(0.0, 1.0, (min(50_000, reps - start), n_max))
            total, squares = np.cumsum(d, 1), np.cumsum(d * d, 1)
            alive = np.ones(len(d), dtype=bool)
            for n, level in zip(LOOKS, levels, strict=True):
                mean = total[:, n - 1] / n
                if mode == "t":
                    sd = np.sqrt((squares[:, n - 1] - n * mean * mean) / (n - 1))
                    p = stats.t.cdf(mean / (sd / np.sqrt(n)), n - 1)
                else:
                    p = stats.norm.cdf(mean * np.sqrt(n))
                passed = alive & (p <= level)
                hits += int(passed.sum())
                alive &= ~passed
        out[mode] = hits / reps
    return out


def render(data: dict[str, Any]) -> str:
    lines = [
        "# Tolerance gates at their edge", "",
        f"`{data['command']}` · {data['date']} · {data['searches']} searches a case · "
        f"{data['wall_s']:.0f} s", "",
        "Each tolerance is tested at alpha = 0.05 (an intersection-union test; four "
        "metrics declared). Target: promoted in at most 5% where a tolerance is at or "
        "past its edge.", "",
        "| case | truth | promoted | 95% CI | refused by a tolerance | refused otherwise |",
        "|---|---|---|---|---|---|"]
    for row in data["rows"]:
        lo, hi = row["ci"]
        lines.append(f"| {row['case']} | {row['truth']} | {row['promoted']}/{row['n']} "
                     f"({100 * row['rate']:.1f}%) | {100 * lo:.1f}–{100 * hi:.1f}% | "
                     f"{row['refused_aux']} | {row['refused_other']} |")
    sim = data["simulated"]
    lines += ["", f"The sequential test alone, at the edge, on normal per-task deltas at "
              f"these confirmations' looks ({', '.join(map(str, LOOKS))} tasks), "
              f"{sim['reps']:,} replications: passed in {100 * sim['t']:.2f}% with the "
              f"t-test the gate uses, {100 * sim['z']:.2f}% with a z-test of known "
              f"variance (what the boundaries are exact for; ±"
              f"{100 * 1.96 * (ALPHA * (1 - ALPHA) / sim['reps']) ** 0.5:.2f} points)."]
    return "\n".join(lines) + "\n"


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number (got {text!r})") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (got {value})")
    return value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--searches", type=_positive, default=1000)
    ap.add_argument("--sim-reps", type=_positive, default=400_000)
    ap.add_argument("--workers", type=_positive, default=2)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    t0 = time.perf_counter()
    jobs = [(case, seed) for case in CASES for seed in range(args.searches)]
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(one, jobs, chunksize=4))
    rows = []
    for case, spec in CASES.items():
        mine = [r for r in results if r[0] == case]
        promoted = sum(r[2] for r in mine)
        refused_aux = sum(1 for r in mine if not r[2] and r[3]
                          and all(g.startswith("aux:") for g in r[3]))
        rows.append({"case": case, "truth": spec.truth, "n": len(mine), "promoted": promoted,
                     "rate": promoted / len(mine),
                     "ci": wilson_interval(promoted, len(mine), 1.959964),
                     "refused_aux": refused_aux,
                     "refused_other": len(mine) - promoted - refused_aux})
    command = "python benchmarks/tolerance_edge.py" + (
        f" --searches {args.searches}" if args.searches != 1000 else "") + (
        f" --sim-reps {args.sim_reps}" if args.sim_reps != 400_000 else "")
    simulated = {"reps": args.sim_reps, **sequential_t_error(args.sim_reps)}
    data = {"command": command, "date": time.strftime("%Y-%m-%d"),
            "searches": args.searches, "wall_s": time.perf_counter() - t0, "rows": rows,
            "simulated": simulated}
    text = render(data)
    print(text)
    if not args.no_write:
        out = HERE / "results"
        (out / "tolerance-edge.json").write_text(json.dumps(data, indent=1) + "\n",
                                                 encoding="utf-8")
        (out / "tolerance-edge.md").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
