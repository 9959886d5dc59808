"""``/readyz`` turns unready when it must (issue 36, part 1), with a real server:

* a stage of the engine that has failed every step for longer than
  ``engine.stage_failure_unready_ms``, and ready again after its first good step;
* a full disk (a 16 MiB tmpfs under a ``timerstore serve`` process): every write is a
  507 naming the cause, ``/readyz`` is 503 and ``/metrics`` says so until space is freed.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from storage.rocks import keys as layout
from tests.api.helpers import ServerProcess, ThreadServer, make_settings, now_ms
from tests.api.test_metrics import Scrape
from tests.waiting import wait_for

BAD_KEY_NAMES = b"no-separator"  # a timers key whose names hold no 0x00: the scan raises


def readyz(client: httpx.Client) -> httpx.Response:
    return client.get("/readyz")


def test_a_stage_failing_longer_than_the_setting_is_unready_until_it_succeeds(tmp_path):
    settings = make_settings(
        tmp_path / "data", engine={"tick_ms": 5, "stage_failure_unready_ms": 300}
    )
    srv = ThreadServer(settings)
    client = httpx.Client(base_url=srv.start(), timeout=30)
    try:
        assert readyz(client).status_code == 200
        store = srv.service.store
        # due a little ahead: a key at now may already lie behind the scan cursor
        key = layout.u64(now_ms() + 200) + BAD_KEY_NAMES
        store.handles.cfs["timers"][key] = b"\x90"  # type: ignore[attr-defined]
        wait_for(lambda: readyz(client).status_code == 503, 30, "unready")
        body = readyz(client).json()
        assert body["status"] == "not_ready" and "scanner" in body["reason"], body
        assert "stage_failure_unready_ms" in body["reason"]
        failing = Scrape(client.get("/metrics").text).value(
            "timerstore_stage_failing_seconds", stage="timerstore-scanner"
        )
        assert failing > 0.3
        del store.handles.cfs["timers"][key]  # type: ignore[attr-defined]
        wait_for(lambda: readyz(client).status_code == 200, 30, "ready again")
    finally:
        client.close()
        srv.stop()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs, unmounted at the end (root only: skipped otherwise)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


# RocksDB clears a full disk's error by itself once the free space reaches its largest
# memtable: small ones here, so that freeing the ballast is enough
SMALL_MEMTABLES = {
    "TIMERSTORE_ROCKS__TIMERS_WRITE_BUFFER_BYTES": str(2 << 20),
    "TIMERSTORE_ROCKS__WRITE_BUFFER_BYTES": str(1 << 20),
    "TIMERSTORE_ROCKS__WRITE_BUFFER_TOTAL_BYTES": str(4 << 20),
}


def fill(client: httpx.Client) -> tuple[int, httpx.Response]:
    """POST batches of far-future timers until one is refused; (accepted, the refusal)."""
    payload = "x" * 2000
    for n in range(2000):
        timers = [
            {"topic": "fill", "id": f"b{n}-{i}", "delay_ms": 3_600_000, "payload": payload}
            for i in range(50)
        ]
        r = client.post("/v1/timers/batch", json={"timers": timers})
        if r.status_code != 200:
            return n * 50, r
    raise AssertionError("the disk never filled")


@pytest.mark.slow
def test_a_full_disk_is_a_507_and_unready_until_space_is_freed(tmp_path, small_disk):
    ballast = small_disk / "ballast"
    ballast.write_bytes(b"\0" * (9 << 20))
    srv = ServerProcess(small_disk / "data", env=SMALL_MEMTABLES)
    srv.log_path = tmp_path / "server.log"  # not on the full disk
    client = None
    try:
        client = httpx.Client(base_url=srv.start(), timeout=30)
        accepted, refused = fill(client)
        assert accepted > 0 and refused.status_code == 507, refused.text
        error = refused.json()["error"]
        assert error["code"] == "disk_full" and "disk under the store" in error["message"]
        assert "is full" in error["message"]
        body = readyz(client).json()
        assert readyz(client).status_code == 503 and "disk" in body["reason"], body
        metrics = Scrape(client.get("/metrics").text)
        assert metrics.value("timerstore_disk_full") == 1
        assert metrics.value("timerstore_store_write_errors_total", reason="no_space") >= 1
        assert client.get("/v1/timers/fill/b0-0").status_code == 200  # reads still work
        log = srv.log()
        assert "Traceback" not in log and "unexpected error" not in log, log[-2000:]
        assert "disk under the store" in log
        ballast.unlink()
        wait_for(lambda: readyz(client).status_code == 200, 30, "ready once space is freed")
        r = client.post("/v1/timers", json={"topic": "fill", "id": "after", "delay_ms": 1000})
        assert r.status_code == 201, r.text
        assert Scrape(client.get("/metrics").text).value("timerstore_disk_full") == 0
    finally:
        if client is not None:
            client.close()
        with contextlib.suppress(Exception):
            srv.kill()
