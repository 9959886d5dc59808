"""The webhook bench's receivers: each the standard library's threading HTTP server in a
process of its own (the sink's process keeps its GIL to itself), keep-alive HTTP/1.1 and
a listen backlog of 1,024, answering 204.

Each records, per topic, each request's lateness at the receiver (its arrival less the
body's ``deliver_at_ms``) and counts the connections it accepted. ``hang_s`` makes it a
dead endpoint: every request waits that long before its answer. ``load`` measures a
receiver alone: requests from a process of their own, over keep-alive connections, with
no engine and no store in the way.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from typing import Any

from app.engine.http11 import ConnectionPool, parse_url

LISTEN_BACKLOG = 1024
_spawn = multiprocessing.get_context("spawn")  # no fork of a process holding RocksDB threads


class _Server(ThreadingHTTPServer):
    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True


def _serve(control: Connection, hang_s: float) -> None:
    """The receiver process: serves until told ``stop``; answers ``report`` with what it saw."""
    late_ms: dict[str, list[int]] = {}
    connections = [0]
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive

        def setup(self) -> None:
            super().setup()
            with lock:
                connections[0] += 1

        def do_POST(self) -> None:
            received_ms = time.time_ns() // 1_000_000
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if hang_s:
                time.sleep(hang_s)
            else:
                fields = json.loads(body)
                with lock:
                    late = late_ms.setdefault(fields["topic"], [])
                    late.append(received_ms - fields["deliver_at_ms"])
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = _Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    control.send(server.server_address[1])
    while control.recv() == "report":
        with lock:
            control.send({"late_ms": late_ms, "connections": connections[0]})
    server.shutdown()


class ReceiverProcess:
    """A receiver in a process of its own; a context manager that stops it."""

    def __init__(self, hang_s: float = 0.0) -> None:
        self._control, child = _spawn.Pipe()
        self._process = _spawn.Process(target=_serve, args=(child, hang_s), daemon=True)
        self._process.start()
        child.close()  # ours is the only end left: a receiver that died is an EOFError
        self.url = f"http://127.0.0.1:{self._control.recv()}/hook"

    def report(self) -> dict[str, Any]:
        """``late_ms`` (per topic, one value per request answered) and ``connections``."""
        self._control.send("report")
        report: dict[str, Any] = self._control.recv()
        return report

    def __enter__(self) -> ReceiverProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self._control.send("stop")
        self._process.join(10)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(10)


def _load(url: str, requests: int, concurrency: int, out: Connection) -> None:
    async def run() -> float:
        pool = ConnectionPool(parse_url(url), 64 * 1024)
        limit = asyncio.Semaphore(concurrency)
        body = json.dumps({"topic": "alone", "deliver_at_ms": 0}).encode()

        async def one() -> None:
            async with limit:
                status = await pool.post("Content-Type: application/json\r\n", body)
                assert status == 204, status

        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(requests)))
        seconds = time.perf_counter() - started
        await pool.close()
        return seconds

    out.send(asyncio.run(run()))


def load(url: str, requests: int, concurrency: int) -> dict[str, Any]:
    """The receiver alone: ``requests`` POSTs, ``concurrency`` at a time, from a process of
    their own (timed there, from the first request to the last answer)."""
    theirs, ours = _spawn.Pipe()
    process = _spawn.Process(target=_load, args=(url, requests, concurrency, ours))
    process.start()
    ours.close()
    try:
        seconds = float(theirs.recv())
    finally:
        process.join(30)
    per_s = round(requests / seconds)
    return {"requests": requests, "concurrency": concurrency, "requests_per_s": per_s}
