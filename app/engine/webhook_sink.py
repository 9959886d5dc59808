"""The webhook sink: one signed ``POST`` per due timer to a route's URL.

Body (JSON): ``topic``, ``id``, ``payload`` (text) or ``payload_b64`` (binary),
``headers``, ``deliver_at_ms`` (the requested time), ``delivered_at_ms`` (when sent) and
``attempt`` (1 for the first). Headers: ``Idempotency-Key: <topic>/<id>`` (the same on
every attempt, for the receiver to drop duplicates: delivery is at-least-once) and
``Timerstore-Signature: t=<epoch ms>,v1=<hex HMAC-SHA256 of the secret over
"<t>.<raw body>">``. Any 2xx is success; any other status, a connection error or the
route's timeout is a failed attempt (the dispatcher backs off, then dead-letters). The
timeout bounds the whole attempt (connect, send, the answer and its body), not each read.
Only the first ``ANSWER_BODY_MAX_BYTES`` of the answer's body are read: a receiver that
answers a huge or endless body costs neither memory nor the rest of the timeout. The
requests go over keep-alive HTTP/1.1 connections (``app.engine.http11``).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import time
from collections.abc import Sequence
from typing import Any

import msgspec

from app.clock import Clock
from app.engine.http11 import ConnectionPool, parse_url
from app.engine.routing_sink import Report
from app.engine.sinks import Outcome, Settled
from app.routing import Route, SinkSettings
from storage.errors import HttpProtocolError, InvalidInputError
from storage.protocol import DueTimer

WEBHOOK_SINK = "webhook"
SIGNATURE_HEADER = "Timerstore-Signature"
# The body is not used (the status decides), but a short one is read to its end so the
# connection goes back to the pool; past this much it is dropped with the connection.
ANSWER_BODY_MAX_BYTES = 64 * 1024
_encode = msgspec.json.Encoder().encode


def webhook_body(t: DueTimer, delivered_at_ms: int) -> bytes:
    r = t.record
    body: dict[str, Any] = {"topic": t.topic, "id": t.id}
    if r.binary:
        body["payload_b64"] = base64.b64encode(r.payload).decode()
    else:
        body["payload"] = r.payload.decode()
    body["headers"] = r.headers
    body["deliver_at_ms"] = r.requested_deliver_at_ms
    body["delivered_at_ms"] = delivered_at_ms
    body["attempt"] = r.attempts + 1
    return _encode(body)


def sign(secret: str, t_ms: int, body: bytes) -> str:
    """The ``Timerstore-Signature`` value for ``body`` sent at ``t_ms``."""
    mac = hmac.new(secret.encode(), f"{t_ms}.".encode() + body, hashlib.sha256)
    return f"t={t_ms},v1={mac.hexdigest()}"


class WebhookSender:
    """One route's pool of keep-alive connections (at most ``concurrency`` of them: the
    lane's semaphore bounds the requests in flight)."""

    def __init__(self, route: Route, settings: SinkSettings, clock: Clock) -> None:
        assert route.url is not None and route.secret is not None
        self._secret = route.secret
        self._max_attempts = route.max_attempts
        self._clock = clock
        self._timeout_s = (route.timeout_ms or settings.default_timeout_ms) / 1000
        self._pool: ConnectionPool | None = None
        self._bad_url = ""
        try:
            self._pool = ConnectionPool(parse_url(route.url), ANSWER_BODY_MAX_BYTES)
        except InvalidInputError:  # a route stored before the url rule of today (its url
            # is not logged: its query may hold a token)
            self._bad_url = "webhook InvalidURL: the route's url breaks the url rule; set it again"

    async def send(
        self, timers: Sequence[DueTimer], limit: asyncio.Semaphore, report: Report
    ) -> None:
        async def one(t: DueTimer) -> None:
            async with limit:
                started = time.perf_counter()
                error = await self._post(t)
                took_s = (time.perf_counter() - started,)
            if error is None:
                report(Settled([t], Outcome.DELIVERED, WEBHOOK_SINK, sends_s=took_s))
            else:
                attempts = self._max_attempts
                report(Settled([t], Outcome.FAILED, WEBHOOK_SINK, error, attempts, sends_s=took_s))

        await asyncio.gather(*(one(t) for t in timers))

    async def _post(self, t: DueTimer) -> str | None:
        """None on a 2xx, else the failure (status, timeout or connection error)."""
        if self._pool is None:
            return self._bad_url
        now_ms = self._clock.now_ms()
        body = webhook_body(t, now_ms)
        headers = (
            "Content-Type: application/json\r\n"
            f"Idempotency-Key: {t.topic}/{t.id}\r\n"
            f"{SIGNATURE_HEADER}: {sign(self._secret, now_ms, body)}\r\n"
        )
        try:
            async with asyncio.timeout(self._timeout_s):  # the whole attempt, not each read
                status = await self._pool.post(headers, body)
        except TimeoutError:
            return "webhook timed out"
        except (
            OSError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            HttpProtocolError,
        ) as exc:
            return f"webhook {type(exc).__name__}: {exc}"[:200]
        if 200 <= status < 300:
            return None
        return f"webhook answered {status}"

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
