"""``timerstore serve`` with ``log_format=json``: every line of its log is one JSON object.

A real server process: start (the store line with its format and counts), a scheduled
timer (uvicorn's access line), a housekeeping run, SIGTERM (stop), then a restart that
reports the pending timer it found, with a deprecated setting it warns about and ignores.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import httpx

from tests.api.helpers import ServerProcess

ENV = {
    "TIMERSTORE_LOG_FORMAT": "json",
    "TIMERSTORE_LOG_LEVEL": "debug",  # uvicorn's access log is on at debug
    "TIMERSTORE_HOUSEKEEPING__INTERVAL_MS": "100",
}


def _events(server: ServerProcess) -> list[dict]:
    lines = [line for line in server.log().splitlines() if line.strip()]
    return [json.loads(line) for line in lines]  # any line that is not JSON fails here


def _run_once(data_dir: Path, env: dict[str, str], timers: list[dict]) -> list[dict]:
    server = ServerProcess(data_dir, {**ENV, **env})
    try:
        url = server.start()
        if len(timers) == 1:  # a single schedule: its own route and access line
            r = httpx.post(f"{url}/v1/timers", json=timers[0], timeout=10)
            assert r.status_code == 201, r.text
        else:
            r = httpx.post(f"{url}/v1/timers/batch", json={"timers": timers}, timeout=10)
            assert r.status_code == 200 and r.json()["scheduled"] == len(timers), r.text
        deadline = time.monotonic() + 30
        while not any(e.get("event") == "housekeeping" for e in _events(server)):
            assert time.monotonic() < deadline, server.log()
            time.sleep(0.05)
        server.signal(signal.SIGTERM)
        server.wait(30)
    finally:
        server.kill()
    return _events(server)


def test_serve_writes_one_json_object_per_line(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    first = _run_once(data_dir, {}, [{"topic": "orders", "id": "o1", "delay_ms": 3_600_000}])
    by_event = {e["event"]: e for e in first}
    opened = by_event["store_opened"]
    assert (opened["store"], opened["format"], opened["pending"]) == ("rocks", "rocksdb-v3", 0)
    assert "started" in by_event and "stopped" in by_event
    access = [e for e in first if e["event"] == "access" and e["path"] == "/v1/timers"]
    assert [(a["method"], a["status"]) for a in access] == [("POST", 201)]
    assert by_event["housekeeping"]["watermark_ms"] >= 0
    assert all({"ts", "level", "logger", "message"} <= e.keys() for e in first)
    assert any(e["logger"].startswith("uvicorn") and e["event"] == "log" for e in first)
    assert not any(e["event"] == "deprecated_setting" for e in first)

    # the restart: a deprecated setting starts the service with a warning, and a batch
    # larger than the chunk it once set is still one batch (the log file is appended to)
    batch = [{"topic": "t", "id": f"i{n}", "delay_ms": 60_000} for n in range(20)]
    deprecated = {"TIMERSTORE_LIMITS__STORE_CHUNK_TIMERS": "7"}
    second = _run_once(data_dir, deprecated, batch)[len(first) :]
    opened = next(e for e in second if e["event"] == "store_opened")
    assert (opened["pending"], opened["topics"]) == (1, 1)
    [warning] = [e for e in second if e["event"] == "deprecated_setting"]
    assert (warning["level"], warning["setting"]) == ("warning", "limits.store_chunk_timers")
