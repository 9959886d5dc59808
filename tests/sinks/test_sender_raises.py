"""A route's sender that raises (not a failed attempt it reports) is still the route's
attempt: counted under the route's sink, dead-lettered after the route's max_attempts."""

from __future__ import annotations

from app.clock import SystemClock
from app.engine import Engine
from app.engine.routing_sink import RoutingSink
from app.routing import Route, RouteTable, SinkSettings, check_route
from app.telemetry import Telemetry
from storage.protocol import NewTimer, TimerState
from tests.sinks.conftest import FAST, SENDERS
from tests.sinks.receiver import wait_for


def test_a_url_httpx_rejects_fails_as_the_routes_attempt(rocks_store):
    """The route's pattern takes http://999.1.1.1/hook; httpx raises InvalidURL (not an
    HTTPError) for it, so the webhook sender raises instead of reporting a failure. That
    was counted as sink "log" and dead-lettered after the engine's 5 attempts, not 2."""
    clock, settings, telemetry = SystemClock(), SinkSettings(stop_wait_ms=500), Telemetry()
    routes = RouteTable(rocks_store.control)
    route = Route("webhook", "http://999.1.1.1/hook", "k", max_attempts=2)
    routes.put("typo", check_route(route, settings), clock.now_ms())
    sink = RoutingSink(routes, settings, clock, SENDERS)
    engine = Engine(rocks_store, clock, FAST, sink=sink, telemetry=telemetry)
    rocks_store.schedule([NewTimer("typo", "t1", clock.now_ms())], clock.now_ms())
    engine.start()
    try:
        wait_for(lambda: rocks_store.stats().dead_lettered == 1, timeout_s=30, what="dead letter")
    finally:
        engine.stop()
    letter = rocks_store.get("typo", "t1")
    assert (letter.state, letter.attempts) == (TimerState.DEAD_LETTERED, 2)
    assert letter.last_error is not None and letter.last_error.startswith("InvalidURL")

    def failures(sink: str) -> float | None:
        sample = "timerstore_delivery_failures_total"
        return telemetry.registry.get_sample_value(sample, {"sink": sink})

    assert (failures("webhook"), failures("log")) == (2.0, None)
