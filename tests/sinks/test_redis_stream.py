"""The Redis Streams sink against a real redis-server on a loopback port."""

from __future__ import annotations

import json
import logging
import time
from collections import Counter

from storage.protocol import NewTimer, TimerState
from tests.sinks.redis_server import free_port
from tests.waiting import wait_for


def now_ms() -> int:
    return int(time.time() * 1000)


def entries(client, stream: str) -> list[dict[bytes, bytes]]:
    return [fields for _, fields in client.xrange(stream)]


def test_ten_thousand_timers_land_in_due_order_per_topic(routed, redis_server):
    r = routed()
    r.route("a", sink="redis_stream", url=redis_server.url, stream="due", maxlen=100_000)
    r.route("b", sink="redis_stream", url=redis_server.url, stream="due", maxlen=100_000)
    start = now_ms()
    timers = [
        NewTimer("ab"[i % 2], f"t{i:05d}", start + 300 + (i * 7919) % 2000, f"p{i}".encode())
        for i in range(10_000)
    ]
    timers.append(NewTimer("a", "bin", start + 100, b"\x00\xff", {"k": "v"}, binary=True))
    r.store.schedule(timers, start)
    wait_for(lambda: r.store.stats().delivered == len(timers), what="every timer delivered")

    client = redis_server.client()
    got = entries(client, "due")
    client.close()
    seen = Counter((f[b"topic"].decode(), f[b"id"].decode()) for f in got)
    assert set(seen) == {(t.topic, t.id) for t in timers}, "each at least once"
    due = {(t.topic, t.id): t.deliver_at_ms for t in timers}
    for topic in "ab":
        times = [int(f[b"deliver_at_ms"]) for f in got if f[b"topic"] == topic.encode()]
        assert times == sorted(times), f"topic {topic} out of due-time order"
    assert all(
        int(f[b"delivered_at_ms"]) >= due[(f[b"topic"].decode(), f[b"id"].decode())] for f in got
    )
    binary = next(f for f in got if f[b"id"] == b"bin")
    assert binary[b"payload"] == b"\x00\xff" and json.loads(binary[b"headers"]) == {"k": "v"}
    assert binary[b"attempt"] == b"1"
    assert r.store.stats().delivered_by_sink == {"redis_stream": len(timers)}
    assert r.store.get("a", "bin").sink == "redis_stream"


def test_timers_retry_while_redis_is_down_and_arrive_after_restart(routed, redis_server):
    r = routed()
    r.route("jobs", sink="redis_stream", url=redis_server.url, stream="jobs", max_attempts=50)
    redis_server.stop()
    start = now_ms()
    r.store.schedule([NewTimer("jobs", f"j{i}", start) for i in range(200)], start)
    wait_for(lambda: r.store.get("jobs", "j0").attempts >= 2, what="failed attempts")
    view = r.store.get("jobs", "j0")
    assert view.state in (TimerState.PENDING, TimerState.IN_FLIGHT)  # retrying, not dead
    redis_server.start()
    wait_for(lambda: r.store.stats().delivered == 200, what="delivery after the restart")
    client = redis_server.client()
    ids = Counter(f[b"id"] for f in entries(client, "jobs"))
    client.close()
    assert set(ids) == {f"j{i}".encode() for i in range(200)}
    assert r.store.stats().dead_lettered == 0
    assert r.store.get("jobs", "j0").attempts >= 3


def test_each_failed_send_is_logged_with_stream_count_and_error(routed, caplog):
    caplog.set_level(logging.WARNING, logger="app.engine.redis_sink")
    r = routed()
    nobody = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens: connection refused
    r.route("gone", sink="redis_stream", url=nobody, stream="jobs", max_attempts=2)
    start = now_ms()
    r.store.schedule([NewTimer("gone", f"g{i}", start) for i in range(3)], start)
    wait_for(lambda: r.store.stats().dead_lettered == 3, what="three dead letters")
    lines = [x for x in caplog.records if x.name == "app.engine.redis_sink"]
    assert lines and all(x.levelno == logging.WARNING for x in lines)
    assert {(x.event, x.sink, x.stream, x.topic) for x in lines} == {
        ("sink_error", "redis_stream", "jobs", "gone")
    }
    assert sum(x.count for x in lines) == 3 * 2
    assert all(x.error.startswith("redis ") for x in lines)
    assert all(nobody not in x.getMessage() for x in lines)  # no URL (it may hold a password)
