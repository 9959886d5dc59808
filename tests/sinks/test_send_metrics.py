"""timerstore_sink_send_seconds: one observation per send to an external sink, by outcome.

``timerstore_commit_batch_seconds`` times only the store commit of a webhook or Redis
delivery; an operator whose endpoint slows down had only the lateness to go by. These
tests send to a real receiver and a real redis-server and read the histogram back.
"""

from __future__ import annotations

import time

from app.telemetry import Telemetry
from storage.protocol import NewTimer
from tests.sinks.redis_server import free_port
from tests.waiting import wait_for

METRIC = "timerstore_sink_send_seconds"


def _sample(telemetry: Telemetry, suffix: str, **labels: str) -> float:
    value = telemetry.registry.get_sample_value(METRIC + suffix, labels)
    return 0.0 if value is None else value


def test_each_webhook_post_is_one_observation_with_its_outcome_and_time(routed, receiver):
    def rule(body):
        if body["id"].startswith("slow"):
            return None  # answered 200 after hang_s
        return 500 if body["id"].startswith("bad") else 200

    recv, url = receiver(rule=rule, hang_s=0.3)
    telemetry = Telemetry()
    r = routed(telemetry=telemetry)
    r.route("hooks", sink="webhook", url=url, secret="s3cr3t", max_attempts=1)
    # 40 answered at once: the sink merges answers of one outcome into one commit, and
    # each of their sends must still count
    ids = [f"ok{i}" for i in range(40)] + ["slow0", "slow1"] + [f"bad{i}" for i in range(3)]
    start = int(time.time() * 1000)
    r.store.schedule([NewTimer("hooks", i, start) for i in ids], start)

    def settled() -> bool:
        stats = r.store.stats()
        return (stats.delivered, stats.dead_lettered) == (42, 3)

    wait_for(settled, what="42 delivered and 3 dead-lettered")
    ok = {"sink": "webhook", "outcome": "ok"}
    failed = {"sink": "webhook", "outcome": "failed"}
    assert _sample(telemetry, "_count", **ok) == 42
    assert _sample(telemetry, "_count", **failed) == 3
    assert _sample(telemetry, "_bucket", le="0.25", **ok) <= 40  # the two slow ones above
    assert _sample(telemetry, "_sum", **ok) >= 2 * 0.3
    assert len(recv.arrivals) == 45


def test_each_redis_pipeline_is_one_observation(routed, redis_server):
    telemetry = Telemetry()
    r = routed(telemetry=telemetry)
    r.route("up", sink="redis_stream", url=redis_server.url, stream="due", max_attempts=1)
    nobody = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens: connection refused
    r.route("down", sink="redis_stream", url=nobody, stream="due", max_attempts=1)
    start = int(time.time() * 1000)
    r.store.schedule([NewTimer("up", f"u{i}", start) for i in range(20)], start)
    r.store.schedule([NewTimer("down", f"d{i}", start) for i in range(4)], start)

    def settled() -> bool:
        stats = r.store.stats()
        return (stats.delivered, stats.dead_lettered) == (20, 4)

    wait_for(settled, what="20 delivered and 4 dead-lettered")
    ok = _sample(telemetry, "_count", sink="redis_stream", outcome="ok")
    failed = _sample(telemetry, "_count", sink="redis_stream", outcome="failed")
    assert 1 <= ok <= 20  # one per pipeline, and a pipeline holds one or more timers
    assert 1 <= failed <= 4
