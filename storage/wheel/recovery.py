"""Recovery: from the checkpoint, replay the TimerLog, then the message log, then the wheel.

1. TimerLog from the checkpointed position: each unit is re-applied to its slot (RocketMQ
   "corrects the head and tail index of every slot"), unless the slot already ends at
   or after it (the memory-mapped wheel reached the disk on its own).
2. Message log from the replay position (read first: a torn tail frame is cut off, and
   so are TimerLog units pointing past the new end): every frame after the checkpoint is applied
   (totals, dead letters, topic-log queue entries) and every body whose unit a crash cut
   off is enqueued now (RocketMQ re-reads the timer topic from its checkpointed queue
   offset). Frames since the oldest open slot began dequeuing name the incarnations
   already finished (delivered, retried, dead-lettered): they must not go out again.
3. The pending index is rebuilt by walking every live slot of the wheel, deletes first,
   keeping per incarnation only its newest body copy. Cost: one read of every slot of
   the wheel file, every unit and every pending body, once per start.
"""

from __future__ import annotations

from collections import Counter

from storage.wheel import checkpoint as ckpt
from storage.wheel.core import Entry, WheelCore
from storage.wheel.layout import (
    SINK_TOTAL_PREFIX,
    CancelRec,
    DeadRec,
    DeadRemovedRec,
    DeliveredRec,
    Record,
    SchedRec,
)


def recover(core: WheelCore) -> None:
    point = ckpt.load(core.settings.path)
    core.last_checkpoint = point
    core.scan_ms = point.read_ms
    core.next_seq, core.write_ms = point.next_seq, point.write_ms
    core.totals = Counter(point.totals)
    core.log_start = dict(point.log_start)
    core.msglog_meta = {k: (v[0], v[1]) for k, v in point.msglog_meta.items()}
    core.timerlog_meta = dict(point.timerlog_meta)
    core.dead = {(d.topic, d.id): d for d in point.dead_letters}
    # read (and cut a torn tail off) the message log first: units pointing past its end
    # describe bodies that never became durable and are cut off the TimerLog in turn
    records = list(core.msglog.replay(min(point.replay_pos, point.msglog_pos)))
    with_units = _replay_timerlog(core, point.timerlog_pos, core.msglog.end)
    if core.scan_ms >= 0:
        _repair_slots(core)
    finished = _apply_msglog(core, point, records, with_units)
    if core.scan_ms >= 0:
        finished_until = _rebuild_index(core, finished)
        if finished_until >= 0:  # see WheelCore.replay_pos
            core.replay_floor = (min(point.replay_pos, point.msglog_pos), finished_until)


def _replay_timerlog(core: WheelCore, from_pos: int, msglog_end: int) -> set[int]:
    """Re-apply units written after the checkpoint; return the bodies they point to."""
    bodies = set()
    for pos, unit in core.timerlog.replay(from_pos):
        if unit.body_offset >= msglog_end:
            core.timerlog.file.truncate(pos)
            break
        bodies.add(unit.body_offset)
        target = unit.target_ms
        # retention's reference times count every unit since the checkpoint, also those
        # whose slot the memory-mapped wheel already holds: the checkpoint has none of them
        core.note_unit(pos, target, unit.body_offset)
        slot = core.wheel.get_slot(target)
        if slot.last_pos >= pos:
            continue
        first = pos if slot.first_pos < 0 else slot.first_pos
        num = slot.num + (-1 if unit.is_delete else 1)
        core.wheel.put_slot(target, first, pos, num, slot.magic)
    return bodies


def _repair_slots(core: WheelCore) -> None:
    """Slots pointing past the TimerLog's end are rebuilt from the whole retained TimerLog.

    Only after a power cut: the memory-mapped wheel reached the disk while the units it
    points to did not. A killed process cannot cause it (the page cache keeps both).
    """
    end = core.timerlog.file.end
    bad = {s.time_ms for s in core.wheel.live_slots(core.scan_ms) if s.last_pos >= end}
    if not bad:
        return
    for time_ms in bad:
        core.wheel.put_slot(time_ms, -1, -1, 0, 0)
    for pos, unit in core.timerlog.replay(core.timerlog.file.start):
        if core.wheel.slot_ms(unit.target_ms) in bad:
            slot = core.wheel.get_slot(unit.target_ms)
            first = pos if slot.first_pos < 0 else slot.first_pos
            num = slot.num + (-1 if unit.is_delete else 1)
            core.wheel.put_slot(unit.target_ms, first, pos, num, slot.magic)


def _apply_msglog(
    core: WheelCore,
    point: ckpt.Checkpoint,
    records: list[tuple[int, int, Record]],
    with_units: set[int],
) -> set[int]:
    finished: set[int] = set()
    for pos, size, rec in records:
        if isinstance(rec, DeliveredRec | DeadRec):
            finished.add(rec.seq)
        elif isinstance(rec, SchedRec) and rec.replaces >= 0:
            finished.add(rec.replaces)
        if pos < point.msglog_pos:
            continue
        if isinstance(rec, SchedRec | CancelRec):
            seq = rec.seq if isinstance(rec, SchedRec) else rec.target_seq
            core.next_seq = max(core.next_seq, seq + 1)
            if isinstance(rec, CancelRec) and rec.cancel:
                core.totals["cancelled"] += 1
            if pos not in with_units and core.scan_ms >= 0:
                core.enqueue(pos, size, seq, rec.topic, rec.key_ms, isinstance(rec, CancelRec))
        elif isinstance(rec, DeliveredRec):
            core.totals["delivered"] += 1
            core.totals[SINK_TOTAL_PREFIX + rec.sink] += 1
            if rec.message is not None:
                core.cq.put(rec.topic, rec.offset, pos, size)
                core.note_delivered(pos, rec.message.delivered_ms)
        elif isinstance(rec, DeadRec):
            core.dead[(rec.topic, rec.id)] = rec
        elif isinstance(rec, DeadRemovedRec):
            removed = core.dead.pop((rec.topic, rec.id), None)
            core.totals["cancelled"] += removed is not None and rec.cancel
    return finished


def _rebuild_index(core: WheelCore, finished: set[int]) -> int:
    """Index the newest body of every live incarnation; return the last slot time that
    holds a unit of a finished one (-1 when none does)."""
    deletes: set[int] = set()
    newest: dict[int, tuple[int, int]] = {}  # seq -> (body_pos, body_size)
    finished_until = -1
    for slot in core.wheel.live_slots(core.scan_ms):
        pos = slot.last_pos
        while pos >= 0:
            unit = core.timerlog.read(pos)
            if unit.seq in finished:
                finished_until = slot.time_ms
            if unit.is_delete:
                deletes.add(unit.seq)
            elif unit.body_offset > newest.get(unit.seq, (-1, 0))[0]:
                newest[unit.seq] = (unit.body_offset, unit.body_size)
            if unit.prev_pos >= pos:
                break  # a chain only points backwards; anything else is damage
            pos = unit.prev_pos
    for seq, (body_pos, body_size) in newest.items():
        if seq in deletes or seq in finished:
            continue
        rec = core.msglog.read(body_pos, body_size)
        if not isinstance(rec, SchedRec):
            continue
        ident = (rec.topic, rec.id)
        old = core.index.get(ident)
        if old is None or old.seq < seq:
            core.index[ident] = Entry(seq, rec.key_ms, body_pos, body_size)
    core.pending_by_topic = Counter(topic for topic, _ in core.index)
    return finished_until
