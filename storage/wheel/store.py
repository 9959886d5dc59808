"""The RIP-43 time-wheel store behind the TimerStore protocol (RocketMQ 5's design).

Write path: every call appends one message-log frame (the ack point), then writes the
TimerLog units and wheel slots that index it (``WheelCore.enqueue``). Read path: ``due``
advances RocketMQ's read time slot by slot, walking each chain (``dequeue.SlotWalk``).

Where this store must answer differently from the RocksDB store, and why:

* Precision: a slot is read once all of it is due (``slot + precision - 1 <= now``), so
  a timer is never early and up to one precision late (RocketMQ reads a slot when the
  write time has passed it: the same bound).
* Cancel of a delivered timer answers ``unknown``, not ``too_late``: the wheel keeps
  no record of deliveries by id (RocketMQ would write a delete marker and say OK).
  Schedule of an already delivered id is a new timer, not a conflict, for the same
  reason. Cancel of an id never scheduled answers ``unknown`` truthfully thanks to the
  pending index; RocketMQ would append a delete unit that matches nothing.
* Cancelled timers are not rolled again: RocketMQ re-writes a cancelled timer's body at
  every roll until its delete unit meets it in the final slot; the index lets this
  store drop it at the next roll (its delete units still roll, as RocketMQ's).
* ``get`` and ``list_pending`` read the in-memory pending index plus one body read per
  returned timer; a listing page costs O(pending) CPU (RocksDB: one bounded scan).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import msgspec

from storage.errors import ConflictError, NotFoundError, StoreClosedError, StoreOpenError
from storage.grouping import Outcome, schedule_each
from storage.names import validate_name
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
from storage.records import TimerRecord
from storage.wheel import delivery, inspect
from storage.wheel.control import FileControl
from storage.wheel.core import WheelCore
from storage.wheel.layout import (
    SINK_TOTAL_PREFIX,
    CancelRec,
    DeadRemovedRec,
    Record,
    SchedRec,
)
from storage.wheel.recovery import recover
from storage.wheel.settings import WheelSettings


class WheelTimerStore:
    name = "wheel"

    def __init__(self, settings: WheelSettings) -> None:
        self.settings = settings
        self._core: WheelCore | None = _open_core(settings)
        self._lock = threading.Lock()
        try:
            self._control = FileControl(settings.path)
        except OSError as exc:
            self._core.close()
            raise _open_error(settings.path, exc) from exc

    @property
    def control(self) -> FileControl:
        """Routes and consumer-group offsets, in one fsynced file beside the logs."""
        return self._control

    @property
    def core(self) -> WheelCore:
        if self._core is None:
            raise StoreClosedError("the store is closed")
        return self._core

    def counters(self) -> dict[str, object]:
        """Benchmark counters: bytes written and fsyncs per file kind, rolls, chain walks."""
        return self.core.counters.snapshot()

    # ----------------------------------------------------------------- writes
    def schedule_each(self, timers: Sequence[NewTimer], now_ms: int) -> list[Outcome]:
        return schedule_each(self.schedule, timers, now_ms)

    def schedule(self, timers: Sequence[NewTimer], now_ms: int) -> list[ScheduleResult]:
        for t in timers:
            validate_name("topic", t.topic), validate_name("id", t.id)
        with self._lock:
            c = self.core
            c.note_now(now_ms)
            for i, t in enumerate(timers):
                entry = c.index.get((t.topic, t.id))
                if entry is not None and entry.seq in c.in_flight:
                    raise ConflictError(
                        f"timers[{i}]: {t.topic}/{t.id} is being delivered",
                        state=TimerState.IN_FLIGHT,
                        field=f"timers[{i}]",
                    )
            staged: dict[tuple[str, str], tuple[int, int]] = {}
            records: list[Record] = []
            results = []
            for t in timers:
                ident = (t.topic, t.id)
                old = staged.get(ident) or c.index.get(ident)
                if old is not None:
                    records.append(CancelRec(old[0], t.topic, t.id, old[1]))
                seq, key_ms = c.take_seq(), max(t.deliver_at_ms, c.scan_ms)
                c.counters.past_due += t.deliver_at_ms < c.scan_ms
                record = TimerRecord(t.payload, t.headers, now_ms, t.deliver_at_ms, 0, t.binary)
                records.append(SchedRec(seq, t.topic, t.id, key_ms, record))
                staged[ident] = (seq, key_ms)
                results.append(ScheduleResult(t.topic, t.id, key_ms, now_ms, old is not None))
            c.enqueue_records(records, c.append(records))
        return results

    def cancel(self, idents: Sequence[tuple[str, str]]) -> list[CancelResult]:
        for topic, tid in idents:
            validate_name("topic", topic), validate_name("id", tid)
        with self._lock:
            c = self.core
            records: list[Record] = []
            results = []
            removed: set[tuple[str, str]] = set()  # by an earlier item of this batch
            for ident in idents:
                entry = None if ident in removed else c.index.get(ident)
                if entry is not None and entry.seq in c.in_flight:  # as often as it is asked
                    results.append(CancelResult(CancelOutcome.TOO_LATE, TimerState.IN_FLIGHT))
                    continue
                if entry is not None:
                    records.append(CancelRec(entry.seq, *ident, entry.key_ms, cancel=True))
                    if ident in c.dead:  # scheduled again after its dead letter: both go
                        records.append(DeadRemovedRec(*ident))
                elif ident not in removed and ident in c.dead:
                    records.append(DeadRemovedRec(*ident, cancel=True))
                else:  # never scheduled, delivered (not remembered) or removed just now
                    results.append(CancelResult(CancelOutcome.UNKNOWN))
                    continue
                results.append(CancelResult(CancelOutcome.REMOVED))
                removed.add(ident)
            c.enqueue_records(records, c.append(records))
            for rec in records:
                ident = (rec.topic, rec.id)
                if isinstance(rec, CancelRec):
                    del c.index[ident]
                    c.pending_by_topic[rec.topic] -= 1
                    c.totals["cancelled"] += 1
                elif isinstance(rec, DeadRemovedRec):
                    del c.dead[ident]
                    c.totals["cancelled"] += rec.cancel  # not the one a pending cancel took
            _drop_zero(c.pending_by_topic)
        return results

    # ----------------------------------------------------------------- delivery
    def due(self, now_ms: int, limit: int) -> list[DueTimer]:
        with self._lock:
            return delivery.due(self.core, now_ms, limit)

    def commit_delivered(
        self, timers: Sequence[DueTimer], delivered_ms: int, *, sink: str
    ) -> list[int]:
        with self._lock:
            return delivery.commit_delivered(self.core, timers, delivered_ms, sink)

    def retry_later(
        self, timers: Sequence[DueTimer], retry_at_ms: int, error: str, *, attempt: bool = True
    ) -> None:
        """A new incarnation at ``retry_at_ms`` (attempts + 1 unless ``attempt`` is False)
        that finishes the old one."""
        with self._lock:
            delivery.retry_later(self.core, timers, retry_at_ms, attempt=attempt)

    def dead_letter(self, timers: Sequence[DueTimer], now_ms: int, error: str) -> None:
        with self._lock:
            delivery.dead_letter(self.core, timers, now_ms, error)

    def release(self, timers: Sequence[DueTimer]) -> None:
        """Back to pending: they stay in their slot, which stays open until they finish."""
        with self._lock:
            delivery.release(self.core, timers)

    # ----------------------------------------------------------------- dead letters
    def replay_dead_letter(self, topic: str, timer_id: str, now_ms: int) -> ScheduleResult:
        validate_name("topic", topic), validate_name("id", timer_id)
        ident = (topic, timer_id)
        with self._lock:
            c = self.core
            c.note_now(now_ms)
            dead = c.dead.get(ident)
            if dead is None:
                raise NotFoundError(f"no dead letter {topic}/{timer_id}")
            entry = c.index.get(ident)
            if entry is not None and entry.seq in c.in_flight:  # the state cancel reports
                raise ConflictError(
                    f"{topic}/{timer_id} is being delivered again", state=TimerState.IN_FLIGHT
                )
            if entry is not None:
                raise ConflictError(
                    # no "cancel it first": a cancel removes the dead letter too
                    f"{topic}/{timer_id} is pending again, scheduled since it was dead-lettered",
                    state=TimerState.PENDING,
                )
            key_ms = max(now_ms, c.scan_ms)
            letter = dead.letter.record
            record = msgspec.structs.replace(letter, attempts=0, due_again_at_ms=key_ms)
            records: list[Record] = [
                DeadRemovedRec(topic, timer_id),
                SchedRec(c.take_seq(), topic, timer_id, key_ms, record),
            ]
            c.enqueue_records(records, c.append(records))
            del c.dead[ident]
        return ScheduleResult(topic, timer_id, key_ms, record.created_at_ms, False)

    def purge_dead_letters(self, topic: str | None = None) -> int:
        with self._lock:
            c = self.core
            idents = [i for i in c.dead if topic is None or i[0] == topic]
            c.append([DeadRemovedRec(*i) for i in idents])
            for ident in idents:
                del c.dead[ident]
        return len(idents)

    def dead_letters(
        self,
        *,
        topic: str | None = None,
        limit: int = 100,
        after: str | None = None,
        max_bytes: int | None = None,
    ) -> TimerPage:
        with self._lock:
            return inspect.dead_letters(self.core, topic, limit, after, max_bytes)

    # ----------------------------------------------------------------- reads
    def get(self, topic: str, timer_id: str) -> TimerView | None:
        validate_name("topic", topic), validate_name("id", timer_id)
        with self._lock:
            return inspect.get(self.core, topic, timer_id)

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
        with self._lock:
            return inspect.list_pending(self.core, from_ms, to_ms, topic, limit, cursor, max_bytes)

    def count_pending_due_before(self, deadlines_ms: Sequence[int], cap: int) -> list[int]:
        with self._lock:
            return inspect.count_due_before(self.core, deadlines_ms, cap)

    def read_log(
        self, topic: str, offset: int, limit: int, max_bytes: int | None = None
    ) -> list[LoggedMessage]:
        validate_name("topic", topic)
        with self._lock:
            self.core.clamp_log_start(topic)
            return inspect.read_log(self.core, topic, offset, limit, max_bytes)

    def topics(self) -> list[TopicInfo]:
        with self._lock:
            c = self.core
            names = sorted(set(c.pending_by_topic) | set(c.cq.topics()))
            return [TopicInfo(n, c.pending_by_topic.get(n, 0), c.cq.length(n)) for n in names]

    def stats(self) -> StoreStats:
        with self._lock:
            c = self.core
            return StoreStats(
                pending=len(c.index),
                in_flight=len(c.in_flight),
                delivered=c.totals["delivered"],
                cancelled=c.totals["cancelled"],
                dead_lettered=len(c.dead),
                pending_by_topic=dict(c.pending_by_topic),
                watermark_ms=max(0, c.read_ms),
                delivered_by_sink={
                    name.removeprefix(SINK_TOTAL_PREFIX): n
                    for name, n in c.totals.items()
                    if name.startswith(SINK_TOTAL_PREFIX) and n
                },
            )

    # ----------------------------------------------------------------- housekeeping
    def housekeep(self, now_ms: int) -> HousekeepingReport:
        """Checkpoint, then delete the segments nothing references (retention)."""
        with self._lock:
            c = self.core
            before = c.last_checkpoint.read_ms
            point = c.checkpoint(now_ms)
            expired = c.retain(now_ms)
        return HousekeepingReport(max(0, point.read_ms), point.read_ms > before, 0, expired)

    def checkpoint(self, now_ms: int) -> None:
        with self._lock:
            self.core.checkpoint(now_ms)

    def simulate_crash(self) -> None:
        """For tests only: drop the store as a killed process would (no final checkpoint).

        File descriptors are closed; nothing is flushed or checkpointed, so the next open
        recovers by replaying the TimerLog exactly as after ``kill -9``.
        """
        with self._lock:
            if self._core is not None:
                self._core.close()
                self._core = None

    def close(self) -> None:
        with self._lock:
            if self._core is not None:
                self._core.checkpoint(self._core.write_ms)
                self._core.close()
                self._core = None


def _open_core(settings: WheelSettings) -> WheelCore:
    """The core with its files open and its state recovered.

    The directory and its files are created and opened here, so an unusable data
    directory (a parent that is a file, no permission) is a StoreOpenError naming it.
    """
    try:
        core = WheelCore(settings)
    except OSError as exc:
        raise _open_error(settings.path, exc) from exc
    try:
        recover(core)
    except BaseException:
        core.close()  # its files and the directory lock
        raise
    return core


def _open_error(path: str, exc: OSError) -> StoreOpenError:
    cause = exc.strerror or str(exc)
    where = exc.filename if exc.filename is not None else path
    return StoreOpenError(
        f"cannot open the wheel store in {path}: {cause} ({where}). Set data_dir "
        "(--data-dir or TIMERSTORE_DATA_DIR) to a directory this user can create and write."
    )


def _drop_zero(counter: dict[str, int]) -> None:
    for name in [n for n, v in counter.items() if v <= 0]:
        del counter[name]
