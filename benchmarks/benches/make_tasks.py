"""Writes the task splits of the gate benches (deterministic; the output is committed).

    python benchmarks/benches/make_tasks.py

Each task of the gate benches carries its own success probability ``input["p"]``
(uniform in 0.2..0.9, rounded to 3 decimals). Ids and inputs are unique across the
three splits (the input holds the task's name). Both gate benches get the same tasks,
so their results differ only by the ``boost`` setting. The closed-form contest bench
(``closedform``) gets a base rate and a family (slang or plain) per task; the sparse
closed-form bench (``sparse``) a base rate and a family (reasoning or lookup, half each).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIZES = {"dev": 100, "val": 100, "test": 100}


def tasks(split: str, n: int) -> list[dict[str, object]]:
    rng = random.Random(f"forge-gates-{split}")
    out = []
    for i in range(n):
        p = round(rng.uniform(0.2, 0.9), 3)
        out.append({"id": f"{split}-{i:03d}", "input": {"name": f"{split}-{i:03d}", "p": p},
                    "expected": "pass", "tags": [], "metadata": {}})
    return out


#: closedform: the share of slang tickets per split (the shortcut's dev-only win).
SLANG = {"dev": 0.5, "val": 0.1, "test": 0.1}


def closedform_tasks(split: str, n: int) -> list[dict[str, object]]:
    """Base success rates uniform in 0.15..0.45; slang tickets first in the order drawn."""
    rng = random.Random(f"forge-closedform-{split}")
    out = []
    for i in range(n):
        family = "slang" if rng.random() < SLANG[split] else "plain"
        base = round(rng.uniform(0.15, 0.45), 3)
        out.append({"id": f"{split}-{i:03d}", "expected": "pass", "tags": [family],
                    "input": {"name": f"{split}-{i:03d}", "base": base, "family": family},
                    "metadata": {}})
    return out


def sparse_tasks(split: str, n: int) -> list[dict[str, object]]:
    """Base success rates uniform in 0.15..0.45; reasoning or lookup with chance 1/2
    each, in every split (the planner's gain is the same in dev and test)."""
    rng = random.Random(f"forge-sparse-{split}")
    out = []
    for i in range(n):
        family = "reasoning" if rng.random() < 0.5 else "lookup"
        base = round(rng.uniform(0.15, 0.45), 3)
        out.append({"id": f"{split}-{i:03d}", "expected": "pass", "tags": [family],
                    "input": {"name": f"{split}-{i:03d}", "base": base, "family": family},
                    "metadata": {}})
    return out


def main() -> None:
    for bench, make in (("closedform", closedform_tasks), ("sparse", sparse_tasks)):
        folder = HERE / bench / "tasks"
        folder.mkdir(parents=True, exist_ok=True)
        for split, n in SIZES.items():
            lines = [json.dumps(t, sort_keys=True) for t in make(split, n)]
            (folder / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    for bench in ("noeffect", "effect"):
        folder = HERE / bench / "tasks"
        folder.mkdir(parents=True, exist_ok=True)
        for split, n in SIZES.items():
            lines = [json.dumps(t, sort_keys=True) for t in tasks(split, n)]
            (folder / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    print("wrote", ", ".join(f"{b}/tasks/*.jsonl" for b in ("closedform", "sparse",
                                                           "noeffect", "effect")))


if __name__ == "__main__":
    main()
