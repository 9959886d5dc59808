"""SIGKILL of ``timerstore serve`` mid-delivery into a Redis stream loses no timer.

External sinks are at-least-once: what was in flight at the kill is sent again after
the restart. The test counts those duplicates and prints them (``-s`` shows the figure).
"""

from __future__ import annotations

import signal
import time
from collections import Counter

import httpx
import pytest

from tests.api.helpers import ServerProcess
from tests.waiting import wait_for

N = 6000


@pytest.mark.slow
def test_sigkill_mid_delivery_loses_none(tmp_path, redis_server):
    server = ServerProcess(tmp_path / "data", {"TIMERSTORE_ENGINE__SCAN_BATCH": "200"})
    client = redis_server.client()
    try:
        url = server.start()
        route = {
            "sink": "redis_stream",
            "url": redis_server.url,
            "stream": "due",
            "max_attempts": 20,
        }
        assert httpx.put(url + "/v1/topics/k/route", json=route).status_code == 200
        start = int(time.time() * 1000) + 500
        for chunk in range(0, N, 2000):
            timers = [
                {"topic": "k", "id": f"k{i:05d}", "deliver_at_ms": start + i // 2}
                for i in range(chunk, chunk + 2000)
            ]
            r = httpx.post(url + "/v1/timers/batch", json={"timers": timers}, timeout=30)
            assert r.status_code == 200, r.text
        wait_for(lambda: client.xlen("due") >= N // 4, what="a quarter delivered")
        server.signal(signal.SIGKILL)
        server.wait()
        assert client.xlen("due") < N, "killed before the end of delivery"
        url = server.start()
        wait_for(lambda: len(_ids(client)) == N, timeout_s=120, what="every timer in the stream")
        wait_for(lambda: httpx.get(url + "/v1/stats").json()["pending"] == 0, what="none pending")
        ids = _ids(client)
        assert set(ids) == {f"k{i:05d}".encode() for i in range(N)}
        duplicates = sum(n - 1 for n in ids.values())
        print(f"\nredis SIGKILL: {N} timers, {duplicates} duplicates after the restart")
        assert duplicates <= 2000  # only what was in flight (the route cap, max_in_flight)
    finally:
        client.close()
        server.kill()


def _ids(client) -> Counter[bytes]:
    return Counter(fields[b"id"] for _, fields in client.xrange("due"))
