"""Ground truth for the search-quality benchmark: a config's expected score, from many rollouts.

    python benchmarks/quality_truth.py triage '{"retrieval": "hybrid", ...}'   # print truth
    python benchmarks/quality_truth.py triage --climb                          # oracle hill-climb

The truth of (bench, config, split) is ``forge.evaluate.evaluate`` with a large K
(``K_TRUTH``: 20 attempts per task on test, 10 on dev and val) on a seed
(``TRUTH_SEED``) that no contest run uses. It is cached, one JSON file per
(bench digest, config fingerprint, split, K, seed), under
``benchmarks/cache/truth/<bench>/``. All configs share the same attempt seeds
(common random numbers), so differences between configs are estimated with less
noise than the absolute levels. Standard error of a test score: about
sqrt(p(1-p) / (K * n_tasks)), i.e. <= 0.011 on triage (2,200 attempts) and
<= 0.020 on walksat (600 attempts); differences between configs are tighter.

``climb``: steepest-ascent hill-climb on true test score from the bench's start
config over forge's neighbourhood (forge.moves.neighbourhood), until no neighbour
improves by more than 0.002. Its end point is a *lower bound* on the best config
reachable in the registry (the spaces are too large to enumerate).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BENCHES = {"triage": ROOT / "benches" / "triage", "walksat": ROOT / "benches" / "walksat"}
K_TRUTH = {"test": 20, "dev": 10, "val": 10}
TRUTH_SEED = 9_000_001
CACHE = HERE / "cache" / "truth"

_benches: dict[str, Any] = {}


def bench_of(name: str) -> Any:
    if name not in _benches:
        from forge.bench import load_bench
        _benches[name] = load_bench(BENCHES[name])
    return _benches[name]


def truth(name: str, values: dict[str, Any], split: str = "test") -> dict[str, Any]:
    """{"score", "metrics", "n_attempts", "k", "seed"} for one config and split, cached."""
    bench = bench_of(name)
    cfg = bench.registry.validate_config(values)
    k = K_TRUTH[split]
    folder = CACHE / name / bench.digest[:16]
    path = folder / f"{cfg.fingerprint[:32]}-{split}-k{k}-s{TRUTH_SEED}.json"
    if path.exists():
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError:
            pass
    from forge.evaluate import evaluate
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


def climb(name: str, *, min_gain: float = 0.002, log: Any = None) -> dict[str, Any]:
    from forge.moves import apply_move, neighbourhood
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
    else:
        values = json.loads(sys.argv[2]) if len(sys.argv) > 2 else bench_of(name).defaults.values
        for split in ("dev", "val", "test"):
            print(json.dumps(truth(name, values, split), default=str))
