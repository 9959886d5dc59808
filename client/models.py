"""What the client sends and gets back, as msgspec Structs (the server's JSON shapes).

The client is standalone (it imports nothing else of timerstore), so these mirror the
OpenAPI document's schemas rather than import the server's. A field the server leaves out
(it never sends null) is ``None`` here. Times are integer epoch milliseconds.
"""

from __future__ import annotations

import enum

import msgspec


class TimerSpec(msgspec.Struct, omit_defaults=True, kw_only=True):
    """A timer to schedule: exactly one of ``deliver_at_ms`` / ``delay_ms``; ``payload``
    is UTF-8 text, ``payload_b64`` binary (sent as msgpack bin); ``id`` is made by the
    server when left out (same topic+id again reschedules a pending timer)."""

    topic: str
    id: str | None = None
    deliver_at_ms: int | None = None
    delay_ms: int | None = None
    payload: str | None = None
    payload_b64: bytes | None = None
    headers: dict[str, str] | None = None


class Timer(msgspec.Struct, kw_only=True):
    """A timer as stored; ``state`` is pending, in_flight, delivered (with
    ``delivered_at_ms``, ``offset`` and the ``sink`` that took it) or dead_lettered."""

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
    sink: str | None = None  # log, webhook or redis_stream (delivered)


class Scheduled(msgspec.Struct, kw_only=True):
    """One scheduled timer; ``replaced`` is True when it rescheduled a pending one (200)."""

    timer: Timer
    replaced: bool


class ScheduledTimer(msgspec.Struct):
    topic: str
    id: str
    deliver_at_ms: int


class BatchScheduled(msgspec.Struct):
    scheduled: int
    timers: list[ScheduledTimer]


class TimerPage(msgspec.Struct):
    """A page of timers; pass ``next_cursor`` on for the next (None: no more)."""

    timers: list[Timer]
    next_cursor: str | None = None


class Message(msgspec.Struct, kw_only=True):
    """A delivered message in a topic's log."""

    offset: int
    id: str
    deliver_at_ms: int
    delivered_at_ms: int
    headers: dict[str, str]
    payload: str | None = None
    payload_b64: bytes | None = None


class MessagePage(msgspec.Struct):
    """Messages from an offset; read on from ``next_offset``."""

    messages: list[Message]
    next_offset: int


class GroupOffset(msgspec.Struct):
    """A consumer group's committed offset (the next it reads) and its lag behind the log end."""

    group: str
    committed_offset: int
    lag: int


class GroupList(msgspec.Struct):
    topic: str
    log_end_offset: int
    groups: list[GroupOffset]


class Topic(msgspec.Struct):
    """A topic: pending timers, log end, where due timers go, and its groups' lag."""

    topic: str
    pending: int
    log_end_offset: int
    sink: str = "log"
    groups: list[GroupOffset] = msgspec.field(default_factory=list)


class TopicList(msgspec.Struct):
    topics: list[Topic]
    next_cursor: str | None = None
    total: int = 0


class Replayed(msgspec.Struct):
    replayed: int


class Purged(msgspec.Struct):
    purged: int


class CancelOutcome(enum.Enum):
    """What a cancel did: removed (never delivered), unknown, or too late."""

    CANCELLED = "cancelled"
    UNKNOWN = "unknown"
    TOO_LATE = "too_late"


class Cancelled(msgspec.Struct, kw_only=True):
    """The truthful outcome of a cancel; ``state`` (in_flight, delivered) when too late."""

    outcome: CancelOutcome
    state: str | None = None


class CancelledTimer(msgspec.Struct, kw_only=True):
    """One identity's outcome in a batch cancel."""

    topic: str
    id: str
    outcome: CancelOutcome
    state: str | None = None


class BatchCancelled(msgspec.Struct, kw_only=True):
    """A batch cancel's outcomes, in the order asked; ``cancelled`` counts those removed."""

    cancelled: int
    timers: list[CancelledTimer]


class PartitionOwner(msgspec.Struct, kw_only=True):
    """A partition's owner; ``node_id`` None while no node holds its lease."""

    partition: int
    node_id: str | None
    epoch: int


class ClusterNode(msgspec.Struct, kw_only=True):
    node_id: str
    url: str
    alive: bool


class ClusterView(msgspec.Struct, kw_only=True):
    """``GET /v1/cluster``: who owns which partition, and which nodes are alive (a single
    node answers as one node owning every partition)."""

    node_id: str
    partitions: int
    owners: list[PartitionOwner]
    nodes: list[ClusterNode]


class ProblemItem(msgspec.Struct, kw_only=True):
    field: str
    message: str
    index: int | None = None


class ErrorDetail(msgspec.Struct, kw_only=True):
    code: str
    message: str
    field: str | None = None
    state: str | None = None
    problems: list[ProblemItem] | None = None


class ErrorBody(msgspec.Struct):
    error: ErrorDetail
