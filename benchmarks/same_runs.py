"""Whether a change kept forge's decisions: fixed-seed runs compared record by record.

    # the three fixed-seed searches of a checkout, into OUT (about 1.5 minutes)
    PYTHONPATH=CHECKOUT python benchmarks/same_runs.py journals OUT
    # their journals and attempt stores compared, clock fields aside
    python benchmarks/same_runs.py compare BEFORE AFTER
    # two gate benchmark results compared run by run (wall time aside)
    python benchmarks/same_runs.py gates benchmarks/results/gates.json NEW.json

A refactor that changes no decision leaves every record and every attempt as it was:
the three searches (triage, the default bench; walksat at 3,000 rollouts; closedform at
5,000) run with ``--seed 7``, and ``compare`` reads ``journal.jsonl`` and
``attempts.jsonl.gz`` of each run in both folders, masks the fields that hold clock
readings (:data:`CLOCK`), and prints, per file, the records on each side and how many
differ, with the first difference. It exits 1 on any difference. ``gates`` does the
same for the per-seed lines of two gate benchmark results.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: Fields that hold clock readings: when a record was written, how long a thing took.
CLOCK = {"at", "elapsed_s", "duration_s", "created_at", "latency", "wall_s"}
SEARCHES = {
    "triage": ["benches/triage"],
    "walksat": ["benches/walksat", "--budget-rollouts", "3000"],
    "closedform": ["benchmarks/benches/closedform", "--budget-rollouts", "5000"],
}


def masked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "<clock>" if k in CLOCK else masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(v) for v in value]
    return value


def _lines(path: Path) -> list[Any]:
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [masked(json.loads(line)) for line in fh if line.strip()]


def journals(out: Path) -> int:
    """The three fixed-seed searches, run by the forge first on the path."""
    procs = [subprocess.Popen([sys.executable, "-m", "forge", "search", *args, "--seed", "7",
                               "--run-id", f"fixed-{name}", "--journals", str(out), "--json"],
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for name, args in SEARCHES.items()]
    return max(p.wait() for p in procs)


def _first_difference(a: list[Any], b: list[Any]) -> str:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            keys = sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))
            return f"first at line {i + 1}: {', '.join(keys)}"
    return f"lengths {len(a)} and {len(b)}"


def compare(before: Path, after: Path) -> int:
    bad = 0
    for run in sorted(p for p in before.iterdir() if p.is_dir()):
        for name in ("journal.jsonl", "attempts.jsonl.gz"):
            a, b = _lines(run / name), _lines(after / run.name / name)
            differing = sum(x != y for x, y in zip(a, b, strict=False))
            line = f"{run.name} {name}: {len(a)} and {len(b)} records, {differing} differ"
            if differing or len(a) != len(b):
                bad += 1
                line += f" ({_first_difference(a, b)})"
            print(line)
    return 1 if bad else 0


def gates(before: Path, after: Path) -> int:
    def runs(path: Path) -> dict[tuple[str, str, int], Any]:
        return {(r["method"], r["bench"], r["seed"]): masked(r)
                for r in json.loads(path.read_text(encoding="utf-8"))["runs"]}
    a, b = runs(before), runs(after)
    differing = [k for k in a if a[k] != b.get(k)]
    print(f"{len(a)} and {len(b)} runs, {len(differing)} differ"
          + (f" (first: {differing[0]})" if differing else ""))
    return 1 if differing or a.keys() != b.keys() else 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "journals":
        return journals(Path(argv[1]).resolve())
    if len(argv) == 3 and argv[0] in ("compare", "gates"):
        fn = compare if argv[0] == "compare" else gates
        return fn(Path(argv[1]), Path(argv[2]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
