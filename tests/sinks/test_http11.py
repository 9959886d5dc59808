"""The webhook sender's HTTP/1.1 client against raw receivers on 127.0.0.1: what it
reuses, what it drops, and that a request costs no import (httpx's did: a failed
``import sniffio`` per lock, about a quarter of each request's time)."""

from __future__ import annotations

import importlib.abc
import shutil
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from storage.protocol import NewTimer
from tests.waiting import wait_for

NO_CONTENT = b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"
CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
CLOSE = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
HTTP10 = b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"


class RawReceiver(socketserver.ThreadingTCPServer):
    """Answers each request with ``answer`` (bytes written as given), at most
    ``per_connection`` requests on a connection: the next one it reads, then closes
    without an answer (a receiver that closed the connection while it was idle)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, answer: bytes, per_connection: int = 1_000_000) -> None:
        self.answer, self.per_connection = answer, per_connection
        self.connections = self.answered = 0
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook?x=1"


class _Handler(socketserver.StreamRequestHandler):
    server: RawReceiver

    def handle(self) -> None:
        with self.server.lock:
            self.server.connections += 1
        for served in range(self.server.per_connection + 1):
            length = _read_request(self.rfile)
            if length is None:
                return  # the sender closed the connection
            self.rfile.read(length)
            if served == self.server.per_connection:
                return  # read, then closed unanswered
            with self.server.lock:  # counted before the answer leaves: once the sender has
                self.server.answered += 1  # it, the test may read the count at once
            self.wfile.write(self.server.answer)


def _read_request(rfile: Any) -> int | None:
    """The request's Content-Length once its head is read; None at the connection's end."""
    length = None
    while (line := rfile.readline(65537)) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return length if line else None


@pytest.fixture
def raw_receiver() -> Iterator[Any]:
    started: list[RawReceiver] = []

    def start(answer: bytes, per_connection: int = 1_000_000) -> RawReceiver:
        server = RawReceiver(answer, per_connection)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


def deliver_one_by_one(routed: Any, url: str, n: int) -> Any:
    """``n`` timers on one route that sends one request at a time; all delivered."""
    r = routed(concurrency=1)
    r.route("raw", sink="webhook", url=url, secret="k", max_attempts=3)
    now = r.clock.now_ms()
    r.store.schedule([NewTimer("raw", f"r{i}", now) for i in range(n)], now)
    wait_for(lambda: r.store.stats().delivered == n, what=f"{n} delivered")
    return r


@pytest.mark.parametrize(("answer", "reused"), [(NO_CONTENT, True), (CHUNKED, True)])
def test_one_connection_carries_every_request_of_a_route_at_concurrency_1(
    routed, raw_receiver, answer, reused
):
    receiver = raw_receiver(answer)
    deliver_one_by_one(routed, receiver.url, 10)
    assert (receiver.answered, receiver.connections) == (10, 1)


@pytest.mark.parametrize("answer", [CLOSE, HTTP10])
def test_an_answer_that_closes_its_connection_is_followed_by_a_new_one(
    routed, raw_receiver, answer
):
    receiver = raw_receiver(answer)
    deliver_one_by_one(routed, receiver.url, 10)
    assert (receiver.answered, receiver.connections) == (10, 10)


def test_a_connection_closed_while_idle_is_replaced_not_a_failed_attempt(routed, raw_receiver):
    """The receiver reads the second request on each connection and closes it unanswered
    (a keep-alive timeout that raced the request): the request goes again on a new
    connection, once, and the timer is delivered on its first attempt."""
    receiver = raw_receiver(NO_CONTENT, per_connection=1)
    r = deliver_one_by_one(routed, receiver.url, 10)
    assert receiver.answered == 10
    assert [r.store.get("raw", f"r{i}").attempts for i in range(10)] == [1] * 10


def test_a_receiver_that_closes_unanswered_fails_the_attempt(routed, raw_receiver):
    """No answer on a new connection is a failed attempt (not retried within it)."""
    receiver = raw_receiver(NO_CONTENT, per_connection=0)
    r = routed(concurrency=1)
    r.route("raw", sink="webhook", url=receiver.url, secret="k", max_attempts=1)
    r.store.schedule([NewTimer("raw", "r0", r.clock.now_ms())], r.clock.now_ms())
    wait_for(lambda: r.store.stats().dead_lettered == 1, what="the dead letter")
    assert receiver.connections == 1
    error = r.store.get("raw", "r0").last_error
    assert error.startswith("webhook HttpProtocolError: the connection closed"), error


class _ImportsSeen(importlib.abc.MetaPathFinder):
    """Records every import that gets as far as the finders (one not in sys.modules)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        self.names.append(fullname)


def test_a_webhook_request_costs_no_import(routed, receiver):
    recv, url = receiver()
    r = routed()
    r.route("hooked", sink="webhook", url=url, secret="s3cr3t")
    now = r.clock.now_ms()
    r.store.schedule([NewTimer("hooked", "warm", now)], now)  # first use imports lazily
    wait_for(lambda: r.store.stats().delivered == 1, what="the first delivery")
    seen = _ImportsSeen()
    sys.meta_path.insert(0, seen)
    try:
        r.store.schedule([NewTimer("hooked", f"h{i}", now) for i in range(100)], now)
        wait_for(lambda: r.store.stats().delivered == 101, what="100 more deliveries")
    finally:
        sys.meta_path.remove(seen)
    assert len(recv.ok()) == 101
    assert seen.names == []  # httpx: ["sniffio", "sniffio", ...], 10 a request


def test_a_refused_connection_fails_the_attempt_naming_the_error(routed):
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # bound, never listening: connections are refused
        r = routed()
        url = f"http://127.0.0.1:{port}/hook"
        r.route("nobody", sink="webhook", url=url, secret="k", max_attempts=1)
        r.store.schedule([NewTimer("nobody", "n0", r.clock.now_ms())], r.clock.now_ms())
        wait_for(lambda: r.store.stats().dead_lettered == 1, what="the dead letter")
    assert r.store.get("nobody", "n0").last_error.startswith("webhook ConnectionRefusedError")


@pytest.fixture
def tls_receiver(tmp_path) -> Iterator[str]:
    """An HTTPS receiver with a self-signed certificate for 127.0.0.1 (made by openssl)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl to make a certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
         "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    server = RawReceiver(NO_CONTENT)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


def test_an_https_receiver_whose_certificate_is_not_trusted_fails_the_attempt(routed, tls_receiver):
    """TLS with the certificate checked: a self-signed one is refused, the attempt failed."""
    r = routed()
    r.route("tls", sink="webhook", url=tls_receiver, secret="k", max_attempts=1)
    r.store.schedule([NewTimer("tls", "t0", r.clock.now_ms())], r.clock.now_ms())
    wait_for(lambda: r.store.stats().dead_lettered == 1, what="the dead letter")
    error = r.store.get("tls", "t0").last_error
    assert error.startswith("webhook SSLCertVerificationError"), error
