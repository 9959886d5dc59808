"""What the HTTP parser refuses gets the JSON error shape too (api.http_protocol), on a
real uvicorn with the parser and loop ``timerstore serve`` runs, over raw sockets."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from api.http_protocol import MAX_REQUEST_HEAD_BYTES
from tests.api.helpers import ThreadServer

READ_LIMIT_BYTES = 1 << 20


def exchange(url: str, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``request`` raw; read until the server closes (status, headers, body)."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        # the answer may come (and the connection close) before the whole request is sent
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(request)
        answer = b""
        while len(answer) < READ_LIMIT_BYTES:  # bounded: the server closes after an error
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


@pytest.fixture
def url(live_factory: Callable[..., tuple[httpx.Client, ThreadServer]]) -> str:
    client, _ = live_factory()
    return str(client.base_url)


def _json_error(status: int, headers: dict[str, str], body: bytes) -> dict[str, Any]:
    assert headers["content-type"] == "application/json", headers
    assert headers["connection"] == "close"
    assert int(headers["content-length"]) == len(body)
    error: dict[str, Any] = json.loads(body)["error"]
    assert set(error) >= {"code", "message"}
    return error


def test_raw_non_ascii_bytes_in_the_path_are_a_json_400_naming_the_path(url: str) -> None:
    status, headers, body = exchange(url, b"GET /v1/timers/\xc3\xa9/x HTTP/1.1\r\nHost: a\r\n\r\n")
    assert status == 400
    error = _json_error(status, headers, body)
    assert error["code"] == "bad_request" and error["field"] == "path"
    assert "char in url" in error["message"]


@pytest.mark.parametrize(
    "request_bytes",
    [b"GARBAGE\r\n\r\n", b"GET /healthz HTTP/1.1\r\nHost: a\r\nBad Header: x\r\n\r\n"],
    ids=["bad method", "bad header name"],
)
def test_a_request_the_parser_refuses_is_a_json_400(url: str, request_bytes: bytes) -> None:
    status, headers, body = exchange(url, request_bytes)
    assert status == 400
    error = _json_error(status, headers, body)
    assert error["code"] == "bad_request" and "not a valid HTTP/1.1 request: " in error["message"]


def test_a_one_mebibyte_header_is_a_json_431(url: str) -> None:
    big = b"a" * (1 << 20)
    status, headers, body = exchange(
        url, b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-Big: " + big + b"\r\n\r\n"
    )
    assert status == 431
    error = _json_error(status, headers, body)
    assert (error["code"], error["field"]) == ("headers_too_large", "headers")
    assert str(MAX_REQUEST_HEAD_BYTES) in error["message"]


def test_headers_within_the_limit_are_served_and_the_server_goes_on(url: str) -> None:
    exchange(url, b"GARBAGE\r\n\r\n")
    near = b"a" * (MAX_REQUEST_HEAD_BYTES - 200)
    request = (
        b"GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\nX-Big: " + near + b"\r\n\r\n"
    )
    status, _, body = exchange(url, request)
    assert status == 200 and json.loads(body) == {"status": "ok"}


def test_keep_alive_requests_after_a_long_body_are_counted_afresh(url: str) -> None:
    payload = json.dumps({"topic": "t", "delay_ms": 60_000, "payload": "x" * 100_000}).encode()
    post = (
        b"POST /v1/timers HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload
    )
    closing = b"GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(post + closing)
        answer = b""
        while len(answer) < READ_LIMIT_BYTES:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 201 ")
    assert answer.count(b"HTTP/1.1 200 OK") == 1 and b"431" not in answer
