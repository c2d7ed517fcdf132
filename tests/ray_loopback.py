"""A real Ray cluster on loopback for the tests, and the environment to join it.

:class:`Cluster` runs ``tests/ray_cluster.py`` (a head, then a worker node per
``add``); the ``ray_cluster`` fixture starts clusters that end with the test, every
process of them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from reaper import descendants

TESTS = Path(__file__).parent


def loopback() -> dict[str, str]:
    """The environment of the cluster and of forge: Ray keeps 127.0.0.1 as the address
    only with RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 (see tests/ray_cluster.py), and both
    sides must agree on token authentication (a local ``ray.init`` earlier in this
    process turns it on in ``os.environ``): off, as on loopback nobody else joins."""
    return {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled"}


class Cluster:
    """``tests/ray_cluster.py`` running: the head's line, ``add`` for a worker node."""

    def __init__(self, head_cpus: int, temp_dir: str) -> None:
        self.proc = subprocess.Popen([sys.executable, str(TESTS / "ray_cluster.py"),
                                      str(head_cpus), temp_dir], cwd=TESTS, env=loopback(),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.head = self._line()
        self.address: str = self.head["address"]
        assert self.address.startswith("127.0.0.1:")

    def _line(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the cluster did not start"
        found: dict[str, Any] = json.loads(line)
        return found

    def add(self, cpus: int) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"add {cpus}\n")
        self.proc.stdin.flush()
        return self._line()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:  # its own cleanup stuck: end what it started
            left = descendants(self.proc.pid)
            self.proc.kill()
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.proc.wait()


@pytest.fixture
def ray_cluster() -> Iterator[Callable[[int], Cluster]]:
    """Start a cluster (head CPUs given); every process of it ends with the test."""
    # A short root: Ray's socket paths under it must fit in 107 bytes.
    temp_dir = tempfile.mkdtemp(prefix="fr", dir="/tmp")
    started: list[Cluster] = []

    def start(head_cpus: int) -> Cluster:
        started.append(Cluster(head_cpus, temp_dir))
        return started[-1]

    try:
        yield start
    finally:
        for cluster in started:
            cluster.close()
        shutil.rmtree(temp_dir, ignore_errors=True)
