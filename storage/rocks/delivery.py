"""The delivery path of the RocksDB store: due scan, commit, retry, dead letters, release.

A commit of a batch whose due scan saw one clean key range above every earlier one (the
common case) writes per batch: one ``delete_range`` over the scanned ``timers`` range,
one ``topiclog`` page per topic holding the stored record bytes as they are (embedded
log sink only), one journal page holding the delivered facts in columns, one ``ranges``
entry leading to it, and the counters; nothing per timer but the page's columns (format
3, ``storage.rocks.keys``). Any other batch writes per timer a delivered record over its
``ids`` entry (and point deletes when the range was not clean), and its journal page
lists the idents (format 2's commit).
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Iterable, Sequence

import msgspec
import rocksdict as rd

from storage import records
from storage.errors import ConflictError, NotFoundError
from storage.names import validate_name
from storage.protocol import LOG_SINK, DueTimer, ScheduleResult, TimerState
from storage.rocks import keys as layout
from storage.rocks import undecodable
from storage.rocks.core import CLOCK_STEP_TOLERANCE_MS, RocksCore
from storage.rocks.counters import SINK_TOTAL_PREFIX, CounterDelta
from storage.rocks.db import iter_items, multi_get

_encode = msgspec.msgpack.Encoder().encode


def due(core: RocksCore, now_ms: int, limit: int) -> list[DueTimer]:
    """Up to ``limit`` due timers from the scan cursor on, marked in flight.

    The per-key loop is the burst's bound, so it does no more than take each key and
    value off the family's ``items`` iterator; the batch's timers are then built in
    columns, each by one C-level call over the batch (``due_timers``).
    """
    bound = layout.u64(layout.check_range(now_ms, "now_ms") + 1)
    keys: list[bytes] = []
    values: list[bytes] = []
    in_flight = core.in_flight
    add_key, add_value = keys.append, values.append
    with core.lock:
        h = core.handles  # under the lock: a close() that won it raises StoreClosedError
        core.follow_clock(now_ms)  # the clock stepped back: scan (and clamp) from now on
        if core.look_ahead.nothing_below(h.db, core.scan_from, bound):
            core.scan_from = max(core.scan_from, bound)  # as an exhausted scan moves it
            return []
        options = rd.ReadOptions()  # must outlive the iterator (it points into the bound)
        options.set_iterate_upper_bound(bound)
        timers = iter_items(h.cfs["timers"], core.scan_from, options)
        last = None
        clean = True  # no in-flight key of another batch between our first and last
        exhausted = True  # every key below now + 1 was seen
        for key, value in timers:
            if len(keys) >= limit:
                exhausted = False
                break
            last = key
            if key in in_flight:
                clean = clean and not keys
                continue
            add_key(key)
            add_value(value)
        del timers
        try:
            out = due_timers(keys, values)
        except msgspec.DecodeError:  # a record that does not decode: no stall for the rest
            keys, values, bad = undecodable.decodable(keys, values)
            undecodable.dead_letter_undecodable(core, bad, now_ms)
            out = due_timers(keys, values)
        in_flight.update(keys)
        if keys and clean:
            core.clean_ranges[keys[0]] = (keys[-1], len(keys))
        if last is not None:
            core.scan_from = last + layout.SEPARATOR
        if exhausted:  # the cursor may move to now + 1
            core.scan_from = max(core.scan_from, bound)
            if last is None:  # not a key below now + 1: what comes after it?
                core.look_ahead.note(h.db, h.cfs["timers"], core.scan_from)
    return out


def due_timers(keys: list[bytes], values: list[bytes]) -> list[DueTimer]:
    """The ``DueTimer`` of each ``timers`` key and stored value, built column by column.

    Names never hold 0x00 (``storage.names``), so the keys' name parts joined by 0x00
    split into topic, id, topic, id...; the key times unpack in one ``struct`` call and
    the records decode in one msgspec call. Against one ``DueTimer`` per loop turn this
    saves about 0.4 us a timer (docs/perf.md).
    """
    count = len(keys)
    if not count:
        return []
    names = layout.SEPARATOR.join([key[8:] for key in keys]).decode().split("\0")
    if len(names) != 2 * count:  # only a key written around storage.names could do this
        raise ValueError(f"a timer key of this batch has no single 0x00: {keys!r:.200}")
    key_ms = struct.unpack(f">{count}Q", b"".join([key[:8] for key in keys]))
    found = records.decode_records(values)
    return list(map(DueTimer, keys, names[0::2], names[1::2], key_ms, found, values))


def commit_delivered(
    core: RocksCore, timers: Sequence[DueTimer], delivered_ms: int, sink: str
) -> list[int]:
    layout.check_range(delivered_ms, "delivered_ms")
    with core.lock:
        hd = core.handles.handles  # under the lock: a close() that won it raises StoreClosedError
        batch = rd.WriteBatch(raw_mode=True)
        delta = core.delta()
        pages: dict[str, tuple[int, list[records.RawLogEntry]]] = {}
        keys = [t.key for t in timers]
        scanned = core.take_clean_range(keys)
        journal_key = layout.journal_key(delivered_ms, core.counters.totals["journal_seq"])
        topics = [t.topic for t in timers]
        offsets, page = _page_delivered(timers, keys, topics, sink, delta, pages)
        one_page = scanned is not None and keys[0] > core.indexed_until
        if one_page:  # no ids puts: the page says it all (storage.rocks.keys)
            batch.put(journal_key, records.PAGE_TAG + _encode(page), hd["journal"])
            batch.put(keys[0], layout.range_value(journal_key, keys[-1]), hd["ranges"])
        else:
            idents = _put_delivered_records(batch, hd["ids"], page, delivered_ms)
            batch.put(journal_key, _encode(idents), hd["journal"])
        if scanned is not None:  # nothing else lives in the range: one range tombstone
            batch.delete_range(scanned[0], scanned[1], hd["timers"])
        else:
            for key in keys:
                batch.delete(key, hd["timers"])
        _put_log_pages(batch, hd["topiclog"], pages, delivered_ms, delta)
        for topic, count in Counter(topics).items():
            delta.pending[topic] -= count
        delta.totals["journal_seq"] += 1
        delta.totals["delivered"] += len(timers)
        delta.totals[SINK_TOTAL_PREFIX + sink] += len(timers)
        core.write(batch, delta)
        if one_page:
            core.indexed_until = keys[-1]
        core.settle(keys)
    return offsets


def _put_log_pages(
    batch: rd.WriteBatch,
    cf_log: rd.ColumnFamily,
    pages: dict[str, tuple[int, list[records.RawLogEntry]]],
    delivered_ms: int,
    delta: CounterDelta,
) -> None:
    for topic, (first, entries) in pages.items():
        delta.take_offsets(topic, first, len(entries))
        page_bytes = _encode(records.RawLogPage(delivered_ms, entries))
        batch.put(layout.log_key(topic.encode(), first), page_bytes, cf_log)


def _page_delivered(
    timers: Sequence[DueTimer],
    keys: list[bytes],
    topics: list[str],
    sink: str,
    delta: CounterDelta,
    pages: dict[str, tuple[int, list[records.RawLogEntry]]],
) -> tuple[list[int], records.DeliveredPage]:
    """The delivered facts of a batch in columns and, for the embedded log, each timer's
    stored bytes appended to its topic's page in ``pages``: the commit's per-timer work,
    done column by column (a comprehension or a ``map`` over the batch each)."""
    found = [t.record for t in timers]
    attempts = [r.attempts + 1 for r in found]
    requested = [r.requested_deliver_at_ms for r in found]
    created = [r.created_at_ms for r in found]
    if sink != LOG_SINK or not timers:
        offsets = [-1] * len(timers)
    elif topics.count(topics[0]) == len(topics):  # one topic: one page, offsets in a row
        offsets = _one_topic_page(timers, topics[0], attempts, delta, pages)
    else:
        offsets = _topic_pages(timers, attempts, delta, pages)
    return offsets, records.DeliveredPage(sink, keys, offsets, attempts, requested, created)


def _one_topic_page(
    timers: Sequence[DueTimer],
    topic: str,
    attempts: list[int],
    delta: CounterDelta,
    pages: dict[str, tuple[int, list[records.RawLogEntry]]],
) -> list[int]:
    stored = [t.raw or _encode(t.record) for t in timers]
    ids, key_ms = [t.id for t in timers], [t.key_ms for t in timers]
    entries = list(map(records.RawLogEntry, ids, key_ms, attempts, map(msgspec.Raw, stored)))
    first = delta.next_offset(topic)
    pages[topic] = (first, entries)
    return list(range(first, first + len(entries)))


def _topic_pages(
    timers: Sequence[DueTimer],
    attempts: list[int],
    delta: CounterDelta,
    pages: dict[str, tuple[int, list[records.RawLogEntry]]],
) -> list[int]:
    """A batch of several topics: each timer's entry on its topic's page, in batch order."""
    offsets: list[int] = []
    for t, tries in zip(timers, attempts, strict=True):
        log_page = pages.get(t.topic)
        if log_page is None:
            log_page = pages[t.topic] = (delta.next_offset(t.topic), [])
        entries = log_page[1]
        offsets.append(log_page[0] + len(entries))
        raw = msgspec.Raw(t.raw or _encode(t.record))
        entries.append(records.RawLogEntry(t.id, t.key_ms, tries, raw))
    return offsets


def _put_delivered_records(
    batch: rd.WriteBatch, cf_ids: rd.ColumnFamily, page: records.DeliveredPage, delivered_ms: int
) -> list[bytes]:
    """Per timer its delivered record over its ``ids`` entry (the commit of a batch that is
    not one clean range above the others: rare, so not written for speed); return the
    idents."""
    idents = [key[8:] for key in page.keys]
    for i, ident in enumerate(idents):
        done = page.delivered(i, delivered_ms)
        batch.put(ident, layout.DELIVERED_TAG + _encode(done), cf_ids)
    return idents


def retry_later(
    core: RocksCore, timers: Sequence[DueTimer], retry_at_ms: int, *, attempt: bool = True
) -> None:
    """Move each timer to ``retry_at_ms`` with its attempt count raised (durable back-off;
    ``attempt`` False keeps the count: a deferral of timers never attempted).

    Clamped like a past-due schedule, so a retry can never land behind the scanner (or
    inside a scanned range that a delete_range will remove).
    """
    layout.check_range(retry_at_ms, "retry_at_ms")
    with core.lock:
        hd = core.handles.handles  # under the lock: a close() that won it raises StoreClosedError
        key_ms = max(retry_at_ms, core.clamp_floor_ms())
        batch = rd.WriteBatch(raw_mode=True)
        for t in timers:
            topic_b, id_b = t.topic.encode(), t.id.encode()
            batch.delete(t.key, hd["timers"])
            key = layout.timer_key(key_ms, topic_b, id_b)
            record = _with_attempt(t.record, key_ms) if attempt else t.record
            batch.put(key, _encode(record), hd["timers"])
            batch.put(layout.ident_key(topic_b, id_b), layout.u64(key_ms), hd["ids"])
        core.write(batch)
        core.settle([t.key for t in timers])


def dead_letter(core: RocksCore, timers: Sequence[DueTimer], now_ms: int, error: str) -> None:
    """Move timers to the dead letters; ``dead_lettered`` counts entries, so an identity
    dead-lettered again (its entry overwritten) counts once, and so does a timer given
    twice."""
    layout.check_range(now_ms, "now_ms")
    timers = list({t.key: t for t in timers}.values())
    idents = [layout.ident_key(t.topic.encode(), t.id.encode()) for t in timers]
    with core.lock:
        h = core.handles  # under the lock: a close() that won it raises StoreClosedError
        hd = h.handles
        stored = multi_get(h.cfs["deadletter"], idents)
        batch = rd.WriteBatch(raw_mode=True)
        delta = core.delta()
        for t, ident in zip(timers, idents, strict=True):
            failed = _with_attempt(t.record, t.record.due_again_at_ms)
            letter = records.DeadLetter(t.key_ms, failed, now_ms, error)
            batch.delete(t.key, hd["timers"])
            batch.delete(ident, hd["ids"])
            batch.put(ident, _encode(letter), hd["deadletter"])
            delta.pending[t.topic] -= 1
        delta.totals["dead_lettered"] += stored.count(None)
        core.write(batch, delta)
        core.settle([t.key for t in timers])


def release(core: RocksCore, timers: Sequence[DueTimer]) -> None:
    with core.lock:
        keys = [t.key for t in timers if t.key in core.in_flight]
        core.settle(keys)
        if keys:
            core.rewind_cursor(min(keys))


def replay_dead_letter(core: RocksCore, topic: str, timer_id: str, now_ms: int) -> ScheduleResult:
    names = (validate_name("topic", topic), validate_name("id", timer_id))
    layout.check_range(now_ms, "now_ms")
    ident = layout.ident_key(*names)
    with core.lock:
        h = core.handles  # under the lock: a close() that won it raises StoreClosedError
        raw = h.cfs["deadletter"].get(ident)
        if raw is None:
            raise NotFoundError(f"no dead letter {topic}/{timer_id}")
        current = h.cfs["ids"].get(ident)
        if current is not None:
            _refuse_replay(core, topic, timer_id, ident, current)
        letter = records.decode_dead_letter(raw)
        key_ms = max(now_ms, core.follow_clock(now_ms, CLOCK_STEP_TOLERANCE_MS))
        record = msgspec.structs.replace(letter.record, attempts=0, due_again_at_ms=key_ms)
        batch = rd.WriteBatch(raw_mode=True)
        delta = core.delta()
        batch.delete(ident, h.handles["deadletter"])
        batch.put(layout.timer_key(key_ms, *names), _encode(record), h.handles["timers"])
        batch.put(ident, layout.u64(key_ms), h.handles["ids"])
        delta.totals["dead_lettered"] -= 1
        delta.pending[topic] += 1
        core.write(batch, delta)
    return ScheduleResult(topic, timer_id, key_ms, record.created_at_ms, False)


def _refuse_replay(
    core: RocksCore, topic: str, timer_id: str, ident: bytes, current: bytes
) -> None:
    """ConflictError with the identity's state when it lives again since it was
    dead-lettered: classified as ``cancel`` does (``storage.rocks.writes``)."""
    key = current + ident  # the timer key, when current is a key time
    if len(current) != 8 or core.delivered_in_ranges([key]):
        raise ConflictError(f"{topic}/{timer_id} was delivered since", state=TimerState.DELIVERED)
    if key in core.in_flight:
        raise ConflictError(
            f"{topic}/{timer_id} is being delivered again", state=TimerState.IN_FLIGHT
        )
    raise ConflictError(  # no "cancel it first": a cancel removes the dead letter too
        f"{topic}/{timer_id} is pending again, scheduled since it was dead-lettered",
        state=TimerState.PENDING,
    )


def purge_dead_letters(core: RocksCore, keys: list[bytes]) -> int:
    h = core.handles
    for chunk in _chunks(keys, 4096):
        batch = rd.WriteBatch(raw_mode=True)
        for key in chunk:
            batch.delete(key, h.handles["deadletter"])
        delta = core.delta()
        delta.totals["dead_lettered"] -= len(chunk)
        core.write(batch, delta)
    return len(keys)


def _with_attempt(record: records.TimerRecord, due_again_at_ms: int) -> records.TimerRecord:
    """The record after one more failed attempt, due again at ``due_again_at_ms`` (its
    lateness counts from there: the back-off is no lateness of the service)."""
    attempts = record.attempts + 1
    return msgspec.structs.replace(record, attempts=attempts, due_again_at_ms=due_again_at_ms)


def _chunks(items: list[bytes], size: int) -> Iterable[list[bytes]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
