"""A Redis that restarted and is up again costs a route no attempt: the pooled connection
it closed is replaced, not counted as a failed delivery."""

from __future__ import annotations

import time

from storage.protocol import NewTimer, TimerState
from tests.waiting import wait_for


def now_ms() -> int:
    return int(time.time() * 1000)


def test_a_redis_restarted_before_the_send_dead_letters_nothing(routed, redis_server):
    r = routed()
    r.route("jobs", sink="redis_stream", url=redis_server.url, stream="jobs", max_attempts=1)
    r.store.schedule([NewTimer("jobs", "warm", now_ms())], now_ms())
    wait_for(lambda: r.store.stats().delivered == 1, what="the first delivery")
    redis_server.stop()
    redis_server.start()  # up again before the next timers fall due

    start = now_ms()
    r.store.schedule([NewTimer("jobs", f"j{i}", start) for i in range(5)], start)
    wait_for(lambda: sum(_settled(r.store)) == 6, what="the five timers settled")

    assert _settled(r.store) == (6, 0)
    assert r.store.get("jobs", "j0").state is TimerState.DELIVERED
    assert r.store.get("jobs", "j0").attempts == 1
    client = redis_server.client()
    try:
        assert client.xlen("jobs") == 5
    finally:
        client.close()


def _settled(store) -> tuple[int, int]:
    stats = store.stats()
    return stats.delivered, stats.dead_lettered
