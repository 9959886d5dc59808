"""The plain ``POST /v1/timers`` answered by the HTTP protocol itself (api.http_protocol,
api.hot_routes.ScheduleOneAnswers), on a real uvicorn over raw sockets: the same answers
as the ASGI route, in order on a keep-alive connection, with every request that is not the
plain case (a bad body, a missing key, another media type) handed to the app."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.api.helpers import ThreadServer
from tests.waiting import wait_for

Live = Callable[..., tuple[httpx.Client, ThreadServer]]
READ_LIMIT_BYTES = 1 << 20


def post(body: Any, *, headers: str = "Content-Type: application/json\r\n") -> bytes:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    head = f"POST /v1/timers HTTP/1.1\r\nHost: a\r\n{headers}Content-Length: {len(raw)}\r\n\r\n"
    return head.encode() + raw


def answers(
    url: str, requests: bytes, count: int, *more: bytes
) -> list[tuple[int, dict[str, str], Any]]:
    """Send ``requests`` at once on one connection (then each of ``more``, in its own
    send); read ``count`` answers in order."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        for piece in (requests, *more):
            sock.sendall(piece)
        buffer, out = b"", []
        while len(out) < count and len(buffer) < READ_LIMIT_BYTES:
            head, sep, rest = buffer.partition(b"\r\n\r\n")
            if sep:
                lines = head.decode("latin-1").split("\r\n")
                headers = dict(line.lower().split(": ", 1) for line in lines[1:])
                length = int(headers["content-length"])
                if len(rest) >= length:
                    out.append((int(lines[0].split()[1]), headers, json.loads(rest[:length])))
                    buffer = rest[length:]
                    continue
            chunk = sock.recv(65536)
            if not chunk:
                break
            buffer += chunk
    return out


@pytest.fixture
def server(live_factory: Live) -> tuple[httpx.Client, ThreadServer]:
    return live_factory()


def test_pipelined_single_schedules_are_answered_in_order_with_the_routes_answers(
    server: tuple[httpx.Client, ThreadServer],
) -> None:
    client, thread_server = server
    timer = {"topic": "t", "id": "p1", "delay_ms": 60_000, "payload": "x"}
    requests = (
        post(timer)
        + post({"topic": "t", "delay_ms": -5})  # a 422: the ASGI route answers it
        + post(timer)  # the same id again: rescheduled, 200
        + post({"topic": "t", "delay_ms": 60_000}, headers="Content-Type: text/plain\r\n")
        + post({"topic": "t", "id": "p2", "delay_ms": 60_000})
        + b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"
    )
    got = answers(str(client.base_url), requests, 6)
    assert [status for status, _, _ in got] == [201, 422, 200, 415, 201, 200]
    # the three plain ones were answered by the protocol (not silently by the route, as
    # they would be should a uvicorn upgrade stop calling its hooks)
    assert thread_server.app.state.schedule_one_answers.taken == 3
    assert got[1][2]["error"]["field"] == "delay_ms"
    assert got[3][2]["error"]["field"] == "Content-Type"
    first, again = got[0], got[2]
    assert first[1]["content-type"] == "application/json"
    assert "connection" not in first[1]  # kept alive
    assert first[2]["id"] == "p1" and first[2]["state"] == "pending"
    assert again[2]["id"] == "p1" and again[2]["deliver_at_ms"] >= first[2]["deliver_at_ms"]
    # what the protocol answered is what the store holds, and what the route answers
    stored = client.get("/v1/timers/t/p2").json()
    assert stored["deliver_at_ms"] == got[4][2]["deliver_at_ms"]
    routed = client.post("/v1/timers", json={"topic": "t", "id": "p3", "delay_ms": 60_000})
    assert set(routed.json()) == set(got[4][2])


def test_a_schedule_on_a_closing_connection_is_answered_then_closed(
    server: tuple[httpx.Client, ThreadServer],
) -> None:
    client, _ = server
    timer = {"topic": "t", "id": "c1", "delay_ms": 60_000}
    request = post(timer, headers="Content-Type: application/json\r\nConnection: close\r\n")
    parts = urlsplit(str(client.base_url))
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while len(answer) < READ_LIMIT_BYTES:  # ends because the server closes
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 201 ") and b"\r\nconnection: close\r\n" in answer
    assert client.get("/v1/timers/t/c1").json()["state"] == "pending"


def test_api_keys_are_checked_before_anything_is_stored(live_factory: Live) -> None:
    client, _ = live_factory(api_keys=["k1"])
    url = str(client.base_url)
    timer = {"topic": "t", "id": "k", "delay_ms": 60_000}
    bad = "Content-Type: application/json\r\nAuthorization: Bearer nope\r\n"
    good = "Content-Type: application/json\r\nAuthorization: Bearer k1\r\n"
    got = answers(url, post(timer) + post(timer, headers=bad) + post(timer, headers=good), 3)
    assert [status for status, _, _ in got] == [401, 401, 201]
    assert got[2][2]["id"] == "k"


def test_a_conflict_found_by_the_store_is_the_single_requests_409_naming_the_id(
    server: tuple[httpx.Client, ThreadServer],
) -> None:
    client, _ = server
    timer = {"topic": "t", "id": "d1", "delay_ms": 0}
    assert answers(str(client.base_url), post(timer), 1)[0][0] == 201
    wait_for(lambda: client.get("/v1/timers/t/d1").json()["state"] == "delivered", 30, "d1 out")
    again = {"topic": "t", "id": "d1", "delay_ms": 60_000}
    other = {"topic": "t", "id": "d2", "delay_ms": 60_000}
    got = answers(str(client.base_url), post(again) + post(other), 2)
    assert got[0][0] == 409 and got[0][2]["error"]["field"] == "id"
    assert got[0][2]["error"]["state"] == "delivered"
    assert got[1][0] == 201  # one refused schedule does not fail its neighbour


def test_a_body_sent_in_pieces_and_an_empty_body_get_the_routes_answers(
    server: tuple[httpx.Client, ThreadServer],
) -> None:
    client, _ = server
    whole = post({"topic": "t", "id": "pieces", "delay_ms": 60_000})
    empty = post(b"")  # Content-Length: 0
    middle = len(whole) - 10  # the head and part of the body, then the rest
    rest = whole[middle:] + empty + b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"
    got = answers(str(client.base_url), whole[:middle], 3, rest)
    assert [status for status, _, _ in got] == [201, 422, 200]
    assert got[0][2]["id"] == "pieces"
    assert got[1][2]["error"]["field"] == "body"  # the empty body's 422 names the body
    assert client.get("/v1/timers/t/pieces").json()["state"] == "pending"
