"""Fixtures of the sink tests: a running engine whose sink follows the route table."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from app.clock import SystemClock
from app.engine import Engine, EngineSettings
from app.engine.redis_sink import REDIS_SINK, RedisStreamSender
from app.engine.routing_sink import RoutingSink, SenderFactory
from app.engine.webhook_sink import WEBHOOK_SINK, WebhookSender
from app.routing import Route, RouteTable, SinkSettings, check_route
from app.telemetry import Telemetry
from tests.sinks.receiver import Receiver
from tests.sinks.redis_server import RedisServer
from tests.sinks.sink_settings import sink_settings

SENDERS: dict[str, SenderFactory] = {WEBHOOK_SINK: WebhookSender, REDIS_SINK: RedisStreamSender}
FAST = EngineSettings(tick_ms=5, backoff_base_ms=50, backoff_max_ms=400, stop_drain_ms=2000)


class Routed:
    """A started engine on the rocks store, routing by ``routes``."""

    def __init__(self, store: Any, engine: Engine, routes: RouteTable, sinks: SinkSettings):
        self.store, self.engine, self.routes, self.sinks = store, engine, routes, sinks
        self.clock = engine.clock

    def route(self, topic: str, **fields: Any) -> Route:
        route = check_route(Route(**fields), self.sinks)
        return self.routes.put(topic, route, self.clock.now_ms())


@pytest.fixture
def routed(rocks_store) -> Iterator[Callable[..., Routed]]:
    engines: list[Engine] = []

    def start(
        engine: EngineSettings = FAST, telemetry: Telemetry | None = None, **sinks: Any
    ) -> Routed:
        clock = SystemClock()
        settings = sink_settings(**sinks)
        routes = RouteTable(rocks_store.control)
        sink = RoutingSink(routes, settings, clock, SENDERS)
        running = Engine(rocks_store, clock, engine, sink=sink, telemetry=telemetry)
        running.start()
        engines.append(running)
        return Routed(rocks_store, running, routes, settings)

    yield start
    for engine in engines:
        engine.stop()


@pytest.fixture
def receiver() -> Iterator[Callable[..., tuple[Receiver, str]]]:
    started: list[Receiver] = []

    def start(**kwargs: Any) -> tuple[Receiver, str]:
        r = Receiver(**{"secret": "s3cr3t", **kwargs})
        url = r.start()
        started.append(r)
        return r, url

    yield start
    for r in started:
        r.stop()


@pytest.fixture
def redis_server(tmp_path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.stop()
