"""Schedule and cancel: the writes of the RocksDB store's clients.

One multi-get on ``ids`` answers every item of a batch: absent (new), 8 bytes (pending at
that key time, maybe in flight) or a delivered record (409 on reschedule, too late to
cancel). An 8-byte value at or below the highest range committed by one page (format 3,
``storage.rocks.keys``) may also be a delivery: for those, and only those, a multi-get of
``timers`` tells (the key gone: delivered).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Sequence
from itertools import repeat
from operator import add, itemgetter
from typing import NamedTuple

import rocksdict as rd

from storage import records
from storage.errors import ConflictError
from storage.names import validate_idents
from storage.protocol import CancelOutcome, CancelResult, NewTimer, ScheduleResult, TimerState
from storage.rocks import keys as layout
from storage.rocks.core import CLOCK_STEP_TOLERANCE_MS, RocksCore
from storage.rocks.counters import CounterDelta
from storage.rocks.db import multi_get

_PENDING_BYTES = 8  # an ids value of this length is a pending timer's key time
REMOVED = CancelOutcome.REMOVED
_REMOVED_RESULT = CancelResult(REMOVED)  # frozen: one shared answer for every removal
_UNKNOWN_RESULT = CancelResult(CancelOutcome.UNKNOWN)


def schedule(core: RocksCore, timers: Sequence[NewTimer], now_ms: int) -> list[ScheduleResult]:
    topics, ids = [t.topic for t in timers], [t.id for t in timers]
    idents = validate_idents(topics, ids)
    _check_times(timers, now_ms)
    # in key order, RocksDB's multi-get costs less (0.46 -> 0.37 us a key), and so do the
    # memtable inserts of the ids puts (see _batch_in_key_order)
    names = _Names(topics, ids, idents, sorted(idents))
    with core.lock:
        h = core.handles  # under the lock: a close() that won it raises StoreClosedError
        found = multi_get(h.cfs["ids"], names.idents_in_order)
        floor_ms = core.follow_clock(now_ms, CLOCK_STEP_TOLERANCE_MS)
        delta = core.delta()
        if found.count(None) == len(idents) == len(set(names.idents_in_order)):
            batch, results = _new_timers_batch(timers, names, floor_ms, now_ms, delta, h.handles)
        else:
            old_at = dict(zip(names.idents_in_order, found, strict=True))
            old_values = [old_at[ident] for ident in idents]
            _refuse_too_late(core, timers, idents, old_values)
            ops = _replacing_ops(timers, idents, old_values, floor_ms, now_ms, delta)
            batch, results = _batch_in_key_order(ops, h.handles), ops.results
        core.write(batch, delta)
    return results


def _check_times(timers: Sequence[NewTimer], now_ms: int) -> None:
    """InvalidInputError naming the first time a key cannot hold (``layout.check_range``).

    One ``max`` over the batch (about 0.04 us a timer), no branch per timer; a time
    below 0 is past due and clamped like any other.
    """
    layout.check_range(now_ms, "now_ms")
    if timers and max(t.deliver_at_ms for t in timers) > layout.MAX_TIME_MS:
        index = next(i for i, t in enumerate(timers) if t.deliver_at_ms > layout.MAX_TIME_MS)
        layout.check_range(timers[index].deliver_at_ms, f"timers[{index}].deliver_at_ms")


class _Names(NamedTuple):
    """A batch's names, each list in the batch's order but the last."""

    topics: list[str]
    ids: list[str]
    idents: list[bytes]  # topic | 0x00 | id
    idents_in_order: list[bytes]  # sorted


class _ScheduleOps(NamedTuple):
    timer_ops: list[tuple[bytes, bytes | None]]  # (key, record; None: delete)
    id_puts: list[tuple[bytes, bytes]]  # (ident, key time)
    results: list[ScheduleResult]


def _new_timers_batch(
    timers: Sequence[NewTimer],
    names: _Names,
    floor_ms: int,
    now_ms: int,
    delta: CounterDelta,
    handles: dict[str, rd.ColumnFamily],
) -> tuple[rd.WriteBatch, list[ScheduleResult]]:
    """A batch of identities none of which is stored or repeated (the bulk case).

    Each step runs over the whole batch at once: ``map``, comprehensions, and sorts of the
    bare keys with a dict to find each key's value, instead of one loop with a branch per
    timer and a tuple per write (docs/perf.md: with the one-call name check and the
    sorted multi-get, 9 to 10% of the schedule's time). The bytes are those
    ``_replacing_ops`` and ``_batch_in_key_order`` write for the same timers (a test
    compares the two).
    """
    key_ms = [d if d >= floor_ms else floor_ms for d in [t.deliver_at_ms for t in timers]]
    key_times = list(map(layout.u64, key_ms))
    timer_keys = list(map(add, key_times, names.idents))
    encode = records.encode
    record_at = dict(  # records.TimerRecord
        zip(
            timer_keys,
            [encode((t.payload, t.headers, now_ms, t.deliver_at_ms, 0, t.binary)) for t in timers],
            strict=True,
        )
    )
    key_time_at = dict(zip(names.idents, key_times, strict=True))
    delta.pending.update(names.topics)
    results = list(
        map(ScheduleResult, names.topics, names.ids, key_ms, repeat(now_ms), repeat(False))
    )
    timer_keys.sort()  # in key order: see _batch_in_key_order
    batch = rd.WriteBatch(raw_mode=True)
    put = batch.put  # each deque(..., 0) below runs a map to its end in C, keeping nothing
    deque(
        map(put, timer_keys, map(record_at.__getitem__, timer_keys), repeat(handles["timers"])), 0
    )
    in_order = names.idents_in_order
    deque(map(put, in_order, map(key_time_at.__getitem__, in_order), repeat(handles["ids"])), 0)
    return batch, results


def _replacing_ops(
    timers: Sequence[NewTimer],
    idents: list[bytes],
    old_values: list[bytes | None],
    floor_ms: int,
    now_ms: int,
    delta: CounterDelta,
) -> _ScheduleOps:
    """Any batch: a stored pending identity is moved (its old key deleted), and of an
    identity given twice the last one wins."""
    u64, encode, read_u64 = layout.u64, records.encode, layout.read_u64
    ops = _ScheduleOps([], [], [])
    add_op, add_id, add_result = ops.timer_ops.append, ops.id_puts.append, ops.results.append
    latest: dict[bytes, int] = {}  # ident -> key time written earlier in this batch
    for timer, ident, old in zip(timers, idents, old_values, strict=True):
        deliver_ms = timer.deliver_at_ms
        key_ms = deliver_ms if deliver_ms >= floor_ms else floor_ms
        previous_ms = latest.get(ident)
        if previous_ms is None and old is not None:
            previous_ms = read_u64(old)
        if previous_ms is None:
            delta.pending[timer.topic] += 1
        elif previous_ms != key_ms:
            add_op((u64(previous_ms) + ident, None))
        key_time = u64(key_ms)  # the timer key is key_time | ident (storage.rocks.keys)
        record = (timer.payload, timer.headers, now_ms, deliver_ms, 0, timer.binary)
        add_op((key_time + ident, encode(record)))  # records.TimerRecord
        add_id((ident, key_time))
        latest[ident] = key_ms
        add_result(ScheduleResult(timer.topic, timer.id, key_ms, now_ms, previous_ms is not None))
    return ops


def _batch_in_key_order(ops: _ScheduleOps, handles: dict[str, rd.ColumnFamily]) -> rd.WriteBatch:
    """The schedule's writes, each family's in key order.

    A batch's keys come in no order, and each memtable insert walks the skiplist from its
    top; in key order each walk stays near the last one, in the CPU caches (the write of
    300,000 schedules: 2.7-3.2 -> 2.2-2.6 us a timer, docs/perf.md). The sort is stable,
    so the operations on one key (an identity twice in a batch) keep their order.
    """
    first = itemgetter(0)
    cf_timers, cf_ids = handles["timers"], handles["ids"]
    timer_ops, id_puts = ops.timer_ops, ops.id_puts
    timer_ops.sort(key=first)
    id_puts.sort(key=first)
    batch = rd.WriteBatch(raw_mode=True)
    put, delete = batch.put, batch.delete
    for key, value in timer_ops:
        if value is None:
            delete(key, cf_timers)
        else:
            put(key, value, cf_timers)
    for ident, key_time in id_puts:
        put(ident, key_time, cf_ids)
    return batch


def _refuse_too_late(
    core: RocksCore,
    timers: Sequence[NewTimer],
    idents: list[bytes],
    old_values: list[bytes | None],
) -> None:
    """Raise ConflictError for the first item that is in flight or already delivered."""
    delivered = core.delivered_in_ranges(
        [
            old + i
            for old, i in zip(old_values, idents, strict=True)
            if old and len(old) == _PENDING_BYTES
        ]
    )
    in_flight = core.in_flight
    for i, old in enumerate(old_values):
        if old is None:
            continue
        key = old + idents[i]  # the timer key, when old is a key time
        if len(old) != _PENDING_BYTES or key in delivered:
            raise _too_late(i, timers[i], TimerState.DELIVERED, "was already delivered")
        if key in in_flight:
            raise _too_late(i, timers[i], TimerState.IN_FLIGHT, "is being delivered")


def _too_late(index: int, timer: NewTimer, state: TimerState, what: str) -> ConflictError:
    return ConflictError(
        f"timers[{index}]: {timer.topic}/{timer.id} {what}", state=state, field=f"timers[{index}]"
    )


def cancel(core: RocksCore, idents: Sequence[tuple[str, str]]) -> list[CancelResult]:
    """Remove each identity whole: its pending timer, else its dead letter, and a dead
    letter left behind by an identity scheduled again after it was dead-lettered (so a
    removed identity reads as unknown afterwards)."""
    keys = validate_idents([t for t, _ in idents], [i for _, i in idents])  # = ident_key
    with core.lock:  # _cancel_pending reads core.handles under it (a close() raises)
        batch = rd.WriteBatch(raw_mode=True)
        delta = core.delta()
        results, unseen = _cancel_pending(core, keys, idents, batch, delta)
        _cancel_dead_letters(core, keys, results, unseen, batch, delta)
        core.write(batch, delta)
    return [r for r in results if r is not None]


def _cancel_dead_letters(
    core: RocksCore,
    keys: list[bytes],
    results: list[CancelResult | None],
    unseen: list[int],
    batch: rd.WriteBatch,
    delta: CounterDelta,
) -> None:
    """Stage the removal of the dead letters of these identities: those ``ids`` does not
    know (answered REMOVED, else UNKNOWN), and those left behind by a removed identity
    scheduled again after it was dead-lettered. While the store holds no dead letter
    (``dead_lettered``, exact since it is recounted once per directory) nothing is read."""
    if not core.counters.totals.get("dead_lettered", 0):
        for i in unseen:
            results[i] = _UNKNOWN_RESULT
        return
    h = core.handles
    removed = [keys[i] for i, r in enumerate(results) if r is not None and r.outcome is REMOVED]
    looked_up = [keys[i] for i in unseen] + removed
    dead_at = dict(zip(looked_up, multi_get(h.cfs["deadletter"], looked_up), strict=True))
    for ident in removed:
        if dead_at[ident] is not None:
            batch.delete(ident, h.handles["deadletter"])
            delta.totals["dead_lettered"] -= 1
    gone = set(removed)
    for i in unseen:
        if dead_at[keys[i]] is not None and keys[i] not in gone:
            batch.delete(keys[i], h.handles["deadletter"])
            delta.totals["dead_lettered"] -= 1
            delta.totals["cancelled"] += 1
            gone.add(keys[i])
            results[i] = _REMOVED_RESULT
        else:
            results[i] = _UNKNOWN_RESULT


def _remove_all_pending(
    timer_keys: list[bytes],
    keys: list[bytes],
    idents: Sequence[tuple[str, str]],
    batch: rd.WriteBatch,
    delta: CounterDelta,
    handles: dict[str, rd.ColumnFamily],
) -> None:
    """Stage the removal of a batch whose identities are all pending, each given once,
    none in flight or delivered (the common cancel): each step over the whole batch in C,
    and the deletes of each family in key order, as ``_new_timers_batch`` writes its puts
    (a per-item loop with a branch per item was most of a 1,000-timer cancel's time)."""
    delete = batch.delete
    deque(map(delete, sorted(timer_keys), repeat(handles["timers"])), 0)
    deque(map(delete, sorted(keys), repeat(handles["ids"])), 0)
    for topic, count in Counter([t for t, _ in idents]).items():
        delta.pending[topic] -= count
    delta.totals["cancelled"] += len(keys)


def _cancel_pending(
    core: RocksCore,
    keys: list[bytes],
    idents: Sequence[tuple[str, str]],
    batch: rd.WriteBatch,
    delta: CounterDelta,
) -> tuple[list[CancelResult | None], list[int]]:
    """Each identity's answer from ``ids`` (deletes of the removed pending timers staged in
    ``batch``), and the indexes ``ids`` does not know (None answers: maybe dead letters)."""
    h = core.handles
    old_values = multi_get(h.cfs["ids"], keys)
    pending_keys = [
        old + k
        for k, old in zip(keys, old_values, strict=True)
        if old and len(old) == _PENDING_BYTES
    ]
    delivered = core.delivered_in_ranges(pending_keys)
    if (
        len(pending_keys) == len(keys) == len(set(keys))
        and not delivered
        and core.in_flight.isdisjoint(pending_keys)
    ):
        _remove_all_pending(pending_keys, keys, idents, batch, delta, h.handles)
        return [_REMOVED_RESULT] * len(keys), []
    results: list[CancelResult | None] = [None] * len(keys)
    unseen: list[int] = []
    removed: set[bytes] = set()
    for i, (ident, old) in enumerate(zip(keys, old_values, strict=True)):
        if ident in removed:
            results[i] = CancelResult(CancelOutcome.UNKNOWN)
        elif old is None:
            unseen.append(i)
        elif len(old) != _PENDING_BYTES or (key := old + ident) in delivered:
            results[i] = CancelResult(CancelOutcome.TOO_LATE, TimerState.DELIVERED)
        elif key in core.in_flight:
            results[i] = CancelResult(CancelOutcome.TOO_LATE, TimerState.IN_FLIGHT)
        else:
            batch.delete(key, h.handles["timers"])
            batch.delete(ident, h.handles["ids"])
            delta.pending[idents[i][0]] -= 1
            delta.totals["cancelled"] += 1
            removed.add(ident)
            results[i] = CancelResult(REMOVED)
    return results, unseen
