"""Hostile requests against a real server: each gets a 4xx naming the field and the rule,
and nothing stored is lost or changed.

Bodies msgspec does not report as a DecodeError (invalid UTF-8 in a string, nesting
deeper than Python's recursion limit), batches too big to decode item by item on the
event loop, and paths whose encoded slash (``%2F``) would route to another operation.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pytest

from api import bodies
from api.bodies import COUNT_FIRST_ITEM_BYTES, BodyDecoder, Kind, decode_batch
from app.timer_requests import MAX_BATCH_PROBLEMS, RequestLimits
from storage.errors import InvalidInputError
from tests.api.helpers import ThreadServer, make_settings

JSON = "application/json"
MSGPACK = "application/msgpack"
KEPT = {"topic": "keep", "id": "k1", "delay_ms": 3_600_000, "payload": "kept"}
JSON_DEEP = b"[" * 1000 + b"]" * 1000
MSGPACK_DEEP = b"\x91" * 1000 + b"\x90"  # fixarray of 1, a thousand times, then []


def _deep_in_route(depth: int, field: str) -> bytes:
    """A route whose whole float ``timeout_ms`` sends it down the float-rewriting path."""
    return b'{"timeout_ms":1.0,"' + field.encode() + b'":' + b"[" * depth + b"]" * depth + b"}"


# (case, method, path, content type, body, error field)
CASES: list[tuple[str, str, str, str, bytes, str]] = [
    ("timer json bad utf-8", "POST", "/v1/timers", JSON,
     b'{"topic":"a","delay_ms":1,"payload":"\xff"}', "body"),
    ("timer msgpack bad utf-8", "POST", "/v1/timers", MSGPACK,
     b"\x83\xa5topic\xa1a\xa8delay_ms\x01\xa7payload\xa1\xff", "body"),
    ("route bad utf-8", "PUT", "/v1/topics/a/route", JSON,
     b'{"sink":"webhook","url":"\xff"}', "body"),
    ("commit bad utf-8 key", "POST", "/v1/topics/t/groups/g/commit", JSON,
     b'{"offset":1,"\xff":1}', "body"),
    ("ingest bad utf-8", "POST", "/v1/admin/ingest", JSON, b'{"stage_dir":"\xff"}', "body"),
    *[
        case
        for name, path in (("batch", "/v1/timers/batch"), ("cancel", "/v1/timers/cancel"))
        for case in (
            (f"{name} json 1000 deep", "POST", path, JSON, b'{"timers":[' + JSON_DEEP + b"]}",
             "body"),
            (f"{name} msgpack 1000 deep", "POST", path, MSGPACK,
             b"\x81\xa6timers\x91" + MSGPACK_DEEP, "body"),
        )
    ],
    ("batch item bad utf-8", "POST", "/v1/timers/batch", JSON,
     b'{"timers":[{"topic":"a","delay_ms":1,"payload":"\xff"}]}', "timers[0]"),
    ("cancel item bad utf-8", "POST", "/v1/timers/cancel", JSON,
     b'{"timers":[{"topic":"keep","id":"k\xff"}]}', "timers[0]"),
    ("whole float, 500 deep", "PUT", "/v1/topics/q/route", JSON, _deep_in_route(500, "x"), "x"),
    ("whole float, 5000 deep", "PUT", "/v1/topics/q/route", JSON, _deep_in_route(5000, "url"),
     "timeout_ms"),
]  # fmt: skip


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadServer]:
    data_dir = tmp_path_factory.mktemp("hostile") / "data"
    started = ThreadServer(make_settings(data_dir, engine={"tick_ms": 5}))
    try:
        started.start()
        yield started
    finally:
        started.stop()


@pytest.fixture
def client(server: ThreadServer) -> Iterator[httpx.Client]:
    """A client of the module's server, on which the timer ``KEPT`` is pending."""
    port = server.server.servers[0].sockets[0].getsockname()[1]
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
        r = http.post("/v1/timers", json=KEPT)
        assert r.status_code in (200, 201), r.text
        yield http


def _assert_kept(client: httpx.Client) -> None:
    """The timer stored before is still pending, unchanged, and nothing else was stored."""
    timer = client.get("/v1/timers/keep/k1").json()
    assert (timer["state"], timer["payload"]) == ("pending", "kept"), timer
    stats = client.get("/v1/stats").json()
    assert (stats["pending"], stats["cancelled"]) == (1, 0), stats
    assert client.get("/v1/topics/a/route").status_code == 404
    assert client.get("/v1/topics/q/route").status_code == 404


def _error(r: httpx.Response, status: int = 422) -> dict[str, Any]:
    assert r.status_code == status, r.text
    error: dict[str, Any] = r.json()["error"]
    assert error["code"] and error["message"], error
    return error


@pytest.mark.parametrize(
    ("method", "path", "content_type", "body", "field"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_a_body_that_is_not_well_formed_is_a_422_naming_the_field(
    client: httpx.Client, method: str, path: str, content_type: str, body: bytes, field: str
) -> None:
    r = client.request(method, path, content=body, headers={"content-type": content_type})
    error = _error(r)
    assert error["field"] == field, error
    if field in ("body", "timers[0]"):
        assert "UTF-8" in error["message"] or "nested too deeply" in error["message"], error
    _assert_kept(client)


@pytest.mark.parametrize("path", ["/v1/timers/batch", "/v1/timers/cancel"])
def test_a_batch_of_a_million_items_is_refused_by_its_count(
    client: httpx.Client, path: str
) -> None:
    """Too many items to decode one by one (that took 8.6 s on the event loop): the
    count rule answers, and no problem is listed per item."""
    body = b'{"timers":[' + b",".join([b"1"] * 1_000_000) + b"]}"
    error = _error(client.post(path, content=body, headers={"content-type": JSON}))
    assert error["field"] == "timers", error
    assert error["message"] == "timers must hold 1 to 10000 items, got 1000000"
    assert "problems" not in error
    _assert_kept(client)


def test_decode_batch_checks_the_count_before_decoding_any_item() -> None:
    limits = RequestLimits(max_batch_timers=10)
    bodies: list[tuple[Kind, bytes]] = [
        ("json", msgspec.json.encode({"timers": [1] * 11})),
        ("msgpack", msgspec.msgpack.encode({"timers": [1] * 11})),
    ]
    for kind, body in bodies:
        with pytest.raises(InvalidInputError) as raised:
            decode_batch(kind, body, limits)
        assert raised.value.field == "timers" and not raised.value.problems
        assert raised.value.message == "timers must hold 1 to 10 items, got 11"


def test_a_batch_of_bad_items_lists_the_first_ones_only(client: httpx.Client) -> None:
    timers: list[Any] = [1] * 10_000
    timers[0] = {"topic": "ok", "delay_ms": -1}  # decodes, then breaks a rule
    error = _error(client.post("/v1/timers/batch", json={"timers": timers}))
    problems = error["problems"]
    assert len(problems) == MAX_BATCH_PROBLEMS
    assert [p["index"] for p in problems] == list(range(MAX_BATCH_PROBLEMS))
    assert problems[0]["field"] == "timers[0].delay_ms"
    assert problems[1]["field"] == "timers[1]"
    assert error["message"].endswith(
        f"(the first {MAX_BATCH_PROBLEMS} bad items are listed; there may be more)"
    )
    _assert_kept(client)


ENCODED_SLASHES = [
    ("POST", "/v1/deadletters/whf%2Ff1/replay"),
    ("POST", "/v1/deadletters/whf%2ff1/replay"),
    ("DELETE", "/v1/timers/keep%2Fk1/"),
    ("DELETE", "/v1/timers/keep%2Fk1"),
    ("GET", "/v1/timers/keep/k1%2F"),
    ("GET", "/v1%2Ftimers/keep/k1"),
]


@pytest.mark.parametrize(("method", "path"), ENCODED_SLASHES, ids=[p for _, p in ENCODED_SLASHES])
def test_an_encoded_slash_in_a_v1_path_is_a_422_naming_the_path(
    client: httpx.Client, method: str, path: str
) -> None:
    """Routed on the decoded path, ``keep%2Fk1/`` once meant a 307 to ``/keep/k1``, which a
    client following redirects turned into cancelling that timer."""
    r = client.request(method, path, follow_redirects=True)
    error = _error(r)
    assert error["field"] == "path", error
    assert "A-Z a-z 0-9 . _ : -" in error["message"] and "%2F" in error["message"]
    assert not r.history
    _assert_kept(client)


@pytest.mark.parametrize(
    ("method", "path"),
    [("DELETE", "/v1/timers/keep/k1/"), ("GET", "/v1/timers/keep/k1/"), ("POST", "/v1/timers/")],
)
def test_a_trailing_slash_is_a_404_not_a_redirect(
    client: httpx.Client, method: str, path: str
) -> None:
    r = client.request(method, path, json=KEPT, follow_redirects=True)
    assert _error(r, 404)["code"] == "not_found"
    assert not r.history
    _assert_kept(client)


def test_a_long_batch_of_valid_items_is_counted_before_any_item_is_decoded(monkeypatch) -> None:
    """A 32 MiB body of a million tiny valid items decoded whole took 0.6 to 1.3 s on the
    event loop before its count was known; a body long enough to hold too many items
    has them counted first (one Raw each), and no item is decoded."""
    limits = RequestLimits(max_batch_timers=10)
    item = {"topic": "t", "delay_ms": 1, "payload": "x" * (COUNT_FIRST_ITEM_BYTES // 10)}
    decoded: list[Kind] = []

    class Refusing(BodyDecoder[Any]):
        def decode(self, kind: Kind, body: bytes, prefix: str = "") -> Any:
            decoded.append(kind)
            return super().decode(kind, body, prefix)

    monkeypatch.setattr(bodies, "batch_decoder", Refusing(bodies.TimerBatchCreate))
    for kind, encode in (("json", msgspec.json.encode), ("msgpack", msgspec.msgpack.encode)):
        body = encode({"timers": [item] * 11 * 10})
        assert len(body) > limits.max_batch_timers * COUNT_FIRST_ITEM_BYTES
        with pytest.raises(InvalidInputError) as raised:
            decode_batch(kind, body, limits)
        assert raised.value.message == "timers must hold 1 to 10 items, got 110"
    assert decoded == []  # the batch decoder never ran
    short = msgspec.json.encode({"timers": [item] * 10})
    assert len(decode_batch("json", short, limits)[0]) == 10
    assert decoded == ["json"]
