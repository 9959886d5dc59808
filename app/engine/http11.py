"""A small HTTP/1.1 client for the webhook sink: POSTs to one origin over a pool of
keep-alive asyncio connections.

Why not httpx: through httpx 0.28.1 a delivery cost the sink's process 4.5 to 4.9 ms of
CPU, through this client 0.23 to 0.37 ms (``docs/perf.md``, webhook section). cProfile
put 27% of httpx's time in a failed ``import sniffio`` that httpcore 1.0.9 repeats in
every lock and semaphore it sets up (anyio 4.11 stopped installing sniffio;
encode/httpcore discussion 1102), and most of the rest in its pool, which offered each
request to connection after connection. This client does only what a webhook
needs: one request line and a few headers written at once, the answer's status, and a
bounded read of its body so the connection can be used again.

The pool holds at most as many connections as requests are in flight (the lane's
semaphore bounds those, ``sinks.concurrency``). A connection idle longer than
``IDLE_EXPIRY_S`` is closed rather than reused (a receiver may close it at that moment);
a reused connection that fails before any byte of the answer came (the receiver closed
it while it was idle) is replaced by a new one once, for the same request.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import time
from dataclasses import dataclass

import certifi

from app.routing import check_url
from storage.errors import HttpProtocolError

IDLE_EXPIRY_S = 4.0  # under the 5 s idle timeout of common servers (Node, httpx's own)
HEAD_MAX_BYTES = 64 * 1024  # an answer's status line and headers
_STATUS_LINE = re.compile(rb"HTTP/1\.([01]) ([0-9]{3})(?: [^\r\n]*)?")


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a webhook URL's requests go, and the head of each request to it."""

    tls: bool
    host: str
    port: int
    target: str  # the path and query, as sent in the request line
    host_header: str


def parse_url(url: str) -> Origin:
    """The origin of a webhook URL; InvalidInputError for one the route rule refuses."""
    check_url("webhook", url)
    scheme, rest = url.split("://", 1)
    authority, slash, path = rest.partition("/")
    host, colon, port = authority.partition(":")
    tls = scheme == "https"
    target = (slash + path).split("#", 1)[0] or "/"
    return Origin(tls, host, int(port) if colon else (443 if tls else 80), target, authority)


@dataclass(frozen=True, slots=True)
class Answer:
    """An answer's status, and whether its connection may carry another request."""

    status: int
    reusable: bool


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.idle_since_s = 0.0

    def usable(self, now_s: float) -> bool:
        if now_s - self.idle_since_s > IDLE_EXPIRY_S:
            return False
        return not (self.reader.at_eof() or self.writer.is_closing())

    def abort(self) -> None:
        self.writer.transport.abort()


class ConnectionPool:
    """Keep-alive connections to one origin; ``post`` sends one request on one of them."""

    def __init__(self, origin: Origin, body_max_bytes: int) -> None:
        self.origin = origin
        self._body_max_bytes = body_max_bytes
        self._idle: list[_Connection] = []
        # the CA bundle httpx trusted (certifi's), whatever the host's store holds
        self._ssl = ssl.create_default_context(cafile=certifi.where()) if origin.tls else None

    async def post(self, headers: str, body: bytes) -> int:
        """POST ``body`` with ``headers`` (complete lines, each ending in CRLF); the
        answer's status. Raises OSError, asyncio errors or HttpProtocolError on failure;
        a connection that failed (or was cancelled mid-request) is closed."""
        o = self.origin
        head = (
            f"POST {o.target} HTTP/1.1\r\nHost: {o.host_header}\r\n"
            f"Content-Length: {len(body)}\r\n{headers}\r\n"
        ).encode("ascii")
        request = head + body
        conn = self._take()
        if conn is not None:
            try:
                return await self._exchange(conn, request)
            except _Stale:
                pass  # closed by the receiver while idle: the request goes on a new one
        return await self._exchange(await self._open(), request, stale_ok=False)

    def _take(self) -> _Connection | None:
        now_s = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if conn.usable(now_s):
                return conn
            conn.abort()
        return None

    async def _open(self) -> _Connection:
        o = self.origin
        server_hostname = o.host if self._ssl is not None else None
        reader, writer = await asyncio.open_connection(
            o.host, o.port, ssl=self._ssl, server_hostname=server_hostname, limit=HEAD_MAX_BYTES
        )
        return _Connection(reader, writer)

    async def _exchange(self, conn: _Connection, request: bytes, stale_ok: bool = True) -> int:
        try:
            conn.writer.write(request)
            try:
                await conn.writer.drain()
            except ConnectionError as exc:
                if stale_ok:
                    raise _Stale from exc
                raise
            answer = await self._read_answer(conn.reader, stale_ok)
        except BaseException:  # a failure or a cancellation (the route's timeout)
            conn.abort()
            raise
        if answer.reusable:
            conn.idle_since_s = now_s = time.monotonic()
            while self._idle and now_s - self._idle[0].idle_since_s > IDLE_EXPIRY_S:
                self._idle.pop(0).abort()  # the least recently used, idle too long
            self._idle.append(conn)
        else:
            conn.abort()
        return answer.status

    async def _read_answer(self, reader: asyncio.StreamReader, stale_ok: bool) -> Answer:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if stale_ok and not exc.partial:
                raise _Stale from exc
            raise HttpProtocolError("the connection closed before the answer's end") from exc
        except ConnectionResetError as exc:
            if stale_ok:
                raise _Stale from exc
            raise
        except asyncio.LimitOverrunError as exc:
            raise HttpProtocolError(f"answer head over {HEAD_MAX_BYTES} bytes") from exc
        status, keep_alive, headers = _parse_head(head)
        while 100 <= status < 200:  # an interim answer (100 Continue): the real one follows
            status, keep_alive, headers = _parse_head(await reader.readuntil(b"\r\n\r\n"))
        whole = await self._read_body(reader, status, headers)
        return Answer(status, keep_alive and whole)

    async def _read_body(
        self, reader: asyncio.StreamReader, status: int, headers: dict[str, str]
    ) -> bool:
        """Read the answer's body up to the bound, raw; True when read to its end."""
        if status in (204, 304):
            return True
        if "chunked" in headers.get("transfer-encoding", ""):
            return await _read_chunked(reader, self._body_max_bytes)
        length = headers.get("content-length")
        if length is None:  # delimited by the end of the connection
            await reader.read(self._body_max_bytes)
            return False
        if not length.isdigit():
            raise HttpProtocolError(f"bad Content-Length {length[:40]!r}")
        if int(length) > self._body_max_bytes:
            return False  # not read: the connection is dropped
        await reader.readexactly(int(length))
        return True

    async def close(self) -> None:
        while self._idle:
            self._idle.pop().abort()


class _Stale(Exception):
    """A reused connection failed before any byte of the answer (internal)."""


def _parse_head(head: bytes) -> tuple[int, bool, dict[str, str]]:
    """The status, whether the connection stays open, and the headers (lower-case names)."""
    status_line, *lines = head[:-4].split(b"\r\n")
    matched = _STATUS_LINE.fullmatch(status_line)
    if matched is None:
        raise HttpProtocolError(f"bad status line {status_line[:60]!r}")
    headers: dict[str, str] = {}
    for line in lines:
        name, colon, value = line.decode("latin-1").partition(":")
        if colon:
            headers[name.strip().lower()] = value.strip().lower()
    connection = headers.get("connection", "")
    keep_alive = "close" not in connection if matched[1] == b"1" else "keep-alive" in connection
    return int(matched[2]), keep_alive, headers


async def _read_chunked(reader: asyncio.StreamReader, max_bytes: int) -> bool:
    """Read a chunked body to its end (True) unless it passes ``max_bytes`` (False)."""
    read = 0
    while True:
        size_line = await reader.readuntil(b"\r\n")
        try:
            size = int(size_line.split(b";", 1)[0], 16)
        except ValueError as exc:
            raise HttpProtocolError(f"bad chunk size {size_line[:40]!r}") from exc
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, then the end
                pass
            return True
        read += size
        if read > max_bytes:
            return False
        await reader.readexactly(size + 2)
