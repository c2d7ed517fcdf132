"""What the search accepts from a proposer's ``propose``, and a refusal for the rest.

A proposer is a plug-in, and a custom one can fail as a harness can: raise, return
something that is not a list of proposals, or offer a value no journal can hold (NaN
or infinity: JSON has neither; an integer of 5,000 digits, which Python will not
print). Each is refused here with its reason, the search
journals the refusal as a ``proposal_invalid`` record and goes on with the moves
it has (the step's sweep), as it does for an LLM's unusable reply. Legality against
the registry (bounds, choices, the incumbent's current value) is not checked here:
the step tries to apply each move and journals an illegal one as a rejected candidate.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from forge._util.bounds import MAX_INT_DIGITS
from forge.proposers.base import Proposal, Proposer, SearchView
from forge.secrets.masking import clip

__all__ = ["offered"]

log = logging.getLogger(__name__)

#: How much of an exception's text or of a bad value a refusal keeps.
REASON_CHARS = 240
_HUGE = 10 ** MAX_INT_DIGITS


def offered(proposer: Proposer, view: SearchView, n: int
            ) -> tuple[list[Proposal], list[dict[str, Any]]]:
    """``proposer.propose(view, n)``: the proposals the search can use, and one refusal
    (``category``, ``reason``) for each thing it cannot."""
    try:
        out: Any = proposer.propose(view, n)
    except Exception as exc:  # a proposer's bug is data, as a harness's is
        log.warning("proposer %s raised at step %d: %r", proposer.name, view.step, exc)
        return [], [{"category": "proposer_error", "reason": clip(
            f"propose raised {type(exc).__name__}: {exc}", REASON_CHARS)}]
    if not isinstance(out, list | tuple):
        return [], [{"category": "bad_shape", "reason": clip(
            f"propose returned {type(out).__name__}, not a list of proposals", REASON_CHARS)}]
    kept: list[Proposal] = []
    refused: list[dict[str, Any]] = []
    for item in out:
        if not isinstance(item, Proposal):
            refused.append({"category": "bad_shape", "reason": clip(
                f"propose returned a {type(item).__name__}, not a Proposal", REASON_CHARS)})
            continue
        why = _unwritable(item)
        if why is not None:
            refused.append({"category": "illegal_value", "reason": clip(why, REASON_CHARS)})
            continue
        kept.append(item)
    return kept, refused


def _unwritable(proposal: Proposal) -> str | None:
    """Why a journal line could not hold this move, if it could not: NaN or infinity,
    or an integer too long to print (as the files forge reads refuse it)."""
    move = proposal.move
    for value in (move.before, move.after):
        if isinstance(value, float) and not math.isfinite(value):
            return f"{move.target}: {value!r} is not a finite number"
        if isinstance(value, int) and abs(value) >= _HUGE:
            return f"{move.target}: an integer of more than {MAX_INT_DIGITS} digits"
    return None
