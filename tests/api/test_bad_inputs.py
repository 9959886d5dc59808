"""A table of bad requests: each gets its documented 4xx, names the field, stores nothing."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import msgspec
import pytest

from tests.api.helpers import FakeApi

LIMITS = {
    "max_payload_bytes": 1024,
    "max_headers": 4,
    "max_headers_bytes": 256,
    "max_body_bytes": 64 * 1024,
}
JSON = "application/json"
OK = {"topic": "orders", "id": "o1", "delay_ms": 1000}


def _with(**changes: Any) -> bytes:
    body = {**OK, **changes}
    return json.dumps({k: v for k, v in body.items() if v is not ...}).encode()


def _batch(item: dict) -> bytes:
    return json.dumps({"timers": [OK, item]}).encode()


# (case, path, content type, body, status, error field)
CASES: list[tuple[str, str, str | None, bytes, int, str | None]] = [
    ("delay wrong type", "", JSON, _with(delay_ms="10"), 422, "delay_ms"),
    ("topic wrong type", "", JSON, _with(topic=5), 422, "topic"),
    ("deliver_at float", "", JSON, _with(delay_ms=..., deliver_at_ms=1.5), 422, "deliver_at_ms"),
    ("both time fields", "", JSON, _with(deliver_at_ms=1), 422, "deliver_at_ms"),
    ("neither time field", "", JSON, _with(delay_ms=...), 422, "deliver_at_ms"),
    ("negative delay", "", JSON, _with(delay_ms=-1), 422, "delay_ms"),
    ("negative deliver_at", "", JSON, _with(delay_ms=..., deliver_at_ms=-5), 422, "deliver_at_ms"),
    ("deliver_at past year 9999", "", JSON, _with(delay_ms=..., deliver_at_ms=10**16), 422,
     "deliver_at_ms"),
    ("unknown field", "", JSON, _with(color="red"), 422, "color"),
    ("payload too big", "", JSON, _with(payload="x" * 1025), 422, "payload"),
    ("payload_b64 too big", "", JSON, _with(payload_b64="A" * 1368), 422, "payload_b64"),
    ("both payload forms", "", JSON, _with(payload="a", payload_b64="AA=="), 422, "payload"),
    ("invalid base64", "", JSON, _with(payload_b64="not base64!"), 422, "payload_b64"),
    ("lone surrogate", "", JSON, b'{"topic":"orders","delay_ms":1,"payload":"\\ud800"}', 422,
     "body"),
    ("too many headers", "", JSON, _with(headers={f"h{i}": "v" for i in range(5)}), 422,
     "headers"),
    ("headers too big", "", JSON, _with(headers={"h": "v" * 300}), 422, "headers"),
    ("header not a string", "", JSON, _with(headers={"h": 1}), 422, "headers[...]"),
    ("topic with space", "", JSON, _with(topic="a b"), 422, "topic"),
    ("topic non-ascii", "", JSON, _with(topic="ordérs"), 422, "topic"),
    ("topic empty", "", JSON, _with(topic=""), 422, "topic"),
    ("topic too long", "", JSON, _with(topic="t" * 129), 422, "topic"),
    ("id with slash", "", JSON, _with(id="a/b"), 422, "id"),
    ("id with NUL", "", JSON, _with(id="a\x00b"), 422, "id"),
    ("malformed JSON", "", JSON, b'{"topic": "orders", ', 422, "body"),
    ("not an object", "", JSON, b"[1, 2]", 422, "body"),
    ("empty body", "", JSON, b"", 422, "body"),
    ("wrong content type", "", "text/plain", _with(), 415, "Content-Type"),
    ("form content type", "", "application/x-www-form-urlencoded", b"topic=a", 415,
     "Content-Type"),
    ("batch wrong content type", "/batch", "text/plain", _batch(OK), 415, "Content-Type"),
    ("no content type", "", None, _with(), 415, "Content-Type"),
    ("batch no content type", "/batch", None, _batch(OK), 415, "Content-Type"),
    ("body too large", "", JSON, _with(payload="x" * 70_000), 413, "body"),
    ("batch body too large", "/batch", JSON, b" " * 70_000, 413, "body"),
    ("batch item bad", "/batch", JSON, _batch({"topic": "x", "delay_ms": -3}), 422,
     "timers[1].delay_ms"),
    ("batch not a list", "/batch", JSON, b'{"timers": {"a": 1}}', 422, "timers"),
    ("batch unknown field", "/batch", JSON, b'{"timers": [], "x": 1}', 422, "x"),
    ("batch malformed msgpack", "/batch", "application/msgpack", b"\xc1\xc1", 422, "body"),
    ("number beyond float", "", JSON, _with(delay_ms=...).replace(b"}", b', "delay_ms": 1e400}'),
     422, "delay_ms"),
    ("not UTF-8", "", JSON, b"\xff\xfe{}", 422, "body"),
    ("nesting 60000 deep", "", JSON, b"[" * 60_000, 422, "body"),
    ("msgpack ext", "", "application/msgpack", b"\xd4\x01\x02", 422, "body"),
    ("msgpack uint64 max", "", "application/msgpack",
     msgspec.msgpack.encode({"topic": "orders", "delay_ms": 2**64 - 1}), 422, "delay_ms"),
    ("msgpack bin topic", "", "application/msgpack",
     msgspec.msgpack.encode({"topic": b"orders", "delay_ms": 1}), 422, "topic"),
    ("batch msgpack bad item", "/batch", "application/msgpack",
     msgspec.msgpack.encode({"timers": [OK, {"topic": "x", "payload_b64": "text"}]}), 422,
     "timers[1].payload_b64"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("path", "content_type", "body", "status", "field"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_bad_schedule_request(
    fake_api_factory, path: str, content_type: str | None, body: bytes, status: int, field: str
) -> None:
    api: FakeApi = fake_api_factory(limits=LIMITS)
    headers = {"content-type": content_type} if content_type else {}
    r = api.client.post("/v1/timers" + path, content=body, headers=headers)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert set(error) >= {"code", "message"}
    if field is not None:
        assert error["field"] == field, error
    stats = api.stats()
    assert (stats["pending"], stats["cancelled"]) == (0, 0)
    assert api.client.get("/v1/timers/orders/o1").status_code == 404
    assert api.client.get("/v1/topics").json() == {"topics": [], "next_cursor": None, "total": 0}


GET_CASES = [
    ("/v1/timers?limit=0", "limit"),
    ("/v1/timers?limit=abc", "limit"),
    ("/v1/timers?from_ms=-1", "from_ms"),
    ("/v1/timers?topic=a%20b", "topic"),
    ("/v1/timers/a%20b/x", "topic"),
    ("/v1/timers/orders/" + "x" * 129, "id"),
    ("/v1/topics/orders/messages?wait_ms=-1", "wait_ms"),
    ("/v1/topics/orders/messages?wait_ms=999999999", "wait_ms"),
    ("/v1/topics/orders/messages?offset=x", "offset"),
    ("/v1/topics/bad%21topic/messages", "topic"),
    ("/v1/deadletters?limit=100000", "limit"),
    ("/v1/timers?from_ms=%00", "from_ms"),
    ("/v1/timers?from_ms=" + "9" * 5000, "from_ms"),
    ("/v1/timers?cursor=%00%00%00%00", "cursor"),
    ("/v1/timers?cursor=%FF%FE%FD%FC", "cursor"),
    ("/v1/timers/orders/%00", "id"),
    ("/v1/deadletters?topic=%C3%A9", "topic"),
    ("/v1/topics?order=size", "order"),
    ("/v1/topics?limit=0", "limit"),
    ("/v1/topics?limit=1001", "limit"),
    ("/v1/topics?cursor=%3D%3D%3D%3D", "cursor"),
]


@pytest.mark.parametrize(("url", "field"), GET_CASES, ids=[c[0] for c in GET_CASES])
def test_bad_query_is_422_naming_the_field(fake_api: FakeApi, url: str, field: str) -> None:
    r = fake_api.client.get(url)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field


def test_unknown_route_and_method_use_the_error_shape(fake_api: FakeApi) -> None:
    r = fake_api.client.get("/v1/nothing")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    r = fake_api.client.put("/v1/timers")
    assert r.status_code == 405 and r.json()["error"]["code"] == "method_not_allowed"


def test_a_body_without_content_type_is_refused_saying_none_was_given(fake_api: FakeApi) -> None:
    r = fake_api.client.post("/v1/timers", content=_with())
    assert r.status_code == 415
    assert r.json()["error"]["message"] == (
        "Content-Type must be application/json or application/msgpack; none was given"
    )


@pytest.mark.parametrize(
    ("escape", "lone"),
    [("\\ud800", "\\ud800"), ("\\udbff\\u0041", "\\udbff"), ("ok \\\\ \\ud83d", "\\ud83d")],
)
def test_a_lone_surrogate_escape_is_named_not_called_truncated(
    fake_api: FakeApi, escape: str, lone: str
) -> None:
    body = ('{"topic":"orders","delay_ms":1,"payload":"' + escape + '"}').encode()
    at = body.index(lone.encode())
    r = fake_api.client.post("/v1/timers", content=body, headers={"content-type": JSON})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == "body"
    assert "truncated" not in error["message"]
    assert f"lone surrogate escape {lone} (at byte {at})" in error["message"]


def test_an_escaped_backslash_before_u_is_no_surrogate(fake_api: FakeApi) -> None:
    body = b'{"topic":"orders","delay_ms":1,"payload":"\\\\ud800 is text"}'
    r = fake_api.client.post("/v1/timers", content=body, headers={"content-type": JSON})
    assert r.status_code == 201, r.text
    assert r.json()["payload"] == "\\ud800 is text"


@pytest.mark.parametrize(
    ("field", "bad"), [("topic", "a b"), ("topic", "t" * 129), ("id", "\u00e9"), ("id", "i" * 129)]
)
def test_a_name_breaks_its_rule_in_the_same_words_in_path_query_and_body(
    fake_api: FakeApi, field: str, bad: str
) -> None:
    body = {"topic": "orders", "id": "o1", "delay_ms": 1000, field: bad}
    in_body = fake_api.client.post("/v1/timers", json=body).json()["error"]
    path = f"/v1/timers/{quote(bad)}/o1" if field == "topic" else f"/v1/timers/orders/{quote(bad)}"
    in_path = fake_api.client.get(path).json()["error"]
    assert in_body == in_path, (in_body, in_path)
    assert in_body["field"] == field and in_body["message"].startswith(f"{field} ")
    if field == "topic":
        in_query = fake_api.client.get("/v1/timers", params={"topic": bad}).json()["error"]
        assert in_query == in_body


def test_an_encoded_slash_in_the_single_schedule_path_is_refused(fake_api: FakeApi) -> None:
    r = fake_api.client.post("/v1%2Ftimers", json=OK)
    assert r.status_code == 422 and r.json()["error"]["field"] == "path"
    assert fake_api.client.get("/v1/timers/orders/o1").status_code == 404
