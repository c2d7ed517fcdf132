"""Generate the walksat bench's task splits: satisfiable CNF formulas, deterministically.

Two families:

- ``uniform``: uniform random 3-SAT near the satisfiability phase transition
  (clause/variable ratio drawn from 4.20-4.26), the classic hard region for local
  search. Formulas are drawn *unplanted* and kept only if a complete DPLL solver
  finds them satisfiable (as SATLIB's ``uf`` sets were made); planting a solution
  would bias the draw towards easy formulas.
- ``flat``: 3-colouring of a random graph with a planted colouring (three near-equal
  colour classes, edges only between classes, edge/vertex ratio near the
  3-colourability threshold), in the usual direct encoding: one "at least one
  colour" clause and three "at most one colour" clauses per vertex, three
  "not both this colour" clauses per edge. Satisfiable by construction; the planted
  colouring is verified against the encoding, and DPLL checks the formula as well.

Every instance comes from ``random.Random`` seeded with a string naming the split,
the index and the draw, so ``python generate_instances.py`` rewrites byte-identical
files. Run it from anywhere: it writes next to itself, under ``tasks/``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from walksat_solver import check_assignment

__all__ = ["SPLITS", "build_split", "dpll", "planted_colouring", "uniform_3sat", "write_splits"]

Clause = tuple[int, ...]

#: Per split: (family, count, sizes). Uniform sizes are variable counts; flat sizes are
#: vertex counts (three variables per vertex). Each split mixes sizes so that tasks
#: range from easy to hard for a given flip budget.
SPLITS: dict[str, list[tuple[str, int, tuple[int, ...]]]] = {
    "dev": [("uniform", 36, (50, 65, 80)), ("flat", 12, (24, 30))],
    "val": [("uniform", 22, (50, 65, 80)), ("flat", 8, (24, 30))],
    "test": [("uniform", 22, (50, 65, 80)), ("flat", 8, (24, 30))],
}
#: Edges per vertex: 2.3 is near the 3-colourability threshold of random graphs, where
#: planted colourings are hardest to find (SATLIB's flat graphs sit about there too).
FLAT_EDGE_RATIO = 2.3
SEED_PREFIX = "forge/benches/walksat/v1"


def uniform_3sat(n_vars: int, n_clauses: int, rng: random.Random) -> list[Clause]:
    """``n_clauses`` random 3-clauses over ``n_vars`` variables: three distinct
    variables each, random signs, no clause repeated."""
    seen: set[Clause] = set()
    clauses: list[Clause] = []
    while len(clauses) < n_clauses:
        vs = rng.sample(range(1, n_vars + 1), 3)
        clause = tuple(sorted((v if rng.random() < 0.5 else -v for v in vs), key=abs))
        if clause not in seen:
            seen.add(clause)
            clauses.append(clause)
    return clauses


def planted_colouring(n_vertices: int, n_edges: int, rng: random.Random
                      ) -> tuple[list[Clause], int, list[int]]:
    """A 3-colouring formula of a random graph with a planted colouring.

    Returns ``(clauses, n_vars, planted)`` where ``planted`` is the satisfying
    assignment (signed literals) of the planted colouring. Variable ``3*v + c + 1``
    means "vertex v has colour c".
    """
    colours = [i % 3 for i in range(n_vertices)]
    rng.shuffle(colours)
    pairs = [(u, w) for u in range(n_vertices) for w in range(u + 1, n_vertices)
             if colours[u] != colours[w]]
    edges = sorted(rng.sample(pairs, n_edges))

    def var(v: int, c: int) -> int:
        return 3 * v + c + 1

    clauses: list[Clause] = []
    for v in range(n_vertices):
        clauses.append((var(v, 0), var(v, 1), var(v, 2)))
        clauses += [(-var(v, a), -var(v, b)) for a, b in ((0, 1), (0, 2), (1, 2))]
    for u, w in edges:
        clauses += [(-var(u, c), -var(w, c)) for c in range(3)]
    n_vars = 3 * n_vertices
    planted = [var(v, c) if colours[v] == c else -var(v, c)
               for v in range(n_vertices) for c in range(3)]
    return clauses, n_vars, planted


def dpll(clauses: Sequence[Sequence[int]], n_vars: int) -> list[int] | None:
    """A complete DPLL solver: a satisfying assignment (signed literals) or None.

    Unit propagation plus MOMs branching (most occurrences in the shortest
    clauses), which keeps the search trees of these small formulas to a few hundred
    nodes. Plain recursion on simplified clause lists: slow per node, but simple
    enough to trust as the satisfiability check of the generator and the tests.
    """
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 4 * n_vars + 100))
    start = [tuple(c) for c in clauses]

    def assign(cs: list[Clause], lit: int) -> list[Clause] | None:
        out: list[Clause] = []
        for c in cs:
            if lit in c:
                continue
            if -lit in c:
                reduced = tuple(x for x in c if x != -lit)
                if not reduced:
                    return None  # conflict: a clause lost its last literal
                out.append(reduced)
            else:
                out.append(c)
        return out

    def search(cs: list[Clause], trail: list[int]) -> list[int] | None:
        while True:
            unit = next((c[0] for c in cs if len(c) == 1), None)
            if unit is None:
                break
            trail = [*trail, unit]
            reduced = assign(cs, unit)
            if reduced is None:
                return None
            cs = reduced
        if not cs:
            return trail
        shortest = min(len(c) for c in cs)
        counts: dict[int, int] = {}
        for c in cs:
            if len(c) == shortest:
                for x in c:
                    counts[x] = counts.get(x, 0) + 1
        var = max(counts, key=lambda x: (counts.get(x, 0) + counts.get(-x, 0), x))
        first = abs(var) if counts.get(abs(var), 0) >= counts.get(-abs(var), 0) else -abs(var)
        for lit in (first, -first):
            reduced = assign(cs, lit)
            if reduced is not None:
                found = search(reduced, [*trail, lit])
                if found is not None:
                    return found
        return None

    trail = search(start, [])
    if trail is None:
        return None
    chosen = {abs(x): x for x in trail}
    # Variables the search never had to set are free: any value satisfies.
    return [chosen.get(v, v) for v in range(1, n_vars + 1)]


def _draws(split: str, index: int) -> Iterator[random.Random]:
    """Random streams for one instance: draw 0, 1, 2, ... until one is kept."""
    draw = 0
    while True:
        yield random.Random(f"{SEED_PREFIX}/{split}/{index}/{draw}")
        draw += 1


def _make_instance(split: str, index: int, family: str, size: int) -> dict[str, Any]:
    """One task line: the first draw for this (split, index) that is satisfiable."""
    for draw, rng in enumerate(_draws(split, index)):
        planted: list[int] | None = None
        if family == "uniform":
            ratio = round(rng.uniform(4.20, 4.26), 3)
            n_vars = size
            clauses = uniform_3sat(n_vars, round(ratio * n_vars), rng)
        else:
            n_edges = round(FLAT_EDGE_RATIO * size)
            clauses, n_vars, planted = planted_colouring(size, n_edges, rng)
            ok, _, reason = check_assignment(clauses, n_vars, planted)
            if not ok:  # would be a bug in the encoding, not bad luck
                raise AssertionError(f"planted colouring does not satisfy its formula: {reason}")
        model = dpll(clauses, n_vars)
        if model is None:
            continue  # unsatisfiable: draw again (only happens for uniform)
        ok, _, reason = check_assignment(clauses, n_vars, model)
        if not ok:
            raise AssertionError(f"DPLL model does not satisfy the formula: {reason}")
        tag = f"{split}-{family}-{index:03d}"
        meta: dict[str, Any] = {"family": family, "n_vars": n_vars, "n_clauses": len(clauses),
                                "draw": draw}
        if family == "uniform":
            meta["ratio"] = round(len(clauses) / n_vars, 3)
        else:
            meta["vertices"] = size
            meta["edges"] = round(FLAT_EDGE_RATIO * size)
        return {"id": tag, "input": {"n_vars": n_vars, "clauses": [list(c) for c in clauses]},
                "expected": None, "tags": [family, f"n{n_vars}"], "metadata": meta}
    raise AssertionError("unreachable")  # _draws never ends


def build_split(split: str) -> list[dict[str, Any]]:
    """Every task of ``split``, in file order. Deterministic."""
    tasks: list[dict[str, Any]] = []
    index = 0
    for family, count, sizes in SPLITS[split]:
        for i in range(count):
            tasks.append(_make_instance(split, index, family, sizes[i % len(sizes)]))
            index += 1
    return tasks


def write_splits(folder: Path) -> dict[str, int]:
    """Write ``folder/{dev,val,test}.jsonl``; returns the task count per split."""
    folder.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    for split in SPLITS:
        tasks = build_split(split)
        lines = "".join(json.dumps(t, separators=(",", ":")) + "\n" for t in tasks)
        (folder / f"{split}.jsonl").write_text(lines, encoding="utf-8")
        counts[split] = len(tasks)
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "tasks",
                        help="folder for the split files (default: tasks/ beside this file)")
    args = parser.parse_args(argv)
    for split, n in write_splits(args.out).items():
        print(f"{split}: {n} satisfiable instances -> {args.out / (split + '.jsonl')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
