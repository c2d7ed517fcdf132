"""Write suites/{dev,val,test}.jsonl for the ag2-orders bench (fixed seed: same files).

    python benches/ag2-orders/generate_suites.py

The files are AG2 suites (``ag2.eval.Suite.from_jsonl`` reads them as they are): one
task a line, ``task_id``, ``inputs: {input}``, ``reference_outputs: {answer}``, ``tags``.
Three kinds of question, answered from the order book in orders_tools.py:

- ``status``: "What is the status of order A-1004?"          (1 tool call)
- ``price``:  "What did order A-1002 cost in EUR?"           (2 tool calls in a row)
- ``items``:  "How many items are in orders A-1001 and A-1007 together?"  (2 calls,
  both results needed at once)

No question appears in two splits.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from orders_tools import ORDERS, RATES, convert

SEED = 20260611
HERE = Path(__file__).resolve().parent
COUNTS = {"dev": {"status": 7, "price": 4, "items": 7},
          "val": {"status": 4, "price": 2, "items": 4},
          "test": {"status": 4, "price": 2, "items": 4}}


def question(kind: str, rng: random.Random) -> tuple[str, str]:
    ids = sorted(ORDERS)
    if kind == "status":
        order = rng.choice(ids)
        return f"What is the status of order {order}?", str(ORDERS[order]["status"])
    if kind == "price":
        order = rng.choice(ids)
        currency = rng.choice([c for c in RATES if c != "USD"])
        total = float(ORDERS[order]["total_usd"])  # type: ignore[arg-type]
        return (f"What did order {order} cost in {currency}?",
                f"{convert(total, currency):.2f}")
    first, second = rng.sample(ids, 2)
    items = int(ORDERS[first]["items"]) + int(ORDERS[second]["items"])  # type: ignore[call-overload]
    return f"How many items are in orders {first} and {second} together?", str(items)


def main() -> None:
    rng = random.Random(SEED)
    seen: set[str] = set()
    (HERE / "suites").mkdir(exist_ok=True)
    for split, counts in COUNTS.items():
        lines = []
        for kind, n in counts.items():
            made = 0
            while made < n:
                text, answer = question(kind, rng)
                if text in seen:
                    continue
                seen.add(text)
                lines.append({"task_id": f"{split}-{kind}-{made:02d}", "inputs": {"input": text},
                              "reference_outputs": {"answer": answer}, "tags": [kind]})
                made += 1
        path = HERE / "suites" / f"{split}.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


if __name__ == "__main__":
    main()
