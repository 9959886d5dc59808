"""``ClusterStore``: the TimerStore of a cluster node (``open_cluster_store``).

Every call for a topic goes to the topic's partition (``cluster.records.partition_of``):
run here when this node owns it (``cluster.local``), forwarded to its owner otherwise
(``cluster.rpc``); batches are split by partition and put back in order; listings over
every partition are gathered (``cluster.listing``). The delivery path (``due``,
``commit_delivered``, ``retry_later``, ``dead_letter``, ``release``) works on the owned
partitions only: each node's engine delivers what it owns, and an outcome is a record
appended (fenced) before it is answered. The design: docs/cluster-design.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import nats.errors

from cluster import effects
from cluster.batches import Batches
from cluster.errors import PartitionMovedError
from cluster.forwards import ForwardCounts
from cluster.joining import ClusterParts, join
from cluster.listing import by_partition, merged_topics, summed_counts, summed_stats, walk_pages
from cluster.local import Perform, run_local, write_each
from cluster.loop import LoopThread
from cluster.owned import OwnedReadings
from cluster.ownership import now_ms
from cluster.partition import OwnedPartition
from cluster.records import Op, partition_of
from cluster.rpc_server import RpcServer, forward
from cluster.settings import ClusterSettings
from cluster.view import cluster_view
from storage import grouping
from storage.control import ControlStore
from storage.errors import InvalidInputError, StoreOpenError, TimerStoreError
from storage.names import validate_idents
from storage.protocol import (
    LOG_SINK,
    CancelResult,
    ClusterView,
    DueTimer,
    HousekeepingReport,
    LoggedMessage,
    NewTimer,
    ScheduleResult,
    StoreStats,
    TimerPage,
    TimerView,
    TopicInfo,
)
from storage.rocks.db import RocksSettings
from storage.rocks.keys import MAX_TIME_MS, check_range
from storage.rocks.store import RocksTimerStore

log = logging.getLogger(__name__)
Outcome = Callable[[RocksTimerStore, list[DueTimer]], tuple[Any, "Op | None"]]
OPEN_TIMEOUT_S = 300.0  # every step has its own, shorter bound (cluster.joining)
ROUTE_WAIT_S = 3.0  # how long a call waits for a partition between owners before a 503


class ClusterStore:
    name = "cluster"

    def __init__(self, parts: ClusterParts) -> None:
        self.settings = parts.settings
        self.node_id = parts.settings.node_id
        self.partitions = parts.settings.partitions
        self.loop = parts.loop
        self.client = parts.client
        self.ownership = parts.ownership
        self._control = parts.control
        self.mirror = parts.mirror
        self.ownership.on_owned = self._owned
        self.fanout = ThreadPoolExecutor(max_workers=16, thread_name_prefix="ts-fanout")
        self.rpc = RpcServer(self.loop, self.client, self.node_id, self.ownership)
        self.forwards = ForwardCounts()
        self.batches = Batches(
            self.node_id, self.loop, self.client, self.ownership,
            partition_of=self.partition, call=self.call, fanout=self.fanout,
            forwards=self.forwards,
        )  # fmt: skip
        self._readings = OwnedReadings(self.ownership)
        self._closed = False
        self._due_turn = 0

    @property
    def control(self) -> ControlStore:
        return self._control

    # ------------------------------------------------------------------ routing
    def partition(self, topic: str) -> int:
        return partition_of(topic, self.partitions)

    def call(self, partition: int, method: str, *args: Any) -> Any:
        """``method`` on the partition's owner: here, or forwarded; retried while the
        partition moves, for up to ROUTE_WAIT_S."""
        give_up_at = time.monotonic() + ROUTE_WAIT_S
        moving: PartitionMovedError | None = None
        while True:
            try:
                part = self.ownership.owner(partition)
                if part is not None:
                    return run_local(part, method, args)
                owner = self.ownership.lease_holder(partition, fresh=moving is not None)
                if owner is not None and owner != self.node_id:
                    self.forwards.add(method)
                    return forward(self.loop, self.client, owner, method, partition, args)
                moving = PartitionMovedError(f"partition {partition} has no owner yet")
            except PartitionMovedError as e:
                moving = e
            if time.monotonic() >= give_up_at or self._closed:
                raise moving
            time.sleep(0.05)

    def forwarded_parts(self) -> dict[str, int]:
        """Calls and batch parts sent to another node's partition owner, by method."""
        return self.forwards.by_method()

    def each_partition(self, method: str, *args: Any) -> list[Any]:
        calls = [self.fanout.submit(self.call, p, method, *args) for p in range(self.partitions)]
        return [c.result() for c in calls]

    def _owned(self, part: OwnedPartition) -> None:
        """A partition just taken: the mirror copies what it lacks of its topics."""
        marked = self.mirror.catch_up(part.store)
        if marked:
            log.info("partition %d: %d topics marked for the mirror", part.partition, marked)

    # ------------------------------------------------------------------ writes
    def schedule(self, timers: Sequence[NewTimer], now_ms: int) -> list[ScheduleResult]:
        _check_schedule(timers, now_ms)
        return self.batches.split("schedule", [t.topic for t in timers], timers, now_ms)

    def schedule_each(self, timers: Sequence[NewTimer], now_ms: int) -> list[grouping.Outcome]:
        """Per partition, each part one atomic write at its owner: a conflict in one
        partition must not schedule the other partitions' timers a second time (they are
        stored already; a second try could answer them 409). A partition's store-wide
        error (a 503) is its own timers' outcome, not the others'."""
        out: list[grouping.Outcome | None] = [None] * len(timers)
        valid: list[int] = []
        for i, timer in enumerate(timers):
            try:
                _check_schedule([timer], now_ms)
                valid.append(i)
            except TimerStoreError as e:
                out[i] = e

        def run(partition: int, items: list[NewTimer]) -> list[grouping.Outcome]:
            def schedule(batch: Sequence[NewTimer], at_ms: int) -> list[ScheduleResult]:
                return self.call(partition, "schedule", list(batch), at_ms)

            try:
                return grouping.schedule_each(schedule, items, now_ms)
            except TimerStoreError as e:
                return [e] * len(items)

        groups = by_partition([timers[i].topic for i in valid], self.partition)
        calls = {
            p: self.fanout.submit(run, p, [timers[valid[j]] for j in idx])
            for p, idx in groups.items()
        }
        for p, idx in groups.items():
            for j, outcome in zip(idx, calls[p].result(), strict=True):
                out[valid[j]] = outcome
        done: list[grouping.Outcome] = []
        for found in out:  # every index is invalid or in exactly one partition's group
            assert found is not None
            done.append(found)
        return done

    def cancel(self, idents: Sequence[tuple[str, str]]) -> list[CancelResult]:
        return self.batches.split("cancel", [t for t, _ in idents], idents)

    def replay_dead_letter(self, topic: str, timer_id: str, now_ms: int) -> ScheduleResult:
        return self.call(self.partition(topic), "replay_dead_letter", topic, timer_id, now_ms)

    def purge_dead_letters(self, topic: str | None = None) -> int:
        if topic is not None:
            return self.call(self.partition(topic), "purge_dead_letters", topic)
        return sum(self.each_partition("purge_dead_letters", None))

    # ------------------------------------------------------------------ reads
    def get(self, topic: str, timer_id: str) -> TimerView | None:
        return self.call(self.partition(topic), "get", topic, timer_id)

    def list_pending(
        self,
        *,
        from_ms: int = 0,
        to_ms: int | None = None,
        topic: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
        max_bytes: int | None = None,
    ) -> TimerPage:
        if limit < 1:
            raise InvalidInputError("limit must be at least 1", field="limit")
        args = (from_ms, to_ms, topic)
        if topic is not None:
            return self.call(self.partition(topic), "list_pending", *args, limit, cursor, max_bytes)
        return walk_pages(
            self.partitions, cursor, limit,
            lambda p, inner, n: self.call(p, "list_pending", *args, n, inner, max_bytes),
        )  # fmt: skip

    def read_log(
        self, topic: str, offset: int, limit: int, max_bytes: int | None = None
    ) -> list[LoggedMessage]:
        return self.call(self.partition(topic), "read_log", topic, offset, limit, max_bytes)

    def dead_letters(
        self,
        *,
        topic: str | None = None,
        limit: int = 100,
        after: str | None = None,
        max_bytes: int | None = None,
    ) -> TimerPage:
        if limit < 1:
            raise InvalidInputError("limit must be at least 1", field="limit")
        if topic is not None:
            return self.call(self.partition(topic), "dead_letters", topic, limit, after, max_bytes)
        return walk_pages(
            self.partitions, after, limit,
            lambda p, inner, n: self.call(p, "dead_letters", None, n, inner, max_bytes),
        )  # fmt: skip

    def topics(self) -> list[TopicInfo]:
        return merged_topics(self.each_partition("topics"))

    def stats(self) -> StoreStats:
        return summed_stats(self.each_partition("stats"))

    def owned_readings(self) -> OwnedReadings:
        """What this node's stats snapshot and gauges read: its own partitions only."""
        return self._readings

    def count_pending_due_before(self, deadlines_ms: Sequence[int], cap: int) -> list[int]:
        counts = self.each_partition("count_pending_due_before", list(deadlines_ms), cap)
        return summed_counts(counts, cap, len(deadlines_ms))

    # ------------------------------------------------------------------ delivery (owned only)
    def due(self, now_ms: int, limit: int) -> list[DueTimer]:
        found: list[DueTimer] = []
        parts = self.ownership.live_partitions()
        if parts:  # start at another partition each scan, so none waits behind the others
            self._due_turn = (self._due_turn + 1) % len(parts)
            parts = parts[self._due_turn :] + parts[: self._due_turn]
        for part in parts:
            if len(found) >= limit:
                break
            try:
                part.check()
                found.extend(part.store.due(now_ms, limit - len(found)))
            except TimerStoreError as e:  # closed or lost meanwhile: its timers are not ours
                log.info("due: partition %d skipped: %s", part.partition, e.message)
        return found

    def _outcome(self, timers: Sequence[DueTimer], perform: Outcome) -> list[Any]:
        """``perform`` on each partition's part of ``timers``, their appends overlapping
        (``write_each``): [(the part's indexes, its result)], or the first partition's
        error once every part is settled. A failed part leaves the others committed, and
        the dispatcher's release then finds only the failed part's timers in flight."""
        groups = by_partition([t.topic for t in timers], self.partition)
        writes = [
            (self.ownership.owned_partition(p), _bound(perform, [timers[i] for i in idx]))
            for p, idx in groups.items()
        ]
        found = write_each(writes)
        for answer in found:
            if isinstance(answer, TimerStoreError):
                raise answer
        return list(zip(groups.values(), found, strict=True))

    def commit_delivered(
        self, timers: Sequence[DueTimer], delivered_ms: int, *, sink: str
    ) -> list[int]:
        offsets = [-1] * len(timers)
        for idx, found in self._outcome(
            timers, lambda s, b: effects.commit_delivered(s, b, delivered_ms, sink)
        ):
            for i, offset in zip(idx, found, strict=True):
                offsets[i] = offset
        if sink == LOG_SINK:
            self._mirror(timers, offsets)
        return offsets

    def _mirror(self, timers: Sequence[DueTimer], offsets: list[int]) -> None:
        """Mark the delivered topics for the mirror, each with its acknowledged log end."""
        ends: dict[str, int] = {}
        for t, offset in zip(timers, offsets, strict=True):
            ends[t.topic] = max(ends.get(t.topic, 0), offset + 1)
        for topic, end_offset in ends.items():
            part = self.ownership.held_locally(self.partition(topic))
            if part is not None:
                self.mirror.send(topic, part.store, end_offset)

    def retry_later(
        self, timers: Sequence[DueTimer], retry_at_ms: int, error: str, *, attempt: bool = True
    ) -> None:
        self._outcome(timers, lambda s, b: effects.retry_later(s, b, retry_at_ms, error, attempt))

    def dead_letter(self, timers: Sequence[DueTimer], now_ms: int, error: str) -> None:
        self._outcome(timers, lambda s, b: effects.dead_letter(s, b, now_ms, error))

    def release(self, timers: Sequence[DueTimer]) -> None:
        for p, idx in by_partition([t.topic for t in timers], self.partition).items():
            part = self.ownership.held_locally(p)
            if part is not None:  # a partition gone is released with its store
                part.store.release([timers[i] for i in idx])

    def housekeep(self, now_ms: int) -> HousekeepingReport:
        """Each owned partition's local housekeeping (no record: it changes no answer)."""
        reports = [part.store.housekeep(now_ms) for part in self.ownership.live_partitions()]
        return HousekeepingReport(
            watermark_ms=min((r.watermark_ms for r in reports), default=0),
            watermark_advanced=any(r.watermark_advanced for r in reports),
            done_expired=sum(r.done_expired for r in reports),
            log_messages_expired=sum(r.log_messages_expired for r in reports),
        )

    # ------------------------------------------------------------------ the cluster
    def cluster_view(self) -> ClusterView:
        return cluster_view(self.ownership, now_ms())

    def caught_up(self) -> bool:
        return not self._closed and self.client.is_connected and self.ownership.caught_up()

    def close(self) -> None:
        """Hand every partition over at once (leases released), then stop the threads."""
        if self._closed:
            return
        self._closed = True
        try:
            self.loop.run(self.ownership.stop(), 60)
            self.loop.run(self.rpc.stop(), 10)
            self.loop.run(self.client.close(), 10)
        finally:
            self.mirror.close()
            self.fanout.shutdown(wait=False)
            self.ownership.shutdown()
            self.loop.stop()


def _check_schedule(timers: Sequence[NewTimer], now_ms: int) -> None:
    """What a schedule's owner would refuse as a whole (names, times), refused here first
    with the caller's item indexes."""
    validate_idents([t.topic for t in timers], [t.id for t in timers])
    check_range(now_ms, "now_ms")
    for i, t in enumerate(timers):
        if t.deliver_at_ms > MAX_TIME_MS:
            check_range(t.deliver_at_ms, f"timers[{i}].deliver_at_ms")


def _bound(perform: Outcome, batch: list[DueTimer]) -> Perform:
    return lambda store: perform(store, batch)


def open_cluster_store(cluster: ClusterSettings, rocks: RocksSettings) -> ClusterStore:
    """Connect, create the stream and buckets if missing, start the balance loop and the
    call server on the store's own loop thread, and return at once; ``caught_up()`` turns
    True once the node has joined and restored every partition it owns."""
    loop = LoopThread(f"ts-cluster-{cluster.node_id}")
    try:
        parts = loop.run(join(cluster, rocks, loop), OPEN_TIMEOUT_S)
        store = ClusterStore(parts)
        loop.run(store.rpc.start(), OPEN_TIMEOUT_S)
    except (OSError, TimeoutError, nats.errors.Error) as e:
        loop.stop()
        urls = ", ".join(cluster.nats_urls)
        raise StoreOpenError(f"cannot join the cluster at {urls}: {e!r}") from e
    except BaseException:
        loop.stop()
        raise
    store.ownership.start()
    return store
