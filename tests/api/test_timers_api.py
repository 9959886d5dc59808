"""Single-timer endpoints against the app on a fake clock (engine driven by run_once)."""

from __future__ import annotations

import base64

from app.engine.sinks import CallbackSink
from storage.protocol import DueTimer
from tests.api.helpers import T0_MS, FailingSink, FakeApi


def _schedule(api: FakeApi, **body: object) -> dict:
    r = api.client.post("/v1/timers", json=body)
    assert r.status_code in (200, 201), r.text
    return dict(r.json())


def test_schedule_returns_201_then_200_on_reschedule(fake_api: FakeApi) -> None:
    r = fake_api.client.post(
        "/v1/timers",
        json={
            "topic": "orders",
            "id": "o1",
            "delay_ms": 5000,
            "payload": "héllo",
            "headers": {"a": "b"},
        },
    )
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["state"] == "pending"
    assert body["deliver_at_ms"] == T0_MS + 5000
    assert body["created_at_ms"] == T0_MS
    assert (body["topic"], body["id"], body["payload"], body["headers"]) == (
        "orders",
        "o1",
        "héllo",
        {"a": "b"},
    )
    r = fake_api.client.post(
        "/v1/timers", json={"topic": "orders", "id": "o1", "deliver_at_ms": T0_MS + 9000}
    )
    assert r.status_code == 200, r.text
    got = fake_api.client.get("/v1/timers/orders/o1").json()
    assert got["deliver_at_ms"] == T0_MS + 9000 and got["state"] == "pending"
    assert fake_api.stats()["pending"] == 1


def test_generated_ids_are_unique_and_sortable(fake_api: FakeApi) -> None:
    ids = [_schedule(fake_api, topic="t", delay_ms=10)["id"] for _ in range(5)]
    fake_api.clock.advance(1)
    ids += [_schedule(fake_api, topic="t", delay_ms=10)["id"] for _ in range(3)]
    assert len(set(ids)) == 8 and ids == sorted(ids)
    assert all(len(i) == 32 for i in ids)


def test_payload_forms_round_trip(fake_api: FakeApi) -> None:
    raw = bytes(range(256))
    b64 = base64.b64encode(raw).decode()
    created = _schedule(fake_api, topic="bin", id="b", delay_ms=0, payload_b64=b64)
    assert created["payload_b64"] == b64 and "payload" not in created
    got = fake_api.client.get("/v1/timers/bin/b").json()
    assert got["payload_b64"] == b64
    _schedule(fake_api, topic="bin", id="t", delay_ms=0, payload='{"x": 1}')
    assert fake_api.deliver_due() == 2
    messages = fake_api.client.get("/v1/topics/bin/messages").json()["messages"]
    by_id = {m["id"]: m for m in messages}
    assert base64.b64decode(by_id["b"]["payload_b64"]) == raw
    assert by_id["t"]["payload"] == '{"x": 1}' and "payload_b64" not in by_id["t"]


def test_get_states_pending_in_flight_delivered(fake_api: FakeApi) -> None:
    _schedule(fake_api, topic="s", id="a", deliver_at_ms=T0_MS + 100)
    assert fake_api.client.get("/v1/timers/s/a").json()["state"] == "pending"
    fake_api.clock.advance(100)
    in_flight = fake_api.service.store.due(fake_api.clock.now_ms(), 10)
    assert fake_api.client.get("/v1/timers/s/a").json()["state"] == "in_flight"
    fake_api.service.store.release(in_flight)
    fake_api.clock.advance(7)
    assert fake_api.deliver_due() == 1
    got = fake_api.client.get("/v1/timers/s/a").json()
    assert got["state"] == "delivered"
    assert got["delivered_at_ms"] == T0_MS + 107 and got["offset"] == 0
    assert fake_api.client.get("/v1/timers/s/zz").status_code == 404


def test_cancel_removed_unknown_and_too_late(fake_api: FakeApi) -> None:
    for i in ("a", "b", "c"):
        _schedule(fake_api, topic="c", id=i, delay_ms=0)
    assert fake_api.client.delete("/v1/timers/c/a").status_code == 204
    r = fake_api.client.get("/v1/timers/c/a")
    assert r.status_code == 404 and r.json()["error"]["field"] == "id"  # no such timer
    r = fake_api.client.delete("/v1/timers/c/a")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    assert r.json()["error"]["field"] == "id"  # what tells it from a 404 for a wrong path
    assert "field" not in fake_api.client.delete("/v1/timer/c/a").json()["error"]
    store = fake_api.service.store
    flying = store.due(fake_api.clock.now_ms(), 1)
    assert [t.id for t in flying] == ["b"]
    r = fake_api.client.delete("/v1/timers/c/b")
    assert r.status_code == 409 and r.json()["error"]["state"] == "in_flight"
    store.release(flying)
    assert fake_api.deliver_due() == 2
    r = fake_api.client.delete("/v1/timers/c/c")
    assert r.status_code == 409 and r.json()["error"]["state"] == "delivered"
    stats = fake_api.stats()
    assert (stats["cancelled"], stats["delivered"], stats["pending"]) == (1, 2, 0)


def test_cancelled_timer_is_never_delivered(fake_api: FakeApi) -> None:
    _schedule(fake_api, topic="n", id="x", delay_ms=50)
    assert fake_api.client.delete("/v1/timers/n/x").status_code == 204
    fake_api.clock.advance(10_000)
    assert fake_api.deliver_due() == 0
    assert fake_api.client.get("/v1/topics/n/messages").json()["messages"] == []


def test_reschedule_of_in_flight_or_delivered_is_409(fake_api: FakeApi) -> None:
    _schedule(fake_api, topic="r", id="a", delay_ms=0)
    _schedule(fake_api, topic="r", id="b", delay_ms=0)
    flying = fake_api.service.store.due(fake_api.clock.now_ms(), 1)
    r = fake_api.client.post("/v1/timers", json={"topic": "r", "id": "a", "delay_ms": 5})
    assert r.status_code == 409 and r.json()["error"]["state"] == "in_flight"
    # a single timer's body has no timers[0]: the error names its id
    assert r.json()["error"]["field"] == "id"
    assert r.json()["error"]["message"] == "r/a is being delivered"
    fake_api.service.store.release(flying)
    fake_api.deliver_due()
    r = fake_api.client.post("/v1/timers", json={"topic": "r", "id": "b", "delay_ms": 5})
    assert r.status_code == 409 and r.json()["error"]["state"] == "delivered"
    assert r.json()["error"]["field"] == "id"


def test_list_pending_in_due_order_with_cursor_and_filters(fake_api: FakeApi) -> None:
    for i, delay in enumerate([500, 100, 300, 200, 400]):
        _schedule(fake_api, topic="a" if i % 2 else "b", id=f"t{i}", delay_ms=delay)
    seen, cursor = [], None
    for _ in range(10):
        params: dict[str, str | int] = {"limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = fake_api.client.get("/v1/timers", params=params).json()
        seen += [t["deliver_at_ms"] - T0_MS for t in page["timers"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [100, 200, 300, 400, 500]
    page = fake_api.client.get("/v1/timers", params={"topic": "a"}).json()
    assert [t["id"] for t in page["timers"]] == ["t1", "t3"]
    window = {"from_ms": T0_MS + 200, "to_ms": T0_MS + 400}
    page = fake_api.client.get("/v1/timers", params=window).json()
    assert [t["deliver_at_ms"] - T0_MS for t in page["timers"]] == [200, 300, 400]


def test_topics_and_messages_with_offsets(fake_api: FakeApi) -> None:
    for i in range(5):
        _schedule(fake_api, topic="log", id=f"m{i}", delay_ms=i)
    _schedule(fake_api, topic="later", id="x", delay_ms=60_000)
    fake_api.clock.advance(10)
    assert fake_api.deliver_due() == 5
    topics = {t["topic"]: t for t in fake_api.client.get("/v1/topics").json()["topics"]}
    assert topics["log"] == {
        "topic": "log", "pending": 0, "log_end_offset": 5, "sink": "log", "groups": [],
    }  # fmt: skip
    assert topics["later"] == {
        "topic": "later", "pending": 1, "log_end_offset": 0, "sink": "log", "groups": [],
    }  # fmt: skip
    r = fake_api.client.get("/v1/topics/log/messages", params={"offset": 1, "limit": 2}).json()
    assert [m["offset"] for m in r["messages"]] == [1, 2] and r["next_offset"] == 3
    assert [m["id"] for m in r["messages"]] == ["m1", "m2"]
    for m in r["messages"]:
        assert m["delivered_at_ms"] >= m["deliver_at_ms"]
    r = fake_api.client.get("/v1/topics/log/messages", params={"offset": 5}).json()
    assert r == {"messages": [], "next_offset": 5}


def test_stats_counts_and_due_buckets(fake_api: FakeApi) -> None:
    delays = [-1, 1000, 30_000, 600_000, 7_200_000, 2 * 86_400_000]
    for i, delay in enumerate(delays):
        _schedule(fake_api, topic="b", id=f"t{i}", deliver_at_ms=T0_MS + delay)
    stats = fake_api.stats()
    assert stats["pending"] == 6 and stats["pending_by_topic"] == {"b": 6}
    buckets = stats["due_buckets"]
    assert [buckets[k] for k in ("due_now", "lt_5s", "lt_1m", "lt_1h", "lt_1d", "later")] == [
        1,
        1,
        1,
        1,
        1,
        1,
    ]
    assert stats["queue_capacity"] > 0 and stats["queue_depth"] == 0
    fake_api.deliver_due()
    stats = fake_api.stats()
    assert stats["delivered"] == 1 and stats["lateness"]["early"] == 0
    assert stats["lateness"]["max_ms"] is not None


def test_dead_letters_list_and_replay(fake_api_factory) -> None:
    api: FakeApi = fake_api_factory(sink=FailingSink(), engine={"max_attempts": 1})
    _schedule(api, topic="d", id="x", delay_ms=0, payload="p", headers={"h": "1"})
    api.deliver_due()
    page = api.client.get("/v1/deadletters").json()
    assert [(t["id"], t["state"]) for t in page["timers"]] == [("x", "dead_lettered")]
    assert "broker down" in page["timers"][0]["last_error"]
    assert api.client.get("/v1/timers/d/x").json()["state"] == "dead_lettered"
    r = api.client.post("/v1/deadletters/d/x/replay")
    assert r.status_code == 200 and r.json()["state"] == "pending", r.text
    replayed = r.json()  # the whole timer, as GET shows it: payload, headers, requested time
    assert replayed == api.client.get("/v1/timers/d/x").json()
    assert (replayed["payload"], replayed["headers"], replayed["attempts"]) == ("p", {"h": "1"}, 0)
    assert "requested_deliver_at_ms" in replayed and "last_error" not in replayed
    assert api.client.get("/v1/timers/d/x").json()["state"] == "pending"
    assert api.client.get("/v1/deadletters").json()["timers"] == []
    assert api.client.post("/v1/deadletters/d/x/replay").status_code == 404
    assert api.client.post("/v1/deadletters/d/nope/replay").status_code == 404


def test_health_ready_and_503_while_shutting_down(fake_api: FakeApi) -> None:
    assert fake_api.client.get("/healthz").json() == {"status": "ok"}
    assert fake_api.client.get("/readyz").status_code == 200
    fake_api.service.begin_shutdown()
    r = fake_api.client.post("/v1/timers", json={"topic": "t", "delay_ms": 1})
    assert r.status_code == 503 and r.json()["error"]["code"] == "unavailable"
    assert fake_api.client.get("/v1/stats").status_code == 503
    assert fake_api.client.get("/readyz").status_code == 503
    assert fake_api.client.get("/healthz").status_code == 200


def test_a_callback_sink_takes_the_timer_instead_of_the_topic_log(fake_api_factory) -> None:
    received: list[DueTimer] = []
    api: FakeApi = fake_api_factory(sink=CallbackSink(received.extend))
    _schedule(api, topic="cb", id="x", delay_ms=0, payload="p")
    assert api.deliver_due() == 1
    assert [(t.topic, t.id, t.record.payload) for t in received] == [("cb", "x", b"p")]
    assert api.client.get("/v1/topics/cb/messages").json()["messages"] == []
    assert api.client.get("/v1/timers/cb/x").json()["state"] == "delivered"
