"""Request and response bodies of the REST API, as msgspec Structs.

These are the only definitions: the OpenAPI document takes its schemas from them
(``api.docs``), request bodies are decoded with them (``api.bodies``), and responses are
encoded from them. Request structs forbid unknown fields. Times are epoch milliseconds.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from app.groups import GroupOffset
from app.routing import Route, SinkKind
from app.stats import ServiceStats
from storage.names import NAME_MAX_BYTES, NAME_PATTERN
from storage.protocol import (
    CancelOutcome,
    CancelResult,
    ClusterView,
    IngestReport,
    LoggedMessage,
    NewTimer,
    ScheduleResult,
    TimerState,
    TimerView,
)
from storage.rules import MAX_DELAY_MS, MAX_TIME_MS

NAME_DESCRIPTION = f"1 to {NAME_MAX_BYTES} bytes of A-Z a-z 0-9 . _ : -"
STAGE_DIR_PATTERN = "^[^\\u0000]+$"  # any path but one with a NUL byte
# The pattern and the lengths are documented, not enforced by msgspec, whose pattern check
# is a Python regex call per field (0.4 us a batch item): ``app.timer_requests`` checks a
# batch's names in one call and reports a bad one by item and field like any other 422,
# in the one wording of the name rule (``storage.names.name_problem``) that the path and
# query checks use too (msgspec's own length message differed).
_NAME_RULE = {
    "description": NAME_DESCRIPTION,
    "extra_json_schema": {"pattern": NAME_PATTERN, "minLength": 1, "maxLength": NAME_MAX_BYTES},
}
# Offsets of a topic log are signed 64-bit integers in every client language.
MAX_OFFSET = 2**63 - 1
BASE64_PATTERN = "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
TopicName = Annotated[str, msgspec.Meta(**_NAME_RULE, examples=["orders"])]
TimerId = Annotated[str, msgspec.Meta(**_NAME_RULE, examples=["order-1234-timeout"])]
TimeMs = Annotated[int, msgspec.Meta(ge=0, le=MAX_TIME_MS, description="epoch milliseconds")]
DelayMs = Annotated[int, msgspec.Meta(ge=0, le=MAX_DELAY_MS, description="milliseconds from now")]
CancelAnswer = Literal["cancelled", "unknown", "too_late"]
Base64Payload = Annotated[
    bytes,
    msgspec.Meta(
        description="binary payload: standard base64 (with padding) in JSON, bin in msgpack",
        extra_json_schema={"pattern": BASE64_PATTERN},
    ),
]


class TimerCreate(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A timer to schedule. Exactly one of deliver_at_ms / delay_ms; at most one of
    payload (UTF-8 text) / payload_b64 (binary, base64 in JSON, bin in msgpack)."""

    topic: TopicName
    id: TimerId | None = None
    deliver_at_ms: TimeMs | None = None
    delay_ms: DelayMs | None = None
    payload: str | None = None
    payload_b64: Base64Payload | None = None
    headers: dict[str, str] | None = None


# The rules across TimerCreate's fields, added to its component schema (``api.docs``):
# exactly one of deliver_at_ms / delay_ms is a number (null counts as absent), and not
# both payload forms are given. The server checks them in ``app.timer_requests``.
TIMER_CREATE_RULES: dict[str, Any] = {
    "oneOf": [
        {"required": ["deliver_at_ms"], "properties": {"deliver_at_ms": {"type": "integer"}}},
        {"required": ["delay_ms"], "properties": {"delay_ms": {"type": "integer"}}},
    ],
    "not": {
        "required": ["payload", "payload_b64"],
        "properties": {"payload": {"type": "string"}, "payload_b64": {"type": "string"}},
    },
}


class TimerBatchCreate(msgspec.Struct, forbid_unknown_fields=True):
    """Up to max_batch_timers timers, stored all together or not at all."""

    timers: list[TimerCreate]


class TimerBatchRaw(msgspec.Struct, forbid_unknown_fields=True):
    """The batch with undecoded items: used to report every bad item, not just the first."""

    timers: list[msgspec.Raw]


class TimerRef(msgspec.Struct, forbid_unknown_fields=True):
    """A timer's identity: its topic and id."""

    topic: TopicName
    id: TimerId


class CancelBatch(msgspec.Struct, forbid_unknown_fields=True):
    """Up to max_batch_timers identities to cancel, each answered on its own."""

    timers: list[TimerRef]


class IngestRequest(msgspec.Struct, forbid_unknown_fields=True):
    """A staged bulk import: a directory directly under ``<data_dir>/staging``."""

    stage_dir: Annotated[
        str,
        msgspec.Meta(
            pattern=STAGE_DIR_PATTERN,
            max_length=4096,
            description="the staged directory: a path under <data_dir>/staging, "
            "absolute or relative to it",
            examples=["import-1700000000000"],
        ),
    ]
    replace: bool = False


class Timer(msgspec.Struct):
    """A timer as stored. ``payload`` or ``payload_b64`` as it was given; ``state`` is
    pending, in_flight, delivered (with delivered_at_ms and offset) or dead_lettered.
    Fields without a value are left out (never null)."""

    topic: str
    id: str
    state: str
    deliver_at_ms: int
    created_at_ms: int
    attempts: int
    requested_deliver_at_ms: int | UnsetType = UNSET
    payload: str | UnsetType = UNSET
    payload_b64: bytes | UnsetType = UNSET
    headers: dict[str, str] | UnsetType = UNSET
    delivered_at_ms: int | UnsetType = UNSET
    offset: int | UnsetType = UNSET
    last_error: str | UnsetType = UNSET
    sink: str | UnsetType = UNSET  # the sink that took it (delivered)


class ScheduledTimer(msgspec.Struct):
    topic: str
    id: str
    deliver_at_ms: int


class BatchScheduled(msgspec.Struct):
    scheduled: int
    timers: list[ScheduledTimer]


class CancelledTimer(msgspec.Struct):
    """What a batch cancel did to one identity: ``cancelled`` (it will never be
    delivered), ``unknown``, or ``too_late`` with the ``state`` that made it so."""

    topic: str
    id: str
    outcome: Annotated[CancelAnswer, msgspec.Meta(description="cancelled, unknown or too_late")]
    state: str | UnsetType = UNSET  # in_flight or delivered, with too_late only


class BatchCancelled(msgspec.Struct):
    """Each identity's outcome in the order given; ``cancelled`` counts those removed."""

    cancelled: int
    timers: list[CancelledTimer]


class TimerList(msgspec.Struct):
    timers: list[Timer]
    next_cursor: str | None


class Topic(msgspec.Struct):
    """A topic: timers pending, its log's end offset, where due timers go, its groups' lag."""

    topic: str
    pending: int
    log_end_offset: int
    sink: Annotated[
        SinkKind, msgspec.Meta(description="where due timers go: the route's sink, or log")
    ]
    groups: Annotated[
        list[GroupOffset],
        msgspec.Meta(description="consumer groups on the embedded log, lag exact at log end"),
    ]


class TopicList(msgspec.Struct):
    topics: list[Topic]
    next_cursor: Annotated[
        str | None, msgspec.Meta(description="pass as cursor for the next page; null: the last")
    ]
    total: Annotated[int, msgspec.Meta(description="topics in the whole listing")]


class Message(msgspec.Struct):
    offset: int
    id: str
    deliver_at_ms: int
    delivered_at_ms: int
    headers: dict[str, str]
    payload: str | UnsetType = UNSET
    payload_b64: bytes | UnsetType = UNSET


class MessageList(msgspec.Struct):
    messages: list[Message]
    next_offset: int


class Replayed(msgspec.Struct, frozen=True):
    """How many dead letters of a topic were scheduled again."""

    replayed: int


class Purged(msgspec.Struct, frozen=True):
    """How many dead letters were deleted."""

    purged: int


class Health(msgspec.Struct):
    status: str
    reason: str | UnsetType = UNSET  # why not ready (503 of /readyz)


class ProblemItem(msgspec.Struct):
    field: str
    message: str
    index: int | UnsetType = UNSET


class ErrorDetail(msgspec.Struct):
    """``field`` names the input that broke a rule; ``state`` comes with a 409."""

    code: str
    message: str
    field: str | UnsetType = UNSET
    state: str | UnsetType = UNSET
    problems: list[ProblemItem] | UnsetType = UNSET


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

    offset: Annotated[int, msgspec.Meta(ge=0, le=MAX_OFFSET)]
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
    CancelBatch,
    BatchCancelled,
    TimerList,
    TopicList,
    MessageList,
    Stats,
    Health,
    ErrorBody,
    IngestRequest,
    IngestReport,
    Replayed,
    Purged,
    RouteRequest,
    RouteView,
    GroupCommit,
    GroupList,
    ClusterView,
)

TIMER_EXAMPLE = {
    "topic": "orders",
    "id": "order-1234-timeout",
    "delay_ms": 30000,
    "payload": '{"order": 1234, "action": "cancel-if-unpaid"}',
    "headers": {"trace-id": "abc123"},
}
CANCEL_BATCH_EXAMPLE = {
    "timers": [{"topic": "orders", "id": "order-1234-timeout"}, {"topic": "orders", "id": "o-9"}]
}
BATCH_EXAMPLE = {
    "timers": [
        TIMER_EXAMPLE,
        {"topic": "reminders", "deliver_at_ms": 1767225600000, "payload_b64": "AAEC"},
    ]
}


# ----------------------------------------------------------------- conversions
V = TypeVar("V")


def given(value: V | None) -> V | UnsetType:
    """None (no value) as UNSET: the field is left out of the response."""
    return UNSET if value is None else value


def _split_payload(
    payload: bytes | None, binary: bool
) -> tuple[str | UnsetType, bytes | UnsetType]:
    if payload is None:
        return UNSET, UNSET
    if binary:
        return UNSET, payload
    return payload.decode("utf-8", "replace"), UNSET


def timer_from_view(v: TimerView) -> Timer:
    text, raw = _split_payload(v.payload, v.binary)
    return Timer(
        v.topic,
        v.id,
        str(v.state),
        v.deliver_at_ms,
        v.created_at_ms,
        v.attempts,
        given(v.requested_deliver_at_ms),
        text,
        raw,
        given(v.headers),
        given(v.delivered_at_ms),
        given(v.offset),
        given(v.last_error),
        given(v.sink),
    )


def timer_from_replay(r: ScheduleResult, before: TimerView | None) -> Timer:
    """A replayed dead letter: pending, due at ``r``'s time, no attempt yet, with the
    payload, headers and requested time of the dead letter read just before the replay.
    Without that read (the dead letter came between the two calls) the fields it would
    have given are left out."""
    if before is None or before.state != TimerState.DEAD_LETTERED:
        return Timer(r.topic, r.id, "pending", r.deliver_at_ms, r.created_at_ms, 0)
    pending = msgspec.structs.replace(
        before,
        state=TimerState.PENDING,
        deliver_at_ms=r.deliver_at_ms,
        created_at_ms=r.created_at_ms,
        attempts=0,
        last_error=None,
    )
    return timer_from_view(pending)


def timer_from_schedule(r: ScheduleResult, t: NewTimer) -> Timer:
    text, raw = _split_payload(t.payload, t.binary)
    return Timer(
        r.topic,
        r.id,
        "pending",
        r.deliver_at_ms,
        r.created_at_ms,
        0,
        given(t.deliver_at_ms),
        text,
        raw,
        given(t.headers),
    )


def message_from_log(m: LoggedMessage) -> Message:
    text, raw = _split_payload(m.payload, m.binary)
    return Message(m.offset, m.id, m.deliver_at_ms, m.delivered_at_ms, m.headers, text, raw)


# the store's outcome as the API names it (a DELETE answers the same with 204 / 404 / 409)
_CANCEL_ANSWERS: dict[CancelOutcome, CancelAnswer] = {
    CancelOutcome.REMOVED: "cancelled",
    CancelOutcome.UNKNOWN: "unknown",
    CancelOutcome.TOO_LATE: "too_late",
}


def batch_cancelled(refs: list[tuple[str, str]], results: list[CancelResult]) -> BatchCancelled:
    timers = [
        CancelledTimer(topic, timer_id, _CANCEL_ANSWERS[r.outcome], _state(r))
        for (topic, timer_id), r in zip(refs, results, strict=True)
    ]
    removed = sum(1 for r in results if r.outcome is CancelOutcome.REMOVED)
    return BatchCancelled(removed, timers)


def _state(r: CancelResult) -> str | UnsetType:
    return UNSET if r.state is None else str(r.state)
