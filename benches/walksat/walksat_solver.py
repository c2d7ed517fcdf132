"""A WalkSAT-family stochastic local search solver for CNF formulas, in pure Python.

Three pick rules share one flip engine:

- ``walksat_skc`` (Selman, Kautz & Cohen 1994): in a random unsatisfied clause, flip a
  variable whose flip breaks no clause (a "freebie") if there is one; otherwise, with
  probability ``noise`` a random variable of the clause, else one with the fewest
  breaks.
- ``probsat`` (Balint & Schöning 2012, exponential form): in a random unsatisfied
  clause, flip variable ``x`` with probability proportional to ``cb ** -break(x)``.
  ``noise`` is not used: ``cb`` alone sets how greedy it is.
- ``novelty`` (McAllester, Selman & Kautz 1997): in a random unsatisfied clause, rank
  variables by ``make - break``; flip the best unless it is the clause's most recently
  flipped variable, in which case flip the second best with probability ``noise``.

Why pure Python rather than numpy: a flip touches the dozen or so clauses the
variable occurs in, so per-flip work is tiny and strictly sequential; numpy's
per-call overhead (about a microsecond) would dominate it. The engine keeps
incremental counts instead, so a flip costs O(occurrences of the variable) and a
pick costs O(clause length):

- ``numtrue[c]``: true literals in clause ``c``;
- ``crit[c]``: when ``numtrue[c] == 1``, the variable of its only true literal;
- ``brk[v]``: clauses that flipping ``v`` would break (those where ``v`` is critical);
- ``mk[v]``: unsatisfied clauses that flipping ``v`` would satisfy;
- ``unsat``: the unsatisfied clauses, as a list with a position index for O(1) removal.

All randomness comes from the ``random.Random`` passed in, so a run is a pure
function of (formula, settings, seed).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ALGORITHMS", "TIE_BREAKING", "SolveResult", "check_assignment", "solve"]

ALGORITHMS = ("walksat_skc", "probsat", "novelty")
TIE_BREAKING = ("random", "first", "oldest")


@dataclass(frozen=True)
class SolveResult:
    """The outcome of one solver run.

    ``assignment`` is a list of ``n_vars`` signed literals (``[1, -2, 3, ...]``,
    DIMACS style) when a satisfying assignment was found, else None. ``flips`` counts
    every flip over all tries; ``tries`` is how many random starts were used
    (1 + restarts used); ``min_unsat`` is the fewest unsatisfied clauses seen.
    ``stagnated`` is true for an unsolved run whose last try reached its best
    unsatisfied-clause count in its first half and never improved on it after.
    """

    assignment: list[int] | None
    flips: int
    tries: int
    min_unsat: int
    stagnated: bool = False

    @property
    def solved(self) -> bool:
        return self.assignment is not None


def check_assignment(clauses: Sequence[Sequence[int]], n_vars: int,
                     assignment: object) -> tuple[bool, int, str]:
    """Verify ``assignment`` against the formula, trusting nothing about its shape.

    Returns ``(ok, unsatisfied_clauses, reason)``. A well-formed assignment is a list
    of exactly ``n_vars`` ints whose i-th entry is ``i+1`` or ``-(i+1)``; anything
    else is rejected with a reason, and counts every clause as unsatisfied.
    """
    if not isinstance(assignment, list) or len(assignment) != n_vars:
        return False, len(clauses), f"expected a list of {n_vars} signed literals"
    for i, lit in enumerate(assignment):
        # bool is an int subclass; True/False as literals would be a malformed answer.
        if isinstance(lit, bool) or not isinstance(lit, int) or abs(lit) != i + 1:
            return False, len(clauses), f"entry {i} is {lit!r}, expected {i + 1} or {-(i + 1)}"
    true_lits = set(assignment)
    unsat = sum(1 for clause in clauses if not any(lit in true_lits for lit in clause))
    if unsat:
        return False, unsat, f"{unsat} of {len(clauses)} clauses unsatisfied"
    return True, 0, f"all {len(clauses)} clauses satisfied"


def solve(clauses: Sequence[Sequence[int]], n_vars: int, *, algorithm: str = "walksat_skc",
          noise: float = 0.5, cb: float = 2.5, max_flips: int = 10_000, restarts: int = 0,
          tie_breaking: str = "random", rng: random.Random | None = None) -> SolveResult:
    """Run up to ``restarts + 1`` tries of at most ``max_flips`` flips each.

    Each try starts from a fresh uniformly random assignment. Returns on the first
    satisfying assignment, or after the last try with ``assignment=None``.
    ``tie_breaking`` decides between equally good variables (walksat_skc and
    novelty): ``random`` picks uniformly, ``first`` takes the earliest in the
    clause, ``oldest`` the least recently flipped. ``rng`` is the only source of
    randomness (a fixed ``Random(0)`` when omitted).
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; expected one of {ALGORITHMS}")
    if tie_breaking not in TIE_BREAKING:
        raise ValueError(f"unknown tie_breaking {tie_breaking!r}; expected one of {TIE_BREAKING}")
    if max_flips < 0 or restarts < 0:
        raise ValueError("max_flips and restarts must be >= 0")
    rng = rng if rng is not None else random.Random(0)
    rand = rng.random  # bound method: the hot loop calls it once or twice per flip

    # The counts below assume each variable occurs at most once per clause: repeated
    # literals are merged and tautologies (x or not x) dropped, as always satisfied.
    normal: list[tuple[int, ...]] = []
    for clause in clauses:
        lits = tuple(dict.fromkeys(int(x) for x in clause))
        if not any(-x in lits for x in lits):
            normal.append(lits)
    # Literal codes: variable v (1-based) has positive code 2v and negative code 2v+1,
    # so code >> 1 is the variable and a literal is true iff value[v] != code & 1.
    cl_codes: list[tuple[int, ...]] = [tuple(2 * abs(x) + (x < 0) for x in c) for c in normal]
    cl_vars: list[tuple[int, ...]] = [tuple(abs(x) for x in c) for c in normal]
    n_clauses = len(cl_codes)
    occ: list[list[int]] = [[] for _ in range(2 * n_vars + 2)]
    for ci, codes in enumerate(cl_codes):
        for code in codes:
            occ[code].append(ci)
    if any(len(c) == 0 for c in cl_codes):  # an empty clause can never be satisfied
        return SolveResult(None, 0, 0, n_clauses, stagnated=False)

    # probSAT's weights cb**-break, tabulated: break never exceeds a variable's occurrences.
    max_occ = max((len(o) for o in occ), default=0)
    weight = [cb ** -b for b in range(max_occ + 1)]
    use_random_ties = tie_breaking == "random"
    use_oldest = tie_breaking == "oldest"

    value = [0] * (n_vars + 1)
    numtrue = [0] * n_clauses
    crit = [0] * n_clauses
    brk = [0] * (n_vars + 1)
    mk = [0] * (n_vars + 1)
    last_flip = [0] * (n_vars + 1)  # flip index of each variable's last flip (age)
    unsat: list[int] = []
    where = [-1] * n_clauses  # position of a clause in ``unsat``, -1 when satisfied

    total_flips = 0
    min_unsat = n_clauses
    best_at = 0  # flip (within the current try) at which the try's best was reached

    def pick_min(cands: Sequence[int], keys: Sequence[int]) -> int:
        """Among ``cands``, one with the smallest of ``keys`` (aligned with ``cands``),
        ties decided by ``tie_breaking``."""
        best = min(keys)
        ties = [v for v, k in zip(cands, keys, strict=True) if k == best]
        if len(ties) == 1:
            return ties[0]
        if use_random_ties:
            return ties[int(rand() * len(ties))]
        if use_oldest:
            return min(ties, key=last_flip.__getitem__)
        return ties[0]

    tries = 0
    for _try in range(restarts + 1):
        tries += 1
        # A fresh random start: value, then every count rebuilt from scratch.
        for v in range(1, n_vars + 1):
            value[v] = 1 if rand() < 0.5 else 0
            brk[v] = 0
            mk[v] = 0
            last_flip[v] = 0
        unsat.clear()
        for ci, codes in enumerate(cl_codes):
            nt = 0
            for code in codes:
                if value[code >> 1] != code & 1:
                    nt += 1
                    crit[ci] = code >> 1
            numtrue[ci] = nt
            if nt == 0:
                where[ci] = len(unsat)
                unsat.append(ci)
                for v in cl_vars[ci]:
                    mk[v] += 1
            else:
                where[ci] = -1
                if nt == 1:
                    brk[crit[ci]] += 1
        try_best = len(unsat)
        best_at = 0
        flips = 0
        while unsat and flips < max_flips:
            ci = unsat[int(rand() * len(unsat))]
            cv = cl_vars[ci]
            # --- pick a variable of clause ci ---------------------------------------
            if algorithm == "walksat_skc":
                breaks = [brk[v] for v in cv]
                if min(breaks) == 0:  # a freebie: flipping it breaks nothing, take it
                    flip_var = pick_min(cv, breaks)
                elif rand() < noise:
                    flip_var = cv[int(rand() * len(cv))]
                else:
                    flip_var = pick_min(cv, breaks)
            elif algorithm == "probsat":
                ws = [weight[brk[v]] for v in cv]
                r = rand() * sum(ws)
                flip_var = cv[-1]  # float round-off can leave r just above the last sum
                for v, w in zip(cv, ws, strict=True):
                    r -= w
                    if r <= 0:
                        flip_var = v
                        break
            else:  # novelty
                # break - make: the change in unsatisfied clauses; lower is better.
                deltas = [brk[v] - mk[v] for v in cv]
                best = pick_min(cv, deltas)
                youngest = max(cv, key=last_flip.__getitem__)
                if best != youngest or last_flip[youngest] == 0 or rand() >= noise:
                    flip_var = best
                else:  # the best was just flipped: take the second best instead
                    rest = [(v, d) for v, d in zip(cv, deltas, strict=True) if v != best]
                    flip_var = pick_min([v for v, _ in rest], [d for _, d in rest])
            # --- flip it, updating every count incrementally --------------------------
            flips += 1
            last_flip[flip_var] = total_flips + flips
            was_true = 2 * flip_var + (1 - value[flip_var])  # code of the literal now true
            value[flip_var] ^= 1
            for c in occ[was_true]:  # these clauses lose a true literal
                nt = numtrue[c] - 1
                numtrue[c] = nt
                if nt == 0:  # flip_var was critical here: now unsatisfied
                    brk[flip_var] -= 1
                    where[c] = len(unsat)
                    unsat.append(c)
                    for v in cl_vars[c]:
                        mk[v] += 1
                elif nt == 1:  # the remaining true literal becomes critical
                    for code in cl_codes[c]:
                        if value[code >> 1] != code & 1:
                            crit[c] = code >> 1
                            brk[code >> 1] += 1
                            break
            for c in occ[was_true ^ 1]:  # these clauses gain a true literal
                nt = numtrue[c] + 1
                numtrue[c] = nt
                if nt == 1:  # satisfied again, by flip_var alone
                    pos = where[c]
                    last = unsat.pop()
                    if last != c:
                        unsat[pos] = last
                        where[last] = pos
                    where[c] = -1
                    for v in cl_vars[c]:
                        mk[v] -= 1
                    crit[c] = flip_var
                    brk[flip_var] += 1
                elif nt == 2:  # its critical variable is no longer critical
                    brk[crit[c]] -= 1
            if len(unsat) < try_best:
                try_best = len(unsat)
                best_at = flips
        total_flips += flips
        min_unsat = min(min_unsat, try_best)
        if not unsat:
            assignment = [v if value[v] else -v for v in range(1, n_vars + 1)]
            return SolveResult(assignment, total_flips, tries, 0)
    return SolveResult(None, total_flips, tries, min_unsat,
                       stagnated=max_flips > 0 and 2 * best_at < max_flips)

