"""SIGTERM during a burst loses nothing; a second signal exits at once, still losing nothing.

``timerstore serve`` runs as a subprocess. Writers schedule batches (half due at once, so
the engine is delivering while the signal lands; half due in an hour) and remember every
acknowledged id. After the stop and a restart on the same data directory, every
acknowledged timer is pending or delivered, and each delivered one is in the topic log
exactly once.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from tests.api.helpers import ROOT, ServerProcess, free_port

ENV = {"TIMERSTORE_ENGINE__TICK_MS": "5", "TIMERSTORE_SHUTDOWN_GRACE_MS": "10000"}
HOUR_MS = 3_600_000


class Burst:
    def __init__(self, url: str, writers: int = 2) -> None:
        self.url = url
        self.acked: dict[str, bool] = {}  # id -> due now
        self.refused = 0
        self.unexpected: list[str] = []  # answers other than 200 or 503, checked by join
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._write, args=(w,)) for w in range(writers)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def join(self) -> None:
        """Stop the writers; fail on anything they saw but 200, 503 or a closed socket
        (an assert inside a thread would only be a warning)."""
        self.stop.set()
        for t in self.threads:
            t.join(60)
        assert not [t for t in self.threads if t.is_alive()], "a writer did not stop"
        assert not self.unexpected, self.unexpected

    def _write(self, writer: int) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as client:
            for k in range(10_000):  # bounded; the signal ends it long before
                if self.stop.is_set():
                    return
                timers = [
                    {"topic": "burst", "id": f"w{writer}-{k}-{j}", "delay_ms": (j % 2) * HOUR_MS}
                    for j in range(50)
                ]
                try:
                    r = client.post("/v1/timers/batch", json={"timers": timers})
                except httpx.TransportError:
                    return  # the server stopped listening
                if r.status_code != 200:
                    with self.lock:
                        if r.status_code == 503:
                            self.refused += 1
                        else:
                            self.unexpected.append(f"{r.status_code} {r.text}")
                    return
                with self.lock:
                    for t in timers:
                        self.acked[t["id"]] = t["delay_ms"] == 0


def _check_nothing_lost(data_dir: Path, acked: dict[str, bool]) -> None:
    server = ServerProcess(data_dir, ENV)
    url = server.start()
    try:
        with httpx.Client(base_url=url, timeout=30) as client:
            due = {i for i, now in acked.items() if now}
            deadline = time.monotonic() + 60
            log: list[dict] = []
            while time.monotonic() < deadline:
                r = client.get(
                    "/v1/topics/burst/messages", params={"offset": len(log), "limit": 1000}
                )
                log += r.json()["messages"]
                if len(log) >= len(due) and client.get("/v1/stats").json()["in_flight"] == 0:
                    break
                if not r.json()["messages"]:
                    time.sleep(0.05)
            counts = Counter(m["id"] for m in log)
            assert not [i for i, n in counts.items() if n > 1], "delivered twice"
            assert due <= set(counts), f"{len(due - set(counts))} acknowledged due timers lost"
            later = sorted(i for i, now in acked.items() if not now)
            for timer_id in later[:: max(1, len(later) // 200)]:  # a spread sample by GET
                r = client.get(f"/v1/timers/burst/{timer_id}")
                assert r.status_code == 200 and r.json()["state"] == "pending", timer_id
            stats = client.get("/v1/stats").json()
            assert stats["pending_by_topic"].get("burst", 0) >= len(later)
    finally:
        server.signal(signal.SIGTERM)
        server.wait()


@pytest.mark.slow
def test_sigterm_during_a_burst_loses_nothing(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = ServerProcess(data_dir, ENV)
    burst = Burst(server.start())
    try:
        burst.start()
        deadline = time.monotonic() + 30
        while len(burst.acked) < 3000 and time.monotonic() < deadline:
            time.sleep(0.02)
        server.signal(signal.SIGTERM)
        assert server.wait(60) == 0, server.log()
    finally:
        burst.join()
        server.kill()
    assert len(burst.acked) >= 3000
    assert "service stopped" in server.log()
    _check_nothing_lost(data_dir, burst.acked)


@pytest.mark.slow
def test_second_signal_forces_exit_without_losing_acknowledged_writes(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = ServerProcess(data_dir, ENV)
    url = server.start()
    burst = Burst(url, writers=1)
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as slow:
        # a request whose body never finishes keeps the graceful stop waiting
        slow.sendall(b"POST /v1/timers HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        try:
            burst.start()
            deadline = time.monotonic() + 30
            while len(burst.acked) < 1000 and time.monotonic() < deadline:
                time.sleep(0.02)
            server.signal(signal.SIGTERM)
            while "stopping (again to force)" not in server.log() and time.monotonic() < deadline:
                time.sleep(0.01)
            burst.join()
            server.signal(signal.SIGTERM)
            code = server.wait(30)
        finally:
            burst.join()
            server.kill()
    assert code == 130, server.log()
    assert "exiting now" in server.log()
    _check_nothing_lost(data_dir, burst.acked)


def wait_until_ready(url: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, "exited before it was ready"
        try:
            if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise AssertionError("not ready within 30 s")


def test_make_serve_stopped_by_sigterm_exits_0_without_terminated(tmp_path: Path) -> None:
    """As ``make serve`` runs it: a SIGTERM to the service made make report
    "[Makefile: serve] Terminated" and exit 2; now the recipe succeeds."""
    port = free_port()
    makefile = tmp_path / "Makefile"
    makefile.write_text(
        f"serve:\n\t{sys.executable} -m timerstore serve --port {port} "
        f"--data-dir {tmp_path / 'data'}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIMERSTORE_")}
    make = subprocess.Popen(
        ["make", "-f", str(makefile), "serve"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_ready(url, make)
        (service,) = Path(f"/proc/{make.pid}/task/{make.pid}/children").read_text().split()
        os.kill(int(service), signal.SIGTERM)
        output, _ = make.communicate(timeout=60)
    finally:
        make.kill()
        make.wait(10)
    assert make.returncode == 0, output
    assert "Terminated" not in output and "service stopped" in output, output


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
def test_a_signal_stops_cleanly_with_its_status(tmp_path: Path, sig: int, status: int) -> None:
    """SIGTERM exits 0 after the graceful stop: it was -15 (143 in a shell, and ``make
    serve`` printed "Terminated"), because uvicorn raised the signal again. SIGINT exits
    130, as a shell reports Ctrl-C: it was a 30-line KeyboardInterrupt trace."""
    server = ServerProcess(tmp_path / "data", ENV)
    url = server.start()
    try:
        r = httpx.post(url + "/v1/timers", json={"topic": "t", "id": "a", "delay_ms": HOUR_MS})
        assert r.status_code == 201
        server.signal(sig)
        code = server.wait(30)
    finally:
        server.kill()
    assert code == status, server.log()
    assert "Traceback" not in server.log() and "service stopped" in server.log()
    again = ServerProcess(tmp_path / "data", ENV)
    try:
        assert httpx.get(again.start() + "/v1/timers/t/a").json()["state"] == "pending"
    finally:
        again.signal(signal.SIGTERM)
        again.wait(30)
        again.kill()
