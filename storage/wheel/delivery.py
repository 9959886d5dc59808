"""The delivery side of the wheel store: dequeue, commit, retry, dead-letter, release.

``due`` is RocketMQ's TimerDequeueGetService and GetMessageService in one: it reads the
slot at the read time once the whole slot is due, walks its chain (deletes first), reads
each live body from the message log and hands it to the engine, rolls what must roll,
and moves on to the next slot when the chain is exhausted. Handed-out timers stay
``outstanding`` against their slot; the durable read time (``WheelCore.read_ms``) only
passes a slot when all of them are delivered, retried or dead-lettered.

Exactly once into the topic log: a delivery is a ``DeliveredRec`` in the message log,
written in one frame per commit; recovery collects the incarnations delivered since the
oldest open slot began its dequeue and never hands them out again (QMQ's dispatch log
plays that role, seed 001).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from storage.protocol import LOG_SINK, DueTimer
from storage.records import DeadLetter, LogMessage
from storage.rocks import keys as layout
from storage.wheel.core import Entry, WheelCore
from storage.wheel.dequeue import SlotWalk
from storage.wheel.layout import (
    SINK_TOTAL_PREFIX,
    CancelRec,
    DeadRec,
    DeliveredRec,
    Record,
    SchedRec,
    Unit,
)

Rolls = list[tuple[SchedRec | CancelRec, Entry | None]]


def handle(timer: DueTimer) -> tuple[int, int]:
    """(incarnation seq, slot time) from a DueTimer's key."""
    return layout.read_u64(timer.key, 0), layout.read_u64(timer.key, 8)


def due(c: WheelCore, now_ms: int, limit: int) -> list[DueTimer]:
    c.note_now(now_ms)
    out: list[DueTimer] = []
    _take_released(c, out, limit)
    rolls: Rolls = []
    while len(out) < limit:
        if c.walk is None:
            if c.scan_ms + c.p - 1 > now_ms:
                break  # never early: the slot is read once every time in it has come
            if not c.scan_may_pass(now_ms):
                break  # a slot handed out slots x precision ago is still open
            if c.wheel.get_slot(c.scan_ms).last_pos < 0:
                c.counters.empty_slots += 1
                c.scan_ms += c.p
                continue
            c.walk = SlotWalk(c.scan_ms)
            c.slot_start.setdefault(c.scan_ms, c.msglog.end)
        step = c.walk.next(c.timerlog, c.wheel)
        if step is None:
            if rolls:  # before the read time passes the slots the copies go to; a copy
                _roll(c, rolls)  # due in this very slot lands in it: walk on to take it in
                continue
            _finish_walk(c)
        else:
            _dequeue_unit(c, step[1], out, rolls)
        if len(rolls) >= c.settings.roll_batch:
            _roll(c, rolls)
    _roll(c, rolls)
    c.maybe_checkpoint(now_ms)
    return out


def _finish_walk(c: WheelCore) -> None:
    walk = c.walk
    assert walk is not None
    c.counters.slots_dequeued += 1
    c.counters.max_units_per_slot = max(c.counters.max_units_per_slot, walk.units)
    if not c.outstanding[walk.slot_ms]:
        del c.outstanding[walk.slot_ms]
        c.slot_start.pop(walk.slot_ms, None)
    c.walk = None
    c.scan_ms += c.p


def _dequeue_unit(c: WheelCore, unit: Unit, out: list[DueTimer], rolls: Rolls) -> None:
    walk = c.walk
    assert walk is not None
    if unit.is_delete:
        if unit.is_roll:  # a delete for a timer beyond the window rolls with it
            rec = c.msglog.read(unit.body_offset, unit.body_size)
            assert isinstance(rec, CancelRec)
            rolls.append((rec, None))
        return  # plain deletes were taken in by pass 1
    if unit.seq in walk.deletes:
        c.counters.deletes_applied += 1
        return
    body = c.msglog.read(unit.body_offset, unit.body_size)
    assert isinstance(body, SchedRec)
    entry = c.index.get((body.topic, body.id))
    if entry is None or entry.seq != unit.seq or entry.body_pos != unit.body_offset:
        c.counters.stale_units += 1  # cancelled, rescheduled, copied, or delivered before
        return
    if unit.is_roll:
        rolls.append((body, entry))
        return
    c.in_flight[unit.seq] = walk.slot_ms
    c.outstanding[walk.slot_ms] += 1
    key = layout.u64(unit.seq) + layout.u64(walk.slot_ms)
    out.append(DueTimer(key, body.topic, body.id, body.key_ms, body.record))


def _roll(c: WheelCore, rolls: Rolls) -> None:
    """Re-enqueue rolled timers and deletes: a new body copy and a new unit each."""
    if not rolls:
        return
    records: list[Record] = [rec for rec, _ in rolls]
    for rec, (pos, size) in zip(records, c.append(records), strict=True):
        if isinstance(rec, SchedRec):
            c.counters.rolls += 1
            c.enqueue(pos, size, rec.seq, rec.topic, rec.key_ms, delete=False)
            c.index[(rec.topic, rec.id)] = Entry(rec.seq, rec.key_ms, pos, size)
        else:
            assert isinstance(rec, CancelRec)
            c.counters.delete_rolls += 1
            c.enqueue(pos, size, rec.target_seq, rec.topic, rec.key_ms, delete=True)
    rolls.clear()


def _take_released(c: WheelCore, out: list[DueTimer], limit: int) -> None:
    while c.released and len(out) < limit:
        t = c.released.popleft()
        seq, slot_ms = handle(t)
        entry = c.index.get((t.topic, t.id))
        if entry is None or entry.seq != seq:  # cancelled or rescheduled meanwhile
            _settle(c, slot_ms)
            continue
        c.in_flight[seq] = slot_ms
        out.append(t)


def _settle(c: WheelCore, slot_ms: int) -> None:
    """One handed-out timer of ``slot_ms`` is finished; the slot may be done now."""
    c.outstanding[slot_ms] -= 1
    if c.outstanding[slot_ms] <= 0:
        del c.outstanding[slot_ms]
        if c.walk is None or c.walk.slot_ms != slot_ms:
            c.slot_start.pop(slot_ms, None)


def _finish(c: WheelCore, timers: Sequence[DueTimer], drop_from_index: bool) -> None:
    for t in timers:
        seq, slot_ms = handle(t)
        if c.in_flight.pop(seq, None) is not None:
            _settle(c, slot_ms)
        ident = (t.topic, t.id)
        entry = c.index.get(ident)
        if drop_from_index and entry is not None and entry.seq == seq:
            del c.index[ident]
            c.pending_by_topic[t.topic] -= 1
            if c.pending_by_topic[t.topic] <= 0:
                del c.pending_by_topic[t.topic]


def commit_delivered(
    c: WheelCore, timers: Sequence[DueTimer], delivered_ms: int, sink: str
) -> list[int]:
    to_topic_log = sink == LOG_SINK
    c.note_now(delivered_ms)
    next_offset: dict[str, int] = {}
    records: list[Record] = []
    offsets = []
    for t in timers:
        offset, message = -1, None
        if to_topic_log:
            offset = next_offset.get(t.topic, c.cq.length(t.topic))
            next_offset[t.topic] = offset + 1
            r = t.record
            message = LogMessage(t.id, r.payload, r.headers, r.binary, r.requested_deliver_at_ms,
                                 t.key_ms, delivered_ms, r.attempts + 1)  # fmt: skip
        records.append(DeliveredRec(handle(t)[0], t.topic, t.id, offset, message, sink))
        offsets.append(offset)
    for rec, (pos, size) in zip(records, c.append(records), strict=True):
        assert isinstance(rec, DeliveredRec)
        if rec.offset >= 0:
            c.cq.put(rec.topic, rec.offset, pos, size)
            c.note_delivered(pos, delivered_ms)
    _finish(c, timers, drop_from_index=True)
    c.totals["delivered"] += len(timers)
    c.totals[SINK_TOTAL_PREFIX + sink] += len(timers)
    return offsets


def retry_later(
    c: WheelCore, timers: Sequence[DueTimer], retry_at_ms: int, *, attempt: bool = True
) -> None:
    records: list[Record] = []
    for t in timers:
        key_ms = max(retry_at_ms, c.scan_ms)
        record = t.record  # a deferral: not attempted, still late from its first due time
        if attempt:  # late from the back-off's end, as the RocksDB store counts it
            tries = t.record.attempts + 1
            record = msgspec.structs.replace(record, attempts=tries, due_again_at_ms=key_ms)
        records.append(SchedRec(c.take_seq(), t.topic, t.id, key_ms, record, handle(t)[0]))
    where = c.append(records)
    _finish(c, timers, drop_from_index=False)
    c.enqueue_records(records, where)


def dead_letter(c: WheelCore, timers: Sequence[DueTimer], now_ms: int, error: str) -> None:
    records: list[DeadRec] = []
    for t in timers:
        record = msgspec.structs.replace(t.record, attempts=t.record.attempts + 1)
        letter = DeadLetter(t.key_ms, record, now_ms, error)
        records.append(DeadRec(handle(t)[0], t.topic, t.id, letter))
    c.append(list(records))
    _finish(c, timers, drop_from_index=True)
    for rec in records:
        c.dead[(rec.topic, rec.id)] = rec


def release(c: WheelCore, timers: Sequence[DueTimer]) -> None:
    for t in timers:
        if c.in_flight.pop(handle(t)[0], None) is not None:
            c.released.append(t)
