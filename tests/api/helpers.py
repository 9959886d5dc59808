"""API test helpers: TestClient apps on a fake clock, a real uvicorn in a thread, and a
``timerstore serve`` subprocess. Every store is a real RocksDB in a temporary directory
and every socket is on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi.testclient import TestClient

from api.app import create_app
from api.server import uvicorn_options
from app.clock import FakeClock
from app.config import Settings, load_settings
from app.engine.sinks import CallbackSink, Sink
from app.service import TimerService
from storage.protocol import DueTimer

ROOT = Path(__file__).resolve().parents[2]
T0_MS = 1_700_000_000_000


def make_settings(data_dir: Path, **overrides: Any) -> Settings:
    return load_settings(environ={}, overrides={"data_dir": str(data_dir), **overrides})


class FakeApi:
    """A TestClient app with the engine stopped: tests move the clock and call run_once."""

    def __init__(self, client: TestClient, service: TimerService, clock: FakeClock) -> None:
        self.client, self.service, self.clock = client, service, clock

    def deliver_due(self) -> int:
        assert self.service.engine is not None
        return self.service.engine.run_once(self.clock.now_ms())

    def stats(self) -> dict[str, Any]:
        r = self.client.get("/v1/stats")
        assert r.status_code == 200, r.text
        return dict(r.json())


class FailingSink(CallbackSink):
    """Refuses every batch, so that with ``max_attempts`` 1 a due timer is dead-lettered."""

    name = "failing"

    def __init__(self) -> None:
        super().__init__(self._refuse)

    @staticmethod
    def _refuse(batch: Sequence[DueTimer]) -> None:
        raise ConnectionError("broker down")


class ThreadServer:
    """The real app under a real uvicorn on a random 127.0.0.1 port, in a thread."""

    def __init__(self, settings: Settings, sink: Sink | None = None) -> None:
        self.service = TimerService(settings, sink=sink)
        self.app = app = create_app(settings, service=self.service)
        # the parser and loop ``timerstore serve`` runs (api.server.uvicorn_options)
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", **uvicorn_options()
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 20
        try:
            while not self.server.started:
                assert self.thread.is_alive(), "server thread ended before it started serving"
                assert time.monotonic() < deadline, "server did not start within 20 s"
                self.thread.join(0.02)  # the poll's pause; ends at once if the thread dies
        except BaseException:
            self.stop()  # a server that failed to start must not outlive the test
            raise
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        """Stop and join the server thread; safe to call twice, or on a server whose
        ``start`` failed or never ran (fixtures register a server before starting it)."""
        self.server.should_exit = True
        if self.thread.ident is None:  # never started: nothing runs, nothing was opened
            return
        self.thread.join(30)
        assert not self.thread.is_alive(), "server thread did not stop within 30 s"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerProcess:
    """``timerstore serve`` as a subprocess (for signals)."""

    def __init__(
        self, data_dir: Path, env: Mapping[str, str] | None = None, flags: Sequence[str] = ()
    ) -> None:
        self.data_dir = data_dir
        self.env = dict(env or {})
        self.flags = list(flags)
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.log_path = data_dir.parent / f"{data_dir.name}-server.log"

    def start(self) -> str:
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("TIMERSTORE_")}
        env.update(self.env)
        cmd = [sys.executable, "-m", "timerstore", "serve", "--port", str(port)]
        cmd += ["--data-dir", str(self.data_dir), *self.flags]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                cmd, cwd=ROOT, env=env, stdout=log, stderr=log, preexec_fn=_default_sigint
            )
        self.url = f"http://127.0.0.1:{port}"
        try:
            self._wait_ready(self.proc, time.monotonic() + 30)
        except BaseException:
            self.kill()  # a server that never became ready must not outlive the test
            raise
        return self.url

    def _wait_ready(self, proc: subprocess.Popen[bytes], deadline: float) -> None:
        """Poll /readyz until it answers 200; fail if the process exits or at ``deadline``."""
        while time.monotonic() < deadline:
            assert proc.poll() is None, "server exited before it was ready:\n" + self.log()
            try:
                if httpx.get(self.url + "/readyz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise AssertionError("server did not become ready within 30 s:\n" + self.log())

    def signal(self, sig: int = signal.SIGTERM) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait(self, timeout_s: float = 30) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout_s)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def _default_sigint() -> None:
    """The server takes SIGINT as a terminal's Ctrl-C would reach it, also when the tests
    run in the background (a shell starts background jobs with SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def now_ms() -> int:
    return time.time_ns() // 1_000_000
