"""nats-server with JetStream on loopback: one node, or a cluster of three (for R3).

The bench's own small launcher (cluster/natsd.py may later hold the shared one): each
node gets a client port, a cluster port, a store dir under the work dir and a config
file; ``kill`` is SIGKILL to every node, ``start`` brings them all back on the same
ports and dirs.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from bench.systems.servers import ServerProcess, binary, free_port

CLUSTER_NAME = "bench"


def nats_server_binary() -> str:
    beside_python = os.path.join(os.path.dirname(sys.executable), "nats-server")
    return binary("nats-server", beside_python)


@dataclass
class NatsNode:
    name: str
    port: int
    cluster_port: int
    process: ServerProcess


@dataclass
class NatsServers:
    """``nodes`` nats-server processes sharing a cluster when more than one."""

    workdir: str
    nodes: int
    members: list[NatsNode] = field(default_factory=list)

    def __post_init__(self) -> None:
        exe = nats_server_binary()
        ports = [(free_port(), free_port()) for _ in range(self.nodes)]
        for i, (port, cluster_port) in enumerate(ports):
            name = f"n{i}"
            conf = os.path.join(self.workdir, f"{name}.conf")
            with open(conf, "w") as f:
                f.write(self._config(name, port, cluster_port, [p[1] for p in ports]))
            process = ServerProcess([exe, "-c", conf], os.path.join(self.workdir, f"{name}.log"))
            self.members.append(NatsNode(name, port, cluster_port, process))

    def _config(self, name: str, port: int, cluster_port: int, cluster_ports: list[int]) -> str:
        store = os.path.join(os.path.abspath(self.workdir), name)
        lines = [
            f'server_name: "{name}"',
            "host: 127.0.0.1",
            f"port: {port}",
            f'jetstream {{ store_dir: "{store}" }}',
        ]
        if self.nodes > 1:
            routes = ", ".join(f"nats-route://127.0.0.1:{p}" for p in cluster_ports)
            lines.append(
                f'cluster {{ name: "{CLUSTER_NAME}", host: 127.0.0.1, port: {cluster_port}, '
                f"routes: [{routes}] }}"
            )
        return "\n".join(lines) + "\n"

    @property
    def urls(self) -> list[str]:
        return [f"nats://127.0.0.1:{m.port}" for m in self.members]

    def start(self) -> None:
        for m in self.members:
            m.process.start()

    def kill(self) -> None:
        for m in self.members:
            m.process.kill()

    def stop(self) -> None:
        for m in self.members:
            m.process.stop()

    def check_alive(self) -> None:
        for m in self.members:
            if not m.process.alive:
                raise RuntimeError(f"nats-server {m.name} exited: {m.process.log_tail()}")

    def rss_bytes(self) -> int:
        return sum(m.process.rss_bytes() for m in self.members)
