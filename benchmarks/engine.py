"""Benchmark of the rollout engine itself, as ratios measured side by side in one run.

    python benchmarks/engine.py            # full run, writes benchmarks/results/engine.json
    python benchmarks/engine.py --quick    # a smaller run for a smoke check

1. Overhead per rollout: a harness that returns at once (sync and async), rollouts/s.
2. Concurrency efficiency: a harness that sleeps 20 ms (sync in threads, and async);
   efficiency = ideal time (n * 20 ms / concurrency) / measured time, at 1, 8 and 64.
3. Throughput kept with a 1 ms harness at concurrency 1: engine rate / rate of calling
   the same function in a plain loop (target: loses < 10%); median of five pairs.
4. CLI start: ``forge --version`` and ``forge --help`` in a new process, beside
   ``import typer, pydantic, rich`` (what any typer CLI pays) and ``import forge.cli``;
   median of ten runs each, interleaved. ``--cli`` runs this case alone (and writes
   nothing): ``PYTHONPATH=OTHER_TREE python benchmarks/engine.py --cli`` measures another
   checkout of forge the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from statistics import median
from typing import Any

from forge.config.registry import Config
from forge.core.spec import BuildContext, Spec
from forge.core.task import Task
from forge.evaluation.rollout import AttemptKey, RolloutEngine
from forge.harness import AttemptContext, PythonHarness
from forge.scorers import SCORERS

HERE = Path(__file__).resolve().parent


def instant(config: dict[str, Any], task: Task, ctx: AttemptContext) -> dict[str, Any]:
    return {"output": task.input}


async def instant_async(config: dict[str, Any], task: Task, ctx: AttemptContext
                        ) -> dict[str, Any]:
    return {"output": task.input}


def sleeper(seconds: float) -> Callable[..., dict[str, Any]]:
    def run(config: dict[str, Any], task: Task, ctx: AttemptContext) -> dict[str, Any]:
        time.sleep(seconds)
        return {"output": task.input}
    return run


def async_sleeper(seconds: float) -> Callable[..., Any]:
    async def run(config: dict[str, Any], task: Task, ctx: AttemptContext) -> dict[str, Any]:
        await asyncio.sleep(seconds)
        return {"output": task.input}
    return run


def run_engine(fn: Callable[..., Any], n: int, concurrency: int) -> float:
    """Seconds to run ``n`` attempts of ``fn`` through the engine (scoring included)."""
    scorer = SCORERS.build(Spec(name="exact"), BuildContext(base_dir=HERE))
    engine = RolloutEngine(PythonHarness(fn, "bench"), scorer, run_seed=1,
                           concurrency=concurrency, timeout_s=60)
    tasks = [Task(id=f"t{i}", input=i, expected=i) for i in range(max(1, n // 4))]
    keys = [AttemptKey(tasks[i % len(tasks)], i // len(tasks)) for i in range(n)]
    config = Config(values={}, registry_digest="bench")

    async def main() -> float:
        t0 = time.perf_counter()
        results = await engine.run(config, keys, split="dev")
        elapsed = time.perf_counter() - t0
        assert len(results) == n and all(r.scored and r.passed for r in results)
        return elapsed

    return asyncio.run(main())


def plain_loop(fn: Callable[..., Any], n: int) -> float:
    ctx = AttemptContext(seed=1, attempt=0, split="dev", timeout_s=60, deadline=0)
    task = Task(id="t", input=1, expected=1)
    t0 = time.perf_counter()
    for _ in range(n):
        fn({}, task, ctx)
    return time.perf_counter() - t0


#: What each CLI start case runs after ``python``; the first two are the references.
CLI_CASES = {
    "python -c pass": ["-c", "pass"],
    "import typer, pydantic, rich": ["-c", "import typer, pydantic, rich"],
    "import forge.cli": ["-c", "import forge.cli"],
    "forge --version": ["-m", "forge", "--version"],
    "forge --help": ["-m", "forge", "--help"],
}


def cli_start(runs: int) -> list[dict[str, Any]]:
    """Seconds from starting ``python`` to its exit for each :data:`CLI_CASES`, medians
    of ``runs``; the cases take turns, so a busy spell of the machine slows each alike."""
    times: dict[str, list[float]] = {name: [] for name in CLI_CASES}
    for _ in range(runs):
        for name, args in CLI_CASES.items():
            t0 = time.perf_counter()
            subprocess.run([sys.executable, *args], stdout=subprocess.DEVNULL, check=True)
            times[name].append(time.perf_counter() - t0)
    libraries = median(times["import typer, pydantic, rich"])
    return [{"case": f"cli start: {name}", "runs": runs, "median_s": median(ts),
             "min_s": min(ts), "vs_typer_pydantic_rich": median(ts) / libraries}
            for name, ts in times.items()]


def print_cli(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        print(f"{r['case']:46} median {r['median_s']:.3f} s (min {r['min_s']:.3f}), "
              f"{r['vs_typer_pydantic_rich']:.2f}x import typer, pydantic, rich")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--cli", action="store_true", help="the CLI start case alone")
    args = parser.parse_args()
    if args.cli:
        print_cli(cli_start(10))
        return
    scale = 0.2 if args.quick else 1.0
    rows: list[dict[str, Any]] = []

    n = int(20000 * scale)
    for label, fn in (("sync", instant), ("async", instant_async)):
        for c in (1, 8):
            secs = median(run_engine(fn, n, c) for _ in range(3))
            rows.append({"case": f"overhead {label} instant", "concurrency": c, "n": n,
                         "rollouts_per_s": n / secs, "us_per_rollout": 1e6 * secs / n})

    for label, make in (("sync", sleeper), ("async", async_sleeper)):
        for c in (1, 8, 64):
            # about one second of ideal time per case (two at concurrency 1)
            n = max(int({1: 100, 8: 400, 64: 3200}[c] * scale), c)
            secs = run_engine(make(0.020), n, c)
            ideal = n * 0.020 / c
            rows.append({"case": f"efficiency {label} 20ms", "concurrency": c, "n": n,
                         "ideal_s": ideal, "measured_s": secs, "efficiency": ideal / secs})

    # The machine's timer and scheduler are noisy at the millisecond scale: alternate
    # the two measurements five times and report the medians.
    n = int(1000 * scale)
    one_ms = sleeper(0.001)
    pairs = [(plain_loop(one_ms, n), run_engine(one_ms, n, 1)) for _ in range(5)]
    direct = median(d for d, _ in pairs)
    engine = median(e for _, e in pairs)
    rows.append({"case": "1ms harness, concurrency 1", "concurrency": 1, "n": n,
                 "direct_per_s": n / direct, "engine_per_s": n / engine,
                 "throughput_kept": median(d / e for d, e in pairs)})

    cli = cli_start(3 if args.quick else 10)
    print(f"{'case':34} {'conc':>4} {'n':>6}  result")
    for r in rows:
        if "rollouts_per_s" in r:
            res = f"{r['rollouts_per_s']:9.0f} rollouts/s ({r['us_per_rollout']:.0f} µs each)"
        elif "efficiency" in r:
            res = (f"efficiency {r['efficiency']:.3f} (ideal {r['ideal_s']:.2f} s, "
                   f"measured {r['measured_s']:.2f} s)")
        else:
            res = (f"kept {100 * r['throughput_kept']:.1f}% of throughput "
                   f"({r['engine_per_s']:.0f}/s vs direct {r['direct_per_s']:.0f}/s)")
        print(f"{r['case']:34} {r['concurrency']:>4} {r['n']:>6}  {res}")
    print_cli(cli)
    rows += cli
    if not args.quick:
        out = HERE / "results" / "engine.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps({
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": f"{platform.machine()} {platform.processor()} python "
                       f"{sys.version.split()[0]}", "rows": rows}, indent=2) + "\n")
        print(f"wrote {out.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
