"""HEAD on the probes answers as GET without a body (some load balancers probe with HEAD),
and the OpenAPI document lists it as operations of their own. A real uvicorn server."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from openapi_spec_validator import validate

from tests.api.helpers import ThreadServer

PROBES = ("/healthz", "/readyz")


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


def test_the_document_lists_head_on_the_probes(live: httpx.Client) -> None:
    doc = live.get("/openapi.json").json()
    validate(doc)
    for path in PROBES:
        operations = doc["paths"][path]
        assert set(operations) == {"get", "head"}, path
        assert operations["head"]["operationId"] == operations["get"]["operationId"] + "_head"
        assert "content" not in operations["head"]["responses"]["200"]  # no body
    ids = [op["operationId"] for ops in doc["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))
