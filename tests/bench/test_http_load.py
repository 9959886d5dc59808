"""bench.http_load refuses to report a rate when its requests did not complete."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_refused_connection_is_one_line_and_no_rate(tmp_path: Path) -> None:
    out = tmp_path / "http_load.json"
    with socket.socket() as bound:  # bound but not listening: every connect is refused
        bound.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{bound.getsockname()[1]}"
        done = subprocess.run(
            [sys.executable, "-m", "bench.http_load", "--url", url, "--quick", "--out", str(out)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode != 0
    assert "timers/s" not in done.stdout
    assert not out.exists()
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "0 of 200 requests" in lines[0] and "ConnectionRefusedError" in lines[0]
