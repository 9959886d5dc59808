"""docker-compose.yml's ``cluster`` profile, checked against the project without an engine:
three nats-servers routed to each other with JetStream, three nodes whose settings load
and point at those servers, ports and health checks that match what each listens on."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from app.config import load_settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
PORTS = yaml.safe_load((ROOT / "docker-compose.override.yml").read_text())["services"]
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
CLUSTER = {n: s for n, s in SERVICES.items() if "cluster" in s.get("profiles", ())}
NATS = {n: s for n, s in CLUSTER.items() if n.startswith("nats")}
NODES = {n: s for n, s in CLUSTER.items() if n.startswith("node")}


def flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def health_url(service: dict[str, Any]) -> tuple[int, str]:
    [(port, path)] = re.findall(
        r"http://127\.0\.0\.1:(\d+)(/\w+)", service["healthcheck"]["test"][-1]
    )
    return int(port), path


def test_the_profile_is_three_nats_servers_and_three_nodes_of_the_service_image() -> None:
    assert set(NATS) == {"nats0", "nats1", "nats2"}
    assert set(NODES) == {"node0", "node1", "node2"}
    assert set(CLUSTER) == set(NATS) | set(NODES)
    assert {s["image"] for s in CLUSTER.values()} == {SERVICES["timerstore"]["image"]}


def test_every_nats_server_runs_jetstream_routed_to_the_others() -> None:
    help_text = subprocess.run(
        [str(Path(sys.executable).parent / "nats-server"), "--help"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    known = set(re.findall(r"(?<![\w-])(-{1,2}[a-z_]+)", help_text.stdout + help_text.stderr))
    for name, service in NATS.items():
        assert service["entrypoint"] == ["nats-server"]
        command = service["command"]
        assert {c for c in command if c.startswith("-")} <= known, command
        assert "-js" in command and flag(command, "-n") == name
        store = flag(command, "-sd")
        assert any(store.startswith(v.split(":")[1]) for v in service["volumes"]), store
        route_port = flag(command, "--cluster").rsplit(":", 1)[1]
        others = {f"nats://{other}:{route_port}" for other in NATS if other != name}
        assert set(flag(command, "--routes").split(",")) == others
        assert health_url(service) == (int(flag(command, "-m")), "/healthz")


def test_every_node_loads_its_settings_and_points_at_every_nats_server() -> None:
    servers = {f"nats://{n}:{flag(s['command'], '-p')}" for n, s in NATS.items()}
    seen_ids = set()
    for name, service in NODES.items():
        env = {k: str(v) for k, v in service["environment"].items()}
        settings = load_settings(environ=env)  # raises on an unknown TIMERSTORE_ variable
        cluster = settings.cluster
        assert cluster.enabled and settings.store == "rocks"
        assert set(cluster.nats_urls) == servers
        assert cluster.advertise_url == f"http://{name}:{settings.port}"
        seen_ids.add(cluster.node_id)
        assert health_url(service) == (settings.port, "/readyz")
        assert [p.split(":")[1] for p in PORTS[name]["ports"]] == [str(settings.port)]
        assert set(service["depends_on"]) == set(NATS)
        assert service["volumes"] == [f"{name}:{settings.data_dir}"]
    assert seen_ids == {"n0", "n1", "n2"}
    published = [PORTS[n]["ports"][0].split(":")[0] for n in NODES]
    assert len(set(published)) == 3
