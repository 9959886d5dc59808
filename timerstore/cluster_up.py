"""``timerstore cluster up``: a whole cluster on loopback, for trying it out and for demos.

Starts ``--nodes`` nats-servers (JetStream, routes between them) and as many timerstore
nodes ``n0``, ``n1``, ... (``timerstore serve`` processes configured by
``TIMERSTORE_CLUSTER__*``), each under ``--data-root``, waits until every node answers
``/readyz``, prints their URLs, and runs until Ctrl-C or SIGTERM; then it stops the nodes
(gracefully: each hands its partitions back) and the nats-servers, always, also when the
start fails halfway.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from cluster.natsd import NatsCluster, free_port
from cluster.node_process import NodeProcess
from storage.errors import InvalidInputError

WATCH_S = 0.5  # how often a running cluster is checked for a node that exited


class StopRequested(Exception):
    """SIGINT or SIGTERM arrived: stop everything."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "cluster", help="run a local cluster", description="Run a cluster on this machine."
    )
    commands = parser.add_subparsers(dest="cluster_command", required=True)
    up = commands.add_parser(
        "up",
        help="start nats-servers and timerstore nodes on loopback; Ctrl-C stops them all",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    up.add_argument("--nodes", type=int, default=3, help="nodes and nats-servers (default 3)")
    up.add_argument(
        "--data-root",
        default="./cluster-data",
        help="one directory for every node and nats-server (default ./cluster-data)",
    )
    up.add_argument(
        "--base-port",
        type=int,
        help="HTTP port of n0, the next ones after it (default: free ports)",
    )
    up.set_defaults(handler=run_up)


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise StopRequested(signal.Signals(signum).name)


def _ports(count: int, base_port: int | None) -> list[int]:
    if base_port is None:
        return [free_port() for _ in range(count)]
    if not 1 <= base_port <= 65535 - count:
        raise InvalidInputError(f"--base-port must be 1 to {65535 - count}", field="base_port")
    return [base_port + i for i in range(count)]


def run_up(args: argparse.Namespace) -> int:
    if not 1 <= args.nodes <= 9:
        raise InvalidInputError("--nodes must be 1 to 9", field="nodes")
    root = Path(args.data_root).resolve()
    ports = _ports(args.nodes, args.base_port)
    previous = {s: signal.signal(s, _raise_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    servers: NatsCluster | None = None
    nodes: list[NodeProcess] = []
    try:
        servers = NatsCluster(root / "nats", nodes=args.nodes)
        print(f"nats: {' '.join(servers.urls)}", flush=True)
        for index, port in enumerate(ports):
            nodes.append(NodeProcess(f"n{index}", port, root / f"n{index}", servers.urls))
            nodes[-1].start()
        for node in nodes:
            node.wait_ready()
            ready = f"{node.node_id} {node.url} ready (pid {node.pid}, log {node.log_path})"
            print(ready, flush=True)
        print(f"cluster up: {len(nodes)} nodes; Ctrl-C stops them all", flush=True)
        _watch(nodes)
    except StopRequested as stop:
        print(f"{stop}: stopping the nodes, then the nats-servers", flush=True)
    finally:
        for signum in previous:  # a second Ctrl-C must not cut the stop short
            signal.signal(signum, signal.SIG_IGN)
        _stop_all(nodes, servers)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0


def _watch(nodes: list[NodeProcess]) -> None:
    """Until a signal: say once of each node that it exited (the others go on)."""
    reported: set[str] = set()
    while True:
        time.sleep(WATCH_S)
        for node in nodes:
            if node.pid is None and node.node_id not in reported:
                reported.add(node.node_id)
                print(f"{node.node_id} exited; see {node.log_path}", file=sys.stderr, flush=True)


def _stop_all(nodes: list[NodeProcess], servers: NatsCluster | None) -> None:
    for node in nodes:
        node.request_stop()
    for node in nodes:
        node.wait_stopped()
    if servers is not None:
        servers.stop()
    print("cluster stopped", flush=True)
