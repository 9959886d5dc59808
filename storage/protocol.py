"""The TimerStore protocol: what the engine and the API need from any store.

Both the RocksDB store (``storage.rocks``) and the RIP-43 wheel store (``storage.wheel``)
implement it, so the engine and the API never know which one they drive. Times are
integer epoch milliseconds everywhere.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import msgspec

from storage.control import ControlStore
from storage.errors import TimerStoreError
from storage.records import TimerRecord
from storage.rules import RecordLimits

LOG_SINK = "log"
"""The embedded topic log's sink name: ``commit_delivered(..., sink=LOG_SINK)`` appends."""


class TimerState(enum.StrEnum):
    PENDING = "pending"
    IN_FLIGHT = "in_flight"
    DELIVERED = "delivered"
    DEAD_LETTERED = "dead_lettered"


class CancelOutcome(enum.StrEnum):
    REMOVED = "removed"  # it will never be delivered
    UNKNOWN = "unknown"  # the store has no such timer (never scheduled, or expired from done)
    TOO_LATE = "too_late"  # in flight or already delivered; see CancelResult.state


# gc=False on the per-timer structs of the hot path: none can be part of a reference
# cycle (bytes, str, int, dict of str), and untracked they cost the cyclic GC nothing.
class NewTimer(msgspec.Struct, frozen=True, gc=False):
    """A validated request to deliver ``payload`` to ``topic`` at ``deliver_at_ms``."""

    topic: str
    id: str
    deliver_at_ms: int
    payload: bytes = b""
    headers: dict[str, str] = {}
    binary: bool = False


class ScheduleResult(msgspec.Struct, frozen=True, gc=False):
    topic: str
    id: str
    deliver_at_ms: int  # the time the store will deliver at (past-due requests are clamped)
    created_at_ms: int
    replaced: bool  # True when an existing pending timer of the same identity was replaced


class CancelResult(msgspec.Struct, frozen=True):
    outcome: CancelOutcome
    state: TimerState | None = None  # the state that made it too late


class DueTimer(msgspec.Struct, frozen=True, gc=False):
    """A timer handed to the engine for delivery; ``key`` is the store's own handle."""

    key: bytes
    topic: str
    id: str
    key_ms: int
    record: TimerRecord
    # the record's stored bytes when the store has them (rocks): a commit copies them into
    # the topic log without re-encoding
    raw: bytes = b""


class TimerView(msgspec.Struct, frozen=True):
    topic: str
    id: str
    state: TimerState
    deliver_at_ms: int
    requested_deliver_at_ms: int
    created_at_ms: int
    attempts: int = 0
    payload: bytes | None = None
    headers: dict[str, str] | None = None
    binary: bool = False
    delivered_at_ms: int | None = None
    offset: int | None = None
    last_error: str | None = None
    sink: str | None = None  # the sink that took it (set when delivered)


class TimerPage(msgspec.Struct, frozen=True):
    timers: list[TimerView]
    next_cursor: str | None


class TopicInfo(msgspec.Struct, frozen=True):
    topic: str
    pending: int
    log_end_offset: int


class LoggedMessage(msgspec.Struct, frozen=True):
    offset: int
    id: str
    payload: bytes
    headers: dict[str, str]
    binary: bool
    deliver_at_ms: int
    delivered_at_ms: int


class StoreStats(msgspec.Struct, frozen=True):
    pending: int
    in_flight: int
    delivered: int
    cancelled: int
    dead_lettered: int  # timers in the dead-letter family now
    pending_by_topic: dict[str, int]
    watermark_ms: int
    delivered_by_sink: dict[str, int] = {}  # exact counts per sink name


class Skipped(msgspec.Struct, frozen=True):
    topic: str
    id: str
    reason: str  # "pending", "in_flight" or "delivered"


class IngestReport(msgspec.Struct, frozen=True):
    files: int
    bytes: int
    staged: int  # distinct timers in the staged files
    added: int  # new to the store
    replaced: int
    skipped: int
    skipped_by_reason: dict[str, int]
    skipped_sample: list[Skipped]
    moved_past_due: int  # keys below the watermark moved to the clamp floor
    cursor_rewound: bool
    seconds: float


class HousekeepingReport(msgspec.Struct, frozen=True):
    watermark_ms: int
    watermark_advanced: bool
    done_expired: int
    log_messages_expired: int


@runtime_checkable
class SupportsIngest(Protocol):
    """A store that can take a bulk import's staged, sorted files (the RocksDB store)."""

    def ingest_staged(
        self,
        stage_dir: str,
        *,
        limits: RecordLimits,
        replace: bool = False,
        now_ms: int | None = None,
    ) -> IngestReport:
        """``now_ms``: the time of the ingest, so that a clock stepped back since the store
        last scanned does not delay the past-due timers it brings (as ``schedule``).
        ``limits``: what each staged timer may carry; every staged entry is checked with
        them (and the rest of ``storage.rules``) before any is added."""
        ...


@runtime_checkable
class SupportsForwarding(Protocol):
    """A cluster node's store: calls and batch parts it sent to another node's partition
    owner since it started, by method."""

    def forwarded_parts(self) -> dict[str, int]: ...


@runtime_checkable
class SupportsWriteHealth(Protocol):
    """A store that tells when its disk is full (the RocksDB store): a write then raises
    StoreFullError, and ``disk_full`` stays True until a write succeeds again."""

    def disk_full(self) -> bool: ...

    def write_failures(self) -> dict[str, int]:
        """Failed writes since the store opened, by reason (``no_space``, ``other``)."""
        ...

    def probe_write(self) -> None:
        """One small durable write, to learn whether space is back."""
        ...


@runtime_checkable
class TimerStore(Protocol):
    """Durable storage of pending timers; every mutating call is durable on return.

    Each is atomic too, but for these: ``purge_dead_letters`` may delete in chunks (the
    RocksDB store: 4,096 keys a WriteBatch), so a crash midway leaves part of it done;
    ``housekeep`` writes several batches (the watermark, expiries in chunks, each topic's
    log retention), and a crash between them leaves the rest to its next run; and
    ``SupportsIngest.ingest_staged`` is not crash-atomic (``storage.rocks.ingest``).

    ``max_bytes`` of the listing reads (``list_pending``, ``dead_letters``, ``read_log``):
    a page ends once its items' payloads and headers reach that many bytes (always one
    item at least), so a page of large payloads stays bounded in memory; the cursor or
    the next offset goes on from there. None: ``limit`` alone bounds it.
    """

    name: str

    @property
    def control(self) -> ControlStore:
        """Durable control data: topic routes and consumer-group offsets."""
        ...

    def schedule(self, timers: Sequence[NewTimer], now_ms: int) -> list[ScheduleResult]:
        """Store timers; an existing pending (topic, id) is replaced (reschedule).

        Raises ConflictError naming the item when one is in flight or already delivered.
        """
        ...

    def schedule_each(
        self, timers: Sequence[NewTimer], now_ms: int
    ) -> list[ScheduleResult | TimerStoreError]:
        """Store timers of independent callers (group commit): each its result, or the
        domain error it would get alone (``storage.grouping``); one timer's conflict
        neither fails nor repeats the others'. A store-wide error is raised."""
        ...

    def cancel(self, idents: Sequence[tuple[str, str]]) -> list[CancelResult]: ...

    def get(self, topic: str, timer_id: str) -> TimerView | None: ...

    def list_pending(
        self,
        *,
        from_ms: int = 0,
        to_ms: int | None = None,
        topic: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
        max_bytes: int | None = None,
    ) -> TimerPage: ...

    def due(self, now_ms: int, limit: int) -> list[DueTimer]:
        """Up to ``limit`` timers due at ``now_ms`` and not in flight; marks them in flight."""
        ...

    def commit_delivered(
        self, timers: Sequence[DueTimer], delivered_ms: int, *, sink: str
    ) -> list[int]:
        """Mark timers delivered by ``sink`` atomically; append to the topic log iff LOG_SINK.

        The delivered state records the sink name and the attempt count (attempts + 1).
        Returns the topic-log offsets (-1 each when ``sink`` is not LOG_SINK).
        """
        ...

    def retry_later(
        self, timers: Sequence[DueTimer], retry_at_ms: int, error: str, *, attempt: bool = True
    ) -> None:
        """Move timers to ``retry_at_ms`` durably; ``attempt`` False keeps the attempt count
        (a deferral of timers that were never attempted, like a saturated route's)."""
        ...

    def dead_letter(self, timers: Sequence[DueTimer], now_ms: int, error: str) -> None: ...

    def release(self, timers: Sequence[DueTimer]) -> None:
        """Return in-flight timers to pending (engine stop); they will be scanned again."""
        ...

    def read_log(
        self, topic: str, offset: int, limit: int, max_bytes: int | None = None
    ) -> list[LoggedMessage]: ...

    def topics(self) -> list[TopicInfo]: ...

    def dead_letters(
        self,
        *,
        topic: str | None = None,
        limit: int = 100,
        after: str | None = None,
        max_bytes: int | None = None,
    ) -> TimerPage: ...

    def replay_dead_letter(self, topic: str, timer_id: str, now_ms: int) -> ScheduleResult: ...

    def purge_dead_letters(self, topic: str | None = None) -> int: ...

    def housekeep(self, now_ms: int) -> HousekeepingReport: ...

    def stats(self) -> StoreStats: ...

    def count_pending_due_before(self, deadlines_ms: Sequence[int], cap: int) -> list[int]:
        """Pending counts with key time below each deadline, each capped at ``cap``."""
        ...

    def close(self) -> None: ...


class PartitionOwner(msgspec.Struct, frozen=True):
    """One partition's owner: ``node_id`` None while no node holds its lease."""

    partition: int
    node_id: str | None
    epoch: int


class ClusterMember(msgspec.Struct, frozen=True):
    node_id: str
    url: str
    alive: bool


class ClusterView(msgspec.Struct, frozen=True):
    """What ``GET /v1/cluster`` answers: who owns which partition, and who is alive."""

    node_id: str
    partitions: int
    owners: list[PartitionOwner]
    nodes: list[ClusterMember]


@runtime_checkable
class SupportsCluster(Protocol):
    """A store spread over a cluster (``cluster.ClusterStore``); a single node has none."""

    def cluster_view(self) -> ClusterView: ...

    def caught_up(self) -> bool:
        """True once joined: connected, and every partition this node owns restored."""
        ...


class StoreReadings(Protocol):
    """What the stats snapshot and the Prometheus gauges read of a store.

    A single node's store is its own readings. A cluster node's are those of the
    partitions it owns (``SupportsOwnedReadings``): each node reports its own share, so
    the gauges summed over the nodes are the cluster's, and a snapshot or a scrape
    forwards nothing (counting every partition on every node every 10 s cost 5 to 7% of
    a node's CPU under a batch load). ``GET /v1/stats`` still answers for the whole store.
    """

    name: str

    def stats(self) -> StoreStats: ...

    def topics(self) -> list[TopicInfo]: ...

    def count_pending_due_before(self, deadlines_ms: Sequence[int], cap: int) -> list[int]: ...

    def oldest_pending_due_ms(self) -> int | None:
        """Due time of the earliest pending timer (None when none is pending)."""
        ...


@runtime_checkable
class SupportsOwnedReadings(Protocol):
    """A cluster store: the readings of the partitions this node owns."""

    def owned_readings(self) -> StoreReadings: ...
