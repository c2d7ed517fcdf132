"""Writes tasks/{dev,val,test}.jsonl: arithmetic for the coder to compute (seeded, stable).

    python generate_tasks.py

A quarter of the tasks are small enough for mental arithmetic (every operand at most
12); the rest need a script. Inputs are distinct across splits.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

SIZES = {"dev": 32, "val": 24, "test": 24}


def task(rng: random.Random, split: str, i: int, seen: set[str]) -> dict[str, object]:
    while True:
        if i % 4 == 0:
            a, b, c = rng.randint(2, 12), rng.randint(2, 12), rng.randint(1, 12)
        else:
            a, b, c = rng.randint(13, 999), rng.randint(13, 99), rng.randint(1, 999)
        op = rng.choice(["+", "-"])
        expression = f"{a} * {b} {op} {c}"
        if expression not in seen:
            seen.add(expression)
            break
    value = a * b + c if op == "+" else a * b - c
    return {"id": f"{split}-{i:02d}", "input": f"Compute {expression}. Reply with the number only.",
            "expected": str(value), "tags": ["easy" if i % 4 == 0 else "hard"]}


def main() -> None:
    rng = random.Random(49)
    seen: set[str] = set()
    folder = Path(__file__).resolve().parent / "tasks"
    folder.mkdir(exist_ok=True)
    for split, n in SIZES.items():
        rows = [task(rng, split, i, seen) for i in range(n)]
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


if __name__ == "__main__":
    main()
