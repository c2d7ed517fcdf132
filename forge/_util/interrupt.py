"""Ending on SIGINT and SIGTERM: what forge started is stopped, and the exit says so.

Two ways a signal ends a run, by where the main thread is when it comes:

- **during a batch of attempts** (:func:`cancelling`), the event loop takes the
  signal and cancels the engine: attempts in flight end ``cancelled`` and the batch
  returns; an evaluation then raises :class:`~forge.errors.EvaluationInterrupted`, a
  session's ``attempts`` raises :class:`Interrupted` (a search never stores a
  cancelled attempt);
- **anywhere else**, the command line's handler (:func:`handling`) raises
  :class:`Interrupted` where the main thread is, as Ctrl-C raises KeyboardInterrupt
  (a search can stop at any point: it resumes from its journal as after ``kill -9``).

Either way the stack unwinds through the session, which closes the harness (every
command child's process group gets SIGTERM, then SIGKILL after its grace, and what
left the group is ended too: :mod:`forge._util.descendants`) and the executor
(workers killed, and what they left running ended), and the process exits normally,
so that the last resorts registered with :mod:`atexit` run too. A second signal while that cleanup
runs does not cut it short; it only cuts the grace of command children (SIGKILL now).

The command line turns both signals into this; a library caller keeps Python's
defaults: SIGINT cancels an evaluation (as it did), SIGTERM is left alone.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Coroutine, Iterator
from types import FrameType
from typing import Any, TypeVar

__all__ = ["Interrupted", "cancelling", "handling", "received"]

T = TypeVar("T")

#: The signals the command line ends a run on.
SIGNALS = (signal.SIGINT, signal.SIGTERM)

#: Signals received since :func:`handling` began (or since the process started).
_received: list[int] = []
#: The signals :func:`handling` has taken over (the batch handlers follow it).
_handled: set[int] = set()


class Interrupted(KeyboardInterrupt):
    """A signal ended the run. A KeyboardInterrupt, so that asyncio and every
    ``except Exception`` let it through, exactly as they let Ctrl-C through."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def received() -> int | None:
    """The first signal that interrupted this process's run, if any."""
    return _received[0] if _received else None


def _note(signum: int) -> None:
    _received.append(signum)


@contextlib.contextmanager
def handling(on_second: Callable[[], None] | None = None) -> Iterator[None]:
    """For the command line: SIGINT and SIGTERM raise :class:`Interrupted` in the main
    thread; a later one calls ``on_second`` instead (the cleanup is under way).
    Outside the main thread this does nothing; the previous handlers come back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        first = not _received
        _note(signum)
        if first:
            raise Interrupted(signum)
        if on_second is not None:
            on_second()

    _received.clear()
    previous = {s: signal.signal(s, handler) for s in SIGNALS}
    _handled.update(SIGNALS)
    try:
        yield
    finally:
        _handled.difference_update(SIGNALS)
        for s, old in previous.items():
            signal.signal(s, old)


async def cancelling(cancel: Callable[[], None], run: Coroutine[Any, Any, T]) -> T:
    """``run``, with the first SIGINT (and SIGTERM under :func:`handling`) calling
    ``cancel`` on the event loop instead of interrupting it anywhere; the next one
    goes to the handler there was before. In the main thread only."""
    import asyncio  # here: the command line imports this module before anything else

    if threading.current_thread() is not threading.main_thread():
        return await run
    loop = asyncio.get_running_loop()
    signals = sorted({signal.SIGINT, *_handled})
    # None: a handler not set from Python; the default is the nearest to it.
    previous = {s: signal.getsignal(s) or signal.SIG_DFL for s in signals}
    installed = set(signals)

    def restore() -> None:
        for s in list(installed):
            loop.remove_signal_handler(s)  # it resets the handler, so put the old one back
            signal.signal(s, previous[s])
            installed.discard(s)

    def on_signal(signum: int) -> None:
        _note(signum)
        restore()
        cancel()

    for s in signals:
        loop.add_signal_handler(s, on_signal, s)
    try:
        return await run
    finally:
        restore()
