"""``timerstore serve`` answers its probes while the store opens.

The port listens before the store opens (a long RocksDB WAL replay can take minutes, and
an orchestrator kills a pod whose liveness probe gets no answer): /healthz 200, /readyz
503 "starting", every other route 503 with the error shape. The open is held up for
real: the wheel store's ``shape`` file is a FIFO, whose ``open`` blocks in the server
until the test writes the record into it (the correct one, or a bad one).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from api.server import EXIT_STORE_UNAVAILABLE
from tests.api.helpers import ROOT, free_port, make_settings
from tests.waiting import wait_for

SHAPE_OF_DEFAULTS = b'{"precision_ms": %d, "slots": %d}'


class OpeningServer:
    """``timerstore serve --store wheel`` whose open waits for the FIFO ``wheel/shape``."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        (data_dir / "wheel").mkdir(parents=True)
        self.fifo = data_dir / "wheel" / "shape"
        os.mkfifo(self.fifo)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.stderr_path = data_dir.parent / "stderr.txt"
        cmd = [sys.executable, "-m", "timerstore", "serve", "--store", "wheel"]
        cmd += ["--port", str(self.port), "--data-dir", str(data_dir)]
        with open(self.stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen(
                cmd, cwd=ROOT, env={"PATH": "/usr/bin:/bin"}, stdout=stderr, stderr=stderr
            )

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def healthy(self) -> bool:
        assert self.proc.poll() is None, "server exited:\n" + self.stderr()
        try:
            return httpx.get(self.url + "/healthz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def wait_for_healthz(self) -> None:
        """Poll until /healthz answers 200 while the store is (still) opening."""
        wait_for(self.healthy, 20, "/healthz 200 while the store opens (see stderr.txt)")

    def ready(self) -> bool:
        return httpx.get(self.url + "/readyz", timeout=5).status_code == 200

    def wait_until_ready(self) -> None:
        wait_for(self.ready, 30, "/readyz 200 once the store is open (see stderr.txt)")

    def finish_opening(self, record: bytes) -> None:
        """Write ``record`` into the FIFO the server's open is reading."""
        opened: list[int] = []

        def reader_waits() -> bool:
            try:
                opened.append(os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:  # ENXIO: the server has not opened it for reading yet
                return False
            return True

        wait_for(reader_waits, 20, "the store to read its shape file")
        fd = opened[0]
        try:
            os.write(fd, record)
        finally:
            os.close(fd)

    def probe_process(self) -> int:
        """The pid of the forked process that answers while the store opens."""
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        [pid] = children.split()
        return int(pid)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def opening(tmp_path: Path) -> Iterator[OpeningServer]:
    server = OpeningServer(tmp_path / "data")
    try:
        yield server
    finally:
        server.kill()


def _default_shape(data_dir: Path) -> bytes:
    wheel = make_settings(data_dir).wheel
    return SHAPE_OF_DEFAULTS % (wheel.precision_ms, wheel.slots)


def _refuses_connections(url: str) -> bool:
    """Nothing listens on the port (a reset or a timeout is not that yet: ask again)."""
    try:
        httpx.get(url + "/healthz", timeout=1)
    except httpx.ConnectError:
        return True
    except httpx.TransportError:
        pass
    return False


def test_probes_answer_while_the_store_opens_then_the_service_serves(
    opening: OpeningServer,
) -> None:
    opening.wait_for_healthz()
    url = opening.url
    r = httpx.get(url + "/readyz", timeout=5)
    assert (r.status_code, r.json()) == (503, {"status": "starting"})
    r = httpx.head(url + "/healthz", timeout=5)
    assert (r.status_code, r.content, r.headers["content-type"]) == (200, b"", "application/json")
    assert httpx.head(url + "/readyz", timeout=5).status_code == 503
    for method, path in (("GET", "/v1/stats"), ("POST", "/v1/timers"), ("GET", "/metrics")):
        r = httpx.request(method, url + path, json={"topic": "t", "delay_ms": 1}, timeout=5)
        assert r.status_code == 503, (method, path, r.text)
        error = r.json()["error"]
        assert error["code"] == "unavailable" and "starting" in error["message"], error
        assert r.headers["retry-after"] == "1"

    opening.finish_opening(_default_shape(opening.data_dir))
    opening.wait_until_ready()
    r = httpx.post(url + "/v1/timers", json={"topic": "t", "id": "a", "delay_ms": 60_000})
    assert r.status_code == 201, r.text
    assert httpx.get(url + "/v1/timers/t/a").json()["state"] == "pending"
    opening.proc.send_signal(signal.SIGTERM)
    assert opening.proc.wait(30) == 0, opening.stderr()


def test_a_store_that_fails_to_open_after_probes_were_answered_is_still_one_line(
    opening: OpeningServer,
) -> None:
    opening.wait_for_healthz()
    opening.finish_opening(b"not a shape record")
    assert opening.proc.wait(30) == EXIT_STORE_UNAVAILABLE, opening.stderr()
    lines = opening.stderr().strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in lines[0], lines  # as before: one line
    assert lines[0].startswith("timerstore serve: ") and "not a wheel shape record" in lines[0]
    assert str(opening.fifo) in lines[0]
    assert _refuses_connections(opening.url)  # the probe process is gone with it


def test_the_probe_process_ends_when_the_server_is_killed_while_opening(
    opening: OpeningServer,
) -> None:
    opening.wait_for_healthz()
    probes = opening.probe_process()
    try:
        opening.kill()  # SIGKILL: no cleanup of any kind runs in the server
        # nothing may go on saying "ok"
        wait_for(lambda: _refuses_connections(opening.url), 10, "the probe process to end")
    finally:
        with contextlib.suppress(ProcessLookupError):  # still there only if the test failed
            os.kill(probes, signal.SIGKILL)


def _trickle(port: int, stop: threading.Event) -> None:
    """A client that sends a request line a byte at a time, never finishing it."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        for byte in b"GET /healthz HTTP/1.1\r\nHost: x\r\n" * 100:
            if stop.wait(0.3):
                return
            try:
                sock.sendall(bytes([byte]))
            except OSError:  # the probe process is gone: uvicorn or nothing has the port now
                return


def test_a_client_trickling_a_request_does_not_hold_the_start_up(
    opening: OpeningServer,
) -> None:
    """The probe process waited for every connection it had accepted before it ended, so
    one trickling client held the start until the probe process was killed (5 s)."""
    opening.wait_for_healthz()
    tasks = Path(f"/proc/{opening.probe_process()}/task")
    # by thread id, not by count: the thread that answered wait_for_healthz may still be
    # ending, and its exit would hide the new one in a count
    before = {task.name for task in tasks.iterdir()}
    stop = threading.Event()
    trickler = threading.Thread(target=_trickle, args=(opening.port, stop))
    trickler.start()
    try:
        wait_for(
            lambda: bool({task.name for task in tasks.iterdir()} - before),
            10,
            "the probe process to take the connection",
        )
        opening.finish_opening(_default_shape(opening.data_dir))
        opening.wait_until_ready()
    finally:
        stop.set()
        trickler.join(30)
    opening.proc.send_signal(signal.SIGTERM)
    assert opening.proc.wait(30) == 0, opening.stderr()
    assert "probe process did not end" not in opening.stderr()
