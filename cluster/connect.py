"""The NATS connection of a cluster node: reconnecting for ever, bounded timeouts."""

from __future__ import annotations

import json
import logging

import nats
import nats.js.errors
from nats.aio.client import Client

log = logging.getLogger(__name__)
CONNECT_TIMEOUT_S = 5
JETSTREAM_TIMEOUT_S = 5.0


async def connect(urls: list[str] | tuple[str, ...], name: str) -> Client:
    return await nats.connect(
        servers=list(urls),
        name=name,
        connect_timeout=CONNECT_TIMEOUT_S,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.2,
        error_cb=_connection_error,
    )


async def _connection_error(error: Exception) -> None:
    """One line per failed (re)connect, not nats-py's default traceback: with a server
    gone that is five a second, and formatting tracebacks in threads beside the test
    runner's own hit CPython 3.11's "AST constructor recursion depth mismatch"."""
    log.warning("nats: %r", error)


async def stream_subjects(
    client: Client, stream: str, subjects_filter: str, timeout_s: float = JETSTREAM_TIMEOUT_S
) -> list[str]:
    """The subjects of ``stream`` matching ``subjects_filter`` that hold a message, from
    STREAM.INFO's subject counts, page by page (a server sends at most 100,000 a page).

    One request a page, answered by the stream's leader from its state: no consumer.
    nats-py's ``KeyValue.keys`` starts an ordered push consumer and may signal "no more
    keys" before the first one arrives (its consumer-info check races the delivery), so a
    listing right after a put could come back empty."""
    found: list[str] = []
    while True:
        body = json.dumps({"subjects_filter": subjects_filter, "offset": len(found)}).encode()
        reply = await client.request(f"$JS.API.STREAM.INFO.{stream}", body, timeout_s)
        answer = json.loads(reply.data)
        if "error" in answer:
            nats.js.errors.APIError.from_error(answer["error"])  # raises
        page = answer["state"].get("subjects") or {}
        found.extend(page)
        if not page or len(found) >= int(answer.get("total") or 0):
            return found
