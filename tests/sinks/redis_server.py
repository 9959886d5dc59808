"""A real ``redis-server`` (Debian's package) on a free 127.0.0.1 port with a temp dir.

``make test`` installs it before pytest when missing (``tools/ensure-packages.sh``); the
tests install nothing themselves. Skipped (failed under CI) when it is not there.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import redis

REDIS_SERVER = "redis-server"


def redis_server_binary() -> str:
    found = shutil.which(REDIS_SERVER)
    if found is None:
        message = "redis-server is missing: `make test` installs it (tools/ensure-packages.sh)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """Start, stop and restart one redis-server; ``url`` stays the same across restarts."""

    def __init__(self, directory: Path) -> None:
        self.binary = redis_server_binary()
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--dir", str(self.directory), "--save", "", "--appendonly", "no"]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = self.client()
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise
                time.sleep(0.02)
        client.close()

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        self.process = None
