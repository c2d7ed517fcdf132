"""Write tasks/{dev,val,test}.jsonl from the shop's orders in brain.py (deterministic).

    python generate_tasks.py

Three kinds of question, each in every split: an order's status (one tool round), an
order's total with shipping (two rounds), which of two orders cost more (three).
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

from brain import ORDERS, right_answer

HERE = Path(__file__).resolve().parent
SIZES = {"dev": (6, 6, 12), "val": (3, 3, 9), "test": (3, 3, 9)}


def main() -> None:
    rng = random.Random(49)
    orders = sorted(ORDERS)
    status = [(f"status-{o}", f"What is the status of order {o}?") for o in orders]
    totals = [(f"total-{o}", f"What is the total of order {o}, shipping included?")
              for o in orders]
    pairs = [(f"more-{a}-{b}", f"Which of orders {a} and {b} cost more in total?")
             for a, b in itertools.combinations(orders, 2)]
    for pool in (status, totals, pairs):
        rng.shuffle(pool)
    for split, sizes in SIZES.items():
        rows = []
        for pool, size in zip((status, totals, pairs), sizes, strict=True):
            for task_id, question in (pool.pop() for _ in range(size)):
                kind = task_id.split("-")[0]
                rows.append({"id": task_id, "input": question,
                             "expected": right_answer(question), "tags": [kind]})
        path = HERE / "tasks" / f"{split}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


if __name__ == "__main__":
    main()
