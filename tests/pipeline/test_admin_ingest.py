"""``POST /v1/admin/ingest``: a bulk import into a running server (real uvicorn, engine threads)."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.api.helpers import ThreadServer, make_settings, now_ms
from tests.api.test_metrics import Scrape
from tests.pipeline.helpers import row, stage
from timerstore.cli import main

ADMIN = {"Authorization": "Bearer adm"}
USER = {"Authorization": "Bearer user"}


@pytest.fixture
def server(tmp_path):
    data_dir = tmp_path / "live"
    srv = ThreadServer(
        make_settings(data_dir, admin_keys=["adm"], api_keys=["user"], engine={"tick_ms": 5})
    )
    client = httpx.Client(base_url=srv.start(), timeout=60)
    yield client, data_dir
    client.close()
    srv.stop()


def test_the_route_wants_an_admin_key_and_a_staged_directory_inside_staging(server, tmp_path):
    client, data_dir = server
    (data_dir / "staging" / "empty").mkdir(parents=True)
    body = {"stage_dir": "empty"}
    assert client.post("/v1/admin/ingest", json=body).status_code == 401
    assert client.post("/v1/admin/ingest", json=body, headers=USER).status_code == 401
    # outside staging: 403; missing: 404; empty or with a NUL byte: 422 (never a 500)
    for stage_dir, status in ((str(tmp_path), 403), ("../..", 403), ("missing", 404),
                              ("", 422), ("a\x00b", 422)):  # fmt: skip
        r = client.post("/v1/admin/ingest", json={"stage_dir": stage_dir}, headers=ADMIN)
        assert r.status_code == status and r.json()["error"]["field"] == "stage_dir", r.text
    r = client.post("/v1/admin/ingest", json=body, headers=ADMIN)  # no manifest
    assert r.status_code == 422 and "manifest.json" in r.text
    r = client.post("/v1/admin/ingest", json={"stage_dir": "empty", "x": 1}, headers=ADMIN)
    assert r.status_code == 422


def test_a_staged_import_goes_into_the_live_store_and_is_delivered(server):
    client, data_dir = server
    now = now_ms()
    stage(data_dir / "staging" / "s1", [row("live", f"i{i}", now + 300 + i) for i in range(200)])
    before = _scheduled_total(client)
    r = client.post("/v1/admin/ingest", json={"stage_dir": "s1"}, headers=ADMIN)
    assert r.status_code == 200, r.text
    assert (r.json()["added"], r.json()["files"]) == (200, 4)
    assert _scheduled_total(client) == before + 200  # ingested timers count as scheduled
    got = _read_all(client, "live", 200)
    assert client.get("/v1/stats", headers=USER).json()["pending"] == 0
    assert all(m["delivered_at_ms"] >= m["deliver_at_ms"] for m in got)


@pytest.mark.spark
def test_timerstore_import_into_a_running_server(spark, server, tmp_path, capsys):
    client, data_dir = server
    r = client.post(
        "/v1/timers", json={"topic": "imp", "id": "dup", "delay_ms": 600_000}, headers=USER
    )
    assert r.status_code == 201, r.text
    lines = [json.dumps({"topic": "imp", "id": f"r{i}", "delay_ms": i}) for i in range(2000)]
    lines += [json.dumps({"topic": "imp", "id": "dup", "delay_ms": 0}), '{"topic": "bad topic"}']
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    started = now_ms()
    code = main(
        [
            "import",
            str(tmp_path / "in.jsonl"),
            "--server",
            str(client.base_url),
            "--admin-key",
            "adm",
            "--stage-dir",
            str(data_dir / "staging" / "cli"),
            "--master",
            "local[2]",
        ]
    )
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["import"]["rows_read"], result["import"]["rejected"]) == (2002, 1)
    ingest = result["ingest"]
    assert (ingest["added"], ingest["skipped_by_reason"]) == (2000, {"pending": 1})
    # every row was past due by the time it went in: the live store must still deliver all
    got = {m["id"]: m for m in _read_all(client, "imp", 2000)}
    assert len(got) == 2000 and "dup" not in got
    assert all(m["delivered_at_ms"] >= m["deliver_at_ms"] >= started for m in got.values())
    dup = client.get("/v1/timers/imp/dup", headers=USER).json()
    assert dup["state"] == "pending" and dup["deliver_at_ms"] > now_ms() + 500_000
    assert client.get("/v1/stats", headers=USER).json()["pending"] == 1


def _read_all(client: httpx.Client, topic: str, n: int) -> list[dict]:
    got: list[dict] = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        r = client.get(
            f"/v1/topics/{topic}/messages",
            params={"offset": len(got), "wait_ms": 2000, "limit": 1000},
            headers=USER,
        )
        assert r.status_code == 200, r.text
        got.extend(r.json()["messages"])
    assert len(got) == n
    return got


def _scheduled_total(client: httpx.Client) -> float:
    r = client.get("/metrics", headers=USER)
    assert r.status_code == 200, r.text
    return Scrape(r.text).value("timerstore_timers_scheduled_total")
