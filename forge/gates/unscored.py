"""The failure-share gate (``unscored``): the candidate fails no more often than the
start config, beyond its allowance, on the same (task, seed) pairs.

The means a search compares leave failed attempts out (they are not zeros), and the
score gates count a failure as a loss only where the other side answered
(:func:`~forge.gates.checks.score_deltas`): a config that fails exactly on the attempts
it would get wrong loses nothing there. So its failure share is compared on its own,
against the *start* config (the one deployed), as the tolerances are: small increases
cannot add up across promotions. Where the incumbent is not the start, the candidate
is held to the same allowance against the incumbent too: a move that brings back the
failures an earlier promotion removed fails more often than the config it would
replace, and is refused.

The gate refuses, it does not prove: it is decided failed at a look whose data show the
increase beyond ``allowed`` at the look's nominal level (so it stops a failing candidate
early), and, once every other gate of the confirmation has passed, decided on all its
data at its full level: failed if the increase is shown, passed otherwise. A candidate
whose failure share is no higher than the start's and the incumbent's is refused by it
with probability at most twice its level for each of the two comparisons (the looks'
spending plus the last test); a benchmark measures how often it lets a config through
that fails where it would be wrong (``benchmarks/failures.py``).
"""

from __future__ import annotations

from forge.gates.base import Details, SequentialGate, Verdict
from forge.stats.unscored import FailurePairs, failure_increase

__all__ = ["UnscoredGate"]


class UnscoredGate(SequentialGate):
    """``unscored``: H0 the candidate's failure share at most the start's plus
    ``allowed``, refused where shown otherwise, over ``n_max`` tasks."""

    def __init__(self, level: float, n_max: int, *, allowed: float) -> None:
        super().__init__("unscored", level, n_max)
        self.allowed = allowed
        #: The last look's pairs (what the reason and the record show).
        self.last: FailurePairs | None = None
        #: The candidate's own confirmation attempts and failures at the last look.
        self.own: tuple[int, int] = (0, 0)
        #: The last look's pairs with the incumbent (None: the incumbent is the start).
        self.inc_pairs: FailurePairs | None = None

    def test(self, evidence: FailurePairs, *, attempts: int, failed: int, last: bool,
             incumbent: FailurePairs | None = None) -> Verdict | None:
        """One look on ``evidence`` (the pairs with the start, which the confirmation runs
        only once the candidate has failed: none are needed before), the candidate
        having failed ``failed`` of its ``attempts`` confirmation attempts; ``last``:
        every other gate has passed, so the gate is decided. ``incumbent``: the pairs
        with the incumbent where it is not the start, held to the same allowance, so
        that a candidate failing more than the config it would replace is refused even
        where the start failed as often."""
        self.last, self.own, self.inc_pairs = evidence, (attempts, failed), incumbent
        if failed == 0:
            if not last:
                return None
            if not attempts:
                return self.decide(False, "unscored: the candidate ran no attempt: "
                                          "nothing compared", {"attempts": 0})
            return self.decide(True, f"unscored 0/{attempts}: the candidate failed none of "
                                     f"its confirmation attempts",
                               {"attempts": attempts, "after": 0})
        nominal = self.look(len(evidence.per_task))
        level = self.level if last else nominal
        if level is None:
            return None
        found = failure_increase(evidence, allowed=self.allowed, level=level)
        info: Details = {"pairs": evidence.pairs, "before": evidence.before,
                         "after": evidence.after, "worse": evidence.worse,
                         "better": evidence.better, "p": found.p,
                         "test": found.test, "allowed": self.allowed, "nominal": level}
        head = f"{evidence.text()} vs the start config"
        allowance = f"allowed +{100 * self.allowed:g} pts"
        if found.shown(level):
            return self.decide(False, f"{head}: fails more often, p={found.p:.3g} < "
                                      f"{level:.3g} ({allowance}; {found.test} test)",
                               info, level)
        if incumbent is not None and incumbent.worse:
            vs = failure_increase(incumbent, allowed=self.allowed, level=level)
            if vs.shown(level):
                return self.decide(False, f"{incumbent.text()} vs the incumbent: fails more "
                                          f"often than the config it would replace, "
                                          f"p={vs.p:.3g} < {level:.3g} ({allowance}; "
                                          f"{vs.test} test)",
                                   {**info, "vs": "incumbent", "p": vs.p, "test": vs.test,
                                    "pairs": incumbent.pairs, "before": incumbent.before,
                                    "after": incumbent.after}, level)
        if not last:
            return None
        if not evidence.pairs:
            return self.decide(False, f"{head}: the candidate failed {failed} of {attempts} "
                                      "attempts and none was paired with the start's: "
                                      "nothing compared", info, level)
        return self.decide(True, f"{head}: no increase shown beyond the allowance, "
                                 f"p={found.p:.3g} ({allowance})", info, level)

    def exhaust(self) -> Verdict:
        """Data ran out with another gate open: decided at the full level on what came in."""
        evidence = self.last or FailurePairs({}, 0, 0, 0, 0, 0)
        attempts, failed = self.own
        decided = self.test(evidence, attempts=attempts, failed=failed, last=True,
                            incumbent=self.inc_pairs)
        assert decided is not None
        return decided
