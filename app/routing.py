"""Per-topic routes: where a topic's due timers go (the embedded log unless told otherwise).

A route is one of three kinds, chosen by ``sink``: ``log`` (the default, exactly-once in
the store's commit), ``webhook`` (one signed POST per timer) and ``redis_stream`` (XADD,
pipelined per batch). ``check_route`` holds every rule a schema cannot express and names
the field that breaks one; ``RouteTable`` is the one owner of the routes, persisted in
``store.control`` (so they survive a restart and a SIGKILL) and cached in memory for the
dispatcher.

A change applies to timers that fall due after it: each stored entry keeps the route it
replaced and the time of the change, and a timer that fell due before that time (its key
time and its creation both lie before it: ``routing_sink._due_ms``) still goes the old
way (one level of history: two changes within one backlog send the oldest timers the
middle route).
"""

from __future__ import annotations

import re
import threading
from typing import Literal

import msgspec

from storage.control import ControlStore
from storage.errors import InvalidInputError
from storage.names import validate_name

SinkKind = Literal["log", "webhook", "redis_stream"]
SINK_KINDS: tuple[str, ...] = ("log", "webhook", "redis_stream")
SCHEMES = {"webhook": ("http", "https"), "redis_stream": ("redis", "rediss")}
# A host is an IPv4 address or a name with a letter or hyphen in it: a host of four numbers
# that is no IPv4 address (999.1.1.1, 01.2.3.4) failed every attempt (httpx's InvalidURL;
# the webhook sender checks a stored url against this rule too), and digits and dots
# alone name no host anyway.
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_HOST = rf"(?:{_OCTET}(?:\.{_OCTET}){{3}}|[A-Za-z0-9.-]*[A-Za-z-][A-Za-z0-9.-]*)"
_PORT = r"(?::(?:[0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?"
# The exact URL rules, stated in the OpenAPI document and checked with these patterns.
URL_PATTERNS = {
    "webhook": rf"^https?://{_HOST}{_PORT}(?:/[!-~]*)?$",
    "redis_stream": rf"^rediss?://(?:[A-Za-z0-9._~%!$&'()*+,;=:-]*@)?{_HOST}{_PORT}(?:/[0-9]{{1,9}})?$",
}
ROUTE_SPACE = "route"
STREAM_MAX_CHARS = 256
SECRET_MAX_CHARS = 1024


class SinkSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """External sinks (settings section ``sinks``)."""

    concurrency: int = 16  # requests in flight per route
    max_in_flight: int = 2000  # timers handed to one route and not yet settled
    busy_retry_ms: int = 200  # a saturated route's timers are deferred this long (no attempt)
    default_timeout_ms: int = 5000
    max_timeout_ms: int = 60_000
    default_max_attempts: int = 5
    max_max_attempts: int = 100
    default_maxlen: int = 1_000_000
    stop_wait_ms: int = 5000  # on stop, sends in flight may finish for this long


class Route(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A topic's route as stored (with the secret) and as sent in a PUT."""

    sink: SinkKind
    url: str | None = None
    secret: str | None = None
    timeout_ms: int | None = None
    max_attempts: int | None = None
    stream: str | None = None
    maxlen: int | None = None


LOG_ROUTE = Route("log")
_ONLY = {
    "log": set(),
    "webhook": {"url", "secret", "timeout_ms", "max_attempts"},
    "redis_stream": {"url", "stream", "maxlen", "timeout_ms", "max_attempts"},
}


class RouteEntry(msgspec.Struct, frozen=True):
    route: Route
    since_ms: int  # the change took effect at this time
    previous: Route = LOG_ROUTE  # for timers whose key time lies before ``since_ms``


_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(RouteEntry).decode


def _range(field: str, value: int | None, low: int, high: int, default: int) -> int:
    if value is None:
        return default
    if not low <= value <= high:
        raise InvalidInputError(f"{field} must be {low} to {high}, got {value}", field=field)
    return value


def check_url(kind: str, url: str | None) -> str:
    """``url`` when it is a ``kind`` route's URL, else InvalidInputError naming the rule."""
    if not url:
        raise InvalidInputError(f"url is required for sink {kind}", field="url")
    if re.fullmatch(URL_PATTERNS[kind], url):
        return url
    # The pattern is the rule; the prefix only picks the clearer message. No URL parser:
    # urlsplit raises ValueError on an unbalanced "[" ("http://[::1"), which was a 500.
    schemes = SCHEMES[kind]
    if not url.startswith(tuple(f"{scheme}://" for scheme in schemes)):
        allowed = " or ".join(schemes)
        raise InvalidInputError(f"url scheme must be {allowed} for sink {kind}", field="url")
    what = "a host, a port 0 to 65535" + (", a database number" if kind != "webhook" else "")
    raise InvalidInputError(
        f"url must be {kind}'s form ({what}): {URL_PATTERNS[kind]}", field="url"
    )


def check_route(route: Route, s: SinkSettings) -> Route:
    """The route with its defaults filled in, or InvalidInputError naming the field."""
    for name in route.__struct_fields__:
        if name != "sink" and getattr(route, name) is not None and name not in _ONLY[route.sink]:
            raise InvalidInputError(f"{name} is not allowed for sink {route.sink}", field=name)
    if route.sink == "log":
        return LOG_ROUTE
    url = check_url(route.sink, route.url)
    timeout_ms = _range("timeout_ms", route.timeout_ms, 1, s.max_timeout_ms, s.default_timeout_ms)
    attempts = _range(
        "max_attempts", route.max_attempts, 1, s.max_max_attempts, s.default_max_attempts
    )
    if route.sink == "webhook":
        if not route.secret or len(route.secret) > SECRET_MAX_CHARS:
            raise InvalidInputError(
                f"secret is required for sink webhook (1 to {SECRET_MAX_CHARS} characters)",
                field="secret",
            )
        return Route("webhook", url, route.secret, timeout_ms, attempts)
    if not route.stream or len(route.stream) > STREAM_MAX_CHARS:
        raise InvalidInputError(
            f"stream is required for sink redis_stream (1 to {STREAM_MAX_CHARS} characters)",
            field="stream",
        )
    maxlen = _range("maxlen", route.maxlen, 1, 1 << 40, s.default_maxlen)
    return Route("redis_stream", url, None, timeout_ms, attempts, route.stream, maxlen)


class RouteTable:
    """The routes of every topic: durable in ``control``, cached here for the dispatcher."""

    def __init__(self, control: ControlStore) -> None:
        self._control = control
        self._lock = threading.Lock()
        self._entries = {topic: _decode(raw) for topic, raw in control.scan(ROUTE_SPACE)}

    def get(self, topic: str) -> Route:
        validate_name("topic", topic)
        entry = self._entries.get(topic)
        return LOG_ROUTE if entry is None else entry.route

    def explicit(self, topic: str) -> Route | None:
        """The route set for ``topic``; None when none is (the embedded log then)."""
        validate_name("topic", topic)
        entry = self._entries.get(topic)
        return None if entry is None or entry.route == LOG_ROUTE else entry.route

    def route_for(self, topic: str, due_ms: int) -> Route:
        """The route of a timer that fell due at ``due_ms`` (the dispatcher's question)."""
        entry = self._entries.get(topic)
        if entry is None:
            return LOG_ROUTE
        return entry.route if due_ms >= entry.since_ms else entry.previous

    def put(self, topic: str, route: Route, now_ms: int) -> Route:
        """Store a checked route durably; it applies to timers due from ``now_ms`` on.

        The topic's route already (a PUT sent again, a config tool applying it each
        deploy) changes nothing: a new entry would make the route the one it "replaced"
        and send a backlog due before the real change the new way.
        """
        validate_name("topic", topic)
        with self._lock:
            old = self._entries.get(topic)
            current = LOG_ROUTE if old is None else old.route
            if route == current:
                return route
            entry = RouteEntry(route, now_ms, current)
            self._control.put(ROUTE_SPACE, topic, _encode(entry))
            self._entries = {**self._entries, topic: entry}
        return route

    def delete(self, topic: str, now_ms: int) -> Route:
        """Return the topic to the embedded log."""
        return self.put(topic, LOG_ROUTE, now_ms)

    def live_routes(self) -> set[Route]:
        """Every route a timer may still take (current ones and the ones they replaced)."""
        entries = list(self._entries.values())
        return {e.route for e in entries} | {e.previous for e in entries}

    def routed_topics(self) -> dict[str, Route]:
        return {topic: e.route for topic, e in self._entries.items() if e.route != LOG_ROUTE}
