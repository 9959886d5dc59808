"""bench.http_load refuses to report a rate when its requests did not complete, and
``--single`` reports single requests beside /healthz."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from tests.api.helpers import ThreadServer, make_settings

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


def _single(url: str, out: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "bench.http_load", "--single", "--quick", "--url", url]
    cmd += ["--repeats", "1", "--connections", "4", "--out", str(out)]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_single_reports_the_post_beside_healthz(tmp_path: Path) -> None:
    server = ThreadServer(make_settings(tmp_path / "data"))
    try:
        done = _single(server.start(), tmp_path / "single.json")
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "single.json").read_text())
    names = [f["name"] for f in result["single"]]
    assert names == ["GET /healthz", "POST /v1/timers", "GET /v1/timers (unknown)"]
    assert all(f["per_s"] > 0 and f["p99_ms"] >= f["p50_ms"] > 0 for f in result["single"])
    assert result["post_to_healthz"] > 0 and "of /healthz" in done.stdout
    assert set(result["hour"]) == {
        "before_wall_ms",
        "after_wall_ms",
        "before_cpu_ms",
        "after_cpu_ms",
    }


def test_single_gives_no_rate_when_the_posts_are_refused(tmp_path: Path) -> None:
    server = ThreadServer(make_settings(tmp_path / "data", api_keys=["k"]))  # 401 without it
    try:
        done = _single(server.start(), tmp_path / "single.json")
    finally:
        server.stop()
    assert done.returncode != 0
    assert "HTTP status 401" in done.stderr and "no rate computed" in done.stderr
    assert not (tmp_path / "single.json").exists()


def test_a_quick_run_reports_batch_cancels_that_each_removed_a_timer(tmp_path: Path) -> None:
    server = ThreadServer(make_settings(tmp_path / "data"))
    try:
        out = tmp_path / "run.json"
        cmd = [sys.executable, "-m", "bench.http_load", "--quick", "--url", server.start()]
        done = subprocess.run(
            [*cmd, "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=120
        )
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    figures = {f["name"]: f for f in json.loads(out.read_text())["figures"]}
    for kind in ("json", "msgpack"):
        cancel = figures[f"POST /v1/timers/cancel (200 per body, {kind})"]
        # the run exits non-zero unless /v1/stats counted every one of them removed
        assert (cancel["requests"], cancel["timers"]) == (10, 2000)
        assert cancel["timers_per_s"] > 0
