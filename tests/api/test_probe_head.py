"""HEAD on the probes and on /metrics answers as GET without a body (some load balancers
and monitoring checks probe with HEAD), and the OpenAPI document lists it as operations of
their own. A real uvicorn server."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from openapi_spec_validator import validate

from tests.api.helpers import ThreadServer

PROBES = ("/healthz", "/readyz")
HEADS = (*PROBES, "/metrics")


def test_head_on_the_probes_is_get_without_the_body(
    live_factory: Callable[..., tuple[httpx.Client, ThreadServer]],
) -> None:
    client, server = live_factory()
    for path in PROBES:
        got, head = client.get(path), client.head(path)
        assert (head.status_code, head.content) == (200, b""), (path, head.text)
        for header in ("content-type", "content-length"):
            assert head.headers[header] == got.headers[header], (path, header)
        r = client.options(path)
        assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD", (path, r.headers)

    server.service.begin_shutdown()  # not ready any more: HEAD says so as GET does
    assert client.get("/readyz").status_code == client.head("/readyz").status_code == 503
    assert client.head("/healthz").status_code == 200


def test_head_on_metrics_is_get_without_the_body_and_keeps_its_guard(
    live_factory: Callable[..., tuple[httpx.Client, ThreadServer]],
) -> None:
    client, _ = live_factory(api_keys=["k1"])
    keyed = {"Authorization": "Bearer k1"}
    got, head = client.get("/metrics", headers=keyed), client.head("/metrics", headers=keyed)
    assert got.status_code == 200 and b"timerstore_" in got.content
    assert (head.status_code, head.content) == (200, b""), head.text
    assert head.headers["content-type"] == got.headers["content-type"]
    # without the key HEAD is refused as GET is (metrics_public is not set)
    assert client.head("/metrics").status_code == client.get("/metrics").status_code == 401
    r = client.options("/metrics")
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD", r.headers


def test_the_document_lists_head_on_the_probes(live: httpx.Client) -> None:
    doc = live.get("/openapi.json").json()
    validate(doc)
    for path in HEADS:
        operations = doc["paths"][path]
        assert set(operations) == {"get", "head"}, path
        assert operations["head"]["operationId"] == operations["get"]["operationId"] + "_head"
        assert "content" not in operations["head"]["responses"]["200"]  # no body
    ids = [op["operationId"] for ops in doc["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))
