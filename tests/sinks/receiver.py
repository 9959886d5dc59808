"""A real webhook receiver on 127.0.0.1 (the standard library's threading HTTP server).

It checks every request's ``Timerstore-Signature`` the way a user's receiver would (the
example in docs/sinks.md), records what arrived, and answers by a rule the test sets: a status
per (id, attempt), or a hang past the sender's timeout. With ``body_bytes`` it answers a
body, one byte every ``byte_interval_s``: a slow response no single read waits long for.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def verify(secret: str, header: str, body: bytes) -> bool:
    """The receiver's check: HMAC-SHA256 of the secret over "<t>.<raw body>"."""
    parts = dict(p.split("=", 1) for p in header.split(","))
    expected = hmac.new(secret.encode(), parts["t"].encode() + b"." + body, hashlib.sha256)
    return hmac.compare_digest(expected.hexdigest(), parts["v1"])


class _Server(ThreadingHTTPServer):
    """The standard server with a listen backlog above the sink's concurrency.

    The default backlog of 5 refused connections when 16 attempts arrived at once on a
    loaded machine: the sender then counted an attempt that never reached ``arrivals``.
    """

    request_queue_size = 128
    daemon_threads = True


@dataclass
class Arrival:
    body: dict[str, Any]
    headers: dict[str, str]
    signed: bool
    status: int
    received_ms: int


# (body) -> status to answer, or None to hang for ``hang_s``
Rule = Callable[[dict[str, Any]], int | None]


@dataclass
class Receiver:
    secret: str
    rule: Rule = lambda body: 200
    hang_s: float = 2.0
    body_bytes: int = 0
    byte_interval_s: float = 0.0
    arrivals: list[Arrival] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    in_progress: int = 0
    max_in_progress: int = 0
    stopping: threading.Event = field(default_factory=threading.Event)

    def start(self) -> str:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the sender's pool expects

            def do_POST(self) -> None:
                receiver.handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        received_ms = int(time.time() * 1000)
        raw = request.rfile.read(int(request.headers["Content-Length"]))
        body = json.loads(raw)
        signed = verify(self.secret, request.headers.get("Timerstore-Signature", "t=0,v1="), raw)
        with self.lock:
            self.in_progress += 1
            self.max_in_progress = max(self.max_in_progress, self.in_progress)
        try:
            status = self.rule(body)
            if status is None:
                time.sleep(self.hang_s)  # past the sender's timeout: a hung endpoint
                status = 200
            with self.lock:
                headers = dict(request.headers.items())
                self.arrivals.append(Arrival(body, headers, signed, status, received_ms))
            request.send_response(status)
            request.send_header("Content-Length", str(self.body_bytes))
            request.end_headers()
            self._send_body(request)
        finally:
            with self.lock:
                self.in_progress -= 1

    def _send_body(self, request: BaseHTTPRequestHandler) -> None:
        for _ in range(self.body_bytes):
            if self.stopping.wait(self.byte_interval_s):
                return
            try:
                request.wfile.write(b"x")
                request.wfile.flush()
            except OSError:  # the sender gave up and closed the connection
                return

    def ok(self) -> list[Arrival]:
        with self.lock:
            return [a for a in self.arrivals if 200 <= a.status < 300]

    def stop(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)
