"""Throughput of each executor, relative to the ideal, on CPU-bound and I/O-bound work.

    python benchmarks/executors.py            # full run, writes benchmarks/results/executors.json
    python benchmarks/executors.py --quick    # a smaller run for a smoke check

1. CPU-bound: the walksat bench (its dev formulas, K attempts each). The single-process
   rate is the local executor at concurrency 1; ideal = cores x that rate. Reported:
   attempts/s and the ratio to ideal for local (thread lanes, held by the GIL),
   process and ray (one worker per core). Targets on 2 cores: process >= 1.7x local;
   ray within 1.3x of process.
2. I/O-bound: a harness that sleeps 20 ms; ideal = concurrency / 20 ms. Local at
   concurrency 8 and 64; process and ray with 8 workers (they run one attempt per
   worker at a time, so their concurrency is their worker count).

Each executor is started and warmed up with one batch before the timed batch: the
figures are steady-state throughput; start-up times are reported apart.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from forge.bench.loader import Bench, load_bench
from forge.core.task import Task
from forge.evaluation.rollout import AttemptKey, RolloutEngine
from forge.executors import Executor, ExecutorSettings

HERE = Path(__file__).resolve().parent
WALKSAT = HERE.parent / "benches" / "walksat"
SLEEPER = HERE / "benches" / "sleeper"


def _rate(bench: Bench, executor: Executor, keys: list[AttemptKey], *,
          concurrency: int, timeout_s: float = 60.0) -> tuple[float, float]:
    """(attempts/s of a timed batch, seconds of the warm-up batch)."""
    harness = bench.build_harness()
    engine = RolloutEngine(harness, bench.scorer, run_seed=1, concurrency=concurrency,
                           timeout_s=timeout_s, executor=executor)

    loop = asyncio.new_event_loop()
    try:
        warm = keys[: max(1, len(keys) // 4)]
        t0 = time.perf_counter()
        loop.run_until_complete(engine.run(bench.defaults, warm, split="dev", stream="warm"))
        warm_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        results = loop.run_until_complete(engine.run(bench.defaults, keys, split="dev",
                                                     stream="timed"))
        elapsed = time.perf_counter() - t0
        loop.run_until_complete(harness.aclose())
    finally:
        loop.close()
    bad = [r for r in results if r.stop_reason != "completed"]
    if bad:
        raise SystemExit(f"benchmark attempts failed: {bad[0].stop_reason} {bad[0].error}")
    return len(keys) / elapsed, warm_s


def _open(bench: Bench, name: str, workers: int) -> Executor:
    return bench.open_executor(ExecutorSettings(name, workers=workers))


def _measure(bench: Bench, name: str, workers: int, keys: list[AttemptKey],
             concurrency: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    executor = _open(bench, name, workers)
    open_s = time.perf_counter() - t0
    try:
        rate, warm_s = _rate(bench, executor, keys, concurrency=concurrency)
    finally:
        executor.close()
    return {"executor": name, "workers": workers if name != "local" else None,
            "concurrency": concurrency if name == "local" else workers,
            "attempts_per_s": round(rate, 2), "start_s": round(open_s + warm_s, 2)}


def cpu_bound(names: list[str], cores: int, k: int) -> dict[str, Any]:
    bench = load_bench(WALKSAT)
    keys = [AttemptKey(t, i) for t in bench.tasks("dev") for i in range(k)]
    single = _measure(bench, "local", 1, keys, 1)["attempts_per_s"]
    ideal = cores * single
    rows = []
    for name in names:
        row = _measure(bench, name, cores, keys, cores)
        row["ratio_to_ideal"] = round(row["attempts_per_s"] / ideal, 3)
        rows.append(row)
        print(f"cpu  {name:8s} {row['attempts_per_s']:8.2f}/s  "
              f"{row['ratio_to_ideal']:.2f} of ideal", file=sys.stderr)
    by = {r["executor"]: r["attempts_per_s"] for r in rows}
    out: dict[str, Any] = {"bench": "walksat", "attempts": len(keys),
                           "single_process_per_s": single, "ideal_per_s": round(ideal, 2),
                           "rows": rows}
    if "process" in by:
        out["process_over_local"] = round(by["process"] / by["local"], 3)
    if "ray" in by and "process" in by:
        out["process_over_ray"] = round(by["process"] / by["ray"], 3)
    return out


def io_bound(names: list[str], n: int) -> dict[str, Any]:
    bench = load_bench(SLEEPER)
    tasks = [Task(id=f"t{i}", input=i, expected=i) for i in range(n)]
    keys = [AttemptKey(t, 0) for t in tasks]
    rows = []
    for name in names:
        for conc in ((8, 64) if name == "local" else (8,)):
            row = _measure(bench, name, conc, keys, conc)
            row["ratio_to_ideal"] = round(row["attempts_per_s"] / (conc / 0.02), 3)
            rows.append(row)
            print(f"io   {name:8s} x{conc:<3d} {row['attempts_per_s']:8.1f}/s  "
                  f"{row['ratio_to_ideal']:.2f} of ideal", file=sys.stderr)
    return {"sleep_s": 0.02, "attempts": n, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "executors.json")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    names = ["local", "process"]
    if not args.no_ray:
        try:
            import ray  # noqa: F401
            names.append("ray")
        except ImportError:
            print("ray not installed: skipped (install forge[ray])", file=sys.stderr)
    report = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(), "cores": cores,
        "cpu_bound": cpu_bound(names, cores, k=2 if args.quick else 5),
        "io_bound": io_bound(names, 200 if args.quick else 1000),
    }
    text = json.dumps(report, indent=2)
    print(text)
    if not args.quick:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
