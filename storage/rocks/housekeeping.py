"""Housekeeping of the RocksDB store: the tombstone trap and the retention windows.

Delivered timers are deleted at the low end of a queue-like key space. A reader that
starts at the first key would wade through every tombstone until compaction, so the
store keeps a persisted watermark (every live timer key is at or above it), starts every
restart scan there, and periodically range-deletes and compacts everything below it.
"""

from __future__ import annotations

import rocksdict as rd

from storage import codec
from storage.rocks.counters import CounterDelta
from storage.rocks.db import RocksHandles
from storage.rocks.reads import bounded_iter

CHUNK = 4096


def advance_watermark(
    h: RocksHandles, watermark_ms: int, clamp_floor_ms: int, delta: CounterDelta
) -> int:
    """The new watermark: the first live key time, never past the scanner's clamp floor.

    Called under the store lock so no schedule can clamp a key below the result meanwhile.
    """
    it = bounded_iter(h.cfs["timers"], codec.u64(watermark_ms), codec.u64(clamp_floor_ms))
    first_ms = codec.timer_key_ms(it.key()) if it.valid() else clamp_floor_ms
    del it
    new_ms = max(watermark_ms, first_ms)
    if new_ms > watermark_ms:
        delta.watermark_ms = new_ms
    return new_ms


def drop_below(h: RocksHandles, watermark_ms: int) -> None:
    """Range-delete and compact the timers below the watermark (all of them tombstones)."""
    low, high = codec.u64(0), codec.u64(watermark_ms)
    timers = h.cfs["timers"]
    timers.delete_range(low, high, h.write_options)
    timers.compact_range(low, high)


def expire_done(h: RocksHandles, older_than_ms: int) -> int:
    """Forget deliveries older than the retention: their done records and journal pages."""
    if older_than_ms <= 0:
        return 0
    expired = 0
    it = bounded_iter(h.cfs["journal"], codec.u64(0), codec.u64(older_than_ms))
    batch = rd.WriteBatch(raw_mode=True)
    while it.valid():
        entries = codec.decode_journal(it.value())
        for entry in entries:
            batch.delete(
                codec.ident_key(entry.topic.encode(), entry.id.encode()), h.handles["done"]
            )
        batch.delete(it.key(), h.handles["journal"])
        expired += len(entries)
        if len(batch) >= CHUNK:
            h.db.write(batch, h.write_options)
            batch = rd.WriteBatch(raw_mode=True)
        it.next()
    del it
    if len(batch):
        h.db.write(batch, h.write_options)
    return expired


def first_log_offset_after(
    h: RocksHandles, topic: str, start: int, end: int, older_than_ms: int
) -> int:
    """The first topic-log offset in [start, end) delivered at or after ``older_than_ms``."""
    topic_b = topic.encode()
    it = bounded_iter(h.cfs["topiclog"], codec.log_key(topic_b, start), codec.log_key(topic_b, end))
    offset = end
    while it.valid():
        if codec.decode_log_message(it.value()).delivered_ms >= older_than_ms:
            offset = codec.log_key_offset(it.key())
            break
        it.next()
    del it
    return offset
