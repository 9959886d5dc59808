"""Request and response bodies of the REST API, as msgspec Structs.

These are the only definitions: the OpenAPI document takes its schemas from them
(``api.docs``), request bodies are decoded with them (``api.bodies``), and responses are
encoded from them. Request structs forbid unknown fields. Times are epoch milliseconds.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from app.groups import GroupOffset
from app.routing import Route
from app.stats import ServiceStats
from app.timer_requests import MAX_TIME_MS
from storage.names import NAME_MAX_BYTES, NAME_PATTERN
from storage.protocol import LoggedMessage, NewTimer, ScheduleResult, TimerView

_NAME_RULE = {
    "pattern": NAME_PATTERN,
    "description": f"1 to {NAME_MAX_BYTES} bytes of A-Z a-z 0-9 . _ : -",
}
TopicName = Annotated[str, msgspec.Meta(**_NAME_RULE, examples=["orders"])]
TimerId = Annotated[str, msgspec.Meta(**_NAME_RULE, examples=["order-1234-timeout"])]
TimeMs = Annotated[int, msgspec.Meta(ge=0, le=MAX_TIME_MS, description="epoch milliseconds")]
DelayMs = Annotated[int, msgspec.Meta(ge=0, le=MAX_TIME_MS, description="milliseconds from now")]


class TimerCreate(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A timer to schedule. Exactly one of deliver_at_ms / delay_ms; at most one of
    payload (UTF-8 text) / payload_b64 (binary, base64 in JSON, bin in msgpack)."""

    topic: TopicName
    id: TimerId | None = None
    deliver_at_ms: TimeMs | None = None
    delay_ms: DelayMs | None = None
    payload: str | None = None
    payload_b64: bytes | None = None
    headers: dict[str, str] | None = None


class TimerBatchCreate(msgspec.Struct, forbid_unknown_fields=True):
    """Up to max_batch_timers timers, stored all together or not at all."""

    timers: list[TimerCreate]


class TimerBatchRaw(msgspec.Struct, forbid_unknown_fields=True):
    """The batch with undecoded items: used to report every bad item, not just the first."""

    timers: list[msgspec.Raw]


class Timer(msgspec.Struct, omit_defaults=True):
    """A timer as stored. ``payload`` or ``payload_b64`` as it was given; ``state`` is
    pending, in_flight, delivered (with delivered_at_ms and offset) or dead_lettered."""

    topic: str
    id: str
    state: str
    deliver_at_ms: int
    created_at_ms: int
    attempts: int
    requested_deliver_at_ms: int | None = None
    payload: str | None = None
    payload_b64: bytes | None = None
    headers: dict[str, str] | None = None
    delivered_at_ms: int | None = None
    offset: int | None = None
    last_error: str | None = None
    sink: str | None = None  # the sink that took it (delivered)


class ScheduledTimer(msgspec.Struct):
    topic: str
    id: str
    deliver_at_ms: int


class BatchScheduled(msgspec.Struct):
    scheduled: int
    timers: list[ScheduledTimer]


class TimerList(msgspec.Struct):
    timers: list[Timer]
    next_cursor: str | None


class Topic(msgspec.Struct):
    topic: str
    pending: int
    log_end_offset: int


class TopicList(msgspec.Struct):
    topics: list[Topic]


class Message(msgspec.Struct, omit_defaults=True):
    offset: int
    id: str
    deliver_at_ms: int
    delivered_at_ms: int
    headers: dict[str, str]
    payload: str | None = None
    payload_b64: bytes | None = None


class MessageList(msgspec.Struct):
    messages: list[Message]
    next_offset: int


class Health(msgspec.Struct):
    status: str


class ProblemItem(msgspec.Struct, omit_defaults=True):
    field: str
    message: str
    index: int | None = None


class ErrorDetail(msgspec.Struct, omit_defaults=True):
    code: str
    message: str
    field: str | None = None
    state: str | None = None
    problems: list[ProblemItem] | None = None


class ErrorBody(msgspec.Struct):
    """Every error: ``{"error": {"code", "message", "field"?}}``."""

    error: ErrorDetail


class RouteView(msgspec.Struct, omit_defaults=True):
    """A topic's route as answered: the secret is never echoed, only whether one is set."""

    topic: str
    sink: str
    url: str | None = None
    timeout_ms: int | None = None
    max_attempts: int | None = None
    stream: str | None = None
    maxlen: int | None = None
    secret_set: bool | None = None


def route_view(topic: str, r: Route) -> RouteView:
    secret_set = True if r.secret else None
    return RouteView(
        topic, r.sink, r.url, r.timeout_ms, r.max_attempts, r.stream, r.maxlen, secret_set
    )


RouteRequest = Route


class GroupCommit(msgspec.Struct, forbid_unknown_fields=True):
    """The next offset the group will read; ``force`` allows moving it back."""

    offset: int
    force: bool = False


class GroupList(msgspec.Struct):
    topic: str
    log_end_offset: int
    groups: list[GroupOffset]


Stats = ServiceStats

# Every type the OpenAPI document shows (their nested types come along).
DOC_TYPES: tuple[Any, ...] = (
    TimerCreate,
    TimerBatchCreate,
    Timer,
    BatchScheduled,
    TimerList,
    TopicList,
    MessageList,
    Stats,
    Health,
    ErrorBody,
    RouteRequest,
    RouteView,
    GroupCommit,
    GroupList,
)

TIMER_EXAMPLE = {
    "topic": "orders",
    "id": "order-1234-timeout",
    "delay_ms": 30000,
    "payload": '{"order": 1234, "action": "cancel-if-unpaid"}',
    "headers": {"trace-id": "abc123"},
}
BATCH_EXAMPLE = {
    "timers": [
        TIMER_EXAMPLE,
        {"topic": "reminders", "deliver_at_ms": 1767225600000, "payload_b64": "AAEC"},
    ]
}


# ----------------------------------------------------------------- conversions
def _split_payload(payload: bytes | None, binary: bool) -> tuple[str | None, bytes | None]:
    if payload is None:
        return None, None
    if binary:
        return None, payload
    return payload.decode("utf-8", "replace"), None


def timer_from_view(v: TimerView) -> Timer:
    text, raw = _split_payload(v.payload, v.binary)
    return Timer(
        v.topic,
        v.id,
        str(v.state),
        v.deliver_at_ms,
        v.created_at_ms,
        v.attempts,
        v.requested_deliver_at_ms,
        text,
        raw,
        v.headers,
        v.delivered_at_ms,
        v.offset,
        v.last_error,
        v.sink,
    )


def timer_from_schedule(r: ScheduleResult, t: NewTimer) -> Timer:
    text, raw = _split_payload(t.payload, t.binary)
    return Timer(
        r.topic,
        r.id,
        "pending",
        r.deliver_at_ms,
        r.created_at_ms,
        0,
        t.deliver_at_ms,
        text,
        raw,
        t.headers,
    )


def message_from_log(m: LoggedMessage) -> Message:
    text, raw = _split_payload(m.payload, m.binary)
    return Message(m.offset, m.id, m.deliver_at_ms, m.delivered_at_ms, m.headers, text, raw)
