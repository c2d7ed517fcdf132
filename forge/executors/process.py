"""The ``process`` executor: a pool of worker processes for CPU-bound harnesses.

Each worker is a spawned process that imports the harness once, then runs chunks
of attempts one after another, sending each outcome back as it ends. Why our own
pool rather than ``ProcessPoolExecutor``: a stuck call must be killable without
losing the other workers' work, and a dead worker must cost only its own attempt.

- The parent enforces the timeout: an attempt whose result does not arrive within
  its timeout (counted from the previous result of the same worker) is recorded
  ``timeout``; that worker is killed and replaced, and the rest of its chunk is
  queued again.
- A worker that dies (``os._exit``, a segfault, the OOM killer) leaves its current
  attempt ``lost`` with the exit code; the worker is replaced, the rest of the
  chunk requeued, and the evaluation goes on.
- A worker's descriptor 1 is its stderr: what the harness prints through
  ``sys.stdout`` during an attempt comes back with the attempt, and nothing a worker
  writes reaches forge's stdout.
- No process is left behind (Linux, :mod:`forge._util.descendants`): a worker is a
  child subreaper, and what an attempt started and left running, even in a session
  of its own, is ended (SIGTERM, SIGKILL after a second) and reaped before its
  outcome is sent; what the harness started when it was imported lives as long as
  the worker. A worker that is killed or stops leaves its processes to forge, itself
  a subreaper, which ends them by the tag their environment carries.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection
from typing import Any, Self

from forge._util.descendants import (
    ENDING_SLACK_S,
    TAG_VARIABLE,
    Lineage,
    become_subreaper,
    children_now,
    end_lineage,
    end_new_descendants,
    new_tag,
)
from forge.executors.base import EXECUTORS, ExecutorOptions
from forge.executors.remote import (
    ChunkQueue,
    OnOutcome,
    RemoteExecutor,
    WorkItem,
    WorkOutcome,
    load_harness,
    run_item,
)

__all__ = ["ProcessExecutor"]

#: How often a waiting dispatcher checks for cancellation (s).
_POLL_S = 0.05
#: How long a new worker may take to import the harness (s): a module that blocks at
#: import (a server it waits for, a lock) must not hold the evaluation forever. The
#: Ray executor gives its actors the same time to start.
READY_TIMEOUT_S = 60.0
#: Slack on each timeout for the round trip through the pipe (s).
_IPC_SLACK_S = 0.05
#: How long idle workers get to end on their own at close (s), and what an attempt
#: left running between SIGTERM and SIGKILL.
_STOP_S = 1.0


def _worker_main(conn: Connection, target: str, base_dir: str, tag: str) -> None:
    """A worker: import the harness once, then run the chunks it is sent until None."""
    # What the harness starts carries the worker's tag, and its orphans come back here.
    os.environ[TAG_VARIABLE] = tag
    become_subreaper()
    # Ctrl-C at a terminal reaches the whole process group; the parent stops the
    # workers itself, and a KeyboardInterrupt here would only print a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    # The worker's stdout is never forge's: what the harness prints through sys.stdout
    # comes back with its attempt (run_item), and what it writes below it (os.write,
    # C code, its children), or when it is imported, goes to stderr.
    with contextlib.suppress(OSError):
        os.dup2(2, 1)
    try:
        fn = load_harness(target, base_dir)
    except BaseException as exc:
        conn.send(("failed", f"{type(exc).__name__}: {exc}"))
        return
    imported = children_now()  # started at import: they live as long as the worker
    conn.send(("ready", None))
    while True:
        chunk = conn.recv()
        if chunk is None:
            return
        for item in chunk:
            outcome = run_item(fn, item)
            # Before the outcome: a leftover that ignores SIGTERM is charged to this
            # attempt's time, not to the next one's.
            end_new_descendants(imported, _STOP_S)
            conn.send(outcome)


class _Worker:
    def __init__(self, target: str, base_dir: str) -> None:
        ctx = multiprocessing.get_context("spawn")  # fork is unsafe with threads running
        self.conn, child = ctx.Pipe()
        become_subreaper()  # a killed worker's processes come back to forge (Linux)
        self.tag = new_tag()
        self.proc = ctx.Process(target=_worker_main, args=(child, target, base_dir, self.tag),
                                daemon=True, name="forge-worker")
        # Blocked from the fork to _worker_main (a blocked signal stays blocked across
        # exec): a Ctrl-C while the worker imports must not show a traceback either.
        # The resource tracker first: starting it unblocks SIGINT in this thread.
        resource_tracker.ensure_running()
        unblocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            self.proc.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
        child.close()
        self.failed: str | None = None
        self._ready = False
        self.ending: threading.Thread | None = None  # ending what it left running

    def wait_ready(self, cancelled: Callable[[], bool]) -> bool:
        """True when the harness imported; False if it failed (``failed`` says why),
        which includes not importing it within :data:`READY_TIMEOUT_S`."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self._ready and self.failed is None:
            if cancelled():
                return False
            if time.monotonic() > deadline:
                self.failed = (f"worker did not load the harness within "
                               f"{READY_TIMEOUT_S:g} s")
                self.proc.kill()
                break
            try:
                if not self.conn.poll(_POLL_S):
                    if not self.proc.is_alive() and not self.conn.poll(0):
                        self.failed = ("worker process died at start "
                                       f"(exit code {self.proc.exitcode})")
                    continue
                kind, why = self.conn.recv()
            except (EOFError, OSError):
                self.failed = f"worker process died at start (exit code {self.proc.exitcode})"
                break
            if kind == "ready":
                self._ready = True
            else:
                self.failed = f"worker cannot load the harness: {why}"
        return self._ready

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join(5)
        # A cancel and the worker's own lane may both kill it; the second close of
        # the pipe finds it closed already.
        with contextlib.suppress(OSError):
            self.conn.close()
        self._end_lineage()

    def _end_lineage(self) -> None:
        """End what the worker left running: killed mid-attempt, or started at import."""
        if self.proc.pid is not None and self.ending is None:
            self.ending = end_lineage(Lineage(self.tag, self.proc.pid), _STOP_S)

    def ask_to_stop(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.send(None)

    def stop(self, until: float) -> None:
        """Wait until the monotonic time ``until`` for the worker to end, then kill it."""
        self.proc.join(max(0.0, until - time.monotonic()))
        if self.proc.is_alive():
            self.kill()
        else:
            with contextlib.suppress(OSError):
                self.conn.close()
            self._end_lineage()


@EXECUTORS.register("process")
class ProcessExecutor(RemoteExecutor):
    """A process per core (or ``workers``), started on first use, kept between batches."""

    name = "process"

    def __init__(self, target: str, base_dir: str, *, workers: int | None = None) -> None:
        self.target = target
        self.base_dir = base_dir
        self.workers = workers or os.cpu_count() or 1
        if self.workers < 1:
            raise ValueError("workers must be at least 1")
        self._pool: list[_Worker | None] = [None] * self.workers
        self.replaced = 0  # workers killed or found dead and started again

    @classmethod
    def for_target(cls, target: str, base_dir: str, options: ExecutorOptions) -> Self:
        return cls(target, base_dir, workers=options.workers)

    def run(self, items: Sequence[WorkItem], on_outcome: OnOutcome,
            cancelled: Callable[[], bool]) -> None:
        if not items:
            return
        queue = ChunkQueue(items, self.workers, cancelled)
        lanes = [threading.Thread(target=self._lane,
                                  args=(slot, queue.take, queue.put_back, on_outcome, cancelled),
                                  daemon=True, name=f"forge-process-lane-{slot}")
                 for slot in range(min(self.workers, len(queue)))]
        for t in lanes:
            t.start()
        for t in lanes:
            t.join()

    def _worker(self, slot: int, cancelled: Callable[[], bool]) -> _Worker:
        w = self._pool[slot]
        if w is None:
            w = self._pool[slot] = _Worker(self.target, self.base_dir)
        w.wait_ready(cancelled)
        return w

    def _discard(self, slot: int) -> None:
        w = self._pool[slot]
        if w is not None:
            w.kill()
        self._pool[slot] = None
        self.replaced += 1

    def _lane(self, slot: int, take: Callable[[], list[WorkItem] | None],
              requeue: Callable[[list[WorkItem]], None], on_outcome: OnOutcome,
              cancelled: Callable[[], bool]) -> None:
        while (chunk := take()) is not None:
            try:
                w = self._worker(slot, cancelled)
            except Exception as exc:
                for item in chunk:
                    on_outcome(WorkOutcome(item.index, "lost", None,
                                           f"cannot start a worker: {type(exc).__name__}: {exc}"))
                continue
            if w.failed is not None:
                # Importing the harness fails the same way every time: report it on
                # each item rather than restarting workers forever.
                for item in chunk:
                    on_outcome(WorkOutcome(item.index, "lost", None, w.failed))
                continue
            if cancelled():
                return
            w.conn.send(chunk)
            self._collect(slot, w, chunk, requeue, on_outcome, cancelled)

    def _collect(self, slot: int, w: _Worker, chunk: list[WorkItem],
                 requeue: Callable[[list[WorkItem]], None], on_outcome: OnOutcome,
                 cancelled: Callable[[], bool]) -> None:
        """Receive the chunk's outcomes in order, enforcing each item's timeout."""
        for pos, item in enumerate(chunk):
            started = time.monotonic()
            deadline = started + item.timeout_s + _IPC_SLACK_S
            while True:
                try:
                    if w.conn.poll(min(_POLL_S, max(0.0, deadline - time.monotonic()))):
                        outcome: Any = w.conn.recv()
                        break
                except (EOFError, OSError):
                    w.proc.join(1)
                    on_outcome(WorkOutcome(
                        item.index, "lost", None,
                        f"worker process died (exit code {w.proc.exitcode})",
                        time.monotonic() - started))
                    self._discard(slot)
                    requeue(chunk[pos + 1:])
                    return
                if cancelled():  # the engine settles the items in flight as cancelled
                    self._discard(slot)
                    return
                if time.monotonic() >= deadline:
                    on_outcome(WorkOutcome(item.index, "timeout", None,
                                           f"no result within {item.timeout_s:g} s",
                                           item.timeout_s))
                    self._discard(slot)  # the only way to stop a stuck sync call
                    requeue(chunk[pos + 1:])
                    return
            on_outcome(outcome)

    def close(self) -> None:
        """Stop every worker, all within one second (a busy one is killed); the executor
        can start new ones if used again."""
        workers = [w for w in self._pool if w is not None]
        self._pool = [None] * self.workers
        for w in workers:
            w.ask_to_stop()
        until = time.monotonic() + _STOP_S
        for w in workers:
            w.stop(until)
        until = time.monotonic() + _STOP_S + ENDING_SLACK_S
        for w in workers:
            if w.ending is not None:
                w.ending.join(max(0.0, until - time.monotonic()))
