"""The Redis Streams sink: ``XADD <stream> MAXLEN ~ <maxlen> *`` per timer, pipelined.

Each entry holds ``topic``, ``id``, ``payload`` (the raw bytes), ``headers`` (JSON),
``deliver_at_ms``, ``delivered_at_ms`` and ``attempt``. A batch goes in one pipeline
(no MULTI), and a route's pipelines go one at a time, in the order the dispatcher
handed them over, so entries land in due-time order per topic (unless a retry or a
saturated route's deferral moves a timer later); any error fails the
whole batch's attempt, which the dispatcher backs off and finally dead-letters. A
batch that failed after some entries were written is sent again whole: consumers drop
duplicates by (topic, id).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

import msgspec
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from app.clock import Clock
from app.engine.routing_sink import Report
from app.engine.sinks import Outcome, Settled
from app.routing import Route, SinkSettings
from storage.protocol import DueTimer

log = logging.getLogger(__name__)

REDIS_SINK = "redis_stream"
# A pooled connection that Redis closed (a restart, a failover, its idle timeout) fails
# the next pipeline at once: one more try on a new connection, so that a Redis that is up
# again costs no attempt (with max_attempts=1 the batch was dead-lettered). Only a
# connection error: a timeout is not tried again, so it still ends the attempt.
_RECONNECT_ONCE = Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))
_encode = msgspec.json.Encoder().encode


def stream_fields(t: DueTimer, delivered_at_ms: int) -> dict[Any, Any]:
    r = t.record
    return {
        "topic": t.topic,
        "id": t.id,
        "payload": r.payload,
        "headers": _encode(r.headers),
        "deliver_at_ms": r.requested_deliver_at_ms,
        "delivered_at_ms": delivered_at_ms,
        "attempt": r.attempts + 1,
    }


class RedisStreamSender:
    """One route's Redis client (its own connection pool)."""

    def __init__(self, route: Route, settings: SinkSettings, clock: Clock) -> None:
        assert route.url is not None and route.stream is not None
        timeout_s = (route.timeout_ms or settings.default_timeout_ms) / 1000
        self._client = aioredis.Redis.from_url(
            route.url,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            max_connections=settings.concurrency,
            retry=_RECONNECT_ONCE,
        )
        self._stream = route.stream
        self._maxlen = route.maxlen or settings.default_maxlen
        self._max_attempts = route.max_attempts
        self._clock = clock
        self._in_order = asyncio.Lock()  # one pipeline at a time: due-time order

    async def send(
        self, timers: Sequence[DueTimer], limit: asyncio.Semaphore, report: Report
    ) -> None:
        async with self._in_order, limit:
            now_ms = self._clock.now_ms()
            started = time.perf_counter()
            try:
                async with self._client.pipeline(transaction=False) as pipe:
                    for t in timers:
                        fields = stream_fields(t, now_ms)
                        pipe.xadd(self._stream, fields, maxlen=self._maxlen, approximate=True)
                    await pipe.execute()
            except Exception as exc:  # the sink boundary: any failure is a failed attempt
                error = f"redis {type(exc).__name__}: {exc}"[:200]
                self._log_failed(timers, error)
                took_s = (time.perf_counter() - started,)
                attempts = self._max_attempts
                report(Settled(timers, Outcome.FAILED, REDIS_SINK, error, attempts, sends_s=took_s))
                return
        took_s = (time.perf_counter() - started,)
        report(Settled(timers, Outcome.DELIVERED, REDIS_SINK, sends_s=took_s))

    def _log_failed(self, timers: Sequence[DueTimer], error: str) -> None:
        """One line per failed pipeline (the route's URL is not logged: it may hold a
        password); the dispatcher then logs the attempt as ``delivery_failed``."""
        log.warning(
            "redis stream %s: sending %d timers failed (first %s/%s): %s",
            self._stream,
            len(timers),
            timers[0].topic,
            timers[0].id,
            error,
            extra={
                "event": "sink_error",
                "sink": REDIS_SINK,
                "stream": self._stream,
                "count": len(timers),
                "topic": timers[0].topic,
                "timer_id": timers[0].id,
                "error": error,
            },
        )

    async def close(self) -> None:
        await self._client.aclose()
