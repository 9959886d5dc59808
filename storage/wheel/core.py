"""The wheel store's state: its files, the pending index, enqueue, checkpoint, retention.

The pending index maps (topic, id) to the timer's current incarnation. RocketMQ has no
such index (it cannot say whether a message id is pending); the protocol asks for
truthful cancel answers, get and list, so the wheel keeps one: one dict entry per
pending timer, about 300 bytes of Python memory each (measured in
``tests/storage/test_wheel_index.py``). It is not persisted: a restart rebuilds it by walking
every live slot of the wheel (``recovery``). That is the one memory cost that grows
with pending timers, and the documented price of truthful answers on this design.
"""

from __future__ import annotations

import fcntl
import os
from collections import Counter, deque
from typing import IO, NamedTuple

from storage.errors import StoreOpenError
from storage.protocol import DueTimer
from storage.wheel import checkpoint as ckpt
from storage.wheel import shape
from storage.wheel.counters import WheelCounters
from storage.wheel.dequeue import SlotWalk
from storage.wheel.layout import (
    MAGIC_DEFAULT,
    MAGIC_DELETE,
    MAGIC_ROLL,
    CancelRec,
    DeadRec,
    Record,
    SchedRec,
    topic_hash,
)
from storage.wheel.msglog import MessageLog
from storage.wheel.settings import WheelSettings
from storage.wheel.timerwheel import TimerLog, TimerWheel
from storage.wheel.topiclog import ConsumeQueues


class Entry(NamedTuple):
    seq: int
    key_ms: int  # the delivery time (clamped like the RocksDB store's key time)
    body_pos: int  # the current body copy in the message log
    body_size: int


class WheelCore:
    def __init__(self, settings: WheelSettings) -> None:
        self.settings = s = settings
        self.p = s.precision_ms
        os.makedirs(s.path, exist_ok=True)
        self._lock_file = _lock_directory(s.path)  # before any file is read or written
        try:
            shape.check(s.path, s.precision_ms, s.slots)  # before any file is opened or sized
        except BaseException:
            self._lock_file.close()
            raise
        self.counters = WheelCounters()
        self.msglog = MessageLog(
            os.path.join(s.path, "msglog"), s.msglog_segment_bytes, self.counters,
            sync=s.flush_policy == "sync",
        )  # fmt: skip
        self.timerlog = TimerLog(
            os.path.join(s.path, "timerlog"), s.timerlog_segment_bytes, self.counters
        )
        self.wheel = TimerWheel(os.path.join(s.path, "timerwheel"), s.slots, s.precision_ms,
                                self.counters)  # fmt: skip
        self.cq = ConsumeQueues(os.path.join(s.path, "cq"), self.counters)
        self.index: dict[tuple[str, str], Entry] = {}
        self.pending_by_topic: Counter[str] = Counter()
        self.in_flight: dict[int, int] = {}  # seq -> slot time it was handed out from
        self.outstanding: Counter[int] = Counter()  # slot time -> handed out, not finished
        self.slot_start: dict[int, int] = {}  # open slot time -> msglog end when its walk began
        # (message-log position, slot time): set by recovery, see replay_pos
        self.replay_floor: tuple[int, int] | None = None
        self.walk: SlotWalk | None = None
        self.released: deque[DueTimer] = deque()  # handed back by an engine stop
        self.scan_ms = -1  # the slot being (or next to be) read; -1 before the first clock
        self.write_ms = 0  # RocketMQ's currWriteTimeMs: the latest clock the store has seen
        self.next_seq = 1
        self.totals: Counter[str] = Counter()
        self.log_start: dict[str, int] = {}
        self.dead: dict[tuple[str, str], DeadRec] = {}
        self.msglog_meta: dict[int, tuple[int, int]] = {}
        self.timerlog_meta: dict[int, int] = {}
        self.last_checkpoint = ckpt.EMPTY
        self.last_checkpoint_ms = 0

    # ------------------------------------------------------------------ clock
    def note_now(self, now_ms: int) -> None:
        """Advance the write time; a fresh store starts reading at the first clock it sees."""
        self.write_ms = max(self.write_ms, now_ms)
        if self.scan_ms < 0:
            self.scan_ms = self.wheel.slot_ms(now_ms)
            self.checkpoint(now_ms)

    @property
    def read_ms(self) -> int:
        """RocketMQ's currReadTimeMs: the oldest slot not yet done (durable in checkpoints)."""
        current = self.walk.slot_ms if self.walk is not None else self.scan_ms
        open_slots = [ms for ms, n in self.outstanding.items() if n > 0]
        return min([current, *open_slots])

    def replay_pos(self) -> int:
        """Where the next recovery must start reading the message log.

        Recovery learns which timers are finished (delivered, retried, dead-lettered) only
        from the frames it replays, and their units stay in their slots until the read time
        passes them. So every finishing frame of a timer whose unit is in a slot at or
        after the read time must lie after this position: the message-log end when the
        oldest open slot began its walk. After a restart the slots re-walked get a new
        start, later than the finishing frames written before the crash; ``replay_floor``
        (the position recovery read from, and the last slot holding a unit of a timer it
        found finished) keeps the position there until the read time has passed that slot.
        """
        pos = min(self.slot_start.values(), default=self.msglog.end)
        if self.replay_floor is not None:
            floor_pos, until_ms = self.replay_floor
            if self.read_ms > until_ms:
                self.replay_floor = None
            else:
                pos = min(pos, floor_pos)
        return pos

    def scan_may_pass(self, now_ms: int) -> bool:
        """Whether the scanner may go past the slot at ``scan_ms`` (to its next slot).

        A unit goes into a slot from ``scan_ms`` up to the roll edge, at most ``scan_ms +
        slots x precision``. The wheel file holds 2 x slots slots and recovery walks one
        revolution of them from the checkpointed read time, so units stay below that
        read time + 2 x slots x precision: no unit overwrites a slot that is still open
        (a timer handed out long ago and not finished) and recovery finds every unit.
        Hence ``scan_ms`` stays at most ``slots x precision - precision`` ahead of the
        checkpointed read time. A lagging checkpoint is brought up to date here; a timer
        in flight for that long (7 days by default) stops the scanner until it is
        finished (RocketMQ's dequeue also waits until a slot's messages are put).
        """
        limit = self.settings.slots * self.p - self.p
        if self.scan_ms + self.p - self.last_checkpoint.read_ms <= limit:
            return True
        if self.scan_ms + self.p - self.read_ms > limit:
            return False  # an old slot is still open
        self.checkpoint(now_ms)  # only the checkpoint lags behind the read time
        return True

    # ------------------------------------------------------------------ writes
    def take_seq(self) -> int:
        seq = self.next_seq
        self.next_seq += 1
        return seq

    def append(self, records: list[Record]) -> list[tuple[int, int]]:
        """One message-log frame (the ack point of a call); (position, size) per record."""
        return self.msglog.append(records) if records else []

    def enqueue_records(self, records: list[Record], where: list[tuple[int, int]]) -> None:
        """Units for the bodies and delete messages just appended; index the bodies."""
        for rec, (pos, size) in zip(records, where, strict=True):
            if isinstance(rec, SchedRec):
                self.enqueue(pos, size, rec.seq, rec.topic, rec.key_ms, delete=False)
                ident = (rec.topic, rec.id)
                if ident not in self.index:
                    self.pending_by_topic[rec.topic] += 1
                self.index[ident] = Entry(rec.seq, rec.key_ms, pos, size)
            elif isinstance(rec, CancelRec):
                self.enqueue(pos, size, rec.target_seq, rec.topic, rec.key_ms, delete=True)

    def enqueue(
        self, body_pos: int, body_size: int, seq: int, topic: str, target_ms: int, delete: bool
    ) -> int:
        """RocketMQ ``doEnqueue``: append a unit to the slot's chain, then update the slot.

        Past-due targets go into the slot being read (they are delivered with it). A
        target at or beyond the roll window gets the ROLL magic and a unit at the window
        edge, or half way when it would fall just past the edge (RocketMQ gives the next
        roll time that way). Returns the unit's slot time.
        """
        p, s = self.p, self.settings
        target_ms = max(target_ms, self.scan_ms)
        write_ms = max(self.write_ms, self.scan_ms)
        edge_ms = min(write_ms + s.roll_window_ms, self.scan_ms + s.slots * p)
        magic = MAGIC_DEFAULT
        unit_ms = target_ms
        if target_ms >= edge_ms:
            magic |= MAGIC_ROLL
            unit_ms = edge_ms
            if target_ms - edge_ms < s.roll_window_ms // 3:
                unit_ms = min(edge_ms, write_ms + s.roll_window_ms // 2)
        if delete:
            magic |= MAGIC_DELETE
        slot = self.wheel.get_slot(unit_ms)
        pos = self.timerlog.append(
            slot.last_pos, magic, write_ms, unit_ms, body_pos, body_size, topic_hash(topic), seq
        )
        first = pos if slot.first_pos < 0 else slot.first_pos
        self.wheel.put_slot(unit_ms, first, pos, slot.num + (-1 if delete else 1), slot.magic)
        self.note_unit(pos, unit_ms, body_pos)
        walk = self.walk
        if delete and not magic & MAGIC_ROLL and walk and walk.slot_ms == slot_of(unit_ms, p):
            walk.deletes.add(seq)  # what pass 1 would read: the target may be below the cursor
        return unit_ms

    def note_unit(self, pos: int, unit_ms: int, body_pos: int) -> None:
        """Retention: a segment lives while a unit in it, or pointing into it, is unread."""
        base = self.timerlog.file.segment_of(pos).base
        self.timerlog_meta[base] = max(self.timerlog_meta.get(base, -1), unit_ms)
        base = self.msglog.file.segment_of(body_pos).base
        target, delivered = self.msglog_meta.get(base, (-1, -1))
        self.msglog_meta[base] = (max(target, unit_ms), delivered)

    def note_delivered(self, body_pos: int, delivered_ms: int) -> None:
        base = self.msglog.file.segment_of(body_pos).base
        target, delivered = self.msglog_meta.get(base, (-1, -1))
        self.msglog_meta[base] = (target, max(delivered, delivered_ms))

    # ------------------------------------------------------------------ checkpoint
    def checkpoint(self, now_ms: int) -> ckpt.Checkpoint:
        """Flush TimerLog, wheel, queues and message log, then record where they stand."""
        self.timerlog.file.fsync()
        self.wheel.flush()
        self.cq.fsync()
        self.msglog.file.fsync()
        point = ckpt.Checkpoint(
            read_ms=self.read_ms,
            replay_pos=self.replay_pos(),
            msglog_pos=self.msglog.end,
            timerlog_pos=self.timerlog.file.end,
            next_seq=self.next_seq,
            write_ms=self.write_ms,
            totals=dict(self.totals),
            log_start=dict(self.log_start),
            msglog_meta=dict(self.msglog_meta),
            timerlog_meta=dict(self.timerlog_meta),
            dead_letters=list(self.dead.values()),
        )
        ckpt.save(self.settings.path, point, self.counters)
        self.last_checkpoint, self.last_checkpoint_ms = point, now_ms
        return point

    def maybe_checkpoint(self, now_ms: int) -> None:
        if now_ms - self.last_checkpoint_ms >= self.settings.checkpoint_interval_ms:
            self.checkpoint(now_ms)

    # ------------------------------------------------------------------ retention
    def retain(self, now_ms: int) -> int:
        """Delete the oldest segments nothing needs; return topic-log messages dropped.

        As RocketMQ, files go oldest first. A TimerLog segment goes when every unit in
        it is for a slot before the checkpointed read time. A message-log segment goes
        when, in addition, the last checkpoint no longer replays it and every delivery
        in it is older than the topic-log retention.
        """
        point = self.last_checkpoint
        tl = self.timerlog.file
        while len(tl.segments) > 1 and tl.segments[0].end <= point.timerlog_pos:
            if self.timerlog_meta.get(tl.segments[0].base, -1) >= point.read_ms:
                break
            self.timerlog_meta.pop(tl.segments[0].base, None)
            tl.delete_segment(tl.segments[0])
        ml = self.msglog.file
        horizon = min(point.replay_pos, point.msglog_pos)
        oldest_ms = now_ms - self.settings.log_retention_ms
        doomed = []
        for segment in ml.segments[:-1]:
            target, delivered = self.msglog_meta.get(segment.base, (-1, -1))
            if segment.end > horizon or target >= point.read_ms or delivered >= oldest_ms:
                break
            doomed.append(segment)
        if not doomed:
            return 0
        dropped = self._advance_log_start(doomed[-1].end)
        for segment in doomed:
            self.msglog_meta.pop(segment.base, None)
        self.checkpoint(now_ms)  # the new log starts are durable before their records go
        for segment in doomed:
            ml.delete_segment(segment)
        return dropped

    def clamp_log_start(self, topic: str) -> None:
        """Move ``topic``'s log start past entries whose records are no longer stored.

        ``retain`` saves the new starts before it deletes, so this only matters for a
        directory whose segments an older version deleted before saving them: a read of
        the topic log then starts at the first message still stored instead of failing.
        """
        start = self.log_start.get(topic, 0)
        first = self.cq.entries(topic, start, 1)
        if first and first[0][0] < self.msglog.file.start:
            self.log_start[topic] = self.cq.first_offset_at(topic, self.msglog.file.start, start)

    def _advance_log_start(self, first_pos: int) -> int:
        dropped = 0
        for topic in self.cq.topics():
            start = self.log_start.get(topic, 0)
            new_start = self.cq.first_offset_at(topic, first_pos, start)
            if new_start > start:
                self.log_start[topic] = new_start
                dropped += new_start - start
        return dropped

    def close(self) -> None:
        self.msglog.close()
        self.timerlog.file.close()
        self.wheel.close()
        self.cq.close()
        self._lock_file.close()  # closing the file releases its lock


def _lock_directory(path: str) -> IO[bytes]:
    """An exclusive lock on ``path``'s ``LOCK`` file, held while the store is open.

    A second process on the same directory (two services, a service and an offline tool)
    would keep a pending index of its own and append to the same logs: what one
    acknowledged the other's next checkpoint could lose. RocksDB refuses such an open;
    so does this. flock is per open file, so a second open in one process is refused too.
    """
    lock_file = open(os.path.join(path, "LOCK"), "a+b")  # noqa: SIM115  # held until close
    try:
        fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock_file.close()
        raise StoreOpenError(
            f"cannot open the wheel store in {path}: another process holds it (a service "
            "still running). Stop that one, or give this one another data_dir "
            "(--data-dir or TIMERSTORE_DATA_DIR)."
        ) from None
    return lock_file


def slot_of(time_ms: int, precision_ms: int) -> int:
    return time_ms // precision_ms * precision_ms
