"""A route's sender that raises (not a failed attempt it reports) is still the route's
attempt: counted under the route's sink, dead-lettered after the route's max_attempts.
And a url the sender cannot request is refused when the route is set, or, for a route stored before
that rule, a failed attempt like any other."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.clock import SystemClock
from app.engine import Engine
from app.engine.http11 import parse_url
from app.engine.routing_sink import RoutingSink
from app.routing import URL_PATTERNS, Route, RouteTable, SinkSettings, check_route
from app.telemetry import Telemetry
from storage.errors import InvalidInputError
from storage.protocol import DueTimer, NewTimer, TimerState
from tests.sinks.conftest import FAST, SENDERS
from tests.sinks.sink_settings import sink_settings
from tests.waiting import wait_for

FAST_SINKS = sink_settings()


class RaisingSender:
    """A sender with a bug: it raises instead of reporting each timer's outcome."""

    def __init__(self, route: Route, settings: SinkSettings, clock: SystemClock) -> None:
        self.route = route

    async def send(self, timers: Sequence[DueTimer], limit: object, report: object) -> None:
        raise RuntimeError("sender bug")

    async def close(self) -> None:
        return None


def _dead_letter_one(rocks_store, route: Route, senders) -> Telemetry:
    """Route topic ``t`` (stored as given), schedule one timer, run until it is a dead letter."""
    clock, settings, telemetry = SystemClock(), FAST_SINKS, Telemetry()
    routes = RouteTable(rocks_store.control)
    routes.put("t", route, clock.now_ms())
    engine = Engine(
        rocks_store, clock, FAST, sink=RoutingSink(routes, settings, clock, senders),
        telemetry=telemetry,
    )  # fmt: skip
    rocks_store.schedule([NewTimer("t", "t1", clock.now_ms())], clock.now_ms())
    engine.start()
    try:
        wait_for(lambda: rocks_store.stats().dead_lettered == 1, timeout_s=30, what="dead letter")
    finally:
        engine.stop()
    return telemetry


def _failures(telemetry: Telemetry, sink: str) -> float | None:
    sample = "timerstore_delivery_failures_total"
    return telemetry.registry.get_sample_value(sample, {"sink": sink})


def test_a_sender_that_raises_fails_as_the_routes_attempt(rocks_store):
    """It was counted as sink "log" and dead-lettered after the engine's 5 attempts."""
    route = check_route(Route("webhook", "http://127.0.0.1:9/x", "k", max_attempts=2), FAST_SINKS)
    telemetry = _dead_letter_one(rocks_store, route, {"webhook": RaisingSender})
    letter = rocks_store.get("t", "t1")
    assert (letter.state, letter.attempts) == (TimerState.DEAD_LETTERED, 2)
    assert letter.last_error == "RuntimeError: sender bug"
    assert (_failures(telemetry, "webhook"), _failures(telemetry, "log")) == (2.0, None)


def test_a_stored_url_the_rule_refuses_is_a_failed_attempt(rocks_store):
    """A route stored before the url rule below (no check here): http://999.1.1.1/ is no
    url the sender can request; that is the attempt's failure, not a sender bug."""
    route = Route("webhook", "http://999.1.1.1/hook", "k", 1000, 2)
    telemetry = _dead_letter_one(rocks_store, route, SENDERS)
    letter = rocks_store.get("t", "t1")
    assert (letter.state, letter.attempts) == (TimerState.DEAD_LETTERED, 2)
    assert letter.last_error is not None and letter.last_error.startswith("webhook InvalidURL")
    assert _failures(telemetry, "webhook") == 2.0


@pytest.mark.parametrize(
    "url", ["http://999.1.1.1/hook", "http://01.2.3.4/", "https://1.2.3/", "http://123:80/"]
)
def test_a_url_whose_host_is_no_ipv4_address_nor_a_name_is_refused(url):
    with pytest.raises(InvalidInputError) as caught:
        check_route(Route("webhook", url, "k"), FAST_SINKS)
    assert caught.value.field == "url"


@settings(max_examples=300, deadline=None)
@given(url=st.from_regex(URL_PATTERNS["webhook"], fullmatch=True))
def test_the_sender_takes_every_webhook_url_the_pattern_admits(url):
    """The pattern is the contract (the OpenAPI document states it): a url it admits must
    be one the sender's client can request, and the request's Host is the url's."""
    origin = parse_url(url)
    assert url.split("://", 1)[1].startswith(origin.host_header)
    assert origin.target.startswith("/") and 0 <= origin.port <= 65535
