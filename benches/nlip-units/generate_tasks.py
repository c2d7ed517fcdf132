"""Write tasks/{dev,val,test}.jsonl from the units in brain.py (deterministic).

    python generate_tasks.py

Two kinds of conversion in every split: to or from a dimension's base unit (one
step) and between two other units (two steps); quantities drawn with a fixed seed,
each large enough that the answer is at least 1.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

from brain import TABLE, hops, plural, right_answer

HERE = Path(__file__).resolve().parent
SIZES = {"dev": (10, 14), "val": (6, 9), "test": (6, 9)}


def main() -> None:
    rng = random.Random(49)
    pairs = [(a, b) for a, b in itertools.permutations(TABLE, 2) if TABLE[a][0] == TABLE[b][0]]
    one = [p for p in pairs if hops(*p) == 1]
    two = [p for p in pairs if hops(*p) == 2]
    rng.shuffle(one)
    rng.shuffle(two)
    for split, (n_one, n_two) in SIZES.items():
        rows = []
        for source, target in [one.pop() for _ in range(n_one)] + [two.pop()
                                                                 for _ in range(n_two)]:
            # The smallest quantity whose answer is at least 1 (no answer of 0.0006).
            quantity = next(q for q in [*rng.sample([2, 3, 5, 7, 12, 18, 25, 40], 8),
                                        75, 120, 500, 2000, 10000, 50000, 250000]
                            if right_answer(f"Convert {q} {plural(source)} to "
                                            f"{plural(target)}.") >= 1)
            question = f"Convert {quantity} {plural(source)} to {plural(target)}."
            rows.append({"id": f"{source}-{target}".replace(" ", "_"), "input": question,
                         "expected": round(right_answer(question), 6),
                         "tags": [f"hops{hops(source, target)}"]})
        path = HERE / "tasks" / f"{split}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


if __name__ == "__main__":
    main()
