"""Benchmark of the end check's error guarantee: does its bound hold the truth?

    python benchmarks/end_check.py                  # 200 replications; writes
                                                    # benchmarks/results/end-check.json and .md
    python benchmarks/end_check.py --reps 40 --workers 2 --no-write   # a quick look
    python benchmarks/end_check.py --rerender benchmarks/results/end-check.json --sim-runs 4000

The end of a search runs the start config and the final one on the test split, k_test
attempts a task on shared seeds, and checks every auxiliary tolerance
(:func:`forge.gates.checks.tolerance_check`). Its status ``within`` rests on a one-sided 95%
upper bound of the regression over the test tasks (the bound from the attempts' noise,
the tasks held fixed). The promise: if a config's true regression on the test tasks is
past the allowance, the check says ``within`` with probability at most alpha (5%); more
generally the bound lies below the true regression in at most 5% of runs.

Here, on the triage bench's 110 test tasks, the start config is paired with several
configs whose metrics move (the quickstart's final config among them). The truth of
each is its test tasks' expectation, estimated from ``--truth-k`` (1000) attempts a
task of both configs on shared seeds no replication uses (standard error shown). Each
replication evaluates the start and every config on a fresh seed at ``--k`` (20)
attempts a task and runs the check itself. Reported per config and metric: the true
regression against its allowance, how often the bound fell below the truth (target
<= 5%), how often the check said ``within`` (and how often it did so while the truth
was beyond: the error the guarantee bounds), and the same for the bound over tasks like
these (``bound_new_tasks``, the t-bound over tasks), side by side. Then a simulation
of rare events on 110 fixed tasks (exact truth), both bounds' miss rates at k 5 and 20.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from forge.bench.loader import Bench, load_bench  # noqa: E402
from forge.evaluation.evaluate import evaluate  # noqa: E402
from forge.gates.checks import tolerance_check  # noqa: E402
from forge.results.model import EvalResult, TaskAttempts  # noqa: E402
from forge.stats.paired import fixed_tasks_bound  # noqa: E402
from forge.stats.pairs import paired_regressions, regression_allowance  # noqa: E402

BENCH = ROOT / "benches" / "triage"
ALPHA = 0.05
# Configs whose auxiliary metrics move against the start's: the quickstart's final
# config, and single settings that trade harmful actions, latency or tool calls.
CONFIGS: dict[str, dict[str, Any]] = {
    "quickstart final": {"retrieval": "hybrid", "temperature": 0.3, "max_iterations": 2,
                         "query_expansion": True},
    "judge_threshold 0.3": {"judge_threshold": 0.3},
    "judge_threshold 0.2": {"judge_threshold": 0.2},
    "max_iterations 3, search_width 4": {"max_iterations": 3, "search_width": 4},
    "temperature 0.3": {"temperature": 0.3},
}
TRUTH_SEED = 7_000_003

_BENCH: Bench | None = None


def _bench() -> Bench:
    global _BENCH
    if _BENCH is None:
        logging.disable(logging.WARNING)
        _BENCH = load_bench(BENCH)
    return _BENCH


def _attempts(res: EvalResult) -> TaskAttempts:
    return TaskAttempts({t.task_id: t.attempts for t in res.tasks})


def _run(name: str | None, k: int, seed: int) -> TaskAttempts:
    bench = _bench()
    values = {**bench.defaults.values, **(CONFIGS[name] if name else {})}
    return _attempts(evaluate(bench, bench.registry.validate_config(values), split="test",
                              k=k, seed=seed))


def truth(name: str, k: int) -> dict[str, dict[str, float]]:
    """Per metric: the true regression over the test tasks (the mean over tasks of each
    task's expected paired difference, final minus start, signed as worse), its standard
    error, and the allowance. Both configs run on the same seeds, which the truth does
    not depend on and its noise does (paired, it is a fraction of unpaired)."""
    bench = _bench()
    start, final = _run(None, k, TRUTH_SEED), _run(name, k, TRUTH_SEED)
    out: dict[str, dict[str, float]] = {}
    for metric, spec in bench.spec.metrics.items():
        paired = fixed_tasks_bound(paired_regressions(spec, start, final, metric), alpha=ALPHA)
        assert paired is not None  # k attempts a task, k >= 2
        means = start.metric_means(metric)
        before = math.fsum(means.values()) / len(means)
        out[metric] = {"regression": paired.effect, "se": paired.se,
                       "allowed": regression_allowance(spec, before), "before": before}
    return out


def replicate(args: tuple[int, int]) -> dict[str, dict[str, dict[str, Any]]]:
    """One fresh-seed end check of every config against the start."""
    seed, k = args
    bench = _bench()
    start = _run(None, k, seed)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name in CONFIGS:
        final = _run(name, k, seed)
        out[name] = {}
        for metric, spec in bench.spec.metrics.items():
            g = tolerance_check(metric, spec, start, final, alpha=ALPHA)
            out[name][metric] = {"status": g.details["status"], "bound": g.details["bound"],
                                 "bound_new_tasks": g.details.get("bound_new_tasks"),
                                 "allowed": g.details["allowed"]}
    return out


def summarise(truths: dict[str, Any], reps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for name in CONFIGS:
        for metric, tr in truths[name].items():
            cells = [r[name][metric] for r in reps]
            true, allowed = tr["regression"], cells[0]["allowed"]
            beyond = true > allowed
            n = len(cells)
            below = sum(c["bound"] < true for c in cells)
            below_new = sum(c["bound_new_tasks"] < true for c in cells)
            within = sum(c["status"] == "within" for c in cells)
            within_new = sum(c["bound_new_tasks"] <= allowed + 1e-12 for c in cells)
            rows.append({"config": name, "metric": metric, "truth": true, "truth_se": tr["se"],
                         "allowed": allowed, "truth_beyond": beyond, "reps": n,
                         "bound_below_truth": below / n, "bound_new_below_truth": below_new / n,
                         "within": within / n, "within_new": within_new / n,
                         "false_within": (within / n) if beyond else 0.0})
    return rows


#: Simulated 0/1 events on 110 fixed tasks: per task, P(start has it), P(final has it);
#: the attempts of a task share seeds (one uniform draw decides both configs).
SIMULATED: dict[str, list[tuple[float, float]]] = {
    "rare: 10 tasks of 110 carry it": [(0.0, 0.0)] * 100 + [
        (0.5, 0.8), (0.6, 0.8), (0.1, 0.2), (0.05, 0.1), (0.2, 0.15), (0.0, 0.05),
        (0.1, 0.1), (0.3, 0.35), (0.02, 0.06), (0.0, 0.02)],
    "rarer: 6 tasks, in 2-10% of attempts": [(0.0, 0.0)] * 104 + [
        (0.0, 0.05), (0.0, 0.1), (0.02, 0.06), (0.0, 0.03), (0.05, 0.1), (0.0, 0.04)],
    "one task carries it": [(0.0, 0.0)] * 109 + [(0.1, 0.5)],
    "common: every task": [(0.3, 0.35)] * 50 + [(0.1, 0.1)] * 60,
}


def simulate(runs: int, ks: tuple[int, ...] = (5, 20)) -> list[dict[str, Any]]:
    """How often each bound falls below the truth, the tasks fixed (forge's own
    functions: :func:`~forge.stats.fixed_tasks_bound`, :func:`~forge.stats.paired_test`)."""
    import random

    from forge.stats.paired import paired_test
    rng = random.Random(20261202)
    rows = []
    for name, tasks in SIMULATED.items():
        truth = sum(b - a for a, b in tasks) / len(tasks)
        for k in ks:
            fixed = over = 0
            for _ in range(runs):
                diffs = []
                for a, b in tasks:
                    draws = [rng.random() for _ in range(k)]
                    diffs.append([float(u < b) - float(u < a) for u in draws])
                got = fixed_tasks_bound(diffs, alpha=ALPHA)
                bound = got.bound if got is not None else math.inf
                fixed += bound < truth
                over += paired_test([sum(d) / k for d in diffs], alpha=ALPHA).ci_high < truth
            rows.append({"case": name, "k": k, "truth": truth, "runs": runs,
                         "fixed_below": fixed / runs, "over_tasks_below": over / runs})
    return rows


def render(rows: list[dict[str, Any]], meta: dict[str, Any],
           sims: list[dict[str, Any]] | None = None) -> str:
    lines = [
        "# The end check's error guarantee (triage, test split)",
        "",
        f"{meta['command']} · {meta['reps']} replications × k {meta['k']} · truth from "
        f"{meta['truth_k']} attempts a task · alpha {ALPHA} · {meta['seconds']:.0f} s",
        "",
        "| config | metric | true regression (± se) | allowed | bound < truth | "
        "within | bound over new tasks < truth | within by it |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        mark = " (beyond)" if r["truth_beyond"] else ""
        lines.append(
            f"| {r['config']} | {r['metric']} | {r['truth']:+.4g} ± {r['truth_se']:.2g}{mark} "
            f"| {r['allowed']:+.4g} | {r['bound_below_truth']:.1%} | {r['within']:.0%} "
            f"| {r['bound_new_below_truth']:.1%} | {r['within_new']:.0%} |")
    worst = max(rows, key=lambda r: r["bound_below_truth"])
    lines += ["", f"Worst cell: the bound fell below the truth in "
              f"{worst['bound_below_truth']:.1%} of replications ({worst['config']}, "
              f"{worst['metric']}); target <= {ALPHA:.0%}. False `within` (truth beyond, "
              f"check within): at most {max(r['false_within'] for r in rows):.1%} in any cell.",
              f"Mean over the cells: the bound below the truth in "
              f"{sum(r['bound_below_truth'] for r in rows) / len(rows):.1%}."]
    if sims:
        lines += ["", f"## Simulated rare events ({sims[0]['runs']} draws a row, 110 fixed "
                  "tasks, paired 0/1 attempts)", "",
                  "| case | k | truth | bound over these tasks < truth | "
                  "t-bound over tasks < truth |", "|---|---|---|---|---|"]
        lines += [f"| {r['case']} | {r['k']} | {r['truth']:+.4f} | {r['fixed_below']:.1%} | "
                  f"{r['over_tasks_below']:.1%} |" for r in sims]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--truth-k", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--sim-runs", type=int, default=4000)
    ap.add_argument("--rerender", type=Path, default=None,
                    help="the replications of an earlier run's JSON; simulate again")
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    t0 = time.perf_counter()
    if a.rerender is not None:
        saved = json.loads(a.rerender.read_text())
        rows, meta = saved["rows"], saved["meta"]
    else:
        with ProcessPoolExecutor(a.workers) as pool:
            names = list(CONFIGS)
            truths = dict(zip(names, pool.map(truth, names, [a.truth_k] * len(names)),
                              strict=True))
            reps = list(pool.map(replicate, [(1_000 + i, a.k) for i in range(a.reps)]))
        rows = summarise(truths, reps)
        command = "python benchmarks/end_check.py" + "".join(f" {x}" for x in sys.argv[1:])
        meta = {"command": command, "reps": a.reps, "k": a.k, "truth_k": a.truth_k,
                "seconds": time.perf_counter() - t0}
    sims = simulate(a.sim_runs)
    text = render(rows, meta, sims)
    print(text)
    if not a.no_write:
        out = HERE / "results"
        (out / "end-check.json").write_text(json.dumps({"meta": meta, "rows": rows,
                                                        "simulated": sims}, indent=1) + "\n")
        (out / "end-check.md").write_text(text)


if __name__ == "__main__":
    main()
