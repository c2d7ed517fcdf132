"""The search: one move at a time, selected on few tasks, proven on the rest.

Read it in this order. :mod:`~forge.search.loop` is the loop (:class:`Search`, an
ask/tell object): each step it takes proposals (:mod:`~forge.search.proposals`), has each
*screened* (:mod:`~forge.search.candidates`, :mod:`~forge.search.screening`, a race over
the dev chunks, :mod:`~forge.search.racing`) and the best that passed *confirmed*
(:mod:`~forge.search.confirm`: every gate a group-sequential test on data its selection
never read); :mod:`~forge.search.ending` reports the start against the final config and
opens the test split. Around it: :mod:`~forge.search.options` (how a search runs),
:mod:`~forge.search.budget` (what it may still spend),
:mod:`~forge.search.outcome` (what it returns), :mod:`~forge.search.attempt_cache`
(attempts from the store or run now, each counted once toward the budget),
:mod:`~forge.search.deferral` (a candidate the budget cannot prove waits),
:mod:`~forge.search.memory` (what each move did at earlier incumbents),
:mod:`~forge.search.places` (which moves count as tried) and
:mod:`~forge.search.progress` (what a live view shows).
"""

from __future__ import annotations

from forge.search.loop import START_CHECK_ATTEMPTS, Search
from forge.search.options import SearchOptions
from forge.search.outcome import SearchOutcome

__all__ = ["START_CHECK_ATTEMPTS", "Search", "SearchOptions", "SearchOutcome"]
