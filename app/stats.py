"""The ``/v1/stats`` snapshot: store counters, queue, lateness, scan cost, due-time buckets."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence

import msgspec

from app.engine import Engine
from app.metrics import LatenessSummary
from storage.protocol import (
    StoreReadings,
    StoreStats,
    SupportsOwnedReadings,
    TimerStore,
    TopicInfo,
)

# /v1/stats lists this many topics by pending: a topic per tenant made it megabytes
STATS_TOPICS = 100

# (name, upper bound relative to now); "due_now" is key time <= now
BUCKETS_MS: tuple[tuple[str, int], ...] = (
    ("due_now", 1),
    ("lt_5s", 5_000 + 1),
    ("lt_1m", 60_000 + 1),
    ("lt_1h", 3_600_000 + 1),
    ("lt_1d", 86_400_000 + 1),
)


class DueBuckets(msgspec.Struct, frozen=True):
    """Pending timers by due time from now. Counting stops at ``cap`` keys (``capped``):
    the timers past that point are ``uncounted``, not ``later`` (they may be due in a
    minute; ``later`` said they were more than a day away)."""

    due_now: int
    lt_5s: int
    lt_1m: int
    lt_1h: int
    lt_1d: int
    later: int
    capped: bool
    uncounted: int = 0


class ServiceStats(msgspec.Struct, frozen=True):
    now_ms: int
    store: str
    pending: int
    in_flight: int
    queue_depth: int
    queue_capacity: int
    delivered: int
    cancelled: int
    dead_lettered: int
    lateness: LatenessSummary
    last_scan_ms: float
    last_scan_count: int
    watermark_ms: int
    # the STATS_TOPICS topics with the most pending (ties by name); /v1/topics pages the rest
    pending_by_topic: dict[str, int]
    due_buckets: DueBuckets
    delivered_by_sink: dict[str, int] = {}  # log, webhook, redis_stream
    pending_topics_not_listed: int = 0  # topics with timers pending beyond pending_by_topic


class WholeStoreReadings:
    """A store's readings over all of it: a single node's store, and what
    ``GET /v1/stats`` answers on a cluster node (every partition, forwarded)."""

    def __init__(self, store: TimerStore) -> None:
        self.store = store
        self.name = store.name

    def stats(self) -> StoreStats:
        return self.store.stats()

    def topics(self) -> list[TopicInfo]:
        return self.store.topics()

    def count_pending_due_before(self, deadlines_ms: Sequence[int], cap: int) -> list[int]:
        return self.store.count_pending_due_before(deadlines_ms, cap)

    def oldest_pending_due_ms(self) -> int | None:
        page = self.store.list_pending(limit=1)
        return page.timers[0].deliver_at_ms if page.timers else None


def readings_of(store: TimerStore) -> StoreReadings:
    """What this node's snapshot and gauges report: in a cluster, the partitions it owns."""
    if isinstance(store, SupportsOwnedReadings):
        return store.owned_readings()
    return WholeStoreReadings(store)


def due_buckets(store: StoreReadings, now_ms: int, pending: int, cap: int) -> DueBuckets:
    """Cumulative counts below each deadline, turned into per-bucket counts."""
    deadlines = [now_ms + offset for _, offset in BUCKETS_MS]
    cumulative = store.count_pending_due_before(deadlines, cap)
    counts = [cumulative[0]] + [b - a for a, b in itertools.pairwise(cumulative)]
    capped = cumulative[-1] >= cap
    rest = max(0, pending - cumulative[-1])  # past the last deadline, or past the cap
    due_now, lt_5s, lt_1m, lt_1h, lt_1d = counts
    if capped:
        return DueBuckets(due_now, lt_5s, lt_1m, lt_1h, lt_1d, 0, capped, uncounted=rest)
    return DueBuckets(due_now, lt_5s, lt_1m, lt_1h, lt_1d, rest, capped)


def largest_topics(pending_by_topic: dict[str, int], count: int) -> dict[str, int]:
    """The ``count`` topics with the most pending (ties by name), in name order."""
    if len(pending_by_topic) <= count:
        return pending_by_topic
    largest = heapq.nsmallest(count, pending_by_topic.items(), key=lambda kv: (-kv[1], kv[0]))
    return dict(sorted(largest))


def collect(store: StoreReadings, engine: Engine | None, now_ms: int, cap: int) -> ServiceStats:
    """Blocking (it counts keys): call it from a worker thread."""
    s = store.stats()
    listed = largest_topics(s.pending_by_topic, STATS_TOPICS)
    lateness = engine.lateness.summary() if engine else LatenessSummary(0, None, None, None, 0)
    return ServiceStats(
        now_ms=now_ms,
        store=store.name,
        pending=s.pending,
        in_flight=s.in_flight,
        queue_depth=engine.queue.depth if engine else 0,
        queue_capacity=engine.queue.capacity if engine else 0,
        delivered=s.delivered,
        cancelled=s.cancelled,
        dead_lettered=s.dead_lettered,
        lateness=lateness,
        last_scan_ms=round(engine.scanner.last_scan_ms, 3) if engine else 0.0,
        last_scan_count=engine.scanner.last_scan_count if engine else 0,
        watermark_ms=s.watermark_ms,
        pending_by_topic=listed,
        due_buckets=due_buckets(store, now_ms, s.pending, cap),
        delivered_by_sink=s.delivered_by_sink,
        pending_topics_not_listed=len(s.pending_by_topic) - len(listed),
    )
