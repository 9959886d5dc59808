"""Starting and stopping the peers' real servers: one process each, on loopback, in a dir.

Every server a peer system uses is started here, under the bench's work dir, on a free
127.0.0.1 port, and stopped by the system that started it (``close``, also on error).
Nothing here ever connects to a server it did not start.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psutil

from bench.systems.base import Skip

UNPRIVILEGED_USER = "nobody"  # PostgreSQL refuses to run as root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def binary(name: str, *candidates: str) -> str:
    """The server binary: the first candidate that exists, or ``name`` on the PATH."""
    for path in candidates:
        if os.path.exists(path):
            return path
    found = shutil.which(name)
    if found is None:
        raise Skip(f"{name} is not installed ({', '.join(candidates) or 'PATH'})")
    return found


def wait_for(ready: Callable[[], bool], timeout_s: float, what: str) -> float:
    """Poll ``ready`` (bounded) until it holds; return the seconds it took."""
    started = time.perf_counter()
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready after {timeout_s:g} s")
        time.sleep(0.01)
    return time.perf_counter() - started


@dataclass
class ServerProcess:
    """One server process with its log file; killed (not left behind) when stopped."""

    args: Sequence[str]
    log_path: str
    user: str | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    def start(self) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child holds it; closed below
        try:
            self.process = subprocess.Popen(
                list(self.args),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                **as_user(self.user),
            )
        finally:
            log.close()

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL to the server's process group (its own session): PostgreSQL's backends die
        with the postmaster, as in a crash of the machine's server process."""
        if self.alive:
            assert self.process is not None
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)

    def stop(self, timeout_s: float = 20.0) -> None:
        if self.alive:
            assert self.process is not None
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None

    def rss_bytes(self) -> int:
        """RSS of the server and its children (PostgreSQL's backends)."""
        if not self.alive:
            return 0
        assert self.process is not None
        try:
            root = psutil.Process(self.process.pid)
            procs = [root, *root.children(recursive=True)]
            return sum(int(p.memory_info().rss) for p in procs)
        except psutil.Error:
            return 0

    def log_tail(self, lines: int = 5) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:]).strip()
        except OSError:
            return ""


def as_user(user: str | None) -> dict[str, Any]:
    """Popen arguments that run a child as ``user`` with its own group and no others (as
    root's group the child would be judged by a dir's group bits, not its other bits)."""
    if user is None:
        return {}
    import pwd

    entry = pwd.getpwnam(user)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def give_to_user(path: str, user: str) -> None:
    """Make ``path`` (a fresh dir) the user's."""
    import pwd

    entry = pwd.getpwnam(user)
    os.makedirs(path, exist_ok=True)
    os.chown(path, entry.pw_uid, entry.pw_gid)


def searchable_by_others(path: str) -> bool:
    """Whether every ancestor of ``path`` lets other users through (o+x). pytest's temp
    dirs do not (and pytest sets its root back to 0700 whenever another run starts)."""
    parent = os.path.dirname(os.path.abspath(path))
    while parent and parent != "/":
        if not os.stat(parent).st_mode & 0o001:
            return False
        parent = os.path.dirname(parent)
    return True
