"""Ground truth for the search-quality benchmark: a config's expected score, from many rollouts.

    python benchmarks/quality_truth.py triage '{"retrieval": "hybrid", ...}'   # print truth
    python benchmarks/quality_truth.py triage --climb                          # oracle hill-climb
    python benchmarks/quality_truth.py closedform --optimum                    # exact grid optimum
    python benchmarks/quality_truth.py sparse --optimum                        # the same, sparse

The truth of (bench, config, split) is ``forge.evaluation.evaluate.evaluate`` with a large K
(``K_TRUTH``: 20 attempts per task on test, 10 on dev and val) on a seed
(``TRUTH_SEED``) that no contest run uses. It is cached, one JSON file per
(bench digest, config fingerprint, split, K, seed), under
``benchmarks/cache/truth/<bench>/``. All configs share the same attempt seeds
(common random numbers), so differences between configs are estimated with less
noise than the absolute levels. Standard error of a test score: about
sqrt(p(1-p) / (K * n_tasks)), i.e. <= 0.011 on triage (2,200 attempts) and
<= 0.020 on walksat (600 attempts); differences between configs are tighter.

``climb``: steepest-ascent hill-climb on true test score from the bench's start
config over forge's neighbourhood (forge.config.moves.neighbourhood), until no neighbour
improves by more than 0.002. Its end point is a *lower bound* on the best config
reachable in the registry (the spaces are too large to enumerate).

Closed-form benches (``EXACT``: ``closedform`` and ``sparse``) are the exception: their harness
exposes the formulas (``expected(config, task_inputs)``), so the truth of a config
is exact, costs no rollout and is not cached, and :func:`exact_optimum` enumerates
the registry's whole grid for the true optimum, overall and within every tolerance.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BENCHES = {"triage": ROOT / "benches" / "triage", "walksat": ROOT / "benches" / "walksat",
           "closedform": HERE / "benches" / "closedform",
           "sparse": HERE / "benches" / "sparse"}
#: Benches whose harness gives the truth in closed form (``expected``, ``success_probability``).
EXACT = {"closedform", "sparse"}
K_TRUTH = {"test": 20, "dev": 10, "val": 10}
TRUTH_SEED = 9_000_001
CACHE = HERE / "cache" / "truth"

_benches: dict[str, Any] = {}
_formulas: dict[str, Any] = {}


def bench_of(name: str) -> Any:
    if name not in _benches:
        from forge.bench.loader import load_bench
        _benches[name] = load_bench(BENCHES[name])
    return _benches[name]


def formulas(name: str) -> Any:
    """The harness module of a closed-form bench (its ``expected`` and
    ``success_probability``), imported from its file."""
    if name not in _formulas:
        import importlib.util
        path = BENCHES[name] / "harness.py"
        spec = importlib.util.spec_from_file_location(f"_truth_{name}_harness", path)
        assert spec is not None and spec.loader is not None, path
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _formulas[name] = module
    return _formulas[name]


def truth(name: str, values: dict[str, Any], split: str = "test") -> dict[str, Any]:
    """{"score", "metrics", "n_attempts", "k", "seed"} for one config and split, cached
    (exact and uncached on a closed-form bench: ``n_attempts`` 0, ``exact`` true)."""
    bench = bench_of(name)
    cfg = bench.registry.validate_config(values)
    if name in EXACT:
        res = formulas(name).expected(cfg.values, [t.input for t in bench.tasks(split)])
        return {"bench": name, "split": split, "config": cfg.values, "score": res["score"],
                "metrics": res["metrics"], "n_attempts": 0, "k": None, "seed": None,
                "exact": True}
    k = K_TRUTH[split]
    folder = CACHE / name / bench.digest[:16]
    path = folder / f"{cfg.fingerprint[:32]}-{split}-k{k}-s{TRUTH_SEED}.json"
    if path.exists():
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError:
            pass
    from forge.evaluation.evaluate import evaluate
    logging.disable(logging.WARNING)
    res = evaluate(bench, cfg, split=split, k=k, seed=TRUTH_SEED)
    out = {"bench": name, "split": split, "config": cfg.values, "score": res.mean_score,
           "metrics": res.metrics, "n_attempts": res.n_attempts, "k": k, "seed": TRUTH_SEED}
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(out, fh, default=str)
    os.replace(tmp, path)
    return out


def violations(name: str, start: dict[str, Any], cand: dict[str, Any]) -> list[str]:
    """Declared auxiliary metrics (bench.yaml ``metrics``) that cand regresses beyond
    their allowance relative to start, in truth (test split means)."""
    bench = bench_of(name)
    out = []
    for metric, spec in bench.spec.metrics.items():
        a, b = start.get(metric), cand.get(metric)
        if a is None or b is None:
            continue
        sign = 1.0 if spec.direction == "lower" else -1.0
        worse_by = sign * (b - a)
        allowed = spec.max_increase * abs(a) if spec.relative else spec.max_increase
        if worse_by > allowed + 1e-9:
            out.append(metric)
    return out


def constraints(name: str, start: dict[str, float], cand: dict[str, float]) -> dict[str, float]:
    """Per declared auxiliary metric, ``cand``'s regression against ``start`` minus the
    allowance (<= 0: within the tolerance; a relative allowance is a fraction of the
    start's mean). The same rule as :func:`violations`, as a constraint value each."""
    bench = bench_of(name)
    out: dict[str, float] = {}
    for metric, spec in bench.spec.metrics.items():
        a, b = start.get(metric), cand.get(metric)
        if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
            continue
        sign = 1.0 if spec.direction == "lower" else -1.0
        allowed = spec.max_increase * abs(a) if spec.relative else spec.max_increase
        out[metric] = sign * (b - a) - allowed
    return out


def _grid(setting: Any) -> list[Any]:
    """Every legal value of a setting that a search or a sampler can reach: the step
    grid of a linear number, every integer of a log-scale int, every choice."""
    if setting.type == "bool":
        return [False, True]
    if setting.type == "enum":
        return list(setting.choices)
    if setting.type == "int":
        step = 1 if setting.scale == "log" else setting.step
        return list(range(setting.min, setting.max + 1, step))
    if setting.step is None or setting.scale == "log":
        raise ValueError(f"{setting}: a float without a linear step grid has no finite grid")
    count = round((setting.max - setting.min) / setting.step) + 1
    return sorted({setting.snap(setting.min + i * setting.step) for i in range(count)})


def _terms(mod: Any, config: dict[str, Any], family: str) -> float:
    """What ``config`` adds to a ``family`` task's base rate: read off a probe task
    whose rate lands inside the clamps (0.02, 0.98), where the sum is exact."""
    for probe in (0.5, 0.0, 1.0):
        p = mod.success_probability(config, {"base": probe, "family": family})
        if 0.02 < p < 0.98:
            return float(p - probe)
    raise ValueError(f"no probe base reads the terms of {config} (family {family})")


def exact_optimum(name: str, split: str = "test") -> dict[str, Any] | None:
    """The best config of the whole registry grid, overall and within every tolerance of
    the start config, in exact truth on ``split``; None unless the bench is closed-form.

    The score of one config over n tasks costs n formula calls, too slow for the ~10^6
    configs of the grid; the harness adds a config's terms to each task's base rate
    (``success_probability``: base + terms(config, family), clamped), so one call per
    (config, task family) on a probe task (:func:`_terms`) gives every task's rate.
    Checked against :func:`truth` on the optimum and on a sample of the grid; cached per
    bench digest."""
    if name not in EXACT:
        return None
    import itertools
    import random

    import numpy as np
    bench = bench_of(name)
    path = CACHE / name / bench.digest[:16] / f"grid-{split}.json"
    if path.exists():
        with contextlib.suppress(json.JSONDecodeError):
            cached: dict[str, Any] = json.loads(path.read_text())
            return cached
    mod = formulas(name)
    reg = bench.registry
    keys = list(reg.settings)
    configs = [dict(zip(keys, vals, strict=True))
               for vals in itertools.product(*(_grid(reg.settings[k]) for k in keys))]
    tasks = [t.input for t in bench.tasks(split)]
    families = sorted({t["family"] for t in tasks})
    base = np.array([float(t["base"]) for t in tasks])
    fam = np.array([families.index(t["family"]) for t in tasks])
    terms = np.empty((len(configs), len(families)))
    for i, c in enumerate(configs):
        for j, f in enumerate(families):
            terms[i, j] = _terms(mod, c, f)
    scores = np.empty(len(configs))
    for lo in range(0, len(configs), 20_000):
        p = base[None, :] + terms[lo:lo + 20_000][:, fam]
        scores[lo:lo + 20_000] = np.clip(p, 0.02, 0.98).mean(axis=1)
    start = truth(name, bench.defaults.values, split)
    metrics = [mod.expected_metrics(c) for c in configs]
    feasible = [i for i, m in enumerate(metrics) if not violations(name, start["metrics"], m)]
    best = int(np.argmax(scores))
    best_ok = max(feasible, key=lambda i: scores[i])
    sample = [*random.Random(0).sample(range(len(configs)), 200), best, best_ok]
    for i in sample:
        exact = truth(name, configs[i], split)["score"]
        if abs(exact - scores[i]) > 1e-9:
            raise ValueError(f"{name}: grid score {scores[i]} != exact {exact} for {configs[i]}")
    out = {"split": split, "configs": len(configs), "feasible": len(feasible),
           "best": {"config": configs[best], "score": float(scores[best]),
                    "metrics": metrics[best]},
           "best_feasible": {"config": configs[best_ok], "score": float(scores[best_ok]),
                             "metrics": metrics[best_ok]}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1, default=str))
    return out


def climb(name: str, *, min_gain: float = 0.002, log: Any = None) -> dict[str, Any]:
    from forge.config.moves import apply_move, neighbourhood
    bench = bench_of(name)
    reg = bench.registry
    cur = bench.defaults
    cur_score = truth(name, cur.values)["score"]
    path = [{"config": cur.values, "test": cur_score}]
    evaluated = 1
    while True:
        best = None
        for move in neighbourhood(reg, cur):
            cand = apply_move(reg, cur, move)
            t = truth(name, cand.values)
            evaluated += 1
            if t["score"] > cur_score + min_gain and (best is None or t["score"] > best[0]):
                best = (t["score"], cand, str(move))
        if best is None:
            break
        cur_score, cur, mv = best
        path.append({"move": mv, "config": cur.values, "test": cur_score})
        if log:
            print(f"climb {name}: {mv} -> {cur_score:.4f}", file=log, flush=True)
    return {"config": cur.values, "test": cur_score, "path": path,
            "configs_evaluated": evaluated}


if __name__ == "__main__":
    name = sys.argv[1]
    if "--climb" in sys.argv:
        print(json.dumps(climb(name, log=sys.stderr), indent=1, default=str))
    elif "--optimum" in sys.argv:
        print(json.dumps(exact_optimum(name), indent=1, default=str))
    else:
        values = json.loads(sys.argv[2]) if len(sys.argv) > 2 else bench_of(name).defaults.values
        for split in ("dev", "val", "test"):
            print(json.dumps(truth(name, values, split), default=str))
