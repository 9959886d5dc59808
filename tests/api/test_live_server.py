"""Against a real uvicorn on a random 127.0.0.1 port, real clock, engine threads running."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from tests.api.helpers import ThreadServer, now_ms


def test_schedule_then_long_poll_arrives_at_or_after_its_time(live: httpx.Client) -> None:
    delays = [150, 300, 450]
    due = {}
    for i, delay in enumerate(delays):
        r = live.post("/v1/timers", json={"topic": "lp", "id": f"m{i}", "delay_ms": delay})
        assert r.status_code == 201, r.text
        due[f"m{i}"] = r.json()["deliver_at_ms"]
    offset, got = 0, {}
    deadline = time.monotonic() + 15
    while len(got) < len(delays) and time.monotonic() < deadline:
        r = live.get("/v1/topics/lp/messages", params={"offset": offset, "wait_ms": 5000})
        assert r.status_code == 200, r.text
        seen_ms = now_ms()
        body = r.json()
        for m in body["messages"]:
            got[m["id"]] = m
            assert seen_ms >= due[m["id"]], "a message was readable before its time"
            assert m["delivered_at_ms"] >= due[m["id"]] == m["deliver_at_ms"]
        offset = body["next_offset"]
    assert sorted(got) == sorted(due)
    stats = live.get("/v1/stats").json()
    assert stats["delivered"] == 3 and stats["lateness"]["early"] == 0
    assert live.get("/v1/timers/lp/m0").json()["state"] == "delivered"


def _parked(server: ThreadServer, topic: str) -> bool:
    """Wait (bounded) until a long-poll is parked on ``topic``: the server's own signal."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if server.service.notifier.waiting(topic) == 1:
            return True
        time.sleep(0.01)  # polling a state, not ordering events
    return False


def _poll_in_thread(
    client: httpx.Client, topic: str, wait_ms: int
) -> tuple[threading.Thread, dict]:
    result: dict = {}

    def poll() -> None:
        result["body"] = client.get(
            f"/v1/topics/{topic}/messages", params={"wait_ms": wait_ms}
        ).json()

    waiter = threading.Thread(target=poll)
    waiter.start()
    return waiter, result


def test_an_idle_long_poll_parks_then_times_out_empty(live_factory) -> None:
    client, server = live_factory()
    waiter, result = _poll_in_thread(client, "idle", 300)
    assert _parked(server, "idle")
    waiter.join(15)
    assert not waiter.is_alive() and result["body"] == {"messages": [], "next_offset": 0}
    assert server.service.notifier.waiting("idle") == 0


def test_a_delivery_wakes_a_parked_long_poll(live_factory) -> None:
    client, server = live_factory()
    waiter, result = _poll_in_thread(client, "wake", 30_000)  # the longest wait allowed
    assert _parked(server, "wake")
    client.post("/v1/timers", json={"topic": "wake", "delay_ms": 0})
    waiter.join(15)  # half the poll's own wait: only a wake-up can end it this soon
    assert not waiter.is_alive() and len(result["body"]["messages"]) == 1


def test_cancel_before_due_is_never_delivered(live: httpx.Client) -> None:
    live.post("/v1/timers", json={"topic": "cx", "id": "gone", "delay_ms": 400})
    live.post("/v1/timers", json={"topic": "cx", "id": "kept", "delay_ms": 500})
    assert live.delete("/v1/timers/cx/gone").status_code == 204
    messages: list[dict] = []
    deadline = time.monotonic() + 10
    while not messages and time.monotonic() < deadline:
        messages = live.get("/v1/topics/cx/messages", params={"wait_ms": 3000}).json()["messages"]
    # delivery follows due time, so "gone" (due first) would sit before "kept" in the log
    assert [m["id"] for m in live.get("/v1/topics/cx/messages").json()["messages"]] == ["kept"]
    assert live.get("/v1/timers/cx/gone").status_code == 404
    assert live.get("/v1/stats").json()["cancelled"] == 1


def test_every_endpoint_answers_on_the_real_server(live: httpx.Client) -> None:
    assert live.get("/healthz").status_code == 200
    assert live.get("/readyz").status_code == 200
    r = live.post("/v1/timers/batch", json={"timers": [{"topic": "e", "delay_ms": 120_000}] * 3})
    assert r.status_code == 200 and r.json()["scheduled"] == 3
    assert len(live.get("/v1/timers", params={"topic": "e"}).json()["timers"]) == 3
    assert live.get("/v1/topics").json()["topics"][0]["pending"] == 3
    assert live.get("/v1/deadletters").json() == {"timers": [], "next_cursor": None}
    assert live.get("/v1/stats").json()["due_buckets"]["lt_1h"] == 3
    assert live.get("/openapi.json").status_code == 200
    assert live.get("/docs").status_code == 200


@pytest.mark.parametrize("keys", ["k1", "k1,other-key"])
def test_auth_when_keys_are_configured(live_factory, keys: str) -> None:
    client, _ = live_factory(api_keys=keys.split(","))
    body = {"topic": "a", "delay_ms": 1000}
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic k1"}):
        r = client.post("/v1/timers", json=body, headers=headers)
        assert r.status_code == 401, r.text
        assert r.json()["error"]["code"] == "unauthorized"
        assert r.headers["www-authenticate"] == "Bearer"
    assert client.get("/v1/stats").status_code == 401
    ok = {"Authorization": "Bearer k1"}
    assert client.post("/v1/timers", json=body, headers=ok).status_code == 201
    assert client.get("/v1/stats", headers=ok).json()["pending"] == 1
    assert client.get("/healthz").status_code == 200  # probes and docs stay open
    assert client.get("/openapi.json").status_code == 200


def test_housekeeping_and_stats_snapshot_jobs_run(live_factory) -> None:
    client, server = live_factory(
        housekeeping={"interval_ms": 200, "stats_snapshot_interval_ms": 100}
    )
    client.post("/v1/timers/batch", json={"timers": [{"topic": "h", "delay_ms": 0}] * 20})
    housekeeper = server.app.state.housekeeper
    deadline = time.monotonic() + 10
    while (housekeeper.runs < 2 or housekeeper.snapshots < 2) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert housekeeper.runs >= 2 and housekeeper.snapshots >= 2
    report = server.service.last_housekeeping
    assert report is not None and report.watermark_ms > 0
    assert server.service.last_snapshot is not None
