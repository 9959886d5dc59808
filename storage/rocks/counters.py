"""Exact counters kept in memory and persisted in the ``meta`` family.

RocksDB in this binding has no merge operator, so a counter is an absolute u64 value
written into the same WriteBatch as the change it counts. All writers hold the store's
lock, so the in-memory value and the persisted one never diverge: a batch stages new
values, writes, and only then applies them (a failed write leaves memory unchanged).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import rocksdict as rd

from storage.rocks.db import iter_items
from storage.rocks.keys import read_u64, u64

TOTALS = ("delivered", "cancelled", "dead_lettered", "journal_seq")
SINK_TOTAL_PREFIX = "sink:"  # totals["sink:<name>"]: deliveries taken by that sink
# meta keys: the same names and u64 values as in format 1 (storage.rocks.migrate copies them)
TOTAL_KEY_PREFIX = b"total:"
PENDING_KEY_PREFIX = b"pending:"
OFFSET_KEY_PREFIX = b"next_offset:"
LOG_START_KEY_PREFIX = b"log_start:"
WATERMARK_KEY = b"watermark_ms"
# set once dead_lettered was recounted from the entries (RocksCore._count_dead_letters_once)
DEAD_LETTERS_COUNTED_KEY = b"dead_letters_counted"
WRITE_PROBE_KEY = b"write_probe"  # RocksTimerStore.probe_write writes it; nothing reads it


@dataclass
class Counters:
    totals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOTALS, 0))
    pending_by_topic: dict[str, int] = field(default_factory=dict)
    next_offset: dict[str, int] = field(default_factory=dict)
    log_start: dict[str, int] = field(default_factory=dict)
    watermark_ms: int = 0

    @classmethod
    def load(cls, meta: rd.Rdict) -> Counters:
        counters = cls()
        for name, value in iter_items(meta, b""):
            number = read_u64(value)
            if name == WATERMARK_KEY:
                counters.watermark_ms = number
            for prefix, target in (
                (PENDING_KEY_PREFIX, counters.pending_by_topic),
                (OFFSET_KEY_PREFIX, counters.next_offset),
                (LOG_START_KEY_PREFIX, counters.log_start),
            ):
                # a topic whose pending count went to 0 is dropped, as apply() does in memory
                if name.startswith(prefix) and (number or target is not counters.pending_by_topic):
                    target[name[len(prefix) :].decode()] = number
            if name.startswith(TOTAL_KEY_PREFIX):
                counters.totals[name[len(TOTAL_KEY_PREFIX) :].decode()] = number
        return counters


class CounterDelta:
    """Changes staged for one WriteBatch; ``stage`` puts them, ``apply`` commits to memory."""

    def __init__(self, counters: Counters) -> None:
        self._counters = counters
        self.totals: Counter[str] = Counter()
        self.pending: Counter[str] = Counter()
        self.offsets: dict[str, int] = {}
        self.log_start: dict[str, int] = {}
        self.watermark_ms: int | None = None

    def next_offset(self, topic: str) -> int:
        """The next free topic-log offset of ``topic``, counting what this batch took."""
        offset = self.offsets.get(topic)
        return self._counters.next_offset.get(topic, 0) if offset is None else offset

    def take_offsets(self, topic: str, first: int, count: int) -> None:
        """Reserve ``count`` offsets from ``first`` (which must be ``next_offset(topic)``)."""
        free = self.next_offset(topic)
        if first != free:  # a bug in the caller, never an input error
            raise RuntimeError(f"offsets of {topic} taken from {first}, but {free} is next")
        self.offsets[topic] = first + count

    def stage(self, batch: rd.WriteBatch, meta: rd.ColumnFamily) -> None:
        c = self._counters
        for name, delta in self.totals.items():
            if delta:
                batch.put(
                    TOTAL_KEY_PREFIX + name.encode(), u64(c.totals.get(name, 0) + delta), meta
                )
        for topic, delta in self.pending.items():
            if delta:
                value = c.pending_by_topic.get(topic, 0) + delta
                batch.put(PENDING_KEY_PREFIX + topic.encode(), u64(value), meta)
        for topic, offset in self.offsets.items():
            batch.put(OFFSET_KEY_PREFIX + topic.encode(), u64(offset), meta)
        for topic, start in self.log_start.items():
            batch.put(LOG_START_KEY_PREFIX + topic.encode(), u64(start), meta)
        if self.watermark_ms is not None:
            batch.put(WATERMARK_KEY, u64(self.watermark_ms), meta)

    def apply(self) -> None:
        c = self._counters
        for name, delta in self.totals.items():
            c.totals[name] = c.totals.get(name, 0) + delta
        for topic, delta in self.pending.items():
            value = c.pending_by_topic.get(topic, 0) + delta
            if value:
                c.pending_by_topic[topic] = value
            else:
                c.pending_by_topic.pop(topic, None)
        c.next_offset.update(self.offsets)
        c.log_start.update(self.log_start)
        if self.watermark_ms is not None:
            c.watermark_ms = self.watermark_ms
