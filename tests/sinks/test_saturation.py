"""A route slower than its backlog: the deferrals of a saturated lane, on a real store
and a real receiver on 127.0.0.1."""

from __future__ import annotations

import time
from collections.abc import Sequence

from app.clock import SystemClock
from app.engine import Engine, EngineSettings
from app.engine.routing_sink import RoutingSink
from app.routing import Route, RouteTable, check_route
from storage.protocol import DueTimer, NewTimer
from storage.rocks import RocksSettings, RocksTimerStore
from tests.sinks.conftest import SENDERS
from tests.sinks.sink_settings import sink_settings
from tests.waiting import wait_for


class _CountsDeferrals(RocksTimerStore):
    """The real RocksDB store, counting the timers that deferrals rewrote."""

    deferred = 0

    def retry_later(
        self, timers: Sequence[DueTimer], retry_at_ms: int, error: str, *, attempt: bool = True
    ) -> None:
        if not attempt:
            self.deferred += len(timers)
        super().retry_later(timers, retry_at_ms, error, attempt=attempt)


def test_a_saturated_route_rewrites_its_backlog_a_few_times_not_every_busy_retry(
    tmp_path, receiver
):
    """300 timers fall due at once for a route that takes 4 requests of 50 ms at a time
    (80 a second), in batches of 4. Its lane holds 8; the rest is deferred. Each deferral
    rewrites the timers in the store, so deferring all of them again every
    ``busy_retry_ms`` until the route caught up was a busy loop: tens of rewrites per
    timer, a core spent on them and the route itself starved of CPU. They are spread
    behind one another instead, at the rate the lane settles."""
    recv, url = receiver(rule=lambda body: None, hang_s=0.05)
    store = _CountsDeferrals(RocksSettings(str(tmp_path / "rocks")))
    clock = SystemClock()
    sinks = sink_settings(concurrency=4, max_in_flight=8, busy_retry_ms=50)
    routes = RouteTable(store.control)
    routes.put("slow", check_route(Route("webhook", url, "s3cr3t"), sinks), clock.now_ms())
    engine = Engine(
        store,
        clock,
        EngineSettings(tick_ms=5, scan_batch=4),
        sink=RoutingSink(routes, sinks, clock, SENDERS),
    )
    n = 300
    start = clock.now_ms()
    store.schedule([NewTimer("slow", f"s{i}", start) for i in range(n)], start)
    engine.start()
    try:
        began = time.monotonic()
        wait_for(lambda: store.stats().delivered == n, timeout_s=90, what="the slow route")
        took_s = time.monotonic() - began
    finally:
        engine.stop()
        store.close()
    assert sorted(a.body["id"] for a in recv.ok()) == sorted(f"s{i}" for i in range(n))
    assert {a.body["attempt"] for a in recv.arrivals} == {1}  # a deferral is no attempt
    assert store.deferred <= 5 * n, f"{store.deferred} rewrites for {n} timers in {took_s:.1f} s"
