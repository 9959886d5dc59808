"""Housekeeping of the RocksDB store: the tombstone trap and the retention windows.

Delivered timers are deleted at the low end of a queue-like key space. A reader that
starts at the first key would wade through every tombstone until compaction, so the
store keeps a persisted watermark (every live timer key is at or above it), starts every
restart scan there, and periodically range-deletes and compacts everything below it.
"""

from __future__ import annotations

import rocksdict as rd

from storage import records
from storage.protocol import HousekeepingReport
from storage.rocks import keys as layout
from storage.rocks.core import RocksCore
from storage.rocks.counters import CounterDelta
from storage.rocks.db import RocksHandles, multi_get, write_batch
from storage.rocks.reads import bounded_iter

CHUNK = 4096


def advance_watermark(
    h: RocksHandles, watermark_ms: int, clamp_floor_ms: int, delta: CounterDelta
) -> int:
    """The new watermark: the first live key time, never past the scanner's clamp floor.

    Called under the store lock so no schedule can clamp a key below the result meanwhile.
    """
    it = bounded_iter(h.cfs["timers"], layout.u64(watermark_ms), layout.u64(clamp_floor_ms))
    first_ms = layout.timer_key_ms(it.key()) if it.valid() else clamp_floor_ms
    del it
    new_ms = max(watermark_ms, first_ms)
    if new_ms > watermark_ms:
        delta.watermark_ms = new_ms
    return new_ms


def drop_below(batch: rd.WriteBatch, h: RocksHandles, watermark_ms: int) -> None:
    """Stage the range delete of the timers below the watermark (all of them tombstones).

    Written under the store lock, in the batch that advances the watermark: an ingest
    (also under the lock) links files whose keys may lie below the watermark and only
    then moves them up, so a range delete between the two would lose them.
    """
    batch.delete_range(layout.u64(0), layout.u64(watermark_ms), h.handles["timers"])


def compact_below(timers: rd.Rdict, watermark_ms: int) -> None:
    """Compact the range-deleted keys below the watermark away (slow; releases the GIL,
    so it runs without the store lock: compaction changes no key's value)."""
    timers.compact_range(layout.u64(0), layout.u64(watermark_ms))


def expire_done(h: RocksHandles, older_than_ms: int) -> int:
    """Forget deliveries older than the retention: their delivered records and journal pages.

    Bounded work: it walks only the time-ordered journal pages older than the cutoff. An
    ``ids`` entry is dropped only while it still holds a delivered record (a delivered
    identity cannot be rescheduled before it expires, so nothing newer can be there), or,
    for a range page, still holding the delivered key's time.
    """
    if older_than_ms <= 0:
        return 0
    expired = 0
    it = bounded_iter(h.cfs["journal"], layout.u64(0), layout.u64(older_than_ms))
    batch = rd.WriteBatch(raw_mode=True)
    while it.valid():
        expired += _expire_page(h, batch, records.decode_journal_page(it.value()))
        batch.delete(it.key(), h.handles["journal"])
        if len(batch) >= CHUNK:
            write_batch(h, batch)
            batch = rd.WriteBatch(raw_mode=True)
        it.next()
    del it
    if len(batch):
        write_batch(h, batch)
    return expired


def _expire_page(
    h: RocksHandles, batch: rd.WriteBatch, page: list[bytes] | records.DeliveredPage
) -> int:
    """Stage the deletes that forget one journal page's deliveries; return their count.

    A page of idents: each ``ids`` entry still holding a delivered record. A range page
    (format 3): each ``ids`` entry still holding the delivered key's time, and the page's
    ``ranges`` entry.
    """
    if isinstance(page, records.DeliveredPage):
        idents = [key[8:] for key in page.keys]
        values = multi_get(h.cfs["ids"], idents)
        for key, ident, value in zip(page.keys, idents, values, strict=True):
            if value == key[:8]:
                batch.delete(ident, h.handles["ids"])
        if page.keys:
            batch.delete(page.keys[0], h.handles["ranges"])
        return len(idents)
    for ident, value in zip(page, multi_get(h.cfs["ids"], page), strict=True):
        if value is not None and len(value) != 8:  # delivered, not pending
            batch.delete(ident, h.handles["ids"])
    return len(page)


def first_log_offset_after(
    h: RocksHandles, topic: str, start: int, end: int, older_than_ms: int
) -> int:
    """The first page offset in [start, end) delivered at or after ``older_than_ms``.

    Pages hold one commit each (one delivery time), so whole pages expire.
    """
    topic_b = topic.encode()
    it = bounded_iter(
        h.cfs["topiclog"], layout.log_key(topic_b, start), layout.log_key(topic_b, end)
    )
    offset = end
    while it.valid():
        if records.decode_log_page(it.value()).delivered_ms >= older_than_ms:
            offset = layout.log_key_offset(it.key())
            break
        it.next()
    del it
    return offset


def housekeep(core: RocksCore, now_ms: int) -> HousekeepingReport:
    """Advance the watermark (range delete + compact below it), expire done and the log."""
    layout.check_range(now_ms, "now_ms")
    with core.lock:
        h = core.handles  # under the lock: a close() that won it raises StoreClosedError
        timers = h.cfs["timers"]
        before = core.counters.watermark_ms
        delta = core.delta()
        watermark_ms = advance_watermark(h, before, core.clamp_floor_ms(), delta)
        batch = rd.WriteBatch(raw_mode=True)
        if watermark_ms > before:
            drop_below(batch, h, watermark_ms)
        core.write(batch, delta)
    if watermark_ms > before:
        compact_below(timers, watermark_ms)
    with core.lock:  # a delivered record must not be dropped under a concurrent reader-writer
        h = core.handles
        done_expired = expire_done(h, now_ms - core.settings.done_retention_ms)
    log_expired = _expire_log(core, now_ms - core.settings.log_retention_ms)
    return HousekeepingReport(watermark_ms, watermark_ms > before, done_expired, log_expired)


def _expire_log(core: RocksCore, older_than_ms: int) -> int:
    expired = 0
    for topic, end in list(core.counters.next_offset.items()):
        start = core.counters.log_start.get(topic, 0)
        new_start = first_log_offset_after(core.handles, topic, start, end, older_than_ms)
        if new_start > start:
            with core.lock:
                h = core.handles
                delta = core.delta()
                delta.log_start[topic] = new_start
                batch = rd.WriteBatch(raw_mode=True)
                topic_b = topic.encode()
                batch.delete_range(
                    layout.log_key(topic_b, start),
                    layout.log_key(topic_b, new_start),
                    h.handles["topiclog"],
                )
                core.write(batch, delta)
            expired += new_start - start
    return expired
