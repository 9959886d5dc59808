"""nats-server with JetStream on loopback for the JetStream peer: one node, or three (R3).

The servers themselves are ``cluster.natsd.NatsCluster``, the launcher the cluster's tests
and ``timerstore cluster up`` use; this adapter gives the peer what it needs on top: the
whole set killed (SIGKILL to every server, the recovery scenario) and started again on
the same ports and store dirs, and the servers' memory.
"""

from __future__ import annotations

import os

import psutil

from cluster.natsd import NatsCluster


class NatsServers:
    """``nodes`` nats-servers under ``workdir``; nothing runs until ``start``."""

    def __init__(self, workdir: str, nodes: int) -> None:
        self.root_dir = os.path.join(workdir, "nats")
        self.nodes = nodes
        self._cluster: NatsCluster | None = None

    @property
    def urls(self) -> list[str]:
        return self._running().urls

    def _running(self) -> NatsCluster:
        if self._cluster is None:
            raise RuntimeError("the nats-servers are not started")
        return self._cluster

    def start(self) -> None:
        """Start every server (again after ``kill``, on the same ports and store dirs)."""
        if self._cluster is None:
            self._cluster = NatsCluster(self.root_dir, self.nodes)
        else:
            self._cluster.restart_stopped()

    def kill(self) -> None:
        cluster = self._running()
        for index in range(self.nodes):
            cluster.kill(index)

    def stop(self) -> None:
        if self._cluster is not None:
            self._cluster.stop()

    def check_alive(self) -> None:
        cluster = self._running()
        for index in range(self.nodes):
            if cluster.pid(index) is None:
                raise RuntimeError(f"nats-server {index} exited; see {cluster.log_path(index)}")

    def rss_bytes(self) -> int:
        total = 0
        for index in range(self.nodes):
            pid = self._running().pid(index)
            try:
                total += psutil.Process(pid).memory_info().rss if pid else 0
            except psutil.Error:
                continue  # it exited between the two calls
        return total
