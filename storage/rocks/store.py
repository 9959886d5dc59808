"""The RocksDB timer store: RocksDB keys of delivery time replace the time wheel.

A thin facade over ``storage.rocks.core.RocksCore`` (the database, the lock, the counters,
the in-flight set and the scan cursor) and the modules that work on it: ``writes``
(schedule, cancel), ``delivery`` (due scan, commit, retry, dead letters), ``reads``,
``housekeeping`` and ``ingest``. None of them imports this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import rocksdict as rd

from storage.errors import InvalidInputError
from storage.grouping import Outcome, schedule_each
from storage.names import validate_name
from storage.protocol import (
    CancelResult,
    DueTimer,
    HousekeepingReport,
    IngestReport,
    LoggedMessage,
    NewTimer,
    ScheduleResult,
    StoreStats,
    TimerPage,
    TimerView,
    TopicInfo,
)
from storage.records import JournalEntry
from storage.rocks import delivery, housekeeping, ingest, reads, writes
from storage.rocks import keys as layout
from storage.rocks.control import RocksControl
from storage.rocks.core import RocksCore
from storage.rocks.counters import SINK_TOTAL_PREFIX, WRITE_PROBE_KEY
from storage.rocks.db import RocksHandles, RocksSettings, read_ticker
from storage.rocks.metrics import RocksMetrics, read_metrics
from storage.rules import RecordLimits


class RocksTimerStore:
    name = "rocks"

    def __init__(self, settings: RocksSettings) -> None:
        self.settings = settings
        self._core = RocksCore(settings)
        self._control = RocksControl(self._core)

    @property
    def handles(self) -> RocksHandles:
        return self._core.handles

    @property
    def core(self) -> RocksCore:
        """The shared core (for ``storage.rocks.control`` via ``core.control_parts()``)."""
        return self._core

    @property
    def control(self) -> RocksControl:
        """Routes and consumer-group offsets, in the ``control`` column family."""
        return self._control

    def ticker(self, name: str) -> int:
        """A RocksDB statistics ticker (needs ``RocksSettings.statistics``)."""
        return read_ticker(self.handles.options, name)

    def rocksdb_metrics(self) -> RocksMetrics:
        """RocksDB properties and tickers for ``/metrics`` (in memory: iterates nothing)."""
        return read_metrics(self.handles, self.settings.block_cache_bytes)

    # ----------------------------------------------------------------- writes
    def schedule(self, timers: Sequence[NewTimer], now_ms: int) -> list[ScheduleResult]:
        return writes.schedule(self._core, timers, now_ms)

    def schedule_each(self, timers: Sequence[NewTimer], now_ms: int) -> list[Outcome]:
        return schedule_each(self.schedule, timers, now_ms)

    def cancel(self, idents: Sequence[tuple[str, str]]) -> list[CancelResult]:
        return writes.cancel(self._core, idents)

    # ----------------------------------------------------------------- delivery
    def due(self, now_ms: int, limit: int) -> list[DueTimer]:
        return delivery.due(self._core, now_ms, limit)

    def commit_delivered(
        self, timers: Sequence[DueTimer], delivered_ms: int, *, sink: str
    ) -> list[int]:
        return delivery.commit_delivered(self._core, timers, delivered_ms, sink)

    def retry_later(
        self, timers: Sequence[DueTimer], retry_at_ms: int, error: str, *, attempt: bool = True
    ) -> None:
        delivery.retry_later(self._core, timers, retry_at_ms, attempt=attempt)

    def dead_letter(self, timers: Sequence[DueTimer], now_ms: int, error: str) -> None:
        delivery.dead_letter(self._core, timers, now_ms, error)

    def release(self, timers: Sequence[DueTimer]) -> None:
        delivery.release(self._core, timers)

    # ----------------------------------------------------------------- dead letters
    def dead_letters(
        self,
        *,
        topic: str | None = None,
        limit: int = 100,
        after: str | None = None,
        max_bytes: int | None = None,
    ) -> TimerPage:
        with self._core.reading() as h:
            return reads.dead_letters(h, topic=topic, limit=limit, after=after, max_bytes=max_bytes)

    def replay_dead_letter(self, topic: str, timer_id: str, now_ms: int) -> ScheduleResult:
        return delivery.replay_dead_letter(self._core, topic, timer_id, now_ms)

    def purge_dead_letters(self, topic: str | None = None) -> int:
        with self._core.lock:
            keys = reads.dead_letter_keys(self.handles, topic)
            return delivery.purge_dead_letters(self._core, keys)

    # ----------------------------------------------------------------- reads
    def get(self, topic: str, timer_id: str) -> TimerView | None:
        names = (validate_name("topic", topic), validate_name("id", timer_id))
        with self._core.reading() as h:
            return reads.get_timer(h, names, self._core.in_flight)

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
        if topic is not None:
            validate_name("topic", topic)
        if limit < 1:
            raise InvalidInputError("limit must be at least 1", field="limit")
        layout.check_range(from_ms, "from_ms")
        if to_ms is not None:
            layout.check_range(to_ms, "to_ms")
        start = max(from_ms, self._core.counters.watermark_ms)
        with self._core.reading() as h:
            return reads.list_pending(
                h, self._core.in_flight, start, to_ms, topic, limit, cursor, max_bytes
            )

    def count_pending_due_before(self, deadlines_ms: Sequence[int], cap: int) -> list[int]:
        for i, deadline_ms in enumerate(deadlines_ms):
            layout.check_range(deadline_ms, f"deadlines_ms[{i}]")
        start = layout.u64(self._core.counters.watermark_ms)
        with self._core.reading() as h:
            return reads.count_keys_before(h.cfs["timers"], start, deadlines_ms, cap)

    def read_log(
        self, topic: str, offset: int, limit: int, max_bytes: int | None = None
    ) -> list[LoggedMessage]:
        topic_b = validate_name("topic", topic)
        layout.check_range(offset, "offset", layout.MAX_OFFSET)
        c = self._core.counters
        # the published end, taken first: a commit's page is in RocksDB a moment before
        # its offsets are counted, and a message past the end must not be read (a
        # consumer's commit of the next offset would be refused as past the log end)
        end = c.next_offset.get(topic, 0)
        start = max(offset, c.log_start.get(topic, 0))
        with self._core.reading() as h:  # a closed store raises, even for an empty log
            if start >= end:
                return []
            return reads.read_log(
                h.cfs["topiclog"], topic_b, start, min(limit, end - start), max_bytes
            )

    def topics(self) -> list[TopicInfo]:
        c = self._core.counters
        names = sorted(set(c.pending_by_topic) | set(c.next_offset))
        return [TopicInfo(n, c.pending_by_topic.get(n, 0), c.next_offset.get(n, 0)) for n in names]

    def stats(self) -> StoreStats:
        c = self._core.counters
        with self._core.lock:  # one consistent snapshot; a commit adds "sink:<name>" totals
            totals, pending = dict(c.totals), dict(c.pending_by_topic)
            in_flight, watermark_ms = len(self._core.in_flight), c.watermark_ms
        return StoreStats(
            pending=sum(pending.values()),
            in_flight=in_flight,
            delivered=totals["delivered"],
            cancelled=totals["cancelled"],
            dead_lettered=totals["dead_lettered"],
            pending_by_topic=pending,
            watermark_ms=watermark_ms,
            delivered_by_sink={
                name.removeprefix(SINK_TOTAL_PREFIX): n
                for name, n in totals.items()
                if name.startswith(SINK_TOTAL_PREFIX) and n
            },
        )

    def journal(self, since_ms: int = 0) -> Iterable[JournalEntry]:
        """Delivery history still within retention (for export and analytics)."""
        return reads.journal(self.handles, layout.check_range(since_ms, "since_ms"))

    # ----------------------------------------------------------------- housekeeping
    def housekeep(self, now_ms: int) -> HousekeepingReport:
        return housekeeping.housekeep(self._core, now_ms)

    def ingest_staged(
        self,
        stage_dir: str,
        *,
        limits: RecordLimits,
        replace: bool = False,
        now_ms: int | None = None,
    ) -> IngestReport:
        """Ingest a bulk import's staged SST files (see ``storage.rocks.ingest``)."""
        return ingest.ingest_staged(
            self._core, stage_dir, limits=limits, replace=replace, now_ms=now_ms
        )

    # ----------------------------------------------------------------- write health
    def disk_full(self) -> bool:
        """Whether the last write found the disk full (until a write succeeds again)."""
        return self._core.write_health.no_space

    def write_failures(self) -> dict[str, int]:
        """Failed writes since the store opened, by reason (``no_space``, ``other``)."""
        return dict(self._core.write_health.failures)

    def probe_write(self) -> None:
        """One small durable write (a ``meta`` key): ``disk_full`` turns False once one
        succeeds; StoreFullError while the disk is still full."""
        batch = rd.WriteBatch(raw_mode=True)
        batch.put(WRITE_PROBE_KEY, layout.u64(0), self.handles.handles["meta"])
        self._core.write(batch)

    def flush(self) -> None:
        """Flush every column family's memtable to SST files (rocksdict's flush is per family)."""
        for family in self.handles.cfs.values():
            family.flush()

    def simulate_crash(self) -> None:
        """For tests only: drop the store as a killed process would.

        RocksDB's close flushes nothing beyond what its WAL already holds, so closing
        without any final bookkeeping is what ``kill -9`` leaves behind.
        """
        self._core.close()

    def close(self) -> None:
        self._core.close()
