"""timerstore nodes as child processes (``python -m timerstore serve``) joined to a cluster.

Used by ``timerstore cluster up``, the fault benchmark and the tests (beside ``natsd``).
Each node is configured through its environment only (``TIMERSTORE_CLUSTER__*``,
``TIMERSTORE_PORT``, ``TIMERSTORE_DATA_DIR``), as an operator would; its output goes to
``<data_dir>.log``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx

from cluster.natsd import pause_process
from storage.errors import StoreOpenError

READY_TIMEOUT_S = 120.0  # a node opens its store, joins, takes and restores partitions
STOP_TIMEOUT_S = 30.0  # a graceful stop commits queued batches and hands leases back
POLL_S = 0.05


def node_environment(
    node_id: str, port: int, data_dir: Path, nats_urls: Sequence[str], extra: Mapping[str, str]
) -> dict[str, str]:
    """The environment of one node: ``extra`` over the node's own settings over this
    process's environment."""
    env = dict(os.environ)
    env.update(
        {
            "TIMERSTORE_HOST": "127.0.0.1",
            "TIMERSTORE_PORT": str(port),
            "TIMERSTORE_DATA_DIR": str(data_dir),
            "TIMERSTORE_CLUSTER__NATS_URLS": ",".join(nats_urls),
            "TIMERSTORE_CLUSTER__NODE_ID": node_id,
            "TIMERSTORE_CLUSTER__ADVERTISE_URL": f"http://127.0.0.1:{port}",
        }
    )
    env.update(extra)
    return env


class NodeProcess:
    """One node: ``start``, ``wait_ready`` (``/readyz`` 200), ``stop`` (SIGTERM, then
    SIGKILL after STOP_TIMEOUT_S), ``kill`` (SIGKILL), ``pause``/``resume``
    (SIGSTOP/SIGCONT). ``start`` again after a stop or kill reuses the port and data dir."""

    def __init__(
        self,
        node_id: str,
        port: int,
        data_dir: Path,
        nats_urls: Sequence[str],
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        self.node_id = node_id
        self.port = port
        self.data_dir = data_dir
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = data_dir.with_name(data_dir.name + ".log")
        self.env = node_environment(node_id, port, data_dir, nats_urls, extra_env or {})
        self.process: subprocess.Popen[bytes] | None = None
        self._stopping = False

    @property
    def pid(self) -> int | None:
        process = self.process
        return None if process is None or process.poll() is not None else process.pid

    def start(self) -> None:
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        self._stopping = False
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "timerstore", "serve"],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a terminal's Ctrl-C reaches `cluster up` only
            )

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until ``/readyz`` answers 200; StoreOpenError (with the log's tail) if the
        process exits or the time runs out first."""
        deadline = time.monotonic() + timeout_s
        with httpx.Client(base_url=self.url, timeout=2) as client:
            while True:
                if self.pid is None:
                    raise StoreOpenError(f"node {self.node_id} exited:\n{self.log_tail()}")
                try:
                    if client.get("/readyz").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass  # not listening yet
                if time.monotonic() > deadline:
                    raise StoreOpenError(
                        f"node {self.node_id} not ready after {timeout_s:.0f} s:\n"
                        + self.log_tail()
                    )
                time.sleep(POLL_S)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _signal(self, signum: int) -> None:
        if self.pid is not None and self.process is not None:
            self.process.send_signal(signum)

    def pause(self) -> None:
        if self.pid is not None and self.process is not None:
            pause_process(self.process)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def kill(self) -> None:
        self._signal(signal.SIGCONT)
        self._signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(STOP_TIMEOUT_S)

    def stop(self) -> None:
        """Graceful: SIGTERM (after SIGCONT, should it be paused), SIGKILL when it takes
        longer than STOP_TIMEOUT_S; always reaped."""
        self.request_stop()
        self.wait_stopped()

    def request_stop(self) -> None:
        """SIGTERM once (a second one would make the node exit at once)."""
        if self.pid is not None and not self._stopping:
            self._stopping = True
            self._signal(signal.SIGCONT)
            self._signal(signal.SIGTERM)

    def wait_stopped(self) -> None:
        if self.process is None:
            return
        try:
            self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(STOP_TIMEOUT_S)
