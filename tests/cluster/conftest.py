"""Cluster fixtures: real nats-servers (``cluster.natsd``) and real timerstore nodes
(``python -m timerstore serve`` processes, ``cluster.node_process``), each on free loopback
ports with fresh directories, every one stopped in a finally. A node's output goes to a
file whose tail is printed at teardown (pytest shows it when the test failed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from cluster.natsd import NatsCluster, free_port
from cluster.node_process import NodeProcess

ROOT = Path(__file__).resolve().parents[2]
TEST_LEASE_MS = 2_000  # takeovers within seconds; the default (5 s) is measured in bench/
StartNodes = Callable[..., list[NodeProcess]]


@pytest.fixture(scope="module")
def nats_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsCluster]:
    """Three nats-servers shared by a module's tests (which must not kill them)."""
    servers = NatsCluster(tmp_path_factory.mktemp("nats"), nodes=3)
    try:
        yield servers
    finally:
        servers.stop()


@pytest.fixture
def fresh_nats(tmp_path: Path) -> Iterator[NatsCluster]:
    """Three nats-servers of one test's own (it may kill, pause and restart them)."""
    servers = NatsCluster(tmp_path / "nats", nodes=3)
    try:
        yield servers
    finally:
        servers.stop()


def node_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings every test node gets on top of its own; this checkout first on the
    path (a venv's editable install may point at another)."""
    env = {
        "PYTHONPATH": str(ROOT),
        "TIMERSTORE_CLUSTER__LEASE_MS": str(TEST_LEASE_MS),
        "TIMERSTORE_ENGINE__TICK_MS": "10",
        "TIMERSTORE_LOG_LEVEL": "info",
    }
    env.update(extra or {})
    return env


class NodeGroup:
    """Nodes n0, n1, ... under one directory, each on a free port; ``stop_all`` stops
    every one ever started (SIGTERM, SIGKILL if it hangs) and prints each log's tail."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.nodes: list[NodeProcess] = []

    def start(
        self,
        servers: NatsCluster,
        count: int = 3,
        env: Mapping[str, str] | None = None,
        ready: bool = True,
    ) -> list[NodeProcess]:
        started = []
        for _ in range(count):
            index = len(self.nodes)
            node = NodeProcess(
                f"n{index}", free_port(), self.root / f"n{index}", servers.urls, node_env(env)
            )
            self.nodes.append(node)
            started.append(node)
            node.start()
        if ready:
            for node in started:
                node.wait_ready()
        return started

    def stop_all(self) -> None:
        for node in self.nodes:
            node.request_stop()
        for node in self.nodes:
            node.wait_stopped()
            print(f"--- {node.node_id} ({node.log_path}):\n{node.log_tail(60)}")


@pytest.fixture
def start_nodes(tmp_path: Path) -> Iterator[StartNodes]:
    """``start_nodes(servers, count=3, env=None, ready=True)``: nodes n<i> (numbered on
    from the ones this test started before), started, and by default ready."""
    group = NodeGroup(tmp_path)
    try:
        yield group.start
    finally:
        group.stop_all()


@pytest.fixture(scope="module")
def cluster_nodes(
    nats_cluster: NatsCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[NodeProcess]]:
    """Three ready nodes on ``nats_cluster``, shared by a module's tests."""
    group = NodeGroup(tmp_path_factory.mktemp("nodes"))
    try:
        yield group.start(nats_cluster)
    finally:
        group.stop_all()
