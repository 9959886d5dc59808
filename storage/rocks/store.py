"""The RocksDB timer store: RocksDB keys of delivery time replace the time wheel.

Concurrency: every operation that reads-then-writes timer state (schedule, cancel, due,
commit, retry, dead-letter, release, housekeeping) holds ``self._lock``. That makes the
in-flight set, the counters and the scan cursor exact, and it closes the classic races:
a cancel cannot remove a timer the scanner is handing out at the same moment, and a
watermark advance cannot overtake a past-due schedule that is being clamped to it.

The scan cursor (``_scan_from``) is the first key the next due scan looks at: every key
below it is in flight or deleted, so the scanner never wades through the tombstones of
delivered timers. A past-due schedule is clamped to a key time at or after the cursor
(see ``_clamp_floor_ms``), so it cannot land behind the scanner. The persisted watermark
is where a restarted store starts; housekeeping advances it to the first live key and
range-deletes and compacts everything below it.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Sequence

import msgspec
import rocksdict as rd

from storage import codec
from storage.codec import JournalEntry, TimerRecord
from storage.errors import ConflictError, InvalidInputError, NotFoundError, StoreClosedError
from storage.protocol import (
    CancelOutcome,
    CancelResult,
    DueTimer,
    HousekeepingReport,
    LoggedMessage,
    NewTimer,
    ScheduleResult,
    StoreStats,
    TimerPage,
    TimerState,
    TimerView,
    TopicInfo,
)
from storage.rocks import housekeeping, ingest, reads
from storage.rocks.counters import CounterDelta, Counters
from storage.rocks.db import RocksHandles, RocksSettings, multi_get, open_db, read_ticker
from storage.rocks.ingest import IngestReport


class RocksTimerStore:
    name = "rocks"

    def __init__(self, settings: RocksSettings) -> None:
        self.settings = settings
        self._h: RocksHandles | None = open_db(settings)
        self._lock = threading.Lock()
        self._counters = Counters.load(self._h.cfs["meta"])
        self._in_flight: set[bytes] = set()
        self._scan_from = codec.u64(self._counters.watermark_ms)

    # ----------------------------------------------------------------- plumbing
    @property
    def handles(self) -> RocksHandles:
        if self._h is None:
            raise StoreClosedError("the store is closed")
        return self._h

    def _write(self, batch: rd.WriteBatch, delta: CounterDelta | None = None) -> None:
        h = self.handles
        if delta is not None:
            delta.stage(batch, h.handles["meta"])
        h.db.write(batch, h.write_options)
        if delta is not None:
            delta.apply()

    def _clamp_floor_ms(self) -> int:
        """The earliest key time a new timer may get without landing behind the scanner."""
        floor_ms = codec.timer_key_ms(self._scan_from)
        return floor_ms if len(self._scan_from) == 8 else floor_ms + 1

    def ticker(self, name: str) -> int:
        """A RocksDB statistics ticker (needs ``RocksSettings.statistics``)."""
        return read_ticker(self.handles.options, name)

    # ----------------------------------------------------------------- schedule
    def schedule(self, timers: Sequence[NewTimer], now_ms: int) -> list[ScheduleResult]:
        names = codec.validate_idents((t.topic, t.id) for t in timers)
        idents = [topic + codec.SEPARATOR + tid for topic, tid in names]
        h = self.handles
        cf_timers, cf_ids = h.handles["timers"], h.handles["ids"]
        timer_key, u64, encode = codec.timer_key, codec.u64, codec.encode
        with self._lock:
            old_times = multi_get(h.cfs["ids"], idents)
            self._refuse_too_late(timers, idents, names, old_times)
            floor_ms = self._clamp_floor_ms()
            batch = rd.WriteBatch(raw_mode=True)
            put, delete = batch.put, batch.delete
            delta = CounterDelta(self._counters)
            latest: dict[bytes, int] = {}  # ident -> key time written earlier in this batch
            results = []
            for timer, (topic, tid), ident, old in zip(
                timers, names, idents, old_times, strict=True
            ):
                deliver_ms = timer.deliver_at_ms
                key_ms = deliver_ms if deliver_ms >= floor_ms else floor_ms
                previous_ms = latest.get(ident)
                if previous_ms is None and old is not None:
                    previous_ms = codec.read_u64(old)
                if previous_ms is None:
                    delta.pending[timer.topic] += 1
                elif previous_ms != key_ms:
                    delete(timer_key(previous_ms, topic, tid), cf_timers)
                record = (timer.payload, timer.headers, now_ms, deliver_ms, 0, timer.binary)
                put(timer_key(key_ms, topic, tid), encode(record), cf_timers)
                put(ident, u64(key_ms), cf_ids)
                latest[ident] = key_ms
                results.append(
                    ScheduleResult(timer.topic, timer.id, key_ms, now_ms, previous_ms is not None)
                )
            self._write(batch, delta)
        return results

    def _refuse_too_late(
        self,
        timers: Sequence[NewTimer],
        idents: list[bytes],
        names: list[tuple[bytes, bytes]],
        old_times: list[bytes | None],
    ) -> None:
        """Raise ConflictError for the first item that is in flight or already delivered."""
        if self._in_flight:
            for i, old in enumerate(old_times):
                if old is not None:
                    key = codec.timer_key(codec.read_u64(old), *names[i])
                    if key in self._in_flight:
                        raise _too_late(i, timers[i], TimerState.IN_FLIGHT, "is being delivered")
        unseen = [i for i, old in enumerate(old_times) if old is None]
        done = multi_get(self.handles.cfs["done"], [idents[i] for i in unseen])
        for i, record in zip(unseen, done, strict=True):
            if record is not None:
                raise _too_late(i, timers[i], TimerState.DELIVERED, "was already delivered")

    # ----------------------------------------------------------------- cancel
    def cancel(self, idents: Sequence[tuple[str, str]]) -> list[CancelResult]:
        names = [(codec.validate_name("topic", t), codec.validate_name("id", i)) for t, i in idents]
        h = self.handles
        keys = [codec.ident_key(t, i) for t, i in names]
        with self._lock:
            old_times = multi_get(h.cfs["ids"], keys)
            batch = rd.WriteBatch(raw_mode=True)
            delta = CounterDelta(self._counters)
            results: list[CancelResult | None] = [None] * len(keys)
            unseen = []
            removed: set[bytes] = set()
            for i, (ident, old) in enumerate(zip(keys, old_times, strict=True)):
                if ident in removed:
                    results[i] = CancelResult(CancelOutcome.UNKNOWN)
                elif old is None:
                    unseen.append(i)
                elif codec.timer_key(codec.read_u64(old), *names[i]) in self._in_flight:
                    results[i] = CancelResult(CancelOutcome.TOO_LATE, TimerState.IN_FLIGHT)
                else:
                    batch.delete(
                        codec.timer_key(codec.read_u64(old), *names[i]), h.handles["timers"]
                    )
                    batch.delete(ident, h.handles["ids"])
                    delta.pending[idents[i][0]] -= 1
                    delta.totals["cancelled"] += 1
                    removed.add(ident)
                    results[i] = CancelResult(CancelOutcome.REMOVED)
            self._cancel_unseen(unseen, keys, results, batch, delta)
            self._write(batch, delta)
        return [r for r in results if r is not None]

    def _cancel_unseen(
        self,
        unseen: list[int],
        keys: list[bytes],
        results: list[CancelResult | None],
        batch: rd.WriteBatch,
        delta: CounterDelta,
    ) -> None:
        """Delivered -> too late; dead-lettered -> removed from the dead letters; else unknown."""
        h = self.handles
        done = multi_get(h.cfs["done"], [keys[i] for i in unseen])
        dead = multi_get(h.cfs["deadletter"], [keys[i] for i in unseen])
        for i, done_value, dead_value in zip(unseen, done, dead, strict=True):
            if done_value is not None:
                results[i] = CancelResult(CancelOutcome.TOO_LATE, TimerState.DELIVERED)
            elif dead_value is not None:
                batch.delete(keys[i], h.handles["deadletter"])
                delta.totals["dead_lettered"] -= 1
                delta.totals["cancelled"] += 1
                results[i] = CancelResult(CancelOutcome.REMOVED)
            else:
                results[i] = CancelResult(CancelOutcome.UNKNOWN)

    # ----------------------------------------------------------------- delivery
    def due(self, now_ms: int, limit: int) -> list[DueTimer]:
        h = self.handles
        options = rd.ReadOptions()  # must outlive the iterator (it points into the bound)
        options.set_iterate_upper_bound(codec.u64(now_ms + 1))
        out: list[DueTimer] = []
        in_flight = self._in_flight
        read_u64, decode_record = codec.read_u64, codec.decode_record
        with self._lock:
            it = h.cfs["timers"].iter(options)
            it.seek(self._scan_from)
            valid, step, key_of, value_of = it.valid, it.next, it.key, it.value
            last = None
            while len(out) < limit and valid():
                key = last = key_of()
                if key not in in_flight:
                    topic, _, tid = key[8:].partition(b"\0")
                    record = decode_record(value_of())
                    out.append(DueTimer(key, topic.decode(), tid.decode(), read_u64(key), record))
                    in_flight.add(key)
                step()
            exhausted = not valid()
            del it, valid, step, key_of, value_of
            if last is not None:
                self._scan_from = last + codec.SEPARATOR
            if exhausted:  # every key below now + 1 was seen: the cursor may move there
                self._scan_from = max(self._scan_from, codec.u64(now_ms + 1))
        return out

    def commit_delivered(
        self, timers: Sequence[DueTimer], delivered_ms: int, *, to_topic_log: bool
    ) -> list[int]:
        hd = self.handles.handles
        cf_timers, cf_ids, cf_done, cf_log = hd["timers"], hd["ids"], hd["done"], hd["topiclog"]
        encode, log_key = codec.encode, codec.log_key
        with self._lock:
            batch = rd.WriteBatch(raw_mode=True)
            put, delete = batch.put, batch.delete
            delta = CounterDelta(self._counters)
            offsets, journal = [], []
            for t in timers:
                key, r = t.key, t.record
                ident = key[8:]
                attempts = r.attempts + 1
                offset = -1
                if to_topic_log:
                    offset = delta.take_offset(t.topic)
                    message = (
                        t.id,
                        r.payload,
                        r.headers,
                        r.binary,
                        r.requested_deliver_ms,
                        t.key_ms,
                        delivered_ms,
                        attempts,
                    )  # the fields of codec.LogMessage, encoded as the same array
                    put(log_key(ident[: -len(t.id) - 1], offset), encode(message), cf_log)
                delete(key, cf_timers)
                delete(ident, cf_ids)
                done = (delivered_ms, offset, t.key_ms, r.requested_deliver_ms, r.created_ms)
                put(ident, encode(done), cf_done)  # codec.DoneRecord
                offsets.append(offset)
                journal.append(
                    (
                        t.topic,
                        t.id,
                        r.requested_deliver_ms,
                        t.key_ms,
                        delivered_ms,
                        attempts,
                        offset,
                        r.created_ms,
                    )
                )  # codec.JournalEntry
            for topic, count in Counter(t.topic for t in timers).items():
                delta.pending[topic] -= count
            sequence = self._counters.totals["journal_seq"]
            put(codec.journal_key(delivered_ms, sequence), encode(journal), hd["journal"])
            delta.totals["journal_seq"] += 1
            delta.totals["delivered"] += len(timers)
            self._write(batch, delta)
            self._in_flight.difference_update([t.key for t in timers])
        return offsets

    def retry_later(self, timers: Sequence[DueTimer], retry_at_ms: int, error: str) -> None:
        """Move each timer to ``retry_at_ms`` with its attempt count raised (durable back-off)."""
        hd = self.handles.handles
        with self._lock:
            batch = rd.WriteBatch(raw_mode=True)
            for t in timers:
                topic_b, id_b = t.topic.encode(), t.id.encode()
                record = _with_attempt(t.record)
                batch.delete(t.key, hd["timers"])
                key = codec.timer_key(retry_at_ms, topic_b, id_b)
                batch.put(key, codec.encode(record), hd["timers"])
                batch.put(codec.ident_key(topic_b, id_b), codec.u64(retry_at_ms), hd["ids"])
            self._write(batch)
            self._in_flight.difference_update(t.key for t in timers)

    def dead_letter(self, timers: Sequence[DueTimer], now_ms: int, error: str) -> None:
        hd = self.handles.handles
        with self._lock:
            batch = rd.WriteBatch(raw_mode=True)
            delta = CounterDelta(self._counters)
            for t in timers:
                ident = codec.ident_key(t.topic.encode(), t.id.encode())
                letter = codec.DeadLetter(t.key_ms, _with_attempt(t.record), now_ms, error)
                batch.delete(t.key, hd["timers"])
                batch.delete(ident, hd["ids"])
                batch.put(ident, codec.encode(letter), hd["deadletter"])
                delta.pending[t.topic] -= 1
                delta.totals["dead_lettered"] += 1
            self._write(batch, delta)
            self._in_flight.difference_update(t.key for t in timers)

    def release(self, timers: Sequence[DueTimer]) -> None:
        with self._lock:
            keys = [t.key for t in timers if t.key in self._in_flight]
            self._in_flight.difference_update(keys)
            if keys:
                self._scan_from = min(min(keys), self._scan_from)

    # ----------------------------------------------------------------- dead letters
    def dead_letters(
        self, *, topic: str | None = None, limit: int = 100, after: str | None = None
    ) -> TimerPage:
        return reads.dead_letters(self.handles, topic=topic, limit=limit, after=after)

    def replay_dead_letter(self, topic: str, timer_id: str, now_ms: int) -> ScheduleResult:
        names = (codec.validate_name("topic", topic), codec.validate_name("id", timer_id))
        ident = codec.ident_key(*names)
        h = self.handles
        with self._lock:
            raw = h.cfs["deadletter"].get(ident)
            if raw is None:
                raise NotFoundError(f"no dead letter {topic}/{timer_id}")
            if h.cfs["ids"].get(ident) is not None:
                raise ConflictError(
                    f"{topic}/{timer_id} is pending again; cancel it first",
                    state=TimerState.PENDING,
                )
            letter = codec.decode_dead_letter(raw)
            key_ms = max(now_ms, self._clamp_floor_ms())
            record = msgspec.structs.replace(letter.record, attempts=0)
            batch = rd.WriteBatch(raw_mode=True)
            delta = CounterDelta(self._counters)
            batch.delete(ident, h.handles["deadletter"])
            key = codec.timer_key(key_ms, *names)
            batch.put(key, codec.encode(record), h.handles["timers"])
            batch.put(ident, codec.u64(key_ms), h.handles["ids"])
            delta.totals["dead_lettered"] -= 1
            delta.pending[topic] += 1
            self._write(batch, delta)
        return ScheduleResult(topic, timer_id, key_ms, record.created_ms, False)

    def purge_dead_letters(self, topic: str | None = None) -> int:
        h = self.handles
        with self._lock:
            keys = reads.dead_letter_keys(h, topic)
            for chunk in _chunks(keys, 4096):
                batch = rd.WriteBatch(raw_mode=True)
                for key in chunk:
                    batch.delete(key, h.handles["deadletter"])
                delta = CounterDelta(self._counters)
                delta.totals["dead_lettered"] -= len(chunk)
                self._write(batch, delta)
        return len(keys)

    # ----------------------------------------------------------------- reads
    def get(self, topic: str, timer_id: str) -> TimerView | None:
        names = (codec.validate_name("topic", topic), codec.validate_name("id", timer_id))
        return reads.get_timer(self.handles, names, self._in_flight)

    def list_pending(
        self,
        *,
        from_ms: int = 0,
        to_ms: int | None = None,
        topic: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> TimerPage:
        if topic is not None:
            codec.validate_name("topic", topic)
        if limit < 1:
            raise InvalidInputError("limit must be at least 1", field="limit")
        start = max(from_ms, self._counters.watermark_ms)
        return reads.list_pending(self.handles, self._in_flight, start, to_ms, topic, limit, cursor)

    def count_pending_due_before(self, deadlines_ms: Sequence[int], cap: int) -> list[int]:
        start = codec.u64(self._counters.watermark_ms)
        return reads.count_keys_before(self.handles.cfs["timers"], start, deadlines_ms, cap)

    def read_log(self, topic: str, offset: int, limit: int) -> list[LoggedMessage]:
        topic_b = codec.validate_name("topic", topic)
        start = max(offset, self._counters.log_start.get(topic, 0))
        return reads.read_log(self.handles.cfs["topiclog"], topic_b, start, limit)

    def topics(self) -> list[TopicInfo]:
        c = self._counters
        names = sorted(set(c.pending_by_topic) | set(c.next_offset))
        return [TopicInfo(n, c.pending_by_topic.get(n, 0), c.next_offset.get(n, 0)) for n in names]

    def stats(self) -> StoreStats:
        c = self._counters
        return StoreStats(
            pending=sum(c.pending_by_topic.values()),
            in_flight=len(self._in_flight),
            delivered=c.totals["delivered"],
            cancelled=c.totals["cancelled"],
            dead_lettered=c.totals["dead_lettered"],
            pending_by_topic=dict(c.pending_by_topic),
            watermark_ms=c.watermark_ms,
        )

    def journal(self, since_ms: int = 0) -> Iterable[JournalEntry]:
        """Delivery history still within retention (for export and analytics)."""
        return reads.journal(self.handles.cfs["journal"], since_ms)

    # ----------------------------------------------------------------- housekeeping
    def housekeep(self, now_ms: int) -> HousekeepingReport:
        h = self.handles
        with self._lock:
            before = self._counters.watermark_ms
            delta = CounterDelta(self._counters)
            watermark_ms = housekeeping.advance_watermark(h, before, self._clamp_floor_ms(), delta)
            self._write(rd.WriteBatch(raw_mode=True), delta)
        if watermark_ms > before:
            housekeeping.drop_below(h, watermark_ms)
        done_expired = housekeeping.expire_done(h, now_ms - self.settings.done_retention_ms)
        log_expired = self._expire_log(now_ms - self.settings.log_retention_ms)
        return HousekeepingReport(watermark_ms, watermark_ms > before, done_expired, log_expired)

    def _expire_log(self, older_than_ms: int) -> int:
        h = self.handles
        expired = 0
        for topic, end in list(self._counters.next_offset.items()):
            start = self._counters.log_start.get(topic, 0)
            new_start = housekeeping.first_log_offset_after(h, topic, start, end, older_than_ms)
            if new_start > start:
                with self._lock:
                    delta = CounterDelta(self._counters)
                    delta.log_start[topic] = new_start
                    batch = rd.WriteBatch(raw_mode=True)
                    topic_b = topic.encode()
                    batch.delete_range(
                        codec.log_key(topic_b, start),
                        codec.log_key(topic_b, new_start),
                        h.handles["topiclog"],
                    )
                    self._write(batch, delta)
                expired += new_start - start
        return expired

    def ingest_staged(self, stage_dir: str, *, replace: bool = False) -> IngestReport:
        """Ingest a bulk import's staged SST files (see ``storage.rocks.ingest``)."""
        return ingest.ingest_staged(self, stage_dir, replace=replace)

    def flush(self) -> None:
        self.handles.db.flush()

    def close(self) -> None:
        with self._lock:
            if self._h is not None:
                self._h.close()
                self._h = None


def _too_late(index: int, timer: NewTimer, state: TimerState, what: str) -> ConflictError:
    return ConflictError(
        f"timers[{index}]: {timer.topic}/{timer.id} {what}", state=state, field=f"timers[{index}]"
    )


def _with_attempt(record: TimerRecord) -> TimerRecord:
    return msgspec.structs.replace(record, attempts=record.attempts + 1)


def _chunks(items: list[bytes], size: int) -> Iterable[list[bytes]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
