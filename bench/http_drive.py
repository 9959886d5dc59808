"""A keep-alive HTTP/1.1 load client on asyncio (uvloop when installed): the driver of
``python -m bench.http_load --single``.

``http.client`` in threads spends more CPU per request than the server it drives (about
1,400 requests/s from the whole client process here), so the single-request figures need
a cheaper client: ``connections`` coroutines on one event loop, each sending one
pre-encoded request and reading its answer (status line, ``content-length``, body) before
the next, as wrk does. Each request's latency is kept for the percentiles.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass


@dataclass
class Run:
    """What one timed run of one request got back."""

    requests: int
    seconds: float
    latencies_s: list[float]
    bad_status: int  # answers outside 2xx
    first_bad: str

    @property
    def per_s(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def percentile_ms(self, fraction: float) -> float:
        if not self.latencies_s:
            return 0.0
        ordered = sorted(self.latencies_s)
        return 1000 * ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def request_bytes(method: str, path: str, body: bytes = b"", content_type: str = "") -> bytes:
    """One HTTP/1.1 request, keep-alive, encoded once."""
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    if body or method in ("POST", "PUT", "PATCH"):
        head.append(f"Content-Length: {len(body)}")
    if content_type:
        head.append(f"Content-Type: {content_type}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def _read_answer(reader: asyncio.StreamReader) -> int:
    """Read one answer whole; its status."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    if length:
        await reader.readexactly(length)
    return status


async def _connection(
    host: str, port: int, request: bytes, deadline: float, run: Run, stop_on_bad: bool
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    clock = time.perf_counter
    latencies = run.latencies_s
    try:
        while clock() < deadline and not (stop_on_bad and run.bad_status):
            started = clock()
            writer.write(request)
            status = await _read_answer(reader)
            latencies.append(clock() - started)
            run.requests += 1
            if not 200 <= status < 300:
                run.bad_status += 1
                run.first_bad = run.first_bad or f"HTTP status {status}"
                if stop_on_bad:
                    return
    finally:
        writer.close()


async def _drive(
    host: str, port: int, request: bytes, connections: int, seconds: float, stop_on_bad: bool
) -> Run:
    run = Run(0, 0.0, [], 0, "")
    started = time.perf_counter()
    deadline = started + seconds
    await asyncio.gather(
        *(_connection(host, port, request, deadline, run, stop_on_bad) for _ in range(connections))
    )
    run.seconds = time.perf_counter() - started
    return run


def drive(
    host: str,
    port: int,
    request: bytes,
    connections: int,
    seconds: float,
    *,
    stop_on_bad: bool = True,
) -> Run:
    """Send ``request`` over ``connections`` keep-alive connections for ``seconds``; a
    connection stops at its first answer outside 2xx unless ``stop_on_bad`` is False."""
    run = _drive(host, port, request, connections, seconds, stop_on_bad)
    try:
        import uvloop
    except ImportError:  # the client is only cheaper with it
        return asyncio.run(run)
    return uvloop.run(run)
