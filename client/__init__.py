"""A typed Python client for the timerstore REST API (sync and asyncio, httpx + msgspec).

    from client import TimerStoreClient
    with TimerStoreClient("http://127.0.0.1:8080", api_key="k") as ts:
        ts.schedule("orders", id="order-1", delay_ms=30_000, payload="cancel-if-unpaid")
        page = ts.consume("orders", offset=0, wait_ms=30_000)

It imports nothing else of timerstore: it talks to the server over HTTP only.
"""

from client.aio import AsyncTimerStoreClient
from client.calls import spec
from client.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    ServerError,
    TimerStoreClientError,
    TooLarge,
    Unauthorized,
    Unavailable,
    UnsupportedMediaType,
)
from client.models import (
    BatchCancelled,
    BatchScheduled,
    Cancelled,
    CancelledTimer,
    CancelOutcome,
    GroupList,
    GroupOffset,
    Message,
    MessagePage,
    Scheduled,
    ScheduledTimer,
    Timer,
    TimerPage,
    TimerSpec,
    Topic,
)
from client.sync import TimerStoreClient

__all__ = [
    "AsyncTimerStoreClient",
    "BatchCancelled",
    "BatchScheduled",
    "CancelOutcome",
    "Cancelled",
    "CancelledTimer",
    "Conflict",
    "Forbidden",
    "GroupList",
    "GroupOffset",
    "InvalidInput",
    "Message",
    "MessagePage",
    "NotFound",
    "Scheduled",
    "ScheduledTimer",
    "ServerError",
    "Timer",
    "TimerPage",
    "TimerSpec",
    "TimerStoreClient",
    "TimerStoreClientError",
    "TooLarge",
    "Topic",
    "Unauthorized",
    "Unavailable",
    "UnsupportedMediaType",
    "spec",
]
