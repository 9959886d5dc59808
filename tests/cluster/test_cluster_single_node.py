"""GET /v1/cluster on a single node: one node that owns every partition at epoch 0."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from app.config import load_settings
from app.service import TimerService

# (not tests/api: pytest's importlib mode imports tests/api/__init__.py as the package
# ``api`` there, which hides this checkout's ``api`` behind it in a worktree)


@pytest.fixture
def client_factory(tmp_path: Path) -> Iterator[Callable[..., TestClient]]:
    opened: list[TestClient] = []

    def factory(**overrides: Any) -> TestClient:
        data_dir = str(tmp_path / f"data{len(opened)}")
        settings = load_settings(environ={}, overrides={"data_dir": data_dir, **overrides})
        client = TestClient(create_app(settings, service=TimerService(settings, run_engine=False)))
        opened.append(client.__enter__())
        return client

    yield factory
    for client in opened:
        client.__exit__(None, None, None)


@pytest.fixture
def client(client_factory: Callable[..., TestClient]) -> TestClient:
    return client_factory()


def test_a_single_node_owns_every_partition_as_local(client: TestClient) -> None:
    r = client.get("/v1/cluster")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["node_id"] == "local"
    assert body["partitions"] == 16
    assert body["owners"] == [{"partition": p, "node_id": "local", "epoch": 0} for p in range(16)]
    assert body["nodes"] == [{"node_id": "local", "url": "http://127.0.0.1:8080", "alive": True}]


def test_a_single_node_names_itself_from_the_cluster_settings(
    client_factory: Callable[..., TestClient],
) -> None:
    cluster = {"node_id": "solo", "advertise_url": "http://10.0.0.5:9000", "partitions": 4}
    body = client_factory(cluster=cluster).get("/v1/cluster").json()
    assert body["node_id"] == "solo"
    assert [o["node_id"] for o in body["owners"]] == ["solo"] * 4
    assert body["nodes"] == [{"node_id": "solo", "url": "http://10.0.0.5:9000", "alive": True}]


def test_the_cluster_view_is_in_the_openapi_document(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    ok = doc["paths"]["/v1/cluster"]["get"]["responses"]["200"]
    schema = ok["content"]["application/json"]["schema"]
    assert schema == {"$ref": "#/components/schemas/ClusterView"}
    view = doc["components"]["schemas"]["ClusterView"]
    assert set(view["properties"]) == {"node_id", "partitions", "owners", "nodes"}
    owner = doc["components"]["schemas"]["PartitionOwner"]
    assert set(owner["properties"]) == {"partition", "node_id", "epoch"}
