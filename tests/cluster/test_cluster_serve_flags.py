"""A node joins a cluster with ``timerstore serve`` flags alone (no TIMERSTORE_CLUSTER__*
variable), and GET /v1/cluster shows what the flags said."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from cluster.natsd import NatsCluster, free_port
from tests.cluster.conftest import ROOT
from tests.waiting import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
READY_TIMEOUT_S = 120.0


def ready(process: subprocess.Popen[bytes], url: str, log: Path) -> bool:
    """/readyz answers 200 (the node must not have exited meanwhile: its log says why)."""
    assert process.poll() is None, log.read_text(errors="replace")
    try:
        return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False  # not listening yet


def cluster_view(url: str) -> dict[str, object]:
    view: dict[str, object] = httpx.get(f"{url}/v1/cluster", timeout=10).json()
    return view


def owns_every_partition(url: str) -> bool:
    owners = cluster_view(url)["owners"]
    assert isinstance(owners, list)
    return all(o["node_id"] for o in owners)


def test_a_node_joins_with_the_cluster_flags(nats_cluster: NatsCluster, tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    flags = ["--nats-urls", ",".join(nats_cluster.urls), "--node-id", "flagged"]
    flags += ["--advertise-url", url, "--lease-ms", "2000", "--partitions", "16"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIMERSTORE_")}
    env["PYTHONPATH"] = str(ROOT)
    log = tmp_path / "node.log"
    command = [sys.executable, "-m", "timerstore", "serve", "--port", str(port)]
    command += ["--data-dir", str(tmp_path / "data"), *flags]
    with log.open("ab") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=out)
    try:
        wait_for(lambda: ready(process, url, log), READY_TIMEOUT_S, "the node ready")
        wait_for(lambda: owns_every_partition(url), READY_TIMEOUT_S, "every partition owned")
        view = cluster_view(url)
    finally:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
    assert view["node_id"] == "flagged"
    assert view["nodes"] == [{"node_id": "flagged", "url": url, "alive": True}]
    owners = view["owners"]
    assert isinstance(owners, list) and len(owners) == 16
    assert {o["node_id"] for o in owners} == {"flagged"}  # the only node owns them all
