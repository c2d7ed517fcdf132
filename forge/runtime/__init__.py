"""The runtime mutator: reacts to failure signals inside one live run, with narrow authority.

The offline search finds the next default config; the runtime mutator answers a
failure *during* a run with one move of one setting, as the registry's ``runtime``
section allows (``allow``, ``max_moves_per_run``, ``rules``). Its default mode is
``off``; ``observe`` journals the moves it would make and changes nothing; ``act``
applies them to the run's own working copy and restores the original at the end.

- :mod:`forge.runtime._mutator`: :class:`RuntimeMutator`, :class:`RuntimeRun`,
  :class:`RuntimeDecision` (modes, rules, refusals, restore);
- :mod:`forge.runtime._journal`: the append-only JSONL journal and its reader;
- :mod:`forge.runtime._report`: ``forge runtime report`` counts, and the moves
  ``forge search --from-runtime`` puts first.
"""

from __future__ import annotations

from forge.runtime._journal import (
    RUNTIME_FORMAT_VERSION,
    RuntimeEndRecord,
    RuntimeJournal,
    RuntimeJournalError,
    RuntimeRecord,
    RuntimeSignalRecord,
    read_runtime_journal,
)
from forge.runtime._mutator import (
    JOURNAL_ENV,
    MODE_ENV,
    Mode,
    Outcome,
    RuntimeDecision,
    RuntimeMutator,
    RuntimeMutatorError,
    RuntimeRun,
    parse_mode,
    step_value,
)
from forge.runtime._report import (
    RuleStats,
    RuntimeReport,
    runtime_first_moves,
    summarize_runtime_journal,
)

__all__ = [
    "JOURNAL_ENV",
    "MODE_ENV",
    "RUNTIME_FORMAT_VERSION",
    "Mode",
    "Outcome",
    "RuleStats",
    "RuntimeDecision",
    "RuntimeEndRecord",
    "RuntimeJournal",
    "RuntimeJournalError",
    "RuntimeMutator",
    "RuntimeMutatorError",
    "RuntimeRecord",
    "RuntimeReport",
    "RuntimeRun",
    "RuntimeSignalRecord",
    "parse_mode",
    "read_runtime_journal",
    "runtime_first_moves",
    "step_value",
    "summarize_runtime_journal",
]
