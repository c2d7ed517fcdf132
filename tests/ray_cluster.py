"""A Ray cluster of several nodes on this machine, on loopback, driven over stdin.

    python ray_cluster.py HEAD_CPUS TEMP_DIR

Starts a head node with HEAD_CPUS CPUs and prints one JSON line for it (``node_id``,
``raylet`` pid, the GCS ``address``); each line ``add CPUS`` on stdin adds a worker
node of CPUS CPUs (each node is a raylet of its own, as on another machine) and
prints its line. At EOF the cluster is shut down, and whatever it left running
(this process is a child subreaper, so every process the nodes started stays its
descendant) is killed by pid before this process exits.

Why not ``ray start``: Ray replaces 127.0.0.1 by the machine's routable address
unless ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, and with that set ``ray start
--address`` refuses to add a worker node. Ray's own ``Cluster`` (what its tests use
to simulate several machines) starts the same processes ``ray start`` does.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import sys
import time
from typing import Any

from reaper import PR_SET_CHILD_SUBREAPER, descendants, reap

# Before Ray is imported: every address stays 127.0.0.1, nothing goes under /tmp/ray
# (where another Ray instance's ``ray.init()`` would look for a cluster to join).
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ["RAY_TMPDIR"] = sys.argv[2]
TEMP_DIR = os.path.join(sys.argv[2], "ray")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def show(node: Any) -> None:
    print(json.dumps({"node_id": node.node_id, "address": node.gcs_address,
                      "raylet": node.all_processes["raylet"][0].process.pid}), flush=True)


def main() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    from ray.cluster_utils import Cluster

    os.makedirs(TEMP_DIR, exist_ok=True)
    cluster = None
    try:
        cluster = Cluster(initialize_head=True, shutdown_at_exit=False, head_node_args={
            "num_cpus": int(sys.argv[1]), "node_ip_address": "127.0.0.1", "temp_dir": TEMP_DIR,
            "include_dashboard": False, "dashboard_port": free_port(),
            "gcs_server_port": free_port(),
            "ray_client_server_port": free_port(), "dashboard_agent_listen_port": free_port()})
        show(cluster.head_node)
        for line in sys.stdin:
            command, *args = line.split()
            if command == "add":
                show(cluster.add_node(num_cpus=int(args[0]), node_ip_address="127.0.0.1",
                                      temp_dir=TEMP_DIR, dashboard_agent_listen_port=free_port()))
    finally:
        with contextlib.suppress(Exception):  # a node may be half dead; the kill below ends it
            if cluster is not None:
                cluster.shutdown()
        me = os.getpid()
        deadline = time.monotonic() + 5
        while (left := descendants(me)) and time.monotonic() < deadline:
            reap()
            time.sleep(0.1)
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        reap()
    return 0


if __name__ == "__main__":
    sys.exit(main())
