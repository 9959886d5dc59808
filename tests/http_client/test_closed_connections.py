"""A kept-alive connection the server closes as the next request goes out (uvicorn closes
one idle past 5 s): a read is sent once more on a new connection, a write is not.

The server is a real socket on 127.0.0.1 that answers the first request of each
connection with keep-alive, then reads the second and closes without an answer, as a
server whose keep-alive timeout fired at that moment does.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from typing import BinaryIO

import httpx
import pytest

from client import AsyncTimerStoreClient, TimerStoreClient

GROUPS = b'{"topic":"t","log_end_offset":3,"groups":[]}'


class ClosingServer:
    """Each connection: one answer, then the next request read and left unanswered."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.1)  # accept wakes up to see stop()
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.requests: list[bytes] = []  # every request line received
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.stopped = threading.Event()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:  # closed by stop()
                return
            with conn:
                conn.settimeout(10)
                reader = conn.makefile("rb")
                self._read_request(reader)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    + b"Content-Length: %d\r\n\r\n" % len(GROUPS)
                    + GROUPS
                )
                self._read_request(reader)
                reader.close()
                conn.shutdown(socket.SHUT_RDWR)  # closed, unanswered

    def _read_request(self, reader: BinaryIO) -> None:
        line = reader.readline()
        if not line:
            return
        self.requests.append(line.split(b" HTTP/")[0])
        length = 0
        while (header := reader.readline()) not in (b"\r\n", b""):
            name, _, value = header.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        reader.read(length)

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(10)
        self.sock.close()


@pytest.fixture
def server() -> Iterator[ClosingServer]:
    running = ClosingServer()
    running.thread.start()
    yield running
    running.stop()


def test_a_read_on_a_connection_closed_unanswered_is_sent_again(server: ClosingServer) -> None:
    with TimerStoreClient(server.url) as ts:
        assert ts.groups("t").log_end_offset == 3
        assert ts.groups("t").log_end_offset == 3  # its first try met the closed connection
    assert server.requests == [b"GET /v1/topics/t/groups"] * 3


def test_a_write_on_a_connection_closed_unanswered_is_not(server: ClosingServer) -> None:
    with TimerStoreClient(server.url) as ts:
        assert ts.groups("t").log_end_offset == 3
        with pytest.raises(httpx.RemoteProtocolError):
            ts.commit("t", "g", 1)
    assert server.requests == [b"GET /v1/topics/t/groups", b"POST /v1/topics/t/groups/g/commit"]


def test_the_async_client_sends_a_read_again_too(server: ClosingServer) -> None:
    async def twice() -> list[int]:
        async with AsyncTimerStoreClient(server.url) as ts:
            return [(await ts.groups("t")).log_end_offset for _ in range(2)]

    assert asyncio.run(twice()) == [3, 3]
    assert server.requests == [b"GET /v1/topics/t/groups"] * 3
