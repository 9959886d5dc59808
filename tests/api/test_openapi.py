"""The OpenAPI document: valid OpenAPI 3 (3.1, and the 3.0 copy /docs reads), with the
msgspec request schemas of both timer endpoints."""

from __future__ import annotations

import base64

from openapi_spec_validator import validate

from tests.api.helpers import FakeApi

TIMER_FIELDS = {"topic", "id", "deliver_at_ms", "delay_ms", "payload", "payload_b64", "headers"}


def test_openapi_31_validates_and_has_the_timer_request_schemas(fake_api: FakeApi) -> None:
    doc = fake_api.client.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    validate(doc)
    paths = doc["paths"]
    single = paths["/v1/timers"]["post"]["requestBody"]["content"]
    batch = paths["/v1/timers/batch"]["post"]["requestBody"]["content"]
    assert single["application/json"]["schema"] == {"$ref": "#/components/schemas/TimerCreate"}
    assert batch["application/json"]["schema"] == {"$ref": "#/components/schemas/TimerBatchCreate"}
    assert "application/msgpack" in batch
    schemas = doc["components"]["schemas"]
    assert set(schemas["TimerCreate"]["properties"]) == TIMER_FIELDS
    assert schemas["TimerCreate"]["additionalProperties"] is False
    assert schemas["TimerBatchCreate"]["properties"]["timers"]["items"] == {
        "$ref": "#/components/schemas/TimerCreate"
    }
    assert "example" in single["application/json"]
    for path, methods in paths.items():
        for method, op in methods.items():
            assert op.get("responses"), (path, method)
    post = paths["/v1/timers"]["post"]["responses"]
    assert {"200", "201", "409", "413", "415", "422"} <= set(post)
    assert post["201"]["content"]["application/json"]["schema"]["$ref"].endswith("/Timer")


def test_openapi_30_copy_for_swagger_ui_validates(fake_api: FakeApi) -> None:
    doc = fake_api.client.get("/docs/openapi-3.0.json").json()
    assert doc["openapi"] == "3.0.3"
    validate(doc)
    created = doc["components"]["schemas"]["TimerCreate"]["properties"]
    assert created["payload_b64"]["format"] == "byte" and created["payload_b64"]["nullable"]
    assert created["topic"]["example"] == "orders"


def test_openapi_states_the_limits_in_utf8_bytes_and_every_metrics_status(
    fake_api: FakeApi,
) -> None:
    """The server counts payload and header limits in UTF-8 bytes (``maxLength`` counts
    characters) and /metrics answers 503 while shutting down: the document says both."""
    doc = fake_api.client.get("/openapi.json").json()
    props = doc["components"]["schemas"]["TimerCreate"]["properties"]
    payload, payload_b64, headers = (
        next(b for b in props[name]["anyOf"] if b.get("type") != "null")
        for name in ("payload", "payload_b64", "headers")
    )
    assert payload["maxLength"] == 1 << 20
    assert "at most 1048576 bytes" in payload["description"]
    assert "UTF-8 bytes" in payload["description"]
    assert "at most 1048576 bytes once decoded" in payload_b64["description"]
    # the padded base64 of the largest payload the server takes (it does: 201), not less
    assert payload_b64["maxLength"] == len(base64.b64encode(b"x" * (1 << 20))) == 1_398_104
    assert headers["maxProperties"] == 64
    assert "16384 bytes in all" in headers["description"]
    assert "UTF-8 bytes" in headers["description"]
    assert {"200", "401", "503"} <= set(doc["paths"]["/metrics"]["get"]["responses"])
