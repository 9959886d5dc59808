"""Gauges read at scrape time from what the store and the engine keep in memory.

Nothing here iterates the store: pending counts, in-flight set size, watermark and topic
log ends are the store's in-memory counters; queue depth and the scan cursor are the
engine's; RocksDB numbers are properties and tickers. The due-time buckets and the
oldest pending due time need a key scan, so they come from the last stats snapshot
(the housekeeper takes one every ``housekeeping.stats_snapshot_interval_ms``). On a
cluster node every store figure is of the partitions it owns (``StoreReadings``):
summed over the nodes they are the cluster's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, runtime_checkable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from app import native_memory
from app.clock import Clock
from app.engine import Engine
from app.groups import GroupOffsets
from app.stats import ServiceStats
from app.telemetry import MAX_GROUP_SERIES, MAX_TOPIC_SERIES, OTHER, PREFIX
from storage.errors import StoreClosedError
from storage.protocol import (
    StoreReadings,
    SupportsForwarding,
    SupportsOwnedReadings,
    SupportsWriteHealth,
    TimerStore,
)
from storage.rocks.metrics import RocksMetrics

P = PREFIX


@runtime_checkable
class SupportsRocksMetrics(Protocol):
    def rocksdb_metrics(self) -> RocksMetrics: ...


class GaugeSource(Protocol):
    """What the gauges read (``TimerService`` has it all)."""

    clock: Clock
    engine: Engine | None
    last_snapshot: ServiceStats | None
    last_oldest_due_ms: int | None

    @property
    def store(self) -> TimerStore: ...

    @property
    def readings(self) -> StoreReadings: ...

    @property
    def groups(self) -> GroupOffsets: ...


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{P}_{name}", doc, value=value)


class ServiceGauges(Collector):
    def __init__(self, source: GaugeSource) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        now_ms = self.source.clock.now_ms()
        try:
            store = self.source.store
        except StoreClosedError:
            return
        readings = self.source.readings
        yield from _store_gauges(readings)
        if isinstance(store, SupportsWriteHealth):
            yield from _write_health_gauges(store)
        if isinstance(store, SupportsForwarding):
            yield from _forwarding_counters(store)
        owned = isinstance(store, SupportsOwnedReadings)
        yield from _group_gauges(readings, self.source.groups, owned=owned)
        if self.source.engine is not None:
            yield from _engine_gauges(self.source.engine, now_ms)
        yield from _snapshot_gauges(self.source.last_snapshot, self.source.last_oldest_due_ms)
        if isinstance(store, SupportsRocksMetrics):
            yield from _rocks_gauges(store.rocksdb_metrics())
        yield from _malloc_gauges(native_memory.malloc_usage())


def _store_gauges(store: StoreReadings) -> Iterator[Metric]:
    info = InfoMetricFamily(f"{P}_store", "Which store the service runs on")
    info.add_metric([], {"store": store.name})
    yield info
    stats = store.stats()
    # in memory: pending count and log end of every known topic, by name; past
    # MAX_TOPIC_SERIES topics the rest are summed into one OTHER series
    topics = sorted(store.topics(), key=lambda row: row.topic)
    own, rest = topics[:MAX_TOPIC_SERIES], topics[MAX_TOPIC_SERIES:]
    pending = GaugeMetricFamily(f"{P}_pending_timers", "Pending timers by topic", labels=["topic"])
    for row in own:
        pending.add_metric([row.topic], row.pending)
    if rest:
        pending.add_metric([OTHER], sum(row.pending for row in rest))
    yield pending
    yield _gauge("in_flight_timers", "Timers handed to the engine, not committed", stats.in_flight)
    yield _gauge("dead_letters", "Timers in the dead letters now", stats.dead_lettered)
    yield _gauge(
        "watermark_timestamp_seconds",
        "The store's watermark: every key before it is delivered or deleted",
        stats.watermark_ms / 1000,
    )
    log_end = GaugeMetricFamily(
        f"{P}_topic_log_end_offset", "Next offset of each topic log", labels=["topic"]
    )
    for row in own:
        log_end.add_metric([row.topic], row.log_end_offset)
    if rest:  # a sum of offsets: only its moves say something (messages appended)
        log_end.add_metric([OTHER], sum(row.log_end_offset for row in rest))
    yield log_end


def _group_gauges(store: StoreReadings, groups: GroupOffsets, owned: bool) -> Iterator[Metric]:
    """Each group's offset and lag per topic; ``owned`` (a cluster node): only the topics
    whose partitions this node owns, so each pair is reported by one node."""
    log_end = {row.topic: row.log_end_offset for row in store.topics()}
    committed = GaugeMetricFamily(
        f"{P}_group_committed_offset",
        "Consumer group's committed offset (the next it reads)",
        labels=["topic", "group"],
    )
    lag = GaugeMetricFamily(
        f"{P}_group_lag_messages",
        "Consumer group's lag: topic log end minus committed offset",
        labels=["topic", "group"],
    )
    pairs = sorted(groups.committed_offsets().items())
    if owned:
        pairs = [pair for pair in pairs if pair[0][0] in log_end]
    for (topic, group), offset in pairs[:MAX_GROUP_SERIES]:
        committed.add_metric([topic, group], offset)
        lag.add_metric([topic, group], max(0, log_end.get(topic, 0) - offset))
    if len(pairs) > MAX_GROUP_SERIES:  # the rest: their lag summed, no offset (no meaning)
        rest = pairs[MAX_GROUP_SERIES:]
        lag.add_metric([OTHER, OTHER], sum(max(0, log_end.get(t, 0) - o) for (t, _), o in rest))
    yield committed
    yield lag


def _forwarding_counters(store: SupportsForwarding) -> Iterator[Metric]:
    forwarded = CounterMetricFamily(
        f"{P}_cluster_forwarded_parts",
        "Calls and batch parts this node sent to another node's partition owner, by method"
        " (a client routing batches by partition keeps the schedule series near zero)",
        labels=["method"],
    )
    for method, count in sorted(store.forwarded_parts().items()):
        forwarded.add_metric([method], count)
    yield forwarded


def _write_health_gauges(store: SupportsWriteHealth) -> Iterator[Metric]:
    yield _gauge(
        "disk_full",
        "1 from a store write that found the disk full until one succeeds again, else 0",
        int(store.disk_full()),
    )
    failures = CounterMetricFamily(
        f"{P}_store_write_errors",
        "Store writes that failed, by reason (no_space: the disk is full)",
        labels=["reason"],
    )
    counted = store.write_failures()
    for reason in sorted({"no_space", "other", *counted}):
        failures.add_metric([reason], counted.get(reason, 0))
    yield failures


def _engine_gauges(engine: Engine, now_ms: int) -> Iterator[Metric]:
    failing = GaugeMetricFamily(
        f"{P}_stage_failing_seconds",
        "How long each engine stage has failed every step (0: its last step succeeded)",
        labels=["stage"],
    )
    by_stage = {name: ms for name, ms, _ in engine.failing_stages(now_ms)}
    for stage in (engine.scanner.name, engine.dispatcher.name):
        failing.add_metric([stage], by_stage.get(stage, 0) / 1000)
    yield failing
    yield _gauge("delivery_queue_depth_timers", "Timers in the delivery queue", engine.queue.depth)
    yield _gauge(
        "delivery_queue_capacity_timers", "Capacity of the delivery queue", engine.queue.capacity
    )
    cursor_ms = engine.scanner.cursor_ms
    if cursor_ms is not None:
        yield _gauge(
            "scan_cursor_lag_seconds",
            "Now minus the time up to which every due timer was handed to the queue",
            max(0, now_ms - cursor_ms) / 1000,
        )


def _snapshot_gauges(snapshot: ServiceStats | None, oldest_ms: int | None) -> Iterator[Metric]:
    if snapshot is None:
        return
    yield _gauge(
        "stats_snapshot_timestamp_seconds",
        "When the due-time buckets below were counted",
        snapshot.now_ms / 1000,
    )
    buckets = GaugeMetricFamily(
        f"{P}_pending_due_timers",
        "Pending timers by due time from the snapshot (capped count)",
        labels=["due"],
    )
    for name in ("due_now", "lt_5s", "lt_1m", "lt_1h", "lt_1d", "later", "uncounted"):
        buckets.add_metric([name], getattr(snapshot.due_buckets, name))
    yield buckets
    if oldest_ms is not None:
        yield _gauge(
            "oldest_pending_due_timestamp_seconds",
            "Due time of the oldest timer not yet delivered (at the snapshot)",
            oldest_ms / 1000,
        )


def _malloc_gauges(usage: native_memory.MallocUsage | None) -> Iterator[Metric]:
    """glibc's heap (none elsewhere): RSS beyond RocksDB's gauges and Python's own heap is
    mostly here, as memory in use or as free memory malloc keeps (``app.native_memory``)."""
    if usage is None:
        return
    heap = GaugeMetricFamily(
        f"{P}_malloc_bytes",
        "glibc malloc: bytes in use, and bytes freed but kept by malloc",
        labels=["state"],
    )
    heap.add_metric(["in_use"], usage.in_use_bytes)
    heap.add_metric(["free"], usage.free_bytes)
    yield heap


def _rocks_gauges(m: RocksMetrics) -> Iterator[Metric]:
    r = f"{P}_rocksdb"
    yield GaugeMetricFamily(f"{r}_live_sst_bytes", "Live SST files, all families", m.live_sst_bytes)
    yield GaugeMetricFamily(
        f"{r}_pending_compaction_bytes",
        "Estimated bytes compaction must rewrite, all families",
        m.pending_compaction_bytes,
    )
    yield GaugeMetricFamily(f"{r}_memtable_bytes", "Memtables, all families", m.memtable_bytes)
    yield GaugeMetricFamily(
        f"{r}_table_readers_bytes",
        "Index and filter blocks of open SST files, all families (outside the block cache)",
        m.table_readers_bytes,
    )
    yield GaugeMetricFamily(
        f"{r}_block_cache_usage_bytes", "Block cache in use", m.block_cache_usage_bytes
    )
    yield GaugeMetricFamily(
        f"{r}_block_cache_capacity_bytes", "Block cache capacity", m.block_cache_capacity_bytes
    )
    yield CounterMetricFamily(
        f"{r}_write_stall_seconds", "Cumulative write stall time", m.write_stall_seconds
    )
    if m.tickers:
        tickers = CounterMetricFamily(
            f"{r}_ticker",
            "RocksDB statistics tickers (with rocks.statistics=true)",
            labels=["ticker"],
        )
        for name, value in sorted(m.tickers.items()):
            tickers.add_metric([name], value)
        yield tickers
