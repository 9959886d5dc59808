"""The NATS connection of a cluster node: reconnecting for ever, bounded timeouts."""

from __future__ import annotations

import nats
from nats.aio.client import Client

CONNECT_TIMEOUT_S = 5
JETSTREAM_TIMEOUT_S = 5.0


async def connect(urls: list[str] | tuple[str, ...], name: str) -> Client:
    return await nats.connect(
        servers=list(urls),
        name=name,
        connect_timeout=CONNECT_TIMEOUT_S,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.2,
    )
