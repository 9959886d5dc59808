"""The OpenAPI document states what the server does, and no input is a 5xx.

Each case here was a failure of a contract run (schemathesis) against the service:
integer overflow deep in the store (a 500), rules the document did not state, response
schemas that said ``type: string``, an ``Allow`` header that disagreed with the document.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from storage.names import NAME_MAX_BYTES, NAME_PATTERN
from tests.api.helpers import FakeApi

REF_PREFIX = "#/components/schemas/"


def _walk(node: Any, key: str) -> list[Any]:
    """Every value stored under ``key`` anywhere in ``node``."""
    found = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key:
                found.append(v)
            found += _walk(v, key)
    elif isinstance(node, list):
        for item in node:
            found += _walk(item, key)
    return found


@pytest.fixture
def doc(fake_api: FakeApi) -> dict[str, Any]:
    return dict(fake_api.client.get("/openapi.json").json())


def _operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(p, m, op) for p, ms in doc["paths"].items() for m, op in ms.items()]


def test_every_response_schema_is_a_plain_ref_that_resolves(doc: dict[str, Any]) -> None:
    schemas = doc["components"]["schemas"]
    for path, method, op in _operations(doc):
        for status, response in op["responses"].items():
            for kind, media in response.get("content", {}).items():
                schema = media["schema"]
                plain = {"$ref"} if kind == "application/json" else {"type"}  # /metrics' text
                assert set(schema) == plain, (path, method, status, schema)
    for target in _walk(doc, "$ref"):
        assert target.startswith(REF_PREFIX), target
        assert target.removeprefix(REF_PREFIX) in schemas, target
    assert "$defs" not in str(doc)


def test_path_names_carry_the_name_rule_and_integers_their_bounds(doc: dict[str, Any]) -> None:
    for path, method, op in _operations(doc):
        for param in op.get("parameters", ()):
            schema = param["schema"]
            assert "anyOf" not in schema, (path, param)  # a query value is never null
            if param["name"] in ("topic", "id"):
                assert schema["pattern"] == NAME_PATTERN, (path, param)
                assert schema["maxLength"] == NAME_MAX_BYTES, (path, param)
            if schema.get("type") == "integer":
                assert "minimum" in schema and "maximum" in schema, (path, method, param)
        assert op["operationId"] == op["operationId"].lower(), path
    ids = [op["operationId"] for _, _, op in _operations(doc)]
    assert len(ids) == len(set(ids))
    listing = {p["name"]: p["schema"] for p in doc["paths"]["/v1/timers"]["get"]["parameters"]}
    assert listing["limit"]["maximum"] == 1000  # max_page_limit of these settings
    assert listing["cursor"]["minLength"] == 4


def test_every_error_status_has_the_error_schema(doc: dict[str, Any]) -> None:
    for path, method, op in _operations(doc):
        for status, response in op["responses"].items():
            if int(status) >= 400 and path != "/readyz":  # readyz: 503 is {"status": ...}
                schema = response["content"]["application/json"]["schema"]
                assert schema == {"$ref": REF_PREFIX + "ErrorBody"}, (path, method, status)


def test_links_lead_from_a_scheduled_timer_to_each_of_its_operations(doc: dict[str, Any]) -> None:
    ids = {op["operationId"] for _, _, op in _operations(doc)}
    links = doc["paths"]["/v1/timers"]["post"]["responses"]["201"]["links"]
    assert {link["operationId"] for link in links.values()} == {
        "get_timer",
        "cancel_timer",
        "list_timers",
        "read_messages",
        "replay_dead_letter",
    }
    for link in _walk(doc["paths"], "links"):
        for one in link.values():
            assert one["operationId"] in ids, one
    get = links["GetTimer"]["parameters"]
    assert get == {"topic": "$response.body#/topic", "id": "$response.body#/id"}


def test_timer_create_states_its_cross_field_rules_and_limits(doc: dict[str, Any]) -> None:
    create = doc["components"]["schemas"]["TimerCreate"]
    (rules,) = create["allOf"]
    assert [b["required"] for b in rules["oneOf"]] == [["deliver_at_ms"], ["delay_ms"]]
    assert rules["not"]["required"] == ["payload", "payload_b64"]
    headers = [b for b in create["properties"]["headers"]["anyOf"] if b.get("type") == "object"]
    assert headers[0]["maxProperties"] == 64
    batch = doc["components"]["schemas"]["TimerBatchCreate"]["properties"]["timers"]
    assert (batch["minItems"], batch["maxItems"]) == (1, 10_000)
    assert "securitySchemes" not in doc["components"]  # no API keys configured here


def test_with_api_keys_the_document_declares_the_bearer_scheme(fake_api_factory: Any) -> None:
    api = fake_api_factory(api_keys=["k1"])
    doc = api.client.get("/openapi.json").json()
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert doc["paths"]["/v1/timers"]["post"]["security"] == [{"bearer": []}]
    assert "security" not in doc["paths"]["/healthz"]["get"]
    metrics = doc["paths"]["/metrics"]["get"]  # a 401 without the key, so documented
    assert metrics["security"] == [{"bearer": []}] and "401" in metrics["responses"]
    assert api.client.get("/metrics").status_code == 401


def test_public_metrics_need_no_key_in_the_document(fake_api_factory: Any) -> None:
    api = fake_api_factory(api_keys=["k1"], metrics_public=True)
    doc = api.client.get("/openapi.json").json()
    assert "security" not in doc["paths"]["/metrics"]["get"]
    assert api.client.get("/metrics").status_code == 200


def test_dead_letter_topic_routes_state_the_name_rule_and_their_bodies(
    doc: dict[str, Any], fake_api: FakeApi
) -> None:
    replay = doc["paths"]["/v1/deadletters/{topic}/replay"]["post"]
    (topic,) = replay["parameters"]
    assert topic["schema"]["pattern"] == NAME_PATTERN
    ok = replay["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok == {"$ref": REF_PREFIX + "Replayed"}
    assert not {"404", "409"} & set(replay["responses"])  # such dead letters are passed over
    purge = doc["paths"]["/v1/deadletters"]["delete"]
    ok = purge["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok == {"$ref": REF_PREFIX + "Purged"}
    assert fake_api.client.post("/v1/deadletters/a%20b/replay").json()["error"]["field"] == "topic"
    assert fake_api.client.delete("/v1/deadletters?topic=").json()["error"]["field"] == "topic"
    assert fake_api.client.delete("/v1/deadletters").json() == {"purged": 0}


@pytest.mark.parametrize(
    ("url", "field"),
    [
        (f"/v1/timers?from_ms={10**40}", "from_ms"),
        (f"/v1/timers?to_ms={10**40}", "to_ms"),
        (f"/v1/timers?from_ms={-(10**30)}", "from_ms"),
        (f"/v1/timers?limit={10**30}", "limit"),
        ("/v1/timers?limit=-1", "limit"),
        ("/v1/timers?cursor=", "cursor"),
        ("/v1/timers?cursor=%00%00%00%00", "cursor"),
        ("/v1/timers?topic=a%20b", "topic"),
        (f"/v1/topics/x/messages?offset={10**30}", "offset"),
        (f"/v1/topics/x/messages?offset={2**63}", "offset"),
        (f"/v1/topics/x/messages?wait_ms={10**30}", "wait_ms"),
        ("/v1/topics/x%00y/messages", "topic"),
        (f"/v1/deadletters?limit={10**30}", "limit"),
        ("/v1/timers/orders/%C3%A9", "id"),
        (f"/v1/timers/{'t' * 129}/x", "topic"),
    ],
)
def test_out_of_range_parameters_are_422s_naming_the_field(
    fake_api: FakeApi, url: str, field: str
) -> None:
    r = fake_api.client.get(url)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field


def test_the_largest_allowed_values_are_answered(fake_api: FakeApi) -> None:
    top = 2**63 - 1
    r = fake_api.client.get(f"/v1/topics/x/messages?offset={top}")
    assert r.status_code == 200 and r.json() == {"messages": [], "next_offset": top}
    r = fake_api.client.get("/v1/timers?from_ms=253402300799999&to_ms=253402300799999")
    assert r.status_code == 200 and r.json()["timers"] == []


def test_a_cursor_the_server_did_not_issue_is_a_422(fake_api: FakeApi) -> None:
    for i in range(3):
        body = {"topic": "orders", "id": f"o{i}", "delay_ms": 1000 * (i + 1)}
        assert fake_api.client.post("/v1/timers", json=body).status_code == 201
    first = fake_api.client.get("/v1/timers", params={"limit": 1}).json()
    issued = first["next_cursor"]
    r = fake_api.client.get("/v1/timers", params={"cursor": issued})
    assert r.status_code == 200 and [t["id"] for t in r.json()["timers"]] == ["o1", "o2"]
    typo = issued[:4] + ("B" if issued[4] != "B" else "C") + issued[5:]
    for made_up in ("AAAA", "____", base64.urlsafe_b64encode(b"\x00").decode(), typo):
        r = fake_api.client.get("/v1/timers", params={"cursor": made_up})
        assert r.status_code == 422, (made_up, r.text)
        assert r.json()["error"]["field"] == "cursor"


def test_whole_floats_are_integers_as_json_schema_says(fake_api: FakeApi) -> None:
    body = {"topic": "orders", "id": "f", "delay_ms": 1000.0, "deliver_at_ms": None}
    r = fake_api.client.post("/v1/timers", json=body)
    assert r.status_code == 201, r.text
    batch = {"timers": [{"topic": "orders", "deliver_at_ms": 1e3}]}
    assert fake_api.client.post("/v1/timers/batch", json=batch).status_code == 200
    for bad in (1000.5, "1000", 1e300):
        r = fake_api.client.post("/v1/timers", json={"topic": "orders", "delay_ms": bad})
        assert r.status_code == 422 and r.json()["error"]["field"] == "delay_ms", r.text


def test_a_delay_the_document_allows_is_accepted(fake_api: FakeApi, doc: dict[str, Any]) -> None:
    delay = doc["components"]["schemas"]["TimerCreate"]["properties"]["delay_ms"]
    top = next(b for b in delay["anyOf"] if b.get("type") == "integer")["maximum"]
    r = fake_api.client.post("/v1/timers", json={"topic": "far", "delay_ms": top})
    assert r.status_code == 201, r.text
    r = fake_api.client.post("/v1/timers", json={"topic": "far", "delay_ms": top + 1})
    assert r.status_code == 422 and r.json()["error"]["field"] == "delay_ms"


def test_a_wrong_method_gets_405_with_every_documented_method_in_allow(
    fake_api: FakeApi, doc: dict[str, Any]
) -> None:
    for path, concrete in (
        ("/v1/timers/{topic}/{id}", "/v1/timers/orders/o1"),
        ("/v1/timers", "/v1/timers"),
        ("/v1/topics/{topic}/messages", "/v1/topics/orders/messages"),
    ):
        documented = sorted(m.upper() for m in doc["paths"][path])
        for method in ("OPTIONS", "PUT", "PATCH"):
            r = fake_api.client.request(method, concrete)
            assert r.status_code == 405, (method, path)
            assert r.headers["allow"].split(", ") == documented, (method, path)
            assert r.json()["error"]["code"] == "method_not_allowed"


def test_responses_leave_out_what_has_no_value_instead_of_null(fake_api: FakeApi) -> None:
    r = fake_api.client.post("/v1/timers", json={"topic": "orders", "id": "n", "delay_ms": 5})
    assert r.status_code == 201
    assert None not in r.json().values()
    r = fake_api.client.get("/v1/timers/orders/nope")
    assert r.status_code == 404 and None not in r.json()["error"].values()
