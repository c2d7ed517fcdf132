"""Joining a Ray cluster within a bound.

``ray.init(address=...)`` takes no timeout: at an address nothing answers it retries
for minutes (Ray's own GCS retries, a warning line every few seconds), and a
cluster that went away between a run and its resume held forge there for 11
minutes with nothing said. :func:`join_cluster` bounds the whole join, with public
APIs only:

1. a TCP connect to the GCS's port, with the bound as its timeout: nothing listening
   (refused) or nothing reachable (no answer) is known at once, before Ray prints
   anything;
2. ``ray.init`` on a daemon thread, waited for until the bound: a port that accepts
   but never answers as a GCS (another server, a head stuck starting) is given up
   when the bound is spent; the thread is abandoned (it dies with the process).

Ray's own lines from that thread below ERROR are kept off the terminal while it
joins: its retries are said once, by forge, as one line. (A side effect worth
having: ``ray.init`` off the main thread leaves forge's SIGTERM handler in place,
where on the main thread it would install its own.)
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

from forge.errors import ClusterUnreachable

__all__ = ["join_cluster"]

log = logging.getLogger(__name__)

#: The name of the thread that joins; Ray's records from it are filtered by it.
_THREAD = "forge-ray-connect"
#: A join still waiting this long is said on stderr (s): joining takes less.
_SAY_S = 5.0


def join_cluster(ray: Any, address: str, timeout_s: float, **kwargs: Any) -> None:
    """``ray.init(address=address, **kwargs)``, done within ``timeout_s`` seconds or
    :class:`ClusterUnreachable` (also for a join Ray refuses: one line, no traceback)."""
    deadline = time.monotonic() + timeout_s
    _probe(address, timeout_s)
    failed: list[BaseException] = []
    done = threading.Event()

    def join() -> None:
        try:
            ray.init(address=address, **kwargs)
        except BaseException as exc:  # handed to the waiting thread
            failed.append(exc)
        finally:
            done.set()

    quiet = _Quiet()
    # Ray's handler, and Python's last resort: ray.init may take Ray's handler away
    # before it logs (its logger does not propagate).
    handlers = [*logging.getLogger("ray").handlers,
                *([logging.lastResort] if logging.lastResort is not None else [])]
    for handler in handlers:
        handler.addFilter(quiet)
    try:
        threading.Thread(target=join, name=_THREAD, daemon=True).start()
        if not done.wait(min(_SAY_S, timeout_s)):
            if (left := deadline - time.monotonic()) >= 1:
                log.warning("ray executor: joining the Ray cluster at %s; waiting up to "
                            "%.0f s more (--ray-connect-timeout)", address, left)
            if not done.wait(max(0.0, deadline - time.monotonic())):
                raise ClusterUnreachable(address, timeout_s, "it accepted a connection "
                                         "but did not answer as a Ray cluster")
    finally:
        if done.is_set():  # else the abandoned join keeps quiet until the process ends
            for handler in handlers:
                handler.removeFilter(quiet)
    if failed:
        refusal = failed[0]
        first = (str(refusal).strip().splitlines() or [""])[0]
        raise ClusterUnreachable(address, timeout_s, f"Ray refused: {type(refusal).__name__}"
                                 + (f": {first}" if first else "")) from None


def _probe(address: str, timeout_s: float) -> None:
    """Open and close a TCP connection to the address's port, within ``timeout_s``."""
    endpoint = _endpoint(address)
    if endpoint is None:
        return
    try:
        with socket.create_connection(endpoint, timeout=timeout_s):
            pass
    except TimeoutError:
        raise ClusterUnreachable(address, timeout_s, "nothing answered") from None
    except OSError as exc:
        raise ClusterUnreachable(address, timeout_s,
                                 (exc.strerror or str(exc)).lower()) from None


class _Quiet(logging.Filter):
    """Drops Ray's records below ERROR from the joining thread."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.threadName != _THREAD or record.levelno >= logging.ERROR


def _endpoint(address: str) -> tuple[str, int] | None:
    """The host and port an address names (``host:port``, ``ray://host:port``,
    ``[::1]:port``), or None for one that names none (``auto``: Ray finds it)."""
    rest = address.split("://", 1)[-1]
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    return host.strip("[]"), int(port)
