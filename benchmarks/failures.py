"""Benchmark: does a config that fails where it would be wrong buy a promotion?

    python benchmarks/failures.py                        # 100 seeds: naive and forge
    python benchmarks/failures.py --before /path/to/old  # also forge as that checkout is
    python benchmarks/failures.py --seeds 20 --no-write  # a quick look

The bench (``benchmarks/benches/failing``) is the gate benchmark's ``effect`` bench
with one more setting, ``shortcut``: +0.10 chance of success on every task like
``boost``, but on the hard tasks (p < 0.5) every attempt it would get wrong raises
instead of answering (about 20% of its attempts fail). Left out of the means, its
failures make it look far better than boost; counted as losses it is still +0.10
ahead; only a comparison of failure shares refuses it.

Methods, each on the same seeds:

- ``naive``: the rule forge replaces (``benchmarks/gates.py``), means over the scored
  attempts only.
- ``forge``: ``launch_search`` with its defaults, as the checkout running this script
  is.
- ``forge-before`` (with ``--before DIR``): the same search as the forge in ``DIR`` (a
  checkout from before failure shares were gated) runs it, in a subprocess with
  ``DIR`` first on the import path.

Reported per method: how often the final config has ``shortcut=true`` (the failing
config promoted; target 0 for forge, at most the level), how often it has
``boost=true`` (power, target >= 90% as on the gate benchmark), promotions and
rollouts per search, with 95% Wilson intervals.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import gates  # noqa: E402 - the gate benchmark's naive rule, Wilson interval, machine line

BENCH = HERE / "benches" / "failing"
FAILING, GOOD = "shortcut", "boost"


def run_forge(seed: int) -> dict[str, Any]:
    from forge.search.launch import launch_search

    with tempfile.TemporaryDirectory(prefix="forge-failures-") as tmp:
        t0 = time.perf_counter()
        outcome = launch_search(BENCH, seed=seed, journals=Path(tmp), run_id=f"f{seed}",
                                proposer="auto")
        wall = time.perf_counter() - t0
        stop = next(r for r in outcome.records if r.get("kind") == "stop")
        refused = [g["name"] for r in outcome.records if r.get("kind") == "candidate"
                   and r["move"]["target"] == FAILING and r["move"]["after"] is True
                   for g in r.get("gates", []) if not g["passed"]]
    return {"seed": seed, "final_config": outcome.final_config,
            "promotions": outcome.promotions, "rollouts_search": stop["rollouts_total"],
            "wall_s": wall, "shortcut_refused_by": refused}


def _job(args: tuple[str, int]) -> dict[str, Any]:
    method, seed = args
    import logging
    logging.disable(logging.WARNING)
    if method == "naive":
        run = gates.run_naive("failing", seed, BENCH)
        return {"method": "naive", "seed": seed, "final_config": run["final_config"],
                "promotions": run["promotions"], "rollouts_search": run["rollouts_search"],
                "wall_s": run["wall_s"], "shortcut_refused_by": []}
    return {"method": method, **run_forge(seed)}


def run_all(methods: list[str], seeds: int, workers: int) -> list[dict[str, Any]]:
    jobs = [(m, s) for m in methods for s in range(1, seeds + 1)]
    with mp.get_context("fork").Pool(workers, maxtasksperchild=50) as pool:
        return list(pool.imap_unordered(_job, jobs))


def run_before(tree: Path, seeds: int, workers: int) -> list[dict[str, Any]]:
    """``forge`` as the checkout ``tree`` runs it, relabelled ``forge-before``."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
        subprocess.run([sys.executable, __file__, "--methods", "forge", "--seeds", str(seeds),
                        "--workers", str(workers), "--runs-to", out.name], env=env,
                       check=True)
        runs: list[dict[str, Any]] = json.loads(Path(out.name).read_text())
    return [{**r, "method": "forge-before"} for r in runs]


def summarise(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for method in sorted({r["method"] for r in runs}):
        rs = [r for r in runs if r["method"] == method]

        def rate(pred: Any, rs: list[dict[str, Any]] = rs) -> dict[str, Any]:
            hits = sum(1 for r in rs if pred(r))
            low, high = gates.wilson(hits, len(rs))
            return {"hits": hits, "n": len(rs), "rate": hits / len(rs), "ci95": [low, high]}

        out[method] = {
            "failing_promoted": rate(lambda r: r["final_config"].get(FAILING) is True),
            "power": rate(lambda r: r["final_config"].get(GOOD) is True),
            "promotions_per_search": statistics.fmean(len(r["promotions"]) for r in rs),
            "rollouts_per_search": statistics.fmean(r["rollouts_search"] for r in rs),
            "s_per_search": statistics.fmean(r["wall_s"] for r in rs),
            "refused_by": dict(sorted(
                (name, sum(name in r["shortcut_refused_by"] for r in rs))
                for name in {n for r in rs for n in r["shortcut_refused_by"]})),
        }
    return out


def table(summary: dict[str, dict[str, Any]]) -> str:
    lines = ["| method | failing config promoted (shortcut=true) | power (boost=true) | "
             "promotions / search | rollouts / search | shortcut refusals by gate |",
             "|---|---|---|---|---|---|"]
    for method, row in summary.items():
        refused = ", ".join(f"{k} {v}" for k, v in row["refused_by"].items()) or "—"
        lines.append(f"| {method} | {gates._pct(row['failing_promoted'])} | "
                     f"{gates._pct(row['power'])} | {row['promotions_per_search']:.2f} | "
                     f"{row['rollouts_per_search']:,.0f} | {refused} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--methods", default="naive,forge")
    parser.add_argument("--before", type=Path, default=None,
                        help="a forge checkout to run as forge-before")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--runs-to", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    t0 = time.perf_counter()
    runs = run_all([m for m in args.methods.split(",") if m], args.seeds, args.workers)
    if args.runs_to is not None:
        args.runs_to.write_text(json.dumps(runs, default=str))
        return
    if args.before is not None:
        runs += run_before(args.before, args.seeds, args.workers)
    wall = time.perf_counter() - t0
    runs.sort(key=lambda r: (r["method"], r["seed"]))
    summary = summarise(runs)
    text = table(summary)
    print(text)
    print(f"\n{len(runs)} searches in {wall:.0f} s with {args.workers} workers")
    if args.no_write:
        return
    command = ("python benchmarks/failures.py " + " ".join(sys.argv[1:])).strip()
    meta = {"date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": gates.machine(), "command": command, "seeds": args.seeds,
            "wall_s": wall}
    out = HERE / "results"
    (out / "failures.json").write_text(json.dumps(
        {**meta, "summary": summary, "runs": runs}, indent=1, default=str) + "\n")
    (out / "failures.md").write_text(
        f"# Failure benchmark\n\n{meta['date']} · {meta['machine']} · {args.seeds} seeds "
        f"per method · {wall:.0f} s\n\n`{command}`\n\n"
        "The `failing` bench: `shortcut=true` is +0.10 like `boost=true`, but raises on "
        "every attempt of a hard task it would get wrong (about 20% of its attempts). "
        "Rates are fractions of searches with 95% Wilson intervals.\n\n" + text + "\n")
    print("wrote benchmarks/results/failures.json and .md")


if __name__ == "__main__":
    main()
