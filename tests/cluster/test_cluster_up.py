"""``timerstore cluster up``: three nats-servers and three nodes, every one stopped on Ctrl-C."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest

from tests.cluster.conftest import ROOT, node_env

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
START_TIMEOUT_S = 240.0


def read_lines(stream: object, lines: queue.Queue[str]) -> None:
    for raw in stream:  # type: ignore[attr-defined]
        lines.put(raw.decode(errors="replace").rstrip("\n"))


def wait_for_line(
    process: subprocess.Popen[bytes], lines: queue.Queue[str], seen: list[str], prefix: str
) -> None:
    """Until a line starts with ``prefix``; fails at the deadline, or once the process
    has exited and said everything."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while not any(line.startswith(prefix) for line in seen):
        left = deadline - time.monotonic()
        assert left > 0, f"no line {prefix!r} in:\n" + "\n".join(seen)
        exited = process.poll() is not None
        try:
            seen.append(lines.get(timeout=min(left, 1.0)))
        except queue.Empty:
            assert not exited, f"exited without a line {prefix!r}:\n" + "\n".join(seen)


def test_cluster_up_starts_three_nodes_and_ctrl_c_stops_every_process(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "timerstore", "cluster", "up", "--nodes", "3"]
    command += ["--data-root", str(tmp_path / "root")]
    process = subprocess.Popen(
        command, cwd=ROOT, env=node_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=read_lines, args=(process.stdout, lines), daemon=True).start()
    seen: list[str] = []
    children: list[psutil.Process] = []
    try:
        wait_for_line(process, lines, seen, "cluster up:")
        children = psutil.Process(process.pid).children(recursive=True)
        names = sorted(Path(c.cmdline()[0]).name for c in children)
        assert names.count("nats-server") == 3, names
        urls = [line.split()[1] for line in seen if line[:2] in ("n0", "n1", "n2")]
        assert len(urls) == 3, seen
        for index, url in enumerate(urls):
            body = httpx.get(f"{url}/v1/cluster", timeout=10).json()
            assert body["node_id"] == f"n{index}"
        process.send_signal(signal.SIGINT)
        assert process.wait(120) == 0
        wait_for_line(process, lines, seen, "cluster stopped")
        _, left = psutil.wait_procs(children, timeout=10)
        assert left == [], left
    finally:
        for child in children:
            if child.is_running():
                child.kill()
        if process.poll() is None:
            process.kill()
            process.wait(10)
