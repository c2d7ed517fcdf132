"""Write tasks/{dev,val,test}.jsonl for the openai-math bench (fixed seed: same files).

    python benches/openai-math/generate_tasks.py

Five kinds of question, each answered by calling the bench's tools (tools.py) and
checked against what those tools return:

- ``arith``:  one operation, "What is 84 / 7?"                        (1 tool call)
- ``lookup``: one fact, "What is the capital of Peru?"                 (1 tool call)
- ``chain``:  two operations, "What is (12 + 7) * 3?"                  (2 tool calls)
- ``mixed``:  a fact and an operation, "... atomic number of iron plus 4?" (2 calls)
- ``pair``:   two facts added, "... of carbon plus the atomic number of neon?" (3 calls)

A model needs one turn per round of tool calls plus one to answer, so ``chain``,
``mixed`` and ``pair`` tasks fail when ``max_iterations`` is too small. No question
appears in two splits.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tools import TABLES, Table, add, divide, lookup, multiply, subtract

SEED = 20240607
HERE = Path(__file__).resolve().parent
#: Tasks per kind in each split.
COUNTS = {
    "dev": {"arith": 9, "lookup": 8, "chain": 5, "mixed": 5, "pair": 3},
    "val": {"arith": 6, "lookup": 5, "chain": 3, "mixed": 4, "pair": 2},
    "test": {"arith": 6, "lookup": 5, "chain": 3, "mixed": 4, "pair": 2},
}
OPS: dict[str, Callable[[float, float], Any]] = {"+": add, "-": subtract, "*": multiply,
                                                  "/": divide}
WORDS = {"plus": add, "minus": subtract, "times": multiply}

Task = tuple[str, Any, int]  # question, expected answer, tool calls needed


def arith(rng: random.Random) -> Task:
    op = rng.choice("+-*/")
    if op == "/":
        b, quotient = rng.randint(2, 12), rng.randint(2, 30)
        a = b * quotient
    elif op == "*":
        a, b = rng.randint(2, 40), rng.randint(2, 25)
    else:
        a, b = sorted((rng.randint(2, 999), rng.randint(2, 999)), reverse=True)
    return f"What is {a} {op} {b}?", OPS[op](a, b), 1


def fact(rng: random.Random) -> Task:
    tables: list[Table] = ["elements", "capitals", "capitals", "moons"]
    table = rng.choice(tables)
    key = rng.choice(sorted(TABLES[table]))
    question = {"elements": f"What is the atomic number of {key}?",
                "capitals": f"What is the capital of {key.title()}?",
                "moons": f"How many moons does {key.title()} have?"}[table]
    return question, lookup(table, key), 1


def chain(rng: random.Random) -> Task:
    op1, op2 = rng.choice("+-*"), rng.choice("+-")
    a, b, c = rng.randint(2, 30), rng.randint(2, 12), rng.randint(2, 60)
    if op1 == "-":
        a, b = max(a, b), min(a, b)
    if op2 == "-" and c > OPS[op1](a, b):
        op2 = "+"  # non-negative answers, as in `mixed`
    return f"What is ({a} {op1} {b}) {op2} {c}?", OPS[op2](OPS[op1](a, b), c), 2


def mixed(rng: random.Random) -> Task:
    word = rng.choice(sorted(WORDS))
    n = rng.randint(2, 9) if word == "times" else rng.randint(2, 40)
    table: Table = "elements" if rng.random() < 0.6 else "moons"
    key = rng.choice(sorted(TABLES[table]))
    value = lookup(table, key)
    assert isinstance(value, int)
    if word == "minus" and n > value:
        word = "plus"  # answers stay non-negative: no model has to spell a minus sign
    subject = (f"the atomic number of {key}" if table == "elements"
               else f"the number of moons of {key.title()}")
    return f"What is {subject} {word} {n}?", WORDS[word](value, n), 2


def pair(rng: random.Random) -> Task:
    x, y = rng.sample(sorted(TABLES["elements"]), 2)
    total = add(lookup("elements", x), lookup("elements", y))  # type: ignore[arg-type]
    return f"What is the atomic number of {x} plus the atomic number of {y}?", total, 3


KINDS: dict[str, Callable[[random.Random], Task]] = {
    "arith": arith, "lookup": fact, "chain": chain, "mixed": mixed, "pair": pair}


def generate(seed: int = SEED) -> dict[str, list[dict[str, Any]]]:
    rng = random.Random(seed)
    seen: set[str] = set()
    splits: dict[str, list[dict[str, Any]]] = {}
    for split, counts in COUNTS.items():
        rows = []
        for kind, count in counts.items():
            for i in range(count):
                while True:  # a question asked once in all splits: no leak between them
                    question, expected, calls = KINDS[kind](rng)
                    if question not in seen:
                        seen.add(question)
                        break
                rows.append({"id": f"{split}-{kind}-{i:02d}", "input": question,
                             "expected": expected, "tags": [kind],
                             "metadata": {"tool_calls": calls}})
        splits[split] = rows
    return splits


def main() -> None:
    for split, rows in generate().items():
        path = HERE / "tasks" / f"{split}.jsonl"
        path.parent.mkdir(exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        print(f"{path.relative_to(HERE)}: {len(rows)} tasks")


if __name__ == "__main__":
    main()
