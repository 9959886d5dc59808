"""A receiver that answers a huge or endless body: the webhook sender reads a bounded
prefix of it and drops the connection, so the answer costs neither memory nor time."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from storage.protocol import NewTimer, TimerState
from tests.waiting import wait_for

MIB = 1 << 20
HUGE_BODY_MIB = 256


class FloodReceiver:
    """Answers every POST with ``status`` and a body of ``body_mib`` MiB written as fast as
    the socket takes it (None: endless, chunked); counts the bytes the sender took."""

    def __init__(self, status: int, body_mib: int | None) -> None:
        self.status, self.body_mib = status, body_mib
        self.sent_bytes = 0
        self.answered = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    def start(self) -> str:
        flood = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                flood.answer(self)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def answer(self, request: BaseHTTPRequestHandler) -> None:
        request.send_response(self.status)
        if self.body_mib is None:
            request.send_header("Transfer-Encoding", "chunked")
        else:
            request.send_header("Content-Length", str(self.body_mib * MIB))
        request.end_headers()
        with self.lock:
            self.answered += 1
        chunk = b"x" * MIB
        framed = b"%x\r\n%s\r\n" % (len(chunk), chunk) if self.body_mib is None else chunk
        chunks = 0
        while not self.stopping.is_set() and (self.body_mib is None or chunks < self.body_mib):
            try:
                request.wfile.write(framed)
            except OSError:  # the sender closed the connection: it read all it wanted
                return
            chunks += 1
            with self.lock:
                self.sent_bytes += len(chunk)

    def stop(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


@pytest.fixture
def flood() -> Iterator[Any]:
    started: list[FloodReceiver] = []

    def start(status: int, body_mib: int | None) -> tuple[FloodReceiver, str]:
        receiver = FloodReceiver(status, body_mib)
        started.append(receiver)
        return receiver, receiver.start()

    yield start
    for receiver in started:
        receiver.stop()


def one_attempt(routed: Any, url: str, timeout_ms: int) -> Any:
    """One timer, one attempt at ``url``: its view once the attempt settled."""
    r = routed()
    r.route("flood", sink="webhook", url=url, secret="k", timeout_ms=timeout_ms, max_attempts=1)
    r.store.schedule([NewTimer("flood", "f1", r.clock.now_ms())], r.clock.now_ms())

    def settled() -> bool:
        stats = r.store.stats()
        return bool(stats.delivered + stats.dead_lettered == 1)

    wait_for(settled, timeout_s=30, what="the attempt settled")
    return r.store.get("flood", "f1")


def test_an_endless_2xx_body_is_a_delivery_not_a_timeout(routed, flood):
    """It was read until the route's timeout, about 300 MB a second into memory, and the
    attempt then failed as "webhook timed out" although the receiver had answered 200."""
    receiver, url = flood(200, None)
    view = one_attempt(routed, url, timeout_ms=1000)
    # delivered, not failed as "webhook timed out" after reading until the 1 s timeout
    assert (view.state, view.sink) == (TimerState.DELIVERED, "webhook"), view.last_error
    wait_for(lambda: receiver.answered == 1, what="the receiver's answer counted")
    assert receiver.sent_bytes < 64 * MIB  # what the socket buffers took, at most


def test_a_huge_error_body_is_not_read_and_the_status_is_the_error(routed, flood):
    receiver, url = flood(500, HUGE_BODY_MIB)
    view = one_attempt(routed, url, timeout_ms=10_000)
    assert (view.state, view.last_error) == (TimerState.DEAD_LETTERED, "webhook answered 500")
    # the sender read a bounded prefix and closed: the writer stops at the socket buffers
    wait_for(lambda: receiver.answered == 1, what="the receiver's answer counted")
    assert receiver.sent_bytes < 64 * MIB, f"{receiver.sent_bytes / MIB:.0f} MiB read"
