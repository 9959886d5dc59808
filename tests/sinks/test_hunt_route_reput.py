"""A route sent again unchanged is no route change: the backlog keeps the route it fell due
under (docs/sinks.md)."""

from __future__ import annotations

from app.clock import FakeClock
from app.engine import Engine
from app.engine.routing_sink import RoutingSink
from app.routing import LOG_ROUTE, Route, RouteTable, SinkSettings, check_route
from storage.protocol import NewTimer
from tests.sinks.conftest import FAST, SENDERS
from tests.sinks.sink_settings import sink_settings
from tests.waiting import wait_for

T0 = 1_700_000_000_000


def _engine(store, clock) -> tuple[Engine, RouteTable, SinkSettings]:
    settings = sink_settings()
    routes = RouteTable(store.control)
    engine = Engine(store, clock, FAST, sink=RoutingSink(routes, settings, clock, SENDERS))
    return engine, routes, settings


def test_the_same_route_put_again_leaves_the_backlog_on_the_log(rocks_store, receiver):
    recv, url = receiver()
    clock = FakeClock(T0)
    engine, routes, settings = _engine(rocks_store, clock)
    rocks_store.schedule([NewTimer("o", "backlog", T0 - 1000)], T0)
    hook = check_route(Route("webhook", url, "s3cr3t"), settings)
    routes.put("o", hook, T0 + 1)  # the change: "backlog" fell due before it
    routes.put("o", hook, T0 + 2)  # the same PUT again (a client's retry)
    try:
        assert engine.run_once(T0 + 2) == 1
    finally:
        engine.stop()  # waits for any send in flight
    assert [m.id for m in rocks_store.read_log("o", 0, 10)] == ["backlog"]
    assert recv.arrivals == []
    assert rocks_store.get("o", "backlog").sink == "log"


def test_the_log_route_put_again_keeps_the_route_the_backlog_fell_due_under(rocks_store, receiver):
    recv, url = receiver()
    clock = FakeClock(T0)
    engine, routes, settings = _engine(rocks_store, clock)
    routes.put("o", check_route(Route("webhook", url, "s3cr3t"), settings), T0 - 60_000)
    rocks_store.schedule([NewTimer("o", "backlog", T0 - 1000)], T0)
    routes.delete("o", T0 + 1)  # back to the log for what falls due from now on
    routes.put("o", LOG_ROUTE, T0 + 2)  # {"sink": "log"} sent as well
    try:
        assert engine.run_once(T0 + 2) == 1

        def delivered() -> bool:  # run_once also commits what the lane settled
            engine.run_once(T0 + 2)
            return rocks_store.stats().delivered == 1

        wait_for(delivered, what="the backlog timer delivered")
    finally:
        engine.stop()
    assert [a.body["id"] for a in recv.ok()] == ["backlog"]
    assert rocks_store.read_log("o", 0, 10) == []
