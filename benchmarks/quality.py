"""Search-quality contest (issue #9): which config does each method choose, and how good is it
really?

    python benchmarks/quality.py --all --workers 2     # the whole table: results/quality.md
    python benchmarks/quality.py --quick               # closedform only, in minutes
    python benchmarks/quality.py --bench walksat --budgets 2000 --seeds 10 --resume
    python benchmarks/quality.py --rerender benchmarks/results/quality-triage.json
    python benchmarks/quality.py --bench closedform --budgets 2000,5000 --seeds 20 --resume \
        --no-climb --methods forge-auto,tpe-con,tpe-mv-con,random,smac \
        --out quality-closedform-rivals          # the rivals table (results/<out>.md)

Methods, all from the bench's start config (bench.yaml ``defaults``), with the bench's K:

- ``forge-auto``: ``launch_search(..., budget_rollouts=B, proposer="auto")`` with the
  budget as its stop, as the samplers have it: ``max_steps`` and ``patience`` beyond
  reach (the contest compares at equal spend; with the bench's patience forge stops
  sooner, closedform at 20k after 8,760 rollouts).
- ``forge-sweep``: the same with ``proposer="sweep"``.
- ``tpe``: Optuna TPE (``TPESampler(seed)``) over whole configs (the registry's settings as
  Optuna distributions: ints with their step or log scale, floats on their step grid,
  enums and bools categorical); each trial = ``evaluate(bench, cfg, split="dev", k=K,
  seed=seed)``, costing K x n_dev rollouts; trials while the next one fits in B; the
  chosen config is the trial with the best dev mean (first on ties), as a user would.
  The first trial is the start config (enqueued), so "best by dev" can fall back to it.
- ``tpe-con``: the rival a careful user would pick: the same TPE with the tolerances
  as constraints. Each trial's dev auxiliary metrics are set on it before ``tell``
  (``trial.set_constraint(metric, regression - allowance)``, <= 0 feasible; a relative
  allowance is a fraction of the start trial's mean; Optuna 5's TPE reads them, its
  ``constraints_func`` being deprecated), and the chosen config is the best dev mean
  among the feasible trials (the start, trial 0, always is).
- ``tpe-mv-con``: ``tpe-con`` with ``TPESampler(seed, multivariate=True, group=True)``,
  the tolerances again set with ``trial.set_constraint`` (``constraints_func`` warns
  FutureWarning since Optuna 5.0). Optuna 5's ``TPESampler(seed)`` is already
  multivariate for one objective (``multivariate=None`` means True there), so
  ``tpe-con`` is the multivariate TPE too; ``group`` adds the decomposition of the
  space by the trials' parameter sets, which a flat registry leaves whole (on
  closedform tpe-mv-con's trials are tpe-con's, seed by seed).
- ``tpe-uni-con``: ``tpe-con`` with ``TPESampler(seed, multivariate=False)``: the
  univariate TPE (one Parzen estimator per setting), Optuna 4's default.
- ``smac``: SMAC3's algorithm-configuration facade (``quality_smac.py``, which says how:
  the registry as a ConfigSpace, instances = groups of 10 dev tasks with seeds, a trial
  = one config on one instance with K attempts, cost = 1 - score, the budget in
  rollouts). SMAC3 has no constraints: a config whose dev auxiliary means over its
  trials break a tolerance vs the start config's is told the worst cost (1.0); the
  chosen config is SMAC's incumbent if it passes that check, else the start
  (``fallback`` in its rows, counted under the table). Needs
  ``pip install -r benchmarks/requirements.txt``; forge never imports smac.
- ``random``: the same as ``tpe`` with ``RandomSampler(seed)``.
- ``tpe-tol`` / ``random-tol``: the trials of ``tpe`` / ``random`` (sampled without
  constraints), but the chosen config is the best dev mean among trials whose dev
  auxiliary metrics stay within the bench's tolerances of the start config's trial
  (point estimates, as a careful user would check). No extra rollouts.
- ``naive``: the SelfForge rule as in benchmarks/gates.py, on the public API: each step
  the auto proposer ranks the untried ``±step`` neighbours (forge.config.moves.neighbourhood;
  the proposer's jumps are dropped) and the first 4 are evaluated on dev (K, same
  seeds); one qualifies if dev mean > incumbent's + 1e-9 and val mean >= incumbent's;
  the best qualifier is promoted. Same max_steps, patience, budget B, local-optimum stop.

TPE, random and SMAC are run once per seed up to the largest budget; a smaller budget's
result is the prefix of trials that fits in it (the samplers do not know the budget,
so this is the same as a separate run; SMAC's result is its incumbent at that point).

Benches (``quality_truth.BENCHES``): triage and walksat (benches/), and closedform and
sparse (benchmarks/benches/: success probabilities in closed form, so truth is exact
and free; their registry grids are enumerated for the true optimum).

Each chosen config is scored by ``quality_truth.truth`` (large K, separate seed, cached;
exact on closedform). Reported per bench, budget and method over the seeds: true test
score mean ± sd, regret to the best config known (the exact grid optimum on closedform;
elsewhere the max of the oracle hill-climb and every config whose truth was computed),
P(true test < start's true test - EPS_WORSE), P(any declared auxiliary metric beyond its
allowance vs the start config, in truth on test), rollouts spent (search only; forge's
final test evaluation excluded); then a verdict line per budget: forge-auto against
tpe-con on mean true test, and forge-auto's P(violates) and P(worse) against 5%.

Every finished search is logged to ``cache/runs-<bench>.jsonl`` under a key that holds
its code version (:func:`code_version`): forge's search modules for forge-* and naive,
the bench digest for the black-box samplers. ``--resume`` (and ``--all``, ``--quick``)
reuse only entries of the current version, so runs of an earlier search are never
mixed in; the truth cache depends on the bench digest only and stays valid.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import math
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import quality_truth as qt  # noqa: E402
from gates import machine, wilson  # noqa: E402

METHODS = ("forge-auto", "forge-sweep", "tpe", "tpe-con", "tpe-uni-con", "tpe-mv-con",
           "tpe-tol", "random", "random-tol", "smac", "naive")
SEARCHES = ("forge-auto", "forge-sweep", "naive")  # one search per budget
# One run per seed up to the largest budget.
SAMPLERS = ("tpe", "tpe-con", "tpe-uni-con", "tpe-mv-con", "random", "smac")
CONSTRAINED = ("tpe-con", "tpe-uni-con", "tpe-mv-con")  # told the tolerances as Optuna constraints
# The budgets of the one-command run (``--all``), in the order it runs the benches:
# cheapest first, so that an interrupted run has the most benches finished.
BUDGETS = {"closedform": [2000, 5000, 20000], "triage": [2000, 5000, 20000],
           "walksat": [2000, 5000, 20000]}
EPS_WORSE = 0.005
IMPROVED = 1e-9
TARGET_P = 0.05  # the bound on P(violates) and P(worse than start)
# forge's rooms and modules whose code decides a search's (or naive's) result; a change
# to any of them makes earlier logged runs stale. (The names before the rooms, search.py,
# confirm.py and the rest at forge's top, no longer existed: code_version failed.)
SEARCH_CODE = ("search", "gates", "stats", "proposers", "config", "journal/records.py")
# The stop forge runs with in the contest: the budget, as for the samplers (a step count
# no search of these budgets reaches).
UNBOUNDED_STEPS = 1_000_000
# Bumped when run_forge changes how it calls the search.
FORGE_CONTEST_VERSION = 2
# Bumped when run_blackbox changes what it computes; with the bench digest, the version
# of a sampler's logged runs.
BLACKBOX_VERSION = 1


def _quiet() -> None:
    logging.disable(logging.WARNING)
    try:
        import optuna
        optuna.logging.set_verbosity(optuna.logging.ERROR)
    except ImportError:
        pass


def code_version(method: str, name: str) -> str:
    """The version a logged run of ``method`` on bench ``name`` is valid for: the journal
    format and a hash of forge's search code (forge-*, naive), or the bench digest
    (the samplers, whose runs depend on forge's evaluation of a config only)."""
    if method == "smac":
        import smac
        from quality_smac import SMAC_VERSION, TASKS_PER_INSTANCE
        return (f"bench-{qt.bench_of(name).digest[:16]}-smac{smac.version}-v{SMAC_VERSION}"
                f"-g{TASKS_PER_INSTANCE}")
    if method in SAMPLERS:
        return f"bench-{qt.bench_of(name).digest[:16]}-bb{BLACKBOX_VERSION}"
    from forge.journal.records import JOURNAL_FORMAT_VERSION
    return (f"journal{JOURNAL_FORMAT_VERSION}-search-{source_hash()[:12]}"
            f"-contest{FORGE_CONTEST_VERSION}")


def source_hash() -> str:
    """sha256 of forge's ``SEARCH_CODE`` files, each with its path."""
    import forge
    root = Path(forge.__file__).resolve().parent
    h = hashlib.sha256()
    for rel in SEARCH_CODE:
        path = root / rel
        for f in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


# -- methods -----------------------------------------------------------------------------------


def run_forge(name: str, seed: int, budget: int, proposer: str) -> dict[str, Any]:
    from forge.search.launch import launch_search
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="forge-quality-") as tmp:
        out = launch_search(qt.BENCHES[name], journals=Path(tmp), run_id=f"q-{proposer}-{seed}",
                            seed=seed, proposer=proposer, budget_rollouts=budget,
                            max_steps=UNBOUNDED_STEPS, patience=UNBOUNDED_STEPS)
    stop = next((r for r in out.records if r.get("kind") == "stop"), {})
    spent = stop.get("rollouts_total", out.rollouts_used)
    return [{"final_config": out.final_config, "rollouts": spent,
             "rollouts_used_reported": out.rollouts_used, "promotions": len(out.promotions),
             "stop_reason": out.stop_reason, "budget": budget,
             "wall_s": time.perf_counter() - t0}]


def _suggest(trial: Any, registry: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, s in registry.settings.items():
        if s.type == "int":
            if getattr(s, "scale", "linear") == "log":
                values[key] = trial.suggest_int(key, s.min, s.max, log=True)
            else:
                values[key] = trial.suggest_int(key, s.min, s.max, step=s.step or 1)
        elif s.type == "float":
            step = getattr(s, "step", None)
            if getattr(s, "scale", "linear") == "log":
                values[key] = trial.suggest_float(key, s.min, s.max, log=True)
            else:
                x = trial.suggest_float(key, s.min, s.max, step=step)
                values[key] = round(x, 10)
        elif s.type == "bool":
            values[key] = trial.suggest_categorical(key, [False, True])
        else:
            values[key] = trial.suggest_categorical(key, list(s.choices))
    return values


def run_blackbox(name: str, seed: int, budgets: list[int], sampler_name: str) -> list[dict]:
    """``tpe``/``random`` (rows for the sampler and its ``-tol`` choice), or a
    constrained TPE (``CONSTRAINED``)."""
    import optuna

    from forge.evaluation.evaluate import evaluate
    t0 = time.perf_counter()
    bench = qt.bench_of(name)
    k = bench.spec.rollouts.k
    cost = k * len(bench.tasks("dev"))
    if sampler_name == "random":
        sampler: Any = optuna.samplers.RandomSampler(seed=seed)
    elif sampler_name == "tpe-mv-con":
        # The constraints go through trial.set_constraint, as for tpe-con: Optuna 5.0
        # deprecated constraints_func (a FutureWarning) and its TPE reads the trial's.
        sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True)
    elif sampler_name == "tpe-uni-con":  # one Parzen estimator per setting
        sampler = optuna.samplers.TPESampler(seed=seed, multivariate=False)
    else:
        sampler = optuna.samplers.TPESampler(seed=seed)
    constrained = sampler_name in CONSTRAINED
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.enqueue_trial(dict(bench.defaults.values))
    cache: dict[str, Any] = {}
    # (cumulative rollouts, dev mean, dev aux metrics, cfg, feasible); trial 0 is the
    # start config.
    trials: list[tuple[int, float, dict[str, float], dict[str, Any], bool]] = []
    start_metrics: dict[str, float] | None = None
    used = 0
    while used + cost <= max(budgets):
        trial = study.ask()
        values = _suggest(trial, bench.registry)
        cfg = bench.registry.validate_config(values)
        if cfg.fingerprint not in cache:  # same seed => same result; still charged
            cache[cfg.fingerprint] = evaluate(bench, cfg, split="dev", k=k, seed=seed)
        res = cache[cfg.fingerprint]
        used += cost
        metrics = dict(res.metrics)
        if start_metrics is None:
            start_metrics = metrics
        feasible = True
        if constrained:
            for metric, value in qt.constraints(name, start_metrics, metrics).items():
                trial.set_constraint(metric, value)
                feasible = feasible and value <= 0
        study.tell(trial, res.mean_score)
        trials.append((used, res.mean_score, metrics, cfg.values, feasible))
    wall = time.perf_counter() - t0
    assert start_metrics is not None, "the budget does not fit the start config's trial"
    out = []
    for b in budgets:
        fit = [t for t in trials if t[0] <= b]
        if constrained:
            # The best dev mean among the trials Optuna was told are feasible.
            pools = [(sampler_name, [t for t in fit if t[4]])]
        else:
            # "-tol": what a careful user does with the same trials: the best dev mean
            # among trials whose dev aux metrics stay within the bench's tolerances of
            # the start config's (point estimates; the start itself is always eligible).
            within = [t for t in fit if not qt.violations(name, start_metrics, t[2])]
            pools = [(sampler_name, fit), (f"{sampler_name}-tol", within)]
        for method, pool in pools:
            best = max(pool, key=lambda t: t[1])  # first max on ties
            out.append({"method": method, "final_config": best[3], "rollouts": fit[-1][0],
                        "trials": len(fit), "eligible": len(pool),
                        "distinct": len({json.dumps(t[3], sort_keys=True) for t in fit}),
                        "chosen_dev": best[1], "budget": b, "wall_s": wall})
    return out


def run_naive(name: str, seed: int, budget: int) -> list[dict]:
    import hashlib
    import random

    from forge.config.moves import apply_move, neighbourhood
    from forge.evaluation.evaluate import evaluate
    from forge.proposers import EvaluatedConfig, Proposal, SearchView, build_proposer
    t0 = time.perf_counter()
    bench = qt.bench_of(name)
    reg = bench.registry
    k = bench.spec.rollouts.k
    s = bench.spec.search
    proposer = build_proposer("auto", registry=reg, run_dir=None, seed=seed)
    used = 0
    n_dev = len(bench.tasks("dev"))

    def ev(cfg: Any, split: str) -> Any:
        nonlocal used
        r = evaluate(bench, cfg, split=split, k=k, seed=seed)
        used += r.n_attempts
        return r

    def rng(*parts: object) -> random.Random:
        text = "\x1f".join(str(p) for p in (seed, *parts))
        return random.Random(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big"))

    inc = bench.defaults
    inc_res = ev(inc, "dev")
    inc_dev, inc_val = inc_res.mean_score, ev(inc, "val").mean_score
    history = [EvaluatedConfig(inc.values, inc.fingerprint, inc_dev, n_dev)]
    proposer.observe(inc, inc_dev)
    tried: set[tuple[str, str]] = set()
    promotions = step = since = 0
    while True:
        stop = ("max_steps" if step >= s.max_steps else "patience" if since >= s.patience
                else "budget_rollouts" if used >= budget else "")
        untried = [m for m in neighbourhood(reg, inc)
                   if (inc.fingerprint, apply_move(reg, inc, m).fingerprint) not in tried]
        if not stop and not untried:
            stop = "local_optimum"
        if stop:
            break
        step += 1
        view = SearchView(registry=reg, incumbent=inc, untried=untried, history=list(history),
                          dev_attempts=list(inc_res.attempts), step=step, rng=rng("propose", step))
        # The proposer ranks every untried move and may add jumps, which this rule
        # does not take: the first four neighbours it ranks are evaluated.
        proposals = [p for p in proposer.propose(view, len(untried)) if p.move in untried]
        if not proposals:
            rest = untried[:]
            rng("fallback", step).shuffle(rest)
            proposals = [Proposal(move=m, proposer="sweep", reason="fallback") for m in rest]
        best = None
        for p in proposals[:4]:
            if used >= budget:
                break
            cand = apply_move(reg, inc, p.move)
            res = ev(cand, "dev")
            dev = res.mean_score
            history.append(EvaluatedConfig(cand.values, cand.fingerprint, dev, n_dev))
            proposer.observe(cand, dev)
            tried.add((inc.fingerprint, cand.fingerprint))
            if dev > inc_dev + IMPROVED:
                val = ev(cand, "val").mean_score
                if val >= inc_val and (best is None or dev > best[0]):
                    best = (dev, val, cand, res)
        if best is not None:
            inc_dev, inc_val, inc, inc_res = best
            promotions += 1
            since = 0
        else:
            since += 1
    return [{"final_config": inc.values, "rollouts": used, "promotions": promotions,
             "stop_reason": stop, "budget": budget, "wall_s": time.perf_counter() - t0}]


def _job(args: tuple) -> tuple[tuple, list[dict]]:
    method, name, seed, budgets = args
    _quiet()
    if method in ("forge-auto", "forge-sweep"):
        rows = run_forge(name, seed, budgets[0], method.split("-")[1])
    elif method == "smac":
        from quality_smac import run_smac
        rows = run_smac(name, seed, list(budgets))
    elif method in SAMPLERS:
        rows = run_blackbox(name, seed, budgets, method)
    else:
        rows = run_naive(name, seed, budgets[0])
    for r in rows:
        r.setdefault("method", method)
        r.update(bench=name, seed=seed)
    return args, rows


def _truth_job(args: tuple) -> tuple[str, dict]:
    name, values, splits = args
    _quiet()
    return json.dumps(values, sort_keys=True), {
        split: qt.truth(name, values, split) for split in splits}


# -- aggregation -------------------------------------------------------------------------------


def aggregate(name: str, runs: list[dict], truths: dict[str, dict], climb: dict | None,
              start: dict) -> dict[str, Any]:
    start_t = start["test"]
    best_known = max([t["test"]["score"] for t in truths.values()]
                     + ([climb["test"]] if climb else []))
    # Every config scored in truth (the cache: chosen configs and the climb's), and the
    # best of them that keeps every declared auxiliary metric within its tolerance.
    scored = [{**t["test"], "config": json.loads(key)} for key, t in truths.items()]
    for f in (qt.CACHE / name).glob(f"*/*-test-k{qt.K_TRUTH['test']}-s{qt.TRUTH_SEED}.json"):
        with contextlib.suppress(json.JSONDecodeError):
            scored.append(json.loads(f.read_text()))
    best_known = max([best_known] + [t["score"] for t in scored])
    feasible = [t for t in scored if not qt.violations(name, start_t["metrics"], t["metrics"])]
    best_feasible = max(feasible, key=lambda t: t["score"])
    optimum = qt.exact_optimum(name)
    if optimum is not None:  # the whole grid in exact truth: the optimum, not a bound
        best_known = max(best_known, optimum["best"]["score"])
        if optimum["best_feasible"]["score"] >= best_feasible["score"]:
            best_feasible = optimum["best_feasible"]
    rows: dict[str, Any] = {}
    for b in sorted({r["budget"] for r in runs}):
        for m in METHODS:
            rs = [r for r in runs if r["budget"] == b and r["method"] == m]
            if not rs:
                continue
            tests, worse, viol, spent = [], 0, 0, []
            for r in rs:
                t = truths[json.dumps(r["final_config"], sort_keys=True)]["test"]
                tests.append(t["score"])
                worse += t["score"] < start_t["score"] - EPS_WORSE
                viol += bool(qt.violations(name, start_t["metrics"], t["metrics"]))
                spent.append(r["rollouts"])
            n = len(rs)
            rows[f"{b}/{m}"] = {
                "budget": b, "method": m, "n": n, "test_mean": statistics.fmean(tests),
                "test_sd": statistics.stdev(tests) if n > 1 else 0.0,
                "test_min": min(tests), "test_max": max(tests),
                "regret_mean": best_known - statistics.fmean(tests),
                "regret_feasible_mean": best_feasible["score"] - statistics.fmean(tests),
                "p_worse": worse / n, "p_worse_ci95": wilson(worse, n),
                "p_violation": viol / n, "p_violation_ci95": wilson(viol, n),
                "rollouts_mean": statistics.fmean(spent), "rollouts_max": max(spent),
                "fallbacks": sum(bool(r.get("fallback")) for r in rs),
                "wall_s_mean": statistics.fmean(r["wall_s"] for r in rs)}
    return {"start_test": start_t["score"], "best_known_test": best_known,
            "best_feasible_test": best_feasible["score"],
            "best_feasible_config": best_feasible.get("config"),
            "configs_scored": len(scored), "exact_optimum": optimum,
            "verdicts": verdicts(rows), "rows": rows}


def verdicts(rows: dict[str, Any]) -> list[dict[str, Any]]:
    """Per budget, the issue's test: forge-auto's mean true test at least tpe-con's, with
    P(violates) and P(worse than start) at most TARGET_P."""
    out = []
    for b in sorted({r["budget"] for r in rows.values()}):
        f, c = rows.get(f"{b}/forge-auto"), rows.get(f"{b}/tpe-con")
        if f is None or c is None:
            continue
        # Runs of two methods share nothing but the seed number: unpaired.
        se = math.sqrt(f["test_sd"] ** 2 / f["n"] + c["test_sd"] ** 2 / c["n"])
        delta = f["test_mean"] - c["test_mean"]
        ok = {"score": delta >= 0, "violates": f["p_violation"] <= TARGET_P,
              "worse": f["p_worse"] <= TARGET_P}
        out.append({"budget": b, "forge": f["test_mean"], "tpe_con": c["test_mean"],
                    "delta": delta, "delta_se": se, "p_violation": f["p_violation"],
                    "p_worse": f["p_worse"], "ok": ok, "met": all(ok.values())})
    return out


def verdict_lines(name: str, agg: dict[str, Any]) -> list[str]:
    lines = []
    for v in agg.get("verdicts", []):
        ok = v["ok"]
        lines.append(
            f"verdict {name} {v['budget']:,}: forge-auto {v['forge']:.3f} vs tpe-con "
            f"{v['tpe_con']:.3f} (Δ {v['delta']:+.3f} ± {v['delta_se']:.3f}: "
            f"{'at least' if ok['score'] else 'below'} tpe-con); P(violates) "
            f"{100 * v['p_violation']:.0f}% ({'≤' if ok['violates'] else '>'} 5%); P(worse) "
            f"{100 * v['p_worse']:.0f}% ({'≤' if ok['worse'] else '>'} 5%) → "
            f"{'target met' if v['met'] else 'target missed'}")
    return lines


def table(agg: dict[str, Any]) -> str:
    lines = ["| budget | method | true test mean ± sd [min–max] | regret to best known | "
             "P(worse than start) | P(violates tolerance) | rollouts spent (mean / max) | n |",
             "|---|---|---|---|---|---|---|---|"]
    for _key, r in agg["rows"].items():
        lines.append(
            f"| {r['budget']:,} | {r['method']} | {r['test_mean']:.3f} ± {r['test_sd']:.3f} "
            f"[{r['test_min']:.3f}–{r['test_max']:.3f}] | {r['regret_mean']:.3f} "
            f"({r['regret_feasible_mean']:+.3f}) | "
            f"{100 * r['p_worse']:.0f}% | {100 * r['p_violation']:.0f}% | "
            f"{r['rollouts_mean']:,.0f} / {r['rollouts_max']:,} | {r['n']} |")
    return "\n".join(lines)


def render(data: dict[str, Any]) -> str:
    agg = data["summary"]
    climb = data.get("climb")
    optimum = agg.get("exact_optimum")
    if optimum:
        known = (f"best config: {agg['best_known_test']:.3f} (the exact optimum of the "
                 f"registry grid, {optimum['configs']:,} configs enumerated)")
        truth = "Truth: exact (the bench's closed-form success probabilities and metric means)."
    else:
        known = (f"best config known: {agg['best_known_test']:.3f} (lower bound on the "
                 "registry's optimum: max of the oracle hill-climb on true test score and "
                 f"every config scored in truth, {agg['configs_scored']} configs)")
        truth = (f"Truth: K={qt.K_TRUTH['test']} attempts per test task on seed "
                 f"{qt.TRUTH_SEED} (no contest run uses it).")
    out = [f"# Search quality: {data['bench']}", "",
           f"{data['date']} · {data['machine']} · {data['seeds']} seeds per (method, budget) · "
           f"{data['workers']} workers · {_timing(data)}", "", f"`{data['command']}`", "",
           f"Start config true test score: {agg['start_test']:.3f}; {known}; best "
           f"{'' if optimum else 'known '}within every auxiliary tolerance: "
           f"{agg['best_feasible_test']:.3f} (`{json.dumps(agg['best_feasible_config'])}`). "
           f"{truth} 'Worse than start' = true test below the start's by "
           f"more than {EPS_WORSE}; 'violates tolerance' = a declared auxiliary metric "
           "(bench.yaml metrics) beyond its allowance vs the start config, in truth on test. "
           "Regret in brackets: to the best config within every tolerance.",
           "", table(agg), ""]
    out += method_notes(agg)
    lines = verdict_lines(data["bench"], agg)
    if lines:
        out += ["```", *lines, "```", ""]
    if climb:
        out += ["Oracle hill-climb (lower bound on the best reachable config): "
                + " → ".join(p.get("move", "start") + f" ({p['test']:.3f})"
                             for p in climb["path"])
                + f"; {climb['configs_evaluated']} configs scored.", ""]
    return "\n".join(out)


def method_notes(agg: dict[str, Any]) -> list[str]:
    """What a reader must know about the rivals in the table that its columns do not say."""
    methods = {r["method"] for r in agg["rows"].values()}
    notes = []
    if "tpe-uni-con" in methods:
        notes.append("tpe-uni-con: TPESampler(multivariate=False), the univariate TPE, with "
                     "the constraints of tpe-con.")
    if "tpe-mv-con" in methods:
        notes.append("tpe-mv-con: Optuna's TPESampler(multivariate=True, group=True) with the "
                     "tolerances as constraints (trial.set_constraint), otherwise as tpe-con. "
                     "(Optuna 5's TPESampler is multivariate by default for one objective: "
                     "tpe-con's sampler is the multivariate TPE without group.)")
    if "smac" in methods:
        from quality_smac import TASKS_PER_INSTANCE
        falls = ", ".join(f"{r['budget']:,}: {r['fallbacks']} of {r['n']}"
                          for r in agg["rows"].values() if r["method"] == "smac")
        notes.append(
            "smac: SMAC3's AlgorithmConfigurationFacade, an instance = "
            f"{TASKS_PER_INSTANCE} dev tasks (K attempts each, a seed per trial), cost = "
            "1 − score. SMAC3 has no constraints: a config whose dev auxiliary-metric means "
            "(over its trials so far) break a tolerance vs the start config's is told the "
            "worst cost, 1.0; the chosen config is SMAC's incumbent when it passes the same "
            f"check, else the start config (searches that fell back, per budget: {falls}).")
    return [f"- {n}" for n in notes] + ([""] if notes else [])


def _timing(data: dict[str, Any]) -> str:
    """Wall time of the invocation, and of every search it reports (some may have been
    resumed from the log of an earlier invocation)."""
    searches: dict[tuple[str, int, int], float] = {}
    for r in data["runs"]:  # tpe/random rows of one search repeat its wall time
        key = (r["method"].removesuffix("-tol"), r["seed"],
               r["budget"] if r["method"] in SEARCHES else 0)
        searches[key] = r["wall_s"]
    text = f"{data['wall_s']:.0f} s this invocation"
    resumed = data.get("resumed", 0)
    if resumed:
        text += (f", {resumed} of {len(searches)} searches resumed from "
                 f"cache/runs-{data['bench']}.jsonl")
    return text + f"; the searches took {sum(searches.values()):,.0f} s of worker time"


def combine() -> None:
    """results/quality.md and quality.json: every bench's results/quality-<bench>.json."""
    out = HERE / "results"
    parts, merged = [], {}
    for name in qt.BENCHES:
        path = out / f"quality-{name}.json"
        if path.exists():
            data = json.loads(path.read_text())
            merged[name] = {k: v for k, v in data.items() if k not in ("runs", "truths")}
            parts.append(render(data))
    (out / "quality.json").write_text(json.dumps(merged, indent=1, default=str))
    (out / "quality.md").write_text("\n\n".join(parts))


def _job_key(job: tuple, versions: dict[str, str]) -> str:
    method, name, seed, budgets = job
    return json.dumps([method, name, seed, list(budgets), versions[method]])


def run_bench(name: str, budgets: list[int], *, seeds: int, workers: int, methods: list[str],
              truth_splits: list[str], resume: bool, no_climb: bool, command: str,
              out_name: str | None = None) -> str:
    """Run the contest on one bench, write results/<out_name>.{json,md} (default
    quality-<bench>), return the md."""
    jobs = []
    for seed in range(1, seeds + 1):
        for m in methods:
            if m in SAMPLERS:
                jobs.append((m, name, seed, tuple(budgets)))
            elif m in SEARCHES:
                jobs += [(m, name, seed, (b,)) for b in budgets]
    versions = {m: code_version(m, name) for m in {j[0] for j in jobs}}
    jobs.sort(key=lambda j: -max(j[3]))  # long jobs first
    t0 = time.perf_counter()
    runs: list[dict] = []
    resumed = 0
    # Every finished search is logged as it ends, so an interrupted run resumes where it
    # stopped (--resume) instead of starting over. The key holds the code version: a
    # run of another search (or bench) is never reused.
    log_path = HERE / "cache" / f"runs-{name}.jsonl"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    if resume and log_path.exists():
        done: dict[str, list[dict]] = {}
        for line in log_path.read_text().splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                entry = json.loads(line)
                done[entry["job"]] = entry["rows"]
        keep = []
        for j in jobs:
            if _job_key(j, versions) in done:
                runs += done[_job_key(j, versions)]
            else:
                keep.append(j)
        print(f"{name}: resumed {len(jobs) - len(keep)} searches from {log_path} "
              f"(versions {sorted(set(versions.values()))}; "
              f"{len(done) - (len(jobs) - len(keep))} logged entries of other jobs or "
              "versions left alone)", file=sys.stderr)
        resumed = len(jobs) - len(keep)
        jobs = keep
    elif log_path.exists():
        log_path.unlink()
    ctx = mp.get_context("fork")
    with log_path.open("a") as logf, ctx.Pool(workers, maxtasksperchild=20) as pool:
        for i, (job, rows) in enumerate(pool.imap_unordered(_job, jobs), 1):
            runs += rows
            logf.write(json.dumps({"job": _job_key(job, versions), "rows": rows},
                                  default=str) + "\n")
            logf.flush()
            print(f"[{time.perf_counter() - t0:5.0f} s] {name} {i}/{len(jobs)} {job[0]} "
                  f"s{job[2]} b{max(job[3])}", file=sys.stderr, flush=True)
        start = qt.bench_of(name).defaults.values
        configs = {json.dumps(c, sort_keys=True): c
                   for c in [start] + [r["final_config"] for r in runs]}
        truths = dict(pool.map(_truth_job, [(name, c, truth_splits)
                                               for c in configs.values()]))
    climb_path = HERE / "cache" / f"climb-{name}.json"
    climb = None
    if climb_path.exists() and climb_path.stat().st_size:
        with contextlib.suppress(json.JSONDecodeError):
            climb = json.loads(climb_path.read_text())
    if climb is None and not no_climb:
        climb = qt.climb(name, log=sys.stderr)
        climb_path.write_text(json.dumps(climb, indent=1, default=str))
    wall = time.perf_counter() - t0
    agg = aggregate(name, runs, truths, climb, truths[json.dumps(start, sort_keys=True)])
    data = {"bench": name, "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine(), "command": command, "seeds": seeds, "budgets": budgets,
            "workers": workers, "wall_s": wall, "resumed": resumed, "eps_worse": EPS_WORSE,
            "k_truth": qt.K_TRUTH, "truth_seed": qt.TRUTH_SEED, "summary": agg, "climb": climb,
            "truth_splits": truth_splits, "versions": versions,
            "truths": {k: {s: {"score": v[s]["score"], "metrics": v[s]["metrics"]}
                           for s in v} for k, v in truths.items()},
            "runs": runs}
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    stem = out_name or f"quality-{name}"
    (out / f"{stem}.json").write_text(json.dumps(data, indent=1, default=str))
    text = render(data)
    (out / f"{stem}.md").write_text(text)
    for line in verdict_lines(name, agg):
        print(line, file=sys.stderr, flush=True)
    return text


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--all", action="store_true",
                    help="every bench at its BUDGETS, resuming logged searches, then --combine "
                         "(the one command that regenerates results/quality.md)")
    ap.add_argument("--quick", action="store_true",
                    help="closedform only at its BUDGETS, resuming logged searches (minutes)")
    ap.add_argument("--bench", default="triage", choices=list(qt.BENCHES))
    ap.add_argument("--budgets", default=None, help="comma-separated; default BUDGETS[bench]")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--methods", default="forge-auto,forge-sweep,tpe,tpe-con,random,naive",
                    help="tpe and random also report their -tol variants")
    ap.add_argument("--no-climb", action="store_true")
    ap.add_argument("--truth-splits", default="test",
                    help="splits scored in truth for each chosen config (test is required)")
    ap.add_argument("--rerender", type=Path, default=None)
    ap.add_argument("--resume", action="store_true",
                    help="reuse the searches already logged in cache/runs-<bench>.jsonl")
    ap.add_argument("--out", default=None,
                    help="results file name without extension (default quality-<bench>)")
    ap.add_argument("--combine", action="store_true",
                    help="write results/quality.{md,json} from the per-bench results")
    args = ap.parse_args()
    if args.combine:
        combine()
        return
    if args.rerender:
        data = json.loads(args.rerender.read_text())
        name = data["bench"]
        start = data["truths"][json.dumps(qt.bench_of(name).defaults.values, sort_keys=True)]
        data["summary"] = aggregate(name, data["runs"], data["truths"], data.get("climb"), start)
        args.rerender.write_text(json.dumps(data, indent=1, default=str))
        args.rerender.with_suffix(".md").write_text(render(data))
        return
    _quiet()
    import forge.search.launch  # noqa: F401  (imported once; forked workers inherit it)
    command = "python benchmarks/quality.py " + " ".join(sys.argv[1:])
    common = dict(seeds=args.seeds, workers=args.workers,
                  methods=[m for m in args.methods.split(",") if m],
                  truth_splits=args.truth_splits.split(","), no_climb=args.no_climb,
                  command=command)
    if args.all:
        for name, budgets in BUDGETS.items():
            run_bench(name, budgets, resume=True, **common)  # type: ignore[arg-type]
        combine()
        print((HERE / "results" / "quality.md").read_text())
        return
    if args.quick:
        print(run_bench("closedform", BUDGETS["closedform"], resume=True,
                        **common))  # type: ignore[arg-type]
        return
    budgets = ([int(b) for b in args.budgets.split(",")] if args.budgets
               else BUDGETS[args.bench])
    print(run_bench(args.bench, budgets, resume=args.resume, out_name=args.out,
                    **common))  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
