"""Benchmark of how a search's cost grows with the number of settings in the registry.

    python benchmarks/scaling.py                       # this checkout; writes
                                                       # benchmarks/results/scaling.json and .md
    python benchmarks/scaling.py --old /path/to/old    # and an older checkout beside it
    python benchmarks/scaling.py --sizes 100,1000 --steps 1 --no-write   # a quick look

For each size N a bench is generated with N settings (ints, floats with a step, bools
and three-choice enums, in turn) and a Python harness whose pass rate depends on two of
them; every other setting is there to be moved and found to do nothing. A search of
``--steps`` steps (``launch_search(max_steps=...)``, what ``forge search BENCH
--max-steps 3`` runs, seed 20261130) is timed in a fresh process per checkout and size:
the seconds from the call to the first candidate record (the bench and its registry
loaded, the start config's first dev chunk run, the first step's moves listed, keyed
and ranked), and the mean seconds from one step's first candidate to the next's (a
step's screening, then the next step's listing and ranking, with the proposer's model
fitted on the configs screened so far). Rollouts are cheap here (microseconds of
harness), so the times are forge's own. A run past ``--timeout`` seconds is stopped
and reported as ``> T`` where it had not reached a point.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SIZES = (100, 250, 500, 1_000, 2_500, 5_000, 10_000)
SEED = 20261130

HARNESS = '''
import random


def run(config, task, ctx):
    rng = random.Random(ctx.seed)
    p = 0.3 + 0.04 * config["s00000"] + (0.1 if config["s00002"] else 0.0)
    return {"output": "yes" if rng.random() < min(p, 0.95) else "no"}
'''

BENCH = '''name: wide
harness: {python: "harness:run"}
registry: registry.yaml
splits: {dev: tasks/dev.jsonl, val: tasks/val.jsonl, test: tasks/test.jsonl}
rollouts: {k: 2, concurrency: 1, timeout_s: 30}
scorer: exact
gates: {alpha: 0.05, min_effect: 0.0}
search: {max_steps: 1, budget: {rollouts: 2000}}
'''


def write_wide_bench(root: Path, n: int) -> Path:
    """A bench of ``n`` settings in ``root`` (see the module docstring); its folder."""
    lines = ["name: wide", "settings:"]
    for i in range(n):
        name = f"s{i:05d}"
        lines.append(f"  {name}: " + [
            "{type: int, min: 0, max: 10, default: 5}",
            "{type: float, min: 0.0, max: 1.0, step: 0.1, default: 0.5}",
            "{type: bool, default: false}",
            "{type: enum, choices: [a, b, c], default: a}"][i % 4])
    root.mkdir(parents=True, exist_ok=True)
    (root / "registry.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "harness.py").write_text(HARNESS, encoding="utf-8")
    (root / "bench.yaml").write_text(BENCH, encoding="utf-8")
    (root / "tasks").mkdir(exist_ok=True)
    for split, count in (("dev", 20), ("val", 10), ("test", 10)):
        rows = [{"id": f"{split}-{j}", "input": f"{split} {j}", "expected": "yes"}
                for j in range(count)]
        (root / "tasks" / f"{split}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return root


def child(bench: Path, journals: Path, steps: int) -> None:
    """Run the search and print, as a JSON line each as it is reached (a parent that
    stops this process keeps those printed), the seconds to its start record and to
    each step's first candidate record."""
    from forge.journal.records import CandidateRecord, StartRecord
    from forge.search.launch import launch_search

    t0 = time.perf_counter()
    steps_seen: set[int] = set()

    def on_record(record: Any) -> None:
        if isinstance(record, StartRecord):
            print(json.dumps({"start": time.perf_counter() - t0}), flush=True)
        if isinstance(record, CandidateRecord) and record.step not in steps_seen:
            steps_seen.add(record.step)
            print(json.dumps({"step": record.step, "t": time.perf_counter() - t0}),
                  flush=True)

    launch_search(bench, max_steps=steps, seed=SEED, journals=journals, run_id="scaling",
                  on_record=on_record)
    print(json.dumps({"end": time.perf_counter() - t0}), flush=True)


def measure(code: Path, bench: Path, steps: int, timeout: float) -> dict[str, Any]:
    """The points one run reached: seconds to its start record, to each step's first
    candidate (``candidates``, by step) and to its end (None if not by ``timeout``)."""
    with tempfile.TemporaryDirectory() as journals:
        env = {**os.environ, "PYTHONPATH": str(code)}
        command = [sys.executable, str(Path(__file__).resolve()), "--child", str(bench),
                   "--journals", journals, "--steps", str(steps)]
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True,
                                  timeout=timeout, check=False)
            out = done.stdout
            if done.returncode != 0:
                sys.stderr.write(done.stderr[-2000:])
        except subprocess.TimeoutExpired as exc:
            raw = exc.stdout or ""
            out = raw.decode() if isinstance(raw, bytes) else raw
    points: dict[str, Any] = {"start": None, "candidates": {}, "end": None}
    for line in out.splitlines():
        if not line.startswith("{"):
            continue
        point = json.loads(line)
        if "step" in point:
            points["candidates"][str(point["step"])] = point["t"]
        else:
            points.update(point)
    return points


def first_candidate(points: dict[str, Any]) -> float | None:
    value = points["candidates"].get("1")
    return None if value is None else float(value)


def later_step(points: dict[str, Any]) -> float | None:
    """The mean seconds from one step's first candidate to the next's, past the first
    step (the proposer's model fitted on the configs screened so far)."""
    t = {int(s): v for s, v in points["candidates"].items()}
    gaps = [t[s + 1] - t[s] for s in sorted(t) if s + 1 in t]
    return sum(gaps) / len(gaps) if gaps else None


def _cell(value: float | None, timeout: float) -> str:
    return f"> {timeout:.0f}" if value is None else f"{value:.1f}"


def render(result: dict[str, Any]) -> str:
    codes: list[str] = list(result["codes"])
    timeout = result["timeout_s"]
    head = ["settings"]
    head += [f"first candidate ({c}), s" for c in codes]
    head += [f"a later step ({c}), s" for c in codes]
    lines = [
        "# Search cost against the number of settings",
        "",
        f"`{result['command']}` · {result['machine']} · {result['steps']} steps, seed "
        f"{SEED} · timeout {timeout:.0f} s a run",
        "",
        "*First candidate*: seconds from the `launch_search` call to the first candidate "
        "record (the bench loaded, the start config's first dev chunk run, the first "
        "step's moves listed and ranked). *A later step*: the mean seconds from one "
        "step's first candidate record to the next's (screening a step's candidates, "
        "listing and ranking the next step's moves, with the proposer's model fitted "
        "on the configs screened so far). Rollouts cost microseconds here: the times "
        "are forge's own. `> T`: not reached within the timeout.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for row in result["rows"]:
        cells = [f"{row['settings']:,}"]
        cells += [_cell(first_candidate(row[c]), timeout) for c in codes]
        cells += [_cell(later_step(row[c]), timeout) for c in codes]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--old", type=Path, help="an older checkout, timed beside this one")
    parser.add_argument("--steps", type=int, default=3, help="steps a search (max_steps)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a run")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--journals", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.journals, args.steps)
        return
    codes = {"new": ROOT, **({"old": args.old.resolve()} if args.old else {})}
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            bench = write_wide_bench(Path(tmp) / f"wide-{n}", n)
            row: dict[str, Any] = {"settings": n}
            for name, code in codes.items():
                row[name] = measure(code, bench, args.steps, args.timeout)
                print(f"{n:>6} settings, {name}: {row[name]}", file=sys.stderr, flush=True)
            rows.append(row)
    result = {"command": "python benchmarks/scaling.py " + " ".join(sys.argv[1:]),
              "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
                         f"{platform.python_version()}",
              "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
              "timeout_s": args.timeout, "steps": args.steps, "codes": list(codes),
              "rows": rows}
    text = render(result)
    print(text)
    if not args.no_write:
        for name, content in (("scaling.json", json.dumps(result, indent=2) + "\n"),
                              ("scaling.md", text)):
            (HERE / "results" / name).write_text(content, encoding="utf-8")


if __name__ == "__main__":
    main()
