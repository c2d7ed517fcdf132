"""Every exception forge raises on purpose.

The tree::

    ForgeError                      root: catch this to catch anything forge raises
    ├── UserError                   bad input; the CLI prints str(err) as one line, exit 2
    │   ├── OptionError             a command-line option or argument with a bad value
    │   ├── InputFileError          a file (registry, config, bench, split, result) is wrong
    │   │   ├── RegistryError       a registry file or a setting declaration
    │   │   ├── ConfigError         a config that its registry refuses
    │   │   ├── BenchError          a bench file, a split, a harness or scorer spec
    │   │   ├── ResultFileError     a saved result of another format or a damaged one
    │   │   ├── JournalError        a search run folder or journal that cannot be used
    │   │   │                       (missing, damaged, another version, a resume that diverges)
    │   │   ├── RuntimeJournalError a runtime mutator journal that cannot be read
    │   │   ├── PromoteError        a promote or rollback refused (the run or target named)
    │   │   └── ExportError         an export refused, or its output failed verification
    │   ├── IncomparableError       two results whose environments differ
    │   └── MoveError               an illegal move
    │       └── StaleMoveError      a move whose ``before`` is not the config's value
    ├── LLMError                    a model call with no usable reply (the judge and the
    │                               proposers record it as data; it ends no evaluation)
    ├── EvaluationInterrupted       Ctrl-C during an evaluation; nothing was saved
    ├── RunInterrupted              a signal ended a command once all it started stopped
    ├── ExecutorLost                the executor can run no more attempts (its Ray
    │                               instance stopped, or no live node of its cluster
    │                               can run one); the batch in flight is not kept
    │   └── ClusterUnreachable      the Ray cluster to join did not answer within its
    │                               bound; nothing ran
    ├── StartFailed                 a search stopped at once: every attempt of its start
    │                               config's first evaluation failed (the CLI's exit 1)
    └── RuntimeMutatorError         a runtime run used after it ended, or whose config did
                                    not come back equal to its original

What is *not* here: a harness that raises, hangs or returns garbage. Those are
rollout failures, recorded on the attempt as data (``AttemptResult.stop_reason``
and ``AttemptResult.error``) and never raised through the evaluation. Only when a
search has nothing to start from (``StartFailed``) does the command line say so as
an error, after the search has journaled its stop.
"""

from __future__ import annotations

import signal
from pathlib import Path

__all__ = [
    "BenchError",
    "ClusterUnreachable",
    "ConfigError",
    "EvaluationInterrupted",
    "ExecutorLost",
    "ExportError",
    "ForgeError",
    "IncomparableError",
    "InputFileError",
    "JournalError",
    "LLMError",
    "MoveError",
    "OptionError",
    "PromoteError",
    "RegistryError",
    "ResultFileError",
    "RunInterrupted",
    "RuntimeJournalError",
    "RuntimeMutatorError",
    "StaleMoveError",
    "StartFailed",
    "UserError",
]


class ForgeError(Exception):
    """Root of every exception forge raises on purpose."""


class UserError(ForgeError):
    """Bad input. ``str()`` is one line a person can act on.

    One line whatever the message quotes: a newline or another control character
    from a file or a harness (an ESC that would recolour the terminal, a bidi override)
    is shown escaped (:func:`forge._util.show.printable`), and a lone surrogate as its
    escape, so that printing never fails.
    """

    def __str__(self) -> str:
        return _one_line(super().__str__())


def _one_line(text: str) -> str:
    """``text`` on one printable line (see :class:`UserError`)."""
    # Imported here: forge._util.show pulls numpy in (through the secret masks), which a
    # module importing these classes (forge.cli, for `forge --version`) does not need.
    from forge._text import printable

    return printable(text, breaks="space")


class OptionError(UserError):
    """A command-line option or argument with a bad value. Rendered ``OPTION: MESSAGE``."""

    def __init__(self, message: str, *, option: str | None = None) -> None:
        self.message = message
        self.option = option
        super().__init__(f"{option}: {message}" if option else message)


class InputFileError(UserError):
    """An input file is wrong. The message names the file, the field and what was expected.

    Rendered as ``FILE[:LINE]: FIELD: MESSAGE``; each part is left out when unknown.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        field: str | None = None,
        line: int | None = None,
    ) -> None:
        self.message = message
        self.file = str(file) if file is not None else None
        self.field = field
        self.line = line
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.file:
            where = self.file if self.line is None else f"{self.file}:{self.line}"
        parts = [p for p in (where, self.field) if p]
        return ": ".join([*parts, self.message])


class RegistryError(InputFileError):
    """A registry file, or one of its setting declarations, is invalid."""


class ConfigError(InputFileError):
    """A config is refused by its registry: unknown key, missing key, wrong type, out of bounds."""


class BenchError(InputFileError):
    """A bench file, one of its splits, or its harness or scorer cannot be used."""


class ResultFileError(InputFileError):
    """A saved result cannot be loaded: another format version, damaged, or not a result."""


class JournalError(InputFileError):
    """A run folder or journal that cannot be used (missing, damaged, other version)."""


class RuntimeJournalError(InputFileError):
    """A runtime journal that cannot be read: missing, damaged, another format or registry."""


class PromoteError(InputFileError):
    """``forge promote`` or ``forge rollback`` refused: the run, its journal or the target
    file (named in ``file``) does not allow it. Nothing was written."""


class ExportError(InputFileError):
    """An export refused (a result, a bench or an output that does not fit), or an
    output that did not read back as written."""


class IncomparableError(UserError):
    """Two results were produced in different environments and cannot be compared."""


class MoveError(UserError):
    """A move that cannot be applied: unknown setting, out of bounds, or not a single change."""


class StaleMoveError(MoveError):
    """A move's ``before`` is not the config's current value: it was made for another config."""


class LLMError(ForgeError):
    """A model call that produced no usable reply. ``str()`` is one line; ``retries`` says
    how many retries were spent before giving up. Callers record it as data (an unscored
    attempt, a ``proposal_invalid`` record): it never ends an evaluation or a search."""

    def __init__(self, reason: str, *, retries: int = 0) -> None:
        super().__init__(reason if not retries else f"{reason} (after {retries} retries)")
        self.reason = reason
        self.retries = retries


class RuntimeMutatorError(ForgeError):
    """A runtime run was signalled after it ended (a harness bug), or its config did not
    come back equal to its original (a broken invariant of the mutator)."""


class ExecutorLost(ForgeError):
    """The executor can run no more attempts (the Ray instance under it stopped, or no
    live node of its cluster can run one).

    Unlike a worker that dies under an attempt (that attempt is ``lost``, recorded as
    data), nothing the rest of the run would do can succeed: it stops, without keeping
    the batch in flight, so that a resume runs that batch again.
    """


class ClusterUnreachable(ExecutorLost):
    """The Ray cluster at ``address`` could not be joined within ``timeout_s`` seconds
    (nothing listens there, it did not answer, or Ray refused it: ``reason``). Raised
    before the executor ran anything; ``str()`` is one line naming the address and the
    options that change it. The command line exits 2 when the address was typed on it
    (bad input), 1 when it came from a bench or a run's journal (the cluster is gone)."""

    def __init__(self, address: str, timeout_s: float, reason: str) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self.reason = reason
        super().__init__(f"cannot join the Ray cluster at {address} within {timeout_s:g} s: "
                         f"{reason}; give its address with --ray-address, or more time with "
                         "--ray-connect-timeout")

    def __str__(self) -> str:
        return _one_line(super().__str__())


class StartFailed(ForgeError):
    """A search stopped before its first step: every attempt of its start config's first
    evaluation failed (the harness raised, timed out, or its output could not be
    scored), so there is no score to improve on. The search has journaled the stop
    (reason ``start_failed``) and spent nothing more. ``str()`` is one line naming the
    first failure: its task, how it stopped, its message."""

    def __init__(self, run_id: str, *, task_id: str, attempt: int, stop: str,
                 error: str | None, unscored: int) -> None:
        self.run_id = run_id
        self.task_id = task_id
        self.stop = stop
        self.error = error
        super().__init__(
            f"search {run_id} stopped: all {unscored} attempts of the start config failed; "
            f"the first, task {task_id} attempt {attempt}: {stop}"
            + (f": {error}" if error else ""))

    def __str__(self) -> str:
        return _one_line(super().__str__())


class EvaluationInterrupted(ForgeError):
    """The user interrupted an evaluation (Ctrl-C). Nothing half-written is left behind.

    ``partial`` holds what had finished (an ``EvalResult`` whose in-flight attempts
    are ``cancelled``), for a caller that wants to show it; it is never saved.
    """

    def __init__(self, partial: object = None) -> None:
        self.partial = partial
        super().__init__("interrupted")


class RunInterrupted(ForgeError):
    """What a command reports once a signal ended it and everything it started is
    stopped: ``str()`` is the exit line, ``exit_status`` 128 + the signal's number."""

    def __init__(self, signum: int, resume: str | None = None) -> None:
        self.signum = signum
        self.exit_status = 128 + signum
        then = f"resume with: {resume}" if resume else "nothing was saved"
        super().__init__(f"interrupted by {signal.Signals(signum).name}; {then}")
