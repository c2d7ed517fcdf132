"""A thread pool whose threads never hold the process at exit.

``concurrent.futures.ThreadPoolExecutor`` joins its threads when the interpreter
exits, so a sync harness that sleeps for minutes after its attempt timed out would
keep ``forge`` alive. These threads are daemons: an abandoned one dies with the
process. Threads are reused while idle and added on demand, so a thread stuck in a
timed-out call never starves the attempts after it.
"""

from __future__ import annotations

import contextvars
import functools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

__all__ = ["DaemonThreadPool"]

_STOP = object()


class DaemonThreadPool:
    def __init__(self, name: str = "forge-worker") -> None:
        self._name = name
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._count = 0

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        # In the caller's context, as asyncio.to_thread does: what the call prints
        # belongs to the attempt that made it (forge._util.printed).
        fn = functools.partial(contextvars.copy_context().run, fn)
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
            else:
                self._count += 1
                threading.Thread(target=self._work, name=f"{self._name}-{self._count}",
                                 daemon=True).start()
        self._queue.put((future, fn, args))
        return future

    def shutdown(self) -> None:
        """Let idle threads end; busy ones end after their call (or with the process)."""
        with self._lock:
            idle, self._idle = self._idle, 0
        for _ in range(idle):
            self._queue.put(_STOP)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            future, fn, args = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:  # the harness's failure is data, not our crash
                    future.set_exception(exc)
            with self._lock:
                self._idle += 1
