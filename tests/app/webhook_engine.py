"""An engine whose topic is routed to a webhook: the real RoutingSink and WebhookSender, a
real store, posting to a real Receiver (tests/sinks/receiver.py)."""

from __future__ import annotations

from app.clock import Clock
from app.engine import Engine, EngineSettings
from app.engine.routing_sink import RoutingSink
from app.engine.webhook_sink import WEBHOOK_SINK, WebhookSender
from app.routing import Route, RouteTable, check_route
from storage.protocol import TimerStore
from tests.sinks.sink_settings import sink_settings


def webhook_engine(
    store: TimerStore,
    clock: Clock,
    topic: str,
    url: str,
    engine_settings: EngineSettings,
    *,
    stop_wait_ms: int = 500,
    max_attempts: int | None = None,
) -> tuple[Engine, RoutingSink]:
    """The engine and its sink, ``topic`` routed to ``url`` (signed with the key "k")."""
    settings = sink_settings(stop_wait_ms=stop_wait_ms)
    routes = RouteTable(store.control)
    sink = RoutingSink(routes, settings, clock, {WEBHOOK_SINK: WebhookSender})
    route = check_route(Route("webhook", url, "k", max_attempts=max_attempts), settings)
    routes.put(topic, route, clock.now_ms())
    return Engine(store, clock, engine_settings, sink=sink), sink
