"""A route's answer wakes whoever waits for it (the dispatcher's settler), so a webhook
delivery is committed when the receiver answers, not on the dispatcher's next turn (up to
50 ms later: the delivery's delivered_at_ms and lateness trailed the receiver by that).

The wait is tested here, with the receiver holding its answer until the test lets it go;
how much sooner the commit comes is a figure of ``bench.webhook_sink``, not a test.
"""

from __future__ import annotations

import threading

from app.clock import SystemClock
from app.engine.routing_sink import RoutingSink
from app.engine.sinks import Outcome
from app.routing import Route, RouteTable, check_route
from storage.protocol import NewTimer
from tests.sinks.conftest import SENDERS
from tests.sinks.sink_settings import sink_settings


def test_an_answer_wakes_the_waiter_and_collect_rearms_it(rocks_store, receiver):
    gate = threading.Event()
    _, url = receiver(rule=lambda body: 200 if gate.wait(30) else 500)
    clock, settings = SystemClock(), sink_settings()
    routes = RouteTable(rocks_store.control)
    routes.put("hook", check_route(Route("webhook", url, "s3cr3t"), settings), clock.now_ms())
    sink = RoutingSink(routes, settings, clock, SENDERS)
    sink.start()
    try:
        rocks_store.schedule([NewTimer("hook", "a", clock.now_ms())], clock.now_ms())
        batch = rocks_store.due(clock.now_ms(), 10)
        assert sink.submit(batch) == []  # handed to the route's lane: nothing settled yet
        assert sink.wait_settled(0.2) is False  # the receiver holds its answer
        gate.set()
        assert sink.wait_settled(30) is True
        [settled] = sink.collect()
        assert settled.outcome == Outcome.DELIVERED
        assert [t.id for t in settled.timers] == ["a"]
        assert sink.wait_settled(0) is False  # collect re-armed it
    finally:
        gate.set()
        sink.stop()
