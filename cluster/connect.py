"""The NATS connection of a cluster node: reconnecting for ever, bounded timeouts."""

from __future__ import annotations

import logging

import nats
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
